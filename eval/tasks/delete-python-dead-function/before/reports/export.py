"""Write report rows in the formats the finance team asks for."""

import csv
import io
import json
import xml.etree.ElementTree as ET
from datetime import date
from decimal import Decimal

FORMATS = ("csv", "json")


def _cell(value):
    """A value as it should appear in the output."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return f"{value:.2f}"
    return value


def to_csv(rows, columns):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_cell(row[c]) for c in columns])
    return buf.getvalue()


def to_json(rows, columns):
    return json.dumps([{c: _cell(row[c]) for c in columns} for row in rows], indent=2) + "\n"


def export_xml(rows, columns, root_tag="report"):
    root = ET.Element(root_tag)
    for row in rows:
        item = ET.SubElement(root, "row")
        for c in columns:
            ET.SubElement(item, c).text = str(_cell(row[c]))
    return ET.tostring(root, encoding="unicode")


def export(rows, columns, fmt="csv"):
    if fmt == "csv":
        return to_csv(rows, columns)
    if fmt == "json":
        return to_json(rows, columns)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
