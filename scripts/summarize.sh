#!/usr/bin/env bash
# Summarize a 'make test' run folder: summarize.sh RUN VM_RC
# Prints counts for KUnit, kselftest, liburing (against the committed
# baseline) and kernel splats, and exits non-zero on any failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
RUN=$1 vmrc=$2
BASELINE=$REPO/tests/liburing-baseline.txt
fail=0
bad() { fail=1; echo "  FAIL: $*"; }
echo
echo "===================== SUMMARY ($RUN) ====================="

# --- guest completion -----------------------------------------------------------------
case "$vmrc" in
0) ;;
124) bad "guest hung (no completion before the timeout)" ;;
*) bad "guest command exited with status $vmrc" ;;
esac

# --- KUnit, from the boot console ------------------------------------------------------
con=$RUN/console.log
if grep -q 'KTAP version' "$con" 2>/dev/null; then
	kout=$(python3 "$WORK/tools/testing/kunit/kunit.py" parse --summary "$(realpath "$con")" 2>&1)
	krc=$?
	kline=$(printf '%s\n' "$kout" | grep -E 'Ran [0-9]+ tests|no tests' | tail -n1 | sed 's/^.*Testing complete. //')
	echo "KUnit:      ${kline:-unparsed}"
	[ "$krc" = 0 ] || { printf '%s\n' "$kout" | grep -E '\[FAILED\]|CRASHED' | head -20; bad "KUnit failures"; }
else
	echo "KUnit:      no KTAP output on the console"
	bad "no KUnit results"
fi

# --- kselftests ------------------------------------------------------------------------
for f in "$RUN"/kselftest.*.tap; do
	[ -f "$f" ] || { echo "kselftest:  not run"; case "${PHASES:-kselftest}" in *kselftest*) bad "kselftests did not run" ;; esac; break; }
	p=${f#"$RUN"/kselftest.}; p=${p%.tap}
	# top-level results of run_kselftest.sh and the harness totals of each program
	pass=$(grep -cE '^ok [0-9]+ ' "$f" | tr -d ' ')
	skip=$(grep -cE '^ok [0-9]+ .*# SKIP' "$f" | tr -d ' ')
	nfail=$(grep -cE '^not ok [0-9]+ ' "$f" | tr -d ' ')
	cases=$(grep -E '^# # Totals:' "$f" | sed 's/.*Totals: //' | awk -F'[ :]+' \
		'{for (i=1;i<NF;i+=2) s[$i]+=$(i+1)} END {printf "pass %d, fail %d, skip %d", s["pass"], s["fail"], s["skip"]}')
	echo "kselftest:  handoff=$p: programs passed $((pass - skip)), failed $nfail, skipped $skip; cases: ${cases:-none}"
	[ "$nfail" = 0 ] || { grep -E '^not ok' "$f"; bad "kselftest failures (handoff=$p)"; }
	[ "$pass" -gt 0 ] || [ "$nfail" -gt 0 ] || bad "no kselftest ran (handoff=$p)"
done

# --- liburing, against the baseline ------------------------------------------------------
declare -A base=()
if [ -f "$BASELINE" ]; then
	while read -r t st; do
		case "$t" in ''|'#'*) continue ;; esac
		base[$t]=$st
	done < "$BASELINE"
fi
for f in "$RUN"/liburing.*.results; do
	[ -f "$f" ] || { echo "liburing:   not run"; case "${PHASES:-liburing}" in *liburing*) bad "liburing did not run" ;; esac; break; }
	p=${f#"$RUN"/liburing.}; p=${p%.results}
	read -r n np nf ns nt < <(awk '{n++; c[$2]++} END {print n+0, c["pass"]+0, c["fail"]+0, c["skip"]+0, c["timeout"]+0}' "$f")
	regress=() known=() newskip=() newtest=()
	while read -r t st _; do
		bst=${base[$t]:-}
		if [ -z "$bst" ]; then [ "$st" = pass ] || newtest+=("$t:$st"); continue; fi
		case "$st" in
		pass) ;;
		skip) [ "$bst" = skip ] || newskip+=("$t(base:$bst)") ;;
		*) if [ "$bst" = pass ]; then regress+=("$t:$st"); else known+=("$t:$st"); fi ;;
		esac
	done < "$f"
	echo "liburing:   handoff=$p: $n run: passed $np, failed $nf, skipped $ns, timed out $nt"
	echo "            known failures on base: ${#known[@]} ${known[*]}"
	[ ${#newskip[@]} = 0 ] || echo "            skipped here but not on base: ${newskip[*]}"
	[ ${#newtest[@]} = 0 ] || echo "            not in baseline, not passing: ${newtest[*]}"
	echo "            skipped: $(awk '$2 == "skip" {printf "%s ", $1}' "$f")"
	[ ${#regress[@]} = 0 ] || bad "liburing regressions against the base (handoff=$p): ${regress[*]}"
done

# --- kernel splats on the console ----------------------------------------------------------
pat='WARNING:|BUG:|Oops|general protection fault|Kernel panic|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|INFO: task .* blocked for more than|rcu: INFO|soft lockup|hard LOCKUP|UBSAN:|KASAN:|scheduling while atomic|sleeping function called from invalid context|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator'
splats=$(grep -E "$pat" "$con" 2>/dev/null | grep -v 'iou-test:' || true)
nsplat=$(printf '%s' "$splats" | grep -c . || true)
echo "dmesg:      $nsplat kernel warning/BUG/lockdep line(s)"
if [ "$nsplat" != 0 ]; then
	printf '%s\n' "$splats" | head -20 | sed 's/^/            /'
	bad "kernel splat in the guest (full console: $con)"
fi

nretry=$(ls "$RUN"/console.boot-failed-*.log 2>/dev/null | wc -l)
ncrash=$(ls "$RUN"/console.crashed-*.log 2>/dev/null | wc -l)
[ "$ncrash" = 0 ] || echo "crashes:    $ncrash run(s) hit 'Oops: int3' (TCG text-patching race) and were run again from the start; consoles: $RUN/console.crashed-*.log"
[ "$nretry" = 0 ] || echo "boot:       $nretry boot(s) crashed before the tests started and were retried (TCG text-patching race); consoles: $RUN/console.boot-failed-*.log"

if [ "$fail" = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
exit "$fail"
