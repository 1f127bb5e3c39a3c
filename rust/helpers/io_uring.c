// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for io_uring/handoff.rs: static inline functions and macros of the
 * task, signal and task_work code and of io_uring's private headers.
 */

#include <linux/refcount.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/signal.h>
#include <linux/task_work.h>
#include <asm/syscall.h>

#ifdef CONFIG_IO_URING
#include "../../io_uring/io_uring.h"
#include "../../io_uring/tw.h"

__rust_helper int rust_helper_io_run_task_work(void)
{
	return io_run_task_work();
}

__rust_helper void rust_helper_io_req_task_work_add(struct io_kiocb *req)
{
	io_req_task_work_add(req);
}

__rust_helper void
rust_helper_io_submit_flush_completions(struct io_ring_ctx *ctx)
{
	io_submit_flush_completions(ctx);
}
#endif

__rust_helper void rust_helper_set_notify_signal(struct task_struct *task)
{
	set_notify_signal(task);
}

__rust_helper void rust_helper_clear_notify_signal(void)
{
	clear_notify_signal();
}

__rust_helper void rust_helper_refcount_add(int i, refcount_t *r)
{
	refcount_add(i, r);
}

__rust_helper void rust_helper_siginitsetinv(sigset_t *set, unsigned long mask)
{
	siginitsetinv(set, mask);
}

__rust_helper void rust_helper_put_task_struct_many(struct task_struct *t,
						    int nr)
{
	put_task_struct_many(t, nr);
}

__rust_helper struct pt_regs *rust_helper_task_pt_regs(struct task_struct *task)
{
	return task_pt_regs(task);
}

__rust_helper void
rust_helper_syscall_set_return_value(struct task_struct *task,
				     struct pt_regs *regs, int error, long val)
{
	syscall_set_return_value(task, regs, error, val);
}
