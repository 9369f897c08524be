"""The monthly revenue report."""

from decimal import Decimal

from .export import export

COLUMNS = ["month", "account", "revenue"]


def monthly_revenue(entries):
    totals = {}
    for e in entries:
        key = (e["date"].replace(day=1), e["account"])
        totals[key] = totals.get(key, Decimal("0")) + e["amount"]
    return [{"month": m, "account": a, "revenue": v} for (m, a), v in sorted(totals.items())]


def render(entries, fmt="csv"):
    return export(monthly_revenue(entries), COLUMNS, fmt)
