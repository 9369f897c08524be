python3 - <<'PY'
p = "cli.py"
t = open(p).read()
t = t.replace(
    '    parser.add_argument("--lines", action="store_true", help="also print the number of lines")\n',
    '    parser.add_argument("--lines", action="store_true", help="also print the number of lines")\n'
    '    parser.add_argument("-v", "--verbose", action="store_true", help="print debug messages")\n',
)
t = t.replace(
    "logging.basicConfig(level=logging.WARNING,",
    "logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,",
)
open(p, "w").write(t)

p = "README.md"
t = open(p).read()
t = t.replace("python3 cli.py [--lines] PATH", "python3 cli.py [--lines] [--verbose] PATH")
t = t.replace(
    "- `--lines`: also print the number of lines.\n",
    "- `--lines`: also print the number of lines.\n- `--verbose`, `-v`: print debug messages (what is read) on stderr.\n",
)
open(p, "w").write(t)

p = "tests/test_cli.py"
t = open(p).read()
t = t.replace(
    "        self.assertFalse(args.lines)\n",
    "        self.assertFalse(args.lines)\n        self.assertFalse(args.verbose)\n\n"
    "    def test_verbose_flag(self):\n"
    '        args = cli.parse_args(["--verbose", "notes.txt"])\n'
    "        self.assertTrue(args.verbose)\n",
)
open(p, "w").write(t)
PY
