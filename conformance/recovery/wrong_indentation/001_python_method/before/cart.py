class Cart:
    def total(self):
        s = 0
        for item in self.items:
            s += item.price
        return s
