// SPDX-License-Identifier: GPL-2.0
/*
 * io_uring NAPI busy poll with one statically registered NAPI: a blocking
 * wait busy polls that NAPI until the end of its busy poll period, also
 * when a task on the same CPU wakes up every millisecond. Before
 * "io_uring/napi: keep busy polling a single NAPI until the deadline" the
 * busy poll ended on the first need_resched() and the wait slept for the
 * rest of its timeout.
 *
 * The NAPI is the rx NAPI of a veth with GRO on. The veth and its peer live
 * in two network namespaces that only this test's process holds, so the
 * kernel removes both, and the veth pair, when the process exits, however
 * it exits: nothing is left in the caller's namespace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/ethtool.h>
#include <linux/perf_event.h>
#include <linux/sockios.h>

#include "../kselftest_harness.h"
#include "../io_uring_handoff/iou.h"

#ifndef SO_INCOMING_NAPI_ID
#define SO_INCOMING_NAPI_ID	56
#endif

#define VETH_RX		"iounapi0"	/* has the NAPI, in our netns */
#define VETH_TX		"iounapi1"	/* the sender's end, in the peer netns */
#define ADDR_RX		"10.231.0.1"
#define ADDR_TX		"10.231.0.2"

#define WAIT_US		10000		/* wait timeout and busy poll budget */
#define NR_WAITS	20
#define WAKER_NS	1000000		/* the waker's period */
#define WAKER_PRIO	50
#define WAKER_STAMPS	4096		/* wakeups whose time is kept */
#define MIN_BUSY_PCT	60
#define MIN_WAKE_PCT	30		/* of one waker wakeup per ms of waits */

#define NSEC_PER_MSEC	1000000.0

struct waker {
	pthread_t thread;
	bool started;
	int stop;
	unsigned long wakeups;
	/* what the waker thread found itself to be */
	int policy;
	int cpu;
	/* CLOCK_MONOTONIC of its first WAKER_STAMPS wakeups */
	uint64_t stamp[WAKER_STAMPS];
};

FIXTURE(napi) {
	struct iou r;
	bool have_ring;
	int own_ns;		/* the test's netns, holding VETH_RX */
	int peer_ns;		/* the peer netns, holding VETH_TX */
	int rx_fd;		/* UDP socket on ADDR_RX */
	int tx_fd;		/* UDP socket on ADDR_TX, in the peer netns */
	int polls_fd;		/* perf counter of napi:napi_poll, or -1 */
	unsigned int napi_id;
	int cpu;
	struct waker waker;
	char buf[64];
};

FIXTURE_VARIANT(napi) {
	bool waker;
};

/* a SCHED_FIFO task on the polling CPU, waking every millisecond */
FIXTURE_VARIANT_ADD(napi, waker) {
	.waker = true,
};

/* nothing else on the polling CPU */
FIXTURE_VARIANT_ADD(napi, no_waker) {
	.waker = false,
};

static int run(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	ret = system(cmd);
	if (ret)
		ksft_print_msg("'%s' failed (status %d)\n", cmd, ret);
	return ret;
}

static int ethtool_value(const char *ifname, __u32 cmd, __u32 *data)
{
	struct ethtool_value ev = { .cmd = cmd, .data = *data };
	struct ifreq ifr;
	int fd, ret;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&ev;
	ret = ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : 0;
	close(fd);
	*data = ev.data;
	return ret;
}

static int napi_poll_tracepoint_id(void)
{
	static const char * const paths[] = {
		"/sys/kernel/tracing/events/napi/napi_poll/id",
		"/sys/kernel/debug/tracing/events/napi/napi_poll/id",
	};
	char buf[32];
	unsigned int i;
	ssize_t n;
	int fd;

	for (i = 0; i < ARRAY_SIZE(paths); i++) {
		fd = open(paths[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		return atoi(buf);
	}
	return -1;
}

/*
 * A counter of the napi:napi_poll tracepoint in this thread: the polls its
 * busy poll makes. Mounts tracefs in a mount namespace of this process if
 * it is not mounted. Returns the perf fd, or -1 when there is none.
 * Must be called while the process has a single thread.
 *
 * Only with NAPI_TEST_COUNT_POLLS=1 in the environment: attaching the probe
 * live-patches kernel text, which emulators with stale translations (QEMU's
 * multi-threaded TCG) can trip over. The test itself doesn't need it.
 */
static int open_poll_counter(void)
{
	struct perf_event_attr attr;
	const char *opt = getenv("NAPI_TEST_COUNT_POLLS");
	int id;

	if (!opt || strcmp(opt, "1"))
		return -1;
	id = napi_poll_tracepoint_id();
	if (id < 0 && !unshare(CLONE_NEWNS) &&
	    !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) &&
	    !mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL))
		id = napi_poll_tracepoint_id();
	if (id < 0)
		return -1;

	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_TRACEPOINT;
	attr.size = sizeof(attr);
	attr.config = id;
	attr.disabled = 1;
	return syscall(__NR_perf_event_open, &attr, 0, -1, -1,
		       PERF_FLAG_FD_CLOEXEC);
}

static uint64_t ts_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void *waker_fn(void *arg)
{
	struct timespec ts = { .tv_nsec = WAKER_NS };
	struct waker *w = arg;
	struct sched_param sp;
	unsigned long n;

	if (pthread_getschedparam(pthread_self(), &w->policy, &sp))
		w->policy = -1;
	w->cpu = sched_getcpu();
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		n = __atomic_fetch_add(&w->wakeups, 1, __ATOMIC_RELAXED);
		if (n < WAKER_STAMPS)
			w->stamp[n] = ts_ns(CLOCK_MONOTONIC);
	}
	return NULL;
}

/*
 * The waker's wakeups that fell inside one of the @nr windows [@start[i],
 * @end[i]]: there it ran while the test thread, on the same CPU, was in its
 * busy polling wait. Valid once the waker is stopped.
 */
static unsigned long wakeups_within(const struct waker *w,
				    const uint64_t *start, const uint64_t *end,
				    int nr)
{
	unsigned long i, n = 0, kept;
	int j;

	kept = w->wakeups < WAKER_STAMPS ? w->wakeups : WAKER_STAMPS;
	for (i = 0; i < kept; i++) {
		for (j = 0; j < nr; j++) {
			if (w->stamp[i] >= start[j] && w->stamp[i] <= end[j]) {
				n++;
				break;
			}
		}
	}
	return n;
}

/* Returns 0 or an errno value. */
static int start_waker(struct waker *w, int cpu)
{
	struct sched_param sp = { .sched_priority = WAKER_PRIO };
	pthread_attr_t attr;
	cpu_set_t set;
	int ret;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	pthread_attr_setschedparam(&attr, &sp);
	ret = pthread_create(&w->thread, &attr, waker_fn, w);
	pthread_attr_destroy(&attr);
	if (!ret)
		w->started = true;
	return ret;
}

static void stop_waker(struct waker *w)
{
	if (!w->started)
		return;
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	pthread_join(w->thread, NULL);
	w->started = false;
}

FIXTURE_SETUP(napi)
{
	struct io_uring_napi reg;
	struct sockaddr_in rx = { .sin_family = AF_INET };
	socklen_t len = sizeof(rx);
	struct io_uring_sqe *sqe;
	struct pollfd pfd;
	cpu_set_t set;
	__u32 val;
	int i, ret = 0;

	self->own_ns = self->peer_ns = -1;
	self->rx_fd = self->tx_fd = self->polls_fd = -1;
	if (geteuid())
		SKIP(return, "needs root for network namespaces and a veth");
	if (system("ip -V >/dev/null 2>&1"))
		SKIP(return, "needs ip (Debian package iproute2)");

	/* our own netns, then the peer's, and back to ours */
	if (unshare(CLONE_NEWNET))
		SKIP(return, "cannot create a netns: %s", strerror(errno));
	self->own_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, self->own_ns);
	ASSERT_EQ(0, unshare(CLONE_NEWNET));
	/* not O_CLOEXEC: ip opens it as /proc/self/fd/N */
	self->peer_ns = open("/proc/self/ns/net", O_RDONLY);
	ASSERT_LE(0, self->peer_ns);
	ASSERT_EQ(0, setns(self->own_ns, CLONE_NEWNET));

	if (run("ip link add %s type veth peer name %s netns /proc/self/fd/%d",
		VETH_RX, VETH_TX, self->peer_ns))
		SKIP(return, "cannot create a veth pair (CONFIG_VETH)");
	ASSERT_EQ(0, run("ip addr add %s/24 dev %s && ip link set %s up",
			 ADDR_RX, VETH_RX, VETH_RX));

	/*
	 * veth only takes a packet through its peer's NAPI if the sending
	 * end has no TSO (or the receiving end forwards UDP GRO): turn TSO
	 * off on the sender.
	 */
	ASSERT_EQ(0, setns(self->peer_ns, CLONE_NEWNET));
	ASSERT_EQ(0, run("ip addr add %s/24 dev %s && ip link set %s up",
			 ADDR_TX, VETH_TX, VETH_TX));
	val = 0;
	ASSERT_EQ(0, ethtool_value(VETH_TX, ETHTOOL_STSO, &val));
	self->tx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, self->tx_fd);
	ASSERT_EQ(0, setns(self->own_ns, CLONE_NEWNET));

	/* veth has a NAPI while GRO is on (or XDP attached) */
	val = 1;
	ASSERT_EQ(0, ethtool_value(VETH_RX, ETHTOOL_SGRO, &val));
	val = 0;
	ASSERT_EQ(0, ethtool_value(VETH_RX, ETHTOOL_GGRO, &val));
	ASSERT_EQ(1U, val);

	/* one datagram over the veth gives the socket the NAPI's id */
	self->rx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, self->rx_fd);
	ASSERT_EQ(1, inet_pton(AF_INET, ADDR_RX, &rx.sin_addr));
	ASSERT_EQ(0, bind(self->rx_fd, (struct sockaddr *)&rx, sizeof(rx)));
	ASSERT_EQ(0, getsockname(self->rx_fd, (struct sockaddr *)&rx, &len));
	pfd.fd = self->rx_fd;
	pfd.events = POLLIN;
	for (i = 0; i < 5; i++) {
		ASSERT_EQ(4, sendto(self->tx_fd, "napi", 4, 0,
				    (struct sockaddr *)&rx, sizeof(rx)));
		ret = poll(&pfd, 1, 1000);
		ASSERT_LE(0, ret);
		if (ret)
			break;
	}
	ASSERT_EQ(1, ret) {
		TH_LOG("no datagram from %s to %s:%d", ADDR_TX, ADDR_RX,
		       ntohs(rx.sin_port));
	}
	ASSERT_EQ(4, recv(self->rx_fd, self->buf, sizeof(self->buf), 0));
	len = sizeof(self->napi_id);
	ASSERT_EQ(0, getsockopt(self->rx_fd, SOL_SOCKET, SO_INCOMING_NAPI_ID,
				&self->napi_id, &len));
	if (!self->napi_id)
		SKIP(return, "the datagram came without a NAPI id");

	/* a ring busy polling that NAPI only, for up to WAIT_US per wait */
	ASSERT_EQ(0, iou_init(&self->r, 8, 0));
	self->have_ring = true;
	memset(&reg, 0, sizeof(reg));
	reg.busy_poll_to = WAIT_US;
	reg.prefer_busy_poll = 1;
	reg.opcode = IO_URING_NAPI_REGISTER_OP;
	reg.op_param = IO_URING_NAPI_TRACKING_STATIC;
	ret = syscall(__NR_io_uring_register, self->r.fd, IORING_REGISTER_NAPI,
		      &reg, 1);
	if (ret && (errno == EINVAL || errno == EOPNOTSUPP))
		SKIP(return, "no io_uring NAPI (CONFIG_NET_RX_BUSY_POLL)");
	ASSERT_EQ(0, ret);
	memset(&reg, 0, sizeof(reg));
	reg.opcode = IO_URING_NAPI_STATIC_ADD_ID;
	reg.op_param = self->napi_id;
	ASSERT_EQ(0, syscall(__NR_io_uring_register, self->r.fd,
			     IORING_REGISTER_NAPI, &reg, 1));

	/* a receive that never completes */
	sqe = iou_sqe(&self->r);
	ASSERT_NE(NULL, sqe);
	iou_prep(sqe, IORING_OP_RECV, self->rx_fd, self->buf,
		 sizeof(self->buf), 0, 1);
	ASSERT_EQ(1, iou_submit(&self->r, 0));

	self->polls_fd = open_poll_counter();

	/* the first CPU we may run on */
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	for (self->cpu = 0; !CPU_ISSET(self->cpu, &set); self->cpu++)
		;
	CPU_ZERO(&set);
	CPU_SET(self->cpu, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));
}

FIXTURE_TEARDOWN(napi)
{
	stop_waker(&self->waker);
	if (self->have_ring)
		iou_exit(&self->r);
	if (self->polls_fd >= 0)
		close(self->polls_fd);
	if (self->rx_fd >= 0)
		close(self->rx_fd);
	if (self->tx_fd >= 0)
		close(self->tx_fd);
	if (self->peer_ns >= 0)
		close(self->peer_ns);
	if (self->own_ns >= 0)
		close(self->own_ns);
}

TEST_F_TIMEOUT(napi, busy_poll_whole_wait, 120)
{
	struct __kernel_timespec ts = { .tv_nsec = WAIT_US * 1000 };
	struct io_uring_getevents_arg arg = { .ts = (uintptr_t)&ts };
	uint64_t busy = 0, wall = 0, bmin = UINT64_MAX, bmax = 0;
	uint64_t wstart[NR_WAITS], wend[NR_WAITS];
	uint64_t c0, m0, m1, b, polls = 0;
	unsigned long wakeups = 0, within;
	struct io_uring_cqe cqe;
	char polls_msg[64];
	int i, ret, err;

	if (variant->waker) {
		ret = start_waker(&self->waker, self->cpu);
		if (ret == EPERM)
			SKIP(return, "cannot start a SCHED_FIFO thread");
		ASSERT_EQ(0, ret);
	}

	/* i == -1 is a warm-up, not counted */
	for (i = -1; i < NR_WAITS; i++) {
		if (i == 0) {
			wakeups = __atomic_load_n(&self->waker.wakeups,
						  __ATOMIC_RELAXED);
			if (self->polls_fd >= 0)
				ioctl(self->polls_fd, PERF_EVENT_IOC_ENABLE, 0);
		}
		c0 = ts_ns(CLOCK_THREAD_CPUTIME_ID);
		m0 = ts_ns(CLOCK_MONOTONIC);
		ret = syscall(__NR_io_uring_enter, self->r.fd, 0, 1,
			      IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
			      &arg, sizeof(arg));
		err = errno;
		m1 = ts_ns(CLOCK_MONOTONIC);
		b = ts_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		if (i >= 0) {
			wstart[i] = m0;
			wend[i] = m1;
			wall += m1 - m0;
			busy += b;
			bmin = b < bmin ? b : bmin;
			bmax = b > bmax ? b : bmax;
		}
		ASSERT_EQ(-1, ret) {
			TH_LOG("wait %d returned %d", i, ret);
		}
		ASSERT_EQ(ETIME, err);
		ASSERT_FALSE(iou_cqe(&self->r, &cqe)) {
			TH_LOG("unexpected completion %lld res %d",
			       (long long)cqe.user_data, cqe.res);
		}
	}
	if (self->polls_fd >= 0) {
		ioctl(self->polls_fd, PERF_EVENT_IOC_DISABLE, 0);
		if (read(self->polls_fd, &polls, sizeof(polls)) != sizeof(polls))
			polls = 0;
	}
	wakeups = __atomic_load_n(&self->waker.wakeups, __ATOMIC_RELAXED) - wakeups;
	stop_waker(&self->waker);

	if (self->polls_fd >= 0)
		snprintf(polls_msg, sizeof(polls_msg), "%.0f polls/s busy",
			 busy ? polls * 1e9 / busy : 0.0);
	else
		snprintf(polls_msg, sizeof(polls_msg), "polls not counted");
	ksft_print_msg("%s: cpu %d, napi id %u, %d waits of %d ms\n",
		       variant->waker ? "1 ms SCHED_FIFO waker" : "no waker",
		       self->cpu, self->napi_id, NR_WAITS, WAIT_US / 1000);
	ksft_print_msg("busy %.2f ms/wait (min %.2f, max %.2f), wall %.2f ms/wait, %.1f waker wakeups/wait, %s\n",
		       busy / NR_WAITS / NSEC_PER_MSEC, bmin / NSEC_PER_MSEC,
		       bmax / NSEC_PER_MSEC, wall / NR_WAITS / NSEC_PER_MSEC,
		       (double)wakeups / NR_WAITS, polls_msg);

	EXPECT_GE(busy / NR_WAITS, WAIT_US * 1000ULL * MIN_BUSY_PCT / 100) {
		TH_LOG("the waits busy polled %.2f ms of %d ms on average",
		       busy / NR_WAITS / NSEC_PER_MSEC, WAIT_US / 1000);
	}
	if (!variant->waker)
		return;

	/*
	 * The waker must have competed with the busy poll: SCHED_FIFO, on the
	 * polling CPU, and running while the waits went on, not only between
	 * them. Where it can't preempt the poll, it gets about one wakeup in
	 * per wait, at the wait's end.
	 */
	within = wakeups_within(&self->waker, wstart, wend, NR_WAITS);
	ksft_print_msg("waker: %s on cpu %d, %lu wakeups in the waits, %.0f%% of one per ms\n",
		       self->waker.policy == SCHED_FIFO ? "SCHED_FIFO" : "not SCHED_FIFO",
		       self->waker.cpu, within,
		       wall ? 100.0 * within * WAKER_NS / wall : 0.0);
	EXPECT_EQ(SCHED_FIFO, self->waker.policy);
	EXPECT_EQ(self->cpu, self->waker.cpu);
	EXPECT_GE((uint64_t)within * WAKER_NS * 100, wall * MIN_WAKE_PCT) {
		TH_LOG("the waker ran %lu times in %.1f ms of waits: under %d%% of one per ms",
		       within, wall / NSEC_PER_MSEC, MIN_WAKE_PCT);
	}
}

TEST_HARNESS_MAIN
