// SPDX-License-Identifier: GPL-2.0
/*
 * beyond_bench: figures for the io_uring pieces next to the handoff.
 *
 *   beyond_bench flood -q QD [-t SECONDS]
 *	A flood of IORING_OP_NOP with IOSQE_ASYNC, QD in flight: every NOP
 *	goes through io-wq (enqueue, worker wakeup, completion task_work).
 *	Prints: bench=flood qd= ops= secs= ops_s= cpu_pct= cpu_us_op=
 *
 *   beyond_bench epoll -m sys|single|multi -n FDS [-p] [-t SECONDS]
 *	Rounds of FDS eventfds made ready (edge triggered), waited for with
 *	epoll_wait(2), with one IORING_OP_EPOLL_WAIT per wait (single), or
 *	with one multishot IORING_OP_EPOLL_WAIT armed for the whole run
 *	(multi, provided buffers), then read. The ring is set up as an event
 *	loop would: IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN.
 *	With -p, another thread makes the events ready once the waiter is
 *	waiting (single shot: once its request is submitted), so every wait
 *	blocks; without it, the waiter makes them ready itself first.
 *	Prints: bench=epoll mode= fds= producer=thread|self rounds= secs=
 *	rounds_s= events_s=
 *	cpu_pct= waits_round= (or unsupported=<errno name> if the kernel
 *	refuses the mode).
 *
 *   beyond_bench bdev -d DEV -w read|write -m normal|dontcache
 *		       [-t SECONDS] [-s SPAN_MB] [-b BLOCK_KB] [-q QD]
 *	Buffered sequential reads or writes on a block device through
 *	io_uring (IORING_OP_READ/WRITE, RWF_DONTCACHE for dontcache),
 *	wrapping over the first SPAN_MB; a write run ends with fdatasync.
 *	Prints: bench=bdev op= mode= bs_kb= qd= span_mb= secs= mb= mbs=
 *	per_sec=<MB/s each second> cached_mb=<page cache of the memory
 *	cgroup at the end, or -1>
 *
 * cpu_pct is the user+system time of the whole process (RUSAGE_SELF:
 * every thread, io-wq workers included) over the wall time, in percent of
 * one CPU. Exit status: 0, or 2 on any error. Timing never fails a run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/fs.h>
#include <linux/io_uring.h>

#include "ring.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE			0x00000080
#endif
#ifndef IORING_EPOLL_WAIT_MULTISHOT
#define IORING_EPOLL_WAIT_MULTISHOT	(1U << 0)
#endif

#define MAX_FDS		1024
#define MAX_QD		256
#define BGID		1
#define NBUFS		64

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "beyond_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

struct sample {
	double t;	/* CLOCK_MONOTONIC, seconds */
	double cpu;	/* user + system, seconds */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void take(struct sample *s)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	s->t = now();
	s->cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		 ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static double cpu_pct(const struct sample *a, const struct sample *b)
{
	return b->t > a->t ? (b->cpu - a->cpu) / (b->t - a->t) * 100 : 0;
}

static void ring_setup(struct ring *r, unsigned int entries, unsigned int flags)
{
	int ret = ring_init(r, entries, flags);

	if (ret)
		fail("io_uring_setup(%u, %#x): %s", entries, flags, strerror(-ret));
}

static void enter(struct ring *r, unsigned int wait)
{
	int ret = ring_enter(r, wait);

	if (ret && ret != -EINTR)
		fail("io_uring_enter: %s", strerror(-ret));
}

/* ------------------------------------------------------------------------ */
/* flood: IOSQE_ASYNC NOPs through io-wq                                     */

static void queue_async_nop(struct ring *r)
{
	struct io_uring_sqe *sqe = ring_sqe(r);

	sqe->opcode = IORING_OP_NOP;
	sqe->flags = IOSQE_ASYNC;
}

static void bench_flood(unsigned int qd, double secs)
{
	unsigned long long ops = 0;
	struct io_uring_cqe cqe;
	struct sample a, b;
	bool counting = false;
	double warm_end;
	unsigned int i, n;
	struct ring r;

	ring_setup(&r, qd, 0);
	for (i = 0; i < qd; i++)
		queue_async_nop(&r);
	warm_end = now() + 0.2;
	for (;;) {
		enter(&r, 1);
		for (n = 0; ring_cqe(&r, &cqe); n++) {
			if (cqe.res < 0)
				fail("NOP failed: %s", strerror(-cqe.res));
		}
		if (!counting && now() >= warm_end) {
			take(&a);
			counting = true;
		} else if (counting) {
			ops += n;
			if (now() - a.t >= secs)
				break;
		}
		for (i = 0; i < n; i++)
			queue_async_nop(&r);
	}
	take(&b);
	printf("bench=flood qd=%u ops=%llu secs=%.3f ops_s=%.1f cpu_pct=%.1f cpu_us_op=%.2f\n",
	       qd, ops, b.t - a.t, ops / (b.t - a.t), cpu_pct(&a, &b),
	       ops ? (b.cpu - a.cpu) * 1e6 / ops : 0.0);
	close(r.fd);
}

/* ------------------------------------------------------------------------ */
/* epoll: epoll_wait(2) vs single-shot vs multishot IORING_OP_EPOLL_WAIT     */

enum { EP_SYS, EP_SINGLE, EP_MULTI };

struct ep {
	int mode, nfds, epfd, efd[MAX_FDS];
	int go;				/* eventfd: the producer's start signal */
	bool producer;
	struct ring r;
	struct io_uring_buf_ring *br;
	struct epoll_event *bufs;	/* NBUFS buffers of nfds events */
	struct epoll_event *evs;	/* nfds, for sys and single */
	unsigned short br_tail;
	unsigned long waits;
};

static void ep_buf_add(struct ep *e, unsigned short bid)
{
	struct io_uring_buf *buf = &e->br->bufs[e->br_tail & (NBUFS - 1)];

	buf->addr = (unsigned long)(e->bufs + (size_t)bid * e->nfds);
	buf->len = e->nfds * sizeof(struct epoll_event);
	buf->bid = bid;
	e->br_tail++;
	__atomic_store_n(&e->br->tail, e->br_tail, __ATOMIC_RELEASE);
}

/* Returns 0, or the errno with which the kernel refused the multishot arm. */
static int ep_arm_multishot(struct ep *e)
{
	struct io_uring_buf_reg reg = { 0 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	unsigned int i;

	e->br = mmap(NULL, NBUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	e->bufs = calloc((size_t)NBUFS * e->nfds, sizeof(struct epoll_event));
	if (e->br == MAP_FAILED || !e->bufs)
		fail("out of memory");
	reg.ring_addr = (unsigned long)e->br;
	reg.ring_entries = NBUFS;
	reg.bgid = BGID;
	if (syscall(__NR_io_uring_register, e->r.fd, IORING_REGISTER_PBUF_RING, &reg, 1) < 0)
		return errno;
	for (i = 0; i < NBUFS; i++)
		ep_buf_add(e, i);

	sqe = ring_sqe(&e->r);
	sqe->opcode = IORING_OP_EPOLL_WAIT;
	sqe->fd = e->epfd;
	sqe->rw_flags = IORING_EPOLL_WAIT_MULTISHOT;
	sqe->flags = IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	sqe->user_data = 1;
	enter(&e->r, 0);
	/* a kernel without the flag fails the request at once */
	usleep(10000);
	if (ring_cqe(&e->r, &cqe))
		return cqe.res < 0 ? -cqe.res : EPROTO;
	return 0;
}

static void ep_make_ready(struct ep *e)
{
	uint64_t one = 1;
	int i;

	for (i = 0; i < e->nfds; i++)
		if (write(e->efd[i], &one, sizeof(one)) != sizeof(one))
			fail("eventfd write: %s", strerror(errno));
}

/* the other thread: make the round's events ready each time it is told */
static void *ep_producer(void *arg)
{
	struct ep *e = arg;
	uint64_t v;

	while (read(e->go, &v, sizeof(v)) == sizeof(v)) {
		if (v > 1)	/* told to stop */
			break;
		ep_make_ready(e);
	}
	return NULL;
}

/* queue one single-shot IORING_OP_EPOLL_WAIT for the round's events */
static void queue_epoll_wait(struct ep *e)
{
	struct io_uring_sqe *sqe = ring_sqe(&e->r);

	sqe->opcode = IORING_OP_EPOLL_WAIT;
	sqe->fd = e->epfd;
	sqe->addr = (unsigned long)e->evs;
	sqe->len = e->nfds;
}

static void wait_cqe(struct ring *r, struct io_uring_cqe *cqe)
{
	while (!ring_cqe(r, cqe))
		enter(r, 1);
}

/* Wait until the round's nfds events are in; returns the number of waits. */
static unsigned int ep_collect(struct ep *e)
{
	struct io_uring_cqe cqe;
	unsigned int waits = 0;
	bool armed = false;
	uint64_t one = 1;
	int got = 0, n;

	/* with a producer, arm single shot first, so it waits for the events */
	if (e->producer && e->mode == EP_SINGLE) {
		queue_epoll_wait(e);
		enter(&e->r, 0);
		armed = true;
	}
	if (e->producer && write(e->go, &one, sizeof(one)) != sizeof(one))
		fail("eventfd write: %s", strerror(errno));

	while (got < e->nfds) {
		waits++;
		switch (e->mode) {
		case EP_SYS:
			n = epoll_wait(e->epfd, e->evs, e->nfds, -1);
			if (n < 0)
				fail("epoll_wait: %s", strerror(errno));
			break;
		case EP_SINGLE:
			if (!armed)
				queue_epoll_wait(e);
			armed = false;
			wait_cqe(&e->r, &cqe);
			if (cqe.res < 0)
				fail("IORING_OP_EPOLL_WAIT: %s", strerror(-cqe.res));
			n = cqe.res;
			break;
		default:
			wait_cqe(&e->r, &cqe);
			if (cqe.res < 0 || !(cqe.flags & IORING_CQE_F_MORE))
				fail("multishot IORING_OP_EPOLL_WAIT ended: res %d", cqe.res);
			n = cqe.res;
			ep_buf_add(e, cqe.flags >> IORING_CQE_BUFFER_SHIFT);
			break;
		}
		got += n;
	}
	return waits;
}

static void bench_epoll(int mode, int nfds, bool producer, double secs)
{
	static const char *const names[] = { "sys", "single", "multi" };
	unsigned long long rounds = 0, waits = 0;
	struct sample a = { 0 }, b;
	bool counting = false;
	double warm_end;
	uint64_t v = 1;
	uint64_t stop = 2;
	pthread_t thr;
	struct ep e;
	int i, err;

	memset(&e, 0, sizeof(e));
	e.mode = mode;
	e.nfds = nfds;
	e.producer = producer;
	e.epfd = epoll_create1(0);
	if (e.epfd < 0)
		fail("epoll_create1: %s", strerror(errno));
	for (i = 0; i < nfds; i++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = i };

		e.efd[i] = eventfd(0, EFD_NONBLOCK);
		if (e.efd[i] < 0 || epoll_ctl(e.epfd, EPOLL_CTL_ADD, e.efd[i], &ev))
			fail("eventfd %d: %s", i, strerror(errno));
	}
	e.evs = calloc(nfds, sizeof(*e.evs));
	if (!e.evs)
		fail("out of memory");
	/* as an event loop would set it up: task_work runs when it waits */
	if (mode != EP_SYS)
		ring_setup(&e.r, 64, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (mode == EP_MULTI) {
		err = ep_arm_multishot(&e);
		if (err) {
			printf("bench=epoll mode=%s fds=%d producer=%s unsupported=%s\n",
			       names[mode], nfds, producer ? "thread" : "self",
			       strerrorname_np(err) ?: "unknown");
			return;
		}
	}

	if (producer) {
		e.go = eventfd(0, 0);
		if (e.go < 0 || pthread_create(&thr, NULL, ep_producer, &e))
			fail("producer thread: %s", strerror(errno));
	}

	warm_end = now() + 0.2;
	for (;;) {
		unsigned int w;

		if (!producer)
			ep_make_ready(&e);
		w = ep_collect(&e);
		for (i = 0; i < nfds; i++)
			if (read(e.efd[i], &v, sizeof(v)) != sizeof(v))
				fail("eventfd read: %s", strerror(errno));
		v = 1;
		if (!counting && now() >= warm_end) {
			take(&a);
			counting = true;
			continue;
		}
		if (counting) {
			rounds++;
			waits += w;
			if (!(rounds & 15) && now() - a.t >= secs)
				break;
		}
	}
	take(&b);
	if (producer) {
		if (write(e.go, &stop, sizeof(stop)) != sizeof(stop))
			fail("eventfd write: %s", strerror(errno));
		pthread_join(thr, NULL);
	}
	printf("bench=epoll mode=%s fds=%d producer=%s rounds=%llu secs=%.3f rounds_s=%.1f events_s=%.1f cpu_pct=%.1f waits_round=%.2f\n",
	       names[mode], nfds, producer ? "thread" : "self", rounds, b.t - a.t,
	       rounds / (b.t - a.t),
	       rounds * nfds / (b.t - a.t), cpu_pct(&a, &b),
	       rounds ? (double)waits / rounds : 0.0);
}

/* ------------------------------------------------------------------------ */
/* bdev: buffered I/O on a block device, normal vs RWF_DONTCACHE             */

/* "file" of the memory cgroup this process is in, in MB; -1 if unknown */
static double memcg_file_mb(void)
{
	char line[512], path[600], *p;
	double mb = -1;
	FILE *f;

	f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return -1;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	if (!p || strncmp(line, "0::", 3))
		return -1;
	line[strcspn(line, "\n")] = 0;
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.stat", line + 3);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;

		if (sscanf(line, "file %llu", &v) == 1) {
			mb = v / 1048576.0;
			break;
		}
	}
	fclose(f);
	return mb;
}

static void bench_bdev(const char *dev, bool write_op, bool dontcache, double secs,
		       unsigned long long span_mb, unsigned int bs_kb, unsigned int qd)
{
	unsigned long long size, span, bs = bs_kb * 1024ULL, off = 0, bytes = 0;
	unsigned long long sec_bytes[600] = { 0 };
	unsigned int i, inflight = 0, nsec;
	struct io_uring_cqe cqe;
	struct sample a, b;
	char *bufs;
	struct ring r;
	int fd;

	fd = open(dev, O_RDWR);
	if (fd < 0)
		fail("open %s: %s", dev, strerror(errno));
	if (ioctl(fd, BLKGETSIZE64, &size))
		fail("%s: BLKGETSIZE64: %s", dev, strerror(errno));
	span = span_mb << 20;
	if (span > size)
		fail("%s: %llu MB span, device has %llu MB", dev, span_mb, size >> 20);
	if (span < bs * qd)
		fail("span smaller than QD blocks");
	/* start cold: no cached pages of the device */
	fsync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	ioctl(fd, BLKFLSBUF, 0);

	bufs = aligned_alloc(4096, bs * qd);
	if (!bufs)
		fail("out of memory");
	memset(bufs, 0x5a, bs * qd);
	ring_setup(&r, qd, 0);

	take(&a);
	for (;;) {
		double t = now() - a.t;

		while (inflight < qd && t < secs) {
			struct io_uring_sqe *sqe = ring_sqe(&r);
			unsigned int slot = (off / bs) % qd;

			sqe->opcode = write_op ? IORING_OP_WRITE : IORING_OP_READ;
			sqe->fd = fd;
			sqe->addr = (unsigned long)(bufs + slot * bs);
			sqe->len = bs;
			sqe->off = off;
			sqe->rw_flags = dontcache ? RWF_DONTCACHE : 0;
			off = (off + bs) % span;
			inflight++;
		}
		if (!inflight)
			break;
		enter(&r, 1);
		t = now() - a.t;
		while (ring_cqe(&r, &cqe)) {
			inflight--;
			if (cqe.res < 0)
				fail("%s %s: %s", write_op ? "write" : "read",
				     dontcache ? "RWF_DONTCACHE" : "", strerror(-cqe.res));
			bytes += cqe.res;
			if (t < 600)
				sec_bytes[(unsigned int)t] += cqe.res;
		}
	}
	if (write_op && fdatasync(fd))
		fail("fdatasync: %s", strerror(errno));
	take(&b);

	printf("bench=bdev op=%s mode=%s bs_kb=%u qd=%u span_mb=%llu secs=%.3f mb=%.1f mbs=%.1f per_sec=",
	       write_op ? "write" : "read", dontcache ? "dontcache" : "normal", bs_kb, qd,
	       span_mb, b.t - a.t, bytes / 1048576.0, bytes / 1048576.0 / (b.t - a.t));
	nsec = (unsigned int)secs;
	for (i = 0; i < nsec && i < 600; i++)
		printf("%s%.1f", i ? "," : "", sec_bytes[i] / 1048576.0);
	printf(" cached_mb=%.1f cpu_pct=%.1f\n", memcg_file_mb(), cpu_pct(&a, &b));
	close(r.fd);
	close(fd);
	free(bufs);
}

/* ------------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: beyond_bench flood -q QD [-t SECONDS]\n"
		"       beyond_bench epoll -m sys|single|multi -n FDS [-p] [-t SECONDS]\n"
		"       beyond_bench bdev -d DEV -w read|write -m normal|dontcache\n"
		"                    [-t SECONDS] [-s SPAN_MB] [-b BLOCK_KB] [-q QD]\n");
	exit(2);
}

static unsigned long num(const char *s, unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		fail("'%s': want a number from %lu to %lu", s, min, max);
	return v;
}

int main(int argc, char **argv)
{
	const char *cmd, *mode = NULL, *dev = NULL, *what = NULL;
	unsigned long qd = 0, nfds = 1, span = 512, bs = 256;
	bool producer = false;
	double secs = 2;
	char *end;
	int c;

	if (argc < 2)
		usage();
	cmd = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "q:t:m:n:d:w:s:b:p")) != -1) {
		switch (c) {
		case 'q': qd = num(optarg, 1, MAX_QD); break;
		case 'n': nfds = num(optarg, 1, MAX_FDS); break;
		case 's': span = num(optarg, 1, 1 << 20); break;
		case 'b': bs = num(optarg, 4, 16384); break;
		case 'm': mode = optarg; break;
		case 'p': producer = true; break;
		case 'd': dev = optarg; break;
		case 'w': what = optarg; break;
		case 't':
			secs = strtod(optarg, &end);
			if (*end || !(secs > 0 && secs <= 600))
				fail("-t '%s': seconds, up to 600", optarg);
			break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();

	if (!strcmp(cmd, "flood")) {
		if (!qd)
			usage();
		bench_flood(qd, secs);
	} else if (!strcmp(cmd, "epoll")) {
		int m;

		if (!mode)
			usage();
		if (!strcmp(mode, "sys"))
			m = EP_SYS;
		else if (!strcmp(mode, "single"))
			m = EP_SINGLE;
		else if (!strcmp(mode, "multi"))
			m = EP_MULTI;
		else
			fail("-m '%s': sys, single or multi", mode);
		bench_epoll(m, nfds, producer, secs);
	} else if (!strcmp(cmd, "bdev")) {
		if (!dev || !what || !mode)
			usage();
		if (strcmp(what, "read") && strcmp(what, "write"))
			fail("-w '%s': read or write", what);
		if (strcmp(mode, "normal") && strcmp(mode, "dontcache"))
			fail("-m '%s': normal or dontcache", mode);
		bench_bdev(dev, !strcmp(what, "write"), !strcmp(mode, "dontcache"), secs,
			   span, bs, qd ? qd : 8);
	} else {
		usage();
	}
	return 0;
}
