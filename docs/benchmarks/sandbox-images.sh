#!/usr/bin/env bash
# `abhed bench --sandbox` on two VM images one after the other, the same host binary: for an A/B
# of a guest change (docs/BENCHMARKS.md, "The exec check", run C).
#   bash docs/benchmarks/sandbox-images.sh OLD_IMAGE_DIR NEW_IMAGE_DIR
# Make an image of another commit's guest with: git worktree add /tmp/old REV &&
# bash /tmp/old/bundle/vm-image.sh /tmp/vm-old
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/bench/sandbox-images
rm -rf "$out" && mkdir -p "$out/ws"
cargo build --release --locked -q
export ABHED_HOME=$out/home ABHED_CONFIG=$out/config.toml
for img in "$@"; do
  printf '[sandbox]\nimage_dir = "%s"\n' "$img" >"$ABHED_CONFIG"
  echo "## image $img, $(date -u +%FT%TZ), $(nproc) cores"
  (cd "$out/ws" && "$root/target/release/abhed" bench --sandbox --boots "${BOOTS:-3}" --calls "${CALLS:-50}")
done
