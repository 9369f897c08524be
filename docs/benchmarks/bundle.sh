#!/usr/bin/env bash
# The bundle's figures for docs/BENCHMARKS.md, in one run: binary size, bundle size, the cold
# and warm start of `abhed --version` against `rg --version` (the anchor), and install time.
#   bash docs/benchmarks/bundle.sh [BUNDLE_DIR]    # default: the last bundle/build.sh output
# Cold start drops the page cache before each run (root only; skipped otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-$(ls -d bundle/out/abhed-*-x86_64-linux | tail -1)}
bundle=$(cd "$bundle" && pwd)
command -v hyperfine >/dev/null || { echo "needs hyperfine: apt-get install hyperfine" >&2; exit 1; }
command -v rg >/dev/null || { echo "needs ripgrep (the anchor): apt-get install ripgrep" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$bundle/bin/abhed
rg=$(command -v rg)

echo "## $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), $($rg --version | head -1)"
echo
echo "### sizes (bytes)"
strip -o "$work/abhed.stripped" "$bin"
printf '%-38s %12s\n' "bin/abhed" "$(stat -c %s "$bin")" \
  "bin/abhed stripped (strip -o)" "$(stat -c %s "$work/abhed.stripped")" \
  "rg (the anchor, $(file -b "$rg" | cut -d, -f1-2))" "$(stat -c %s "$rg")" \
  "the bundle folder (du -sb)" "$(du -sb "$bundle" | cut -f1)"
for part in bin share/abhed/models share/abhed/vm qemu src src/vendor licenses; do
  printf '%-38s %12s\n' "  $part" "$(du -sb "$bundle/$part" | cut -f1)"
done
[ -f "$bundle.tar.gz" ] && printf '%-38s %12s\n' "the tarball (.tar.gz)" "$(stat -c %s "$bundle.tar.gz")"
echo
echo "### start: \`abhed --version\` against \`rg --version\`, warm page cache"
hyperfine -N --warmup 5 --runs 200 "$bin --version" "$rg --version" 2>&1 | grep -v '^ *$'
if [ "$(id -u)" = 0 ]; then
  echo
  echo "### start, cold: the page cache dropped before every run"
  hyperfine -N --runs 20 --prepare "sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" \
    "$bin --version" "$rg --version" 2>&1 | grep -v '^ *$'
fi
echo
echo "### install from the folder: a fresh prefix each run (checksums of every file, copy, rename)"
hyperfine --runs 5 --prepare "rm -rf $work/prefix" "sh $bundle/install.sh --prefix $work/prefix" 2>&1 | grep -v '^ *$'
echo
echo "### install again: already installed (checksums only)"
hyperfine --runs 5 "sh $bundle/install.sh --prefix $work/prefix" 2>&1 | grep -v '^ *$'
