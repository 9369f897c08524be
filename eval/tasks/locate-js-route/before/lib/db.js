// In-memory store; production swaps this for the Postgres module.
const projects = new Map();
const users = new Map();
let nextId = 1;

module.exports = {
  projects: {
    async listFor(ownerId) { return [...projects.values()].filter(p => p.ownerId === ownerId && !p.archived); },
    async all() { return [...projects.values()]; },
    async get(id) { return projects.get(String(id)); },
    async create(fields) { const p = { id: String(nextId++), ...fields }; projects.set(p.id, p); return p; },
    async archive(id) { const p = projects.get(String(id)); if (p) p.archived = true; },
    async purge(id) { projects.delete(String(id)); },
  },
  users: {
    async remove(id) { users.delete(String(id)); },
  },
};
