# io_uring thread identity handoff series on Linux 7.3: build, boot, test.
# See README.md. Everything heavy lives in $(CACHE), outside the repo.
SHELL := /bin/bash
S := scripts

.PHONY: all run test setup fetch assemble tree build userspace vm series export \
	baseline test-quick stress bench bench-beyond clean-build build-arm64 bisect-build rustcheck rust-counts \
	fields-check help
all: run

help:
	@sed -n 's/^## \(make .*\)/\1/p' README.md

# --- setup and build chain (each step idempotent) ---------------------------------
setup:
	@$(S)/setup-host.sh
fetch: setup
	@$(S)/fetch.sh
assemble tree: fetch
	@$(S)/assemble.sh
build: assemble
	@$(S)/build.sh
userspace: build
	@$(S)/build-userspace.sh

# --- user-facing targets ----------------------------------------------------------
run: build
	@$(S)/vm.sh -- 'bash $(CURDIR)/scripts/guest/show.sh'

test: userspace
	@$(S)/test.sh

# quick: kselftests and a handful of liburing tests
test-quick: userspace
	@LIBURING_TESTS="nop.t fsync.t statx.t openat2.t rename.t xattr.t splice.t fadvise.t" $(S)/test.sh

# the stress kselftest for DURATION seconds (default 600) per sysctl value;
# STRESS_SEED to reproduce, KCONFIG=debug for the KASAN/kmemleak kernel
stress: userspace
	@$(S)/stress.sh

# benchmark: handoff sysctl 0 vs 1 in one boot (BENCH=full for the whole matrix),
# on the kernel built without debug options unless KCONFIG says otherwise
bench: export KCONFIG := $(or $(KCONFIG),bench)
bench: userspace
	@$(S)/bench.sh

# figures for the io-wq flood, epoll wait (multishot too), NAPI busy poll and
# RWF_DONTCACHE on a block device; BENCH_KERNEL=base for the unpatched kernel
bench-beyond: export KCONFIG := $(or $(KCONFIG),bench)
bench-beyond: userspace
	@$(S)/bench-beyond.sh

vm: build
	@test -n '$(subst ','\'',$(value CMD))' || { echo "usage: make vm CMD='command'" >&2; exit 2; }
	@$(S)/vm.sh --disk -- '$(subst ','\'',$(value CMD))'

series: assemble
	@$(S)/series.sh

# write the work tree's commits back into patches/ (see README.md)
export:
	@$(S)/export.sh

clean-build:
	@. $(S)/lib.sh; echo "removing $$(build_dir)"; rm -rf "$$(build_dir)"

# record the liburing results of the unpatched base (tests/liburing-baseline.txt)
baseline: fetch
	@$(S)/assemble.sh
	@$(S)/baseline.sh

# the arm64 kernel alone: 'make build ARCH=arm64' (every target takes ARCH=arm64)
build-arm64: assemble
	@ARCH=arm64 $(S)/build.sh

# build each series patch on its own (FROM=n to start at patch n)
bisect-build: assemble
	@$(S)/bisect-build.sh

# rustfmt + clippy on the series' Rust, then its counts
rustcheck: build
	@$(S)/rustcheck.sh
	@. $(S)/lib.sh; python3 $(S)/rust-counts.py "$$WORK"

# every task_struct and thread_struct member of the built kernel classified in
# Documentation/io_uring/handoff-fields.rst (make test runs it before booting)
fields-check: build
	@. $(S)/lib.sh; python3 $(S)/fields-check.py --parse-selftest && \
		python3 $(S)/fields-check.py "$$(build_dir)" "$$WORK/Documentation/io_uring/handoff-fields.rst" "$$ARCH"

# unsafe blocks, bindings:: uses, ... of the handoff's Rust (issue #13's bounds)
rust-counts: assemble
	@. $(S)/lib.sh; python3 $(S)/rust-counts.py "$$WORK"
