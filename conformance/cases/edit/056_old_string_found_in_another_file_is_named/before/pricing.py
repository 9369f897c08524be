TAX_RATE = 0.2


def compute_order_total(items):
    return round(sum(q * p for _, q, p in items), 2)


def apply_discount(amount, percent):
    return amount * (100 - percent) / 100
