// SPDX-License-Identifier: GPL-2.0
/*
 * Submission path tests for the io_uring handoff series: the paths the
 * series reshapes (io_uring_enter() with and without GETEVENTS, the
 * submission plug, provided-buffer selection inline and from io-wq,
 * per-task ring contexts) must keep their results.
 *
 * Run as root (the plug test uses a loop device) from a directory on a real
 * filesystem (ext4 in 'make test').
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/loop.h>
#include <linux/stat.h>

#include "../kselftest_harness.h"
#include "iou.h"

#define NR 8

static int make_file(const char *name, size_t len, int flags)
{
	char buf[4096];
	int fd;

	fd = open(name, O_RDWR | O_CREAT | O_TRUNC | flags, 0644);
	if (fd < 0)
		return -1;
	memset(buf, 0xa5, sizeof(buf));
	for (size_t off = 0; off < len; off += sizeof(buf)) {
		if (pwrite(fd, buf, sizeof(buf), off) != sizeof(buf)) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* fsync and statx batch, submitted and reaped in one io_uring_enter() */
TEST(fsync_statx_one_enter)
{
	struct statx stx[NR];
	struct io_uring_cqe cqe;
	unsigned int seen = 0;
	struct iou r;
	struct stat st;
	int fd, i;

	ASSERT_EQ(0, iou_init(&r, 2 * NR, 0));
	fd = make_file("submit_test.fsync", 64 * 1024, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fstat(fd, &st));
	for (i = 0; i < NR; i++) {
		struct io_uring_sqe *sqe = iou_sqe(&r);

		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, i);
		sqe = iou_sqe(&r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_STATX, AT_FDCWD, "submit_test.fsync",
			 STATX_BASIC_STATS, (unsigned long)&stx[i], 100 + i);
	}
	ASSERT_EQ(2 * NR, iou_submit(&r, 2 * NR));
	while (iou_cqe(&r, &cqe)) {
		EXPECT_EQ(0, cqe.res) TH_LOG("user_data %llu", cqe.user_data);
		seen++;
	}
	EXPECT_EQ(2 * NR, seen);
	for (i = 0; i < NR; i++) {
		EXPECT_EQ(st.st_ino, stx[i].stx_ino);
		EXPECT_EQ(64 * 1024, stx[i].stx_size);
	}
	close(fd);
	unlink("submit_test.fsync");
	iou_exit(&r);
}

/* submit without GETEVENTS, then wait in a separate io_uring_enter() */
TEST(submit_then_wait)
{
	struct io_uring_cqe cqe;
	__u64 mask = 0;
	struct iou r;
	int i;

	ASSERT_EQ(0, iou_init(&r, NR, 0));
	for (i = 0; i < NR; i++) {
		struct io_uring_sqe *sqe = iou_sqe(&r);

		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_NOP, -1, NULL, 0, 0, i);
	}
	ASSERT_EQ(NR, iou_submit(&r, 0));
	for (i = 0; i < NR; i++) {
		ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
		EXPECT_EQ(0, cqe.res);
		mask |= 1ULL << cqe.user_data;
	}
	EXPECT_EQ((1ULL << NR) - 1, mask);
	iou_exit(&r);
}

/*
 * Provided-buffer selection from io-wq (IOSQE_ASYNC), where the buffer
 * ring lock is taken and dropped by the selection helper itself.
 */
TEST(buffer_select_from_iowq)
{
	static char bufs[NR][64];
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	struct iou r;
	int pfd[2], i;

	ASSERT_EQ(0, iou_init(&r, 2 * NR, 0));
	ASSERT_EQ(0, pipe(pfd));
	sqe = iou_sqe(&r);
	iou_prep(sqe, IORING_OP_PROVIDE_BUFFERS, NR, bufs, sizeof(bufs[0]), 0, 999);
	sqe->buf_group = 7;
	ASSERT_EQ(1, iou_submit(&r, 1));
	ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
	ASSERT_EQ(0, cqe.res);

	for (i = 0; i < NR; i++) {
		char msg[16];
		int bid;

		snprintf(msg, sizeof(msg), "msg-%d", i);
		ASSERT_EQ((ssize_t)strlen(msg), write(pfd[1], msg, strlen(msg)));
		sqe = iou_sqe(&r);
		iou_prep(sqe, IORING_OP_READ, pfd[0], NULL, sizeof(bufs[0]), -1, i);
		sqe->flags = IOSQE_BUFFER_SELECT | IOSQE_ASYNC;
		sqe->buf_group = 7;
		ASSERT_EQ(1, iou_submit(&r, 1));
		ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
		ASSERT_EQ((int)strlen(msg), cqe.res);
		ASSERT_TRUE(cqe.flags & IORING_CQE_F_BUFFER);
		bid = cqe.flags >> IORING_CQE_BUFFER_SHIFT;
		ASSERT_LT(bid, NR);
		EXPECT_EQ(0, memcmp(bufs[bid], msg, strlen(msg)));
	}
	/* all buffers consumed: the next read must fail with ENOBUFS */
	ASSERT_EQ(1, write(pfd[1], "x", 1));
	sqe = iou_sqe(&r);
	iou_prep(sqe, IORING_OP_READ, pfd[0], NULL, sizeof(bufs[0]), -1, 1000);
	sqe->flags = IOSQE_BUFFER_SELECT | IOSQE_ASYNC;
	sqe->buf_group = 7;
	ASSERT_EQ(1, iou_submit(&r, 1));
	ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
	EXPECT_EQ(-ENOBUFS, cqe.res);
	close(pfd[0]);
	close(pfd[1]);
	iou_exit(&r);
}

/*
 * IORING_OP_SEND with IOSQE_BUFFER_SELECT is the one user of
 * io_buffers_select() (io_send_select_buffer() in net.c): it sends one
 * buffer of the group, or with IORING_RECVSEND_BUNDLE as many as the group
 * has, in ring order, and reports the first buffer ID in the CQE. Issued
 * from io-wq, the selection takes uring_lock itself, through
 * io_ring_submit_lock(), and must drop it on every way out: a selection
 * from a ring, from a legacy group, an empty ring (ENOBUFS), a group that
 * does not exist (ENOENT). A lock left held makes the next io_uring_enter()
 * of the ring sleep in mutex_lock() for good, so the requests run in a child
 * process that the test waits for with a timeout.
 */
#define SEL_BGID	3	/* the provided buffer ring */
#define SEL_LEGACY_BGID	4	/* IORING_OP_PROVIDE_BUFFERS buffers */
#define SEL_NO_BGID	9	/* never registered */
#define SEL_NBUF	8	/* buffers in the ring, a power of two */
#define SEL_LEGACY_NBUF	2
#define SEL_LEN		64	/* bytes per buffer */
#define SEL_DIRTY	(256 * 1024)	/* dirty data per blocking fsync */
#define SEL_TIMEOUT_MS	20000	/* for all of a child's requests */
#define STAGE_LEN	128

struct sel {
	struct iou r;
	struct io_uring_buf_ring *br;
	unsigned short tail;		/* the ring tail we publish */
	int sv[2];			/* sends on sv[0], receives on sv[1] */
	unsigned int sqe_flags;		/* 0 or IOSQE_ASYNC, for the sends */
	unsigned int sends;		/* sends submitted, their user_data */
	char *stage;			/* what the child does, for the parent */
};

static char sel_mem[SEL_NBUF][SEL_LEN];
static char sel_legacy[SEL_LEGACY_NBUF][SEL_LEN];

static void sel_stage(struct sel *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->stage, STAGE_LEN, fmt, ap);
	va_end(ap);
}

/*
 * The field "<name>=<n>" of the line "<key>:\t..." in the ring's fdinfo, or
 * -1 when there is none (a kernel without the handoff counters).
 */
static long fdinfo_field(int ringfd, const char *key, const char *name)
{
	size_t klen = strlen(key), nlen = strlen(name), cap = 0;
	char path[64], *line = NULL, *p;
	long val = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ringfd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, key, klen) || line[klen] != ':')
			continue;
		for (p = line + klen + 1; (p = strstr(p, name)); p += nlen) {
			if ((p[-1] == ' ' || p[-1] == '\t') && p[nlen] == '=') {
				val = strtol(p + nlen + 1, NULL, 10);
				break;
			}
		}
		break;
	}
	free(line);
	fclose(f);
	return val;
}

/* kernel.io_uring_handoff, or -1 without it */
static int sysctl_handoff(void)
{
	char buf[16] = "";
	int fd, n;

	fd = open("/proc/sys/kernel/io_uring_handoff", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : -1;
}

/* Put buffer @bid in the ring; the kernel sees it at sel_publish(). */
static void sel_give(struct sel *s, unsigned short bid)
{
	struct io_uring_buf *buf = &s->br->bufs[s->tail & (SEL_NBUF - 1)];

	buf->addr = (unsigned long)sel_mem[bid];
	buf->len = SEL_LEN;
	buf->bid = bid;
	s->tail++;
}

static void sel_publish(struct sel *s)
{
	__atomic_store_n(&s->br->tail, s->tail, __ATOMIC_RELEASE);
}

static void sel_setup(struct __test_metadata *_metadata, struct sel *s,
		      unsigned int sqe_flags, char *stage)
{
	struct io_uring_buf_reg reg;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	unsigned int i, j;

	memset(s, 0, sizeof(*s));
	s->stage = stage;
	s->sqe_flags = sqe_flags;
	for (i = 0; i < SEL_NBUF; i++)
		for (j = 0; j < SEL_LEN; j++)
			sel_mem[i][j] = (char)(i * 37 + j * 3 + 1);
	for (i = 0; i < SEL_LEGACY_NBUF; i++)
		for (j = 0; j < SEL_LEN; j++)
			sel_legacy[i][j] = (char)(i * 53 + j * 5 + 200);

	ASSERT_EQ(0, iou_init(&s->r, 16, 0));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->sv));
	s->br = mmap(NULL, SEL_NBUF * sizeof(struct io_uring_buf),
		     PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, s->br);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (unsigned long)s->br;
	reg.ring_entries = SEL_NBUF;
	reg.bgid = SEL_BGID;
	ASSERT_EQ(0, syscall(__NR_io_uring_register, s->r.fd,
			     IORING_REGISTER_PBUF_RING, &reg, 1))
		TH_LOG("IORING_REGISTER_PBUF_RING: %s", strerror(errno));
	for (i = 0; i < SEL_NBUF; i++)
		sel_give(s, i);
	sel_publish(s);

	/* a legacy group too, buffer IDs 0 and 1 */
	sqe = iou_sqe(&s->r);
	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_PROVIDE_BUFFERS, SEL_LEGACY_NBUF, sel_legacy,
		 SEL_LEN, 0, 999);
	sqe->buf_group = SEL_LEGACY_BGID;
	ASSERT_EQ(1, iou_submit(&s->r, 1));
	ASSERT_EQ(0, iou_wait_cqe(&s->r, &cqe));
	ASSERT_EQ(0, cqe.res);
}

/*
 * One IORING_OP_SEND from group @bgid of up to @len bytes (0: what the
 * buffers hold), submitted and waited for in one io_uring_enter(); its @nr
 * CQEs go to @cqe.
 */
static void sel_send(struct __test_metadata *_metadata, struct sel *s,
		     unsigned short bgid, unsigned int len, bool bundle,
		     struct io_uring_cqe *cqe, unsigned int nr)
{
	struct io_uring_sqe *sqe = iou_sqe(&s->r);
	__u64 ud = ++s->sends;
	unsigned int i;

	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_SEND, s->sv[0], NULL, len, 0, ud);
	sqe->flags = IOSQE_BUFFER_SELECT | s->sqe_flags;
	sqe->buf_group = bgid;
	if (bundle)
		sqe->ioprio = IORING_RECVSEND_BUNDLE;
	sel_stage(s, "send %u: group %u, len %u%s%s", s->sends, bgid, len,
		  bundle ? ", bundle" : "",
		  s->sqe_flags & IOSQE_ASYNC ? ", IOSQE_ASYNC" : "");
	ASSERT_EQ(1, iou_submit(&s->r, nr)) TH_LOG("%s", s->stage);
	for (i = 0; i < nr; i++) {
		ASSERT_EQ(0, iou_wait_cqe(&s->r, &cqe[i]));
		ASSERT_EQ(ud, cqe[i].user_data)
			TH_LOG("%s: CQE %u of %u", s->stage, i + 1, nr);
	}
}

/* @cqe sent @nbufs whole buffers of the ring, the first one @bid */
static void sel_expect_bufs(struct __test_metadata *_metadata, struct sel *s,
			    const struct io_uring_cqe *cqe, unsigned int bid,
			    unsigned int nbufs, bool more)
{
	__u32 flags = IORING_CQE_F_BUFFER | bid << IORING_CQE_BUFFER_SHIFT;

	if (more)
		flags |= IORING_CQE_F_MORE;
	ASSERT_EQ((int)(nbufs * SEL_LEN), cqe->res)
		TH_LOG("%s: %s", s->stage,
		       cqe->res < 0 ? strerror(-cqe->res) : "sent the wrong length");
	EXPECT_EQ(flags, cqe->flags)
		TH_LOG("%s: buffer %u, flags 0x%x; expected buffer %u, flags 0x%x",
		       s->stage, cqe->flags >> IORING_CQE_BUFFER_SHIFT,
		       cqe->flags & ((1U << IORING_CQE_BUFFER_SHIFT) - 1), bid,
		       flags & ((1U << IORING_CQE_BUFFER_SHIFT) - 1));
}

/* @cqe selected nothing: it failed with @err and names no buffer */
static void sel_expect_err(struct __test_metadata *_metadata, struct sel *s,
			   const struct io_uring_cqe *cqe, int err)
{
	EXPECT_EQ(err, cqe->res)
		TH_LOG("%s: %s", s->stage,
		       cqe->res < 0 ? strerror(-cqe->res) : "sent data");
	EXPECT_EQ(0U, cqe->flags) TH_LOG("%s", s->stage);
}

/* The receiving end holds exactly the @len bytes at @data. */
static void sel_expect_data(struct __test_metadata *_metadata, struct sel *s,
			    const char *data, size_t len)
{
	char buf[SEL_NBUF * SEL_LEN + 1];
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = recv(s->sv[1], buf + got, sizeof(buf) - got, MSG_DONTWAIT);
		ASSERT_LT(0, n)
			TH_LOG("%s: %zu of %zu bytes received", s->stage, got, len);
		got += n;
	}
	ASSERT_EQ(len, got) TH_LOG("%s: more data than the CQEs reported", s->stage);
	if (len)
		EXPECT_EQ(0, memcmp(buf, data, len))
			TH_LOG("%s: not the data of the buffers in the CQE", s->stage);
	EXPECT_EQ(-1, recv(s->sv[1], buf, sizeof(buf), MSG_DONTWAIT))
		TH_LOG("%s: more data than the CQEs reported", s->stage);
}

/* Entries into the handoff hook: it either hands off or says why not. */
static long hook_entries(int ringfd)
{
	static const char * const refused[] = { "lock", "prepare", "worker" };
	long n = fdinfo_field(ringfd, "Handoff", "handoffs"), v;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(refused) && n >= 0; i++) {
		v = fdinfo_field(ringfd, "HandoffRefused", refused[i]);
		n = v < 0 ? -1 : n + v;
	}
	return n;
}

/*
 * With the handoff series, io_ring_submit_lock() sections are counted
 * (ctx->submit_lock_depth), and the hook that hands a blocked inline issue
 * off refuses ("lock") while one is open. A selection that left its section
 * open, as io_buffers_select() did when it dropped uring_lock by hand, makes
 * that refusal permanent for the ring. At kernel.io_uring_handoff=1, block
 * in inline fsyncs on the same ring until one gets to the hook, and check
 * that it found no section open.
 */
static void sel_expect_sections_closed(struct __test_metadata *_metadata,
				       struct sel *s)
{
	long lock0, reached0, reached;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	char *buf;
	int fd, i;

	reached0 = hook_entries(s->r.fd);
	lock0 = fdinfo_field(s->r.fd, "HandoffRefused", "lock");
	if (reached0 < 0 || lock0 < 0 || sysctl_handoff() != 1) {
		TH_LOG("not at kernel.io_uring_handoff=1: lock sections not checked");
		return;
	}
	fd = open("submit_test.sel", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_LE(0, fd);
	buf = malloc(SEL_DIRTY);
	ASSERT_NE(NULL, buf);
	reached = reached0;
	for (i = 0; i < 10 && reached == reached0; i++) {
		memset(buf, i + 1, SEL_DIRTY);
		ASSERT_EQ(SEL_DIRTY, pwrite(fd, buf, SEL_DIRTY, 0));
		sqe = iou_sqe(&s->r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, 0xf000 + i);
		sel_stage(s, "blocking fsync %d", i);
		ASSERT_EQ(1, iou_submit(&s->r, 1));
		ASSERT_EQ(0, iou_wait_cqe(&s->r, &cqe));
		ASSERT_EQ(0, cqe.res) TH_LOG("fsync: %s", strerror(-cqe.res));
		reached = hook_entries(s->r.fd);
		/* a new spare worker needs to reach its idle wait */
		usleep(20 * 1000);
	}
	EXPECT_EQ(lock0, fdinfo_field(s->r.fd, "HandoffRefused", "lock"))
		TH_LOG("the handoff hook found a uring_lock section left open");
	/* the check above means something only if an fsync got to the hook */
	EXPECT_NE(reached0, reached)
		TH_LOG("no fsync blocked in the handoff hook in %d tries", i);
	free(buf);
	close(fd);
	unlink("submit_test.sel");
}

static void sel_run(struct __test_metadata *_metadata, char *stage,
		    unsigned int sqe_flags)
{
	bool iowq = sqe_flags & IOSQE_ASYNC;
	struct io_uring_cqe cqe[2];
	struct io_uring_sqe *sqe;
	long queued0, queued;
	unsigned int bid;
	struct sel s;

	sel_setup(_metadata, &s, sqe_flags, stage);
	queued0 = fdinfo_field(s.r.fd, "Handoff", "iowq");

	/*
	 * Single buffers, in ring order. A bundle is multishot, and io-wq
	 * doesn't issue those (io_wq_submit_work() arms poll instead): from
	 * io-wq, every buffer goes in a send of its own.
	 */
	for (bid = 0; bid < (iowq ? SEL_NBUF : 2); bid++) {
		sel_send(_metadata, &s, SEL_BGID, 0, false, cqe, 1);
		sel_expect_bufs(_metadata, &s, cqe, bid, 1, false);
		sel_expect_data(_metadata, &s, sel_mem[bid], SEL_LEN);
	}
	if (!iowq) {
		/* a bundle takes all the ring has left */
		sel_send(_metadata, &s, SEL_BGID, 0, true, cqe, 1);
		sel_expect_bufs(_metadata, &s, cqe, 2, SEL_NBUF - 2, false);
		sel_expect_data(_metadata, &s, sel_mem[2],
				(SEL_NBUF - 2) * SEL_LEN);
	}

	/* the ring is empty */
	sel_send(_metadata, &s, SEL_BGID, 0, false, cqe, 1);
	sel_expect_err(_metadata, &s, cqe, -ENOBUFS);
	sel_expect_data(_metadata, &s, NULL, 0);

	if (!iowq) {
		/*
		 * All buffers back. A bundle capped at three buffers' worth
		 * posts them with IORING_CQE_F_MORE and selects again, in the
		 * same issue, for the five left.
		 */
		for (bid = 0; bid < SEL_NBUF; bid++)
			sel_give(&s, bid);
		sel_publish(&s);
		sel_send(_metadata, &s, SEL_BGID, 3 * SEL_LEN, true, cqe, 2);
		sel_expect_bufs(_metadata, &s, &cqe[0], 0, 3, true);
		sel_expect_bufs(_metadata, &s, &cqe[1], 3, SEL_NBUF - 3, false);
		sel_expect_data(_metadata, &s, sel_mem[0], SEL_NBUF * SEL_LEN);
	}

	/* a legacy group hands out its buffers in the order given */
	sel_send(_metadata, &s, SEL_LEGACY_BGID, 0, false, cqe, 1);
	sel_expect_bufs(_metadata, &s, cqe, 0, 1, false);
	sel_expect_data(_metadata, &s, sel_legacy[0], SEL_LEN);

	/* no such group */
	sel_send(_metadata, &s, SEL_NO_BGID, 0, false, cqe, 1);
	sel_expect_err(_metadata, &s, cqe, -ENOENT);
	sel_expect_data(_metadata, &s, NULL, 0);

	/* the ring still takes submissions: uring_lock is free */
	sel_stage(&s, "NOP after the sends");
	sqe = iou_sqe(&s.r);
	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_NOP, -1, NULL, 0, 0, 0xff);
	ASSERT_EQ(1, iou_submit(&s.r, 1));
	ASSERT_EQ(0, iou_wait_cqe(&s.r, cqe));
	ASSERT_EQ(0xffULL, cqe[0].user_data);
	ASSERT_EQ(0, cqe[0].res);

	/* where the sends ran, if the ring counts its io-wq requests */
	queued = fdinfo_field(s.r.fd, "Handoff", "iowq");
	if (queued0 >= 0 && queued >= 0)
		EXPECT_EQ(iowq ? (long)s.sends : 0, queued - queued0)
			TH_LOG("%ld of %u sends went to io-wq", queued - queued0,
			       s.sends);

	sel_expect_sections_closed(_metadata, &s);
	close(s.sv[0]);
	close(s.sv[1]);
	iou_exit(&s.r);
}

/*
 * Run @fn in a child and wait up to SEL_TIMEOUT_MS for it. A request that
 * left uring_lock held makes the child's next io_uring_enter() sleep in
 * mutex_lock() for good, where no signal reaches it: this process has no
 * ring, and fails with the stage the child got stuck at rather than hang.
 */
static void run_bounded(struct __test_metadata *_metadata,
			void (*fn)(struct __test_metadata *, char *,
				   unsigned int),
			unsigned int arg)
{
	int status = 0, ms = 0;
	pid_t pid, ret;
	char *stage;

	stage = mmap(NULL, STAGE_LEN, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, stage);
	snprintf(stage, STAGE_LEN, "setup");
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		fn(_metadata, stage, arg);
		_exit(_metadata->exit_code);
	}
	while ((ret = waitpid(pid, &status, WNOHANG)) == 0 &&
	       ms < SEL_TIMEOUT_MS) {
		usleep(10 * 1000);
		ms += 10;
	}
	if (!ret)
		kill(pid, SIGKILL);
	ASSERT_NE(0, ret) {
		TH_LOG("no progress in %d s at: %s (uring_lock left held?)",
		       SEL_TIMEOUT_MS / 1000, stage);
	}
	ASSERT_EQ(pid, ret);
	if (WIFEXITED(status) && WEXITSTATUS(status) == KSFT_SKIP)
		SKIP(return, "skipped at: %s", stage);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == KSFT_PASS) {
		TH_LOG("failed at: %s", stage);
	}
	munmap(stage, STAGE_LEN);
}

/* buffer-select sends and bundles issued inline, from the submitter */
TEST(send_buffer_select)
{
	run_bounded(_metadata, sel_run, 0);
}

/* buffer-select sends issued from io-wq, each one a new uring_lock section */
TEST(send_buffer_select_from_iowq)
{
	run_bounded(_metadata, sel_run, IOSQE_ASYNC);
}

/*
 * The submission plug. A batch of O_DIRECT writes to consecutive blocks of
 * a block device, submitted in one io_uring_enter(), is merged into a
 * single request in the plug before the device sees any of it. Nothing
 * else merges them here: the loop device runs without an I/O scheduler, and
 * the control, as many writes in flight together but submitted one per
 * io_uring_enter() (no plug for fewer than three SQEs), reaches it as one
 * request per write. The requests and merges come from /sys/block/loopN/stat.
 */
#define PLUG_SPAN	(1024 * 1024)	/* the loop device's size */

struct wstat {
	unsigned long long ios, merges, sectors;
};

/* The write fields of /sys/block/@dev/stat; 0 or -1. */
static int write_stat(const char *dev, struct wstat *st)
{
	unsigned long long v[7];
	char path[64];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/sys/block/%s/stat", dev);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		   &v[2], &v[3], &v[4], &v[5], &v[6]);
	fclose(f);
	if (n != 7)
		return -1;
	st->ios = v[4];
	st->merges = v[5];
	st->sectors = v[6];
	return 0;
}

/*
 * The I/O scheduler of @dev goes to @cur ("[mq-deadline] kyber none" gives
 * "mq-deadline"); then, if @want is not NULL, @dev switches to @want.
 * Returns 0 or -1.
 */
static int queue_sched(const char *dev, char *cur, size_t size, const char *want)
{
	char path[96], buf[256], *b, *e;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/scheduler", dev);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		goto fail;
	buf[n] = '\0';
	b = strchr(buf, '[');
	e = b ? strchr(b, ']') : NULL;
	if (b && e) {
		b++;
	} else {
		b = buf;
		e = b + strcspn(b, "\n ");
	}
	if ((size_t)(e - b) >= size)
		goto fail;
	memcpy(cur, b, e - b);
	cur[e - b] = '\0';
	if (want && strcmp(cur, want) &&
	    write(fd, want, strlen(want)) != (ssize_t)strlen(want))
		goto fail;
	close(fd);
	return 0;
fail:
	close(fd);
	return -1;
}

/* a batch of writes goes through the submission plug and lands where it should */
TEST(write_batch_plugged)
{
	static char wbuf[2][NR][4096] __attribute__((aligned(4096)));
	static char rbuf[4096] __attribute__((aligned(4096)));
	struct wstat st0, st1, st2;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	struct loop_config cfg;
	char dev[32], path[64], sched[32], none[32];
	int backing, ctl, lfd, fd, lnum, i, j;
	unsigned int seen = 0;
	struct iou r;

	if (geteuid())
		SKIP(return, "needs root for a loop device");
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		SKIP(return, "no /dev/loop-control (CONFIG_BLK_DEV_LOOP)");
	lnum = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	ASSERT_LE(0, lnum);
	snprintf(dev, sizeof(dev), "loop%d", lnum);
	snprintf(path, sizeof(path), "/dev/%s", dev);

	backing = open("submit_test.plug", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_LE(0, backing);
	unlink("submit_test.plug");
	ASSERT_EQ(0, ftruncate(backing, PLUG_SPAN));
	lfd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, lfd) TH_LOG("%s: %s", path, strerror(errno));
	memset(&cfg, 0, sizeof(cfg));
	cfg.fd = backing;
	/* detached at the last close, however the test ends */
	cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
	ASSERT_EQ(0, ioctl(lfd, LOOP_CONFIGURE, &cfg))
		TH_LOG("LOOP_CONFIGURE %s: %s", path, strerror(errno));
	close(backing);
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
	close(lfd);

	ASSERT_EQ(0, queue_sched(dev, sched, sizeof(sched), "none"))
		TH_LOG("%s: cannot run without an I/O scheduler", dev);
	ASSERT_EQ(0, queue_sched(dev, none, sizeof(none), NULL));
	ASSERT_STREQ("none", none);
	ASSERT_EQ(0, iou_init(&r, NR, 0));
	for (i = 0; i < NR; i++) {
		memset(wbuf[0][i], 'A' + i, sizeof(wbuf[0][i]));
		memset(wbuf[1][i], 'a' + i, sizeof(wbuf[1][i]));
	}

	/* the batch: NR writes to blocks 0..NR-1 in one io_uring_enter() */
	ASSERT_EQ(0, write_stat(dev, &st0));
	for (i = 0; i < NR; i++) {
		sqe = iou_sqe(&r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_WRITE, fd, wbuf[0][i], 4096, i * 4096ULL, i);
	}
	ASSERT_EQ(NR, iou_submit(&r, NR));
	while (iou_cqe(&r, &cqe)) {
		EXPECT_EQ(4096, cqe.res) TH_LOG("write %llu: %s", cqe.user_data,
						cqe.res < 0 ? strerror(-cqe.res) : "short");
		seen++;
	}
	EXPECT_EQ(NR, seen);
	ASSERT_EQ(0, write_stat(dev, &st1));

	/*
	 * The control: blocks NR..2*NR-1, all in flight together as well,
	 * but one io_uring_enter() each.
	 */
	for (i = 0; i < NR; i++) {
		sqe = iou_sqe(&r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_WRITE, fd, wbuf[1][i], 4096,
			 (NR + i) * 4096ULL, NR + i);
		ASSERT_EQ(1, iou_submit(&r, 0));
	}
	for (i = 0; i < NR; i++) {
		ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
		EXPECT_EQ(4096, cqe.res) TH_LOG("write %llu: %s", cqe.user_data,
						cqe.res < 0 ? strerror(-cqe.res) : "short");
	}
	ASSERT_EQ(0, write_stat(dev, &st2));

	ksft_print_msg("%s: batch %llu requests %llu merges, control %llu requests %llu merges\n",
		       dev, st1.ios - st0.ios, st1.merges - st0.merges,
		       st2.ios - st1.ios, st2.merges - st1.merges);
	EXPECT_EQ(NR * 8ULL, st1.sectors - st0.sectors)
		TH_LOG("the batch did not reach %s as written", dev);
	EXPECT_EQ(1ULL, st1.ios - st0.ios)
		TH_LOG("the batch was not submitted under one plug");
	EXPECT_EQ(NR - 1ULL, st1.merges - st0.merges)
		TH_LOG("the batch was not submitted under one plug");
	EXPECT_EQ(NR * 8ULL, st2.sectors - st1.sectors)
		TH_LOG("the control did not reach %s as written", dev);
	EXPECT_EQ((unsigned long long)NR, st2.ios - st1.ios)
		TH_LOG("the control writes were merged: the counts prove nothing");
	EXPECT_EQ(0ULL, st2.merges - st1.merges)
		TH_LOG("the control writes were merged: the counts prove nothing");

	for (j = 0; j < 2; j++) {
		for (i = 0; i < NR; i++) {
			off_t off = (j * NR + i) * 4096LL;

			ASSERT_EQ(4096, pread(fd, rbuf, 4096, off));
			EXPECT_EQ(0, memcmp(rbuf, wbuf[j][i], 4096))
				TH_LOG("block %d", j * NR + i);
		}
	}
	iou_exit(&r);
	if (strcmp(sched, "none"))
		EXPECT_EQ(0, queue_sched(dev, none, sizeof(none), sched))
			TH_LOG("%s: cannot restore the scheduler %s", dev, sched);
	close(fd);
}

/* several rings per task: used, closed out of order, or left to exit */
TEST(many_rings_per_task)
{
	struct iou r[4];
	struct io_uring_cqe cqe;
	int status, i;
	pid_t pid;

	for (i = 0; i < 4; i++) {
		struct io_uring_sqe *sqe;

		ASSERT_EQ(0, iou_init(&r[i], 4, 0));
		sqe = iou_sqe(&r[i]);
		iou_prep(sqe, IORING_OP_NOP, -1, NULL, 0, 0, i);
		ASSERT_EQ(1, iou_submit(&r[i], 1));
		ASSERT_EQ(0, iou_wait_cqe(&r[i], &cqe));
		EXPECT_EQ(i, cqe.user_data);
	}
	iou_exit(&r[2]);
	iou_exit(&r[0]);

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* the child inherits nothing usable; it makes its own and exits */
		struct iou c[3];

		for (i = 0; i < 3; i++) {
			struct io_uring_sqe *sqe;

			if (iou_init(&c[i], 4, 0))
				_exit(1);
			sqe = iou_sqe(&c[i]);
			iou_prep(sqe, IORING_OP_NOP, -1, NULL, 0, 0, i);
			if (iou_submit(&c[i], 1) != 1)
				_exit(2);
		}
		_exit(0);	/* rings torn down by exit, not close */
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	iou_exit(&r[3]);
	iou_exit(&r[1]);
}

TEST_HARNESS_MAIN
