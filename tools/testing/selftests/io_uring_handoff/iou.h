/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal raw-syscall io_uring helpers for the io_uring_handoff selftests.
 * Only what the tests need: one ring, SQ array mode, single mmap.
 */
#ifndef IOU_H
#define IOU_H

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/io_uring.h>

struct iou {
	int fd;
	struct io_uring_params p;
	void *ring;
	size_t ring_sz;
	struct io_uring_sqe *sqes;
	size_t sqes_sz;
	unsigned int *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	unsigned int sqe_tail;	/* local, published by iou_submit() */
};

static inline int iou_setup(unsigned int entries, struct io_uring_params *p)
{
	return syscall(__NR_io_uring_setup, entries, p);
}

static inline int iou_enter(int fd, unsigned int submit, unsigned int wait,
			    unsigned int flags)
{
	return syscall(__NR_io_uring_enter, fd, submit, wait, flags, NULL, 0);
}

/* Returns 0 or -errno. */
static inline int iou_init(struct iou *r, unsigned int entries, unsigned int flags)
{
	size_t sq_sz, cq_sz;

	memset(r, 0, sizeof(*r));
	r->p.flags = flags;
	r->fd = iou_setup(entries, &r->p);
	if (r->fd < 0)
		return -errno;
	sq_sz = r->p.sq_off.array + r->p.sq_entries * sizeof(unsigned int);
	cq_sz = r->p.cq_off.cqes + r->p.cq_entries * sizeof(struct io_uring_cqe);
	r->ring_sz = sq_sz > cq_sz ? sq_sz : cq_sz;
	r->ring = mmap(NULL, r->ring_sz, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	if (r->ring == MAP_FAILED)
		goto fail;
	r->sqes_sz = r->p.sq_entries * sizeof(struct io_uring_sqe);
	r->sqes = mmap(NULL, r->sqes_sz, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED) {
		munmap(r->ring, r->ring_sz);
		goto fail;
	}
	r->sq_head = r->ring + r->p.sq_off.head;
	r->sq_tail = r->ring + r->p.sq_off.tail;
	r->sq_mask = r->ring + r->p.sq_off.ring_mask;
	r->sq_array = r->ring + r->p.sq_off.array;
	r->cq_head = r->ring + r->p.cq_off.head;
	r->cq_tail = r->ring + r->p.cq_off.tail;
	r->cq_mask = r->ring + r->p.cq_off.ring_mask;
	r->cqes = r->ring + r->p.cq_off.cqes;
	r->sqe_tail = *r->sq_tail;
	return 0;
fail:
	close(r->fd);
	return -errno;
}

static inline void iou_exit(struct iou *r)
{
	munmap(r->sqes, r->sqes_sz);
	munmap(r->ring, r->ring_sz);
	close(r->fd);
}

/* A zeroed SQE, or NULL when the SQ is full. */
static inline struct io_uring_sqe *iou_sqe(struct iou *r)
{
	unsigned int head = __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE);
	struct io_uring_sqe *sqe;

	if (r->sqe_tail - head >= r->p.sq_entries)
		return NULL;
	sqe = &r->sqes[r->sqe_tail & *r->sq_mask];
	r->sq_array[r->sqe_tail & *r->sq_mask] = r->sqe_tail & *r->sq_mask;
	r->sqe_tail++;
	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

/*
 * Publish the queued SQEs and enter the kernel once: submit them and, if
 * @wait is non-zero, wait for @wait completions in the same call.
 * Returns what io_uring_enter() returns (submitted count or -errno).
 */
static inline int iou_submit(struct iou *r, unsigned int wait)
{
	unsigned int n = r->sqe_tail - *r->sq_tail;
	int ret;

	__atomic_store_n(r->sq_tail, r->sqe_tail, __ATOMIC_RELEASE);
	ret = iou_enter(r->fd, n, wait, wait ? IORING_ENTER_GETEVENTS : 0);
	return ret < 0 ? -errno : ret;
}

/* Copy out and consume the next CQE; false when the CQ is empty. */
static inline bool iou_cqe(struct iou *r, struct io_uring_cqe *out)
{
	unsigned int head = *r->cq_head;

	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return false;
	*out = r->cqes[head & *r->cq_mask];
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return true;
}

/* Wait for and return the next CQE; returns 0 or -errno. */
static inline int iou_wait_cqe(struct iou *r, struct io_uring_cqe *out)
{
	while (!iou_cqe(r, out)) {
		if (iou_enter(r->fd, 0, 1, IORING_ENTER_GETEVENTS) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

static inline void iou_prep(struct io_uring_sqe *sqe, int op, int fd,
			    const void *addr, unsigned int len, __u64 off,
			    __u64 user_data)
{
	sqe->opcode = op;
	sqe->fd = fd;
	sqe->addr = (unsigned long)addr;
	sqe->len = len;
	sqe->off = off;
	sqe->user_data = user_data;
}

#endif /* IOU_H */
