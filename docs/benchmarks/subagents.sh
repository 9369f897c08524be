#!/usr/bin/env bash
# The subagent benchmark of docs/BENCHMARKS.md, side by side in one run: N subagent turns decoded
# at once as sequences of one llama.cpp context (`abhed bench --subagents N`) against the same N
# one after another, and llama.cpp's own llama-batched-bench on the same model at the same depth
# (a subagent's system prompt) for 1 and N sequences: the anchor for what batching can give on
# this machine.
#   bash docs/benchmarks/subagents.sh          # N=4 GEN=128 REPS=3 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${N:-4} gen=${GEN:-128} reps=${REPS:-3}
[ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash models/fetch.sh smollm2-135m
bash tests/support/build-llama-tools.sh >/dev/null
cargo build --release --locked -q
threads=$(target/release/abhed bench --subagents 1 -n 1 -r 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["threads"])')
echo "## $(date -u +%FT%TZ), $(nproc) cores, $threads threads"
echo
echo "### abhed bench --subagents $n -n $gen -r $reps"
target/release/abhed bench --subagents "$n" -n "$gen" -r "$reps" --threads "$threads"
echo
# The depth of a subagent's turn: its system prompt (explore profile) and task, about 1.5k tokens.
echo "### llama-batched-bench -npp 1536 -ntg $gen -npl 1,$n (one context, a KV cache per sequence)"
target/llama-tools/bin/llama-batched-bench -m models/SmolLM2-135M-Instruct.Q4_1.gguf -c $((4096 * n)) \
  -b 512 -ub 512 -npp 1536 -ntg "$gen" -npl "1,$n" -t "$threads" -no-kvu 2>/dev/null | grep -E '^\|'
