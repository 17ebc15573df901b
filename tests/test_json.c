/* Tests for runtime/json.c: valid documents round into the right DOM, every
 * class of invalid input is refused with the right line:column, and the typed
 * getters' messages carry the JSON path, what was expected and what was found. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/json.h"

static json_value *parse_ok(const char *s)
{
	sw_err err = { 0 };
	json_value *v = json_parse(s, strlen(s), "t.json", &err);
	if (!v)
		fail_msg("unexpected error for %s: %s", s, err.msg);
	return v;
}

/* Parses s (len bytes), expects failure with a message containing each of
 * the NULL-terminated fragments. */
static void parse_bad_n(const char *s, size_t len, ...)
{
	sw_err err = { 0 };
	json_value *v = json_parse(s, len, "t.json", &err);
	va_list ap;

	if (v) {
		json_free(v);
		fail_msg("accepted invalid JSON: %.*s", (int)len, s);
	}
	assert_int_equal(err.code, SW_EINVAL);
	va_start(ap, len);
	for (const char *frag; (frag = va_arg(ap, const char *));)
		if (!strstr(err.msg, frag))
			fail_msg("message for %.*s lacks \"%s\": %s", (int)len, s, frag, err.msg);
	va_end(ap);
}

#define parse_bad(s, ...) parse_bad_n(s, strlen(s), __VA_ARGS__, NULL)

static void test_nesting_and_order(void **state)
{
	json_value *v = parse_ok(" {\"b\": [1, [2, {\"c\": null}], true],\n \"a\": {}, \"z\": false, \"e\": []} ");

	assert_int_equal(v->type, JSON_OBJECT);
	assert_int_equal(v->n, 4);
	/* document order, not sorted */
	assert_string_equal(v->members[0].key, "b");
	assert_string_equal(v->members[1].key, "a");
	assert_string_equal(v->members[2].key, "z");
	assert_string_equal(v->members[3].key, "e");
	const json_value *b = json_get(v, "b");
	assert_non_null(b);
	assert_int_equal(b->type, JSON_ARRAY);
	assert_int_equal(b->n, 3);
	assert_int_equal(b->items[1]->items[1]->type, JSON_OBJECT);
	assert_int_equal(json_get(b->items[1]->items[1], "c")->type, JSON_NULL);
	assert_true(b->items[2]->boolean);
	assert_int_equal(json_get(v, "a")->n, 0);
	assert_int_equal(json_get(v, "e")->type, JSON_ARRAY);
	assert_null(json_get(v, "missing"));
	assert_null(json_get(b, "b")); /* not an object */
	/* positions: "a" is on line 2, column 2 (key), its value at column 7 */
	assert_int_equal(v->members[1].line, 2);
	assert_int_equal(v->members[1].col, 2);
	assert_int_equal(json_get(v, "a")->line, 2);
	assert_int_equal(json_get(v, "a")->col, 7);
	json_free(v);

	/* exactly the depth limit is fine */
	char deep[2 * JSON_MAX_DEPTH + 1];
	memset(deep, '[', JSON_MAX_DEPTH);
	memset(deep + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
	deep[2 * JSON_MAX_DEPTH] = 0;
	json_free(parse_ok(deep));
	/* scalars at top level */
	v = parse_ok("\"x\"");
	assert_string_equal(v->str, "x");
	json_free(v);
	v = parse_ok(" null ");
	assert_int_equal(v->type, JSON_NULL);
	json_free(v);
}

static void test_strings_and_escapes(void **state)
{
	json_value *v = parse_ok("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u4e2d\", \"\\ud83d\\ude00\","
				 " \"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\", \"a\\u0000b\", \"\"]");
	assert_string_equal(v->items[0]->str, "a\"b\\c/d\b\f\n\r\t");
	assert_string_equal(v->items[1]->str, "\xc3\xa9\xe4\xb8\xad");
	/* U+1F600 from a surrogate pair */
	assert_string_equal(v->items[2]->str, "\xf0\x9f\x98\x80");
	assert_string_equal(v->items[3]->str, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
	assert_int_equal(v->items[4]->str_len, 3);
	assert_memory_equal(v->items[4]->str, "a\0b", 4);
	assert_int_equal(v->items[5]->str_len, 0);
	json_free(v);
	/* upper-case hex and the top code point U+10FFFF */
	v = parse_ok("\"\\u00C9\\uDBFF\\uDFFF\"");
	assert_string_equal(v->str, "\xc3\x89\xf4\x8f\xbf\xbf");
	json_free(v);
	/* a long string crosses the scratch buffer's growth */
	char big[5000];
	big[0] = '"';
	memset(big + 1, 'x', sizeof(big) - 3);
	big[sizeof(big) - 2] = '"';
	big[sizeof(big) - 1] = 0;
	v = parse_ok(big);
	assert_int_equal(v->str_len, sizeof(big) - 3);
	json_free(v);
}

static void test_numbers(void **state)
{
	json_value *v = parse_ok("[0, -0, 1, -17, 3.25, 1e3, 1E-2, -2.5e+2, 0.5,"
				 " 9223372036854775807, -9223372036854775808, 9223372036854775808,"
				 " 12345678901234567890123, 1e-400, 4.0]");
	const json_value *const *it = (const json_value *const *)v->items;

	assert_true(it[0]->is_int);
	assert_int_equal(it[0]->integer, 0);
	/* -0 is an integer 0 but keeps its sign as a double */
	assert_true(it[1]->is_int);
	assert_int_equal(it[1]->integer, 0);
	assert_true(signbit(it[1]->number));
	assert_int_equal(it[3]->integer, -17);
	assert_false(it[4]->is_int);
	assert_true(it[4]->number == 3.25);
	assert_false(it[5]->is_int); /* an exponent makes it a float literal */
	assert_true(it[5]->number == 1000.0);
	assert_true(it[6]->number == 0.01);
	assert_true(it[7]->number == -250.0);
	assert_true(it[8]->number == 0.5);
	assert_true(it[9]->is_int);
	assert_true(it[9]->integer == INT64_MAX);
	assert_true(it[10]->is_int);
	assert_true(it[10]->integer == INT64_MIN);
	assert_false(it[11]->is_int); /* 2^63 does not fit */
	assert_true(it[11]->number == 9223372036854775808.0);
	assert_false(it[12]->is_int);
	assert_true(it[12]->number == 12345678901234567890123.0);
	assert_true(it[13]->number == 0.0); /* underflow is fine */
	assert_false(it[14]->is_int);
	json_free(v);
}

static void test_invalid_inputs(void **state)
{
	parse_bad("", "t.json:1:1:", "expected a value", "found end of input");
	parse_bad("   \n  ", "t.json:2:3:", "end of input");
	parse_bad("[1, 2,]", "t.json:1:7:", "trailing commas");
	parse_bad("{\"a\": 1,}", "t.json:1:9:", "trailing commas");
	parse_bad("{\"a\": 1,\n \"a\": 2}", "t.json:2:2:", "duplicate key \"a\"", "first at 1:2");
	parse_bad("{\"b\":1, \"a\": 1, \"c\":2, \"a\": 2, \"b\": 3}", "t.json:1:24:", "duplicate key \"a\"", "first at 1:9");
	parse_bad("{\"a\" 1}", "t.json:1:6:", "expected ':'", "found '1'");
	parse_bad("{a: 1}", "t.json:1:2:", "expected a string key", "found 'a'");
	parse_bad("[1 2]", "t.json:1:4:", "expected ',' or ']'", "found '2'");
	parse_bad("{\"a\": 1 \"b\": 2}", "t.json:1:9:", "expected ',' or '}'");
	parse_bad("[1] x", "t.json:1:5:", "expected end of input", "found 'x'");
	parse_bad("{} {}", "t.json:1:4:", "end of input");
	parse_bad("[tru]", "t.json:1:2:", "found 'tru'");
	parse_bad("[undefined]", "t.json:1:2:", "found 'undefined'");
	parse_bad("[NaN]", "found 'NaN'");
	parse_bad("[Infinity]", "found 'Infinity'");
	parse_bad("[+1]", "t.json:1:2:", "found '+'");
	parse_bad("[01]", "t.json:1:2:", "leading zeros");
	parse_bad("[-01]", "t.json:1:2:", "leading zeros");
	parse_bad("[-]", "t.json:1:3:", "a digit after '-'", "found ']'");
	parse_bad("[1.]", "t.json:1:4:", "a digit after '.'");
	parse_bad("[.5]", "t.json:1:2:", "found '.'");
	parse_bad("[1e]", "t.json:1:4:", "a digit in the exponent");
	parse_bad("[1e+]", "t.json:1:5:", "a digit in the exponent");
	parse_bad("[0x10]", "t.json:1:3:", "found 'x10'");
	parse_bad("[1e400]", "t.json:1:2:", "out of range");
	parse_bad("[\"abc", "t.json:1:6:", "'\"' to close the string", "end of input");
	parse_bad("[\"a\nb\"]", "t.json:1:4:", "raw newlines");
	parse_bad("[\"a\tb\"]", "t.json:1:4:", "control character 0x09");
	parse_bad("[\"\\x\"]", "t.json:1:4:", "an escape character", "found 'x'");
	parse_bad("[\"\\u12G4\"]", "t.json:1:7:", "4 hex digits");
	parse_bad("[\"\\u12\"]", "t.json:1:7:", "4 hex digits", "found '\"'");
	parse_bad("[\"\\ud800\"]", "t.json:1:9:", "low surrogate");
	parse_bad("[\"\\ud800\\u0041\"]", "t.json:1:9:", "low surrogate");
	parse_bad("[\"\\udc00\"]", "t.json:1:3:", "unpaired low surrogate");
	parse_bad("[\"a\xff\"]", "t.json:1:4:", "invalid UTF-8 byte 0xff");
	parse_bad("[\"\xc0\xaf\"]", "t.json:1:3:", "invalid UTF-8 byte 0xc0");  /* overlong '/' */
	parse_bad("[\"\xe0\x80\xaf\"]", "invalid UTF-8 byte 0xe0");            /* overlong */
	parse_bad("[\"\xed\xa0\x80\"]", "invalid UTF-8 byte 0xed");            /* UTF-8 surrogate */
	parse_bad("[\"\xf4\x90\x80\x80\"]", "invalid UTF-8 byte 0xf4");        /* > U+10FFFF */
	parse_bad("[\"\xe4\xb8\"]", "invalid UTF-8 byte 0xe4");                /* truncated */
	parse_bad("[\"\xc3\xa9\" \xc3\xa9]", "t.json:1:6:", "found '\xc3\xa9'"); /* columns count code points */
	parse_bad("\xef\xbb\xbf{}", "t.json:1:1:", "byte order mark");
	parse_bad("// c\n{}", "t.json:1:1:", "found '/'");
	parse_bad("['a']", "t.json:1:2:", "found '''");
	parse_bad("[1,\n\n   ?]", "t.json:3:4:", "found '?'");
	parse_bad("{\"a\":1\r\n,\"b\"}", "t.json:2:5:", "expected ':'");
	parse_bad_n("[1,\0 2]", 7, "t.json:1:4:", "control character 0x00", NULL);

	/* depth 65 */
	char deep[2 * JSON_MAX_DEPTH + 3];
	memset(deep, '[', JSON_MAX_DEPTH + 1);
	memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
	deep[2 * JSON_MAX_DEPTH + 2] = 0;
	parse_bad(deep, "t.json:1:65:", "nesting deeper than 64");
	/* unbalanced deep input is refused by the depth limit, not the stack */
	char deeper[100000];
	memset(deeper, '[', sizeof(deeper) - 1);
	deeper[sizeof(deeper) - 1] = 0;
	parse_bad(deeper, "nesting deeper");
}

static void test_getters(void **state)
{
	sw_err err = { 0 };
	json_value *v = parse_ok("{\n  \"tree\": {\"depth\": 5, \"paths\": [[0], [0, 1], \"x\", -3, 2.5],\n"
				 "  \"name\": \"abc\", \"t\": 0.5, \"on\": true, \"big\": 1e300, \"n\": null}}");
	const json_value *tree, *paths;
	const char *s;
	int64_t i;
	double d;
	bool b;

	assert_int_equal(json_get_object(v, "tree", "$", &tree, &err), 0);
	assert_int_equal(json_get_int(tree, "depth", "$.tree", 1, 16, &i, &err), 0);
	assert_int_equal(i, 5);
	assert_int_equal(json_get_string(tree, "name", "$.tree", &s, &err), 0);
	assert_string_equal(s, "abc");
	assert_int_equal(json_get_number(tree, "t", "$.tree", 0.0, 1.0, &d, &err), 0);
	assert_true(d == 0.5);
	/* integers are numbers too */
	assert_int_equal(json_get_number(tree, "depth", "$.tree", 0.0, 10.0, &d, &err), 0);
	assert_true(d == 5.0);
	assert_int_equal(json_get_bool(tree, "on", "$.tree", &b, &err), 0);
	assert_true(b);
	assert_int_equal(json_get_array(tree, "paths", "$.tree", 1, 8, &paths, &err), 0);
	assert_int_equal(paths->n, 5);

	/* out of range */
	assert_int_equal(json_get_int(tree, "depth", "$.tree", 6, 16, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "t.json:2:21: $.tree.depth: expected an integer in [6, 16], found 5"));
	/* wrong types, with the path of an array element */
	char path[64];
	json_path_index(path, sizeof(path), "$.tree.paths", 2);
	assert_int_equal(json_as_array(paths->items[2], path, 1, 4, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.paths[2]: expected an array of 1 to 4 elements, found string \"x\""));
	json_path_index(path, sizeof(path), "$.tree.paths", 3);
	assert_int_equal(json_as_int(paths->items[3], path, 0, INT64_MAX, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.paths[3]: expected an integer >= 0, found -3"));
	json_path_index(path, sizeof(path), "$.tree.paths", 4);
	assert_int_equal(json_as_int(paths->items[4], path, INT64_MIN, INT64_MAX, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.paths[4]: expected an integer, found 2.5"));
	assert_int_equal(json_get_int(tree, "t", "$.tree", INT64_MIN, 3, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "expected an integer <= 3, found 0.5"));
	assert_int_equal(json_get_number(tree, "big", "$.tree", 0.0, 1e10, &d, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.big: expected a number in [0, 1e+10], found 1e+300"));
	assert_int_equal(json_get_number(tree, "name", "$.tree", -INFINITY, INFINITY, &d, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.name: expected a number, found string \"abc\""));
	assert_int_equal(json_get_string(tree, "depth", "$.tree", &s, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.depth: expected a string, found 5"));
	assert_int_equal(json_get_bool(tree, "n", "$.tree", &b, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.n: expected true or false, found null"));
	assert_int_equal(json_get_object(tree, "paths", "$.tree", &tree, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.tree.paths: expected an object, found array of 5 elements"));
	assert_int_equal(json_get_array(v, "tree", "$", 0, SIZE_MAX, &paths, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "t.json:2:11: $.tree: expected an array, found object"));
	/* missing */
	assert_int_equal(json_get_int(v, "nope", "$", 0, 1, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "t.json:1:1: $: missing required field \"nope\""));
	/* getter on a non-object */
	assert_int_equal(json_get_int(paths, "x", "$.tree.paths", 0, 1, &i, &err), SW_EINVAL);
	json_free(v);

	/* paths with keys that are not identifiers */
	json_path_key(path, sizeof(path), "$", "model.norm.weight");
	assert_string_equal(path, "$[\"model.norm.weight\"]");
	json_path_key(path, sizeof(path), "$.a", "b_2");
	assert_string_equal(path, "$.a.b_2");
	/* long strings in "found" are cut on a code point boundary */
	v = parse_ok("{\"s\": \"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}");
	assert_int_equal(json_get_int(v, "s", "$", 0, 1, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "\xc3\xa9\"..."));
	json_free(v);
	/* shortest round-trip formatting of doubles in messages */
	v = parse_ok("{\"eps\": 1e-05}");
	assert_int_equal(json_get_number(v, "eps", "$", 0.5, 1.0, &d, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "expected a number in [0.5, 1], found 1e-05"));
	json_free(v);
	/* an integer past 64 bits is named as the integer it is, not as a double */
	v = parse_ok("{\"off\": 9223372036854775808}");
	assert_int_equal(json_get_int(v, "off", "$", 0, INT64_MAX, &i, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "found 9223372036854775808 (beyond the 64-bit integer range)"));
	json_free(v);
}

static void test_unknown_keys(void **state)
{
	static const char *const allowed[] = { "depth", "width", "paths", NULL };
	sw_err err = { 0 };
	json_value *v = parse_ok("{\"depth\": 1, \"paths\": []}");

	assert_int_equal(json_check_keys(v, "$.tree", allowed, &err), 0);
	json_free(v);

	v = parse_ok("{\"depth\": 1,\n \"depht\": 2}");
	assert_int_equal(json_check_keys(v, "$.tree", allowed, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "t.json:2:2: $.tree: unknown field \"depht\" (did you mean \"depth\"?); allowed: depth, width, paths"));
	json_free(v);

	v = parse_ok("{\"colour\": 1}");
	assert_int_equal(json_check_keys(v, "$", allowed, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "unknown field \"colour\"; allowed:"));
	assert_null(strstr(err.msg, "did you mean"));
	json_free(v);

	v = parse_ok("[1]");
	assert_int_equal(json_check_keys(v, "$", allowed, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$: expected an object, found array of 1 element"));
	json_free(v);
}

static void test_misc(void **state)
{
	sw_err err = { 0 };
	/* not NUL-terminated: the parser must stop at len */
	const char buf[] = { '[', '1', ']', '9' };
	json_value *v = json_parse(buf, 3, "buf", &err);
	assert_non_null(v);
	assert_int_equal(v->items[0]->integer, 1);
	assert_string_equal(v->file, "buf");
	json_free(v);
	json_free(NULL);
	assert_null(json_parse(NULL, 0, NULL, &err));
	assert_non_null(strstr(err.msg, "<json>:1:1: expected a value"));
	/* NULL err is allowed */
	assert_null(json_parse("[", 1, "x", NULL));
	assert_string_equal(json_type_name(JSON_ARRAY), "array");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nesting_and_order),
		cmocka_unit_test(test_strings_and_escapes),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_invalid_inputs),
		cmocka_unit_test(test_getters),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_misc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
