#!/usr/bin/env bash
# A small part of the task suite on the small model (SmolLM2-135M), by the shipped binary:
# `abhed eval` must run each task to its end in the microVM, check it, and produce a complete and
# consistent report, stored under the model (docs/EVAL.md). The pass count is reported, not
# required: the 135M model finishes few tasks; the figures that matter are in docs/EVAL.md.
# Usage: bash .ci/eval.sh BUNDLE_DIR (as bundle/build.sh prints it) | ABHED_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:?usage: bash .ci/eval.sh BUNDLE_DIR | ABHED_BINARY}
abhed=$(realpath "$arg")
[ -d "$arg" ] && abhed=$(realpath "$arg/bin/abhed")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ABHED_HOME=$work/home ABHED_CONFIG=/dev/null
unset ABHED_ALLOW_UNQUALIFIED_MODEL ABHED_MODEL
model=$(realpath models/SmolLM2-135M-Instruct.Q4_1.gguf)

# One task of each kind: a config edit, a locate question, one whose right answer is to give up.
tasks=(config-toml-value locate-python-definition gave-up-missing-service)
start=$(date +%s)
"$abhed" eval "${tasks[@]}" --model "$model" --json --task-timeout 150 --work-dir "$work/eval" >"$work/report.json" 2>"$work/progress.txt"
echo "abhed eval: $(( $(date +%s) - start )) s"
cat "$work/progress.txt"
"$abhed" eval --model "$model" --show --json >"$work/shown.json"

python3 - "$work/report.json" "$work/shown.json" "${tasks[@]}" <<'PY'
import json, sys
report_path, shown_path, *tasks = sys.argv[1:]
r = json.load(open(report_path))
shown = json.load(open(shown_path))

def check(cond, what):
    if not cond:
        sys.exit(f"eval report check failed: {what}")

check(r["v"] == 1, "version")
check(r["key"] == "sha256:" + r["model"]["sha256"], "keyed by the GGUF's sha256")
check(r["model"]["name"].startswith("SmolLM2-135M"), f"the small model: {r['model']['name']}")
check(r["errors"] == [], f"tasks that could not run: {r['errors']}")
check(sorted(t["name"] for t in r["tasks"]) == sorted(tasks), f"the tasks asked for: {[t['name'] for t in r['tasks']]}")
for t in r["tasks"]:
    n = t["name"]
    check(t["stop"] in ("done", "gave_up", "max_turns", "max_tokens", "wall_time", "context_full", "model_error"), f"{n}: stop {t['stop']}")
    check(t["passed"] == (t["why"] == ""), f"{n}: a reason exactly when it did not pass")
    check(t["turns"] >= 1 and t["tokens"] > 0 and t["wall_ms"] > 0, f"{n}: turns, tokens and wall time")
    check(t["invalid_turns"] + t["calls"] <= t["turns"] and t["failed_calls"] <= t["calls"], f"{n}: calls and turns")
tot = r["totals"]
check(tot["tasks"] == len(tasks) and tot["passed"] == sum(t["passed"] for t in r["tasks"]), f"totals {tot}")
check(tot["turns"] == sum(t["turns"] for t in r["tasks"]) and tot["tokens"] == sum(t["tokens"] for t in r["tasks"]), f"totals {tot}")
check(shown["started_at"] == r["started_at"] and shown["tasks"] == r["tasks"], "--show prints the stored report")
print(f"eval report complete and consistent: {tot['passed']} of {tot['tasks']} passed, {tot['turns']} turns, "
      f"{tot['tokens']} tokens, wall {tot['wall_ms'] / 1000:.0f} s")
PY
