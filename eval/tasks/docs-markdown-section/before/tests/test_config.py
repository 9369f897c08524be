import unittest
from pathlib import Path

from snip import config


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        cfg = config.load({})
        self.assertEqual(cfg["editor"], "vi")
        self.assertEqual(cfg["max_results"], 20)
        self.assertEqual(cfg["home"], Path("~/.snippets").expanduser())

    def test_overrides(self):
        cfg = config.load({"SNIP_EDITOR": "nano", "SNIP_MAX_RESULTS": "5"})
        self.assertEqual(cfg["editor"], "nano")
        self.assertEqual(cfg["max_results"], 5)


if __name__ == "__main__":
    unittest.main()
