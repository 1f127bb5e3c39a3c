#!/usr/bin/env bash
# 'make rustcheck': rustfmt and clippy on the Rust the series adds.
# rustfmtcheck covers the whole tree; clippy (CLIPPY=1, Debian's
# clippy-driver matching rustc) rebuilds the series' Rust objects.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_tool /usr/bin/clippy-driver rust-web-clippy
B=$(build_dir)
[ -f "$B/vmlinux" ] || die "build first ('make build')"
MK=(make -C "$WORK" O="$B" RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc BINDGEN=bindgen
    CLIPPY_DRIVER=/usr/bin/clippy-driver LOCALVERSION= CC="ccache gcc")
# the compiler the tree was configured with, or Kconfig reconfigures it for gcc
! uses_llvm || MK+=(LLVM="$LLVM_BIN/" CC="ccache $LLVM_BIN/clang")
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}

info "rustfmtcheck"
"${MK[@]}" -s rustfmtcheck || die "rustfmtcheck failed: run 'make -C $WORK O=$B rustfmt' and export"

# The series' own crates (a new .rs outside rust/ is a crate root built as
# its .o), and the kernel crate if the series adds to or changes rust/kernel/.
objs=$(cd "$WORK" && git diff --name-only --diff-filter=A base..series -- '*.rs' |
	grep -v '^rust/' | sed 's/\.rs$/.o/' || true)
if [ -n "$(cd "$WORK" && git diff --name-only base..series -- 'rust/kernel/')" ]; then
	objs="rust/kernel.o $objs"
fi
[ -n "$objs" ] || { info "no Rust objects in the series"; exit 0; }
for o in $objs; do rm -f "$B/$o"; done
info "clippy: $objs"
out=$("${MK[@]}" CLIPPY=1 $objs 2>&1) || { printf '%s\n' "$out"; die "clippy build failed"; }
printf '%s\n' "$out" | grep -E '^(warning|error)' && { printf '%s\n' "$out"; die "clippy reported warnings"; }
info "rustfmt and clippy clean"
