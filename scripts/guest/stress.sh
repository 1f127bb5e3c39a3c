#!/bin/bash
# Guest side of 'make stress': run the stress kselftest (stress_test) for
# STRESS_SECS seconds at each sysctl value in HANDOFF_PASSES, from the ext4
# scratch disk, in $RUN (the current folder). Writes stress.<pass>.out (the
# program's TAP output and log) and stress.<pass>.rc for each pass.
RUN=$(pwd)
log() { echo "[guest] $*"; }
kmsg() { echo "iou-stress: $*" > /dev/kmsg 2>/dev/null; }
[ -x "$KSFT/io_uring_handoff/stress_test" ] || { log "no $KSFT/io_uring_handoff/stress_test"; exit 2; }
mkdir -p /tmp/iou
mkfs.ext4 -q -F /dev/vda && mount /dev/vda /tmp/iou || { log "cannot mount the scratch disk"; exit 2; }
sysctl_file=/proc/sys/kernel/io_uring_handoff
[ -e "$sysctl_file" ] || { log "no $sysctl_file: not a kernel with the series"; exit 2; }
for p in $HANDOFF_PASSES; do
	echo "$p" > "$sysctl_file"
	[ "$(cat "$sysctl_file")" = "$p" ] || { log "cannot set $sysctl_file to $p"; exit 2; }
	mkdir -p "/tmp/iou/s$p" && cd "/tmp/iou/s$p" || exit 2
	log "stress_test: ${STRESS_SECS} s at handoff=$p${STRESS_SEED:+, seed $STRESS_SEED}"
	kmsg "stress handoff=$p"
	# its own deadline plus room for the families' last exits
	timeout -k 10 $((STRESS_SECS + 120)) "$KSFT/io_uring_handoff/stress_test" \
		> "$RUN/stress.$p.out" 2>&1
	echo $? > "$RUN/stress.$p.rc"
	grep -E 'seed|families|handoffs|violations|^(not )?ok' "$RUN/stress.$p.out" | sed 's/^/[guest]   /'
	cd "$RUN" || exit 2
done
# the debug kernel: what kmemleak finds once the passes are over (an object
# is reported by the second scan that finds it unreferenced, 5 s old)
kml=/sys/kernel/debug/kmemleak
if [ -w "$kml" ] && echo scan > "$kml" 2>/dev/null; then
	log "kmemleak: scanning"
	sleep 6
	echo scan > "$kml" && cat "$kml" > "$RUN/kmemleak.txt"
	log "kmemleak: $(grep -c 'unreferenced object' "$RUN/kmemleak.txt") report(s)"
fi
kmsg done
exit 0
