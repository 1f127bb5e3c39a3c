// SPDX-License-Identifier: GPL-2.0

//! The state of a task that its own thread and others change while it is read.
//!
//! Most of what a `task_struct` holds is written by the task itself, by other tasks under a lock
//! (the siglock, `tasklist_lock`, the `pi_lock`) or with atomic bit operations. A reader that
//! holds none of those gets a snapshot, as `READ_ONCE()` gives one in C: each method here reads
//! its fields once, with volatile loads, and never hands out a reference into the task. A caller
//! that needs the value to hold takes the lock that protects it and reads again.
//!
//! C header: [`include/linux/sched.h`](srctree/include/linux/sched.h)

use crate::{
    bindings,
    prelude::*,
    sync::{atomic::Atomic, rcu, RawSpinLock},
    task::{CurrentTask, Task},
};
use core::ptr::{self, addr_of, addr_of_mut};

/// Reads a field of `task` once (`READ_ONCE(task->field)`).
///
/// Only for fields of plain data (integers, pointers that are only compared, structs of them):
/// every bit pattern is a valid value, so a load that races with a writer is a snapshot.
macro_rules! once {
    ($task:expr, $($field:ident).+) => {{
        let t: *mut bindings::task_struct = $task.as_ptr();
        // SAFETY: `t` is a valid task by the type invariants of `Task`, and the field is plain
        // data, read once with a volatile load as `READ_ONCE()` reads it.
        unsafe { ptr::read_volatile(addr_of!((*t).$($field).+)) }
    }};
}

/// A task's speculation controls, the `PR_SET_SPECULATION_CTRL` bits of its atomic flags.
///
/// The architecture derives its mitigation state (x86's `TIF_SSBD` and `TIF_SPEC_IB`) from
/// them: two tasks with the same controls run with the same mitigations.
///
/// # Examples
///
/// Each control counts, and nothing else among the atomic flags does:
///
/// ```
/// use kernel::{bindings, ffi::c_ulong, task::SpeculationCtrl};
///
/// let of = SpeculationCtrl::from_atomic_flags;
/// let other: c_ulong = (1 << bindings::PFA_NO_NEW_PRIVS) | (1 << bindings::PFA_SPREAD_PAGE);
/// for bit in [
///     bindings::PFA_SPEC_SSB_DISABLE,
///     bindings::PFA_SPEC_SSB_FORCE_DISABLE,
///     bindings::PFA_SPEC_IB_DISABLE,
///     bindings::PFA_SPEC_IB_FORCE_DISABLE,
///     bindings::PFA_SPEC_SSB_NOEXEC,
/// ] {
///     let f: c_ulong = 1 << bit;
///     assert_ne!(of(f), of(0));
///     assert_ne!(of(other), of(f | other));
///     assert_eq!(of(f), of(f | other));
/// }
/// assert_eq!(of(other), of(0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpeculationCtrl(c_ulong);

impl SpeculationCtrl {
    /// The controls among the atomic flags `flags` (`task_struct::atomic_flags`).
    pub fn from_atomic_flags(flags: c_ulong) -> Self {
        const MASK: c_ulong = (1 << bindings::PFA_SPEC_SSB_DISABLE)
            | (1 << bindings::PFA_SPEC_SSB_FORCE_DISABLE)
            | (1 << bindings::PFA_SPEC_IB_DISABLE)
            | (1 << bindings::PFA_SPEC_IB_FORCE_DISABLE)
            | (1 << bindings::PFA_SPEC_SSB_NOEXEC);
        Self(flags & MASK)
    }
}

/// Why reading a [`Task`]'s state here is sound: each method reads fields of a valid task (the
/// type invariant) once and copies them out, or calls a C helper that does the same.
impl Task {
    /// Returns the task's flags (`PF_*`), a snapshot.
    #[inline]
    pub fn flags(&self) -> u32 {
        once!(self, flags)
    }

    /// Returns whether the task is traced (`task_struct::ptrace` is set). Changes under
    /// `tasklist_lock`.
    #[inline]
    pub fn is_traced(&self) -> bool {
        once!(self, ptrace) != 0
    }

    /// Returns whether the task traces others, which then point back at it. Changes under
    /// `tasklist_lock`.
    #[inline]
    pub fn is_tracer(&self) -> bool {
        // SAFETY: The task is valid, and fork initialised the list head; `list_empty()` reads the
        // head once.
        !unsafe { bindings::list_empty(addr_of!((*self.as_ptr()).ptraced)) }
    }

    /// Returns the task's effective priority (`task_struct::prio`), a snapshot.
    #[inline]
    pub fn prio(&self) -> c_int {
        once!(self, prio)
    }

    /// Returns whether the task runs in a real-time or deadline class (`rt_or_dl_task()`), a
    /// snapshot.
    #[inline]
    pub fn is_rt_or_dl(&self) -> bool {
        self.prio() < bindings::MAX_RT_PRIO as c_int
    }

    /// Returns the task's atomic flags (`PFA_*`), a snapshot.
    #[inline]
    pub fn atomic_flags(&self) -> c_ulong {
        once!(self, atomic_flags)
    }

    /// Returns the task's speculation controls, a snapshot.
    #[inline]
    pub fn speculation_ctrl(&self) -> SpeculationCtrl {
        SpeculationCtrl::from_atomic_flags(self.atomic_flags())
    }

    /// Returns whether the task has `no_new_privs` set. It is never cleared.
    #[inline]
    pub fn no_new_privs(&self) -> bool {
        // SAFETY: The task is valid; the flag is read with an atomic bit test.
        unsafe { bindings::task_no_new_privs(self.as_ptr()) }
    }

    /// Returns the task's job control flags (`JOBCTL_*`). Change under the siglock.
    #[inline]
    pub fn jobctl(&self) -> c_ulong {
        once!(self, jobctl)
    }

    /// Returns whether the task leads its thread group (`thread_group_leader()`). Changes under
    /// `tasklist_lock`, by an exec or a thread identity handoff.
    #[inline]
    pub fn is_group_leader(&self) -> bool {
        once!(self, exit_signal) >= 0
    }

    /// Returns whether the task and `other` belong to the same thread group
    /// (`same_thread_group()`).
    #[inline]
    pub fn same_thread_group(&self, other: &Task) -> bool {
        once!(self, signal) == once!(other, signal)
    }

    /// Returns whether the task and `other` share their address space, file table, filesystem
    /// context and namespaces. The pointers are only compared.
    #[inline]
    pub fn same_context(&self, other: &Task) -> bool {
        once!(self, mm) == once!(other, mm)
            && once!(self, files) == once!(other, files)
            && once!(self, fs) == once!(other, fs)
            && once!(self, nsproxy) == once!(other, nsproxy)
    }

    /// Returns whether the task and `other` run under the same seccomp mode and filter. They
    /// change under the siglock.
    #[cfg(CONFIG_SECCOMP)]
    #[inline]
    pub fn same_seccomp(&self, other: &Task) -> bool {
        once!(self, seccomp.mode) == once!(other, seccomp.mode)
            && once!(self, seccomp.filter) == once!(other, seccomp.filter)
    }

    /// Returns whether the task and `other` share their SysV semaphore undo list.
    #[cfg(CONFIG_SYSVIPC)]
    #[inline]
    pub fn same_sysvsem(&self, other: &Task) -> bool {
        once!(self, sysvsem.undo_list) == once!(other, sysvsem.undo_list)
    }

    /// Returns whether the real credentials of the task and `other` have the same user
    /// namespace.
    #[inline]
    pub fn same_user_ns(&self, other: &Task) -> bool {
        let _rcu = rcu::read_lock();
        let (a, b) = (once!(self, real_cred), once!(other, real_cred));
        // SAFETY: Credentials are freed after an RCU grace period; the read lock keeps both
        // alive, and their namespace never changes.
        unsafe { (*a).user_ns == (*b).user_ns }
    }

    /// Returns whether signals are pending on the task itself (not on its thread group), a
    /// snapshot. They change under the siglock.
    #[inline]
    pub fn has_own_pending_signals(&self) -> bool {
        // SAFETY: The task is valid, fork initialised the list head; `list_empty()` reads it once.
        let queued = !unsafe { bindings::list_empty(addr_of!((*self.as_ptr()).pending.list)) };
        queued || !crate::signal::SigSet::from_raw(once!(self, pending.signal)).is_empty()
    }

    /// Returns whether the thread group of the task is exiting (`SIGNAL_GROUP_EXIT`) or an exec
    /// is under way in it. Changes under the siglock.
    #[inline]
    pub fn group_exiting(&self) -> bool {
        let sig = once!(self, signal);
        // SAFETY: The signal struct lives as long as the task; its fields are read once.
        let (flags, exec) = unsafe {
            (
                ptr::read_volatile(addr_of!((*sig).flags)),
                ptr::read_volatile(addr_of!((*sig).group_exec_task)),
            )
        };
        flags & bindings::SIGNAL_GROUP_EXIT != 0 || !exec.is_null()
    }

    /// Returns whether syscall user dispatch is set up on the task.
    #[cfg(CONFIG_GENERIC_ENTRY)]
    #[inline]
    pub fn syscall_user_dispatch(&self) -> bool {
        once!(self, thread_info.syscall_work)
            & (1 << bindings::syscall_work_bit_SYSCALL_WORK_BIT_SYSCALL_USER_DISPATCH)
            != 0
    }

    /// Returns whether syscall user dispatch is set up on the task.
    #[cfg(not(CONFIG_GENERIC_ENTRY))]
    #[inline]
    pub fn syscall_user_dispatch(&self) -> bool {
        false
    }

    /// Returns whether the task has a core scheduling cookie.
    #[cfg(CONFIG_SCHED_CORE)]
    #[inline]
    pub fn has_core_cookie(&self) -> bool {
        once!(self, core_cookie) != 0
    }

    /// Returns whether the task has a core scheduling cookie.
    #[cfg(not(CONFIG_SCHED_CORE))]
    #[inline]
    pub fn has_core_cookie(&self) -> bool {
        false
    }

    /// Returns whether kcov collects coverage for the task.
    #[cfg(CONFIG_KCOV)]
    #[inline]
    pub fn has_kcov(&self) -> bool {
        !once!(self, kcov).is_null()
    }

    /// Returns whether kcov collects coverage for the task.
    #[cfg(not(CONFIG_KCOV))]
    #[inline]
    pub fn has_kcov(&self) -> bool {
        false
    }

    /// Returns whether per-thread CPU timers are armed on the task. They change under the
    /// siglock.
    #[cfg(CONFIG_POSIX_TIMERS)]
    #[inline]
    pub fn has_cpu_timers(&self) -> bool {
        once!(self, posix_cputimers.timers_active) != 0
    }

    /// Returns whether per-thread CPU timers are armed on the task. They change under the
    /// siglock.
    #[cfg(not(CONFIG_POSIX_TIMERS))]
    #[inline]
    pub fn has_cpu_timers(&self) -> bool {
        false
    }

    /// Returns whether a `vfork()` parent waits for the task.
    #[inline]
    pub fn has_vfork_waiter(&self) -> bool {
        !once!(self, vfork_done).is_null()
    }

    /// Returns whether the task created SysV shared memory segments that still exist.
    #[cfg(CONFIG_SYSVIPC)]
    #[inline]
    pub fn created_sysv_shm(&self) -> bool {
        // SAFETY: The task is valid, fork initialised the list head; `list_empty()` reads it once.
        !unsafe { bindings::list_empty(addr_of!((*self.as_ptr()).sysvshm.shm_clist)) }
    }

    /// Returns whether the task created SysV shared memory segments that still exist.
    #[cfg(not(CONFIG_SYSVIPC))]
    #[inline]
    pub fn created_sysv_shm(&self) -> bool {
        false
    }

    /// Returns whether BPF task local storage is attached to the task
    /// (`rcu_access_pointer(task->bpf_storage)`).
    #[cfg(CONFIG_BPF_SYSCALL)]
    #[inline]
    pub fn has_bpf_storage(&self) -> bool {
        !once!(self, bpf_storage).is_null()
    }

    /// Returns whether BPF task local storage is attached to the task
    /// (`rcu_access_pointer(task->bpf_storage)`).
    #[cfg(not(CONFIG_BPF_SYSCALL))]
    #[inline]
    pub fn has_bpf_storage(&self) -> bool {
        false
    }

    /// Returns whether the task has a per-task perf event context.
    #[cfg(CONFIG_PERF_EVENTS)]
    #[inline]
    pub fn has_perf_context(&self) -> bool {
        !once!(self, perf_event_ctxp).is_null()
    }

    /// Returns whether the task has a per-task perf event context.
    #[cfg(not(CONFIG_PERF_EVENTS))]
    #[inline]
    pub fn has_perf_context(&self) -> bool {
        false
    }

    /// Returns whether the task owns a PI futex. The list changes under the task's `pi_lock`.
    #[cfg(CONFIG_FUTEX)]
    #[inline]
    pub fn owns_pi_futex(&self) -> bool {
        // SAFETY: The task is valid, fork initialised the list head; `list_empty()` reads it once.
        !unsafe { bindings::list_empty(addr_of!((*self.as_ptr()).futex.pi_state_list)) }
    }

    /// Returns whether the task owns a PI futex. The list changes under the task's `pi_lock`.
    #[cfg(not(CONFIG_FUTEX))]
    #[inline]
    pub fn owns_pi_futex(&self) -> bool {
        false
    }

    /// Returns the task's `pi_lock`, which serialises its wakeups and its scheduling attributes.
    ///
    /// Its holders run with interrupts off: take it under a lock that disables them or with
    /// [`crate::interrupt::local_interrupt_disable`].
    #[inline]
    pub fn pi_lock(&self) -> &RawSpinLock<()> {
        // SAFETY: The task is valid for the lifetime of `self`, and fork initialised the lock.
        unsafe { RawSpinLock::from_raw(addr_of_mut!((*self.as_ptr()).pi_lock)) }
    }

    /// Returns the task's thread identity handoff count: odd while a handoff moves the thread's
    /// tid to this task and it has not adopted the rest yet (`include/linux/thread_handoff.h`).
    #[cfg(CONFIG_THREAD_HANDOFF)]
    #[inline]
    pub fn handoff_seq(&self) -> &Atomic<u32> {
        // SAFETY: The task is valid for the lifetime of `self`; every access to the field is
        // atomic but the copy into a child the task forks, which no handoff runs for meanwhile.
        unsafe { Atomic::from_ptr(addr_of_mut!((*self.as_ptr()).handoff_seq)) }
    }
}

impl CurrentTask {
    /// Returns whether the current syscall has a live audit context (not `audit_dummy_context()`).
    #[cfg(CONFIG_AUDITSYSCALL)]
    #[inline]
    pub fn audits_syscall(&self) -> bool {
        // SAFETY: Reads the audit context of `current`, which only the task itself changes.
        !once!(self, audit_context).is_null() && !unsafe { bindings::audit_dummy_context() }
    }

    /// Returns whether the current syscall has a live audit context (not `audit_dummy_context()`).
    #[cfg(not(CONFIG_AUDITSYSCALL))]
    #[inline]
    pub fn audits_syscall(&self) -> bool {
        false
    }

    /// Returns whether uretprobes are pending on the current task.
    #[cfg(CONFIG_UPROBES)]
    #[inline]
    pub fn has_uretprobes(&self) -> bool {
        let utask = once!(self, utask);
        // SAFETY: Only the task itself frees its `utask`, which is valid when not null.
        !utask.is_null() && !unsafe { (*utask).return_instances }.is_null()
    }

    /// Returns whether uretprobes are pending on the current task.
    #[cfg(not(CONFIG_UPROBES))]
    #[inline]
    pub fn has_uretprobes(&self) -> bool {
        false
    }
}
