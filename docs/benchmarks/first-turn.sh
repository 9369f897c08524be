#!/usr/bin/env bash
# The first turn in a new workspace, per model (docs/BENCHMARKS.md, issue 16 item 4): the
# prompt time of `abhed run`'s first turn, each run in a workspace never seen before, with the
# saved system prompt (its state on disk from an earlier workspace) and without it
# (`--no-prompt-cache`, the whole prompt evaluated: what a first run costs cold). Replies are
# cut at 32 tokens: only the prompt time is measured.
#   bash docs/benchmarks/first-turn.sh                 # every model in models/, REPS=3
#   MODELS="models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf" REPS=5 bash docs/benchmarks/first-turn.sh
set -euo pipefail
command -v jq >/dev/null || { echo "first-turn.sh needs jq (apt-get install jq)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
root=$PWD
reps=${REPS:-3}
out=$root/target/bench/first-turn
rm -rf "$out" && mkdir -p "$out"
abhed=${ABHED:-$root/target/release/abhed}
[ -x "$abhed" ] || cargo build --release --locked -q
models=${MODELS:-$(ls "$root"/models/*.gguf)}
export ABHED_HOME=$out/home ABHED_CONFIG=$out/config.toml
# Measured whether or not the model passed the conformance gate: this is a latency figure.
export ABHED_ALLOW_UNQUALIFIED_MODEL=1
: >"$ABHED_CONFIG"

workspace() { # a new workspace, as a user's project: a few files, its own path
  local ws
  ws=$(mktemp -d "$out/ws.XXXXXX")
  printf 'alpha\nbeta\n' >"$ws/notes.txt"
  printf 'def add(a, b):\n    return a + b\n' >"$ws/calc.py"
  echo "$ws"
}

first_turn() { # MODEL FLAG... -> "prompt_ms evaluated cached"
  local model=$1 ws
  shift
  ws=$(workspace)
  # The run ends at its turn budget, which is not a success exit: only its first turn counts.
  { "$abhed" run "Read notes.txt and tell me its first line." --model "$model" --workspace "$ws" \
    --json --max-turns 1 --max-reply-tokens 32 "$@" 2>/dev/null || true; } \
    | jq -rn '[inputs | select(.type == "model_turn")][0]
        | "\(.usage.prompt_ms) \(.usage.evaluated_tokens) \(.usage.cached_tokens)"'
}

echo "| model | first turn | prompt tokens evaluated | from the saved state | prompt time (mean of $reps) |"
echo "|---|---|---:|---:|---:|"
for model in $models; do
  name=$(basename "$model" .gguf)
  # One run in a workspace of its own to save the system prompt's state, not counted.
  first_turn "$model" >/dev/null
  for mode in saved cold; do
    flag=()
    [ "$mode" = cold ] && flag=(--no-prompt-cache)
    for _ in $(seq "$reps"); do first_turn "$model" "${flag[@]}"; done \
      | awk -v name="$name" -v mode="$mode" '{ms += $1; n++; ev = $2; ca = $3}
          END { label = (mode == "saved") ? "saved system prompt, new workspace" : "cold (--no-prompt-cache)";
                printf "| %s | %s | %d | %d | %.2f s |\n", name, label, ev, ca, ms / n / 1000 }'
  done
done
