#!/usr/bin/env bash
set -e
python3 - <<'PY'
p = "README.md"
s = open(p).read()
section = """## Configuration

snip reads these environment variables:

| Variable | Default | Meaning |
|---|---|---|
| `SNIP_HOME` | `~/.snippets` | where the snippet files live |
| `SNIP_EDITOR` | `vi` | the editor `snip add` opens |
| `SNIP_MAX_RESULTS` | `20` | how many matches `snip find` lists at most |

"""
s = s.replace("## Usage\n", section + "## Usage\n", 1)
open(p, "w").write(s)
PY
cat README.md
