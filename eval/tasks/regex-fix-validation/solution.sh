python3 - <<'PY'
p = "validators.py"
t = open(p).read()
t = t.replace(
    'EMAIL_RE = re.compile(r"^[A-Za-z0-9._]+@[A-Za-z0-9-]+\\.[A-Za-z]{2,}$")',
    'EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}$")',
)
open(p, "w").write(t)
PY
