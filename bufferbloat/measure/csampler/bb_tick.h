/* The tick grid the compiled helpers share: the monotonic clock, an absolute sleep to
 * a tick's time, and the order of doubles their period percentiles sort with. */
#ifndef BB_TICK_H
#define BB_TICK_H
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleep until monotonic time `due` (s) unless it has passed: 0, or EINTR (a signal). */
static int sleep_until(double due)
{
	if (due <= mono())
		return 0;
	struct timespec w;
	w.tv_sec = (time_t)floor(due);
	w.tv_nsec = (long)((due - floor(due)) * 1e9);
	if (w.tv_nsec >= 1000000000L)
		w.tv_nsec = 999999999L;
	return clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &w, NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The sorted gaps between n tick stamps (*ng = n - 1 of them, or 0). */
static double *sorted_gaps(const double *stamps, size_t n, size_t *ng)
{
	*ng = n > 1 ? n - 1 : 0;
	double *gaps = malloc((*ng + 1) * sizeof *gaps);
	if (!gaps)
		exit(1);
	for (size_t i = 0; i < *ng; i++)
		gaps[i] = stamps[i + 1] - stamps[i];
	qsort(gaps, *ng, sizeof *gaps, cmp_double);
	return gaps;
}

/* A stats file is written to PATH.tmp (named in tmp) and renamed when complete. */
static FILE *open_tmp(char *tmp, size_t n, const char *path)
{
	snprintf(tmp, n, "%s.tmp", path);
	return fopen(tmp, "w");
}
#endif
