/* OpenAI request parsing: the project's strict JSON parser (core/json.c:
 * duplicate keys, trailing commas and NaN are errors, positions in messages)
 * then one check per parameter. The policy is one table per endpoint. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "request.h"
#include "core/utf8.h"

const char *const sw_req_honoured[] = {
	"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"top_k", "seed", "stream", "stream_options.include_usage", "stop", NULL};
const char *const sw_req_refused[] = {
	"n (other than 1)", "best_of (other than 1)", "logprobs", "top_logprobs", "echo", "suffix",
	"presence_penalty (other than 0)", "frequency_penalty (other than 0)", "logit_bias (non-empty)",
	"tools", "tool_choice (other than \"none\")", "functions", "function_call",
	"response_format (other than {\"type\": \"text\"})", "prompt as a list of several prompts or of token ids",
	NULL};
const char *const sw_req_ignored[] = {"user", "metadata", "store", "parallel_tool_calls", "service_tier",
                                      NULL};

static const char *const completion_keys[] = {
	"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stream", "stream_options",
	"stop", "n", "best_of", "logprobs", "echo", "suffix", "presence_penalty", "frequency_penalty",
	"logit_bias", "user", "metadata", "store", "service_tier", NULL};
static const char *const chat_keys[] = {
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed",
	"stream", "stream_options", "stop", "n", "logprobs", "top_logprobs", "presence_penalty",
	"frequency_penalty", "logit_bias", "user", "metadata", "store", "service_tier", "tools", "tool_choice",
	"functions", "function_call", "response_format", "parallel_tool_calls", NULL};

/* A message cut by its buffer ends on a character boundary (it may quote
 * a client's text): an incomplete sequence at the end is dropped. */
static void utf8_trim(char *m)
{
	size_t n = strlen(m), i = 0;
	while (i < n) {
		uint32_t cp;
		const int k = sw_utf8_next((const uint8_t *)m + i, n - i, &cp);
		if (k == 0) {
			m[i] = 0;
			break;
		}
		i += (size_t)(k > 0 ? k : -k);
	}
}

int sw_req_fail(sw_req_error *e, int http, const char *type, const char *param, const char *code,
                const char *fmt, ...)
{
	e->http = http;
	snprintf(e->type, sizeof(e->type), "%s", type);
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	snprintf(e->code, sizeof(e->code), "%s", code ? code : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	utf8_trim(e->message);
	return -1;
}

static int bad(sw_req_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(sw_req_error *e, const char *param, const char *fmt, ...)
{
	char msg[sizeof(e->message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sw_req_fail(e, 400, "invalid_request_error", param, NULL, "%s", msg);
}

static int unsupported(sw_req_error *e, const char *param, const char *why)
{
	return sw_req_fail(e, 400, "invalid_request_error", param, "unsupported_parameter",
	                   "'%s' is not supported by this server: %s", param, why);
}

static const char *type_of(const json_value *v)
{
	return json_type_name(v->type);
}

/* A number in [lo, hi] ((lo, hi] when lo_open); `integer` also demands an
 * integral value. Bounds and values print with up to 15 significant
 * digits: an integer bound as its digits (1073741824, not 1.07374e+09). */
static int get_num_in(const json_value *obj, const char *key, double lo, bool lo_open, double hi,
                      bool integer, bool *has, double *out, sw_req_error *e)
{
	const json_value *v = json_get(obj, key);
	*has = false;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_NUMBER)
		return bad(e, key, "'%s' must be a number, found %s", key, type_of(v));
	if (integer && (!isfinite(v->number) || v->number != floor(v->number)))
		return bad(e, key, "'%s' must be an integer, found %.15g", key, v->number);
	if (!((lo_open ? v->number > lo : v->number >= lo) && v->number <= hi))
		return bad(e, key, "'%s' must be in %c%.15g, %.15g], found %.15g", key, lo_open ? '(' : '[',
		           lo, hi, v->number);
	*has = true;
	*out = v->number;
	return 0;
}

static int get_num(const json_value *obj, const char *key, double lo, double hi, bool integer, bool *has,
                   double *out, sw_req_error *e)
{
	return get_num_in(obj, key, lo, false, hi, integer, has, out, e);
}

/* The number of characters (code points) of a valid UTF-8 string. */
static size_t utf8_chars(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/* Parameters the server accepts and does not act on, typed as the OpenAI
 * API defines them: user a string; metadata an object of at most 16
 * string keys of at most 64 characters with string values of at most 512. */
static int check_ignored(const json_value *root, sw_req_error *e)
{
	const json_value *u = json_get(root, "user"), *m = json_get(root, "metadata");
	if (u && u->type != JSON_NULL && u->type != JSON_STRING)
		return bad(e, "user", "'user' must be a string, found %s", type_of(u));
	if (!m || m->type == JSON_NULL)
		return 0;
	if (m->type != JSON_OBJECT)
		return bad(e, "metadata", "'metadata' must be an object, found %s", type_of(m));
	if (m->n > 16)
		return bad(e, "metadata", "'metadata' must have at most 16 keys, found %zu", m->n);
	for (size_t i = 0; i < m->n; i++) {
		const json_member *mb = &m->members[i];
		const json_value *v = mb->value;
		if (utf8_chars(mb->key, mb->key_len) > 64)
			return bad(e, "metadata", "'metadata' keys must be at most 64 characters, found one of %zu",
			           utf8_chars(mb->key, mb->key_len));
		if (v->type != JSON_STRING)
			return bad(e, "metadata", "'metadata' values must be strings, found %s", type_of(v));
		if (utf8_chars(v->str, v->str_len) > 512)
			return bad(e, "metadata", "'metadata' values must be at most 512 characters, found one "
			           "of %zu", utf8_chars(v->str, v->str_len));
	}
	return 0;
}

static int get_bool(const json_value *obj, const char *key, bool *out, sw_req_error *e)
{
	const json_value *v = json_get(obj, key);
	if (!v || v->type == JSON_NULL)
		return 0;
	if (v->type != JSON_BOOL)
		return bad(e, key, "'%s' must be a boolean, found %s", key, type_of(v));
	*out = v->boolean;
	return 0;
}

/* A string without NUL bytes (a NUL would cut the prompt silently). */
static int dup_text(const json_value *v, const char *param, char **out, sw_req_error *e)
{
	if (memchr(v->str, 0, v->str_len))
		return bad(e, param, "'%s' contains a NUL character", param);
	if (!(*out = strdup(v->str)))
		return sw_req_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	return 0;
}

/* Parameters that change the output in ways the engine cannot honour:
 * refused unless absent, null or at their neutral value. */
static int check_refused(const json_value *root, int kind, sw_req_error *e)
{
	const json_value *v;
	double x;
	bool has;
	if (get_num(root, "n", 1, 128, true, &has, &x, e))
		return -1;
	if (has && x != 1)
		return unsupported(e, "n", "one choice per request (n = 1)");
	if (get_num(root, "best_of", 1, 128, true, &has, &x, e))
		return -1;
	if (has && x != 1)
		return unsupported(e, "best_of", "one candidate per request");
	if (get_num(root, "presence_penalty", -2, 2, false, &has, &x, e))
		return -1;
	if (has && x != 0)
		return unsupported(e, "presence_penalty", "penalties would change the target's distribution");
	if (get_num(root, "frequency_penalty", -2, 2, false, &has, &x, e))
		return -1;
	if (has && x != 0)
		return unsupported(e, "frequency_penalty", "penalties would change the target's distribution");
	if ((v = json_get(root, "logit_bias")) && v->type != JSON_NULL) {
		if (v->type != JSON_OBJECT)
			return bad(e, "logit_bias", "'logit_bias' must be an object, found %s", type_of(v));
		if (v->n)
			return unsupported(e, "logit_bias", "the engine samples the target's own distribution");
	}
	if ((v = json_get(root, "logprobs")) && v->type != JSON_NULL &&
	    !(v->type == JSON_BOOL && !v->boolean))
		return unsupported(e, "logprobs", "log probabilities are not returned");
	if ((v = json_get(root, "top_logprobs")) && v->type != JSON_NULL)
		return unsupported(e, "top_logprobs", "log probabilities are not returned");
	if ((v = json_get(root, "echo")) && v->type != JSON_NULL && !(v->type == JSON_BOOL && !v->boolean))
		return unsupported(e, "echo", "the prompt is not echoed");
	if ((v = json_get(root, "suffix")) && v->type != JSON_NULL)
		return unsupported(e, "suffix", "no insertion mode");
	if (kind == SW_REQ_CHAT) {
		if ((v = json_get(root, "tools")) && v->type != JSON_NULL &&
		    !(v->type == JSON_ARRAY && v->n == 0))
			return unsupported(e, "tools", "no tool calling");
		if ((v = json_get(root, "functions")) && v->type != JSON_NULL)
			return unsupported(e, "functions", "no function calling");
		if ((v = json_get(root, "function_call")) && v->type != JSON_NULL)
			return unsupported(e, "function_call", "no function calling");
		if ((v = json_get(root, "tool_choice")) && v->type != JSON_NULL &&
		    !(v->type == JSON_STRING && strcmp(v->str, "none") == 0))
			return unsupported(e, "tool_choice", "no tool calling (only \"none\")");
		if ((v = json_get(root, "response_format")) && v->type != JSON_NULL) {
			const json_value *t = v->type == JSON_OBJECT ? json_get(v, "type") : NULL;
			if (!t || t->type != JSON_STRING || strcmp(t->str, "text") != 0 || v->n != 1)
				return unsupported(e, "response_format", "plain text only ({\"type\": \"text\"})");
		}
	}
	return 0;
}

static int parse_stop(const json_value *root, sw_req *r, sw_req_error *e)
{
	const json_value *v = json_get(root, "stop");
	if (!v || v->type == JSON_NULL)
		return 0;
	const json_value *one[1] = {v};
	const json_value *const *items = one;
	size_t n = 1;
	if (v->type == JSON_ARRAY) {
		items = (const json_value *const *)v->items;
		n = v->n;
		if (n > SW_REQ_MAX_STOP)
			return bad(e, "stop", "'stop' holds at most %d sequences, found %zu", SW_REQ_MAX_STOP, n);
	}
	for (size_t i = 0; i < n; i++) {
		if (items[i]->type != JSON_STRING)
			return bad(e, "stop", "'stop' must be a string or a list of strings, found %s",
			           type_of(items[i]));
		if (items[i]->str_len == 0 || items[i]->str_len > SW_REQ_MAX_STOP_LEN)
			return bad(e, "stop", "each stop sequence must hold 1 to %d bytes, found %zu",
			           SW_REQ_MAX_STOP_LEN, items[i]->str_len);
		if (dup_text(items[i], "stop", &r->stop[r->n_stop], e))
			return -1;
		r->n_stop++;
	}
	return 0;
}

static int parse_prompt(const json_value *root, sw_req *r, sw_req_error *e)
{
	const json_value *v = json_get(root, "prompt");
	if (!v)
		return bad(e, "prompt", "'prompt' is required");
	if (v->type == JSON_ARRAY) {
		if (v->n == 1 && v->items[0]->type == JSON_STRING)
			v = v->items[0];
		else
			return unsupported(e, "prompt", "one prompt per request, as a string");
	}
	if (v->type != JSON_STRING)
		return bad(e, "prompt", "'prompt' must be a string, found %s", type_of(v));
	return dup_text(v, "prompt", &r->prompt, e);
}

/* content: a string, or a list of {"type": "text", "text": ...} parts. */
static int parse_content(const json_value *c, const char *param, char **out, sw_req_error *e)
{
	if (c->type == JSON_STRING)
		return dup_text(c, param, out, e);
	if (c->type != JSON_ARRAY)
		return bad(e, param, "'%s' must be a string or a list of text parts, found %s", param, type_of(c));
	size_t len = 0;
	for (size_t i = 0; i < c->n; i++) {
		const json_value *p = c->items[i], *t = json_get(p, "type"), *x = json_get(p, "text");
		if (p->type != JSON_OBJECT || !t || t->type != JSON_STRING || strcmp(t->str, "text") != 0 || !x ||
		    x->type != JSON_STRING)
			return unsupported(e, param, "only text content parts ({\"type\": \"text\", \"text\": ...})");
		if (memchr(x->str, 0, x->str_len))
			return bad(e, param, "'%s' contains a NUL character", param);
		len += x->str_len;
	}
	char *s = malloc(len + 1);
	if (!s)
		return sw_req_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	len = 0;
	for (size_t i = 0; i < c->n; i++) {
		const json_value *x = json_get(c->items[i], "text");
		memcpy(s + len, x->str, x->str_len);
		len += x->str_len;
	}
	s[len] = 0;
	*out = s;
	return 0;
}

static int parse_messages(const json_value *root, sw_req *r, sw_req_error *e)
{
	const json_value *v = json_get(root, "messages");
	if (!v)
		return bad(e, "messages", "'messages' is required");
	if (v->type != JSON_ARRAY)
		return bad(e, "messages", "'messages' must be a list, found %s", type_of(v));
	if (v->n == 0 || v->n > SW_REQ_MAX_MSGS)
		return bad(e, "messages", "'messages' must hold 1 to %d messages, found %zu", SW_REQ_MAX_MSGS, v->n);
	static const char *const msg_keys[] = {"role", "content", "name", NULL};
	for (size_t i = 0; i < v->n; i++) {
		char param[64];
		snprintf(param, sizeof(param), "messages[%zu]", i);
		const json_value *m = v->items[i];
		if (m->type != JSON_OBJECT)
			return bad(e, param, "'%s' must be an object, found %s", param, type_of(m));
		for (size_t k = 0; k < m->n; k++) {
			bool ok = false;
			for (const char *const *a = msg_keys; *a; a++)
				ok |= strcmp(*a, m->members[k].key) == 0;
			if (!ok)
				return unsupported(e, param, "message fields are role, content and name");
		}
		const json_value *role = json_get(m, "role"), *content = json_get(m, "content");
		if (!role || role->type != JSON_STRING)
			return bad(e, param, "'%s.role' must be a string", param);
		if (strcmp(role->str, "system") && strcmp(role->str, "user") && strcmp(role->str, "assistant") &&
		    strcmp(role->str, "developer"))
			return bad(e, param, "'%s.role' must be system, developer, user or assistant, found \"%.32s\"",
			           param, role->str);
		if (!content || content->type == JSON_NULL)
			return bad(e, param, "'%s.content' is required", param);
		/* "developer" is OpenAI's newer name for the system role */
		if (!(r->roles[i] = strdup(strcmp(role->str, "developer") ? role->str : "system")))
			return sw_req_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		r->n_msgs = (int)i + 1;
		if (parse_content(content, param, &r->contents[i], e))
			return -1;
	}
	return 0;
}

int sw_req_parse(const char *body, size_t len, int kind, sw_req *r, sw_req_error *e)
{
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->max_tokens = -1;
	sw_err err = {0};
	json_value *root = json_parse(body, len, "request", &err);
	if (!root)
		return bad(e, NULL, "malformed JSON body: %s", err.msg);
	int rc = -1;
	if (root->type != JSON_OBJECT) {
		bad(e, NULL, "the body must be a JSON object, found %s", type_of(root));
		goto out;
	}
	if (json_check_keys(root, "$", kind == SW_REQ_CHAT ? chat_keys : completion_keys, &err)) {
		/* the offending key, for the error's param */
		const char *k = "";
		const char *const *allowed = kind == SW_REQ_CHAT ? chat_keys : completion_keys;
		for (size_t i = 0; i < root->n && !k[0]; i++) {
			bool ok = false;
			for (const char *const *a = allowed; *a; a++)
				ok |= strcmp(*a, root->members[i].key) == 0;
			if (!ok)
				k = root->members[i].key;
		}
		unsupported(e, k, "unknown parameter");
		snprintf(e->message, sizeof(e->message), "unknown parameter '%.64s' (%.500s)", k, err.msg);
		utf8_trim(e->message);
		goto out;
	}
	const json_value *v;
	if ((v = json_get(root, "model")) && v->type != JSON_NULL) {
		if (v->type != JSON_STRING) {
			bad(e, "model", "'model' must be a string, found %s", type_of(v));
			goto out;
		}
		if (!v->str_len || strlen(v->str) != v->str_len) {
			bad(e, "model", "'model' must be a non-empty string without NUL characters");
			goto out;
		}
		snprintf(r->model, sizeof(r->model), "%s", v->str);
	}
	if (check_ignored(root, e))
		goto out;
	if (kind == SW_REQ_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e))
		goto out;
	if (check_refused(root, kind, e))
		goto out;
	double x;
	bool has;
	const char *mt = "max_tokens";
	if (kind == SW_REQ_CHAT && json_get(root, "max_completion_tokens")) {
		if (json_get(root, "max_tokens")) {
			bad(e, "max_tokens", "give max_tokens or max_completion_tokens, not both");
			goto out;
		}
		mt = "max_completion_tokens";
	}
	if (get_num(root, mt, 1, 1 << 30, true, &has, &x, e))
		goto out;
	if (has)
		r->max_tokens = (int)x;
	if (get_num(root, "temperature", 0, 2, false, &r->has_temperature, &r->temperature, e) ||
	    get_num_in(root, "top_p", 0, true, 1, false, &r->has_top_p, &r->top_p, e))
		goto out;
	if (get_num(root, "top_k", -1, 1 << 20, true, &r->has_top_k, &x, e))
		goto out;
	r->top_k = r->has_top_k ? (int)x : 0;
	if (r->has_top_k && r->top_k < 0) /* -1: vLLM's "no top-k" */
		r->top_k = 0;
	if ((v = json_get(root, "seed")) && v->type != JSON_NULL) { /* an int64, taken exactly */
		if (v->type != JSON_NUMBER || !v->is_int) {
			bad(e, "seed", "'seed' must be an integer in the int64 range");
			goto out;
		}
		r->has_seed = true;
		r->seed = (uint64_t)v->integer;
	}
	if (get_bool(root, "stream", &r->stream, e))
		goto out;
	if ((v = json_get(root, "stream_options")) && v->type != JSON_NULL) {
		static const char *const so_keys[] = {"include_usage", NULL};
		if (v->type != JSON_OBJECT || json_check_keys(v, "$.stream_options", so_keys, &err)) {
			bad(e, "stream_options", "'stream_options' must be an object with include_usage only");
			goto out;
		}
		if (!r->stream) {
			bad(e, "stream_options", "'stream_options' is only allowed with stream: true");
			goto out;
		}
		if (get_bool(v, "include_usage", &r->include_usage, e))
			goto out;
	}
	if (parse_stop(root, r, e))
		goto out;
	rc = 0;
out:
	json_free(root);
	return rc;
}

void sw_req_free(sw_req *r)
{
	free(r->prompt);
	for (int i = 0; i < r->n_msgs; i++) {
		free(r->roles[i]);
		free(r->contents[i]);
	}
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	memset(r, 0, sizeof(*r));
}
