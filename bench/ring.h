/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A minimal io_uring ring for the benchmarks: raw syscalls, SQ array mode,
 * no liburing. Include after the system headers it needs (errno.h,
 * string.h, sys/mman.h, sys/syscall.h, unistd.h, linux/io_uring.h).
 */
#ifndef IOU_BENCH_RING_H
#define IOU_BENCH_RING_H

struct ring {
	int fd;
	struct io_uring_params p;
	void *sq_ring, *cq_ring;
	size_t sq_ring_sz, cq_ring_sz;
	struct io_uring_sqe *sqes;
	size_t sqes_sz;
	unsigned int *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	unsigned int sqe_tail;		/* local tail, published by ring_enter() */
	unsigned int unsubmitted;	/* published but not yet consumed */
};

static inline int ring_init(struct ring *r, unsigned int entries, unsigned int flags)
{
	memset(r, 0, sizeof(*r));
	r->p.flags = flags;
	r->fd = syscall(__NR_io_uring_setup, entries, &r->p);
	if (r->fd < 0)
		return -errno;
	r->sq_ring_sz = r->p.sq_off.array + r->p.sq_entries * sizeof(unsigned int);
	r->cq_ring_sz = r->p.cq_off.cqes + r->p.cq_entries * sizeof(struct io_uring_cqe);
	if (r->p.features & IORING_FEAT_SINGLE_MMAP) {
		if (r->cq_ring_sz > r->sq_ring_sz)
			r->sq_ring_sz = r->cq_ring_sz;
		r->cq_ring_sz = r->sq_ring_sz;
	}
	r->sq_ring = mmap(NULL, r->sq_ring_sz, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	if (r->sq_ring == MAP_FAILED)
		return -errno;
	if (r->p.features & IORING_FEAT_SINGLE_MMAP) {
		r->cq_ring = r->sq_ring;
	} else {
		r->cq_ring = mmap(NULL, r->cq_ring_sz, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
		if (r->cq_ring == MAP_FAILED)
			return -errno;
	}
	r->sqes_sz = r->p.sq_entries * sizeof(struct io_uring_sqe);
	r->sqes = mmap(NULL, r->sqes_sz, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		return -errno;
	r->sq_head = (unsigned int *)((char *)r->sq_ring + r->p.sq_off.head);
	r->sq_tail = (unsigned int *)((char *)r->sq_ring + r->p.sq_off.tail);
	r->sq_mask = (unsigned int *)((char *)r->sq_ring + r->p.sq_off.ring_mask);
	r->sq_array = (unsigned int *)((char *)r->sq_ring + r->p.sq_off.array);
	r->cq_head = (unsigned int *)((char *)r->cq_ring + r->p.cq_off.head);
	r->cq_tail = (unsigned int *)((char *)r->cq_ring + r->p.cq_off.tail);
	r->cq_mask = (unsigned int *)((char *)r->cq_ring + r->p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)((char *)r->cq_ring + r->p.cq_off.cqes);
	r->sqe_tail = *r->sq_tail;
	return 0;
}

/* A zeroed SQE; the caller never queues more than sq_entries at once. */
static inline struct io_uring_sqe *ring_sqe(struct ring *r)
{
	unsigned int idx = r->sqe_tail & *r->sq_mask;
	struct io_uring_sqe *sqe = &r->sqes[idx];

	r->sq_array[idx] = idx;
	r->sqe_tail++;
	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

/*
 * Publish the queued SQEs, submit them and wait for @wait completions.
 * Returns 0, or -errno (-EINTR when a signal interrupted the wait; SQEs
 * not consumed are submitted again by the next call).
 */
static inline int ring_enter(struct ring *r, unsigned int wait)
{
	unsigned int queued = r->sqe_tail - *r->sq_tail;
	int ret;

	if (queued) {
		__atomic_store_n(r->sq_tail, r->sqe_tail, __ATOMIC_RELEASE);
		r->unsubmitted += queued;
	}
	ret = syscall(__NR_io_uring_enter, r->fd, r->unsubmitted, wait,
		      wait ? IORING_ENTER_GETEVENTS : 0, NULL, 0);
	if (ret < 0)
		return -errno;
	r->unsubmitted -= (unsigned int)ret;
	return 0;
}

/* Copy out and consume the next CQE; false when the CQ is empty. */
static inline bool ring_cqe(struct ring *r, struct io_uring_cqe *out)
{
	unsigned int head = *r->cq_head;

	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return false;
	*out = r->cqes[head & *r->cq_mask];
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return true;
}

#endif /* IOU_BENCH_RING_H */
