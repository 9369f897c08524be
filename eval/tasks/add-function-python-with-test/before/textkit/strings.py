"""Small string helpers."""

import re
import unicodedata


def slugify(text):
    """"Hello, World!" -> "hello-world"."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-")
    return text.lower()


def pad_right(text, width, fill=" "):
    """Pad `text` with `fill` up to `width` characters; longer text is returned as is."""
    if len(text) >= width:
        return text
    return text + fill * (width - len(text))


def collapse_spaces(text):
    """Turn every run of whitespace into one space and strip the ends."""
    return " ".join(text.split())
