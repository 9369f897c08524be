python3 - <<'PY'
p = "csvstats.py"
t = open(p).read()
t = t.replace("def column_values(path, column):", 'def column_values(path, column, delimiter=","):')
t = t.replace("reader = csv.DictReader(f)", "reader = csv.DictReader(f, delimiter=delimiter)")
t = t.replace(
    '    args = parser.parse_args(argv)\n',
    '    parser.add_argument("-d", "--delimiter", default=",", help="the field separator (default: a comma)")\n'
    '    args = parser.parse_args(argv)\n',
)
t = t.replace("values = column_values(args.path, args.column)", "values = column_values(args.path, args.column, args.delimiter)")
open(p, "w").write(t)
PY
