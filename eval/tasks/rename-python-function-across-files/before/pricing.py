"""Prices, discounts and tax for an order's items.

An item is a tuple (name, quantity, unit_price).
"""

TAX_RATE = 0.2


def calc_total(items):
    """Sum of quantity * unit price over all items."""
    return round(sum(qty * price for _, qty, price in items), 2)


def apply_discount(amount, percent):
    """`amount` less `percent` per cent."""
    return round(amount * (100 - percent) / 100, 2)


def add_tax(amount):
    return round(amount * (1 + TAX_RATE), 2)
