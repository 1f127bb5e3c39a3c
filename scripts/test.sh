#!/usr/bin/env bash
# 'make test': boot the test kernel once and run KUnit (at boot), the
# series' kselftests and the liburing suite; print one summary with counts.
# Exit status: 0 all good; 1 a failure, a regression against the liburing
# baseline, a kernel splat or a hang.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

B=$(build_dir)
RUN=$OUT/test/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RUN"
export RUN
LIBURING=$CACHE/liburing/src/test
KS=${KSFT_DIR:-$CACHE/kselftest}
case "${PHASES:-kselftest}" in
*kselftest*) [ -d "$KS" ] || die "kselftests not built: run 'make userspace'" ;;
esac
args="KSFT=$KS LIBURING=$LIBURING"
[ -z "${LIBURING_TESTS:-}" ] || args+=" LIBURING_TESTS='$LIBURING_TESTS'"
[ -z "${PHASES:-}" ] || args+=" PHASES='$PHASES'"
[ -z "${HANDOFF_PASSES:-}" ] || args+=" HANDOFF_PASSES='$HANDOFF_PASSES'"
[ -z "${LIBURING_TIMEOUT:-}" ] || args+=" LIBURING_TIMEOUT='$LIBURING_TIMEOUT'"
[ -z "${INJECT:-}" ] || args+=" INJECT='$INJECT'"

set +e
# The handoff tracepoints are on from boot, so the tests that look at them
# don't live-patch kernel text while other vCPUs run (see vm.sh).
VM_TIMEOUT=${TEST_TIMEOUT:-3600} bash "$REPO/scripts/vm.sh" --disk \
	--append "trace_event=io_uring:io_uring_handoff,io_uring:io_uring_handoff_resume" \
	-- "$args bash $REPO/scripts/guest/test.sh"
vmrc=$?
set -e
bash "$REPO/scripts/summarize.sh" "$RUN" "$vmrc"
