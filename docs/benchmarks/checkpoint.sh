#!/usr/bin/env bash
# What the workspace checkpoints cost (docs/SANDBOX.md, "Undo"), in one run: a bash call of
# `true` in the VM (the anchor: the call itself, `duration_ms`) beside the two scans around it
# (`checkpoint_ms`), in a workspace of N files (1,000 and 10,000 of 2 KiB in 100 folders):
# the first call of a session (every file read and kept), the next ones (only stat), and a
# call that changes 100 files. Also `abhed undo` of a call that deleted every file.
#   bash docs/benchmarks/checkpoint.sh [BIN]     # default: target/release/abhed
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-target/release/abhed}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ABHED_HOME=$work/home ABHED_CONFIG=$work/config.toml ABHED_ALLOW_UNQUALIFIED_MODEL=1
mkdir -p "$ABHED_HOME"
printf '[approval]\nmax_deletions = 100000\n' > "$ABHED_CONFIG"

echo "## $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), $(df -T "$work" | awk 'NR==2 {print $2}')"
obs() { # the last observation's duration_ms and checkpoint_ms
  "$bin" sessions export "$1" | jq -r 'select(.kind == "observation") | "\(.payload.duration_ms) \(.payload.checkpoint_ms)"' | tail -1
}
for n in 1000 10000; do
  ws=$work/ws$n
  mkdir -p "$ws"
  head -c 2048 /dev/urandom | base64 -w 64 > "$work/blob"
  for i in $(seq 0 $((n - 1))); do
    d=$ws/d$((i % 100)); mkdir -p "$d"; { echo "$i"; cat "$work/blob"; } > "$d/f$i.txt"
  done
  cd "$ws"
  call() { "$bin" tool bash "$(jq -nc --arg c "$1" '{command: $c, description: "bench"}')" --format json "${@:2}"; }
  id=$(call true | jq -r .session)
  echo "### $n files ($(du -sh "$ws" | cut -f1))"
  echo "first call of a session (every file read and kept): duration_ms checkpoint_ms = $(obs "$id")"
  for r in 1 2 3; do
    call true --session "$id" > /dev/null
    echo "next call, nothing changed (run $r): $(obs "$id")"
  done
  call 'for f in d1/f*.txt; do echo x >> $f; done' --session "$id" > /dev/null
  echo "a call that changes the 10 to 100 files of one folder: $(obs "$id")"
  # A program's own deletion (no rm to refuse), past any deletion limit (the config above).
  call "python3 -c \"import glob, os; [os.remove(f) for f in glob.glob('d*/*.txt')]\"" --session "$id" > /dev/null
  echo "a call that deletes every file: $(obs "$id")"
  start=$(date +%s%N)
  "$bin" undo "$id" --steps 1 | tail -1
  echo "abhed undo of it: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  cd - > /dev/null
done
