/* Prometheus text for sw_metrics: HELP/TYPE lines, cumulative histogram
 * buckets with le="+Inf", _sum and _count, label values escaped. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static const int status_codes[SW_STATUS_SLOTS] = {200, 400, 404, 405, 413, 429, 500, 503};
static const char *const ep_names[SW_EP_N] = {"/v1/completions", "/v1/chat/completions", "/v1/models",
                                             "/health", "/metrics", "other"};
static const char *const finish_names[3] = {"stop", "length", "abort"};
static const char *const conn_reasons[SW_CONN_REASONS] = {"client_cap", "table_full"};

static void hist_init(sw_hist *h, const double *le, int n)
{
	memset(h, 0, sizeof(*h));
	h->n = n;
	memcpy(h->le, le, sizeof(*le) * (size_t)n);
}

void sw_metrics_init(sw_metrics *m)
{
	/* vLLM's bucket bounds for these series */
	static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
	                              0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
	static const double itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
	                             0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
	static const double e2e[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
	                             20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};
	memset(m, 0, sizeof(*m));
	hist_init(&m->ttft, ttft, (int)(sizeof(ttft) / sizeof(*ttft)));
	hist_init(&m->itl, itl, (int)(sizeof(itl) / sizeof(*itl)));
	hist_init(&m->e2e, e2e, (int)(sizeof(e2e) / sizeof(*e2e)));
	hist_init(&m->queue_time, e2e, (int)(sizeof(e2e) / sizeof(*e2e)));
}

void sw_hist_observe(sw_hist *h, double v)
{
	int i = 0;
	while (i < h->n && v > h->le[i])
		i++;
	h->count[i]++;
	h->sum += v;
	h->total++;
}

void sw_metrics_http(sw_metrics *m, int endpoint, int status)
{
	for (int i = 0; i < SW_STATUS_SLOTS; i++)
		if (status_codes[i] == status) {
			m->http[endpoint][i]++;
			return;
		}
	m->http[endpoint][6]++; /* anything else counts as a server error */
}

void sw_metrics_add_gen(sw_metrics *m, const sw_serve_gen *g)
{
	m->n_drafts += g->n_drafts;
	m->n_draft_tokens += g->n_draft_tokens;
	m->n_accepted += g->n_accepted;
	for (int i = 0; i < g->n_pos && i < SW_SERVE_MAX_POS; i++)
		m->accepted_by_pos[i] += g->accepted_by_pos[i];
	if (g->n_pos > m->n_pos)
		m->n_pos = g->n_pos < SW_SERVE_MAX_POS ? g->n_pos : SW_SERVE_MAX_POS;
}

typedef struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (w < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)w < b->cap - b->n) {
			b->n += (size_t)w;
			return;
		}
		size_t cap = 2 * b->cap + (size_t)w + 1024;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
}

/* A label value: backslash, double quote and newline escaped. */
static void label_escape(char *out, size_t cap, const char *s)
{
	size_t j = 0;
	for (; *s && j + 3 < cap; s++) {
		if (*s == '\\' || *s == '"') {
			out[j++] = '\\';
			out[j++] = *s;
		} else if (*s == '\n') {
			out[j++] = '\\';
			out[j++] = 'n';
		} else {
			out[j++] = *s;
		}
	}
	out[j] = 0;
}

static void hist(sbuf *b, const char *name, const char *help, const sw_hist *h, const char *lbl)
{
	put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	uint64_t cum = 0;
	for (int i = 0; i < h->n; i++) {
		cum += h->count[i];
		put(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, lbl, h->le[i], (unsigned long long)cum);
	}
	cum += h->count[h->n];
	put(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, lbl, (unsigned long long)cum);
	put(b, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, lbl, h->sum, name, lbl,
	    (unsigned long long)h->total);
}

static void counter(sbuf *b, const char *name, const char *help, const char *lbl, uint64_t v)
{
	put(b, "# HELP %s %s\n# TYPE %s counter\n%s{%s} %llu\n", name, help, name, name, lbl,
	    (unsigned long long)v);
}

static void gauge(sbuf *b, const char *name, const char *help, const char *lbl, double v)
{
	put(b, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %g\n", name, help, name, name, lbl, v);
}

char *sw_metrics_render(const sw_metrics *m, const char *model, size_t *len)
{
	sbuf b = {0};
	char esc[300], lbl[340];
	label_escape(esc, sizeof(esc), model);
	snprintf(lbl, sizeof(lbl), "model_name=\"%s\"", esc);

	put(&b, "# HELP specwright_http_requests_total HTTP requests answered, by endpoint and status code.\n"
	        "# TYPE specwright_http_requests_total counter\n");
	for (int e = 0; e < SW_EP_N; e++)
		for (int i = 0; i < SW_STATUS_SLOTS; i++)
			if (m->http[e][i])
				put(&b, "specwright_http_requests_total{endpoint=\"%s\",code=\"%d\"} %llu\n", ep_names[e],
				    status_codes[i], (unsigned long long)m->http[e][i]);
	gauge(&b, "vllm:num_requests_running", "Requests being generated (at most one: one sequence at a time).",
	      lbl, m->running);
	gauge(&b, "vllm:num_requests_waiting", "Requests waiting in the FIFO queue.", lbl, m->waiting);
	put(&b, "# HELP vllm:request_success_total Finished requests, by finish reason.\n"
	        "# TYPE vllm:request_success_total counter\n");
	for (int i = 0; i < 3; i++)
		put(&b, "vllm:request_success_total{%s,finished_reason=\"%s\"} %llu\n", lbl, finish_names[i],
		    (unsigned long long)m->success[i]);
	counter(&b, "vllm:prompt_tokens_total", "Prompt tokens processed.", lbl, m->prompt_tokens);
	counter(&b, "vllm:generation_tokens_total", "Generated tokens.", lbl, m->generation_tokens);
	hist(&b, "vllm:time_to_first_token_seconds", "Time from arrival to the first generated token.", &m->ttft,
	     lbl);
	hist(&b, "vllm:inter_token_latency_seconds",
	     "Time between consecutive tokens as the client sees them (tokens of one iteration arrive together).",
	     &m->itl, lbl);
	hist(&b, "vllm:e2e_request_latency_seconds", "Time from arrival to the last token.", &m->e2e, lbl);
	hist(&b, "vllm:request_queue_time_seconds", "Time spent waiting in the queue.", &m->queue_time, lbl);
	counter(&b, "vllm:spec_decode_num_drafts_total", "Speculative iterations that drafted.", lbl, m->n_drafts);
	counter(&b, "vllm:spec_decode_num_draft_tokens_total", "Draft tokens proposed.", lbl, m->n_draft_tokens);
	counter(&b, "vllm:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", lbl, m->n_accepted);
	put(&b, "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted draft tokens by position.\n"
	        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n");
	for (int i = 0; i < m->n_pos; i++)
		put(&b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%d\"} %llu\n", lbl, i,
		    (unsigned long long)m->accepted_by_pos[i]);
	put(&b, "# HELP specwright_connections_open Open client connections (the table; those the server is "
	        "closing left out).\n# TYPE specwright_connections_open gauge\nspecwright_connections_open %d\n",
	    m->conn_open);
	put(&b, "# HELP specwright_connections_refused_total Connections closed unanswered at accept: their "
	        "address at its cap (--max-connections-per-client) or the table full (--max-connections), "
	        "with no idle connection to evict.\n# TYPE specwright_connections_refused_total counter\n");
	for (int i = 0; i < SW_CONN_REASONS; i++)
		put(&b, "specwright_connections_refused_total{reason=\"%s\"} %llu\n", conn_reasons[i],
		    (unsigned long long)m->conn_refused[i]);
	put(&b, "# HELP specwright_connections_evicted_total Idle connections closed to make room for a new "
	        "one: the oldest of its address at the cap, or the oldest of all when the table is full.\n"
	        "# TYPE specwright_connections_evicted_total counter\n");
	for (int i = 0; i < SW_CONN_REASONS; i++)
		put(&b, "specwright_connections_evicted_total{reason=\"%s\"} %llu\n", conn_reasons[i],
		    (unsigned long long)m->conn_evicted[i]);
	put(&b, "# HELP specwright_connections_timed_out_total Connections closed for sending no complete "
	        "request within --header-timeout.\n# TYPE specwright_connections_timed_out_total counter\n"
	        "specwright_connections_timed_out_total %llu\n", (unsigned long long)m->conn_timed_out);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.n;
	return b.p;
}
