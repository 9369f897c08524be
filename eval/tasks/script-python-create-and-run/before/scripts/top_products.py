"""Print the five best-selling products by units sold in data/sales.csv."""

import csv
from collections import Counter

units = Counter()
with open("data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        units[row["product"]] += int(row["units"])

for product, n in units.most_common(5):
    print(f"{product:12} {n:5}")
