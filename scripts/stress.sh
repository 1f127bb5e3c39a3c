#!/usr/bin/env bash
# 'make stress': boot the kernel and run the stress kselftest (stress_test)
# for DURATION seconds (default 600) at each value of kernel.io_uring_handoff
# in HANDOFF_PASSES (default "1 0"). STRESS_SEED reproduces a run; each pass
# prints the seed it used. KCONFIG=debug runs it on the KASAN/kmemleak kernel.
# Exit status: 0 when every pass ran to its end with 0 violations and 0
# hangs and no console shows a splat; 1 otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-600}
case "$DURATION" in
''|*[!0-9]*|0) die "DURATION: '$DURATION' is not a number of seconds (1 to 7200)" ;;
esac
[ "$DURATION" -le 7200 ] || die "DURATION: $DURATION s is over the test's limit of 7200 s"
case "${STRESS_SEED:-}" in
''|[1-9]|[1-9]*[0-9]) ;;
*) die "STRESS_SEED: '$STRESS_SEED' is not a positive number" ;;
esac
passes=${HANDOFF_PASSES:-1 0}
for p in $passes; do
	case "$p" in 0|1) ;; *) die "HANDOFF_PASSES: '$p' is not a value of kernel.io_uring_handoff (0 or 1)" ;; esac
done
KS=$(kselftest_dir)
[ -x "$KS/io_uring_handoff/stress_test" ] || die "no $KS/io_uring_handoff/stress_test: run 'make userspace'"

RUN=$OUT/stress/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RUN"
export RUN
n=$(echo $passes | wc -w)
args="KSFT=$KS STRESS_SECS=$DURATION HANDOFF_PASSES='$passes'"
[ -z "${STRESS_SEED:-}" ] || args+=" STRESS_SEED=$STRESS_SEED"
set +e
VM_TIMEOUT=$((n * (DURATION + 180) + 300)) bash "$REPO/scripts/vm.sh" --disk -- \
	"$args bash $REPO/scripts/guest/stress.sh"
vmrc=$?
set -e

echo
echo "===================== STRESS ($RUN) ====================="
fail=0 ok=0
for p in $passes; do
	out=$RUN/stress.$p.out
	if [ ! -f "$RUN/stress.$p.rc" ]; then
		echo "handoff=$p: did not finish (vm exit $vmrc)"; fail=$((fail + 1)); continue
	fi
	rc=$(cat "$RUN/stress.$p.rc")
	grep -E 'seed [0-9]+|families|handoffs|violations' "$out" | sed 's/^# stress_test.c:[0-9]*:random_actors:/  /;s/^/  /' | sed "1s/^/handoff=$p:\n/"
	if [ "$rc" = 0 ] && grep -q '^ok 1 stress.random_actors' "$out"; then
		ok=$((ok + 1))
	else
		echo "  FAIL: stress_test exit $rc (output: $out)"; fail=$((fail + 1))
	fi
done
splats=$(python3 "$REPO/scripts/verdict.py" splats "$RUN/console.log")
if [ -n "$splats" ]; then
	echo "console: $(echo "$splats" | wc -l) report line(s):"; echo "$splats" | head -20
	fail=$((fail + 1))
else
	echo "console: no splat"
fi
# kmemleak's reports (the debug kernel): those whose allocation backtrace
# names io_uring, io-wq or the handoff fail the run, the others are listed
if [ -f "$RUN/kmemleak.txt" ]; then
	read -r all ours < <(awk '/unreferenced object/ { n++; if (hit) o++; hit = 0 }
		/io_uring|io_wq|thread_handoff/ { hit = 1 }
		END { if (hit) o++; print n + 0, o + 0 }' "$RUN/kmemleak.txt")
	echo "kmemleak: $all report(s), $ours naming io_uring, io-wq or the handoff ($RUN/kmemleak.txt)"
	[ "$ours" = 0 ] || fail=$((fail + 1))
fi
echo "verdict: $ok pass(es) clean, $fail failure(s)"
[ "$fail" = 0 ]
