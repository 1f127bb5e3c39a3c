#!/usr/bin/env bash
# 'make bench': boot the built kernel ($KCONFIG, default test) once and run
# iou_bench (bench/iou_bench.c) with kernel.io_uring_handoff at 0 and at 1,
# interleaved; then write bench.md and bench.svg into the run folder
# ($OUT/bench/<time>/) and print the tables.
# BENCH=full selects the full matrix; BENCH_CASES="op:fs:qd ..." any list;
# BENCH_REPS (5), BENCH_SECS (2), HANDOFF_PASSES ("0 1"), BENCH_TIMEOUT (s).
# Exit status: non-zero only on a tooling error (build, boot, hang, a failed
# run, no report); the figures themselves never fail.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# --- the case lists (op:fs:qd; sys-<op> is the synchronous loop, QD 1) -----------
# the default: every QD1 row #12 asks of the handoff (fsync, statx, fadvise,
# renameat, openat on tmpfs), each next to its synchronous loop
default_cases="nop:tmpfs:1"
for c in fsync statx fadvise renameat openat; do
	default_cases+=" sys-$c:tmpfs:1 $c:tmpfs:1"
done
full_cases="nop:tmpfs:1 nop:ext4:1"
for c in fsync:tmpfs fsync:ext4 statx:tmpfs statx:ext4 fadvise:ext4 renameat:tmpfs \
	renameat:ext4 openat:tmpfs openat:ext4 splice:ext4; do
	full_cases+=" sys-$c:1"
	for qd in 1 8 32; do full_cases+=" $c:$qd"; done
done
case "${BENCH:-}" in
'') cases=$default_cases ;;
full) cases=$full_cases ;;
*) die "BENCH='$BENCH': use BENCH=full, or BENCH_CASES='op:fs:qd ...'" ;;
esac
cases=${BENCH_CASES:-$cases}
reps=${BENCH_REPS:-5}
secs=${BENCH_SECS:-2}
case "$reps" in ''|*[!0-9]*|0) die "BENCH_REPS='$reps': a positive number" ;; esac
[[ "$secs" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_SECS='$secs': seconds"

# --- iou_bench, built on the host (the guest sees the host's / over 9p) ---------
CC_G=$(guest_cc)
need_tool "$CC_G" "$([ "$ARCH" = x86_64 ] && echo gcc || echo gcc-aarch64-linux-gnu)"
need_tool python3 python3
SRC=$REPO/bench/iou_bench.c
BIN=$(bench_bin_dir)/iou_bench
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ] || [ "$REPO/bench/ring.h" -nt "$BIN" ]; then
	info "building $BIN"
	mkdir -p "$(bench_bin_dir)"
	"$CC_G" -O2 -Wall -Wextra -o "$BIN.tmp" "$SRC" || die "iou_bench build failed"
	mv "$BIN.tmp" "$BIN"
fi

B=$(build_dir)
[ -f "$(kernel_image "$B")" ] || die "no $ARCH kernel in $B: run 'make build ARCH=$ARCH' first"
RUN=$OUT/bench/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RUN"
export RUN

n=$(echo $cases | wc -w)
npass=$(echo ${HANDOFF_PASSES:-0 1} | wc -w)
# per run: the measured time, 0.2 s warmup, start-up and sync; plus the boot
timeout_s=${BENCH_TIMEOUT:-$(awk -v n="$n" -v p="$npass" -v r="$reps" -v s="$secs" \
	'BEGIN {printf "%d", n * p * r * (s + 4) + 300}')}
info "bench: $n cases x $npass passes x $reps reps x ${secs}s (timeout ${timeout_s}s)"

args="BENCH_BIN='$BIN' BENCH_CASES='$cases' BENCH_REPS='$reps' BENCH_SECS='$secs' BENCH_KCONFIG='${KCONFIG:-test}'"
[ -z "${HANDOFF_PASSES:-}" ] || args+=" HANDOFF_PASSES='$HANDOFF_PASSES'"

rc=0
run_guest_bench "$timeout_s" "$args bash $REPO/scripts/guest/bench.sh" bench || rc=1
echo
if [ -s "$RUN/bench.results" ]; then
	bash "$REPO/scripts/bench-report.sh" "$RUN" || rc=1
	echo
	info "report: $RUN/bench.md"
	info "chart:  $RUN/bench.svg"
else
	warn "no results in $RUN/bench.results"
	rc=1
fi
exit "$rc"
