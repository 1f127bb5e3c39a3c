#!/usr/bin/env bash
# Build what the guest runs: the liburing test suite (Debian source package)
# and the series' kselftests, installed under $CACHE.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

LU=$CACHE/liburing/src
[ -f "$CACHE/liburing/.complete" ] || die "liburing source missing: run 'make fetch'"
if [ ! -f "$LU/.iou-built" ]; then
	info "building liburing $(cat "$CACHE/liburing/.version") test suite"
	(cd "$LU" && ./configure >/dev/null && make -s -j"$(nproc)" -C src >/dev/null && \
		make -s -j"$(nproc)" -C test >/dev/null 2>"$LU/test-build.log") || \
		die "liburing build failed (see $LU/test-build.log)"
	touch "$LU/.iou-built"
fi
info "liburing: $(ls "$LU"/test/*.t | wc -l) test programs"
# the alarm() shim for the tests listed as liburing-no-alarm (tests/no-alarm.c)
NA=$CACHE/liburing/no-alarm.so
if [ ! -f "$NA" ] || [ "$REPO/tests/no-alarm.c" -nt "$NA" ]; then
	cc -shared -fPIC -O2 -Wall -Werror -o "$NA.tmp" "$REPO/tests/no-alarm.c" || \
		die "building $NA from tests/no-alarm.c failed"
	mv "$NA.tmp" "$NA"
fi

# kselftests of the series, against the work tree's uapi headers
B=$(build_dir)
KS=${KSFT_DIR:-$CACHE/kselftest}
targets=""
for d in io_uring_handoff io_uring_ops; do
	[ ! -d "$WORK/tools/testing/selftests/$d" ] || targets+=" $d"
done
if [ -z "$targets" ]; then
	warn "none of the series' kselftests in $WORK (base tree?): skipped"
	exit 0
fi
make -s -C "$WORK" O="$B" headers >/dev/null 2>&1 || die "make headers failed in $B"
rm -rf "$KS.tmp"
make -s -C "$WORK/tools/testing/selftests" O="$B/kselftest" KHDR_INCLUDES="-isystem $B/usr/include" \
	TARGETS="${targets# }" install INSTALL_PATH="$KS.tmp" > "$B/kselftest-build.log" 2>&1 || \
	{ tail -20 "$B/kselftest-build.log"; die "kselftest build failed (see $B/kselftest-build.log)"; }
rm -rf "$KS"; mv "$KS.tmp" "$KS"
info "kselftests installed in $KS"
