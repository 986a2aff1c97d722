/* bb-departures: a tracefs instance's trace_pipe (net:net_dev_queue and net:net_dev_xmit
 * events, trace_clock mono) read while the run goes, each departure paired with its
 * enqueue as it is read, written as series/departures.csv
 * (bufferbloat/measure/departures.py: the same rows as its Python conversion).
 *
 *   bb-departures PIPE T0 OUT.csv STATS.json
 *
 * PIPE: the instance's trace_pipe; T0: the run's t0 (CLOCK_MONOTONIC seconds): a row's
 * t is the departure's time minus T0. Reads without blocking (a pause of 50 ms when the
 * pipe is empty) until SIGTERM/SIGINT, then drains what is left, writes STATS
 * ({"events", "departures", "unpaired", "skipped_lines", "cpu_s"}) and exits 0.
 * Why compiled: under TCG a Python conversion took ~0.1 ms per departure (6.7 s for
 * study C's 59,000), after the traffic; this costs a few us per event, during it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEVS 16
#define TABLE_BITS 18
#define TABLE_SIZE (1u << TABLE_BITS)
/* an enqueue older than this without its departure was dropped: its slot is reused */
#define STALE_S 30.0

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

struct slot { uint64_t key; double t; };     /* key 0: empty */
static struct slot table[TABLE_SIZE];
static unsigned used;

static char devs[MAX_DEVS][32];
static double last_departure[MAX_DEVS];
static int ndevs;

static unsigned long long events, departures, unpaired, skipped;

static int dev_index(const char *name, size_t n)
{
    for (int i = 0; i < ndevs; i++)
        if (strlen(devs[i]) == n && memcmp(devs[i], name, n) == 0)
            return i;
    if (ndevs == MAX_DEVS || n >= sizeof devs[0])
        return -1;
    memcpy(devs[ndevs], name, n);
    devs[ndevs][n] = 0;
    last_departure[ndevs] = -1.0;
    return ndevs++;
}

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return k;
}

static void table_prune(double now)
{
    /* rebuild without the stale entries (dropped packets whose address never came back) */
    static struct slot keep[TABLE_SIZE];
    unsigned n = 0;
    for (unsigned i = 0; i < TABLE_SIZE; i++)
        if (table[i].key && now - table[i].t < STALE_S)
            keep[n++] = table[i];
    memset(table, 0, sizeof table);
    used = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned h = mix(keep[i].key) & (TABLE_SIZE - 1);
        while (table[h].key)
            h = (h + 1) & (TABLE_SIZE - 1);
        table[h] = keep[i];
        used++;
    }
}

static void table_put(uint64_t key, double t)
{
    if (used > TABLE_SIZE / 4 * 3)
        table_prune(t);
    if (used > TABLE_SIZE / 4 * 3)     /* nothing stale: forget all rather than loop */
        memset(table, 0, sizeof table), used = 0;
    unsigned h = mix(key) & (TABLE_SIZE - 1);
    while (table[h].key && table[h].key != key)
        h = (h + 1) & (TABLE_SIZE - 1);
    if (!table[h].key)
        used++;
    table[h].key = key;
    table[h].t = t;
}

/* the enqueue time of key (removed), or -1 */
static double table_take(uint64_t key)
{
    unsigned h = mix(key) & (TABLE_SIZE - 1);
    while (table[h].key) {
        if (table[h].key == key) {
            double t = table[h].t;
            /* backward-shift deletion keeps the probe chains whole */
            unsigned i = h, j = h;
            for (;;) {
                j = (j + 1) & (TABLE_SIZE - 1);
                if (!table[j].key)
                    break;
                unsigned home = mix(table[j].key) & (TABLE_SIZE - 1);
                if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
                    table[i] = table[j];
                    i = j;
                }
            }
            table[i].key = 0;
            used--;
            return t;
        }
        h = (h + 1) & (TABLE_SIZE - 1);
    }
    return -1.0;
}

static FILE *out;
static double t0;

/* one line of trace_pipe text:
 *   <task>-<pid> [cpu] flags  12345.678901: net_dev_xmit: dev=s0-eth2 skbaddr=0000...a len=1514 rc=0 */
static void handle(char *line)
{
    char *ev = strstr(line, ": net_dev_");
    if (!ev) {
        skipped++;
        return;
    }
    char *p = ev;
    while (p > line && p[-1] != ' ')
        p--;
    double t = strtod(p, NULL);
    char *kind = ev + 10;
    int queue = strncmp(kind, "queue: ", 7) == 0;
    int xmit = strncmp(kind, "xmit: ", 6) == 0;
    char *dev = strstr(kind, "dev="), *skb = strstr(kind, "skbaddr="), *len = strstr(kind, " len=");
    if ((!queue && !xmit) || !dev || !skb || !len || t <= 0) {
        skipped++;
        return;
    }
    dev += 4;
    size_t dn = strcspn(dev, " ");
    int d = dev_index(dev, dn);
    if (d < 0) {
        skipped++;
        return;
    }
    uint64_t addr = strtoull(skb + 8, NULL, 16);
    uint64_t key = (addr * MAX_DEVS + (uint64_t)d) | 1;   /* never 0 */
    events++;
    if (queue) {
        table_put(key, t);
        return;
    }
    long length = strtol(len + 5, NULL, 10);
    double e = table_take(key);
    int backlogged = e >= 0 && last_departure[d] >= 0 && e <= last_departure[d];
    departures++;
    if (e < 0) {
        unpaired++;
        fprintf(out, "%.6f,%s,%ld,,%d\n", t - t0, devs[d], length, backlogged);
    } else {
        fprintf(out, "%.6f,%s,%ld,%.4f,%d\n", t - t0, devs[d], length, (t - e) * 1e3,
                backlogged);
    }
    last_departure[d] = t;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bb-departures PIPE T0 OUT.csv STATS.json\n");
        return 2;
    }
    t0 = strtod(argv[2], NULL);
    int fd = open(argv[1], O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "bb-departures: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    out = fopen(argv[3], "w");
    if (!out) {
        fprintf(stderr, "bb-departures: %s: %s\n", argv[3], strerror(errno));
        return 1;
    }
    static char obuf[1 << 16];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);
    fputs("t,dev,len_bytes,sojourn_ms,backlogged\n", out);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* ready: the parent waits for this line before it enables the events */
    fputs("ready\n", stderr);
    fflush(stderr);

    static char buf[1 << 16];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n > 0) {
            have += (size_t)n;
            buf[have] = 0;
            char *start = buf, *nl;
            while ((nl = memchr(start, '\n', have - (size_t)(start - buf)))) {
                *nl = 0;
                handle(start);
                start = nl + 1;
            }
            have -= (size_t)(start - buf);
            memmove(buf, start, have);
            if (have == sizeof buf - 1)        /* a line longer than the buffer */
                have = 0, skipped++;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            fprintf(stderr, "bb-departures: read: %s\n", strerror(errno));
            break;
        }
        if (stop_requested)
            break;                              /* drained: the pipe had nothing left */
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "bb-departures: %s: %s\n", argv[3], strerror(errno));
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec
                 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    FILE *st = fopen(argv[4], "w");
    if (!st)
        return 1;
    fprintf(st, "{\"events\": %llu, \"departures\": %llu, \"unpaired\": %llu, "
                "\"skipped_lines\": %llu, \"cpu_s\": %.3f}\n",
            events, departures, unpaired, skipped, cpu);
    return fclose(st) == 0 ? 0 : 1;
}
