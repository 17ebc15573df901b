/* `specwright serve` as a process under stop signals (issue 26): the
 * SmolLM2 n-gram engine (plan and render only: the host backend runs it)
 * served with OPENBLAS_NUM_THREADS=4, so OpenBLAS's pool (started in its
 * library constructor, before main, with every signal unblocked) exists
 * whatever the machine. SIGTERM during loading exits 0 before serving;
 * SIGTERM and a second SIGTERM during the drain leave a running stream
 * whole: every event valid JSON, a final chunk with its finish_reason, then
 * `data: [DONE]`, and the process exits 0. Loopback only; every wait bounded. */
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

/* the server, its OpenBLAS pool started before main whatever the machine */
static void spawn(tu_proc *p)
{
	char *argv[] = {(char *)bin(), "serve", g_dir, "--backend", "host", "--port", "0", "--quiet", NULL};
	tu_proc_spawn(p, argv, false, "OPENBLAS_NUM_THREADS=4");
}

static int setup(void **state)
{
	snprintf(g_dir, sizeof(g_dir), "%s/serve_signals.%d", getenv("BUILD") ? getenv("BUILD") : "build",
	         (int)getpid());
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s build models/specs/smollm2-ngram.json -o %s --no-compile >/dev/null", bin(),
	         g_dir);
	return system(cmd);
}

static int teardown(void **state)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	return system(cmd);
}

static void test_sigterm_while_loading(void **state)
{
	tu_proc p;
	spawn(&p);
	tu_proc_port(&p); /* listening, the engine not loaded yet */
	kill(p.pid, SIGTERM);
	int rc = tu_proc_reap(&p, 120, "serve");
	if (rc != 0 || !strstr(p.log, "while loading") || strstr(p.log, "serve: ready"))
		fail_msg("exit %d, expected 0 with 'while loading' before 'ready'; stderr:\n%s", rc, p.log);
}

/* Reads what the socket has for up to wait_s (until `want`, if given, or
 * the end of the stream). */
static void read_for(int fd, char *buf, size_t cap, size_t *got, bool *eof, double wait_s, const char *want)
{
	const double t_end = now_s() + wait_s;
	while (!*eof && now_s() < t_end && !(want && strstr(buf, want))) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t k = read(fd, buf + *got, cap - 1 - *got);
		if (k <= 0) {
			*eof = true;
			break;
		}
		*got += (size_t)k;
		buf[*got] = 0;
	}
}

static void test_second_sigterm_keeps_stream(void **state)
{
	tu_proc p;
	spawn(&p);
	int port = tu_proc_port(&p);
	if (!tu_proc_log_has(&p, "serve: ready", 120))
		fail_msg("not ready; stderr:\n%s", p.log);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	const char *body = "{\"prompt\": \"Here is a list of the numbers from one to five hundred: 1, 2, 3, 4,\", "
	                   "\"max_tokens\": 600, \"stream\": true}";
	char req[1024];
	int n = snprintf(req, sizeof(req),
	                 "POST /v1/completions HTTP/1.0\r\nHost: x\r\n"
	                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
	                 strlen(body), body);
	assert_int_equal(write(fd, req, (size_t)n), n);
	size_t cap = 1 << 20, got = 0;
	char *buf = malloc(cap);
	buf[0] = 0;
	bool eof = false;
	read_for(fd, buf, cap, &got, &eof, 60, "\"text\":\"");
	assert_non_null(strstr(buf, "\"text\":\"")); /* generating */
	kill(p.pid, SIGTERM);
	assert_true(tu_proc_log_has(&p, "stopping", 10));
	kill(p.pid, SIGTERM); /* during the drain */
	tu_proc_log_has(&p, "again", 5); /* asserted below, after the exit status */
	read_for(fd, buf, cap, &got, &eof, 0.05, NULL);
	if (strstr(buf, "[DONE]") || strstr(buf, "\"finish_reason\":\""))
		fail_msg("the stream ended before the second SIGTERM (make it longer): %s", buf);
	read_for(fd, buf, cap, &got, &eof, 120, NULL);
	close(fd);
	int rc = tu_proc_reap(&p, 60, "serve");
	if (rc != 0 || !strstr(p.log, "again"))
		fail_msg("exit %d, expected 0 and the second signal logged; stderr:\n%s", rc, p.log);
	/* the stream (HTTP/1.0: not chunked): SSE events; each event valid JSON, the last one
	 * with a finish_reason, then [DONE] */
	const char *ev = strstr(buf, "\r\n\r\n");
	assert_non_null(ev);
	int n_text = 0;
	char finish[32] = "";
	const char *last = NULL;
	for (const char *q = strstr(ev, "data: "); q; q = strstr(q + 6, "data: ")) {
		const char *end = strstr(q, "\n\n");
		if (!end)
			fail_msg("an event without its end: %s", q);
		last = q;
		if (!strncmp(q + 6, "[DONE]", 6))
			break;
		sw_err err = {0};
		json_value *v = json_parse(q + 6, (size_t)(end - q - 6), "event", &err);
		if (!v)
			fail_msg("invalid event (%s): %.*s", err.msg, (int)(end - q), q);
		const json_value *ch = json_get(v, "choices");
		assert_non_null(ch);
		const json_value *f = ch->n ? json_get(ch->items[0], "finish_reason") : NULL;
		if (f && f->type == JSON_STRING)
			snprintf(finish, sizeof(finish), "%s", f->str);
		else
			n_text++;
		json_free(v);
	}
	if (!last || strncmp(last, "data: [DONE]\n\n", 14) || !finish[0])
		fail_msg("the stream did not end with a final chunk and [DONE] (finish '%s'): %s", finish, ev);
	assert_true(!strcmp(finish, "length") || !strcmp(finish, "stop"));
	assert_true(n_text > 1);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigterm_while_loading),
		cmocka_unit_test(test_second_sigterm_keeps_stream),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
