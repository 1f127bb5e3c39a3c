/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Inline issue with a thread identity handoff: the interface between the C
 * io_uring core and io_uring/handoff.rs. Kept free of io_uring's private
 * headers, as bindgen reads it for the Rust side.
 */
#ifndef IOU_HANDOFF_H
#define IOU_HANDOFF_H

#include <linux/io_uring_types.h>

#ifdef CONFIG_THREAD_HANDOFF
/* kernel.io_uring_handoff */
extern int sysctl_io_uring_handoff;

/* implemented in io_uring/handoff.rs */
bool io_handoff_arm(struct io_kiocb *req, bool bound);
long io_uring_handoff_worker(void);
void io_handoff_submit_end(void);

/* the fdinfo names of enum io_handoff_refusal */
extern const char * const io_handoff_refusal_names[IO_HANDOFF_NR_REFUSALS];
#endif

/* implemented by the io_uring core, for handoff.rs */
int io_submit_sqes(struct io_ring_ctx *ctx, unsigned int nr);
unsigned int io_submit_sqes_abandon(struct io_ring_ctx *ctx);
long io_uring_enter_finish(struct io_ring_ctx *ctx, long submitted,
			   u32 min_complete, u32 flags,
			   const void __user *argp, size_t argsz);
void io_handoff_work_get(struct io_kiocb *req);

#ifdef CONFIG_THREAD_HANDOFF
void io_handoff_refused(struct io_kiocb *req, enum io_handoff_refusal why);
bool io_handoff_ring_busy(struct io_ring_ctx *ctx);
void io_handoff_ring_get(struct io_ring_ctx *ctx);
void io_handoff_ring_put(struct io_ring_ctx *ctx);
void io_handoff_lock_ring(struct io_ring_ctx *ctx);
void io_handoff_unlock_ring(struct io_ring_ctx *ctx);
void io_handoff_syscall_return(long ret);
unsigned int io_tctx_handoff(struct io_uring_task *tctx,
			     struct task_struct *src, struct task_struct *dst);
void io_handoff_tw_moved(struct io_uring_task *tctx, struct task_struct *task);
#endif

#endif
