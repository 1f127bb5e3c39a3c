// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for the liburing tests listed as "liburing-no-alarm" in
 * tests/expected.txt: their alarm() watchdog misreads a slow (TCG) guest as
 * a hung test. With this shim alarm() arms nothing, and the harness's own
 * per-test timeout is the watchdog: a test that really hangs still fails.
 */
#include <unistd.h>

unsigned int alarm(unsigned int seconds)
{
	(void)seconds;
	return 0;
}
