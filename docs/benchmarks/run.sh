#!/usr/bin/env bash
# The benchmarks of docs/BENCHMARKS.md, side by side with ripgrep in one run.
#   bash docs/benchmarks/run.sh            # builds the tree, runs everything
#   TREE=/path/to/tree bash docs/benchmarks/run.sh
# Needs: hyperfine and ripgrep (apt-get install hyperfine ripgrep), network for `cargo vendor`
# the first time (the tree is cached under target/bench/).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bench=$root/target/bench
mkdir -p "$bench"

cargo build --release --locked -q
abhed=$root/target/release/abhed

# The large real tree: what `cargo vendor` writes for this crate's dependencies plus those the
# agent loop adds (llama-cpp-2, tokio, indicatif), about 200 MB of real source.
if [ -z "${TREE:-}" ]; then
  TREE=$bench/vendor
  if [ ! -d "$TREE" ]; then
    scratch=$bench/tree-crate
    mkdir -p "$scratch/src"
    echo 'fn main() {}' >"$scratch/src/main.rs"
    {
      # (its own [workspace]: it lies under this repository's target/)
      printf '[package]\nname = "abhed-bench-tree"\nversion = "0.0.0"\nedition = "2024"\n\n[workspace]\n\n[dependencies]\n'
      printf 'llama-cpp-2 = "*"\ntokio = { version = "1", features = ["full"] }\nindicatif = "*"\ntracing-subscriber = "*"\n'
      # Abhed's own dependencies, less the ones named above and the path crate.
      sed -n '/^\[dependencies\]/,/^\[/p' Cargo.toml | sed '1d;/^\[/d' |
        grep -v -E '^(abhed-guest|llama-cpp-2|tokio|indicatif|tracing-subscriber) '
    } >"$scratch/Cargo.toml"
    (cd "$scratch" && cargo vendor -q "$TREE" >/dev/null)
  fi
fi
echo "tree: $TREE ($(du -sh "$TREE" | cut -f1), $(find "$TREE" -type f | wc -l) files)"

export ABHED_HOME=$bench/home ABHED_CONFIG=/dev/null
tool() { "$abhed" tool "$1" "$2" --workspace "$TREE" 2>/dev/null; }

# rg reads .gitignore only inside a git repository; abhed reads it everywhere (a workspace is
# often not a repository). --no-require-git gives rg the same rule, so the sets can match.
echo; echo "== file sets (abhed grep vs rg -l --no-require-git)"
for pat in Mutex 'fn main' 'unsafe impl' '[A-Z][a-z]+Error'; do
  tool grep "{\"pattern\": \"$pat\", \"path\": \"$TREE\"}" | grep -v '^\[' | sort >"$bench/a.txt" || true
  rg -l --no-require-git "$pat" "$TREE" | sort >"$bench/b.txt" || true
  if cmp -s "$bench/a.txt" "$bench/b.txt"; then same=identical; else same="DIFFERENT ($(diff "$bench/a.txt" "$bench/b.txt" | grep -c '^[<>]') lines)"; fi
  echo "  $pat: $(wc -l <"$bench/a.txt") files, $same"
done
tool glob "{\"pattern\": \"**/*.rs\", \"path\": \"$TREE\"}" | grep -v '^\[' | sort >"$bench/a.txt" || true
rg --files --no-require-git -g '*.rs' "$TREE" | sort >"$bench/b.txt"
echo "  glob **/*.rs: abhed $(wc -l <"$bench/a.txt") (capped at 1000, newest first), rg $(wc -l <"$bench/b.txt")"

echo; echo "== grep files_with_matches vs rg -l"
hyperfine -N --warmup 3 --runs 30 --export-markdown "$bench/grep.md" \
  -n 'abhed grep Mutex' "$abhed tool grep '{\"pattern\": \"Mutex\", \"path\": \"$TREE\"}' --workspace $TREE" \
  -n 'rg -l Mutex' "rg -l --no-require-git Mutex $TREE" \
  -n 'abhed grep [A-Z][a-z]+Error' "$abhed tool grep '{\"pattern\": \"[A-Z][a-z]+Error\", \"path\": \"$TREE\"}' --workspace $TREE" \
  -n 'rg -l [A-Z][a-z]+Error' "rg -l --no-require-git [A-Z][a-z]+Error $TREE"

echo; echo "== glob **/*.rs vs rg --files -g '*.rs'"
hyperfine -N --warmup 3 --runs 30 --export-markdown "$bench/glob.md" \
  -n 'abhed glob **/*.rs' "$abhed tool glob '{\"pattern\": \"**/*.rs\", \"path\": \"$TREE\"}' --workspace $TREE" \
  -n "rg --files -g '*.rs'" "rg --files --no-require-git -g *.rs $TREE"

echo; echo "== edit on a 100k-line file (in process, end to end: store, hash, atomic write)"
cargo test --release --locked -q --test edit_perf -- --ignored --nocapture --test-threads 1 2>&1 | grep -E '(unique edit|miss)'

echo; echo "== edit on a 100k-line file through the CLI (process start, store, fsyncs included)"
big=$bench/edit-ws/big.rs
mkdir -p "$(dirname "$big")"
seq 1 100000 | awk '{printf "    let value_%d = compute(%d, \"item %d\");\n", $1, $1, $1}' >"$bench/big.rs.orig"
cp "$bench/big.rs.orig" "$big"
sid=$("$abhed" tool read "{\"path\": \"$big\", \"limit\": 1}" --workspace "$(dirname "$big")" --format json | sed 's/.*"session":"\([^"]*\)".*/\1/')
hyperfine -N --warmup 2 --runs 20 --export-markdown "$bench/edit.md" \
  --prepare "sh -c 'cp $bench/big.rs.orig $big && $abhed tool read \"{\\\"path\\\": \\\"$big\\\", \\\"limit\\\": 1}\" --session $sid >/dev/null 2>&1'" \
  -n 'edit, unique match' "$abhed tool edit '{\"path\": \"$big\", \"old_string\": \"let value_54321 = compute(54321,\", \"new_string\": \"let value_54321 = compute_fast(54321,\"}' --session $sid" \
  -n 'edit, miss (nearest match)' "sh -c '$abhed tool edit \"{\\\"path\\\": \\\"$big\\\", \\\"old_string\\\": \\\"let value_77777 = compute(77777, \\\\\\\"item 7777\\\\\\\");\\\", \\\"new_string\\\": \\\"x\\\"}\" --session $sid >/dev/null; true'"
