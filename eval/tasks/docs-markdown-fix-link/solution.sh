#!/usr/bin/env bash
set -e
sed -i -e 's|(docs/CONTRIBUTE.md)|(docs/CONTRIBUTING.md)|' -e 's|(docs/architecture.md)|(docs/design/architecture.md)|' README.md
grep -n '](' README.md
