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

use core::ptr;
use kernel::{
    bindings, interrupt::LocalInterruptDisabled, prelude::*, sync::RawSpinLock, task::Task,
};

type RawTask = bindings::task_struct;
type Worker = bindings::io_worker;
type Acct = bindings::io_wq_acct;
type Wq = bindings::io_wq;

/// Idle workers kept ready as handoff targets, per pool of a ring's task.
const SPARES: c_int = 2;

/// Returns the bound or the unbound pool of `wq`.
///
/// # Safety
///
/// `wq` must point to a live `struct io_wq`.
unsafe fn acct_of(wq: *mut Wq, bound: bool) -> *mut Acct {
    let idx = if bound {
        bindings::IO_WQ_ACCT_BOUND
    } else {
        bindings::IO_WQ_ACCT_UNBOUND
    };
    // SAFETY: `wq` is valid and `idx` is one of the two pool indices.
    unsafe { ptr::addr_of_mut!((*wq).acct[idx as usize]) }
}

/// Claims an idle sleeper of `acct` that can take the identity of `src`. Returns its task with
/// its `pi_lock` held, pinned asleep ([`PiLocked::pin_if_asleep`](kernel::task::PiLocked::pin_if_asleep)). A worker that set
/// [`IO_WORKER_F_IDLE_SLEEP`](bindings::IO_WORKER_F_IDLE_SLEEP) may still be on its way into the
/// scheduler, or already woken by its timeout: then it is not pinned, and not claimed.
///
/// # Safety
///
/// `wq` must be live and `acct` one of its pools, `src` a valid task; interrupts must be off.
unsafe fn claim_in(
    wq: *mut Wq,
    acct: *mut Acct,
    func: bindings::io_wq_handoff_fn,
    src: *mut RawTask,
) -> *mut RawTask {
    let mut found = ptr::null_mut();
    // SAFETY: Interrupts are off for the whole call, per the contract.
    let irq = unsafe { LocalInterruptDisabled::assume_disabled() };

    // SAFETY: `acct` is a pool of the live `wq`; its lock was initialised with the pool and
    // protects the free list and the worker fields used below. Interrupts are off.
    let guard =
        unsafe { RawSpinLock::<()>::from_raw(ptr::addr_of_mut!((*acct).workers_lock)) }.lock();
    // SAFETY: Under the lock, the free list and the workers on it are valid; the flag words are
    // changed with atomic bit operations, `test_bit()` reads them atomically; `task` is valid as
    // long as its worker is on the list, and pinned if `pin_if_asleep()` says so.
    unsafe {
        if !bindings::test_bit(
            bindings::IO_WQ_BIT_EXIT as c_ulong,
            ptr::addr_of!((*wq).state),
        ) {
            let mut node = (*acct).free_list.first;
            while !bindings::is_a_nulls(node) {
                let worker: *mut Worker = kernel::container_of!(node, Worker, nulls_node);
                node = (*node).next;

                if !bindings::test_bit(
                    bindings::IO_WORKER_F_IDLE_SLEEP as c_ulong,
                    ptr::addr_of!((*worker).flags),
                ) {
                    continue;
                }
                let task = (*worker).task;
                if !bindings::thread_handoff_compatible(src, task) {
                    continue;
                }
                // Only the idle sleep of the worker loop counts, no other sleep on the way.
                let Some(pinned) = Task::from_raw(task)
                    .lock_pi(irq)
                    .pin_if_asleep(bindings::TASK_INTERRUPTIBLE)
                else {
                    continue;
                };
                bindings::clear_bit(
                    bindings::IO_WORKER_F_FREE as c_ulong,
                    ptr::addr_of_mut!((*worker).flags),
                );
                bindings::hlist_nulls_del_init_rcu(ptr::addr_of_mut!((*worker).nulls_node));
                (*worker).handoff_fn = func;
                // Pairs with the acquire in `io_wq_worker_promoted()`.
                bindings::atomic_set_release(
                    ptr::addr_of_mut!((*worker).handoff),
                    bindings::IO_WORKER_HANDOFF_PROMOTE as c_int,
                );
                // `thread_handoff_move()` drops the `pi_lock`.
                pinned.keep_pinned();
                found = task;
                break;
            }
        }
    }
    drop(guard);
    found
}

/// Claims an idle worker of `wq` to take over the identity of `src`, preferring the pool the
/// blocked request belongs to. The worker runs `func` instead of the worker loop once
/// `io_wq_handoff_commit()` lets it go. Returns the worker's task, asleep and with its `pi_lock`
/// held for the identity move (`thread_handoff_move()` drops it), or NULL if none is idle.
///
/// # Safety
///
/// `wq` must be the live io-wq of `current`'s io_uring context, `src` a valid task whose
/// identity is being handed off (`current`, or the task it came from); interrupts must be off
/// (`thread_handoff_move()` holds `tasklist_lock`).
#[export]
pub unsafe extern "C" fn io_wq_handoff_claim(
    wq: *mut Wq,
    bound: bool,
    func: bindings::io_wq_handoff_fn,
    src: *mut RawTask,
) -> *mut RawTask {
    for b in [bound, !bound] {
        // SAFETY: Per the contract, `wq` is live.
        let task = unsafe { claim_in(wq, acct_of(wq, b), func, src) };
        if !task.is_null() {
            return task;
        }
    }
    ptr::null_mut()
}

/// Returns whether a worker of the `bound` pool of `wq` is idle and claimable. With `topup`, also
/// starts a new worker when fewer than [`SPARES`] are idle; that may sleep.
///
/// # Safety
///
/// `wq` must be the live io-wq of `current`'s io_uring context.
#[export]
pub unsafe extern "C" fn io_wq_handoff_spare(wq: *mut Wq, bound: bool, topup: bool) -> bool {
    // SAFETY: Per the contract, `wq` is live.
    let acct = unsafe { acct_of(wq, bound) };
    // SAFETY: `acct` is valid; `atomic_read()`, a racy snapshot, is fine for a policy decision.
    let idle = unsafe { ptr::read_volatile(ptr::addr_of!((*acct).nr_iosleep.counter)) };
    if topup && idle < SPARES {
        // Creating a worker fails when the pool is at its limit: then there is nothing to do.
        // SAFETY: `wq` and `acct` are valid, and the caller may sleep.
        let _ = unsafe { bindings::io_wq_create_worker(wq, acct) };
    }
    idle > 0
}
