#!/usr/bin/env bash
# The bundle's own QEMU, for hosts without QEMU: copies this machine's qemu-system-x86_64, the
# TCG accelerator module, the microvm firmware, every shared library those load (ldd's closure)
# and the glibc dynamic loader into DEST. abhed starts it through that loader with
# --library-path DEST/lib (src/sandbox/qemu.rs), so nothing of the host's is loaded.
#   bash bundle/qemu.sh DEST
# Writes DEST/SOURCES: each copied file and the host file it came from (the SBOM reads it).
set -euo pipefail
dest=${1:?usage: bundle/qemu.sh DEST}
qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$qemu" ]; then
  echo "bundle/qemu.sh: qemu-system-x86_64 is not installed; run: apt-get install qemu-system-x86" >&2
  exit 1
fi
qemu=$(readlink -f "$qemu")
prefix=$(dirname "$(dirname "$qemu")") # /usr
moddir=$prefix/lib/x86_64-linux-gnu/qemu
module=$moddir/accel-tcg-x86_64.so
firmware=$prefix/share/qemu/bios-microvm.bin
loader=$(readlink -f /lib64/ld-linux-x86-64.so.2)
for f in "$module" "$firmware" "$loader"; do
  [ -f "$f" ] || { echo "bundle/qemu.sh: $f is missing; is qemu-system-x86 complete?" >&2; exit 1; }
done

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib/modules" "$dest/share"
sources=$dest/SOURCES
: >"$sources"
put() { # host-file dest-relative-path
  install -m "$3" "$1" "$dest/$2"
  printf '%s\t%s\n' "$2" "$1" >>"$sources"
}
put "$qemu" bin/qemu-system-x86_64 0755
put "$module" lib/modules/accel-tcg-x86_64.so 0644
put "$firmware" share/bios-microvm.bin 0644
put "$loader" lib/ld-linux-x86-64.so.2 0755
# ldd prints "soname => /path (addr)"; the library is copied under its soname, the name the
# loader looks for. The vdso and the loader line have no "=>" path.
ldd "$qemu" "$module" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r soname path; do
    [ -f "$dest/lib/$soname" ] || put "$(readlink -f "$path")" "lib/$soname" 0644
  done
if ldd "$qemu" "$module" | grep -q 'not found'; then
  echo "bundle/qemu.sh: ldd cannot resolve a library of QEMU:" >&2
  ldd "$qemu" "$module" | grep 'not found' >&2
  exit 1
fi
echo "bundle/qemu.sh: $(wc -l <"$sources") files, $(du -sh "$dest" | cut -f1) in $dest" >&2
