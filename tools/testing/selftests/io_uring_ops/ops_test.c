// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of io_uring features Linux 7.3 already has and that the series
 * builds on: single-shot IORING_OP_EPOLL_WAIT, and RWF_DONTCACHE buffered
 * I/O on a block device (FOP_DONTCACHE in block/fops.c).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/fs.h>
#include <linux/loop.h>

#include "../kselftest_harness.h"
#include "../io_uring_handoff/iou.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE	0x00000080
#endif

/* one armed IORING_OP_EPOLL_WAIT completes with the ready event */
TEST(epoll_wait_single_shot)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0x1234 };
	struct epoll_event out[8];
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	uint64_t one = 1;
	int epfd, efd;
	struct iou r;

	ASSERT_EQ(0, iou_init(&r, 4, 0));
	epfd = epoll_create1(0);
	efd = eventfd(0, EFD_NONBLOCK);
	ASSERT_LE(0, epfd);
	ASSERT_LE(0, efd);
	ASSERT_EQ(0, epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &ev));

	sqe = iou_sqe(&r);
	iou_prep(sqe, IORING_OP_EPOLL_WAIT, epfd, out, 8, 0, 7);
	ASSERT_EQ(1, iou_submit(&r, 0));
	/* nothing is ready yet: the request must wait */
	usleep(100 * 1000);
	ASSERT_FALSE(iou_cqe(&r, &cqe));

	ASSERT_EQ(sizeof(one), write(efd, &one, sizeof(one)));
	ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
	EXPECT_EQ(7, cqe.user_data);
	ASSERT_EQ(1, cqe.res);
	EXPECT_EQ(0x1234, out[0].data.u64);
	EXPECT_TRUE(out[0].events & EPOLLIN);
	/* single shot: no further completion */
	EXPECT_FALSE(cqe.flags & IORING_CQE_F_MORE);
	close(efd);
	close(epfd);
	iou_exit(&r);
}

/* IORING_OP_EPOLL_WAIT takes no flags in 7.3: rejected with EINVAL */
TEST(epoll_wait_rejects_unknown_flags)
{
	struct epoll_event out[4];
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	struct iou r;
	int epfd;

	ASSERT_EQ(0, iou_init(&r, 4, 0));
	epfd = epoll_create1(0);
	ASSERT_LE(0, epfd);
	sqe = iou_sqe(&r);
	iou_prep(sqe, IORING_OP_EPOLL_WAIT, epfd, out, 4, 0, 1);
	sqe->rw_flags = 0x80000000;
	ASSERT_EQ(1, iou_submit(&r, 1));
	ASSERT_EQ(0, iou_wait_cqe(&r, &cqe));
	EXPECT_EQ(-EINVAL, cqe.res);
	close(epfd);
	iou_exit(&r);
}

#define BDEV_SIZE	(32 << 20)
#define CHUNK		(256 << 10)

FIXTURE(bdev) {
	int backing, loop, lnum;
	struct iou r;
	char *buf;
};

FIXTURE_SETUP(bdev)
{
	char path[64];
	int ctl;

	self->loop = -1;
	if (geteuid())
		SKIP(return, "needs root for a loop device");
	self->backing = open("ops_test.backing", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, self->backing);
	ASSERT_EQ(0, ftruncate(self->backing, BDEV_SIZE));
	ctl = open("/dev/loop-control", O_RDWR);
	if (ctl < 0)
		SKIP(return, "no /dev/loop-control (CONFIG_BLK_DEV_LOOP)");
	self->lnum = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	ASSERT_LE(0, self->lnum);
	snprintf(path, sizeof(path), "/dev/loop%d", self->lnum);
	self->loop = open(path, O_RDWR);
	ASSERT_LE(0, self->loop);
	ASSERT_EQ(0, ioctl(self->loop, LOOP_SET_FD, self->backing));
	ASSERT_EQ(0, iou_init(&self->r, 8, 0));
	self->buf = aligned_alloc(4096, CHUNK);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(bdev)
{
	if (self->loop < 0)
		return;
	iou_exit(&self->r);
	ioctl(self->loop, LOOP_CLR_FD, 0);
	close(self->loop);
	close(self->backing);
	unlink("ops_test.backing");
	free(self->buf);
}

/* one buffered I/O through io_uring on the block device, then fsync */
static int bdev_io(struct iou *r, int op, int fd, void *buf, __u64 off, int rwf)
{
	struct io_uring_sqe *sqe = iou_sqe(r);
	struct io_uring_cqe cqe;

	iou_prep(sqe, op, fd, buf, CHUNK, off, off);
	sqe->rw_flags = rwf;
	if (iou_submit(r, 1) != 1 || iou_wait_cqe(r, &cqe))
		return -EIO;
	return cqe.res;
}

/* pages of the device's page cache in [0, len) that are resident */
static long resident_pages(int fd, size_t len)
{
	size_t n = len / 4096;
	unsigned char *vec = malloc(n);
	long count = 0;
	void *map;

	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED || !vec)
		return -1;
	if (mincore(map, len, vec))
		count = -1;
	for (size_t i = 0; count >= 0 && i < n; i++)
		count += vec[i] & 1;
	munmap(map, len);
	free(vec);
	return count;
}

static void fill(char *buf, int seed)
{
	for (int i = 0; i < CHUNK; i++)
		buf[i] = (char)(seed * 31 + i * 7);
}

/*
 * RWF_DONTCACHE writes and reads on a block device return the right data
 * and leave (almost) nothing in the page cache once written back, unlike
 * plain buffered I/O on the same device.
 */
TEST_F(bdev, dontcache_drops_pages)
{
	const size_t span = 16 * CHUNK;
	long plain, dontcache;
	char *check;

	/* plain buffered writes stay cached after fsync: the reference */
	for (int i = 0; i < 16; i++) {
		fill(self->buf, i);
		ASSERT_EQ(CHUNK, bdev_io(&self->r, IORING_OP_WRITE, self->loop,
					 self->buf, (__u64)i * CHUNK, 0));
	}
	ASSERT_EQ(0, fsync(self->loop));
	plain = resident_pages(self->loop, span);
	ASSERT_LE(0, plain);
	/* start over with an empty cache for the dontcache half */
	ASSERT_EQ(0, ioctl(self->loop, BLKFLSBUF, 0));

	for (int i = 0; i < 16; i++) {
		int ret;

		fill(self->buf, 100 + i);
		ret = bdev_io(&self->r, IORING_OP_WRITE, self->loop, self->buf,
			      span + (__u64)i * CHUNK, RWF_DONTCACHE);
		ASSERT_NE(-EOPNOTSUPP, ret) TH_LOG("no RWF_DONTCACHE on block devices");
		ASSERT_EQ(CHUNK, ret);
	}
	ASSERT_EQ(0, fsync(self->loop));
	/* dropping happens at writeback completion: give it a moment */
	for (int tries = 0; tries < 20; tries++) {
		dontcache = resident_pages(self->loop, 2 * span) - resident_pages(self->loop, span);
		if (dontcache <= (long)(span / 4096) / 4)
			break;
		usleep(50 * 1000);
	}
	TH_LOG("resident after fsync: plain %ld, dontcache %ld of %zu pages",
	       plain, dontcache, span / 4096);
	EXPECT_GE(plain, (long)(span / 4096) / 2);
	EXPECT_LE(dontcache, (long)(span / 4096) / 4);

	/* reads with RWF_DONTCACHE return what was written */
	check = malloc(CHUNK);
	ASSERT_NE(NULL, check);
	for (int i = 0; i < 16; i++) {
		fill(check, 100 + i);
		ASSERT_EQ(CHUNK, bdev_io(&self->r, IORING_OP_READ, self->loop,
					 self->buf, span + (__u64)i * CHUNK,
					 RWF_DONTCACHE));
		EXPECT_EQ(0, memcmp(self->buf, check, CHUNK)) TH_LOG("chunk %d", i);
	}
	free(check);
}

TEST_HARNESS_MAIN
