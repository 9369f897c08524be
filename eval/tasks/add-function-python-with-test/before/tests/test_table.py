import unittest

from textkit.table import render


class RenderTest(unittest.TestCase):
    def test_aligns_columns(self):
        self.assertEqual(render([["id", "name"], ["1", "ada"], ["22", "bob"]]), "id  name\n1   ada\n22  bob")


if __name__ == "__main__":
    unittest.main()
