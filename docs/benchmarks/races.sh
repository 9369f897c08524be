#!/usr/bin/env bash
# The host-boundary race of docs/BENCHMARKS.md at benchmark size: tests/host_boundary.rs with
# ATTEMPTS calls per tool (10,000 by default; CI runs 200), the swap driven from the host and from
# inside the microVM. Prints each tool's outcomes; fails on any violation.
#   bash docs/benchmarks/races.sh            # ATTEMPTS=10000
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f vm/manifest.json ] || bash bundle/vm-image.sh
echo "## $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), ${ATTEMPTS:-10000} calls per tool"
# Built first, so that the time and memory below are the test's, not the compiler's.
cargo test --release --locked -q --test host_boundary --no-run 2>/dev/null
ABHED_RACE_ATTEMPTS=${ATTEMPTS:-10000} /usr/bin/time -v cargo test --release --locked -q --test host_boundary -- \
  --test-threads 1 --nocapture a_race_driven 2>&1 |
  grep -E '^(race|host swapper|guest swapper|  [a-z]|test |test result|	Elapsed|	Maximum resident)'
