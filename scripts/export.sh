#!/usr/bin/env bash
# Write the commits base..HEAD of a kernel tree (default: the work tree)
# back into the repo as the series: patches/NNNN-*.patch for the changes,
# and the files a commit adds at their kernel paths, listed after the patch
# name in patches/series.
#
# A file that a commit adds and no later commit touches belongs whole to the
# adding commit: it is left out of that commit's patch, copied whole into the
# repo and listed in patches/series. A file that a commit adds and a later
# commit modifies or deletes stays in the patches instead: the adding patch
# creates it (new file), the later patches change it as ordinary diffs, and it
# is neither listed nor copied. If an earlier export left such a file whole in
# the repo, it is removed there (git rm --cached, then rm) when its content is
# the version the series adds or the final one; any other content stops the
# export, so no work in the repo is lost.
#
# Two passes: the first finds, for every added file, whether a later commit
# touches it; the second writes the patches. Nothing is written to the repo
# before both have succeeded.
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
short() { g log -1 --format='%h %s' "$1"; }

# --- pass 1: which added files does a later commit modify or delete? ------------
# cs[i]: the i-th commit; adds[i]: the files it adds; owner[f]: the commit that
# last added f; later["i:f"]: the first later commit that touches the f of cs[i].
declare -a cs adds
declare -A owner later
n=0
for c in $commits; do
	n=$((n + 1))
	cs[n]=$c
	adds[n]=
	changes=$(g diff-tree --no-commit-id --no-renames --name-status -r "$c")
	while IFS=$'\t' read -r st f; do
		case "$st" in
		A)	adds[n]+=" $f"; owner[$f]=$n ;;
		M|T|D)	if [ -n "${owner[$f]:-}" ]; then
				k="${owner[$f]}:$f"
				[ -n "${later[$k]:-}" ] || later[$k]=$n
				[ "$st" != D ] || unset "owner[$f]"
			fi ;;
		esac
	done <<< "$changes"
done

# --- pass 2: the patches, the series lines and the files kept whole --------------
declare -A whole
inpatch=()            # "i:f" for every addition that stays in the patches
: > "$tmp/series"
for ((i = 1; i <= n; i++)); do
	c=${cs[i]}
	excl=() listed=()
	for f in ${adds[i]}; do
		if [ -n "${later[$i:$f]:-}" ]; then
			inpatch+=("$i:$f")
			continue
		fi
		listed+=("$f")
		whole[$f]=1
		excl+=(":(exclude)$f")
		mkdir -p "$tmp/files/$(dirname "$f")"
		g show "$c:$f" > "$tmp/files/$f"
		[ "$(g ls-tree "$c" -- "$f" | awk '{print $1}')" = 100755 ] && chmod +x "$tmp/files/$f"
	done
	# --sparse --always: patch i is commit i even when all it has left is
	# its message (without them, -1 with a pathspec walks back to the last
	# commit that touches the pathspec)
	name=$(g format-patch -1 --sparse --always --start-number "$i" --zero-commit --no-signature -o "$tmp/patches" "$c" -- . "${excl[@]}")
	echo "$(basename "$name")${listed[*]:+ ${listed[*]}}" >> "$tmp/series"
done

# --- files an earlier export kept whole that now live in the patches -------------
# Only files the current patches/series lists, tracked in the repo or present
# there; removed only if their content is a version the series has.
declare -A was_listed stale_ok
if [ -f "$REPO/patches/series" ]; then
	while read -r pfile files; do
		case "$pfile" in ''|'#'*) continue ;; esac
		for f in $files; do was_listed[$f]=1; done
	done < "$REPO/patches/series"
fi
tracked() { [ "$(git -C "$REPO" ls-files -- ":(literal)$1")" = "$1" ]; }
stale=()
for k in "${inpatch[@]}"; do
	i=${k%%:*} f=${k#*:}
	[ -z "${whole[$f]:-}" ] && [ -n "${was_listed[$f]:-}" ] || continue
	[ -e "$REPO/$f" ] || tracked "$f" || continue
	[ -n "${stale_ok[$f]+set}" ] || { stale+=("$f"); stale_ok[$f]=; }
	# missing from the repo's work tree: nothing to lose
	if [ ! -e "$REPO/$f" ] || g show "${cs[i]}:$f" | cmp -s - "$REPO/$f"; then stale_ok[$f]=1; fi
done
for f in "${stale[@]}"; do
	[ -z "${stale_ok[$f]}" ] || continue
	if g cat-file -e "HEAD:$f" 2>/dev/null && g show "HEAD:$f" | cmp -s - "$REPO/$f"; then
		stale_ok[$f]=1; continue
	fi
	adder= changer=
	for k in "${inpatch[@]}"; do
		if [ "${k#*:}" = "$f" ]; then adder=${cs[${k%%:*}]} changer=${cs[${later[$k]}]}; fi
	done
	die "$f in the repo differs from both the version commit $(short "$adder") adds and the final version in $SRC.
  A later commit ($(short "$changer")) changes it, so it now lives in the patches and its
  whole copy in the repo would be removed. Move the repo's changes into the commits in $SRC
  (or restore $REPO/$f to one of those versions), then export again."
done

# --- write the repo --------------------------------------------------------------
rm -f "$REPO"/patches/[0-9][0-9][0-9][0-9]-*.patch
mkdir -p "$REPO/patches"
cp "$tmp"/patches/*.patch "$REPO/patches/"
{ echo "# Series order. Each line: patch file, then the files that patch adds and"
  echo "# no later patch changes (kept whole at their kernel paths in this repo)."
  echo "# See README.md."
  cat "$tmp/series"; } > "$REPO/patches/series"
[ -d "$tmp/files" ] && cp -a "$tmp/files"/. "$REPO"/
for f in "${stale[@]}"; do
	if tracked "$f"; then git -C "$REPO" rm -q --cached -- ":(literal)$f"; fi
	rm -f "$REPO/$f"
	d=$(dirname "$f")
	[ "$d" = . ] || (cd "$REPO" && rmdir -p --ignore-fail-on-non-empty "$d")
	info "removed $f from the repo: the series adds it and changes it later, so the patches carry it"
done
info "exported $n commits to patches/ ($(grep -c . "$tmp/series") series lines)"
# the work tree now matches the repo: record it so assembly does not refuse
if [ "$SRC" = "$WORK" ]; then g rev-parse HEAD > "$WORK/.git/iou-series-head"; fi
