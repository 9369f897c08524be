import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cli  # noqa: E402


class CountTest(unittest.TestCase):
    def test_count(self):
        self.assertEqual(cli.count("one two\nthree\n"), (3, 2, 14))


class ArgsTest(unittest.TestCase):
    def test_lines_flag(self):
        args = cli.parse_args(["--lines", "notes.txt"])
        self.assertTrue(args.lines)
        self.assertEqual(args.path, "notes.txt")

    def test_defaults(self):
        args = cli.parse_args(["notes.txt"])
        self.assertFalse(args.lines)


if __name__ == "__main__":
    unittest.main()
