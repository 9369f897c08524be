const test = require('node:test');
const assert = require('node:assert');
const db = require('../lib/db');

// DELETE /api/projects/:id archives the project instead of removing it.
test('archive keeps the project but hides it from the owner list', async () => {
  const p = await db.projects.create({ name: 'demo', ownerId: 7 });
  await db.projects.archive(p.id);
  assert.ok(await db.projects.get(p.id));
  assert.deepStrictEqual(await db.projects.listFor(7), []);
});
