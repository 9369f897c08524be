"""Plain-text tables for terminal output."""

from .strings import pad_right


def render(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(pad_right(str(cell), w) for cell, w in zip(row, widths)).rstrip()
        for row in rows
    )
