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
use kernel::{bindings, prelude::*};

type Task = bindings::task_struct;
type Req = bindings::io_kiocb;
type Ctx = bindings::io_ring_ctx;
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
    /// `req` must be valid and `reason` a NUL-terminated string.
    unsafe fn io_uring_handoff_fail(req: *mut Req, reason: *const c_char);
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

/// `IOU_COMPLETE` of io_uring/io_uring.h: the handler is done, post the CQE.
const IOU_COMPLETE: c_int = 0;
/// `IOU_ISSUE_SKIP_COMPLETE` of io_uring/io_uring.h: the request completes on its own.
const IOU_ISSUE_SKIP_COMPLETE: c_int = -(bindings::EIOCBQUEUED as c_int);
/// What the issue path returns once the submitter handed its identity off.
const HANDED_OFF: c_int = -(bindings::EIOCBQUEUED as c_int);

/// Names of `enum io_handoff_refusal`, for the tracepoint.
const REFUSAL_NAMES: [&CStr; bindings::io_handoff_refusal_IO_HANDOFF_NR_REFUSALS as usize] = [
    c"ring", c"poll", c"nowait", c"task", c"sqe", c"spare", c"signal", c"lock", c"prepare",
    c"worker",
];

/// Counts a refusal on the ring of `req` and traces it.
///
/// # Safety
///
/// `req` must be valid and its ring's `uring_lock` held.
unsafe fn refuse(req: *mut Req, why: bindings::io_handoff_refusal) {
    let idx = why as usize;
    let Some(name) = REFUSAL_NAMES.get(idx) else {
        return;
    };
    // SAFETY: `req` and its ring are valid; the counters are protected by `uring_lock`.
    unsafe {
        let stats = ptr::addr_of_mut!((*(*req).ctx).handoff_stats);
        let slot = &mut (*stats).refused[idx];
        *slot = slot.wrapping_add(1);
        io_uring_handoff_fail(req, name.as_char_ptr());
    }
}

/// Records that the C side refused a handoff for `req`, see [`refuse`].
///
/// # Safety
///
/// `req` must be valid and its ring's `uring_lock` held.
#[export]
pub unsafe extern "C" fn io_handoff_refused(req: *mut Req, why: bindings::io_handoff_refusal) {
    // SAFETY: Per the contract.
    unsafe { refuse(req, why) };
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

/// Returns `current`.
fn current() -> *mut Task {
    // SAFETY: `current` is always valid in task context.
    unsafe { bindings::get_current() }
}

/// Tests thread flag `TIF_*` `bit` of `cur`, which must be `current`, as `test_thread_flag()`
/// does: a `READ_ONCE()` of the flags word, which is only changed with atomic bit operations.
fn test_thread_flag(cur: *mut Task, bit: u32) -> bool {
    // SAFETY: `cur` is `current`, valid; the read is a plain snapshot, as in C.
    let flags = unsafe { ptr::read_volatile(ptr::addr_of!((*cur).thread_info.flags)) };
    flags & (1 << bit) != 0
}

/// Maps the restart codes, which must not reach userspace, to `-EINTR`.
fn fixup_restart(res: c_int) -> c_int {
    const RESTART: [u32; 4] = [
        bindings::ERESTARTSYS,
        bindings::ERESTARTNOINTR,
        bindings::ERESTARTNOHAND,
        bindings::ERESTART_RESTARTBLOCK,
    ];
    if RESTART.iter().any(|&e| res == -(e as c_int)) {
        -(bindings::EINTR as c_int)
    } else {
        res
    }
}

/// Blocks all signals but `SIGKILL` and `SIGSTOP` on a promoted task for the rest of the
/// submission, as io-wq workers run: a request it issues must not fail with `-EINTR` because the
/// thread has a timer running. Saves the thread's own mask, which the handoff moved to it, for
/// [`restore_signals`]. Signals sent meanwhile stay pending on the thread.
///
/// # Safety
///
/// `ho` must be `current`'s handoff state. Doesn't sleep: `siglock` is a spinning lock.
unsafe fn block_signals(ho: &mut Handoff) {
    if ho.sigsaved {
        return;
    }
    let cur = current();
    // SAFETY: `current` is valid; only it changes its own blocked mask.
    unsafe {
        ho.sigmask = (*cur).blocked;
        ho.sigsaved = true;
        let mut mask = core::mem::zeroed::<bindings::sigset_t>();
        bindings::siginitsetinv(
            &mut mask,
            (1 << (bindings::SIGKILL - 1)) | (1 << (bindings::SIGSTOP - 1)),
        );
        bindings::set_current_blocked(&mut mask);
    }
}

/// Restores the signal mask [`block_signals`] saved.
///
/// # Safety
///
/// `ho` must be `current`'s handoff state, and `current` must hold the submitter's tid. Doesn't
/// sleep.
unsafe fn restore_signals(ho: &mut Handoff) {
    if ho.sigsaved {
        ho.sigsaved = false;
        // SAFETY: `current` restores its own mask.
        unsafe { bindings::set_current_blocked(&mut ho.sigmask) };
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
    // SAFETY: `req` was initialised by its submitter, `current`, with its io_uring context, which
    // only the submitter touches here.
    let (tctx, ho) = unsafe {
        let tctx = (*req).tctx;
        (tctx, &mut (*tctx).handoff)
    };
    // The context's task is the submitter: no need to look `current` up.
    // SAFETY: As above.
    let cur = unsafe { (*tctx).task };

    if !ho.in_enter {
        // Not from io_uring_enter(): there is no syscall to resume.
        // SAFETY: Per the contract.
        unsafe { refuse(req, bindings::io_handoff_refusal_IO_HANDOFF_R_RING) };
        return false;
    }
    // A promoted worker's own user state doesn't matter, it never gets the identity unless it
    // ends the submission, and the identity was vetted when it left its owner.
    // SAFETY: `cur` is `current`.
    if ho.src.is_null() && !unsafe { bindings::thread_handoff_allowed(cur) } {
        // SAFETY: Per the contract.
        unsafe { refuse(req, bindings::io_handoff_refusal_IO_HANDOFF_R_TASK) };
        return false;
    }
    // SAFETY: The io-wq of the context is live while the submitter uses it.
    let wq = unsafe { (*tctx).io_wq };
    // SAFETY: As above.
    let idle = unsafe { idle_worker(wq, bound) };
    // No idle worker to take over: issue it the old way, and have the spare policy start one for
    // next time. That is how a task gets its first spare, only once it issues blockable requests.
    // SAFETY: `wq` is live, and the submission path may sleep.
    if !idle && !unsafe { bindings::io_wq_handoff_spare(wq, bound, true) } {
        // SAFETY: Per the contract.
        unsafe { refuse(req, bindings::io_handoff_refusal_IO_HANDOFF_R_SPARE) };
        return false;
    }
    // A pending signal would interrupt the blocking issue right away.
    if test_thread_flag(cur, bindings::TIF_SIGPENDING) {
        // SAFETY: Per the contract.
        unsafe { refuse(req, bindings::io_handoff_refusal_IO_HANDOFF_R_SIGNAL) };
        return false;
    }

    ho.req = req;
    ho.bound = bound;
    // SAFETY: `cur` only changes its own flags.
    unsafe {
        (*cur).flags |= bindings::PF_IO_HANDOFF;
        // Queued task_work would interrupt the sleep too: io_handoff_disarm() notifies it again.
        if test_thread_flag(cur, bindings::TIF_NOTIFY_SIGNAL) {
            bindings::clear_notify_signal();
        }
        let stats = ptr::addr_of_mut!((*(*req).ctx).handoff_stats);
        (*stats).inline_issues = (*stats).inline_issues.wrapping_add(1);
    }
    true
}

/// Ends a submission of `io_uring_enter()` that issued without handing off: restores the signal
/// mask a blocking issue ran under. A promoted worker leaves that to [`io_handoff_resume`].
///
/// # Safety
///
/// `current` must have an io_uring context.
#[export]
pub unsafe extern "C" fn io_handoff_submit_end() {
    // SAFETY: `current`'s context is valid and only used by it.
    unsafe {
        let ho = &mut (*(*current()).io_uring).handoff;
        if ho.src.is_null() {
            restore_signals(ho);
        }
    }
}

/// Moves the task references the outstanding requests of `tctx` hold from `src` to `dst`, see
/// `io_put_task()`. The promoted task drops the ones on `src`.
///
/// # Safety
///
/// `tctx` must be `src`'s context, `dst` valid; called from the handoff hook.
unsafe fn move_task_refs(tctx: *mut Tctx, dst: *mut Task) -> c_uint {
    // SAFETY: The lock serializes with io_put_task() of requests completing elsewhere.
    unsafe {
        let lock = ptr::addr_of_mut!((*tctx).task_ref_lock);
        bindings::raw_spin_lock(lock);
        let sum = bindings::__percpu_counter_sum(ptr::addr_of_mut!((*tctx).inflight));
        let nr = c_uint::try_from(sum.max(0)).unwrap_or(c_uint::MAX);
        bindings::refcount_add(nr as c_int, ptr::addr_of_mut!((*dst).usage));
        ptr::write_volatile(ptr::addr_of_mut!((*tctx).task), dst);
        bindings::raw_spin_unlock(lock);
        nr
    }
}

/// Moves task_work of `tctx` queued on `task` to the task `tctx` belongs to now.
///
/// # Safety
///
/// `tctx` must be valid and `task` a task it was queued on.
#[export]
pub unsafe extern "C" fn io_handoff_tw_moved(tctx: *mut Tctx, task: *mut Task) {
    let mut task = task;
    // SAFETY: `tctx` is valid; its task_work is queued at most once.
    unsafe {
        let tw = ptr::addr_of_mut!((*tctx).__bindgen_anon_1.task_work);
        while bindings::task_work_cancel(task, tw) {
            let cur = ptr::read_volatile(ptr::addr_of!((*tctx).task));
            if bindings::task_work_add(cur, tw, bindings::task_work_notify_mode_TWA_SIGNAL) != 0 {
                break;
            }
            if ptr::read_volatile(ptr::addr_of!((*tctx).task)) == cur {
                break;
            }
            task = cur;
        }
    }
}

/// Moves the io_uring task context `tctx` from `src` to `dst`: task references, the per task
/// restrictions, ring ownership and queued task_work.
///
/// # Safety
///
/// `src` must be `current`, blocked in the handoff hook, and `tctx` its context.
unsafe fn move_tctx(tctx: *mut Tctx, src: *mut Task, dst: *mut Task) {
    // SAFETY: `src` is blocked and can't use its context; `dst` waits for the commit.
    unsafe {
        (*tctx).handoff.prev_refs = move_task_refs(tctx, dst);
        (*dst).io_uring = tctx;
        (*src).io_uring = ptr::null_mut();
        // The restrictions follow the identity. The worker's own (inherited when it was created)
        // go to `src`, which frees them when it exits, like any worker.
        core::mem::swap(&mut (*dst).io_uring_restrict, &mut (*src).io_uring_restrict);

        let head = ptr::addr_of_mut!((*tctx).node_list);
        let mut pos = (*head).next;
        while pos != head {
            let node = pos
                .cast::<u8>()
                .sub(core::mem::offset_of!(bindings::io_tctx_node, tctx_node))
                .cast::<bindings::io_tctx_node>();
            pos = (*pos).next;
            (*node).task = dst;
            let ctx = (*node).ctx;
            let owner = ptr::addr_of_mut!((*ctx).__bindgen_anon_1.submitter_task);
            if ptr::read_volatile(owner) == src {
                bindings::get_task_struct(dst);
                ptr::write_volatile(owner, dst);
                bindings::put_task_struct(src);
            }
        }
        io_handoff_tw_moved(tctx, src);
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
unsafe fn sleep_in_place(ho: &mut Handoff, req: *mut Req, why: bindings::io_handoff_refusal) {
    // SAFETY: Per the contract.
    unsafe {
        refuse(req, why);
        restore_signals(ho);
    }
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
    // SAFETY: Per the contract `tsk` is current with a handoff armed, so its context, the armed
    // request and its ring are valid, and the ring's `uring_lock` is held.
    unsafe {
        let tctx = (*tsk).io_uring;
        if tctx.is_null() {
            return;
        }
        let ho = &mut (*tctx).handoff;
        let req = ho.req;
        if req.is_null() {
            return;
        }
        let ctx: *mut Ctx = (*req).ctx;

        // The issue path relies on ring state it holds under uring_lock.
        if (*ctx).__bindgen_anon_2.submit_lock_depth != 0 {
            sleep_in_place(ho, req, bindings::io_handoff_refusal_IO_HANDOFF_R_LOCK);
            return;
        }
        let src = if ho.src.is_null() { tsk } else { ho.src };
        if src == tsk && !bindings::thread_handoff_prepare() {
            sleep_in_place(ho, req, bindings::io_handoff_refusal_IO_HANDOFF_R_PREPARE);
            return;
        }
        // From here until the commit, nothing that names the thread acts on it: see
        // kernel/thread_handoff.rs.
        if !bindings::thread_handoff_begin(&mut ho.th) {
            sleep_in_place(ho, req, bindings::io_handoff_refusal_IO_HANDOFF_R_PREPARE);
            return;
        }
        let dst = bindings::io_wq_handoff_claim((*tctx).io_wq, ho.bound, Some(resume), src);
        if dst.is_null() {
            bindings::thread_handoff_abort(&mut ho.th);
            sleep_in_place(ho, req, bindings::io_handoff_refusal_IO_HANDOFF_R_WORKER);
            return;
        }
        // Claimed, and `dst` pinned: the tid, the signals and the credentials are its from here
        // on, and the request is ours to finish as a worker, holding io-wq's reference on it,
        // taken before `dst` can run what completes it.
        bindings::io_handoff_work_get(req);
        bindings::thread_handoff_commit(dst, &mut ho.th);
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
        bindings::mutex_unlock(ptr::addr_of_mut!((*ctx).__bindgen_anon_2.uring_lock));

        move_tctx(tctx, tsk, dst);
        // The request becomes our current work: cancelable, as on any worker.
        bindings::io_wq_handoff_commit(dst, ptr::addr_of_mut!((*req).work));
        // What sched_submit_work() does for a worker going to sleep.
        bindings::io_wq_worker_sleeping(tsk);
    }
}

/// Finishes `req`, whose inline issue returned `ret` after `current` handed its identity off,
/// the way io-wq finishes requests. Returns what tells the issue path it was handed off.
///
/// # Safety
///
/// `req` must be the request `current` handed off in, `current` now an io-wq worker.
#[export]
pub unsafe extern "C" fn io_handoff_complete(req: *mut Req, ret: c_int) -> c_int {
    // SAFETY: The request is ours; the C functions take it over.
    unsafe {
        // Past this point a cancel has nothing left to interrupt, and io-wq's reference goes.
        // It is the last one only for a request that completes on its own (`ret` is
        // `IOU_ISSUE_SKIP_COMPLETE`), which the branches below don't touch: the others are
        // finished below, holding the issue's reference.
        bindings::io_wq_handoff_work_done();
        bindings::io_handoff_work_put(req);
        if ret == IOU_COMPLETE {
            (*req).cqe.res = fixup_restart((*req).cqe.res);
            (*req).__bindgen_anon_4.io_task_work.func = Some(bindings::io_req_task_complete);
            bindings::io_req_task_work_add(req);
        } else if ret == IOU_ISSUE_SKIP_COMPLETE {
            // Completes on its own.
        } else if ret == -(bindings::EAGAIN as c_int)
            && (*req).flags & (bindings::REQ_F_NOWAIT as u64) == 0
        {
            // Wants a blocking retry: that is what io-wq does, and we are its worker.
            bindings::io_handoff_queue_iowq(req);
        } else {
            bindings::io_req_task_queue_fail(req, fixup_restart(ret));
        }
    }
    HANDED_OFF
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
    let cur = current();
    // SAFETY: The handoff moved the context to us, with `src`, `prev` and `ctx` set; `src` and
    // `prev` are parked until released below.
    unsafe {
        let tctx = (*cur).io_uring;
        let ho = &mut (*tctx).handoff;
        let (src, prev, ctx, bound) = (ho.src, ho.prev, ho.ctx, ho.bound);
        // Before anything that may block: settings of the scheduling attributes, the affinity,
        // the I/O priority or the name through the tid wait for this. From `prev`, the task that
        // handed the tid to us: what was set on it through the tid is the thread's.
        bindings::thread_handoff_adopt(&ho.th, prev);

        io_uring_handoff_resume(
            ctx.cast(),
            ho.req.cast(),
            (*prev).pid,
            ho.consumed,
            ho.to_submit,
        );

        // We have the tid and the credentials; run the rest of the submission as a worker does.
        block_signals(ho);
        bindings::put_task_struct_many(prev, ho.prev_refs as c_int);
        ho.prev_refs = 0;
        ho.prev = ptr::null_mut();
        ho.req = ptr::null_mut();
        ho.ctx = ptr::null_mut();
        // A promoted worker that handed off has nothing we still need.
        if prev != src {
            bindings::io_wq_handoff_finished(prev);
        }

        bindings::io_run_task_work();
        bindings::mutex_lock(ptr::addr_of_mut!((*ctx).__bindgen_anon_2.uring_lock));
        let stats = ptr::addr_of_mut!((*ctx).handoff_stats);
        (*stats).resumed = (*stats).resumed.wrapping_add(1);
        bindings::io_submit_flush_completions(ctx);
        if ho.consumed < ho.to_submit {
            let ret = bindings::io_submit_sqes(ctx, ho.to_submit - ho.consumed);
            if ret == HANDED_OFF {
                return HANDED_OFF as c_long;
            }
            if let Ok(n) = u32::try_from(ret) {
                ho.consumed = ho.consumed.wrapping_add(n);
            }
        }

        // The submission is done: become the submitter and return to userspace.
        let finish = bindings::thread_handoff_finish(src);
        if finish != 0 {
            // The tid moved but the register state didn't: this task can't return as it.
            pr_warn!("handoff could not move the register state ({finish})\n");
            bindings::force_sig(bindings::SIGKILL as c_int);
        }
        restore_signals(ho);
        bindings::io_wq_handoff_finished(src);
        ho.src = ptr::null_mut();
        ho.in_enter = false;

        let mut ret = ho.consumed as c_long;
        if ho.consumed == ho.to_submit {
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
            bindings::mutex_unlock(ptr::addr_of_mut!((*ctx).__bindgen_anon_2.uring_lock));
        }
        if ho.flags & bindings::IORING_ENTER_REGISTERED_RING == 0 {
            bindings::fput(ho.file);
        }

        // We took a worker: top the spares back up now the syscall is done.
        bindings::io_wq_handoff_spare((*tctx).io_wq, bound, true);

        bindings::syscall_set_return_value(
            cur,
            bindings::task_pt_regs(cur),
            if ret < 0 { ret as c_int } else { 0 },
            ret,
        );
        ret
    }
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
            return -(bindings::EFAULT as c_long);
        };
        // SAFETY: The claimer set the function to run on a claimed worker.
        let ret = unsafe { func() };
        if ret != HANDED_OFF as c_long {
            return ret;
        }
    }
}
