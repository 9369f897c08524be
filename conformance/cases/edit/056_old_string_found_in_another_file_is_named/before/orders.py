from pricing import apply_discount, calc_total


class Order:
    def subtotal(self):
        return calc_total(self.items)
