#!/usr/bin/env bash
# 'make bench-beyond': figures for the pieces next to the handoff, in one
# boot: an io-wq flood of IOSQE_ASYNC NOPs, epoll_wait(2) vs single-shot vs
# multishot IORING_OP_EPOLL_WAIT, the NAPI busy poll of napi_test, and
# normal vs RWF_DONTCACHE buffered I/O on the virtio scratch disk in a small
# memory cgroup. Writes beyond.md into $OUT/bench-beyond/<time>/ and prints it.
#
# BENCH_KERNEL=base runs the same programs on the unpatched base kernel (its
# own work tree and build folder, same config) for the "before" figures;
# a mode the base kernel refuses is reported as such.
# BENCH_REPS (3), BENCH_SECS (2), BEYOND_PARTS ("flood epoll napi bdev"),
# FLOOD_QDS, EPOLL_FDS, BDEV_SECS (5), BDEV_SPAN_MB (512), BENCH_MEMCG_MB (64),
# BENCH_TIMEOUT (s). Exit status: non-zero only on a tooling error; the
# figures never fail.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

reps=${BENCH_REPS:-3}
secs=${BENCH_SECS:-2}
case "$reps" in ''|*[!0-9]*|0) die "BENCH_REPS='$reps': a positive number" ;; esac
[[ "$secs" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_SECS='$secs': seconds"
parts=${BEYOND_PARTS:-flood epoll napi bdev}
for p in $parts; do
	case "$p" in flood|epoll|napi|bdev) ;; *) die "BEYOND_PARTS: unknown part '$p' (flood epoll napi bdev)" ;; esac
done
CC_G=$(guest_cc)
need_tool "$CC_G" "$([ "$ARCH" = x86_64 ] && echo gcc || echo gcc-aarch64-linux-gnu)"
need_tool python3 python3

B=$(build_dir)
[ -f "$(kernel_image "$B")" ] || die "no $ARCH kernel in $B: run 'make build ARCH=$ARCH' first"
[ -f "$B/usr/include/linux/io_uring.h" ] || die "no uapi headers in $B/usr/include: run 'make userspace'"
NAPI_BIN=$(kselftest_dir)/io_uring_ops/napi_test

# --- beyond_bench, built on the host against the series' uapi headers ----------
BIN=$(bench_bin_dir)/beyond_bench
if [ ! -x "$BIN" ] || [ "$REPO/bench/beyond_bench.c" -nt "$BIN" ] || [ "$REPO/bench/ring.h" -nt "$BIN" ] ||
   [ "$B/usr/include/linux/io_uring.h" -nt "$BIN" ]; then
	info "building $BIN"
	mkdir -p "$(bench_bin_dir)"
	"$CC_G" -O2 -Wall -Wextra -isystem "$B/usr/include" -o "$BIN.tmp" "$REPO/bench/beyond_bench.c" -lpthread ||
		die "beyond_bench build failed"
	mv "$BIN.tmp" "$BIN"
fi

# --- the kernel: the series, or the unpatched base with the same config ---------
case "${BENCH_KERNEL:-series}" in
series) ;;
base)
	BT=$CACHE/base-tree
	if [ ! -d "$BT" ]; then
		git -C "$WORK" worktree prune
		git -C "$WORK" worktree add -q --detach "$BT" base
	fi
	echo base > "$BT/.iou-series-version"
	B=$CACHE/build-base$(arch_sfx)-${KCONFIG:-test}
	info "base kernel ($KCONFIG config) in $B"
	WORK=$BT BUILD_DIR=$B ALLOW_MISSING_CONFIG=1 bash "$REPO/scripts/build.sh"
	export BUILD_DIR=$B
	;;
*) die "BENCH_KERNEL='$BENCH_KERNEL': series or base" ;;
esac

RUN=$OUT/bench-beyond/$(date +%Y%m%d-%H%M%S)${BENCH_KERNEL:+-$BENCH_KERNEL}
mkdir -p "$RUN"
export RUN

# per rep: flood 3 x (secs+1), epoll 12 x (secs+1), napi ~20 s, bdev 4 x (bdev_secs+15)
bs=${BDEV_SECS:-5}
timeout_s=${BENCH_TIMEOUT:-$(awk -v r="$reps" -v s="$secs" -v b="$bs" \
	'BEGIN {printf "%d", r * (15 * (s + 1) + 30 + 4 * (b + 15)) + 300}')}
info "bench-beyond: parts '$parts', $reps reps (timeout ${timeout_s}s)"

args="BEYOND_BIN='$BIN' NAPI_BIN='$NAPI_BIN' BENCH_REPS='$reps' BENCH_SECS='$secs' BEYOND_PARTS='$parts' BENCH_KCONFIG='${KCONFIG:-test}'"
for v in FLOOD_QDS EPOLL_FDS BDEV_SECS BDEV_SPAN_MB BENCH_MEMCG_MB; do
	[ -z "${!v:-}" ] || args+=" $v='${!v}'"
done

rc=0
run_guest_bench "$timeout_s" "$args bash $REPO/scripts/guest/bench-beyond.sh" beyond || rc=1
echo
if [ -s "$RUN/beyond.results" ]; then
	python3 "$REPO/scripts/bench-beyond-report.py" "$RUN" > "$RUN/beyond.md" || rc=1
	cat "$RUN/beyond.md"
	echo
	info "report: $RUN/beyond.md"
else
	warn "no results in $RUN/beyond.results"
	rc=1
fi
exit "$rc"
