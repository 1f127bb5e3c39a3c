// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for kernel/thread_handoff.rs: static inline functions and macros
 * of the task, signal, list and accounting code that bindgen cannot see.
 */

#include <linux/audit.h>
#include <linux/cgroup.h>
#include <linux/cred.h>
#include <linux/mempolicy.h>
#include <linux/rculist.h>
#include <linux/rseq.h>
#include <linux/sched/rt.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>

__rust_helper bool rust_helper_audit_dummy_context(void)
{
	return audit_dummy_context();
}

__rust_helper int rust_helper_task_nice(const struct task_struct *p)
{
	return task_nice(p);
}

__rust_helper bool rust_helper_task_no_new_privs(struct task_struct *p)
{
	return task_no_new_privs(p);
}

__rust_helper void rust_helper_task_set_no_new_privs(struct task_struct *p)
{
	task_set_no_new_privs(p);
}

__rust_helper void rust_helper_task_lock(struct task_struct *p)
{
	task_lock(p);
}

__rust_helper void rust_helper_task_unlock(struct task_struct *p)
{
	task_unlock(p);
}

__rust_helper void rust_helper_local_irq_disable(void)
{
	local_irq_disable();
}

__rust_helper void rust_helper_local_irq_enable(void)
{
	local_irq_enable();
}

__rust_helper void rust_helper_raw_spin_lock(raw_spinlock_t *lock)
{
	raw_spin_lock(lock);
}

__rust_helper void rust_helper_raw_spin_unlock(raw_spinlock_t *lock)
{
	raw_spin_unlock(lock);
}

__rust_helper unsigned long rust_helper_raw_spin_lock_irqsave(raw_spinlock_t *lock)
{
	unsigned long flags;

	raw_spin_lock_irqsave(lock, flags);
	return flags;
}

__rust_helper void
rust_helper_raw_spin_unlock_irqrestore(raw_spinlock_t *lock, unsigned long flags)
{
	raw_spin_unlock_irqrestore(lock, flags);
}

__rust_helper void rust_helper_write_lock_irq(rwlock_t *lock)
{
	write_lock_irq(lock);
}

__rust_helper void rust_helper_write_unlock_irq(rwlock_t *lock)
{
	write_unlock_irq(lock);
}

__rust_helper bool rust_helper_cgroup_threadgroup_change_trybegin(struct task_struct *p)
{
	return cgroup_threadgroup_change_trybegin(p);
}

__rust_helper void rust_helper_cgroup_threadgroup_change_end(struct task_struct *p)
{
	cgroup_threadgroup_change_end(p);
}

__rust_helper void rust_helper_write_seqlock(seqlock_t *sl)
{
	write_seqlock(sl);
}

__rust_helper void rust_helper_write_sequnlock(seqlock_t *sl)
{
	write_sequnlock(sl);
}

__rust_helper void rust_helper_list_del_rcu(struct list_head *entry)
{
	list_del_rcu(entry);
}

__rust_helper void rust_helper_list_add_rcu(struct list_head *new,
					    struct list_head *head)
{
	list_add_rcu(new, head);
}

__rust_helper void rust_helper_list_replace_rcu(struct list_head *old,
						struct list_head *new)
{
	list_replace_rcu(old, new);
}

__rust_helper void rust_helper_list_replace_init(struct list_head *old,
						 struct list_head *new)
{
	list_replace_init(old, new);
}

__rust_helper void rust_helper_list_splice_init(struct list_head *list,
						struct list_head *head)
{
	list_splice_init(list, head);
}

__rust_helper void rust_helper_list_splice_tail_init(struct list_head *list,
						     struct list_head *head)
{
	list_splice_tail_init(list, head);
}

__rust_helper const struct cred *rust_helper_get_cred_many(const struct cred *cred,
							   int nr)
{
	return get_cred_many(cred, nr);
}

__rust_helper void rust_helper_put_cred_many(const struct cred *cred, int nr)
{
	put_cred_many(cred, nr);
}

__rust_helper void rust_helper_rseq_force_update(void)
{
	rseq_force_update();
}

#ifdef CONFIG_NUMA
__rust_helper struct mempolicy *rust_helper_mpol_dup(struct mempolicy *pol)
{
	return mpol_dup(pol);
}

__rust_helper void rust_helper_mpol_put(struct mempolicy *pol)
{
	mpol_put(pol);
}
#endif
