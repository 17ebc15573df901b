/* Wall-clock seconds for the timings the engine, the devices, the builder
 * and the CLI report: CLOCK_MONOTONIC (never steps back with the system
 * clock). Header-only. Not a profiler. */
#ifndef SW_TIMING_H
#define SW_TIMING_H

#include <time.h>

/* Seconds since an arbitrary fixed point; only differences mean anything. */
static inline double sw_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of this process, all threads (per CPU-second rates: on a shared
 * machine they say what the work cost, where wall-clock rates say how long it
 * waited too). */
static inline double sw_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
