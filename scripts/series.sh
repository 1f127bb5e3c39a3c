#!/usr/bin/env bash
# 'make series': format-patch the series with a cover letter into
# $SERIES_OUT, then prove the patches 'git am' cleanly onto the pristine
# base and that checkpatch --strict reports no errors.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SERIES_OUT=${SERIES_OUT:-$OUT/series}
g() { git -C "$WORK" "$@"; }
n=$(g rev-list --count base..series)
[ "$n" -gt 0 ] || die "the series is empty"
ver=$(cat "$WORK/.iou-series-version" 2>/dev/null || echo unknown)
rm -rf "$SERIES_OUT.tmp"; mkdir -p "$SERIES_OUT.tmp"

cover=$REPO/patches/cover-letter.txt
subject=$(head -n1 "$cover")
# The person sending the series certifies it (DCO): their git identity signs off.
g -c core.abbrev=12 -c user.name="$(git -C "$REPO" config user.name)" \
	-c user.email="$(git -C "$REPO" config user.email)" \
	format-patch -q --signoff --cover-letter --thread --zero-commit --no-signature \
	--subject-prefix="RFC PATCH" -o "$SERIES_OUT.tmp" base..series
cl=$(ls "$SERIES_OUT.tmp"/0000-cover-letter.patch)
python3 - "$cl" "$subject" "$cover" "$ver" <<'PY'
import sys
path, subject, cover, ver = sys.argv[1:]
body = open(cover).read().split('\n', 1)[1].strip('\n')
body += "\n\nSeries version: %s\n" % ver
s = open(path).read()
s = s.replace('*** SUBJECT HERE ***', subject)
s = s.replace('*** BLURB HERE ***', body)
open(path, 'w').write(s)
PY
rm -rf "$SERIES_OUT"; mv "$SERIES_OUT.tmp" "$SERIES_OUT"
info "wrote $n patches + cover letter to $SERIES_OUT"

# --- git am onto the pristine base -------------------------------------------------------------
chk=$CACHE/series-check
g worktree remove --force "$chk" >/dev/null 2>&1 || rm -rf "$chk"
g worktree prune
g worktree add -q --detach "$chk" base
am_ok=1
if ! git -C "$chk" -c user.name=check -c user.email=check@localhost am -q --keep-cr \
	$(ls "$SERIES_OUT"/*.patch | grep -v 0000-cover-letter) > "$SERIES_OUT/git-am.log" 2>&1; then
	am_ok=0; cat "$SERIES_OUT/git-am.log"
fi
if [ "$am_ok" = 1 ] && [ "$(git -C "$chk" rev-parse 'HEAD^{tree}')" != "$(g rev-parse 'series^{tree}')" ]; then
	am_ok=0; echo "git am result differs from the series tree"
fi
g worktree remove --force "$chk"

# --- checkpatch --strict -----------------------------------------------------------------------
errs=0 warns=0 checks=0
: > "$SERIES_OUT/checkpatch.log"
for p in "$SERIES_OUT"/[0-9]*.patch; do
	case "$p" in *0000-cover-letter.patch) continue ;; esac
	out=$(cd "$WORK" && perl scripts/checkpatch.pl --strict --no-tree --terse --show-types "$p" 2>&1 || true)
	e=$(printf '%s\n' "$out" | grep -c ': ERROR:' || true)
	w=$(printf '%s\n' "$out" | grep -c ': WARNING:' || true)
	c=$(printf '%s\n' "$out" | grep -c ': CHECK:' || true)
	errs=$((errs + e)); warns=$((warns + w)); checks=$((checks + c))
	printf '%s: %d errors, %d warnings, %d checks\n' "$(basename "$p")" "$e" "$w" "$c" | tee -a "$SERIES_OUT/checkpatch.log"
	printf '%s\n' "$out" | grep -E ': (ERROR|WARNING|CHECK):' | sed 's/^/    /' | tee -a "$SERIES_OUT/checkpatch.log" || true
done
echo "series: $n patches; git am onto base: $([ $am_ok = 1 ] && echo ok || echo FAILED); checkpatch --strict: $errs errors, $warns warnings, $checks checks"
[ "$am_ok" = 1 ] && [ "$errs" = 0 ]
