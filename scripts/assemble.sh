#!/usr/bin/env bash
# Assemble the work tree: the pristine base as commit 'base' plus one commit
# per series patch (patches/series), as branch 'series' of a git repository
# at $WORK.
#
# The new commits are built in a temporary index (git apply --cached), so no
# file is touched until the final checkout, and that checkout only rewrites
# the files whose content changed: editing one file in the repo rebuilds
# only what depends on it.
#
# Local work in $WORK is never thrown away: uncommitted changes to tracked
# files, or commits on top of the last assembled series, stop the assembly
# with an explanation.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SERIES=$REPO/patches/series
[ -f "$BASE_DIR/.complete" ] || die "base kernel not unpacked: run 'make fetch'"

g() { git -C "$WORK" "$@"; }
export GIT_COMMITTER_NAME="iou-handoff assemble" GIT_COMMITTER_EMAIL="assemble@localhost"

# --- first time: the base commit -------------------------------------------------
if ! g rev-parse -q --verify refs/tags/base >/dev/null 2>&1; then
	[ ! -e "$WORK" ] || [ -z "$(ls -A "$WORK" 2>/dev/null)" ] || \
		die "$WORK exists but is not an assembled work tree; move it away or set WORK=..."
	info "creating work tree $WORK from $(cat "$BASE_DIR/.iou-base-version")"
	mkdir -p "$WORK"
	cp -a "$BASE_DIR"/. "$WORK"/
	rm -f "$WORK/.complete"
	g init -q -b series
	g config core.autocrlf false
	g config gc.auto 0
	printf '.iou-base-version\n.iou-series-head\n' >> "$WORK/.git/info/exclude"
	g add -A -f . >/dev/null
	GIT_AUTHOR_NAME="Debian linux-source-7.3" GIT_AUTHOR_EMAIL="debian-kernel@lists.debian.org" \
		g commit -q -m "$(cat "$WORK/.iou-base-version")" -m "Pristine base of the series, unpacked from Debian's linux-source-7.3 package."
	g tag base
	g rev-parse HEAD > "$WORK/.git/iou-series-head"
fi

# --- guard local work ----------------------------------------------------------------
recorded=$(cat "$WORK/.git/iou-series-head")
head=$(g rev-parse HEAD)
if [ "$head" != "$recorded" ]; then
	die "$WORK: HEAD ($(g log -1 --format='%h %s' HEAD)) is not the last assembled series head ${recorded:0:12}.
  Commits made there would be lost by re-assembly. Turn them into series patches
  with 'make export', or discard them with 'git -C $WORK checkout series && git -C $WORK reset --hard ${recorded:0:12}'."
fi
if ! g diff --quiet HEAD -- || ! g diff --cached --quiet HEAD --; then
	die "$WORK has uncommitted changes to tracked files:
$(g status --short --untracked-files=no | head -20)
  Commit them there and run 'make export', or stash them (git -C $WORK stash)."
fi

# --- build the series commits in a temporary index ------------------------------------
idx=$(mktemp "$CACHE/assemble-index.XXXXXX")
tmp=$(mktemp -d "$CACHE/assemble-tmp.XXXXXX")
trap 'rm -rf "$idx" "$tmp"' EXIT
export GIT_INDEX_FILE=$idx
g read-tree base
parent=$(g rev-parse base)
n=0
if [ -f "$SERIES" ]; then
	while read -r pfile newfiles; do
		case "$pfile" in ''|'#'*) continue ;; esac
		n=$((n + 1))
		p=$REPO/patches/$pfile
		[ -f "$p" ] || die "patches/series line $n: patch file patches/$pfile not found"
		git mailinfo "$tmp/msg" "$tmp/diff" < "$p" > "$tmp/info" || die "patches/$pfile: not a mail-format patch"
		subject=$(sed -n 's/^Subject: //p' "$tmp/info")
		[ -n "$subject" ] || die "patches/$pfile: no Subject line"
		if [ -s "$tmp/diff" ]; then
			if ! out=$(cd "$WORK" && git apply --cached --whitespace=nowarn "$tmp/diff" 2>&1); then
				files=$(printf '%s\n' "$out" | sed -n 's/^error: \(patch failed: \)\{0,1\}\([^:]*\):.*/\2/p' | sort -u | tr '\n' ' ')
				die "series patch patches/$pfile does not apply to $(cat "$BASE_DIR/.iou-base-version")
  failing file(s): ${files:-unknown}
$(printf '%s\n' "$out" | sed 's/^/  /')"
			fi
		fi
		for f in $newfiles; do
			[ -f "$REPO/$f" ] || die "patches/series: patches/$pfile adds $f, but $f is missing from the repo"
			mode=100644; [ -x "$REPO/$f" ] && mode=100755
			blob=$(g hash-object -w "$REPO/$f")
			g update-index --add --cacheinfo "$mode,$blob,$f"
		done
		tree=$(g write-tree)
		{ printf '%s\n\n' "$subject"; cat "$tmp/msg"; } > "$tmp/commitmsg"
		parent=$(GIT_AUTHOR_NAME=$(sed -n 's/^Author: //p' "$tmp/info") \
			GIT_AUTHOR_EMAIL=$(sed -n 's/^Email: //p' "$tmp/info") \
			GIT_AUTHOR_DATE=$(sed -n 's/^Date: //p' "$tmp/info") \
			GIT_COMMITTER_DATE=$(sed -n 's/^Date: //p' "$tmp/info") \
			g commit-tree "$tree" -p "$parent" -F "$tmp/commitmsg")
	done < "$SERIES"
fi
unset GIT_INDEX_FILE

# --- move the work tree to the new head (touches only changed files) ---------------------
if [ "$parent" != "$head" ]; then
	info "work tree: $n series patches -> $(g rev-parse --short "$parent")"
	g checkout -q -B series "$parent" || die "checkout of the new series head failed (untracked files in the way?)"
else
	info "work tree up to date ($n series patches)"
fi
echo "$parent" > "$WORK/.git/iou-series-head"
git -C "$REPO" describe --always --dirty --tags 2>/dev/null > "$WORK/.iou-series-version" || echo unknown > "$WORK/.iou-series-version"
