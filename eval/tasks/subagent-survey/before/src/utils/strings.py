def excerpt(text, width=80):
    """The first `width` characters of text, cut at a word boundary."""
    if len(text) <= width:
        return text
    cut = text[:width].rsplit(" ", 1)[0]
    return cut + "..."


def slug(title):
    # TODO: transliterate accented letters before dropping them
    return "-".join("".join(c for c in w if c.isalnum()) for w in title.lower().split())
