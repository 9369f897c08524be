#!/usr/bin/env bash
# The bundle's proofs, run by .ci/run after bundle/build.sh. As root: it makes network and mount
# namespaces (unshare) to play a host with no network, no QEMU, no shared libraries, another CPU
# and a full disk.
#   bash bundle/test.sh bundle/out/abhed-VERSION-x86_64-linux
# Every check prints ok or FAIL with what it saw; the exit status is the number of failures.
set -uo pipefail
bundle=$(cd "${1:?usage: bundle/test.sh BUNDLE_DIR}" && pwd)
[ "$(id -u)" = 0 ] || { echo "bundle/test.sh: needs root (unshare, mount)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Also the folder doctor runs in: $work itself holds abhed's data folder and install, which
# doctor would report as no place for a workspace.
mkdir -p "$work/empty"
# A store of its own and no user config (/dev/null): no report or setting from this host's
# earlier runs counts.
export ABHED_HOME=$work/home ABHED_CONFIG=/dev/null
unset ABHED_ALLOW_UNQUALIFIED_MODEL ABHED_MODEL
fails=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; shift; printf '     %s\n' "$@" | head -40; fails=$((fails + 1)); }
model=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["file"])' "$bundle/share/abhed/models/manifest.json")
model_sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$bundle/share/abhed/models/manifest.json")

# A host with only `lo` and no QEMU: QEMU's binary, firmware and modules are hidden.
airgap() {
  unshare -n -m bash -c '
    mount --bind "$0" /usr/share/qemu && mount --bind "$0" /usr/lib/x86_64-linux-gnu/qemu &&
      mount --bind /dev/null /usr/bin/qemu-system-x86_64 && exec "$@"' "$work/empty" "$@"
}
# The same, and without any of the host's shared libraries (the bundle's QEMU must bring its own).
bare() {
  unshare -n -m bash -c '
    mount --bind "$0" /usr/share/qemu && mount --bind /dev/null /usr/bin/qemu-system-x86_64 &&
      mount --bind "$0" /usr/lib/x86_64-linux-gnu && exec "$@"' "$work/empty" "$@"
}
# A copy of the bundle to damage: hard links, so replace a file (never write into it).
copy() {
  rm -rf "$work/copy" && cp -al "$bundle" "$work/copy"
}

echo "== the air gap: install and a real task, with no network and no host QEMU"
nets=$(airgap awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' /proc/net/dev)
[ "$nets" = lo ] && ok "the namespace has only lo" || fail "the namespace has only lo" "$nets"
prefix=$work/prefix
out=$(airgap sh "$bundle/install.sh" --prefix "$prefix" 2>&1)
if [ $? -eq 0 ] && grep -q "^  $prefix/bin/abhed doctor$" <<<"$out" && grep -q "^  cd YOUR_PROJECT && $prefix/bin/abhed run " <<<"$out"; then
  ok "install.sh installs offline and prints the commands to run next"
else
  fail "install.sh installs offline and prints the commands to run next" "$out"
fi
out=$(airgap sh "$bundle/install.sh" --prefix "$prefix" 2>&1)
grep -q "already installed" <<<"$out" && ok "install.sh again: nothing to do" || fail "install.sh again: nothing to do" "$out"
abhed=$prefix/bin/abhed
report=$(cd "$work/empty" && airgap "$abhed" doctor --json)
if python3 -c '
import json, sys
r = json.loads(sys.argv[1]); c = r["checks"]
assert r["ok"], r
assert c["install"]["ok"] and c["qemu"]["facts"]["bundled"], c
assert c["tcg"]["ok"], c["tcg"]' "$report" 2>"$work/err"; then
  ok "doctor: the install verifies, the bundled QEMU boots the microVM, the model is found"
else
  fail "doctor: the install verifies, the bundled QEMU boots the microVM, the model is found" "$(cat "$work/err")"
fi
proj=$work/project
mkdir -p "$proj" && printf 'version = "2.4.1"\n' >"$proj/VERSION.toml"
out=$(cd "$proj" && airgap "$abhed" run "hello" 2>&1)
code=$?
if [ $code -eq 2 ] && grep -q "has no conformance report on record" <<<"$out" && grep -q "abhed conformance --model $prefix/" <<<"$out" && grep -q -- "--allow-unqualified-model" <<<"$out"; then
  ok "the gate: an installed model with no conformance report is refused, with the command that probes it"
else
  fail "the gate refuses an unprobed model" "exit $code: $out"
fi
(cd "$proj" && airgap "$abhed" run --allow-unqualified-model --json --max-turns 4 --max-reply-tokens 256 \
  "Use the bash tool to run: cat VERSION.toml. Then answer with the version it prints.") >"$work/run.jsonl" 2>"$work/run.err"
if python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
start = next(e for e in ev if e["type"] == "run_start")
assert start["model"]["adapter"] == "llama", start
assert start["model"]["sha256"] == sys.argv[2], start["model"]
assert start["model"]["location"].startswith(sys.argv[3]), start["model"]
assert ev[-1]["type"] == "run_end", ev[-1]
assert ev[-1]["reason"] not in ("model_error", "internal_error"), ev[-1]
turns = [e for e in ev if e["type"] == "model_turn"]
assert turns, "no model turn"
# The model may call bash badly (its error is an observation); the sandbox itself must work.
for r in (e for e in ev if e["type"] == "tool_result" and e["tool"] == "bash"):
    assert r["error_code"] not in ("sandbox_unavailable", "sandbox_crashed"), r
print(len(turns), "turns,", sum(e["type"] == "tool_call" for e in ev), "tool calls, ended:", ev[-1]["reason"])
' "$work/run.jsonl" "$model_sha" "$prefix/lib/abhed/" >"$work/summary" 2>"$work/err"; then
  ok "abhed run: a real task on the bundled model ($(cat "$work/summary"))"
else
  fail "abhed run: a real task on the bundled model" "$(cat "$work/err")" "$(tail -5 "$work/run.err")"
fi
obs=$(cd "$proj" && airgap "$abhed" tool --format json bash '{"command": "cat VERSION.toml /proc/sys/kernel/osrelease", "description": "the version file and the kernel"}')
if python3 -c '
import json, sys
o = json.loads(sys.argv[1])
guest = json.load(open(sys.argv[2]))["kernel_release"]
host = open("/proc/sys/kernel/osrelease").read().strip()
assert o["ok"], o
assert "2.4.1" in o["output"], o["output"]
assert guest in o["output"] and guest != host, (o["output"], guest, host)' "$obs" "$bundle/share/abhed/vm/manifest.json" 2>"$work/err"; then
  ok "bash runs in the bundled microVM (its kernel, not the host's)"
else
  fail "bash runs in the bundled microVM" "$(cat "$work/err")"
fi

echo "== the bundled QEMU needs nothing of the host's"
report=$(cd "$work/empty" && bare "$abhed" doctor --json)
if python3 -c '
import json, sys
c = json.loads(sys.argv[1])["checks"]
assert c["qemu"]["ok"] and c["qemu"]["facts"]["bundled"], c["qemu"]
assert c["tcg"]["ok"], c["tcg"]' "$report" 2>"$work/err"; then
  ok "with /usr/lib/x86_64-linux-gnu hidden, the bundled QEMU starts and boots the microVM"
else
  fail "with /usr/lib/x86_64-linux-gnu hidden, the bundled QEMU boots the microVM" "$(cat "$work/err")"
fi

echo "== bad input"
try_install() { # prefix -> output, status in $rc
  out=$(sh "$work/copy/install.sh" --prefix "$1" 2>&1)
  rc=$?
}
copy && rm "$work/copy/bin/abhed" && { cat "$bundle/bin/abhed"; echo tampered; } >"$work/copy/bin/abhed"
try_install "$work/p1"
[ $rc -ne 0 ] && grep -q "bin/abhed: changed or damaged" <<<"$out" && [ ! -e "$work/p1" ] &&
  ok "a tampered binary: refused by name, nothing installed" || fail "a tampered binary" "rc=$rc" "$out"
copy && rm "$work/copy/share/abhed/models/$model" && head -c 1000000 "$bundle/share/abhed/models/$model" >"$work/copy/share/abhed/models/$model"
try_install "$work/p2"
[ $rc -ne 0 ] && grep -q "share/abhed/models/$model: changed or damaged" <<<"$out" && [ ! -e "$work/p2" ] &&
  ok "a truncated model: refused by name, nothing installed" || fail "a truncated model" "rc=$rc" "$out"
copy && rm "$work/copy/share/abhed/models/$model"
try_install "$work/p3"
[ $rc -ne 0 ] && grep -q "share/abhed/models/$model: missing" <<<"$out" && [ ! -e "$work/p3" ] &&
  ok "a missing model: refused by name, nothing installed" || fail "a missing model" "rc=$rc" "$out"

# Another CPU: this one's flags without AVX2 and FMA, seen by install.sh; and the binary itself on
# an emulated CPU of 2010 (qemu-user), where it must refuse rather than die with SIGILL.
sed '/^flags/ s/ avx2\| fma//g' /proc/cpuinfo >"$work/cpuinfo"
out=$(unshare -m sh -c 'mount --bind "$0" /proc/cpuinfo && exec sh "$1" --prefix "$2"' "$work/cpuinfo" "$bundle/install.sh" "$work/p4" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "this CPU lacks: fma avx2\|this CPU lacks: avx2 fma" <<<"$out" && [ ! -e "$work/p4" ] &&
  ok "a CPU without the baseline: install.sh refuses, naming the features" || fail "a CPU without the baseline (install.sh)" "rc=$rc" "$out"
out=$(qemu-x86_64 -cpu Westmere "$bundle/bin/abhed" --version 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "^abhed: this CPU lacks .*avx2.*so it does not start" <<<"$out" &&
  ok "the binary on a Westmere CPU: exit 2 with the missing features, no SIGILL" || fail "the binary on a Westmere CPU" "rc=$rc" "$out"

# A full disk: a 64 MiB filesystem, smaller than the model.
out=$(unshare -m sh -c 'mount -t tmpfs -o size=64m tmpfs "$0" && sh "$1" --prefix "$0/prefix"; echo "rc=$?"; echo "left:[$(ls -A "$0")]"' "$work/empty" "$bundle/install.sh" 2>&1)
grep -q "No space left on device" <<<"$out" && grep -q "is as it was before" <<<"$out" && grep -q "^rc=1$" <<<"$out" && grep -q "^left:\[\]$" <<<"$out" &&
  ok "a full disk: the install fails and leaves nothing in the prefix" || fail "a full disk: the install fails and leaves nothing" "$out"

# The installed model removed: doctor names it, run says where it looked; install.sh repairs.
rm "$prefix/lib/abhed/"*/share/abhed/models/"$model"
report=$(cd "$work/empty" && airgap "$abhed" doctor --json)
python3 -c '
import json, sys
c = json.loads(sys.argv[1])["checks"]
assert not c["install"]["ok"] and sys.argv[2] + " is missing" in c["install"]["detail"], c["install"]
assert not c["model"]["ok"], c["model"]' "$report" "share/abhed/models/$model" 2>"$work/err" &&
  ok "an installed model deleted: doctor names it" || fail "an installed model deleted: doctor names it" "$(cat "$work/err")"
out=$(cd "$proj" && airgap "$abhed" run "hello" 2>&1)
grep -q "was not found. Looked in:" <<<"$out" && grep -q "run install.sh from the bundle folder again" <<<"$out" && ok "an installed model deleted: run says where it looked" || fail "run without the model" "$out"
out=$(airgap sh "$bundle/install.sh" --prefix "$prefix" 2>&1)
(cd "$work/empty" && airgap "$abhed" doctor >/dev/null) && ok "install.sh again repairs the install" || fail "install.sh again repairs the install" "$out"

echo "== rebuilding from the bundle's sources, offline"
cp -a "$bundle/src" "$work/src"
mkdir -p "$work/cargo-home"
start=$(date +%s)
if (cd "$work/src" && CARGO_HOME=$work/cargo-home CARGO_TARGET_DIR=$work/target \
  unshare -n bash bundle/static.sh --offline --frozen) >"$work/build.out" 2>"$work/build.err"; then
  built=$(cat "$work/build.out")
  v=$("$built" --version 2>&1)
  [ "$v" = "$("$bundle/bin/abhed" --version)" ] &&
    ok "cargo build --offline --frozen from vendor/ with no network and an empty CARGO_HOME ($(($(date +%s) - start)) s): $v" ||
    fail "the offline build runs" "$v"
else
  fail "cargo build --offline --frozen from vendor/" "$(tail -20 "$work/build.err")"
fi

echo "$fails failed"
exit "$fails"
