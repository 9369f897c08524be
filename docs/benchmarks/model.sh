#!/usr/bin/env bash
# The model benchmarks of docs/BENCHMARKS.md, side by side in one run:
#  1. prompt processing and generation tokens/s: `abhed bench` (in-process, llama-cpp-2) against
#     `llama-bench` built from the pinned llama-cpp-python sdist, same model, same threads, same
#     CPU baseline; then generation under the turn grammar against raw generation;
#  2. a 10-turn session on the real model: per turn, the tokens evaluated against the tokens that
#     were new, and the reuse %;
#  3. a new session's first turn with the saved system prompt against without;
#  4. peak RSS of `abhed run` at n_ctx 8192.
# All on the small model (SmolLM2-135M), as since its first run; first-turn.sh measures every model.
#   bash docs/benchmarks/model.sh            # THREADS=2 REPS=5 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
threads=${THREADS:-2}
reps=${REPS:-5}
out=$root/target/bench/model
rm -rf "$out" && mkdir -p "$out/ws"

bash models/fetch.sh smollm2-135m >/dev/null
bash tests/support/build-llama-tools.sh >/dev/null
cargo build --release --locked -q
abhed=$root/target/release/abhed
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
export ABHED_HOME=$out/home ABHED_CONFIG=$out/config.toml
# Measured whether or not the model passed the conformance gate: these are speed figures.
export ABHED_ALLOW_UNQUALIFIED_MODEL=1
# The repeat guard off, so that the default model's repeated call keeps the session of part 2
# going for its ten turns.
printf '[run]\nrepeat_limit = 0\n' >"$ABHED_CONFIG"

echo "## 1. throughput, $threads threads, $reps repetitions"
echo
"$root/target/llama-tools/bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -b 512 -ub 512 \
  -r "$reps" -fa 0,1 -o md 2>/dev/null
echo
"$abhed" bench --model "$model" --threads "$threads" -p 512 -n 128 --batch 512 -r "$reps"
echo

echo "## 2. a 10-turn session (n_ctx 8192): tokens evaluated per turn vs new tokens"
echo
printf 'alpha\nbeta\n' >"$out/ws/notes.txt"
printf 'fn main() {\n    println!("hello");\n}\n' >"$out/ws/main.rs"
"$abhed" run "Search $out/ws for println with grep, then read the file that has it." --model "$model" \
  --workspace "$out/ws" --json --max-turns 10 --ctx 8192 >"$out/session.jsonl" || true
jq -s -r '
  [.[] | select(.type == "model_turn")] as $t
  | "| turn | prompt tokens | cached | evaluated | new since the last turn | generated |",
    "|---:|---:|---:|---:|---:|---:|",
    ( range(0; $t | length) as $i | $t[$i].usage as $u
      | (if $i == 0 then $u.prompt_tokens
         else $u.prompt_tokens - $t[$i-1].usage.prompt_tokens - $t[$i-1].usage.generated_tokens end) as $new
      | "| \($i + 1) | \($u.prompt_tokens) | \($u.cached_tokens) | \($u.evaluated_tokens) | \($new) | \($u.generated_tokens) |" ),
    "",
    ( [$t[1:][] .usage] as $rest
      | "turns 2-\($t | length): \([$rest[].cached_tokens] | add) of \([$rest[].prompt_tokens] | add) prompt tokens reused = \((([$rest[].cached_tokens] | add) * 1000 / ([$rest[].prompt_tokens] | add) | floor) / 10)%" )
' "$out/session.jsonl"
echo

echo "## 3. a new session's first turn: saved system prompt vs none (prompt_ms, 5 runs each)"
echo
for mode in cached uncached; do
  flag=""
  [ "$mode" = uncached ] && flag=--no-prompt-cache
  for _ in 1 2 3 4 5; do
    "$abhed" run "Say hello." --model "$model" --workspace "$out/ws" --json --max-turns 1 --ctx 8192 $flag \
      | jq -r --arg m "$mode" 'select(.type == "model_turn") | "\($m) \(.usage.prompt_ms) \(.usage.evaluated_tokens) \(.usage.cached_tokens)"' || true
  done
done | awk '{ms[$1]+=$2; n[$1]++; ev[$1]=$3; ca[$1]=$4}
  END { for (m in ms) printf "| %s | mean prompt_ms %.0f | evaluated %d | cached %d |\n", m, ms[m]/n[m], ev[m], ca[m] }'
echo

echo "## 4. peak RSS of abhed run at n_ctx 8192"
echo
/usr/bin/time -f "%M KiB max RSS, %e s" "$abhed" run "Read $out/ws/notes.txt and tell me its first line." --model "$model" \
  --workspace "$out/ws" --max-turns 3 --ctx 8192 >/dev/null 2>"$out/time.txt" || true
tail -1 "$out/time.txt"
