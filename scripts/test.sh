#!/usr/bin/env bash
# 'make test': boot the test kernel once and run KUnit (at boot), the
# series' kselftests and the liburing suite; print one summary with counts.
# Exit status: 0 all good; 1 a failure, a regression against the liburing
# baseline, a kernel splat or a hang.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

B=$(build_dir)
# check what the guest is asked to do before booting it
for p in ${HANDOFF_PASSES:-}; do
	case "$p" in 0|1) ;; *) die "HANDOFF_PASSES: '$p' is not a value of kernel.io_uring_handoff (0 or 1)" ;; esac
done
for w in ${PHASES:-}; do
	case "$w" in kselftest|liburing) ;; *) die "PHASES: unknown phase '$w' (kselftest, liburing)" ;; esac
done
for w in ${INJECT:-}; do
	case "$w" in kmsg-warning|ksft-skip|ksft-remove|liburing-truncate) ;;
	*) die "INJECT: unknown fault '$w' (kmsg-warning ksft-skip ksft-remove liburing-truncate)" ;; esac
done
case "${LIBURING_FLAKY_RUNS:-3}" in
''|*[!0-9]*|0) die "LIBURING_FLAKY_RUNS: '${LIBURING_FLAKY_RUNS}' is not a count of runs (1 or more)" ;;
esac
# the console rule vm.sh retries a boot on, against the consoles it was made for
selftest=$(python3 "$REPO/scripts/verdict.py" selftest) || die "$selftest"
info "$selftest"
# every member of task_struct and thread_struct of the built kernel is
# classified in the series' table (Documentation/io_uring/handoff-fields.rst)
python3 "$REPO/scripts/fields-check.py" --parse-selftest >/dev/null ||
	die "fields-check: its pahole parser fails its selftest"
fields=$(python3 "$REPO/scripts/fields-check.py" "$B" "$WORK/Documentation/io_uring/handoff-fields.rst" "$ARCH") ||
	die "the handoff's field table does not match the built kernel:"$'\n'"$fields"
info "$fields"
RUN=$OUT/test/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RUN"
export RUN
LIBURING=$(liburing_src)/test
KS=$(kselftest_dir)
case "${PHASES:-kselftest}" in
*kselftest*) [ -d "$KS" ] || die "kselftests not built: run 'make userspace'" ;;
esac
# The guest runs, and the verdict judges, a copy of the guest scripts and of
# the expectations taken now: editing the repo during a run changes neither.
snap=$RUN/repo
mkdir -p "$snap/scripts/guest" "$snap/tests"
cp "$REPO"/scripts/guest/*.sh "$snap/scripts/guest/"
cp "$REPO"/tests/*.txt "$snap/tests/"
git -C "$REPO" describe --always --dirty > "$snap/version" 2>/dev/null || echo unknown > "$snap/version"
# the parameters of the run, which the verdict reads back
{ echo "PHASES=${PHASES:-}"; echo "LIBURING_TESTS=${LIBURING_TESTS:-}"
  echo "HANDOFF_PASSES=${HANDOFF_PASSES:-}"; echo "INJECT=${INJECT:-}"; } > "$RUN/params"
args="KSFT=$KS LIBURING=$LIBURING NOALARM=$(dirname "$(liburing_src)")/no-alarm.so"
[ -z "${LIBURING_TESTS:-}" ] || args+=" LIBURING_TESTS='$LIBURING_TESTS'"
[ -z "${PHASES:-}" ] || args+=" PHASES='$PHASES'"
[ -z "${HANDOFF_PASSES:-}" ] || args+=" HANDOFF_PASSES='$HANDOFF_PASSES'"
[ -z "${LIBURING_TIMEOUT:-}" ] || args+=" LIBURING_TIMEOUT='$LIBURING_TIMEOUT'"
[ -z "${LIBURING_FLAKY_RUNS:-}" ] || args+=" LIBURING_FLAKY_RUNS='$LIBURING_FLAKY_RUNS'"
[ -z "${INJECT:-}" ] || args+=" INJECT='$INJECT'"

set +e
# The handoff tracepoints are on from boot, so the tests that look at them
# don't live-patch kernel text while other vCPUs run (see vm.sh).
# TEST_TIMEOUT: the whole guest run. Under TCG on a slow host a full run
# (kselftests and both liburing passes) took over 60 minutes (2026-12-02:
# 10 minutes of kselftests, then 24 per liburing pass).
VM_TIMEOUT=${TEST_TIMEOUT:-4800} bash "$REPO/scripts/vm.sh" --disk \
	--append "trace_event=io_uring:io_uring_handoff,io_uring:io_uring_handoff_resume" \
	-- "$args bash $snap/scripts/guest/test.sh"
vmrc=$?
set -e
bash "$REPO/scripts/summarize.sh" "$RUN" "$vmrc"
