/* Server metrics in the Prometheus text exposition format (version 0.0.4).
 * Request and latency series and the speculative counters use vLLM's names
 * (vllm:*), so existing vLLM dashboards read them; HTTP status counts are
 * specwright's own. Not thread-safe on its own: the server holds its lock. */
#ifndef SW_SERVE_METRICS_H
#define SW_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

#define SW_HIST_MAX_BUCKETS 20

typedef struct sw_hist {
	int n;                              /* finite upper bounds */
	double le[SW_HIST_MAX_BUCKETS];
	uint64_t count[SW_HIST_MAX_BUCKETS + 1]; /* per bucket (not cumulative); last = +Inf */
	double sum;
	uint64_t total;
} sw_hist;

enum { SW_EP_COMPLETIONS = 0, SW_EP_CHAT, SW_EP_MODELS, SW_EP_HEALTH, SW_EP_METRICS, SW_EP_OTHER, SW_EP_N };
#define SW_STATUS_SLOTS 8 /* 200 400 404 405 413 429 500 503 */
/* why a connection was refused or evicted: its address at its cap, or the table full */
enum { SW_CONN_CLIENT_CAP = 0, SW_CONN_TABLE_FULL, SW_CONN_REASONS };

typedef struct sw_metrics {
	uint64_t http[SW_EP_N][SW_STATUS_SLOTS];
	uint64_t success[3];                /* finish reason: stop, length, abort */
	uint64_t prompt_tokens, generation_tokens;
	int running, waiting;
	sw_hist ttft, itl, e2e, queue_time;
	uint64_t n_drafts, n_draft_tokens, n_accepted;
	uint64_t accepted_by_pos[SW_SERVE_MAX_POS];
	int n_pos;
	/* connections: open (the table, those being closed left out), refused
	 * at accept, evicted while idle, shut at the header deadline */
	int conn_open;
	uint64_t conn_refused[SW_CONN_REASONS], conn_evicted[SW_CONN_REASONS], conn_timed_out;
} sw_metrics;

void sw_metrics_init(sw_metrics *m);
void sw_hist_observe(sw_hist *h, double v);
void sw_metrics_http(sw_metrics *m, int endpoint, int status);
void sw_metrics_add_gen(sw_metrics *m, const sw_serve_gen *g);
/* The exposition text (malloc'ed, NUL-terminated) or NULL. */
char *sw_metrics_render(const sw_metrics *m, const char *model, size_t *len);

#endif
