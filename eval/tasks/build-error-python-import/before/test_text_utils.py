import unittest

from text_utils import count_words, slugify, truncate


class TextUtilsTest(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_count_words(self):
        self.assertEqual(count_words("don't stop me now"), 4)

    def test_truncate(self):
        self.assertEqual(truncate("abcdef", 4), "abc…")


if __name__ == "__main__":
    unittest.main()
