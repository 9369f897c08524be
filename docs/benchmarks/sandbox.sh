#!/usr/bin/env bash
# The sandbox benchmarks of docs/BENCHMARKS.md, side by side in one run: microVM boot to a first
# command, and the round trip of `true` and `echo hi` in a running VM, against host
# `bash -c true`; and the exec check's cost, `true` and a make of 1,000 execs with and without
# the guest's supervisor (needs make on the host: the guest runs the host's /usr). Under KVM too
# where a timed boot probe says KVM works; TCG always.
#   bash docs/benchmarks/sandbox.sh            # BOOTS=5 CALLS=100 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/bench/sandbox
rm -rf "$out" && mkdir -p "$out/ws"
[ -f vm/manifest.json ] || bash bundle/vm-image.sh
cargo build --release --locked -q
export ABHED_HOME=$out/home ABHED_CONFIG=$out/config.toml
: >"$ABHED_CONFIG"
echo "## $(date -u +%FT%TZ), $(nproc) cores, $(qemu-system-x86_64 --version | head -n1)"
echo
cd "$out/ws"
"$root/target/release/abhed" bench --sandbox --boots "${BOOTS:-5}" --calls "${CALLS:-100}"
echo
echo "## end to end: \`abhed tool bash\` (process start, store, boot, command, shutdown), hyperfine"
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 1 --runs "${BOOTS:-5}" \
    "$root/target/release/abhed tool bash '{\"command\":\"true\",\"description\":\"bench\"}'" \
    "bash -c true" 2>&1 | grep -v '^ *$'
else
  echo "(hyperfine not installed: apt-get install hyperfine)"
fi
