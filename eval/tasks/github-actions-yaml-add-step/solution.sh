python3 - <<'PY'
p = ".github/workflows/ci.yml"
t = open(p).read()
t = t.replace("      - name: Run tests\n", "      - name: Lint\n        run: ruff check .\n      - name: Run tests\n")
open(p, "w").write(t)
PY
