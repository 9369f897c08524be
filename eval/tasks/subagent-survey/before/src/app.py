"""HTTP entry point for the notes service."""
import json
import os

from db.models import Note, NoteStore

# TODO: read the port from the config file instead of the environment
PORT = int(os.environ.get("NOTES_PORT", "8000"))

store = NoteStore()


def handle_create(body):
    data = json.loads(body)
    note = Note(title=data["title"], text=data.get("text", ""))
    store.add(note)
    return 201, {"id": note.id}


def handle_list(query):
    # TODO: paginate instead of returning every note
    return 200, [n.to_dict() for n in store.all()]
