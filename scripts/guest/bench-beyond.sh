#!/bin/bash
# Guest side of 'make bench-beyond'. Runs in the guest as root, from $RUN (a
# host folder mounted read-write). Writes there:
#   beyond.results  one line per run: "rep=<n> " + the line beyond_bench or
#                   napi_test printed (bench=...)
#   beyond.env      kernel, CPUs, memory, settings (key=value)
#   beyond.errors   the output of every run that failed (tooling errors only)
# Environment: BEYOND_BIN (beyond_bench), NAPI_BIN (napi_test, optional),
# BENCH_REPS (3), BENCH_SECS (2), BEYOND_PARTS ("flood epoll napi bdev"),
# FLOOD_QDS ("1 16 128"), EPOLL_FDS ("1 16"), BDEV_SECS (5), BDEV_SPAN_MB
# (512), BENCH_MEMCG_MB (64: the memory cgroup the bdev runs are in).
# Exit status 2 when any run failed, else 0; timing never fails.
RUN=$(pwd)
BIN=${BEYOND_BIN:-}
REPS=${BENCH_REPS:-3}
SECS=${BENCH_SECS:-2}
PARTS=${BEYOND_PARTS:-flood epoll napi bdev}
log() { echo "[guest] $*"; }
kmsg() { echo "beyond-bench: $*" > /dev/kmsg 2>/dev/null; }
errors=0
error() { log "ERROR: $*"; echo "$*" >> "$RUN/beyond.errors"; errors=$((errors + 1)); }

# it writes over /dev/vda: only ever in a virtme-ng guest
grep -q virtme /proc/cmdline || { log "not in a virtme-ng guest (it writes /dev/vda): refusing"; exit 2; }
[ -n "$BIN" ] && [ -x "$BIN" ] || { log "beyond_bench not found (BEYOND_BIN='$BIN')"; exit 2; }
case "$REPS" in ''|*[!0-9]*|0) log "bad BENCH_REPS '$REPS'"; exit 2 ;; esac
: > "$RUN/beyond.results"
rm -f "$RUN/beyond.errors"

{
	echo "kernel=$(uname -r)"
	echo "build=$(uname -v)"
	echo "kconfig=${BENCH_KCONFIG:-}"
	echo "cpus=$(nproc)"
	echo "mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
	echo "reps=$REPS"
	echo "secs=$SECS"
	echo "parts=$PARTS"
	echo "memcg_mb=${BENCH_MEMCG_MB:-64}"
} > "$RUN/beyond.env"

# one run: "$@" is the command; its stdout lines starting with bench= are kept
run() {
	local rep=$1 what=$2 out rc
	shift 2
	kmsg "$what rep=$rep"
	out=$("$@" 2> "$RUN/beyond-stderr.txt")
	rc=$?
	if [ "$rc" = 0 ] && grep -q '^bench=' <<< "$out"; then
		grep '^bench=' <<< "$out" | sed "s/^/rep=$rep /" >> "$RUN/beyond.results"
		log "$what rep=$rep: $(grep '^bench=' <<< "$out" | tr '\n' ' ')"
	else
		error "$what rep=$rep: exit $rc: $(tr '\n' ' ' < "$RUN/beyond-stderr.txt")$out"
	fi
}

has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

if has flood; then
	for r in $(seq 1 "$REPS"); do
		for qd in ${FLOOD_QDS:-1 16 128}; do
			run "$r" "flood qd=$qd" "$BIN" flood -q "$qd" -t "$SECS"
		done
	done
fi

if has epoll; then
	for r in $(seq 1 "$REPS"); do
		for n in ${EPOLL_FDS:-1 16}; do
			for pr in self thread; do
				popt=; [ "$pr" = thread ] && popt=-p
				for m in sys single multi; do
					run "$r" "epoll $m fds=$n producer=$pr" "$BIN" epoll -m "$m" -n "$n" $popt -t "$SECS"
				done
			done
		done
	done
fi

# napi_test counts the NAPI polls with NAPI_TEST_COUNT_POLLS=1 and prints
# "busy X ms/wait ... N polls/s busy" per variant; turned into bench= lines.
napi_run() {
	local out
	out=$(NAPI_TEST_COUNT_POLLS=1 timeout 300 "$NAPI_BIN" 2>&1)
	awk '
		/^# *(no waker|1 ms SCHED_FIFO waker):/ { w = ($2 == "no") ? "none" : "fifo_1ms" }
		/^# *busy [0-9.]+ ms\/wait/ && w != "" {
			busy = $3; wall = ""; pps = "-1"
			for (i = 1; i <= NF; i++) {
				if ($i == "wall") wall = $(i + 1)
				if ($(i + 1) == "polls/s") pps = $i
			}
			printf "bench=napi waker=%s busy_ms_wait=%s wall_ms_wait=%s polls_s=%s\n", w, busy, wall, pps
			w = ""
		}' <<< "$out"
	grep -q '^ok \|^not ok ' <<< "$out" || { echo "$out" >&2; return 1; }
	return 0
}
if has napi; then
	if [ -n "${NAPI_BIN:-}" ] && [ -x "$NAPI_BIN" ]; then
		for r in $(seq 1 "$REPS"); do
			run "$r" napi napi_run
		done
	else
		error "napi_test not found (NAPI_BIN='${NAPI_BIN:-}'): NAPI figures skipped"
	fi
fi

if has bdev; then
	if [ -b /dev/vda ]; then
		cg=/sys/fs/cgroup
		[ -e $cg/cgroup.controllers ] || mount -t cgroup2 none $cg 2>/dev/null
		echo +memory > $cg/cgroup.subtree_control 2>/dev/null
		mkdir -p $cg/iou-bench
		if echo "$((${BENCH_MEMCG_MB:-64} * 1024 * 1024))" > $cg/iou-bench/memory.max 2>/dev/null; then
			for r in $(seq 1 "$REPS"); do
				for op in write read; do
					for m in normal dontcache; do
						run "$r" "bdev $op $m" bash -c \
							'echo $$ > /sys/fs/cgroup/iou-bench/cgroup.procs && exec "$@"' _ \
							"$BIN" bdev -d /dev/vda -w "$op" -m "$m" -t "${BDEV_SECS:-5}" \
							-s "${BDEV_SPAN_MB:-512}"
					done
				done
			done
		else
			error "no memory cgroup (cgroup2 memory controller): bdev figures skipped"
		fi
	else
		error "no scratch disk (/dev/vda): bdev figures skipped"
	fi
fi

rm -f "$RUN/beyond-stderr.txt"
kmsg done
log "$(wc -l < "$RUN/beyond.results") results, $errors error(s)"
[ "$errors" = 0 ] || exit 2
exit 0
