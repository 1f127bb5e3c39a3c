#!/bin/bash
# Guest side of 'make bench'. Runs in the guest as root, from $RUN (a host
# folder mounted read-write). Writes there:
#   bench.results   one line per run: "pass=<sysctl> rep=<n> " + iou_bench's line
#   bench.env       kernel, CPUs, passes, cases (key=value)
#   bench.errors    the output of every run that failed (tooling errors only)
# Environment: BENCH_BIN (iou_bench), BENCH_KCONFIG (for the record), BENCH_CASES ("op:fs:qd ..."; fs is
# tmpfs or ext4), BENCH_REPS (3), BENCH_SECS (2), HANDOFF_PASSES ("0 1":
# values written to kernel.io_uring_handoff; without the sysctl there is one
# pass, "base"). Repetitions are rounds over all cases, passes interleaved
# within each, so drift affects them alike. Exit status 2 when any run failed, else 0; timing never
# fails.
RUN=$(pwd)
BIN=${BENCH_BIN:-}
CASES=${BENCH_CASES:-"nop:tmpfs:1 sys-fsync:tmpfs:1 fsync:tmpfs:1 sys-statx:tmpfs:1 statx:tmpfs:1"}
REPS=${BENCH_REPS:-3}
SECS=${BENCH_SECS:-2}
TMPFS_DIR=/tmp/iou-bench-tmpfs
EXT4_DIR=/tmp/iou-bench-ext4
log() { echo "[guest] $*"; }
kmsg() { echo "iou-bench: $*" > /dev/kmsg 2>/dev/null; }
errors=0
error() { log "ERROR: $*"; echo "$*" >> "$RUN/bench.errors"; errors=$((errors + 1)); }

# it formats /dev/vda: only ever in a virtme-ng guest
grep -q virtme /proc/cmdline || { log "not in a virtme-ng guest (it formats /dev/vda): refusing"; exit 2; }
[ -n "$BIN" ] && [ -x "$BIN" ] || { log "iou_bench not found (BENCH_BIN='$BIN')"; exit 2; }
case "$REPS" in ''|*[!0-9]*|0) log "bad BENCH_REPS '$REPS'"; exit 2 ;; esac
: > "$RUN/bench.results"
rm -f "$RUN/bench.errors"

ip link set dev lo up 2>/dev/null
mkdir -p "$TMPFS_DIR" "$EXT4_DIR"
mount -t tmpfs -o size=512M tmpfs "$TMPFS_DIR" || { log "cannot mount tmpfs on $TMPFS_DIR"; exit 2; }
have_ext4=0
if [ -b /dev/vda ]; then
	if mkfs.ext4 -q -F /dev/vda && mount /dev/vda "$EXT4_DIR"; then
		have_ext4=1
	else
		error "cannot make or mount ext4 on /dev/vda"
	fi
else
	case " $CASES " in *:ext4:*) error "no scratch disk (/dev/vda): ext4 cases skipped" ;; esac
fi

sysctl_file=/proc/sys/kernel/io_uring_handoff
if [ -e "$sysctl_file" ]; then
	passes=${HANDOFF_PASSES:-0 1}
	orig=$(cat "$sysctl_file")
else
	passes=base
	log "no $sysctl_file in this kernel: one pass, labelled 'base'"
fi

ncases=$(echo $CASES | wc -w)
{
	echo "kernel=$(uname -r)"
	echo "build=$(uname -v)"
	echo "kconfig=${BENCH_KCONFIG:-}"
	echo "arch=$(uname -m | sed 's/aarch64/arm64/')"
	echo "cpus=$(nproc)"
	echo "mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
	echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
	echo "passes=$passes"
	echo "reps=$REPS"
	echo "secs=$SECS"
	echo "cases=$CASES"
} > "$RUN/bench.env"
log "$ncases cases x passes ($passes) x $REPS reps, ${SECS}s each"

# the valid cases, each checked once
valid=()
for c in $CASES; do
	IFS=: read -r op fs qd extra <<< "$c"
	if [ -z "$op" ] || [ -z "$fs" ] || [ -n "$extra" ] || ! [[ "$qd" =~ ^[0-9]+$ ]]; then
		error "bad case '$c' (want op:fs:qd)"; continue
	fi
	case "$fs" in
	tmpfs|ext4) ;;
	*) error "case '$c': unknown fs '$fs' (tmpfs or ext4)"; continue ;;
	esac
	[ "$fs" != ext4 ] || [ "$have_ext4" = 1 ] || continue
	valid+=("$c")
done

# Rounds: repetition r runs every case once, each case's passes back to back.
# The host's speed drifts by tens of percent over minutes under TCG; in one
# round a case, its syscall loop and the NOP reference are seconds apart, so
# the report can compare them round by round (the paired % of L).
for r in $(seq 1 "$REPS"); do
	i=0
	for c in "${valid[@]}"; do
		i=$((i + 1))
		IFS=: read -r op fs qd <<< "$c"
		case "$fs" in tmpfs) dir=$TMPFS_DIR ;; ext4) dir=$EXT4_DIR ;; esac
		for p in $passes; do
			if [ "$p" != base ]; then
				echo "$p" > "$sysctl_file" || { error "cannot write $p to $sysctl_file"; continue; }
			fi
			sync
			kmsg "$c pass=$p rep=$r"
			out=$("$BIN" -o "$op" -d "$dir" -q "$qd" -t "$SECS" 2> "$RUN/bench-stderr.txt")
			rc=$?
			if [ "$rc" = 0 ] && [[ "$out" == op=* ]]; then
				echo "pass=$p rep=$r $out" >> "$RUN/bench.results"
				log "[$i/$ncases] pass=$p rep=$r $out"
			else
				error "[$i/$ncases] $c pass=$p rep=$r: iou_bench exit $rc: $(tr '\n' ' ' < "$RUN/bench-stderr.txt")$out"
			fi
		done
	done
done
rm -f "$RUN/bench-stderr.txt"

[ -z "${orig:-}" ] || echo "$orig" > "$sysctl_file"
umount "$EXT4_DIR" 2>/dev/null
umount "$TMPFS_DIR" 2>/dev/null
kmsg done
log "$(wc -l < "$RUN/bench.results") results, $errors error(s)"
[ "$errors" = 0 ] || exit 2
exit 0
