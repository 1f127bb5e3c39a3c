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
//! the submitter. The submitter finishes the request as a worker ([`io_handoff_complete`]) and
//! joins the pool. A promoted worker that blocks in turn passes the tid on the same way and
//! becomes a worker again; the rest of the identity is only moved by the task that ends the
//! submission, from the original submitter, which stays parked until then.

use core::ptr;
use kernel::{
    bindings,
    prelude::*,
    signal::{SigSet, Signal},
    task::CurrentTask,
};

type Task = bindings::task_struct;
type Req = bindings::io_kiocb;
type Tctx = bindings::io_uring_task;
type Handoff = bindings::io_handoff;

/// Prefix of this crate's log messages, for the `pr_*!` macros.
const __LOG_PREFIX: &[u8] = b"io_uring_handoff\0";

kernel::declare_trace! {
    /// # Safety
    ///
    /// `req` and `dst` must be valid.
    unsafe fn io_uring_handoff(req: *mut Req, dst: *mut Task);
    /// # Safety
    ///
    /// Always safe, the pointers are only recorded.
    unsafe fn io_uring_handoff_resume(
        ctx: *mut c_void,
        req: *mut c_void,
        prev: bindings::pid_t,
        consumed: c_uint,
        to_submit: c_uint,
    );
}

/// What the issue path and `io_submit_sqes()` return once the submitter handed its identity off
/// (`io_handoff_complete()`).
fn handed_off() -> c_int {
    EIOCBQUEUED.to_errno()
}

/// Returns whether thread flag `flag` (`TIF_*`) is set in `flags`, a word of thread flags.
fn thread_flag(flags: c_ulong, flag: u32) -> bool {
    flags & (1 << flag) != 0
}

/// Returns whether the `bound` or unbound pool of `wq` has a worker in its idle sleep, as
/// `io_wq_handoff_spare()` does without topping up: read here, on the hot path of every inline
/// issue, rather than through a call.
///
/// # Safety
///
/// `wq` must be a live io-wq.
unsafe fn idle_worker(wq: *mut bindings::io_wq, bound: bool) -> bool {
    let idx = if bound {
        bindings::IO_WQ_ACCT_BOUND
    } else {
        bindings::IO_WQ_ACCT_UNBOUND
    };
    // SAFETY: `wq` is live; `atomic_read()`, a racy snapshot, is fine for a policy decision.
    unsafe { ptr::read_volatile(ptr::addr_of!((*wq).acct[idx as usize].nr_iosleep.counter)) > 0 }
}

/// Blocks all signals but `SIGKILL` and `SIGSTOP` on a promoted task for the rest of the
/// submission, as io-wq workers run: a request it issues must not fail with `-EINTR` because the
/// thread has a timer running. Saves the thread's own mask, which the handoff moved to it, for
/// [`restore_signals`]. Signals sent meanwhile stay pending on the thread.
///
/// Doesn't sleep (`THREAD_HANDOFF` excludes `PREEMPT_RT`): `siglock` is a spinning lock.
fn block_signals(cur: &CurrentTask, ho: &mut Handoff) {
    if ho.sigsaved {
        return;
    }
    ho.sigmask = cur.blocked().into_raw();
    ho.sigsaved = true;
    cur.set_blocked(&SigSet::full().without(Signal::KILL).without(Signal::STOP));
}

/// Restores the signal mask [`block_signals`] saved, on `current`, which must hold the
/// submitter's tid. Doesn't sleep (`THREAD_HANDOFF` excludes `PREEMPT_RT`).
fn restore_signals(cur: &CurrentTask, ho: &mut Handoff) {
    if ho.sigsaved {
        ho.sigsaved = false;
        cur.set_blocked(&SigSet::from_raw(ho.sigmask));
    }
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
pub unsafe extern "C" fn io_handoff_arm(req: *mut Req, bound: bool) -> bool {
    // SAFETY: `req` was initialised by its submitter, `current`, with its io_uring context, whose
    // handoff state only the task holding the context touches, and no other reference to it lives
    // while this runs.
    let (tctx, ho) = unsafe {
        let tctx = (*req).tctx;
        (tctx, &mut (*tctx).handoff)
    };
    // CAST: `CurrentTask` is a transparent wrapper of `struct task_struct`.
    // SAFETY: The context's task is the submitter, `current` (no need to look it up), and the
    // reference does not leave this call.
    let cur = unsafe { &*(*tctx).task.cast::<CurrentTask>() };

    if !ho.in_enter {
        // Not from io_uring_enter(): there is no syscall to resume.
        // SAFETY: Per the contract.
        unsafe {
            bindings::io_handoff_refused(req, bindings::io_handoff_refusal_IO_HANDOFF_R_RING)
        };
        return false;
    }
    // A promoted worker's own user state doesn't matter, it never gets the identity unless it
    // ends the submission, and the identity was vetted when it left its owner.
    // SAFETY: Vets `current`; callable from any task context.
    if ho.src.is_null() && !unsafe { bindings::thread_handoff_allowed() } {
        // SAFETY: Per the contract.
        unsafe {
            bindings::io_handoff_refused(req, bindings::io_handoff_refusal_IO_HANDOFF_R_TASK)
        };
        return false;
    }
    // SAFETY: The io-wq of the context is live while the submitter uses it.
    let wq = unsafe { (*tctx).io_wq };
    // No idle worker to take over: issue it the old way, and have the spare policy start one for
    // next time. That is how a task gets its first spare, only once it issues blockable requests.
    // SAFETY: `wq` is live, and the submission path may sleep.
    if !unsafe { idle_worker(wq, bound) || bindings::io_wq_handoff_spare(wq, bound, true) } {
        // SAFETY: Per the contract.
        unsafe {
            bindings::io_handoff_refused(req, bindings::io_handoff_refusal_IO_HANDOFF_R_SPARE)
        };
        return false;
    }
    // A pending signal would interrupt the blocking issue right away.
    let flags = cur.thread_flags();
    if thread_flag(flags, bindings::TIF_SIGPENDING) {
        // SAFETY: Per the contract.
        unsafe {
            bindings::io_handoff_refused(req, bindings::io_handoff_refusal_IO_HANDOFF_R_SIGNAL)
        };
        return false;
    }

    ho.req = req;
    ho.bound = bound;
    // SAFETY: The hook this arms finds the armed request just set, and io_handoff_disarm() clears
    // the flag once the issue returns.
    unsafe { cur.set_flags(bindings::PF_IO_HANDOFF) };
    // Queued task_work would interrupt the sleep too: io_handoff_disarm() notifies it again.
    if thread_flag(flags, bindings::TIF_NOTIFY_SIGNAL) {
        cur.clear_notify_signal();
    }
    // Counted inline: this runs on every armed issue.
    // SAFETY: Per the contract `req` and its ring are valid, and the counters are protected by
    // the ring's `uring_lock`, held.
    unsafe {
        let stats = ptr::addr_of_mut!((*(*req).ctx).handoff_stats);
        (*stats).inline_issues = (*stats).inline_issues.wrapping_add(1);
    }
    true
}

/// Ends a submission of `io_uring_enter()` that issued without handing off: restores the signal
/// mask a blocking issue ran under. A promoted worker leaves that to [`resume`].
///
/// # Safety
///
/// `current` must have an io_uring context.
#[export]
pub unsafe extern "C" fn io_handoff_submit_end() {
    let cur = kernel::current!();
    // SAFETY: `current`'s context is valid and only used by it; no other reference to its handoff
    // state lives.
    let ho = unsafe { &mut (*(*cur.as_ptr()).io_uring).handoff };
    if ho.src.is_null() {
        restore_signals(cur, ho);
    }
}

/// Lets `current` sleep in place inside its inline issue: the handoff can't go ahead. A promoted
/// task gives the thread its own signal mask back first, so that the signals it would handle
/// interrupt the sleep, which retries the request on io-wq, rather than wait for it with the ring
/// locked.
///
/// # Safety
///
/// `ho` must be `current`'s handoff state; `req` its armed request.
unsafe fn sleep_in_place(
    cur: &CurrentTask,
    ho: &mut Handoff,
    req: *mut Req,
    why: bindings::io_handoff_refusal,
) {
    // SAFETY: Per the contract.
    unsafe { bindings::io_handoff_refused(req, why) };
    restore_signals(cur, ho);
}

/// What [`claim`] claims a worker with.
struct Claim {
    wq: *mut bindings::io_wq,
    bound: bool,
    /// The task whose identity is handed off: `current`, or the task it came from.
    src: *mut Task,
    /// The armed request.
    req: *mut Req,
    /// The claimed worker's task, or null.
    dst: *mut Task,
}

/// Claims an idle io-wq worker for `thread_handoff_move()` and, if one was, takes io-wq's
/// reference on the request, before the worker can run what completes it: the request is ours to
/// finish as a worker from here on.
///
/// # Safety
///
/// `data` must point to a [`Claim`] that only this call uses, whose io-wq is live and whose
/// request is armed; called by `thread_handoff_move()`, under `tasklist_lock`, interrupts off.
unsafe extern "C" fn claim(data: *mut c_void) -> *mut Task {
    // SAFETY: Per the contract.
    let c = unsafe { &mut *data.cast::<Claim>() };
    // SAFETY: The io-wq is live, `src` valid and interrupts are off.
    c.dst = unsafe { bindings::io_wq_handoff_claim(c.wq, c.bound, Some(resume), c.src) };
    if !c.dst.is_null() {
        // SAFETY: The request is armed, valid.
        unsafe { bindings::io_handoff_work_get(c.req) };
    }
    c.dst
}

/// The `PF_IO_HANDOFF` hook, called from `sched_submit_work()` when `tsk`, `current`, is about
/// to block inside an armed inline issue. Hands the identity to an idle worker if it can; if it
/// can't, the task simply blocks. Must not sleep: `uring_lock` is held on entry.
///
/// # Safety
///
/// `tsk` must be `current`, with `PF_IO_HANDOFF` set by [`io_handoff_arm`].
#[export]
pub unsafe extern "C" fn io_uring_task_sleeping(tsk: *mut Task) {
    let cur = kernel::current!();
    // SAFETY: Per the contract `tsk` is `current`, whose context only it uses.
    let tctx = unsafe { (*tsk).io_uring };
    if tctx.is_null() {
        return;
    }
    // SAFETY: Per the contract a handoff is armed: the context, the armed request and its ring are
    // valid, the ring's `uring_lock` is held, and the hook does not nest: no other reference to
    // the handoff state lives.
    let ho = unsafe { &mut (*tctx).handoff };
    let req = ho.req;
    if req.is_null() {
        return;
    }
    // SAFETY: As above, `req` is valid.
    let ctx = unsafe { (*req).ctx };

    // SAFETY: Everything below runs on `current` with `uring_lock` held, on the context, request
    // and ring made valid by the armed handoff, from the pre-sleep hook the C functions expect.
    unsafe {
        // The issue path relies on ring state it holds under uring_lock.
        if bindings::io_handoff_ring_busy(ctx) {
            sleep_in_place(cur, ho, req, bindings::io_handoff_refusal_IO_HANDOFF_R_LOCK);
            return;
        }
        let src = if ho.src.is_null() { tsk } else { ho.src };
        if src == tsk && !bindings::thread_handoff_prepare() {
            sleep_in_place(
                cur,
                ho,
                req,
                bindings::io_handoff_refusal_IO_HANDOFF_R_PREPARE,
            );
            return;
        }
        // From here until the identity moved, nothing that names the thread acts on it: see
        // kernel/thread_handoff.rs.
        let mut claimed = Claim {
            wq: (*tctx).io_wq,
            bound: ho.bound,
            src,
            req,
            dst: ptr::null_mut(),
        };
        let moved = bindings::thread_handoff_move(
            &mut ho.th,
            Some(claim),
            ptr::addr_of_mut!(claimed).cast(),
        );
        if moved != 0 {
            let why = if moved == ESRCH.to_errno() {
                bindings::io_handoff_refusal_IO_HANDOFF_R_WORKER
            } else {
                bindings::io_handoff_refusal_IO_HANDOFF_R_PREPARE
            };
            sleep_in_place(cur, ho, req, why);
            return;
        }
        let dst = claimed.dst;
        ho.src = src;
        ho.prev = tsk;
        ho.ctx = ctx;
        let stats = ptr::addr_of_mut!((*ctx).handoff_stats);
        (*stats).handoffs = (*stats).handoffs.wrapping_add(1);
        io_uring_handoff(req, dst);

        // Close our part of the batch and leave the ring to the promoted task.
        ho.consumed = ho
            .consumed
            .wrapping_add(bindings::io_submit_sqes_abandon(ctx));
        bindings::io_handoff_unlock_ring(ctx);

        ho.prev_refs = bindings::io_tctx_handoff(tctx, tsk, dst);
        // The request becomes our current work: cancelable, as on any worker.
        bindings::io_wq_handoff_commit(dst, ptr::addr_of_mut!((*req).work));
        // What sched_submit_work() does for a worker going to sleep.
        bindings::io_wq_worker_sleeping(tsk);
    }
}

/// Runs on the worker that took over the submitter's identity: submits the rest of the batch
/// and finishes the `io_uring_enter()` call of the submitter. Returns its result, or
/// `-EIOCBQUEUED` if this task handed off in turn and is a worker again.
///
/// # Safety
///
/// Only run by a worker claimed in [`io_uring_task_sleeping`], as the function it was claimed
/// for, once the claimer committed: the io_uring context and its handoff state are its then.
unsafe extern "C" fn resume() -> c_long {
    let cur = kernel::current!();
    // SAFETY: The handoff moved the context to us: only we use it now.
    let tctx: *mut Tctx = unsafe { (*cur.as_ptr()).io_uring };
    // SAFETY: The handoff state is ours; this borrow ends before anything that may hand off again
    // (and take the state in the hook) runs.
    let ho = unsafe { &mut (*tctx).handoff };
    let (src, prev, ctx, bound, to_submit) = (ho.src, ho.prev, ho.ctx, ho.bound, ho.to_submit);
    // SAFETY: `src` and `prev` are parked until released below, `ho.th` is the state of the
    // handoff that gave us the tid. Before anything that may block: settings of the scheduling
    // attributes, the affinity, the I/O priority or the name through the tid wait for this. From
    // `prev`, the task that handed the tid to us: what was set on it through the tid is the
    // thread's.
    unsafe { bindings::thread_handoff_adopt(&ho.th, prev) };

    // SAFETY: `prev` is parked, valid; the tracepoint only records the values.
    unsafe {
        io_uring_handoff_resume(
            ctx.cast(),
            ho.req.cast(),
            (*prev).pid,
            ho.consumed,
            to_submit,
        )
    };

    // We have the tid and the credentials; run the rest of the submission as a worker does.
    block_signals(cur, ho);
    let refs = core::mem::take(&mut ho.prev_refs);
    ho.prev = ptr::null_mut();
    ho.req = ptr::null_mut();
    ho.ctx = ptr::null_mut();
    // SAFETY: The requests of the context held `refs` references on `prev`, which the handoff
    // moved to us; `prev` is released below, not before.
    unsafe { bindings::put_task_struct_many(prev, refs as c_int) };
    // A promoted worker that handed off has nothing we still need.
    if prev != src {
        // SAFETY: `prev` handed the tid to us and waits to be released.
        unsafe { bindings::io_wq_handoff_finished(prev) };
    }

    // SAFETY: `ctx` is the ring we hold a submission for; we may sleep.
    unsafe { bindings::io_handoff_lock_ring(ctx) };
    // SAFETY: `ctx` is valid and its counters protected by `uring_lock`, held.
    unsafe {
        let stats = ptr::addr_of_mut!((*ctx).handoff_stats);
        (*stats).resumed = (*stats).resumed.wrapping_add(1);
    }
    // SAFETY: As above; no reference to the handoff state lives across the call.
    let consumed = unsafe { (*tctx).handoff.consumed };
    if consumed < to_submit {
        // SAFETY: We hold `uring_lock` and the submission of `ctx`: submit the rest, which may
        // hand off again, through the hook, which then owns the handoff state.
        let ret = unsafe { bindings::io_submit_sqes(ctx, to_submit - consumed) };
        if ret == handed_off() {
            return handed_off() as c_long;
        }
        if let Ok(n) = u32::try_from(ret) {
            // SAFETY: The submission returned without handing off: the state is ours again.
            let ho = unsafe { &mut (*tctx).handoff };
            ho.consumed = ho.consumed.wrapping_add(n);
        }
    }

    // The submission is done: become the submitter and return to userspace.
    // SAFETY: `src` committed the identity that reached us and is parked until released below.
    let finish = unsafe { bindings::thread_handoff_finish(src) };
    if finish != 0 {
        // The tid moved but the register state didn't: this task can't return as it.
        pr_warn!("handoff could not move the register state ({finish})\n");
        cur.force_sig(Signal::KILL);
    }
    // SAFETY: The state is ours, and no other reference to it lives until the end of the call.
    let ho = unsafe { &mut (*tctx).handoff };
    restore_signals(cur, ho);
    // SAFETY: `src` is done with: release it.
    unsafe { bindings::io_wq_handoff_finished(src) };
    ho.src = ptr::null_mut();
    ho.in_enter = false;

    let mut ret = ho.consumed as c_long;
    // SAFETY: We hold `uring_lock` of `ctx`; the arguments are the ones of the `io_uring_enter()`
    // call we finish; the file reference was taken for it.
    unsafe {
        if ho.consumed == to_submit {
            // Reaps completions if asked to and drops the lock.
            ret = bindings::io_uring_enter_finish(
                ctx,
                ret,
                ho.min_complete,
                ho.flags,
                ho.argp,
                ho.argsz,
            );
        } else {
            bindings::io_handoff_unlock_ring(ctx);
        }
        if ho.flags & bindings::IORING_ENTER_REGISTERED_RING == 0 {
            bindings::fput(ho.file);
        }
        // We took a worker: top the spares back up now the syscall is done.
        bindings::io_wq_handoff_spare((*tctx).io_wq, bound, true);
        bindings::io_handoff_syscall_return(ret);
    }
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
    loop {
        // SAFETY: `current` is a worker of the pool it handed off into.
        let func = unsafe { bindings::io_wq_handoff_worker() };
        let Some(func) = func else {
            return EFAULT.to_errno() as c_long;
        };
        // SAFETY: The claimer set the function to run on a claimed worker.
        let ret = unsafe { func() };
        if ret != handed_off() as c_long {
            return ret;
        }
    }
}
