/* bb-link-trace: replays a capacity plan on the bottleneck's HTB class, in place.
 *
 * Every PERIOD (10 ms) on the CLOCK_MONOTONIC grid t0 + k*PERIOD it reads the class's
 * counters (bytes sent, the leaf's backlog) and then sets the rate of window k, read
 * from --rates (one rate in bit/s a line, wrapping), with one RTM_NEWTCLASS that has
 * neither NLM_F_CREATE nor NLM_F_EXCL: `tc class change` semantics. The kernel changes
 * the class's rate and burst under its tree lock; the leaf qdisc (the AQM), its queue,
 * state and counters are not touched. A rate equal to the one set last is not sent.
 * Ticks whose time has passed are skipped and counted as missed (the rate of the
 * window it is then is set), never drifting.
 *
 *   bb-link-trace --rates FILE --dev [PID/]DEV --t0 MONO_S --out CSV --stats JSON
 *                 [--period S] [--duration S] [--burst-ms MS] [--rt PRIO]
 *
 * PID/DEV: the device in PID's network namespace. --burst-ms 0 (default): tc's burst,
 * one MTU (1600 bytes) at every rate; else MS of the rate's bytes, 1600 B..64 KiB.
 * Prints "ready" on stdout once the socket is open and the first rate set; ends on
 * SIGTERM/SIGINT (and with its parent) or after --duration, writing --stats.
 * CSV: t_s,window,rate_bps,sent_bytes,backlog_bytes,qlen_pkts,drops: t_s when the
 * counters' answer came (s after t0), just before window's rate was set (the end of the
 * window before); rate_bps the rate the class then has (the one before, if the change
 * failed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/gen_stats.h>
#include <math.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bb_tick.h"

static volatile sig_atomic_t stop_sig;
static void on_signal(int s) { stop_sig = s; }

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "bb-link-trace: %s %s: %s\n", what, arg ? arg : "",
		errno ? strerror(errno) : "");
	exit(1);
}

static int nl_fd;
static uint32_t nl_seq;
static int ifindex;
static char rx[1 << 16];

struct req {
	struct nlmsghdr n;
	struct tcmsg t;
	char buf[512];
};

static struct rtattr *add_attr(struct nlmsghdr *n, int type, const void *data, int len)
{
	struct rtattr *rta = (struct rtattr *)((char *)n + NLMSG_ALIGN(n->nlmsg_len));
	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	n->nlmsg_len = NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

static void init_req(struct req *r, int type, int flags)
{
	memset(r, 0, sizeof *r);
	r->n.nlmsg_len = NLMSG_LENGTH(sizeof r->t);
	r->n.nlmsg_type = type;
	r->n.nlmsg_flags = NLM_F_REQUEST | flags;
	r->n.nlmsg_seq = ++nl_seq;
	r->t.tcm_family = AF_UNSPEC;
	r->t.tcm_ifindex = ifindex;
	r->t.tcm_parent = 0x10000;  /* 1: */
	r->t.tcm_handle = 0x10001;  /* 1:1 */
}

struct counters {
	uint64_t bytes;
	uint32_t backlog, qlen, drops;
	int ok;
};

static void parse_stats(struct nlmsghdr *h, struct counters *c)
{
	struct tcmsg *t = NLMSG_DATA(h);
	int len = h->nlmsg_len - NLMSG_LENGTH(sizeof *t);
	for (struct rtattr *a = (struct rtattr *)((char *)t + NLMSG_ALIGN(sizeof *t));
	     RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type != TCA_STATS2)
			continue;
		int l2 = RTA_PAYLOAD(a);
		for (struct rtattr *s = RTA_DATA(a); RTA_OK(s, l2); s = RTA_NEXT(s, l2)) {
			if (s->rta_type == TCA_STATS_BASIC &&
			    RTA_PAYLOAD(s) >= sizeof(struct gnet_stats_basic)) {
				struct gnet_stats_basic b;
				memcpy(&b, RTA_DATA(s), sizeof b);
				c->bytes = b.bytes;
				c->ok = 1;
			} else if (s->rta_type == TCA_STATS_QUEUE &&
				   RTA_PAYLOAD(s) >= sizeof(struct gnet_stats_queue)) {
				struct gnet_stats_queue q;
				memcpy(&q, RTA_DATA(s), sizeof q);
				c->backlog = q.backlog;
				c->qlen = q.qlen;
				c->drops = q.drops;
			}
		}
	}
}

/* Send r and read until its ACK/error (or, for a GET, its answer); 0 or -errno. */
static int talk(struct req *r, struct counters *c)
{
	if (send(nl_fd, r, r->n.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(nl_fd, rx, sizeof rx, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)rx; NLMSG_OK(h, n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != r->n.nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error;
			}
			if (h->nlmsg_type == RTM_NEWTCLASS && c) {
				parse_stats(h, c);
				return 0;
			}
		}
	}
}

static int read_counters(struct counters *c)
{
	struct req r;
	init_req(&r, RTM_GETTCLASS, NLM_F_ECHO);  /* the answer is a notification: echoed to us */
	memset(c, 0, sizeof *c);
	return talk(&r, c);
}

static double burst_ms;

static int set_rate(uint64_t bps)
{
	struct req r;
	init_req(&r, RTM_NEWTCLASS, NLM_F_ACK);  /* no CREATE, no EXCL: change */
	struct tc_htb_opt o;
	memset(&o, 0, sizeof o);
	uint64_t Bps = bps / 8 ? bps / 8 : 1;
	o.rate.rate = o.ceil.rate = (uint32_t)Bps;
	o.rate.linklayer = o.ceil.linklayer = TC_LINKLAYER_ETHERNET;
	double burst = 1600;
	if (burst_ms > 0) {
		burst = Bps * burst_ms / 1e3;
		burst = burst < 1600 ? 1600 : burst > 65536 ? 65536 : burst;
	}
	/* psched ticks: 64 ns each, as tc computes them */
	double ticks = burst / (double)Bps * 1e9 / 64.0;
	o.buffer = o.cbuffer = ticks > 4e9 ? 4000000000u : (uint32_t)ticks;
	uint64_t q = Bps / 10;
	o.quantum = q < 1000 ? 1000 : q > 200000 ? 200000 : (uint32_t)q;
	add_attr(&r.n, TCA_KIND, "htb", 4);
	struct rtattr *nest = add_attr(&r.n, TCA_OPTIONS, NULL, 0);
	add_attr(&r.n, TCA_HTB_PARMS, &o, sizeof o);
	nest->rta_len = (char *)&r + r.n.nlmsg_len - (char *)nest;
	return talk(&r, NULL);
}

static void usage(void)
{
	fprintf(stderr, "usage: bb-link-trace --rates FILE --dev [PID/]DEV --t0 MONO_S "
		"--out CSV --stats JSON [--period S] [--duration S] [--burst-ms MS] "
		"[--rt PRIO]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *rates_path = NULL, *dev = NULL, *out_path = NULL, *stats_path = NULL;
	double t0 = NAN, period = 0.01, duration = -1;
	int rt = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (!strcmp(a, "--rates")) rates_path = v;
		else if (!strcmp(a, "--dev")) dev = v;
		else if (!strcmp(a, "--out")) out_path = v;
		else if (!strcmp(a, "--stats")) stats_path = v;
		else if (!strcmp(a, "--t0")) t0 = atof(v);
		else if (!strcmp(a, "--period")) period = atof(v);
		else if (!strcmp(a, "--duration")) duration = atof(v);
		else if (!strcmp(a, "--burst-ms")) burst_ms = atof(v);
		else if (!strcmp(a, "--rt")) rt = atoi(v);
		else usage();
		i++;
	}
	if (!rates_path || !dev || !out_path || !stats_path || !(period >= 0.001))
		usage();

	size_t n = 0, cap = 4096;
	uint64_t *rates = malloc(cap * sizeof *rates);
	FILE *rf = fopen(rates_path, "r");
	if (!rf)
		die("open", rates_path);
	unsigned long long x;
	while (fscanf(rf, "%llu", &x) == 1) {
		if (n == cap && !(rates = realloc(rates, (cap *= 2) * sizeof *rates)))
			die("memory", NULL);
		rates[n++] = x < 1000 ? 1000 : x;
	}
	int bad = !feof(rf);
	fclose(rf);
	if (bad) {
		errno = 0;
		die("not one integer rate (bit/s) a line:", rates_path);
	}
	if (!n) {
		errno = 0;
		die("no rates in", rates_path);
	}

	const char *slash = strchr(dev, '/');
	if (slash) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/net", atoi(dev));
		int nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0 || setns(nsfd, CLONE_NEWNET))
			die("setns", path);
		close(nsfd);
		dev = slash + 1;
	}
	ifindex = if_nametoindex(dev);
	if (!ifindex)
		die("no device", dev);
	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct sockaddr_nl sa_nl = {.nl_family = AF_NETLINK};
	if (nl_fd < 0 || bind(nl_fd, (struct sockaddr *)&sa_nl, sizeof sa_nl))
		die("netlink", NULL);
	/* an answer that never comes costs a tick or two, never the loop */
	struct timeval tv = {.tv_sec = 0, .tv_usec = 20000};
	setsockopt(nl_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (getppid() != parent)
		stop_sig = SIGTERM;
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	char sched[96] = "other";
	if (rt > 0) {
		struct sched_param sp = {.sched_priority = rt};
		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
			snprintf(sched, sizeof sched, "fifo:%d", rt);
	}
	FILE *out = fopen(out_path, "w");
	if (!out)
		die("open", out_path);
	fprintf(out, "t_s,window,rate_bps,sent_bytes,backlog_bytes,qlen_pkts,drops\n");

	double now = mono();
	if (isnan(t0))
		t0 = now;
	long long k = (long long)floor((now - t0) / period);
	if (k < 0)
		k = 0;
	int err = set_rate(rates[k % n]);
	if (err) {
		errno = -err;
		die("RTM_NEWTCLASS (change) on", dev);
	}
	uint64_t last = rates[k % n];
	k++;
	printf("ready\n");
	fflush(stdout);

	size_t cstamps = 4096, nstamps = 0;
	double *stamps = malloc(cstamps * sizeof *stamps);
	long missed = 0, changes = 1, errors = 0, read_errors = 0;
	int last_err = 0;
	double end = duration >= 0 ? now + duration : INFINITY;
	while (!stop_sig) {
		if (sleep_until(t0 + k * period) == EINTR || stop_sig)
			continue;       /* a signal: the loop's test ends it, else sleep again */
		double st = mono();
		/* late past the next tick: the windows gone are missed, set the current one */
		long long behind = (long long)floor((st - t0) / period) - k;
		if (behind > 0) {
			missed += behind;
			k += behind;
		}
		if (nstamps == cstamps && !(stamps = realloc(stamps, (cstamps *= 2) * sizeof *stamps)))
			die("memory", NULL);
		stamps[nstamps++] = st;
		struct counters c;
		if (read_counters(&c) || !c.ok)
			read_errors++;
		/* the counters' time: when the kernel answered (a loop preempted between its
		 * wake-up and the read would otherwise date them early) */
		double tr = mono();
		uint64_t rate = rates[k % n];
		if (rate != last) {
			int e = set_rate(rate);
			if (e) {
				errors++;
				last_err = e;
			} else {
				last = rate;
				changes++;
			}
		}
		fprintf(out, "%.6f,%lld,%llu,%llu,%u,%u,%u\n", tr - t0, k,
			(unsigned long long)last, (unsigned long long)c.bytes, c.backlog,
			c.qlen, c.drops);
		k++;
		if (mono() >= end)
			break;
	}
	if (fclose(out))
		die("write", out_path);

	size_t ng;
	double *gaps = sorted_gaps(stamps, nstamps, &ng);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	char tmp[4096];
	FILE *f = open_tmp(tmp, sizeof tmp, stats_path);
	if (!f)
		die("open", tmp);
	fprintf(f, "{\n \"loop\": \"bb-link-trace\",\n \"period_ms\": %.6g,\n"
		" \"ticks\": %zu,\n \"missed_ticks\": %ld,\n \"changes\": %ld,\n"
		" \"change_errors\": %ld,\n \"last_error\": \"%s\",\n \"read_errors\": %ld,\n"
		" \"period_p50_ms\": %.4f,\n \"period_p99_ms\": %.4f,\n \"period_max_ms\": %.4f,\n"
		" \"cpu_s\": %.4f,\n \"sched\": \"%s\",\n \"stopped_by\": \"%s\"\n}\n",
		period * 1e3, nstamps, missed, changes, errors,
		last_err ? strerror(-last_err) : "", read_errors,
		ng ? gaps[ng / 2] * 1e3 : 0.0, ng ? gaps[(size_t)(ng * 0.99)] * 1e3 : 0.0,
		ng ? gaps[ng - 1] * 1e3 : 0.0,
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec
		+ ru.ru_stime.tv_usec * 1e-6, sched,
		stop_sig == SIGINT ? "SIGINT" : stop_sig ? "SIGTERM" : "duration");
	if (fclose(f) || rename(tmp, stats_path))
		die("write", stats_path);
	return 0;
}
