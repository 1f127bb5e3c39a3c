// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for io_uring/io_wq_handoff.rs: the bit and list operations on the
 * io-wq worker pool that are static inline functions or macros in C.
 */

#include <linux/bitops.h>
#include <linux/rculist_nulls.h>

__rust_helper bool rust_helper_test_bit(unsigned long nr,
					const volatile unsigned long *addr)
{
	return test_bit(nr, addr);
}

__rust_helper void
rust_helper_hlist_nulls_del_init_rcu(struct hlist_nulls_node *n)
{
	hlist_nulls_del_init_rcu(n);
}
