"""Shipping cost for a cart."""

FREE_SHIPPING_THRESHOLD = 50.00
BASE_RATE = 4.90
PER_KG = 1.20


def qualifies_for_free_shipping(subtotal):
    """Orders of FREE_SHIPPING_THRESHOLD or more ship free."""
    return subtotal > FREE_SHIPPING_THRESHOLD


def shipping_cost(subtotal, weight_kg):
    if weight_kg < 0:
        raise ValueError("weight cannot be negative")
    if qualifies_for_free_shipping(subtotal):
        return 0.0
    return round(BASE_RATE + PER_KG * weight_kg, 2)
