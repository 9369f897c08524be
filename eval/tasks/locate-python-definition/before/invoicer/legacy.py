"""Importers for the old (2019) export format. Kept for re-running old months."""


def normalize_skus(rows):
    """Old exports put several SKUs in one cell, separated by semicolons."""
    out = []
    for row in rows:
        for part in row.get("skus", "").split(";"):
            part = part.strip()
            if part:
                out.append(part.upper())
    return out
