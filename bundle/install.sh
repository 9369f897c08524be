#!/bin/sh
# Install abhed from this bundle folder (a USB stick, say). No network, no root for a user prefix.
#   sh install.sh                  # into ~/.local (as root: /usr/local)
#   sh install.sh --prefix DIR
# It checks every file against SHA256SUMS and the CPU against the build's baseline before it
# writes anything; it copies into a temporary folder beside the target and renames it into place,
# so a failure (a full disk, say) leaves the prefix as it was. Running it again is harmless.
# Result: PREFIX/lib/abhed/VERSION/ (bin, share, qemu, licenses, SBOM, SHA256SUMS) and the link
# PREFIX/bin/abhed -> ../lib/abhed/VERSION/bin/abhed.
set -eu

die() {
  echo "install.sh: $*" >&2
  exit 1
}

if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix=${HOME:?HOME is not set; pass --prefix DIR}/.local; fi
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a folder"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'; usage: sh install.sh [--prefix DIR]" ;;
  esac
done
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
for f in SHA256SUMS VERSION CPU; do
  [ -f "$f" ] || die "$here/$f is missing, so this is not a whole abhed bundle. Nothing was installed; copy the bundle folder again."
done
version=$(cat VERSION)

# 1. Every file the bundle lists must be there, unchanged.
echo "Checking $(wc -l <SHA256SUMS) files against SHA256SUMS ..."
bad=$(sha256sum --check --quiet SHA256SUMS 2>/dev/null || true)
if [ -n "$bad" ]; then
  echo "$bad" | sed -n 's/^\(.*\): FAILED open or read$/  \1: missing or unreadable/p; s/^\(.*\): FAILED$/  \1: changed or damaged (its sha256 differs)/p' >&2
  die "the files above do not match SHA256SUMS. Nothing was installed. Copy the bundle again from its source, and check the tarball against its .sha256 file."
fi

# 2. The CPU must have what the binary was built for (it would die with SIGILL otherwise).
read -r baseline features <CPU
have=$(grep -m1 '^flags' /proc/cpuinfo || true)
missing=
for f in $features; do
  case " ${have#*:} " in *" $f "*) ;; *) missing="$missing $f" ;; esac
done
if [ -n "$missing" ]; then
  die "this bundle's abhed is built for the $baseline CPU baseline, and this CPU lacks:$missing. Nothing was installed. Build a binary for this CPU from the bundle's sources, offline (docs/BUNDLE.md): cd $here/src && CPU=native bash bundle/static.sh"
fi

# 3. Install into PREFIX/lib/abhed/VERSION through a temporary folder and a rename.
lib=$prefix/lib/abhed
target=$lib/$version
link=$prefix/bin/abhed
if [ -e "$link" ] || [ -L "$link" ]; then
  case $(readlink "$link" || true) in
    ../lib/abhed/*) ;;
    *) die "$link exists and is not a link into $lib (another abhed?). Nothing was installed. Remove it, or choose another --prefix." ;;
  esac
fi
installed=
if [ -f "$target/SHA256SUMS" ] && (cd "$target" && sha256sum --check --quiet --strict SHA256SUMS >/dev/null 2>&1); then
  echo "abhed $version is already installed in $target, and its files check out."
else
  created=
  stage=
  cleanup() {
    rc=$?
    if [ -z "$installed" ]; then
      [ -z "$stage" ] || rm -rf "$stage"
      for d in $created; do rmdir "$d" 2>/dev/null || true; done
      [ $rc -eq 0 ] || echo "install.sh: the install failed (see above); $prefix is as it was before." >&2
    fi
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  for d in "$prefix" "$prefix/lib" "$lib" "$prefix/bin"; do
    if [ ! -d "$d" ]; then
      mkdir "$d" || die "cannot create $d. Nothing was installed."
      created="$d $created"
    fi
  done
  stage=$(mktemp -d "$lib/.install-$version.XXXXXX") || die "cannot create a temporary folder in $lib. Nothing was installed."
  echo "Copying into $stage ..."
  # What runs is installed; the sources and the installer stay in the bundle folder.
  grep -E '^[0-9a-f]{64}  ((bin|qemu|share|licenses)/|(SBOM\.spdx\.json|VERSION|CPU|README\.md)$)' SHA256SUMS >"$stage/SHA256SUMS"
  cut -c67- "$stage/SHA256SUMS" | while IFS= read -r f; do
    mkdir -p "$stage/$(dirname "$f")" && cp -p "$f" "$stage/$f" || exit 1
  done
  (cd "$stage" && sha256sum --check --quiet --strict SHA256SUMS) || die "the copy in $stage does not match SHA256SUMS (a failing disk?)"
  chmod 0755 "$stage"
  if [ -e "$target" ]; then
    old=$(mktemp -d "$lib/.old-$version.XXXXXX")
    mv "$target" "$old/" && mv "$stage" "$target" && installed=yes && rm -rf "$old"
  else
    mv "$stage" "$target" && installed=yes
  fi
  echo "Installed abhed $version in $target."
fi
installed=yes
tmp_link=$prefix/bin/.abhed-link.$$
ln -s "../lib/abhed/$version/bin/abhed" "$tmp_link"
mv -f -T "$tmp_link" "$link"
echo "$link -> ../lib/abhed/$version/bin/abhed"

case ":$PATH:" in
  *":$prefix/bin:"*) cmd=abhed ;;
  *) cmd=$link; echo "($prefix/bin is not on PATH; add it, or use the full path as below.)" ;;
esac
echo
echo "Next:"
echo "  $cmd doctor"
echo "  $cmd conformance --model YOUR_MODEL.gguf   (once per model: may it serve?)"
echo "  cd YOUR_PROJECT && $cmd run --model YOUR_MODEL.gguf \"Summarise what this project does\""
