import unittest

from shop.shipping import qualifies_for_free_shipping, shipping_cost


class ShippingTest(unittest.TestCase):
    def test_below_threshold_pays(self):
        self.assertEqual(shipping_cost(49.99, 2), 7.30)

    def test_free_at_threshold(self):
        self.assertTrue(qualifies_for_free_shipping(50.00))
        self.assertEqual(shipping_cost(50.00, 2), 0.0)

    def test_free_above_threshold(self):
        self.assertEqual(shipping_cost(120.00, 9), 0.0)

    def test_negative_weight(self):
        with self.assertRaises(ValueError):
            shipping_cost(10, -1)
