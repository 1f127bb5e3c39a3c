// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for bio completion in task context: BIO_COMPLETE_IN_TASK and
 * bio_complete_in_task().
 *
 * Each case ends a bio with bio_endio() either from a hard interrupt (an
 * hrtimer in HRTIMER_MODE_REL_HARD) or from the test thread, and records
 * where ->bi_end_io() ran.
 */
#include <kunit/test.h>
#include <linux/bio.h>
#include <linux/completion.h>
#include <linux/hrtimer.h>
#include <linux/sched.h>

struct bio_probe {
	struct bio		bio;
	struct hrtimer		timer;
	struct completion	done;
	/* ->bi_end_io() had run when bio_endio() returned */
	bool			ran_in_caller;
	/* recorded by ->bi_end_io() */
	bool			in_task;
	bool			in_hardirq;
	bool			wq_worker;
	struct task_struct	*task;
	/* bio_complete_in_task() results, first and second call */
	bool			deferred[2];
	unsigned int		calls;
	bool			use_complete_in_task;
};

static void bio_probe_record(struct bio_probe *p)
{
	p->in_task = in_task();
	p->in_hardirq = in_hardirq();
	p->wq_worker = current->flags & PF_WQ_WORKER;
	p->task = current;
	complete(&p->done);
}

static void bio_probe_end_io(struct bio *bio)
{
	struct bio_probe *p = container_of(bio, struct bio_probe, bio);

	if (p->use_complete_in_task) {
		unsigned int call = p->calls++;

		if (call < ARRAY_SIZE(p->deferred))
			p->deferred[call] = bio_complete_in_task(bio);
		if (call == 0 && p->deferred[0])
			return;
	}
	bio_probe_record(p);
}

static void bio_probe_endio(struct bio_probe *p)
{
	bio_endio(&p->bio);
	p->ran_in_caller = completion_done(&p->done);
}

static enum hrtimer_restart bio_probe_timer_fn(struct hrtimer *timer)
{
	bio_probe_endio(container_of(timer, struct bio_probe, timer));
	return HRTIMER_NORESTART;
}

static struct bio_probe *bio_probe_alloc(struct kunit *test, bool flagged)
{
	struct bio_probe *p = kunit_kzalloc(test, sizeof(*p), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, p);
	bio_init(&p->bio, NULL, NULL, 0, REQ_OP_READ);
	p->bio.bi_end_io = bio_probe_end_io;
	if (flagged)
		bio_set_flag(&p->bio, BIO_COMPLETE_IN_TASK);
	init_completion(&p->done);
	hrtimer_setup(&p->timer, bio_probe_timer_fn, CLOCK_MONOTONIC,
		      HRTIMER_MODE_REL_HARD);
	return p;
}

/* End the bio from a hard interrupt and wait for ->bi_end_io(). */
static void bio_probe_end_in_hardirq(struct kunit *test, struct bio_probe *p)
{
	hrtimer_start(&p->timer, ns_to_ktime(1000), HRTIMER_MODE_REL_HARD);
	KUNIT_ASSERT_NE_MSG(test, wait_for_completion_timeout(&p->done, 10 * HZ),
			    0, "->bi_end_io() did not run within 10 s");
	hrtimer_cancel(&p->timer);
	/* the timer callback is done: ran_in_caller is final */
}

static void bio_probe_exit(struct bio_probe *p)
{
	bio_uninit(&p->bio);
}

/* A flagged bio ended in hard interrupt context completes in a worker. */
static void bio_flagged_hardirq_completes_in_task(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, true);

	bio_probe_end_in_hardirq(test, p);
	KUNIT_EXPECT_FALSE(test, p->ran_in_caller);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	KUNIT_EXPECT_FALSE(test, p->in_hardirq);
	KUNIT_EXPECT_TRUE(test, p->wq_worker);
	bio_probe_exit(p);
}

/* A flagged bio ended from task context completes right there. */
static void bio_flagged_task_completes_inline(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, true);

	if (!IS_ENABLED(CONFIG_PREEMPT_COUNT))
		kunit_skip(test, "without CONFIG_PREEMPT_COUNT every context counts as atomic");

	bio_probe_endio(p);
	KUNIT_EXPECT_TRUE(test, p->ran_in_caller);
	KUNIT_EXPECT_PTR_EQ(test, p->task, current);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	bio_probe_exit(p);
}

/*
 * A flagged bio ended with preemption disabled is atomic too: it is
 * deferred even though this is a task.
 */
static void bio_flagged_preempt_off_completes_in_worker(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, true);

	if (!IS_ENABLED(CONFIG_PREEMPT_COUNT))
		kunit_skip(test, "needs CONFIG_PREEMPT_COUNT");

	preempt_disable();
	bio_probe_endio(p);
	preempt_enable();
	KUNIT_EXPECT_FALSE(test, p->ran_in_caller);
	KUNIT_ASSERT_NE(test, wait_for_completion_timeout(&p->done, 10 * HZ), 0);
	KUNIT_EXPECT_PTR_NE(test, p->task, current);
	KUNIT_EXPECT_TRUE(test, p->wq_worker);
	bio_probe_exit(p);
}

/* The control: an unflagged bio completes in the hard interrupt. */
static void bio_unflagged_hardirq_completes_inline(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, false);

	bio_probe_end_in_hardirq(test, p);
	KUNIT_EXPECT_TRUE(test, p->ran_in_caller);
	KUNIT_EXPECT_FALSE(test, p->in_task);
	KUNIT_EXPECT_TRUE(test, p->in_hardirq);
	bio_probe_exit(p);
}

/*
 * bio_complete_in_task() from ->bi_end_io() in hard interrupt context
 * defers once; called again from the worker it lets the completion run.
 */
static void bio_complete_in_task_defers_from_end_io(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, false);

	p->use_complete_in_task = true;
	bio_probe_end_in_hardirq(test, p);
	KUNIT_EXPECT_EQ(test, p->calls, 2U);
	KUNIT_EXPECT_TRUE(test, p->deferred[0]);
	KUNIT_EXPECT_FALSE(test, p->deferred[1]);
	KUNIT_EXPECT_FALSE(test, p->ran_in_caller);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	KUNIT_EXPECT_TRUE(test, p->wq_worker);
	bio_probe_exit(p);
}

static struct kunit_case bio_complete_test_cases[] = {
	KUNIT_CASE(bio_flagged_hardirq_completes_in_task),
	KUNIT_CASE(bio_flagged_task_completes_inline),
	KUNIT_CASE(bio_flagged_preempt_off_completes_in_worker),
	KUNIT_CASE(bio_unflagged_hardirq_completes_inline),
	KUNIT_CASE(bio_complete_in_task_defers_from_end_io),
	{}
};

static struct kunit_suite bio_complete_test_suite = {
	.name = "bio-complete-in-task",
	.test_cases = bio_complete_test_cases,
};

kunit_test_suite(bio_complete_test_suite);

MODULE_DESCRIPTION("KUnit tests for bio completion in task context");
MODULE_LICENSE("GPL");
