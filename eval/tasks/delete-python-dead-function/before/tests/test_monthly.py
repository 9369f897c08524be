import unittest
from datetime import date
from decimal import Decimal

from reports.monthly import render


class MonthlyTest(unittest.TestCase):
    def test_sums_per_month_and_account(self):
        entries = [
            {"date": date(2024, 3, 4), "account": "shop", "amount": Decimal("10.00")},
            {"date": date(2024, 3, 20), "account": "shop", "amount": Decimal("5.25")},
            {"date": date(2024, 4, 2), "account": "shop", "amount": Decimal("1.00")},
        ]
        self.assertEqual(render(entries), "month,account,revenue\n2024-03-01,shop,15.25\n2024-04-01,shop,1.00\n")


if __name__ == "__main__":
    unittest.main()
