/* A small strict JSON (RFC 8259) parser to a DOM, plus typed getters that
 * report errors with the file, position and JSON path (`$.tree.paths[3]`).
 * It is for specs, configs and safetensors headers: documents of at most a few
 * MB. Not a streaming parser, not a writer, no extensions (comments, NaN,
 * trailing commas, duplicate keys are all errors). */
#ifndef RT_JSON_H
#define RT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define JSON_MAX_DEPTH 64 /* nested arrays/objects; deeper input is refused */

enum json_type {
	JSON_NULL = 0,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

typedef struct json_value json_value;

typedef struct json_member {
	char *key;        /* UTF-8, NUL-terminated (may contain \u0000: see key_len) */
	size_t key_len;
	int line, col;    /* position of the key, for messages */
	json_value *value;
} json_member;

struct json_value {
	enum json_type type;
	int line, col;    /* 1-based position of the value's first byte; col counts
			   * code points, as an editor shows them */
	const char *file; /* document name given to json_parse, for messages */
	bool boolean;     /* JSON_BOOL */
	double number;    /* JSON_NUMBER: nearest double (strtod) */
	bool is_int;      /* JSON_NUMBER written as an integer literal (no '.',
			   * no exponent) that fits int64: then integer is exact */
	int64_t integer;
	char *str;        /* JSON_STRING: unescaped UTF-8, NUL-terminated */
	size_t str_len;   /* bytes, without the terminator */
	size_t n;         /* JSON_ARRAY: items; JSON_OBJECT: members */
	json_value **items;   /* JSON_ARRAY */
	json_member *members; /* JSON_OBJECT, in document order */
};

/* Parses exactly one JSON value (surrounded by optional whitespace) from
 * text[0..len). name is used in messages ("config.json:3:14: ..."). Returns
 * the root or NULL with err set (SW_EINVAL for malformed input, SW_ENOMEM). */
json_value *json_parse(const char *text, size_t len, const char *name, sw_err *err);

/* Frees a tree returned by json_parse (only roots; NULL is fine). */
void json_free(json_value *root);

/* "null", "boolean", "number", "string", "array", "object" */
const char *json_type_name(enum json_type t);

/* The member value for key, or NULL when obj is not an object or lacks key. */
const json_value *json_get(const json_value *obj, const char *key);

/* Typed getters. `path` is the JSON path of obj (e.g. "$.tree"); messages name
 * path.key, what was expected and what was found, and the position. A missing
 * key is an error ("missing required field"): for optional fields test with
 * json_get() first. Return 0 or SW_EINVAL. */
int json_get_int(const json_value *obj, const char *key, const char *path,
		 int64_t min, int64_t max, int64_t *out, sw_err *err);
int json_get_number(const json_value *obj, const char *key, const char *path,
		    double min, double max, double *out, sw_err *err);
int json_get_string(const json_value *obj, const char *key, const char *path,
		    const char **out, sw_err *err);
int json_get_bool(const json_value *obj, const char *key, const char *path,
		  bool *out, sw_err *err);
int json_get_array(const json_value *obj, const char *key, const char *path,
		   size_t min_len, size_t max_len, const json_value **out, sw_err *err);
int json_get_object(const json_value *obj, const char *key, const char *path,
		    const json_value **out, sw_err *err);

/* The same checks on a value itself (array elements): `path` is v's path. */
int json_as_int(const json_value *v, const char *path, int64_t min, int64_t max,
		int64_t *out, sw_err *err);
int json_as_number(const json_value *v, const char *path, double min, double max,
		   double *out, sw_err *err);
int json_as_string(const json_value *v, const char *path, const char **out, sw_err *err);
int json_as_bool(const json_value *v, const char *path, bool *out, sw_err *err);
int json_as_array(const json_value *v, const char *path, size_t min_len,
		  size_t max_len, sw_err *err);
int json_as_object(const json_value *v, const char *path, sw_err *err);

/* "file:line:col: $.path: expected E, found F" (SW_EINVAL) for a value the
 * typed getters accepted but a rule refuses; found is printf-style. */
int json_refuse(sw_err *err, const json_value *v, const char *path, const char *expected,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Refuses members of obj whose key is not in `allowed` (NULL-terminated):
 * "spec.json:4:3: $.tree: unknown field "depht" (did you mean "depth"?;
 * allowed: ...)". Returns 0 or SW_EINVAL. */
int json_check_keys(const json_value *obj, const char *path,
		    const char *const *allowed, sw_err *err);

/* Path builders for messages: out = path + ".key" (or ["key"] when key is not
 * an identifier) / path + "[i]". Truncate safely; return out. */
char *json_path_key(char *out, size_t n, const char *path, const char *key);
char *json_path_index(char *out, size_t n, const char *path, size_t i);

#endif
