#!/usr/bin/env bash
set -e
cat >> textkit/strings.py <<'PY'


def truncate(text, width):
    """Cut `text` to `width` characters ending in "..."; text that fits is returned as is."""
    if len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."
PY
python3 - <<'PY'
p = "tests/test_strings.py"
s = open(p).read()
s = s.replace("from textkit.strings import collapse_spaces, pad_right, slugify",
              "from textkit.strings import collapse_spaces, pad_right, slugify, truncate")
s = s.replace('\n\nif __name__ == "__main__":', '''

class TruncateTest(unittest.TestCase):
    def test_long_text_is_cut(self):
        self.assertEqual(truncate("hello world", 8), "hello...")

    def test_short_text_unchanged(self):
        self.assertEqual(truncate("hello", 8), "hello")
        self.assertEqual(truncate("abcdefgh", 8), "abcdefgh")


if __name__ == "__main__":''')
open(p, "w").write(s)
PY
python3 -m unittest discover -s tests
