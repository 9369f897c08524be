const TOKENS = new Map(); // token -> user, filled by the login service

function session(req, res, next) {
  const token = (req.get('authorization') || '').replace(/^Bearer /, '');
  const user = TOKENS.get(token);
  if (!user) return res.sendStatus(401);
  req.user = user;
  next();
}

function requireAdmin(req, res, next) {
  if (!req.user.admin) return res.sendStatus(403);
  next();
}

module.exports = { session, requireAdmin, TOKENS };
