#!/usr/bin/env bash
# usage: changelog.sh FROM TO
set -euo pipefail
git log --no-merges --format='- %s' "$1..$2"
