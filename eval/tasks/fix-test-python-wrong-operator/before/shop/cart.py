"""Cart totals."""

from .shipping import shipping_cost

DISCOUNTS = {"WELCOME10": 0.10}


def subtotal(lines):
    return round(sum(qty * price for qty, price in lines), 2)


def total(lines, weight_kg, code=None):
    sub = subtotal(lines)
    discount = round(sub * DISCOUNTS.get(code, 0.0), 2)
    return round(sub - discount + shipping_cost(sub - discount, weight_kg), 2)
