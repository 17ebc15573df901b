/* `specwright serve`'s limits on the real model (issue 40): the SmolLM2
 * n-gram engine (chain of 6 drafts, context 1024; plan and render only, the
 * host backend runs it) served as a process. The room a request is told is
 * the room it gets: for prompts near the end of the context, max_tokens set
 * to the room the server states returns exactly that many tokens (finish
 * "length"), one more is refused naming the room, and a prompt the engine
 * cannot take is a 400, never a 500 after it was accepted. And
 * --max-connections-per-client: its refusals name the option, the expected
 * and the found. Needs the model (`make model`). Loopback only. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/json.h"
#include "proc_util.h"

static char g_dir[512];
#define bin tu_proc_bin
#define now_s tu_now_s

static int setup(void **state)
{
	(void)state;
	const char *model = "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(model, R_OK)) {
		fprintf(stderr, "real model %s missing: run `make model`\n", model);
		return -1;
	}
	snprintf(g_dir, sizeof(g_dir), "%s/serve_limits.%d", getenv("BUILD") ? getenv("BUILD") : "build",
	         (int)getpid());
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s build models/specs/smollm2-ngram.json -o %s --no-compile >/dev/null", bin(),
	         g_dir);
	return system(cmd);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	return system(cmd);
}

/* Each refused before anything starts: exit 2, the message naming the
 * option, what it expects and what it found; a valid value is taken (the
 * server starts and stops on SIGTERM with exit 0). The help states the
 * option and its default. */
static void test_client_cap_option(void **state)
{
	(void)state;
	static const struct {
		const char *table, *cap, *expect, *found;
	} bad[] = {
		{NULL, "0", "an integer in [1, 100000]", "found \"0\""},
		{NULL, "-3", "an integer in [1, 100000]", "found \"-3\""},
		{NULL, "abc", "an integer in [1, 100000]", "found \"abc\""},
		{NULL, "4x", "an integer in [1, 100000]", "found \"4x\""},
		{NULL, "", "an integer in [1, 100000]", "found \"\""},
		{NULL, "100001", "an integer in [1, 100000]", "found \"100001\""},
		{NULL, NULL, "an integer in [1, 100000]", "found \"(nothing)\""},
		{"8", "9", "at most the connection table, --max-connections 8", "found 9"},
		{NULL, "81", "at most the connection table, --max-connections 80 (its default", "found 81"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[12];
		int k = 0;
		argv[k++] = (char *)bin();
		argv[k++] = "serve";
		argv[k++] = g_dir;
		argv[k++] = "--port";
		argv[k++] = "0";
		if (bad[i].table) {
			argv[k++] = "--max-connections";
			argv[k++] = (char *)bad[i].table;
		}
		argv[k++] = "--max-connections-per-client";
		if (bad[i].cap)
			argv[k++] = (char *)bad[i].cap;
		argv[k] = NULL;
		tu_proc p;
		tu_proc_spawn(&p, argv, true, NULL);
		const int rc = tu_proc_reap(&p, 30, "specwright");
		if (rc != 2 || !strstr(p.log, "--max-connections-per-client") || !strstr(p.log, bad[i].expect) ||
		    !strstr(p.log, bad[i].found) || strstr(p.log, "listening"))
			fail_msg("--max-connections-per-client %s (table %s): exit %d, expected 2 and a message with "
			         "'%s' and '%s'; output:\n%s", bad[i].cap ? bad[i].cap : "(nothing)",
			         bad[i].table ? bad[i].table : "default", rc, bad[i].expect, bad[i].found, p.log);
	}
	char *help[] = {(char *)bin(), "serve", "--help", NULL};
	tu_proc h;
	tu_proc_spawn(&h, help, true, NULL);
	if (tu_proc_reap(&h, 30, "specwright") != 0 || !strstr(h.log, "--max-connections-per-client N (default queue + 4"))
		fail_msg("serve --help does not state --max-connections-per-client and its default:\n%s", h.log);
	char *ok[] = {(char *)bin(), "serve", g_dir, "--port", "0", "--backend", "host", "--max-connections", "8",
	              "--max-connections-per-client", "8", "--quiet", NULL};
	tu_proc p;
	tu_proc_spawn(&p, ok, true, NULL);
	if (!tu_proc_log_has(&p, "listening on http://127.0.0.1:", 30))
		fail_msg("a valid --max-connections-per-client 8 (table 8) was not taken:\n%s", p.log);
	kill(p.pid, SIGTERM);
	assert_int_equal(tu_proc_reap(&p, 120, "specwright"), 0);
}

typedef struct resp {
	int status;
	char *body;
} resp;

/* A POST over HTTP/1.0 (the body is the rest of the stream). */
static resp post(int port, const char *body)
{
	resp r = {.status = -1};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	char head[256];
	const size_t bl = strlen(body);
	int n = snprintf(head, sizeof(head), "POST /v1/completions HTTP/1.0\r\nHost: x\r\nContent-Type: "
	                 "application/json\r\nContent-Length: %zu\r\n\r\n", bl);
	assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
	assert_int_equal(send(fd, body, bl, MSG_NOSIGNAL), (ssize_t)bl);
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap);
	ssize_t k;
	while (got < cap - 1 && (k = recv(fd, buf + got, cap - 1 - got, 0)) > 0)
		got += (size_t)k;
	buf[got] = 0;
	close(fd);
	const char *sep = strstr(buf, "\r\n\r\n");
	if (!sep || sscanf(buf, "HTTP/1.%*d %d", &r.status) != 1)
		fail_msg("no answer: %s", buf);
	r.body = strdup(sep + 4);
	free(buf);
	return r;
}

static json_value *parse(const resp *r)
{
	sw_err err = {0};
	json_value *v = json_parse(r->body, strlen(r->body), "response", &err);
	if (!v)
		fail_msg("invalid JSON (%s): %s", err.msg, r->body);
	return v;
}

static const char *error_message(const resp *r, const char *param, json_value **keep)
{
	json_value *v = parse(r);
	const json_value *e = json_get(v, "error");
	if (!e || !json_get(e, "message") || !json_get(e, "param") || !json_get(e, "code"))
		fail_msg("not an error object: %s", r->body);
	if (json_get(e, "param")->type != JSON_STRING || strcmp(json_get(e, "param")->str, param) ||
	    strcmp(json_get(e, "code")->str, "context_length_exceeded"))
		fail_msg("expected param %s, code context_length_exceeded: %s", param, r->body);
	*keep = v;
	return json_get(e, "message")->str;
}

/* A prompt of `pairs` "the WORD" pairs (two tokens each in SmolLM2's
 * vocabulary), not a repeating period the n-gram drafter could follow. */
static char *prompt_body(int pairs, int max_tokens)
{
	static const char *const w[] = {"cat", "sat", "on", "a", "mat", "and", "looked", "at", "birds"};
	char *b = malloc(16 * (size_t)pairs + 128);
	size_t n = (size_t)sprintf(b, "{\"prompt\": \"");
	for (int i = 0; i < pairs; i++)
		n += (size_t)sprintf(b + n, "%sthe %s", i ? " " : "", w[(i * 7 + i / 9) % 9]);
	if (max_tokens > 0)
		sprintf(b + n, "\", \"max_tokens\": %d}", max_tokens);
	else
		sprintf(b + n, "\"}");
	return b;
}

/* The room the server states for a prompt (max_tokens far too large: the
 * 400 names the prompt's tokens and the room). */
static void stated_room(int port, int pairs, int *n_prompt, int *room)
{
	char *body = prompt_body(pairs, 1000000);
	resp r = post(port, body);
	free(body);
	if (r.status != 400)
		fail_msg("max_tokens 1000000: status %d, expected 400: %s", r.status, r.body);
	json_value *v;
	const char *m = error_message(&r, "max_tokens", &v);
	const char *q = strstr(m, "the prompt's ");
	if (!q || sscanf(q, "the prompt's %d tokens leave room for %d", n_prompt, room) != 2)
		fail_msg("the message does not state the prompt's tokens and the room: %s", m);
	json_free(v);
	free(r.body);
}

/* max_tokens = the room: exactly that many tokens, finish "length"; the
 * same with max_tokens left out (the server's default, 256, is more than
 * the room); room + 1: refused, naming the room. */
static void check_room(int port, int pairs)
{
	int n_prompt, room;
	stated_room(port, pairs, &n_prompt, &room);
	fprintf(stderr, "prompt of %d tokens: the server states room for %d\n", n_prompt, room);
	assert_true(room >= 1);
	for (int pass = 0; pass < 2; pass++) {
		char *body = prompt_body(pairs, pass ? 0 : room);
		resp r = post(port, body);
		free(body);
		if (r.status != 200)
			fail_msg("prompt %d tokens, max_tokens %s%d: status %d: %s", n_prompt, pass ? "left out, room " : "",
			         room, r.status, r.body);
		json_value *v = parse(&r);
		const json_value *u = json_get(v, "usage"), *ch = json_get(v, "choices");
		assert_non_null(u);
		assert_non_null(ch);
		const int got = (int)json_get(u, "completion_tokens")->number;
		const char *fin = json_get(ch->items[0], "finish_reason")->str;
		assert_int_equal((int)json_get(u, "prompt_tokens")->number, n_prompt);
		/* "stop" would be the model's end of generation, not the context */
		if (got != room || strcmp(fin, "length"))
			fail_msg("prompt of %d tokens, max_tokens %s (the stated room %d): %d tokens, finish \"%s\"",
			         n_prompt, pass ? "left out" : "= the room", room, got, fin);
		json_free(v);
		free(r.body);
	}
	char *body = prompt_body(pairs, room + 1);
	resp r = post(port, body);
	free(body);
	if (r.status != 400)
		fail_msg("prompt of %d tokens, max_tokens %d (room + 1): status %d: %s", n_prompt, room + 1, r.status,
		         r.body);
	json_value *v;
	const char *m = error_message(&r, "max_tokens", &v);
	char want[96];
	snprintf(want, sizeof(want), "leave room for %d ", room);
	if (!strstr(m, want))
		fail_msg("room + 1 refused without naming the room %d: %s", room, m);
	json_free(v);
	free(r.body);
}

static void test_room_is_kept(void **state)
{
	(void)state;
	char *argv[] = {(char *)bin(), "serve", g_dir, "--backend", "host", "--port", "0", "--quiet", NULL};
	tu_proc p;
	tu_proc_spawn(&p, argv, true, NULL);
	if (!tu_proc_log_has(&p, "listening on http://127.0.0.1:", 30))
		fail_msg("serve did not listen:\n%s", p.log);
	const int port = atoi(strstr(p.log, "listening on http://127.0.0.1:") + strlen("listening on http://127.0.0.1:"));
	if (!tu_proc_log_has(&p, "serve: ready", 300))
		fail_msg("serve not ready:\n%s", p.log);
	check_room(port, 508); /* 1016 tokens: 8 short of the context */
	check_room(port, 500); /* 1000 tokens */
	/* 1018 tokens: the engine cannot take it with room for its draft tree;
	 * refused as a prompt (400), not accepted and failed (500) */
	char *body = prompt_body(509, 1);
	resp r = post(port, body);
	free(body);
	if (r.status != 400)
		fail_msg("a prompt of 1018 tokens (context 1024, a 7-node draft tree), max_tokens 1: status %d, "
		         "expected 400: %s", r.status, r.body);
	json_value *v;
	const char *m = error_message(&r, "prompt", &v);
	if (!strstr(m, "1018") || !strstr(m, "at most"))
		fail_msg("the message does not name the prompt's tokens and the most it may have: %s", m);
	json_free(v);
	free(r.body);
	kill(p.pid, SIGTERM);
	assert_int_equal(tu_proc_reap(&p, 120, "specwright"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_cap_option),
		cmocka_unit_test(test_room_is_kept),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
