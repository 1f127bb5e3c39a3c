// SPDX-License-Identifier: GPL-2.0

#include <linux/seqlock.h>

__rust_helper void rust_helper_write_seqlock(seqlock_t *sl)
{
	write_seqlock(sl);
}

__rust_helper void rust_helper_write_sequnlock(seqlock_t *sl)
{
	write_sequnlock(sl);
}
