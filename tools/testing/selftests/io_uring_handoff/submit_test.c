// SPDX-License-Identifier: GPL-2.0
/*
 * Submission path tests for the io_uring handoff series: the paths the
 * series reshapes (io_uring_enter() with and without GETEVENTS, the
 * submission plug, provided-buffer selection from io-wq, per-task ring
 * contexts) must keep their results.
 *
 * Run from a directory on a real filesystem (ext4 in 'make test').
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* a batch of writes under the submission plug lands where it should */
TEST(write_batch_plugged)
{
	static char wbuf[NR][4096] __attribute__((aligned(4096)));
	static char rbuf[4096] __attribute__((aligned(4096)));
	struct io_uring_cqe cqe;
	unsigned int seen = 0;
	struct iou r;
	int fd, i;

	ASSERT_EQ(0, iou_init(&r, NR, 0));
	fd = make_file("submit_test.plug", NR * 4096, O_DIRECT);
	if (fd < 0)	/* no O_DIRECT on this filesystem: buffered still plugs */
		fd = make_file("submit_test.plug", NR * 4096, 0);
	ASSERT_LE(0, fd);
	for (i = 0; i < NR; i++) {
		struct io_uring_sqe *sqe = iou_sqe(&r);

		memset(wbuf[i], 'A' + i, sizeof(wbuf[i]));
		iou_prep(sqe, IORING_OP_WRITE, fd, wbuf[i], 4096, i * 4096ULL, i);
	}
	ASSERT_EQ(NR, iou_submit(&r, NR));
	while (iou_cqe(&r, &cqe)) {
		EXPECT_EQ(4096, cqe.res);
		seen++;
	}
	EXPECT_EQ(NR, seen);
	for (i = 0; i < NR; i++) {
		ASSERT_EQ(4096, pread(fd, rbuf, 4096, i * 4096));
		EXPECT_EQ(0, memcmp(rbuf, wbuf[i], 4096)) TH_LOG("block %d", i);
	}
	close(fd);
	unlink("submit_test.plug");
	iou_exit(&r);
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
