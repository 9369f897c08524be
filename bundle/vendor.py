#!/usr/bin/env python3
"""Shrink a `cargo vendor` folder to what Linux x86-64 builds use.

    python3 bundle/vendor.py SRC_DIR    # SRC_DIR holds Cargo.toml, Cargo.lock and vendor/

Cargo needs every package of Cargo.lock present to resolve, even the ones only other platforms
compile (windows-sys, wasm-bindgen, objc2, ...). Those keep their Cargo.toml and checksum, and
every source file their manifest names becomes an empty stub; their checksum file then lists no
files, so cargo does not look for the removed ones. Prints what it removed.
"""

import json
import os
import shutil
import subprocess
import sys
import tomllib

TARGET = "x86_64-unknown-linux-gnu"


def names(src, *extra):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--offline", *extra],
            cwd=src,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    return {f"{p['name']}-{p['version']}" for p in meta["packages"] if p["source"]}


def stub(folder):
    with open(os.path.join(folder, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    keep = {"Cargo.toml", ".cargo-checksum.json"}
    with open(os.path.join(folder, ".cargo-checksum.json")) as f:
        checksum = json.load(f)
    for entry in os.listdir(folder):
        if entry not in keep:
            path = os.path.join(folder, entry)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    stubs = {}
    build = manifest.get("package", {}).get("build")
    if isinstance(build, str):
        stubs[build] = "fn main() {}\n"
    lib = manifest.get("lib", {})
    stubs[lib.get("path", "src/lib.rs")] = ""
    for kind in ("bin", "example", "test", "bench"):
        for target in manifest.get(kind, []):
            if "path" in target:
                stubs[target["path"]] = "fn main() {}\n" if kind != "test" else ""
    for rel, text in stubs.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    checksum["files"] = {}
    with open(os.path.join(folder, ".cargo-checksum.json"), "w") as f:
        json.dump(checksum, f)


def size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    src = sys.argv[1]
    vendor = os.path.join(src, "vendor")
    unused = sorted(names(src) - names(src, "--filter-platform", TARGET))
    freed = 0
    for name in unused:
        folder = os.path.join(vendor, name)
        before = size(folder)
        stub(folder)
        freed += before - size(folder)
    print(f"vendor.py: {len(unused)} crates that only other platforms build became stubs ({freed / 1e6:.1f} MB freed): {' '.join(unused)}", file=sys.stderr)


if __name__ == "__main__":
    main()
