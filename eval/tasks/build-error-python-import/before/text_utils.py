"""Small helpers for turning titles into URL slugs."""
import re


def slugify(text):
    """'Hello, World!' -> 'hello-world'"""
    text = text.strip().lower()
    text = re.sub(r"[^a-z0-9]+", "-", text)
    return text.strip("-")


def count_words(text):
    """Words are runs of letters, digits and apostrophes."""
    return len(re.findall(r"[A-Za-z0-9']+", text))


def truncate(text, width):
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"
