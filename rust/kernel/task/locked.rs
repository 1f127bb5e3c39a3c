// SPDX-License-Identifier: GPL-2.0

//! The locks that protect how other tasks reach a task, as guards.
//!
//! `tasklist_lock` protects the task lists, parent and leader links and ptrace; a thread group's
//! siglock its signal state; a task's `pi_lock` its wakeups and scheduling attributes; the
//! group's `stats_lock` the sums its exited threads left. Each guard here proves its lock held
//! for as long as it lives, and the methods that need a lock take its guard.
//!
//! C headers: [`include/linux/sched/task.h`](srctree/include/linux/sched/task.h),
//! [`include/linux/sched/signal.h`](srctree/include/linux/sched/signal.h)

use crate::{
    bindings,
    interrupt::LocalInterruptDisabled,
    prelude::*,
    sync::RawSpinLockGuard,
    task::{CurrentTask, Task},
    types::NotThreadSafe,
};
use core::ptr::addr_of_mut;

/// `tasklist_lock`, held for writing with interrupts off (`write_lock_irqsave()`).
///
/// Interrupt handlers take the lock for reading: interrupts are off for as long as it is held
/// for writing. Dropping the guard restores the interrupt state it found, so a guard taken where
/// interrupts were already off leaves them off.
///
/// # Invariants
///
/// The current CPU holds `tasklist_lock` for writing, taken with `write_lock_irqsave()`, which
/// saved `flags`, for as long as this exists.
pub struct TasklistWriteGuard {
    flags: c_ulong,
    _not_send: NotThreadSafe,
}

impl TasklistWriteGuard {
    /// Takes `tasklist_lock` for writing. Spins, never sleeps.
    #[inline]
    pub fn lock() -> Self {
        // SAFETY: `tasklist_lock` is a static lock, initialised at build time.
        let flags = unsafe { bindings::write_lock_irqsave(addr_of_mut!(bindings::tasklist_lock)) };
        // INVARIANT: Taken above, saving `flags`.
        Self {
            flags,
            _not_send: NotThreadSafe,
        }
    }

    /// Interrupts are off while the lock is held.
    #[inline]
    pub fn irq_disabled(&self) -> &LocalInterruptDisabled {
        // SAFETY: By the type invariants, `write_lock_irqsave()` disabled interrupts, and only
        // dropping `self`, which can't happen while it is borrowed, restores them.
        unsafe { LocalInterruptDisabled::assume_disabled() }
    }
}

impl Drop for TasklistWriteGuard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: By the type invariants, the lock is held, taken with `write_lock_irqsave()`,
        // which saved `flags`.
        unsafe {
            bindings::write_unlock_irqrestore(addr_of_mut!(bindings::tasklist_lock), self.flags)
        };
    }
}

/// The siglock of a thread group (`sighand->siglock`), held.
///
/// # Invariants
///
/// The current CPU holds the siglock of `task`'s `sighand` for as long as this exists, and that
/// `sighand` is `task`'s: only an exec by the task's group changes it, which takes the siglock.
pub struct SiglockGuard<'a> {
    task: &'a Task,
    _not_send: NotThreadSafe,
}

impl CurrentTask {
    /// Takes the siglock of the current task's thread group. The lock disables no interrupts of
    /// its own: they must be off already, as for every holder.
    #[inline]
    pub fn lock_siglock<'a>(&'a self, _irq: &'a LocalInterruptDisabled) -> SiglockGuard<'a> {
        // SAFETY: `current` is valid; only its own exec changes its `sighand`.
        let sighand = unsafe { (*self.as_ptr()).sighand };
        // SAFETY: The `sighand` of a live user or kernel task is valid; interrupts are off.
        unsafe { bindings::spin_lock(addr_of_mut!((*sighand).siglock)) };
        // INVARIANT: Taken above, on the task's `sighand`.
        SiglockGuard {
            task: self,
            _not_send: NotThreadSafe,
        }
    }
}

impl<'a> SiglockGuard<'a> {
    /// The task through which the lock was taken.
    #[inline]
    pub fn task(&self) -> &'a Task {
        self.task
    }

    /// Takes the `stats_lock` of the thread group for writing, inside the siglock, as
    /// `__exit_signal()` does. Readers of the group's sums retry while it is held.
    #[inline]
    pub fn write_stats(&self) -> StatsWriteGuard<'_> {
        // SAFETY: The task is valid; its signal struct lives as long as it does.
        let sig = unsafe { (*self.task.as_ptr()).signal };
        // SAFETY: `sig` is valid and its `stats_lock` initialised; it nests in the siglock.
        unsafe { bindings::write_seqlock(addr_of_mut!((*sig).stats_lock)) };
        // INVARIANT: Taken above, for `sig`, which lives as long as `self.task`.
        StatsWriteGuard {
            sig,
            _siglock: core::marker::PhantomData,
        }
    }
}

impl Drop for SiglockGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: By the type invariants the siglock of the task's `sighand` is held.
        unsafe { bindings::spin_unlock(addr_of_mut!((*(*self.task.as_ptr()).sighand).siglock)) };
    }
}

/// The `stats_lock` of a thread group, held for writing under its siglock.
///
/// # Invariants
///
/// `sig` is a valid signal struct whose `stats_lock` the current CPU holds for writing, with its
/// siglock, for as long as this exists.
pub struct StatsWriteGuard<'a> {
    pub(super) sig: *mut bindings::signal_struct,
    pub(super) _siglock: core::marker::PhantomData<&'a SiglockGuard<'a>>,
}

impl Drop for StatsWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: By the type invariants the lock is held for writing.
        unsafe { bindings::write_sequnlock(addr_of_mut!((*self.sig).stats_lock)) };
    }
}

/// The threadgroup exclusion of the cgroup core (`cgroup_threadgroup_change_begin()`), which
/// keeps a migration of the whole thread group out. Held by a task for its own group.
///
/// # Invariants
///
/// `task` is `current`, and began the change, which this ends.
pub struct ThreadgroupChange<'a> {
    task: &'a CurrentTask,
}

impl CurrentTask {
    /// Begins a threadgroup change if that needs no wait (`cgroup_threadgroup_change_trybegin()`).
    #[inline]
    pub fn try_threadgroup_change(&self) -> Option<ThreadgroupChange<'_>> {
        // SAFETY: `self` is `current`.
        if unsafe { bindings::cgroup_threadgroup_change_trybegin(self.as_ptr()) } {
            // INVARIANT: Begun above, by `current`.
            Some(ThreadgroupChange { task: self })
        } else {
            None
        }
    }
}

impl Drop for ThreadgroupChange<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: By the type invariants `task`, `current`, began the change.
        unsafe { bindings::cgroup_threadgroup_change_end(self.task.as_ptr()) };
    }
}

/// The `pi_lock` of a task, held. Under it no wakeup of the task can start and its scheduling
/// attributes, affinity and PI state stay as they are.
///
/// # Invariants
///
/// `guard` holds `task`'s `pi_lock`.
pub struct PiLocked<'a> {
    task: &'a Task,
    _guard: RawSpinLockGuard<'a, ()>,
}

impl Task {
    /// Takes the task's `pi_lock`, with interrupts off as for every holder.
    #[inline]
    pub fn lock_pi<'a>(&'a self, _irq: &'a LocalInterruptDisabled) -> PiLocked<'a> {
        // INVARIANT: The guard holds the task's `pi_lock`.
        PiLocked {
            task: self,
            _guard: self.pi_lock().lock(),
        }
    }
}

impl<'a> PiLocked<'a> {
    /// The task whose `pi_lock` is held.
    #[inline]
    pub fn task(&self) -> &'a Task {
        self.task
    }

    /// Pins the task if it is asleep in `state` (a `TASK_*` state), off its run queue and off
    /// its CPU: then, with its `pi_lock` held, nothing can wake it or have it write its own state
    /// until the lock is dropped. Otherwise drops the lock.
    #[inline]
    pub fn pin_if_asleep(self, state: c_uint) -> Option<Pinned<'a>> {
        use crate::sync::{
            atomic::{Acquire, Atomic},
            barrier::{smp_mb, Read},
        };
        let t = self.task.as_ptr();
        // The reads and barriers of try_to_wake_up(), which takes the `pi_lock` first too: under
        // it no wakeup can start, and the scheduler sets these fields again only in one.
        // SAFETY: `t` is valid; a snapshot of a field the task writes as it goes to sleep.
        if unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*t).__state)) } != state {
            return None;
        }
        // `on_rq` is read after the state, or a task still on its way to sleep could be seen off
        // its run queue: pairs with the barrier of __schedule()'s run queue lock.
        smp_mb(Read);
        // SAFETY: `t` is valid; a snapshot of a field written under its run queue lock.
        if unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*t).on_rq)) } != 0 {
            return None;
        }
        // `on_cpu` is read after `on_rq`, or a task still switching out could be seen off its CPU.
        smp_mb(Read);
        // SAFETY: `t` is valid; `on_cpu` is a byte the scheduler writes with release.
        let on_cpu = unsafe { Atomic::from_ptr(addr_of_mut!((*t).on_cpu).cast::<i8>()) };
        // Acquire pairs with the release in finish_task(): the task is done switching out before
        // its fields are written.
        if on_cpu.load(Acquire) != 0 {
            return None;
        }
        // INVARIANT: Checked above, under the `pi_lock` that `self` holds.
        Some(Pinned(self))
    }
}

/// A task that is off its CPU and asleep, pinned there by its `pi_lock`, which this holds: it
/// cannot be woken, and nothing but the holder writes its per-task state, until this is dropped.
///
/// # Invariants
///
/// The task was found asleep, off its run queue and CPU, under the `pi_lock` held since.
pub struct Pinned<'a>(PiLocked<'a>);

impl<'a> Pinned<'a> {
    /// The pinned task.
    #[inline]
    pub fn task(&self) -> &'a Task {
        self.0.task
    }
}

// A pinned task's `pi_lock` is held: what it allows, pinning allows.
impl<'a> core::ops::Deref for Pinned<'a> {
    type Target = PiLocked<'a>;

    #[inline]
    fn deref(&self) -> &PiLocked<'a> {
        &self.0
    }
}

impl<'a> Pinned<'a> {
    /// Takes over a pin that C code made: the `pi_lock` of `task`, held, under which it was
    /// found asleep.
    ///
    /// # Safety
    ///
    /// `task` must be valid for `'a`. The caller must hold its `pi_lock`, taken with interrupts
    /// off, have found it asleep, off its run queue and CPU, under it, and hand the lock over: the
    /// returned value drops it.
    #[inline]
    pub unsafe fn assume_pinned(task: *mut bindings::task_struct) -> Self {
        // SAFETY: The caller guarantees that `task` is valid for `'a`.
        let task = unsafe { Task::from_raw(task) };
        // SAFETY: The caller holds the lock and hands it over.
        let guard = unsafe { crate::sync::lock::Guard::new(task.pi_lock(), ()) };
        // INVARIANT: The task was found asleep under the lock, per the safety requirements.
        Pinned(PiLocked {
            task,
            _guard: guard,
        })
    }

    /// Keeps the task pinned past `self`, for C code that drops the `pi_lock` (or hands it to
    /// [`Pinned::assume_pinned`]).
    #[inline]
    pub fn keep_pinned(self) {
        core::mem::forget(self);
    }
}
