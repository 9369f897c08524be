#!/usr/bin/env bash
set -e
python3 - <<'PY'
p = "config/app.toml"
s = open(p).read()
s = s.replace("max_size_mb = 4096\nttl_seconds = 300\n", "max_size_mb = 4096\nttl_seconds = 600\n")
open(p, "w").write(s)
PY
grep -n ttl_seconds config/app.toml
