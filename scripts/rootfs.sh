#!/usr/bin/env bash
# The root filesystem of a foreign-architecture guest (ARCH=arm64), from
# Debian's packages: debootstrap's first stage (download and unpack, no
# maintainer scripts, so no emulator on the host) of the machine's own
# release and mirror, plus what the guest scripts run. Built once into
# $CACHE/rootfs-$ARCH; rebuilt when the package list below changes.
# The x86_64 guest runs from the host's own root and needs none of this.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$ARCH" != x86_64 ] || exit 0
# what scripts/guest/*.sh and the tests run beyond the minbase set (bash,
# coreutils, util-linux, grep, sed, mawk, findutils): ip, mkfs.ext4, ps, and
# busybox, which virtme-ng's initramfs takes from the guest's root
include=busybox-static,iproute2,e2fsprogs,procps,kmod
R=$(rootfs_dir)
stamp="4 debootstrap --variant=minbase --include=$include"
[ "$(cat "$R/.iou-rootfs" 2>/dev/null)" != "$stamp" ] || { info "rootfs: $R"; exit 0; }

need_root_or_sudo
need_tool debootstrap debootstrap
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || die "cannot tell this machine's Debian release from /etc/os-release"
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || die "cannot find the machine's Debian mirror in /etc/apt"

info "building the $ARCH guest root ($suite from $mirror) in $R"
$SUDO rm -rf "$R.tmp"
$SUDO debootstrap --foreign --arch="$(debian_arch)" --variant=minbase --include="$include" \
	"$suite" "$R.tmp" "$mirror" > "$CACHE/rootfs-$ARCH.log" 2>&1 || \
	{ tail -5 "$CACHE/rootfs-$ARCH.log"; die "debootstrap failed, full log: $CACHE/rootfs-$ARCH.log"; }
# The first stage unpacks only the packages the second stage needs to run;
# the second runs the guest's binaries, which this host can't. Unpack the
# rest the same way; nothing here needs a maintainer script to work. Not
# with dpkg-deb -x: its tar would replace the merged-/usr symlinks (/bin,
# /lib, /sbin) with directories.
for deb in "$R.tmp"/var/cache/apt/archives/*.deb; do
	dpkg-deb --fsys-tarfile "$deb" | $SUDO tar -C "$R.tmp" --keep-directory-symlink -xf - || \
		die "unpacking $(basename "$deb") failed"
done
# The first stage can leave /proc a symlink to the host's /proc; the guest
# mounts its own on these, and virtme-ng mounts overlays on /opt and /srv.
for d in proc sys dev run tmp opt srv; do
	[ ! -L "$R.tmp/$d" ] || $SUDO rm -f "$R.tmp/$d"
	$SUDO mkdir -p "$R.tmp/$d"
done
# what maintainer scripts would set up that the guest scripts use: awk
# (update-alternatives, mawk's postinst), poweroff
[ -e "$R.tmp/usr/bin/awk" ] || $SUDO ln -s mawk "$R.tmp/usr/bin/awk"
# virtme-ng's init powers the guest off with poweroff -f, which minbase lacks
[ -e "$R.tmp/sbin/poweroff" ] || $SUDO ln -s /bin/busybox "$R.tmp/sbin/poweroff"
# what base-passwd's maintainer script would install
for f in passwd group; do
	[ -s "$R.tmp/etc/$f" ] || $SUDO cp "$R.tmp/usr/share/base-passwd/$f.master" "$R.tmp/etc/$f"
done
$SUDO rm -rf "$R.tmp/var/cache/apt/archives"/*.deb "$R.tmp/debootstrap"
echo "$stamp" | $SUDO tee "$R.tmp/.iou-rootfs" >/dev/null
$SUDO rm -rf "$R"; $SUDO mv "$R.tmp" "$R"
info "rootfs: $R ($(du -sh "$R" | cut -f1))"
