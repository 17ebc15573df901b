/* The HTTP server (libmicrohttpd, one thread per connection) over one
 * generator: OpenAI /v1/completions and /v1/chat/completions (JSON or
 * server-sent events), /v1/models, /health, /metrics (Prometheus text).
 * One sequence at a time: requests wait in a bounded FIFO, a full queue
 * answers 429. The generator is a small vtable (sw_serve_backend) so the
 * HTTP side is tested with a scripted backend and runs an engine in
 * production (runtime/cli/serve_cli.c binds one). */
#ifndef SW_SERVE_SERVER_H
#define SW_SERVE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "request.h"

#define SW_SERVE_MAX_POS 64

/* What the generator reports for one request (speculative counters in
 * vLLM's schema: drafts = iterations that drafted, draft tokens proposed,
 * accepted draft tokens, accepted by position). */
typedef struct sw_serve_gen {
	int n_prompt;
	uint64_t n_drafts, n_draft_tokens, n_accepted;
	uint64_t accepted_by_pos[SW_SERVE_MAX_POS];
	int n_pos;
} sw_serve_gen;

/* Called by the generator as tokens are emitted; nonzero asks it to stop
 * at the next iteration (stop string, end of generation, disconnect). */
typedef int (*sw_serve_emit)(void *sink, const int32_t *tok, int n);

typedef struct sw_serve_backend {
	void *user;
	char model_id[128];
	int max_ctx;              /* the generator's context, for messages */
	/* The longest prompt it takes (0: max_ctx - 1) and the prompt plus
	 * generated tokens it always reaches when asked (0: max_ctx): a
	 * request's room is max_total minus its prompt, and a generation asked
	 * for at most that many ends only at that count or its own end of
	 * generation (a stop the server applies aside). A speculative engine's
	 * last iteration needs its whole draft tree in the KV cache, so both are
	 * less than its context (runtime/cli/serve_cli.c says by how much). */
	int max_prompt, max_total;
	/* The request's prompt (completion text, or chat messages through the
	 * model's template) to ids. Called from connection threads: must be
	 * thread-safe. Returns the count or a negative error (err says why). */
	int (*encode)(void *user, const sw_req *r, int32_t *ids, int cap, sw_err *err);
	/* 0 when the request's sampling parameters (temperature, top_p, top_k;
	 * run-time values of the engine) can be honoured exactly; else nonzero,
	 * *param the parameter and err why (a greedy engine asked for a
	 * temperature). Thread-safe. */
	int (*check_sampling)(void *user, const sw_req *r, const char **param, sw_err *err);
	/* A token's text for streaming (UTF-8 safe, state in *dt, which the
	 * server zero-initialises per request); returns bytes written, or -1
	 * when the token ends the generation (EOS / end-of-turn / control). */
	int (*piece)(void *user, void *dt, int32_t tok, char *out, size_t cap);
	size_t piece_state_size;
	/* Runs one request on the worker thread. Returns generated-token count
	 * or a negative error. */
	int (*generate)(void *user, const sw_req *r, const int32_t *ids, int n_ids, int max_new,
	                sw_serve_emit emit, void *sink, sw_serve_gen *st, sw_err *err);
} sw_serve_backend;

typedef struct sw_server_opts {
	const char *host;         /* "127.0.0.1" */
	int port;                 /* 0: any free port (sw_server_port says which) */
	int queue;                /* waiting requests before 429 */
	size_t max_body;          /* bytes; larger bodies get 413 */
	int default_max_tokens;   /* when a request gives none */
	double shutdown_grace_s;  /* the running request may finish within this */
	/* a connection sends a complete request (headers and body) within this
	 * many seconds of connecting or of its previous answer, else it is
	 * closed (0: 10); once it has one, idle_timeout_s of inactivity (0: 600)
	 * closes it: a long generation or stream keeps its connection */
	double header_timeout_s, idle_timeout_s;
	/* the connection table: open connections at once (0: queue + 64); and
	 * at most max_client_connections of them from one source address (0:
	 * queue + 4, at most half the table, at least 1). A new connection
	 * past either evicts the oldest idle one (its own address's at the cap,
	 * anyone's when the table is full); with none idle it is refused (closed
	 * unanswered). Idle: no request's headers since it connected or had its
	 * last answer; a connection with a request in progress is never evicted */
	int max_connections, max_client_connections;
	bool quiet;               /* no access log on stderr */
} sw_server_opts;

typedef struct sw_server sw_server;

/* Fills o's defaults (as sw_server_start does) and refuses what the server
 * cannot take, naming the option as `specwright serve` spells it: a
 * per-client cap above the connection table. */
int sw_server_opts_resolve(sw_server_opts *o, sw_err *err);

/* Listens at once; /health answers 503 "loading" until sw_server_ready. */
sw_server *sw_server_start(const sw_server_opts *o, sw_err *err);
void sw_server_ready(sw_server *s, sw_serve_backend *b);
int sw_server_port(const sw_server *s);
/* The graceful stop in steps: quiesce stops taking requests (new
 * connections refused, queued requests answered 503, /health "stopping")
 * and starts the grace; drained waits up to wait_s for the running request
 * and the answers in flight to end (true when they have), ending the running
 * generation at its next iteration once the grace is over (its answer or
 * stream still ends properly: final chunk, finish_reason "length", [DONE]).
 * Both may be called again; neither frees anything. */
void sw_server_quiesce(sw_server *s);
bool sw_server_drained(sw_server *s, double wait_s);
/* Graceful stop: quiesce, wait until drained, then release everything. */
void sw_server_stop(sw_server *s);

#endif
