#!/usr/bin/env bash
# The conformance probe on the small model (SmolLM2-135M, about 7 minutes; the default, 1.5B,
# takes about 17 on 2 cores, docs/CONFORMANCE.md), by the shipped binary: `abhed conformance` must produce a complete and consistent
# report (the 135M model fails it; an honest report is the point), store it, and the gate must
# act on it.
# Usage: bash .ci/probe.sh BUNDLE_DIR (as bundle/build.sh prints it) | ABHED_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:?usage: bash .ci/probe.sh BUNDLE_DIR | ABHED_BINARY}
abhed=$(realpath "$arg")
[ -d "$arg" ] && abhed=$(realpath "$arg/bin/abhed")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ABHED_HOME=$work/home ABHED_CONFIG=/dev/null
unset ABHED_ALLOW_UNQUALIFIED_MODEL ABHED_MODEL
model=$(realpath models/SmolLM2-135M-Instruct.Q4_1.gguf)

start=$(date +%s)
set +e
"$abhed" conformance --model "$model" --json >"$work/report.json" 2>"$work/progress.txt"
status=$?
set -e
echo "abhed conformance: exit $status after $(( $(date +%s) - start )) s"
tail -n 4 "$work/progress.txt"
"$abhed" conformance --model "$model" --show >"$work/report.txt" || true
cat "$work/report.txt"
"$abhed" conformance --model "$model" --show --json >"$work/shown.json" || true
set +e
(mkdir -p "$work/proj" && cd "$work/proj" && "$abhed" run --model "$model" --max-turns 1 "say hello" >"$work/run.out" 2>"$work/run.err")
run_status=$?
set -e

python3 - "$work/report.json" "$work/shown.json" "$status" "$run_status" "$work/run.err" conformance <<'PY'
import json, pathlib, sys
report_path, shown_path, status, run_status, run_err, root = sys.argv[1:]
r = json.load(open(report_path))
shown = json.load(open(shown_path))
root = pathlib.Path(root)
nine = ["bash", "edit", "glob", "grep", "plan", "read", "task", "todo", "write"]
cases = len(list(root.glob("cases/*/*/case.toml")))
probe_tasks = sorted(str(p.parent.relative_to(root / "probe")) for p in root.glob("probe/*/*/task.toml"))
scenarios = sorted(str(p.parent.relative_to(root / "recovery")) for p in root.glob("recovery/*/*/task.toml"))

def check(cond, what):
    if not cond:
        sys.exit(f"report check failed: {what}")

check(r["v"] == 1, "version")
check(r["key"] == "sha256:" + r["model"]["sha256"], "keyed by the GGUF's sha256")
check(r["model"]["adapter"] == "llama" and r["model"]["name"].startswith("SmolLM2-135M"), "the small model")
check(r["errors"] == [], f"items that could not run: {r['errors']}")
h = r["harness"]
check(h["cases"] == cases and h["passed"] == cases and h["failed"] == [], f"harness {h}")
c = r["context"]
check(c["n_ctx"] and c["prompt_tokens"] and c["prompt_tokens"] > 1000, f"context {c}")
check(c["working_budget_left"] == c["n_ctx"] - c["prompt_tokens"] - c["reply_tokens"], f"budget arithmetic {c}")
check(sorted(x["name"] for x in r["probe"]) == probe_tasks, "every probe task ran once")
check(sorted(x["name"] for x in r["recovery"] if x["variant"] == "instructive") == scenarios, "every scenario with our error")
check(sorted(x["name"] for x in r["recovery"] if x["variant"] == "bare") == scenarios, "every scenario with the bare error")
for x in r["probe"] + r["recovery"]:
    name = x["name"]
    check(1 <= x["turns"] <= x["max_turns"], f"{name}: turns {x['turns']} of {x['max_turns']}")
    check(x["passed"] == (x["why"] == ""), f"{name}: a reason exactly when it did not pass")
    check(not x["passed"] or 1 <= x["goal_turn"] <= x["turns"], f"{name}: goal turn")
    check(x["stop"] in ("goal", "done", "gave_up", "max_turns", "wall_time", "context_full"), f"{name}: stop {x['stop']}")
    check(x["stop"] != "goal" or x["passed"], f"{name}: stopped at a goal it did not reach")
    check(x["invalid_turns"] + len(x["calls"]) <= x["turns"], f"{name}: more calls than turns")
    check(all(c["valid"] or not c["ok"] for c in x["calls"]), f"{name}: an ok call counted invalid")
tools = {t["tool"]: t for t in r["tools"]}
for tool in nine:
    t = tools.get(tool)
    check(t and t["tasks"] >= 2, f"probe tasks for {tool}")
    check(t["passed"] == sum(x["passed"] for x in r["probe"] if x["group"] == tool), f"{tool} passed count")
    calls = [c for x in r["probe"] for c in x["calls"] if c["tool"] == tool]
    check(t["calls"] == len(calls) and t["valid_calls"] == sum(c["valid"] for c in calls), f"{tool} call counts")
tot = r["totals"]
check(tot["probe"]["runs"] == len(probe_tasks) and tot["probe"]["passed"] == sum(x["passed"] for x in r["probe"]), "probe totals")
ins = [x for x in r["recovery"] if x["variant"] == "instructive"]
bare = [x for x in r["recovery"] if x["variant"] == "bare"]
check(tot["recovery_instructive"]["passed"] == sum(x["passed"] for x in ins), "recovery totals (ours)")
check(tot["recovery_bare"]["passed"] == sum(x["passed"] for x in bare), "recovery totals (bare)")
check(len(r["scenarios"]) == len({s.split("/")[0] for s in scenarios}), "one line per scenario")
v = r["verdict"]
check(v["pass"] == (v["reasons"] == []), "verdict and reasons agree")
check((int(status) == 0) == v["pass"] and int(status) in (0, 1), f"exit status {status} and verdict agree")
check(shown["totals"] == tot and shown["started_at"] == r["started_at"], "--show prints the stored report")
err = open(run_err).read()
if v["pass"]:
    check(int(run_status) != 2, f"the gate refused a passing model: {err}")
else:
    check(int(run_status) == 2 and "failed its conformance probe" in err and "--allow-unqualified-model" in err, f"the gate: {run_status} {err}")
print(f"conformance report complete and consistent: probe {tot['probe']['passed']}/{tot['probe']['runs']}, "
      f"recovery {tot['recovery_instructive']['passed']}/{tot['recovery_instructive']['runs']} with our errors, "
      f"{tot['recovery_bare']['passed']}/{tot['recovery_bare']['runs']} bare; verdict {'pass' if v['pass'] else 'fail'}; "
      f"wall {r['wall_ms'] / 1000:.0f} s")
PY
