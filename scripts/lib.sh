# Shared helpers and settings for the series tooling. Sourced, not run.
# shellcheck shell=bash
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iou-handoff}
WORK=${WORK:-$CACHE/linux}            # assembled work tree (git)
BASE_DIR=$CACHE/base                  # unpacked pristine linux-source
OUT=${OUT:-$CACHE/out}                # test results, logs
BINDGEN_VERSION=0.72.1
VNG_VERSION=1.42
LIBURING_VERSION=2.15
PIN_SUITE=trixie-backports
PIN_SOURCES=/etc/apt/sources.list.d/iou-handoff-extra.sources
PIN_PREFS=/etc/apt/preferences.d/iou-handoff-extra
mkdir -p "$CACHE"

export PATH="$CACHE/venv/bin:$CACHE/cargo/bin:$PATH"
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-22/lib}

info() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

need_root_or_sudo() {
	if [ "$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo;
	else die "root or sudo is needed to install packages"; fi
}

# need_tool TOOL PACKAGE: fail with the package name when TOOL is missing.
# PACKAGE is a Debian package name, or a description starting with "pip:"
# or "cargo:" for tools that come from PyPI or crates.io.
need_tool() {
	command -v "$1" >/dev/null 2>&1 && return 0
	case "$2" in
	pip:*|cargo:*) die "'$1' not found: install ${2#*:} from ${2%%:*} (run 'make setup')" ;;
	*) die "'$1' not found: install the Debian package '$2' (or run 'make setup')" ;;
	esac
}

# Add $PIN_SUITE (binaries) with the machine's own Debian mirror, pinned to 50
# so apt never upgrades from it, and unstable/testing as deb-src only.
# Used for download-only fetches.
add_pinned_suite() {
	local uri
	if [ ! -f "$PIN_SOURCES" ]; then
		uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
		[ -n "$uri" ] || uri=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
		[ -n "$uri" ] || die "cannot find the machine's Debian mirror in /etc/apt"
		info "adding $PIN_SUITE (download-only, pinned to 50) from $uri"
		$SUDO tee "$PIN_SOURCES" >/dev/null <<EOT
Types: deb
URIs: $uri
Suites: $PIN_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

# source packages only (liburing $LIBURING_VERSION with its test suite)
Types: deb-src
URIs: $uri
Suites: unstable testing
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOT
		$SUDO tee "$PIN_PREFS" >/dev/null <<EOT
Package: *
Pin: release n=$PIN_SUITE
Pin-Priority: 50
EOT
		$SUDO apt-get update -qq
	fi
}

# --- the guest's architecture: ARCH=x86_64 (default, the host's) or arm64 ------------
# (exactly these spellings: make hands ARCH= on to the kernel's own makes)
ARCH=${ARCH:-x86_64}
case "$ARCH" in
x86_64|arm64) ;;
*) die "ARCH='$ARCH': x86_64 or arm64" ;;
esac
[ "$(uname -m)" = x86_64 ] || die "the tooling runs on an x86_64 host (this is $(uname -m))"
# "" for x86_64, "-arm64" for arm64: the suffix of every per-architecture cache folder
arch_sfx() { [ "$ARCH" = x86_64 ] || echo "-$ARCH"; }
debian_arch() { case "$ARCH" in x86_64) echo amd64 ;; *) echo "$ARCH" ;; esac; }
# the foreign guest's root filesystem (scripts/rootfs.sh); x86_64 uses the host's
rootfs_dir() { echo "$CACHE/rootfs$(arch_sfx)"; }
# what the guest runs, cross-built for arm64 (scripts/build-userspace.sh)
liburing_src() { echo "$CACHE/liburing$(arch_sfx)/src"; }
kselftest_dir() { echo "${KSFT_DIR:-$CACHE/kselftest$(arch_sfx)}"; }
bench_bin_dir() { echo "$CACHE/bench$(arch_sfx)"; }
# the C compiler for the guest's userspace
guest_cc() { case "$ARCH" in x86_64) echo gcc ;; arm64) echo aarch64-linux-gnu-gcc ;; esac; }

# the KCONFIGs built by LLVM 22 rather than gcc (see build.sh), and its tools
LLVM_BIN=/usr/lib/llvm-22/bin
uses_llvm() { case "${KCONFIG:-test}" in debug|bench-llvm) return 0 ;; *) return 1 ;; esac; }

# build output folder for $KCONFIG (test|bench|debug|bench-llvm) and $ARCH
build_dir() {
	if [ -n "${BUILD_DIR:-}" ]; then echo "$BUILD_DIR"; return; fi
	echo "$CACHE/build$(arch_sfx)-${KCONFIG:-test}"
}
# the kernel image vng boots, in build folder $1
kernel_image() {
	case "$ARCH" in x86_64) echo "$1/arch/x86/boot/bzImage" ;; arm64) echo "$1/arch/arm64/boot/Image" ;; esac
}

# run_guest_bench TIMEOUT 'guest command' NAME: boot with the scratch disk and run
# the guest side of a benchmark. Warns and returns 1 if the guest hung or failed
# ($RUN/NAME.errors and $RUN/console.log say why); the report covers what finished.
run_guest_bench() {
	local vmrc=0
	VM_TIMEOUT=$1 bash "$REPO/scripts/vm.sh" --disk -- "$2" || vmrc=$?
	case "$vmrc" in
	0) return 0 ;;
	124) warn "guest hung (no completion within $1s): the report covers what finished" ;;
	*) warn "guest bench exited with status $vmrc (see $RUN/$3.errors, $RUN/console.log)" ;;
	esac
	return 1
}
