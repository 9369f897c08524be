import json
import unittest
from datetime import date
from decimal import Decimal

from reports.export import export

ROWS = [{"day": date(2024, 3, 1), "amount": Decimal("12.5")}]


class ExportTest(unittest.TestCase):
    def test_csv(self):
        self.assertEqual(export(ROWS, ["day", "amount"]), "day,amount\n2024-03-01,12.50\n")

    def test_json(self):
        self.assertEqual(json.loads(export(ROWS, ["day", "amount"], "json")), [{"day": "2024-03-01", "amount": "12.50"}])

    def test_xml_is_gone(self):
        with self.assertRaises(ValueError):
            export(ROWS, ["day"], "xml")


if __name__ == "__main__":
    unittest.main()
