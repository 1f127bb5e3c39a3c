// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for bio completion in task context: BIO_COMPLETE_IN_TASK and
 * bio_complete_in_task().
 *
 * Each case ends a bio with bio_endio() either from a hard interrupt (an
 * hrtimer in HRTIMER_MODE_REL_HARD) or from the test thread. ->bi_end_io()
 * records where it ran, and whether that was within the bio_endio() call
 * that ended the bio, in its caller's context, before it completes the
 * probe's completion. The test reads the record only once it has waited
 * for that completion and for the timer callback to be done.
 */
#include <kunit/test.h>
#include <linux/bio.h>
#include <linux/completion.h>
#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/slab.h>

struct bio_probe {
	struct bio		bio;
	struct hrtimer		timer;
	struct completion	done;
	/* set by bio_probe_endio() around its bio_endio() call */
	struct task_struct	*caller;
	bool			caller_hardirq;
	bool			in_endio;
	/* recorded by ->bi_end_io(), before it completes @done */
	bool			ran_in_caller;
	bool			in_task;
	bool			in_hardirq;
	bool			irqs_off;
	bool			wq_worker;
	struct task_struct	*task;
	/* bio_complete_in_task(): results and context, first and second call */
	bool			deferred[2];
	bool			call_in_hardirq[2];
	unsigned int		calls;
	bool			use_complete_in_task;
};

static void bio_probe_record(struct bio_probe *p)
{
	bool hardirq = in_hardirq();

	/*
	 * Inline means within the bio_endio() call that ended the bio, in the
	 * context that made the call. A worker is another task; a worker on
	 * the CPU that took the interrupt runs only once the interrupt has
	 * returned, after bio_probe_endio() cleared ->in_endio.
	 */
	p->ran_in_caller = READ_ONCE(p->in_endio) && p->caller == current &&
			   p->caller_hardirq == hardirq;
	p->in_task = in_task();
	p->in_hardirq = hardirq;
	p->irqs_off = irqs_disabled();
	p->wq_worker = current->flags & PF_WQ_WORKER;
	p->task = current;
	complete(&p->done);
}

static void bio_probe_end_io(struct bio *bio)
{
	struct bio_probe *p = container_of(bio, struct bio_probe, bio);

	if (p->use_complete_in_task) {
		unsigned int call = p->calls++;

		if (call < ARRAY_SIZE(p->deferred)) {
			p->call_in_hardirq[call] = in_hardirq();
			p->deferred[call] = bio_complete_in_task(bio);
		}
		if (call == 0 && p->deferred[0])
			return;
	}
	bio_probe_record(p);
}

/* End the bio from the current context. */
static void bio_probe_endio(struct bio_probe *p)
{
	p->caller = current;
	p->caller_hardirq = in_hardirq();
	WRITE_ONCE(p->in_endio, true);
	bio_endio(&p->bio);
	WRITE_ONCE(p->in_endio, false);
}

static enum hrtimer_restart bio_probe_timer_fn(struct hrtimer *timer)
{
	bio_probe_endio(container_of(timer, struct bio_probe, timer));
	return HRTIMER_NORESTART;
}

/*
 * Not managed by KUnit: a probe whose ->bi_end_io() never ran may still be
 * queued for a worker, and is left allocated (see bio_probe_wait()).
 */
static struct bio_probe *bio_probe_alloc(struct kunit *test, bool flagged)
{
	struct bio_probe *p = kzalloc(sizeof(*p), GFP_KERNEL);

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

static void bio_probe_free(struct bio_probe *p)
{
	bio_uninit(&p->bio);
	kfree(p);
}

/* End the bio from a hard interrupt, in about a microsecond. */
static void bio_probe_end_in_hardirq(struct bio_probe *p)
{
	hrtimer_start(&p->timer, ns_to_ktime(1000), HRTIMER_MODE_REL_HARD);
}

/*
 * Wait for ->bi_end_io() to have run and for the timer callback, if any, to
 * be done with @p: then the record is complete. On a timeout, fail the case
 * and return false, and the caller leaves @p allocated.
 */
static bool bio_probe_wait(struct kunit *test, struct bio_probe *p)
{
	bool done = wait_for_completion_timeout(&p->done, 10 * HZ);

	hrtimer_cancel(&p->timer);
	if (!done)
		KUNIT_FAIL(test, "->bi_end_io() did not run within 10 s");
	return done;
}

/* A flagged bio ended in hard interrupt context completes in a worker. */
static void bio_flagged_hardirq_completes_in_task(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, true);

	bio_probe_end_in_hardirq(p);
	if (!bio_probe_wait(test, p))
		return;
	KUNIT_EXPECT_TRUE(test, p->caller_hardirq);
	KUNIT_EXPECT_FALSE(test, p->ran_in_caller);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	KUNIT_EXPECT_FALSE(test, p->in_hardirq);
	KUNIT_EXPECT_FALSE(test, p->irqs_off);
	KUNIT_EXPECT_TRUE(test, p->wq_worker);
	bio_probe_free(p);
}

/* A flagged bio ended from task context completes right there. */
static void bio_flagged_task_completes_inline(struct kunit *test)
{
	struct bio_probe *p;

	if (!IS_ENABLED(CONFIG_PREEMPT_COUNT))
		kunit_skip(test, "without CONFIG_PREEMPT_COUNT every context counts as atomic");

	p = bio_probe_alloc(test, true);
	bio_probe_endio(p);
	if (!bio_probe_wait(test, p))
		return;
	KUNIT_EXPECT_TRUE(test, p->ran_in_caller);
	KUNIT_EXPECT_PTR_EQ(test, p->task, current);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	KUNIT_EXPECT_FALSE(test, p->in_hardirq);
	bio_probe_free(p);
}

/*
 * A flagged bio ended with preemption disabled is atomic too: it is
 * deferred even though this is a task.
 */
static void bio_flagged_preempt_off_completes_in_worker(struct kunit *test)
{
	struct bio_probe *p;

	if (!IS_ENABLED(CONFIG_PREEMPT_COUNT))
		kunit_skip(test, "needs CONFIG_PREEMPT_COUNT");

	p = bio_probe_alloc(test, true);
	preempt_disable();
	bio_probe_endio(p);
	preempt_enable();
	if (!bio_probe_wait(test, p))
		return;
	KUNIT_EXPECT_FALSE(test, p->ran_in_caller);
	KUNIT_EXPECT_PTR_NE(test, p->task, current);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	KUNIT_EXPECT_TRUE(test, p->wq_worker);
	bio_probe_free(p);
}

/* The control: an unflagged bio completes in the hard interrupt. */
static void bio_unflagged_hardirq_completes_inline(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, false);

	bio_probe_end_in_hardirq(p);
	if (!bio_probe_wait(test, p))
		return;
	KUNIT_EXPECT_TRUE(test, p->caller_hardirq);
	KUNIT_EXPECT_TRUE(test, p->ran_in_caller);
	KUNIT_EXPECT_FALSE(test, p->in_task);
	KUNIT_EXPECT_TRUE(test, p->in_hardirq);
	KUNIT_EXPECT_TRUE(test, p->irqs_off);
	bio_probe_free(p);
}

/*
 * bio_complete_in_task() from ->bi_end_io() in hard interrupt context
 * defers once; called again from the worker it lets the completion run.
 */
static void bio_complete_in_task_defers_from_end_io(struct kunit *test)
{
	struct bio_probe *p = bio_probe_alloc(test, false);

	p->use_complete_in_task = true;
	bio_probe_end_in_hardirq(p);
	if (!bio_probe_wait(test, p))
		return;
	KUNIT_EXPECT_TRUE(test, p->caller_hardirq);
	KUNIT_EXPECT_EQ(test, p->calls, 2U);
	KUNIT_EXPECT_TRUE(test, p->call_in_hardirq[0]);
	KUNIT_EXPECT_TRUE(test, p->deferred[0]);
	KUNIT_EXPECT_FALSE(test, p->call_in_hardirq[1]);
	KUNIT_EXPECT_FALSE(test, p->deferred[1]);
	KUNIT_EXPECT_FALSE(test, p->ran_in_caller);
	KUNIT_EXPECT_TRUE(test, p->in_task);
	KUNIT_EXPECT_FALSE(test, p->irqs_off);
	KUNIT_EXPECT_TRUE(test, p->wq_worker);
	bio_probe_free(p);
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
