#!/usr/bin/env bash
# Boot the built kernel in virtme-ng (TCG) and run one command in the guest.
#   vm.sh [--disk] [--append 'kopts'] -- 'command'
# The guest writes the command's stdout, stderr and exit status into a
# host folder ($RUN, kept under $OUT/vm/), which is what we trust; vng's
# own exit status is not (it can return 255 for a command that ran).
# The full kernel console is kept in $RUN/console.log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

disk=0 append=() mem=${VM_MEM:-2G} cpus=${VM_CPUS:-2}
while [ $# -gt 0 ]; do
	case "$1" in
	--disk) disk=1 ;;
	--append) append+=(-a "$2"); shift ;;
	--) shift; break ;;
	*) break ;;
	esac
	shift
done
[ $# -gt 0 ] || die "usage: vm.sh [--disk] [--append OPTS] -- COMMAND"
need_tool vng "pip:virtme-ng $VNG_VERSION"
need_tool qemu-system-x86_64 qemu-system-x86
B=$(build_dir)
[ -f "$B/arch/x86/boot/bzImage" ] || die "no kernel in $B: run 'make build' first"

RUN=${RUN:-$OUT/vm/$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$RUN"
printf '%s\n' "$*" > "$RUN/cmd.sh"
rm -f "$RUN/status"
disk_args=()
if [ "$disk" = 1 ]; then
	img=$CACHE/scratch.img
	[ -f "$img" ] || truncate -s 8G "$img"
	disk_args=(--disk "$img")
fi

timeout_s=${VM_TIMEOUT:-600}
# Multi-threaded TCG (one host thread per vCPU) can run a stale translation
# of a site the kernel is live-patching with int3, seen as "Oops: int3" in
# sched_clock_cpu() when sched_clock is marked stable during boot (2 boots
# in 11 here). Such a boot never reaches the command: it is retried, and
# its console is kept. A panic that repeats fails. Single-threaded TCG
# (VM_TCG_THREAD=single) avoids the race but slows multi-threaded tests
# enough to change timing-sensitive liburing results (futex.t, iowait.t).
attempts=${VM_BOOT_ATTEMPTS:-3}
for attempt in $(seq 1 "$attempts"); do
	info "booting $(cat "$B/include/config/kernel.release") (timeout ${timeout_s}s, results in $RUN)"
	rm -f "$RUN/started" "$RUN/status"
	set +e
	# The guest runs from the host's filesystem (read-only over 9p); $RUN is writable.
	(cd "$RUN" && timeout -k 30 "$timeout_s" vng --run "$B" -S --force-9p --disable-kvm \
		--cpus "$cpus" -m "$mem" -v --rwdir "$RUN" "${disk_args[@]}" "${append[@]}" \
		--qemu-opts="-accel tcg,thread=${VM_TCG_THREAD:-multi}" \
		--exec "bash $REPO/scripts/guest/run-cmd.sh $RUN" </dev/null 2>"$RUN/console.log" \
		| tee "$RUN/live.log")
	vrc=${PIPESTATUS[0]}
	set -e
	if [ -f "$RUN/started" ]; then
		# The same race can hit a site patched at run time (a tracepoint or
		# static key switched on by a test). Only that signature is retried,
		# from the start, with the partial results set aside.
		[ ! -f "$RUN/status" ] && [ "$attempt" -lt "$attempts" ] &&
			grep -q 'Oops: int3' "$RUN/console.log" || break
		mkdir -p "$RUN/crashed-$attempt"
		find "$RUN" -maxdepth 1 -type f ! -name cmd.sh ! -name 'console.*' \
			-exec mv -t "$RUN/crashed-$attempt" {} +
		cp "$RUN/console.log" "$RUN/console.crashed-$attempt.log"
		warn "run $attempt crashed in the guest: $(grep -m1 'Oops: int3' "$RUN/console.log"); retrying (TCG text-patching race)"
		continue
	fi
	# a boot that hangs is reported, not retried
	[ "$vrc" != 124 ] && [ "$vrc" != 137 ] || break
	cp "$RUN/console.log" "$RUN/console.boot-failed-$attempt.log"
	warn "boot $attempt did not reach the command (vng rc=$vrc): $(grep -m1 -E 'Oops|Kernel panic|BUG:' "$RUN/console.log" || echo 'no panic line')"
done
[ -s "$RUN/live.log" ] || cat "$RUN/stdout" 2>/dev/null || true
if [ ! -f "$RUN/status" ]; then
	if [ "$vrc" = 124 ] || [ "$vrc" = 137 ]; then
		warn "guest did not finish within ${timeout_s}s (hang?); console: $RUN/console.log"
		echo hang > "$RUN/status"; exit 124
	fi
	warn "guest command did not complete (vng rc=$vrc); console: $RUN/console.log"
	tail -30 "$RUN/console.log" >&2 || true
	exit 125
fi
exit "$(cat "$RUN/status")"
