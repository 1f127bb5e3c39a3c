#!/bin/bash
# Guest side of 'make test'. Runs in the guest as root, from $RUN (a host
# folder mounted read-write). Writes machine-readable results there:
#   kselftest.tap                     kselftest TAP output
#   liburing.<pass>.results           "name status seconds" per test
#                                     (status: pass fail skip timeout)
# Environment: KSFT (installed kselftests), LIBURING (liburing test dir),
# NOALARM (the alarm() shim for the tests listed as liburing-no-alarm),
# PHASES (kselftest liburing), LIBURING_TESTS (subset, names like fsync.t),
# HANDOFF_PASSES (sysctl values to run liburing with, when the sysctl exists).
# INJECT: faults that must turn the verdict red, to show that it can (see
# README.md): kmsg-warning, ksft-skip, ksft-remove, liburing-truncate.
RUN=$(pwd)
EXPECTED=$(dirname "$0")/../../tests/expected.txt
PHASES=${PHASES:-kselftest liburing}
T=${LIBURING_TIMEOUT:-60}
log() { echo "[guest] $*"; }

ip link set dev lo up 2>/dev/null
mkdir -p /tmp/iou
if [ -b /dev/vda ]; then
	mkfs.ext4 -q -F /dev/vda && mount /dev/vda /tmp/iou || { log "cannot mount scratch disk"; exit 2; }
	log "scratch: ext4 on /dev/vda"
else
	mount -t tmpfs -o size=1G tmpfs /tmp/iou
	log "scratch: tmpfs"
fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
kmsg() { echo "iou-test: $*" > /dev/kmsg 2>/dev/null; }

sysctl_file=/proc/sys/kernel/io_uring_handoff
if [ -e "$sysctl_file" ]; then passes=${HANDOFF_PASSES:-1 0}; else passes=base; fi
echo "$passes" > "$RUN/passes"
# set the sysctl and check that it took; the verdict fails on sysctl-failed
set_handoff() {
	[ "$1" = base ] && return 0
	echo "$1" > "$sysctl_file"
	[ "$(cat "$sysctl_file")" = "$1" ] && return 0
	echo "writing $1 to $sysctl_file left $(cat "$sysctl_file")" >> "$RUN/sysctl-failed"
	return 1
}
injected() { case " ${INJECT:-} " in *" $1 "*) kmsg "inject $1"; return 0 ;; esac; return 1; }

for phase in $PHASES; do
case $phase in
kselftest)
	for p in $passes; do
		set_handoff "$p" || continue
		rm -rf /tmp/iou/ksft; cp -a "$KSFT" /tmp/iou/ksft
		if injected ksft-remove; then
			# one program gone from the guest, binary and list entry
			rm -f /tmp/iou/ksft/io_uring_ops/napi_test
			sed -i '/:napi_test$/d' /tmp/iou/ksft/kselftest-list.txt
		fi
		# a series kselftest that finds no tracefs skips its tracepoint case
		injected ksft-skip && umount /sys/kernel/tracing
		log "kselftests (handoff=$p)"
		kmsg "kselftests handoff=$p"
		# Through a pipe: the runner writes each program's output by opening
		# /dev/stdout again, which on a regular file starts a second write
		# offset that overwrites the first; on a pipe both land in order.
		(cd /tmp/iou/ksft && ./run_kselftest.sh) 2>&1 | cat > "$RUN/kselftest.$p.tap"
		echo "# exit=${PIPESTATUS[0]}" >> "$RUN/kselftest.$p.tap"
		mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
		grep -E '^(not )?ok |^# Totals' "$RUN/kselftest.$p.tap" | tail -5
	done
	;;
liburing)
	for p in $passes; do
		set_handoff "$p" || continue
		rm -rf /tmp/iou/lu; mkdir -p /tmp/iou/lu
		cp -a "$LIBURING"/. /tmp/iou/lu/
		cd /tmp/iou/lu || exit 2
		res=$RUN/liburing.$p.results; : > "$res"
		# the output of each test that does not pass, kept off the console
		# (a test may print "BUG:" itself)
		outdir=$RUN/liburing.$p.out; rm -rf "$outdir"; mkdir -p "$outdir"
		if [ -n "$LIBURING_TESTS" ]; then tests=$LIBURING_TESTS; else tests=$(ls *.t); fi
		flaky=$(awk '$1 == "liburing-flaky" {print $2}' "$EXPECTED" 2>/dev/null | tr '\n' ' ')
		# TEST=SECONDS for the tests with a timeout of their own
		own_t=$(awk '$1 == "liburing-timeout" {print $2 "=" $3}' "$EXPECTED" 2>/dev/null | tr '\n' ' ')
		# tests whose alarm() watchdog is replaced by the timeout above
		noalarm=$(awk '$1 == "liburing-no-alarm" {print $2}' "$EXPECTED" 2>/dev/null | tr '\n' ' ')
		# TEST<TAB>PATTERN of the tests whose wall-clock check TCG cannot meet
		timing=$(sed -n 's/^liburing-timing \([^ ]*\) "\([^"]*\)".*/\1\t\2/p' "$EXPECTED" 2>/dev/null)
		n=$(echo $tests | wc -w); i=0
		log "liburing: $n tests (handoff=$p)"
		for t in $tests; do
			i=$((i + 1))
			kmsg "liburing $t handoff=$p"
			start=$(date +%s)
			# a test listed as flaky (tests/expected.txt, with the reason)
			# runs up to LIBURING_FLAKY_RUNS times until it passes
			runs=1; case " $flaky " in *" $t "*) runs=${LIBURING_FLAKY_RUNS:-3} ;; esac
			# a timing test also runs until it passes; a failure whose output
			# matches its pattern is "timing", any other failure is "fail"
			tpat=$(printf '%s\n' "$timing" | awk -F '\t' -v t="$t" '$1 == t {print $2; exit}')
			[ -z "$tpat" ] || runs=${LIBURING_FLAKY_RUNS:-3}
			tt=$T; for x in $own_t; do [ "${x%%=*}" = "$t" ] && tt=${x#*=}; done
			pre=; case " $noalarm " in *" $t "*) pre=${NOALARM:-/nonexistent} ;; esac
			for try in $(seq 1 "$runs"); do
				if [ -n "$pre" ] && [ ! -f "$pre" ]; then
					echo "alarm() shim '$pre' missing: run 'make userspace'" > "$RUN/lu-out.txt"
					rc=1
				elif [ -n "$pre" ]; then
					echo "(alarm() is a no-op: LD_PRELOAD=$pre, tests/expected.txt)" > "$RUN/lu-out.txt"
					LD_PRELOAD=$pre timeout -s INT -k 10 "$tt" "./$t" >> "$RUN/lu-out.txt" 2>&1
					rc=$?
				else
					timeout -s INT -k 10 "$tt" "./$t" > "$RUN/lu-out.txt" 2>&1
					rc=$?
				fi
				case $rc in
				0) st=pass ;; 77) st=skip ;; 124|137) st=timeout ;; *) st=fail ;;
				esac
				again=$st
				if [ -n "$tpat" ]; then
					# only a failed timing check is run again
					[ "$st" = fail ] && grep -Eq -- "$tpat" "$RUN/lu-out.txt" && st=timing
					[ "$st" = timing ] || again=pass
				fi
				# what else was running, for a failure that is only slowness
				if [ "$st" != pass ] && [ "$st" != skip ]; then
					{ echo "--- guest after the run (rc=$rc, timeout ${tt}s): loadavg $(cat /proc/loadavg)"
					  ps -eo pid,stat,time,wchan:24,comm --sort=-time | head -12; } >> "$RUN/lu-out.txt" 2>&1
				fi
				[ "$again" != pass ] && [ "$again" != skip ] && [ "$try" != "$runs" ] || break
				# the last try's output is kept below, like any test's
				cp "$RUN/lu-out.txt" "$outdir/$t.run$try.txt"
				log "[$i/$n] $t: $st (rc=$rc), $([ -n "$tpat" ] && echo timing || echo flaky): run $((try + 1)) of $runs"
			done
			secs=$(( $(date +%s) - start ))
			echo "$t $st $secs runs=$try" >> "$res"
			if [ "$st" != pass ]; then
				cp "$RUN/lu-out.txt" "$outdir/$t.txt"
				log "[$i/$n] $t: $st (rc=$rc, ${secs}s; output: liburing.$p.out/$t.txt)"
			fi
		done
		cd "$RUN"
		if injected kmsg-warning; then
			# a NUL byte on the console, then a splat after it
			printf 'iou-inject\0\n' > /dev/console
			echo "WARNING: CPU: 0 PID: $$ injected by INJECT=kmsg-warning" > /dev/kmsg
		fi
		if injected liburing-truncate; then
			# the first 20 tests, or the first half of a shorter list
			keep=$(( $(wc -l < "$res") / 2 )); [ "$keep" -le 20 ] || keep=20
			head -n "$keep" "$res" > "$res.cut"; mv "$res.cut" "$res"
		fi
		log "liburing (handoff=$p): $(awk '{print $2}' "$res" | sort | uniq -c | tr '\n' ' ')"
	done
	;;
esac
done
kmsg done
exit 0
