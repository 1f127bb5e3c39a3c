#!/usr/bin/env bash
# Boot the built kernel in virtme-ng (KVM where it works, else TCG) and run
# one command in the guest; ARCH=arm64 boots the arm64 kernel under
# qemu-system-aarch64 with a Debian arm64 root (scripts/rootfs.sh).
#   vm.sh [--disk] [--append 'kopts'] -- 'command'
# The guest writes the command's stdout, stderr and exit status into a
# host folder ($RUN, kept under $OUT/vm/), which is what we trust; vng's
# own exit status is not (it can return 255 for a command that ran).
# The full kernel console is kept in $RUN/console.log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

disk=0 append=() mem=${VM_MEM:-2G} cpus=${VM_CPUS:-2}
while [ $# -gt 0 ]; do
	case "$1" in
	--disk) disk=1 ;;
	--append) append+=(-a "$2"); shift ;;
	--) shift; break ;;
	*) break ;;
	esac
	shift
done
[ $# -gt 0 ] || die "usage: vm.sh [--disk] [--append OPTS] -- COMMAND"
RUN=${RUN:-$OUT/vm/$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$RUN"
[ "$ARCH" = x86_64 ] || need_root_or_sudo
need_tool vng "pip:virtme-ng $VNG_VERSION"
B=$(build_dir)
[ -f "$(kernel_image "$B")" ] || die "no $ARCH kernel in $B: run 'make build ARCH=$ARCH' first"
arch_args=() qemu_opts=() rw_arg=$RUN
case "$ARCH" in
x86_64)
	need_tool qemu-system-x86_64 qemu-system-x86
	;;
arm64)
	need_tool qemu-system-aarch64 qemu-system-arm
	# The guest runs from Debian's arm64 packages (scripts/rootfs.sh), and
	# sees of the host only the repo, its own cross-built userspace and $RUN,
	# at the same paths as on the host.
	R=$(rootfs_dir)
	[ -f "$R/.iou-rootfs" ] || die "no arm64 root filesystem in $R: run 'make userspace ARCH=arm64'"
	arch_args=(--arch arm64 --root "$R")
	for d in "$REPO" "$(kselftest_dir)" "$(dirname "$(liburing_src)")" "$(bench_bin_dir)"; do
		[ -d "$d" ] || continue
		mkdir -p "$R$d" 2>/dev/null || $SUDO mkdir -p "$R$d"
		arch_args+=(--rodir "$d=$d")
	done
	mkdir -p "$R$RUN" 2>/dev/null || $SUDO mkdir -p "$R$RUN"
	rw_arg="$RUN=$RUN"
	# every feature the arch hooks handle that this QEMU emulates: pointer
	# authentication, SVE, SME, MTE (-cpu max; the impdef PAC algorithm is
	# the fast one under TCG)
	qemu_opts=(-cpu max,pauth-impdef=on -machine virt,mte=on)
	;;
esac

# vm_accel: kvm when KVM runs this guest, else tcg. VM_ACCEL=kvm|tcg forces
# one. /dev/kvm can be there and still not run a guest (nested
# virtualisation that stops at "Decompressing Linux..." or fails to emulate
# an instruction), so the first boot of a host boot is a probe: a KVM boot of
# this kernel to a shell, within 60 s; its answer is kept in $CACHE.
vm_accel() {
	case "${VM_ACCEL:-auto}" in
	kvm) [ "$ARCH" = x86_64 ] || die "VM_ACCEL=kvm: an $ARCH guest on this x86_64 host runs under TCG"
	     echo kvm; return ;;
	tcg) echo tcg; return ;;
	auto) ;;
	*) die "VM_ACCEL='$VM_ACCEL': auto, kvm or tcg" ;;
	esac
	if [ "$ARCH" != x86_64 ] || [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
		echo tcg; return
	fi
	local f=$CACHE/kvm-probe key out
	key="$(uname -r) $(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
	if [ "$(head -n1 "$f" 2>/dev/null)" = "$key" ]; then sed -n 2p "$f"; return; fi
	info "probing KVM with a boot of this kernel (at most 60 s, once per host boot; log: $RUN/kvm-probe.log)"
	local rc=0 a=tcg
	(cd "$RUN" && timeout -k 5 60 vng --run "$B" -S --force-9p --cpus 1 -m 1G \
		--exec 'echo IOU-KVM-PROBE-OK' </dev/null >"$RUN/kvm-probe.log" 2>&1) || rc=$?
	if grep -q IOU-KVM-PROBE-OK "$RUN/kvm-probe.log"; then
		a=kvm
	elif [ "$rc" != 124 ] && [ "$rc" != 137 ]; then
		# vng failed rather than hung: not an answer about KVM, ask again next time
		warn "KVM probe failed (rc=$rc, see $RUN/kvm-probe.log): TCG for this run"
		echo tcg; return
	fi
	# a boot that stopped (the nested-virtualisation failure) or reached the shell
	printf '%s\n%s\n' "$key" "$a" > "$f.tmp" && mv "$f.tmp" "$f"
	[ "$a" = kvm ] || info "KVM does not run the guest here: TCG (rm $f to probe again)"
	echo "$a"
}

printf '%s\n' "$*" > "$RUN/cmd.sh"
rm -f "$RUN/status"
disk_args=()
if [ "$disk" = 1 ]; then
	img=$CACHE/scratch.img
	[ -f "$img" ] || truncate -s 8G "$img"
	disk_args=(--disk "$img")
fi

timeout_s=${VM_TIMEOUT:-600}
# Multi-threaded TCG (one host thread per vCPU) can run a stale translation
# of a site the kernel live-patched with int3 (a static key during boot, a
# tracepoint switched on by a test) after the patch completed: "Oops: int3"
# at an address where memory no longer holds an int3. That one signature
# (scripts/verdict.py race: the Code: byte before the trap address is not cc,
# with what follows it while it is the same trap: a second hit of it during
# the report, the panic of an oops in an interrupt) is run again from the
# start, at most VM_BOOT_ATTEMPTS times, with the crashed console and partial
# results kept; the summary counts them. Any other
# crash, before or after the command started (a KUnit panic at boot, a real
# int3), is a failure and is not retried. Single-threaded TCG
# (VM_TCG_THREAD=single) avoids the race but slows multi-threaded tests
# enough to change timing-sensitive liburing results (futex.t, iowait.t).
attempts=${VM_BOOT_ATTEMPTS:-3}
# KVM where it works for this guest (scripts/lib.sh vm_accel), TCG otherwise
accel=$(vm_accel)
echo "$accel" > "$RUN/accel"
if [ "$accel" = kvm ]; then
	accel_args=() accel_opts=
else
	accel_args=(--disable-kvm) accel_opts="-accel tcg,thread=${VM_TCG_THREAD:-multi}"
fi
is_race() { python3 "$REPO/scripts/verdict.py" race "$RUN/console.log"; }
for attempt in $(seq 1 "$attempts"); do
	info "booting $(cat "$B/include/config/kernel.release") $ARCH, $accel (timeout ${timeout_s}s, results in $RUN)"
	rm -f "$RUN/started" "$RUN/status"
	set +e
	# The guest runs from the host's filesystem (read-only over 9p); $RUN is writable.
	(cd "$RUN" && timeout -k 30 "$timeout_s" vng --run "$B" -S --force-9p "${accel_args[@]}" \
		"${arch_args[@]}" --cpus "$cpus" -m "$mem" -v --rwdir "$rw_arg" "${disk_args[@]}" "${append[@]}" \
		--qemu-opts="${qemu_opts[*]}${accel_opts:+ $accel_opts}" \
		--exec "bash $REPO/scripts/guest/run-cmd.sh $RUN" </dev/null 2>"$RUN/console.log" \
		| tee "$RUN/live.log")
	vrc=${PIPESTATUS[0]}
	set -e
	# finished, or hung: nothing to retry
	[ ! -f "$RUN/status" ] || break
	[ "$vrc" != 124 ] && [ "$vrc" != 137 ] || break
	# the stale-translation race is TCG's: under KVM every crash is a failure
	[ "$accel" = tcg ] || break
	if ! why=$(is_race); then
		warn "the guest crashed, not the TCG text-patching race ($why): not retried"
		break
	fi
	if [ "$attempt" -ge "$attempts" ]; then
		warn "the TCG text-patching race hit $attempts times: giving up ($why)"
		break
	fi
	if [ -f "$RUN/started" ]; then
		mkdir -p "$RUN/crashed-$attempt"
		# the run's parameters (test.sh's params) hold for the next attempt too
		find "$RUN" -maxdepth 1 -type f ! -name cmd.sh ! -name params ! -name accel ! -name 'console.*' \
			-exec mv -t "$RUN/crashed-$attempt" {} +
		cp "$RUN/console.log" "$RUN/console.crashed-$attempt.log"
		warn "run $attempt crashed in the guest: $why; retrying"
	else
		cp "$RUN/console.log" "$RUN/console.boot-failed-$attempt.log"
		warn "boot $attempt did not reach the command: $why; retrying"
	fi
done
[ -s "$RUN/live.log" ] || cat "$RUN/stdout" 2>/dev/null || true
if [ ! -f "$RUN/status" ]; then
	if [ "$vrc" = 124 ] || [ "$vrc" = 137 ]; then
		warn "guest did not finish within ${timeout_s}s (hang?); console: $RUN/console.log"
		echo hang > "$RUN/status"; exit 124
	fi
	warn "guest command did not complete (vng rc=$vrc); console: $RUN/console.log"
	tail -30 "$RUN/console.log" >&2 || true
	exit 125
fi
exit "$(cat "$RUN/status")"
