from dataclasses import dataclass, field


@dataclass
class LineItem:
    sku: str
    name: str
    quantity: int
    unit_cents: int

    @property
    def total_cents(self):
        return self.quantity * self.unit_cents


@dataclass
class Invoice:
    number: str
    customer: str
    items: list = field(default_factory=list)

    @property
    def total_cents(self):
        return sum(i.total_cents for i in self.items)
