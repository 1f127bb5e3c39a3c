#!/usr/bin/env bash
# 'make bisect-build': build every series commit on its own, in order,
# incrementally in the same build folder (KCONFIG, ARCH as for 'make build').
# FROM=<n> starts at the n-th series patch (default 1). Restores the work
# tree to the series head afterwards, also on failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

g() { git -C "$WORK" "$@"; }
head=$(cat "$WORK/.git/iou-series-head")
[ "$(g rev-parse HEAD)" = "$head" ] || die "$WORK is not at the assembled series head: run 'make assemble'"
g diff --quiet HEAD -- || die "$WORK has uncommitted changes"
commits=$(g rev-list --reverse base..series)
trap 'g checkout -q series; rm -f "$(build_dir)/.iou-config-hash"' EXIT
n=0 ok=0 failed=()
for c in $commits; do
	n=$((n + 1))
	[ "$n" -ge "${FROM:-1}" ] || continue
	g checkout -q --detach "$c"
	info "[$n] $(g log -1 --format=%s "$c")"
	# options of later patches are not there yet: configure from the fragments every time
	rm -f "$(build_dir)/.iou-config-hash"
	if ALLOW_MISSING_CONFIG=1 bash "$REPO/scripts/build.sh"; then ok=$((ok + 1)); else failed+=("$n"); fi
done
echo "bisect-build: $ok built, ${#failed[@]} failed${failed[*]:+ (patches ${failed[*]})}"
[ ${#failed[@]} = 0 ]
