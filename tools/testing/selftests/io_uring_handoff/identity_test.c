// SPDX-License-Identifier: GPL-2.0
/*
 * What a thread can see of itself across an io_uring identity handoff
 * (Documentation/io_uring/handoff.rst). When an fsync issued inline from
 * io_uring_enter() blocks, an io-wq worker returns to userspace in place of
 * the submitting thread. Nothing userspace can observe may change:
 *
 * - ids: thread ID, process ID, parent and thread group leadership; the
 *   threads listed in /proc/self/task; a child that hands off is reaped
 *   normally.
 * - signal_to_tid: signals sent to the thread while it hands off reach the
 *   same thread, none is lost.
 * - sigmask_sigaltstack: the signal mask and the alternate signal stack.
 * - tls_fpu: the TLS block and thread pointer, the rseq registration
 *   (glibc's, or one of the test's own when glibc registers none) and, on
 *   x86-64, the GS base, the vector registers, MXCSR and the x87 control
 *   word across the io_uring_enter() syscall itself.
 * - sched_affinity_comm: policy, nice, affinity, name, timer slack, I/O
 *   priority, a threaded cgroup v2 placement of the thread alone, and
 *   per-thread accounting that never goes back.
 * - creds_seccomp_nnp: per-thread uids, gids, fsuid, fsgid, supplementary
 *   groups and capabilities, no_new_privs, seccomp filters.
 * - join_robust: clear_child_tid and the robust futex list, used when the
 *   thread exits.
 * - fork_exec_after: children forked before and after the handoff, exec.
 * - ptraced_never_hands_off: a traced task never hands off, its requests
 *   are refused as "task", and an untraced twin doing the same does.
 *
 * Each test forces a real handoff with blocking fsyncs of a file in the
 * current directory, and fails if none happened; the "off" variants run
 * the same with the sysctl at 0, where no handoff may happen and the same
 * must hold. The state under test is changed once the ring's io-wq
 * workers exist, after a first handoff, so that the workers that can take
 * over do not share it: a state that does not move shows. A state the
 * kernel refuses to hand off with (a seccomp filter the workers lack) must
 * count a refusal instead, and stay in force. vfork parents are not
 * tested: the kernel refuses to hand off a task with vfork_done set, and
 * a vfork parent is suspended until its child execs or exits, so it cannot
 * submit anything meanwhile.
 *
 * Needs root and /proc/sys/kernel/io_uring_handoff, and a current
 * directory on a disk filesystem (ext4 in 'make test'); skipped otherwise.
 * Also needs CONFIG_CHECKPOINT_RESTORE (PR_GET_TID_ADDRESS), CONFIG_RSEQ,
 * CONFIG_SECCOMP_FILTER and cgroup v2 (mounted on a scratch directory when
 * /sys/fs/cgroup is not cgroup2); fails without them. The sysctl is
 * restored, and the scratch files, cgroups and mount removed afterwards.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/procfs.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif
#if __has_include("sys/rseq.h")
#include <sys/rseq.h>
#else
#include <linux/rseq.h>
#endif

#include "../kselftest_harness.h"
#include "handoff_lib.h"

#define OFF_TRIES	4	/* blocking fsyncs with the sysctl at 0 */
#define SIG_TRIES	200	/* blocking fsyncs to hand off under signals */
#define PTRACE_TRIES	20	/* blocking fsyncs of the traced child */
#define MAX_FILES	4	/* scratch files per test */
#define CHILD_OK	42	/* exit status of a child whose checks passed */
#define REFUSE_STOP	3	/* refusals that end handoff_or_refusal() */
#define NOBODY		((uid_t)65534)
#define CORE_PATTERN	"/proc/sys/kernel/core_pattern"

#ifndef PF_IO_WORKER
#define PF_IO_WORKER	0x00000010
#endif

#define T_IOPRIO_WHO_PROCESS	1
#define T_IOPRIO_CLASS_BE	2
#define T_IOPRIO_VALUE(class, data)	(((class) << 13) | (data))

/* The clone delay knob (CONFIG_THREAD_HANDOFF_CLONE_DELAY) */
#define DEBUGFS		"/sys/kernel/debug"
#define CLONE_DELAY_DIR	DEBUGFS "/thread_handoff"
#define CLONE_DELAY_TID	CLONE_DELAY_DIR "/clone_delay_tid"
#define CLONE_DELAY_MS	CLONE_DELAY_DIR "/clone_delay_ms"
#define CLONE_DELAY_STATE CLONE_DELAY_DIR "/clone_delay_state"
#define CLONE_WINDOW_MS	"3000"	/* written to clone_delay_ms */

/* Scratch files for the teardown to remove */
struct scratch_files {
	int nr;
	char path[MAX_FILES][PATH_MAX];
};

/* Cgroups and the cgroup2 mount for the teardown to remove, "" if none */
struct scratch_cgroup {
	char mnt[PATH_MAX];	/* our own cgroup2 mount */
	char dom[PATH_MAX];	/* a new cgroup */
	char thr[PATH_MAX];	/* its threaded child */
};

FIXTURE(identity) {
	int saved;		/* sysctl value to restore */
	bool restore;
	struct scratch_files files;
	struct scratch_cgroup cg;
	char core_pattern[256];	/* to restore, "" if unchanged */
	bool pm_test;		/* /sys/power/pm_test to set back to none */
	bool clone_delay;	/* the clone delay knob to disarm */
};

FIXTURE_VARIANT(identity) {
	int sysctl;
};

FIXTURE_VARIANT_ADD(identity, on) {
	.sysctl = 1,
};

FIXTURE_VARIANT_ADD(identity, off) {
	.sysctl = 0,
};

FIXTURE_SETUP(identity)
{
	struct statfs sfs;
	struct iou r;
	bool has;
	int val;

	if (geteuid() != 0)
		SKIP(return, "needs root to change " SYSCTL_PATH);
	if (access(SYSCTL_PATH, F_OK))
		SKIP(return, "no " SYSCTL_PATH " (no handoff support)");
	ASSERT_EQ(0, statfs(".", &sfs));
	if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)
		SKIP(return, "fsync never blocks here: run on a disk filesystem");
	ASSERT_EQ(0, iou_init(&r, 8, 0));
	has = ring_has_handoff(&r);
	iou_exit(&r);
	if (!has)
		SKIP(return, "no Handoff line in the ring's fdinfo");
	val = sysctl_get();
	ASSERT_LE(0, val) TH_LOG("reading " SYSCTL_PATH ": %d", val);
	self->saved = val;
	self->restore = true;
	ASSERT_EQ(0, sysctl_write(variant->sysctl ? "1" : "0"));
}

/*
 * Remove an empty cgroup; the tasks of the test process are gone, but
 * give their exit a moment to leave the cgroup unpopulated.
 */
static void cg_rmdir(struct __test_metadata *_metadata, const char *path)
{
	int i;

	for (i = 0; i < 50; i++) {
		if (!rmdir(path) || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		usleep(20 * 1000);
	}
	TH_LOG("cannot remove %s: %s", path, strerror(errno));
}

static int write_str(const char *path, const char *val);

/* In the parent, so that it runs even when the test process dies. */
FIXTURE_TEARDOWN_PARENT(identity)
{
	int i;

	if (self->restore)
		EXPECT_EQ(0, sysctl_write(self->saved ? "1" : "0"));
	if (self->core_pattern[0])
		EXPECT_EQ(0, write_str(CORE_PATTERN, self->core_pattern));
	if (self->pm_test)
		EXPECT_EQ(0, write_str("/sys/power/pm_test", "none"));
	if (self->clone_delay)
		write_str(CLONE_DELAY_TID, "0");
	for (i = 0; i < self->files.nr && i < MAX_FILES; i++) {
		char fifo[PATH_MAX + 8];

		if (!self->files.path[i][0])
			continue;
		unlink(self->files.path[i]);
		/* the FIFO of fifo_open_blocked(), if the case failed */
		snprintf(fifo, sizeof(fifo), "%s.fifo", self->files.path[i]);
		unlink(fifo);
	}
	if (self->cg.thr[0])
		cg_rmdir(_metadata, self->cg.thr);
	if (self->cg.dom[0]) {
		char path[PATH_MAX + 32];

		/* a case that failed may have left its cgroup frozen */
		snprintf(path, sizeof(path), "%s/cgroup.freeze", self->cg.dom);
		write_str(path, "0");
		snprintf(path, sizeof(path), "%s/cgroup.kill", self->cg.dom);
		write_str(path, "1");
		cg_rmdir(_metadata, self->cg.dom);
	}
	if (self->cg.mnt[0]) {
		umount2(self->cg.mnt, MNT_DETACH);
		rmdir(self->cg.mnt);
	}
}

/* A ring and a scratch file to hand off with */
struct ring_file {
	struct iou r;
	int fd;
	const char *path;
	char *buf;
};

/*
 * Open a ring and a new scratch file in the current directory, and warm
 * the ring up for the calling thread, which gets its spare workers now.
 * The file is registered in @sf (shared with the parent and the children)
 * for the teardown.
 */
static void rf_open(struct __test_metadata *_metadata,
		    struct scratch_files *sf, struct ring_file *rf)
{
	int slot = __atomic_fetch_add(&sf->nr, 1, __ATOMIC_RELAXED);
	char name[64];

	ASSERT_GT(MAX_FILES, slot);
	snprintf(name, sizeof(name), "identity_test.%d.%d.data", getpid(),
		 slot);
	rf->fd = disk_setup(_metadata, &rf->r, name, sf->path[slot]);
	ASSERT_LE(0, rf->fd);
	rf->path = sf->path[slot];
	rf->buf = malloc(BLOCK_LEN);
	ASSERT_NE(NULL, rf->buf);
	warm_up(_metadata, &rf->r, rf->path, 0);
}

static void rf_close(struct ring_file *rf)
{
	close(rf->fd);
	iou_exit(&rf->r);
	unlink(rf->path);
	free(rf->buf);
}

/*
 * @on (sysctl at 1): blocking fsyncs until one hands off, up to @tries;
 * fail if none did. Otherwise a few blocking fsyncs, none of which may hand
 * off. Either way the caller comes back as the same thread.
 */
static void force_handoff(struct __test_metadata *_metadata, bool on,
			  struct ring_file *rf, int tries, unsigned int flags)
{
	struct hstat a, b, d;
	int n;

	ASSERT_EQ(0, read_hstat(rf->r.fd, &a));
	n = blocking_fsyncs_flags(_metadata, &rf->r, rf->fd, rf->buf,
				  on ? tries : OFF_TRIES,
				  flags | (on ? BF_STOP : 0));
	ASSERT_EQ(0, read_hstat(rf->r.fd, &b));
	hstat_sub(&d, &b, &a);
	if (on ? !d.handoffs : !!d.handoffs)
		log_counters(_metadata, rf->r.fd);
	if (on) {
		ASSERT_LE(1UL, d.handoffs)
			TH_LOG("no handoff in %d blocking fsyncs", n);
	} else {
		ASSERT_EQ(0UL, d.handoffs)
			TH_LOG("handoff with the sysctl at 0");
	}
}

/*
 * Before the state under test changes: hand off once (sysctl at 1), and let
 * the task that handed off and the spare started in its place reach their
 * idle wait. The workers a later handoff can pick were then forked before
 * the change, and a state that does not move with the identity shows.
 */
static void prewarm(struct __test_metadata *_metadata, bool on,
		    struct ring_file *rf)
{
	force_handoff(_metadata, on, rf, BLOCK_TRIES, 0);
	usleep(100 * 1000);
}

/*
 * After a change of the calling thread's state that its idle workers lack
 * (see prewarm()): blocking fsyncs until one hands off, or until the kernel
 * refused REFUSE_STOP of them because the identity cannot move ("task") or
 * no idle worker can take it ("worker"), up to BLOCK_TRIES. With the sysctl
 * at 1 one of the two must happen; at 0 none may hand off. Either way the
 * caller comes back as the same thread and must still have the new state,
 * which @what names in the log.
 */
static void handoff_or_refusal(struct __test_metadata *_metadata, bool on,
			       struct ring_file *rf, const char *what)
{
	const int task = refused_index("task");
	const int worker = refused_index("worker");
	unsigned long handed = 0, refused = 0;
	struct hrefused ra, rb;
	struct hstat a, b;
	int i;

	ASSERT_LE(0, task);
	ASSERT_LE(0, worker);
	ASSERT_EQ(0, read_hstat(rf->r.fd, &a));
	ASSERT_EQ(0, read_refused(rf->r.fd, &ra));
	for (i = 0; i < (on ? BLOCK_TRIES : OFF_TRIES); i++) {
		blocking_fsyncs(_metadata, &rf->r, rf->fd, rf->buf, 1, false);
		ASSERT_EQ(0, read_hstat(rf->r.fd, &b));
		ASSERT_EQ(0, read_refused(rf->r.fd, &rb));
		handed = b.handoffs - a.handoffs;
		refused = rb.v[task] - ra.v[task] + rb.v[worker] - ra.v[worker];
		if (handed || refused >= REFUSE_STOP)
			break;
		usleep(20 * 1000);
	}
	if (on ? !handed && !refused : !!handed)
		log_counters(_metadata, rf->r.fd);
	if (!on) {
		ASSERT_EQ(0UL, handed) TH_LOG("%s: handoff with the sysctl at 0",
					      what);
		return;
	}
	ASSERT_TRUE(handed || refused)
		TH_LOG("%s: neither a handoff nor a refusal in %d blocking fsyncs",
		       what, i);
	TH_LOG("%s: %s", what, handed ? "handed off" : "handoff refused");
}

/*
 * Wait up to @ms for @pid, which must exit with CHILD_OK; after that it is
 * killed, reaped and the case fails, so that a hang does not outlive the
 * case and its teardown.
 */
static void reap_within(struct __test_metadata *_metadata, pid_t pid, long ms)
{
	long t0 = now_ms();
	int status = 0;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < ms)
		usleep(5 * 1000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	ASSERT_EQ(pid, r) TH_LOG("child %d still running after %ld ms: killed",
				 pid, ms);
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("child %d: status %#x", pid,
					      status);
	ASSERT_EQ(CHILD_OK, WEXITSTATUS(status)) TH_LOG("child %d", pid);
}

/* Wait for @pid, which must exit with @code. */
static void reap(struct __test_metadata *_metadata, pid_t pid, int code)
{
	int status;

	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("child %d: status %#x", pid,
					      status);
	ASSERT_EQ(code, WEXITSTATUS(status)) TH_LOG("child %d", pid);
}

/* A child forked before any check failed: did its own checks pass? */
static int child_status(struct __test_metadata *_metadata)
{
	return _metadata->exit_code == KSFT_PASS ? CHILD_OK : 1;
}

/*
 * The threads of this process in /proc/self/task, the io-wq workers
 * (PF_IO_WORKER in the flags of their stat) aside: their number changes as
 * the pool grows and shrinks, and after a handoff the task that blocked is
 * one of them. Every entry's state must be readable.
 */
struct task_list {
	int nr_all;		/* entries, workers included */
	pid_t first;		/* first entry listed */
	int nr_user;
	pid_t user[8];		/* the other threads, sorted */
};

static int cmp_pid(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

static void list_tasks(struct __test_metadata *_metadata,
		       struct task_list *tl)
{
	struct dirent *de;
	DIR *d;

	memset(tl, 0, sizeof(*tl));
	d = opendir("/proc/self/task");
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		char path[64], buf[1024], *p, state;
		unsigned int flags;
		pid_t tid;
		int n;

		if (de->d_name[0] == '.')
			continue;
		tid = atoi(de->d_name);
		if (!tl->nr_all++)
			tl->first = tid;
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
		if (read_small(path, buf, sizeof(buf)) < 0) {
			/* an idle worker may exit meanwhile */
			ASSERT_TRUE(errno == ENOENT || errno == ESRCH)
				TH_LOG("%s: %s", path, strerror(errno));
			continue;
		}
		p = strrchr(buf, ')');
		ASSERT_NE(NULL, p) TH_LOG("%s: %s", path, buf);
		n = sscanf(p + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags);
		ASSERT_EQ(2, n) TH_LOG("%s: %s", path, buf);
		ASSERT_NE(NULL, strchr("RSDTtXZPIWK", state))
			TH_LOG("%s: state %c", path, state);
		if (flags & PF_IO_WORKER)
			continue;
		ASSERT_GT((int)ARRAY_SIZE(tl->user), tl->nr_user);
		tl->user[tl->nr_user++] = tid;
	}
	closedir(d);
	qsort(tl->user, tl->nr_user, sizeof(tl->user[0]), cmp_pid);
}

/*
 * Hand off from the calling thread, which must lead its thread group and
 * have @threads - 1 other threads, and check its ids.
 */
static void ids_check(struct __test_metadata *_metadata,
		      struct scratch_files *sf, bool on, int threads)
{
	pid_t pid = getpid(), tid = sys_gettid(), ppid = getppid();
	struct task_list before, after;
	char link[64], want[64];
	struct ring_file rf;
	ssize_t n;

	ASSERT_EQ(pid, tid);
	rf_open(_metadata, sf, &rf);
	list_tasks(_metadata, &before);
	ASSERT_EQ(threads, before.nr_user);
	ASSERT_EQ(pid, before.first);

	force_handoff(_metadata, on, &rf, BLOCK_TRIES, 0);

	EXPECT_EQ(tid, sys_gettid());
	EXPECT_EQ(pid, getpid());
	EXPECT_EQ(ppid, getppid());
	/* still the leader: the thread ID is the process ID */
	EXPECT_EQ(getpid(), sys_gettid());

	n = readlink("/proc/self", link, sizeof(link) - 1);
	ASSERT_LT(0, n);
	link[n] = '\0';
	snprintf(want, sizeof(want), "%d", pid);
	EXPECT_STREQ(want, link);
	n = readlink("/proc/thread-self", link, sizeof(link) - 1);
	ASSERT_LT(0, n);
	link[n] = '\0';
	snprintf(want, sizeof(want), "%d/task/%d", pid, tid);
	EXPECT_STREQ(want, link);

	list_tasks(_metadata, &after);
	EXPECT_EQ(pid, after.first) TH_LOG("the leader is listed first");
	EXPECT_EQ(before.nr_user, after.nr_user)
		TH_LOG("user threads: %d before, %d after (%d and %d with workers)",
		       before.nr_user, after.nr_user, before.nr_all,
		       after.nr_all);
	EXPECT_EQ(0, memcmp(before.user, after.user, sizeof(before.user)))
		TH_LOG("another set of threads");
	rf_close(&rf);
}

static void *wait_pipe(void *arg)
{
	char c;

	while (read(*(int *)arg, &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

TEST_F_TIMEOUT(identity, ids, 120)
{
	int pipefd[2];
	pthread_t idle;
	pid_t child;

	/* the harness forks each test: its main thread leads the process */
	ASSERT_EQ(getpid(), sys_gettid());

	/* the main thread of a child hands off, and the child is reaped */
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		ids_check(_metadata, &self->files, variant->sysctl, 1);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
	errno = 0;
	EXPECT_EQ(-1, kill(child, 0));
	EXPECT_EQ(ESRCH, errno);

	/* the leader hands off with another thread around */
	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_EQ(0, pthread_create(&idle, NULL, wait_pipe, &pipefd[0]));
	ids_check(_metadata, &self->files, variant->sysctl, 2);
	close(pipefd[1]);
	ASSERT_EQ(0, pthread_join(idle, NULL));
	close(pipefd[0]);
}

static pid_t sig_main;
static int sig_usr1, sig_rt, sig_elsewhere;
static pid_t sig_where;

static void count_signal(int sig)
{
	int err = errno;
	pid_t tid = sys_gettid();

	if (tid != sig_main) {
		__atomic_add_fetch(&sig_elsewhere, 1, __ATOMIC_RELAXED);
		sig_where = tid;
	} else if (sig == SIGUSR1) {
		__atomic_add_fetch(&sig_usr1, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_add_fetch(&sig_rt, 1, __ATOMIC_RELAXED);
	}
	errno = err;
}

struct sender {
	pthread_t target;
	int stop;
	int sent_usr1;
	int sent_rt;		/* queued: each one must be delivered */
};

/* Signals @target every 2 ms; this thread leaves them unblocked. */
static void *send_signals(void *arg)
{
	struct sender *s = arg;
	union sigval v = { .sival_int = 0 };

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		if (!pthread_kill(s->target, SIGUSR1))
			s->sent_usr1++;
		if (!pthread_sigqueue(s->target, SIGRTMIN + 1, v))
			s->sent_rt++;
		usleep(2000);
	}
	return NULL;
}

TEST_F_TIMEOUT(identity, signal_to_tid, 120)
{
	struct sigaction sa = {
		.sa_handler = count_signal,
		.sa_flags = SA_RESTART,
	};
	struct sender s = { .target = pthread_self() };
	struct ring_file rf;
	pthread_t th;
	sigset_t set;

	rf_open(_metadata, &self->files, &rf);
	sig_main = sys_gettid();
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, sigaction(SIGRTMIN + 1, &sa, NULL));
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGRTMIN + 1);
	ASSERT_EQ(0, pthread_sigmask(SIG_UNBLOCK, &set, NULL));
	ASSERT_EQ(0, pthread_create(&th, NULL, send_signals, &s));

	force_handoff(_metadata, variant->sysctl, &rf, SIG_TRIES, BF_SIGNALS);

	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(th, NULL));
	/* a syscall return delivers what is still pending */
	sched_yield();
	TH_LOG("sent %d SIGUSR1 and %d queued signals; handled %d and %d",
	       s.sent_usr1, s.sent_rt, sig_usr1, sig_rt);
	EXPECT_LT(0, s.sent_usr1);
	EXPECT_LT(0, sig_usr1);
	EXPECT_EQ(0, sig_elsewhere)
		TH_LOG("a handler ran on thread %d, the target was %d",
		       sig_where, sig_main);
	EXPECT_EQ(s.sent_rt, sig_rt) TH_LOG("queued signals lost");
	rf_close(&rf);
}

static void *altstack_seen;
static stack_t altstack_in_handler;

static void on_altstack(int sig)
{
	int here;

	(void)sig;
	altstack_seen = &here;
	sigaltstack(NULL, &altstack_in_handler);
}

TEST_F_TIMEOUT(identity, sigmask_sigaltstack, 120)
{
	struct sigaction sa = {
		.sa_handler = on_altstack,
		.sa_flags = SA_ONSTACK,
	};
	const size_t size = 64 * 1024;
	sigset_t block, want, now;
	stack_t ss, before, after;
	struct ring_file rf;
	char *stack;
	int sig;

	rf_open(_metadata, &self->files, &rf);
	stack = malloc(size);
	ASSERT_NE(NULL, stack);
	ss.ss_sp = stack;
	ss.ss_size = size;
	ss.ss_flags = 0;
	ASSERT_EQ(0, sigaltstack(&ss, NULL));
	ASSERT_EQ(0, sigaltstack(NULL, &before));
	sigemptyset(&block);
	sigaddset(&block, SIGUSR2);
	sigaddset(&block, SIGWINCH);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &block, NULL));
	ASSERT_EQ(0, sigprocmask(SIG_SETMASK, NULL, &want));

	force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);

	ASSERT_EQ(0, sigprocmask(SIG_SETMASK, NULL, &now));
	EXPECT_EQ(1, sigismember(&now, SIGUSR2));
	EXPECT_EQ(1, sigismember(&now, SIGWINCH));
	for (sig = 1; sig < _NSIG; sig++) {
		EXPECT_EQ(sigismember(&want, sig), sigismember(&now, sig))
			TH_LOG("signal %d", sig);
	}

	ASSERT_EQ(0, sigaltstack(NULL, &after));
	EXPECT_EQ(before.ss_sp, after.ss_sp);
	EXPECT_EQ(stack, after.ss_sp);
	EXPECT_EQ(before.ss_size, after.ss_size);
	EXPECT_EQ(size, after.ss_size);
	EXPECT_EQ(before.ss_flags, after.ss_flags);
	EXPECT_EQ(0, after.ss_flags);

	/* and a handler still runs on it */
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGURG, &sa, NULL));
	ASSERT_EQ(0, raise(SIGURG));
	EXPECT_TRUE((char *)altstack_seen >= stack &&
		    (char *)altstack_seen < stack + size)
		TH_LOG("handler stack %p, altstack %p+%zu", altstack_seen,
		       stack, size);
	EXPECT_EQ(SS_ONSTACK, altstack_in_handler.ss_flags & SS_ONSTACK);

	ss.ss_flags = SS_DISABLE;
	EXPECT_EQ(0, sigaltstack(&ss, NULL));
	EXPECT_EQ(0, sigprocmask(SIG_UNBLOCK, &block, NULL));
	free(stack);
	rf_close(&rf);
}

static __thread unsigned long tls_word = 1;

static unsigned long thread_pointer(void)
{
#if defined(__x86_64__)
	unsigned long fs = 0;

	if (syscall(SYS_arch_prctl, ARCH_GET_FS, &fs))
		return 0;
	return fs;
#else
	return (unsigned long)__builtin_thread_pointer();
#endif
}

#define T_ORIG_RSEQ_SIZE	32		/* the rseq ABI's original size */
#define T_RSEQ_SIG		0x53053053	/* for the test's own area */

/* The rseq area registered for the calling thread */
struct rseq_reg {
	struct rseq *area;
	unsigned int len;
	unsigned int sig;
	bool own;		/* the test's, not glibc's */
};

/* Used when glibc registers no rseq area (glibc.pthread.rseq=0, old glibc) */
static struct rseq own_rseq;	/* the type is 32-byte aligned */

/* rseq(2): 0 or -errno */
static int sys_rseq(struct rseq *area, unsigned int len, int flags,
		    unsigned int sig)
{
	return syscall(__NR_rseq, area, len, flags, sig) ? -errno : 0;
}

/*
 * The rseq area must hold the CPU this thread runs on, in cpu_id and
 * cpu_id_start, as the kernel refreshes them on every return to userspace
 * after a migration. getcpu(2) is issued as a raw syscall: glibc's
 * sched_getcpu() reads the rseq area. A migration between the reads is
 * retried.
 */
static void rseq_cpu_check(struct __test_metadata *_metadata,
			   const struct rseq *rs, const char *when)
{
	unsigned int c1 = 0, c2 = 0, start = 0, cpu = 0;
	int i;

	for (i = 0; i < 100; i++) {
		c1 = __atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
		start = __atomic_load_n(&rs->cpu_id_start, __ATOMIC_RELAXED);
		ASSERT_EQ(0, syscall(SYS_getcpu, &cpu, NULL, NULL));
		c2 = __atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
		if (c1 == c2 && c1 == cpu && start == cpu)
			return;
	}
	EXPECT_TRUE(c2 == cpu && start == cpu)
		TH_LOG("%s: rseq cpu_id %d, cpu_id_start %d, on CPU %u", when,
		       (int)c2, (int)start, cpu);
}

/*
 * Find the rseq area of the calling thread: glibc's, or, when glibc
 * registered none, the test's own, registered now. Either way the kernel
 * must have it registered for this thread: registering it once more is
 * refused with EBUSY (EINVAL for another area, 0 with none registered).
 */
static void rseq_setup(struct __test_metadata *_metadata,
		       struct rseq_reg *rr)
{
	int ret;

	memset(rr, 0, sizeof(*rr));
#if defined(RSEQ_SIG)
	if (__rseq_size) {
		/* glibc registers at least the original 32 bytes */
		rr->area = (struct rseq *)((char *)__builtin_thread_pointer() +
					   __rseq_offset);
		rr->len = __rseq_size < T_ORIG_RSEQ_SIZE ? T_ORIG_RSEQ_SIZE :
							   __rseq_size;
		rr->sig = RSEQ_SIG;
	}
#endif
	if (!rr->area) {
		rr->area = &own_rseq;
		rr->len = T_ORIG_RSEQ_SIZE;
		rr->sig = T_RSEQ_SIG;
		rr->own = true;
		ret = sys_rseq(rr->area, rr->len, 0, rr->sig);
		ASSERT_EQ(0, ret) TH_LOG("registering an rseq area: %s (CONFIG_RSEQ=y?)",
					 strerror(-ret));
	}
	TH_LOG("rseq: %s area, %u bytes", rr->own ? "the test's own" : "glibc's",
	       rr->len);
	ret = sys_rseq(rr->area, rr->len, 0, rr->sig);
	ASSERT_EQ(-EBUSY, ret) TH_LOG("rseq area not registered: %s",
				      strerror(-ret));
	rseq_cpu_check(_metadata, rr->area, "before");
}

/*
 * The registration of @rr must still be this thread's: registering the
 * area again is refused with EBUSY, the area follows the CPU, unregistering
 * it with another signature fails with EPERM and with its own works.
 * glibc's area is then registered again, the test's own left unregistered.
 */
static void rseq_check(struct __test_metadata *_metadata,
		       const struct rseq_reg *rr)
{
	int ret;

	ret = sys_rseq(rr->area, rr->len, 0, rr->sig);
	EXPECT_EQ(-EBUSY, ret) TH_LOG("rseq registration lost: %s",
				      strerror(-ret));
	rseq_cpu_check(_metadata, rr->area, "after");
	ret = sys_rseq(rr->area, rr->len, RSEQ_FLAG_UNREGISTER, rr->sig ^ 1);
	EXPECT_EQ(-EPERM, ret) TH_LOG("unregistering, wrong signature: %s",
				      strerror(-ret));
	ret = sys_rseq(rr->area, rr->len, RSEQ_FLAG_UNREGISTER, rr->sig);
	EXPECT_EQ(0, ret) TH_LOG("unregistering: %s", strerror(-ret));
	if (!ret && !rr->own) {
		ret = sys_rseq(rr->area, rr->len, 0, rr->sig);
		ASSERT_EQ(0, ret) TH_LOG("registering glibc's area again: %s",
					 strerror(-ret));
	}
}

#if defined(__x86_64__)
/*
 * Blocking fsyncs with io_uring_enter() issued by enter_keep_regs(), until
 * one hands off (@on) or OFF_TRIES of them; every register the syscall ABI
 * preserves must come back, whether or not the call handed off.
 */
static void vector_handoff(struct __test_metadata *_metadata, bool on,
			   struct ring_file *rf)
{
	static struct vec_io io;
	const bool avx = __builtin_cpu_supports("avx");
	const unsigned int width = avx ? 32 : 16;
	const unsigned int mxcsr = 0xff80;	/* round to zero, FZ */
	const unsigned short fcw = 0x0c7f;	/* 24-bit precision, to zero */
	unsigned int mxcsr0 = get_mxcsr(), j, k;
	unsigned short fcw0 = get_fcw();
	pid_t tid = sys_gettid();
	struct hstat a, b;
	bool handed = false;
	int i;

	TH_LOG("checking %s8..15", avx ? "ymm" : "xmm");
	set_mxcsr(mxcsr);
	set_fcw(fcw);
	ASSERT_EQ(0, read_hstat(rf->r.fd, &a));
	for (i = 0; i < (on ? BLOCK_TRIES : OFF_TRIES) && !handed; i++) {
		__u64 ud = 0xd0000 + i;
		struct io_uring_sqe *sqe;
		struct io_uring_cqe cqe;
		unsigned long gpr[10];
		long ret;

		fill(rf->buf, BLOCK_LEN, i + 1);
		ASSERT_EQ(0, write_file(rf->fd, rf->buf, BLOCK_LEN));
		sqe = iou_sqe(&rf->r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_FSYNC, rf->fd, NULL, 0, 0, ud);
		__atomic_store_n(rf->r.sq_tail, rf->r.sqe_tail,
				 __ATOMIC_RELEASE);
		for (j = 0; j < sizeof(io.in); j++)
			io.in[j / 32][j % 32] = (unsigned char)(i * 37 + j * 11 + 1);
		memset(io.out, 0, sizeof(io.out));
		for (k = 6; k < 10; k++)
			gpr[k] = 0x5eed00c0de000000UL + i * 16 + k;

		ret = enter_keep_regs(rf->r.fd, &io, avx, gpr);

		ASSERT_EQ(1, ret) TH_LOG("fsync %d: io_uring_enter %ld", i, ret);
		ASSERT_EQ(tid, sys_gettid());
		for (k = 0; k < 8; k++) {
			EXPECT_EQ(0, memcmp(io.in[k], io.out[k], width))
				TH_LOG("fsync %d: %cmm%u changed", i,
				       avx ? 'y' : 'x', k + 8);
		}
		EXPECT_EQ((unsigned long)rf->r.fd, gpr[0]) TH_LOG("rdi");
		EXPECT_EQ(1UL, gpr[1]) TH_LOG("rsi");
		EXPECT_EQ(1UL, gpr[2]) TH_LOG("rdx");
		EXPECT_EQ((unsigned long)IORING_ENTER_GETEVENTS, gpr[3])
			TH_LOG("r10");
		EXPECT_EQ(0UL, gpr[4]) TH_LOG("r8");
		EXPECT_EQ(0UL, gpr[5]) TH_LOG("r9");
		for (k = 6; k < 10; k++) {
			EXPECT_EQ(0x5eed00c0de000000UL + i * 16 + k, gpr[k])
				TH_LOG("r%u", k + 6);
		}
		EXPECT_EQ(mxcsr, get_mxcsr());
		EXPECT_EQ(fcw, get_fcw());
		ASSERT_TRUE(iou_cqe(&rf->r, &cqe)) TH_LOG("fsync %d", i);
		ASSERT_EQ(ud, cqe.user_data);
		ASSERT_EQ(0, cqe.res) TH_LOG("fsync %d: %s", i,
					     strerror(-cqe.res));
		ASSERT_EQ(0, read_hstat(rf->r.fd, &b));
		handed = b.handoffs != a.handoffs;
		if (!handed)
			usleep(20 * 1000);
	}
	set_mxcsr(mxcsr0);
	set_fcw(fcw0);
	if (on != handed)
		log_counters(_metadata, rf->r.fd);
	if (on) {
		ASSERT_TRUE(handed)
			TH_LOG("no handoff in %d blocking fsyncs", i);
	} else {
		ASSERT_FALSE(handed) TH_LOG("handoff with the sysctl at 0");
	}
}
#elif defined(__aarch64__)
#include <sys/auxv.h>

#ifndef HWCAP_PACA
#define HWCAP_PACA	(1UL << 30)
#endif
#ifndef HWCAP2_SME
#define HWCAP2_SME	(1UL << 23)
#endif
#ifndef HWCAP2_MTE
#define HWCAP2_MTE	(1UL << 18)
#endif

/* @ptr signed with the APIA key and modifier @mod (PACIA1716) */
static unsigned long pac_sign(unsigned long ptr, unsigned long mod)
{
	register unsigned long x17 __asm__("x17") = ptr;
	register unsigned long x16 __asm__("x16") = mod;

	__asm__ volatile("hint #8" : "+r" (x17) : "r" (x16));
	return x17;
}

/*
 * Blocking fsyncs with io_uring_enter() issued by enter_keep_regs(), until
 * one hands off (@on) or OFF_TRIES of them; every register the syscall ABI
 * preserves must come back, whether or not the call handed off: x1..x5, x8,
 * x19..x28, v0..v31, FPCR, FPSR, TPIDR2_EL0 (with SME), and a pointer signed
 * with the APIA key before the call must still authenticate after it.
 */
static void vector_handoff(struct __test_metadata *_metadata, bool on,
			   struct ring_file *rf)
{
	static struct vec_io io;
	const bool pac = getauxval(AT_HWCAP) & HWCAP_PACA;
	const bool sme = getauxval(AT_HWCAP2) & HWCAP2_SME;
	/* round towards zero, flush to zero, default NaN */
	const unsigned long fpcr = (3UL << 22) | (1UL << 24) | (1UL << 25);
	/* the inexact and underflow flags */
	const unsigned long fpsr = (1UL << 4) | (1UL << 3);
	unsigned long fpcr0 = get_fpcr(), fpsr0 = get_fpsr(), tp2 = 0;
	unsigned long fpcr1, fpsr1;
	pid_t tid = sys_gettid();
	struct hstat a, b;
	bool handed = false;
	unsigned int j, k;
	int i;

	TH_LOG("checking x1-x5, x8, x19-x28, v0-v31, FPCR, FPSR%s%s",
	       sme ? ", TPIDR2_EL0" : "", pac ? ", an APIA-signed pointer" : "");
	/*
	 * The authentication check is not vacuous: signing changes pointers.
	 * One signature leaves a pointer as it was in about 1 of 128 cases
	 * (a PAC of 0 in the few bits above a 48-bit address); 16 can't all.
	 */
	if (pac) {
		unsigned long same = 0;

		for (k = 0; k < 16; k++)
			same += pac_sign((unsigned long)&io, k) == (unsigned long)&io;
		ASSERT_GT(16UL, same) TH_LOG("PACIA1716 signs nothing");
	}
	ASSERT_EQ(0, read_hstat(rf->r.fd, &a));
	for (i = 0; i < (on ? BLOCK_TRIES : OFF_TRIES) && !handed; i++) {
		const unsigned long ptr = (unsigned long)&io + i * 8;
		unsigned long gpr[16], signed_ptr = ptr;
		__u64 ud = 0xd0000 + i;
		struct io_uring_sqe *sqe;
		struct io_uring_cqe cqe;
		long ret;

		fill(rf->buf, BLOCK_LEN, i + 1);
		ASSERT_EQ(0, write_file(rf->fd, rf->buf, BLOCK_LEN));
		sqe = iou_sqe(&rf->r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_FSYNC, rf->fd, NULL, 0, 0, ud);
		__atomic_store_n(rf->r.sq_tail, rf->r.sqe_tail,
				 __ATOMIC_RELEASE);
		for (j = 0; j < sizeof(io.in); j++)
			io.in[j / 16][j % 16] = (unsigned char)(i * 37 + j * 11 + 1);
		memset(io.out, 0, sizeof(io.out));
		io.signed_ptr = 0;
		for (k = 6; k < 16; k++)
			gpr[k] = 0x5eed00c0de000000UL + i * 32 + k;
		if (sme) {
			tp2 = 0x7b2000UL + i;
			set_tpidr2(tp2);
		}
		set_fpcr(fpcr);
		set_fpsr(fpsr);

		ret = enter_keep_regs(rf->r.fd, &io, gpr, &signed_ptr,
				      0x5a17UL + i);

		fpcr1 = get_fpcr();
		fpsr1 = get_fpsr();
		set_fpcr(fpcr0);
		set_fpsr(fpsr0);
		EXPECT_EQ(fpcr, fpcr1) TH_LOG("FPCR");
		EXPECT_EQ(fpsr, fpsr1) TH_LOG("FPSR");
		if (sme) {
			EXPECT_EQ(tp2, get_tpidr2()) TH_LOG("TPIDR2_EL0");
			/* glibc knows nothing of SME: leave no lazy-save block */
			set_tpidr2(0);
		}
		ASSERT_EQ(1, ret) TH_LOG("fsync %d: io_uring_enter %ld", i, ret);
		ASSERT_EQ(tid, sys_gettid());
		for (k = 0; k < 32; k++) {
			EXPECT_EQ(0, memcmp(io.in[k], io.out[k], 16))
				TH_LOG("fsync %d: v%u changed", i, k);
		}
		EXPECT_EQ(1UL, gpr[0]) TH_LOG("x1");
		EXPECT_EQ(1UL, gpr[1]) TH_LOG("x2");
		EXPECT_EQ((unsigned long)IORING_ENTER_GETEVENTS, gpr[2])
			TH_LOG("x3");
		EXPECT_EQ(0UL, gpr[3]) TH_LOG("x4");
		EXPECT_EQ(0UL, gpr[4]) TH_LOG("x5");
		EXPECT_EQ((unsigned long)__NR_io_uring_enter, gpr[5])
			TH_LOG("x8");
		for (k = 6; k < 16; k++) {
			EXPECT_EQ(0x5eed00c0de000000UL + i * 32 + k, gpr[k])
				TH_LOG("x%u", k + 13);
		}
		EXPECT_EQ(ptr, signed_ptr)
			TH_LOG("fsync %d: %#lx signed as %#lx authenticates as %#lx",
			       i, ptr, io.signed_ptr, signed_ptr);
		ASSERT_TRUE(iou_cqe(&rf->r, &cqe)) TH_LOG("fsync %d", i);
		ASSERT_EQ(ud, cqe.user_data);
		ASSERT_EQ(0, cqe.res) TH_LOG("fsync %d: %s", i,
					     strerror(-cqe.res));
		ASSERT_EQ(0, read_hstat(rf->r.fd, &b));
		handed = b.handoffs != a.handoffs;
		if (!handed)
			usleep(20 * 1000);
	}
	if (on != handed)
		log_counters(_metadata, rf->r.fd);
	if (on) {
		ASSERT_TRUE(handed)
			TH_LOG("no handoff in %d blocking fsyncs", i);
	} else {
		ASSERT_FALSE(handed) TH_LOG("handoff with the sysctl at 0");
	}
}
#endif /* __aarch64__ */

TEST_F_TIMEOUT(identity, tls_fpu, 120)
{
	unsigned long tp, *word = &tls_word;
	struct ring_file rf;
	struct rseq_reg rr;
#if defined(__x86_64__)
	static unsigned long gs_marker;
	unsigned long gs0 = 0, gs = 0, fs_self;
#endif

	rf_open(_metadata, &self->files, &rf);
	tls_word = 0x715c0deUL ^ (unsigned long)getpid();
	tp = thread_pointer();
	ASSERT_NE(0UL, tp);
	rseq_setup(_metadata, &rr);

#if defined(__x86_64__)
	ASSERT_EQ(0, syscall(SYS_arch_prctl, ARCH_GET_GS, &gs0));
	ASSERT_EQ(0, syscall(SYS_arch_prctl, ARCH_SET_GS, &gs_marker));
	vector_handoff(_metadata, variant->sysctl, &rf);
	EXPECT_EQ(0, syscall(SYS_arch_prctl, ARCH_GET_GS, &gs));
	EXPECT_EQ((unsigned long)&gs_marker, gs);
	EXPECT_EQ(0, syscall(SYS_arch_prctl, ARCH_SET_GS, gs0));
	/* the TCB's self pointer, read through %fs */
	__asm__ volatile("mov %%fs:0, %0" : "=r" (fs_self));
	EXPECT_EQ(tp, fs_self);
#elif defined(__aarch64__)
	vector_handoff(_metadata, variant->sysctl, &rf);
#else
	force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);
#endif

	EXPECT_EQ(tp, thread_pointer());
	EXPECT_EQ(word, &tls_word);
	EXPECT_EQ(0x715c0deUL ^ (unsigned long)getpid(), tls_word);
	rseq_check(_metadata, &rr);
	rf_close(&rf);
}

static long tv_us(const struct timeval *tv)
{
	return tv->tv_sec * 1000000L + tv->tv_usec;
}

/* Write @val to @path with a single write(2); 0 or -errno. */
static int write_str(const char *path, const char *val)
{
	size_t len = strlen(val);
	int fd, err = 0;
	ssize_t n;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0)
		err = -errno;
	else if ((size_t)n != len)
		err = -EIO;
	close(fd);
	return err;
}

/* The cgroup v2 path ("0::<path>" line) in the cgroup file @file. */
static int cg2_path(const char *file, char *out, size_t size)
{
	char buf[4096], *line, *save;

	if (read_small(file, buf, sizeof(buf)) <= 0)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "0::", 3))
			continue;
		snprintf(out, size, "%s", line + 3);
		return 0;
	}
	return -1;
}

/* @dst = @a @b, a path of at most @size bytes: 0, or -1 if too long */
static int path_cat(char *dst, size_t size, const char *a, const char *b)
{
	int n = snprintf(dst, size, "%s%s", a, b);

	return n >= 0 && (size_t)n < size ? 0 : -1;
}

/*
 * mkdir @a @b, to @dst for the teardown to remove; @dst stays "" if the
 * directory cannot be made.
 */
static void scratch_mkdir(struct __test_metadata *_metadata, char *dst,
			  size_t size, const char *a, const char *b)
{
	ASSERT_EQ(0, path_cat(dst, size, a, b));
	if (mkdir(dst, 0755)) {
		int err = errno;

		TH_LOG("%s: %s", dst, strerror(err));
		dst[0] = '\0';
		ASSERT_EQ(0, err);
	}
}

/*
 * Move the calling process to a new cgroup v2 cgroup, @cg->dom, with an
 * empty threaded child @cg->thr, on /sys/fs/cgroup if it is cgroup2, else
 * on cgroup2 mounted on a new directory in the current one. All three are
 * the teardown's to remove. The cgroup v2 path of @cg->dom, as
 * /proc/<pid>/cgroup shows it, goes to @dom.
 */
static void cg_setup(struct __test_metadata *_metadata,
		     struct scratch_cgroup *cg, char *dom, size_t size)
{
	char cwd[PATH_MAX - 128], path[PATH_MAX], name[64], val[16];
	const char *root = "/sys/fs/cgroup";
	struct statfs sfs;
	size_t len;
	int ret;

	snprintf(name, sizeof(name), "/identity_test.%d", getpid());
	if (statfs(root, &sfs) || sfs.f_type != CGROUP2_SUPER_MAGIC) {
		ASSERT_NE(NULL, getcwd(cwd, sizeof(cwd)));
		ASSERT_EQ(0, path_cat(path, sizeof(path), cwd, name));
		scratch_mkdir(_metadata, cg->mnt, sizeof(cg->mnt), path,
			      ".cgroup2");
		ret = mount("cgroup2", cg->mnt, "cgroup2", 0, NULL);
		ASSERT_EQ(0, ret) TH_LOG("no cgroup2 on %s, cannot mount it on %s: %s",
					 root, cg->mnt, strerror(errno));
		root = cg->mnt;
	}
	scratch_mkdir(_metadata, cg->dom, sizeof(cg->dom), root, name);
	scratch_mkdir(_metadata, cg->thr, sizeof(cg->thr), cg->dom, "/t");

	ASSERT_EQ(0, path_cat(path, sizeof(path), cg->thr, "/cgroup.type"));
	ret = write_str(path, "threaded");
	ASSERT_EQ(0, ret) TH_LOG("%s: %s", path, strerror(-ret));
	ASSERT_EQ(0, path_cat(path, sizeof(path), cg->dom, "/cgroup.procs"));
	snprintf(val, sizeof(val), "%d", getpid());
	ret = write_str(path, val);
	ASSERT_EQ(0, ret) TH_LOG("%s: %s", path, strerror(-ret));

	ASSERT_EQ(0, cg2_path("/proc/thread-self/cgroup", dom, size));
	len = strlen(dom);
	ASSERT_LE(strlen(name), len) TH_LOG("in cgroup %s", dom);
	ASSERT_STREQ(name, dom + len - strlen(name));
}

TEST_F_TIMEOUT(identity, sched_affinity_comm, 120)
{
	const int prio = T_IOPRIO_VALUE(T_IOPRIO_CLASS_BE, 6);
	char name[17] = "", path[64], comm[32], cg0[4096], cg1[4096];
	char dom[PATH_MAX], want[PATH_MAX], got[PATH_MAX];
	char threads[PATH_MAX], val[16];
	struct sched_param sp = { .sched_priority = 0 };
	cpu_set_t allowed, one, now;
	pid_t tid = sys_gettid();
	struct rusage ru0, ru1;
	struct ring_file rf;
	int cpu, ret;

	/* the process, and with it the io-wq workers to come, in a cgroup */
	cg_setup(_metadata, &self->cg, dom, sizeof(dom));
	ASSERT_EQ(0, path_cat(want, sizeof(want), dom, "/t"));

	/* the spare workers start before the attributes change */
	rf_open(_metadata, &self->files, &rf);
	prewarm(_metadata, variant->sysctl, &rf);

	/* this thread alone goes to the threaded child, the workers stay */
	ASSERT_EQ(0, path_cat(threads, sizeof(threads), self->cg.thr,
			      "/cgroup.threads"));
	snprintf(val, sizeof(val), "%d", tid);
	ret = write_str(threads, val);
	ASSERT_EQ(0, ret) TH_LOG("%s: %s", threads, strerror(-ret));
	ASSERT_EQ(0, cg2_path("/proc/thread-self/cgroup", got, sizeof(got)));
	ASSERT_STREQ(want, got);

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(allowed), &allowed));
	for (cpu = CPU_SETSIZE - 1; cpu > 0; cpu--)
		if (CPU_ISSET(cpu, &allowed))
			break;
	ASSERT_TRUE(CPU_ISSET(cpu, &allowed));
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	ASSERT_EQ(0, sched_setscheduler(0, SCHED_BATCH, &sp));
	ASSERT_EQ(0, setpriority(PRIO_PROCESS, tid, 5));
	ASSERT_EQ(0, prctl(PR_SET_NAME, "iou-ident", 0, 0, 0));
	ASSERT_EQ(0, prctl(PR_SET_TIMERSLACK, 123457, 0, 0, 0));
	ASSERT_EQ(0, syscall(SYS_ioprio_set, T_IOPRIO_WHO_PROCESS, 0, prio));
	snprintf(path, sizeof(path), "/proc/self/task/%d/cgroup", tid);
	ASSERT_LT(0, read_small(path, cg0, sizeof(cg0)));
	ASSERT_EQ(0, getrusage(RUSAGE_THREAD, &ru0));

	force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);

	ASSERT_EQ(0, getrusage(RUSAGE_THREAD, &ru1));
	EXPECT_EQ(SCHED_BATCH, sched_getscheduler(0));
	errno = 0;
	EXPECT_EQ(5, getpriority(PRIO_PROCESS, tid));
	EXPECT_EQ(0, errno);
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(now), &now));
	EXPECT_TRUE(CPU_EQUAL(&one, &now));
	EXPECT_EQ(cpu, sched_getcpu());
	ASSERT_EQ(0, prctl(PR_GET_NAME, name, 0, 0, 0));
	EXPECT_STREQ("iou-ident", name);
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	ASSERT_LT(0, read_small(path, comm, sizeof(comm)));
	EXPECT_STREQ("iou-ident\n", comm);
	EXPECT_EQ(123457, prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
	EXPECT_EQ(prio, syscall(SYS_ioprio_get, T_IOPRIO_WHO_PROCESS, 0));
	snprintf(path, sizeof(path), "/proc/self/task/%d/cgroup", tid);
	ASSERT_LT(0, read_small(path, cg1, sizeof(cg1)));
	EXPECT_STREQ(cg0, cg1);
	ASSERT_EQ(0, cg2_path("/proc/thread-self/cgroup", got, sizeof(got)));
	EXPECT_STREQ(want, got) TH_LOG("the thread left its threaded cgroup");

	/* per-thread accounting never goes back */
	EXPECT_LE(tv_us(&ru0.ru_utime) + tv_us(&ru0.ru_stime),
		  tv_us(&ru1.ru_utime) + tv_us(&ru1.ru_stime));
	EXPECT_LE(ru0.ru_nvcsw, ru1.ru_nvcsw);
	EXPECT_LE(ru0.ru_nivcsw, ru1.ru_nivcsw);
	EXPECT_LE(ru0.ru_minflt, ru1.ru_minflt);
	EXPECT_LE(ru0.ru_majflt, ru1.ru_majflt);
	EXPECT_LE(ru0.ru_inblock, ru1.ru_inblock);
	EXPECT_LE(ru0.ru_oublock, ru1.ru_oublock);
	rf_close(&rf);
}

/* What the calling thread's credentials are made of */
struct cred_set {
	uid_t ruid, euid, suid, fsuid;
	gid_t rgid, egid, sgid, fsgid;
	int ngroups;
	gid_t groups[64];
	__u32 eff[_LINUX_CAPABILITY_U32S_3];
	__u32 prm[_LINUX_CAPABILITY_U32S_3];
	__u32 inh[_LINUX_CAPABILITY_U32S_3];
};

static void cred_read(struct __test_metadata *_metadata, struct cred_set *c)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	int i;

	memset(c, 0, sizeof(*c));
	memset(data, 0, sizeof(data));
	ASSERT_EQ(0, getresuid(&c->ruid, &c->euid, &c->suid));
	ASSERT_EQ(0, getresgid(&c->rgid, &c->egid, &c->sgid));
	/* an invalid id changes nothing, and the current one comes back */
	c->fsuid = syscall(SYS_setfsuid, -1);
	c->fsgid = syscall(SYS_setfsgid, -1);
	c->ngroups = getgroups(ARRAY_SIZE(c->groups), c->groups);
	ASSERT_LE(0, c->ngroups) TH_LOG("getgroups: %s", strerror(errno));
	ASSERT_EQ(0, syscall(SYS_capget, &hdr, data));
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
		c->eff[i] = data[i].effective;
		c->prm[i] = data[i].permitted;
		c->inh[i] = data[i].inheritable;
	}
}

static void cred_expect(struct __test_metadata *_metadata,
			const struct cred_set *want, const struct cred_set *got,
			const char *when)
{
	int i;

	EXPECT_EQ(want->ruid, got->ruid) TH_LOG("%s: ruid", when);
	EXPECT_EQ(want->euid, got->euid) TH_LOG("%s: euid", when);
	EXPECT_EQ(want->suid, got->suid) TH_LOG("%s: suid", when);
	EXPECT_EQ(want->fsuid, got->fsuid) TH_LOG("%s: fsuid", when);
	EXPECT_EQ(want->rgid, got->rgid) TH_LOG("%s: rgid", when);
	EXPECT_EQ(want->egid, got->egid) TH_LOG("%s: egid", when);
	EXPECT_EQ(want->sgid, got->sgid) TH_LOG("%s: sgid", when);
	EXPECT_EQ(want->fsgid, got->fsgid) TH_LOG("%s: fsgid", when);
	EXPECT_EQ(want->ngroups, got->ngroups) TH_LOG("%s: groups", when);
	for (i = 0; i < want->ngroups && i < got->ngroups; i++)
		EXPECT_EQ(want->groups[i], got->groups[i])
			TH_LOG("%s: group %d", when, i);
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
		EXPECT_EQ(want->eff[i], got->eff[i])
			TH_LOG("%s: effective capabilities, word %d", when, i);
		EXPECT_EQ(want->prm[i], got->prm[i])
			TH_LOG("%s: permitted capabilities, word %d", when, i);
		EXPECT_EQ(want->inh[i], got->inh[i])
			TH_LOG("%s: inheritable capabilities, word %d", when, i);
	}
}

#define T_SUID		((uid_t)3003)

static void cap_add(__u32 *set, int cap)
{
	set[CAP_TO_INDEX(cap)] |= CAP_TO_MASK(cap);
}

/*
 * Credentials for one thread that differ from root's in every field:
 * saved and fs uid, all gids, the groups, all three capability sets.
 */
static void cred_target(struct cred_set *c)
{
	static const gid_t groups[] = { 1001, 1002, 1003 };	/* sorted */

	memset(c, 0, sizeof(*c));
	c->ruid = 0;
	c->euid = NOBODY;
	c->suid = T_SUID;
	c->fsuid = T_SUID;
	c->rgid = 2001;
	c->egid = 2002;
	c->sgid = 2003;
	c->fsgid = 2004;
	c->ngroups = ARRAY_SIZE(groups);
	memcpy(c->groups, groups, sizeof(groups));
	cap_add(c->eff, CAP_CHOWN);
	cap_add(c->prm, CAP_CHOWN);
	cap_add(c->prm, CAP_KILL);
	cap_add(c->prm, CAP_NET_RAW);
	cap_add(c->inh, CAP_KILL);
}

/*
 * Give the calling thread, and only it, the credentials @c with raw
 * syscalls: glibc applies set*id() and setgroups() to all threads.
 */
static void cred_apply(struct __test_metadata *_metadata,
		       const struct cred_set *c)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	int i;

	ASSERT_EQ(0, syscall(SYS_setgroups, c->ngroups, c->groups));
	ASSERT_EQ(0, syscall(SYS_setresgid, c->rgid, c->egid, c->sgid));
	/* while CAP_SETGID is effective */
	syscall(SYS_setfsgid, c->fsgid);
	/* clears the effective capabilities: euid 0 goes */
	ASSERT_EQ(0, syscall(SYS_setresuid, c->ruid, c->euid, c->suid));
	/* the saved uid needs no CAP_SETUID */
	syscall(SYS_setfsuid, c->fsuid);
	memset(data, 0, sizeof(data));
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
		data[i].effective = c->eff[i];
		data[i].permitted = c->prm[i];
		data[i].inheritable = c->inh[i];
	}
	ASSERT_EQ(0, syscall(SYS_capset, &hdr, data))
		TH_LOG("capset: %s", strerror(errno));
}

struct cred_arg {
	struct __test_metadata *md;
	struct scratch_files *files;
	bool on;
};

/*
 * Hands off with credentials of its own, set once its ring has workers,
 * which have root's: a handoff that does not move them all shows.
 */
static void *cred_thread(void *p)
{
	struct cred_arg *a = p;
	struct __test_metadata *_metadata = a->md;
	struct cred_set want, got;
	struct ring_file rf;

	/* the file is opened and the workers start as root */
	rf_open(_metadata, a->files, &rf);
	prewarm(_metadata, a->on, &rf);
	cred_target(&want);
	cred_apply(_metadata, &want);
	cred_read(_metadata, &got);
	cred_expect(_metadata, &want, &got, "set");

	force_handoff(_metadata, a->on, &rf, BLOCK_TRIES, 0);

	cred_read(_metadata, &got);
	cred_expect(_metadata, &want, &got, "after the handoff");
	/* the thread may not remove its file any more: the teardown does */
	rf_close(&rf);
	return NULL;
}

TEST_F_TIMEOUT(identity, creds_seccomp_nnp, 120)
{
	struct cred_arg a = {
		.md = _metadata, .files = &self->files, .on = variant->sysctl,
	};
	struct cred_set main0, main1;
	struct ring_file rf;
	pthread_t th;
	pid_t child;

	/*
	 * A seccomp filter stays in force; in a child, to keep this process
	 * clean. The children first, so that they start with no failure
	 * recorded. The filter comes once the ring has workers, which lack
	 * it: the kernel must not hand off to them.
	 */
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct sock_filter filter[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
				 offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getppid, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {
			.len = ARRAY_SIZE(filter),
			.filter = filter,
		};

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		/* as root, without no_new_privs: that one is tested apart */
		ASSERT_EQ(0, prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			TH_LOG("seccomp: %s", strerror(errno));
		errno = 0;
		ASSERT_EQ(-1, syscall(SYS_getppid));
		ASSERT_EQ(EPERM, errno);

		handoff_or_refusal(_metadata, variant->sysctl, &rf,
				   "seccomp filter");

		errno = 0;
		EXPECT_EQ(-1, syscall(SYS_getppid));
		EXPECT_EQ(EPERM, errno);
		EXPECT_EQ(SECCOMP_MODE_FILTER, prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
		EXPECT_EQ(0, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);

	/*
	 * no_new_privs set once the ring has workers, which lack it, stays. A
	 * worker without it may take the identity (it only gains the flag), so
	 * the handoff is required: a refusal here would leave the move of the
	 * flag untested.
	 */
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		ASSERT_EQ(0, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));

		force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);

		EXPECT_EQ(1, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
		EXPECT_EQ(SECCOMP_MODE_DISABLED,
			  prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);

	/* credentials of one thread; the others keep theirs */
	cred_read(_metadata, &main0);
	ASSERT_EQ(0, pthread_create(&th, NULL, cred_thread, &a));
	ASSERT_EQ(0, pthread_join(th, NULL));
	cred_read(_metadata, &main1);
	cred_expect(_metadata, &main0, &main1, "the main thread");
	EXPECT_EQ(0U, main1.euid);

	/* no_new_privs stays clear */
	ASSERT_EQ(0, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	rf_open(_metadata, &self->files, &rf);
	force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);
	EXPECT_EQ(0, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	rf_close(&rf);
}

struct robust_arg {
	struct __test_metadata *md;
	struct scratch_files *files;
	bool on;
	pthread_mutex_t *mutex;
};

/* Hands off holding a robust mutex, and exits without unlocking it. */
static void *robust_thread(void *p)
{
	struct robust_arg *a = p;
	struct __test_metadata *_metadata = a->md;
	void *head0 = NULL, *head1 = NULL;
	int *tidp0 = NULL, *tidp1 = NULL;
	size_t len0 = 0, len1 = 0;
	struct ring_file rf;
	pid_t tid = sys_gettid();
	int ret, err;

	rf_open(_metadata, a->files, &rf);
	ASSERT_EQ(0, pthread_mutex_lock(a->mutex));
	ASSERT_EQ(0, syscall(SYS_get_robust_list, 0, &head0, &len0));
	ASSERT_NE(NULL, head0);
	ret = prctl(PR_GET_TID_ADDRESS, &tidp0, 0, 0, 0);
	err = errno;
	ASSERT_EQ(0, ret) TH_LOG("PR_GET_TID_ADDRESS: %s%s", strerror(err),
				 err == EINVAL ?
				 " (needs CONFIG_CHECKPOINT_RESTORE=y)" : "");
	/* glibc's: the thread's tid, which the exit clears for the join */
	ASSERT_NE(NULL, tidp0);
	ASSERT_EQ(tid, *tidp0);

	force_handoff(_metadata, a->on, &rf, BLOCK_TRIES, 0);

	ASSERT_EQ(tid, sys_gettid());
	ASSERT_EQ(0, syscall(SYS_get_robust_list, 0, &head1, &len1));
	EXPECT_EQ(head0, head1);
	EXPECT_EQ(len0, len1);
	EXPECT_EQ(0, prctl(PR_GET_TID_ADDRESS, &tidp1, 0, 0, 0));
	EXPECT_EQ(tidp0, tidp1);
	rf_close(&rf);
	return NULL;
}

static void join_timeout(int sig)
{
	static const char msg[] =
		"# join_robust: pthread_join() or the robust lock hangs\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(KSFT_FAIL);
	_exit(KSFT_FAIL);
}

TEST_F_TIMEOUT(identity, join_robust, 120)
{
	struct sigaction sa = { .sa_handler = join_timeout };
	struct robust_arg a = {
		.md = _metadata, .files = &self->files, .on = variant->sysctl,
	};
	pthread_mutexattr_t attr;
	pthread_mutex_t mutex;
	pthread_t th;

	ASSERT_EQ(0, pthread_mutexattr_init(&attr));
	ASSERT_EQ(0, pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST));
	ASSERT_EQ(0, pthread_mutex_init(&mutex, &attr));
	a.mutex = &mutex;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	alarm(60);

	ASSERT_EQ(0, pthread_create(&th, NULL, robust_thread, &a));
	/* returns once the exit cleared the thread's tid */
	ASSERT_EQ(0, pthread_join(th, NULL));
	/* the exit marked the mutex as left locked by a dead owner */
	EXPECT_EQ(EOWNERDEAD, pthread_mutex_lock(&mutex));
	alarm(0);
	EXPECT_EQ(0, pthread_mutex_consistent(&mutex));
	EXPECT_EQ(0, pthread_mutex_unlock(&mutex));
	EXPECT_EQ(0, pthread_mutex_destroy(&mutex));
	pthread_mutexattr_destroy(&attr);
}

TEST_F_TIMEOUT(identity, fork_exec_after, 120)
{
	pid_t parent = getpid(), early, child;
	struct ring_file rf;
	int pipefd[2];

	rf_open(_metadata, &self->files, &rf);

	/* a child from before the handoff, reaped after it */
	ASSERT_EQ(0, pipe(pipefd));
	early = fork();
	ASSERT_LE(0, early);
	if (!early) {
		char c;

		close(pipefd[1]);
		while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(getppid() == parent ? 5 : 6);
	}
	close(pipefd[0]);

	force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);

	close(pipefd[1]);
	reap(_metadata, early, 5);

	child = fork();
	ASSERT_LE(0, child);
	if (!child)
		_exit(7);
	reap(_metadata, child, 7);

	if (access("/bin/true", X_OK)) {
		TH_LOG("no /bin/true: exec not tested");
	} else {
		child = fork();
		ASSERT_LE(0, child);
		if (!child) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		reap(_metadata, child, 0);
	}
	rf_close(&rf);
}

/*
 * In a traced child: blocking fsyncs, none of which may hand off. With the
 * sysctl at 1 the kernel refuses each one up front as "task"; at 0 none is
 * a candidate.
 */
static void traced_fsyncs(struct __test_metadata *_metadata,
			  struct scratch_files *sf, bool on)
{
	const int task = refused_index("task");
	struct hrefused ra, rb;
	struct ring_file rf;
	struct hstat a, b;
	unsigned long refused;
	int n;

	ASSERT_LE(0, task);
	rf_open(_metadata, sf, &rf);
	ASSERT_EQ(0, read_hstat(rf.r.fd, &a));
	ASSERT_EQ(0, read_refused(rf.r.fd, &ra));
	n = blocking_fsyncs(_metadata, &rf.r, rf.fd, rf.buf, PTRACE_TRIES,
			    false);
	ASSERT_EQ(0, read_hstat(rf.r.fd, &b));
	ASSERT_EQ(0, read_refused(rf.r.fd, &rb));
	refused = rb.v[task] - ra.v[task];
	if (b.handoffs != a.handoffs || (on ? refused < (unsigned long)n : !!refused))
		log_counters(_metadata, rf.r.fd);
	EXPECT_EQ(a.handoffs, b.handoffs) TH_LOG("a traced child handed off");
	if (on) {
		EXPECT_LE((unsigned long)n, refused)
			TH_LOG("%d blocking fsyncs of a traced child, %lu refused as \"task\"",
			       n, refused);
	} else {
		EXPECT_EQ(0UL, refused) TH_LOG("refused with the sysctl at 0");
	}
	rf_close(&rf);
}

TEST_F_TIMEOUT(identity, ptraced_never_hands_off, 120)
{
	int status;
	pid_t child;

	/* the control: an untraced twin hands off (sysctl at 1) */
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;

		rf_open(_metadata, &self->files, &rf);
		force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(2);
		raise(SIGSTOP);
		traced_fsyncs(_metadata, &self->files, variant->sysctl);
		_exit(child_status(_metadata));
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(SIGSTOP, WSTOPSIG(status));
	ASSERT_EQ(0, ptrace(PTRACE_SETOPTIONS, child, NULL,
			    (void *)PTRACE_O_EXITKILL));
	ASSERT_EQ(0, ptrace(PTRACE_CONT, child, NULL, NULL));
	for (;;) {
		ASSERT_EQ(child, waitpid(child, &status, 0));
		if (!WIFSTOPPED(status))
			break;
		/* pass on whatever stopped it */
		ASSERT_EQ(0, ptrace(PTRACE_CONT, child, NULL,
				    (void *)(long)WSTOPSIG(status)));
	}
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	EXPECT_EQ(CHILD_OK, WEXITSTATUS(status))
		TH_LOG("the traced child's checks failed");
}

/*
 * Races with the handoff: a second actor acts on the submitter through its
 * tid while the submitter hands off, over and over, for RACE_SECS. Each
 * one checks that what it did reached the thread, the task that returns to
 * userspace with the tid, and never a task demoted by a handoff.
 */
#define RACE_SECS	6	/* per case and sysctl value */
#define RACE_WAIT_MS	5000	/* the longest any one step may take */
#define PI_WAIT_MAX_MS	60000	/* a PI waiter whose owner is still inside */

/* Shared between a racing child and the test process */
struct race {
	int stop;		/* the child's loop ends */
	pid_t tid;		/* the submitter's tid */
	int ringfd;		/* its ring */
	unsigned long fsyncs;	/* blocking fsyncs done */
	unsigned long handoffs;	/* of them handed off */
	unsigned long acts;	/* the second actor's operations */
	int line;		/* first failed check, 0 if none */
	char what[160];
};

static struct race *race_map(struct __test_metadata *_metadata)
{
	struct race *rc = mmap(NULL, sizeof(*rc), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, rc);
	memset(rc, 0, sizeof(*rc));
	return rc;
}

/* Record the first failed check of any actor: no ASSERT outside the test thread. */
#define RACE_FAIL(rc, ...)						\
	do {								\
		if (!__atomic_exchange_n(&(rc)->line, __LINE__,		\
					 __ATOMIC_SEQ_CST))		\
			snprintf((rc)->what, sizeof((rc)->what),	\
				 __VA_ARGS__);				\
	} while (0)

static bool race_stopped(struct race *rc)
{
	return __atomic_load_n(&rc->stop, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&rc->line, __ATOMIC_RELAXED);
}

/*
 * The submitter's side, in the calling thread: blocking fsyncs (with
 * signals expected) until @rc says stop, counting the handoffs.
 */
static void race_fsyncs(struct __test_metadata *_metadata,
			struct scratch_files *sf, struct race *rc)
{
	struct ring_file rf;
	struct hstat a, b;

	rf_open(_metadata, sf, &rf);
	rc->ringfd = rf.r.fd;
	__atomic_store_n(&rc->tid, sys_gettid(), __ATOMIC_RELEASE);
	ASSERT_EQ(0, read_hstat(rf.r.fd, &a));
	while (!race_stopped(rc)) {
		blocking_fsyncs_flags(_metadata, &rf.r, rf.fd, rf.buf, 1,
				      BF_SIGNALS);
		__atomic_add_fetch(&rc->fsyncs, 1, __ATOMIC_RELAXED);
	}
	ASSERT_EQ(0, read_hstat(rf.r.fd, &b));
	rc->handoffs = b.handoffs - a.handoffs;
	rf_close(&rf);
}

static pid_t race_wait_tid(struct race *rc)
{
	long end = now_ms() + RACE_WAIT_MS;
	pid_t tid;

	while (!(tid = __atomic_load_n(&rc->tid, __ATOMIC_ACQUIRE)) &&
	       now_ms() < end)
		usleep(1000);
	return tid;
}

/* The end of a race: the checks of both sides, and the handoffs it needs. */
static void race_report(struct __test_metadata *_metadata, struct race *rc,
			bool on, const char *act)
{
	TH_LOG("%lu %s, %lu blocking fsyncs, %lu handed off", rc->acts, act,
	       rc->fsyncs, rc->handoffs);
	ASSERT_EQ(0, rc->line) TH_LOG("line %d: %s", rc->line, rc->what);
	ASSERT_LT(0UL, rc->acts);
	if (on)
		ASSERT_LT(0UL, rc->handoffs) TH_LOG("no handoff to race with");
	if (!on)
		ASSERT_EQ(0UL, rc->handoffs);
}

/* The status line @key of /proc/@pid/task/@tid/status, as a number, or -1. */
static long task_status(pid_t pid, pid_t tid, const char *key)
{
	char path[64], buf[4096], *p;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	n = read_small(path, buf, sizeof(buf));
	if (n <= 0)
		return -1;
	p = strstr(buf, key);
	if (!p)
		return -1;
	return strtol(p + strlen(key), NULL, 10);
}

/*
 * Wait up to RACE_WAIT_MS for the ptrace stop PTRACE_INTERRUPT asked of
 * @tid, passing on signal-delivery stops. Returns 0 or why not.
 */
static const char *ptrace_wait_stop(pid_t tid)
{
	long end = now_ms() + RACE_WAIT_MS;
	int status;
	pid_t ret;

	for (;;) {
		ret = waitpid(tid, &status, __WALL | WNOHANG);
		if (ret < 0)
			return "waitpid failed";
		if (!ret) {
			if (now_ms() > end)
				return "no ptrace stop in time (the tracee is not the thread?)";
			usleep(200);
			continue;
		}
		if (!WIFSTOPPED(status))
			return "the tracee exited";
		if (status >> 16 == PTRACE_EVENT_STOP)
			return NULL;
		/* a signal-delivery stop: deliver it and go on waiting */
		if (ptrace(PTRACE_CONT, tid, NULL,
			   (void *)(long)WSTOPSIG(status)))
			return "PTRACE_CONT failed";
	}
}

/*
 * ptrace: the test process seizes, interrupts and detaches the submitter
 * of a child again and again. Each time, the thread with the tid must stop
 * and show the test process as its tracer, and the tracee must be that
 * thread, not an io-wq worker (which would leave the tracer waiting).
 */
TEST_F_TIMEOUT(identity, ptrace_races_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	const char *why;
	long end;
	pid_t child, tid;
	int status;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		race_fsyncs(_metadata, &self->files, rc);
		_exit(child_status(_metadata));
	}
	tid = race_wait_tid(rc);
	ASSERT_EQ(child, tid) TH_LOG("the child's submitter is its main thread");
	end = now_ms() + RACE_SECS * 1000;
	srand(child);
	while (now_ms() < end && !rc->line) {
		long tracer;

		if (ptrace(PTRACE_SEIZE, tid, NULL, NULL)) {
			RACE_FAIL(rc, "PTRACE_SEIZE: %s", strerror(errno));
			break;
		}
		if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL)) {
			RACE_FAIL(rc, "PTRACE_INTERRUPT: %s", strerror(errno));
			break;
		}
		why = ptrace_wait_stop(tid);
		if (why) {
			RACE_FAIL(rc, "%s", why);
			break;
		}
		tracer = task_status(child, tid, "TracerPid:");
		if (tracer != getpid()) {
			RACE_FAIL(rc, "TracerPid of the thread: %ld, not %d",
				  tracer, getpid());
			break;
		}
		if (ptrace(PTRACE_DETACH, tid, NULL, NULL)) {
			RACE_FAIL(rc, "PTRACE_DETACH: %s", strerror(errno));
			break;
		}
		rc->acts++;
		usleep(rand() % 2000);
	}
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	if (rc->line)
		kill(child, SIGKILL);
	ASSERT_EQ(child, waitpid(child, &status, __WALL));
	race_report(_metadata, rc, variant->sysctl, "seize/interrupt/detach");
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(CHILD_OK, WEXITSTATUS(status));
}

#ifndef CLONE_PIDFD_AUTOKILL
#define CLONE_AUTOREAP		(1ULL << 34)
#define CLONE_NNP		(1ULL << 35)
#define CLONE_PIDFD_AUTOKILL	(1ULL << 36)
#endif

#define LONG_STATX	64	/* statx requests after the blocking fsync */

/*
 * One long submission on @big (of 2 * LONG_STATX entries): a blocking fsync
 * of @rf's file, dirtied with @seed, followed by LONG_STATX statx requests,
 * which the promoted worker issues (inline, they don't block) before the
 * submission ends: the tid is the worker's for a while before it returns to
 * userspace, and the window of a handoff is that long. Waits for all of them.
 */
static void long_submission(struct __test_metadata *_metadata, struct iou *big,
			    struct ring_file *rf, unsigned long seed)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	struct statx stx;
	int i, done;

	fill(rf->buf, BLOCK_LEN, seed);
	ASSERT_EQ(0, write_file(rf->fd, rf->buf, BLOCK_LEN));
	sqe = iou_sqe(big);
	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_FSYNC, rf->fd, NULL, 0, 0, 0xf5);
	for (i = 0; i < LONG_STATX; i++) {
		sqe = iou_sqe(big);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_STATX, AT_FDCWD, rf->path,
			 STATX_BASIC_STATS, (unsigned long)&stx, 0x57);
	}
	ASSERT_EQ(LONG_STATX + 1, iou_submit(big, LONG_STATX + 1));
	for (done = 0; done < LONG_STATX + 1; done++) {
		ASSERT_EQ(0, iou_wait_cqe(big, &cqe));
		ASSERT_EQ(0, cqe.res)
			TH_LOG("request %llu: %s",
			       (unsigned long long)cqe.user_data,
			       strerror(-cqe.res));
	}
}

/*
 * The child of one autokill round: long submissions (a blocking fsync of
 * the test's scratch file and LONG_STATX statx) on a ring of its own,
 * until it is killed.
 */
static void autokill_child(struct __test_metadata *_metadata,
			   struct ring_file *rf, struct race *rc)
{
	struct hstat a, b;
	struct stat st;
	struct iou r;

	ASSERT_EQ(0, iou_init(&r, 2 * LONG_STATX, 0));
	ASSERT_EQ(0, fstat(rf->fd, &st));
	warm_up(_metadata, &r, rf->path, st.st_size);
	ASSERT_EQ(0, read_hstat(r.fd, &a));
	__atomic_store_n(&rc->tid, sys_gettid(), __ATOMIC_RELEASE);
	for (;;) {
		long_submission(_metadata, &r, rf, rc->fsyncs + 1);
		ASSERT_EQ(0, read_hstat(r.fd, &b));
		__atomic_store_n(&rc->handoffs, b.handoffs - a.handoffs,
				 __ATOMIC_RELEASE);
		__atomic_add_fetch(&rc->fsyncs, 1, __ATOMIC_RELEASE);
	}
}

/*
 * PIDFD_AUTOKILL: closing the only pidfd of a child made with
 * CLONE_PIDFD | CLONE_PIDFD_AUTOKILL must kill the child, whenever it comes.
 * Each round, the child's main thread (the task the pidfd's TGID pid names)
 * hands off in long submissions (see long_submission()), and the test
 * closes the pidfd at a random moment of them, often inside the window
 * between a handoff and the end of its submission; the child must be gone
 * within RACE_WAIT_MS.
 * pidfs_file_release() skips (with a warning) a task it finds to be a user
 * worker: a lookup of the pid must never find the demoted task.
 */
TEST_F_TIMEOUT(identity, pidfd_autokill_races_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	unsigned long rounds = 0, handoffs = 0;
	struct ring_file rf;
	long end;

	/* the file the children fsync, which outlives them */
	rf_open(_metadata, &self->files, &rf);
	end = now_ms() + RACE_SECS * 1000;
	srand(getpid());
	while (now_ms() < end && !rc->line) {
		struct clone_args ca = {
			.flags = CLONE_PIDFD | CLONE_PIDFD_AUTOKILL |
				 CLONE_AUTOREAP | CLONE_NNP,
		};
		unsigned long want = 1 + rand() % 3;
		int pidfd = -1, watch;
		struct pollfd pfd;
		long child, until;

		memset(rc, 0, sizeof(*rc));
		ca.pidfd = (unsigned long)&pidfd;
		child = syscall(__NR_clone3, &ca, sizeof(ca));
		if (child < 0 && errno == EINVAL && !rounds)
			SKIP(return, "no CLONE_PIDFD_AUTOKILL: %s", strerror(errno));
		ASSERT_LE(0, child) TH_LOG("clone3: %s", strerror(errno));
		if (!child) {
			autokill_child(_metadata, &rf, rc);
			_exit(1);
		}
		watch = syscall(__NR_pidfd_open, child, 0);
		ASSERT_LE(0, watch) TH_LOG("pidfd_open: %s", strerror(errno));
		/* into the middle of the child's fsyncs */
		until = now_ms() + RACE_WAIT_MS * 4;
		while (__atomic_load_n(&rc->fsyncs, __ATOMIC_ACQUIRE) < want &&
		       now_ms() < until)
			usleep(500);
		usleep(rand() % 3000);
		handoffs += __atomic_load_n(&rc->handoffs, __ATOMIC_ACQUIRE);
		ASSERT_EQ(0, close(pidfd));
		pfd.fd = watch;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, RACE_WAIT_MS) != 1) {
			RACE_FAIL(rc, "round %lu: the child outlived its autokill pidfd (%lu fsyncs)",
				  rounds, rc->fsyncs);
			syscall(__NR_pidfd_send_signal, watch, SIGKILL, NULL, 0);
			poll(&pfd, 1, RACE_WAIT_MS);
		}
		close(watch);
		rounds++;
	}
	rf_close(&rf);
	TH_LOG("%lu rounds, %lu handoffs before the close", rounds, handoffs);
	ASSERT_EQ(0, rc->line) TH_LOG("line %d: %s", rc->line, rc->what);
	ASSERT_LT(0UL, rounds);
	if (variant->sysctl)
		ASSERT_LT(0UL, handoffs) TH_LOG("no handoff to race with");
	if (!variant->sysctl)
		ASSERT_EQ(0UL, handoffs);
}

static struct race *sig_race;
static pid_t sig_race_tid;
static unsigned long sig_race_seen;

static void race_signal(int sig)
{
	if (sys_gettid() != sig_race_tid)
		RACE_FAIL(sig_race, "SIGUSR1 ran on tid %d, sent to %d",
			  sys_gettid(), sig_race_tid);
	__atomic_add_fetch(&sig_race_seen, 1, __ATOMIC_RELEASE);
}

/* Wait up to RACE_WAIT_MS for *@seen to pass @than; false if it did not */
static bool race_count_passes(unsigned long *seen, unsigned long than)
{
	long end = now_ms() + RACE_WAIT_MS;

	while (__atomic_load_n(seen, __ATOMIC_ACQUIRE) <= than) {
		if (now_ms() > end)
			return false;
		usleep(100);
	}
	return true;
}

static void *race_tgkill(void *arg)
{
	struct race *rc = arg;
	long end;

	/* not before the ring is set up: its warm-up expects no signals */
	if (!race_wait_tid(rc)) {
		RACE_FAIL(rc, "the submitter did not start");
		return NULL;
	}
	end = now_ms() + RACE_SECS * 1000;

	while (now_ms() < end && !rc->line) {
		unsigned long want = rc->acts + 1;

		if (syscall(__NR_tgkill, getpid(), sig_race_tid, SIGUSR1)) {
			RACE_FAIL(rc, "tgkill: %s", strerror(errno));
			break;
		}
		rc->acts = want;
		if (!race_count_passes(&sig_race_seen, want - 1)) {
			RACE_FAIL(rc, "signal %lu to tid %d lost", want,
				  sig_race_tid);
			break;
		}
		usleep(rand() % 1000);
	}
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Signals: another thread sends SIGUSR1 to the submitter's tid with
 * tgkill(), one at a time. Each must run its handler on the thread with the
 * tid: none may be queued on a task a handoff demoted.
 */
TEST_F_TIMEOUT(identity, tgkill_races_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	pid_t child;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct sigaction sa = { .sa_handler = race_signal };
		pthread_t t;

		sig_race = rc;
		sig_race_tid = sys_gettid();
		sigemptyset(&sa.sa_mask);
		ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
		ASSERT_EQ(0, pthread_create(&t, NULL, race_tgkill, rc));
		race_fsyncs(_metadata, &self->files, rc);
		pthread_join(t, NULL);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
	race_report(_metadata, rc, variant->sysctl, "signals");
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD	O_EXCL
#endif
#define TIMER_SIG	(SIGRTMIN + 2)
#define TIMER_PERIOD_NS	(2 * 1000 * 1000)

static unsigned long timer_sig_seen;
static timer_t race_timer;

static void race_timer_signal(int sig)
{
	__atomic_add_fetch(&timer_sig_seen, 1, __ATOMIC_RELEASE);
}

static void *race_thread_senders(void *arg)
{
	struct itimerspec its = {
		.it_value = { .tv_nsec = TIMER_PERIOD_NS },
		.it_interval = { .tv_nsec = TIMER_PERIOD_NS },
	};
	struct race *rc = arg;
	int pidfd;
	long end;

	/* not before the ring is set up: its warm-up expects no signals */
	if (!race_wait_tid(rc)) {
		RACE_FAIL(rc, "the submitter did not start");
		return NULL;
	}
	if (timer_settime(race_timer, 0, &its, NULL)) {
		RACE_FAIL(rc, "timer_settime: %s", strerror(errno));
		return NULL;
	}
	pidfd = syscall(__NR_pidfd_open, sig_race_tid, PIDFD_THREAD);
	if (pidfd < 0) {
		RACE_FAIL(rc, "pidfd_open(%d, PIDFD_THREAD): %s", sig_race_tid,
			  strerror(errno));
		return NULL;
	}
	end = now_ms() + RACE_SECS * 1000;
	while (now_ms() < end && !rc->line) {
		unsigned long ticks = __atomic_load_n(&timer_sig_seen,
						      __ATOMIC_ACQUIRE);
		unsigned long want = rc->acts + 1;

		if (syscall(__NR_pidfd_send_signal, pidfd, SIGUSR1, NULL, 0)) {
			RACE_FAIL(rc, "pidfd_send_signal: %s", strerror(errno));
			break;
		}
		rc->acts = want;
		if (!race_count_passes(&sig_race_seen, want - 1)) {
			RACE_FAIL(rc, "signal %lu to the thread pidfd of %d lost",
				  want, sig_race_tid);
			break;
		}
		if (!race_count_passes(&timer_sig_seen, ticks)) {
			RACE_FAIL(rc, "the SIGEV_THREAD_ID timer of %d stopped after %lu signals",
				  sig_race_tid, ticks);
			break;
		}
		usleep(rand() % 1000);
	}
	close(pidfd);
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Signals that their sender looks the thread up for by its struct pid, and
 * queues after taking the siglock: a periodic POSIX timer with
 * SIGEV_THREAD_ID (every 2 ms) and pidfd_send_signal() to a thread pidfd,
 * one at a time from another thread. Neither may queue its signal on a
 * task a handoff just demoted, where it stays blocked: each pidfd signal
 * must run its handler on the thread, and the timer must keep firing (its
 * next expiry is only armed once its signal is dequeued).
 */
TEST_F_TIMEOUT(identity, thread_signals_race_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	pid_t child;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct sigaction sa = { .sa_handler = race_signal };
		struct sigevent sev = {
			.sigev_notify = SIGEV_THREAD_ID,
			.sigev_signo = TIMER_SIG,
		};
		pthread_t t;

		sig_race = rc;
		sig_race_tid = sys_gettid();
		sigemptyset(&sa.sa_mask);
		ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
		sa.sa_handler = race_timer_signal;
		ASSERT_EQ(0, sigaction(TIMER_SIG, &sa, NULL));
		sev._sigev_un._tid = sig_race_tid;	/* sigev_notify_thread_id */
		ASSERT_EQ(0, timer_create(CLOCK_MONOTONIC, &sev, &race_timer));
		ASSERT_EQ(0, pthread_create(&t, NULL, race_thread_senders, rc));
		race_fsyncs(_metadata, &self->files, rc);
		pthread_join(t, NULL);
		timer_delete(race_timer);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
	race_report(_metadata, rc, variant->sysctl, "thread signals");
}

/* utime + stime of /proc/self[/task/@tid]/stat, in clock ticks, or -1. */
static long long stat_ticks(pid_t tid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;

	if (tid)
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return ut + st;
}

struct cpu_race {
	struct race *rc;
	clockid_t thread_clock;
};

/*
 * Each reading must be at least the one before it, less @slack. The
 * thread's own counters get a slack: read just before the commit, or by a
 * reader that looked the thread up before it and reads after it, they are
 * the demoted task's, which may have run, switched or taken a tick past the
 * values it handed over (Documentation/io_uring/handoff.rst). The process's
 * sums get none.
 */
#define RACE_CLOCK_SLACK_NS	(50 * 1000 * 1000)	/* milliseconds under TCG */
#define RACE_TICK_SLACK		2	/* clock ticks */
#define RACE_SWITCH_SLACK	4	/* context switches */

#define MONOTONIC(rc, last, now, slack, what)				\
	do {								\
		if ((now) < 0)						\
			RACE_FAIL(rc, "%s: cannot read", what);		\
		else if ((now) + (slack) < (last))			\
			RACE_FAIL(rc, "%s went back from %lld to %lld",	\
				  what, (long long)(last),		\
				  (long long)(now));			\
		if ((now) > (last))					\
			(last) = (now);					\
	} while (0)

static void *race_cputime(void *arg)
{
	struct cpu_race *cr = arg;
	struct race *rc = cr->rc;
	long long thr = 0, proc = 0, tstat = 0, pstat = 0, now;
	long vol = 0, v;

	while (!race_stopped(rc)) {
		now = clock_ns(cr->thread_clock);
		MONOTONIC(rc, thr, now, RACE_CLOCK_SLACK_NS, "the thread CPU clock");
		now = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
		MONOTONIC(rc, proc, now, 0, "CLOCK_PROCESS_CPUTIME_ID");
		now = stat_ticks(sig_race_tid);
		MONOTONIC(rc, tstat, now, RACE_TICK_SLACK, "the thread's utime+stime");
		now = stat_ticks(0);
		MONOTONIC(rc, pstat, now, 0, "the process's utime+stime");
		v = task_status(getpid(), sig_race_tid, "voluntary_ctxt_switches:");
		MONOTONIC(rc, vol, v, RACE_SWITCH_SLACK,
			  "the thread's voluntary_ctxt_switches");
		rc->acts++;
		usleep(rand() % 500);
	}
	return NULL;
}

/*
 * Accounting: another thread reads the submitter's CPU clock, its and the
 * process's CPU times and its context switches while it hands off. None may
 * ever go back.
 */
TEST_F_TIMEOUT(identity, cputime_races_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	pid_t child;
	int status;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct cpu_race cr = { .rc = rc };
		pthread_t t;

		sig_race_tid = sys_gettid();
		ASSERT_EQ(0, pthread_getcpuclockid(pthread_self(),
						   &cr.thread_clock));
		ASSERT_EQ(0, pthread_create(&t, NULL, race_cputime, &cr));
		race_fsyncs(_metadata, &self->files, rc);
		pthread_join(t, NULL);
		_exit(child_status(_metadata));
	}
	usleep(RACE_SECS * 1000 * 1000);
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(child, waitpid(child, &status, 0));
	race_report(_metadata, rc, variant->sysctl, "readings");
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(CHILD_OK, WEXITSTATUS(status));
}

/*
 * What the setter set through the tid last. @seq is odd while it sets, and
 * counts the settings done; @checked counts the submitter's checks.
 */
struct sched_race {
	struct race *rc;
	unsigned long seq, checked;
	int nice, policy;
	cpu_set_t mask;
};

static struct sched_race sched_race;

static const char *policy_name(int policy)
{
	return policy == SCHED_BATCH ? "SCHED_BATCH" :
	       policy == SCHED_OTHER ? "SCHED_OTHER" : "another policy";
}

/*
 * The submitter's side, after each of its submissions: its own attributes
 * must be the ones set last, unless a setting is in progress.
 */
static void sched_race_check(struct race *rc)
{
	struct sched_race *sr = &sched_race;
	unsigned long seq = __atomic_load_n(&sr->seq, __ATOMIC_ACQUIRE);
	int nice, policy, want_nice, want_policy;
	cpu_set_t now, want_mask;

	if (seq % 2 || !seq)
		return;
	errno = 0;
	nice = getpriority(PRIO_PROCESS, 0);
	if (nice == -1 && errno) {
		RACE_FAIL(rc, "getpriority: %s", strerror(errno));
		return;
	}
	policy = sched_getscheduler(0);
	if (sched_getaffinity(0, sizeof(now), &now)) {
		RACE_FAIL(rc, "sched_getaffinity: %s", strerror(errno));
		return;
	}
	want_nice = sr->nice;
	want_policy = sr->policy;
	want_mask = sr->mask;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&sr->seq, __ATOMIC_RELAXED) != seq)
		return;
	if (nice != want_nice)
		RACE_FAIL(rc, "setting %lu: nice %d set through tid %d, the thread has %d",
			  seq / 2, want_nice, sys_gettid(), nice);
	if (policy != want_policy)
		RACE_FAIL(rc, "setting %lu: %s set through tid %d, the thread has %s",
			  seq / 2, policy_name(want_policy), sys_gettid(),
			  policy_name(policy));
	if (!CPU_EQUAL(&now, &want_mask))
		RACE_FAIL(rc, "setting %lu: affinity of %d CPU(s) set through tid %d, the thread has %d",
			  seq / 2, CPU_COUNT(&want_mask), sys_gettid(),
			  CPU_COUNT(&now));
	sr->checked++;
}

/*
 * The submitter's side of the setter races: like race_fsyncs(), but with
 * long submissions (see long_submission()), and @check after each.
 */
static void race_long_submissions(struct __test_metadata *_metadata,
				  struct scratch_files *sf, struct race *rc,
				  void (*check)(struct race *rc))
{
	struct ring_file rf;
	struct hstat a, b;
	struct iou big;

	rf_open(_metadata, sf, &rf);
	ASSERT_EQ(0, iou_init(&big, 2 * LONG_STATX, 0));
	qd1_nop(_metadata, &big, 1);
	rc->ringfd = big.fd;
	__atomic_store_n(&rc->tid, sys_gettid(), __ATOMIC_RELEASE);
	ASSERT_EQ(0, read_hstat(big.fd, &a));
	while (!race_stopped(rc)) {
		long_submission(_metadata, &big, &rf, rc->fsyncs + 1);
		__atomic_add_fetch(&rc->fsyncs, 1, __ATOMIC_RELAXED);
		check(rc);
	}
	ASSERT_EQ(0, read_hstat(big.fd, &b));
	rc->handoffs = b.handoffs - a.handoffs;
	iou_exit(&big);
	rf_close(&rf);
}

static void *race_sched_setters(void *arg)
{
	struct sched_race *sr = arg;
	struct race *rc = sr->rc;
	struct sched_param sp = { .sched_priority = 0 };
	cpu_set_t all, one;
	pid_t tid;
	long end;
	int cpu;

	tid = race_wait_tid(rc);
	if (!tid) {
		RACE_FAIL(rc, "the submitter did not start");
		return NULL;
	}
	if (sched_getaffinity(tid, sizeof(all), &all)) {
		RACE_FAIL(rc, "sched_getaffinity: %s", strerror(errno));
		return NULL;
	}
	CPU_ZERO(&one);
	for (cpu = CPU_SETSIZE - 1; cpu >= 0; cpu--)
		if (CPU_ISSET(cpu, &all))
			break;
	CPU_SET(cpu, &one);
	end = now_ms() + RACE_SECS * 1000;
	while (now_ms() < end && !rc->line) {
		unsigned long n = rc->acts + 1;
		/* each setting changes all three: 1..10, a policy, a mask */
		int nice = 1 + n % 10;
		int policy = n % 2 ? SCHED_BATCH : SCHED_OTHER;
		cpu_set_t *mask = n % 2 && CPU_COUNT(&all) > 1 ? &one : &all;

		__atomic_store_n(&sr->seq, 2 * n - 1, __ATOMIC_SEQ_CST);
		if (setpriority(PRIO_PROCESS, tid, nice)) {
			RACE_FAIL(rc, "setpriority(%d): %s", tid, strerror(errno));
			break;
		}
		if (sched_setscheduler(tid, policy, &sp)) {
			RACE_FAIL(rc, "sched_setscheduler(%d): %s", tid,
				  strerror(errno));
			break;
		}
		if (sched_setaffinity(tid, sizeof(*mask), mask)) {
			RACE_FAIL(rc, "sched_setaffinity(%d): %s", tid,
				  strerror(errno));
			break;
		}
		sr->nice = nice;
		sr->policy = policy;
		sr->mask = *mask;
		rc->acts = n;
		__atomic_store_n(&sr->seq, 2 * n, __ATOMIC_RELEASE);
		usleep(rand() % 200);
	}
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * One race of settings through the tid: a child's thread runs @setter with
 * @arg, while the child's main thread hands off in long submissions, with
 * @check after each; @checked counts the checks made.
 */
static void setter_race(struct __test_metadata *_metadata,
			struct scratch_files *sf, bool on, struct race *rc,
			void *(*setter)(void *), void *arg,
			void (*check)(struct race *rc), unsigned long *checked)
{
	pid_t child;
	int status;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		pthread_t t;

		ASSERT_EQ(0, pthread_create(&t, NULL, setter, arg));
		race_long_submissions(_metadata, sf, rc, check);
		pthread_join(t, NULL);
		TH_LOG("%lu checks of the settings", *checked);
		ASSERT_LT(0UL, *checked);
		_exit(child_status(_metadata));
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	race_report(_metadata, rc, on, "settings");
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(CHILD_OK, WEXITSTATUS(status));
}

/*
 * Scheduling attributes set through the tid: another thread sets the
 * submitter's nice value (setpriority()), policy (sched_setscheduler()) and
 * CPU affinity (sched_setaffinity()) by its tid, over and over, while the
 * submitter hands off in submissions that go on after the handoff (see
 * race_long_submissions()). Whenever no setting is in progress, the
 * submitter, between two of its submissions, must have what was set last:
 * a setting must not land on a task a handoff demoted, nor be overwritten
 * by the move of the attributes the submitter had.
 */
TEST_F_TIMEOUT(identity, sched_setters_race_handoffs, 120)
{
	sched_race.rc = race_map(_metadata);
	setter_race(_metadata, &self->files, variant->sysctl, sched_race.rc,
		    race_sched_setters, &sched_race, sched_race_check,
		    &sched_race.checked);
}

/*
 * What the setter of name_setters_race_handoffs set through the tid last,
 * with the same protocol as struct sched_race: @seq is odd while it sets.
 */
struct name_race {
	struct race *rc;
	unsigned long seq, checked;
	int ioprio;
	char comm[16];
};

static struct name_race name_race;

/* The calling thread's name, without the newline, or "" */
static void own_comm(char *buf, size_t size)
{
	ssize_t n = read_small("/proc/thread-self/comm", buf, size);

	if (n <= 0)
		n = 0;
	else if (buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
}

/*
 * The submitter's side, after each of its submissions: its I/O priority and
 * its name must be the ones set last, unless a setting is in progress.
 */
static void name_race_check(struct race *rc)
{
	struct name_race *nr = &name_race;
	unsigned long seq = __atomic_load_n(&nr->seq, __ATOMIC_ACQUIRE);
	char comm[64], want_comm[16];
	int prio, want_prio;

	if (seq % 2 || !seq)
		return;
	prio = syscall(SYS_ioprio_get, T_IOPRIO_WHO_PROCESS, 0);
	own_comm(comm, sizeof(comm));
	want_prio = nr->ioprio;
	memcpy(want_comm, nr->comm, sizeof(want_comm));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&nr->seq, __ATOMIC_RELAXED) != seq)
		return;
	if (prio != want_prio)
		RACE_FAIL(rc, "setting %lu: I/O priority %#x set through tid %d, the thread has %#x",
			  seq / 2, want_prio, sys_gettid(), prio);
	if (strcmp(comm, want_comm))
		RACE_FAIL(rc, "setting %lu: name \"%s\" written through tid %d, the thread has \"%s\"",
			  seq / 2, want_comm, sys_gettid(), comm);
	nr->checked++;
}

/* Write @name to /proc/self/task/@tid/comm: 0 or an errno */
static int write_comm(pid_t tid, const char *name)
{
	char path[64];
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	n = write(fd, name, strlen(name));
	if (n != (ssize_t)strlen(name))
		err = n < 0 ? errno : EIO;
	close(fd);
	return err;
}

static void *race_name_setters(void *arg)
{
	struct name_race *nr = arg;
	struct race *rc = nr->rc;
	pid_t tid;
	long end;

	tid = race_wait_tid(rc);
	if (!tid) {
		RACE_FAIL(rc, "the submitter did not start");
		return NULL;
	}
	end = now_ms() + RACE_SECS * 1000;
	while (now_ms() < end && !rc->line) {
		unsigned long n = rc->acts + 1;
		/* each setting changes both: a best-effort level, a name */
		int prio = T_IOPRIO_VALUE(T_IOPRIO_CLASS_BE, n % 8);
		char comm[16];
		int err;

		snprintf(comm, sizeof(comm), "named-%lu", n);
		__atomic_store_n(&nr->seq, 2 * n - 1, __ATOMIC_SEQ_CST);
		if (syscall(SYS_ioprio_set, T_IOPRIO_WHO_PROCESS, tid, prio)) {
			RACE_FAIL(rc, "ioprio_set(%d): %s", tid, strerror(errno));
			break;
		}
		err = write_comm(tid, comm);
		if (err) {
			RACE_FAIL(rc, "writing the name of %d: %s", tid,
				  strerror(err));
			break;
		}
		nr->ioprio = prio;
		memcpy(nr->comm, comm, sizeof(comm));
		rc->acts = n;
		__atomic_store_n(&nr->seq, 2 * n, __ATOMIC_RELEASE);
		usleep(rand() % 200);
	}
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * The I/O priority and the name set through the tid: another thread sets
 * the submitter's I/O priority (ioprio_set(IOPRIO_WHO_PROCESS)) and writes
 * its /proc/self/task/<tid>/comm, over and over, while the submitter hands
 * off in long submissions, as in sched_setters_race_handoffs. Between two
 * submissions, with no setting in progress, the submitter must have what
 * was set last: a setting must not land on a task a handoff demoted, nor be
 * overwritten when the submitter's own values move at the end of the
 * submission.
 */
TEST_F_TIMEOUT(identity, name_setters_race_handoffs, 120)
{
	name_race.rc = race_map(_metadata);
	setter_race(_metadata, &self->files, variant->sysctl, name_race.rc,
		    race_name_setters, &name_race, name_race_check,
		    &name_race.checked);
}

static void *race_max_workers(void *arg)
{
	struct race *rc = arg;

	if (!race_wait_tid(rc)) {
		RACE_FAIL(rc, "the submitter did not start");
		return NULL;
	}
	while (!race_stopped(rc)) {
		/* bound, unbound; never below the spares a handoff needs */
		unsigned int counts[2] = { 4 + rc->acts % 2, 8 };

		if (syscall(__NR_io_uring_register, rc->ringfd,
			    IORING_REGISTER_IOWQ_MAX_WORKERS, counts, 2)) {
			RACE_FAIL(rc, "IORING_REGISTER_IOWQ_MAX_WORKERS: %s",
				  strerror(errno));
			break;
		}
		rc->acts++;
		usleep(rand() % 500);
	}
	return NULL;
}

/*
 * Ring registration: another thread sets the io-wq limits of the ring
 * (IORING_REGISTER_IOWQ_MAX_WORKERS walks the ring's task contexts) while
 * the submitter hands off and its context moves between tasks. Each call
 * must succeed (and not crash the kernel).
 */
TEST_F_TIMEOUT(identity, iowq_max_workers_races_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	pid_t child;
	int status;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		pthread_t t;

		ASSERT_EQ(0, pthread_create(&t, NULL, race_max_workers, rc));
		race_fsyncs(_metadata, &self->files, rc);
		pthread_join(t, NULL);
		_exit(child_status(_metadata));
	}
	usleep(RACE_SECS * 1000 * 1000);
	__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(child, waitpid(child, &status, 0));
	race_report(_metadata, rc, variant->sysctl, "limit changes");
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(CHILD_OK, WEXITSTATUS(status));
}

static int sys_futex(uint32_t *uaddr, int op, uint32_t val,
		     const struct timespec *ts)
{
	return syscall(__NR_futex, uaddr, op, val, ts, NULL, 0);
}

struct pi_race {
	struct race *rc;
	uint32_t word;		/* the PI futex: the owner's tid or 0 */
	int holder;		/* who is inside: 0, 1 submitter, 2 waiter */
	int waiting;		/* the waiter is in FUTEX_LOCK_PI or inside */
};

static void *race_pi_waiter(void *arg)
{
	struct pi_race *pr = arg;
	struct race *rc = pr->rc;

	while (!race_stopped(rc)) {
		struct timespec ts;
		long until = now_ms() + RACE_WAIT_MS;
		long start, waited;
		int h, ret, err;

		/*
		 * Contend while the owner is inside its fsync, at a random
		 * point of it: before it blocks (the handoff is refused, the
		 * owner has a waiter), or after it handed off.
		 */
		while (__atomic_load_n(&pr->holder, __ATOMIC_ACQUIRE) != 1 &&
		       !race_stopped(rc) && now_ms() < until)
			usleep(50);
		usleep(rand() % 20000);	/* a blocking fsync takes that long */
		__atomic_store_n(&pr->waiting, 1, __ATOMIC_SEQ_CST);
		start = now_ms();
		for (;;) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += RACE_WAIT_MS / 1000;
			ret = sys_futex(&pr->word, FUTEX_LOCK_PI, 0, &ts);
			err = errno;
			/*
			 * Only an owner still inside its fsync may keep the
			 * lock past RACE_WAIT_MS (under TCG a first fsync can
			 * wait behind writeback that long): wait on, up to
			 * PI_WAIT_MAX_MS in all. Once the owner is out
			 * (holder 0 before its unlock), the unlock hands the
			 * lock to this waiter, so a timeout then fails.
			 */
			if (!ret || err != ETIMEDOUT ||
			    __atomic_load_n(&pr->holder, __ATOMIC_SEQ_CST) != 1 ||
			    now_ms() - start >= PI_WAIT_MAX_MS)
				break;
		}
		waited = now_ms() - start;
		if (ret) {
			RACE_FAIL(rc, "FUTEX_LOCK_PI: %s after %ld ms, holder %d",
				  strerror(err), waited,
				  __atomic_load_n(&pr->holder, __ATOMIC_SEQ_CST));
			break;
		}
		if (waited >= RACE_WAIT_MS)
			fprintf(stderr, "# pi waiter: the owner kept the lock %ld ms\n",
				waited);
		h = __atomic_exchange_n(&pr->holder, 2, __ATOMIC_SEQ_CST);
		if (h)
			RACE_FAIL(rc, "PI lock taken while %d held it", h);
		usleep(50);
		__atomic_store_n(&pr->holder, 0, __ATOMIC_SEQ_CST);
		if (sys_futex(&pr->word, FUTEX_UNLOCK_PI, 0, NULL))
			RACE_FAIL(rc, "waiter FUTEX_UNLOCK_PI: %s", strerror(errno));
		__atomic_store_n(&pr->waiting, 0, __ATOMIC_SEQ_CST);
		rc->acts++;
	}
	return NULL;
}

/*
 * PI futexes: the submitter takes a PI futex, hands off in a blocking fsync
 * while holding it, and unlocks it; another thread contends for it at a
 * random point of the fsync, before the handoff (which is then refused) or
 * after it. The waiter must attach to the thread with the tid: the owner's
 * unlock must succeed, nobody may get the lock while the other holds it,
 * and the waiter must not time out once the owner is out of its fsync.
 */
TEST_F_TIMEOUT(identity, pi_futex_races_handoffs, 120)
{
	struct race *rc = race_map(_metadata);
	pid_t child;
	int status;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct pi_race pr = { .rc = rc };
		struct ring_file rf;
		struct hstat a, b;
		pthread_t t;
		long end;

		rf_open(_metadata, &self->files, &rf);
		ASSERT_EQ(0, read_hstat(rf.r.fd, &a));
		ASSERT_EQ(0, pthread_create(&t, NULL, race_pi_waiter, &pr));
		end = now_ms() + RACE_SECS * 1000;
		while (now_ms() < end && !rc->line) {
			int h;

			/*
			 * Take it uncontended: an owner that got it from a
			 * waiter owns PI state, and never hands off.
			 */
			while (__atomic_load_n(&pr.waiting, __ATOMIC_SEQ_CST) &&
			       now_ms() < end)
				usleep(50);
			if (sys_futex(&pr.word, FUTEX_LOCK_PI, 0, NULL)) {
				RACE_FAIL(rc, "FUTEX_LOCK_PI: %s", strerror(errno));
				break;
			}
			h = __atomic_exchange_n(&pr.holder, 1, __ATOMIC_SEQ_CST);
			if (h)
				RACE_FAIL(rc, "PI lock taken while %d held it", h);
			blocking_fsyncs(_metadata, &rf.r, rf.fd, rf.buf, 1, false);
			rc->fsyncs++;
			__atomic_store_n(&pr.holder, 0, __ATOMIC_SEQ_CST);
			if (sys_futex(&pr.word, FUTEX_UNLOCK_PI, 0, NULL)) {
				RACE_FAIL(rc, "owner FUTEX_UNLOCK_PI after a handoff: %s",
					  strerror(errno));
				break;
			}
			usleep(rand() % 200);
		}
		__atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
		pthread_join(t, NULL);
		ASSERT_EQ(0, read_hstat(rf.r.fd, &b));
		rc->handoffs = b.handoffs - a.handoffs;
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	race_report(_metadata, rc, variant->sysctl, "contended PI locks");
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(CHILD_OK, WEXITSTATUS(status));
}

static unsigned long refused_sig_seen;

static void refused_signal(int sig)
{
	__atomic_add_fetch(&refused_sig_seen, 1, __ATOMIC_RELEASE);
}

/*
 * A handoff that is refused once the issue sleeps must not leave the thread
 * with its signals blocked. The thread installs a seccomp filter after its
 * workers exist, so none of them can take its identity, and opens a FIFO
 * that has no writer through io_uring: the open blocks inline (sysctl 1) or
 * on io-wq (sysctl 0). A SIGUSR1 sent meanwhile must run its handler at
 * once, not when the FIFO opens. The open then completes: interrupted by
 * the signal like an open(2) without SA_RESTART (sleeping in place, -EINTR),
 * or opened once a helper opens the FIFO for writing, 3 s later.
 */
TEST_F_TIMEOUT(identity, refused_sleep_takes_signals, 120)
{
	pid_t child;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct sock_filter allow[] = {
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { .len = 1, .filter = allow };
		struct sigaction sa = { .sa_handler = refused_signal };
		char fifo[PATH_MAX];
		struct io_uring_cqe cqe;
		struct io_uring_sqe *sqe;
		struct ring_file rf;
		long t0, waited;
		int ret;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		ASSERT_EQ(0, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
		ASSERT_EQ(0, prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog));
		sigemptyset(&sa.sa_mask);
		ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
		snprintf(fifo, sizeof(fifo), "%s.fifo", rf.path);
		ASSERT_EQ(0, mkfifo(fifo, 0600));

		sqe = iou_sqe(&rf.r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_OPENAT, AT_FDCWD, fifo, 0, 0, 0xf1f0);
		sqe->open_flags = O_RDONLY | O_CLOEXEC;
		/* from a child: this thread may be inside the enter until then */
		if (!fork()) {
			int i, wfd = -1;

			usleep(300 * 1000);
			kill(getppid(), SIGUSR1);
			usleep(3000 * 1000);
			/* only while the open still waits for a writer */
			for (i = 0; i < 50 && wfd < 0; i++) {
				wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
				if (wfd < 0)
					usleep(20 * 1000);
			}
			usleep(100 * 1000);
			_exit(0);
		}
		t0 = now_ms();
		ret = iou_submit(&rf.r, 0);
		while (!__atomic_load_n(&refused_sig_seen, __ATOMIC_ACQUIRE) &&
		       now_ms() - t0 < 5000)
			usleep(1000);
		waited = now_ms() - t0;
		EXPECT_EQ(1, ret) TH_LOG("submit: %d", ret);
		EXPECT_EQ(1UL, refused_sig_seen)
			TH_LOG("no SIGUSR1 handled in %ld ms", waited);
		EXPECT_GT(2000, waited)
			TH_LOG("SIGUSR1 waited %ld ms, for the FIFO to open", waited);
		ASSERT_EQ(0, iou_wait_cqe(&rf.r, &cqe));
		EXPECT_EQ(0xf1f0ULL, cqe.user_data);
		if (cqe.res != -EINTR)
			EXPECT_LE(0, cqe.res) TH_LOG("open: %s", strerror(-cqe.res));
		if (cqe.res >= 0)
			close(cqe.res);
		unlink(fifo);
		while (wait(NULL) > 0)
			;
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}

/* The FIFO open that blocks for as long as a test wants, and its release */
#define FIFO_OPEN_DATA	0xf1f0ULL
#define FIFO_RELEASE_MS	5000	/* a writer comes after that, test or not */

/*
 * Issue an open of a new FIFO that has no writer through @rf's ring: it
 * blocks inline and hands off (sysctl 1) or blocks on io-wq (sysctl 0).
 * O_CREAT (of the FIFO that exists) is what keeps 7.3's nonblocking first
 * attempt from opening it at once: it punts such opens to io-wq. Returns
 * once the open sleeps, with the handoffs it took in @handed.
 */
static void fifo_open_blocked(struct __test_metadata *_metadata, bool on,
			      struct ring_file *rf, char *fifo, size_t size,
			      unsigned long *handed)
{
	struct io_uring_cqe cqe;
	struct io_uring_sqe *sqe;
	struct hstat a, b;

	snprintf(fifo, size, "%s.fifo", rf->path);
	ASSERT_EQ(0, mkfifo(fifo, 0600));
	ASSERT_EQ(0, read_hstat(rf->r.fd, &a));
	sqe = iou_sqe(&rf->r);
	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_OPENAT, AT_FDCWD, fifo, 0600, 0, FIFO_OPEN_DATA);
	sqe->open_flags = O_RDONLY | O_CREAT | O_CLOEXEC;
	ASSERT_EQ(1, iou_submit(&rf->r, 0));
	usleep(200 * 1000);
	ASSERT_EQ(0, read_hstat(rf->r.fd, &b));
	*handed = b.handoffs - a.handoffs;
	ASSERT_FALSE(iou_cqe(&rf->r, &cqe)) TH_LOG("the FIFO open ended: %d", cqe.res);
	if (on) {
		ASSERT_EQ(1UL, *handed) TH_LOG("the FIFO open did not hand off");
	} else {
		ASSERT_EQ(0UL, *handed);
	}
}

/* Open @fifo for writing, which lets a blocked open of it complete */
static void fifo_release(const char *fifo)
{
	int i, wfd = -1;

	for (i = 0; i < 50 && wfd < 0; i++) {
		wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (wfd < 0)
			usleep(20 * 1000);
	}
	if (wfd >= 0)
		close(wfd);
}

/*
 * Item 7: a request that handed off is still a running io-wq request that
 * IORING_OP_ASYNC_CANCEL reaches. The thread cancels its own FIFO open
 * after the handoff: as on 7.3 (sysctl 0, the open runs on io-wq) the
 * cancel returns -EALREADY and the open ends at once with -EINTR, long
 * before the writer that a helper brings after FIFO_RELEASE_MS. Before the
 * fix the cancel returned -ENOENT and the open waited for the writer.
 */
TEST_F_TIMEOUT(identity, async_cancel_reaches_handoff, 120)
{
	pid_t child;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		int cancel_res = 1, open_res = 1;
		struct io_uring_cqe cqe;
		struct io_uring_sqe *sqe;
		char fifo[PATH_MAX];
		struct ring_file rf;
		unsigned long handed;
		pid_t helper;
		long t0, t_open = -1;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		fifo_open_blocked(_metadata, variant->sysctl, &rf, fifo,
				  sizeof(fifo), &handed);
		helper = fork();
		ASSERT_LE(0, helper);
		if (!helper) {
			usleep(FIFO_RELEASE_MS * 1000);
			fifo_release(fifo);
			_exit(0);
		}
		sqe = iou_sqe(&rf.r);
		ASSERT_NE(NULL, sqe);
		iou_prep_cancel(sqe, FIFO_OPEN_DATA, 0, 0xca);
		t0 = now_ms();
		ASSERT_EQ(1, iou_submit(&rf.r, 0));
		while ((cancel_res > 0 || open_res > 0) &&
		       now_ms() - t0 < FIFO_RELEASE_MS + 3000) {
			if (!iou_cqe(&rf.r, &cqe)) {
				usleep(1000);
				continue;
			}
			if (cqe.user_data == 0xca) {
				cancel_res = cqe.res;
			} else {
				ASSERT_EQ(FIFO_OPEN_DATA, cqe.user_data);
				open_res = cqe.res;
				t_open = now_ms() - t0;
			}
		}
		EXPECT_EQ(-EALREADY, cancel_res)
			TH_LOG("ASYNC_CANCEL of the open (%lu handoff): %s", handed,
			       strerror(-cancel_res));
		EXPECT_EQ(-EINTR, open_res)
			TH_LOG("the canceled open returned %d after %ld ms",
			       open_res, t_open);
		EXPECT_GT(2000, t_open)
			TH_LOG("the canceled open ended after %ld ms", t_open);
		if (open_res >= 0)
			close(open_res);
		kill(helper, SIGKILL);
		waitpid(helper, NULL, 0);
		unlink(fifo);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}

/*
 * Item 7: execve() cancels the requests of the thread (io_uring_task_cancel())
 * and waits for them: it must reach a request that handed off. The thread
 * of a child hands off in a FIFO open, then execs: it must run the new
 * program at once, not once the FIFO gets a writer after FIFO_RELEASE_MS.
 */
TEST_F_TIMEOUT(identity, exec_cancels_handoff, 120)
{
	char fifo[PATH_MAX] = "";
	int pfd[2], ret;
	long t0, waited;
	pid_t child;

	if (access("/bin/true", X_OK))
		SKIP(return, "no /bin/true to exec");
	ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;
		unsigned long handed;

		close(pfd[0]);
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		fifo_open_blocked(_metadata, variant->sysctl, &rf, fifo,
				  sizeof(fifo), &handed);
		/* the FIFO's name, then exec: the pipe closes on exec */
		ASSERT_EQ((ssize_t)sizeof(fifo), write(pfd[1], fifo, sizeof(fifo)));
		execl("/bin/true", "true", (char *)NULL);
		_exit(3);
	}
	close(pfd[1]);
	ret = read(pfd[0], fifo, sizeof(fifo));
	t0 = now_ms();
	if (ret == (ssize_t)sizeof(fifo)) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };

		/* POLLHUP once the exec closed the pipe, or the child died */
		ret = poll(&p, 1, FIFO_RELEASE_MS);
		waited = now_ms() - t0;
		if (ret <= 0)
			fifo_release(fifo);
		EXPECT_EQ(1, ret) TH_LOG("no exec in %d ms", FIFO_RELEASE_MS);
		EXPECT_GT(2000, waited)
			TH_LOG("exec waited %ld ms for the handed-off open", waited);
		unlink(fifo);
	} else {
		EXPECT_EQ((ssize_t)sizeof(fifo), ret) TH_LOG("the child failed first");
	}
	close(pfd[0]);
	reap(_metadata, child, 0);
}

/* A thread cloned while its group leader hands off, and what it saw */
struct clone_race {
	int armed;		/* 1 once the delay is armed, -errno if not */
	int created;		/* pthread_create()'s result */
	long clone_ms;		/* how long the clone took */
	pid_t pid;		/* getpid() of the new thread */
	int pgid_ret;		/* its setpgid(0, 0), 0 or -errno */
	pid_t pgid;		/* getpgid(0) after it */
};

static void *clone_new_thread(void *arg)
{
	struct clone_race *cr = arg;

	cr->pid = getpid();
	cr->pgid_ret = setpgid(0, 0) ? -errno : 0;
	cr->pgid = getpgid(0);
	return NULL;
}

/* Arm the delay for this thread's next clone, then clone */
static void *clone_in_window(void *arg)
{
	struct clone_race *cr = arg;
	char tid[16];
	pthread_t n;
	long t0;
	int err;

	snprintf(tid, sizeof(tid), "%d", sys_gettid());
	err = write_str(CLONE_DELAY_TID, tid);
	__atomic_store_n(&cr->armed, err ? err : 1, __ATOMIC_RELEASE);
	if (err)
		return NULL;
	t0 = now_ms();
	cr->created = pthread_create(&n, NULL, clone_new_thread, cr);
	cr->clone_ms = now_ms() - t0;
	if (!cr->created)
		pthread_join(n, NULL);
	return NULL;
}

/* clone_delay_state: 0 armed or idle, 1 a clone sleeps in the window, 2 it woke */
static int clone_delay_state(void)
{
	char buf[16] = "";

	if (read_small(CLONE_DELAY_STATE, buf, sizeof(buf)) <= 0)
		return -1;
	return atoi(buf);
}

/*
 * Item 1: clone(CLONE_THREAD) reads the group leader before it takes
 * tasklist_lock, and a handoff of the leader in between moves leadership
 * only for the threads already on the thread list. The new thread must
 * still get the leader of its group, the task that holds the tgid: its
 * setpgid(0, 0) (the process's pid, checked against the caller's leader)
 * must succeed. Before the fix the new thread kept the demoted task as its
 * leader and setpgid() failed with -ESRCH (and a use after free in rlimit
 * locking, a wrong release_task() and de_thread()'s BUG_ON on exec were
 * next). Userspace cannot hold a clone in that window: the debugfs knob of
 * CONFIG_THREAD_HANDOFF_CLONE_DELAY makes the next clone of one thread
 * sleep there for CLONE_WINDOW_MS, and the leader hands off in a FIFO open
 * while the knob says that the clone still sleeps.
 */
TEST_F_TIMEOUT(identity, clone_races_leader_handoff, 120)
{
	struct statfs sfs;
	pid_t child;
	int err;

	if (statfs(DEBUGFS, &sfs) || sfs.f_type != DEBUGFS_MAGIC)
		mount("debugfs", DEBUGFS, "debugfs", 0, NULL);
	if (access(CLONE_DELAY_TID, F_OK))
		SKIP(return, "no " CLONE_DELAY_TID
		     " (CONFIG_THREAD_HANDOFF_CLONE_DELAY off or no debugfs)");
	self->clone_delay = true;
	err = write_str(CLONE_DELAY_MS, CLONE_WINDOW_MS);
	if (err == -EPERM || err == -EACCES)
		SKIP(return, "debugfs is not writable (lockdown?)");
	ASSERT_EQ(0, err);
	ASSERT_EQ(0, write_str(CLONE_DELAY_STATE, "0"));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct clone_race cr = { .created = -1, .pgid_ret = 1 };
		int armed = 0, state = -1, state_after;
		struct io_uring_cqe cqe;
		char fifo[PATH_MAX];
		struct ring_file rf;
		unsigned long handed;
		pthread_t t;
		long t0;

		/* setpgid() takes it out of the harness's process group */
		ASSERT_EQ(0, prctl(PR_SET_PDEATHSIG, SIGKILL));
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		ASSERT_EQ(getpid(), sys_gettid());
		ASSERT_EQ(0, pthread_create(&t, NULL, clone_in_window, &cr));
		t0 = now_ms();
		while (now_ms() - t0 < 5000) {
			armed = __atomic_load_n(&cr.armed, __ATOMIC_ACQUIRE);
			state = clone_delay_state();
			if (armed < 0 || state == 1)
				break;
			usleep(1000);
		}
		ASSERT_LE(0, armed) TH_LOG("arming the clone delay: %s",
					    strerror(-armed));
		ASSERT_EQ(1, state) TH_LOG("the clone did not reach the delay");
		fifo_open_blocked(_metadata, variant->sysctl, &rf, fifo,
				  sizeof(fifo), &handed);
		state_after = clone_delay_state();
		fifo_release(fifo);
		ASSERT_EQ(0, iou_wait_cqe(&rf.r, &cqe));
		EXPECT_EQ(FIFO_OPEN_DATA, cqe.user_data);
		EXPECT_LE(0, cqe.res) TH_LOG("the FIFO open: %s", strerror(-cqe.res));
		if (cqe.res >= 0)
			close(cqe.res);
		unlink(fifo);
		pthread_join(t, NULL);
		EXPECT_EQ(1, state_after)
			TH_LOG("the clone (%ld ms) left the window before the handoff was seen",
			       cr.clone_ms);
		ASSERT_EQ(0, cr.created) TH_LOG("pthread_create: %s",
						strerror(cr.created));
		EXPECT_EQ(0, cr.pgid_ret)
			TH_LOG("setpgid(0, 0) in the thread cloned across the leader's handoff (%lu): %s",
			       handed, strerror(-cr.pgid_ret));
		EXPECT_EQ(cr.pid, cr.pgid);
		EXPECT_EQ(getpid(), sys_gettid());
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap_within(_metadata, child, 60 * 1000);
}

#define SHM_RMID_FORCED	"/proc/sys/kernel/shm_rmid_forced"

/*
 * Item 10: the SysV shared memory segments a thread created are listed on
 * its task_struct, and exit_shm() of that task orphans them, or destroys
 * the unattached ones with kernel.shm_rmid_forced. A thread that created a
 * segment must not leave it behind on the demoted task (in an IPC namespace
 * of the test's own, with shm_rmid_forced set): once the thread's
 * ring is closed and its io-wq workers (the demoted task among them) have
 * exited, the segment must still exist. Before the fix the thread handed
 * off and the segment died with the worker. Once the segment is removed,
 * the thread must hand off again.
 */
TEST_F_TIMEOUT(identity, sysv_shm_survives_handoff, 120)
{
	char buf[16];
	pid_t child;

	if (read_small(SHM_RMID_FORCED, buf, sizeof(buf)) <= 0)
		SKIP(return, "no " SHM_RMID_FORCED " (CONFIG_SYSVIPC off)");
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct shmid_ds ds;
		struct task_list tl;
		struct ring_file rf;
		long t0;
		int id;

		/* the sysctl is per IPC namespace: leave the others' alone */
		ASSERT_EQ(0, unshare(CLONE_NEWIPC))
			TH_LOG("unshare(CLONE_NEWIPC): %s", strerror(errno));
		ASSERT_EQ(0, write_str(SHM_RMID_FORCED, "1\n"));
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
		ASSERT_LE(0, id) TH_LOG("shmget: %s", strerror(errno));
		handoff_or_refusal(_metadata, variant->sysctl, &rf,
				   "a thread with a SysV segment");
		/* no ring left: the workers exit (IO_WQ_BIT_EXIT_ON_IDLE) */
		rf_close(&rf);
		t0 = now_ms();
		do {
			usleep(10 * 1000);
			list_tasks(_metadata, &tl);
		} while (tl.nr_all != 1 && now_ms() - t0 < 10000);
		EXPECT_EQ(1, tl.nr_all)
			TH_LOG("io-wq workers still there after %ld ms",
			       now_ms() - t0);
		EXPECT_EQ(0, shmctl(id, IPC_STAT, &ds))
			TH_LOG("the thread's segment is gone once its workers exited: %s",
			       strerror(errno));
		if (shmctl(id, IPC_RMID, NULL))
			ASSERT_EQ(EINVAL, errno);
		/* nothing of the thread's own left: it hands off again */
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/*
 * A BPF_MAP_TYPE_TASK_STORAGE map of int values keyed by pidfd (BTF is
 * required: one type, "int"). Returns the map fd or -errno.
 */
static int task_storage_map(void)
{
	struct {
		struct btf_header hdr;
		struct btf_type t;
		__u32 enc;
		char str[5];
	} __attribute__((packed)) btf = {
		.hdr = {
			.magic = BTF_MAGIC,
			.version = BTF_VERSION,
			.hdr_len = sizeof(struct btf_header),
			.type_len = sizeof(struct btf_type) + sizeof(__u32),
			.str_off = sizeof(struct btf_type) + sizeof(__u32),
			.str_len = 5,
		},
		.t = {
			.name_off = 1,
			.info = BTF_KIND_INT << 24,
			.size = sizeof(int),
		},
		.enc = (BTF_INT_SIGNED << 24) | 32,
		.str = "\0int",
	};
	union bpf_attr a;
	int btf_fd, map, err;

	memset(&a, 0, sizeof(a));
	a.btf = (__u64)(uintptr_t)&btf;
	a.btf_size = sizeof(btf);
	btf_fd = sys_bpf(BPF_BTF_LOAD, &a);
	if (btf_fd < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_TASK_STORAGE;
	a.key_size = sizeof(int);
	a.value_size = sizeof(int);
	a.map_flags = BPF_F_NO_PREALLOC;
	a.btf_fd = btf_fd;
	a.btf_key_type_id = 1;
	a.btf_value_type_id = 1;
	map = sys_bpf(BPF_MAP_CREATE, &a);
	err = errno;
	close(btf_fd);
	return map < 0 ? -err : map;
}

/* Update (@val set) or look up the storage of the task behind @pidfd */
static int task_storage(int map, int cmd, int pidfd, int *val)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = map;
	a.key = (__u64)(uintptr_t)&pidfd;
	a.value = (__u64)(uintptr_t)val;
	a.flags = BPF_ANY;
	return sys_bpf(cmd, &a) ? -errno : 0;
}

/*
 * Give every io-wq worker of this process BPF task storage @val, or with
 * @val NULL delete theirs. Returns the workers tagged or untagged.
 */
static int tag_workers(struct __test_metadata *_metadata, int map, int *val)
{
	pid_t self = sys_gettid();
	struct dirent *de;
	int tagged = 0;
	DIR *d;

	d = opendir("/proc/self/task");
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		pid_t tid = atoi(de->d_name);
		int pidfd, ret;

		if (de->d_name[0] == '.' || tid == self)
			continue;
		pidfd = syscall(__NR_pidfd_open, tid, PIDFD_THREAD);
		/* an idle worker may exit meanwhile */
		if (pidfd < 0)
			continue;
		ret = task_storage(map, val ? BPF_MAP_UPDATE_ELEM :
				   BPF_MAP_DELETE_ELEM, pidfd, val);
		close(pidfd);
		if (!ret)
			tagged++;
		else if (ret != -ENOENT)	/* exited, or none to delete */
			EXPECT_EQ(0, ret) TH_LOG("%s worker %d: %s",
						 val ? "tag" : "untag", tid,
						 strerror(-ret));
	}
	closedir(d);
	return tagged;
}

/*
 * Item 10: BPF task local storage is attached to the task_struct, and a
 * lookup by the thread's pidfd finds the storage of the task that holds
 * its pid. It must find the thread's own, whatever handed off: not a
 * worker's after the thread took over a worker that had storage, and not
 * nothing after the thread's storage stayed with the demoted task. Before
 * the fix both happened (a worker's value, then ENOENT). Once the storage
 * is deleted on both sides the thread must hand off again.
 */
TEST_F_TIMEOUT(identity, bpf_task_storage_stays, 120)
{
	pid_t child;
	int map;

	/* a skip needs an entry in tests/expected.txt, so none goes unseen */
	map = task_storage_map();
	if (map < 0)
		SKIP(return, "no BPF task storage map: %s", strerror(-map));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;
		int pidfd, val = 2, ret, tagged;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		pidfd = syscall(__NR_pidfd_open, sys_gettid(), PIDFD_THREAD);
		ASSERT_LE(0, pidfd) TH_LOG("pidfd_open: %s", strerror(errno));

		/* the idle workers have storage, the thread none */
		tagged = tag_workers(_metadata, map, &val);
		if (variant->sysctl)
			ASSERT_LE(1, tagged) TH_LOG("no idle worker to tag");
		handoff_or_refusal(_metadata, variant->sysctl, &rf,
				   "workers with BPF task storage");
		val = 0;
		ret = task_storage(map, BPF_MAP_LOOKUP_ELEM, pidfd, &val);
		EXPECT_EQ(-ENOENT, ret)
			TH_LOG("the thread's pidfd finds storage %d (a worker's)",
			       val);

		/* the thread has storage */
		val = 1;
		ASSERT_EQ(0, task_storage(map, BPF_MAP_UPDATE_ELEM, pidfd, &val));
		handoff_or_refusal(_metadata, variant->sysctl, &rf,
				   "a thread with BPF task storage");
		val = 0;
		ret = task_storage(map, BPF_MAP_LOOKUP_ELEM, pidfd, &val);
		EXPECT_EQ(0, ret) TH_LOG("the thread's storage is gone: %s",
					 strerror(-ret));
		EXPECT_EQ(1, val);

		/* no storage left on either side: it hands off again */
		ASSERT_EQ(0, task_storage(map, BPF_MAP_DELETE_ELEM, pidfd, NULL));
		tag_workers(_metadata, map, NULL);
		close(map);
		prewarm(_metadata, variant->sysctl, &rf);
		close(pidfd);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	close(map);
	reap(_metadata, child, CHILD_OK);
}

/*
 * Item 10: the speculation controls of PR_SET_SPECULATION_CTRL are the
 * task's own. A thread that disabled speculative store bypass for itself
 * after its workers were created must still have it disabled after a
 * blocking request, not the workers' default. Once it enables it again
 * it must hand off again.
 */
TEST_F_TIMEOUT(identity, spec_ctrl_stays, 120)
{
	pid_t child;
	int ctrl;

	ctrl = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
	if (ctrl < 0 || !(ctrl & PR_SPEC_PRCTL))
		SKIP(return, "no per-task store bypass control (%d)", ctrl);
	if (ctrl & (PR_SPEC_DISABLE | PR_SPEC_FORCE_DISABLE))
		SKIP(return, "store bypass already disabled here (%#x)", ctrl);
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		ASSERT_EQ(0, prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS,
				   PR_SPEC_DISABLE, 0, 0))
			TH_LOG("PR_SPEC_DISABLE: %s", strerror(errno));
		handoff_or_refusal(_metadata, variant->sysctl, &rf,
				   "store bypass disabled");
		ctrl = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
		EXPECT_EQ(PR_SPEC_PRCTL | PR_SPEC_DISABLE, ctrl)
			TH_LOG("store bypass control now %#x", ctrl);
		ASSERT_EQ(0, prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS,
				   PR_SPEC_ENABLE, 0, 0));
		prewarm(_metadata, variant->sysctl, &rf);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}

/*
 * Ring teardown: closing a ring cancels its requests, and a request that
 * handed off is one of them. The thread of a child hands off in a FIFO
 * open, closes its ring and stays alive; the open must then end at once
 * (-EINTR from the cancel, as on io-wq at sysctl 0), which leaves the FIFO
 * without a reader: a nonblocking open for writing fails with ENXIO. An
 * open still waiting would have let it succeed (and completed then).
 */
TEST_F_TIMEOUT(identity, ring_close_cancels_handoff, 120)
{
	char fifo[PATH_MAX] = "";
	int pfd[2], done[2], wfd, err;
	pid_t child;

	ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(done, O_CLOEXEC));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;
		unsigned long handed;
		char c;

		close(pfd[0]);
		close(done[1]);
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		fifo_open_blocked(_metadata, variant->sysctl, &rf, fifo,
				  sizeof(fifo), &handed);
		rf_close(&rf);
		ASSERT_EQ((ssize_t)sizeof(fifo), write(pfd[1], fifo, sizeof(fifo)));
		/* alive until the parent has looked */
		ASSERT_EQ(0, read(done[0], &c, 1));
		_exit(CHILD_OK);
	}
	close(pfd[1]);
	close(done[0]);
	ASSERT_EQ((ssize_t)sizeof(fifo), read(pfd[0], fifo, sizeof(fifo)))
		TH_LOG("the child failed before closing its ring");
	/* the ring's exit work cancels in a kworker: give it time */
	usleep(1500 * 1000);
	wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	err = errno;
	EXPECT_GT(0, wfd)
		TH_LOG("the open of the closed ring still waited %d ms after the close",
		       1500);
	if (wfd >= 0)
		close(wfd);
	else
		EXPECT_EQ(ENXIO, err) TH_LOG("open for writing: %s", strerror(err));
	close(done[1]);
	close(pfd[0]);
	if (wfd < 0 && err != ENXIO)
		fifo_release(fifo);
	unlink(fifo);
	reap(_metadata, child, CHILD_OK);
}

/* Wait up to @ms for the cgroup @dir to report "frozen @want"; the ms taken, or -1 */
static long cg_wait_frozen(const char *dir, int want, long ms)
{
	char path[PATH_MAX], buf[512], key[16];
	long t0 = now_ms();

	if (path_cat(path, sizeof(path), dir, "/cgroup.events"))
		return -1;
	snprintf(key, sizeof(key), "frozen %d\n", want);
	do {
		if (read_small(path, buf, sizeof(buf)) > 0 && strstr(buf, key))
			return now_ms() - t0;
		usleep(10 * 1000);
	} while (now_ms() - t0 < ms);
	return -1;
}

#define FREEZE_MS	20000	/* a frozen cgroup reports it within ms, under TCG */
#define CHILD_MS	60000	/* for a child to finish once released */

/*
 * The child of a freezer case: in a cgroup of its own if @own_cg, hands off
 * in a FIFO open and sends the FIFO's name to @ready; the parent freezes
 * and thaws it, brings the FIFO's writer and writes to @go. The thread must
 * still be itself, and the open must end, with an fd or with -EINTR (the
 * freezer's wakeup), as on io-wq. Exits with the child's verdict.
 */
static void frozen_child(struct __test_metadata *_metadata,
			 FIXTURE_DATA(identity) *self, bool on, bool own_cg,
			 int ready, int go)
{
	char fifo[PATH_MAX], dom[PATH_MAX], c;
	struct io_uring_cqe cqe;
	struct ring_file rf;
	unsigned long handed;
	pid_t tid = gettid();
	long t0;

	if (own_cg)
		cg_setup(_metadata, &self->cg, dom, sizeof(dom));
	rf_open(_metadata, &self->files, &rf);
	prewarm(_metadata, on, &rf);
	fifo_open_blocked(_metadata, on, &rf, fifo, sizeof(fifo), &handed);
	ASSERT_EQ((ssize_t)sizeof(fifo), write(ready, fifo, sizeof(fifo)));
	/* frozen and thawed in here; the parent then opens the FIFO */
	ASSERT_EQ(1, read(go, &c, 1));
	ASSERT_EQ(tid, gettid());
	t0 = now_ms();
	while (!iou_cqe(&rf.r, &cqe) && now_ms() - t0 < 3000)
		usleep(1000);
	ASSERT_GT(3000, now_ms() - t0)
		TH_LOG("the open did not end after the thaw and its writer");
	ASSERT_EQ(FIFO_OPEN_DATA, cqe.user_data);
	if (cqe.res != -EINTR)
		ASSERT_LE(0, cqe.res) TH_LOG("open: %s", strerror(-cqe.res));
	TH_LOG("the open after the thaw: %d (%lu handoff)", cqe.res, handed);
	if (cqe.res >= 0)
		close(cqe.res);
	unlink(fifo);
	rf_close(&rf);
	_exit(child_status(_metadata));
}

/*
 * Fork a frozen_child() and wait until its open sleeps: its pid, with the
 * FIFO's name in @fifo and the pipe to release it in @go.
 */
static pid_t fork_frozen_child(struct __test_metadata *_metadata,
			       FIXTURE_DATA(identity) *self, bool on,
			       bool own_cg, char *fifo, size_t size, int *go)
{
	int pfd[2], g[2];
	ssize_t ret;
	pid_t child;

	ASSERT_EQ(PATH_MAX, size);
	ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(g, O_CLOEXEC));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		close(pfd[0]);
		close(g[1]);
		frozen_child(_metadata, self, on, own_cg, pfd[1], g[0]);
	}
	close(pfd[1]);
	close(g[0]);
	ret = read(pfd[0], fifo, size);
	close(pfd[0]);
	if (ret != (ssize_t)size) {
		close(g[1]);
		reap_within(_metadata, child, CHILD_MS);
		ASSERT_EQ((ssize_t)size, ret) TH_LOG("the child failed first");
	}
	*go = g[1];
	return child;
}

/*
 * Item 12, the freezer: a process whose thread handed off in a FIFO open
 * (the demoted task waits in the open as a worker, the thread in read(2))
 * freezes with cgroup.freeze as it does at sysctl 0, where the open waits
 * on io-wq: within FREEZE_MS, not once the open ends. After the thaw the
 * thread runs as itself, and the open completes when the FIFO gets its
 * writer (or ends with -EINTR, the freezer's signal wakeup), as on io-wq.
 */
TEST_F_TIMEOUT(identity, cgroup_freeze_with_handoff, 120)
{
	char fifo[PATH_MAX] = "", path[PATH_MAX];
	long frozen, thawed;
	int go, ret;
	pid_t child;

	child = fork_frozen_child(_metadata, self, variant->sysctl, true, fifo,
				  sizeof(fifo), &go);
	ret = path_cat(path, sizeof(path), self->cg.dom, "/cgroup.freeze");
	if (!ret)
		ret = write_str(path, "1");
	frozen = ret ? -1 : cg_wait_frozen(self->cg.dom, 1, FREEZE_MS);
	/* thawed whatever happened, so that the child can end */
	write_str(path, "0");
	thawed = ret ? -1 : cg_wait_frozen(self->cg.dom, 0, FREEZE_MS);
	fifo_release(fifo);
	TH_LOG("frozen in %ld ms, thawed in %ld ms", frozen, thawed);
	EXPECT_EQ(0, ret) TH_LOG("%s: %s", path, strerror(-ret));
	EXPECT_LE(0, frozen) TH_LOG("not frozen after %d ms", FREEZE_MS);
	EXPECT_LE(0, thawed) TH_LOG("not thawed after %d ms", FREEZE_MS);
	EXPECT_EQ(1, write(go, "g", 1));
	close(go);
	reap_within(_metadata, child, CHILD_MS);
	unlink(fifo);
}

/*
 * The tids of the NT_PRSTATUS notes of the ELF core file @path, in their
 * order, to @tids (at most @max); their number, or -1 if the file is no
 * 64-bit core of this machine's.
 */
static int core_tids(const char *path, pid_t *tids, int max)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd, i, n = -1;
	char *notes = NULL;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_type != ET_CORE ||
	    eh.e_phentsize != sizeof(ph))
		goto out;
	for (i = 0; i < eh.e_phnum; i++) {
		size_t off = 0;

		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)) !=
		    sizeof(ph))
			goto out;
		if (ph.p_type != PT_NOTE || ph.p_filesz > (1 << 24))
			continue;
		notes = malloc(ph.p_filesz);
		if (!notes || pread(fd, notes, ph.p_filesz, ph.p_offset) !=
		    (ssize_t)ph.p_filesz)
			goto out;
		n = 0;
		while (off + sizeof(Elf64_Nhdr) <= ph.p_filesz) {
			Elf64_Nhdr *nh = (Elf64_Nhdr *)(notes + off);
			size_t desc = off + sizeof(*nh) + ((nh->n_namesz + 3) & ~3U);

			if (desc + nh->n_descsz > ph.p_filesz)
				break;
			if (nh->n_type == NT_PRSTATUS && n < max &&
			    nh->n_descsz >= sizeof(struct elf_prstatus)) {
				struct elf_prstatus st;

				memcpy(&st, notes + desc, sizeof(st));
				tids[n++] = st.pr_pid;
			}
			off = desc + ((nh->n_descsz + 3) & ~3U);
		}
		break;
	}
out:
	free(notes);
	close(fd);
	return n;
}

#define CORE_MS		20000	/* a core of a small process under TCG */

/*
 * Item 12, the coredump: a thread that handed off in a FIFO open (its
 * demoted task waits in the open as a worker) calls abort(). The dump
 * kills and waits for every task of the group, the demoted one too: it
 * must end within CORE_MS as on io-wq at sysctl 0, not once the open
 * ends, and the core's first thread (the one that dumped) must carry the
 * thread's tid.
 */
TEST_F_TIMEOUT(identity, coredump_with_handoff, 120)
{
	char fifo[PATH_MAX] = "", cwd[PATH_MAX - 64], pattern[PATH_MAX];
	char core[PATH_MAX], saved[sizeof(self->core_pattern)];
	int pfd[2], ret, status = 0, n;
	pid_t child, tids[64], r = 0;
	long t0, took = -1;

	if (read_small(CORE_PATTERN, saved, sizeof(saved)) <= 0)
		SKIP(return, "cannot read " CORE_PATTERN);
	ASSERT_NE(NULL, getcwd(cwd, sizeof(cwd)));
	snprintf(pattern, sizeof(pattern), "%s/identity_test.core.%%p", cwd);
	/* longer than CORENAME_MAX_SIZE would be cut without an error */
	if (strlen(pattern) >= 128)
		SKIP(return, "the core file path (%zu bytes) is too long for %s",
		     strlen(pattern), CORE_PATTERN);
	memcpy(self->core_pattern, saved, sizeof(saved));
	ASSERT_EQ(0, write_str(CORE_PATTERN, pattern));
	ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
		struct ring_file rf;
		unsigned long handed;

		close(pfd[0]);
		ASSERT_EQ(0, setrlimit(RLIMIT_CORE, &rl));
		ASSERT_EQ(0, prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		fifo_open_blocked(_metadata, variant->sysctl, &rf, fifo,
				  sizeof(fifo), &handed);
		ASSERT_EQ((ssize_t)sizeof(fifo), write(pfd[1], fifo, sizeof(fifo)));
		/* the scratch file goes with the parent's teardown */
		abort();
	}
	close(pfd[1]);
	ret = read(pfd[0], fifo, sizeof(fifo));
	close(pfd[0]);
	t0 = now_ms();
	while (ret == (ssize_t)sizeof(fifo) && now_ms() - t0 < 2 * CORE_MS) {
		r = waitpid(child, &status, WNOHANG);
		if (r == child) {
			took = now_ms() - t0;
			break;
		}
		usleep(5 * 1000);
	}
	if (took < 0) {
		if (fifo[0])
			fifo_release(fifo);
		t0 = now_ms();
		while ((r = waitpid(child, &status, WNOHANG)) == 0 &&
		       now_ms() - t0 < CHILD_MS)
			usleep(5 * 1000);
		if (r == 0) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
		}
	}
	/* the pattern back at once: later cases and liburing dump there */
	EXPECT_EQ(0, write_str(CORE_PATTERN, saved));
	self->core_pattern[0] = '\0';
	if (fifo[0])
		unlink(fifo);
	snprintf(core, sizeof(core), "%s/identity_test.core.%d", cwd, child);
	n = core_tids(core, tids, 64);
	unlink(core);
	ASSERT_EQ((ssize_t)sizeof(fifo), ret) TH_LOG("the child failed first");
	ASSERT_TRUE(WIFSIGNALED(status)) TH_LOG("status %#x", status);
	EXPECT_EQ(SIGABRT, WTERMSIG(status));
	EXPECT_TRUE(WCOREDUMP(status)) TH_LOG("no core dumped");
	EXPECT_LE(0, took) TH_LOG("the dump waited for the open's writer");
	EXPECT_GT(CORE_MS, took) TH_LOG("the dump took %ld ms", took);
	ASSERT_LT(0, n) TH_LOG("no thread in the core file %s", core);
	EXPECT_EQ(child, tids[0])
		TH_LOG("the core's dumping thread is %d, not the thread %d",
		       tids[0], child);
	TH_LOG("dumped in %ld ms, %d threads in the core", took, n);
}

#define TSYNC_MS	20000	/* every thread runs a task work, under TCG */

/*
 * Item 12, Landlock TSYNC: landlock_restrict_self() with
 * LANDLOCK_RESTRICT_SELF_TSYNC waits until every other thread of the
 * process, io-wq workers included, has run a task work that swaps its
 * creds. The thread of a child hands off in a FIFO open, then restricts
 * itself and its siblings (no regular file may be made): the call must
 * return within TSYNC_MS, as at sysctl 0 where the open waits on io-wq,
 * not once the open ends (the demoted task, waiting in the open, must take
 * the task work like any worker), and the domain must bind the thread that
 * holds the tid. The parent brings the FIFO's writer after that.
 */
TEST_F_TIMEOUT(identity, landlock_tsync_with_handoff, 120)
{
	char fifo[PATH_MAX] = "";
	int pfd[2], res[2], ret, abi;
	long took = -1, late = -1;
	struct pollfd p;
	pid_t child;

	abi = syscall(__NR_landlock_create_ruleset, NULL, 0,
		      LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0)
		SKIP(return, "no Landlock: %s", strerror(errno));
	if (abi < 8)
		SKIP(return, "no LANDLOCK_RESTRICT_SELF_TSYNC (Landlock ABI %d)", abi);
	ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(res, O_CLOEXEC));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct landlock_ruleset_attr attr = {
			.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_REG,
		};
		char name[PATH_MAX];
		struct io_uring_cqe cqe;
		struct io_uring_sqe *sqe;
		struct ring_file rf;
		unsigned long handed;
		int rs, fd, err;
		long t0, dt;

		close(pfd[0]);
		close(res[0]);
		rf_open(_metadata, &self->files, &rf);
		rs = syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
		ASSERT_LE(0, rs) TH_LOG("landlock_create_ruleset: %s", strerror(errno));
		prewarm(_metadata, variant->sysctl, &rf);
		fifo_open_blocked(_metadata, variant->sysctl, &rf, fifo,
				  sizeof(fifo), &handed);
		ASSERT_EQ((ssize_t)sizeof(fifo), write(pfd[1], fifo, sizeof(fifo)));
		t0 = now_ms();
		ret = syscall(__NR_landlock_restrict_self, rs,
			      LANDLOCK_RESTRICT_SELF_TSYNC);
		err = errno;
		dt = now_ms() - t0;
		ASSERT_EQ((ssize_t)sizeof(dt), write(res[1], &dt, sizeof(dt)));
		ASSERT_EQ(0, ret) TH_LOG("landlock_restrict_self: %s", strerror(err));
		snprintf(name, sizeof(name), "%s.landlock", rf.path);
		/* the thread that holds the tid is bound ... */
		fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		err = errno;
		if (fd >= 0) {
			close(fd);
			unlink(name);
		}
		EXPECT_GT(0, fd) TH_LOG("the thread made a file after TSYNC");
		EXPECT_EQ(EACCES, err);
		/* ... and so are the ring's workers, the demoted task among them */
		sqe = iou_sqe(&rf.r);
		ASSERT_NE(NULL, sqe);
		iou_prep(sqe, IORING_OP_OPENAT, AT_FDCWD, name, 0600, 0, 0x11);
		sqe->open_flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
		sqe->flags |= IOSQE_ASYNC;
		ASSERT_EQ(1, iou_submit(&rf.r, 0));
		/* the parent brings the writer once it has the time */
		t0 = now_ms();
		ret = 0;
		while (ret < 2 && now_ms() - t0 < 3 * TSYNC_MS) {
			if (!iou_cqe(&rf.r, &cqe)) {
				usleep(1000);
				continue;
			}
			ret++;
			if (cqe.user_data == 0x11) {
				if (cqe.res >= 0) {
					close(cqe.res);
					unlink(name);
				}
				EXPECT_EQ(-EACCES, cqe.res)
					TH_LOG("an io-wq worker made a file after TSYNC: %d",
					       cqe.res);
				continue;
			}
			ASSERT_EQ(FIFO_OPEN_DATA, cqe.user_data);
			if (cqe.res != -EINTR)
				EXPECT_LE(0, cqe.res) TH_LOG("open: %s", strerror(-cqe.res));
			TH_LOG("the open after TSYNC: %d (%lu handoff)", cqe.res,
			       handed);
			if (cqe.res >= 0)
				close(cqe.res);
		}
		EXPECT_EQ(2, ret) TH_LOG("%d of 2 requests ended", ret);
		unlink(fifo);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	close(pfd[1]);
	close(res[1]);
	ret = read(pfd[0], fifo, sizeof(fifo));
	if (ret == (ssize_t)sizeof(fifo)) {
		p = (struct pollfd){ .fd = res[0], .events = POLLIN };
		if (poll(&p, 1, TSYNC_MS) != 1 ||
		    read(res[0], &took, sizeof(took)) != sizeof(took))
			took = -1;
		/* ends a TSYNC that waits for the open, or the open itself */
		fifo_release(fifo);
		if (took < 0 && poll(&p, 1, TSYNC_MS) == 1 &&
		    read(res[0], &late, sizeof(late)) == sizeof(late))
			TH_LOG("TSYNC returned %ld ms after it began, once the open ended",
			       late);
	}
	TH_LOG("TSYNC took %ld ms", took);
	EXPECT_LE(0, took) TH_LOG("TSYNC still waited %d ms after it began",
				  TSYNC_MS);
	close(pfd[0]);
	close(res[0]);
	reap_within(_metadata, child, CHILD_MS);
	if (fifo[0])
		unlink(fifo);
	ASSERT_EQ((ssize_t)sizeof(fifo), ret) TH_LOG("the child failed first");
}

#define PM_TEST		"/sys/power/pm_test"
#define PM_STATE	"/sys/power/state"

/*
 * Item 12, the system freezer: with /sys/power/pm_test at "freezer", a
 * write of "freeze" to /sys/power/state freezes every user task, waits 5 s
 * and thaws them; it fails with EBUSY if a task does not freeze in 20 s.
 * A process whose thread handed off in a FIFO open (the demoted task waits
 * in the open) must freeze as at sysctl 0, where the open waits on io-wq.
 * After the thaw the thread runs as itself and the open completes when the
 * FIFO gets its writer (or ends with -EINTR, the freezer's wakeup).
 */
TEST_F_TIMEOUT(identity, system_freeze_with_handoff, 120)
{
	char fifo[PATH_MAX] = "", modes[256];
	int go, werr;
	long t0, took;
	pid_t child;

	if (read_small(PM_TEST, modes, sizeof(modes)) <= 0 ||
	    !strstr(modes, "freezer"))
		SKIP(return, "no freezer mode in " PM_TEST);
	if (!strstr(modes, "[none]"))
		SKIP(return, PM_TEST " is in use: %s", modes);
	if (read_small(PM_STATE, modes, sizeof(modes)) <= 0 ||
	    !strstr(modes, "freeze"))
		SKIP(return, "no freeze state in " PM_STATE);
	child = fork_frozen_child(_metadata, self, variant->sysctl, false, fifo,
				  sizeof(fifo), &go);
	self->pm_test = true;
	werr = write_str(PM_TEST, "freezer");
	t0 = now_ms();
	if (!werr)
		werr = write_str(PM_STATE, "freeze");
	took = now_ms() - t0;
	EXPECT_EQ(0, write_str(PM_TEST, "none"));
	self->pm_test = false;
	fifo_release(fifo);
	TH_LOG("frozen and thawed in %ld ms", took);
	/* EBUSY: some task did not freeze in 20 s, the kernel log names it */
	EXPECT_EQ(0, werr) TH_LOG("freeze (pm_test freezer) after %ld ms: %s",
				  took, strerror(-werr));
	EXPECT_EQ(1, write(go, "g", 1));
	close(go);
	reap_within(_metadata, child, CHILD_MS);
	unlink(fifo);
}

#define KMEMLEAK	"/sys/kernel/debug/kmemleak"
#define LEAK_HANDOFFS	40

/*
 * All of @path into @buf (NUL terminated, cut at @size - 1): a seq_file
 * read returns a page at a time. Its length, or -1.
 */
static ssize_t read_all(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n = 0;

	if (fd < 0)
		return -1;
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	return n < 0 ? -1 : (ssize_t)len;
}

/* The kmemleak reports naming io_uring, io-wq or the handoff in @buf */
static int io_leaks(const char *buf)
{
	const char *p = buf, *next;
	int n = 0;

	/* each report starts with "unreferenced object" */
	while ((p = strstr(p, "unreferenced object"))) {
		next = strstr(p + 1, "unreferenced object");
		if (!next)
			next = p + strlen(p);
		if ((memmem(p, next - p, "io_uring", 8) ||
		     memmem(p, next - p, "io_wq", 5) ||
		     memmem(p, next - p, "thread_handoff", 14)))
			n++;
		p = next;
	}
	return n;
}

/*
 * Item 9: a thread with io_uring task restrictions (which its io-wq workers
 * inherit, each a copy of its own) hands off LEAK_HANDOFFS times, then closes
 * its ring and exits with its workers. kmemleak must find nothing that
 * io_uring, io-wq or the handoff allocated. Before the fix every handoff
 * overwrote the worker's copy: one object per handoff. Needs kmemleak
 * (KCONFIG=debug); skipped without it.
 */
TEST_F_TIMEOUT(identity, task_restrictions_not_leaked, 600)
{
	static char buf[1 << 20];
	int fd, i, leaks;
	pid_t child;

	fd = open(KMEMLEAK, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		SKIP(return, "no " KMEMLEAK " (CONFIG_DEBUG_KMEMLEAK, debugfs)");
	close(fd);
	/*
	 * What leaked before is not this case's: an object is reported on the
	 * second scan that finds it unreferenced, once it is 5 s old.
	 */
	i = write_str(KMEMLEAK, "scan");
	if (i == -EPERM)
		SKIP(return, "kmemleak is off");
	ASSERT_EQ(0, i) TH_LOG("kmemleak scan: %s", strerror(-i));
	sleep(6);
	ASSERT_EQ(0, write_str(KMEMLEAK, "scan"));
	ASSERT_EQ(0, write_str(KMEMLEAK, "clear"));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct {
			struct io_uring_task_restriction t;
			struct io_uring_restriction r[IORING_OP_LAST + 1];
		} tr = { 0 };
		struct ring_file rf;

		/* every op and flag allowed: a restriction that costs nothing */
		for (i = 0; i < IORING_OP_LAST; i++) {
			tr.r[i].opcode = IORING_RESTRICTION_SQE_OP;
			tr.r[i].sqe_op = i;
		}
		tr.r[i].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
		tr.r[i].sqe_flags = 0xff;
		tr.t.nr_res = IORING_OP_LAST + 1;
		ASSERT_EQ(0, syscall(__NR_io_uring_register, -1,
				     IORING_REGISTER_RESTRICTIONS, &tr, 1))
			TH_LOG("task restrictions: %s", strerror(errno));
		rf_open(_metadata, &self->files, &rf);
		for (i = 0; i < (variant->sysctl ? LEAK_HANDOFFS : 1); i++)
			force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES,
				      0);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap_within(_metadata, child, CHILD_MS);
	/* the workers exit after the ring; an object must be 5 s old */
	sleep(6);
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, write_str(KMEMLEAK, "scan"));
	ASSERT_LE(0, read_all(KMEMLEAK, buf, sizeof(buf)));
	leaks = io_leaks(buf);
	if (leaks)
		TH_LOG("%.2000s", buf);
	EXPECT_EQ(0, leaks) TH_LOG("%d io_uring objects leaked", leaks);
}

#define AA_EXEC	"/proc/thread-self/attr/apparmor/exec"

/* Whether a new thread can set an AppArmor onexec transition (a child tries) */
static bool aa_onexec_settable(void)
{
	int status;
	pid_t pid = fork();

	if (!pid)
		_exit(write_str(AA_EXEC, "exec unconfined") ? 1 : 0);
	return pid > 0 && waitpid(pid, &status, 0) == pid &&
	       WIFEXITED(status) && !WEXITSTATUS(status);
}

/*
 * Item 10, AppArmor: the onexec transition a thread sets (change_profile on
 * exec) is kept in the task security blob, which does not move. A thread
 * that set one after its workers were created must not hand off
 * (security_thread_handoff() refuses before the issue: "task"), and must
 * still have it: /proc/thread-self/attr/apparmor/exec names the profile.
 * Before the fix the thread handed off and lost it (the read fails with
 * EINVAL). Needs AppArmor (CONFIG_SECURITY_APPARMOR, in the LSM list); no
 * policy needed.
 */
TEST_F_TIMEOUT(identity, apparmor_onexec_stays, 120)
{
	pid_t child;

	if (access(AA_EXEC, F_OK))
		SKIP(return, "no " AA_EXEC " (AppArmor not built in)");
	if (!aa_onexec_settable())
		SKIP(return, "cannot set an onexec transition in " AA_EXEC
		     " (AppArmor not enabled?)");
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct hstat a, b;
		struct ring_file rf;
		char label[256];
		int ret;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		ret = write_str(AA_EXEC, "exec unconfined");
		ASSERT_EQ(0, ret) TH_LOG(AA_EXEC ": %s", strerror(-ret));
		ASSERT_EQ(0, read_hstat(rf.r.fd, &a));
		handoff_or_refusal(_metadata, variant->sysctl, &rf,
				   "AppArmor onexec");
		ASSERT_EQ(0, read_hstat(rf.r.fd, &b));
		EXPECT_EQ(0UL, b.handoffs - a.handoffs)
			TH_LOG("the thread handed off with an onexec transition set");
		ret = read_small(AA_EXEC, label, sizeof(label));
		ASSERT_LT(0, ret) TH_LOG("the onexec transition is gone: %s",
					 strerror(errno));
		EXPECT_NE(NULL, strstr(label, "unconfined")) TH_LOG("onexec: %s",
								   label);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap_within(_metadata, child, CHILD_MS);
}

#if defined(__aarch64__)
#include <setjmp.h>

#ifndef PROT_MTE
#define PROT_MTE	0x20
#endif
#ifndef SEGV_MTESERR
#define SEGV_MTESERR	9
#endif

/*
 * The pointer authentication keys are the thread's own: a thread that reset
 * its APIA key after its workers were created must, after a blocking
 * request that handed off, still authenticate what it signed before it
 * (enter_keep_regs() signs right before the syscall and authenticates right
 * after it), and keep every register the syscall ABI preserves.
 */
TEST_F_TIMEOUT(identity, pac_keys_stay, 120)
{
	pid_t child;

	if (!(getauxval(AT_HWCAP) & HWCAP_PACA))
		SKIP(return, "no address authentication (HWCAP_PACA)");
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		/* only this thread's key; the child never returns past here */
		ASSERT_EQ(0, prctl(PR_PAC_RESET_KEYS, PR_PAC_APIAKEY, 0, 0, 0))
			TH_LOG("PR_PAC_RESET_KEYS: %s", strerror(errno));
		vector_handoff(_metadata, variant->sysctl, &rf);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}

static sigjmp_buf mte_jmp;
static int mte_code;	/* si_code of the SIGSEGV, __atomic */

static void mte_segv(int sig, siginfo_t *si, void *uc)
{
	__atomic_store_n(&mte_code, si->si_code, __ATOMIC_RELAXED);
	siglongjmp(mte_jmp, 1);
}

/*
 * The tagged address ABI and the MTE tag check mode are the thread's own
 * (PR_SET_TAGGED_ADDR_CTRL): set after the workers were created, they must
 * hold after a blocking request. A syscall still takes a tagged pointer,
 * and with MTE a store through a pointer whose tag does not match the
 * memory's still faults synchronously (SEGV_MTESERR).
 */
TEST_F_TIMEOUT(identity, tagged_addr_mte_stay, 120)
{
	const bool mte = getauxval(AT_HWCAP2) & HWCAP2_MTE;
	pid_t child;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		unsigned long ctrl = PR_TAGGED_ADDR_ENABLE;
		struct ring_file rf;
		char *tagged;
		int null;

		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		if (mte)
			ctrl |= PR_MTE_TCF_SYNC | (0xfffeUL << PR_MTE_TAG_SHIFT);
		ASSERT_EQ(0, prctl(PR_SET_TAGGED_ADDR_CTRL, ctrl, 0, 0, 0))
			TH_LOG("PR_SET_TAGGED_ADDR_CTRL %#lx: %s", ctrl,
			       strerror(errno));
		/* nothing refuses for these: the moves must be exercised */
		force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);
		EXPECT_EQ((int)ctrl, prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0));
		null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		ASSERT_LE(0, null);
		tagged = (char *)((unsigned long)rf.buf | (0x5UL << 56));
		EXPECT_EQ(16, write(null, tagged, 16))
			TH_LOG("write from a tagged pointer: %s", strerror(errno));
		close(null);
		if (mte) {
			struct sigaction sa = { .sa_flags = SA_SIGINFO };
			char *right, *wrong;
			char *p;
			int code;

			p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_MTE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			ASSERT_NE(MAP_FAILED, p);
			right = (char *)((unsigned long)p | (0x3UL << 56));
			wrong = (char *)((unsigned long)p | (0x5UL << 56));
			{
				/* STG x0, [x0]: the granule gets the tag of x0 */
				register char *x0 __asm__("x0") = right;

				__asm__ volatile(".inst 0xd9200800"
						 : : "r" (x0) : "memory");
			}
			__atomic_store_n(right, 1, __ATOMIC_RELAXED);
			sa.sa_sigaction = mte_segv;
			ASSERT_EQ(0, sigaction(SIGSEGV, &sa, NULL));
			__atomic_store_n(&mte_code, 0, __ATOMIC_RELAXED);
			if (!sigsetjmp(mte_jmp, 1))
				__atomic_store_n(wrong, 2, __ATOMIC_RELAXED);
			code = __atomic_load_n(&mte_code, __ATOMIC_RELAXED);
			signal(SIGSEGV, SIG_DFL);
			EXPECT_EQ(SEGV_MTESERR, code)
				TH_LOG("store with a mismatched tag: si_code %d",
				       code);
			EXPECT_EQ(1, __atomic_load_n(right, __ATOMIC_RELAXED));
			munmap(p, 4096);
		}
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}

/*
 * io_uring_enter(@ringfd, 1, 1, GETEVENTS) with ZA enabled around the svc
 * only: SMSTART ZA, ZA row 0 (w12 = 0) loaded from @in, the svc, row 0
 * stored to @out, SVCR read into *@svcr, SMSTOP; all in one asm block, so
 * no code that is not ZA-aware runs while ZA is on. Encodings as in
 * tools/testing/selftests/arm64/fp/sme-inst.h.
 */
static long enter_with_za(int ringfd, const void *in, void *out,
			  unsigned long *svcr)
{
	register long x0 __asm__("x0") = ringfd;

	__asm__ volatile("msr S0_3_C4_C5_3, xzr\n\t"	/* SMSTART ZA */
			 "mov w12, #0\n\t"
			 "mov x9, %[in]\n\t"
			 ".inst 0xe1000120\n\t"	/* LDR ZA[w12, 0], [x9] */
			 "mov x1, #1\n\t"
			 "mov x2, #1\n\t"
			 "mov x3, %[flags]\n\t"
			 "mov x4, #0\n\t"
			 "mov x5, #0\n\t"
			 "mov x8, %[nr]\n\t"
			 "svc #0\n\t"
			 "mov x9, %[out]\n\t"
			 ".inst 0xe1200120\n\t"	/* STR ZA[w12, 0], [x9] */
			 "mrs x9, S3_3_C4_C2_2\n\t"	/* SVCR */
			 "str x9, [%[svcr]]\n\t"
			 "msr S0_3_C4_C6_3, xzr\n\t"	/* SMSTOP */
			 : "+r" (x0)
			 : [in] "r" (in), [out] "r" (out), [svcr] "r" (svcr),
			   [nr] "i" (__NR_io_uring_enter),
			   [flags] "i" (IORING_ENTER_GETEVENTS)
			 : "x1", "x2", "x3", "x4", "x5", "x8", "x9", "x12",
			   "cc", "memory");
	return x0;
}

/*
 * ZA state is not moved: a thread with ZA enabled (SME) blocks in place
 * ("prepare" refusals, no handoff) and keeps ZA enabled with its contents.
 */
TEST_F_TIMEOUT(identity, sme_za_refused, 120)
{
	pid_t child;

	if (!(getauxval(AT_HWCAP2) & HWCAP2_SME))
		SKIP(return, "no SME (HWCAP2_SME)");
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		const int prep = refused_index("prepare");
		/* one row of ZA is SVL bytes, at most 256 */
		static unsigned char in[256], out[256];
		unsigned long handed = 0, refused = 0, svcr;
		struct hrefused ra, rb;
		struct ring_file rf;
		struct hstat a, b;
		unsigned int j;
		int i;

		ASSERT_LE(0, prep);
		rf_open(_metadata, &self->files, &rf);
		prewarm(_metadata, variant->sysctl, &rf);
		ASSERT_EQ(0, read_hstat(rf.r.fd, &a));
		ASSERT_EQ(0, read_refused(rf.r.fd, &ra));
		for (i = 0; i < (variant->sysctl ? BLOCK_TRIES : OFF_TRIES); i++) {
			__u64 ud = 0xa0000 + i;
			struct io_uring_sqe *sqe;
			struct io_uring_cqe cqe;
			long ret;

			for (j = 0; j < sizeof(in); j++)
				in[j] = (unsigned char)(i * 13 + j * 7 + 3);
			memset(out, 0, sizeof(out));
			fill(rf.buf, BLOCK_LEN, i + 1);
			ASSERT_EQ(0, write_file(rf.fd, rf.buf, BLOCK_LEN));
			sqe = iou_sqe(&rf.r);
			ASSERT_NE(NULL, sqe);
			iou_prep(sqe, IORING_OP_FSYNC, rf.fd, NULL, 0, 0, ud);
			__atomic_store_n(rf.r.sq_tail, rf.r.sqe_tail,
					 __ATOMIC_RELEASE);

			ret = enter_with_za(rf.r.fd, in, out, &svcr);

			ASSERT_EQ(1, ret) TH_LOG("fsync %d: io_uring_enter %ld", i, ret);
			EXPECT_EQ(2UL, svcr & 3) TH_LOG("SVCR %#lx after the call", svcr);
			/* the vector length bounds what one row holds: compare 16 */
			EXPECT_EQ(0, memcmp(in, out, 16)) TH_LOG("fsync %d: ZA row 0 changed", i);
			ASSERT_TRUE(iou_cqe(&rf.r, &cqe)) TH_LOG("fsync %d", i);
			ASSERT_EQ(ud, cqe.user_data);
			ASSERT_EQ(0, cqe.res) TH_LOG("fsync %d: %s", i, strerror(-cqe.res));
			ASSERT_EQ(0, read_hstat(rf.r.fd, &b));
			ASSERT_EQ(0, read_refused(rf.r.fd, &rb));
			handed = b.handoffs - a.handoffs;
			refused = rb.v[prep] - ra.v[prep];
			if (handed || refused >= REFUSE_STOP)
				break;
		}
		EXPECT_EQ(0UL, handed) TH_LOG("handed off with ZA enabled");
		if (variant->sysctl)
			EXPECT_LE(1UL, refused) TH_LOG("no prepare refusal in %d fsyncs", i);
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);
}
#endif /* __aarch64__ */

TEST_HARNESS_MAIN
