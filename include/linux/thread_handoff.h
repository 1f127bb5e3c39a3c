/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Thread identity handoff: a thread that is about to block in the kernel
 * hands what userspace can observe of it (tid, thread-group leadership,
 * signal state, credentials, scheduling attributes, cgroup, per-thread
 * accounting and the user register state) to another, idle thread of the
 * same process. That thread returns to userspace in its place; the blocked
 * thread keeps its task_struct, kernel stack and in-kernel state, and
 * finishes its work as an anonymous kernel worker.
 *
 * Sequence, for a source S (current, about to sleep) and a destination D:
 *
 *   S: thread_handoff_allowed()             vet the source
 *   S: thread_handoff_prepare()             sync live register state
 *   S: thread_handoff_move(&th, claim, data)
 *        lock, vet again, then claim(data) returns D, vetted with
 *        thread_handoff_compatible(S, D), asleep and pinned under
 *        D->pi_lock; move what names the thread, or without a D give
 *        everything back
 *   D: thread_handoff_adopt(&th, S)         scheduling attributes, affinity,
 *                                           I/O priority, comm
 *   D: thread_handoff_finish(S)             move the rest, S is parked
 *
 * thread_handoff_move() moves, in one critical section under
 * tasklist_lock and the siglock, everything another task reaches the thread
 * through: its tid (and with it leadership, children, /proc and pidfds),
 * signal state, credentials, futex ownership, the robust list and the
 * accounting read through the tid. From then on whatever names the thread
 * finds D. It also takes the source's scheduling attributes and affinity
 * into @th, which D adopts before anything else, with the source's I/O
 * priority and comm. What only the thread itself uses moves later, in
 * thread_handoff_finish(): registers, rseq, cgroup and memory policy.
 *
 * The source side runs from the scheduler's pre-sleep hook: it must not
 * sleep and must not fail other than by returning false. The
 * implementation lives in kernel/thread_handoff.rs.
 */
#ifndef _LINUX_THREAD_HANDOFF_H
#define _LINUX_THREAD_HANDOFF_H

#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/wait_bit.h>
#include <uapi/linux/sched/types.h>

/* A handoff, filled in by thread_handoff_move() for thread_handoff_adopt(). */
struct thread_handoff {
	/*
	 * Taken from the source by thread_handoff_move(), for
	 * thread_handoff_adopt(): its scheduling attributes, and the CPU
	 * affinity the user requested (the effective one if none was).
	 */
	struct sched_attr sched;
	struct cpumask user_mask;
};

/*
 * task_struct::handoff_seq counts the handoffs that gave the task a tid,
 * twice: it is odd from the commit until the task adopted the thread's
 * scheduling attributes, affinity, I/O priority and name
 * (thread_handoff_adopt()), even otherwise. Inherited as even: such a task
 * does not fork before it adopted them.
 */
static inline bool task_handoff_moving(struct task_struct *p)
{
#ifdef CONFIG_THREAD_HANDOFF
	return READ_ONCE(p->handoff_seq) & 1;
#else
	return false;
#endif
}

#ifdef CONFIG_THREAD_HANDOFF
bool thread_handoff_allowed(void);
bool thread_handoff_compatible(struct task_struct *src, struct task_struct *dst);
bool thread_handoff_prepare(void);
int thread_handoff_move(struct thread_handoff *th,
			struct task_struct *(*claim)(void *data), void *data);
void thread_handoff_adopt(const struct thread_handoff *th,
			  struct task_struct *src);
int thread_handoff_finish(struct task_struct *src);

/* scheduler side, kernel/sched/core.c */
u64 sched_exec_runtime_read(struct task_struct *p);
void sched_exec_runtime_add(struct task_struct *p, u64 ns);

/*
 * Architecture hooks (select ARCH_HAS_THREAD_HANDOFF):
 * _allowed()     refuse register state that cannot move (e.g. compat tasks)
 * _compatible()  refuse a destination whose register state cannot take it
 * _prepare()     on the source, current, right before it blocks: write the
 *                live user register state back to the task. Must not sleep.
 * _finish()      on the destination, current: copy the user register
 *                state from @src and load what the return to userspace
 *                will not; @leader is true when group leadership moved.
 */
bool arch_thread_handoff_allowed(struct task_struct *tsk);
bool arch_thread_handoff_compatible(struct task_struct *src,
				    struct task_struct *dst);
bool arch_thread_handoff_prepare(void);
int arch_thread_handoff_finish(struct task_struct *src, bool leader);

/*
 * Settings made through a tid while its identity moves. The destination of
 * a handoff holds the tid from thread_handoff_move() on, but has the
 * scheduling attributes, the CPU affinity, the I/O priority and the name
 * (comm) of the thread only once it ran thread_handoff_adopt(), the first
 * thing it does (no blocking work in between); its handoff_seq is odd until
 * then. Whatever sets these through a tid waits on the task it found until
 * that is even (thread_handoff_wait(), or thread_handoff_find_task_by_vpid()
 * for the lookup and the wait), takes the count (thread_handoff_settled())
 * before it acts, so that an adoption does not overwrite its setting, and
 * calls thread_handoff_moved() after it acted: true means that the task
 * gave the tid away meanwhile (the setting landed on a task that a handoff
 * demoted), or took it again in another handoff (which may have overwritten
 * the setting), and the setting must be made again on the task the tid
 * names now. A setting made on the source before the destination took it
 * is not lost: the destination takes it after the tid moved, under the lock
 * the setting takes (the source's pi_lock in the commit for the scheduling
 * attributes and the affinity, its task lock for the I/O priority), or after
 * a full barrier that pairs with the one in thread_handoff_pid_moved() (the
 * name, which is written without a lock).
 */
static inline int thread_handoff_wait(struct task_struct *p)
{
	if (p == current)
		return 0;
	return wait_var_event_killable(&p->handoff_seq,
				       !task_handoff_moving(p));
}

/*
 * The handoff count of @p, taken into @seq for thread_handoff_moved();
 * false if a handoff is moving the thread's attributes to @p: wait for it
 * (thread_handoff_wait()) and take it again.
 */
static inline bool thread_handoff_settled(struct task_struct *p, u32 *seq)
{
	*seq = smp_load_acquire(&p->handoff_seq);
	return !(*seq & 1) || p == current;
}

/*
 * find_task_by_vpid() for a setting through a tid, under rcu_read_lock():
 * while a handoff is moving the thread's attributes to the task it finds, it
 * drops the RCU read lock, waits for the move and looks again. Returns the
 * task, with its handoff count in @seq, NULL if there is none, or an
 * ERR_PTR() if a fatal signal ended the wait.
 */
static inline struct task_struct *
thread_handoff_find_task_by_vpid(pid_t nr, u32 *seq)
{
	struct task_struct *p;
	int ret;

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(),
			 "thread_handoff_find_task_by_vpid() needs rcu_read_lock()");
	while ((p = find_task_by_vpid(nr)) && !thread_handoff_settled(p, seq)) {
		get_task_struct(p);
		rcu_read_unlock();
		ret = thread_handoff_wait(p);
		put_task_struct(p);
		rcu_read_lock();
		if (ret)
			return ERR_PTR(ret);
	}
	return p;
}

/*
 * thread_handoff_moved() for the task that @pid named when it was looked
 * up, with the count thread_handoff_settled() took before the setting
 */
static inline bool thread_handoff_pid_moved(struct task_struct *p,
					    struct pid *pid, u32 seq)
{
	struct task_struct *q;
	bool moved;

	/* a setter that is killed stops following the tid */
	if (!pid || p == current || fatal_signal_pending(current))
		return false;
	/* the caller's setting before the reads, see thread_handoff_adopt() */
	smp_mb();
	rcu_read_lock();
	q = pid_task(pid, PIDTYPE_PID);
	/*
	 * The count through the tid's link: the commit makes it odd before it
	 * publishes the link. A thread that exited since: what was done stands.
	 */
	moved = q && (q != p || READ_ONCE(q->handoff_seq) != seq);
	rcu_read_unlock();
	return moved;
}

static inline bool thread_handoff_moved(struct task_struct *p, pid_t nr,
					u32 seq)
{
	struct pid *pid;
	bool moved;

	if (!nr || p == current)
		return false;
	rcu_read_lock();
	pid = find_vpid(nr);
	moved = pid && thread_handoff_pid_moved(p, pid, seq);
	rcu_read_unlock();
	return moved;
}
#else
static inline bool thread_handoff_allowed(void)
{
	return false;
}

static inline bool thread_handoff_compatible(struct task_struct *src,
					     struct task_struct *dst)
{
	return false;
}

static inline bool thread_handoff_prepare(void)
{
	return false;
}

static inline int thread_handoff_move(struct thread_handoff *th,
				      struct task_struct *(*claim)(void *data),
				      void *data)
{
	return -EOPNOTSUPP;
}

static inline void thread_handoff_adopt(const struct thread_handoff *th,
					struct task_struct *src)
{
}

static inline int thread_handoff_finish(struct task_struct *src)
{
	return -EOPNOTSUPP;
}

static inline int thread_handoff_wait(struct task_struct *p)
{
	return 0;
}

static inline bool thread_handoff_settled(struct task_struct *p, u32 *seq)
{
	*seq = 0;
	return true;
}

static inline struct task_struct *
thread_handoff_find_task_by_vpid(pid_t nr, u32 *seq)
{
	*seq = 0;
	return find_task_by_vpid(nr);
}

static inline bool thread_handoff_pid_moved(struct task_struct *p,
					    struct pid *pid, u32 seq)
{
	return false;
}

static inline bool thread_handoff_moved(struct task_struct *p, pid_t nr,
					u32 seq)
{
	return false;
}
#endif /* CONFIG_THREAD_HANDOFF */

#endif /* _LINUX_THREAD_HANDOFF_H */
