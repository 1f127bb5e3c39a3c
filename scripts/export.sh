#!/usr/bin/env bash
# Write the commits base..HEAD of a kernel tree (default: the work tree)
# back into the repo as the series: patches/NNNN-*.patch for changes to
# upstream files, and the files a commit adds at their kernel paths, listed
# after the patch name in patches/series.
#
# A file the series adds belongs whole to the commit that adds it; a later
# commit may not modify it (squash the change into the adding commit).
# Refuses to overwrite uncommitted changes under patches/ in the repo.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=${SRC:-$WORK}
g() { git -C "$SRC" "$@"; }
g rev-parse -q --verify base >/dev/null || die "$SRC has no 'base' tag (not an assembled tree)"
if [ -z "${FORCE:-}" ] && [ -n "$(git -C "$REPO" status --porcelain -- patches)" ]; then
	die "uncommitted changes under patches/ in the repo; commit them first (or FORCE=1)"
fi
commits=$(g rev-list --reverse base..HEAD)
[ -n "$commits" ] || die "no commits between base and HEAD in $SRC"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
declare -A owner
n=0
: > "$tmp/series"
for c in $commits; do
	n=$((n + 1))
	added=$(g diff-tree --no-commit-id --name-only --diff-filter=A -r "$c")
	for f in $(g diff-tree --no-commit-id --name-only --diff-filter=MD -r "$c"); do
		[ -z "${owner[$f]:-}" ] || die "commit $(g log -1 --format='%h %s' "$c") modifies $f, which ${owner[$f]} adds: squash it into that commit"
	done
	excl=()
	for f in $added; do
		owner[$f]=$(g log -1 --format='%h' "$c")
		excl+=(":(exclude)$f")
		mkdir -p "$tmp/files/$(dirname "$f")"
		g show "$c:$f" > "$tmp/files/$f"
		[ "$(g ls-tree "$c" -- "$f" | awk '{print $1}')" = 100755 ] && chmod +x "$tmp/files/$f"
	done
	name=$(g format-patch -1 --start-number "$n" --zero-commit --no-signature -o "$tmp/patches" "$c" -- . "${excl[@]}")
	echo "$(basename "$name") $(echo $added)" | sed 's/ $//' >> "$tmp/series"
done

rm -f "$REPO"/patches/[0-9][0-9][0-9][0-9]-*.patch
mkdir -p "$REPO/patches"
cp "$tmp"/patches/*.patch "$REPO/patches/"
{ echo "# Series order. Each line: patch file, then the files that patch adds"
  echo "# (kept whole at their kernel paths in this repo). See README.md."
  cat "$tmp/series"; } > "$REPO/patches/series"
[ -d "$tmp/files" ] && cp -a "$tmp/files"/. "$REPO"/
info "exported $n commits to patches/ ($(grep -c . "$tmp/series") series lines)"
# the work tree now matches the repo: record it so assembly does not refuse
if [ "$SRC" = "$WORK" ]; then g rev-parse HEAD > "$WORK/.git/iou-series-head"; fi
