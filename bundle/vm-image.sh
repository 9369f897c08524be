#!/usr/bin/env bash
# Build the session microVM's image: a Debian kernel and an initramfs holding busybox, the
# virtio/9p modules, an init script and our guest agent. Offline apart from `apt-get download`
# of the pinned packages, which are cached by version and checked against their sha256.
#
#   bash bundle/vm-image.sh [OUT_DIR]      default OUT_DIR: vm/ in the checkout
#
# Needs: apt-get, dpkg-deb, cpio, gzip, sha256sum, cargo. Writes OUT_DIR/vmlinux,
# OUT_DIR/initramfs.img and OUT_DIR/manifest.json (what went in, with every sha256).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/vm}"
cache="${ABHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/abhed}/debs"

# The pins. To move to a newer kernel: `apt-cache show linux-image-6.1.0-NN-amd64` gives the
# version and SHA256 to put here (and in docs/SANDBOX.md).
KERNEL_PKG=linux-image-6.1.0-50-amd64
KERNEL_VER=6.1.176-1
KERNEL_SHA256=7b5597492a0a65aee61985a492e6bcc3f2cde830072a0e3b3d8c7e1b90279bd3
KERNEL_RELEASE=6.1.0-50-amd64
BUSYBOX_PKG=busybox-static
BUSYBOX_VER=1:1.35.0-4+deb12u1+b1
BUSYBOX_SHA256=3d3fdbe91d4660c873e14b092c213fe81c1da6362daa236eb25d0171eb108744
# A static bash: the tool is called bash, and a static binary from the initramfs starts in
# ~10 ms under TCG where a dynamic one loaded over 9p takes ~80 ms.
BASH_PKG=bash-static
BASH_VER=5.2.15-2+b13
BASH_SHA256=f62e37fc6c2c14417f270323066b4c621db5dc151a26f7a1f58e3fc24111d1c8
# What the guest needs, in load order (dependencies first): virtio on the microvm's MMIO bus,
# the virtio-serial port the agent talks on, and 9p for the shared directories.
MODULES="virtio virtio_ring virtio_mmio virtio_console 9pnet 9pnet_virtio netfs fscache 9p"

die() { echo "vm-image: $*" >&2; exit 1; }
for tool in apt-get dpkg-deb cpio gzip xz sha256sum cargo; do
  command -v "$tool" >/dev/null || die "needs $tool (apt-get install cpio gzip xz-utils dpkg; cargo from rustup)"
done

# Fetch NAME VERSION SHA256 -> path of the verified .deb in the cache.
fetch() {
  local name=$1 version=$2 sha=$3
  local file="$cache/${name}_${version//:/%3a}_amd64.deb"
  if [[ ! -f $file ]] || ! echo "$sha  $file" | sha256sum -c --quiet - 2>/dev/null; then
    mkdir -p "$cache"
    local tmp
    tmp="$(mktemp -d)"
    # apt drops privileges to _apt, which cannot write into a private temp dir.
    chmod 755 "$tmp"
    (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$name=$version" >&2) ||
      die "cannot download $name=$version. If apt's lists are old, run 'apt-get update'; if the version left the archive, update the pins at the top of $0"
    mv "$tmp"/*.deb "$file.part"
    rmdir "$tmp"
    echo "$sha  $file.part" | sha256sum -c --quiet - >&2 || {
      rm -f "$file.part"
      die "$name=$version does not match its pinned sha256 $sha: refusing it"
    }
    mv "$file.part" "$file"
  fi
  echo "$file"
}

kernel_deb="$(fetch "$KERNEL_PKG" "$KERNEL_VER" "$KERNEL_SHA256")"
busybox_deb="$(fetch "$BUSYBOX_PKG" "$BUSYBOX_VER" "$BUSYBOX_SHA256")"
bash_deb="$(fetch "$BASH_PKG" "$BASH_VER" "$BASH_SHA256")"

echo "vm-image: building the guest agent (static)" >&2
# Its own target dir: other RUSTFLAGS would otherwise rebuild the main crate's dependencies.
(cd "$root" && RUSTFLAGS="-C target-feature=+crt-static -C target-cpu=x86-64 -C strip=symbols" \
  cargo build -q --locked -p abhed-guest --release --target x86_64-unknown-linux-gnu --target-dir target/guest)
agent="$root/target/guest/x86_64-unknown-linux-gnu/release/abhed-guest"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$kernel_deb" "$work/kernel"
dpkg-deb -x "$busybox_deb" "$work/busybox"
dpkg-deb -x "$bash_deb" "$work/bash"

rootfs="$work/rootfs"
mkdir -p "$rootfs"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,usr,modules,mnt}
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
cp "$work/busybox/bin/busybox" "$rootfs/bin/busybox"
for applet in $("$rootfs/bin/busybox" --list); do
  [[ -e $rootfs/bin/$applet ]] || ln -s busybox "$rootfs/bin/$applet"
done
install -m 0755 "$work/bash/bin/bash-static" "$rootfs/bin/bash"
# sh is bash: busybox's shell runs applets such as rm inside its own process, without an exec the
# guest's exec check could see (guest/src/supervise.rs), so `sh -c` (system(3), popen, git,
# sed's `e`, tar's checkpoint actions) must be a shell that execs.
ln -sfn bash "$rootfs/bin/sh"
install -m 0755 "$agent" "$rootfs/sbin/abhed-guest"
# The same binary is the exec supervisor; a name of its own, so that `pidof abhed-guest` (or
# `kill` by name) in a command reaches the agent only (guest/src/supervise.rs).
ln "$rootfs/sbin/abhed-guest" "$rootfs/sbin/abhed-supervise"

moddir="$work/kernel/lib/modules/$KERNEL_RELEASE"
for m in $MODULES; do
  ko="$(find "$moddir/kernel" \( -name "$m.ko" -o -name "$m.ko.xz" \) -print -quit)"
  [[ -n $ko ]] || die "module $m is not in $KERNEL_PKG"
  case $ko in
    *.xz) xz -dc "$ko" > "$rootfs/modules/$m.ko" ;;
    *) cp "$ko" "$rootfs/modules/$m.ko" ;;
  esac
done
echo "$MODULES" > "$rootfs/modules/order"

printf 'root:x:0:0:root:/root:/bin/sh\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\n' > "$rootfs/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$rootfs/etc/hosts"
: > "$rootfs/etc/resolv.conf"
install -m 0755 "$root/bundle/vm-init.sh" "$rootfs/init"

# Reproducible archive: sorted names, one timestamp, no gzip name or time.
find "$rootfs" -exec touch -h -d @0 {} +
(cd "$rootfs" && find . -print0 | LC_ALL=C sort -z |
  cpio --null --create --format=newc --reproducible --owner=0:0 --quiet) | gzip -n -9 > "$work/initramfs.img"

# QEMU boots the uncompressed ELF through its PVH entry (CONFIG_PVH=y): that skips the
# real-mode setup and the xz decompression, which under TCG take about 2 s of a 4.5 s boot.
vmlinuz="$work/kernel/boot/vmlinuz-$KERNEL_RELEASE"
xz_hits="$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$vmlinuz" || true)"
xz_at="${xz_hits%%:*}"
[[ -n $xz_at ]] || die "no xz payload in $vmlinuz: the pinned kernel is no longer xz-compressed"
# xz stops at the end of its stream; tail then dies of SIGPIPE, which is expected.
{ tail -c +$((xz_at + 1)) "$vmlinuz" || true; } | xz -dc --single-stream > "$work/vmlinux"
[[ "$(head -c 4 "$work/vmlinux" | od -An -c | tr -d ' ')" == '177ELF' ]] || die "the kernel's payload is not an ELF"

mkdir -p "$out"
rm -f "$out/vmlinuz"
for f in vmlinux initramfs.img; do
  cp "$work/$f" "$out/$f.part"
  mv "$out/$f.part" "$out/$f"
done
sum() { sha256sum "$1" | cut -d' ' -f1; }
cat > "$out/manifest.json" <<EOF
{
  "format": 1,
  "kernel_release": "$KERNEL_RELEASE",
  "packages": [
    {"name": "$KERNEL_PKG", "version": "$KERNEL_VER", "sha256": "$KERNEL_SHA256"},
    {"name": "$BUSYBOX_PKG", "version": "$BUSYBOX_VER", "sha256": "$BUSYBOX_SHA256"},
    {"name": "$BASH_PKG", "version": "$BASH_VER", "sha256": "$BASH_SHA256"}
  ],
  "modules": "$MODULES",
  "guest_agent_sha256": "$(sum "$agent")",
  "files": {
    "vmlinux": "$(sum "$out/vmlinux")",
    "initramfs.img": "$(sum "$out/initramfs.img")"
  }
}
EOF
echo "vm-image: wrote $out (kernel $KERNEL_RELEASE, initramfs $(du -h "$out/initramfs.img" | cut -f1))" >&2
