// SPDX-License-Identifier: GPL-2.0

//! Thread identity handoff.
//!
//! A thread that is about to block in the kernel hands what userspace can observe of it to an
//! idle thread of the same process, which returns to userspace in its place. The blocked thread
//! keeps its `task_struct`, kernel stack and in-kernel state and finishes its work anonymously.
//!
//! C header: [`include/linux/thread_handoff.h`](srctree/include/linux/thread_handoff.h)
//!
//! The C entry points are thin: each converts its raw pointers once and calls into the safe code
//! below, which works through the abstractions of `kernel::task`: the guards of the locks that
//! protect how other tasks reach a task, a [`Pinned`] destination, a [`Parked`] source. Everything
//! that runs on the source side ([`thread_handoff_allowed`], [`thread_handoff_compatible`],
//! [`thread_handoff_prepare`], [`thread_handoff_move`]) is called from the scheduler's pre-sleep
//! hook, so it must not sleep, allocate or panic: it takes spinning locks only (the threadgroup
//! exclusion only if it is free), and the accounting arithmetic wraps instead of overflowing.
//!
//! The move has two parts. [`move_identity`] moves, in one critical section under
//! `tasklist_lock` and the siglock, everything through which another task reaches the thread,
//! while the source is `current` and the destination asleep and pinned under its `pi_lock`: no
//! tid lookup finds a half moved thread. The destination first adopts the scheduling attributes
//! and the affinity taken from the source in that section, and the I/O priority and the name of
//! the source ([`adopt`]); settings of them through the tid wait until it has. [`finish`] then
//! moves, on the destination, what only the thread itself uses, from the source, which stays
//! parked until then.

use kernel::{
    bindings,
    prelude::*,
    sync::{
        atomic::{Relaxed, Release},
        barrier::{smp_mb, Full},
    },
    task::{Adoptable, CurrentTask, Parked, Pinned, Task, TasklistWriteGuard},
};

/// The C task struct, for the raw pointers the C entry points pass.
type RawTask = bindings::task_struct;

/// Prefix of this crate's log messages, for the `pr_*!` macros.
const __LOG_PREFIX: &[u8] = b"thread_handoff\0";

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
    /// The destination runs with borrowed credentials (`override_creds()`), which it would put
    /// back over the ones it takes.
    BorrowedCreds,
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
    if !t.arch_handoff_allowed() {
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
    if !dst.runs_with_own_creds() {
        return Err(Refusal::BorrowedCreds);
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
    if &**cur != src && kernel::security::thread_handoff(cur, Some(dst)).is_err() {
        return Err(Refusal::Lsm);
    }
    // SAFETY: `src` is `current` or parked, `dst` a valid task.
    if !unsafe { bindings::arch_thread_handoff_compatible(src.as_ptr(), dst.as_ptr()) } {
        return Err(Refusal::Arch);
    }
    Ok(())
}

/// Vets the source again under the locks [`move_identity`] holds, for what others can set up on
/// it between the vetting at arm time and the move. The answer holds for as long as
/// `tasklist_lock` is held for writing and the siglock of `t`'s group.
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

/// Why [`move_identity`] moved nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NotMoved {
    /// The source, vetted again under the locks, is refused, or the locks are busy.
    Refused(Refusal),
    /// No destination was claimed.
    NoDestination,
}

/// Moves what names the thread from `cur` to the task `claim` returns, pinned, in one critical
/// section, and returns that task. Fills in `th` for [`adopt`].
///
/// The section holds the threadgroup exclusion (if `cur` leads its group: leadership moves only
/// with it, as in de_thread(), so that a cgroup migration of the whole process keeps its leader),
/// `tasklist_lock`, the siglock and `stats_lock`, in the lock order of exit and exec. In it the
/// source is vetted again, and new PI futex waiters are barred from attaching to it, before
/// `claim` runs. Everything that looks the thread up by tid, pidfd or `/proc` and then acts under
/// `tasklist_lock` or the siglock finds the destination from here on: ptrace attach, signals,
/// exit and exec, reparenting. A lookup that found the source before and acts after has nothing to
/// act on: ptrace attach checks the tid again and retries, a PI futex waiter finds the source
/// exiting and retries.
fn move_identity<'a>(
    cur: &CurrentTask,
    th: &mut Adoptable,
    claim: impl FnOnce() -> Option<Pinned<'a>>,
) -> Result<*mut RawTask, NotMoved> {
    // Only a handoff or exec changes leadership, and neither can run on the group now (checked
    // again under the locks below). Don't wait for the threadgroup exclusion.
    let leader = cur.is_group_leader();
    let _threadgroup = match leader {
        true => Some(
            cur.try_threadgroup_change()
                .ok_or(NotMoved::Refused(Refusal::GroupExit))?,
        ),
        false => None,
    };
    let tasklist = TasklistWriteGuard::lock();
    let irq = tasklist.irq_disabled();
    let siglock = cur.lock_siglock(irq);
    vet_locked(cur, leader).map_err(NotMoved::Refused)?;
    // A waiter that looked the source up by its tid before the tid moves retries the lookup
    // instead of attaching to a task that no longer has the tid.
    if !cur.bar_pi_waiters(irq) {
        return Err(NotMoved::Refused(Refusal::PiFutex));
    }
    // The process wide sums change below, and the exchange reorders the thread list their readers
    // walk: they retry on `stats_lock`. Taken before the claim pins the destination with a raw
    // lock.
    let mut stats = siglock.write_stats();
    let Some(dst) = claim() else {
        cur.allow_pi_waiters(&cur.lock_pi(irq));
        return Err(NotMoved::NoDestination);
    };
    // What the moves below check, checked before the first of them writes, so that none fails
    // halfway: the claim vetted `dst` ([`vet_destination`]) under the locks held since, and the
    // source's leadership was checked again under them ([`vet_locked`]). A failure is a bug; the
    // claimed worker is lost then, but the identity stays whole.
    if kernel::warn_on!(!cur.same_thread_group(dst.task()) || !dst.task().runs_with_own_creds()) {
        cur.allow_pi_waiters(&cur.lock_pi(irq));
        return Err(NotMoved::Refused(Refusal::OtherGroup));
    }

    // The accounting first, so that it is in place when a lookup of the tid finds `dst` (some
    // readers, task_sched_runtime() of a sleeping task, take no lock). The source keeps its own
    // counts; the destination's are added to the exited threads': whoever reads the tid sees the
    // same counts on `dst` as on `cur`, and nothing goes back.
    let acct = cur.thread_acct(irq);
    let had = dst.replace_thread_acct(&acct);
    dst.set_cputime_split(cur.cputime_split());
    stats.account_change(&had, &acct);
    // Settings through the tid wait for `dst` until it adopted the scheduling attributes and the
    // rest ([`adopt`], `thread_handoff_wait()`), and a setting that took the count before, when
    // `dst` last adopted a tid, finds it changed and is made again. Odd before the tid moves: a
    // lookup that finds `dst` through the tid sees it (the links are published with release,
    // `hlists_swap_heads_rcu()`).
    let seq = dst.task().handoff_seq();
    seq.store(seq.load(Relaxed).wrapping_add(1), Relaxed);
    // The destination passed [`vet_destination`] in the claim, under the locks held since: it is
    // of the source's group, which the source still leads if it did.
    let moved = tasklist
        .exchange_tids(cur, &dst)
        .and_then(|()| match leader {
            true => tasklist.move_group_leadership(cur, &dst),
            false => Ok(()),
        })
        .and_then(|()| {
            tasklist.move_children(cur, &dst);
            siglock.move_signal_state(cur, &dst)
        });
    let creds = dst.take_creds(cur);
    kernel::warn_on!(moved.is_err() || creds.is_err());
    dst.take_futex_state(cur);
    dst.take_attributes(cur);
    // `dst` is the thread from here on: what checks for user workers must not treat it as one.
    dst.clear_worker_flags();
    let dst_task = dst.task().as_ptr();
    drop(dst);
    // The tid is `dst`'s: a PI futex waiter that looked up `cur` before the exchange and locks
    // it now finds another tid and looks the owner up again (attach_to_pi_owner()). Taking the
    // `pi_lock` also orders the move before every later `pi_lock` section of `cur`: a setting of
    // the scheduling attributes or the affinity through the tid that lands on `cur` is either in
    // what is taken here, or finds that the tid moved (`thread_handoff_moved()`) and is made again
    // on `dst` once it adopted this (`thread_handoff_wait()`).
    {
        let pi = cur.lock_pi(irq);
        cur.allow_pi_waiters(&pi);
        th.take_from(&pi);
    }
    // `cur` is left with a worker's mask and nothing pending: don't let a stale TIF_SIGPENDING
    // cut its sleep short.
    siglock.recalc_sigpending(cur);
    Ok(dst_task)
}

/// Gives `cur`, which took a thread's tid from `src` in [`move_identity`], the scheduling
/// attributes and the affinity the thread had then, taken into `th`, and the I/O priority and the
/// name that `src` has, and lets the settings of them through the tid that wait for that go
/// ahead.
fn adopt(cur: &CurrentTask, th: &Adoptable, src: &Parked<'_>) {
    // Pairs with the barrier of a name written through the tid (`thread_handoff_pid_moved()`):
    // either the name read below is what it wrote on `src`, or the writer finds the tid moved,
    // which the move did before it released `cur`. The other settings are ordered by the locks
    // they take, and by the count, which the move made odd before it published the tid's new link.
    smp_mb(Full);
    if cur.set_sched_attr(&th.sched_attr()).is_err() {
        kernel::pr_warn_once!("cannot move the scheduling attributes\n");
    }
    if cur.set_requested_cpus(th.requested_cpus()).is_err() {
        kernel::pr_warn_once!("cannot move the CPU affinity\n");
    }
    // Workers share the I/O context of the thread that forked them: the destination detaches from
    // it first. A setting through the tid that lands on `src` after it was read here finds the tid
    // moved (the read follows the move, under the task lock the setting takes) and is made again
    // on `cur` once it is done adopting (`ioprio_set()`, `thread_handoff_moved()`).
    #[cfg(CONFIG_BLOCK)]
    if cur.reset_ioprio(src.task().ioprio()).is_err() {
        kernel::pr_warn_once!("cannot move the IO priority\n");
    }
    // A name written through the tid that lands on `src` after it was read here finds the tid
    // moved and is written again on `cur` (`comm_write()`); a torn copy too.
    cur.set_comm(src.task().comm());
    // The settings that wait take the `pi_lock` and the run queue lock of `cur`, as the moves
    // above did; the barrier orders those before the count.
    smp_mb(Full);
    let seq = cur.handoff_seq();
    // Even: the settings that take it with acquire see the moves above.
    seq.store(seq.load(Relaxed).wrapping_add(1), Release);
    cur.wake_handoff_waiters();
}

/// Moves the rest of the identity of `src` to `cur`, which got the tid from it in
/// [`move_identity`]: what only the thread itself uses.
fn finish(cur: &CurrentTask, src: &Parked<'_>) -> c_int {
    cur.take_rseq(src);
    if cur.copy_mempolicy_of(src).is_err() {
        kernel::pr_warn_once!("cannot move the memory policy\n");
    }
    if cur.attach_to_cgroups_of(src.task()).is_err() {
        kernel::pr_warn_once!("cannot move the cgroup placement\n");
    }
    // SAFETY: `src` is the source of the handoff that gave `cur` its identity, which `cur`
    // finishes (the contract of `thread_handoff_finish()`).
    match unsafe { src.move_registers_to(cur) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Hands the identity of `current` to the task `claim` returns, see [`move_identity`]. Returns 0
/// once it moved; `-EAGAIN` if `current` could not be locked and vetted again, and `claim` did not
/// run; `-ESRCH` if `claim` returned NULL. Either way nothing moved and no lock is held.
///
/// # Safety
///
/// `current` must be vetted ([`thread_handoff_allowed`]) and prepared
/// ([`thread_handoff_prepare`]), in the pre-sleep hook; `th` valid for writes. `claim` is called
/// once, with `data`, under `tasklist_lock`, the siglock and `stats_lock` with interrupts off, and
/// must return NULL or a task of `current`'s group that passed [`thread_handoff_compatible`] under
/// those locks, asleep, with its `pi_lock` held: this drops it.
#[export]
pub unsafe extern "C" fn thread_handoff_move(
    th: *mut bindings::thread_handoff,
    claim: Option<unsafe extern "C" fn(data: *mut c_void) -> *mut RawTask>,
    data: *mut c_void,
) -> c_int {
    let Some(claim) = claim else {
        return EINVAL.to_errno();
    };
    // SAFETY: Per the contract, `th` is valid for writes, and nothing else uses it meanwhile.
    let th = unsafe { Adoptable::from_raw(th) };
    let moved = move_identity(current!(), th, || {
        // SAFETY: Per the contract, `claim` may be called once, with `data`, here.
        let dst = unsafe { claim(data) };
        // SAFETY: Per the contract, `dst` is null or a task that `claim` pinned and hands over.
        (!dst.is_null()).then(|| unsafe { Pinned::assume_pinned(dst) })
    });
    match moved {
        Ok(_) => 0,
        Err(NotMoved::NoDestination) => ESRCH.to_errno(),
        Err(NotMoved::Refused(_)) => EAGAIN.to_errno(),
    }
}

/// Gives `current`, which took a thread's tid from `src`, what [`thread_handoff_move`] took into
/// `th` and the I/O priority and name of `src`, see [`adopt`]. Called by the destination first
/// thing, before anything that may block: settings through the tid wait for it
/// (`thread_handoff_wait()`).
///
/// # Safety
///
/// `th` must be the state of the handoff that gave `current` its tid, which only the task that
/// holds the tid writes (in its own handoff): `current` from now on. `src` must be the task that
/// moved it, parked until it is released (`io_wq_handoff_finished()`).
#[export]
pub unsafe extern "C" fn thread_handoff_adopt(
    th: *const bindings::thread_handoff,
    src: *mut RawTask,
) {
    // SAFETY: Per the contract `th` is valid, and the claimer's writes are visible: the claimed
    // worker waits for the claimer's release in `io_wq_handoff_commit()`, after the move, with
    // acquire (`io_wq_worker_promoted()`).
    let th = unsafe { Adoptable::from_raw_ref(th) };
    // SAFETY: Per the contract `src` handed `current` the tid and stays parked meanwhile.
    let src = unsafe { Parked::assume_parked(src) };
    adopt(current!(), th, &src);
}

/// Moves the rest of the identity of `src` to `current`, see [`finish`].
///
/// # Safety
///
/// `src` must be a task of `current`'s group that handed its identity to `current`, or to a task
/// that passed it on to `current`, parked until this returns.
#[export]
pub unsafe extern "C" fn thread_handoff_finish(src: *mut RawTask) -> c_int {
    // SAFETY: Per the contract.
    let src = unsafe { Parked::assume_parked(src) };
    finish(current!(), &src)
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
    // SAFETY: Per the contract, `src` is valid for the call.
    let src = unsafe { Task::from_raw(src) };
    // SAFETY: Per the contract, `dst` is valid for the call.
    let dst = unsafe { Task::from_raw(dst) };
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

#[cfg(CONFIG_THREAD_HANDOFF_KUNIT_TEST)]
#[kunit_tests(thread_handoff)]
mod tests {
    use super::*;
    use core::ptr::addr_of_mut;

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
}
