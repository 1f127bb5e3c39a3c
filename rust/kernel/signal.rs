// SPDX-License-Identifier: GPL-2.0

//! Signal numbers and signal sets.
//!
//! C headers: [`include/linux/signal.h`](srctree/include/linux/signal.h) and
//! [`include/uapi/asm-generic/signal-defs.h`](srctree/include/uapi/asm-generic/signal-defs.h)

use crate::{
    bindings,
    prelude::*,
    task::CurrentTask, //
};
use core::ptr;

/// A signal number.
///
/// # Invariants
///
/// The number is a valid signal, between 1 and `_NSIG` inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(c_int);

impl Signal {
    /// `SIGKILL`, which cannot be blocked or handled.
    pub const KILL: Self = Self(bindings::SIGKILL as c_int);
    /// `SIGSTOP`, which cannot be blocked or handled.
    pub const STOP: Self = Self(bindings::SIGSTOP as c_int);

    /// Returns the signal with number `nr`, if it is one.
    #[inline]
    pub fn new(nr: c_int) -> Option<Self> {
        // INVARIANT: Checked here.
        (1..=bindings::_NSIG as c_int)
            .contains(&nr)
            .then_some(Self(nr))
    }

    /// Returns the signal's number.
    #[inline]
    pub fn nr(self) -> c_int {
        self.0
    }
}

/// A set of signals, the kernel's `sigset_t`: a signal mask, or the signals pending on a task.
///
/// A plain value: it is copied in and out of the task fields that hold one, under the lock that
/// protects them.
///
/// # Examples
///
/// ```
/// use kernel::signal::{SigSet, Signal};
///
/// // The mask io-wq workers run with: everything blocked but what cannot be.
/// let worker = SigSet::full().without(Signal::KILL).without(Signal::STOP);
/// assert!(!worker.contains(Signal::KILL));
/// let term = Signal::new(15).ok_or(EINVAL)?;
/// assert!(worker.contains(term));
///
/// let mut pending = SigSet::empty();
/// assert!(pending.is_empty());
/// pending.add(term);
/// assert!(pending.union(&SigSet::empty()) == pending);
/// assert!(!pending.is_empty());
/// # Ok::<(), Error>(())
/// ```
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct SigSet(bindings::sigset_t);

impl SigSet {
    /// Returns the empty set.
    #[inline]
    pub fn empty() -> Self {
        // Initialised by `sigemptyset()`, as C does, whatever the architecture's layout.
        let mut set = Self(bindings::sigset_t::default());
        // SAFETY: `set.0` is valid for writes.
        unsafe { bindings::sigemptyset(&mut set.0) };
        set
    }

    /// Returns the set of all signals.
    #[inline]
    pub fn full() -> Self {
        let mut set = Self::empty();
        // SAFETY: `set.0` is valid for writes.
        unsafe { bindings::sigfillset(&mut set.0) };
        set
    }

    /// Creates a set from the C value.
    #[inline]
    pub fn from_raw(set: bindings::sigset_t) -> Self {
        Self(set)
    }

    /// Returns the C value.
    #[inline]
    pub fn into_raw(self) -> bindings::sigset_t {
        self.0
    }

    /// Adds `sig` to the set.
    #[inline]
    pub fn add(&mut self, sig: Signal) {
        // SAFETY: `self.0` is valid for writes and `sig` a valid signal by its type invariant.
        unsafe { bindings::sigaddset(&mut self.0, sig.0) };
    }

    /// Returns the set without `sig`.
    #[inline]
    pub fn without(mut self, sig: Signal) -> Self {
        // SAFETY: `self.0` is valid for writes and `sig` a valid signal by its type invariant.
        unsafe { bindings::sigdelset(&mut self.0, sig.0) };
        self
    }

    /// Returns whether `sig` is in the set.
    #[inline]
    pub fn contains(&self, sig: Signal) -> bool {
        let mut set = self.0;
        // SAFETY: `set` is a valid set and `sig` a valid signal by its type invariant.
        unsafe { bindings::sigismember(&mut set, sig.0) != 0 }
    }

    /// Returns whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        let mut set = self.0;
        // SAFETY: `set` is a valid set.
        unsafe { bindings::sigisemptyset(&mut set) != 0 }
    }

    /// Returns the union of the set and `other`.
    #[inline]
    pub fn union(&self, other: &Self) -> Self {
        let mut out = Self::empty();
        // SAFETY: All three are valid sets; `sigorsets()` reads both inputs before it writes.
        unsafe { bindings::sigorsets(&mut out.0, &self.0, &other.0) };
        out
    }
}

impl PartialEq for SigSet {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.0.sig == other.0.sig
    }
}

impl Eq for SigSet {}

impl CurrentTask {
    /// Returns the signal mask of the current task.
    #[inline]
    pub fn blocked(&self) -> SigSet {
        // SAFETY: The task is `current`, valid. Besides the task itself, only a forced signal
        // changes its mask (under the siglock, which this does not take, as C does not for its
        // own mask): the read is volatile, a snapshot.
        SigSet(unsafe { ptr::read_volatile(&raw const (*self.as_ptr()).blocked) })
    }

    /// Sets the signal mask of the current task to `set`, less the signals that can't be blocked,
    /// as `sigprocmask(SIG_SETMASK)` does: signals that the new mask unblocks are delivered on the
    /// way back to userspace.
    ///
    /// Takes the siglock with `spin_lock_irq()`: must be called with interrupts enabled, and it
    /// sleeps on `PREEMPT_RT`, as in C.
    #[inline]
    pub fn set_blocked(&self, set: &SigSet) {
        let mut set = set.0;
        // SAFETY: `set` is a valid set for `set_current_blocked()` to adjust and read; the task is
        // `current`, whose mask it sets.
        unsafe { bindings::set_current_blocked(&mut set) };
    }

    /// Sends `sig` to the current task, even if it is blocked or ignored (`force_sig()`).
    #[inline]
    pub fn force_sig(&self, sig: Signal) {
        // SAFETY: `sig` is a valid signal by its type invariant; `force_sig()` signals `current`.
        unsafe { bindings::force_sig(sig.0) };
    }

    /// Clears `TIF_NOTIFY_SIGNAL` of the current task (`clear_notify_signal()`), once the
    /// notification it stands for is taken care of: the caller runs the task_work it notified of
    /// before the task returns to userspace, or notifies it again (`set_notify_signal()`).
    #[inline]
    pub fn clear_notify_signal(&self) {
        // SAFETY: The task is `current`, which may clear its own flag.
        unsafe { bindings::clear_notify_signal() };
    }
}
