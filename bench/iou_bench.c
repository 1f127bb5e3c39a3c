// SPDX-License-Identifier: GPL-2.0
/*
 * iou_bench: throughput and CPU cost of the io_uring opcodes that have no
 * nonblocking path (io_uring punts them to io-wq, or, with the thread
 * identity handoff, issues them inline), next to IORING_OP_NOP and the
 * plain synchronous syscall loop for the same operation.
 *
 *   iou_bench -o OP -d DIR [-q QD] [-t SECONDS]
 *
 * OP: nop fsync statx fadvise renameat openat splice, or sys-<op> for the
 * synchronous syscall loop (QD is then 1). Prints one line:
 *
 *   op=<op> fs=<fstype> qd=<qd> ops=<n> secs=<s> ops_s=<rate> cpu_pct=<pct>
 *
 * cpu_pct is the user+system time of the whole process (RUSAGE_SELF: every
 * thread, io-wq workers included) over the wall time, in percent of one CPU.
 * Exit status: 0, or 2 on any error (usage, setup, a failed request).
 * Timing never fails a run.
 *
 * Raw io_uring syscalls (SQ array mode, two mmaps), no liburing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <linux/io_uring.h>
#include <linux/magic.h>

#define WARMUP_USEC	200000
#define DATA_SIZE	4096
#define MAX_QD		4096

#include "ring.h"

/* ------------------------------------------------------------------------ */
/* Benchmark state                                                           */

enum op { OP_NOP, OP_FSYNC, OP_STATX, OP_FADVISE, OP_RENAMEAT, OP_OPENAT, OP_SPLICE };
static const char *const op_names[] = {
	"nop", "fsync", "statx", "fadvise", "renameat", "openat", "splice",
};

struct slot {
	char name[2][64];	/* renameat: the pair of names */
	int cur;		/* renameat: which of the two exists */
	int pipe[2];		/* splice: destination pipe */
	struct statx stx;	/* statx: result buffer */
};

static struct {
	enum op op;
	bool sys;
	unsigned int qd;
	int dirfd;
	int fd;			/* the data file */
	char data_name[64];
	struct slot *slots;
	unsigned int nslots;
	int *open_fds;		/* openat: fds reaped, closed in a batch */
	unsigned int nopen;
	char buf[DATA_SIZE];
} b = { .dirfd = -1, .fd = -1 };

static volatile sig_atomic_t phase;	/* 0 warmup, 1 measuring, 2 done */

static void on_alarm(int sig)
{
	(void)sig;
	phase++;
}

static void cleanup(void)
{
	unsigned int i;

	if (b.dirfd < 0)
		return;
	if (b.data_name[0])
		unlinkat(b.dirfd, b.data_name, 0);
	for (i = 0; b.slots && i < b.nslots; i++) {
		if (b.slots[i].name[0][0]) {
			unlinkat(b.dirfd, b.slots[i].name[0], 0);
			unlinkat(b.dirfd, b.slots[i].name[1], 0);
		}
	}
}

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "iou_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void setup_files(void)
{
	unsigned int i;
	int fd;

	snprintf(b.data_name, sizeof(b.data_name), "iou-bench.%d.data", (int)getpid());
	b.fd = openat(b.dirfd, b.data_name, O_CREAT | O_TRUNC | O_RDWR, 0600);
	if (b.fd < 0)
		fail("create %s: %s", b.data_name, strerror(errno));
	memset(b.buf, 0xa5, sizeof(b.buf));
	if (pwrite(b.fd, b.buf, DATA_SIZE, 0) != DATA_SIZE)
		fail("write %s: %s", b.data_name, strerror(errno));
	if (fsync(b.fd))
		fail("fsync %s: %s", b.data_name, strerror(errno));

	b.nslots = b.sys ? 1 : b.qd;
	b.slots = calloc(b.nslots, sizeof(*b.slots));
	b.open_fds = calloc(b.nslots, sizeof(*b.open_fds));
	if (!b.slots || !b.open_fds)
		fail("out of memory");
	for (i = 0; i < b.nslots; i++) {
		struct slot *s = &b.slots[i];

		s->pipe[0] = s->pipe[1] = -1;
		if (b.op == OP_RENAMEAT) {
			snprintf(s->name[0], sizeof(s->name[0]), "iou-bench.%d.r%u.a", (int)getpid(), i);
			snprintf(s->name[1], sizeof(s->name[1]), "iou-bench.%d.r%u.b", (int)getpid(), i);
			fd = openat(b.dirfd, s->name[0], O_CREAT | O_TRUNC | O_WRONLY, 0600);
			if (fd < 0)
				fail("create %s: %s", s->name[0], strerror(errno));
			close(fd);
		} else if (b.op == OP_SPLICE) {
			if (pipe(s->pipe))
				fail("pipe: %s", strerror(errno));
		}
	}
}

/* Read @n bytes out of a pipe that holds at least that much. */
static void drain_pipe(int fd, long n)
{
	while (n > 0) {
		ssize_t r = read(fd, b.buf, n > DATA_SIZE ? DATA_SIZE : n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("read from pipe: %s", r ? strerror(errno) : "EOF");
		n -= r;
	}
}

/* ------------------------------------------------------------------------ */
/* io_uring: one request per slot, kept in flight                            */

static void prep(struct ring *r, unsigned int i)
{
	struct io_uring_sqe *sqe = ring_sqe(r);
	struct slot *s = &b.slots[i];

	sqe->user_data = i;
	switch (b.op) {
	case OP_NOP:
		sqe->opcode = IORING_OP_NOP;
		break;
	case OP_FSYNC:
		sqe->opcode = IORING_OP_FSYNC;
		sqe->fd = b.fd;
		break;
	case OP_STATX:
		sqe->opcode = IORING_OP_STATX;
		sqe->fd = b.dirfd;
		sqe->addr = (unsigned long)b.data_name;
		sqe->len = STATX_BASIC_STATS;
		sqe->addr2 = (unsigned long)&s->stx;
		break;
	case OP_FADVISE:
		sqe->opcode = IORING_OP_FADVISE;
		sqe->fd = b.fd;
		sqe->off = 0;
		sqe->len = 0;			/* to the end of the file */
		sqe->fadvise_advice = POSIX_FADV_DONTNEED;
		break;
	case OP_RENAMEAT:
		sqe->opcode = IORING_OP_RENAMEAT;
		sqe->fd = b.dirfd;
		sqe->addr = (unsigned long)s->name[s->cur];
		sqe->len = b.dirfd;
		sqe->addr2 = (unsigned long)s->name[!s->cur];
		break;
	case OP_OPENAT:
		sqe->opcode = IORING_OP_OPENAT;
		sqe->fd = b.dirfd;
		sqe->addr = (unsigned long)".";
		sqe->len = 0600;
		sqe->open_flags = O_TMPFILE | O_RDWR;
		break;
	case OP_SPLICE:
		sqe->opcode = IORING_OP_SPLICE;
		sqe->splice_fd_in = b.fd;
		sqe->splice_off_in = 0;
		sqe->fd = s->pipe[1];
		sqe->off = (__u64)-1;		/* the pipe has no offset */
		sqe->len = DATA_SIZE;
		break;
	}
}

static void complete(const struct io_uring_cqe *cqe)
{
	unsigned long long i = cqe->user_data;

	if (i >= b.nslots)
		fail("op=%s: CQE with unknown user_data %llu", op_names[b.op], i);
	if (cqe->res < 0)
		fail("op=%s slot=%llu: request failed: res=%d (%s)", op_names[b.op],
		     i, cqe->res, strerror(-cqe->res));
	switch (b.op) {
	case OP_RENAMEAT:
		b.slots[i].cur = !b.slots[i].cur;
		break;
	case OP_OPENAT:
		b.open_fds[b.nopen++] = cqe->res;
		break;
	case OP_SPLICE:
		drain_pipe(b.slots[i].pipe[0], cqe->res);
		break;
	default:
		break;
	}
}

/* Reap every available CQE; the freed slots go to @freed. Returns the count. */
static unsigned int reap(struct ring *r, unsigned int *freed)
{
	unsigned int head = *r->cq_head, tail, n = 0;

	tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
	for (; head != tail; head++) {
		const struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];

		complete(cqe);
		freed[n++] = (unsigned int)cqe->user_data;
	}
	__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	while (b.nopen)
		close(b.open_fds[--b.nopen]);
	return n;
}

struct sample {
	struct timespec ts;
	struct rusage ru;
};

static void take_sample(struct sample *s)
{
	clock_gettime(CLOCK_MONOTONIC, &s->ts);
	getrusage(RUSAGE_SELF, &s->ru);
}

static void arm_timer(double secs)
{
	struct itimerval it = { 0 };

	it.it_value.tv_sec = (time_t)secs;
	it.it_value.tv_usec = (suseconds_t)((secs - (double)(time_t)secs) * 1e6);
	if (!it.it_value.tv_sec && !it.it_value.tv_usec)
		it.it_value.tv_usec = 1;
	if (setitimer(ITIMER_REAL, &it, NULL))
		fail("setitimer: %s", strerror(errno));
}

/* Called once per loop iteration: moves from warmup to measuring. */
static bool measuring(struct sample *start, bool *started, double secs)
{
	if (phase >= 1 && !*started) {
		take_sample(start);
		*started = true;
		arm_timer(secs);
	}
	return *started;
}

static unsigned long long run_uring(double secs, struct sample *start, struct sample *end)
{
	unsigned long long ops = 0;
	unsigned int *freed, n, i, inflight = 0;
	bool started = false;
	struct ring r;
	int ret;

	ret = ring_init(&r, b.qd, 0);
	if (ret)
		fail("io_uring_setup(%u): %s", b.qd, strerror(-ret));
	freed = calloc(b.qd, sizeof(*freed));
	if (!freed)
		fail("out of memory");

	arm_timer(WARMUP_USEC / 1e6);
	for (i = 0; i < b.qd; i++)
		prep(&r, i);
	inflight = b.qd;
	for (;;) {
		ret = ring_enter(&r, 1);
		if (ret && ret != -EINTR)
			fail("io_uring_enter: %s", strerror(-ret));
		if (phase >= 2) {
			take_sample(end);
			break;
		}
		measuring(start, &started, secs);
		n = reap(&r, freed);
		inflight -= n;
		if (started)
			ops += n;
		for (i = 0; i < n; i++)
			prep(&r, freed[i]);
		inflight += n;
	}
	/* let the requests in flight finish (not counted) */
	while (inflight) {
		ret = ring_enter(&r, 1);
		if (ret && ret != -EINTR)
			fail("io_uring_enter: %s", strerror(-ret));
		inflight -= reap(&r, freed);
	}
	free(freed);
	close(r.fd);
	return ops;
}

/* ------------------------------------------------------------------------ */
/* The synchronous loop                                                      */

static void sys_once(void)
{
	struct slot *s = &b.slots[0];
	ssize_t n;
	int fd, err;

	switch (b.op) {
	case OP_NOP:
		break;
	case OP_FSYNC:
		if (fsync(b.fd))
			fail("fsync: %s", strerror(errno));
		break;
	case OP_STATX:
		if (statx(b.dirfd, b.data_name, 0, STATX_BASIC_STATS, &s->stx))
			fail("statx: %s", strerror(errno));
		break;
	case OP_FADVISE:
		err = posix_fadvise(b.fd, 0, 0, POSIX_FADV_DONTNEED);
		if (err)
			fail("posix_fadvise: %s", strerror(err));
		break;
	case OP_RENAMEAT:
		if (renameat(b.dirfd, s->name[s->cur], b.dirfd, s->name[!s->cur]))
			fail("renameat: %s", strerror(errno));
		s->cur = !s->cur;
		break;
	case OP_OPENAT:
		fd = openat(b.dirfd, ".", O_TMPFILE | O_RDWR, 0600);
		if (fd < 0)
			fail("open O_TMPFILE: %s", strerror(errno));
		close(fd);
		break;
	case OP_SPLICE: {
		loff_t off = 0;

		n = splice(b.fd, &off, s->pipe[1], NULL, DATA_SIZE, 0);
		if (n < 0)
			fail("splice: %s", strerror(errno));
		drain_pipe(s->pipe[0], n);
		break;
	}
	}
}

static unsigned long long run_sys(double secs, struct sample *start, struct sample *end)
{
	unsigned long long ops = 0;
	bool started = false;

	arm_timer(WARMUP_USEC / 1e6);
	for (;;) {
		if (phase >= 2) {
			take_sample(end);
			break;
		}
		measuring(start, &started, secs);
		sys_once();
		ops += started;
	}
	return ops;
}

/* ------------------------------------------------------------------------ */

static const char *fs_name(const char *dir)
{
	static char hex[32];
	struct statfs sfs;

	if (statfs(dir, &sfs))
		fail("statfs %s: %s", dir, strerror(errno));
	switch ((unsigned long)sfs.f_type) {
	case TMPFS_MAGIC:
		return "tmpfs";
	case EXT4_SUPER_MAGIC:
		return "ext4";
	}
	snprintf(hex, sizeof(hex), "0x%lx", (unsigned long)sfs.f_type);
	return hex;
}

static double tv_sec(const struct timeval *tv)
{
	return tv->tv_sec + tv->tv_usec / 1e6;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: iou_bench -o OP -d DIR [-q QD] [-t SECONDS]\n"
		"  OP: nop fsync statx fadvise renameat openat splice, or sys-<op>\n"
		"      (the synchronous syscall loop; QD is then 1)\n"
		"  QD: requests kept in flight (default 1), SECONDS: measured time\n"
		"      (default 2, after a 0.2 s warmup)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *opname = NULL, *dir = NULL, *fs, *name;
	struct sample start, end;
	unsigned long long ops;
	struct sigaction sa;
	double secs = 2, wall, cpu;
	char *endp;
	long qd = 1;
	unsigned int i;
	int c;

	while ((c = getopt(argc, argv, "o:d:q:t:h")) != -1) {
		switch (c) {
		case 'o':
			opname = optarg;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'q':
			qd = strtol(optarg, &endp, 10);
			if (*endp || qd < 1 || qd > MAX_QD)
				fail("bad queue depth '%s' (1..%d)", optarg, MAX_QD);
			break;
		case 't':
			secs = strtod(optarg, &endp);
			if (*endp || !(secs > 0) || secs > 3600)
				fail("bad time '%s' (seconds, > 0)", optarg);
			break;
		default:
			usage();
		}
	}
	if (!opname || !dir || optind != argc)
		usage();

	name = opname;
	if (!strncmp(name, "sys-", 4)) {
		b.sys = true;
		name += 4;
	}
	for (i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++)
		if (!strcmp(name, op_names[i]))
			break;
	if (i == sizeof(op_names) / sizeof(op_names[0]))
		fail("unknown op '%s'", opname);
	b.op = i;
	b.qd = b.sys ? 1 : (unsigned int)qd;

	fs = fs_name(dir);
	b.dirfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (b.dirfd < 0)
		fail("open %s: %s", dir, strerror(errno));
	atexit(cleanup);
	setup_files();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		fail("sigaction: %s", strerror(errno));

	ops = b.sys ? run_sys(secs, &start, &end) : run_uring(secs, &start, &end);

	wall = (end.ts.tv_sec - start.ts.tv_sec) + (end.ts.tv_nsec - start.ts.tv_nsec) / 1e9;
	cpu = tv_sec(&end.ru.ru_utime) - tv_sec(&start.ru.ru_utime) +
	      tv_sec(&end.ru.ru_stime) - tv_sec(&start.ru.ru_stime);
	printf("op=%s fs=%s qd=%u ops=%llu secs=%.3f ops_s=%.1f cpu_pct=%.1f\n",
	       opname, fs, b.qd, ops, wall, wall > 0 ? ops / wall : 0.0,
	       wall > 0 ? cpu / wall * 100 : 0.0);
	return 0;
}
