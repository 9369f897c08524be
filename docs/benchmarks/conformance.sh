#!/usr/bin/env bash
# The conformance probe's wall time on the default model (docs/BENCHMARKS.md), with the
# machine's llama.cpp speed beside it (llama-bench on the same GGUF, in the same run) so the
# figure can be scaled to another machine. Goal: the full probe under 10 minutes on 2 cores.
#   bash docs/benchmarks/conformance.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/bench/conformance
rm -rf "$out" && mkdir -p "$out"
cargo build --release --locked -q
model=$root/models/$(python3 -c 'import json; print(json.load(open("models/manifest.json"))["file"])')
export ABHED_HOME=$out/home ABHED_CONFIG=$out/config.toml
: >"$ABHED_CONFIG"
echo "## $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo
echo "## the anchor: llama-bench on the same GGUF (pp512, tg128, 3 repetitions)"
if [ -x target/llama-tools/bin/llama-bench ]; then
  target/llama-tools/bin/llama-bench -m "$model" -p 512 -n 128 -r 3 -t "$(nproc)" 2>/dev/null | grep -E '^\|'
else
  echo "(no llama-bench: bash tests/support/build-llama-tools.sh)"
fi
echo
echo "## abhed conformance (harness, probe, recovery with our errors and with bare ones)"
set +e
/usr/bin/time -f '%e s wall, %M KiB peak RSS' -o "$out/time.txt" \
  "$root/target/release/abhed" conformance --quiet --json >"$out/report.json"
set -e
cat "$out/time.txt"
python3 - "$out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
runs = r["probe"] + r["recovery"]
probe_ms = sum(x["wall_ms"] for x in r["probe"])
ours_ms = sum(x["wall_ms"] for x in r["recovery"] if x["variant"] == "instructive")
bare_ms = sum(x["wall_ms"] for x in r["recovery"] if x["variant"] == "bare")
turns = sum(x["turns"] for x in runs)
tokens = sum(x["tokens"] for x in runs)
print(f"report wall_ms {r['wall_ms']}: harness {r['harness']['wall_ms'] / 1000:.1f} s, "
      f"probe {probe_ms / 1000:.0f} s ({len(r['probe'])} runs), recovery {ours_ms / 1000:.0f} s ours + {bare_ms / 1000:.0f} s bare "
      f"({len(r['recovery'])} runs); {turns} model turns, {tokens} tokens; slowest run "
      f"{max(runs, key=lambda x: x['wall_ms'])['name']} {max(x['wall_ms'] for x in runs) / 1000:.1f} s")
t = r["totals"]
print(f"results: probe {t['probe']['passed']}/{t['probe']['runs']}, recovery {t['recovery_instructive']['passed']}/{t['recovery_instructive']['runs']} ours, "
      f"{t['recovery_bare']['passed']}/{t['recovery_bare']['runs']} bare")
PY
