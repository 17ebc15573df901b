/* A persistent thread pool for the host backend's kernels: one process-wide
 * set of workers sized to the online cores ($SW_THREADS overrides), which
 * spin for a short bounded while after a job and then sleep on a condition
 * variable, so an oversubscribed machine costs a few microseconds per job,
 * not a core. Not a general scheduler: one job at a time; a second caller
 * (another thread, or a job that itself calls the pool) runs its parts
 * serially on its own thread rather than wait. */
#ifndef RT_HOST_POOL_H
#define RT_HOST_POOL_H

/* One part of a job: parts 0 .. n_parts - 1, in any order, on any thread. */
typedef void (*hp_fn)(void *ctx, int part, int n_parts);

/* Runs fn(ctx, i, n_parts) for every i, the caller taking parts too;
 * returns when all are done. n_parts <= 1 runs on the caller. */
void hp_run(hp_fn fn, void *ctx, int n_parts);
/* The number of threads a job can use (workers + the caller), >= 1. */
int hp_threads(void);

#endif
