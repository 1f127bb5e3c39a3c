// SPDX-License-Identifier: GPL-2.0

//! A kernel raw spinlock.
//!
//! This module allows Rust code to use the kernel's `raw_spinlock_t`, the spinning lock that
//! stays a spinning lock on `PREEMPT_RT`: the scheduler's locks (`pi_lock`, the run queue locks)
//! and those that nest in them are raw spinlocks.
//!
//! Most raw spinlocks that Rust code takes are embedded in C structures and initialised by C
//! code; [`Lock::from_raw`] borrows them, with `T = ()`: the data they protect are fields of the C
//! structure, which the abstraction of that structure lets its users reach with a guard as proof.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)

use super::*;

/// Creates a [`RawSpinLock`] initialiser with the given name and a newly-created lock class.
///
/// It uses the name if one is given, otherwise it generates one based on the file name and line
/// number.
#[macro_export]
macro_rules! new_raw_spinlock {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sync::RawSpinLock::new(
            $inner, $crate::optional_name!($($name)?), $crate::static_lock_class!())
    };
}
pub use new_raw_spinlock;

/// A raw spinlock.
///
/// Exposes the kernel's [`raw_spinlock_t`]. It never sleeps, not even on `PREEMPT_RT`, so it may
/// be taken where sleeping is not allowed, such as with the scheduler's locks held. As in C, a
/// lock that is also taken from interrupt context must be taken with interrupts off (see
/// [`crate::interrupt::local_interrupt_disable`]).
///
/// # Examples
///
/// ```
/// use kernel::sync::new_raw_spinlock;
///
/// let lock = KBox::pin_init(new_raw_spinlock!(5u32), GFP_KERNEL)?;
/// *lock.lock() += 1;
/// assert_eq!(*lock.lock(), 6);
///
/// // Only one holder at a time.
/// let guard = lock.lock();
/// assert!(lock.try_lock().is_none());
/// drop(guard);
/// assert!(lock.try_lock().is_some());
/// # Ok::<(), Error>(())
/// ```
///
/// [`raw_spinlock_t`]: srctree/include/linux/spinlock.h
pub type RawSpinLock<T> = Lock<T, RawSpinLockBackend>;

/// A kernel `raw_spinlock_t` lock backend.
pub struct RawSpinLockBackend;

/// A [`Guard`] acquired from locking a [`RawSpinLock`].
pub type RawSpinLockGuard<'a, T> = Guard<'a, T, RawSpinLockBackend>;

// SAFETY: The underlying kernel `raw_spinlock_t` object ensures mutual exclusion. `relock` uses
// the default implementation that always calls the same locking method.
unsafe impl Backend for RawSpinLockBackend {
    type State = bindings::raw_spinlock_t;
    type GuardState = ();

    #[inline]
    unsafe fn init(
        ptr: *mut Self::State,
        name: *const crate::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: The safety requirements ensure that `ptr` is valid for writes, and `name` and
        // `key` are valid for read indefinitely.
        unsafe { bindings::raw_spin_lock_init_named(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The safety requirements of this function ensure that `ptr` points to valid
        // memory, and that it has been initialised before.
        unsafe { bindings::raw_spin_lock(ptr) }
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The safety requirements of this function ensure that `ptr` is valid and that the
        // caller is the owner of the lock.
        unsafe { bindings::raw_spin_unlock(ptr) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialised before use.
        let result = unsafe { bindings::raw_spin_trylock(ptr) };
        (result != 0).then_some(())
    }

    #[inline]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialised before use.
        unsafe { bindings::raw_spin_assert_is_held(ptr) }
    }
}
