// SPDX-License-Identifier: GPL-2.0

#include <linux/mempolicy.h>

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
