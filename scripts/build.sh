#!/usr/bin/env bash
# Configure and build the work tree out of tree into $CACHE/build-$KCONFIG
# (KCONFIG = test, bench, debug or bench-llvm). Only what changed is rebuilt.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KCONFIG=${KCONFIG:-test}
frag=$REPO/configs/$KCONFIG.config
# the debug kernel is the test kernel with the memory checkers on top, and
# bench-llvm the bench kernel built by LLVM with the Rust helpers inlined
case "$KCONFIG" in debug) under=test ;; bench-llvm) under=bench ;; *) under= ;; esac
frags=("$REPO/configs/common.config" ${under:+"$REPO/configs/$under.config"} "$frag")
# arm64: the same fragments over allnoconfig, plus what an arm64 guest needs
[ "$ARCH" = x86_64 ] || frags+=("$REPO/configs/$ARCH.config")
case "$KCONFIG" in common|x86_64|arm64) die "KCONFIG=$KCONFIG: test, bench, debug or bench-llvm (with ARCH=$ARCH)" ;; esac
[ "$ARCH" = x86_64 ] || ! uses_llvm || die "KCONFIG=$KCONFIG is built for x86_64 only"
[ -f "$frag" ] || die "unknown KCONFIG '$KCONFIG' (no ${frag#"$REPO"/})"
B=$(build_dir)
mkdir -p "$B"
for t in gcc:gcc make:make flex:flex bison:bison bc:bc pahole:dwarves cpio:cpio \
	 /usr/bin/rustc:rustc-web bindgen:"cargo:bindgen-cli $BINDGEN_VERSION" ccache:ccache; do
	need_tool "${t%%:*}" "${t#*:}"
done
[ -d /usr/lib/rustlib/src/rust/library ] || die "rust-src missing: install the Debian package 'rust-web-src'"
[ -f "$LIBCLANG_PATH/libclang.so.1" ] || ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1 || \
	die "libclang not found in $LIBCLANG_PATH: install the Debian package 'libclang1-22'"

export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
MK=(make -C "$WORK" O="$B" -j"$(nproc)" RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc BINDGEN=bindgen
    CC="ccache gcc"
    KBUILD_BUILD_VERSION="$(cat "$WORK/.iou-series-version" 2>/dev/null || echo 1)"
    KBUILD_BUILD_USER=iou KBUILD_BUILD_HOST=handoff LOCALVERSION=)
if uses_llvm; then
	# KASAN with Rust needs the C side built by clang too (init/Kconfig: RUST
	# depends on !KASAN || CC_IS_CLANG), and so does RUST_INLINE_HELPERS (its
	# LLVM must match rustc's): the whole LLVM toolchain, version 22 like the
	# libclang bindgen uses
	L=$LLVM_BIN
	for t in clang:clang-22 ld.lld:lld-22 llvm-ar:llvm-22 llvm-nm:llvm-22 llvm-objcopy:llvm-22; do
		[ -x "$L/${t%%:*}" ] || die "$L/${t%%:*} missing (KCONFIG=$KCONFIG builds with LLVM): install the Debian package '${t#*:}'"
	done
	if [ "$KCONFIG" = bench-llvm ]; then
		# RUST_INLINE_HELPERS links C and Rust bitcode: the LLVM major versions must match
		v=$(/usr/bin/rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
		[ "$v" = 22 ] || die "rustc is built with LLVM ${v:-?}, clang is 22: KCONFIG=bench-llvm needs both of one major version (CONFIG_RUST_INLINE_HELPERS)"
	fi
	MK+=(LLVM="$L/" CC="ccache $L/clang")
fi
if [ "$ARCH" != x86_64 ]; then
	need_tool aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
	MK+=(ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- CC="ccache aarch64-linux-gnu-gcc")
fi

# --- configuration, regenerated when a fragment changes ---------------------------------
# every option a fragment asks for, missing from .config (one per line)
missing_options() {
	[ -f "$B/.config" ] || { echo all; return; }
	cat "${frags[@]}" | grep -E '^CONFIG_[A-Z0-9_]+=' | grep -v '=n$' | while read -r l; do
		grep -qxF "$l" "$B/.config" || echo "$l"; done
}
hash=$(cat "${frags[@]}" | sha256sum | cut -c1-16)
reconfigure=
if [ ! -f "$B/.config" ] || [ "$(cat "$B/.iou-config-hash" 2>/dev/null)" != "$hash" ]; then
	reconfigure=1
elif [ -z "${ALLOW_MISSING_CONFIG:-}" ] && [ -n "$(missing_options)" ]; then
	# changed behind the tooling's back, e.g. by a make run without Rust in PATH
	warn "$B/.config lost options the fragments set ($(missing_options | tr '\n' ' ')): configuring again"
	reconfigure=1
fi
if [ -n "$reconfigure" ]; then
	info "configuring $B ($KCONFIG)"
	"${MK[@]}" -s rustavailable >/dev/null || die "Rust is not available for the kernel build ('make rustavailable' failed); run 'make setup'"
	extra=()
	# what virtme-ng needs of a guest kernel (9p, virtio, the console)
	virtme-configkernel --arch "$ARCH" --dry-run > "$B/virtme.config" 2>/dev/null || \
		die "virtme-configkernel failed: run 'make setup' (virtme-ng)"
	extra=("$B/virtme.config")
	if [ "$ARCH" = x86_64 ]; then
		"${MK[@]}" -s x86_64_defconfig >/dev/null
	else
		# defconfig builds every arm64 platform's drivers: a small kernel instead
		"${MK[@]}" -s allnoconfig >/dev/null
	fi
	(cd "$WORK" && KCONFIG_CONFIG="$B/.config" scripts/kconfig/merge_config.sh -m -O "$B" \
		"$B/.config" "${extra[@]}" "${frags[@]}" >"$B/merge.log" 2>&1) || die "merge_config failed, see $B/merge.log"
	"${MK[@]}" -s olddefconfig >/dev/null
	# every option a fragment asks for must survive olddefconfig
	missing=$(missing_options)
	if [ -n "$missing" ]; then
		[ -n "${ALLOW_MISSING_CONFIG:-}" ] || die "config options requested but not set (missing dependencies?):
$missing"
		warn "config options not available at this commit: $(echo $missing)"
	fi
	echo "$hash" > "$B/.iou-config-hash"
fi

info "building $KCONFIG kernel in $B"
start=$(date +%s)
"${MK[@]}" > "$B/build.log" 2>&1 || { tail -40 "$B/build.log"; die "kernel build failed, full log: $B/build.log"; }
info "kernel built in $(( $(date +%s) - start ))s: $(cat "$B/include/config/kernel.release")"

# The test kernels carry no debug info: build a one-function module object
# with it, whose DWARF has struct task_struct and thread_struct exactly as this
# build lays them out, for 'make fields-check' (scripts/fields-check.py).
P=$B/fields-probe
mkdir -p "$P"
cat > "$P/fieldprobe.c" <<'PROBE'
// SPDX-License-Identifier: GPL-2.0
#include <linux/module.h>
#include <linux/sched.h>
int fieldprobe(struct task_struct *t);
int fieldprobe(struct task_struct *t)
{
	return t->pid + sizeof(t->thread);
}
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("debug info of task_struct for the field table check");
PROBE
printf 'obj-m := fieldprobe.o\nccflags-y := -g\n' > "$P/Kbuild"
"${MK[@]}" M="$P" modules > "$P/build.log" 2>&1 ||
	{ tail -20 "$P/build.log"; die "the field probe module did not build, full log: $P/build.log"; }
