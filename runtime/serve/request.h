/* OpenAI request bodies (POST /v1/completions, /v1/chat/completions) parsed
 * and checked into sw_req. Every parameter is honoured, refused with an
 * OpenAI-style error naming it, or (a short list that cannot change the
 * output) ignored; an unknown parameter is refused, never dropped.
 * Not the HTTP layer (server.c) and not the engine's limits (the server
 * checks the prompt length and sampling against the backend after this). */
#ifndef SW_SERVE_REQUEST_H
#define SW_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SW_REQ_MAX_STOP 4
#define SW_REQ_MAX_STOP_LEN 256
#define SW_REQ_MAX_MSGS 256

enum sw_req_kind { SW_REQ_COMPLETION = 0, SW_REQ_CHAT };

typedef struct sw_req {
	int kind;                    /* enum sw_req_kind */
	char model[128];             /* "" when absent */
	char *prompt;                /* completions: the prompt text */
	int n_msgs;                  /* chat: messages, in order */
	char *roles[SW_REQ_MAX_MSGS];
	char *contents[SW_REQ_MAX_MSGS];
	int max_tokens;              /* -1: the server's default */
	bool stream, include_usage;
	bool has_temperature, has_top_p, has_top_k, has_seed;
	double temperature, top_p;
	int top_k;
	uint64_t seed;
	int n_stop;
	char *stop[SW_REQ_MAX_STOP];
} sw_req;

/* An OpenAI error object: {"error": {"message", "type", "param", "code"}}. */
typedef struct sw_req_error {
	int http;                    /* 400, 404, 413, 429, 503, 500 */
	char type[40];               /* invalid_request_error, ... */
	char param[64];              /* the offending field, "" for none */
	char code[48];               /* "" for none */
	char message[600];
} sw_req_error;

/* Fills e and returns -1 (so callers can `return sw_req_fail(...)`). */
int sw_req_fail(sw_req_error *e, int http, const char *type, const char *param, const char *code,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Parses body[0..len) as a request of `kind`. Returns 0, or -1 with *e set
 * (400 for malformed JSON, wrong types, out-of-range and refused
 * parameters). *r is zeroed first; free it with sw_req_free either way. */
int sw_req_parse(const char *body, size_t len, int kind, sw_req *r, sw_req_error *e);
void sw_req_free(sw_req *r);

/* The parameters, for README and `serve --help`: honoured, refused unless
 * at their default, and ignored (NULL-terminated lists). */
extern const char *const sw_req_honoured[];
extern const char *const sw_req_refused[];
extern const char *const sw_req_ignored[];

#endif
