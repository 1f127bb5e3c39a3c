// SPDX-License-Identifier: GPL-2.0

//! Moving a thread's identity between two tasks of its thread group.
//!
//! What userspace and other tasks see of a thread (its tid and leadership, its children, signal
//! state, credentials, futex registrations, attributes and accounting) belongs to whichever task
//! holds the thread's identity. A thread identity handoff moves it from `current`, the source,
//! to a task of its group that is asleep and [`Pinned`], in one critical section under
//! `tasklist_lock` and the siglock: each move here takes the guards of the locks it needs. What
//! only the thread itself uses moves afterwards, on the destination, from the source, which
//! stays [`Parked`] until then.
//!
//! C header: [`include/linux/thread_handoff.h`](srctree/include/linux/thread_handoff.h)

use crate::{
    bindings,
    cpumask::Cpumask,
    error::to_result,
    interrupt::LocalInterruptDisabled,
    prelude::*,
    signal::{SigSet, Signal},
    task::{CurrentTask, PiLocked, Pinned, SiglockGuard, Task, TasklistWriteGuard},
    types::NotThreadSafe,
};
use core::ptr::{self, addr_of, addr_of_mut};

/// `prctl()` driven process flags that follow the identity. `PF_MEMALLOC_NOIO` and friends stay:
/// kernel code sets those too, for its own scopes.
const MOVED_PF_FLAGS: c_uint =
    bindings::PF_MCE_PROCESS | bindings::PF_MCE_EARLY | bindings::PF_FORKNOEXEC;

/// Copies a field of task `$src` to task `$dst`, read and written once: others read it through
/// the tid without a lock. `$src` is `current` and `$dst` pinned: neither task writes it now.
macro_rules! copy_once {
    ($dst:ident, $src:ident, $($field:ident).+) => {
        // SAFETY: Both tasks are valid, and only they write the field.
        unsafe {
            ptr::write_volatile(
                addr_of_mut!((*$dst).$($field).+),
                ptr::read_volatile(addr_of!((*$src).$($field).+)),
            )
        }
    };
}

/// Moves a field of task `$src` to task `$dst`, leaving `$empty` on `$src`, each read and written
/// once, as [`copy_once`].
macro_rules! take_once {
    ($dst:ident, $src:ident, $($field:ident).+, $empty:expr) => {
        // SAFETY: Both tasks are valid, and only they write the field.
        unsafe {
            let field = addr_of_mut!((*$src).$($field).+);
            ptr::write_volatile(addr_of_mut!((*$dst).$($field).+), ptr::read_volatile(field));
            ptr::write_volatile(field, $empty);
        }
    };
}

impl TasklistWriteGuard {
    /// Swaps the tids of `cur` and `dst` (`exchange_tids()`), as `de_thread()` does for an exec.
    ///
    /// Fails with `EINVAL` unless both belong to the same thread group.
    pub fn exchange_tids(&self, cur: &CurrentTask, dst: &Pinned<'_>) -> Result {
        if !cur.same_thread_group(dst.task()) {
            return Err(EINVAL);
        }
        // SAFETY: Both tasks are valid; `tasklist_lock` is held for writing, as exchange_tids()
        // requires.
        unsafe { bindings::exchange_tids(dst.task().as_ptr(), cur.as_ptr()) };
        Ok(())
    }

    /// Makes `dst` the leader of the thread group in place of `cur`, as `de_thread()` does for an
    /// exec: the tgid, process group and session pids, the place on the task list and among the
    /// parent's children, every thread's leader pointer and the exit signal.
    ///
    /// Fails with `EINVAL` unless `cur` leads the group of `dst`.
    pub fn move_group_leadership(&self, cur: &CurrentTask, dst: &Pinned<'_>) -> Result {
        if !cur.is_group_leader() || !cur.same_thread_group(dst.task()) {
            return Err(EINVAL);
        }
        let (src, dst) = (cur.as_ptr(), dst.task().as_ptr());
        // SAFETY: Both tasks are valid and in one thread group that `src` leads; `tasklist_lock`
        // is held for writing, which protects the thread, task and sibling lists, the pid links
        // and the leader pointers.
        unsafe { make_leader(dst, src) };
        Ok(())
    }

    /// Reparents the children of `cur` to `dst`: they were forked by the identity, not the task.
    pub fn move_children(&self, cur: &CurrentTask, dst: &Pinned<'_>) {
        // SAFETY: Both tasks are valid; `tasklist_lock`, held for writing, protects the children
        // lists and the parent pointers.
        unsafe { reparent(dst.task().as_ptr(), cur.as_ptr()) };
    }
}

/// Makes `dst` the thread group leader in place of `src`.
///
/// # Safety
///
/// Both must be valid tasks of one thread group that `src` leads, with `tasklist_lock` held for
/// writing.
unsafe fn make_leader(dst: *mut bindings::task_struct, src: *mut bindings::task_struct) {
    // SAFETY: Per the safety requirements.
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
            let task = crate::container_of!(node, bindings::task_struct, thread_node);
            // WRITE_ONCE(): task_lock_group_leader() reads it without `tasklist_lock`.
            ptr::write_volatile(addr_of_mut!((*task).group_leader), dst);
            node = (*node).next;
        }

        (*dst).exit_signal = (*src).exit_signal;
        (*src).exit_signal = -1;
    }
}

/// Reparents `src`'s children to `dst`.
///
/// # Safety
///
/// Both must be valid tasks, with `tasklist_lock` held for writing.
unsafe fn reparent(dst: *mut bindings::task_struct, src: *mut bindings::task_struct) {
    // SAFETY: Per the safety requirements.
    unsafe {
        let head = addr_of_mut!((*src).children);
        let mut node = (*head).next;
        while !ptr::eq(node, head) {
            let child = crate::container_of!(node, bindings::task_struct, sibling);
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

impl SiglockGuard<'_> {
    /// Moves the signal state of `cur` to `dst`: the mask, the saved and real masks, the
    /// alternate stack, the restart block and the signals pending on `cur` itself. `cur` is left
    /// with the mask of an io-wq worker (everything blocked but `SIGKILL` and `SIGSTOP`), no
    /// alternate stack and nothing pending.
    ///
    /// Fails with `EINVAL` unless both belong to the group whose siglock is held.
    pub fn move_signal_state(&self, cur: &CurrentTask, dst: &Pinned<'_>) -> Result {
        if !self.task().same_thread_group(cur) || !cur.same_thread_group(dst.task()) {
            return Err(EINVAL);
        }
        let (src, dst) = (cur.as_ptr(), dst.task().as_ptr());
        // SAFETY: Both tasks are valid and share the `sighand` whose siglock is held, which
        // protects all of these.
        unsafe {
            (*dst).blocked = (*src).blocked;
            (*dst).real_blocked = (*src).real_blocked;
            (*dst).saved_sigmask = (*src).saved_sigmask;
            (*dst).sas_ss_sp = (*src).sas_ss_sp;
            (*dst).sas_ss_size = (*src).sas_ss_size;
            (*dst).sas_ss_flags = (*src).sas_ss_flags;
            (*dst).restart_block = (*src).restart_block;

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
        Ok(())
    }

    /// Recomputes `TIF_SIGPENDING` of the current task (`recalc_sigpending()`), under the
    /// siglock as it needs.
    #[inline]
    pub fn recalc_sigpending(&self, _cur: &CurrentTask) {
        // SAFETY: The siglock of `current`'s group is held.
        unsafe { bindings::recalc_sigpending() };
    }
}

impl Pinned<'_> {
    /// Gives the task the credentials of `src`, real and effective, and drops the ones it had.
    ///
    /// This is not `commit_creds()`: no task changes its credentials, an existing identity moves
    /// between two tasks, and neither changes its own meanwhile (`src` is `current`, the task is
    /// pinned).
    ///
    /// Fails with `EINVAL`, moving nothing, unless both belong to the same thread group and the
    /// task runs with its own credentials: one inside `override_creds()` would put the borrowed
    /// ones back over what it took.
    pub fn take_creds(&self, src: &CurrentTask) -> Result {
        if !src.same_thread_group(self.task()) || !self.task().runs_with_own_creds() {
            return Err(EINVAL);
        }
        let dst = self.task().as_ptr();
        // SAFETY: `dst` is valid; only the task changes its credentials, and it is pinned.
        let old = unsafe { (*dst).real_cred };
        // SAFETY: `src` is `current`, which does not change its credentials now.
        let new = unsafe { (*src.as_ptr()).real_cred };
        // SAFETY: Both are live credentials, referenced by their tasks; `dst` holds `old` as both
        // its real and effective credentials, checked above while it stays pinned.
        unsafe { move_cred_refs(dst, old, new) };
        Ok(())
    }

    /// Moves the robust futex lists and `clear_child_tid` of `src`, which exit reads on the task
    /// with the tid, to the task, and lets PI futex waiters attach to it.
    ///
    /// `get_robust_list()` reads the list heads through the tid without a lock: each is written
    /// once, and a reader sees the old or the new head.
    pub fn take_futex_state(&self, src: &CurrentTask) {
        let (dst, s) = (self.task().as_ptr(), src.as_ptr());
        #[cfg(CONFIG_FUTEX)]
        {
            take_once!(dst, s, futex.robust_list, ptr::null_mut());
            #[cfg(CONFIG_COMPAT)]
            take_once!(dst, s, futex.compat_robust_list, ptr::null_mut());
            // SAFETY: `dst` is valid; the `pi_lock` held protects the futex state
            // (attach_to_pi_owner()).
            unsafe {
                ptr::write_volatile(addr_of_mut!((*dst).futex.state), bindings::FUTEX_STATE_OK)
            };
        }
        take_once!(dst, s, clear_child_tid, ptr::null_mut());
    }

    /// Copies the plain per-task attributes of `src` that are read through the tid (`/proc`,
    /// the audit and parent death paths), and the `prctl()` driven process flags. One task of the
    /// group gets the parent death signal, as before: `src` loses it.
    ///
    /// Others read these through the tid without the task's locks, and a write of
    /// `/proc/<pid>/timerslack_ns` takes only the task lock, which can't nest in the `pi_lock`
    /// held: each field is read and written once. Such a write that lands on `src` after it was
    /// read here is lost, as one that races a `prctl(PR_SET_TIMERSLACK)` of the thread itself.
    pub fn take_attributes(&self, src: &CurrentTask) {
        let (dst, s) = (self.task().as_ptr(), src.as_ptr());
        #[cfg(CONFIG_AUDIT)]
        {
            copy_once!(dst, s, loginuid);
            copy_once!(dst, s, sessionid);
        }
        copy_once!(dst, s, personality);
        take_once!(dst, s, pdeath_signal, 0);
        copy_once!(dst, s, timer_slack_ns);
        copy_once!(dst, s, default_timer_slack_ns);
        copy_once!(dst, s, start_time);
        copy_once!(dst, s, start_boottime);
        if src.no_new_privs() {
            // SAFETY: `dst` is valid; the bit is set atomically and never cleared.
            unsafe { bindings::task_set_no_new_privs(dst) };
        }
        let moved = src.flags() & MOVED_PF_FLAGS;
        // SAFETY: `dst` is valid; only the task writes its flags, and it is pinned. Others read
        // them without a lock: written once.
        unsafe {
            let flags = addr_of_mut!((*dst).flags);
            ptr::write_volatile(flags, (ptr::read_volatile(flags) & !MOVED_PF_FLAGS) | moved)
        };
    }

    /// Clears `PF_IO_WORKER` and `PF_USER_WORKER` of the task, which now holds a thread's
    /// identity: what checks for user workers (pidfd autokill, exit, signal delivery) must not
    /// treat it as one. The task sets them again itself when it runs.
    #[inline]
    pub fn clear_worker_flags(&self) {
        let t = self.task().as_ptr();
        // SAFETY: The task is valid and pinned: it does not change its own flags meanwhile.
        unsafe { (*t).flags &= !(bindings::PF_IO_WORKER | bindings::PF_USER_WORKER) };
    }
}

/// Makes `new` the credentials of `dst` in place of `old`, both real and effective.
///
/// # Safety
///
/// `dst` must be a valid task that does not change its credentials meanwhile, holding `old` as
/// both its real and effective credentials; `new` a live credential.
unsafe fn move_cred_refs(
    dst: *mut bindings::task_struct,
    old: *const bindings::cred,
    new: *const bindings::cred,
) {
    use crate::sync::atomic::{Atomic, Release};
    if ptr::eq(old, new) {
        return;
    }
    // SAFETY: `new` and `old` are live.
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
    // SAFETY: The fields are RCU published pointers only their task writes, and `dst` does not
    // change them now; the release stores order the references above before the new pointers
    // become visible, like rcu_assign_pointer().
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

impl CurrentTask {
    /// Bars new PI futex waiters from attaching to the current task, which is about to hand its
    /// tid away: marks its futex state exiting, so that a waiter that looked it up by the tid
    /// retries the lookup (attach_to_pi_owner()). Returns `false`, and bars nothing, if the task
    /// owns a PI futex: that ownership is bound to the task.
    #[inline]
    pub fn bar_pi_waiters(&self, irq: &LocalInterruptDisabled) -> bool {
        #[cfg(CONFIG_FUTEX)]
        {
            let _pi = self.lock_pi(irq);
            if self.owns_pi_futex() {
                return false;
            }
            // SAFETY: `current` is valid; its `pi_lock`, held, protects the futex state.
            unsafe { (*self.as_ptr()).futex.state = bindings::FUTEX_STATE_EXITING };
        }
        #[cfg(not(CONFIG_FUTEX))]
        let _ = irq;
        true
    }

    /// Undoes [`CurrentTask::bar_pi_waiters`]; with its `pi_lock` held, as `pi` proves.
    #[inline]
    pub fn allow_pi_waiters(&self, pi: &PiLocked<'_>) {
        if !ptr::eq(pi.task(), &**self) {
            return;
        }
        #[cfg(CONFIG_FUTEX)]
        // SAFETY: `current` is valid; its `pi_lock`, held, protects the futex state.
        unsafe {
            (*self.as_ptr()).futex.state = bindings::FUTEX_STATE_OK
        };
    }
}

/// The scheduling attributes of a task as `sched_setattr()` takes them: policy, nice value or
/// real-time priority, reset-on-fork, a custom slice and the utilization clamps the user
/// requested.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct SchedAttr(bindings::sched_attr);

impl SchedAttr {
    /// Wraps attributes as C keeps them.
    #[inline]
    pub fn from_raw(attr: bindings::sched_attr) -> Self {
        Self(attr)
    }

    /// The attributes as C takes them.
    #[inline]
    pub fn into_raw(self) -> bindings::sched_attr {
        self.0
    }

    /// Returns whether `sched_setattr()` of `self` and of `other` sets the same attributes.
    pub fn same(&self, other: &Self) -> bool {
        let (a, b) = (&self.0, &other.0);
        a.sched_policy == b.sched_policy
            && a.sched_nice == b.sched_nice
            && a.sched_priority == b.sched_priority
            && a.sched_flags == b.sched_flags
            && a.sched_runtime == b.sched_runtime
            && a.sched_util_min == b.sched_util_min
            && a.sched_util_max == b.sched_util_max
    }

    /// Resets, with -1, the utilization clamps that `have` sets and `self` does not:
    /// `sched_setattr()` of `self` would leave them in place otherwise.
    fn reset_clamps_of(&mut self, have: &Self) {
        #[cfg(CONFIG_UCLAMP_TASK)]
        for (flag, value) in [
            (
                bindings::SCHED_FLAG_UTIL_CLAMP_MIN,
                &mut self.0.sched_util_min,
            ),
            (
                bindings::SCHED_FLAG_UTIL_CLAMP_MAX,
                &mut self.0.sched_util_max,
            ),
        ] {
            let flag = u64::from(flag);
            if have.0.sched_flags & flag != 0 && self.0.sched_flags & flag == 0 {
                self.0.sched_flags |= flag;
                *value = u32::MAX;
            }
        }
        #[cfg(not(CONFIG_UCLAMP_TASK))]
        let _ = have;
    }
}

impl PiLocked<'_> {
    /// Returns the task's scheduling attributes, which its `pi_lock` keeps as they are.
    pub fn sched_attr(&self) -> SchedAttr {
        let t = self.task().as_ptr();
        // SAFETY: An all-zero `sched_attr` is valid: no flags, no clamps.
        let mut attr: bindings::sched_attr = unsafe { core::mem::zeroed() };
        attr.size = core::mem::size_of::<bindings::sched_attr>() as u32;
        // SAFETY: The task is valid; `__sched_setscheduler()` and `set_user_nice()` write these
        // under its `pi_lock`, held.
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
        SchedAttr(attr)
    }

    /// Returns the affinity the user requested for the task, or its effective one if none was
    /// requested. Both stay as they are, and the requested one allocated, under the `pi_lock`.
    pub fn requested_cpus(&self) -> &Cpumask {
        let t = self.task().as_ptr();
        // SAFETY: The task is valid; its `pi_lock` is held.
        let user = unsafe { (*t).user_cpus_ptr };
        if user.is_null() {
            // SAFETY: The task is valid, its mask stable under its `pi_lock`, held while `self`
            // is borrowed.
            unsafe { Cpumask::from_raw(addr_of!((*t).cpus_mask)) }
        } else {
            // SAFETY: The user mask stays allocated under the task's `pi_lock`.
            unsafe { Cpumask::from_raw(user) }
        }
    }
}

impl CurrentTask {
    /// Gives the current task the scheduling attributes `want`, calling into the scheduler only
    /// when they differ from its own.
    pub fn set_sched_attr(&self, want: &SchedAttr) -> Result {
        let have = {
            let irq = crate::interrupt::local_interrupt_disable();
            let pi = self.lock_pi(&irq);
            pi.sched_attr()
        };
        if want.same(&have) {
            return Ok(());
        }
        let mut attr = *want;
        attr.reset_clamps_of(&have);
        // SAFETY: `current` is valid; `attr` is a complete attribute set.
        to_result(unsafe { bindings::sched_setattr_nocheck(self.as_ptr(), &attr.0) })
    }

    /// Gives the current task the affinity `mask` the way `sched_setaffinity()` sets it, as the
    /// one the user requested, unless it has that one already.
    pub fn set_requested_cpus(&self, mask: &Cpumask) -> Result {
        let same = {
            let irq = crate::interrupt::local_interrupt_disable();
            let pi = self.lock_pi(&irq);
            // SAFETY: Both are valid cpumasks.
            unsafe { bindings::cpumask_equal(pi.requested_cpus().as_raw(), mask.as_raw()) }
        };
        if same {
            return Ok(());
        }
        // SAFETY: `mask` is a valid cpumask; pid 0 is `current`.
        let ret = unsafe { bindings::sched_setaffinity(0, mask.as_raw()) };
        // 0 or a negative error number, which fits.
        to_result(ret as c_int)
    }

    /// Sets the current task's name (`set_task_comm()`), from a buffer that may lack a NUL: the
    /// last byte becomes one.
    pub fn set_comm(&self, mut comm: [u8; bindings::TASK_COMM_LEN as usize]) {
        if let Some(last) = comm.last_mut() {
            *last = 0;
        }
        // SAFETY: `current` is valid; `comm` is NUL terminated.
        unsafe { bindings::__set_task_comm(self.as_ptr(), comm.as_ptr(), false) };
    }
}

impl Task {
    /// Returns the task's name. Another task may write it meanwhile (`__set_task_comm()` writes
    /// it without a lock): a snapshot, possibly torn, possibly without a NUL.
    #[inline]
    pub fn comm(&self) -> [u8; bindings::TASK_COMM_LEN as usize] {
        // SAFETY: The task is valid; the name is plain bytes, read once.
        unsafe { ptr::read_volatile(addr_of!((*self.as_ptr()).comm)) }
    }

    /// Returns the I/O priority set on the task with `ioprio_set()`, as its I/O context holds it
    /// (`IOPRIO_CLASS_NONE`, 0, if it has none).
    #[cfg(CONFIG_BLOCK)]
    pub fn ioprio(&self) -> u16 {
        let t = self.as_ptr();
        // SAFETY: `t` is valid. `set_task_ioprio()` installs the context and writes the
        // priority under the task lock.
        unsafe { bindings::task_lock(t) };
        // SAFETY: Under the task lock `io_context` stays as it is, and is valid if not null:
        // `exit_io_context()` clears it under the lock before it drops its reference. The
        // priority is read once: the other tasks sharing the context (CLONE_IO) write it under
        // their own task locks.
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
}

impl CurrentTask {
    /// Detaches the current task from the I/O context it has, which it may share with the task
    /// that forked it, and sets the I/O priority `prio` on a context of its own, unless `prio` has
    /// no class (`IOPRIO_CLASS_NONE`).
    #[cfg(CONFIG_BLOCK)]
    pub fn reset_ioprio(&self, prio: u16) -> Result {
        const IOPRIO_CLASS_NONE: u32 = 0;
        let t = self.as_ptr();
        // SAFETY: `current` is valid, and the pointer is only compared: `exit_io_context()` reads
        // it again under the task lock.
        if !unsafe { ptr::read_volatile(addr_of!((*t).io_context)) }.is_null() {
            // SAFETY: `t` is `current`, which may drop its own context.
            unsafe { bindings::exit_io_context(t) };
        }
        let class = (u32::from(prio) >> bindings::IOPRIO_CLASS_SHIFT) & bindings::IOPRIO_CLASS_MASK;
        if class == IOPRIO_CLASS_NONE {
            return Ok(());
        }
        // SAFETY: `t` is `current`, alive.
        to_result(unsafe { bindings::set_task_ioprio(t, prio.into()) })
    }

    /// Moves the current task into the cgroups of `src`, where they differ
    /// (`cgroup_attach_task_all()`).
    pub fn attach_to_cgroups_of(&self, src: &Task) -> Result {
        #[cfg(CONFIG_CGROUPS)]
        {
            let (s, d) = (src.as_ptr(), self.as_ptr());
            // SAFETY: Both are valid; comparing the css_set pointers needs no dereference.
            if unsafe { ptr::read_volatile(addr_of!((*s).cgroups)) == (*d).cgroups } {
                return Ok(());
            }
            // SAFETY: Both tasks are valid; attaching takes its own locks and may sleep, as the
            // current task may.
            to_result(unsafe { bindings::cgroup_attach_task_all(s, d) })
        }
        #[cfg(not(CONFIG_CGROUPS))]
        {
            let _ = src;
            Ok(())
        }
    }
}

/// A task that handed its thread identity to the current task and stays parked until it is
/// released: it does not run, return to userspace or change its own per-thread state meanwhile.
///
/// Not `Send`: it is the parked source of the current task, on this CPU's task only.
///
/// # Invariants
///
/// `task` is parked, as above, for as long as this exists.
pub struct Parked<'a> {
    task: &'a Task,
    _not_send: NotThreadSafe,
}

impl<'a> Parked<'a> {
    /// Takes `task` as the parked source of the current task's identity.
    ///
    /// # Safety
    ///
    /// `task` must be a valid task that handed its identity to `current`, or to a task that
    /// passed it on to `current`, and stays valid and parked, as [`Parked`] describes, for `'a`.
    #[inline]
    pub unsafe fn assume_parked(task: *mut bindings::task_struct) -> Self {
        // INVARIANT: Per the safety requirements.
        Self {
            // SAFETY: The caller guarantees that `task` is valid for `'a`.
            task: unsafe { Task::from_raw(task) },
            _not_send: NotThreadSafe,
        }
    }

    /// The parked task.
    #[inline]
    pub fn task(&self) -> &'a Task {
        self.task
    }
}

impl CurrentTask {
    /// Gives the current task a copy of the memory policy of `src`.
    pub fn copy_mempolicy_of(&self, src: &Parked<'_>) -> Result {
        #[cfg(CONFIG_NUMA)]
        {
            // SAFETY: `src` is parked: its policy does not change meanwhile.
            let pol = unsafe { bindings::mpol_dup((*src.task().as_ptr()).mempolicy) };
            let pol = crate::error::from_err_ptr(pol)?;
            let t = self.as_ptr();
            // SAFETY: `current` is valid.
            unsafe { bindings::task_lock(t) };
            // SAFETY: `task_lock` protects `mempolicy`.
            let old = unsafe { ptr::replace(addr_of_mut!((*t).mempolicy), pol) };
            // SAFETY: Taken above.
            unsafe { bindings::task_unlock(t) };
            // SAFETY: The reference the task held on its old policy.
            unsafe { bindings::mpol_put(old) };
        }
        #[cfg(not(CONFIG_NUMA))]
        let _ = src;
        Ok(())
    }

    /// Moves the rseq registration of `src` to the current task (`rseq_handoff_move()`).
    #[inline]
    pub fn take_rseq(&self, src: &Parked<'_>) {
        #[cfg(CONFIG_RSEQ)]
        // SAFETY: `src` handed its identity to `current` and is parked, as the C function
        // requires.
        unsafe {
            bindings::rseq_handoff_move(src.task().as_ptr())
        };
        #[cfg(not(CONFIG_RSEQ))]
        let _ = src;
    }
}

#[macros::kunit_tests(rust_kernel_task_identity)]
mod tests {
    use super::*;
    use crate::task::{CputimeSplit, StatsWriteGuard, ThreadAcct, TASK_UNINTERRUPTIBLE};

    /// The thread function of a [`Sleeper`], which never gets to run it.
    ///
    /// # Safety
    ///
    /// Only `kthread()` may call it, with the data pointer given at creation; it touches
    /// neither.
    unsafe extern "C" fn never_runs(_data: *mut c_void) -> c_int {
        0
    }

    /// A kernel thread that is created and never woken.
    ///
    /// It sleeps in `kthread()` until dropped, then exits without running its thread function.
    /// Off its CPU and off the runqueue it does not touch its own accounting: the test is the
    /// only writer of it.
    struct Sleeper(*mut bindings::task_struct);

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
            let sleeper = Sleeper(crate::error::from_err_ptr(t)?);
            // The thread set itself TASK_UNINTERRUPTIBLE before it woke its creator, but may
            // still be on its way through schedule(): wait until it is off its CPU.
            // SAFETY: `sleeper.0` is a live task that stays asleep until `sleeper` is dropped.
            let ncsw =
                unsafe { bindings::wait_task_inactive(sleeper.0, TASK_UNINTERRUPTIBLE as c_uint) };
            if ncsw == 0 {
                return Err(EAGAIN);
            }
            Ok(sleeper)
        }

        fn task(&self) -> &Task {
            // SAFETY: The thread lives until `self` is dropped.
            unsafe { Task::from_raw(self.0) }
        }

        /// Runs `f` on the sleeper, pinned.
        fn pinned<R>(&self, f: impl FnOnce(&Pinned<'_>) -> R) -> Result<R> {
            let irq = crate::interrupt::local_interrupt_disable();
            let pinned = self
                .task()
                .lock_pi(&irq)
                .pin_if_asleep(TASK_UNINTERRUPTIBLE as c_uint)
                .ok_or(EAGAIN)?;
            Ok(f(&pinned))
        }

        /// Sets the runtime and its slice start, which no method sets directly.
        fn set_runtime(&self, (sum, prev): (u64, u64)) {
            // SAFETY: The thread is valid and cannot run: the scheduler does not write the
            // runtime of a sleeping task.
            unsafe {
                (*self.0).se.sum_exec_runtime = sum;
                (*self.0).se.prev_sum_exec_runtime = prev;
            }
        }

        /// Returns the runtime and its slice start.
        fn runtime(&self) -> (u64, u64) {
            // SAFETY: As in [`Sleeper::set_runtime`].
            unsafe {
                (
                    (*self.0).se.sum_exec_runtime,
                    (*self.0).se.prev_sum_exec_runtime,
                )
            }
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            // SAFETY: `self.0` is a kernel thread that was never woken; kthread_stop() wakes it
            // and holds a reference on it until it has exited.
            unsafe { bindings::kthread_stop(self.0) };
        }
    }

    /// Counts with distinct values in every field, from `base`.
    fn numbered(base: u64) -> ThreadAcct {
        let n = |i: u64| base.wrapping_add(i);
        #[allow(unused_mut)]
        let mut ioac = bindings::task_io_accounting::default();
        #[cfg(CONFIG_TASK_XACCT)]
        {
            ioac.rchar = n(11);
            ioac.wchar = n(12);
            ioac.syscr = n(13);
            ioac.syscw = n(14);
        }
        #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
        {
            ioac.read_bytes = n(15);
            ioac.write_bytes = n(16);
            ioac.cancelled_write_bytes = n(17);
        }
        ThreadAcct {
            utime: n(1),
            stime: n(2),
            gtime: n(3),
            exec_runtime: n(4),
            min_flt: n(5) as c_ulong,
            maj_flt: n(6) as c_ulong,
            nvcsw: n(7) as c_ulong,
            nivcsw: n(8) as c_ulong,
            ioac,
        }
    }

    /// The fields of `a`, in order, to compare and print.
    fn fields(a: &ThreadAcct) -> [u64; 15] {
        #[allow(unused_mut)]
        let mut io = [0u64; 7];
        #[cfg(CONFIG_TASK_XACCT)]
        {
            io[0] = a.ioac.rchar;
            io[1] = a.ioac.wchar;
            io[2] = a.ioac.syscr;
            io[3] = a.ioac.syscw;
        }
        #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
        {
            io[4] = a.ioac.read_bytes;
            io[5] = a.ioac.write_bytes;
            io[6] = a.ioac.cancelled_write_bytes;
        }
        [
            a.utime,
            a.stime,
            a.gtime,
            a.exec_runtime,
            a.min_flt as u64,
            a.maj_flt as u64,
            a.nvcsw as u64,
            a.nivcsw as u64,
            io[0],
            io[1],
            io[2],
            io[3],
            io[4],
            io[5],
            io[6],
        ]
    }

    /// Reports a mismatch with all values, which the KUnit assertion does not print.
    fn same<T: PartialEq + core::fmt::Debug>(what: &str, got: &T, want: &T) -> bool {
        if got != want {
            pr_err!("{what}: got {got:?}, want {want:?}\n");
        }
        got == want
    }

    /// Gives a destination the accounting of a source, both with known, distinct values in every
    /// field, the way a thread identity handoff does, and checks each field for the exact
    /// result: the source keeps its values, the destination has the source's, the split
    /// included, with its own slice delta, and the record of what it had is exact.
    ///
    /// The tasks are kernel threads that never run, so no tick, fault or context switch adds to
    /// the values. Each task's split adds up to at least its runtime before and after the
    /// transfer, so a cputime_adjust() from a concurrent reader of its `/proc` stat never writes
    /// it either.
    #[test]
    fn accounting_moves_and_keeps_the_slice() -> Result {
        let src = Sleeper::new(c"acct_src")?;
        let dst = Sleeper::new(c"acct_dst")?;
        let (src0, dst0) = (numbered(10_000), numbered(50_000));
        let src_split = CputimeSplit {
            utime: 6_000,
            stime: 5_000,
        };
        let dst_split = CputimeSplit {
            utime: 30_000,
            stime: 22_000,
        };
        // Set up each sleeper's counts, through the methods but for the runtime.
        src.set_runtime((0, 0));
        dst.set_runtime((0, 0));
        src.pinned(|p| {
            p.replace_thread_acct(&src0);
            p.set_cputime_split(src_split);
        })?;
        dst.pinned(|p| {
            p.replace_thread_acct(&dst0);
            p.set_cputime_split(dst_split);
        })?;
        // Slice deltas of their own: 600 and 6_000.
        src.set_runtime((src0.exec_runtime, src0.exec_runtime - 600));
        dst.set_runtime((dst0.exec_runtime, dst0.exec_runtime - 6_000));

        let (taken, split) = src.pinned(|p| (p.thread_acct(), p.task().cputime_split()))?;
        let had = dst.pinned(|p| {
            let had = p.replace_thread_acct(&taken);
            p.set_cputime_split(split);
            had
        })?;
        let src1 = src.pinned(|p| (p.thread_acct(), p.task().cputime_split()))?;
        let dst1 = dst.pinned(|p| (p.thread_acct(), p.task().cputime_split()))?;
        let (src_rt, dst_rt) = (src.runtime(), dst.runtime());
        // A failed assertion ends the test thread: stop the sleepers first.
        drop(src);
        drop(dst);

        let ok = [
            same("taken", &fields(&taken), &fields(&src0)),
            same("destination had", &fields(&had), &fields(&dst0)),
            same("source after", &fields(&src1.0), &fields(&src0)),
            same("destination after", &fields(&dst1.0), &fields(&src0)),
        ];
        assert_eq!(ok, [true; 4]);
        #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
        {
            assert_eq!(split, src_split);
            assert_eq!(src1.1, src_split);
            assert_eq!(dst1.1, src_split);
        }
        // The source keeps its runtime and slice; the destination has the source's runtime with
        // its own slice delta.
        assert_eq!(src_rt, (src0.exec_runtime, src0.exec_runtime - 600));
        assert_eq!(
            dst_rt,
            (src0.exec_runtime, src0.exec_runtime.wrapping_sub(6_000))
        );
        Ok(())
    }

    /// [`StatsWriteGuard::account_change`] adds the old counts to the exited threads' totals and
    /// takes the new ones off, wrapping as the C sums do, so that the sums over the group stay
    /// what they were while two tasks count the same time.
    #[test]
    fn account_change_keeps_group_sums() -> Result {
        let mut sig = KBox::<bindings::signal_struct>::new_uninit(GFP_KERNEL)?;
        // SAFETY: An all-zero `signal_struct` is a valid value of the type; only its sums are
        // used, never its locks.
        let mut sig = unsafe {
            ptr::write_bytes(sig.as_mut_ptr(), 0, 1);
            sig.assume_init()
        };
        sig.utime = 10;
        sig.min_flt = 5;
        let new = ThreadAcct {
            utime: 3_100,
            stime: 1_900,
            exec_runtime: 5_000,
            min_flt: 2,
            nvcsw: 13,
            ..Default::default()
        };
        let old = ThreadAcct {
            utime: 40,
            exec_runtime: 700,
            min_flt: 1,
            ..Default::default()
        };
        let mut guard = StatsWriteGuard {
            sig: &mut *sig,
            _siglock: core::marker::PhantomData,
        };
        guard.account_change(&old, &new);
        // Nothing to unlock: the locks of `sig` were never taken.
        core::mem::forget(guard);
        assert_eq!(sig.utime, 50u64.wrapping_sub(3_100));
        assert_eq!(sig.stime, 0u64.wrapping_sub(1_900));
        assert_eq!(sig.sum_sched_runtime, 700u64.wrapping_sub(5_000));
        assert_eq!(sig.min_flt, 4);
        assert_eq!(sig.nvcsw, 0usize.wrapping_sub(13));
        // The task that keeps `new` exits and adds it back: the totals hold the old counts of
        // the other, which now counts `new` itself.
        assert_eq!(sig.utime.wrapping_add(new.utime), 50);
        assert_eq!(sig.sum_sched_runtime.wrapping_add(new.exec_runtime), 700);
        Ok(())
    }

    /// Reads the reference count of a credential.
    fn usage(c: *const bindings::cred) -> i64 {
        // SAFETY: Only called on credentials the test holds a reference on; a plain snapshot of
        // the counter, as atomic_long_read().
        unsafe { ptr::read_volatile(addr_of!((*c).usage.counter)) }
    }

    /// [`Pinned::take_creds`] refuses a task of another thread group. The move under it gives the
    /// pinned task both references of the source's credentials and drops both of the ones it had;
    /// a second move of the same credentials changes nothing.
    #[test]
    fn credential_references_balance() -> Result {
        let dst = Sleeper::new(c"cred_dst")?;
        // SAFETY: prepare_creds() returns a new reference, or null.
        let new = unsafe { bindings::prepare_creds() };
        if new.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `new` is a prepared credential; commit_creds() takes the reference. The test
        // runs in a thread of its own, which exits with them.
        unsafe { bindings::commit_creds(new) };
        let cur = crate::current!();
        // SAFETY: The sleeper does not change its credentials; its own reference keeps them
        // alive, and the extra one taken here while it drops them.
        let old = unsafe { bindings::get_cred((*dst.0).real_cred) };
        let (old_before, new_before) = (usage(old), usage(new));

        // The sleeper is a kernel thread of its own group.
        let refused = dst.pinned(|p| p.take_creds(cur))?;
        let unchanged = (usage(old), usage(new));
        // SAFETY: The sleeper is pinned and holds `old` as both its credentials the first time,
        // `new` the second; `new` is live, the test thread's.
        let take = |p: &Pinned<'_>| unsafe {
            move_cred_refs(p.task().as_ptr(), (*p.task().as_ptr()).real_cred, new)
        };
        dst.pinned(take)?;
        // SAFETY: The sleeper is valid; only the test changes its credentials.
        let (real, eff) = unsafe { ((*dst.0).real_cred, (*dst.0).cred) };
        let (old_after, new_after) = (usage(old), usage(new));
        dst.pinned(take)?;
        let (old_again, new_again) = (usage(old), usage(new));
        drop(dst);
        // SAFETY: The extra reference taken above.
        unsafe { bindings::put_cred(old) };

        assert_eq!(refused, Err(EINVAL));
        assert_eq!(unchanged, (old_before, new_before));
        assert!(ptr::eq(real, new) && ptr::eq(eff, new));
        assert_eq!((old_after, new_after), (old_before - 2, new_before + 2));
        assert_eq!((old_again, new_again), (old_after, new_after));
        Ok(())
    }

    /// Gives a sleeper the attributes `attr`, reads them back with [`PiLocked::sched_attr`] and
    /// gives those to another sleeper. Returns what the two reads gave.
    fn sched_round_trip(attr: &bindings::sched_attr) -> Result<(SchedAttr, SchedAttr)> {
        let src = Sleeper::new(c"sched_src")?;
        let dst = Sleeper::new(c"sched_dst")?;
        // SAFETY: `src.0` is a live task; `attr` is a complete attribute set.
        to_result(unsafe { bindings::sched_setattr_nocheck(src.0, attr) })?;
        let want = src.pinned(|p| p.sched_attr())?;
        // SAFETY: `dst.0` is a live task; `want` was read from a task.
        to_result(unsafe { bindings::sched_setattr_nocheck(dst.0, &want.into_raw()) })?;
        let have = dst.pinned(|p| p.sched_attr())?;
        Ok((want, have))
    }

    /// [`PiLocked::sched_attr`] reads a complete attribute set: `sched_setattr()` of it gives
    /// another task the same attributes, the priority of a real-time policy included (without
    /// it, `sched_setattr()` refuses the policy), and [`SchedAttr::same`] tells the sets apart.
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

        let (rt_want, rt_have) = sched_round_trip(&rt)?;
        let (fair_want, fair_have) = sched_round_trip(&fair)?;
        let (r, f) = (rt_want.into_raw(), fair_want.into_raw());
        assert_eq!(
            (r.sched_policy, r.sched_priority),
            (bindings::SCHED_FIFO, 7)
        );
        assert_eq!((f.sched_policy, f.sched_nice), (bindings::SCHED_BATCH, 5));
        assert!(rt_want.same(&rt_have));
        assert!(fair_want.same(&fair_have));
        assert!(!rt_want.same(&fair_want));
        Ok(())
    }
}
