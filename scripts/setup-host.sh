#!/usr/bin/env bash
# Install what this machine lacks to build, boot and test the series.
# Idempotent: every step checks first and does nothing when already done.
# Never installs from a suite other than the machine's own Debian release:
# extra suites are pinned below 100 and used only for download-only fetches.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root_or_sudo

# --- Debian packages from the machine's own release -------------------------
pkgs=(flex bison bc libelf-dev libssl-dev dwarves cpio ccache rsync file
      qemu-system-x86 busybox-static kmod e2fsprogs xz-utils
      gcc-aarch64-linux-gnu python3-venv dpkg-dev)
# an arm64 guest (ARCH=arm64): its emulator, its root filesystem, its compilers
[ "$ARCH" = x86_64 ] || pkgs+=(qemu-system-arm debootstrap g++-aarch64-linux-gnu)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Rust for the kernel: rustc + matching rust-src and libclang, from bookworm-security
for p in rustc-web rust-web-src rust-web-clippy libclang1-22; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	info "installing: ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
		|| die "apt-get install failed for: ${missing[*]}"
fi

# --- extra Debian suite for linux-source-7.3 and liburing source, pinned low ---
add_pinned_suite

# --- bindgen-cli from crates.io -------------------------------------------------
if ! "$CACHE/cargo/bin/bindgen" --version 2>/dev/null | grep -q "$BINDGEN_VERSION"; then
	info "cargo install bindgen-cli $BINDGEN_VERSION"
	cargo=$(command -v cargo || true)
	[ -n "$cargo" ] || [ ! -x "$HOME/.cargo/bin/cargo" ] || cargo=$HOME/.cargo/bin/cargo
	[ -n "$cargo" ] || die "cargo not found: install Rust with rustup, or the Debian package 'cargo-web'"
	CARGO_TARGET_DIR="$CACHE/cargo-target" "$cargo" install -q --root "$CACHE/cargo" \
		bindgen-cli --version "$BINDGEN_VERSION" --locked || die "cargo install bindgen-cli failed"
	rm -rf "$CACHE/cargo-target"
fi

# --- virtme-ng from PyPI in a venv ----------------------------------------------
if [ ! -x "$CACHE/venv/bin/vng" ]; then
	info "pip install virtme-ng==$VNG_VERSION"
	python3 -m venv "$CACHE/venv"
	"$CACHE/venv/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi

info "host setup complete"
