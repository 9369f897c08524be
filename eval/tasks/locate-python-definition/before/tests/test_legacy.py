import unittest

from invoicer.legacy import normalize_skus


class LegacyTest(unittest.TestCase):
    def test_splits_cells(self):
        self.assertEqual(normalize_skus([{"skus": "ab-001; cd-002"}]), ["AB-001", "CD-002"])


if __name__ == "__main__":
    unittest.main()
