import unittest

from invoicer.catalog.sku import is_valid_sku, normalize_sku


class NormalizeSkuTest(unittest.TestCase):
    def test_adds_dash_and_upper_cases(self):
        self.assertEqual(normalize_sku("ab001"), "AB-001")

    def test_strips_spaces(self):
        self.assertEqual(normalize_sku(" AB-001 "), "AB-001")

    def test_rejects_garbage(self):
        with self.assertRaises(ValueError):
            normalize_sku("hello")
        self.assertFalse(is_valid_sku("12-AB"))


if __name__ == "__main__":
    unittest.main()
