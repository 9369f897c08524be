from pricing import apply_discount, calc_total


class Order:
    def __init__(self, customer, items, discount=0):
        self.customer = customer
        self.items = list(items)
        self.discount = discount

    def subtotal(self):
        return calc_total(self.items)

    def total(self):
        """The subtotal after the order's discount, before tax."""
        return apply_discount(calc_total(self.items), self.discount)
