#!/usr/bin/env bash
# The shipped binary: fully static (static-pie: glibc, libstdc++ and libgomp linked in), for the
# x86-64-v3 CPU baseline (docs/BUNDLE.md). crt-static needs an explicit --target: without one
# the flag also reaches the proc-macro crates, which cannot be static. Prints the binary's path.
#   bash bundle/static.sh            # -> target/x86_64-unknown-linux-gnu/release/abhed
#   CPU=native bash bundle/static.sh # for this machine's CPU only (see docs/BUNDLE.md)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=${CPU:-x86-64-v3}
flags="-C target-feature=+crt-static -C target-cpu=$cpu"
# Packed relative relocations (DT_RELR) shrink the relocation table 90-fold (692 KB -> 8 KB),
# which a static-pie applies at every start. Only glibc >= 2.36 can apply them; an older one
# would start a binary whose pointers were never relocated.
glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
if [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -n1)" = 2.36 ]; then
  flags="$flags -C link-arg=-Wl,-z,pack-relative-relocs"
fi
ABHED_SHIPPED=1 RUSTFLAGS="$flags" \
  cargo build --release --locked --target x86_64-unknown-linux-gnu --bin abhed "$@" >&2
bin=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/abhed
# Refuse to hand on anything that is not what we say it is.
if ! file "$bin" | grep -q 'static-pie linked\|statically linked'; then
  echo "bundle/static.sh: $bin is not static: $(file -b "$bin")" >&2
  exit 1
fi
if ldd "$bin" 2>&1 | grep -qE '=>|ld-linux'; then
  echo "bundle/static.sh: ldd lists shared libraries for $bin: $(ldd "$bin" 2>&1 | tr '\n' ' ')" >&2
  exit 1
fi
echo "$bin"
