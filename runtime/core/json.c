/* Strict RFC 8259 JSON parser (recursive descent, depth-bounded) and the typed
 * getters used to validate specs and configs. Every error names the document,
 * line:column, what was expected and what was found. Not a writer, and not
 * tolerant: no comments, no trailing commas, no duplicate keys, no NaN. */
#include "json.h"
#include "utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json_parser {
	const unsigned char *s;
	size_t len, pos;
	const char *file;
	sw_err *err;
	int depth;
	int line;
	size_t line_start;
	/* Column cache: safetensors headers are one long line, so counting code
	 * points from the line start for every value would be quadratic. */
	size_t col_pos;
	int col;
	char *buf; /* scratch for string unescaping, reused */
	size_t buf_cap;
} json_parser;

static json_value *parse_value(json_parser *p);

const char *json_type_name(enum json_type t)
{
	switch (t) {
	case JSON_NULL: return "null";
	case JSON_BOOL: return "boolean";
	case JSON_NUMBER: return "number";
	case JSON_STRING: return "string";
	case JSON_ARRAY: return "array";
	case JSON_OBJECT: return "object";
	}
	return "?";
}

static int col_at(json_parser *p, size_t pos)
{
	if (p->col_pos < p->line_start || p->col_pos > pos) {
		p->col_pos = p->line_start;
		p->col = 1;
	}
	for (size_t i = p->col_pos; i < pos && i < p->len; i++)
		if ((p->s[i] & 0xc0) != 0x80)
			p->col++;
	p->col_pos = pos;
	return p->col;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid or
 * truncated. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	uint32_t cp;
	int l = sw_utf8_next(s, n, &cp);
	return l > 0 ? (size_t)l : 0;
}

/* What is at pos, for "found ..." in messages. */
static const char *describe_at(json_parser *p, size_t pos, char *out, size_t n)
{
	if (pos >= p->len) {
		snprintf(out, n, "end of input");
		return out;
	}
	unsigned char c = p->s[pos];
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
		/* A bare word reads better whole: found 'undefined' */
		size_t e = pos;
		while (e < p->len && e - pos < 24 &&
		       ((p->s[e] >= 'a' && p->s[e] <= 'z') || (p->s[e] >= 'A' && p->s[e] <= 'Z') ||
			(p->s[e] >= '0' && p->s[e] <= '9') || p->s[e] == '_'))
			e++;
		snprintf(out, n, "'%.*s'", (int)(e - pos), (const char *)p->s + pos);
	} else if (c >= 0x20 && c < 0x7f) {
		snprintf(out, n, "'%c'", c);
	} else if (c >= 0x80) {
		size_t l = utf8_seq_len(p->s + pos, p->len - pos);
		if (l)
			snprintf(out, n, "'%.*s'", (int)l, (const char *)p->s + pos);
		else
			snprintf(out, n, "invalid UTF-8 byte 0x%02x", c);
	} else {
		snprintf(out, n, "control character 0x%02x", c);
	}
	return out;
}

/* "file:line:col: expected X, found <what is at pos>". */
static void perr(json_parser *p, size_t pos, const char *expected)
{
	char found[64];
	int line = p->line;
	int col = col_at(p, pos);

	describe_at(p, pos, found, sizeof(found));
	sw_errf(p->err, SW_EINVAL, "%s:%d:%d: expected %s, found %s", p->file, line, col,
		expected, found);
}

/* A message that does not fit "expected/found" (leading zeros, surrogates). */
static void perr_msg(json_parser *p, size_t pos, const char *msg)
{
	int col = col_at(p, pos);
	sw_errf(p->err, SW_EINVAL, "%s:%d:%d: %s", p->file, p->line, col, msg);
}

static void skip_ws(json_parser *p)
{
	while (p->pos < p->len) {
		unsigned char c = p->s[p->pos];
		if (c == '\n') {
			p->line++;
			p->line_start = p->pos + 1;
		} else if (c != ' ' && c != '\t' && c != '\r') {
			return;
		}
		p->pos++;
	}
}

static json_value *new_value(json_parser *p, enum json_type t, size_t pos)
{
	json_value *v = calloc(1, sizeof(*v));
	if (!v) {
		sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
		return NULL;
	}
	v->type = t;
	v->line = p->line;
	v->col = col_at(p, pos);
	v->file = p->file;
	return v;
}

static void free_value(json_value *v)
{
	if (!v)
		return;
	switch (v->type) {
	case JSON_STRING:
		free(v->str);
		break;
	case JSON_ARRAY:
		for (size_t i = 0; i < v->n; i++)
			free_value(v->items[i]);
		free(v->items);
		break;
	case JSON_OBJECT:
		for (size_t i = 0; i < v->n; i++) {
			free(v->members[i].key);
			free_value(v->members[i].value);
		}
		free(v->members);
		break;
	default:
		break;
	}
	free(v);
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static json_value *parse_number(json_parser *p)
{
	size_t start = p->pos, i = p->pos;
	bool neg = false, integral = true;

	if (p->s[i] == '-') {
		neg = true;
		i++;
	}
	if (i >= p->len || !is_digit(p->s[i])) {
		perr(p, i, "a digit after '-'");
		return NULL;
	}
	if (p->s[i] == '0') {
		i++;
		if (i < p->len && is_digit(p->s[i])) {
			perr_msg(p, start, "numbers cannot have leading zeros");
			return NULL;
		}
	} else {
		while (i < p->len && is_digit(p->s[i]))
			i++;
	}
	if (i < p->len && p->s[i] == '.') {
		integral = false;
		i++;
		if (i >= p->len || !is_digit(p->s[i])) {
			perr(p, i, "a digit after '.'");
			return NULL;
		}
		while (i < p->len && is_digit(p->s[i]))
			i++;
	}
	if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
		integral = false;
		i++;
		if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
			i++;
		if (i >= p->len || !is_digit(p->s[i])) {
			perr(p, i, "a digit in the exponent");
			return NULL;
		}
		while (i < p->len && is_digit(p->s[i]))
			i++;
	}

	json_value *v = new_value(p, JSON_NUMBER, start);
	if (!v)
		return NULL;

	/* strtod needs a NUL-terminated copy; the input is not terminated. The
	 * grammar above already excludes everything strtod would accept beyond
	 * JSON (hex, inf, nan, leading '+'). Assumes the "C" numeric locale. */
	size_t n = i - start;
	char small[64], *tmp = small;
	if (n >= sizeof(small)) {
		tmp = malloc(n + 1);
		if (!tmp) {
			free(v);
			sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
			return NULL;
		}
	}
	memcpy(tmp, p->s + start, n);
	tmp[n] = 0;
	errno = 0;
	v->number = strtod(tmp, NULL);
	if (tmp != small)
		free(tmp);
	if (isinf(v->number)) {
		char msg[128];
		snprintf(msg, sizeof(msg), "number %.*s%s is out of range for a double",
			 (int)(n > 32 ? 32 : n), (const char *)p->s + start, n > 32 ? "..." : "");
		perr_msg(p, start, msg);
		free(v);
		return NULL;
	}

	if (integral) {
		/* Exact int64 from the digits, so 2^63-1 survives (a double would not). */
		uint64_t acc = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
		bool fits = true;
		for (size_t k = start + neg; k < i; k++) {
			unsigned d = p->s[k] - '0';
			if (acc > (lim - d) / 10) {
				fits = false;
				break;
			}
			acc = acc * 10 + d;
		}
		if (fits) {
			v->is_int = true;
			v->integer = neg ? (int64_t)(0 - acc) : (int64_t)acc;
		}
	}
	p->pos = i;
	return v;
}

static int buf_put(json_parser *p, size_t *n, const char *src, size_t k)
{
	if (*n + k + 1 > p->buf_cap) {
		size_t cap = p->buf_cap ? p->buf_cap : 64;
		while (cap < *n + k + 1)
			cap *= 2;
		char *nb = realloc(p->buf, cap);
		if (!nb)
			return sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
		p->buf = nb;
		p->buf_cap = cap;
	}
	memcpy(p->buf + *n, src, k);
	*n += k;
	return 0;
}

static int hex4(json_parser *p, size_t at, unsigned *out)
{
	unsigned v = 0;
	for (size_t k = 0; k < 4; k++) {
		unsigned char c = at + k < p->len ? p->s[at + k] : 0;
		unsigned d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else {
			perr(p, at + k, "4 hex digits after \\u");
			return SW_EINVAL;
		}
		v = v * 16 + d;
	}
	*out = v;
	return 0;
}

/* Parses the string at p->pos (a '"') into a malloc'd NUL-terminated copy. */
static int parse_string_raw(json_parser *p, char **out, size_t *out_len)
{
	size_t n = 0;
	size_t i = p->pos + 1;
	int rc;

	for (;;) {
		if (i >= p->len) {
			perr(p, i, "'\"' to close the string");
			return SW_EINVAL;
		}
		unsigned char c = p->s[i];
		if (c == '"') {
			i++;
			break;
		}
		if (c < 0x20) {
			perr(p, i, c == '\n' ? "'\"' to close the string (raw newlines are not allowed in strings)"
					     : "a character (control characters must be escaped)");
			return SW_EINVAL;
		}
		if (c == '\\') {
			unsigned char e = i + 1 < p->len ? p->s[i + 1] : 0;
			char ch;
			switch (e) {
			case '"': ch = '"'; break;
			case '\\': ch = '\\'; break;
			case '/': ch = '/'; break;
			case 'b': ch = '\b'; break;
			case 'f': ch = '\f'; break;
			case 'n': ch = '\n'; break;
			case 'r': ch = '\r'; break;
			case 't': ch = '\t'; break;
			case 'u': {
				unsigned cp, lo;
				char enc[4];
				if ((rc = hex4(p, i + 2, &cp)))
					return rc;
				if (cp >= 0xdc00 && cp <= 0xdfff) {
					perr_msg(p, i, "unpaired low surrogate \\u escape (expected a high surrogate \\uD800-\\uDBFF first)");
					return SW_EINVAL;
				}
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (i + 7 >= p->len || p->s[i + 6] != '\\' || p->s[i + 7] != 'u') {
						perr(p, i + 6, "a low surrogate \\uDC00-\\uDFFF after a high surrogate");
						return SW_EINVAL;
					}
					if ((rc = hex4(p, i + 8, &lo)))
						return rc;
					if (lo < 0xdc00 || lo > 0xdfff) {
						perr_msg(p, i + 6, "expected a low surrogate \\uDC00-\\uDFFF after a high surrogate");
						return SW_EINVAL;
					}
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i += 6;
				}
				if ((rc = buf_put(p, &n, enc, sw_utf8_put(cp, enc))))
					return rc;
				i += 6;
				continue;
			}
			default:
				perr(p, i + 1, "an escape character (one of \" \\ / b f n r t u)");
				return SW_EINVAL;
			}
			if ((rc = buf_put(p, &n, &ch, 1)))
				return rc;
			i += 2;
			continue;
		}
		size_t l = utf8_seq_len(p->s + i, p->len - i);
		if (!l) {
			perr(p, i, "valid UTF-8");
			return SW_EINVAL;
		}
		/* Copy the run of plain bytes at once. */
		size_t j = i + l;
		while (j < p->len && p->s[j] >= 0x20 && p->s[j] < 0x80 && p->s[j] != '"' && p->s[j] != '\\')
			j++;
		if ((rc = buf_put(p, &n, (const char *)p->s + i, j - i)))
			return rc;
		i = j;
	}

	char *s = malloc(n + 1);
	if (!s)
		return sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
	if (n)
		memcpy(s, p->buf, n);
	s[n] = 0;
	*out = s;
	*out_len = n;
	p->pos = i;
	return 0;
}

static int cmp_member_idx(const void *a, const void *b, void *ctx)
{
	const json_member *m = ctx;
	size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
	const json_member *x = &m[ia], *y = &m[ib];
	size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = memcmp(x->key, y->key, n);
	if (c)
		return c;
	if (x->key_len != y->key_len)
		return x->key_len < y->key_len ? -1 : 1;
	return ia < ib ? -1 : ia > ib;
}

/* Sorting finds duplicates in O(n log n): a quadratic scan would let a
 * hostile header with 10^5 keys stall the loader. */
static int check_duplicates(json_parser *p, json_value *obj)
{
	if (obj->n < 2)
		return 0;
	size_t *idx = malloc(obj->n * sizeof(*idx));
	if (!idx)
		return sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
	for (size_t i = 0; i < obj->n; i++)
		idx[i] = i;
	qsort_r(idx, obj->n, sizeof(*idx), cmp_member_idx, obj->members);
	size_t best = SIZE_MAX, first = 0;
	for (size_t i = 1; i < obj->n; i++) {
		const json_member *a = &obj->members[idx[i - 1]], *b = &obj->members[idx[i]];
		if (a->key_len == b->key_len && !memcmp(a->key, b->key, a->key_len) &&
		    (best == SIZE_MAX || idx[i] < best)) {
			best = idx[i];
			first = idx[i - 1];
		}
	}
	free(idx);
	if (best == SIZE_MAX)
		return 0;
	const json_member *d = &obj->members[best], *f = &obj->members[first];
	/* Only the first of a run of equal keys sorts before the rest by index,
	 * and that is the one to cite. */
	return sw_errf(p->err, SW_EINVAL, "%s:%d:%d: duplicate key \"%.64s\" (first at %d:%d)",
		       p->file, d->line, d->col, d->key, f->line, f->col);
}

static int enter(json_parser *p)
{
	if (++p->depth > JSON_MAX_DEPTH) {
		char msg[96];
		snprintf(msg, sizeof(msg), "nesting deeper than %d arrays/objects", JSON_MAX_DEPTH);
		perr_msg(p, p->pos, msg);
		return SW_EINVAL;
	}
	return 0;
}

static json_value *parse_array(json_parser *p)
{
	json_value *v = new_value(p, JSON_ARRAY, p->pos);
	size_t cap = 0;

	if (!v)
		return NULL;
	if (enter(p))
		goto out_free_v;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == ']') {
		p->pos++;
		goto out_done;
	}
	for (;;) {
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ']' && v->n) {
			perr_msg(p, p->pos, "expected a value after ',', found ']' (trailing commas are not allowed)");
			goto out_free_v;
		}
		json_value *item = parse_value(p);
		if (!item)
			goto out_free_v;
		if (v->n == cap) {
			size_t nc = cap ? cap * 2 : 4;
			json_value **ni = realloc(v->items, nc * sizeof(*ni));
			if (!ni) {
				free_value(item);
				sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
				goto out_free_v;
			}
			v->items = ni;
			cap = nc;
		}
		v->items[v->n++] = item;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == ']') {
			p->pos++;
			break;
		}
		perr(p, p->pos, "',' or ']' after an array element");
		goto out_free_v;
	}
out_done:
	p->depth--;
	return v;
out_free_v:
	free_value(v);
	return NULL;
}

static json_value *parse_object(json_parser *p)
{
	json_value *v = new_value(p, JSON_OBJECT, p->pos);
	size_t cap = 0;

	if (!v)
		return NULL;
	if (enter(p))
		goto out_free_v;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == '}') {
		p->pos++;
		goto out_done;
	}
	for (;;) {
		json_member m = { 0 };

		skip_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != '"') {
			if (v->n && p->pos < p->len && p->s[p->pos] == '}')
				perr_msg(p, p->pos, "expected a string key after ',', found '}' (trailing commas are not allowed)");
			else
				perr(p, p->pos, v->n ? "a string key after ','" : "a string key or '}'");
			goto out_free_v;
		}
		m.line = p->line;
		m.col = col_at(p, p->pos);
		if (parse_string_raw(p, &m.key, &m.key_len))
			goto out_free_v;
		skip_ws(p);
		if (p->pos >= p->len || p->s[p->pos] != ':') {
			perr(p, p->pos, "':' after an object key");
			free(m.key);
			goto out_free_v;
		}
		p->pos++;
		skip_ws(p);
		m.value = parse_value(p);
		if (!m.value) {
			free(m.key);
			goto out_free_v;
		}
		if (v->n == cap) {
			size_t nc = cap ? cap * 2 : 4;
			json_member *nm = realloc(v->members, nc * sizeof(*nm));
			if (!nm) {
				free(m.key);
				free_value(m.value);
				sw_errf(p->err, SW_ENOMEM, "%s: out of memory parsing JSON", p->file);
				goto out_free_v;
			}
			v->members = nm;
			cap = nc;
		}
		v->members[v->n++] = m;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == '}') {
			p->pos++;
			break;
		}
		perr(p, p->pos, "',' or '}' after an object member");
		goto out_free_v;
	}
	if (check_duplicates(p, v))
		goto out_free_v;
out_done:
	p->depth--;
	return v;
out_free_v:
	free_value(v);
	return NULL;
}

static json_value *parse_literal(json_parser *p, const char *word, enum json_type t, bool b)
{
	size_t n = strlen(word);
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n)) {
		perr(p, p->pos, "a value (object, array, string, number, true, false or null)");
		return NULL;
	}
	json_value *v = new_value(p, t, p->pos);
	if (!v)
		return NULL;
	v->boolean = b;
	p->pos += n;
	return v;
}

static json_value *parse_value(json_parser *p)
{
	skip_ws(p);
	if (p->pos >= p->len) {
		perr(p, p->pos, "a value");
		return NULL;
	}
	switch (p->s[p->pos]) {
	case '{':
		return parse_object(p);
	case '[':
		return parse_array(p);
	case '"': {
		json_value *v = new_value(p, JSON_STRING, p->pos);
		if (!v)
			return NULL;
		if (parse_string_raw(p, &v->str, &v->str_len)) {
			free(v);
			return NULL;
		}
		return v;
	}
	case 't':
		return parse_literal(p, "true", JSON_BOOL, true);
	case 'f':
		return parse_literal(p, "false", JSON_BOOL, false);
	case 'n':
		return parse_literal(p, "null", JSON_NULL, false);
	default:
		if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
			return parse_number(p);
		perr(p, p->pos, "a value (object, array, string, number, true, false or null)");
		return NULL;
	}
}

json_value *json_parse(const char *text, size_t len, const char *name, sw_err *err)
{
	json_parser p = {
		.s = (const unsigned char *)text,
		.len = text ? len : 0,
		.file = name ? name : "<json>",
		.err = err,
		.line = 1,
		.col = 1,
	};
	char *file;
	json_value *root;

	/* Every node points at one copy of the name, owned by the root. */
	file = strdup(p.file);
	if (!file) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory parsing JSON", p.file);
		return NULL;
	}
	p.file = file;
	if (p.len >= 3 && !memcmp(p.s, "\xef\xbb\xbf", 3)) {
		perr_msg(&p, 0, "a byte order mark is not allowed (RFC 8259 section 8.1)");
		goto out_free_file;
	}
	root = parse_value(&p);
	if (!root)
		goto out_free_file;
	skip_ws(&p);
	if (p.pos != p.len) {
		perr(&p, p.pos, "end of input after the top-level value");
		free_value(root);
		goto out_free_file;
	}
	free(p.buf);
	return root;

out_free_file:
	free(p.buf);
	free(file);
	return NULL;
}

void json_free(json_value *root)
{
	if (!root)
		return;
	char *file = (char *)root->file;
	free_value(root);
	free(file);
}

const json_value *json_get(const json_value *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	size_t kl = strlen(key);
	for (size_t i = 0; i < obj->n; i++)
		if (obj->members[i].key_len == kl && !memcmp(obj->members[i].key, key, kl))
			return obj->members[i].value;
	return NULL;
}

/* ---- paths and messages ---- */

static bool is_ident(const char *k)
{
	if (!*k)
		return false;
	for (const char *c = k; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
		      (c != k && *c >= '0' && *c <= '9')))
			return false;
	return true;
}

char *json_path_key(char *out, size_t n, const char *path, const char *key)
{
	if (!n)
		return out;
	if (is_ident(key))
		snprintf(out, n, "%s.%s", path ? path : "$", key);
	else
		snprintf(out, n, "%s[\"%s\"]", path ? path : "$", key);
	return out;
}

char *json_path_index(char *out, size_t n, const char *path, size_t i)
{
	if (n)
		snprintf(out, n, "%s[%zu]", path ? path : "$", i);
	return out;
}

/* Shortest %g that reads back as the same double: 1e-05, not 1.0000000000000001e-05. */
static void fmt_double(char *out, size_t n, double d)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, n, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			return;
	}
}

static const char *describe_value(const json_value *v, char *out, size_t n)
{
	switch (v->type) {
	case JSON_NULL:
		snprintf(out, n, "null");
		break;
	case JSON_BOOL:
		snprintf(out, n, "%s", v->boolean ? "true" : "false");
		break;
	case JSON_NUMBER:
		if (v->is_int) {
			snprintf(out, n, "%" PRId64, v->integer);
		} else {
			char d[40];
			fmt_double(d, sizeof(d), v->number);
			snprintf(out, n, "%s", d);
		}
		break;
	case JSON_STRING: {
		/* Cut long strings on a code point boundary. */
		size_t k = v->str_len;
		if (k > 40) {
			k = 40;
			while (k > 0 && ((unsigned char)v->str[k] & 0xc0) == 0x80)
				k--;
		}
		snprintf(out, n, "string \"%.*s\"%s", (int)k, v->str, k < v->str_len ? "..." : "");
		break;
	}
	case JSON_ARRAY:
		snprintf(out, n, "array of %zu element%s", v->n, v->n == 1 ? "" : "s");
		break;
	case JSON_OBJECT:
		snprintf(out, n, "object");
		break;
	}
	return out;
}

static int verr(sw_err *err, const json_value *v, const char *path, const char *expected)
{
	char found[96];
	return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: expected %s, found %s", v->file, v->line,
		       v->col, path ? path : "$", expected, describe_value(v, found, sizeof(found)));
}

int json_as_int(const json_value *v, const char *path, int64_t min, int64_t max,
		int64_t *out, sw_err *err)
{
	char exp[96];
	if (min == INT64_MIN && max == INT64_MAX)
		snprintf(exp, sizeof(exp), "an integer");
	else if (max == INT64_MAX)
		snprintf(exp, sizeof(exp), "an integer >= %" PRId64, min);
	else if (min == INT64_MIN)
		snprintf(exp, sizeof(exp), "an integer <= %" PRId64, max);
	else
		snprintf(exp, sizeof(exp), "an integer in [%" PRId64 ", %" PRId64 "]", min, max);
	/* an integer literal too large for 64 bits: say so in integers, not as
	 * the nearest double (9.223372036854776e+18 reads like a fraction) */
	if (v->type == JSON_NUMBER && !v->is_int && isfinite(v->number) && v->number == floor(v->number) &&
	    fabs(v->number) >= 9.2e18)
		return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: expected %s, found %.0f (beyond the 64-bit integer range)",
		               v->file, v->line, v->col, path ? path : "$", exp, v->number);
	if (v->type != JSON_NUMBER || !v->is_int || v->integer < min || v->integer > max)
		return verr(err, v, path, exp);
	*out = v->integer;
	return 0;
}

int json_as_number(const json_value *v, const char *path, double min, double max,
		   double *out, sw_err *err)
{
	char exp[128], a[40], b[40];
	fmt_double(a, sizeof(a), min);
	fmt_double(b, sizeof(b), max);
	if (isinf(min) && isinf(max))
		snprintf(exp, sizeof(exp), "a number");
	else if (isinf(max))
		snprintf(exp, sizeof(exp), "a number >= %s", a);
	else if (isinf(min))
		snprintf(exp, sizeof(exp), "a number <= %s", b);
	else
		snprintf(exp, sizeof(exp), "a number in [%s, %s]", a, b);
	if (v->type != JSON_NUMBER || !(v->number >= min && v->number <= max))
		return verr(err, v, path, exp);
	*out = v->number;
	return 0;
}

int json_as_string(const json_value *v, const char *path, const char **out, sw_err *err)
{
	if (v->type != JSON_STRING)
		return verr(err, v, path, "a string");
	*out = v->str;
	return 0;
}

int json_as_bool(const json_value *v, const char *path, bool *out, sw_err *err)
{
	if (v->type != JSON_BOOL)
		return verr(err, v, path, "true or false");
	*out = v->boolean;
	return 0;
}

int json_as_array(const json_value *v, const char *path, size_t min_len,
		  size_t max_len, sw_err *err)
{
	char exp[96];
	if (min_len == 0 && max_len == SIZE_MAX)
		snprintf(exp, sizeof(exp), "an array");
	else if (min_len == max_len)
		snprintf(exp, sizeof(exp), "an array of %zu elements", min_len);
	else if (max_len == SIZE_MAX)
		snprintf(exp, sizeof(exp), "an array of at least %zu elements", min_len);
	else
		snprintf(exp, sizeof(exp), "an array of %zu to %zu elements", min_len, max_len);
	if (v->type != JSON_ARRAY || v->n < min_len || v->n > max_len)
		return verr(err, v, path, exp);
	return 0;
}

int json_as_object(const json_value *v, const char *path, sw_err *err)
{
	if (v->type != JSON_OBJECT)
		return verr(err, v, path, "an object");
	return 0;
}

/* Shared front half of the json_get_* family: obj must be an object holding
 * key; *v gets the member and fpath its path. */
static int get_member(const json_value *obj, const char *key, const char *path,
		      const json_value **v, char *fpath, size_t fn, sw_err *err)
{
	int rc;
	if (!obj)
		return sw_errf(err, SW_EINVAL, "%s: expected an object, found nothing", path ? path : "$");
	if ((rc = json_as_object(obj, path, err)))
		return rc;
	json_path_key(fpath, fn, path, key);
	*v = json_get(obj, key);
	if (!*v)
		return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: missing required field \"%s\"",
			       obj->file, obj->line, obj->col, path ? path : "$", key);
	return 0;
}

int json_get_int(const json_value *obj, const char *key, const char *path,
		 int64_t min, int64_t max, int64_t *out, sw_err *err)
{
	const json_value *v;
	char fp[256];
	int rc = get_member(obj, key, path, &v, fp, sizeof(fp), err);
	return rc ? rc : json_as_int(v, fp, min, max, out, err);
}

int json_get_number(const json_value *obj, const char *key, const char *path,
		    double min, double max, double *out, sw_err *err)
{
	const json_value *v;
	char fp[256];
	int rc = get_member(obj, key, path, &v, fp, sizeof(fp), err);
	return rc ? rc : json_as_number(v, fp, min, max, out, err);
}

int json_get_string(const json_value *obj, const char *key, const char *path,
		    const char **out, sw_err *err)
{
	const json_value *v;
	char fp[256];
	int rc = get_member(obj, key, path, &v, fp, sizeof(fp), err);
	return rc ? rc : json_as_string(v, fp, out, err);
}

int json_get_bool(const json_value *obj, const char *key, const char *path,
		  bool *out, sw_err *err)
{
	const json_value *v;
	char fp[256];
	int rc = get_member(obj, key, path, &v, fp, sizeof(fp), err);
	return rc ? rc : json_as_bool(v, fp, out, err);
}

int json_get_array(const json_value *obj, const char *key, const char *path,
		   size_t min_len, size_t max_len, const json_value **out, sw_err *err)
{
	const json_value *v;
	char fp[256];
	int rc = get_member(obj, key, path, &v, fp, sizeof(fp), err);
	if (rc || (rc = json_as_array(v, fp, min_len, max_len, err)))
		return rc;
	*out = v;
	return 0;
}

int json_get_object(const json_value *obj, const char *key, const char *path,
		    const json_value **out, sw_err *err)
{
	const json_value *v;
	char fp[256];
	int rc = get_member(obj, key, path, &v, fp, sizeof(fp), err);
	if (rc || (rc = json_as_object(v, fp, err)))
		return rc;
	*out = v;
	return 0;
}

/* Levenshtein distance, capped: only used to suggest a near allowed key. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[65];
	if (la > 64 || lb > 64)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

int json_refuse(sw_err *err, const json_value *v, const char *path, const char *expected,
                const char *fmt, ...)
{
	char found[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(found, sizeof(found), fmt, ap);
	va_end(ap);
	return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: expected %s, found %s", v->file, v->line,
	               v->col, path, expected, found);
}

int json_check_keys(const json_value *obj, const char *path,
		    const char *const *allowed, sw_err *err)
{
	int rc;
	if ((rc = json_as_object(obj, path, err)))
		return rc;
	for (size_t i = 0; i < obj->n; i++) {
		const json_member *m = &obj->members[i];
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			if (strlen(*a) == m->key_len && !memcmp(*a, m->key, m->key_len))
				ok = true;
		if (ok)
			continue;

		char list[512] = "", hint[128] = "";
		size_t len = 0, best = SIZE_MAX;
		const char *near = NULL;
		for (const char *const *a = allowed; *a; a++) {
			int w = snprintf(list + len, sizeof(list) - len, "%s%s", a == allowed ? "" : ", ", *a);
			if (w > 0 && (size_t)w < sizeof(list) - len)
				len += (size_t)w;
			size_t d = edit_distance(m->key, *a);
			if (d < best) {
				best = d;
				near = *a;
			}
		}
		/* A suggestion only when it is plausibly a typo. */
		if (near && best <= 2 && best < strlen(near))
			snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", near);
		return sw_errf(err, SW_EINVAL, "%s:%d:%d: %s: unknown field \"%.64s\"%s; allowed: %s",
			       obj->file, m->line, m->col, path ? path : "$", m->key, hint, list);
	}
	return 0;
}
