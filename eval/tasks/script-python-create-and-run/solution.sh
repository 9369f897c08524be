#!/usr/bin/env bash
set -e
cat > scripts/revenue_by_region.py <<'PY'
"""Total revenue (units x unit_price) per region in data/sales.csv, written to out/revenue.csv."""

import csv
import os
from collections import defaultdict

totals = defaultdict(float)
with open("data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] += int(row["units"]) * float(row["unit_price"])

os.makedirs("out", exist_ok=True)
with open("out/revenue.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["region", "revenue"])
    for region in sorted(totals):
        w.writerow([region, f"{totals[region]:.2f}"])
PY
python3 scripts/revenue_by_region.py
cat out/revenue.csv
