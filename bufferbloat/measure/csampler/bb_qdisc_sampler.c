// SPDX-License-Identifier: MIT
/*
 * bb-qdisc-sampler: the queue half of bufferbloat/measure/sampler.py, in C.
 *
 * Every `period` seconds, on the absolute grid t0 + k * period (CLOCK_MONOTONIC;
 * ticks whose time has passed are skipped and counted as missed, never drifting: the
 * rule of sampler.run()), it sends one RTM_GETQDISC dump per device (and, when the
 * device has an fq_codel, one RTM_GETTCLASS dump for its per-flow CoDel delay) and
 * appends one row per qdisc of that device to a CSV with the columns of
 * series.SERIES_COLUMNS["qdisc"], formatted as Python's csv writer formats sampler.qdisc_row()
 * (floats as repr(), None as an empty cell). Decoding follows bufferbloat/netlink/nlstats.py
 * and each kind's module in bufferbloat/net/qdiscs/ (its decode_xstats, finish, merge_classes,
 * sub_rows): one decoder function here per kind with xstats.
 *
 *   bb-qdisc-sampler --t0 S --period S [--duration S] [--flush S] [--rt PRIO]
 *                    --out QDISC.csv --stats STATS.json DEV...
 *       DEV = NAME (this network namespace) or PID/NAME (the namespace of PID).
 *       Prints "ready" on stdout once every socket is open and the header is written.
 *       SIGTERM/SIGINT (or --duration): writes the last rows and STATS.json, exits 0.
 *       --idle: tick without sampling (benchmark: the cost of the wake-up alone).
 *   bb-qdisc-sampler --parse QDISC.bin [--class CLASS.bin] [--ifindex N] [--dev NAME]
 *                    [--t T]...
 *       Decodes a captured dump answer and prints its rows (no header), once per --t.
 *
 * Only libc and the Linux UAPI headers. Built static (Makefile) so that the binary
 * built on the host runs in the project VM too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/gen_stats.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include "bb_tick.h"

#define RXBUF (1 << 16)
#define MAXQ 64            /* qdiscs per device and tick */
#define PIE_PROB_MAX 18446744073709551615.0  /* float(2**64 - 1), as nlstats */
#define PI_PROB_ONE 4294967296.0             /* sch_pi's p = 1.0: 2^32 */

/* ------------------------------------------------------------ one decoded qdisc */
enum { F_BYTES, F_PACKETS, F_QLEN, F_BACKLOG, F_DROPS, F_REQUEUES, F_OVERLIMITS,
       F_MARKS, F_EARLY, F_PROB, F_DELAY, F_MAXQ, F_DROP_OVERLIMIT, F_DROP_OVERMEM,
       F_CTL_Q, F_CTL_QOLD, F_CTL_PPREV, F_CTL_UPD, F_PEAK_DELAY, F_BASE_DELAY, NF };

struct qd {
	uint32_t handle, parent;
	int has_kind;
	char kind[32];
	unsigned has;           /* bit F_x: field x present (else an empty cell) */
	int pi;                 /* F_PROB, F_CTL_PPREV in 2^-32 units (sch_pi), else PIE's */
	uint64_t v[NF];         /* F_PROB: the raw u64 */
};

#define SET(q, f, val) ((q)->v[f] = (val), (q)->has |= 1u << (f))
#define HAS(q, f) ((q)->has & (1u << (f)))

static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* the kinds' decode_xstats() (bufferbloat/net/qdiscs/KIND.py), into the CSV's vocabulary
 * (xs: TCA_STATS_APP, n bytes); cake's nested xstats: decode_cake() */
static void decode_xstats(struct qd *q, const unsigned char *xs, size_t n)
{
	unsigned char b[64] = {0};   /* the layouts, zero-padded as nlstats' ljust */
	if (!n || !q->has_kind)
		return;
	memcpy(b, xs, n < sizeof b ? n : sizeof b);
	if (!strcmp(q->kind, "pie") && n >= 16) {
		/* struct tc_pie_xstats: u64 prob, u32 delay, avg_dq_rate, dq_rate_estimating,
		 * packets_in, dropped, overlimit, maxq, ecn_mark */
		SET(q, F_PROB, rd64(b));
		SET(q, F_DELAY, rd32(b + 8));
		if (n >= 36) {
			SET(q, F_EARLY, rd32(b + 24));
			SET(q, F_MAXQ, rd32(b + 32));
		}
		if (n >= 40)
			SET(q, F_MARKS, rd32(b + 36));
	} else if (!strcmp(q->kind, "codel") && n >= 28) {
		/* tc_codel_xstats: maxpacket, count, lastcount, ldelay, drop_next,
		 * drop_overlimit, ecn_mark, dropping, ce_mark */
		SET(q, F_DELAY, rd32(b + 12));
		SET(q, F_DROP_OVERLIMIT, rd32(b + 20));
		SET(q, F_MARKS, rd32(b + 24));
	} else if (!strcmp(q->kind, "fq_codel") && n >= 16 && rd32(b) == TCA_FQ_CODEL_XSTATS_QDISC) {
		/* u32 type, then tc_fq_codel_qd_stats: maxpacket, drop_overlimit, ecn_mark,
		 * new_flow_count, new_flows_len, old_flows_len, ce_mark, memory_usage,
		 * drop_overmemory */
		SET(q, F_DROP_OVERLIMIT, rd32(b + 8));
		SET(q, F_MARKS, rd32(b + 12));
		SET(q, F_DROP_OVERMEM, rd32(b + 36));
	} else if (!strcmp(q->kind, "pi") && n >= 16) {
		/* vm/guest/sch_pi's tc_pi_xstats: u64 prob, prob_prev (2^-32 units), u32 q,
		 * q_old, updates, packets_in, dropped, overlimit, ecn_mark, pad */
		q->pi = 1;
		SET(q, F_PROB, rd64(b));
		SET(q, F_CTL_PPREV, rd64(b + 8));
		if (n >= 44) {
			SET(q, F_CTL_Q, rd32(b + 16));
			SET(q, F_CTL_QOLD, rd32(b + 20));
			SET(q, F_CTL_UPD, rd32(b + 24));
			SET(q, F_EARLY, rd32(b + 32));
			SET(q, F_MARKS, rd32(b + 40));
		}
	} else if (!strcmp(q->kind, "red") && n >= 16) {
		/* tc_red_xstats: early, pdrop, other, marked */
		SET(q, F_EARLY, rd32(b));
		SET(q, F_MARKS, rd32(b + 12));
	}
}

/* finish_qdisc(): CoDel/FQ-CoDel's early drops = drops - limit drops - memory drops */
static void finish_qdisc(struct qd *q)
{
	if (q->has_kind && (!strcmp(q->kind, "codel") || !strcmp(q->kind, "fq_codel"))
	    && HAS(q, F_DROPS)) {
		int64_t e = (int64_t)q->v[F_DROPS]
			- (HAS(q, F_DROP_OVERLIMIT) ? (int64_t)q->v[F_DROP_OVERLIMIT] : 0)
			- (HAS(q, F_DROP_OVERMEM) ? (int64_t)q->v[F_DROP_OVERMEM] : 0);
		SET(q, F_EARLY, (uint64_t)(e > 0 ? e : 0));
	}
}

/* ------------------------------------------------------------ netlink parsing */
/* Walk the messages of a dump answer; call fn on each of type `type` whose tcmsg has
 * ifindex `ifindex` (< 0: any). Messages of a sequence number below `seq` are left out:
 * the late answer to a request that timed out. Returns 0, or -errno of an
 * NLMSG_ERROR. */
typedef void (*msg_fn)(const unsigned char *body, size_t len, void *arg);

static int walk(const unsigned char *data, size_t size, uint32_t seq, int type,
		int ifindex, msg_fn fn, void *arg)
{
	size_t off = 0;
	while (off + sizeof(struct nlmsghdr) <= size) {
		struct nlmsghdr h;
		memcpy(&h, data + off, sizeof h);
		if (h.nlmsg_len < sizeof h || off + h.nlmsg_len > size)
			break;
		if (h.nlmsg_seq < seq) {
			off += NLMSG_ALIGN(h.nlmsg_len);
			continue;
		}
		if (h.nlmsg_type == NLMSG_DONE)
			return 0;
		if (h.nlmsg_type == NLMSG_ERROR) {
			int err = (int)rd32(data + off + sizeof h);
			if (err)
				return err < 0 ? err : -err;
		} else if (h.nlmsg_type == type
			   && h.nlmsg_len >= sizeof h + sizeof(struct tcmsg)) {
			const unsigned char *body = data + off + sizeof h;
			struct tcmsg tm;
			memcpy(&tm, body, sizeof tm);
			if (ifindex < 0 || tm.tcm_ifindex == ifindex)
				fn(body, h.nlmsg_len - sizeof h, arg);
		}
		off += NLMSG_ALIGN(h.nlmsg_len);
	}
	return 0;
}

/* The next attribute of p[0..len) at *off: its type (flags stripped), value, length;
 * 0 when there is none (or it runs past the end). */
struct attr { int type; const unsigned char *val; size_t len; };

static int next_attr(const unsigned char *p, size_t len, size_t *off, struct attr *a)
{
	uint16_t alen, atype;
	if (*off + 4 > len)
		return 0;
	memcpy(&alen, p + *off, 2);
	memcpy(&atype, p + *off + 2, 2);
	if (alen < 4 || *off + alen > len)
		return 0;
	a->type = atype & NLA_TYPE_MASK;
	a->val = p + *off + 4;
	a->len = alen - 4;
	*off += NLA_ALIGN(alen);
	return 1;
}

struct qlist { struct qd q[MAXQ]; int n; };

/* an attribute's integer: u64 or u32 by its length (cake.py's _uint) */
static uint64_t rd_uint(const struct attr *a)
{
	return a->len >= 8 ? rd64(a->val) : rd32(a->val);
}

/* bufferbloat/net/qdiscs/cake.py: TCA_STATS_APP is a nest of TCA_CAKE_STATS_*; its
 * TCA_CAKE_STATS_TIN_STATS a nest of one nest per tin (type tin + 1) of
 * TCA_CAKE_TIN_STATS_* (include/uapi/linux/pkt_sched.h). The qdisc gets the totals (marks,
 * early drops) and the largest avg/peak/base delay of the tins that have sent; each tin
 * becomes a row of kind cake_tin (handle MAJOR:tin+1, parent the qdisc) after it. */
static void decode_cake(struct qlist *l, struct qd *q, const unsigned char *xs, size_t n)
{
	struct attr a, t, f;
	const struct attr *tins = NULL;
	struct attr tins_attr;
	if (!xs || !n)
		return;
	for (size_t off = 0; next_attr(xs, n, &off, &a);)
		if (a.type == TCA_CAKE_STATS_TIN_STATS) {
			tins_attr = a;
			tins = &tins_attr;
		}
	if (!tins)
		return;
	uint64_t marks = 0, drops = 0, delay = 0, peak = 0, base = 0;
	uint32_t handle = q->handle;
	int idx = (int)(q - l->q);
	for (size_t to = 0; next_attr(tins->val, tins->len, &to, &t);) {
		struct qd tin;
		uint64_t v[TCA_CAKE_TIN_STATS_MAX + 1] = {0};
		unsigned char has[TCA_CAKE_TIN_STATS_MAX + 1] = {0};
		for (size_t fo = 0; next_attr(t.val, t.len, &fo, &f);)
			if (f.type <= TCA_CAKE_TIN_STATS_MAX && f.len >= 4) {
				v[f.type] = rd_uint(&f);
				has[f.type] = 1;
			}
		marks += v[TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS];
		drops += v[TCA_CAKE_TIN_STATS_DROPPED_PACKETS];
		if (v[TCA_CAKE_TIN_STATS_SENT_PACKETS]) {
			if (v[TCA_CAKE_TIN_STATS_AVG_DELAY_US] > delay)
				delay = v[TCA_CAKE_TIN_STATS_AVG_DELAY_US];
			if (v[TCA_CAKE_TIN_STATS_PEAK_DELAY_US] > peak)
				peak = v[TCA_CAKE_TIN_STATS_PEAK_DELAY_US];
			if (v[TCA_CAKE_TIN_STATS_BASE_DELAY_US] > base)
				base = v[TCA_CAKE_TIN_STATS_BASE_DELAY_US];
		}
		if (l->n >= MAXQ)
			continue;
		memset(&tin, 0, sizeof tin);
		tin.handle = (handle & 0xFFFF0000u) | (uint32_t)t.type;
		tin.parent = handle;
		tin.has_kind = 1;
		strcpy(tin.kind, "cake_tin");
		static const int map[][2] = {
			{TCA_CAKE_TIN_STATS_BACKLOG_PACKETS, F_QLEN},
			{TCA_CAKE_TIN_STATS_BACKLOG_BYTES, F_BACKLOG},
			{TCA_CAKE_TIN_STATS_SENT_BYTES64, F_BYTES},
			{TCA_CAKE_TIN_STATS_SENT_PACKETS, F_PACKETS},
			{TCA_CAKE_TIN_STATS_DROPPED_PACKETS, F_DROPS},
			{TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS, F_MARKS},
			{TCA_CAKE_TIN_STATS_DROPPED_PACKETS, F_EARLY},
			{TCA_CAKE_TIN_STATS_AVG_DELAY_US, F_DELAY},
			{TCA_CAKE_TIN_STATS_PEAK_DELAY_US, F_PEAK_DELAY},
			{TCA_CAKE_TIN_STATS_BASE_DELAY_US, F_BASE_DELAY}};
		for (size_t i = 0; i < sizeof map / sizeof *map; i++)
			if (has[map[i][0]])
				SET(&tin, map[i][1], v[map[i][0]]);
		l->q[l->n++] = tin;
	}
	q = &l->q[idx];
	SET(q, F_MARKS, marks);
	SET(q, F_EARLY, drops);
	SET(q, F_DELAY, delay);
	SET(q, F_PEAK_DELAY, peak);
	SET(q, F_BASE_DELAY, base);
}

static void on_qdisc(const unsigned char *body, size_t len, void *arg)
{
	struct qlist *l = arg;
	struct tcmsg tm;
	struct qd *q;
	const unsigned char *xs = NULL;
	size_t xn = 0;
	if (l->n >= MAXQ)
		return;
	q = &l->q[l->n++];
	memset(q, 0, sizeof *q);
	memcpy(&tm, body, sizeof tm);
	q->handle = tm.tcm_handle;
	q->parent = tm.tcm_parent;
	body += NLMSG_ALIGN(sizeof tm);
	len -= NLMSG_ALIGN(sizeof tm);
	struct attr a, sa;
	for (size_t off = 0; next_attr(body, len, &off, &a);) {
		const unsigned char *val = a.val, *sv;
		size_t vlen = a.len, sn;
		if (a.type == TCA_KIND) {
			size_t k = vlen < sizeof q->kind - 1 ? vlen : sizeof q->kind - 1;
			memcpy(q->kind, val, k);
			while (k && !q->kind[k - 1])
				k--;
			q->kind[k] = 0;
			q->has_kind = 1;
		} else if (a.type == TCA_STATS2) {
			for (size_t so = 0; next_attr(val, vlen, &so, &sa);) {
				int st = sa.type;
				sv = sa.val;
				sn = sa.len;
				if (st == TCA_STATS_BASIC && sn >= 12) {
					SET(q, F_BYTES, rd64(sv));
					SET(q, F_PACKETS, rd32(sv + 8));
				} else if (st == TCA_STATS_PKT64 && sn >= 8) {
					SET(q, F_PACKETS, rd64(sv));
				} else if (st == TCA_STATS_QUEUE && sn >= 20) {
					SET(q, F_QLEN, rd32(sv));
					SET(q, F_BACKLOG, rd32(sv + 4));
					SET(q, F_DROPS, rd32(sv + 8));
					SET(q, F_REQUEUES, rd32(sv + 12));
					SET(q, F_OVERLIMITS, rd32(sv + 16));
				} else if (st == TCA_STATS_APP) {
					xs = sv;
					xn = sn;
				}
			}
		}
	}
	decode_xstats(q, xs, xn);
	finish_qdisc(q);
	if (q->has_kind && !strcmp(q->kind, "cake"))
		decode_cake(l, q, xs, xn);
}

/* fq_codel per-flow classes: the largest ldelay per qdisc major (merge_fq_codel_flows) */
struct fqflows { uint32_t major[MAXQ]; uint32_t maxdelay[MAXQ]; int n; };

static void on_class(const unsigned char *body, size_t len, void *arg)
{
	struct fqflows *f = arg;
	struct tcmsg tm;
	memcpy(&tm, body, sizeof tm);
	body += NLMSG_ALIGN(sizeof tm);
	len -= NLMSG_ALIGN(sizeof tm);
	struct attr a, sa;
	for (size_t off = 0; next_attr(body, len, &off, &a);) {
		if (a.type != TCA_STATS2)
			continue;
		for (size_t so = 0; next_attr(a.val, a.len, &so, &sa);) {
			int st = sa.type;
			const unsigned char *sv = sa.val;
			size_t sn = sa.len;
			/* u32 type (1 = class), then tc_fq_codel_cl_stats: s32 deficit,
			 * u32 ldelay, count, lastcount, dropping, s32 drop_next */
			if (st != TCA_STATS_APP || sn < 4 + 24
			    || rd32(sv) != TCA_FQ_CODEL_XSTATS_CLASS)
				continue;
			uint32_t major = tm.tcm_handle >> 16, d = rd32(sv + 8);
			int i;
			for (i = 0; i < f->n && f->major[i] != major; i++)
				;
			if (i == f->n) {
				if (f->n == MAXQ)
					continue;
				f->n++;
				f->major[i] = major;
				f->maxdelay[i] = d;
			} else if (d > f->maxdelay[i]) {
				f->maxdelay[i] = d;
			}
		}
	}
}

static void merge_fq_codel(struct qlist *l, const struct fqflows *f)
{
	for (int j = 0; j < l->n; j++) {
		struct qd *q = &l->q[j];
		if (!q->has_kind || strcmp(q->kind, "fq_codel"))
			continue;
		SET(q, F_DELAY, 0);
		for (int i = 0; i < f->n; i++)
			if (f->major[i] == q->handle >> 16)
				SET(q, F_DELAY, f->maxdelay[i]);
	}
}

static int has_fq_codel(const struct qlist *l)
{
	for (int j = 0; j < l->n; j++)
		if (l->q[j].has_kind && !strcmp(l->q[j].kind, "fq_codel"))
			return 1;
	return 0;
}

/* ------------------------------------------------------------ CSV formatting */
/* repr() of a Python float: the shortest digits that read back to v; fixed notation for
 * 1e-4 <= |v| < 1e16, else d[.ddd]e[+-]XX. */
static int py_repr(char *out, size_t size, double v)
{
	char tmp[40], dig[24];
	int nd = 0, exp10, prec, pos = 0;
	if (isnan(v))
		return snprintf(out, size, "nan");
	if (isinf(v))
		return snprintf(out, size, v < 0 ? "-inf" : "inf");
	if (v == 0)
		return snprintf(out, size, signbit(v) ? "-0.0" : "0.0");
	for (prec = 1; prec < 17; prec++) {
		snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
	char *p = tmp, *e = strchr(tmp, 'e');
	exp10 = atoi(e + 1);
	if (*p == '-') {
		out[pos++] = '-';
		p++;
	}
	for (; p < e; p++)
		if (*p != '.')
			dig[nd++] = *p;
	while (nd > 1 && dig[nd - 1] == '0')
		nd--;
	dig[nd] = 0;
	if (exp10 >= -4 && exp10 < 16) {
		if (exp10 >= 0) {
			for (int i = 0; i <= exp10; i++)
				out[pos++] = i < nd ? dig[i] : '0';
			out[pos++] = '.';
			if (nd > exp10 + 1)
				for (int i = exp10 + 1; i < nd; i++)
					out[pos++] = dig[i];
			else
				out[pos++] = '0';
		} else {
			out[pos++] = '0';
			out[pos++] = '.';
			for (int i = 0; i < -exp10 - 1; i++)
				out[pos++] = '0';
			for (int i = 0; i < nd; i++)
				out[pos++] = dig[i];
		}
		out[pos] = 0;
		return pos;
	}
	out[pos++] = dig[0];
	if (nd > 1) {
		out[pos++] = '.';
		for (int i = 1; i < nd; i++)
			out[pos++] = dig[i];
	}
	return pos + snprintf(out + pos, size - pos, "e%c%02d", exp10 < 0 ? '-' : '+',
			      abs(exp10));
}

/* Python's round(v, nd) (correctly rounded, as printf is) */
static double py_round(double v, int nd)
{
	char tmp[64];
	if (!isfinite(v) || fabs(v) > 1e15)
		return v;
	snprintf(tmp, sizeof tmp, "%.*f", nd, v);
	return strtod(tmp, NULL);
}

/* nlstats.tc_handle() */
static int tc_handle(char *out, size_t size, uint32_t h)
{
	if (h == TC_H_ROOT)
		return snprintf(out, size, "root");
	if (h == TC_H_INGRESS)
		return snprintf(out, size, "ingress");
	if (!(h & 0xFFFF))
		return snprintf(out, size, "%x:", h >> 16);
	return snprintf(out, size, "%x:%x", h >> 16, h & 0xFFFF);
}

/* a growable output buffer, written to the file at each flush */
struct obuf { char *p; size_t len, cap; };

static char *ob_room(struct obuf *b, size_t need)
{
	if (b->len + need > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 16;
		while (b->len + need > cap)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			perror("bb-qdisc-sampler: realloc");
			exit(1);
		}
		b->p = p;
		b->cap = cap;
	}
	return b->p + b->len;
}

/* one row of each qdisc, as csv.writer writes sampler.qdisc_row(t, dev, q) */
static void put_rows(struct obuf *b, const char *t, const char *dev, const struct qlist *l)
{
	static const int order[] = {F_QLEN, F_BACKLOG, F_BYTES, F_PACKETS, F_DROPS,
				    F_OVERLIMITS, F_REQUEUES, F_MARKS, F_EARLY, F_PROB,
				    F_DELAY, F_MAXQ, F_CTL_Q, F_CTL_QOLD, F_CTL_PPREV,
				    F_CTL_UPD, F_PEAK_DELAY, F_BASE_DELAY};
	for (int j = 0; j < l->n; j++) {
		const struct qd *q = &l->q[j];
		char h[24], p[24];
		char *s = ob_room(b, 1024);
		int n;
		tc_handle(h, sizeof h, q->handle);
		tc_handle(p, sizeof p, q->parent);
		n = snprintf(s, 256, "%s,%s,%s,%s,%s", t, dev, h, p, q->has_kind ? q->kind : "");
		for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
			int f = order[i];
			s[n++] = ',';
			if (!HAS(q, f))
				continue;
			if (f == F_PROB || f == F_CTL_PPREV)
				n += py_repr(s + n, 40, py_round((double)q->v[f]
					     / (q->pi ? PI_PROB_ONE : PIE_PROB_MAX), 9));
			else
				n += snprintf(s + n, 24, "%llu", (unsigned long long)q->v[f]);
		}
		s[n++] = '\n';
		b->len += n;
	}
}

/* ------------------------------------------------------------ --parse */
static unsigned char *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t cap = 0, n = 0, r;
	if (!f) {
		perror(path);
		exit(2);
	}
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			buf = realloc(buf, cap);
			if (!buf)
				exit(1);
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r);
	fclose(f);
	*size = n;
	return buf;
}

static int parse_mode(const char *qfile, const char *cfile, int ifindex, const char *dev,
		      double *ts, int nt)
{
	size_t qn, cn;
	unsigned char *qd = slurp(qfile, &qn);
	static struct qlist l;
	struct fqflows f = {.n = 0};
	struct obuf b = {0};
	int err = walk(qd, qn, 0, RTM_NEWQDISC, ifindex, on_qdisc, &l);
	if (err) {
		fprintf(stderr, "netlink error %d (%s)\n", -err, strerror(-err));
		return 1;
	}
	if (cfile && has_fq_codel(&l)) {
		unsigned char *cd = slurp(cfile, &cn);
		err = walk(cd, cn, 0, RTM_NEWTCLASS, ifindex, on_class, &f);
		if (err) {
			fprintf(stderr, "netlink error %d (%s)\n", -err, strerror(-err));
			return 1;
		}
		merge_fq_codel(&l, &f);
	}
	double one = 0.0;
	if (!nt) {
		ts = &one;
		nt = 1;
	}
	for (int i = 0; i < nt; i++) {
		char t[48];
		py_repr(t, sizeof t, py_round(ts[i], 6));
		put_rows(&b, t, dev, &l);
	}
	fwrite(b.p, 1, b.len, stdout);
	return 0;
}

/* ------------------------------------------------------------ sampling */
struct dev {
	const char *name;
	int pid;                /* 0: this namespace */
	int fd, ifindex;
	uint32_t seq;
	struct { struct nlmsghdr h; struct tcmsg t; } req;
	long dumps;
	long errors;
	char last_error[160];
};

static volatile sig_atomic_t stop_sig;
static void on_signal(int sig) { stop_sig = sig; }

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "bb-qdisc-sampler: %s%s%s: %s\n", what, detail ? " " : "",
		detail ? detail : "", strerror(errno));
	exit(1);
}

/* the device's NETLINK_ROUTE socket and ifindex, in the namespace of its pid */
static void open_dev(struct dev *d)
{
	int own = -1, target = -1;
	char path[64];
	if (d->pid) {
		snprintf(path, sizeof path, "/proc/%d/ns/net", d->pid);
		own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		target = open(path, O_RDONLY | O_CLOEXEC);
		if (own < 0 || target < 0)
			fail("open", path);
		if (setns(target, CLONE_NEWNET))
			fail("setns", path);
	}
	d->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	int saved = errno;
	d->ifindex = d->fd < 0 ? 0 : (int)if_nametoindex(d->name);
	int saved_if = errno;
	if (d->pid) {
		if (setns(own, CLONE_NEWNET))
			fail("setns back", "/proc/self/ns/net");
		close(own);
		close(target);
	}
	errno = saved;
	if (d->fd < 0)
		fail("socket", "NETLINK_ROUTE");
	errno = saved_if;
	if (!d->ifindex)
		fail("no such device", d->name);
	int rcvbuf = 1 << 20;
	struct timeval tv = {.tv_sec = 1};
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	setsockopt(d->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	setsockopt(d->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (bind(d->fd, (struct sockaddr *)&sa, sizeof sa))
		fail("bind", d->name);
	memset(&d->req, 0, sizeof d->req);
	d->req.h.nlmsg_len = sizeof d->req;
	d->req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	d->req.t.tcm_family = AF_UNSPEC;
	d->req.t.tcm_ifindex = d->ifindex;
}

/* does this datagram end the dump of `seq`? (nlstats._ends_dump) */
static int ends_dump(const unsigned char *p, size_t n, uint32_t seq)
{
	size_t off = 0;
	while (off + sizeof(struct nlmsghdr) <= n) {
		struct nlmsghdr h;
		memcpy(&h, p + off, sizeof h);
		if (h.nlmsg_seq == seq && (h.nlmsg_type == NLMSG_DONE || h.nlmsg_type == NLMSG_ERROR))
			return 1;
		if (h.nlmsg_len < sizeof h)
			return 1;
		off += NLMSG_ALIGN(h.nlmsg_len);
	}
	return 0;
}

/* one dump request of `type`; the answer's datagrams concatenated into *buf */
static int dump(struct dev *d, int type, struct obuf *buf)
{
	d->req.h.nlmsg_type = type;
	d->req.h.nlmsg_seq = ++d->seq;
	buf->len = 0;
	if (send(d->fd, &d->req, sizeof d->req, 0) < 0)
		return -errno;
	for (;;) {
		unsigned char *p = (unsigned char *)ob_room(buf, RXBUF);
		ssize_t n = recv(d->fd, p, RXBUF, 0);
		if (n < 0) {
			if (errno == EINTR && !stop_sig)
				continue;
			return -errno;
		}
		buf->len += n;
		if (ends_dump(p, n, d->seq))
			return 0;
	}
}

static void dev_error(struct dev *d, const char *what, int err)
{
	if (err == -EINTR && stop_sig)  /* the stop signal cut the last dump short */
		return;
	d->errors++;
	snprintf(d->last_error, sizeof d->last_error, "%s: [Errno %d] %s", what, -err,
		 strerror(-err));
}

static void sample(struct dev *d, const char *t, struct obuf *rx, struct obuf *out)
{
	static struct qlist l;
	struct fqflows f = {.n = 0};
	int err;
	l.n = 0;
	if ((err = dump(d, RTM_GETQDISC, rx)) ||
	    (err = walk((unsigned char *)rx->p, rx->len, d->seq, RTM_NEWQDISC, d->ifindex,
			on_qdisc, &l))) {
		dev_error(d, "RTM_GETQDISC", err);
		return;
	}
	d->dumps++;
	if (has_fq_codel(&l)) {
		if ((err = dump(d, RTM_GETTCLASS, rx)) ||
		    (err = walk((unsigned char *)rx->p, rx->len, d->seq, RTM_NEWTCLASS, d->ifindex,
				on_class, &f))) {
			dev_error(d, "RTM_GETTCLASS", err);
			return;
		}
		merge_fq_codel(&l, &f);
	}
	put_rows(out, t, d->name, &l);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= w;
	}
	return 0;
}

/* bufferbloat.core.stats.percentile(..., "nearest") */
static double percentile(const double *v, size_t n, double p)
{
	long k = (long)ceil(p / 100 * n) - 1;
	if (k < 0)
		k = 0;
	if (k > (long)n - 1)
		k = n - 1;
	return v[k];
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* ,\n "key": {"dev": the long at `off` of each device, ...} */
static void json_per_dev(FILE *f, const char *key, const struct dev *devs, int ndev,
			 size_t off)
{
	fprintf(f, ",\n \"%s\": {", key);
	for (int i = 0; i < ndev; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, devs[i].name);
		fprintf(f, ": %ld", *(const long *)((const char *)&devs[i] + off));
	}
	fputc('}', f);
}

static void usage(void)
{
	fputs("usage: bb-qdisc-sampler --t0 S --period S [--duration S] [--flush S] [--rt PRIO]\n"
	      "                        [--idle]\n"
	      "                        --out QDISC.csv --stats STATS.json [PID/]DEV...\n"
	      "       bb-qdisc-sampler --parse QDISC.bin [--class CLASS.bin] [--ifindex N]\n"
	      "                        [--dev NAME] [--t T]...\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	double t0 = NAN, period = 0.01, duration = -1, flush_s = 0.5;
	const char *out_path = NULL, *stats_path = NULL, *parse = NULL, *cls = NULL;
	const char *pdev = "dev";
	int rt = 0, pifindex = -1, nt = 0, ndev = 0, idle = 0;
	double *ts = calloc(argc, sizeof *ts);
	struct dev *devs = calloc(argc, sizeof *devs);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
#define OPT(name) (!strcmp(a, name) && (more || (usage(), 0)) && ++i)
		if (OPT("--t0")) t0 = strtod(argv[i], NULL);
		else if (OPT("--period")) period = strtod(argv[i], NULL);
		else if (OPT("--duration")) duration = strtod(argv[i], NULL);
		else if (OPT("--flush")) flush_s = strtod(argv[i], NULL);
		else if (OPT("--rt")) rt = atoi(argv[i]);
		else if (OPT("--out")) out_path = argv[i];
		else if (OPT("--stats")) stats_path = argv[i];
		else if (OPT("--parse")) parse = argv[i];
		else if (OPT("--class")) cls = argv[i];
		else if (OPT("--ifindex")) pifindex = atoi(argv[i]);
		else if (OPT("--dev")) pdev = argv[i];
		else if (OPT("--t")) ts[nt++] = strtod(argv[i], NULL);
		else if (!strcmp(a, "--idle")) idle = 1;  /* benchmark: ticks without sampling */
		else if (a[0] == '-' && a[1] == '-') usage();
		else {
			const char *slash = strchr(a, '/');
			devs[ndev].name = slash ? slash + 1 : a;
			devs[ndev].pid = slash && strncmp(a, "-/", 2) ? atoi(a) : 0;
			if (slash && devs[ndev].pid <= 0 && strncmp(a, "-/", 2))
				usage();
			ndev++;
		}
#undef OPT
	}
	if (parse)
		return parse_mode(parse, cls, pifindex, pdev, ts, nt);
	if (!out_path || !stats_path || !ndev || isnan(t0) || !(period >= 0.0001))
		usage();

	/* end with the parent (the Python sampler), whatever ends it */
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	struct sigaction sa = {.sa_handler = on_signal};  /* no SA_RESTART: wake the sleep */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (getppid() != parent)
		stop_sig = SIGTERM;
	long slack = prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0 ? 1000 : -1;
	char sched[96] = "other";
	if (rt > 0) {
		struct sched_param sp = {.sched_priority = rt};
		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
			snprintf(sched, sizeof sched, "fifo:%d", rt);
		else
			snprintf(sched, sizeof sched, "other (SCHED_FIFO refused: %s)",
				 strerror(errno));
	}
	for (int i = 0; i < ndev; i++)
		open_dev(&devs[i]);
	int ofd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (ofd < 0)
		fail("open", out_path);
	static const char header[] = "t,dev,handle,parent,kind,qlen_pkts,backlog_bytes,"
		"sent_bytes,sent_pkts,drops,overlimits,requeues,marks,early_drops,prob,"
		"delay_us,maxq_pkts,ctl_q_pkts,ctl_q_old_pkts,ctl_prob_prev,ctl_updates,"
		"peak_delay_us,base_delay_us\n";
	if (write_all(ofd, header, sizeof header - 1))
		fail("write", out_path);
	printf("ready\n");
	fflush(stdout);

	struct obuf rx = {0}, out = {0};
	size_t nstamps = 0, capstamps = 4096;
	double *stamps = malloc(capstamps * sizeof *stamps);
	long missed = 0, rows_bytes = 0;
	double cpu0 = cpu_now();
	double now = mono();
	long long k = (long long)ceil((now - t0) / period);
	if (k < 0)
		k = 0;
	double next_flush = now + flush_s;
	double end = duration >= 0 ? now + duration : INFINITY;
	const char *stopped_by = "duration";
	ob_room(&rx, RXBUF);
	ob_room(&out, 1 << 16);

	while (!stop_sig) {
		int r = sleep_until(t0 + k * period);
		if (stop_sig)
			break;
		if (r == EINTR)
			continue;
		double st = mono();
		char t[48];
		py_repr(t, sizeof t, py_round(st - t0, 6));
		if (nstamps == capstamps) {
			capstamps *= 2;
			stamps = realloc(stamps, capstamps * sizeof *stamps);
			if (!stamps)
				exit(1);
		}
		stamps[nstamps++] = st;
		size_t mark = out.len;
		for (int i = 0; i < ndev && !idle; i++)
			sample(&devs[i], t, &rx, &out);
		if (stop_sig) {
			/* the stop came during the tick: a dump may have been cut short (not an
			 * error, dev_error), so the tick is dropped whole, its stamp and its rows:
			 * every tick counted has a row per device */
			nstamps--;
			out.len = mark;
			break;
		}
		now = mono();
		k++;
		long long late = (long long)floor((now - t0) / period) - k + 1;
		if (late > 0) {
			missed += late;
			k += late;
		}
		if (now >= next_flush) {
			rows_bytes += out.len;
			if (write_all(ofd, out.p, out.len))
				fail("write", out_path);
			out.len = 0;
			next_flush = now + flush_s;
		}
		if (now >= end)
			break;
	}
	if (stop_sig)
		stopped_by = stop_sig == SIGINT ? "SIGINT" : "SIGTERM";
	rows_bytes += out.len;
	if (write_all(ofd, out.p, out.len) || close(ofd))
		fail("write", out_path);

	double cpu = cpu_now() - cpu0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu_total = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6
		+ ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
	size_t ngaps;
	double *gaps = sorted_gaps(stamps, nstamps, &ngaps);
	double wall = ngaps ? stamps[nstamps - 1] - stamps[0] : 0;

	char tmp[4096];
	FILE *f = open_tmp(tmp, sizeof tmp, stats_path);
	if (!f)
		fail("open", tmp);
	fprintf(f, "{\n \"sampler\": \"c\",\n \"period_ms\": %.6g,\n \"samples\": %zu,\n"
		" \"missed_ticks\": %ld,\n", period * 1e3, nstamps, missed);
	if (ngaps)
		fprintf(f, " \"period_p50_ms\": %.4f,\n \"period_p99_ms\": %.4f,\n"
			" \"period_max_ms\": %.4f,\n", percentile(gaps, ngaps, 50) * 1e3,
			percentile(gaps, ngaps, 99) * 1e3, gaps[ngaps - 1] * 1e3);
	else
		fprintf(f, " \"period_p50_ms\": null,\n \"period_p99_ms\": null,\n"
			" \"period_max_ms\": null,\n");
	if (nstamps)
		fprintf(f, " \"t_first\": %.6f,\n \"t_last\": %.6f,\n", stamps[0] - t0,
			stamps[nstamps - 1] - t0);
	else
		fprintf(f, " \"t_first\": null,\n \"t_last\": null,\n");
	fprintf(f, " \"cpu_s\": %.4f,\n", cpu);
	if (wall > 0)
		fprintf(f, " \"cpu_share\": %.4f,\n", cpu / wall);
	else
		fprintf(f, " \"cpu_share\": null,\n");
	fprintf(f, " \"cpu_total_s\": %.4f,\n \"cpu_per_tick_us\": %.2f,\n"
		" \"csv_bytes\": %ld,\n \"stopped_by\": \"%s\",\n \"sched\": ", cpu_total,
		nstamps ? cpu / nstamps * 1e6 : 0.0, rows_bytes, stopped_by);
	json_str(f, sched);
	fprintf(f, ",\n \"timer_slack_ns\": ");
	if (slack > 0)
		fprintf(f, "%ld", slack);
	else
		fprintf(f, "null");
	fprintf(f, ",\n \"qdisc_devs\": [");
	for (int i = 0; i < ndev; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, devs[i].name);
	}
	fprintf(f, "],\n \"errors\": {");
	int first = 1;
	for (int i = 0; i < ndev; i++) {
		if (!devs[i].errors)
			continue;
		char key[128];
		snprintf(key, sizeof key, "qdisc %s", devs[i].name);
		fprintf(f, first ? "" : ", ");
		json_str(f, key);
		fprintf(f, ": ");
		json_str(f, devs[i].last_error);
		first = 0;
	}
	fprintf(f, "},\n \"mode\": \"%s\"", idle ? "idle" : "dump");
	json_per_dev(f, "dumps", devs, ndev, offsetof(struct dev, dumps));
	json_per_dev(f, "error_count", devs, ndev, offsetof(struct dev, errors));
	fprintf(f, "\n}\n");
	if (fclose(f) || rename(tmp, stats_path))
		fail("write", stats_path);
	return 0;
}
