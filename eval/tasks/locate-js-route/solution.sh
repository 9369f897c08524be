#!/usr/bin/env bash
# Answer-only task: app.js mounts routes/projects.js at /api/projects; it has router.delete('/:id').
grep -n "api/projects'" app.js
grep -n "router.delete" routes/projects.js
