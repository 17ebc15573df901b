/* The server: libmicrohttpd with one thread per connection, so a handler may
 * block while its request waits or runs; one worker thread runs the queued
 * requests one at a time through the backend. One lock (s->mu) guards the
 * queue, every job and the metrics; s->cv is broadcast on any change.
 * A handler answers only once its job has started (streaming) or ended, so
 * a queued request can still get 429/503 and a vanished client is noticed
 * (its socket is polled while it waits) and never runs. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "server.h"
#include "core/utf8.h"

enum { JOB_QUEUED = 0, JOB_RUNNING, JOB_DONE };
enum { FIN_STOP = 0, FIN_LENGTH, FIN_ABORT };

typedef struct sw_server sw_server;

typedef struct job {
	struct job *next;
	sw_server *srv;
	int refs;                 /* the handler's and the worker's */
	int state;
	bool cancel;              /* the client went away */
	bool halt;                /* the server ends it (grace over): it still finishes properly */
	bool failed;              /* error set: answer it instead of text */
	sw_req_error error;
	sw_req req;
	int endpoint;
	char id[48];
	long created;
	int32_t *ids;
	int n_prompt, max_new;
	/* text: everything generated so far; released: the prefix that can no
	 * longer become part of a stop string; sent: what the handler wrote */
	char *text;
	size_t len, cap, released, sent;
	size_t max_stop;
	int n_tokens;
	int finish;               /* FIN_* */
	bool stopped;             /* by stop string or end-of-generation */
	void *piece_state;
	sw_serve_gen gen;
	double t_arrive, t_start, t_first, t_last;
} job;

/* A connection while it is open (libmicrohttpd's socket context): until
 * it has sent a complete request it must do so before `deadline` (then the
 * reaper shuts its socket down), so idle or trickling sockets cannot hold
 * the connection slots against clients that send requests. While idle it
 * may also be evicted to make room for a new connection (on_accept). */
enum { SC_IDLE = 0, SC_REQUEST, SC_BUSY };
typedef struct sconn {
	struct sconn *prev, *next;
	int fd;
	double deadline;
	double t_idle;            /* idle since (connected or last answered): eviction takes the oldest */
	int state;                /* SC_IDLE; SC_REQUEST: a request's headers in; SC_BUSY: all of it (the long timeout) */
	bool closing;             /* shut down by the server (evicted, deadline): no longer counted */
	uint8_t addr[16];         /* the client's address (IPv4: 4 bytes), the per-client cap's key */
	int alen;
} sconn;

/* The connection table may exceed max_connections by sockets the server has
 * shut down (evicted, past their deadline) for the moment they take to close:
 * libmicrohttpd's own limit is this much higher, so at a full table it still
 * accepts, and on_accept can evict or refuse. */
#define SW_CONN_CLOSING_SLACK 16

struct sw_server {
	sw_server_opts o;
	struct MHD_Daemon *mhd;
	int port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t worker, reaper;
	bool worker_started, reaper_started, reaper_exit;
	sconn *conns;             /* every open connection */
	double t_quiesce;         /* when the graceful stop began (0: not yet) */
	sw_serve_backend *b;      /* NULL until ready */
	bool stopping;            /* no new requests */
	bool worker_exit;
	job *head, *tail;         /* FIFO of waiting jobs */
	int n_waiting;
	job *running;
	uint64_t next_id;
	int handlers;             /* connection threads inside a request */
	sw_metrics m;
};

/* One HTTP request's state across libmicrohttpd's calls. */
typedef struct conn {
	char *body;
	size_t n, cap;
	bool too_large;
	job *j;
	sw_server *s;
	bool counted;             /* inside s->handlers */
	/* streaming */
	char *out;
	size_t out_n, out_off;
	int phase;                /* 0 role, 1 text, 2 final, 3 usage, 4 done-marker, 5 end */
} conn;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- small JSON writer ---- */

typedef struct jbuf {
	char *p;
	size_t n, cap;
	bool oom;
} jbuf;

static void jb_raw(jbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = 2 * b->cap + n + 256;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

/* a string literal, its length from sizeof */
#define jb_lit(b, lit) jb_raw((b), (lit), sizeof(lit) - 1)

static void jb_fmt(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jb_fmt(jbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (w > 0)
		jb_raw(b, tmp, (size_t)w < sizeof(tmp) ? (size_t)w : sizeof(tmp) - 1);
}

/* A JSON string literal. Bytes that are not valid UTF-8 would make the body
 * invalid JSON; the detokenizer already replaces them with U+FFFD. */
static void jb_str(jbuf *b, const char *s, size_t n)
{
	jb_lit(b, "\"");
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char u[8];
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\r')
			esc = "\\r";
		else if (c == '\t')
			esc = "\\t";
		else if (c < 0x20) {
			snprintf(u, sizeof(u), "\\u%04x", c);
			esc = u;
		} else if (c >= 0x80) {
			/* every body is valid UTF-8 whatever it quotes (a client's bytes,
			 * a percent-decoded URL, a message cut short): a valid sequence
			 * is copied, each invalid maximal subpart (or a cut tail) becomes
			 * one U+FFFD */
			uint32_t cp;
			const int k = sw_utf8_next((const uint8_t *)s + i, n - i, &cp);
			if (k > 0) {
				run += (size_t)k;
				i += (size_t)k - 1;
				continue;
			}
			esc = "\xef\xbf\xbd";
			jb_raw(b, s + i - run, run);
			run = 0;
			jb_raw(b, esc, strlen(esc));
			i += (k < 0 ? (size_t)-k : n - i) - 1;
			continue;
		}
		if (esc) {
			jb_raw(b, s + i - run, run);
			run = 0;
			jb_raw(b, esc, strlen(esc));
		} else {
			run++;
		}
	}
	jb_raw(b, s + n - run, run);
	jb_lit(b, "\"");
}

static void jb_error(jbuf *b, const sw_req_error *e)
{
	jb_lit(b, "{\"error\":{\"message\":");
	jb_str(b, e->message, strlen(e->message));
	jb_lit(b, ",\"type\":");
	jb_str(b, e->type, strlen(e->type));
	jb_lit(b, ",\"param\":");
	if (e->param[0])
		jb_str(b, e->param, strlen(e->param));
	else
		jb_lit(b, "null");
	jb_lit(b, ",\"code\":");
	if (e->code[0])
		jb_str(b, e->code, strlen(e->code));
	else
		jb_lit(b, "null");
	jb_lit(b, "}}");
}

/* ---- responses ---- */

static enum MHD_Result respond(sw_server *s, struct MHD_Connection *c, int endpoint, int status,
                               const char *type, char *body, size_t n, const char *retry_after)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(n, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	if (retry_after)
		MHD_add_response_header(r, "Retry-After", retry_after);
	enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	pthread_mutex_lock(&s->mu);
	sw_metrics_http(&s->m, endpoint, status);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static enum MHD_Result respond_error(sw_server *s, struct MHD_Connection *c, int endpoint,
                                     const sw_req_error *e)
{
	jbuf b = {0};
	jb_error(&b, e);
	if (b.oom) {
		free(b.p);
		return MHD_NO;
	}
	const char *retry = e->http == 429 ? "1" : e->http == 503 ? "5" : NULL;
	return respond(s, c, endpoint, e->http, "application/json", b.p, b.n, retry);
}

static const char *finish_name(int f)
{
	return f == FIN_LENGTH ? "length" : "stop";
}

static void usage_json(jbuf *b, const job *j)
{
	jb_fmt(b, "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", j->n_prompt, j->n_tokens,
	       j->n_prompt + j->n_tokens);
}

static void head_json(jbuf *b, const job *j, const char *object, const char *model)
{
	jb_fmt(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%ld,\"model\":", j->id, object, j->created);
	jb_str(b, model, strlen(model));
}

/* The whole (non-streamed) answer. */
static void full_json(jbuf *b, const job *j, const char *model)
{
	bool chat = j->req.kind == SW_REQ_CHAT;
	head_json(b, j, chat ? "chat.completion" : "text_completion", model);
	jb_lit(b, ",\"choices\":[{\"index\":0,");
	if (chat) {
		jb_lit(b, "\"message\":{\"role\":\"assistant\",\"content\":");
		jb_str(b, j->text ? j->text : "", j->released);
		jb_lit(b, "},\"logprobs\":null");
	} else {
		jb_lit(b, "\"text\":");
		jb_str(b, j->text ? j->text : "", j->released);
		jb_lit(b, ",\"logprobs\":null");
	}
	jb_fmt(b, ",\"finish_reason\":\"%s\"}],\"usage\":", finish_name(j->finish));
	usage_json(b, j);
	jb_lit(b, "}");
}

/* One SSE event with a chunk: text (may be empty), or the finish reason. */
static void chunk_json(jbuf *b, const job *j, const char *model, int phase, const char *text, size_t n)
{
	bool chat = j->req.kind == SW_REQ_CHAT;
	jb_lit(b, "data: ");
	head_json(b, j, chat ? "chat.completion.chunk" : "text_completion", model);
	if (phase == 3) { /* usage chunk: no choices */
		jb_lit(b, ",\"choices\":[],\"usage\":");
		usage_json(b, j);
		jb_lit(b, "}\n\n");
		return;
	}
	jb_lit(b, ",\"choices\":[{\"index\":0,");
	if (chat) {
		if (phase == 0)
			jb_lit(b, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}");
		else if (phase == 2)
			jb_lit(b, "\"delta\":{}");
		else {
			jb_lit(b, "\"delta\":{\"content\":");
			jb_str(b, text, n);
			jb_lit(b, "}");
		}
	} else {
		jb_lit(b, "\"text\":");
		jb_str(b, phase == 1 ? text : "", phase == 1 ? n : 0);
	}
	jb_lit(b, ",\"logprobs\":null,\"finish_reason\":");
	if (phase == 2)
		jb_fmt(b, "\"%s\"", finish_name(j->finish));
	else
		jb_lit(b, "null");
	jb_lit(b, "}]");
	if (j->req.include_usage)
		jb_lit(b, ",\"usage\":null");
	jb_lit(b, "}\n\n");
}

/* ---- jobs ---- */

static void job_unref(sw_server *s, job *j)
{
	if (--j->refs > 0)
		return;
	sw_req_free(&j->req);
	free(j->ids);
	free(j->text);
	free(j->piece_state);
	free(j);
	(void)s;
}

/* A client's socket is gone (closed or reset) while its request waits. */
static bool client_gone(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return false;
	struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return true;
	char ch;
	ssize_t r = recv(ci->connect_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static void timed_wait(sw_server *s, double secs)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long ns = ts.tv_nsec + (long)(secs * 1e9);
	ts.tv_sec += ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

/* Appends generated text and applies the stop strings: text that a stop
 * string could still begin in is held back (released stays behind it).
 * Returns 1 when the generation must end (a stop string, or no memory). */
static int append_text(job *j, const char *piece, size_t k)
{
	if (j->len + k + 1 > j->cap) {
		size_t cap = 2 * j->cap + k + 256;
		char *np = realloc(j->text, cap);
		if (!np)
			return 1;
		j->text = np;
		j->cap = cap;
	}
	size_t old = j->len;
	memcpy(j->text + j->len, piece, k);
	j->len += k;
	j->text[j->len] = 0;
	/* a stop string ending in the new bytes starts at or after from */
	size_t from = old >= j->max_stop ? old - j->max_stop + 1 : 0;
	size_t cut = j->len + 1;
	for (int q = 0; q < j->req.n_stop; q++) {
		const char *hit = memmem(j->text + from, j->len - from, j->req.stop[q], strlen(j->req.stop[q]));
		if (hit && (size_t)(hit - j->text) < cut)
			cut = (size_t)(hit - j->text);
	}
	if (cut <= j->len) {
		j->len = cut;
		j->text[cut] = 0;
		j->released = cut;
		j->stopped = true;
		j->finish = FIN_STOP;
		return 1;
	}
	size_t hold = j->max_stop ? j->max_stop - 1 : 0;
	size_t rel = j->len > hold ? j->len - hold : 0;
	while (rel > j->released && ((unsigned char)j->text[rel] & 0xC0) == 0x80)
		rel--; /* never split a UTF-8 sequence */
	if (rel > j->released)
		j->released = rel;
	return 0;
}

/* The generator's sink: token texts through the backend's detokenizer. */
static int emit_tokens(void *sink, const int32_t *tok, int n)
{
	job *j = sink;
	sw_server *s = j->srv;
	sw_serve_backend *b = s->b;
	char piece[512];
	double t = now_s();
	pthread_mutex_lock(&s->mu);
	int stop = 0;
	for (int i = 0; i < n && !stop; i++) {
		int k = b->piece(b->user, j->piece_state, tok[i], piece, sizeof(piece));
		j->n_tokens++;
		if (j->n_tokens == 1) {
			j->t_first = t;
			sw_hist_observe(&s->m.ttft, t - j->t_arrive);
		} else {
			sw_hist_observe(&s->m.itl, i == 0 ? t - j->t_last : 0.0);
		}
		if (k < 0) { /* end of generation */
			j->stopped = true;
			j->finish = FIN_STOP;
			stop = 1;
			break;
		}
		if (append_text(j, piece, (size_t)k)) {
			stop = 1;
			break;
		}
	}
	j->t_last = t;
	if (j->cancel || j->halt)
		stop = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return stop;
}

static void *worker_main(void *arg)
{
	sw_server *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->head && !s->worker_exit)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head)
			break;
		job *j = s->head;
		s->head = j->next;
		if (!s->head)
			s->tail = NULL;
		s->n_waiting--;
		s->m.waiting = s->n_waiting;
		if (j->cancel) { /* never started: nothing to undo */
			j->state = JOB_DONE;
			j->finish = FIN_ABORT;
			s->m.success[FIN_ABORT]++;
			pthread_cond_broadcast(&s->cv);
			job_unref(s, j);
			continue;
		}
		j->state = JOB_RUNNING;
		j->t_start = now_s();
		sw_hist_observe(&s->m.queue_time, j->t_start - j->t_arrive);
		s->running = j;
		s->m.running = 1;
		j->next = NULL;
		sw_serve_backend *b = s->b;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);

		sw_err err = {0};
		int rc = b->generate(b->user, &j->req, j->ids, j->n_prompt, j->max_new, emit_tokens, j, &j->gen, &err);

		pthread_mutex_lock(&s->mu);
		if (!j->stopped) { /* the detokenizer's held bytes (an incomplete UTF-8 tail) */
			char tail[64];
			int k = b->piece(b->user, j->piece_state, -1, tail, sizeof(tail));
			if (k > 0)
				append_text(j, tail, (size_t)k);
		}
		if (rc < 0 && !j->cancel) {
			j->failed = true;
			sw_req_fail(&j->error, 500, "server_error", NULL, NULL, "generation failed: %s", err.msg);
		}
		if (!j->stopped) {
			j->released = j->len; /* no stop string can complete any more */
			j->finish = j->cancel ? FIN_ABORT : FIN_LENGTH;
		}
		double t = now_s();
		sw_hist_observe(&s->m.e2e, t - j->t_arrive);
		s->m.success[j->failed ? FIN_ABORT : j->finish]++;
		s->m.prompt_tokens += (uint64_t)j->n_prompt;
		s->m.generation_tokens += (uint64_t)j->n_tokens;
		sw_metrics_add_gen(&s->m, &j->gen);
		j->state = JOB_DONE;
		s->running = NULL;
		s->m.running = 0;
		pthread_cond_broadcast(&s->cv);
		job_unref(s, j);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- streaming ---- */

/* Fills c->out with the next SSE events; false when the stream is over. */
static bool next_events(conn *c)
{
	sw_server *s = c->s;
	job *j = c->j;
	const char *model = s->b->model_id;
	jbuf b = {0};
	while (!b.n && c->phase < 5) {
		if (c->phase == 0) {
			if (j->req.kind == SW_REQ_CHAT)
				chunk_json(&b, j, model, 0, "", 0);
			c->phase = 1;
		} else if (c->phase == 1) {
			if (j->failed) { /* an error after the headers: an error event, then the end */
				jb_lit(&b, "data: ");
				jb_error(&b, &j->error);
				jb_lit(&b, "\n\n");
				c->phase = 4;
				continue;
			}
			if (j->released > j->sent) {
				chunk_json(&b, j, model, 1, j->text + j->sent, j->released - j->sent);
				j->sent = j->released;
			} else if (j->state == JOB_DONE) {
				c->phase = 2;
			} else {
				timed_wait(s, 0.25);
				if (j->cancel)
					return false;
			}
		} else if (c->phase == 2) {
			chunk_json(&b, j, model, 2, "", 0);
			c->phase = j->req.include_usage ? 3 : 4;
		} else if (c->phase == 3) {
			chunk_json(&b, j, model, 3, "", 0);
			c->phase = 4;
		} else if (c->phase == 4) {
			jb_lit(&b, "data: [DONE]\n\n");
			c->phase = 5;
		}
	}
	if (b.oom || !b.n) {
		free(b.p);
		return false;
	}
	free(c->out);
	c->out = b.p;
	c->out_n = b.n;
	c->out_off = 0;
	return true;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	conn *c = cls;
	sw_server *s = c->s;
	(void)pos;
	pthread_mutex_lock(&s->mu);
	if (c->out_off == c->out_n && !next_events(c)) {
		pthread_mutex_unlock(&s->mu);
		return c->phase == 5 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = c->out_n - c->out_off < max ? c->out_n - c->out_off : max;
	memcpy(buf, c->out + c->out_off, n);
	c->out_off += n;
	pthread_mutex_unlock(&s->mu);
	return (ssize_t)n;
}

/* ---- requests ---- */

static enum MHD_Result serve_generate(sw_server *s, struct MHD_Connection *mc, conn *c, int endpoint)
{
	sw_req_error e = {0};
	sw_serve_backend *b = s->b;
	if (c->too_large) {
		sw_req_fail(&e, 413, "invalid_request_error", NULL, "request_too_large",
		            "the request body exceeds %zu bytes", s->o.max_body);
		return respond_error(s, mc, endpoint, &e);
	}
	job *j = calloc(1, sizeof(*j));
	if (!j)
		return MHD_NO;
	j->refs = 1;
	j->srv = s;
	j->endpoint = endpoint;
	j->t_arrive = now_s();
	c->j = j;
	if (sw_req_parse(c->body ? c->body : "", c->n, endpoint == SW_EP_CHAT ? SW_REQ_CHAT : SW_REQ_COMPLETION,
	                 &j->req, &e))
		return respond_error(s, mc, endpoint, &e);
	if (j->req.model[0] && strcmp(j->req.model, b->model_id) != 0) {
		sw_req_fail(&e, 404, "invalid_request_error", "model", "model_not_found",
		            "the model '%.100s' does not exist; this server serves '%s'", j->req.model, b->model_id);
		return respond_error(s, mc, endpoint, &e);
	}
	sw_err err = {0};
	const char *param = NULL;
	if (b->check_sampling && b->check_sampling(b->user, &j->req, &param, &err)) {
		sw_req_fail(&e, 400, "invalid_request_error", param, "unsupported_parameter", "%s", err.msg);
		return respond_error(s, mc, endpoint, &e);
	}
	/* the backend's own limits (serve_cli.c: a speculative engine's draft
	 * tree), so the room a request is told is the room it gets */
	const int max_prompt = b->max_prompt > 0 ? b->max_prompt : b->max_ctx - 1;
	const int max_total = b->max_total > 0 ? b->max_total : b->max_ctx;
	int cap = b->max_ctx + 1;
	if (!(j->ids = malloc(sizeof(*j->ids) * (size_t)cap)))
		return MHD_NO;
	int n = b->encode(b->user, &j->req, j->ids, cap, &err);
	if (n == SW_ERANGE || n > max_prompt) {
		sw_req_fail(&e, 400, "invalid_request_error", endpoint == SW_EP_CHAT ? "messages" : "prompt",
		            "context_length_exceeded",
		            "the prompt's %s%d tokens leave no room to generate in this engine's context of %d "
		            "tokens: a prompt may have at most %d",
		            n > 0 ? "" : "more than ", n > 0 ? n : b->max_ctx, b->max_ctx, max_prompt);
		return respond_error(s, mc, endpoint, &e);
	}
	if (n <= 0) {
		sw_req_fail(&e, 400, "invalid_request_error", endpoint == SW_EP_CHAT ? "messages" : "prompt", NULL,
		            "%s", n == 0 ? "the prompt is empty" : err.msg);
		return respond_error(s, mc, endpoint, &e);
	}
	j->n_prompt = n;
	const int room = max_total - n, held = b->max_ctx - max_total;
	if (j->req.max_tokens > room) {
		char why[96] = "";
		if (held > 0)
			snprintf(why, sizeof(why), ", %d of which a speculative iteration keeps for its draft tree", held);
		sw_req_fail(&e, 400, "invalid_request_error", "max_tokens", "context_length_exceeded",
		            "max_tokens is %d, but the prompt's %d tokens leave room for %d in this engine's "
		            "context of %d tokens%s",
		            j->req.max_tokens, n, room, b->max_ctx, why);
		return respond_error(s, mc, endpoint, &e);
	}
	j->max_new = j->req.max_tokens > 0 ? j->req.max_tokens
	             : s->o.default_max_tokens < room ? s->o.default_max_tokens : room;
	for (int q = 0; q < j->req.n_stop; q++)
		if (strlen(j->req.stop[q]) > j->max_stop)
			j->max_stop = strlen(j->req.stop[q]);
	if (b->piece_state_size && !(j->piece_state = calloc(1, b->piece_state_size)))
		return MHD_NO;
	j->created = (long)time(NULL);

	pthread_mutex_lock(&s->mu);
	if (s->stopping) {
		pthread_mutex_unlock(&s->mu);
		sw_req_fail(&e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
		return respond_error(s, mc, endpoint, &e);
	}
	if (s->n_waiting >= s->o.queue) {
		int q = s->n_waiting;
		pthread_mutex_unlock(&s->mu);
		sw_req_fail(&e, 429, "rate_limit_error", NULL, "queue_full",
		            "the queue is full (%d waiting, one running): retry later", q);
		return respond_error(s, mc, endpoint, &e);
	}
	snprintf(j->id, sizeof(j->id), "%s-%016" PRIx64, endpoint == SW_EP_CHAT ? "chatcmpl" : "cmpl",
	         ++s->next_id);
	j->refs = 2; /* the worker's */
	if (s->tail)
		s->tail->next = j;
	else
		s->head = j;
	s->tail = j;
	s->n_waiting++;
	s->m.waiting = s->n_waiting;
	pthread_cond_broadcast(&s->cv);
	/* wait until it runs (streaming) or ends; a vanished client cancels */
	while (j->state == JOB_QUEUED || (!j->req.stream && j->state != JOB_DONE)) {
		if (s->stopping && j->state == JOB_QUEUED)
			break;
		timed_wait(s, 0.1);
		if (!j->cancel && j->state != JOB_DONE && client_gone(mc)) {
			j->cancel = true;
			pthread_cond_broadcast(&s->cv);
		}
		if (j->cancel && j->state == JOB_QUEUED)
			break;
	}
	if (j->state == JOB_QUEUED || (j->cancel && j->t_start == 0)) {
		/* shutting down, or the client left: answered without running it */
		j->cancel = true;
		pthread_mutex_unlock(&s->mu);
		sw_req_fail(&e, 503, "server_error", NULL, "shutting_down",
		            "the server is shutting down; the request was not started");
		return respond_error(s, mc, endpoint, &e);
	}
	if (!j->req.stream) {
		jbuf out = {0};
		int status = 200;
		if (j->failed)
			jb_error(&out, &j->error), status = j->error.http;
		else
			full_json(&out, j, b->model_id);
		pthread_mutex_unlock(&s->mu);
		if (out.oom) {
			free(out.p);
			return MHD_NO;
		}
		return respond(s, mc, endpoint, status, "application/json", out.p, out.n, NULL);
	}
	pthread_mutex_unlock(&s->mu);
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, c, NULL);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass events through unbuffered */
	enum MHD_Result rc = MHD_queue_response(mc, 200, r);
	MHD_destroy_response(r);
	pthread_mutex_lock(&s->mu);
	sw_metrics_http(&s->m, endpoint, 200);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static enum MHD_Result serve_simple(sw_server *s, struct MHD_Connection *mc, int endpoint)
{
	jbuf b = {0};
	pthread_mutex_lock(&s->mu);
	bool ready = s->b != NULL && !s->stopping;
	char model[128];
	snprintf(model, sizeof(model), "%s", s->b ? s->b->model_id : "");
	char *metrics = NULL;
	size_t mlen = 0;
	if (endpoint == SW_EP_METRICS) {
		s->m.conn_open = 0;
		for (const sconn *sc = s->conns; sc; sc = sc->next)
			s->m.conn_open += !sc->closing;
		metrics = sw_metrics_render(&s->m, model, &mlen);
	}
	pthread_mutex_unlock(&s->mu);
	if (endpoint == SW_EP_METRICS) {
		if (!metrics)
			return MHD_NO;
		return respond(s, mc, endpoint, 200, "text/plain; version=0.0.4; charset=utf-8", metrics, mlen, NULL);
	}
	if (endpoint == SW_EP_HEALTH) {
		jb_fmt(&b, "{\"status\":\"%s\"}", ready ? "ok" : s->stopping ? "stopping" : "loading");
		if (b.oom)
			return MHD_NO;
		return respond(s, mc, endpoint, ready ? 200 : 503, "application/json", b.p, b.n, NULL);
	}
	jb_lit(&b, "{\"object\":\"list\",\"data\":[");
	if (model[0]) {
		jb_lit(&b, "{\"id\":");
		jb_str(&b, model, strlen(model));
		jb_lit(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"specwright\"}");
	}
	jb_lit(&b, "]}");
	if (b.oom)
		return MHD_NO;
	return respond(s, mc, endpoint, 200, "application/json", b.p, b.n, NULL);
}

/* Whether a Content-Type header names application/json (any case, then
 * the end or ';' and parameters). */
static bool content_is_json(const char *ct)
{
	static const char want[] = "application/json";
	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, want, sizeof(want) - 1))
		return false;
	ct += sizeof(want) - 1;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return !*ct || *ct == ';';
}

/* A client's address as the per-client cap's key: the IPv4 address (an
 * IPv4-mapped IPv6 one too), or the IPv6 one; the port left out. Returns
 * its length, 0 for another family. */
static int addr_key(const struct sockaddr *sa, uint8_t key[16])
{
	static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
		const bool mapped = !memcmp(a, v4_mapped, sizeof(v4_mapped));
		memcpy(key, mapped ? a + 12 : a, mapped ? 4 : 16);
		return mapped ? 4 : 16;
	}
	return 0;
}

/* Seconds as libmicrohttpd takes them (whole, at least 1). */
static unsigned whole_s(double t)
{
	return t < 1 ? 1u : t > 86400 ? 86400u : (unsigned)(t + 0.999);
}

static sconn *conn_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* A connection has a complete request in hand (busy: it keeps its slot with
 * the long inactivity timeout while it waits, runs and streams) or has been
 * answered (idle again: a new request is due within the header timeout, and
 * it may be evicted). */

static void conn_mark(sw_server *s, struct MHD_Connection *mc, bool busy)
{
	sconn *sc = conn_of(mc);
	pthread_mutex_lock(&s->mu);
	if (sc) {
		sc->state = busy ? SC_BUSY : SC_IDLE;
		sc->deadline = now_s() + s->o.header_timeout_s;
		sc->t_idle = now_s();
	}
	pthread_mutex_unlock(&s->mu);
	MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT,
	                          whole_s(busy ? s->o.idle_timeout_s : s->o.header_timeout_s));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx)
{
	sw_server *s = cls;
	conn *c = *ctx;
	(void)version;
	if (!c) {
		if (!(c = calloc(1, sizeof(*c))))
			return MHD_NO;
		c->s = s;
		*ctx = c;
		sconn *sc = conn_of(mc);
		pthread_mutex_lock(&s->mu);
		s->handlers++;
		c->counted = true;
		if (sc && sc->state == SC_IDLE)
			sc->state = SC_REQUEST; /* its headers are in: a request in progress, never evicted */
		pthread_mutex_unlock(&s->mu);
		return MHD_YES;
	}
	if (*upload_size) {
		if (c->n + *upload_size > s->o.max_body) {
			c->too_large = true;
		} else if (!c->too_large) {
			if (c->n + *upload_size + 1 > c->cap) {
				size_t cap = 2 * c->cap + *upload_size + 1;
				if (cap > s->o.max_body + 1)
					cap = s->o.max_body + 1;
				char *np = realloc(c->body, cap);
				if (!np)
					return MHD_NO;
				c->body = np;
				c->cap = cap;
			}
			memcpy(c->body + c->n, upload, *upload_size);
			c->n += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	conn_mark(s, mc, true);
	int ep = !strcmp(url, "/v1/completions")        ? SW_EP_COMPLETIONS
	         : !strcmp(url, "/v1/chat/completions") ? SW_EP_CHAT
	         : !strcmp(url, "/v1/models")           ? SW_EP_MODELS
	         : !strcmp(url, "/health")              ? SW_EP_HEALTH
	         : !strcmp(url, "/metrics")             ? SW_EP_METRICS
	                                                : SW_EP_OTHER;
	sw_req_error e = {0};
	bool post = ep == SW_EP_COMPLETIONS || ep == SW_EP_CHAT;
	if (ep == SW_EP_OTHER) {
		sw_req_fail(&e, 404, "invalid_request_error", NULL, "not_found", "no route %s %.200s", method, url);
		return respond_error(s, mc, ep, &e);
	}
	if (strcmp(method, post ? "POST" : "GET") != 0) {
		sw_req_fail(&e, 405, "invalid_request_error", NULL, "method_not_allowed", "%.200s takes %s, not %s",
		            url, post ? "POST" : "GET", method);
		return respond_error(s, mc, ep, &e);
	}
	if (!post)
		return serve_simple(s, mc, ep);
	/* a body is JSON, declared so (parameters such as charset allowed): a
	 * form or text/plain body is not parsed as JSON */
	const char *ct = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type");
	if (!content_is_json(ct)) {
		sw_req_fail(&e, 415, "invalid_request_error", NULL, "unsupported_media_type", "a request body "
		            "must come with Content-Type: application/json, found %s%.100s%s", ct ? "'" : "",
		            ct ? ct : "none", ct ? "'" : "");
		return respond_error(s, mc, ep, &e);
	}
	pthread_mutex_lock(&s->mu);
	bool ready = s->b != NULL, stopping = s->stopping;
	pthread_mutex_unlock(&s->mu);
	if (!ready || stopping) {
		sw_req_fail(&e, 503, "server_error", NULL, stopping ? "shutting_down" : "loading",
		            stopping ? "the server is shutting down" : "the engine is still loading");
		return respond_error(s, mc, ep, &e);
	}
	return serve_generate(s, mc, c, ep);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **ctx, enum MHD_RequestTerminationCode toe)
{
	sw_server *s = cls;
	conn *c = *ctx;
	if (!c)
		return;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		conn_mark(s, mc, false); /* kept alive: the next request is due within the header timeout */
	pthread_mutex_lock(&s->mu);
	if (c->j) {
		if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->j->state != JOB_DONE)
			c->j->cancel = true; /* the worker stops it at the next iteration */
		pthread_cond_broadcast(&s->cv);
		job_unref(s, c->j);
	}
	if (c->counted)
		s->handlers--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	free(c->body);
	free(c->out);
	free(c);
	*ctx = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
	sw_server *s = cls;
	sconn *sc = *socket_ctx;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		/* right after on_accept, on the same (listening) thread: the table
		 * on_accept counted is this one plus the new connection */
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ai = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (!ci || !(sc = calloc(1, sizeof(*sc))))
			return; /* untracked: libmicrohttpd's own inactivity timeout still applies */
		sc->fd = ci->connect_fd;
		sc->alen = ai && ai->client_addr ? addr_key(ai->client_addr, sc->addr) : 0;
		pthread_mutex_lock(&s->mu);
		sc->deadline = now_s() + s->o.header_timeout_s;
		sc->t_idle = now_s();
		sc->next = s->conns;
		if (s->conns)
			s->conns->prev = sc;
		s->conns = sc;
		pthread_mutex_unlock(&s->mu);
		*socket_ctx = sc;
		return;
	}
	if (!sc)
		return;
	/* libmicrohttpd closes the socket after this returns: the reaper, which
	 * shuts sockets down under s->mu, never touches a closed descriptor */
	pthread_mutex_lock(&s->mu);
	if (sc->prev)
		sc->prev->next = sc->next;
	else
		s->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	pthread_mutex_unlock(&s->mu);
	free(sc);
	*socket_ctx = NULL;
}

/* Shuts down the sockets of connections past their request deadline (its
 * connection thread then sees the end and closes it): a socket that
 * trickles bytes keeps libmicrohttpd's inactivity timer fresh, this does
 * not. */
static void *reaper_main(void *arg)
{
	sw_server *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->reaper_exit) {
		const double t = now_s();
		for (sconn *sc = s->conns; sc; sc = sc->next)
			if (sc->state != SC_BUSY && !sc->closing && t > sc->deadline) {
				shutdown(sc->fd, SHUT_RDWR);
				sc->closing = true; /* once */
				s->m.conn_timed_out++;
			}
		timed_wait(s, 0.1);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The per-client cap and the table, applied as a connection is accepted
 * (libmicrohttpd's listening thread; on_connection's STARTED follows at
 * once on the same thread for an accepted one). Past the client's cap its
 * own oldest idle connection is evicted, past the table anyone's oldest
 * idle one; with none idle the new connection is refused (closed
 * unanswered, as libmicrohttpd closes one past its own limits). An evicted
 * socket is shut down (its thread sees the end and closes it) and no longer
 * counted. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *sa, socklen_t len)
{
	sw_server *s = cls;
	uint8_t key[16];
	const int klen = len >= (socklen_t)sizeof(sa->sa_family) ? addr_key(sa, key) : 0;
	pthread_mutex_lock(&s->mu);
	int open = 0, mine = 0;
	sconn *old_mine = NULL, *old_any = NULL;
	for (sconn *sc = s->conns; sc; sc = sc->next) {
		if (sc->closing)
			continue;
		open++;
		const bool same = klen && sc->alen == klen && !memcmp(sc->addr, key, (size_t)klen);
		mine += same;
		if (sc->state != SC_IDLE)
			continue;
		if (same && (!old_mine || sc->t_idle < old_mine->t_idle))
			old_mine = sc;
		if (!old_any || sc->t_idle < old_any->t_idle)
			old_any = sc;
	}
	int reason = -1;
	sconn *victim = NULL;
	if (mine >= s->o.max_client_connections)
		reason = SW_CONN_CLIENT_CAP, victim = old_mine;
	else if (open >= s->o.max_connections)
		reason = SW_CONN_TABLE_FULL, victim = old_any;
	if (victim) {
		shutdown(victim->fd, SHUT_RDWR);
		victim->closing = true;
		s->m.conn_evicted[reason]++;
	} else if (reason >= 0) {
		s->m.conn_refused[reason]++;
	}
	pthread_mutex_unlock(&s->mu);
	return reason >= 0 && !victim ? MHD_NO : MHD_YES;
}

int sw_server_opts_resolve(sw_server_opts *o, sw_err *err)
{
	if (!o->host)
		o->host = "127.0.0.1";
	if (o->queue < 0)
		o->queue = 0;
	if (!o->max_body)
		o->max_body = 1 << 20;
	if (o->default_max_tokens <= 0)
		o->default_max_tokens = 256;
	if (!(o->header_timeout_s > 0))
		o->header_timeout_s = 10;
	if (!(o->idle_timeout_s > 0))
		o->idle_timeout_s = 600;
	const bool table_given = o->max_connections > 0;
	if (!table_given)
		o->max_connections = o->queue + 64;
	if (o->max_client_connections <= 0) {
		/* queue + 4: one address (a proxy's, which every connection through
		 * it has) can fill the queue and the running slot and still ask
		 * /health or /metrics, so the cap refuses nothing the queue would
		 * have taken; at most half the table, so no one address holds most of it */
		const int half = o->max_connections / 2;
		o->max_client_connections = o->queue + 4 < half ? o->queue + 4 : half > 1 ? half : 1;
	} else if (o->max_client_connections > o->max_connections) {
		return sw_errf(err, SW_EINVAL, "--max-connections-per-client: expected at most the connection "
		               "table, --max-connections %d%s; found %d", o->max_connections,
		               table_given ? "" : " (its default, --queue + 64)", o->max_client_connections);
	}
	return 0;
}

sw_server *sw_server_start(const sw_server_opts *o, sw_err *err)
{
	sw_server *s = calloc(1, sizeof(*s));
	if (!s) {
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	s->o = *o;
	if (sw_server_opts_resolve(&s->o, err)) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&s->cv, &ca);
	sw_metrics_init(&s->m);

	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
	if (inet_pton(AF_INET, s->o.host, &sa.sin_addr) != 1) {
		sw_errf(err, SW_EINVAL, "serve: --host %s: an IPv4 address expected (e.g. 127.0.0.1)", s->o.host);
		goto fail;
	}
	s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
	                              MHD_USE_POLL,
	                          (uint16_t)o->port, on_accept, s, on_request, s, MHD_OPTION_SOCK_ADDR,
	                          (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	                          MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_LIMIT,
	                          (unsigned)(s->o.max_connections + SW_CONN_CLOSING_SLACK), MHD_OPTION_CONNECTION_TIMEOUT,
	                          whole_s(s->o.header_timeout_s), MHD_OPTION_END);
	if (!s->mhd) {
		sw_errf(err, SW_EIO, "serve: cannot listen on %s:%d (%s)", s->o.host, o->port,
		        errno ? strerror(errno) : "address in use?");
		goto fail;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : o->port;
	if (pthread_create(&s->worker, NULL, worker_main, s)) {
		sw_errf(err, SW_ENOMEM, "serve: cannot start the worker thread");
		MHD_stop_daemon(s->mhd);
		goto fail;
	}
	s->worker_started = true;
	if (pthread_create(&s->reaper, NULL, reaper_main, s)) {
		sw_errf(err, SW_ENOMEM, "serve: cannot start the connection reaper thread");
		sw_server_stop(s);
		return NULL;
	}
	s->reaper_started = true;
	return s;
fail:
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return NULL;
}

void sw_server_ready(sw_server *s, sw_serve_backend *b)
{
	pthread_mutex_lock(&s->mu);
	s->b = b;
	pthread_mutex_unlock(&s->mu);
}

int sw_server_port(const sw_server *s)
{
	return s->port;
}

void sw_server_quiesce(sw_server *s)
{
	pthread_mutex_lock(&s->mu);
	bool first = s->t_quiesce == 0;
	if (first)
		s->t_quiesce = now_s();
	s->stopping = true;
	for (job *j = s->head; j; j = j->next)
		j->cancel = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (first) {
		MHD_socket ls = MHD_quiesce_daemon(s->mhd); /* no new connections */
		if (ls != MHD_INVALID_SOCKET)
			close(ls);
	}
}

bool sw_server_drained(sw_server *s, double wait_s)
{
	/* queued requests are answered 503 by their handlers; the running one
	 * finishes within the grace, else it is ended at its next iteration
	 * (halt, not cancel: its answer or stream still ends properly) */
	const double t_end = now_s() + wait_s;
	pthread_mutex_lock(&s->mu);
	bool busy;
	for (;;) {
		const double t = now_s();
		busy = (s->running || s->head || s->handlers) && t - s->t_quiesce < s->o.shutdown_grace_s + 5;
		if (!busy || t >= t_end)
			break;
		if (s->running && t - s->t_quiesce > s->o.shutdown_grace_s)
			s->running->halt = true;
		for (job *j = s->head; j; j = j->next)
			j->cancel = true;
		timed_wait(s, 0.05);
	}
	pthread_mutex_unlock(&s->mu);
	return !busy;
}

void sw_server_stop(sw_server *s)
{
	if (!s)
		return;
	sw_server_quiesce(s);
	while (!sw_server_drained(s, 1.0))
		;
	pthread_mutex_lock(&s->mu);
	s->worker_exit = true;
	s->reaper_exit = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (s->worker_started)
		pthread_join(s->worker, NULL);
	if (s->reaper_started)
		pthread_join(s->reaper, NULL);
	MHD_stop_daemon(s->mhd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
