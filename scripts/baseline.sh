#!/usr/bin/env bash
# 'make baseline': build the pristine base (tag 'base' of the work tree, in
# its own worktree and build folder), run the liburing suite on it and
# write tests/liburing-baseline.txt ("name status" per test; with ARCH=arm64
# tests/liburing-baseline-arm64.txt).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BT=$CACHE/base-tree
if [ ! -d "$BT" ]; then
	git -C "$WORK" worktree prune
	git -C "$WORK" worktree add -q --detach "$BT" base
fi
# options of the series (its KUnit suites) do not exist on the base
export WORK=$BT BUILD_DIR=$CACHE/build-base$(arch_sfx) KCONFIG=test ALLOW_MISSING_CONFIG=1
echo base > "$BT/.iou-series-version"
bash "$REPO/scripts/build.sh"
bash "$REPO/scripts/build-userspace.sh"
export PHASES=liburing
set +e
bash "$REPO/scripts/test.sh"
set -e
res=$(ls -d "$OUT"/test/*/ | tail -n1)liburing.base.results
[ -s "$res" ] || die "no liburing results from the base run"
out=$REPO/tests/liburing-baseline$(arch_sfx).txt
{ echo "# liburing $(cat "$CACHE/liburing/.version") on $(cat "$BASE_DIR/.iou-base-version"), $ARCH test config, $(tr a-z A-Z < "${res%/*}/accel" 2>/dev/null || echo TCG) 2 vCPUs"
  echo "# recorded by 'make baseline' on $(date -u +%Y-%m-%d); name status (pass fail skip timeout)"
  awk '{print $1, $2}' "$res"; } > "$out"
info "wrote ${out#"$REPO"/}: $(awk '{print $2}' "$res" | sort | uniq -c | tr '\n' ' ')"
