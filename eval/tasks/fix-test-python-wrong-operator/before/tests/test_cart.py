import unittest

from shop.cart import subtotal, total


class CartTest(unittest.TestCase):
    def test_subtotal(self):
        self.assertEqual(subtotal([(2, 12.50), (1, 5.00)]), 30.00)

    def test_total_with_shipping(self):
        self.assertEqual(total([(2, 12.50), (1, 5.00)], 1), 36.10)

    def test_discount_does_not_touch_shipping(self):
        self.assertEqual(total([(1, 40.00)], 0, "WELCOME10"), 40.90)
