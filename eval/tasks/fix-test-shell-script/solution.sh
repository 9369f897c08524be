#!/usr/bin/env bash
set -e
python3 - <<'PY'
p = "scripts/bump.sh"
s = open(p).read()
s = s.replace("        minor=$((minor + 1))\n        ;;", "        minor=$((minor + 1))\n        patch=0\n        ;;")
open(p, "w").write(s)
PY
bash test.sh
