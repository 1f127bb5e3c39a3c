// SPDX-License-Identifier: GPL-2.0

#include <linux/cgroup.h>

__rust_helper bool rust_helper_cgroup_threadgroup_change_trybegin(struct task_struct *tsk)
{
	return cgroup_threadgroup_change_trybegin(tsk);
}

__rust_helper void rust_helper_cgroup_threadgroup_change_end(struct task_struct *tsk)
{
	cgroup_threadgroup_change_end(tsk);
}
