import csv

from .sku import normalize_sku


class Catalog:
    """Products by canonical SKU, loaded from the catalog CSV."""

    def __init__(self, products=None):
        self._products = dict(products or {})

    @classmethod
    def from_csv(cls, path):
        products = {}
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                products[normalize_sku(row["sku"])] = {
                    "name": row["name"],
                    "price_cents": int(row["price_cents"]),
                }
        return cls(products)

    def lookup(self, sku):
        return self._products.get(normalize_sku(sku))
