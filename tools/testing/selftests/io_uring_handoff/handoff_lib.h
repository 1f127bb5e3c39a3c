/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the io_uring_handoff tests that drive the inline issue
 * and the identity handoff: the sysctl, the ring's fdinfo counters, QD1
 * requests and blocking fsyncs. Include after ../kselftest_harness.h: the
 * helpers that take a struct __test_metadata use its ASSERT and SKIP
 * macros.
 */
#ifndef HANDOFF_LIB_H
#define HANDOFF_LIB_H

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/stat.h>

#include "iou.h"

#define SYSCTL_PATH	"/proc/sys/kernel/io_uring_handoff"

#define BLOCK_LEN	(256 * 1024)	/* dirty data per blocking fsync */
#define BLOCK_TRIES	50		/* blocking fsyncs to get a handoff */

/* Flags of blocking_fsyncs_flags() */
#define BF_STOP		0x1	/* return at the first handoff */
#define BF_SIGNALS	0x2	/* a signal may end the wait before the CQE */

struct hstat {
	unsigned long inl;
	unsigned long handoffs;
	unsigned long resumed;
	unsigned long iowq;
};

static const char * const handoff_names[] = {
	"inline", "handoffs", "resumed", "iowq",
};

static const char * const refused_names[] = {
	"ring", "poll", "nowait", "task", "sqe", "spare", "signal", "lock",
	"prepare", "worker",
};

static inline pid_t sys_gettid(void)
{
	return syscall(__NR_gettid);
}

static inline long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The clock @clk in nanoseconds, or -1. */
static inline long long clock_ns(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts))
		return -1;
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Read a small proc file into @buf; returns its length or -1. */
static inline ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* The sysctl's value (0 or 1), -ERANGE for anything else, or -errno. */
static inline int sysctl_get(void)
{
	char buf[16] = "";
	ssize_t n;
	int fd, err;

	fd = open(SYSCTL_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	if (!strcmp(buf, "0\n"))
		return 0;
	if (!strcmp(buf, "1\n"))
		return 1;
	return -ERANGE;
}

/* Write @val with a single write(2); 0 or -errno. */
static inline int sysctl_write(const char *val)
{
	size_t len = strlen(val);
	ssize_t n;
	int fd, err;

	fd = open(SYSCTL_PATH, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	return (size_t)n == len ? 0 : -EIO;
}

/*
 * Find the line "<line_key>:\t..." in the ring's fdinfo and the field
 * "<name>=<n>" in it. Returns 0 and the value in *val, or -1 when the line
 * or the field is absent or the value does not parse.
 */
static inline int fdinfo_counter_once(int ringfd, const char *line_key,
				      const char *name, unsigned long *val,
				      bool *empty)
{
	size_t klen = strlen(line_key), nlen = strlen(name), cap = 0;
	char path[64], *line = NULL;
	int ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ringfd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	*empty = true;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "pos:", 4) && strncmp(line, "flags:", 6) &&
		    strncmp(line, "mnt_id:", 7) && strncmp(line, "ino:", 4))
			*empty = false;
		char *tok, *save, *end;

		if (strncmp(line, line_key, klen) || line[klen] != ':')
			continue;
		for (tok = strtok_r(line + klen + 1, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save)) {
			if (strncmp(tok, name, nlen) || tok[nlen] != '=')
				continue;
			errno = 0;
			*val = strtoul(tok + nlen + 1, &end, 10);
			if (!errno && end != tok + nlen + 1 && !*end)
				ret = 0;
			break;
		}
		break;
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * The ring's part of fdinfo is empty while another task holds its
 * uring_lock (io_uring_show_fdinfo() only trylocks): read it again then.
 */
static inline int fdinfo_counter(int ringfd, const char *line_key,
				 const char *name, unsigned long *val)
{
	bool empty;
	int i, ret;

	for (i = 0; i < 1000; i++) {
		ret = fdinfo_counter_once(ringfd, line_key, name, val, &empty);
		if (!ret || !empty)
			return ret;
		usleep(1000);
	}
	return ret;
}

static inline bool ring_has_handoff(struct iou *r)
{
	unsigned long v;

	return !fdinfo_counter(r->fd, "Handoff", "inline", &v);
}

static inline int read_hstat(int ringfd, struct hstat *s)
{
	if (fdinfo_counter(ringfd, "Handoff", "inline", &s->inl) ||
	    fdinfo_counter(ringfd, "Handoff", "handoffs", &s->handoffs) ||
	    fdinfo_counter(ringfd, "Handoff", "resumed", &s->resumed) ||
	    fdinfo_counter(ringfd, "Handoff", "iowq", &s->iowq))
		return -1;
	return 0;
}

/* The HandoffRefused counters, in the order of refused_names */
struct hrefused {
	unsigned long v[ARRAY_SIZE(refused_names)];
};

/* The index of @name in refused_names, or -1. */
static inline int refused_index(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(refused_names); i++)
		if (!strcmp(refused_names[i], name))
			return i;
	return -1;
}

static inline int read_refused(int ringfd, struct hrefused *s)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(refused_names); i++)
		if (fdinfo_counter(ringfd, "HandoffRefused", refused_names[i],
				   &s->v[i]))
			return -1;
	return 0;
}

static inline void hstat_sub(struct hstat *d, const struct hstat *after,
			     const struct hstat *before)
{
	d->inl = after->inl - before->inl;
	d->handoffs = after->handoffs - before->handoffs;
	d->resumed = after->resumed - before->resumed;
	d->iowq = after->iowq - before->iowq;
}

/* "<key>: a=1 b=?" for the fields @names of the fdinfo line @key. */
static inline void format_counters(int ringfd, const char *key,
				   const char * const *names, unsigned int nr,
				   char *buf, size_t size)
{
	unsigned long v;
	unsigned int i;
	size_t len;

	len = snprintf(buf, size, "%s:", key);
	for (i = 0; i < nr && len < size; i++) {
		if (fdinfo_counter(ringfd, key, names[i], &v))
			len += snprintf(buf + len, size - len, " %s=?",
					names[i]);
		else
			len += snprintf(buf + len, size - len, " %s=%lu",
					names[i], v);
	}
}

/* Log all counters of the ring, to explain a failed expectation. */
static inline void log_counters(struct __test_metadata *_metadata, int ringfd)
{
	char buf[512];

	format_counters(ringfd, "Handoff", handoff_names,
			ARRAY_SIZE(handoff_names), buf, sizeof(buf));
	TH_LOG("%s", buf);
	format_counters(ringfd, "HandoffRefused", refused_names,
			ARRAY_SIZE(refused_names), buf, sizeof(buf));
	TH_LOG("%s", buf);
}

/*
 * Submit the one queued SQE and wait for it in the same io_uring_enter();
 * its CQE must be posted by the time the call returns.
 */
static inline int qd1_enter(struct iou *r, struct io_uring_cqe *cqe)
{
	int ret = iou_submit(r, 1);

	if (ret < 0)
		return ret;
	if (ret != 1)
		return -EIO;
	return iou_cqe(r, cqe) ? 0 : -ENODATA;
}

static inline void qd1_nop(struct __test_metadata *_metadata, struct iou *r,
			   __u64 ud)
{
	struct io_uring_sqe *sqe = iou_sqe(r);
	struct io_uring_cqe cqe;

	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_NOP, -1, NULL, 0, 0, ud);
	ASSERT_EQ(0, qd1_enter(r, &cqe));
	ASSERT_EQ(ud, cqe.user_data);
	ASSERT_EQ(0, cqe.res);
}

static inline void qd1_fsync(struct __test_metadata *_metadata, struct iou *r,
			     int fd, __u64 ud)
{
	struct io_uring_sqe *sqe = iou_sqe(r);
	struct io_uring_cqe cqe;

	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, ud);
	ASSERT_EQ(0, qd1_enter(r, &cqe));
	ASSERT_EQ(ud, cqe.user_data);
	ASSERT_EQ(0, cqe.res) TH_LOG("fsync: %s", strerror(-cqe.res));
}

static inline void qd1_statx(struct __test_metadata *_metadata, struct iou *r,
			     const char *path, __u64 size, __u64 ud)
{
	struct io_uring_sqe *sqe = iou_sqe(r);
	struct io_uring_cqe cqe;
	struct statx stx;

	memset(&stx, 0, sizeof(stx));
	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_STATX, AT_FDCWD, path, STATX_BASIC_STATS,
		 (unsigned long)&stx, ud);
	ASSERT_EQ(0, qd1_enter(r, &cqe));
	ASSERT_EQ(ud, cqe.user_data);
	ASSERT_EQ(0, cqe.res) TH_LOG("statx %s: %s", path, strerror(-cqe.res));
	ASSERT_EQ(STATX_SIZE, stx.stx_mask & STATX_SIZE);
	ASSERT_EQ(size, stx.stx_size);
}

/*
 * Use the ring once, so that the kernel keeps spare io-wq workers for it,
 * and give them time to reach their idle wait: only an idle worker can take
 * over from a blocked submitter. The spare workers belong to the calling
 * thread: call this from the thread that is going to hand off.
 */
static inline void warm_up(struct __test_metadata *_metadata, struct iou *r,
			   const char *path, __u64 size)
{
	qd1_nop(_metadata, r, 1);
	qd1_statx(_metadata, r, path, size, 2);
	usleep(100 * 1000);
}

static inline int write_file(int fd, const char *buf, size_t len)
{
	return pwrite(fd, buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static inline void fill(char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 131 + i * 7 + (i >> 12));
}

/*
 * A ring with the Handoff counters and an empty file @name in the current
 * directory, which must be on a filesystem where fsync can block. The file's
 * absolute path goes to @path (PATH_MAX bytes). Returns the file's fd, or
 * -1 after a SKIP.
 */
static inline int disk_setup(struct __test_metadata *_metadata, struct iou *r,
			     const char *name, char *path)
{
	char cwd[PATH_MAX - NAME_MAX - 2];
	struct statfs sfs;
	int fd;

	ASSERT_EQ(0, iou_init(r, 8, 0));
	if (!ring_has_handoff(r))
		SKIP(return -1, "no Handoff line in the ring's fdinfo");
	ASSERT_EQ(0, statfs(".", &sfs));
	if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)
		SKIP(return -1, "fsync never blocks here: run on a disk filesystem");
	ASSERT_NE(NULL, getcwd(cwd, sizeof(cwd)));
	snprintf(path, PATH_MAX, "%s/%s", cwd, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
	return fd;
}

/*
 * Up to @tries times: dirty BLOCK_LEN bytes of @fd with fresh data and fsync
 * them with a lone IORING_OP_FSYNC in io_uring_enter(fd, 1, 1, GETEVENTS).
 * Whether or not the identity was handed over, the caller must come back as
 * the same thread of the same process, with the request completed. With
 * BF_STOP, return as soon as the ring counted a handoff. With BF_SIGNALS,
 * the caller expects signals: io_uring_enter() may then return with the
 * request submitted and its CQE not posted yet, and the CQE is waited for.
 * @buf is left with the data last written. Returns the number of fsyncs
 * done.
 */
static inline int blocking_fsyncs_flags(struct __test_metadata *_metadata,
					struct iou *r, int fd, char *buf,
					int tries, unsigned int flags)
{
	struct io_uring_cqe cqe;
	struct hstat before, now;
	pid_t tid, pid;
	int i, ret;

	ASSERT_EQ(0, read_hstat(r->fd, &before));
	for (i = 0; i < tries; i++) {
		struct io_uring_sqe *sqe;
		__u64 ud = 0xf5000 + i;

		fill(buf, BLOCK_LEN, i + 1);
		ASSERT_EQ(0, write_file(fd, buf, BLOCK_LEN));
		sqe = iou_sqe(r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, ud);
		pid = getpid();
		tid = sys_gettid();
		ret = qd1_enter(r, &cqe);
		if (ret == -ENODATA && (flags & BF_SIGNALS))
			ret = iou_wait_cqe(r, &cqe);
		ASSERT_EQ(tid, sys_gettid()) TH_LOG("fsync %d", i);
		ASSERT_EQ(pid, getpid()) TH_LOG("fsync %d", i);
		ASSERT_EQ(0, ret) TH_LOG("fsync %d: %s", i, strerror(-ret));
		ASSERT_EQ(ud, cqe.user_data);
		ASSERT_EQ(0, cqe.res) TH_LOG("fsync %d: %s", i,
					     strerror(-cqe.res));
		if (!(flags & BF_STOP))
			continue;
		ASSERT_EQ(0, read_hstat(r->fd, &now));
		if (now.handoffs != before.handoffs)
			return i + 1;
		/* let a new spare worker reach its idle wait */
		usleep(20 * 1000);
	}
	return i;
}

static inline int blocking_fsyncs(struct __test_metadata *_metadata,
				  struct iou *r, int fd, char *buf, int tries,
				  bool stop)
{
	return blocking_fsyncs_flags(_metadata, r, fd, buf, tries,
				     stop ? BF_STOP : 0);
}

#if defined(__x86_64__)
/* xmm8..15 or ymm8..15 loaded before the syscall, and stored after it */
struct vec_io {
	unsigned char in[8][32];
	unsigned char out[8][32];
};

/*
 * io_uring_enter(@ringfd, 1, 1, GETEVENTS, NULL, 0) with a raw syscall,
 * xmm8..15 (ymm8..15 with @avx) loaded from @io right before it and
 * stored right after it in the same asm block. The syscall ABI preserves
 * every register but rax, rcx and r11. @gpr[6..9] are loaded into
 * r12..r15; on return @gpr holds what rdi, rsi, rdx, r10, r8, r9 and
 * r12..r15 held after the syscall.
 */
static inline long enter_keep_regs(int ringfd, struct vec_io *io, char avx,
				   unsigned long gpr[10])
{
	long rax = __NR_io_uring_enter, rdi = ringfd, rsi = 1, rdx = 1;

	register long r10 __asm__("r10") = IORING_ENTER_GETEVENTS;
	register long r8 __asm__("r8") = 0;
	register long r9 __asm__("r9") = 0;
	register unsigned long r12 __asm__("r12") = gpr[6];
	register unsigned long r13 __asm__("r13") = gpr[7];
	register unsigned long r14 __asm__("r14") = gpr[8];
	register unsigned long r15 __asm__("r15") = gpr[9];

	__asm__ volatile("cmpb $0, %[avx]\n\t"
			 "je 1f\n\t"
			 "vmovdqu 0x000(%[io]), %%ymm8\n\t"
			 "vmovdqu 0x020(%[io]), %%ymm9\n\t"
			 "vmovdqu 0x040(%[io]), %%ymm10\n\t"
			 "vmovdqu 0x060(%[io]), %%ymm11\n\t"
			 "vmovdqu 0x080(%[io]), %%ymm12\n\t"
			 "vmovdqu 0x0a0(%[io]), %%ymm13\n\t"
			 "vmovdqu 0x0c0(%[io]), %%ymm14\n\t"
			 "vmovdqu 0x0e0(%[io]), %%ymm15\n\t"
			 "jmp 2f\n"
			 "1:\n\t"
			 "movdqu 0x000(%[io]), %%xmm8\n\t"
			 "movdqu 0x020(%[io]), %%xmm9\n\t"
			 "movdqu 0x040(%[io]), %%xmm10\n\t"
			 "movdqu 0x060(%[io]), %%xmm11\n\t"
			 "movdqu 0x080(%[io]), %%xmm12\n\t"
			 "movdqu 0x0a0(%[io]), %%xmm13\n\t"
			 "movdqu 0x0c0(%[io]), %%xmm14\n\t"
			 "movdqu 0x0e0(%[io]), %%xmm15\n\t"
			 "2:\n\t"
			 "syscall\n\t"
			 "cmpb $0, %[avx]\n\t"
			 "je 3f\n\t"
			 "vmovdqu %%ymm8, 0x100(%[io])\n\t"
			 "vmovdqu %%ymm9, 0x120(%[io])\n\t"
			 "vmovdqu %%ymm10, 0x140(%[io])\n\t"
			 "vmovdqu %%ymm11, 0x160(%[io])\n\t"
			 "vmovdqu %%ymm12, 0x180(%[io])\n\t"
			 "vmovdqu %%ymm13, 0x1a0(%[io])\n\t"
			 "vmovdqu %%ymm14, 0x1c0(%[io])\n\t"
			 "vmovdqu %%ymm15, 0x1e0(%[io])\n\t"
			 "vzeroupper\n\t"
			 "jmp 4f\n"
			 "3:\n\t"
			 "movdqu %%xmm8, 0x100(%[io])\n\t"
			 "movdqu %%xmm9, 0x120(%[io])\n\t"
			 "movdqu %%xmm10, 0x140(%[io])\n\t"
			 "movdqu %%xmm11, 0x160(%[io])\n\t"
			 "movdqu %%xmm12, 0x180(%[io])\n\t"
			 "movdqu %%xmm13, 0x1a0(%[io])\n\t"
			 "movdqu %%xmm14, 0x1c0(%[io])\n\t"
			 "movdqu %%xmm15, 0x1e0(%[io])\n\t"
			 "4:\n\t"
			 : "+a" (rax), "+D" (rdi), "+S" (rsi), "+d" (rdx),
			   "+r" (r10), "+r" (r8), "+r" (r9), "+r" (r12),
			   "+r" (r13), "+r" (r14), "+r" (r15)
			 : [io] "r" (io), [avx] "m" (avx)
			 : "rcx", "r11", "cc", "memory", "xmm8", "xmm9",
			   "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
			   "xmm15");
	gpr[0] = rdi;
	gpr[1] = rsi;
	gpr[2] = rdx;
	gpr[3] = r10;
	gpr[4] = r8;
	gpr[5] = r9;
	gpr[6] = r12;
	gpr[7] = r13;
	gpr[8] = r14;
	gpr[9] = r15;
	return rax;
}

static inline unsigned int get_mxcsr(void)
{
	unsigned int v;

	__asm__ volatile("stmxcsr %0" : "=m" (v));
	return v;
}

static inline void set_mxcsr(unsigned int v)
{
	__asm__ volatile("ldmxcsr %0" : : "m" (v));
}

static inline unsigned short get_fcw(void)
{
	unsigned short v;

	__asm__ volatile("fnstcw %0" : "=m" (v));
	return v;
}

static inline void set_fcw(unsigned short v)
{
	__asm__ volatile("fldcw %0" : : "m" (v));
}
#elif defined(__aarch64__)
/* v0..v31 loaded before the syscall, and stored after it */
struct vec_io {
	unsigned char in[32][16];
	unsigned char out[32][16];
	unsigned long signed_ptr;	/* the pointer after PACIA1716 */
};

/*
 * io_uring_enter(@ringfd, 1, 1, GETEVENTS, NULL, 0) with a raw svc, v0..v31
 * loaded from @io right before it and stored right after it in the same asm
 * block. The syscall ABI preserves every register but x0. Around the svc,
 * *@pac is signed with the APIA key and modifier @mod (PACIA1716, a NOP
 * without pointer authentication) and authenticated again (AUTIA1716):
 * with another APIA key after the call the result is not the pointer, or
 * the authentication faults. @gpr[6..15] are loaded into x19..x28; on
 * return @gpr[0..5] hold what x1..x5 and x8 held after the syscall, and
 * @gpr[6..15] x19..x28.
 */
static inline long enter_keep_regs(int ringfd, struct vec_io *io,
				   unsigned long gpr[16], unsigned long *pac,
				   unsigned long mod)
{
	register long x0 __asm__("x0") = ringfd;

	/* all in one block: nothing the compiler emits runs in between */
	__asm__ volatile("ldp x19, x20, [%[g], #48]\n\t"
			 "ldp x21, x22, [%[g], #64]\n\t"
			 "ldp x23, x24, [%[g], #80]\n\t"
			 "ldp x25, x26, [%[g], #96]\n\t"
			 "ldp x27, x28, [%[g], #112]\n\t"
			 "mov x1, #1\n\t"
			 "mov x2, #1\n\t"
			 "mov x3, %[flags]\n\t"
			 "mov x4, #0\n\t"
			 "mov x5, #0\n\t"
			 "mov x8, %[nr]\n\t"
			 "ldr x17, [%[pac]]\n\t"
			 "mov x16, %[mod]\n\t"
			 "hint #8\n\t"		/* PACIA1716 */
			 "str x17, [%[sgn]]\n\t"
			 "ldp q0, q1, [%[in], #0]\n\t"
			 "ldp q2, q3, [%[in], #32]\n\t"
			 "ldp q4, q5, [%[in], #64]\n\t"
			 "ldp q6, q7, [%[in], #96]\n\t"
			 "ldp q8, q9, [%[in], #128]\n\t"
			 "ldp q10, q11, [%[in], #160]\n\t"
			 "ldp q12, q13, [%[in], #192]\n\t"
			 "ldp q14, q15, [%[in], #224]\n\t"
			 "ldp q16, q17, [%[in], #256]\n\t"
			 "ldp q18, q19, [%[in], #288]\n\t"
			 "ldp q20, q21, [%[in], #320]\n\t"
			 "ldp q22, q23, [%[in], #352]\n\t"
			 "ldp q24, q25, [%[in], #384]\n\t"
			 "ldp q26, q27, [%[in], #416]\n\t"
			 "ldp q28, q29, [%[in], #448]\n\t"
			 "ldp q30, q31, [%[in], #480]\n\t"
			 "svc #0\n\t"
			 "stp q0, q1, [%[out], #0]\n\t"
			 "stp q2, q3, [%[out], #32]\n\t"
			 "stp q4, q5, [%[out], #64]\n\t"
			 "stp q6, q7, [%[out], #96]\n\t"
			 "stp q8, q9, [%[out], #128]\n\t"
			 "stp q10, q11, [%[out], #160]\n\t"
			 "stp q12, q13, [%[out], #192]\n\t"
			 "stp q14, q15, [%[out], #224]\n\t"
			 "stp q16, q17, [%[out], #256]\n\t"
			 "stp q18, q19, [%[out], #288]\n\t"
			 "stp q20, q21, [%[out], #320]\n\t"
			 "stp q22, q23, [%[out], #352]\n\t"
			 "stp q24, q25, [%[out], #384]\n\t"
			 "stp q26, q27, [%[out], #416]\n\t"
			 "stp q28, q29, [%[out], #448]\n\t"
			 "stp q30, q31, [%[out], #480]\n\t"
			 "hint #12\n\t"		/* AUTIA1716 */
			 "str x17, [%[pac]]\n\t"
			 "stp x1, x2, [%[g], #0]\n\t"
			 "stp x3, x4, [%[g], #16]\n\t"
			 "stp x5, x8, [%[g], #32]\n\t"
			 "stp x19, x20, [%[g], #48]\n\t"
			 "stp x21, x22, [%[g], #64]\n\t"
			 "stp x23, x24, [%[g], #80]\n\t"
			 "stp x25, x26, [%[g], #96]\n\t"
			 "stp x27, x28, [%[g], #112]\n\t"
			 : "+r" (x0)
			 : [g] "r" (gpr), [in] "r" (io->in), [out] "r" (io->out),
			   [sgn] "r" (&io->signed_ptr), [pac] "r" (pac),
			   [mod] "r" (mod), [nr] "i" (__NR_io_uring_enter),
			   [flags] "i" (IORING_ENTER_GETEVENTS)
			 : "x1", "x2", "x3", "x4", "x5", "x8", "x16", "x17",
			   "x19", "x20", "x21", "x22", "x23", "x24", "x25",
			   "x26", "x27", "x28", "cc", "memory",
			   "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
			   "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15",
			   "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23",
			   "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31");
	return x0;
}

static inline unsigned long get_fpcr(void)
{
	unsigned long v;

	__asm__ volatile("mrs %0, fpcr" : "=r" (v));
	return v;
}

static inline void set_fpcr(unsigned long v)
{
	__asm__ volatile("msr fpcr, %0" : : "r" (v));
}

static inline unsigned long get_fpsr(void)
{
	unsigned long v;

	__asm__ volatile("mrs %0, fpsr" : "=r" (v));
	return v;
}

static inline void set_fpsr(unsigned long v)
{
	__asm__ volatile("msr fpsr, %0" : : "r" (v));
}

/* TPIDR2_EL0 (SME only: UNDEFINED without it) */
static inline unsigned long get_tpidr2(void)
{
	unsigned long v;

	__asm__ volatile("mrs %0, S3_3_C13_C0_5" : "=r" (v));
	return v;
}

static inline void set_tpidr2(unsigned long v)
{
	__asm__ volatile("msr S3_3_C13_C0_5, %0" : : "r" (v));
}
#endif /* __aarch64__ */

#endif /* HANDOFF_LIB_H */
