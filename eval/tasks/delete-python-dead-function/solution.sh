#!/usr/bin/env bash
set -e
python3 - <<'PY'
import re
p = "reports/export.py"
s = open(p).read()
s = s.replace("import xml.etree.ElementTree as ET\n", "")
s = re.sub(r"\ndef export_xml\(.*?\n\n\n", "\n", s, flags=re.S)
open(p, "w").write(s)
PY
cat reports/export.py
python3 -m unittest discover -s tests
