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
 * - tls_fpu: the TLS block and thread pointer, the rseq registration and,
 *   on x86-64, the GS base, the vector registers, MXCSR and the x87
 *   control word across the io_uring_enter() syscall itself.
 * - sched_affinity_comm: policy, nice, affinity, name, timer slack, I/O
 *   priority, cgroup, and per-thread accounting that never goes back.
 * - creds_seccomp_nnp: per-thread credentials, no_new_privs, seccomp
 *   filters.
 * - join_robust: clear_child_tid and the robust futex list, used when the
 *   thread exits.
 * - fork_exec_after: children forked before and after the handoff, exec.
 * - ptraced_never_hands_off: a traced task never hands off.
 *
 * Each test forces a real handoff with blocking fsyncs of a file in the
 * current directory, and fails if none happened; the "off" variants run
 * the same with the sysctl at 0, where no handoff may happen and the same
 * must hold. vfork parents are not tested: the kernel refuses to hand off
 * a task with vfork_done set, and a vfork parent is suspended until its
 * child execs or exits, so it cannot submit anything meanwhile.
 *
 * Needs root and /proc/sys/kernel/io_uring_handoff, and a current
 * directory on a disk filesystem (ext4 in 'make test'); skipped otherwise.
 * The sysctl is restored and the scratch files removed afterwards.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif
#if __has_include("sys/rseq.h")
#include <sys/rseq.h>
#endif

#include "../kselftest_harness.h"
#include "handoff_lib.h"

#define OFF_TRIES	4	/* blocking fsyncs with the sysctl at 0 */
#define SIG_TRIES	200	/* blocking fsyncs to hand off under signals */
#define PTRACE_TRIES	20	/* blocking fsyncs of the traced child */
#define MAX_FILES	4	/* scratch files per test */
#define CHILD_OK	42	/* exit status of a child whose checks passed */
#define NOBODY		((uid_t)65534)

#ifndef PF_IO_WORKER
#define PF_IO_WORKER	0x00000010
#endif

#define T_IOPRIO_WHO_PROCESS	1
#define T_IOPRIO_CLASS_BE	2
#define T_IOPRIO_VALUE(class, data)	(((class) << 13) | (data))

/* Scratch files for the teardown to remove */
struct scratch_files {
	int nr;
	char path[MAX_FILES][PATH_MAX];
};

FIXTURE(identity) {
	int saved;		/* sysctl value to restore */
	bool restore;
	struct scratch_files files;
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

/* In the parent, so that it runs even when the test process dies. */
FIXTURE_TEARDOWN_PARENT(identity)
{
	int i;

	if (self->restore)
		EXPECT_EQ(0, sysctl_write(self->saved ? "1" : "0"));
	for (i = 0; i < self->files.nr && i < MAX_FILES; i++)
		if (self->files.path[i][0])
			unlink(self->files.path[i]);
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

/* Read a small proc file into @buf; returns its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
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

/*
 * What rseq() answers to registering glibc's rseq area once more: -EBUSY
 * while this thread has it registered. 1 when glibc registers none.
 * glibc registers at least the original 32 bytes, __rseq_size may only
 * give the size of the features in use.
 */
static int rseq_probe(void)
{
#if defined(RSEQ_SIG)
	unsigned int len = __rseq_size < 32 ? 32 : __rseq_size;

	if (!__rseq_size)
		return 1;
	if (syscall(__NR_rseq, (char *)__builtin_thread_pointer() +
		    __rseq_offset, len, 0, RSEQ_SIG))
		return -errno;
	return 0;
#else
	return 1;
#endif
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
static long enter_keep_regs(int ringfd, struct vec_io *io, char avx,
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

static unsigned int get_mxcsr(void)
{
	unsigned int v;

	__asm__ volatile("stmxcsr %0" : "=m" (v));
	return v;
}

static void set_mxcsr(unsigned int v)
{
	__asm__ volatile("ldmxcsr %0" : : "m" (v));
}

static unsigned short get_fcw(void)
{
	unsigned short v;

	__asm__ volatile("fnstcw %0" : "=m" (v));
	return v;
}

static void set_fcw(unsigned short v)
{
	__asm__ volatile("fldcw %0" : : "m" (v));
}

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
#endif /* __x86_64__ */

TEST_F_TIMEOUT(identity, tls_fpu, 120)
{
	unsigned long tp, *word = &tls_word;
	struct ring_file rf;
	int rseq0;
#if defined(__x86_64__)
	static unsigned long gs_marker;
	unsigned long gs0 = 0, gs = 0, fs_self;
#endif

	rf_open(_metadata, &self->files, &rf);
	tls_word = 0x715c0deUL ^ (unsigned long)getpid();
	tp = thread_pointer();
	ASSERT_NE(0UL, tp);
	rseq0 = rseq_probe();
	EXPECT_TRUE(rseq0 == 1 || rseq0 == -EBUSY)
		TH_LOG("glibc's rseq area: %d", rseq0);

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
#else
	force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);
#endif

	EXPECT_EQ(tp, thread_pointer());
	EXPECT_EQ(word, &tls_word);
	EXPECT_EQ(0x715c0deUL ^ (unsigned long)getpid(), tls_word);
	EXPECT_EQ(rseq0, rseq_probe()) TH_LOG("rseq registration");
	rf_close(&rf);
}

static long tv_us(const struct timeval *tv)
{
	return tv->tv_sec * 1000000L + tv->tv_usec;
}

TEST_F_TIMEOUT(identity, sched_affinity_comm, 120)
{
	const int prio = T_IOPRIO_VALUE(T_IOPRIO_CLASS_BE, 6);
	char name[17] = "", path[64], comm[32], cg0[4096], cg1[4096];
	struct sched_param sp = { .sched_priority = 0 };
	cpu_set_t allowed, one, now;
	pid_t tid = sys_gettid();
	struct rusage ru0, ru1;
	struct ring_file rf;
	int cpu;

	/* the spare workers start before the attributes change */
	rf_open(_metadata, &self->files, &rf);

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

struct cred_arg {
	struct __test_metadata *md;
	struct scratch_files *files;
	bool on;
	uid_t ruid, euid, suid;
};

/* Hands off with euid NOBODY, set for this thread only. */
static void *cred_thread(void *p)
{
	struct cred_arg *a = p;
	struct __test_metadata *_metadata = a->md;
	struct ring_file rf;

	/* the file is opened and the spare workers start as root */
	rf_open(_metadata, a->files, &rf);
	ASSERT_EQ(0, syscall(SYS_setresuid, -1, NOBODY, -1));
	force_handoff(_metadata, a->on, &rf, BLOCK_TRIES, 0);
	ASSERT_EQ(0, getresuid(&a->ruid, &a->euid, &a->suid));
	ASSERT_EQ(0, syscall(SYS_setresuid, -1, 0, -1));
	rf_close(&rf);
	return NULL;
}

TEST_F_TIMEOUT(identity, creds_seccomp_nnp, 120)
{
	struct cred_arg a = {
		.md = _metadata, .files = &self->files, .on = variant->sysctl,
	};
	uid_t ruid, euid, suid;
	struct ring_file rf;
	pthread_t th;
	pid_t child;

	/*
	 * A seccomp filter stays in force; in a child, to keep this process
	 * clean. First, so that the child starts with no failure recorded.
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

		ASSERT_EQ(0, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
		ASSERT_EQ(0, prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog));
		errno = 0;
		ASSERT_EQ(-1, syscall(SYS_getppid));
		ASSERT_EQ(EPERM, errno);
		/*
		 * The ring and its workers only now: a worker takes over an
		 * identity only under the same filters.
		 */
		rf_open(_metadata, &self->files, &rf);
		force_handoff(_metadata, variant->sysctl, &rf, BLOCK_TRIES, 0);
		errno = 0;
		EXPECT_EQ(-1, syscall(SYS_getppid));
		EXPECT_EQ(EPERM, errno);
		EXPECT_EQ(1, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
		EXPECT_EQ(SECCOMP_MODE_FILTER, prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
		rf_close(&rf);
		_exit(child_status(_metadata));
	}
	reap(_metadata, child, CHILD_OK);

	/* credentials of one thread */
	ASSERT_EQ(0, pthread_create(&th, NULL, cred_thread, &a));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(0U, a.ruid);
	EXPECT_EQ(NOBODY, a.euid);
	EXPECT_EQ(0U, a.suid);
	ASSERT_EQ(0, getresuid(&ruid, &euid, &suid));
	EXPECT_EQ(0U, ruid);
	EXPECT_EQ(0U, euid);
	EXPECT_EQ(0U, suid);

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
	int has_tidp;

	rf_open(_metadata, a->files, &rf);
	ASSERT_EQ(0, pthread_mutex_lock(a->mutex));
	ASSERT_EQ(0, syscall(SYS_get_robust_list, 0, &head0, &len0));
	ASSERT_NE(NULL, head0);
	/* needs CONFIG_CHECKPOINT_RESTORE */
	has_tidp = !prctl(PR_GET_TID_ADDRESS, &tidp0, 0, 0, 0);

	force_handoff(_metadata, a->on, &rf, BLOCK_TRIES, 0);

	ASSERT_EQ(tid, sys_gettid());
	ASSERT_EQ(0, syscall(SYS_get_robust_list, 0, &head1, &len1));
	EXPECT_EQ(head0, head1);
	EXPECT_EQ(len0, len1);
	if (has_tidp) {
		EXPECT_EQ(0, prctl(PR_GET_TID_ADDRESS, &tidp1, 0, 0, 0));
		EXPECT_EQ(tidp0, tidp1);
	}
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

TEST_F_TIMEOUT(identity, ptraced_never_hands_off, 120)
{
	int status;
	pid_t child;

	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct ring_file rf;
		struct hstat a, b;

		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(2);
		raise(SIGSTOP);
		rf_open(_metadata, &self->files, &rf);
		ASSERT_EQ(0, read_hstat(rf.r.fd, &a));
		blocking_fsyncs(_metadata, &rf.r, rf.fd, rf.buf, PTRACE_TRIES,
				false);
		ASSERT_EQ(0, read_hstat(rf.r.fd, &b));
		if (b.handoffs != a.handoffs)
			log_counters(_metadata, rf.r.fd);
		rf_close(&rf);
		_exit(b.handoffs == a.handoffs ? CHILD_OK : 3);
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
		TH_LOG("a traced child handed off");
}

TEST_HARNESS_MAIN
