// SPDX-License-Identifier: GPL-2.0

//! io-wq side of the thread identity handoff: claiming an idle worker, and the spare policy.
//!
//! C header: [`io_uring/io-wq.h`](srctree/io_uring/io-wq.h)
//!
//! A task that blocks in an inline io_uring issue hands its identity to an idle worker of its
//! io-wq, which returns to userspace in its place. Only a worker inside the idle sleep of the
//! worker loop can take it (`IO_WORKER_F_IDLE_SLEEP`): one that is merely on the free list may be
//! asleep anywhere, with state of its own. The claim is decided under the pool's `workers_lock`,
//! which the worker also takes when it leaves the idle sleep (`io_wq_worker_idle_done()` in
//! io-wq.c), so a worker is claimed at most once and always learns that it was.
//!
//! The claimer runs in the scheduler's pre-sleep hook: nothing here sleeps, allocates or panics.

use kernel::{bindings, interrupt::LocalInterruptDisabled, io_uring::IoWq, prelude::*};

/// Idle workers kept ready as handoff targets, per pool of a ring's task.
const SPARES: c_int = 2;

/// Claims an idle worker of `wq` to take over the identity of `src`, preferring the pool the
/// blocked request belongs to. The worker runs `func` instead of the worker loop once
/// `io_wq_handoff_commit()` lets it go. Returns the worker's task, asleep and pinned there with
/// its `pi_lock` held for the identity move (`thread_handoff_move()` drops it), or NULL if none
/// is idle.
///
/// # Safety
///
/// `wq` must be the live io-wq of `current`'s io_uring context, `src` a valid task whose
/// identity is being handed off (`current`, or the parked task it came from); interrupts must be
/// off (`thread_handoff_move()` holds `tasklist_lock`). `func` must be sound to run on the worker
/// once the caller commits the claim of a worker returned (`io_wq_handoff_commit()`), which it
/// must.
#[export]
pub unsafe extern "C" fn io_wq_handoff_claim(
    wq: *mut bindings::io_wq,
    bound: bool,
    func: bindings::io_wq_handoff_fn,
    src: *mut bindings::task_struct,
) -> *mut bindings::task_struct {
    let Some(func) = func else {
        return core::ptr::null_mut();
    };
    // SAFETY: Per the contract, `wq` is live for the call.
    let wq = unsafe { IoWq::from_raw(wq) };
    // SAFETY: Per the contract, interrupts are off for the call.
    let irq = unsafe { LocalInterruptDisabled::assume_disabled() };
    for b in [bound, !bound] {
        let pool = wq.pool(b);
        let mut locked = pool.lock(irq);
        // An exiting io-wq doesn't let workers go anymore; checked under the lock, which its
        // exit takes to wake them.
        if wq.is_exiting() {
            return core::ptr::null_mut();
        }
        for sleeper in locked.idle_sleepers() {
            let task = sleeper.task();
            // SAFETY: Per the contract `src` is `current` or parked; `task` is valid while its
            // worker is on the list.
            if !unsafe { bindings::thread_handoff_compatible(src, task.as_ptr()) } {
                continue;
            }
            // Only the idle sleep of the worker loop counts, no other sleep on the way.
            let Some(pinned) = task
                .lock_pi(irq)
                .pin_if_asleep(bindings::TASK_INTERRUPTIBLE)
            else {
                continue;
            };
            // SAFETY: Per the contract `func` may run on the worker once the caller commits the
            // claim, which it does.
            if !unsafe { sleeper.promote(&pinned, func) } {
                continue;
            }
            // `thread_handoff_move()` drops the `pi_lock`.
            pinned.keep_pinned();
            return task.as_ptr();
        }
    }
    core::ptr::null_mut()
}

/// Returns whether a worker of the `bound` pool of `wq` is idle and claimable. With `topup`, also
/// starts a new worker when fewer than [`SPARES`] are idle; that may sleep.
///
/// # Safety
///
/// `wq` must be the live io-wq of `current`'s io_uring context.
#[export]
pub unsafe extern "C" fn io_wq_handoff_spare(
    wq: *mut bindings::io_wq,
    bound: bool,
    topup: bool,
) -> bool {
    // SAFETY: Per the contract, `wq` is live for the call.
    let pool = unsafe { IoWq::from_raw(wq) }.pool(bound);
    let idle = pool.idle_now();
    if topup && idle < SPARES {
        // Creating a worker fails when the pool is at its limit: then there is nothing to do.
        let _ = pool.create_worker();
    }
    idle > 0
}
