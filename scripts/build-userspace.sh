#!/usr/bin/env bash
# Build what the guest runs: the liburing test suite (Debian source package)
# and the series' kselftests, installed under $CACHE; for ARCH=arm64
# cross-compiled, with the guest's root filesystem (scripts/rootfs.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# arm64: the guest's root filesystem first, then everything cross-compiled
[ "$ARCH" = x86_64 ] || bash "$REPO/scripts/rootfs.sh"
CC_G=$(guest_cc)
if [ "$ARCH" = x86_64 ]; then
	CXX_G=g++
else
	need_tool "$CC_G" "gcc-$(echo "$CC_G" | sed 's/-gcc$//; s/_/-/g')"
	CXX_G=${CC_G%gcc}g++
	need_tool "$CXX_G" "g++-$(echo "$CC_G" | sed 's/-gcc$//; s/_/-/g')"
fi
[ -f "$CACHE/liburing/.complete" ] || die "liburing source missing: run 'make fetch'"
LU=$(liburing_src)
if [ "$ARCH" != x86_64 ] && [ ! -f "$LU/.iou-built" ]; then
	# a copy of the source per architecture, built in place like the host's
	rm -rf "${LU%/src}"; mkdir -p "${LU%/src}"
	cp -a "$CACHE/liburing/src" "$LU"
	cp "$CACHE/liburing/.version" "${LU%/src}/.version"
	(cd "$LU" && make -s clean >/dev/null 2>&1; rm -f config-host.h config-host.mak .iou-built; true)
fi
if [ ! -f "$LU/.iou-built" ]; then
	info "building liburing $(cat "$CACHE/liburing/.version") test suite ($ARCH)"
	(cd "$LU" && ./configure --cc="$CC_G" --cxx="$CXX_G" >/dev/null && make -s -j"$(nproc)" -C src >/dev/null && \
		make -s -j"$(nproc)" -C test >/dev/null 2>"$LU/test-build.log") || \
		die "liburing build failed (see $LU/test-build.log)"
	touch "$LU/.iou-built"
fi
info "liburing: $(ls "$LU"/test/*.t | wc -l) test programs ($ARCH)"
# the alarm() shim for the tests listed as liburing-no-alarm (tests/no-alarm.c)
NA=${LU%/src}/no-alarm.so
if [ ! -f "$NA" ] || [ "$REPO/tests/no-alarm.c" -nt "$NA" ]; then
	"$CC_G" -shared -fPIC -O2 -Wall -Werror -o "$NA.tmp" "$REPO/tests/no-alarm.c" || \
		die "building $NA from tests/no-alarm.c failed"
	mv "$NA.tmp" "$NA"
fi

# kselftests of the series, against the work tree's uapi headers
B=$(build_dir)
KS=$(kselftest_dir)
targets=""
for d in io_uring_handoff io_uring_ops; do
	[ ! -d "$WORK/tools/testing/selftests/$d" ] || targets+=" $d"
done
if [ -z "$targets" ]; then
	warn "none of the series' kselftests in $WORK (base tree?): skipped"
	exit 0
fi
cross=()
[ "$ARCH" = x86_64 ] || cross=(ARCH="$ARCH" CROSS_COMPILE="${CC_G%gcc}")
make -s -C "$WORK" O="$B" "${cross[@]}" headers >/dev/null 2>&1 || die "make headers failed in $B"
rm -rf "$KS.tmp"
make -s -C "$WORK/tools/testing/selftests" O="$B/kselftest" "${cross[@]}" KHDR_INCLUDES="-isystem $B/usr/include" \
	TARGETS="${targets# }" install INSTALL_PATH="$KS.tmp" > "$B/kselftest-build.log" 2>&1 || \
	{ tail -20 "$B/kselftest-build.log"; die "kselftest build failed (see $B/kselftest-build.log)"; }
# the selftests' install goes on past a program that failed to build
if grep -q '\*\*\* \[' "$B/kselftest-build.log"; then
	grep -B5 '\*\*\* \[' "$B/kselftest-build.log" | head -30
	die "kselftest build failed (see $B/kselftest-build.log)"
fi
rm -rf "$KS"; mv "$KS.tmp" "$KS"
info "kselftests installed in $KS"
