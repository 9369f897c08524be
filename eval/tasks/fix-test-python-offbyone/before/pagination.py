"""Split result lists into pages for the report views."""


def page_count(total, per_page):
    """How many pages `total` items fill at `per_page` items a page."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return (total + per_page - 1) // per_page


def paginate(items, per_page):
    """Split `items` into consecutive pages of at most `per_page` items.

    Every item lands on exactly one page; only the last page may be short.
    """
    n = page_count(len(items), per_page)
    return [items[i * per_page:(i + 1) * per_page] for i in range(n - 1)]


def page(items, number, per_page):
    """Page `number` (1-based) of `items`, or [] when there is no such page."""
    pages = paginate(items, per_page)
    if number < 1 or number > len(pages):
        return []
    return pages[number - 1]
