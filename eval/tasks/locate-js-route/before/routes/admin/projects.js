const express = require('express');
const db = require('../../lib/db');

const router = express.Router();

// Hard delete, for admins cleaning up spam projects.
router.delete('/:id', async (req, res) => {
  await db.projects.purge(req.params.id);
  res.sendStatus(204);
});

router.get('/', async (req, res) => {
  res.json(await db.projects.all());
});

module.exports = router;
