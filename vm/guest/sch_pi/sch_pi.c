// SPDX-License-Identifier: GPL-2.0
/*
 * sch_pi: the Proportional-Integral AQM controller of Hollot, Misra, Towsley and Gong
 * ("On designing improved controllers for AQM routers supporting TCP flows", INFOCOM
 * 2001), as a Linux qdisc. Written for the bufferbloat project's VM (kernel 6.1).
 *
 * Every 1/freq_hz seconds, on an hrtimer in hard-irq context (not a jiffies timer: at
 * HZ=250 a 6.25 ms period would become 8 ms; not a softirq hrtimer: in a CPU-starved
 * guest softirqs run late and the controller slowed to 67-151 of 160 Hz):
 *
 *     p <- p + a (q - q_ref) - b (q_old - q_ref),   clamped to [0, 1]
 *
 * q is the queue at that instant, q_old the queue at the previous update, both in
 * packets (the qdisc's packet count, or backlog / mean_pktsize when mean_pktsize is set,
 * as ns-2's PI counts a byte-mode queue in mean-sized packets). On enqueue a packet is
 * marked (ECN-capable, `ecn` on) or dropped with probability p; ECN-capable packets are
 * marked whatever p is. The queue tail-drops at `limit` packets.
 *
 * Fixed point: p is kept in units of 2^-32 (1.0 = 2^32) in a signed 64-bit integer; a
 * and b arrive through netlink in units of 1e-9 per packet and are held as
 * a_fp = floor(a_nano * 2^32 / 1e9), b_fp likewise. One update is then exactly
 *     p = clamp(p + a_fp * (q - q_ref) - b_fp * (q_old - q_ref), 0, 2^32)
 * which is what bufferbloat/net/qdiscs/pi.py's reference model computes. The xstats carry p, the
 * p before the last update, q and q_old of the last update and an update count, so every
 * sample of the statistics is one checkable step of the law.
 *
 * Configured with RTM_NEWQDISC, kind "pi", TCA_OPTIONS holding the TCA_PI_* u32
 * attributes below (bufferbloat/net/nlqdisc.py sends them; `tc` has no parser for it).
 */
#include <linux/module.h>
#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/errno.h>
#include <linux/skbuff.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/random.h>
#include <linux/spinlock.h>
#include <net/pkt_sched.h>
#include <net/inet_ecn.h>
#include <net/netlink.h>

enum {
	TCA_PI_UNSPEC,
	TCA_PI_LIMIT,		/* u32: tail-drop limit, packets */
	TCA_PI_QREF,		/* u32: reference queue, packets */
	TCA_PI_A,		/* u32: a, units of 1e-9 per packet */
	TCA_PI_B,		/* u32: b, units of 1e-9 per packet */
	TCA_PI_FREQ,		/* u32: update frequency, Hz */
	TCA_PI_ECN,		/* u32: 1 = mark ECN-capable packets instead of dropping */
	TCA_PI_MEAN_PKTSIZE,	/* u32: 0 = q is the packet count; else backlog / this */
	__TCA_PI_MAX
};
#define TCA_PI_MAX (__TCA_PI_MAX - 1)

/* the statistics dump (TCA_STATS_APP); bufferbloat/netlink/nlstats.py decodes it */
struct tc_pi_xstats {
	__u64 prob;		/* p after the last update, 2^-32 units */
	__u64 prob_prev;	/* p before the last update */
	__u32 q;		/* queue (packets) the last update saw */
	__u32 q_old;		/* queue the update before saw */
	__u32 updates;		/* controller updates so far */
	__u32 packets_in;	/* packets enqueued */
	__u32 dropped;		/* early drops (by p) */
	__u32 overlimit;	/* tail drops at limit */
	__u32 ecn_mark;		/* packets marked CE */
	__u32 pad;
};

#define PI_ONE (1ULL << 32)
#define PI_MAX_FREQ 10000

struct pi_sched_data {
	/* parameters */
	u32 q_ref;
	u32 a_nano, b_nano;
	s64 a_fp, b_fp;
	u32 freq_hz;
	u32 ecn;
	u32 mean_pktsize;
	u64 period_ns;
	/* controller state and gains, under stat_lock (irq-safe: the timer is a hard-irq
	 * one); enqueue reads prob alone with READ_ONCE */
	spinlock_t stat_lock;
	s64 prob;
	s64 prob_prev;
	u32 q, q_old;
	u32 updates;
	/* counters */
	u32 packets_in, dropped, overlimit, ecn_mark;
	struct hrtimer timer;
	struct Qdisc *sch;
};

static const struct nla_policy pi_policy[TCA_PI_MAX + 1] = {
	[TCA_PI_LIMIT]		= { .type = NLA_U32 },
	[TCA_PI_QREF]		= { .type = NLA_U32 },
	[TCA_PI_A]		= { .type = NLA_U32 },
	[TCA_PI_B]		= { .type = NLA_U32 },
	[TCA_PI_FREQ]		= { .type = NLA_U32 },
	[TCA_PI_ECN]		= { .type = NLA_U32 },
	[TCA_PI_MEAN_PKTSIZE]	= { .type = NLA_U32 },
};

static s64 pi_fixed(u32 nano)
{
	return (s64)div_u64((u64)nano << 32, NSEC_PER_SEC);
}

/* the queue now, read without the qdisc lock (one aligned word: a snapshot) */
static u32 pi_queue(const struct Qdisc *sch, const struct pi_sched_data *q)
{
	if (q->mean_pktsize)
		return READ_ONCE(sch->qstats.backlog) / q->mean_pktsize;
	return READ_ONCE(sch->q.qlen);
}

static bool pi_should_drop(struct pi_sched_data *q)
{
	s64 p = READ_ONCE(q->prob);

	if (p <= 0)
		return false;
	if (p >= (s64)PI_ONE)
		return true;
	return (u64)get_random_u32() < (u64)p;
}

static int pi_qdisc_enqueue(struct sk_buff *skb, struct Qdisc *sch,
			    struct sk_buff **to_free)
{
	struct pi_sched_data *q = qdisc_priv(sch);

	if (unlikely(qdisc_qlen(sch) >= sch->limit)) {
		q->overlimit++;
		return qdisc_drop(skb, sch, to_free);
	}
	if (pi_should_drop(q)) {
		if (q->ecn && INET_ECN_set_ce(skb)) {
			q->ecn_mark++;
		} else {
			q->dropped++;
			return qdisc_drop(skb, sch, to_free);
		}
	}
	q->packets_in++;
	return qdisc_enqueue_tail(skb, sch);
}

/* One step of the law (hard-irq context: interrupts are off). */
static void pi_update(struct Qdisc *sch, struct pi_sched_data *q)
{
	u32 now;
	s64 p;

	spin_lock(&q->stat_lock);
	now = pi_queue(sch, q);
	p = q->prob + q->a_fp * ((s64)now - q->q_ref) - q->b_fp * ((s64)q->q - q->q_ref);
	if (p < 0)
		p = 0;
	if (p > (s64)PI_ONE)
		p = PI_ONE;
	q->prob_prev = q->prob;
	q->q_old = q->q;
	q->q = now;
	WRITE_ONCE(q->prob, p);
	q->updates++;
	spin_unlock(&q->stat_lock);
}

static enum hrtimer_restart pi_timer(struct hrtimer *timer)
{
	struct pi_sched_data *q = container_of(timer, struct pi_sched_data, timer);

	pi_update(q->sch, q);
	hrtimer_forward_now(timer, ns_to_ktime(READ_ONCE(q->period_ns)));
	return HRTIMER_RESTART;
}

static int pi_change(struct Qdisc *sch, struct nlattr *opt,
		     struct netlink_ext_ack *extack)
{
	struct pi_sched_data *q = qdisc_priv(sch);
	struct nlattr *tb[TCA_PI_MAX + 1];
	unsigned int qlen, dropped = 0;
	unsigned long flags;
	int err;

	if (!opt)
		return -EINVAL;
	err = nla_parse_nested_deprecated(tb, TCA_PI_MAX, opt, pi_policy, extack);
	if (err < 0)
		return err;
	if (tb[TCA_PI_FREQ]) {
		u32 f = nla_get_u32(tb[TCA_PI_FREQ]);

		if (f == 0 || f > PI_MAX_FREQ) {
			NL_SET_ERR_MSG(extack, "pi: freq_hz must be 1..10000");
			return -EINVAL;
		}
	}
	if (tb[TCA_PI_LIMIT] && nla_get_u32(tb[TCA_PI_LIMIT]) == 0) {
		NL_SET_ERR_MSG(extack, "pi: limit must be at least 1 packet");
		return -EINVAL;
	}

	sch_tree_lock(sch);
	if (tb[TCA_PI_LIMIT])
		sch->limit = nla_get_u32(tb[TCA_PI_LIMIT]);
	spin_lock_irqsave(&q->stat_lock, flags);
	if (tb[TCA_PI_QREF])
		q->q_ref = nla_get_u32(tb[TCA_PI_QREF]);
	if (tb[TCA_PI_A]) {
		q->a_nano = nla_get_u32(tb[TCA_PI_A]);
		q->a_fp = pi_fixed(q->a_nano);
	}
	if (tb[TCA_PI_B]) {
		q->b_nano = nla_get_u32(tb[TCA_PI_B]);
		q->b_fp = pi_fixed(q->b_nano);
	}
	if (tb[TCA_PI_FREQ]) {
		q->freq_hz = nla_get_u32(tb[TCA_PI_FREQ]);
		WRITE_ONCE(q->period_ns, div_u64(NSEC_PER_SEC, q->freq_hz));
	}
	if (tb[TCA_PI_ECN])
		q->ecn = !!nla_get_u32(tb[TCA_PI_ECN]);
	if (tb[TCA_PI_MEAN_PKTSIZE])
		q->mean_pktsize = nla_get_u32(tb[TCA_PI_MEAN_PKTSIZE]);
	spin_unlock_irqrestore(&q->stat_lock, flags);

	/* a lower limit drops what is above it now */
	qlen = sch->q.qlen;
	while (sch->q.qlen > sch->limit) {
		struct sk_buff *skb = __qdisc_dequeue_head(&sch->q);

		dropped += qdisc_pkt_len(skb);
		qdisc_qstats_backlog_dec(sch, skb);
		rtnl_qdisc_drop(skb, sch);
	}
	qdisc_tree_reduce_backlog(sch, qlen - sch->q.qlen, dropped);
	sch_tree_unlock(sch);
	return 0;
}

static int pi_init(struct Qdisc *sch, struct nlattr *opt,
		   struct netlink_ext_ack *extack)
{
	struct pi_sched_data *q = qdisc_priv(sch);
	int err;

	spin_lock_init(&q->stat_lock);
	q->sch = sch;
	sch->limit = 1000;
	q->q_ref = 14;
	q->a_nano = 1136000;	/* the study's a = 0.001136 */
	q->b_nano = 1086000;	/* the study's b = 0.001086 */
	q->a_fp = pi_fixed(q->a_nano);
	q->b_fp = pi_fixed(q->b_nano);
	q->freq_hz = 160;
	q->period_ns = div_u64(NSEC_PER_SEC, q->freq_hz);
	hrtimer_init(&q->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	q->timer.function = pi_timer;
	if (opt) {
		err = pi_change(sch, opt, extack);
		if (err)
			return err;
	}
	hrtimer_start(&q->timer, ns_to_ktime(q->period_ns), HRTIMER_MODE_REL_HARD);
	return 0;
}

static int pi_dump(struct Qdisc *sch, struct sk_buff *skb)
{
	struct pi_sched_data *q = qdisc_priv(sch);
	struct nlattr *opts = nla_nest_start_noflag(skb, TCA_OPTIONS);

	if (!opts)
		goto nla_put_failure;
	if (nla_put_u32(skb, TCA_PI_LIMIT, sch->limit) ||
	    nla_put_u32(skb, TCA_PI_QREF, q->q_ref) ||
	    nla_put_u32(skb, TCA_PI_A, q->a_nano) ||
	    nla_put_u32(skb, TCA_PI_B, q->b_nano) ||
	    nla_put_u32(skb, TCA_PI_FREQ, q->freq_hz) ||
	    nla_put_u32(skb, TCA_PI_ECN, q->ecn) ||
	    nla_put_u32(skb, TCA_PI_MEAN_PKTSIZE, q->mean_pktsize))
		goto nla_put_failure;
	return nla_nest_end(skb, opts);

nla_put_failure:
	nla_nest_cancel(skb, opts);
	return -1;
}

static int pi_dump_stats(struct Qdisc *sch, struct gnet_dump *d)
{
	struct pi_sched_data *q = qdisc_priv(sch);
	struct tc_pi_xstats st = { 0 };
	unsigned long flags;

	spin_lock_irqsave(&q->stat_lock, flags);
	st.prob = q->prob;
	st.prob_prev = q->prob_prev;
	st.q = q->q;
	st.q_old = q->q_old;
	st.updates = q->updates;
	spin_unlock_irqrestore(&q->stat_lock, flags);
	st.packets_in = q->packets_in;
	st.dropped = q->dropped;
	st.overlimit = q->overlimit;
	st.ecn_mark = q->ecn_mark;
	return gnet_stats_copy_app(d, &st, sizeof(st));
}

/* Called with the root lock held (dev_reset_queue): only state, never the timer. */
static void pi_reset(struct Qdisc *sch)
{
	struct pi_sched_data *q = qdisc_priv(sch);
	unsigned long flags;

	qdisc_reset_queue(sch);
	spin_lock_irqsave(&q->stat_lock, flags);
	q->prob = 0;
	q->prob_prev = 0;
	q->q = 0;
	q->q_old = 0;
	spin_unlock_irqrestore(&q->stat_lock, flags);
}

static void pi_destroy(struct Qdisc *sch)
{
	struct pi_sched_data *q = qdisc_priv(sch);

	hrtimer_cancel(&q->timer);
}

static struct Qdisc_ops pi_qdisc_ops __read_mostly = {
	.id		= "pi",
	.priv_size	= sizeof(struct pi_sched_data),
	.enqueue	= pi_qdisc_enqueue,
	.dequeue	= qdisc_dequeue_head,
	.peek		= qdisc_peek_head,
	.init		= pi_init,
	.destroy	= pi_destroy,
	.reset		= pi_reset,
	.change		= pi_change,
	.dump		= pi_dump,
	.dump_stats	= pi_dump_stats,
	.owner		= THIS_MODULE,
};

static int __init pi_module_init(void)
{
	return register_qdisc(&pi_qdisc_ops);
}

static void __exit pi_module_exit(void)
{
	unregister_qdisc(&pi_qdisc_ops);
}

module_init(pi_module_init);
module_exit(pi_module_exit);

MODULE_DESCRIPTION("PI AQM controller (Hollot, Misra, Towsley, Gong 2001) for the bufferbloat project");
MODULE_AUTHOR("bufferbloat project");
MODULE_LICENSE("GPL");
