// SPDX-License-Identifier: GPL-2.0

//! Thread identity handoff.
//!
//! A thread that is about to block in the kernel hands what userspace can observe of it to an
//! idle thread of the same process, which returns to userspace in its place. The blocked thread
//! keeps its `task_struct`, kernel stack and in-kernel state and finishes its work anonymously.
//!
//! C header: [`include/linux/thread_handoff.h`](srctree/include/linux/thread_handoff.h)
//!
//! The C entry points are thin: each converts its raw pointers once and calls into the code
//! below. Everything that runs on the source side ([`thread_handoff_allowed`],
//! [`thread_handoff_compatible`], [`thread_handoff_prepare`], [`thread_handoff_begin`],
//! [`thread_handoff_commit`], [`thread_handoff_abort`]) is called from the scheduler's pre-sleep
//! hook, so it must not sleep, allocate or panic: it takes spinning locks only (the threadgroup
//! exclusion only if it is free), and the accounting arithmetic wraps instead of overflowing.
//!
//! The move has two parts. [`commit`] moves, in one critical section under `tasklist_lock` and
//! the siglock, everything through which another task reaches the thread, while the source is
//! `current` and the destination asleep and pinned under its `pi_lock`: no tid lookup finds a
//! half moved thread. The destination first adopts the scheduling attributes and the affinity
//! taken from the source in that section, and the I/O priority and the name of the source
//! ([`thread_handoff_adopt`]); settings of them through the tid wait until it has. [`finish`]
//! then moves, on the destination, what only the thread itself uses, from the source, which
//! stays parked until then.

use core::ptr::{self, addr_of, addr_of_mut};
use kernel::{
    bindings,
    cpumask::Cpumask,
    prelude::*,
    signal::{SigSet, Signal},
    sync::{
        atomic::{Atomic, Relaxed, Release},
        barrier::{smp_mb, Full},
        RawSpinLock,
    },
    task::{CurrentTask, Task},
};

/// The C task struct, for the raw pointers the C entry points pass and the moves still take.
type RawTask = bindings::task_struct;

/// `task_struct::handoff_seq` of `t`: odd from [`commit`] until [`thread_handoff_adopt`], when a
/// handoff gave `t` a tid. Settings through the tid wait for it to be even, take it before they act
/// and check it after (see `include/linux/thread_handoff.h`). Only the commit and the adoption
/// write it, one after the other.
///
/// # Safety
///
/// `t` must be valid for `'a`.
unsafe fn handoff_seq<'a>(t: *mut RawTask) -> &'a Atomic<u32> {
    // SAFETY: `t` is valid for `'a`; every other access to the field is marked (`READ_ONCE()`,
    // `smp_load_acquire()`), but for the copy into a child forked by the task itself, which
    // neither a commit nor an adoption runs for meanwhile.
    unsafe { Atomic::from_ptr(addr_of_mut!((*t).handoff_seq)) }
}

/// The `pi_lock` of `t`. Like every `pi_lock` holder, take it with interrupts off (under
/// `tasklist_lock`, or [`kernel::interrupt::local_interrupt_disable`]).
///
/// # Safety
///
/// `t` must be valid for `'a`.
unsafe fn pi_lock<'a>(t: *mut RawTask) -> &'a RawSpinLock<()> {
    // SAFETY: `t` is valid for `'a`, and fork initialised its `pi_lock`.
    unsafe { RawSpinLock::from_raw(addr_of_mut!((*t).pi_lock)) }
}

/// Prefix of this crate's log messages, for the `pr_*!` macros.
const __LOG_PREFIX: &[u8] = b"thread_handoff\0";

/// `prctl()` driven process flags that follow the identity. `PF_MEMALLOC_NOIO` and friends stay:
/// kernel code sets those too, for its own scopes.
const MOVED_PF_FLAGS: c_uint =
    bindings::PF_MCE_PROCESS | bindings::PF_MCE_EARLY | bindings::PF_FORKNOEXEC;

/// Why a source or destination was refused.
///
/// Every refusal errs on the safe side: state that is bound to the `task_struct` rather than to
/// the identity cannot move, so a task holding such state keeps its identity and blocks as usual.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// The task is exiting, or a kernel or io-wq thread.
    NotUserTask,
    /// The task is traced, or traces others (tracees point back at the tracer task).
    Ptrace,
    /// The thread group is exiting.
    GroupExit,
    /// Per-task perf contexts are bound to the `task_struct`.
    #[cfg(CONFIG_PERF_EVENTS)]
    PerfContext,
    /// PI futex ownership is bound to the `task_struct`.
    #[cfg(CONFIG_FUTEX)]
    PiFutex,
    /// Syscall user dispatch is set up on this thread.
    UserDispatch,
    /// Only the fair class moves.
    RealTime,
    /// The core scheduling cookie is bound to the task.
    #[cfg(CONFIG_SCHED_CORE)]
    CoreCookie,
    /// Coverage collection is per thread.
    #[cfg(CONFIG_KCOV)]
    Kcov,
    /// Armed per-thread CPU timers would sample the wrong clock.
    #[cfg(CONFIG_POSIX_TIMERS)]
    CpuTimers,
    /// The syscall never returns on this task, its audit record would be lost.
    #[cfg(CONFIG_AUDITSYSCALL)]
    Audit,
    /// Pending uretprobes keep their return addresses in this task.
    #[cfg(CONFIG_UPROBES)]
    Uretprobe,
    /// A `vfork()` parent waits on this `task_struct`.
    VforkParent,
    /// The task created SysV shared memory segments: `exit_shm()` of the demoted task would
    /// treat them as orphaned (and destroy them with `kernel.shm_rmid_forced`) while the thread
    /// still runs.
    #[cfg(CONFIG_SYSVIPC)]
    SysvShm,
    /// BPF task local storage is attached to the `task_struct`: the thread's would stay with the
    /// demoted task, a worker's would become the thread's.
    #[cfg(CONFIG_BPF_SYSCALL)]
    BpfStorage,
    /// The destination belongs to another thread group.
    OtherGroup,
    /// Signals are pending on the destination itself.
    PendingSignals,
    /// The destination shares a different mm, file table, fs or namespaces.
    OtherContext,
    /// The identity would gain `no_new_privs`.
    NoNewPrivs,
    /// Different speculation controls ([`kernel::task::SpeculationCtrl`]).
    Speculation,
    /// A different seccomp mode or filter: the identity must not escape its filters.
    #[cfg(CONFIG_SECCOMP)]
    Seccomp,
    /// A different SysV semaphore undo list.
    #[cfg(CONFIG_SYSVIPC)]
    SysvSem,
    /// A different user namespace.
    UserNs,
    /// A security module keeps task state (in the task blob) that would not follow the identity.
    Lsm,
    /// The architecture cannot move the register state.
    Arch,
}

/// Where vetting checks report, see [`source_checks`]. Each check names the refusal it stands for
/// and whether it failed.
trait Checks {
    fn check(&mut self, why: Refusal, failed: bool);
}

/// Whether any check failed: an `or` per check and no branch, for the common case, where nothing
/// is refused, on every inline io_uring issue.
struct AnyFailed(bool);

impl Checks for AnyFailed {
    #[inline(always)]
    fn check(&mut self, _why: Refusal, failed: bool) {
        self.0 |= failed;
    }
}

/// The first check that failed, once one did.
struct FirstFailed(Option<Refusal>);

impl Checks for FirstFailed {
    #[inline(always)]
    fn check(&mut self, why: Refusal, failed: bool) {
        if failed && self.0.is_none() {
            self.0 = Some(why);
        }
    }
}

/// Runs the checks of [`vet_source`] that read plain fields of `t` into `c`.
///
/// Fields read here are only written by the task itself or under locks whose exact value does
/// not matter for a snapshot: the locked vetting in [`begin`] reads them again.
#[inline(always)]
fn source_checks(t: &CurrentTask, c: &mut impl Checks) {
    c.check(
        Refusal::NotUserTask,
        t.flags() & (bindings::PF_EXITING | bindings::PF_KTHREAD | bindings::PF_IO_WORKER) != 0,
    );
    // Tracees point back at their tracer through `ptraced`.
    c.check(Refusal::Ptrace, t.is_tracer());
    c.check(Refusal::GroupExit, t.group_exiting());
    pinned_checks(t, c);
    c.check(Refusal::UserDispatch, t.syscall_user_dispatch());
    c.check(Refusal::RealTime, t.is_rt_or_dl());
    #[cfg(CONFIG_SCHED_CORE)]
    c.check(Refusal::CoreCookie, t.has_core_cookie());
    #[cfg(CONFIG_KCOV)]
    c.check(Refusal::Kcov, t.has_kcov());
    #[cfg(CONFIG_POSIX_TIMERS)]
    c.check(Refusal::CpuTimers, t.has_cpu_timers());
    c.check(Refusal::VforkParent, t.has_vfork_waiter());
    // Only the task itself adds to its creator list (`newseg()`); another thread's IPC_RMID can
    // empty it at any time, which only turns a refusal into a needless one.
    #[cfg(CONFIG_SYSVIPC)]
    c.check(Refusal::SysvShm, t.created_sysv_shm());
    #[cfg(CONFIG_BPF_SYSCALL)]
    c.check(Refusal::BpfStorage, t.has_bpf_storage());
}

/// Names the first of [`source_checks`] that fails on `t`, off the hot path. A check that failed
/// a moment ago may pass now: the refusal stands, named after the task.
#[cold]
#[inline(never)]
fn source_refusal(t: &CurrentTask) -> Refusal {
    let mut first = FirstFailed(None);
    source_checks(t, &mut first);
    first.0.unwrap_or(Refusal::NotUserTask)
}

/// Vets the source, `current`, which is about to block.
// Inline: it runs on every inline io_uring issue, through [`thread_handoff_allowed`].
#[inline(always)]
fn vet_source(t: &CurrentTask) -> Result<(), Refusal> {
    let mut any = AnyFailed(false);
    source_checks(t, &mut any);
    if any.0 {
        return Err(source_refusal(t));
    }
    // What takes a call or a pointer chase, once the plain fields passed.
    #[cfg(CONFIG_AUDITSYSCALL)]
    if t.audits_syscall() {
        return Err(Refusal::Audit);
    }
    #[cfg(CONFIG_UPROBES)]
    if t.has_uretprobes() {
        return Err(Refusal::Uretprobe);
    }
    // State a security module keeps in the task blob that no worker could take: refused here,
    // before the issue, the request takes the io-wq path (see [`vet_destination`]).
    if kernel::security::thread_handoff(t, None).is_err() {
        return Err(Refusal::Lsm);
    }
    // SAFETY: `t` is `current`.
    if !unsafe { bindings::arch_thread_handoff_allowed(t.as_ptr()) } {
        return Err(Refusal::Arch);
    }
    Ok(())
}

/// Runs the checks of the state that can be set up between vetting and blocking into `c`, see
/// [`vet_pinned_state`]. Only the task itself installs a per-task perf context or adds PI state
/// it owns.
#[inline(always)]
fn pinned_checks(t: &CurrentTask, c: &mut impl Checks) {
    c.check(Refusal::Ptrace, t.is_traced());
    #[cfg(CONFIG_PERF_EVENTS)]
    c.check(Refusal::PerfContext, t.has_perf_context());
    #[cfg(CONFIG_FUTEX)]
    c.check(Refusal::PiFutex, t.owns_pi_futex());
}

/// State that can be set up between vetting and blocking, checked again in
/// [`thread_handoff_prepare`].
fn vet_pinned_state(t: &CurrentTask) -> Result<(), Refusal> {
    let mut first = FirstFailed(None);
    pinned_checks(t, &mut first);
    first.0.map_or(Ok(()), Err)
}

/// Vets the destination `dst` for the identity of the source `src`, for `cur`, which is `src` or
/// passes its identity on.
///
/// Each answer is a snapshot: the other tasks and the destination may change some of what is
/// compared meanwhile (the destination its own context while it runs); the claim pins the
/// destination and, holding the siglock, checks again.
fn vet_destination(src: &Task, dst: &Task, cur: &CurrentTask) -> Result<(), Refusal> {
    if dst.flags() & bindings::PF_EXITING != 0 || dst.is_traced() {
        return Err(Refusal::NotUserTask);
    }
    if !src.same_thread_group(dst) {
        return Err(Refusal::OtherGroup);
    }
    // Signals sent to the worker's tid stay the worker's: they must not become the thread's.
    if dst.has_own_pending_signals() {
        return Err(Refusal::PendingSignals);
    }
    if dst.syscall_user_dispatch() {
        return Err(Refusal::UserDispatch);
    }
    if !src.same_context(dst) {
        return Err(Refusal::OtherContext);
    }
    if dst.no_new_privs() && !src.no_new_privs() {
        return Err(Refusal::NoNewPrivs);
    }
    // The task itself changes them (prctl), and seccomp: a filter installed with TSYNC mitigates
    // the caller but only those threads that had no filter yet, so two tasks with the same filter
    // may still differ here. The claim holds the siglock, which seccomp takes for either change.
    if src.speculation_ctrl() != dst.speculation_ctrl() {
        return Err(Refusal::Speculation);
    }
    #[cfg(CONFIG_SECCOMP)]
    if !src.same_seccomp(dst) {
        return Err(Refusal::Seccomp);
    }
    #[cfg(CONFIG_SYSVIPC)]
    if !src.same_sysvsem(dst) {
        return Err(Refusal::SysvSem);
    }
    // Storage attached after this check and before the commit stays where it was attached (see
    // "Known gaps" in `Documentation/io_uring/handoff.rst`).
    #[cfg(CONFIG_BPF_SYSCALL)]
    if dst.has_bpf_storage() {
        return Err(Refusal::BpfStorage);
    }
    if !src.same_user_ns(dst) {
        return Err(Refusal::UserNs);
    }
    // The task blobs of the security modules stay with their tasks: AppArmor's pending exec
    // transition or hat, the TOMOYO domain. Both the original source and `current`, which holds
    // the tid when a promoted worker passes it on: a write to its attributes is refused while a
    // handoff is armed (io_uring_handoff_armed()), but that is its own state, not `src`'s.
    if kernel::security::thread_handoff(src, Some(dst)).is_err() {
        return Err(Refusal::Lsm);
    }
    if !ptr::eq::<Task>(&**cur, src) && kernel::security::thread_handoff(cur, Some(dst)).is_err() {
        return Err(Refusal::Lsm);
    }
    // SAFETY: `src` is `current` or parked, `dst` a valid task.
    if !unsafe { bindings::arch_thread_handoff_compatible(src.as_ptr(), dst.as_ptr()) } {
        return Err(Refusal::Arch);
    }
    Ok(())
}

/// Reads the per-thread accounting of `p` that follows its tid.
///
/// # Safety
///
/// Interrupts must be off (the tick writes the CPU times from interrupt context), and `p` must be
/// `current`, or a task that is off its CPU whose `pi_lock` the caller holds, so that it cannot
/// run until this returns: nothing but the caller writes its accounting then.
unsafe fn acct_read(p: *mut RawTask) -> bindings::thread_handoff_acct {
    // SAFETY: `p` is `current` with interrupts off, or blocked with its `pi_lock` held, as
    // sched_exec_runtime_read() requires.
    let exec_runtime = unsafe { bindings::sched_exec_runtime_read(p) };
    // SAFETY: `p` is `current` and interrupts are off, or `p` cannot run: nothing writes these
    // now, the counters are only written by the task itself.
    unsafe {
        bindings::thread_handoff_acct {
            utime: (*p).utime,
            stime: (*p).stime,
            gtime: (*p).gtime,
            exec_runtime,
            min_flt: (*p).min_flt,
            maj_flt: (*p).maj_flt,
            nvcsw: (*p).nvcsw,
            nivcsw: (*p).nivcsw,
            ioac: (*p).ioac,
        }
    }
}

/// Runs `f` on the `prev_cputime` of `p`, the utime/stime split reported so far, under its lock.
///
/// # Safety
///
/// `p` must be a valid task and interrupts off; `f` must not sleep.
#[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
unsafe fn with_prev_cputime<R>(p: *mut RawTask, f: impl FnOnce(&mut u64, &mut u64) -> R) -> R {
    // SAFETY: `p` is valid for the call and the lock was initialised by fork; interrupts are off,
    // as cputime_adjust() has them.
    let lock = unsafe { RawSpinLock::<()>::from_raw(addr_of_mut!((*p).prev_cputime.lock)) };
    let _guard = lock.lock();
    // SAFETY: Under the lock, which protects the split, nothing else accesses the two fields.
    let (utime, stime) = unsafe {
        (
            &mut *addr_of_mut!((*p).prev_cputime.utime),
            &mut *addr_of_mut!((*p).prev_cputime.stime),
        )
    };
    f(utime, stime)
}

/// Keeps the sums over the thread group what they were when the per-thread accounting of a task
/// changes from `old` to `new` ([`acct_set`]): adds the difference to the totals of the exited
/// threads in `sig`. The fields are sums that wrap in C; a total may go "below zero" for as long
/// as the task that still counts the same time lives, and its exit adds its counts back.
///
/// # Safety
///
/// `sig` must be valid, with its siglock and `stats_lock` held for writing.
unsafe fn rebalance(
    sig: *mut bindings::signal_struct,
    old: &bindings::thread_handoff_acct,
    new: &bindings::thread_handoff_acct,
) {
    // SAFETY: Under the locks that protect these sums.
    let sig = unsafe { &mut *sig };
    sig.utime = sig.utime.wrapping_add(old.utime).wrapping_sub(new.utime);
    sig.stime = sig.stime.wrapping_add(old.stime).wrapping_sub(new.stime);
    sig.gtime = sig.gtime.wrapping_add(old.gtime).wrapping_sub(new.gtime);
    sig.sum_sched_runtime = sig
        .sum_sched_runtime
        .wrapping_add(old.exec_runtime)
        .wrapping_sub(new.exec_runtime);
    sig.min_flt = sig
        .min_flt
        .wrapping_add(old.min_flt)
        .wrapping_sub(new.min_flt);
    sig.maj_flt = sig
        .maj_flt
        .wrapping_add(old.maj_flt)
        .wrapping_sub(new.maj_flt);
    sig.nvcsw = sig.nvcsw.wrapping_add(old.nvcsw).wrapping_sub(new.nvcsw);
    sig.nivcsw = sig.nivcsw.wrapping_add(old.nivcsw).wrapping_sub(new.nivcsw);
    let (s, o, n) = (&mut sig.ioac, &old.ioac, &new.ioac);
    #[cfg(CONFIG_TASK_XACCT)]
    {
        s.rchar = s.rchar.wrapping_add(o.rchar).wrapping_sub(n.rchar);
        s.wchar = s.wchar.wrapping_add(o.wchar).wrapping_sub(n.wchar);
        s.syscr = s.syscr.wrapping_add(o.syscr).wrapping_sub(n.syscr);
        s.syscw = s.syscw.wrapping_add(o.syscw).wrapping_sub(n.syscw);
    }
    #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
    {
        s.read_bytes = s
            .read_bytes
            .wrapping_add(o.read_bytes)
            .wrapping_sub(n.read_bytes);
        s.write_bytes = s
            .write_bytes
            .wrapping_add(o.write_bytes)
            .wrapping_sub(n.write_bytes);
        s.cancelled_write_bytes = s
            .cancelled_write_bytes
            .wrapping_add(o.cancelled_write_bytes)
            .wrapping_sub(n.cancelled_write_bytes);
    }
    #[cfg(not(any(CONFIG_TASK_XACCT, CONFIG_TASK_IO_ACCOUNTING)))]
    let _ = (s, o, n);
}

/// The utime/stime split reported for `p` so far (`prev_cputime`).
///
/// # Safety
///
/// `p` must be a valid task and interrupts off.
#[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
unsafe fn split_read(p: *mut RawTask) -> (u64, u64) {
    // SAFETY: Per the contract.
    unsafe { with_prev_cputime(p, |utime, stime| (*utime, *stime)) }
}

/// Makes a split read by [`split_read`] the one reported for `p`, along with the times
/// [`acct_set`] gives it: the split reported for the tid continues where it was.
///
/// # Safety
///
/// `p` must be a valid task and interrupts off.
#[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
unsafe fn split_set(p: *mut RawTask, (utime, stime): (u64, u64)) {
    // SAFETY: Per the contract.
    unsafe {
        with_prev_cputime(p, |u, s| {
            *u = utime;
            *s = stime;
        })
    }
}

/// With native virtual CPU accounting nothing rescales the split: there is none to carry.
#[cfg(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE)]
unsafe fn split_read(_p: *mut RawTask) -> (u64, u64) {
    (0, 0)
}

#[cfg(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE)]
unsafe fn split_set(_p: *mut RawTask, _split: (u64, u64)) {}

/// Makes `acct` the per-thread accounting of `p`, whose accounting read `old` ([`acct_read`]).
/// The runtime keeps `p`'s slice delta (`sum_exec_runtime - prev_sum_exec_runtime`).
///
/// # Safety
///
/// Interrupts must be off and the caller must hold `p`'s `pi_lock`; `p` must be off its CPU and
/// so unable to run until this returns.
unsafe fn acct_set(
    p: *mut RawTask,
    acct: &bindings::thread_handoff_acct,
    old: &bindings::thread_handoff_acct,
) {
    let delta = acct.exec_runtime.wrapping_sub(old.exec_runtime);
    // SAFETY: The caller holds `p`'s `pi_lock`, as sched_exec_runtime_add() requires; adding the
    // wrapped difference sets the runtime.
    unsafe { bindings::sched_exec_runtime_add(p, delta) };
    // SAFETY: `p` cannot run and interrupts are off: nothing else writes these now.
    unsafe {
        (*p).utime = acct.utime;
        (*p).stime = acct.stime;
        (*p).gtime = acct.gtime;
        (*p).min_flt = acct.min_flt;
        (*p).maj_flt = acct.maj_flt;
        (*p).nvcsw = acct.nvcsw;
        (*p).nivcsw = acct.nivcsw;
        (*p).ioac = acct.ioac;
    }
}

/// Gives `dst` the per-thread accounting of `src`, before `dst` takes over `src`'s tid, and keeps
/// the process's sums: `src` keeps its own counts and `dst`'s are added to the exited threads'.
/// Whoever reads the tid sees the same counts on `dst` as on `src`, and one that looked `src` up
/// before the tid moves and reads it after still reads them: nothing goes back.
///
/// # Safety
///
/// `src` must be `current`, `dst` unable to run (its `pi_lock` held), interrupts off, `sig` the
/// signal struct of both with its siglock and `stats_lock` held.
unsafe fn acct_move(dst: *mut RawTask, src: *mut RawTask, sig: *mut bindings::signal_struct) {
    // SAFETY: Per the contract.
    unsafe {
        let old = acct_read(dst);
        let new = acct_read(src);
        let split = split_read(src);
        acct_set(dst, &new, &old);
        split_set(dst, split);
        rebalance(sig, &old, &new);
    }
}

/// Makes `src`'s credentials the credentials of `dst`, both real and effective.
///
/// This is not `commit_creds()`: the process is not changing credentials, an existing identity
/// moves between two of its tasks, and neither changes its own creds while it moves.
///
/// # Safety
///
/// Of `src` and `dst`, tasks of the same thread group, one must be `current` and the other
/// unable to run until this returns (asleep, with its `pi_lock` held), or both as in the KUnit
/// test, so that neither changes its credentials meanwhile.
unsafe fn move_creds(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: Neither task can change its credentials now, see above.
    let (old, new) = unsafe { ((*dst).real_cred, (*src).real_cred) };
    if ptr::eq(old, new) {
        return;
    }
    // SAFETY: `new` and `old` are live credentials, referenced by their tasks.
    let user_changed = unsafe { (*new).user != (*old).user };
    // SAFETY: One reference for `real_cred` and one for `cred`, as copy_creds() takes them.
    unsafe { bindings::get_cred_many(new, 2) };
    if user_changed {
        // SAFETY: `new` holds a reference on its ucounts.
        unsafe {
            bindings::inc_rlimit_ucounts(
                (*new).ucounts,
                bindings::rlimit_type_UCOUNT_RLIMIT_NPROC,
                1,
            )
        };
    }
    // SAFETY: The fields are RCU published pointers only their task writes, and `dst` does not run
    // now; the release stores order the reference counts above before the new pointers become
    // visible, like rcu_assign_pointer().
    unsafe {
        Atomic::from_ptr(addr_of_mut!((*dst).real_cred)).store(new, Release);
        Atomic::from_ptr(addr_of_mut!((*dst).cred)).store(new, Release);
    }
    if user_changed {
        // SAFETY: `old` holds a reference on its ucounts until the put below.
        unsafe {
            bindings::dec_rlimit_ucounts(
                (*old).ucounts,
                bindings::rlimit_type_UCOUNT_RLIMIT_NPROC,
                1,
            )
        };
    }
    // SAFETY: Drops the two references `dst` held through `real_cred` and `cred`.
    unsafe { bindings::put_cred_many(old, 2) };
}

/// Moves the signal state from `src` to `dst`; `src` gets a worker's mask.
///
/// # Safety
///
/// Both tasks must be valid and share `sighand`, whose `siglock` the caller holds.
unsafe fn move_signals(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: The caller holds the siglock, which protects all of these.
    unsafe {
        (*dst).blocked = (*src).blocked;
        (*dst).real_blocked = (*src).real_blocked;
        (*dst).saved_sigmask = (*src).saved_sigmask;
        (*dst).sas_ss_sp = (*src).sas_ss_sp;
        (*dst).sas_ss_size = (*src).sas_ss_size;
        (*dst).sas_ss_flags = (*src).sas_ss_flags;
        (*dst).restart_block = (*src).restart_block;

        // Like an io-wq worker: everything blocked but SIGKILL and SIGSTOP.
        (*src).blocked = SigSet::full()
            .without(Signal::KILL)
            .without(Signal::STOP)
            .into_raw();
        (*src).real_blocked = SigSet::empty().into_raw();
        // sas_ss_reset()
        (*src).sas_ss_sp = 0;
        (*src).sas_ss_size = 0;
        (*src).sas_ss_flags = bindings::SS_DISABLE;

        bindings::list_splice_tail_init(
            addr_of_mut!((*src).pending.list),
            addr_of_mut!((*dst).pending.list),
        );
        let pending = SigSet::from_raw((*src).pending.signal);
        (*dst).pending.signal = SigSet::from_raw((*dst).pending.signal)
            .union(&pending)
            .into_raw();
        (*src).pending.signal = SigSet::empty().into_raw();
    }
}

/// Makes `dst` the thread group leader in place of `src`, like de_thread() does for exec.
///
/// The tgid is the leader's tid, so leadership follows the tid.
///
/// # Safety
///
/// The caller holds `tasklist_lock` for writing; `src` is the leader of `dst`'s group.
unsafe fn move_leadership(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: Under `tasklist_lock`, which protects the thread, task and sibling lists and the
    // group leader pointers.
    unsafe {
        // The leader must come first on `signal->thread_head`: thread_group_empty() takes a
        // leader that is last on it for alone, and the exit and wait paths reap it early. Swap
        // the two positions. A walker under RCU alone (for_each_thread() without the siglock or
        // `tasklist_lock`) that stands on `src` meanwhile can skip the threads between the two.
        let mut prev = (*dst).thread_node.prev;
        if ptr::eq(prev, addr_of!((*src).thread_node)) {
            prev = addr_of_mut!((*dst).thread_node);
        }
        bindings::list_del_rcu(addr_of_mut!((*dst).thread_node));
        bindings::list_replace_rcu(
            addr_of_mut!((*src).thread_node),
            addr_of_mut!((*dst).thread_node),
        );
        bindings::list_add_rcu(addr_of_mut!((*src).thread_node), prev);

        bindings::transfer_pid(src, dst, bindings::pid_type_PIDTYPE_TGID);
        bindings::transfer_pid(src, dst, bindings::pid_type_PIDTYPE_PGID);
        bindings::transfer_pid(src, dst, bindings::pid_type_PIDTYPE_SID);

        bindings::list_replace_rcu(addr_of_mut!((*src).tasks), addr_of_mut!((*dst).tasks));
        bindings::list_replace_init(addr_of_mut!((*src).sibling), addr_of_mut!((*dst).sibling));

        let head = addr_of_mut!((*(*dst).signal).thread_head);
        let mut node = (*head).next;
        while !ptr::eq(node, head) {
            let task: *mut RawTask = kernel::container_of!(node, RawTask, thread_node);
            // WRITE_ONCE(): task_lock_group_leader() reads it without `tasklist_lock`.
            ptr::write_volatile(addr_of_mut!((*task).group_leader), dst);
            node = (*node).next;
        }

        (*dst).exit_signal = (*src).exit_signal;
        (*src).exit_signal = -1;
    }
}

/// Reparents `src`'s children to `dst`: they were forked by the identity, not the task.
///
/// # Safety
///
/// The caller holds `tasklist_lock` for writing.
unsafe fn move_children(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: Under `tasklist_lock`, which protects the children lists and parent pointers.
    unsafe {
        let head = addr_of_mut!((*src).children);
        let mut node = (*head).next;
        while !ptr::eq(node, head) {
            let child: *mut RawTask = kernel::container_of!(node, RawTask, sibling);
            ptr::write_volatile(addr_of_mut!((*child).real_parent), dst);
            if ptr::eq((*child).parent, src) {
                ptr::write_volatile(addr_of_mut!((*child).parent), dst);
            }
            node = (*node).next;
        }
        bindings::list_splice_init(head, addr_of_mut!((*dst).children));
        (*dst).self_exec_id = (*src).self_exec_id;
    }
}

/// Swaps tid, group leadership and children, and moves the signal state.
///
/// # Safety
///
/// The caller holds `tasklist_lock` for writing and the siglock of both tasks' shared `sighand`;
/// `src` is `current` and `dst` a task of its thread group that cannot run (its `pi_lock` held).
/// `leader` says whether `src` leads the group, in which case the caller also holds the
/// threadgroup exclusion.
unsafe fn exchange(dst: *mut RawTask, src: *mut RawTask, leader: bool) {
    // SAFETY: `tasklist_lock` is held for writing, as exchange_tids() and the list moves require,
    // and the siglock as move_signals() requires.
    unsafe {
        bindings::exchange_tids(dst, src);
        if leader {
            move_leadership(dst, src);
        }
        move_children(dst, src);
        move_signals(dst, src);
    }
}

/// Moves the robust futex lists and `clear_child_tid`, which exit reads on the task with the tid,
/// and hands PI futex ownership to `dst`.
///
/// # Safety
///
/// `src` must be `current` and `dst` unable to run, its `pi_lock` held by the caller; `src`
/// owns no PI futex and its futex state was set to exiting by [`begin`].
unsafe fn move_futex(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: Only the task itself reads these, at exit and exec; neither runs that now.
    unsafe {
        #[cfg(CONFIG_FUTEX)]
        {
            (*dst).futex.robust_list =
                ptr::replace(addr_of_mut!((*src).futex.robust_list), ptr::null_mut());
            #[cfg(CONFIG_COMPAT)]
            {
                (*dst).futex.compat_robust_list = ptr::replace(
                    addr_of_mut!((*src).futex.compat_robust_list),
                    ptr::null_mut(),
                );
            }
            // `dst` holds a tid userspace may name as a PI futex owner now: let waiters attach
            // to it. A demoted worker that is handed an identity again gets here as `dst` too.
            // `pi_lock` protects the state, see attach_to_pi_owner().
            (*dst).futex.state = bindings::FUTEX_STATE_OK;
        }
        (*dst).clear_child_tid =
            ptr::replace(addr_of_mut!((*src).clear_child_tid), ptr::null_mut());
    }
}

/// Moves the rseq registration of `src` to `current`.
///
/// # Safety
///
/// `src` must be the parked task whose identity `current` takes over.
unsafe fn move_rseq(src: *mut RawTask) {
    #[cfg(CONFIG_RSEQ)]
    // SAFETY: `src` is parked until this returns, per the contract.
    unsafe {
        bindings::rseq_handoff_move(src)
    };
    #[cfg(not(CONFIG_RSEQ))]
    let _ = src;
}

/// Copies the plain per-task attributes of the identity, the ones read through the tid (`/proc`,
/// the audit and parent death paths).
///
/// # Safety
///
/// `src` must be `current`, `dst` unable to run, its `pi_lock` held by the caller.
unsafe fn move_attributes(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: These fields are only written by their own task, and `dst` does not run; the no
    // new privs bit is set atomically.
    unsafe {
        #[cfg(CONFIG_AUDIT)]
        {
            (*dst).loginuid = (*src).loginuid;
            (*dst).sessionid = (*src).sessionid;
        }
        (*dst).personality = (*src).personality;
        (*dst).pdeath_signal = (*src).pdeath_signal;
        // One task of the group gets the parent-death signal, as before.
        (*src).pdeath_signal = 0;
        (*dst).timer_slack_ns = (*src).timer_slack_ns;
        (*dst).default_timer_slack_ns = (*src).default_timer_slack_ns;
        (*dst).start_time = (*src).start_time;
        (*dst).start_boottime = (*src).start_boottime;
        if bindings::task_no_new_privs(src) {
            bindings::task_set_no_new_privs(dst);
        }
        (*dst).flags = ((*dst).flags & !MOVED_PF_FLAGS) | ((*src).flags & MOVED_PF_FLAGS);
    }
}

/// Gives `dst` a copy of `src`'s memory policy.
///
/// # Safety
///
/// `dst` must be `current`, `src` a blocked task.
#[cfg(CONFIG_NUMA)]
unsafe fn move_mempolicy(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: `src` is blocked, its policy cannot change under us.
    let pol = unsafe { bindings::mpol_dup((*src).mempolicy) };
    if kernel::error::from_err_ptr(pol).is_err() {
        return;
    }
    // SAFETY: `task_lock` protects `mempolicy`; the old policy is dropped after the swap.
    unsafe {
        bindings::task_lock(dst);
        let old = ptr::replace(addr_of_mut!((*dst).mempolicy), pol);
        bindings::task_unlock(dst);
        bindings::mpol_put(old);
    }
}

#[cfg(not(CONFIG_NUMA))]
unsafe fn move_mempolicy(_dst: *mut RawTask, _src: *mut RawTask) {}

/// The I/O priority set on `t` with `ioprio_set()`, as its `io_context` holds it
/// (`IOPRIO_CLASS_NONE`, 0, if it has none).
///
/// # Safety
///
/// `t` must be valid.
#[cfg(CONFIG_BLOCK)]
unsafe fn ioprio_of(t: *mut RawTask) -> u16 {
    // `set_task_ioprio()` installs the context and writes the priority under the task lock.
    // SAFETY: `t` is valid.
    unsafe { bindings::task_lock(t) };
    // SAFETY: Under the task lock `io_context` stays as it is, and is valid if not null:
    // `exit_io_context()` clears it under the lock before it drops its reference. The
    // priority is read once, volatile: the other tasks sharing the context (CLONE_IO) write it
    // under their own task locks.
    let prio = unsafe {
        let ioc = (*t).io_context;
        if ioc.is_null() {
            0
        } else {
            ptr::read_volatile(addr_of!((*ioc).ioprio))
        }
    };
    // SAFETY: Taken above.
    unsafe { bindings::task_unlock(t) };
    prio
}

/// Carries over an ionice'd IO priority. Workers share the io_context of the thread that forked
/// them, so the destination detaches from it first.
///
/// A setting through the tid that lands on `src` after it was read here finds the tid moved
/// (the read follows the commit, under the task lock the setting takes) and is made again on
/// `dst`, once it is done adopting (`ioprio_set()`, `thread_handoff_moved()`).
///
/// # Safety
///
/// `dst` must be `current`, `src` the task that handed it the tid, which stays alive and does not
/// change its own I/O context until it is released (`io_wq_handoff_finished()`).
#[cfg(CONFIG_BLOCK)]
unsafe fn move_ioprio(dst: *mut RawTask, src: *mut RawTask) {
    const IOPRIO_CLASS_NONE: u32 = 0;
    // SAFETY: `src` is valid per the contract.
    let prio = unsafe { ioprio_of(src) };
    // SAFETY: `dst` is `current`, and the pointer is only compared: a setting for a process
    // group or a user may install a context meanwhile (one through the tid waits for the
    // adoption), and `exit_io_context()` reads it again under the task lock.
    if !unsafe { ptr::read_volatile(addr_of!((*dst).io_context)) }.is_null() {
        // SAFETY: `dst` is `current`, which may drop its own context.
        unsafe { bindings::exit_io_context(dst) };
    }
    let class = (u32::from(prio) >> bindings::IOPRIO_CLASS_SHIFT) & bindings::IOPRIO_CLASS_MASK;
    // SAFETY: `dst` is `current`, alive.
    if class != IOPRIO_CLASS_NONE && unsafe { bindings::set_task_ioprio(dst, prio.into()) } != 0 {
        kernel::pr_warn_once!("cannot move the IO priority\n");
    }
}

#[cfg(not(CONFIG_BLOCK))]
unsafe fn move_ioprio(_dst: *mut RawTask, _src: *mut RawTask) {}

/// Moves a threaded cgroup placement; the source stays where it is.
///
/// # Safety
///
/// `dst` must be `current`, `src` a blocked task.
unsafe fn move_cgroup(dst: *mut RawTask, src: *mut RawTask) {
    #[cfg(CONFIG_CGROUPS)]
    // SAFETY: Comparing the css_set pointers needs no dereference; attaching takes its own locks.
    unsafe {
        if !ptr::eq((*src).cgroups, (*dst).cgroups)
            && bindings::cgroup_attach_task_all(src, dst) != 0
        {
            kernel::pr_warn_once!("cannot move the cgroup placement\n");
        }
    }
}

/// The scheduling attributes of a task as `sched_setattr()` takes them: policy, nice value or
/// real-time priority, reset-on-fork, a custom slice and the utilization clamps the user
/// requested.
///
/// # Safety
///
/// `t` must be valid, with its `pi_lock` held or `current`: either keeps
/// `__sched_setscheduler()` and `set_user_nice()`, which write them under the task's `pi_lock`
/// and run queue lock, from changing them under us.
unsafe fn sched_attr_of(t: *mut RawTask) -> bindings::sched_attr {
    // SAFETY: An all-zero `sched_attr` is valid: no flags, no clamps.
    let mut attr: bindings::sched_attr = unsafe { core::mem::zeroed() };
    attr.size = core::mem::size_of::<bindings::sched_attr>() as u32;
    // SAFETY: `t` is valid and its attributes stable, per the contract.
    unsafe {
        attr.sched_policy = (*t).policy;
        attr.sched_nice = bindings::task_nice(t);
        if (*t).policy == bindings::SCHED_FIFO || (*t).policy == bindings::SCHED_RR {
            attr.sched_priority = (*t).rt_priority;
        }
        if (*t).sched_reset_on_fork() != 0 {
            attr.sched_flags |= u64::from(bindings::SCHED_FLAG_RESET_ON_FORK);
        }
        if (*t).se.custom_slice != 0 {
            attr.sched_runtime = (*t).se.slice;
        }
        #[cfg(CONFIG_UCLAMP_TASK)]
        {
            let min = &(*t).uclamp_req[bindings::uclamp_id_UCLAMP_MIN as usize];
            let max = &(*t).uclamp_req[bindings::uclamp_id_UCLAMP_MAX as usize];
            if min.user_defined() != 0 {
                attr.sched_flags |= u64::from(bindings::SCHED_FLAG_UTIL_CLAMP_MIN);
                attr.sched_util_min = min.value();
            }
            if max.user_defined() != 0 {
                attr.sched_flags |= u64::from(bindings::SCHED_FLAG_UTIL_CLAMP_MAX);
                attr.sched_util_max = max.value();
            }
        }
    }
    attr
}

/// Returns whether `sched_setattr()` of `a` and of `b` sets the same attributes.
fn same_sched_attr(a: &bindings::sched_attr, b: &bindings::sched_attr) -> bool {
    a.sched_policy == b.sched_policy
        && a.sched_nice == b.sched_nice
        && a.sched_priority == b.sched_priority
        && a.sched_flags == b.sched_flags
        && a.sched_runtime == b.sched_runtime
        && a.sched_util_min == b.sched_util_min
        && a.sched_util_max == b.sched_util_max
}

/// Resets, with -1, the utilization clamps that `have` sets and `attr` does not: `sched_setattr()`
/// of `attr` would leave them in place otherwise.
#[cfg(CONFIG_UCLAMP_TASK)]
fn reset_own_clamps(attr: &mut bindings::sched_attr, have: &bindings::sched_attr) {
    for (flag, value) in [
        (
            bindings::SCHED_FLAG_UTIL_CLAMP_MIN,
            &mut attr.sched_util_min,
        ),
        (
            bindings::SCHED_FLAG_UTIL_CLAMP_MAX,
            &mut attr.sched_util_max,
        ),
    ] {
        let flag = u64::from(flag);
        if have.sched_flags & flag != 0 && attr.sched_flags & flag == 0 {
            attr.sched_flags |= flag;
            *value = u32::MAX;
        }
    }
}

#[cfg(not(CONFIG_UCLAMP_TASK))]
fn reset_own_clamps(_attr: &mut bindings::sched_attr, _have: &bindings::sched_attr) {}

/// Gives `dst` the scheduling attributes `want`, only calling into the scheduler when they
/// differ from its own.
///
/// # Safety
///
/// `dst` must be `current`.
unsafe fn move_sched(dst: *mut RawTask, want: &bindings::sched_attr) {
    let irq_off = kernel::interrupt::local_interrupt_disable();
    // SAFETY: `dst` is `current`. Its `pi_lock` serializes with changes of its attributes (a
    // setting through the tid a worker had before it was claimed may still land on it).
    let guard = unsafe { pi_lock(dst) }.lock();
    // SAFETY: `dst` is valid, its `pi_lock` held.
    let have = unsafe { sched_attr_of(dst) };
    drop(guard);
    drop(irq_off);
    if same_sched_attr(want, &have) {
        return;
    }
    let mut attr = *want;
    reset_own_clamps(&mut attr, &have);
    // SAFETY: `dst` is `current`, `attr` a complete attribute set taken from a task.
    if unsafe { bindings::sched_setattr_nocheck(dst, &attr) } != 0 {
        kernel::pr_warn_once!("cannot move the scheduling attributes\n");
    }
}

/// Returns the affinity the user requested for `t`, or its effective one if none was requested.
///
/// # Safety
///
/// `t` must be valid, with its `pi_lock` held for as long as the result is used: under it the user
/// mask, if any, stays allocated and both masks stable.
unsafe fn requested_cpus<'a>(t: *mut RawTask) -> &'a Cpumask {
    // SAFETY: `t` is valid.
    let user = unsafe { (*t).user_cpus_ptr };
    if user.is_null() {
        // SAFETY: `t` is valid, its mask stable under its `pi_lock`.
        unsafe { Cpumask::from_raw(addr_of!((*t).cpus_mask)) }
    } else {
        // SAFETY: The user mask stays allocated under `t`'s `pi_lock`.
        unsafe { Cpumask::from_raw(user) }
    }
}

/// Gives `dst` the affinity `mask` the way `sched_setaffinity()` sets it, as the one the user
/// requested, unless it has that one already (its requested mask, or its effective one if it has
/// none).
///
/// # Safety
///
/// `dst` must be `current`.
unsafe fn move_affinity(dst: *mut RawTask, mask: &Cpumask) {
    let irq_off = kernel::interrupt::local_interrupt_disable();
    // SAFETY: `dst` is `current`. Its `pi_lock` serializes with changes of its masks.
    let guard = unsafe { pi_lock(dst) }.lock();
    // SAFETY: `dst` is valid, its `pi_lock` held while the mask is compared.
    let have = unsafe { requested_cpus(dst) };
    // SAFETY: Both masks are valid cpumasks.
    let same = unsafe { bindings::cpumask_equal(have.as_raw(), mask.as_raw()) };
    drop(guard);
    drop(irq_off);
    if same {
        return;
    }
    // SAFETY: `mask` is a valid cpumask; pid 0 is `current`, `dst`.
    if unsafe { bindings::sched_setaffinity(0, mask.as_raw()) } != 0 {
        kernel::pr_warn_once!("cannot move the CPU affinity\n");
    }
}

/// Copies the task name.
///
/// A name written through the tid (`/proc/<tid>/comm`) that lands on `src` after it was read
/// here finds the tid moved and is written again on `dst` (`comm_write()`): the writer's full
/// barrier in `thread_handoff_pid_moved()` and the one [`thread_handoff_adopt`] starts with order
/// each side's write before its read, and the tid moved before `dst` runs.
///
/// # Safety
///
/// `dst` must be `current`, `src` the task that handed it the tid, alive until it is released
/// (`io_wq_handoff_finished()`).
unsafe fn move_comm(dst: *mut RawTask, src: *mut RawTask) {
    // SAFETY: `src` is valid per the contract. A name written through the tid may change it
    // meanwhile (`__set_task_comm()` writes it without a lock): the read is volatile, and a torn
    // copy is written again by that writer, which finds the tid moved.
    let mut comm = unsafe { ptr::read_volatile(addr_of!((*src).comm)) };
    // Torn or not, a name always ends in a NUL.
    if let Some(last) = comm.last_mut() {
        *last = 0;
    }
    // SAFETY: `dst` is `current`; `comm` is NUL terminated.
    unsafe { bindings::__set_task_comm(dst, comm.as_ptr(), false) };
}

/// Vets the source again under the locks [`begin`] holds, for what others can set up on it
/// between the vetting at arm time and the commit. The answer holds for as long as
/// `tasklist_lock` is held for writing and the siglock of `t`'s group: [`begin`] holds both.
fn vet_locked(t: &CurrentTask, leader: bool) -> Result<(), Refusal> {
    // Everything vetted at arm time, again: other tasks may have set some of it up through the
    // tid since (PR_SCHED_CORE, sched_setscheduler(), perf_event_open(), timer_settime() of a
    // thread CPU clock, under the siglock). `ptrace` and `ptraced` change under `tasklist_lock`.
    vet_source(t)?;
    // The group's exit and exec and the job control bits change under the siglock.
    if t.group_exiting() {
        return Err(Refusal::GroupExit);
    }
    // A group stop or a ptrace trap in progress counts this task: it must stop as itself.
    if t.jobctl() & bindings::JOBCTL_PENDING_MASK as c_ulong != 0 {
        return Err(Refusal::GroupExit);
    }
    // Leadership changes under `tasklist_lock`.
    if t.is_group_leader() != leader {
        return Err(Refusal::GroupExit);
    }
    Ok(())
}

/// Takes the locks for moving what names `src`, `current`, vets it again under them and bars new
/// PI futex waiters from attaching to it. On success the locks stay held for [`commit`] or
/// [`abort`].
///
/// # Safety
///
/// `src` must be `current`, vetted and prepared, in the scheduler's pre-sleep hook; nothing here
/// sleeps.
unsafe fn begin(cur: &CurrentTask, th: &mut bindings::thread_handoff) -> Result<(), Refusal> {
    let src = cur.as_ptr();
    // `src` is `current`; only a handoff or exec changes its leadership, and neither can run on
    // its group now (checked again under the locks below).
    let leader = cur.is_group_leader();
    // Leadership moves only with the threadgroup exclusion held, as in de_thread(), so that a
    // cgroup migration of the whole process keeps its leader. Don't wait for it.
    // SAFETY: `src` is valid.
    if leader && !unsafe { bindings::cgroup_threadgroup_change_trybegin(src) } {
        return Err(Refusal::GroupExit);
    }
    // SAFETY: `src` is a user task, `sighand` is shared by its group; the lock order is the one of
    // exit and exec: threadgroup exclusion, `tasklist_lock`, siglock.
    let sighand = unsafe { (*src).sighand };
    // SAFETY: As above.
    unsafe { bindings::write_lock_irq(addr_of_mut!(bindings::tasklist_lock)) };
    // SAFETY: As above.
    unsafe { bindings::spin_lock(addr_of_mut!((*sighand).siglock)) };
    th.leader = leader;

    let vetted = vet_locked(cur, leader).and_then(|()| {
        // SAFETY: `src` is `current`.
        unsafe { bar_pi_waiters(src) }
    });
    if let Err(why) = vetted {
        // SAFETY: Taken above; `stats_lock` was not.
        unsafe { unlock_tasks(src, leader) };
        return Err(why);
    }
    // The process wide sums change in [`commit`], and the exchange reorders the thread list
    // their readers walk: they retry on `stats_lock`. It nests in the siglock as in
    // __exit_signal(), and is taken here, before the claim pins the destination with a raw lock.
    // SAFETY: `src`'s signal struct is valid.
    unsafe { bindings::write_seqlock(addr_of_mut!((*(*src).signal).stats_lock)) };
    Ok(())
}

/// Refuses if `t` owns a PI futex, and otherwise marks its futex state exiting, so that a waiter
/// that looked `t` up by its tid before the tid moves retries the lookup (it waits for the
/// `exit_mutex`, which nobody holds, and looks the tid up again) instead of attaching to a task
/// that no longer has the tid. See attach_to_pi_owner().
///
/// # Safety
///
/// `t` must be `current`.
unsafe fn bar_pi_waiters(t: *mut RawTask) -> Result<(), Refusal> {
    #[cfg(CONFIG_FUTEX)]
    {
        // SAFETY: `t` is `current`. Its `pi_lock` protects the PI state list and the futex state;
        // interrupts are off already (`tasklist_lock`).
        let guard = unsafe { pi_lock(t) }.lock();
        // SAFETY: Under `pi_lock`.
        let owner = !unsafe { bindings::list_empty(addr_of!((*t).futex.pi_state_list)) };
        if !owner {
            // SAFETY: Under `pi_lock`.
            unsafe { (*t).futex.state = bindings::FUTEX_STATE_EXITING };
        }
        drop(guard);
        if owner {
            return Err(Refusal::PiFutex);
        }
    }
    #[cfg(not(CONFIG_FUTEX))]
    let _ = t;
    Ok(())
}

/// Undoes [`bar_pi_waiters`]. With `th`, also takes `t`'s scheduling attributes and the
/// affinity the user requested for it (the effective one if none was) into `th`, for
/// [`thread_handoff_adopt`] to give the destination.
///
/// Called after the tid moved: taking `t`'s `pi_lock` then also orders the move before every
/// later `pi_lock` section of `t`. A setting of the scheduling attributes or the affinity through
/// the tid that lands on `t` is made under that lock (`task_rq_lock()`): if it comes before this
/// section, it is in what is taken here; if it comes after it, it finds that the tid moved
/// (`thread_handoff_moved()`) and is made again on the task that holds the tid, once that task
/// adopted what is taken here (`thread_handoff_wait()`).
///
/// # Safety
///
/// `t` must be `current`, with interrupts off.
unsafe fn allow_pi_waiters(t: *mut RawTask, th: Option<&mut bindings::thread_handoff>) {
    // SAFETY: `t` is `current`; interrupts are off, as for every `pi_lock` holder.
    let guard = unsafe { pi_lock(t) }.lock();
    #[cfg(CONFIG_FUTEX)]
    // SAFETY: `pi_lock` protects the futex state.
    unsafe {
        (*t).futex.state = bindings::FUTEX_STATE_OK
    };
    if let Some(th) = th {
        // SAFETY: `t` is valid, its `pi_lock` held.
        th.sched = unsafe { sched_attr_of(t) };
        // SAFETY: `t` is valid, its `pi_lock` held while the mask is copied.
        let from = unsafe { requested_cpus(t) };
        // SAFETY: `th.user_mask` is a valid cpumask, only borrowed here.
        from.copy(unsafe { Cpumask::from_raw_mut(&mut th.user_mask) });
    }
    drop(guard);
}

/// Drops the locks [`begin`] took.
///
/// # Safety
///
/// `src` must be `current`, holding them; `leader` as recorded by [`begin`].
unsafe fn unlock(src: *mut RawTask, leader: bool) {
    // SAFETY: Per the contract, in reverse order of [`begin`].
    unsafe {
        bindings::write_sequnlock(addr_of_mut!((*(*src).signal).stats_lock));
        unlock_tasks(src, leader);
    }
}

/// Drops the locks [`begin`] took before `stats_lock`.
///
/// # Safety
///
/// `src` must be `current`, holding them; `leader` as recorded by [`begin`].
unsafe fn unlock_tasks(src: *mut RawTask, leader: bool) {
    // SAFETY: Per the contract, in reverse order of [`begin`].
    unsafe {
        let sighand = (*src).sighand;
        bindings::spin_unlock(addr_of_mut!((*sighand).siglock));
        bindings::write_unlock_irq(addr_of_mut!(bindings::tasklist_lock));
        if leader {
            bindings::cgroup_threadgroup_change_end(src);
        }
    }
}

/// Closes the critical section [`begin`] opened on `src`, `current`, without a handoff: no
/// destination was found.
///
/// # Safety
///
/// Must follow a successful [`begin`] on `src` with `th`.
unsafe fn abort(src: *mut RawTask, th: &mut bindings::thread_handoff) {
    // SAFETY: `src` is `current`, interrupts are off, and the locks are held.
    unsafe {
        allow_pi_waiters(src, None);
        unlock(src, th.leader);
    }
}

/// Moves what names the thread from `src`, `current`, to `dst`, in the critical section
/// [`begin`] opened, and closes it: the tid with leadership and children, the signal state, the
/// credentials, futex ownership, the attributes read through the tid and the accounting. Then
/// drops `dst`'s `pi_lock`, which the claimer took, and takes `src`'s scheduling attributes and
/// affinity into `th` for [`thread_handoff_adopt`].
///
/// Everything that looks the thread up by tid, pidfd or `/proc` and then acts under
/// `tasklist_lock` or the siglock finds `dst` from here on: ptrace attach, signals, exit and
/// exec, reparenting. A lookup that found `src` before and acts after has nothing to act on:
/// ptrace attach checks the tid again and retries, a PI futex waiter finds `src` exiting and
/// retries.
///
/// # Safety
///
/// Must follow a successful [`begin`] on `src` with `th`; `dst` must be a task of `src`'s group
/// that passed [`vet_destination`], off its CPU and asleep, with its `pi_lock` held by the
/// caller, so that it cannot run until this returns.
unsafe fn commit(dst: *mut RawTask, src: *mut RawTask, th: &mut bindings::thread_handoff) {
    // SAFETY: Per the contract; each step's requirements hold under the locks held.
    unsafe {
        // The accounting first, so that it is in place when a lookup of the tid finds `dst`
        // (some readers, task_sched_runtime() of a sleeping task, take no lock), under
        // `stats_lock`, which nests in the siglock as in __exit_signal().
        // Under `stats_lock`, taken in [`begin`]: readers of the process wide sums retry rather
        // than see the sums change or miss a thread on the reordered thread list.
        acct_move(dst, src, (*src).signal);
        // Settings through the tid wait for `dst` until it adopted the scheduling attributes and
        // the rest ([`thread_handoff_adopt`], `thread_handoff_wait()`), and a setting that took
        // the count before, when `dst` last adopted a tid, finds it changed and is made again.
        // Odd before the tid moves: a lookup that finds `dst` through the tid sees it (the links
        // are published with release, `hlists_swap_heads_rcu()`).
        let seq = handoff_seq(dst);
        seq.store(seq.load(Relaxed).wrapping_add(1), Relaxed);
        exchange(dst, src, th.leader);
        move_creds(dst, src);
        move_futex(dst, src);
        move_attributes(dst, src);
        // `dst` is the thread from here on: what checks for user workers (pidfd autokill, exit,
        // signal delivery) must not treat it as one. The worker clears them again when it wakes.
        (*dst).flags &= !(bindings::PF_IO_WORKER | bindings::PF_USER_WORKER);
        bindings::raw_spin_unlock(addr_of_mut!((*dst).pi_lock));
        // The tid is `dst`'s: a PI futex waiter that looked up `src` before the exchange and
        // locks it now finds another tid and looks the owner up again (attach_to_pi_owner()).
        // Until now it found `src` exiting and retried.
        allow_pi_waiters(src, Some(&mut *th));
        // `src` is left with a worker's mask and nothing pending: don't let a stale
        // TIF_SIGPENDING cut its sleep short. Needs the siglock, held.
        bindings::recalc_sigpending();
        unlock(src, th.leader);
    }
}

/// Wakes the settings through the tid that wait for `t` to be done moving
/// (`thread_handoff_wait()`), once its `handoff_seq` is even.
///
/// # Safety
///
/// `t` must be valid.
unsafe fn wake_settings(t: *mut RawTask) {
    // The count is even before a waiter is looked for: pairs with the barrier of the waiter's
    // prepare_to_wait_event() (wait_var_event()).
    smp_mb(Full);
    // SAFETY: `t` is valid; the address is only a key for the wait queue.
    unsafe { bindings::wake_up_var(addr_of_mut!((*t).handoff_seq).cast()) };
}

/// Moves the rest of the identity of `src` to `dst`, which is `current` and got the tid from it
/// in [`commit`]: what only the thread itself uses.
///
/// # Safety
///
/// `dst` must be `current`, `src` a task of the same thread group that committed its identity to
/// `dst` or to a task that passed it on to `dst`, parked until this returns.
unsafe fn finish(dst: *mut RawTask, src: *mut RawTask) -> c_int {
    // SAFETY: Per the function's contract, each step's requirements hold.
    unsafe {
        move_rseq(src);
        move_mempolicy(dst, src);
        move_cgroup(dst, src);
        // Leadership moved with the tid if `dst`, a worker until it was handed the identity,
        // leads now. Stable: only a handoff or exec by `dst` itself changes that now.
        bindings::arch_thread_handoff_finish(src, Task::from_raw(dst).is_group_leader())
    }
}

/// Gives `current`, which took a thread's tid in [`commit`] from `src`, the scheduling attributes
/// and the affinity the thread had then, taken into `th`, and the I/O priority and the name that
/// `src` has, and lets the settings of them through the tid that wait for that go ahead. Called by
/// the destination first thing, before anything that may block: they wait for it
/// (`thread_handoff_wait()`).
///
/// # Safety
///
/// `th` must be the state of the handoff that gave `current` its tid, which only the task that
/// holds the tid writes (in its own handoff): `current` from now on. `src` must be the task that
/// committed it, alive until it is released (`io_wq_handoff_finished()`).
#[export]
pub unsafe extern "C" fn thread_handoff_adopt(
    th: *const bindings::thread_handoff,
    src: *mut RawTask,
) {
    // SAFETY: `get_current()` has no preconditions.
    let cur = unsafe { bindings::get_current() };
    // SAFETY: Per the contract `th` is valid, and the claimer's writes are visible: the claimed
    // worker waits for the claimer's release in `io_wq_handoff_commit()`, after the commit, with
    // acquire (`io_wq_worker_promoted()`).
    let th = unsafe { &*th };
    // Pairs with the barrier of a name written through the tid (`thread_handoff_pid_moved()`):
    // either [`move_comm`] below reads what it wrote on `src`, or the writer finds the tid
    // moved, which the commit did before it released `cur`. The other settings are ordered by
    // the locks they take, and by the count, which the commit made odd before it published
    // the tid's new link.
    smp_mb(Full);
    // SAFETY: `cur` is `current`.
    unsafe { move_sched(cur, &th.sched) };
    // SAFETY: `cur` is `current`; `th.user_mask` is a valid cpumask for as long as `th` is
    // borrowed.
    unsafe { move_affinity(cur, Cpumask::from_raw(&th.user_mask)) };
    // SAFETY: `cur` is `current`, `src` handed it the tid and is alive, per the contract.
    unsafe { move_ioprio(cur, src) };
    // SAFETY: `cur` is `current`, `src` handed it the tid and is alive, per the contract.
    unsafe { move_comm(cur, src) };
    // The settings that wait take the `pi_lock` and the run queue lock of `cur`, as the moves
    // above did; the barrier orders those before the count.
    smp_mb(Full);
    // SAFETY: `cur` is `current`, valid.
    let seq = unsafe { handoff_seq(cur) };
    // Even: the settings that take it with acquire see the moves above.
    seq.store(seq.load(Relaxed).wrapping_add(1), Release);
    // SAFETY: `cur` is valid.
    unsafe { wake_settings(cur) };
}

/// Returns whether the identity of `current` may be handed off.
#[export]
pub extern "C" fn thread_handoff_allowed() -> bool {
    vet_source(current!()).is_ok()
}

/// Returns whether `dst` can take over the identity of `src`.
///
/// # Safety
///
/// `src` must be `current`, or the task whose identity is in flight, parked in a handoff that
/// `current` passes on; `dst` a valid task.
#[export]
pub unsafe extern "C" fn thread_handoff_compatible(src: *mut RawTask, dst: *mut RawTask) -> bool {
    // SAFETY: Per the contract, `src` and `dst` are valid for the call.
    let (src, dst) = unsafe { (Task::from_raw(src), Task::from_raw(dst)) };
    vet_destination(src, dst, current!()).is_ok()
}

/// Prepares `current` for the handoff right before it blocks.
///
/// # Safety
///
/// Must be called by the source after it was vetted, from the pre-sleep hook.
#[export]
pub unsafe extern "C" fn thread_handoff_prepare() -> bool {
    if vet_pinned_state(current!()).is_err() {
        return false;
    }
    // SAFETY: Called on `current` right before it blocks, as the hook requires.
    unsafe { bindings::arch_thread_handoff_prepare() }
}

/// Opens the critical section of a handoff of `current`, see [`begin`]. Returns false, holding
/// nothing, if the handoff can't go ahead.
///
/// # Safety
///
/// `current` must be vetted and prepared, in the pre-sleep hook; `th` valid for writes. Pairs
/// with [`thread_handoff_commit`] or [`thread_handoff_abort`].
#[export]
pub unsafe extern "C" fn thread_handoff_begin(th: *mut bindings::thread_handoff) -> bool {
    // SAFETY: Per the contract.
    unsafe { begin(current!(), &mut *th) }.is_ok()
}

/// Closes the critical section [`thread_handoff_begin`] opened without a handoff.
///
/// # Safety
///
/// Must follow a successful [`thread_handoff_begin`] with the same `th`.
#[export]
pub unsafe extern "C" fn thread_handoff_abort(th: *mut bindings::thread_handoff) {
    // SAFETY: Per the contract.
    unsafe { abort(bindings::get_current(), &mut *th) }
}

/// Moves what names `current` to `dst`, see [`commit`].
///
/// # Safety
///
/// Must follow a successful [`thread_handoff_begin`] with the same `th`; `dst` vetted, asleep and
/// pinned by its `pi_lock`, which this drops.
#[export]
pub unsafe extern "C" fn thread_handoff_commit(
    dst: *mut RawTask,
    th: *mut bindings::thread_handoff,
) {
    // SAFETY: Per the contract.
    unsafe { commit(dst, bindings::get_current(), &mut *th) }
}

/// Moves the rest of the identity of `src` to `current`, see [`finish`].
///
/// # Safety
///
/// See [`finish`].
#[export]
pub unsafe extern "C" fn thread_handoff_finish(src: *mut RawTask) -> c_int {
    // SAFETY: Per the contract.
    unsafe { finish(bindings::get_current(), src) }
}

#[cfg(CONFIG_THREAD_HANDOFF_KUNIT_TEST)]
#[kunit_tests(thread_handoff)]
mod tests {
    use super::*;

    /// Per-thread counters that follow the tid.
    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    struct Counters {
        min_flt: usize,
        maj_flt: usize,
        nvcsw: usize,
        nivcsw: usize,
    }

    /// CPU times that follow the tid.
    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    struct Times {
        utime: u64,
        stime: u64,
        gtime: u64,
    }

    #[test]
    fn kernel_thread_is_refused() {
        // KUnit runs the test in a kernel thread.
        assert_eq!(vet_source(current!()), Err(Refusal::NotUserTask));
        assert!(!thread_handoff_allowed());
    }

    #[test]
    fn other_thread_group_is_refused() {
        // SAFETY: `init_task` is static, valid forever.
        let idle = unsafe { Task::from_raw(addr_of_mut!(bindings::init_task)) };
        let me = current!();
        assert_eq!(vet_destination(me, idle, me), Err(Refusal::OtherGroup));
    }

    /// The thread function of a [`Sleeper`], which never gets to run it.
    ///
    /// # Safety
    ///
    /// Only `kthread()` may call it, with the data pointer given at creation; it touches
    /// neither.
    unsafe extern "C" fn never_runs(_data: *mut c_void) -> c_int {
        0
    }

    /// Gives a sleeper the attributes `attr`, reads them back with [`sched_attr_of`] and gives
    /// those to another sleeper, as [`move_sched`] does. Returns what the two reads gave and the
    /// results of both `sched_setattr_nocheck()` calls.
    fn sched_round_trip(
        attr: &bindings::sched_attr,
    ) -> Result<(bindings::sched_attr, bindings::sched_attr, c_int, c_int)> {
        let src = Sleeper::new(c"th_sched_src")?;
        let dst = Sleeper::new(c"th_sched_dst")?;
        // SAFETY: `src.0` is a live task; `attr` is a complete attribute set.
        let set = unsafe { bindings::sched_setattr_nocheck(src.0, attr) };
        // SAFETY: `src.0` is a live task, pinned by its `pi_lock` for the read.
        let want = unsafe { pinned(src.0, || sched_attr_of(src.0)) };
        // SAFETY: `dst.0` is a live task; `want` was read from a task.
        let moved = unsafe { bindings::sched_setattr_nocheck(dst.0, &want) };
        // SAFETY: `dst.0` is a live task, pinned by its `pi_lock` for the read.
        let have = unsafe { pinned(dst.0, || sched_attr_of(dst.0)) };
        Ok((want, have, set, moved))
    }

    /// [`sched_attr_of`] reads a complete attribute set: `sched_setattr()` of it gives another
    /// task the same attributes, the priority of a real-time policy included (without it,
    /// `sched_setattr()` refuses the policy), and [`same_sched_attr`] tells the sets apart.
    #[test]
    fn sched_attributes_move_whole() -> Result {
        // SAFETY: An all-zero `sched_attr` is valid.
        let mut rt: bindings::sched_attr = unsafe { core::mem::zeroed() };
        rt.size = core::mem::size_of::<bindings::sched_attr>() as u32;
        rt.sched_policy = bindings::SCHED_FIFO;
        rt.sched_priority = 7;
        let mut fair = rt;
        fair.sched_policy = bindings::SCHED_BATCH;
        fair.sched_priority = 0;
        fair.sched_nice = 5;
        fair.sched_flags = u64::from(bindings::SCHED_FLAG_RESET_ON_FORK);

        let (rt_want, rt_have, rt_set, rt_moved) = sched_round_trip(&rt)?;
        let (fair_want, fair_have, fair_set, fair_moved) = sched_round_trip(&fair)?;
        assert_eq!((rt_set, rt_moved), (0, 0));
        assert_eq!((fair_set, fair_moved), (0, 0));
        assert_eq!(rt_want.sched_policy, bindings::SCHED_FIFO);
        assert_eq!(rt_want.sched_priority, 7);
        assert_eq!(fair_want.sched_policy, bindings::SCHED_BATCH);
        assert_eq!(fair_want.sched_nice, 5);
        assert!(same_sched_attr(&rt_want, &rt_have));
        assert!(same_sched_attr(&fair_want, &fair_have));
        assert!(!same_sched_attr(&rt_want, &fair_want));
        Ok(())
    }

    /// A kernel thread that is created and never woken.
    ///
    /// It sleeps in `kthread()` until dropped, then exits without running its thread function.
    /// Off its CPU and off the runqueue it does not touch its own accounting: the test is the only
    /// writer of it, as [`acct_read`] and [`acct_set`] require of a task that is not `current`.
    struct Sleeper(*mut RawTask);

    impl Sleeper {
        fn new(name: &CStr) -> Result<Self> {
            // SAFETY: `never_runs` is a thread function; `name` is NUL terminated and has no
            // format specifiers.
            let t = unsafe {
                bindings::kthread_create_on_node(
                    Some(never_runs),
                    ptr::null_mut(),
                    bindings::NUMA_NO_NODE,
                    name.as_char_ptr(),
                )
            };
            let sleeper = Sleeper(kernel::error::from_err_ptr(t)?);
            // The thread set itself TASK_UNINTERRUPTIBLE before it woke its creator, but may still
            // be on its way through schedule(), counting the switch: wait until it is off its CPU.
            // SAFETY: `sleeper.0` is a live task that stays asleep until `sleeper` is dropped.
            let ncsw =
                unsafe { bindings::wait_task_inactive(sleeper.0, bindings::TASK_UNINTERRUPTIBLE) };
            if ncsw == 0 {
                return Err(EAGAIN);
            }
            Ok(sleeper)
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            // SAFETY: `self.0` is a kernel thread that was never woken; kthread_stop() wakes it and
            // holds a reference on it until it has exited.
            unsafe { bindings::kthread_stop(self.0) };
        }
    }

    /// The task I/O accounting fields that are compiled in.
    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    struct Io {
        #[cfg(CONFIG_TASK_XACCT)]
        rchar: u64,
        #[cfg(CONFIG_TASK_XACCT)]
        wchar: u64,
        #[cfg(CONFIG_TASK_XACCT)]
        syscr: u64,
        #[cfg(CONFIG_TASK_XACCT)]
        syscw: u64,
        #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
        read_bytes: u64,
        #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
        write_bytes: u64,
        #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
        cancelled_write_bytes: u64,
    }

    #[cfg_attr(
        not(any(CONFIG_TASK_XACCT, CONFIG_TASK_IO_ACCOUNTING)),
        allow(unused_variables, unused_mut)
    )]
    impl Io {
        /// Distinct values, `base + 1` to `base + 7` in the order of the fields.
        fn numbered(base: u64) -> Self {
            Io {
                #[cfg(CONFIG_TASK_XACCT)]
                rchar: base.wrapping_add(1),
                #[cfg(CONFIG_TASK_XACCT)]
                wchar: base.wrapping_add(2),
                #[cfg(CONFIG_TASK_XACCT)]
                syscr: base.wrapping_add(3),
                #[cfg(CONFIG_TASK_XACCT)]
                syscw: base.wrapping_add(4),
                #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
                read_bytes: base.wrapping_add(5),
                #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
                write_bytes: base.wrapping_add(6),
                #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
                cancelled_write_bytes: base.wrapping_add(7),
            }
        }

        fn of(ioac: &bindings::task_io_accounting) -> Self {
            Io {
                #[cfg(CONFIG_TASK_XACCT)]
                rchar: ioac.rchar,
                #[cfg(CONFIG_TASK_XACCT)]
                wchar: ioac.wchar,
                #[cfg(CONFIG_TASK_XACCT)]
                syscr: ioac.syscr,
                #[cfg(CONFIG_TASK_XACCT)]
                syscw: ioac.syscw,
                #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
                read_bytes: ioac.read_bytes,
                #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
                write_bytes: ioac.write_bytes,
                #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
                cancelled_write_bytes: ioac.cancelled_write_bytes,
            }
        }

        fn raw(&self) -> bindings::task_io_accounting {
            let mut ioac = bindings::task_io_accounting::default();
            #[cfg(CONFIG_TASK_XACCT)]
            {
                ioac.rchar = self.rchar;
                ioac.wchar = self.wchar;
                ioac.syscr = self.syscr;
                ioac.syscw = self.syscw;
            }
            #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
            {
                ioac.read_bytes = self.read_bytes;
                ioac.write_bytes = self.write_bytes;
                ioac.cancelled_write_bytes = self.cancelled_write_bytes;
            }
            ioac
        }
    }

    /// The per-thread accounting of a task: what the handoff takes and adds, and the state it
    /// resets or keeps.
    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    struct Snapshot {
        times: Times,
        /// `prev_cputime.utime`, `prev_cputime.stime`.
        #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
        prev_cputime: (u64, u64),
        /// `se.sum_exec_runtime`, `se.prev_sum_exec_runtime`.
        runtime: (u64, u64),
        counters: Counters,
        io: Io,
    }

    /// What [`acct_read`] put into a `thread_handoff_acct`.
    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    struct Taken {
        times: Times,
        exec_runtime: u64,
        counters: Counters,
        io: Io,
    }

    impl Taken {
        fn of(acct: &bindings::thread_handoff_acct) -> Self {
            Taken {
                times: Times {
                    utime: acct.utime,
                    stime: acct.stime,
                    gtime: acct.gtime,
                },
                exec_runtime: acct.exec_runtime,
                counters: Counters {
                    min_flt: acct.min_flt,
                    maj_flt: acct.maj_flt,
                    nvcsw: acct.nvcsw,
                    nivcsw: acct.nivcsw,
                },
                io: Io::of(&acct.ioac),
            }
        }
    }

    /// Runs `f` with interrupts off and the `pi_lock` of `t` held, as a handoff runs
    /// [`acct_read`] and [`acct_set`] on a task that is not `current`.
    ///
    /// # Safety
    ///
    /// `t` must be a valid task; `f` must not sleep.
    unsafe fn pinned<R>(t: *mut RawTask, f: impl FnOnce() -> R) -> R {
        let _irq_off = kernel::interrupt::local_interrupt_disable();
        // SAFETY: `t` is valid for the call.
        let _guard = unsafe { pi_lock(t) }.lock();
        f()
    }

    /// Sets `prev_cputime` of `t` under its lock, with interrupts off as in [`acct_read`].
    ///
    /// # Safety
    ///
    /// `t` must be a valid task.
    #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
    unsafe fn set_prev_cputime(t: *mut RawTask, split: (u64, u64)) {
        let _irq_off = kernel::interrupt::local_interrupt_disable();
        // SAFETY: `t` is valid and interrupts are off.
        unsafe { split_set(t, split) };
    }

    /// Reads `prev_cputime` of `t` under its lock.
    ///
    /// # Safety
    ///
    /// `t` must be a valid task.
    #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
    unsafe fn prev_cputime(t: *mut RawTask) -> (u64, u64) {
        let _irq_off = kernel::interrupt::local_interrupt_disable();
        // SAFETY: `t` is valid and interrupts are off.
        unsafe { split_read(t) }
    }

    /// Sets the accounting of `t` to `v`.
    ///
    /// # Safety
    ///
    /// `t` must be the task of a live [`Sleeper`].
    unsafe fn store(t: *mut RawTask, v: &Snapshot) {
        // SAFETY: `t` cannot run, the scheduler does not write the runtime of a sleeping task.
        unsafe { (*t).se.sum_exec_runtime = v.runtime.0 };
        // SAFETY: As above.
        unsafe { (*t).se.prev_sum_exec_runtime = v.runtime.1 };
        // SAFETY: `t` cannot run; only the task itself and the tick while it runs write these.
        unsafe { (*t).utime = v.times.utime };
        // SAFETY: As above.
        unsafe { (*t).stime = v.times.stime };
        // SAFETY: As above.
        unsafe { (*t).gtime = v.times.gtime };
        // SAFETY: `t` cannot run; only the task itself writes these.
        unsafe { (*t).min_flt = v.counters.min_flt };
        // SAFETY: As above.
        unsafe { (*t).maj_flt = v.counters.maj_flt };
        // SAFETY: As above.
        unsafe { (*t).nvcsw = v.counters.nvcsw };
        // SAFETY: As above.
        unsafe { (*t).nivcsw = v.counters.nivcsw };
        // SAFETY: As above.
        unsafe { (*t).ioac = v.io.raw() };
        // Last, after the runtime: a cputime_adjust() racing with this store rewrites
        // `prev_cputime` only before it, see `accounting_moves_and_stays_monotonic`.
        #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
        // SAFETY: `t` is valid.
        unsafe {
            set_prev_cputime(t, v.prev_cputime)
        };
    }

    /// Reads the accounting of `t`.
    ///
    /// # Safety
    ///
    /// `t` must be the task of a live [`Sleeper`].
    unsafe fn load(t: *mut RawTask) -> Snapshot {
        // SAFETY: `t` cannot run: the test is the only writer of the fields read here.
        let utime = unsafe { (*t).utime };
        // SAFETY: As above.
        let stime = unsafe { (*t).stime };
        // SAFETY: As above.
        let gtime = unsafe { (*t).gtime };
        // SAFETY: As above.
        let sum_exec_runtime = unsafe { (*t).se.sum_exec_runtime };
        // SAFETY: As above.
        let prev_sum_exec_runtime = unsafe { (*t).se.prev_sum_exec_runtime };
        // SAFETY: As above.
        let min_flt = unsafe { (*t).min_flt };
        // SAFETY: As above.
        let maj_flt = unsafe { (*t).maj_flt };
        // SAFETY: As above.
        let nvcsw = unsafe { (*t).nvcsw };
        // SAFETY: As above.
        let nivcsw = unsafe { (*t).nivcsw };
        // SAFETY: As above.
        let ioac = unsafe { (*t).ioac };
        #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
        // SAFETY: `t` is valid.
        let prev = unsafe { prev_cputime(t) };
        Snapshot {
            times: Times {
                utime,
                stime,
                gtime,
            },
            #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
            prev_cputime: prev,
            runtime: (sum_exec_runtime, prev_sum_exec_runtime),
            counters: Counters {
                min_flt,
                maj_flt,
                nvcsw,
                nivcsw,
            },
            io: Io::of(&ioac),
        }
    }

    /// Reports a mismatch with all values, which the KUnit assertion does not print.
    fn same<T: PartialEq + core::fmt::Debug>(what: &str, got: &T, want: &T) -> bool {
        if got != want {
            pr_err!("{what}: got {got:?}, want {want:?}\n");
        }
        got == want
    }

    /// Gives a destination the accounting of a source, both with known, distinct values in every
    /// field, the way [`acct_move`] does, and checks each field for the exact result: the records
    /// hold what each had, the source keeps its values, and the destination has the source's,
    /// `prev_cputime` included, with its own slice delta, so the counters of the tid that moves
    /// with them continue where they were.
    ///
    /// The tasks are kernel threads that never run, so no tick, fault or context switch adds to
    /// the values. Each task's `prev_cputime` adds up to at least its runtime before and after the
    /// transfer, so a cputime_adjust() from a concurrent reader of its `/proc` stat never writes
    /// it either.
    #[test]
    fn accounting_moves_and_stays_monotonic() -> Result {
        let src0 = Snapshot {
            times: Times {
                utime: 3_100,
                stime: 1_900,
                gtime: 700,
            },
            #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
            prev_cputime: (2_900, 2_100),
            runtime: (5_000, 4_400),
            counters: Counters {
                min_flt: 11,
                maj_flt: 12,
                nvcsw: 13,
                nivcsw: 14,
            },
            io: Io::numbered(100),
        };
        let dst0 = Snapshot {
            times: Times {
                utime: 30_000,
                stime: 40_000,
                gtime: 5_000,
            },
            #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
            prev_cputime: (33_000, 42_000),
            runtime: (70_000, 64_000),
            counters: Counters {
                min_flt: 21,
                maj_flt: 22,
                nvcsw: 23,
                nivcsw: 24,
            },
            io: Io::numbered(200),
        };

        let src = Sleeper::new(c"th_acct_src")?;
        let dst = Sleeper::new(c"th_acct_dst")?;
        // SAFETY: `src` is live.
        unsafe { store(src.0, &src0) };
        // SAFETY: `dst` is live.
        unsafe { store(dst.0, &dst0) };
        // acct_move() but for the group sums, in two steps: its two tasks can't both be pinned
        // (one `pi_lock` class), and in a handoff the source is `current`, which needs none.
        // SAFETY: `src.0` is valid and cannot run, see [`Sleeper`]; with interrupts off and its
        // `pi_lock` held, as for a task that is not `current` in a handoff.
        let (acct, split) = unsafe { pinned(src.0, || (acct_read(src.0), split_read(src.0))) };
        // SAFETY: As above, for `dst.0`.
        let old = unsafe {
            pinned(dst.0, || {
                let old = acct_read(dst.0);
                acct_set(dst.0, &acct, &old);
                split_set(dst.0, split);
                old
            })
        };
        // SAFETY: `src` is live.
        let src1 = unsafe { load(src.0) };
        // SAFETY: `dst` is live.
        let dst1 = unsafe { load(dst.0) };
        // A failed assertion ends the test thread: stop the sleepers first.
        drop(src);
        drop(dst);

        let taken = Taken {
            times: src0.times,
            exec_runtime: src0.runtime.0,
            counters: src0.counters,
            io: src0.io,
        };
        // The source keeps everything.
        let src_want = src0;
        // The source's values, but for the runtime's slice delta, the destination's own (6_000):
        // 5_000 - 6_000 wraps, as in C.
        let dst_want = Snapshot {
            runtime: (5_000, u64::MAX - 999),
            ..src0
        };
        let dst_had = Taken {
            times: dst0.times,
            exec_runtime: dst0.runtime.0,
            counters: dst0.counters,
            io: dst0.io,
        };

        let record_ok = same("record", &Taken::of(&acct), &taken);
        let old_ok = same("destination record", &Taken::of(&old), &dst_had);
        #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
        assert_eq!(split, src0.prev_cputime);
        let src_ok = same("source", &src1, &src_want);
        let dst_ok = same("destination", &dst1, &dst_want);
        assert!(record_ok);
        assert!(old_ok);
        assert!(src_ok);
        assert!(dst_ok);
        Ok(())
    }

    /// [`rebalance`] adds the destination's old counts to the exited threads' totals and takes the
    /// source's off, wrapping as the C sums do, so that the sums over the group stay what they
    /// were while the source and the destination count the same time.
    #[test]
    fn rebalance_keeps_group_sums() -> Result {
        let mut sig = KBox::<bindings::signal_struct>::new_uninit(GFP_KERNEL)?;
        // SAFETY: An all-zero `signal_struct` is a valid value of the type; only its sums are
        // used, never its locks.
        let mut sig = unsafe {
            ptr::write_bytes(sig.as_mut_ptr(), 0, 1);
            sig.assume_init()
        };
        sig.utime = 10;
        sig.min_flt = 5;
        let new = bindings::thread_handoff_acct {
            utime: 3_100,
            stime: 1_900,
            exec_runtime: 5_000,
            min_flt: 2,
            nvcsw: 13,
            ..Default::default()
        };
        let old = bindings::thread_handoff_acct {
            utime: 40,
            exec_runtime: 700,
            min_flt: 1,
            ..Default::default()
        };
        // SAFETY: `sig` is valid and only this test uses it.
        unsafe { rebalance(&mut *sig, &old, &new) };
        assert_eq!(sig.utime, 50u64.wrapping_sub(3_100));
        assert_eq!(sig.stime, 0u64.wrapping_sub(1_900));
        assert_eq!(sig.sum_sched_runtime, 700u64.wrapping_sub(5_000));
        assert_eq!(sig.min_flt, 4);
        assert_eq!(sig.nvcsw, 0usize.wrapping_sub(13));
        // The source, which keeps `new`, exits and adds it back: the totals hold the old counts
        // of the destination, which now counts `new` itself.
        assert_eq!(sig.utime.wrapping_add(new.utime), 50);
        assert_eq!(sig.sum_sched_runtime.wrapping_add(new.exec_runtime), 700);
        Ok(())
    }

    /// Reads the reference count of a credential.
    ///
    /// # Safety
    ///
    /// `c` must be a live credential.
    unsafe fn usage(c: *const bindings::cred) -> i64 {
        // SAFETY: `c` is live; a plain snapshot of the counter, as atomic_long_read().
        unsafe { ptr::read_volatile(addr_of!((*c).usage.counter)) }
    }

    #[test]
    fn credential_references_balance() -> Result {
        // SAFETY: The test thread is `current`; prepare_creds() returns a new reference.
        let (me, new) = unsafe { (bindings::get_current(), bindings::prepare_creds()) };
        assert!(!new.is_null());
        // SAFETY: `me` is `current`.
        let old = unsafe { (*me).real_cred };
        // SAFETY: `old` is live; the extra reference keeps it alive while `me` does not hold it.
        unsafe { bindings::get_cred(old) };
        // SAFETY: Both credentials are referenced.
        let (old_before, new_before) = unsafe { (usage(old), usage(new)) };

        // A fake source carrying `new`: move_creds() only reads its `real_cred`.
        let mut src = KBox::<RawTask>::new_uninit(GFP_KERNEL)?;
        // SAFETY: An all-zero `task_struct` is a valid value of the type; it is never used as a
        // real task.
        let mut src = unsafe {
            ptr::write_bytes(src.as_mut_ptr(), 0, 1);
            src.assume_init()
        };
        src.real_cred = new;
        // SAFETY: `me` is `current` and `src` only provides `real_cred`.
        unsafe { move_creds(me, &mut *src) };
        // SAFETY: `me` is `current`; both credentials are referenced.
        unsafe {
            assert!(ptr::eq((*me).cred, new));
            assert_eq!(usage(new), new_before + 2);
            assert_eq!(usage(old), old_before - 2);
        }

        // Move back, with `old` as the source's creds.
        src.real_cred = old;
        // SAFETY: `me` is `current` and `src` only provides `real_cred`, which `new`'s two
        // references from `me` keep alive until they are dropped inside.
        unsafe { move_creds(me, &mut *src) };
        // SAFETY: `me` is `current`; both credentials are referenced.
        unsafe {
            assert!(ptr::eq((*me).real_cred, old));
            assert_eq!(usage(old), old_before);
            assert_eq!(usage(new), new_before);
        }
        // SAFETY: Drops the extra reference on `old` and the one prepare_creds() returned.
        unsafe {
            bindings::put_cred(old);
            bindings::abort_creds(new);
        }
        Ok(())
    }
}
