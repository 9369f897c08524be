export function noteCard(note) {
  const el = document.createElement('article');
  el.className = 'note';
  el.innerHTML = `<h2>${note.title}</h2><p>${note.text}</p>`; // TODO: escape HTML in title and text
  return el;
}

export function emptyState() {
  const el = document.createElement('p');
  el.textContent = 'No notes yet.';
  return el;
}
