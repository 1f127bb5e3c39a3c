// SPDX-License-Identifier: GPL-2.0
/*
 * A randomized, time-bounded stress test of the identity handoff: every
 * io_uring_enter() a submitter makes must come back to the same thread,
 * whatever other threads and processes do to it meanwhile.
 *
 * The conductor (the test's own process) keeps two "families" alive: child
 * processes of 2-4 submitter threads, the leader one of them, each with its
 * own ring or sharing the family's ring. A submitter issues blocking fsyncs
 * of dirty data, statx and openat, checks each result, and after each
 * io_uring_enter() checks its tid and pid, TLS, signal mask, creds, the
 * registers the syscall ABI preserves (xmm8..15, r12..r15, MXCSR, the x87
 * control word and an x87 stack register on x86-64) and that its thread CPU
 * clock did not go back. Around them:
 * - an actor thread per family sends queued RT signals to random
 *   submitters with tgkill() (each must be handled by the thread it was
 *   sent to, once), forks children that exit or exec, and tells
 *   submitters to leave with a request in flight, closing their own ring,
 *   then starts new ones;
 * - submitters change their signal mask and their saved uid (a per-thread
 *   setresuid()) now and then;
 * - a family ends by itself, or by exec() from a random thread while the
 *   others submit, or is SIGKILLed by the conductor;
 * - the conductor seizes random threads of a family with ptrace, interrupts
 *   them, waits for the stop and detaches.
 *
 * STRESS_SECS (default 60) bounds the run and STRESS_SEED (default: from
 * the clock) seeds it; both are printed, and a run is reproduced by its
 * seed as far as the scheduler allows. Violations and hangs fail the test;
 * the counters are printed either way. At sysctl 1 the run must hand off
 * at least once, at 0 never.
 *
 * four_threads_hand_off measures the handoff rate under load instead: see
 * there.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "handoff_lib.h"

#define FAMILIES	2	/* alive at a time */
#define MAX_SUB		8	/* submitter slots per family */
#define FILE_LEN	(64 * 1024)	/* dirty data per fsync */
#define EXEC_OK		42	/* exit status of a family that exec'd */
#define HANG_MS		30000	/* a family or a ptrace stop this late hangs */
#define CLOCK_SLACK_NS	(50 * 1000 * 1000)	/* see identity_test.c */
#define STOP_WAIT_MS	10000	/* the longest a ptrace stop may take */

/* What the families report to the conductor, in a MAP_SHARED page. */
struct stress_counts {
	unsigned long families, enters, ops, handoffs, handoff_rings;
	unsigned long signals_sent, signals_handled, forks, execs;
	unsigned long thread_exits, kills, ptrace_stops, setresuid, cancelled;
	unsigned long violations, hangs;
	char first[512];
	pid_t tids[FAMILIES][MAX_SUB];	/* each family's submitters */
};

static struct stress_counts *sc;

#define COUNT(field, n)	__atomic_fetch_add(&sc->field, (n), __ATOMIC_RELAXED)
#define LOAD(x)		__atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

static void violation(const char *fmt, ...)
{
	char msg[sizeof(sc->first)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (COUNT(violations, 1) == 0)
		memcpy(sc->first, msg, sizeof(msg));
	fprintf(stderr, "# VIOLATION (pid %d tid %d): %s\n", getpid(),
		sys_gettid(), msg);
}

/* xorshift64*: each thread has its own state, seeded from the run's seed. */
static unsigned int rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (unsigned int)((*s * 0x2545f4914f6cdd1dULL) >> 32);
}

/* --- a family ---------------------------------------------------------- */

struct slot {
	pthread_t thread;
	pthread_mutex_t lock;	/* @live and @sent against a tgkill() */
	bool used, live, leave, leader;
	bool done;		/* ended at the family's stop, counts valid */
	pid_t tid;
	unsigned long sent;	/* RT signals sent to @tid */
	unsigned long handled;	/* and handled by it */
	uint64_t seed;
};

static struct family {
	pid_t pid;
	int index;			/* in the conductor's table */
	struct iou shared;
	pthread_mutex_t shared_lock;
	struct slot slot[MAX_SUB];
	pthread_mutex_t slots_lock;	/* @slot[].used */
	bool stop;			/* LOAD() and STORE() */
	int exec_slot;			/* -1: no exec; LOAD() and STORE() */
	long end_ms, exec_ms;		/* when it ends, when it execs */
	char self[PATH_MAX];
} fam;

static __thread struct slot *me;

/* An exec'd family or child only says it got there. */
static void __attribute__((constructor)) exec_target(void)
{
	if (getenv("STRESS_EXEC_OK"))
		_exit(EXEC_OK);
}

static void exec_self(void)
{
	char *const argv[] = { fam.self, NULL };
	char *const envp[] = { (char *)"STRESS_EXEC_OK=1", NULL };
	sigset_t all;

	/* the new image has no handler: keep what is sent meanwhile pending */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	execve(fam.self, argv, envp);
}

static __thread unsigned long tls_word;

static void on_rt(int sig)
{
	if (!me)
		return;
	if (me->tid != sys_gettid())
		violation("signal for tid %d handled by tid %d", me->tid,
			  sys_gettid());
	if (tls_word != ((unsigned long)me->tid ^ 0x715c0de))
		violation("TLS lost in a signal handler");
	__atomic_fetch_add(&me->handled, 1, __ATOMIC_RELAXED);
}

#if defined(__x86_64__)
/*
 * io_uring_enter(fd, 1, 1, GETEVENTS) with a raw syscall and an x87 stack
 * register loaded with @in right before it and stored to @out right after.
 * The precision control must be at extended for the load to be exact (QEMU
 * rounds an x87 load to the precision control, real CPUs don't).
 */
static long enter_x87(int ringfd, const long double *in, long double *out)
{
	register long r10 __asm__("r10") = IORING_ENTER_GETEVENTS;
	register long r8 __asm__("r8") = 0;
	register long r9 __asm__("r9") = 0;
	long rax = __NR_io_uring_enter, rdi = ringfd, rsi = 1, rdx = 1;

	__asm__ volatile("fldt %[in]\n\t"
			 "syscall\n\t"
			 "fstpt %[out]\n\t"
			 : "+a" (rax), "+D" (rdi), "+S" (rsi), "+d" (rdx),
			   "+r" (r10), "+r" (r8), "+r" (r9), [out] "=m" (*out)
			 : [in] "m" (*in)
			 : "rcx", "r11", "cc", "memory");
	return rax;
}
#endif

/*
 * One io_uring_enter(fd, 1, 1, GETEVENTS) of the SQE just queued on @r,
 * with the register checks this architecture has. Returns what the
 * syscall returned.
 */
static long checked_enter(struct iou *r, uint64_t *seed)
{
	long ret;

	__atomic_store_n(r->sq_tail, r->sqe_tail, __ATOMIC_RELEASE);
#if defined(__x86_64__)
	if (rnd(seed) & 1) {
		const bool avx = __builtin_cpu_supports("avx");
		const unsigned int width = avx ? 32 : 16;
		struct vec_io io;
		unsigned long gpr[10], k;

		for (k = 0; k < sizeof(io.in); k++)
			io.in[k / 32][k % 32] = (unsigned char)rnd(seed);
		for (k = 6; k < 10; k++)
			gpr[k] = ((unsigned long)rnd(seed) << 32) | k;
		memcpy(io.out, io.in, sizeof(io.out));
		for (k = 0; k < 8; k++)
			io.out[k][0] ^= 0xff;
		ret = enter_keep_regs(r->fd, &io, avx, gpr);
		for (k = 0; k < 8; k++)
			if (memcmp(io.in[k], io.out[k], width))
				violation("%cmm%lu changed", avx ? 'y' : 'x',
					  k + 8);
		if (gpr[0] != (unsigned long)r->fd || gpr[1] != 1 ||
		    gpr[2] != 1 || gpr[3] != IORING_ENTER_GETEVENTS ||
		    gpr[4] || gpr[5])
			violation("an argument register changed");
		for (k = 6; k < 10; k++)
			if ((gpr[k] & 0xffffffff) != k)
				violation("r%lu changed", k + 6);
	} else {
		long double in = 1.0L / 3 + rnd(seed), out = 0;

		ret = enter_x87(r->fd, &in, &out);
		if (memcmp(&in, &out, 10))
			violation("x87 st(0) changed");
	}
#else
	ret = syscall(__NR_io_uring_enter, r->fd, 1, 1,
		      IORING_ENTER_GETEVENTS, NULL, 0);
	if (ret < 0)
		ret = -errno;
	(void)seed;
#endif
	COUNT(enters, 1);
	return ret;
}

struct expect {
	pid_t pid, tid;
	sigset_t mask;
	uid_t uid[3];
#if defined(__x86_64__)
	unsigned int mxcsr;
	unsigned short fcw;
#endif
	long long cpu_ns;
};

static void check_identity(struct expect *e, const char *what)
{
	uid_t r, eu, s;
	sigset_t cur;
	long long ns;
	int sig;

	if (sys_gettid() != e->tid || getpid() != e->pid)
		violation("%s: came back as %d/%d, was %d/%d", what, getpid(),
			  sys_gettid(), e->pid, e->tid);
	if (tls_word != ((unsigned long)e->tid ^ 0x715c0de))
		violation("%s: TLS word changed", what);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	for (sig = 1; sig < SIGRTMAX; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    sigismember(&cur, sig) != sigismember(&e->mask, sig)) {
			violation("%s: signal %d %sblocked", what, sig,
				  sigismember(&cur, sig) ? "" : "un");
			break;
		}
	if (syscall(SYS_getresuid, &r, &eu, &s) ||
	    r != e->uid[0] || eu != e->uid[1] || s != e->uid[2])
		violation("%s: uids %u/%u/%u, want %u/%u/%u", what, r, eu, s,
			  e->uid[0], e->uid[1], e->uid[2]);
#if defined(__x86_64__)
	if (get_mxcsr() != e->mxcsr || get_fcw() != e->fcw)
		violation("%s: MXCSR %#x FCW %#x, want %#x %#x", what,
			  get_mxcsr(), get_fcw(), e->mxcsr, e->fcw);
#endif
	ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (ns < e->cpu_ns - CLOCK_SLACK_NS)
		violation("%s: thread CPU clock went back %lld ns", what,
			  e->cpu_ns - ns);
	if (ns > e->cpu_ns)
		e->cpu_ns = ns;
}

/* A random mask of SIGUSR2 and SIGRTMIN..+3; SIGRTMIN is the one sent. */
static void new_mask(struct expect *e, uint64_t *seed)
{
	unsigned int bits = rnd(seed), i;

	sigemptyset(&e->mask);
	if (bits & 1)
		sigaddset(&e->mask, SIGUSR2);
	for (i = 0; i < 4; i++)
		if ((bits >> (i + 1)) & (i ? 1 : (bits >> 8) & 1))
			sigaddset(&e->mask, SIGRTMIN + i);
	pthread_sigmask(SIG_SETMASK, &e->mask, NULL);
}

static void new_suid(struct expect *e, uint64_t *seed)
{
	uid_t suid = rnd(seed) & 1 ? 0 : 4000 + rnd(seed) % 1000;

	/* per thread: the raw syscall, not glibc's process-wide wrapper */
	if (syscall(SYS_setresuid, -1, -1, suid) == 0) {
		e->uid[2] = suid;
		COUNT(setresuid, 1);
	}
}

static int ring_handoffs(struct iou *r, unsigned long *n)
{
	struct hstat s;

	if (read_hstat(r->fd, &s))
		return -1;
	*n = s.handoffs;
	return 0;
}

static void count_handoffs(struct iou *r)
{
	unsigned long n;

	if (!ring_handoffs(r, &n)) {
		COUNT(handoffs, n);
		COUNT(handoff_rings, 1);
	}
}

/* One blocking request on @r, its result checked; false to stop. */
static bool one_op(struct iou *r, int fd, const char *path, char *buf,
		   struct expect *e, uint64_t *seed)
{
	struct io_uring_sqe *sqe = iou_sqe(r);
	struct io_uring_cqe cqe;
	unsigned int op = rnd(seed) % 3;
	struct statx stx;
	__u64 ud = ((__u64)e->tid << 32) | rnd(seed);
	long ret;

	if (!sqe) {
		violation("SQ full");
		return false;
	}
	memset(&stx, 0, sizeof(stx));
	if (op == 0) {
		memset(buf, (char)rnd(seed), FILE_LEN);
		if (pwrite(fd, buf, FILE_LEN, 0) != FILE_LEN) {
			violation("pwrite: %s", strerror(errno));
			return false;
		}
		iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, ud);
	} else if (op == 1) {
		iou_prep(sqe, IORING_OP_STATX, AT_FDCWD, path,
			 STATX_BASIC_STATS, (unsigned long)&stx, ud);
	} else {
		iou_prep(sqe, IORING_OP_OPENAT, AT_FDCWD, path, 0, 0, ud);
		sqe->open_flags = O_RDONLY | O_CLOEXEC;
	}
	ret = checked_enter(r, seed);
	check_identity(e, "io_uring_enter");
	if (ret != 1 && ret != -EINTR) {
		violation("io_uring_enter: %ld", ret);
		return false;
	}
	/* a signal may end the wait before the CQE is posted */
	if (iou_wait_cqe(r, &cqe)) {
		violation("waiting for the CQE: %s", strerror(errno));
		return false;
	}
	check_identity(e, "the CQE wait");
	if (cqe.user_data != ud) {
		violation("CQE %llx, want %llx", cqe.user_data, ud);
		return false;
	}
	COUNT(ops, 1);
	/*
	 * A request on io-wq of a process that is being killed (SIGKILL,
	 * another thread's exec) is cancelled, and the thread may still see
	 * the CQE before it dies.
	 */
	if (cqe.res == -ECANCELED) {
		COUNT(cancelled, 1);
		return true;
	}
	if (op == 0 && cqe.res)
		violation("fsync: %s", strerror(-cqe.res));
	if (op == 1 && (cqe.res || stx.stx_size != FILE_LEN))
		violation("statx: %d, size %llu", cqe.res, stx.stx_size);
	if (op == 2) {
		struct stat a, b;

		if (cqe.res < 0) {
			violation("openat: %s", strerror(-cqe.res));
		} else {
			if (fstat(cqe.res, &a) || fstat(fd, &b) ||
			    a.st_ino != b.st_ino)
				violation("openat opened another file");
			close(cqe.res);
		}
	}
	return true;
}

/*
 * Leave with a request in flight: submit an fsync without waiting for it
 * and close the ring (only a ring of our own).
 */
static void leave_in_flight(struct iou *r, int fd, char *buf)
{
	struct io_uring_sqe *sqe = iou_sqe(r);

	memset(buf, 0x5a, FILE_LEN);
	if (sqe && pwrite(fd, buf, FILE_LEN, 0) == FILE_LEN) {
		iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, 0);
		iou_submit(r, 0);
	}
	count_handoffs(r);
	iou_exit(r);
}

static void *submitter(void *arg)
{
	struct slot *s = arg;
	char path[PATH_MAX], *buf;
	struct expect e;
	struct iou own, *r;
	bool shared;
	int fd;

	me = s;
	s->tid = sys_gettid();
	tls_word = (unsigned long)s->tid ^ 0x715c0de;
	memset(&e, 0, sizeof(e));
	e.pid = getpid();
	e.tid = s->tid;
	syscall(SYS_getresuid, &e.uid[0], &e.uid[1], &e.uid[2]);
#if defined(__x86_64__)
	/* round to zero with FZ/DAZ; x87 at extended precision, to zero */
	set_mxcsr(0xffc0);
	set_fcw(0x0f7f);
	e.mxcsr = get_mxcsr();
	e.fcw = get_fcw();
#endif
	new_mask(&e, &s->seed);
	e.cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);

	buf = malloc(FILE_LEN);
	snprintf(path, sizeof(path), "stress.%d.%d", e.pid, e.tid);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!buf || fd < 0 || ftruncate(fd, FILE_LEN)) {
		violation("scratch file %s: %s", path, strerror(errno));
		goto out;
	}
	shared = !s->leader && (rnd(&s->seed) & 1);
	if (!shared && iou_init(&own, 8, 0)) {
		violation("ring: %s", strerror(errno));
		goto out;
	}
	r = shared ? &fam.shared : &own;

	pthread_mutex_lock(&s->lock);
	s->live = true;
	pthread_mutex_unlock(&s->lock);
	__atomic_store_n(&sc->tids[fam.index][s - fam.slot], e.tid,
			 __ATOMIC_RELAXED);
	while (!LOAD(fam.stop)) {
		bool ok;

		if (s->leave) {
			__atomic_store_n(&sc->tids[fam.index][s - fam.slot], 0,
					 __ATOMIC_RELAXED);
			pthread_mutex_lock(&s->lock);
			s->live = false;
			pthread_mutex_unlock(&s->lock);
			if (!shared)
				leave_in_flight(&own, fd, buf);
			COUNT(thread_exits, 1);
			unlink(path);
			close(fd);
			free(buf);
			return NULL;
		}
		if (LOAD(fam.exec_slot) == s - fam.slot) {
			exec_self();
			violation("exec %s: %s", fam.self, strerror(errno));
			STORE(fam.exec_slot, -1);
		}
		if (shared)
			pthread_mutex_lock(&fam.shared_lock);
		ok = one_op(r, fd, path, buf, &e, &s->seed);
		if (shared)
			pthread_mutex_unlock(&fam.shared_lock);
		if (!ok)
			break;
		if (rnd(&s->seed) % 32 == 0)
			new_mask(&e, &s->seed);
		if (rnd(&s->seed) % 64 == 0)
			new_suid(&e, &s->seed);
		check_identity(&e, "a mask or uid change");
	}
	/* take every RT signal still queued for us, then compare counts */
	sigemptyset(&e.mask);
	pthread_sigmask(SIG_SETMASK, &e.mask, NULL);
	pthread_mutex_lock(&s->lock);
	s->live = false;
	pthread_mutex_unlock(&s->lock);
	/* a signal sent before we took the lock is handled on this return */
	syscall(SYS_gettid);
	s->done = true;
	if (!shared) {
		count_handoffs(&own);
		iou_exit(&own);
	}
out:
	if (fd >= 0) {
		unlink(path);
		close(fd);
	}
	free(buf);
	return NULL;
}

static int start_submitter(uint64_t *seed, bool leader)
{
	int i;

	pthread_mutex_lock(&fam.slots_lock);
	for (i = 0; i < MAX_SUB; i++)
		if (!fam.slot[i].used)
			break;
	if (i == MAX_SUB) {
		pthread_mutex_unlock(&fam.slots_lock);
		return -1;
	}
	fam.slot[i].used = true;
	pthread_mutex_unlock(&fam.slots_lock);
	fam.slot[i].seed = ((uint64_t)rnd(seed) << 32) | rnd(seed) | 1;
	fam.slot[i].leader = leader;
	fam.slot[i].leave = false;
	fam.slot[i].done = false;
	fam.slot[i].tid = 0;
	fam.slot[i].sent = 0;
	fam.slot[i].handled = 0;
	if (!leader && pthread_create(&fam.slot[i].thread, NULL, submitter,
				      &fam.slot[i])) {
		fam.slot[i].used = false;
		return -1;
	}
	return i;
}

static void reap_slot(struct slot *s)
{
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&fam.slots_lock);
	s->used = false;
	pthread_mutex_unlock(&fam.slots_lock);
}

static void send_rt(struct slot *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->live && !syscall(SYS_tgkill, fam.pid, s->tid, SIGRTMIN)) {
		s->sent++;
		COUNT(signals_sent, 1);
	}
	pthread_mutex_unlock(&s->lock);
}

static void fork_child(uint64_t *seed)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (rnd(seed) & 1)
			exec_self();
		_exit(EXEC_OK);
	}
	if (pid < 0)
		return;
	COUNT(forks, 1);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != EXEC_OK)
		violation("forked child: status %#x", st);
}

static void *actor(void *arg)
{
	uint64_t *seed = arg;

	while (!LOAD(fam.stop)) {
		unsigned int what = rnd(seed) % 64, i = rnd(seed) % MAX_SUB;
		struct slot *s = &fam.slot[i];
		long now = now_ms();

		if (now >= fam.end_ms) {
			STORE(fam.stop, true);
			break;
		}
		if (fam.exec_ms && now >= fam.exec_ms &&
		    LOAD(fam.exec_slot) < 0 && s->used && s->tid) {
			STORE(fam.exec_slot, (int)i);
			COUNT(execs, 1);
		} else if (what < 40) {
			if (s->used)
				send_rt(s);
		} else if (what < 43) {
			fork_child(seed);
		} else if (what < 45) {
			if (s->used && !s->leader)
				s->leave = true;
		} else if (what < 50) {
			/* reap the ones that left and start new ones */
			for (i = 0; i < MAX_SUB; i++) {
				s = &fam.slot[i];
				if (s->used && s->leave && s->tid &&
				    !__atomic_load_n(&s->live, __ATOMIC_ACQUIRE)) {
					reap_slot(s);
					start_submitter(seed, false);
				}
			}
		}
		usleep(500 + rnd(seed) % 3000);
	}
	return NULL;
}

/* A family's life: returns its exit status. */
static int family_main(int index, uint64_t seed, long life_ms)
{
	struct sigaction sa = { .sa_handler = on_rt };
	int i, n = 1 + rnd(&seed) % 3, leader, bad = 0;
	pthread_t act;

	fam.pid = getpid();
	fam.index = index;
	fam.exec_slot = -1;
	fam.end_ms = now_ms() + life_ms;
	fam.exec_ms = rnd(&seed) % 4 ? 0 : now_ms() + life_ms / 2;
	if (readlink("/proc/self/exe", fam.self, sizeof(fam.self) - 1) < 0)
		fam.exec_ms = 0;
	sigaction(SIGRTMIN, &sa, NULL);
	pthread_mutex_init(&fam.shared_lock, NULL);
	pthread_mutex_init(&fam.slots_lock, NULL);
	for (i = 0; i < MAX_SUB; i++)
		pthread_mutex_init(&fam.slot[i].lock, NULL);
	if (iou_init(&fam.shared, 8, 0)) {
		violation("shared ring: %s", strerror(errno));
		return 1;
	}
	leader = start_submitter(&seed, true);
	for (i = 0; i < n; i++)
		start_submitter(&seed, false);
	if (pthread_create(&act, NULL, actor, &seed)) {
		violation("actor thread: %s", strerror(errno));
		return 1;
	}
	/* the leader submits too, on the main thread */
	submitter(&fam.slot[leader]);
	pthread_join(act, NULL);
	for (i = 0; i < MAX_SUB; i++) {
		struct slot *s = &fam.slot[i];

		if (!s->used)
			continue;
		if (i != leader)
			pthread_join(s->thread, NULL);
		if (s->done && s->handled != s->sent && !bad++)
			violation("tid %d: %lu RT signals sent, %lu handled",
				  s->tid, s->sent, s->handled);
	}
	count_handoffs(&fam.shared);
	iou_exit(&fam.shared);
	return 0;
}

/* --- the conductor --------------------------------------------------------- */

struct member {
	pid_t pid;
	long start, life, kill_at;
	bool killed;
};

static struct member members[FAMILIES];

static void dump_stacks(pid_t pid)
{
	char path[64], buf[2048];

	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	if (read_small(path, buf, sizeof(buf)) > 0)
		fprintf(stderr, "# stack of %d:\n%s", pid, buf);
}

static void report_hang(pid_t pid, const char *what)
{
	COUNT(hangs, 1);
	if (!sc->first[0])
		snprintf(sc->first, sizeof(sc->first), "hang: %s", what);
	fprintf(stderr, "# HANG (%d): %s\n", pid, what);
	dump_stacks(pid);
}

static bool family_status_ok(struct member *m, int st)
{
	if (WIFEXITED(st) && (WEXITSTATUS(st) == 0 ||
			      WEXITSTATUS(st) == EXEC_OK))
		return true;
	return m->killed && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static void family_ended(struct member *m, int st)
{
	if (!family_status_ok(m, st))
		violation("family %d ended with status %#x", m->pid, st);
	COUNT(families, 1);
	memset(sc->tids[m - members], 0, sizeof(sc->tids[0]));
	m->pid = 0;
}

/* A thread's name, or "" when it is gone */
static void task_comm(pid_t pid, pid_t tid, char *buf, size_t size)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	if (read_small(path, buf, size) < 0)
		buf[0] = 0;
}

/* The tid of a random submitter of family @i, or 0 */
static pid_t random_tid(int i, uint64_t *seed)
{
	pid_t tid = 0;
	int j, n = 0;

	for (j = 0; j < MAX_SUB; j++) {
		pid_t t = __atomic_load_n(&sc->tids[i][j], __ATOMIC_RELAXED);

		/* reservoir sampling of the non-zero entries */
		if (t && rnd(seed) % ++n == 0)
			tid = t;
	}
	return tid;
}

/*
 * Seize a random submitter of @m by its tid, interrupt it, wait for it to
 * stop and let it go. The stop must come within STOP_WAIT_MS, and the task
 * that stops must still be the thread, not an io_uring worker. A
 * signal-delivery stop is detached with its signal, so that the family's
 * signal counts still hold.
 */
static void ptrace_one(struct member *m, int i, uint64_t *seed)
{
	pid_t tid = random_tid(i, seed), w;
	long until = now_ms() + STOP_WAIT_MS;
	char comm[32];
	int st;

	if (!tid || ptrace(PTRACE_SEIZE, tid, 0, 0))
		return;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return;
	}
	while ((w = waitpid(tid, &st, __WALL | WNOHANG)) == 0) {
		if (now_ms() > until) {
			report_hang(tid, "a ptrace stop was not reported");
			kill(m->pid, SIGKILL);
			m->killed = true;
			return;
		}
		usleep(1000);
	}
	if (w != tid)
		return;
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		if (tid == m->pid)
			family_ended(m, st);
		return;
	}
	/* the tid names a thread of @m, never one of its workers */
	task_comm(m->pid, tid, comm, sizeof(comm));
	if (!strncmp(comm, "iou-", 4))
		violation("ptrace stopped %d of %d, now named %s", tid,
			  m->pid, comm);
	COUNT(ptrace_stops, 1);
	ptrace(PTRACE_DETACH, tid, 0,
	       st >> 16 == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(st));
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : def;
}

FIXTURE(stress) {
	int sysctl;
};

FIXTURE_SETUP(stress)
{
	struct statfs sfs;

	self->sysctl = sysctl_get();
	if (self->sysctl < 0)
		SKIP(return, "no %s", SYSCTL_PATH);
	ASSERT_EQ(0, statfs(".", &sfs));
	if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)
		SKIP(return, "fsync never blocks here: run on a disk filesystem");
}

FIXTURE_TEARDOWN(stress)
{
}

/* up to two hours: STRESS_SECS bounds the run itself */
TEST_F_TIMEOUT(stress, random_actors, 7300)
{
	long secs = env_long("STRESS_SECS", 60);
	uint64_t seed = env_long("STRESS_SEED", 0);
	struct member *m = members;
	long end, now;
	int i, alive;

	if (!seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	ASSERT_LT(0, secs);
	ASSERT_GE(7200, secs);
	TH_LOG("seed %llu (STRESS_SEED), %ld s (STRESS_SECS), sysctl %d",
	       (unsigned long long)seed, secs, self->sysctl);
	sc = mmap(NULL, sizeof(*sc), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sc);
	end = now_ms() + secs * 1000;
	do {
		now = now_ms();
		alive = 0;
		for (i = 0; i < FAMILIES; i++) {
			struct member *f = &m[i];
			int st;

			if (!f->pid && now < end) {
				uint64_t fseed = ((uint64_t)rnd(&seed) << 32) |
						 rnd(&seed) | 1;

				f->start = now;
				f->life = 500 + rnd(&seed) % 3000;
				f->kill_at = rnd(&seed) % 3 ? 0 :
					     now + rnd(&seed) % f->life;
				f->killed = false;
				f->pid = fork();
				ASSERT_LE(0, f->pid);
				if (!f->pid)
					_exit(family_main(i, fseed, f->life));
			}
			if (!f->pid)
				continue;
			if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
				family_ended(f, st);
				continue;
			}
			alive++;
			if (f->kill_at && now >= f->kill_at && !f->killed) {
				kill(f->pid, SIGKILL);
				f->killed = true;
				COUNT(kills, 1);
			}
			if (now > f->start + f->life + HANG_MS) {
				if (f->killed) {
					report_hang(f->pid, "a SIGKILLed family did not exit");
					goto out;
				}
				report_hang(f->pid, "a family did not end at its time");
				kill(f->pid, SIGKILL);
				f->killed = true;
				f->start = now - f->life;
			}
			if (!f->killed && rnd(&seed) % 8 == 0)
				ptrace_one(f, i, &seed);
		}
		usleep(20 * 1000);
	} while (now < end || alive);
out:
	TH_LOG("families %lu (killed %lu, exec'd %lu), enters %lu, requests %lu (%lu cancelled)",
	       sc->families, sc->kills, sc->execs, sc->enters, sc->ops,
	       sc->cancelled);
	TH_LOG("handoffs %lu (counted on %lu rings), RT signals %lu sent, thread exits %lu, forks %lu, ptrace stops %lu, setresuid %lu",
	       sc->handoffs, sc->handoff_rings, sc->signals_sent,
	       sc->thread_exits, sc->forks, sc->ptrace_stops, sc->setresuid);
	TH_LOG("violations %lu, hangs %lu%s%s", sc->violations, sc->hangs,
	       sc->first[0] ? ": first: " : "", sc->first);
	EXPECT_EQ(0UL, sc->violations);
	EXPECT_EQ(0UL, sc->hangs);
	EXPECT_LT(0UL, sc->ops);
	/* at sysctl 1 some handed off, at 0 none */
	EXPECT_EQ(self->sysctl, sc->handoffs > 0)
		TH_LOG("%lu handoffs at sysctl %d", sc->handoffs, self->sysctl);
}

/*
 * The handoff rate under load: four threads of one process, each on its own
 * ring, fsync fresh dirty data on the disk back to back while an interval
 * timer signals the process. Of the requests that blocked inline, at least
 * RATE_MIN_PCT percent must hand off (not sleep in place), whatever signals
 * and the other threads do.
 */
#define RATE_THREADS	4
#define RATE_FSYNCS	40
#define RATE_MIN_PCT	90

struct rate_arg {
	struct hstat h;
	struct hrefused rf;
	int err;
	char name[32];
};

static int rate_alarms;

static void rate_alarm(int sig)
{
	__atomic_fetch_add(&rate_alarms, 1, __ATOMIC_RELAXED);
}

static void *rate_thread(void *p)
{
	struct rate_arg *a = p;
	struct io_uring_cqe cqe;
	struct iou r;
	char *buf = malloc(BLOCK_LEN);
	int fd, i;

	a->err = -ENOMEM;
	if (!buf)
		return NULL;
	fd = open(a->name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	a->err = fd < 0 ? -errno : iou_init(&r, 8, 0);
	if (a->err)
		goto out;
	for (i = 0; i < RATE_FSYNCS && !a->err; i++) {
		struct io_uring_sqe *sqe = iou_sqe(&r);

		fill(buf, BLOCK_LEN, i + 1);
		if (!sqe || write_file(fd, buf, BLOCK_LEN)) {
			a->err = -EIO;
			break;
		}
		iou_prep(sqe, IORING_OP_FSYNC, fd, NULL, 0, 0, i);
		a->err = qd1_enter(&r, &cqe);
		/* the timer's signal may end the wait before the CQE */
		if (a->err == -ENODATA || a->err == -EINTR)
			a->err = iou_wait_cqe(&r, &cqe);
		if (!a->err && (cqe.user_data != (__u64)i || cqe.res))
			a->err = cqe.res ? cqe.res : -EPROTO;
	}
	if (read_hstat(r.fd, &a->h) || read_refused(r.fd, &a->rf))
		a->err = a->err ?: -ENODATA;
	iou_exit(&r);
out:
	if (fd >= 0) {
		close(fd);
		unlink(a->name);
	}
	free(buf);
	return NULL;
}

TEST_F_TIMEOUT(stress, four_threads_hand_off, 600)
{
	struct itimerval it = { .it_interval.tv_usec = 10000,
				.it_value.tv_usec = 10000 };
	struct sigaction sa = { .sa_handler = rate_alarm };
	struct rate_arg a[RATE_THREADS] = {};
	pthread_t t[RATE_THREADS];
	unsigned long handoffs = 0, slept = 0, spare = 0, iowq = 0;
	const int no_spare = refused_index("spare");
	const int lock = refused_index("lock");
	const int prepare = refused_index("prepare");
	const int worker = refused_index("worker");
	int i;

	ASSERT_LE(0, no_spare);
	ASSERT_LE(0, lock);
	ASSERT_LE(0, prepare);
	ASSERT_LE(0, worker);
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &it, NULL));
	for (i = 0; i < RATE_THREADS; i++) {
		snprintf(a[i].name, sizeof(a[i].name), "rate.%d.%d", getpid(), i);
		ASSERT_EQ(0, pthread_create(&t[i], NULL, rate_thread, &a[i]));
	}
	for (i = 0; i < RATE_THREADS; i++)
		pthread_join(t[i], NULL);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	for (i = 0; i < RATE_THREADS; i++) {
		EXPECT_EQ(0, a[i].err) TH_LOG("thread %d: %s", i,
					      strerror(-a[i].err));
		handoffs += a[i].h.handoffs;
		iowq += a[i].h.iowq;
		spare += a[i].rf.v[no_spare];
		slept += a[i].h.handoffs + a[i].rf.v[lock] +
			 a[i].rf.v[prepare] + a[i].rf.v[worker];
	}
	TH_LOG("sysctl %d: %d fsyncs, %lu blocked inline, %lu handed off (%lu%%), %lu refused for no spare worker, %lu to io-wq, %d timer signals",
	       self->sysctl, RATE_THREADS * RATE_FSYNCS, slept, handoffs,
	       slept ? handoffs * 100 / slept : 0, spare, iowq,
	       __atomic_load_n(&rate_alarms, __ATOMIC_RELAXED));
	if (!self->sysctl) {
		EXPECT_EQ(0UL, handoffs);
		return;
	}
	ASSERT_LT(0UL, slept) TH_LOG("no fsync blocked inline");
	EXPECT_LE(RATE_MIN_PCT * slept, handoffs * 100)
		TH_LOG("%lu of %lu blocked requests handed off", handoffs,
		       slept);
}

TEST_HARNESS_MAIN
