import itertools
import time

_ids = itertools.count(1)


class Note:
    def __init__(self, title, text=""):
        self.id = next(_ids)
        self.title = title
        self.text = text
        self.created = time.time()  # TODO: store timestamps in UTC ISO format

    def to_dict(self):
        return {"id": self.id, "title": self.title, "text": self.text, "created": self.created}


class NoteStore:
    def __init__(self):
        self._notes = {}

    def add(self, note):
        self._notes[note.id] = note

    def all(self):
        return list(self._notes.values())
