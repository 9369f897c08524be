// Client-side routes of the notes front end.
const routes = {
  '/': 'list',
  '/notes/:id': 'detail',
  '/new': 'editor',
};

// TODO(ana): add a 404 route for unknown paths
function match(path) {
  for (const [pattern, view] of Object.entries(routes)) {
    const re = new RegExp('^' + pattern.replace(/:\w+/g, '[^/]+') + '$');
    if (re.test(path)) return view;
  }
  return null;
}

module.exports = { routes, match };
