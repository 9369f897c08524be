const express = require('express');

const auth = require('./lib/auth');
const projects = require('./routes/projects');
const users = require('./routes/users');
const adminProjects = require('./routes/admin/projects');

const app = express();
app.use(express.json());
app.use(auth.session);

app.use('/api/projects', projects);
app.use('/api/users', users);
app.use('/api/admin/projects', auth.requireAdmin, adminProjects);

app.get('/healthz', (req, res) => res.sendStatus(204));

module.exports = app;
