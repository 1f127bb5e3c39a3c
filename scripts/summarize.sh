#!/usr/bin/env bash
# Summarize a 'make test' run folder: summarize.sh RUN VM_RC
# Prints expected and seen counts for KUnit, kselftests, liburing (against
# the committed baseline) and kernel splats on every console of the run,
# and exits non-zero on any failure (scripts/verdict.py does the work).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
[ $# = 2 ] || die "usage: summarize.sh RUN VM_RC"
if [ "$(cat "$WORK/.iou-series-version" 2>/dev/null)" = base ]; then export IOU_KERNEL=base; fi
export WORK IOU_ARCH=$ARCH
exec python3 "$REPO/scripts/verdict.py" summary "$1" "$2"
