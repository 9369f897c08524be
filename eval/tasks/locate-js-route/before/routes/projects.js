const express = require('express');
const db = require('../lib/db');

const router = express.Router();

router.get('/', async (req, res) => {
  res.json(await db.projects.listFor(req.user.id));
});

router.get('/:id', async (req, res) => {
  const project = await db.projects.get(req.params.id);
  if (!project || project.ownerId !== req.user.id) return res.sendStatus(404);
  res.json(project);
});

router.post('/', async (req, res) => {
  const { name } = req.body;
  if (!name) return res.status(400).json({ error: 'name is required' });
  res.status(201).json(await db.projects.create({ name, ownerId: req.user.id }));
});

// Archive rather than delete: the owner can restore within 30 days.
router.delete('/:id', async (req, res) => {
  const project = await db.projects.get(req.params.id);
  if (!project || project.ownerId !== req.user.id) return res.sendStatus(404);
  await db.projects.archive(project.id);
  res.sendStatus(204);
});

module.exports = router;
