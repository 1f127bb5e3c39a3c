// SPDX-License-Identifier: GPL-2.0
/*
 * Behaviour of the io_uring blocking inline issue and thread identity
 * handoff (Documentation/io_uring/handoff.rst), as userspace sees it:
 *
 * - kernel.io_uring_handoff takes 0 and 1 only; any other value fails with
 *   EINVAL and leaves the setting unchanged.
 * - With the sysctl at 1, fsync and statx on tmpfs, which never sleep, are
 *   issued inline from io_uring_enter(): the ring's fdinfo "inline" counter
 *   grows while "iowq" and "handoffs" stay put. With the sysctl at 0 they
 *   are queued to io-wq, as in Linux 7.3.
 * - An fsync that really blocks (dirty page cache on a disk filesystem)
 *   hands the submitter's identity to an idle io-wq worker: "handoffs" and
 *   "resumed" grow, and the thread that returns from io_uring_enter() still
 *   has the same thread ID, process ID, signal mask, pending signals and
 *   name.
 * - Flipping the sysctl changes the path of the requests issued next.
 *
 * Every test needs root and /proc/sys/kernel/io_uring_handoff and is
 * skipped without them; the tests that read the counters are skipped when
 * the ring's fdinfo has no Handoff line. The tests save the sysctl and
 * restore it when they are done. The blocking tests write a file in the
 * current directory, which must be on a disk filesystem (ext4 in
 * 'make test'); they are skipped when it is on tmpfs or ramfs.
 *
 * Run with:
 *	make -C tools/testing/selftests TARGETS=io_uring_handoff run_tests
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <linux/stat.h>

#include "../kselftest_harness.h"
#include "iou.h"

#define SYSCTL_PATH	"/proc/sys/kernel/io_uring_handoff"
#define DATA_NAME	"handoff_test.data"

#define QD1_OPS		64		/* fsyncs, then statx calls, per phase */
#define FLIP_OPS	16		/* statx calls per sysctl phase */
#define TMPFS_LEN	12345		/* size of the file on tmpfs */
#define BLOCK_LEN	(256 * 1024)	/* dirty data per blocking fsync */
#define BLOCK_TRIES	50		/* blocking fsyncs to get a handoff */
#define PUNT_OPS	10		/* blocking fsyncs with the sysctl at 0 */

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

static pid_t sys_gettid(void)
{
	return syscall(__NR_gettid);
}

/* The sysctl's value (0 or 1), -ERANGE for anything else, or -errno. */
static int sysctl_get(void)
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
static int sysctl_write(const char *val)
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
static int fdinfo_counter(int ringfd, const char *line_key, const char *name,
			  unsigned long *val)
{
	size_t klen = strlen(line_key), nlen = strlen(name), cap = 0;
	char path[64], *line = NULL;
	int ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ringfd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
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

static bool ring_has_handoff(struct iou *r)
{
	unsigned long v;

	return !fdinfo_counter(r->fd, "Handoff", "inline", &v);
}

static int read_hstat(int ringfd, struct hstat *s)
{
	if (fdinfo_counter(ringfd, "Handoff", "inline", &s->inl) ||
	    fdinfo_counter(ringfd, "Handoff", "handoffs", &s->handoffs) ||
	    fdinfo_counter(ringfd, "Handoff", "resumed", &s->resumed) ||
	    fdinfo_counter(ringfd, "Handoff", "iowq", &s->iowq))
		return -1;
	return 0;
}

static void hstat_sub(struct hstat *d, const struct hstat *after,
		      const struct hstat *before)
{
	d->inl = after->inl - before->inl;
	d->handoffs = after->handoffs - before->handoffs;
	d->resumed = after->resumed - before->resumed;
	d->iowq = after->iowq - before->iowq;
}

/* "<key>: a=1 b=?" for the fields @names of the fdinfo line @key. */
static void format_counters(int ringfd, const char *key,
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
static void log_counters(struct __test_metadata *_metadata, int ringfd)
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
static int qd1_enter(struct iou *r, struct io_uring_cqe *cqe)
{
	int ret = iou_submit(r, 1);

	if (ret < 0)
		return ret;
	if (ret != 1)
		return -EIO;
	return iou_cqe(r, cqe) ? 0 : -ENODATA;
}

static void qd1_nop(struct __test_metadata *_metadata, struct iou *r,
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

static void qd1_fsync(struct __test_metadata *_metadata, struct iou *r,
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

static void qd1_statx(struct __test_metadata *_metadata, struct iou *r,
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
 * over from a blocked submitter.
 */
static void warm_up(struct __test_metadata *_metadata, struct iou *r,
		    const char *path, __u64 size)
{
	qd1_nop(_metadata, r, 1);
	qd1_statx(_metadata, r, path, size, 2);
	usleep(100 * 1000);
}

/* @nr QD1 fsyncs of @fd, then @nr QD1 statx calls of @path. */
static void fsync_statx_loop(struct __test_metadata *_metadata,
			     struct iou *r, int fd, const char *path,
			     __u64 size, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		qd1_fsync(_metadata, r, fd, 1000 + i);
	for (i = 0; i < nr; i++)
		qd1_statx(_metadata, r, path, size, 2000 + i);
}

static int write_file(int fd, const char *buf, size_t len)
{
	return pwrite(fd, buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static void fill(char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 131 + i * 7 + (i >> 12));
}

/* What a test leaves behind for the teardown to remove */
struct scratch {
	bool mounted;
	char tmpdir[32];		/* tmpfs mount point */
	char tmpfile[64];		/* file on that tmpfs */
	char datafile[PATH_MAX];	/* file in the current directory */
};

/*
 * Mount a tmpfs on a fresh directory; the teardown unmounts it.
 * Returns 0 or -errno.
 */
static int mount_tmpfs(struct scratch *s)
{
	int err;

	snprintf(s->tmpdir, sizeof(s->tmpdir), "/tmp/iou_handoff.XXXXXX");
	if (!mkdtemp(s->tmpdir)) {
		err = -errno;
		s->tmpdir[0] = '\0';
		return err;
	}
	if (mount("iou_handoff", s->tmpdir, "tmpfs", 0, "size=16m,mode=0700"))
		return -errno;
	s->mounted = true;
	return 0;
}

/*
 * A ring with the Handoff counters and a file of TMPFS_LEN bytes on a new
 * tmpfs, at s->tmpfile. Returns the file's fd, or -1 after a SKIP.
 */
static int tmpfs_setup(struct __test_metadata *_metadata, struct scratch *s,
		       struct iou *r)
{
	char buf[TMPFS_LEN];
	int fd, ret;

	ASSERT_EQ(0, iou_init(r, 8, 0));
	if (!ring_has_handoff(r))
		SKIP(return -1, "no Handoff line in the ring's fdinfo");
	ret = mount_tmpfs(s);
	if (ret == -EPERM)
		SKIP(return -1, "cannot mount a tmpfs");
	ASSERT_EQ(0, ret) TH_LOG("tmpfs on %s: %s", s->tmpdir, strerror(-ret));
	snprintf(s->tmpfile, sizeof(s->tmpfile), "%s/data", s->tmpdir);
	fd = open(s->tmpfile, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_LE(0, fd);
	fill(buf, sizeof(buf), 0);
	ASSERT_EQ(0, write_file(fd, buf, sizeof(buf)));
	return fd;
}

/*
 * A ring with the Handoff counters and an empty file in the current
 * directory, which must be on a filesystem where fsync can block.
 * Returns the file's fd, or -1 after a SKIP.
 */
static int disk_setup(struct __test_metadata *_metadata, struct scratch *s,
		      struct iou *r)
{
	char cwd[PATH_MAX - sizeof(DATA_NAME) - 1];
	struct statfs sfs;
	int fd;

	ASSERT_EQ(0, iou_init(r, 8, 0));
	if (!ring_has_handoff(r))
		SKIP(return -1, "no Handoff line in the ring's fdinfo");
	ASSERT_EQ(0, statfs(".", &sfs));
	if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)
		SKIP(return -1, "fsync never blocks here: run on a disk filesystem");
	ASSERT_NE(NULL, getcwd(cwd, sizeof(cwd)));
	snprintf(s->datafile, sizeof(s->datafile), "%s/%s", cwd, DATA_NAME);
	fd = open(s->datafile, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", s->datafile, strerror(errno));
	return fd;
}

/*
 * Up to @tries times: dirty BLOCK_LEN bytes of @fd with fresh data and fsync
 * them with a lone IORING_OP_FSYNC in io_uring_enter(fd, 1, 1, GETEVENTS).
 * Whether or not the identity was handed over, the caller must come back as
 * the same thread of the same process, with the request completed. With
 * @stop, return as soon as the ring counted a handoff. @buf is left with
 * the data last written. Returns the number of fsyncs done.
 */
static int blocking_fsyncs(struct __test_metadata *_metadata, struct iou *r,
			   int fd, char *buf, int tries, bool stop)
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
		ASSERT_EQ(tid, sys_gettid()) TH_LOG("fsync %d", i);
		ASSERT_EQ(pid, getpid()) TH_LOG("fsync %d", i);
		ASSERT_EQ(0, ret) TH_LOG("fsync %d: %s", i, strerror(-ret));
		ASSERT_EQ(ud, cqe.user_data);
		ASSERT_EQ(0, cqe.res) TH_LOG("fsync %d: %s", i,
					     strerror(-cqe.res));
		if (!stop)
			continue;
		ASSERT_EQ(0, read_hstat(r->fd, &now));
		if (now.handoffs != before.handoffs)
			return i + 1;
		/* let a new spare worker reach its idle wait */
		usleep(20 * 1000);
	}
	return i;
}

/* The file holds @buf, read back from the disk rather than the cache. */
static void verify_data(struct __test_metadata *_metadata, int fd,
			const char *buf)
{
	static char rbuf[BLOCK_LEN];
	struct stat st;

	ASSERT_EQ(0, fstat(fd, &st));
	ASSERT_EQ(BLOCK_LEN, st.st_size);
	/* clean after the fsync, so these pages can be dropped */
	EXPECT_EQ(0, posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED));
	ASSERT_EQ(BLOCK_LEN, pread(fd, rbuf, BLOCK_LEN, 0));
	EXPECT_EQ(0, memcmp(rbuf, buf, BLOCK_LEN));
}

FIXTURE(handoff) {
	int saved;		/* sysctl value to restore */
	bool restore;
	struct scratch s;
};

FIXTURE_SETUP(handoff)
{
	int val;

	if (geteuid() != 0)
		SKIP(return, "needs root to change " SYSCTL_PATH);
	if (access(SYSCTL_PATH, F_OK))
		SKIP(return, "no " SYSCTL_PATH " (no handoff support)");
	val = sysctl_get();
	ASSERT_LE(0, val) TH_LOG("reading " SYSCTL_PATH ": %d", val);
	self->saved = val;
	self->restore = true;
}

/*
 * In the parent, so that the sysctl is restored and the tmpfs unmounted
 * even when the test process dies.
 */
FIXTURE_TEARDOWN_PARENT(handoff)
{
	if (self->restore)
		EXPECT_EQ(0, sysctl_write(self->saved ? "1" : "0"));
	if (self->s.mounted)
		umount2(self->s.tmpdir, MNT_DETACH);
	if (self->s.tmpdir[0])
		rmdir(self->s.tmpdir);
	if (self->s.datafile[0])
		unlink(self->s.datafile);
}

TEST_F(handoff, sysctl_rejects_bad_values)
{
	static const char * const bad[] = { "2", "-1", "abc" };
	unsigned int i;
	int val;

	for (val = 0; val <= 1; val++) {
		ASSERT_EQ(0, sysctl_write(val ? "1" : "0"));
		ASSERT_EQ(val, sysctl_get());
		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			EXPECT_EQ(-EINVAL, sysctl_write(bad[i]))
				TH_LOG("writing \"%s\"", bad[i]);
			EXPECT_EQ(val, sysctl_get())
				TH_LOG("after writing \"%s\"", bad[i]);
		}
	}
}

TEST_F(handoff, inline_fsync_statx_tmpfs)
{
	struct hstat a, b, d;
	const char *path = self->s.tmpfile;
	struct iou r;
	int fd;

	fd = tmpfs_setup(_metadata, &self->s, &r);
	if (fd < 0)
		return;

	/* on: everything completes inline, nothing blocks */
	ASSERT_EQ(0, sysctl_write("1"));
	warm_up(_metadata, &r, path, TMPFS_LEN);
	ASSERT_EQ(0, read_hstat(r.fd, &a));
	fsync_statx_loop(_metadata, &r, fd, path, TMPFS_LEN, QD1_OPS);
	ASSERT_EQ(0, read_hstat(r.fd, &b));
	hstat_sub(&d, &b, &a);
	EXPECT_LE(2UL * QD1_OPS, d.inl);
	EXPECT_EQ(0UL, d.iowq);
	EXPECT_EQ(0UL, d.handoffs);
	if (d.inl < 2UL * QD1_OPS || d.iowq || d.handoffs)
		log_counters(_metadata, r.fd);

	/* off: everything goes to io-wq, as in Linux 7.3 */
	ASSERT_EQ(0, sysctl_write("0"));
	ASSERT_EQ(0, read_hstat(r.fd, &a));
	fsync_statx_loop(_metadata, &r, fd, path, TMPFS_LEN, QD1_OPS);
	ASSERT_EQ(0, read_hstat(r.fd, &b));
	hstat_sub(&d, &b, &a);
	EXPECT_EQ(0UL, d.inl);
	EXPECT_LE(2UL * QD1_OPS, d.iowq);
	if (d.inl || d.iowq < 2UL * QD1_OPS)
		log_counters(_metadata, r.fd);
	close(fd);
	iou_exit(&r);
}

TEST_F_TIMEOUT(handoff, blocking_fsync_hands_off, 90)
{
	static char buf[BLOCK_LEN];
	struct hstat a, b, d;
	struct iou r;
	int fd, n;

	fd = disk_setup(_metadata, &self->s, &r);
	if (fd < 0)
		return;

	ASSERT_EQ(0, sysctl_write("1"));
	warm_up(_metadata, &r, self->s.datafile, 0);
	ASSERT_EQ(0, read_hstat(r.fd, &a));
	n = blocking_fsyncs(_metadata, &r, fd, buf, BLOCK_TRIES, true);
	ASSERT_EQ(0, read_hstat(r.fd, &b));
	hstat_sub(&d, &b, &a);
	if (!d.handoffs || !d.resumed)
		log_counters(_metadata, r.fd);
	ASSERT_LE(1UL, d.handoffs)
		TH_LOG("no handoff in %d blocking fsyncs", n);
	ASSERT_LE(1UL, d.resumed);
	TH_LOG("handoff after %d blocking fsync(s)", n);
	verify_data(_metadata, fd, buf);

	/* off: the same fsyncs go to io-wq and nothing is handed over */
	ASSERT_EQ(0, sysctl_write("0"));
	ASSERT_EQ(0, read_hstat(r.fd, &a));
	blocking_fsyncs(_metadata, &r, fd, buf, PUNT_OPS, false);
	ASSERT_EQ(0, read_hstat(r.fd, &b));
	hstat_sub(&d, &b, &a);
	EXPECT_EQ(0UL, d.handoffs);
	EXPECT_EQ(0UL, d.resumed);
	EXPECT_EQ(0UL, d.inl);
	EXPECT_LE((unsigned long)PUNT_OPS, d.iowq);
	if (d.handoffs || d.resumed || d.inl || d.iowq < PUNT_OPS)
		log_counters(_metadata, r.fd);
	verify_data(_metadata, fd, buf);
	close(fd);
	iou_exit(&r);
}

#define TRACEFS "/sys/kernel/tracing/"

static int tracefs_write(const char *file, const char *val)
{
	int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* @needle occurs in the trace buffer */
static bool trace_has(const char *needle)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(TRACEFS "trace", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* A blocking fsync fires io_uring_handoff and io_uring_handoff_resume */
TEST_F_TIMEOUT(handoff, handoff_tracepoints_fire, 90)
{
	static const char * const events[] = {
		TRACEFS "events/io_uring/io_uring_handoff/enable",
		TRACEFS "events/io_uring/io_uring_handoff_resume/enable",
	};
	static char buf[BLOCK_LEN];
	struct iou r;
	unsigned int i;
	int fd, n;

	if (access(events[0], W_OK))
		SKIP(return, "no io_uring_handoff event in " TRACEFS);
	fd = disk_setup(_metadata, &self->s, &r);
	if (fd < 0)
		return;

	ASSERT_EQ(0, sysctl_write("1"));
	warm_up(_metadata, &r, self->s.datafile, 0);
	ASSERT_EQ(0, tracefs_write(TRACEFS "tracing_on", "0"));
	ASSERT_EQ(0, tracefs_write(TRACEFS "trace", ""));
	for (i = 0; i < ARRAY_SIZE(events); i++)
		ASSERT_EQ(0, tracefs_write(events[i], "1"));
	ASSERT_EQ(0, tracefs_write(TRACEFS "tracing_on", "1"));
	n = blocking_fsyncs(_metadata, &r, fd, buf, BLOCK_TRIES, true);
	tracefs_write(TRACEFS "tracing_on", "0");
	for (i = 0; i < ARRAY_SIZE(events); i++)
		tracefs_write(events[i], "0");
	EXPECT_TRUE(trace_has("io_uring_handoff: "))
		TH_LOG("no io_uring_handoff event in %d blocking fsyncs", n);
	EXPECT_TRUE(trace_has("opcode FSYNC"));
	EXPECT_TRUE(trace_has("io_uring_handoff_resume: "));
	tracefs_write(TRACEFS "trace", "");
	close(fd);
	iou_exit(&r);
}

TEST_F_TIMEOUT(handoff, handoff_keeps_thread_state, 90)
{
	static char buf[BLOCK_LEN];
	struct timespec zero = { 0 };
	sigset_t usr1, want, now, pending;
	char name[17] = "", path[64], comm[32] = "";
	struct hstat a, b, d;
	struct iou r;
	pid_t tid, pid;
	siginfo_t si;
	int fd, n, sig;
	FILE *f;

	fd = disk_setup(_metadata, &self->s, &r);
	if (fd < 0)
		return;

	ASSERT_EQ(0, sysctl_write("1"));
	warm_up(_metadata, &r, self->s.datafile, 0);

	/* state that must come back from io_uring_enter() unchanged */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &usr1, NULL));
	ASSERT_EQ(0, sigprocmask(SIG_SETMASK, NULL, &want));
	ASSERT_EQ(0, prctl(PR_SET_NAME, "iou-keep", 0, 0, 0));
	ASSERT_EQ(0, sigpending(&pending));
	ASSERT_FALSE(sigismember(&pending, SIGUSR1));
	tid = sys_gettid();
	pid = getpid();

	ASSERT_EQ(0, read_hstat(r.fd, &a));
	n = blocking_fsyncs(_metadata, &r, fd, buf, BLOCK_TRIES, true);
	ASSERT_EQ(0, read_hstat(r.fd, &b));
	hstat_sub(&d, &b, &a);
	if (!d.handoffs)
		log_counters(_metadata, r.fd);
	ASSERT_LE(1UL, d.handoffs)
		TH_LOG("no handoff in %d blocking fsyncs", n);

	EXPECT_EQ(tid, sys_gettid());
	EXPECT_EQ(pid, getpid());

	ASSERT_EQ(0, sigprocmask(SIG_SETMASK, NULL, &now));
	EXPECT_TRUE(sigismember(&now, SIGUSR1));
	for (sig = 1; sig < _NSIG; sig++)
		EXPECT_EQ(sigismember(&want, sig), sigismember(&now, sig))
			TH_LOG("signal %d", sig);

	ASSERT_EQ(0, prctl(PR_GET_NAME, name, 0, 0, 0));
	EXPECT_STREQ("iou-keep", name);

	snprintf(path, sizeof(path), "/proc/self/task/%d", tid);
	EXPECT_EQ(0, access(path, F_OK)) TH_LOG("%s: %s", path,
						strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	f = fopen(path, "re");
	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(comm, sizeof(comm), f));
	fclose(f);
	EXPECT_STREQ("iou-keep\n", comm);

	/* a signal raised now is pending for this thread, and blocked */
	ASSERT_EQ(0, raise(SIGUSR1));
	ASSERT_EQ(0, sigpending(&pending));
	EXPECT_TRUE(sigismember(&pending, SIGUSR1));
	EXPECT_EQ(SIGUSR1, sigtimedwait(&usr1, &si, &zero));
	EXPECT_EQ(pid, si.si_pid);
	close(fd);
	iou_exit(&r);
}

TEST_F(handoff, sysctl_flip_changes_path)
{
	static const int phases[] = { 1, 0, 1 };
	struct hstat a, b, d;
	unsigned int p, i;
	const char *path = self->s.tmpfile;
	struct iou r;
	int fd;

	fd = tmpfs_setup(_metadata, &self->s, &r);
	if (fd < 0)
		return;

	ASSERT_EQ(0, sysctl_write("1"));
	warm_up(_metadata, &r, path, TMPFS_LEN);
	for (p = 0; p < ARRAY_SIZE(phases); p++) {
		ASSERT_EQ(0, sysctl_write(phases[p] ? "1" : "0"));
		ASSERT_EQ(0, read_hstat(r.fd, &a));
		for (i = 0; i < FLIP_OPS; i++)
			qd1_statx(_metadata, &r, path, TMPFS_LEN, 100 * p + i);
		ASSERT_EQ(0, read_hstat(r.fd, &b));
		hstat_sub(&d, &b, &a);
		if (phases[p]) {
			EXPECT_LE((unsigned long)FLIP_OPS, d.inl)
				TH_LOG("phase %u (sysctl 1)", p);
			EXPECT_EQ(0UL, d.iowq) TH_LOG("phase %u (sysctl 1)", p);
		} else {
			EXPECT_EQ(0UL, d.inl) TH_LOG("phase %u (sysctl 0)", p);
			EXPECT_LE((unsigned long)FLIP_OPS, d.iowq)
				TH_LOG("phase %u (sysctl 0)", p);
		}
		if (phases[p] ? d.inl < FLIP_OPS || d.iowq :
				d.inl || d.iowq < FLIP_OPS)
			log_counters(_metadata, r.fd);
	}
	close(fd);
	iou_exit(&r);
}

TEST_HARNESS_MAIN
