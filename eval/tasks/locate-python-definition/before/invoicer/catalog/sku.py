"""SKU handling: the shop export writes SKUs in whatever case and spacing people typed."""

import re

_SKU_RE = re.compile(r"^([A-Z]{2,4})-?(\d{3,6})$")


def normalize_sku(raw):
    """Return the canonical form of a SKU ("AB-001"), or raise ValueError."""
    cleaned = raw.strip().upper().replace(" ", "")
    m = _SKU_RE.match(cleaned)
    if not m:
        raise ValueError(f"not a SKU: {raw!r}")
    prefix, number = m.groups()
    return f"{prefix}-{number}"


def is_valid_sku(raw):
    try:
        normalize_sku(raw)
    except ValueError:
        return False
    return True
