// SPDX-License-Identifier: GPL-2.0

//! Inline issue of blockable io_uring requests, with a thread identity handoff when one blocks.
//!
//! C header: [`io_uring/handoff.h`](srctree/io_uring/handoff.h)
//!
//! `io_uring_enter()` issues a blockable request inline in blocking mode, with a handoff armed
//! ([`io_handoff_arm`]): the submitter carries `PF_IO_HANDOFF`. If the issue sleeps, the scheduler
//! calls [`io_uring_task_sleeping`], which hands what names the thread (tid, signals,
//! credentials, futex ownership) to an idle io-wq worker in one critical section, before the
//! submitter sleeps. That worker ([`resume`]) blocks user signals for the rest of the submission,
//! as io-wq workers run, submits the rest of the batch, takes over the rest of the identity
//! (registers, scheduling attributes, ...) once at the end and returns from `io_uring_enter()` as
//! the submitter. The submitter finishes the request as a worker (`io_handoff_complete()`) and
//! joins the pool. A promoted worker that blocks in turn passes the tid on the same way and
//! becomes a worker again; the rest of the identity is only moved by the task that ends the
//! submission, from the original submitter, which stays parked until then.
//!
//! The io_uring state all this works on is reached through [`kernel::io_uring`].

use kernel::{
    bindings,
    interrupt::LocalInterruptDisabled,
    io_uring::{Counter, IoWq, Issuing, Refusal, Request, TaskContext},
    prelude::*,
    signal::{SigSet, Signal},
    task::{CurrentTask, Task},
};

/// Prefix of this crate's log messages, for the `pr_*!` macros.
const __LOG_PREFIX: &[u8] = b"io_uring_handoff\0";

/// What the issue path and `io_submit_sqes()` return once the submitter handed its identity off
/// (`io_handoff_complete()`).
fn handed_off() -> c_long {
    EIOCBQUEUED.to_errno() as c_long
}

/// Blocks all signals but `SIGKILL` and `SIGSTOP` on a promoted task for the rest of the
/// submission, as io-wq workers run: a request it issues must not fail with `-EINTR` because the
/// thread has a timer running. Saves the thread's own mask, which the handoff moved to it, for
/// [`restore_signals`]. Signals sent meanwhile stay pending on the thread.
///
/// Doesn't sleep (`THREAD_HANDOFF` excludes `PREEMPT_RT`): `siglock` is a spinning lock.
fn block_signals(cur: &CurrentTask, tctx: &TaskContext) {
    if tctx.save_sigmask(cur.blocked()) {
        cur.set_blocked(&SigSet::full().without(Signal::KILL).without(Signal::STOP));
    }
}

/// Restores the signal mask [`block_signals`] saved, on `current`, which must hold the
/// submitter's tid. Doesn't sleep (`THREAD_HANDOFF` excludes `PREEMPT_RT`).
fn restore_signals(cur: &CurrentTask, tctx: &TaskContext) {
    if let Some(mask) = tctx.take_sigmask() {
        cur.set_blocked(&mask);
    }
}

/// Decides whether the inline issue of `req` by `cur` can hand off if it blocks, and arms the
/// handoff if so; counts why not otherwise.
fn arm(cur: &CurrentTask, req: &Request, ring: &Issuing<'_>, bound: bool) -> bool {
    let tctx = req.task_context();
    if !tctx.in_enter() {
        // Not from io_uring_enter(): there is no syscall to resume.
        ring.refuse(req, Refusal::RING);
        return false;
    }
    // A promoted worker's own user state doesn't matter, it never gets the identity unless it
    // ends the submission, and the identity was vetted when it left its owner.
    if !tctx.promoted() && !cur.may_hand_off() {
        ring.refuse(req, Refusal::TASK);
        return false;
    }
    // No idle worker to take over: issue it the old way, and have the spare policy start one for
    // next time. That is how a task gets its first spare, only once it issues blockable requests.
    let Some(wq) = tctx.io_wq() else {
        ring.refuse(req, Refusal::SPARE);
        return false;
    };
    if !wq.has_idle_worker(bound) && !wq.keep_spares(bound) {
        ring.refuse(req, Refusal::SPARE);
        return false;
    }
    // A pending signal would interrupt the blocking issue right away.
    let flags = cur.thread_flags();
    if flags & (1 << bindings::TIF_SIGPENDING) != 0 {
        ring.refuse(req, Refusal::SIGNAL);
        return false;
    }

    // SAFETY: `req` is being issued inline in blocking mode by `cur` (the C side found it
    // eligible), and io_handoff_disarm() disarms once the issue returns.
    unsafe { tctx.arm(cur, req, bound) };
    // Queued task_work would interrupt the sleep too: io_handoff_disarm() notifies it again.
    if flags & (1 << bindings::TIF_NOTIFY_SIGNAL) != 0 {
        cur.clear_notify_signal();
    }
    // Counted inline: this runs on every armed issue.
    ring.count(Counter::InlineIssue);
    true
}

/// Arms a handoff for the inline issue of `req`, which the C side found eligible (a blockable
/// request with no working nonblocking path). `bound` is the io-wq pool `req` would be punted
/// to. Returns false, counting why, if the submitter can't hand off now; the request then takes
/// the nonblocking or io-wq path.
///
/// # Safety
///
/// `req` must be a request being issued from `io_submit_sqes()` by `current`, with its ring's
/// `uring_lock` held. Pairs with `io_handoff_disarm()` in io_uring/io_uring.c.
#[export]
pub unsafe extern "C" fn io_handoff_arm(req: *mut bindings::io_kiocb, bound: bool) -> bool {
    // SAFETY: Per the contract `req` is being issued by `current`, valid for the call.
    let req = unsafe { Request::from_raw(req) };
    // SAFETY: Per the contract `current` issues `req` on its ring from `io_submit_sqes()`, with
    // `uring_lock` held, for the call.
    let ring = unsafe { req.ring().assume_issuing() };
    arm(kernel::current!(), req, &ring, bound)
}

/// Ends a submission of `io_uring_enter()` that issued without handing off: restores the signal
/// mask a blocking issue ran under. A promoted worker leaves that to [`resume`].
#[export]
pub extern "C" fn io_handoff_submit_end() {
    let cur = kernel::current!();
    if let Some(tctx) = cur.io_uring_context() {
        if !tctx.promoted() {
            restore_signals(cur, tctx);
        }
    }
}

/// What [`claim`] claims a worker with.
struct Claim<'a> {
    wq: &'a IoWq,
    bound: bool,
    /// The task whose identity is handed off: `current`, or the task it came from.
    src: *mut bindings::task_struct,
    /// The claimed worker's task.
    dst: Option<&'a Task>,
}

/// Claims an idle io-wq worker for `thread_handoff_move()`, which runs [`resume`] once the
/// claimer commits the claim ([`TaskContext::pass_to`]).
///
/// # Safety
///
/// `data` must point to a [`Claim`] that only this call uses, whose `src` is `current` or the
/// parked task whose identity `current` holds; called by `thread_handoff_move()`, interrupts off.
unsafe extern "C" fn claim(data: *mut c_void) -> *mut bindings::task_struct {
    // SAFETY: Per the contract, a `Claim` only this call uses.
    let c = unsafe { &mut *data.cast::<Claim<'_>>() };
    // SAFETY: Per the contract, interrupts are off for the call.
    let irq = unsafe { LocalInterruptDisabled::assume_disabled() };
    // SAFETY: Per the contract, `src` is `current` or the parked task whose identity it holds.
    c.dst = unsafe { c.wq.claim(c.bound, resume, c.src, irq) };
    c.dst.map_or(core::ptr::null_mut(), Task::as_ptr)
}

/// Hands the identity of `cur`, blocked in the armed `req`, to an idle worker if it can;
/// otherwise `cur` sleeps in place, keeping `uring_lock`.
fn hand_off(cur: &CurrentTask, tctx: &TaskContext, req: &Request, ring: Issuing<'_>) {
    let refuse = |why| {
        ring.refuse(req, why);
        // A promoted task gives the thread its own signal mask back, so that the signals it
        // would handle end an interruptible sleep, which retries the request on io-wq, rather
        // than wait for it with the ring locked.
        restore_signals(cur, tctx);
    };
    // The issue path relies on ring state it holds under `uring_lock`.
    if ring.busy() {
        return refuse(Refusal::LOCK);
    }
    let Some(wq) = tctx.io_wq() else {
        return refuse(Refusal::WORKER);
    };
    // SAFETY: `cur` was vetted when the handoff was armed, and this is its pre-sleep hook.
    if !tctx.promoted() && !unsafe { cur.prepare_handoff() } {
        return refuse(Refusal::PREPARE);
    }
    // From here until the identity moved, nothing that names the thread acts on it: see
    // kernel/thread_handoff.rs.
    let mut claimed = Claim {
        wq,
        bound: tctx.bound(),
        src: tctx.identity_source(cur),
        dst: None,
    };
    // SAFETY: `cur` holds the context, was vetted and prepared, in its pre-sleep hook; `claim`
    // meets the contract with `claimed`, only used by it meanwhile, and its worker is committed
    // below if one is claimed and the identity moved.
    let moved = unsafe { tctx.move_identity(claim, (&raw mut claimed).cast()) };
    let dst = match (moved, claimed.dst) {
        (0, Some(dst)) => dst,
        (e, _) if e == ESRCH.to_errno() => return refuse(Refusal::WORKER),
        _ => return refuse(Refusal::PREPARE),
    };
    ring.count(Counter::Handoff);
    req.trace_handoff(dst);
    // SAFETY: The identity of `cur` moved to `dst`, in its pre-sleep hook, claimed for the io-wq
    // of the context, for `req`, the armed request issued on `ring`; neither `tctx` nor `req` is
    // used after.
    unsafe { tctx.pass_to(cur, dst, req, ring) };
}

/// The `PF_IO_HANDOFF` hook, called from `sched_submit_work()` when `tsk`, `current`, is about
/// to block inside an armed inline issue. Hands the identity to an idle worker if it can; if it
/// can't, the task simply blocks. Must not sleep: `uring_lock` is held on entry.
///
/// # Safety
///
/// `tsk` must be `current`, with `PF_IO_HANDOFF` set by [`io_handoff_arm`].
#[export]
pub unsafe extern "C" fn io_uring_task_sleeping(_tsk: *mut bindings::task_struct) {
    let cur = kernel::current!();
    let Some(tctx) = cur.io_uring_context() else {
        return;
    };
    let Some(req) = tctx.armed_request(cur) else {
        return;
    };
    // SAFETY: A handoff is armed: `current` issues `req` inline from `io_submit_sqes()`, with the
    // ring's `uring_lock` held, until the hook returns.
    let ring = unsafe { req.ring().assume_issuing() };
    hand_off(cur, tctx, req, ring);
}

/// Runs on the worker that took over the submitter's identity: submits the rest of the batch
/// and finishes the `io_uring_enter()` call of the submitter. Returns its result, or
/// `-EIOCBQUEUED` if this task handed off in turn and is a worker again.
///
/// # Safety
///
/// Only run by a worker claimed in [`io_uring_task_sleeping`], as the function it was claimed
/// for, once the claimer moved the identity: the io_uring context and its handoff state are its
/// then.
unsafe extern "C" fn resume() -> c_long {
    let cur = kernel::current!();
    let Some(tctx) = cur.io_uring_context() else {
        return EFAULT.to_errno() as c_long;
    };
    // Held for the rest of the submission; taking it doesn't block.
    let ring = tctx.ring();
    // Before anything that may block: settings of the scheduling attributes, the affinity, the
    // I/O priority or the name through the tid wait for this.
    if !tctx.adopt_identity() {
        return EFAULT.to_errno() as c_long;
    }
    let Some(ring) = ring else {
        return EFAULT.to_errno() as c_long;
    };
    let (bound, to_submit) = (tctx.bound(), tctx.to_submit());

    // We have the tid and the credentials; run the rest of the submission as a worker does.
    block_signals(cur, tctx);

    let mut locked = ring.lock();
    locked.count(Counter::Resumed);
    let consumed = tctx.consumed();
    if consumed < to_submit {
        // Submit the rest, which may hand off again, through the hook.
        // SAFETY: The current task holds the context of the submission in progress on the ring,
        // which `io_uring_enter()` started and a handoff passed to it, and holds nothing of the
        // ring's state across the call.
        match unsafe { locked.submit(to_submit - consumed) } {
            None => return handed_off(),
            Some((l, ret)) => {
                locked = l;
                if let Ok(n) = u32::try_from(ret) {
                    tctx.add_consumed(n);
                }
            }
        }
    }

    // The submission is done: become the submitter and return to userspace.
    if let Err(e) = tctx.finish_identity() {
        // The tid moved but the register state didn't: this task can't return as it.
        pr_warn!(
            "handoff could not move the register state ({})\n",
            e.to_errno()
        );
        cur.force_sig(Signal::KILL);
    }
    restore_signals(cur, tctx);
    tctx.leave_enter();

    let consumed = tctx.consumed();
    let ret = match tctx.take_enter_call() {
        // Reaps completions if asked to and drops the lock, then the call's file.
        Some(call) if consumed == to_submit => locked.finish_enter(consumed as c_long, call),
        call => {
            drop(locked);
            drop(call);
            consumed as c_long
        }
    };
    // We took a worker: top the spares back up now the syscall is done.
    if let Some(wq) = tctx.io_wq() {
        wq.keep_spares(bound);
    }
    cur.set_syscall_return(ret);
    ret
}

/// Runs the worker loop on a task that handed its identity off in `io_uring_enter()`, once the
/// request it blocked in is done. Returns only if it takes over an identity again, with the
/// result of that identity's `io_uring_enter()`.
///
/// # Safety
///
/// `current` must be a task that handed off and finished its request as a worker.
#[export]
pub unsafe extern "C" fn io_uring_handoff_worker() -> c_long {
    let cur = kernel::current!();
    loop {
        // SAFETY: Per the contract.
        let Some(ret) = (unsafe { cur.run_io_wq_handoff_worker() }) else {
            return EFAULT.to_errno() as c_long;
        };
        if ret != handed_off() {
            return ret;
        }
    }
}
