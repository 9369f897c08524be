#!/usr/bin/env bash
# Build llama.cpp's own llama-server and llama-bench from the pinned PyPI sdist
# llama-cpp-python==0.3.36 (it vendors llama.cpp's full source). They are the real peers of two
# checks: the openai adapter's end-to-end test talks to llama-server on loopback, and
# docs/BENCHMARKS.md measures abhed against llama-bench and llama-batched-bench. Same CPU baseline as abhed's own build
# (x86-64-v3, .cargo/config.toml), static, no curl. Idempotent: a finished build is kept.
#   bash tests/support/build-llama-tools.sh     # -> target/llama-tools/bin/{llama-server,llama-bench,llama-batched-bench}
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/target/llama-tools
pkg=llama-cpp-python==0.3.36
sdist=llama_cpp_python-0.3.36.tar.gz
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

if [ -x "$out/bin/llama-server" ] && [ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/llama-batched-bench" ]; then
  echo "$out/bin: llama-server, llama-bench and llama-batched-bench present"
  exit 0
fi
mkdir -p "$out"
if [ ! -f "$out/$sdist" ] || [ "$(sha256sum "$out/$sdist" | cut -d' ' -f1)" != "$sdist_sha" ]; then
  python3 -m pip download --quiet --no-deps --no-binary=:all: -d "$out" "$pkg"
fi
got=$(sha256sum "$out/$sdist" | cut -d' ' -f1)
if [ "$got" != "$sdist_sha" ]; then
  echo "build-llama-tools.sh: $sdist has sha256 $got, expected $sdist_sha; refusing it" >&2
  exit 1
fi
rm -rf "$out/src" && mkdir -p "$out/src"
tar xzf "$out/$sdist" -C "$out/src" --strip-components=1
flags="-march=x86-64-v3"
cmake -S "$out/src/vendor/llama.cpp" -B "$out/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_SSE42=ON \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build "$out/build" --target llama-server llama-bench llama-batched-bench -j "$(nproc)"
mkdir -p "$out/bin"
cp "$out/build/bin/llama-server" "$out/build/bin/llama-bench" "$out/build/bin/llama-batched-bench" "$out/bin/"
rm -rf "$out/src"
echo "$out/bin: llama-server and llama-bench built"
