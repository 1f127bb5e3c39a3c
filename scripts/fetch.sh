#!/usr/bin/env bash
# Download and unpack the base kernel (Debian linux-source-7.3, any 7.3.x) and
# the liburing source package into the cache. Idempotent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_tool apt-get apt
need_tool dpkg-deb dpkg
need_tool xz xz-utils
DL=$CACHE/downloads
mkdir -p "$DL"

# --- linux-source-7.3 ---------------------------------------------------------------
if [ ! -f "$BASE_DIR/.complete" ]; then
	need_root_or_sudo
	add_pinned_suite
	ver=$(apt-cache policy linux-source-7.3 | awk '/Candidate:/ {print $2}')
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || \
		die "linux-source-7.3 is not available from apt (is $PIN_SUITE reachable? try 'apt-get update')"
	case "$ver" in 7.3.*) ;; *) die "linux-source-7.3 candidate '$ver' is not a 7.3.x" ;; esac
	if ! ls "$DL"/linux-source-7.3_*.deb >/dev/null 2>&1; then
		info "downloading linux-source-7.3 $ver"
		(cd "$DL" && apt-get download "linux-source-7.3=$ver") || die "apt-get download linux-source-7.3 failed"
	fi
	deb=$(ls "$DL"/linux-source-7.3_*.deb | tail -n1)
	rm -rf "$BASE_DIR.tmp"; mkdir -p "$BASE_DIR.tmp"
	info "unpacking $(basename "$deb")"
	dpkg-deb -x "$deb" "$BASE_DIR.tmp/deb"
	tar -C "$BASE_DIR.tmp" -xf "$BASE_DIR.tmp"/deb/usr/src/linux-source-7.3.tar.xz
	rm -rf "$BASE_DIR.tmp/deb"
	src=$(ls -d "$BASE_DIR.tmp"/linux-source-7.3)
	sub=$(sed -n 's/^SUBLEVEL = //p' "$src/Makefile")
	echo "linux-source-7.3 $(dpkg-deb -f "$deb" Version) (7.3.$sub)" > "$src/.iou-base-version"
	rm -rf "$BASE_DIR"; mv "$src" "$BASE_DIR"; rmdir "$BASE_DIR.tmp"
	touch "$BASE_DIR/.complete"
fi
info "base: $(cat "$BASE_DIR/.iou-base-version")"

# --- liburing source ---------------------------------------------------------------
LU=$CACHE/liburing
if [ ! -f "$LU/.complete" ]; then
	need_root_or_sudo
	add_pinned_suite
	need_tool dpkg-source dpkg-dev
	lver=$(apt-cache showsrc liburing | awk '/^Version:/ {print $2}' | grep "^$LIBURING_VERSION" | sort -V | tail -n1)
	[ -n "$lver" ] || die "liburing $LIBURING_VERSION source package not found (deb-src for unstable/testing missing?)"
	rm -rf "$LU.tmp"; mkdir -p "$LU.tmp"
	info "downloading liburing source $lver"
	(cd "$LU.tmp" && apt-get source --download-only "liburing=$lver" >/dev/null) || die "apt-get source liburing=$lver failed"
	(cd "$LU.tmp" && dpkg-source --no-check -x liburing_*.dsc src >/dev/null) || die "dpkg-source -x liburing failed"
	rm -rf "$LU"; mv "$LU.tmp" "$LU"
	echo "liburing $lver" > "$LU/.version"
	touch "$LU/.complete"
fi
info "liburing: $(cat "$LU/.version")"
