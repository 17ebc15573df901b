/* The host thread pool (host_pool.h). Workers wait for a new generation of
 * the job word: first spinning for up to SPIN_NS (the next GEMM of a layer
 * usually comes within that, and a futex wake costs tens of microseconds),
 * then asleep on `go`. Parts are handed out by an atomic counter, so a
 * worker descheduled by another process delays only the part it holds. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "host_pool.h"

#define HP_MAX_THREADS 256

static struct {
	pthread_once_t once;
	pthread_mutex_t mu, run_mu; /* mu: the job fields below; run_mu: one job at a time */
	pthread_cond_t go, done;
	int n_threads;              /* workers + 1 */
	long spin_ns;
	atomic_int gen;             /* bumped (under mu) to publish a job */
	hp_fn fn;
	void *ctx;
	int n_parts;
	atomic_int next;            /* the next part to hand out */
	int done_parts;             /* parts finished (under mu) */
	int active;                 /* workers inside a job (under mu) */
} P = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
       .run_mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static int take_parts(hp_fn fn, void *ctx, int n)
{
	int k = 0;
	for (int i; (i = atomic_fetch_add(&P.next, 1)) < n; k++)
		fn(ctx, i, n);
	return k;
}

static void *worker(void *arg)
{
	int seen = atomic_load(&P.gen);
	(void)arg;
	for (;;) {
		/* bounded spin, then sleep: never a core spent on an idle pool */
		const long t0 = now_ns();
		for (int i = 0; atomic_load_explicit(&P.gen, memory_order_acquire) == seen; i++) {
			if ((i & 63) == 63 && now_ns() - t0 > P.spin_ns)
				break;
			cpu_relax();
		}
		pthread_mutex_lock(&P.mu);
		while (atomic_load(&P.gen) == seen)
			pthread_cond_wait(&P.go, &P.mu);
		seen = atomic_load(&P.gen);
		hp_fn fn = P.fn;
		void *ctx = P.ctx;
		const int n = P.n_parts;
		P.active++;
		pthread_mutex_unlock(&P.mu);
		const int k = take_parts(fn, ctx, n);
		pthread_mutex_lock(&P.mu);
		P.done_parts += k;
		P.active--;
		if (P.done_parts == n || P.active == 0)
			pthread_cond_broadcast(&P.done);
		pthread_mutex_unlock(&P.mu);
	}
	return NULL;
}

static void pool_init(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	const char *e = getenv("SW_THREADS");
	if (e && *e)
		n = strtol(e, NULL, 10);
	n = n < 1 ? 1 : n > HP_MAX_THREADS ? HP_MAX_THREADS : n;
	const char *s = getenv("SW_SPIN_US");
	P.spin_ns = (s && *s ? strtol(s, NULL, 10) : 50) * 1000L;
	P.n_threads = 1;
	for (long i = 1; i < n; i++) {
		pthread_t th;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &at, worker, NULL) == 0)
			P.n_threads++;
		pthread_attr_destroy(&at);
	}
}

int hp_threads(void)
{
	pthread_once(&P.once, pool_init);
	return P.n_threads;
}

void hp_run(hp_fn fn, void *ctx, int n_parts)
{
	if (n_parts <= 1 || hp_threads() == 1 || pthread_mutex_trylock(&P.run_mu) != 0) {
		for (int i = 0; i < n_parts; i++)
			fn(ctx, i, n_parts);
		return;
	}
	pthread_mutex_lock(&P.mu);
	/* a worker that woke late for the previous job may still be about to
	 * read `next`: let it leave before the counter is reset */
	while (P.active > 0)
		pthread_cond_wait(&P.done, &P.mu);
	P.fn = fn;
	P.ctx = ctx;
	P.n_parts = n_parts;
	P.done_parts = 0;
	atomic_store(&P.next, 0);
	atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
	pthread_cond_broadcast(&P.go);
	pthread_mutex_unlock(&P.mu);
	const int k = take_parts(fn, ctx, n_parts);
	pthread_mutex_lock(&P.mu);
	P.done_parts += k;
	while (P.done_parts < n_parts)
		pthread_cond_wait(&P.done, &P.mu);
	pthread_mutex_unlock(&P.mu);
	pthread_mutex_unlock(&P.run_mu);
}
