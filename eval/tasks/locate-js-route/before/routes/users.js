const express = require('express');
const db = require('../lib/db');

const router = express.Router();

router.get('/me', (req, res) => res.json(req.user));

router.delete('/:id', async (req, res) => {
  if (req.params.id !== String(req.user.id)) return res.sendStatus(403);
  await db.users.remove(req.user.id);
  res.sendStatus(204);
});

module.exports = router;
