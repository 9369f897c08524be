#!/usr/bin/env bash
# The air-gapped bundle, as a folder and a tarball (docs/BUNDLE.md):
#   bash bundle/build.sh
#   -> bundle/out/abhed-VERSION-x86_64-linux/         (copy this folder to the USB stick)
#      bundle/out/abhed-VERSION-x86_64-linux.tar.gz   (and its .sha256)
# Needs what the README's setup installs (the model, the VM image, QEMU, the Rust toolchain) and
# the network once, for `cargo vendor`. Everything in the bundle is listed in its SHA256SUMS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { echo "bundle: $*" >&2; }

version=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c \
  'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "abhed"))')
name=abhed-$version-x86_64-linux
out=$root/bundle/out
dest=$out/$name
rm -rf "$dest" "$dest.tar.gz" "$dest.tar.gz.sha256"
mkdir -p "$dest/bin" "$dest/share/abhed/models" "$dest/share/abhed/vm" "$dest/licenses"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

log "the static binary (bundle/static.sh)"
bin=$(bash bundle/static.sh)
install -m 0755 "$bin" "$dest/bin/abhed"

log "the default model"
bash models/fetch.sh >&2
model=$(python3 -c 'import json; print(json.load(open("models/manifest.json"))["file"])')
want=$(python3 -c 'import json; print(json.load(open("models/manifest.json"))["sha256"])')
got=$(sha256sum "models/$model" | cut -d' ' -f1)
[ "$got" = "$want" ] || { log "models/$model has sha256 $got, but models/manifest.json says $want"; exit 1; }
install -m 0644 "models/$model" models/manifest.json "$dest/share/abhed/models/"

log "the VM image"
[ -f vm/manifest.json ] || bash bundle/vm-image.sh
install -m 0644 vm/vmlinux vm/initramfs.img vm/manifest.json "$dest/share/abhed/vm/"

log "QEMU with its libraries and loader (bundle/qemu.sh)"
bash bundle/qemu.sh "$dest/qemu"

log "the sources, with vendor/ for offline builds"
# The files git tracks or would track (uncommitted work included), not build output.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [ -f "$f" ]; then install -D -m "$(stat -c %a "$f")" "$f" "$dest/src/$f"; fi
done
rm -rf "$dest/src/vendor"
(cd "$dest/src" && cargo vendor --locked --versioned-dirs vendor 2>/dev/null) >"$dest/src/.cargo/vendor.toml"
cat >>"$dest/src/.cargo/config.toml" <<'EOF'

# Offline builds from the bundle: every crate comes from vendor/ (made by `cargo vendor` when
# the bundle was built); `cargo build --offline --frozen` needs no network.
EOF
grep -v '^$' "$dest/src/.cargo/vendor.toml" >>"$dest/src/.cargo/config.toml"
rm "$dest/src/.cargo/vendor.toml"
python3 bundle/vendor.py "$dest/src"

log "licenses and the SBOM"
install -m 0644 LICENSE "$dest/licenses/abhed"
mkdir -p "$dest/licenses/debian"
cut -f2 "$dest/qemu/SOURCES" | while read -r f; do
  pkg=$(dpkg -S "$f" 2>/dev/null || dpkg -S "${f/\/usr\/lib\///lib/}") && pkg=${pkg%%:*}
  [ -f "/usr/share/doc/$pkg/copyright" ] && install -m 0644 "/usr/share/doc/$pkg/copyright" "$dest/licenses/debian/$pkg"
done
python3 bundle/sbom.py "$dest" >"$dest/SBOM.spdx.json"

log "install.sh, the CPU baseline, SHA256SUMS"
install -m 0755 bundle/install.sh "$dest/install.sh"
install -m 0644 bundle/README.bundle.md "$dest/README.md"
# The CPU features the binary needs, as /proc/cpuinfo spells them, for install.sh to check
# before installing (the binary checks them again at every start).
echo "$version" >"$dest/VERSION"
{ "$dest/bin/abhed" doctor --json || true; } | python3 -c '
import json, sys
cpu = json.load(sys.stdin)["checks"]["cpu"]["facts"]
cpuinfo = {"sse4.2": "sse4_2", "lzcnt": "abm"}  # where /proc/cpuinfo names a feature otherwise
print(cpu["baseline"], " ".join(cpuinfo.get(f, f) for f in cpu["required"]))' >"$dest/CPU"
(cd "$dest" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum >SHA256SUMS)

log "the tarball"
tar -C "$out" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -czf "$dest.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
log "$(find "$dest" -type f | wc -l) files, $(du -sh "$dest" | cut -f1) in $dest; tarball $(du -sh "$dest.tar.gz" | cut -f1)"
echo "$dest"
