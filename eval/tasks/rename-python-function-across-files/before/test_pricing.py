import unittest

from pricing import add_tax, apply_discount, calc_total


class PricingTest(unittest.TestCase):
    def test_calc_total(self):
        self.assertEqual(calc_total([("a", 2, 1.5), ("b", 1, 3.0)]), 6.0)

    def test_calc_total_empty(self):
        self.assertEqual(calc_total([]), 0)

    def test_discount(self):
        self.assertEqual(apply_discount(50.0, 10), 45.0)

    def test_tax(self):
        self.assertEqual(add_tax(10.0), 12.0)


if __name__ == "__main__":
    unittest.main()
