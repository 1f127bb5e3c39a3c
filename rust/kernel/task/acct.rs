// SPDX-License-Identifier: GPL-2.0

//! The per-thread accounting that reads through a tid report.
//!
//! A thread's CPU times, runtime, fault and context switch counts and I/O counters are its
//! task's, and the thread group's sums add those of its live threads to what its exited threads
//! left in the signal struct. [`ThreadAcct`] is a copy of one task's counts; it is read from a
//! task that cannot write them meanwhile and written to a [`Pinned`] one, and
//! [`StatsWriteGuard::account_change`] keeps the group's sums when a task's counts change.
//!
//! C headers: [`include/linux/sched.h`](srctree/include/linux/sched.h),
//! [`include/linux/sched/signal.h`](srctree/include/linux/sched/signal.h)

use crate::{
    bindings,
    interrupt::LocalInterruptDisabled,
    prelude::*,
    sync::RawSpinLock,
    task::{CurrentTask, PiLocked, Pinned, StatsWriteGuard, Task},
};
use core::ptr::{self, addr_of, addr_of_mut};

/// The per-thread accounting of a task: what `/proc/<pid>/task/<tid>/stat`, `getrusage()` of a
/// thread and the thread CPU clock report.
#[derive(Clone, Copy, Default)]
pub struct ThreadAcct {
    /// User CPU time, in nanoseconds.
    pub utime: u64,
    /// System CPU time, in nanoseconds.
    pub stime: u64,
    /// Guest CPU time, in nanoseconds.
    pub gtime: u64,
    /// The runtime the scheduler accounted (`se.sum_exec_runtime`), with what the running task
    /// has not accounted yet.
    pub exec_runtime: u64,
    /// Minor faults.
    pub min_flt: c_ulong,
    /// Major faults.
    pub maj_flt: c_ulong,
    /// Voluntary context switches.
    pub nvcsw: c_ulong,
    /// Involuntary context switches.
    pub nivcsw: c_ulong,
    /// The I/O counters.
    pub ioac: bindings::task_io_accounting,
}

impl ThreadAcct {
    /// Reads the counts of `p`, each field once.
    ///
    /// # Safety
    ///
    /// `p` must be `current` with interrupts off, or a valid task whose `pi_lock` the caller
    /// holds, as `sched_exec_runtime_read()` requires.
    unsafe fn read(p: *mut bindings::task_struct) -> Self {
        /// READ_ONCE() of a field of `p`: a task that runs writes its own counts meanwhile.
        macro_rules! once {
            ($($field:ident).+) => {
                // SAFETY: `p` is valid; plain data, read once.
                unsafe { ptr::read_volatile(addr_of!((*p).$($field).+)) }
            };
        }
        Self {
            utime: once!(utime),
            stime: once!(stime),
            gtime: once!(gtime),
            // SAFETY: Per the safety requirements.
            exec_runtime: unsafe { bindings::sched_exec_runtime_read(p) },
            min_flt: once!(min_flt),
            maj_flt: once!(maj_flt),
            nvcsw: once!(nvcsw),
            nivcsw: once!(nivcsw),
            ioac: once!(ioac),
        }
    }
}

impl CurrentTask {
    /// Returns the current task's accounting. Interrupts are off: the tick does not add to it
    /// meanwhile.
    #[inline]
    pub fn thread_acct(&self, _irq: &LocalInterruptDisabled) -> ThreadAcct {
        // SAFETY: `self` is `current`, interrupts are off.
        unsafe { ThreadAcct::read(self.as_ptr()) }
    }
}

impl PiLocked<'_> {
    /// Returns the task's accounting. A snapshot if the task runs.
    #[inline]
    pub fn thread_acct(&self) -> ThreadAcct {
        // SAFETY: The task is valid and its `pi_lock` held.
        unsafe { ThreadAcct::read(self.task().as_ptr()) }
    }
}

impl Pinned<'_> {
    /// Makes `acct` the task's accounting, and returns what it had. The runtime keeps the
    /// task's slice delta (`sum_exec_runtime - prev_sum_exec_runtime`).
    pub fn replace_thread_acct(&self, acct: &ThreadAcct) -> ThreadAcct {
        let p = self.task().as_ptr();
        let old = self.thread_acct();
        // SAFETY: The task's `pi_lock` is held, as sched_exec_runtime_add() requires; adding the
        // wrapped difference sets the runtime.
        unsafe {
            bindings::sched_exec_runtime_add(p, acct.exec_runtime.wrapping_sub(old.exec_runtime))
        };
        /// WRITE_ONCE() of a field of `p`: readers through the tid read it without a lock.
        macro_rules! set {
            ($($field:ident).+ = $value:expr) => {
                // SAFETY: `p` is valid; pinned, the task writes none of its counts meanwhile.
                unsafe { ptr::write_volatile(addr_of_mut!((*p).$($field).+), $value) }
            };
        }
        set!(utime = acct.utime);
        set!(stime = acct.stime);
        set!(gtime = acct.gtime);
        set!(min_flt = acct.min_flt);
        set!(maj_flt = acct.maj_flt);
        set!(nvcsw = acct.nvcsw);
        set!(nivcsw = acct.nivcsw);
        set!(ioac = acct.ioac);
        old
    }

    /// Makes `split` the utime/stime split reported for the task so far, along with the times
    /// [`Pinned::replace_thread_acct`] gives it: the split reported for a tid that moves with
    /// them continues where it was.
    #[inline]
    pub fn set_cputime_split(&self, split: CputimeSplit) {
        #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
        self.task().with_prev_cputime(|utime, stime| {
            *utime = split.utime;
            *stime = split.stime;
        });
        #[cfg(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE)]
        let _ = split;
    }
}

/// The utime/stime split reported for a task so far (`prev_cputime`): `cputime_adjust()` scales
/// the sampled times to the runtime and keeps both parts monotonic from one report to the next.
/// With native virtual CPU accounting nothing rescales, and there is no split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CputimeSplit {
    /// User time reported so far.
    pub utime: u64,
    /// System time reported so far.
    pub stime: u64,
}

impl Task {
    /// Runs `f` on the task's `prev_cputime` under its lock, with interrupts off as in
    /// `cputime_adjust()`.
    #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
    fn with_prev_cputime<R>(&self, f: impl FnOnce(&mut u64, &mut u64) -> R) -> R {
        let p = self.as_ptr();
        let _irq = crate::interrupt::local_interrupt_disable();
        // SAFETY: The task is valid while `self` is borrowed, and fork initialised the lock.
        let lock = unsafe { RawSpinLock::<()>::from_raw(addr_of_mut!((*p).prev_cputime.lock)) };
        let _guard = lock.lock();
        // SAFETY: The lock protects the two fields: nothing else accesses them while it is held.
        let (utime, stime) = unsafe {
            (
                &mut *addr_of_mut!((*p).prev_cputime.utime),
                &mut *addr_of_mut!((*p).prev_cputime.stime),
            )
        };
        f(utime, stime)
    }

    /// Returns the utime/stime split reported for the task so far.
    #[cfg(not(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE))]
    #[inline]
    pub fn cputime_split(&self) -> CputimeSplit {
        self.with_prev_cputime(|utime, stime| CputimeSplit {
            utime: *utime,
            stime: *stime,
        })
    }

    /// Returns the utime/stime split reported for the task so far: none.
    #[cfg(CONFIG_VIRT_CPU_ACCOUNTING_NATIVE)]
    #[inline]
    pub fn cputime_split(&self) -> CputimeSplit {
        CputimeSplit::default()
    }
}

impl StatsWriteGuard<'_> {
    /// Keeps the sums over the thread group what they were when the accounting of one of its
    /// tasks changes from `old` to `new`: adds the difference to the totals of the exited
    /// threads. The fields are sums that wrap in C; a total may go "below zero" for as long as
    /// the task that still counts the same time lives, and its exit adds its counts back.
    pub fn account_change(&mut self, old: &ThreadAcct, new: &ThreadAcct) {
        let sig = self.sig;
        /// `sig->field += old.field - new.field`, wrapping.
        macro_rules! rebalance {
            ($($sum:ident).+, $($field:ident).+) => {
                // SAFETY: `sig` is valid, and the siglock and `stats_lock` held for writing
                // protect its sums; readers retry on `stats_lock`.
                unsafe {
                    let f = addr_of_mut!((*sig).$($sum).+);
                    ptr::write_volatile(
                        f,
                        ptr::read(f)
                            .wrapping_add(old.$($field).+)
                            .wrapping_sub(new.$($field).+),
                    )
                }
            };
        }
        rebalance!(utime, utime);
        rebalance!(stime, stime);
        rebalance!(gtime, gtime);
        rebalance!(sum_sched_runtime, exec_runtime);
        rebalance!(min_flt, min_flt);
        rebalance!(maj_flt, maj_flt);
        rebalance!(nvcsw, nvcsw);
        rebalance!(nivcsw, nivcsw);
        #[cfg(CONFIG_TASK_XACCT)]
        {
            rebalance!(ioac.rchar, ioac.rchar);
            rebalance!(ioac.wchar, ioac.wchar);
            rebalance!(ioac.syscr, ioac.syscr);
            rebalance!(ioac.syscw, ioac.syscw);
        }
        #[cfg(CONFIG_TASK_IO_ACCOUNTING)]
        {
            rebalance!(ioac.read_bytes, ioac.read_bytes);
            rebalance!(ioac.write_bytes, ioac.write_bytes);
            rebalance!(ioac.cancelled_write_bytes, ioac.cancelled_write_bytes);
        }
    }
}
