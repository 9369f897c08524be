import argparse
import csv
import os

from .catalog import Catalog
from .catalog.sku import normalize_sku
from .models import Invoice, LineItem


def build_invoices(orders_path, catalog):
    invoices = {}
    with open(orders_path, newline="") as f:
        for row in csv.DictReader(f):
            inv = invoices.setdefault(row["order"], Invoice(row["order"], row["customer"]))
            sku = normalize_sku(row["sku"])
            product = catalog.lookup(sku)
            if product is None:
                raise SystemExit(f"unknown SKU {sku} in order {row['order']}")
            inv.items.append(LineItem(sku, product["name"], int(row["qty"]), product["price_cents"]))
    return list(invoices.values())


def main():
    p = argparse.ArgumentParser(prog="invoicer")
    p.add_argument("orders")
    p.add_argument("--catalog", default="catalog.csv")
    p.add_argument("--out", default="invoices")
    args = p.parse_args()
    catalog = Catalog.from_csv(args.catalog)
    os.makedirs(args.out, exist_ok=True)
    for inv in build_invoices(args.orders, catalog):
        with open(os.path.join(args.out, f"{inv.number}.txt"), "w") as f:
            f.write(f"Invoice {inv.number} for {inv.customer}\n")
            for item in inv.items:
                f.write(f"{item.quantity} x {item.name} ({item.sku}) {item.total_cents / 100:.2f}\n")
            f.write(f"Total {inv.total_cents / 100:.2f}\n")


if __name__ == "__main__":
    main()
