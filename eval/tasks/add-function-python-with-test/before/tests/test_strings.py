import unittest

from textkit.strings import collapse_spaces, pad_right, slugify


class SlugifyTest(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_accents(self):
        self.assertEqual(slugify("Crème brûlée"), "creme-brulee")


class PadRightTest(unittest.TestCase):
    def test_pads(self):
        self.assertEqual(pad_right("ab", 4), "ab  ")

    def test_long_text_unchanged(self):
        self.assertEqual(pad_right("abcdef", 4), "abcdef")


class CollapseSpacesTest(unittest.TestCase):
    def test_collapses(self):
        self.assertEqual(collapse_spaces("  a \t b\n c "), "a b c")


if __name__ == "__main__":
    unittest.main()
