/* Tests for runtime/serve/request.c: a table of request bodies, each with
 * the status, parameter and code the OpenAI-style error must carry (or the
 * fields a valid request must parse to). The expectations are written from
 * the OpenAI API's documented parameter types and ranges, not read back
 * from the parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "serve/request.h"

typedef struct bad_case {
	int kind;
	const char *body;
	int http;
	const char *param; /* "" for none */
	const char *code;  /* NULL: not checked; "" none */
	const char *frag;  /* in the message */
} bad_case;

static const bad_case bad_cases[] = {
	{SW_REQ_COMPLETION, "", 400, "", NULL, "malformed JSON"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\",}", 400, "", NULL, "malformed JSON"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"prompt\": \"b\"}", 400, "", NULL, "duplicate"},
	{SW_REQ_COMPLETION, "[1, 2]", 400, "", NULL, "JSON object"},
	{SW_REQ_COMPLETION, "{}", 400, "prompt", NULL, "required"},
	{SW_REQ_COMPLETION, "{\"prompt\": 7}", 400, "prompt", NULL, "must be a string"},
	{SW_REQ_COMPLETION, "{\"prompt\": [\"a\", \"b\"]}", 400, "prompt", "unsupported_parameter", "one prompt"},
	{SW_REQ_COMPLETION, "{\"prompt\": [1, 2, 3]}", 400, "prompt", "unsupported_parameter", "one prompt"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\\u0000b\"}", 400, "prompt", NULL, "NUL"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"max_tokens\": 0}", 400, "max_tokens", NULL, "[1,"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"max_tokens\": 2.5}", 400, "max_tokens", NULL, "integer"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"max_tokens\": \"9\"}", 400, "max_tokens", NULL, "number"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"temperature\": 2.5}", 400, "temperature", NULL, "[0, 2]"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"temperature\": -0.1}", 400, "temperature", NULL, "[0, 2]"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"top_p\": 0}", 400, "top_p", NULL, "(0, 1]"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"top_p\": 1.5}", 400, "top_p", NULL, "(0, 1], found 1.5"},
	/* issue 26 items 6 and 10: integer bounds as integers; user, metadata
	 * and model typed as the OpenAI API defines them */
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"max_tokens\": 0}", 400, "max_tokens", NULL,
	 "must be in [1, 1073741824], found 0"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"user\": 5}", 400, "user", NULL, "'user' must be a string"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"metadata\": []}", 400, "metadata", NULL,
	 "'metadata' must be an object, found array"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"metadata\": {\"k\": 1}}", 400, "metadata", NULL,
	 "values must be strings, found number"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"metadata\": {\"a\": \"1\", \"b\": \"1\", \"c\": \"1\", "
	 "\"d\": \"1\", \"e\": \"1\", \"f\": \"1\", \"g\": \"1\", \"h\": \"1\", \"i\": \"1\", \"j\": \"1\", "
	 "\"k\": \"1\", \"l\": \"1\", \"m\": \"1\", \"n\": \"1\", \"o\": \"1\", \"p\": \"1\", \"q\": \"1\"}}",
	 400, "metadata", NULL, "at most 16 keys, found 17"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"model\": \"\"}", 400, "model", NULL, "non-empty string"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"model\": \"m\\u0000x\"}", 400, "model", NULL,
	 "without NUL"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"stream\": 1}", 400, "stream", NULL, "boolean"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"stream_options\": {\"include_usage\": true}}", 400,
	 "stream_options", NULL, "stream: true"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"stream\": true, \"stream_options\": {\"x\": 1}}", 400,
	 "stream_options", NULL, "include_usage"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"stop\": 3}", 400, "stop", NULL, "string"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop", NULL,
	 "at most 4"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"stop\": \"\"}", 400, "stop", NULL, "1 to"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"n\": 2}", 400, "n", "unsupported_parameter", "n = 1"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"best_of\": 3}", 400, "best_of", "unsupported_parameter", ""},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"logprobs\": 2}", 400, "logprobs", "unsupported_parameter", ""},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"echo\": true}", 400, "echo", "unsupported_parameter", ""},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"suffix\": \"z\"}", 400, "suffix", "unsupported_parameter", ""},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"presence_penalty\": 0.5}", 400, "presence_penalty",
	 "unsupported_parameter", "distribution"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"frequency_penalty\": 3}", 400, "frequency_penalty", NULL,
	 "[-2, 2]"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"logit_bias\": {\"50256\": -100}}", 400, "logit_bias",
	 "unsupported_parameter", ""},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"temprature\": 0.5}", 400, "temprature", "unsupported_parameter",
	 "did you mean \"temperature\""},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"messages\": []}", 400, "messages", "unsupported_parameter",
	 "unknown parameter"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"model\": 3}", 400, "model", NULL, "string"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"seed\": 1.5}", 400, "seed", NULL, "int64"},
	{SW_REQ_COMPLETION, "{\"prompt\": \"a\", \"seed\": 18446744073709551615}", 400, "seed", NULL, "int64"},
	{SW_REQ_CHAT, "{\"prompt\": \"a\"}", 400, "prompt", "unsupported_parameter", "unknown parameter"},
	{SW_REQ_CHAT, "{}", 400, "messages", NULL, "required"},
	{SW_REQ_CHAT, "{\"messages\": []}", 400, "messages", NULL, "1 to"},
	{SW_REQ_CHAT, "{\"messages\": {}}", 400, "messages", NULL, "list"},
	{SW_REQ_CHAT, "{\"messages\": [\"hi\"]}", 400, "messages[0]", NULL, "object"},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", 400, "messages[0]", NULL,
	 "robot"},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", 400, "messages[0]", NULL, "content"},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", 400, "messages[0]", NULL,
	 "string or a list"},
	{SW_REQ_CHAT,
	 "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]}", 400,
	 "messages[0]", "unsupported_parameter", "text content"},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}", 400,
	 "messages[0]", "unsupported_parameter", "role, content and name"},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{}]}", 400, "tools",
	 "unsupported_parameter", ""},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"auto\"}", 400,
	 "tool_choice", "unsupported_parameter", ""},
	{SW_REQ_CHAT,
	 "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": "
	 "\"json_object\"}}",
	 400, "response_format", "unsupported_parameter", ""},
	{SW_REQ_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", 400,
	 "top_logprobs", "unsupported_parameter", ""},
	{SW_REQ_CHAT,
	 "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 4, "
	 "\"max_completion_tokens\": 4}",
	 400, "max_tokens", NULL, "not both"},
};

static void test_bad_requests(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(*bad_cases); i++) {
		const bad_case *c = &bad_cases[i];
		sw_req r;
		sw_req_error e = {0};
		int rc = sw_req_parse(c->body, strlen(c->body), c->kind, &r, &e);
		if (rc == 0)
			fail_msg("case %zu accepted: %s", i, c->body);
		if (e.http != c->http || strcmp(e.param, c->param) != 0 || (c->code && strcmp(e.code, c->code) != 0) ||
		    !strstr(e.message, c->frag))
			fail_msg("case %zu (%s): got http %d param \"%s\" code \"%s\" message \"%s\"; expected %d \"%s\" "
			         "\"%s\" containing \"%s\"",
			         i, c->body, e.http, e.param, e.code, e.message, c->http, c->param, c->code ? c->code : "*",
			         c->frag);
		assert_string_equal(e.type, "invalid_request_error");
		sw_req_free(&r);
	}
}

static void test_completion_fields(void **state)
{
	(void)state;
	const char *body = "{\"model\": \"m1\", \"prompt\": [\"Once upon\"], \"max_tokens\": 12, \"temperature\": 0,"
	                   " \"top_p\": 0.9, \"top_k\": 40, \"seed\": 9223372036854775807, \"stream\": true,"
	                   " \"stream_options\": {\"include_usage\": true}, \"stop\": [\"\\n\\n\", \"END\"],"
	                   " \"n\": 1, \"best_of\": 1, \"logprobs\": null, \"echo\": false, \"presence_penalty\": 0,"
	                   " \"frequency_penalty\": 0, \"logit_bias\": {}, \"user\": \"u7\"}";
	sw_req r;
	sw_req_error e = {0};
	if (sw_req_parse(body, strlen(body), SW_REQ_COMPLETION, &r, &e))
		fail_msg("refused: %s", e.message);
	assert_string_equal(r.model, "m1");
	assert_string_equal(r.prompt, "Once upon");
	assert_int_equal(r.max_tokens, 12);
	assert_true(r.has_temperature && r.temperature == 0.0);
	assert_true(r.has_top_p && r.top_p == 0.9);
	assert_true(r.has_top_k && r.top_k == 40);
	assert_true(r.has_seed && r.seed == 9223372036854775807ull);
	assert_true(r.stream && r.include_usage);
	assert_int_equal(r.n_stop, 2);
	assert_string_equal(r.stop[0], "\n\n");
	assert_string_equal(r.stop[1], "END");
	sw_req_free(&r);

	/* defaults: nothing given */
	body = "{\"prompt\": \"x\"}";
	assert_int_equal(sw_req_parse(body, strlen(body), SW_REQ_COMPLETION, &r, &e), 0);
	assert_int_equal(r.max_tokens, -1);
	assert_false(r.has_temperature || r.has_top_p || r.has_top_k || r.has_seed || r.stream);
	assert_int_equal(r.n_stop, 0);
	sw_req_free(&r);
}

static void test_chat_fields(void **state)
{
	(void)state;
	const char *body =
	    "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"},"
	    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hello \"}, {\"type\": \"text\","
	    " \"text\": \"there\"}], \"name\": \"ann\"}, {\"role\": \"assistant\", \"content\": \"Hi.\"}],"
	    " \"max_completion_tokens\": 5, \"stop\": \"\\u00e9t\\u00e9\", \"tools\": [], \"tool_choice\": \"none\","
	    " \"response_format\": {\"type\": \"text\"}, \"parallel_tool_calls\": true}";
	sw_req r;
	sw_req_error e = {0};
	if (sw_req_parse(body, strlen(body), SW_REQ_CHAT, &r, &e))
		fail_msg("refused: %s", e.message);
	assert_int_equal(r.n_msgs, 3);
	assert_string_equal(r.roles[0], "system"); /* developer is the system role */
	assert_string_equal(r.contents[0], "Be brief.");
	assert_string_equal(r.roles[1], "user");
	assert_string_equal(r.contents[1], "Hello there");
	assert_string_equal(r.roles[2], "assistant");
	assert_int_equal(r.max_tokens, 5);
	assert_int_equal(r.n_stop, 1);
	assert_string_equal(r.stop[0], "\xc3\xa9t\xc3\xa9");
	sw_req_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_completion_fields),
		cmocka_unit_test(test_chat_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
