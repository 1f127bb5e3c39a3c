// SPDX-License-Identifier: GPL-2.0

#include <linux/audit.h>

__rust_helper bool rust_helper_audit_dummy_context(void)
{
	return audit_dummy_context();
}
