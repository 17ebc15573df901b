/* gen/render.c: {{NAME}} substitution with typed constants, its refusals
 * (unknown, unused, duplicate, malformed, unterminated placeholders, bad
 * identifiers, non-finite floats), exact float literals, and keys. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gen/render.h"

static void expect_error(const char *tmpl, const gen_param *p, int n, const char *needle)
{
	sw_err err = {0};
	char *out = (char *)1;
	assert_int_equal(gen_render(tmpl, "t.cu.tmpl", p, n, &out, &err), SW_EINVAL);
	assert_null(out);
	if (!strstr(err.msg, needle))
		fail_msg("message lacks '%s': %s", needle, err.msg);
}

static void test_render_values(void **state)
{
	(void)state;
	gen_param p[] = {
		{.name = "D", .type = GEN_PARAM_INT, .i = 576},
		{.name = "NEG", .type = GEN_PARAM_INT, .i = -3},
		{.name = "BIG", .type = GEN_PARAM_INT, .i = 1ll << 40},
		{.name = "EPS", .type = GEN_PARAM_FLOAT, .f = 1e-5f},
		{.name = "NAME", .type = GEN_PARAM_IDENT, .s = "k_d576"},
	};
	sw_err err = {0};
	char *out;
	assert_int_equal(gen_render("void {{NAME}}(){ int a = x-{{NEG}}; int d = {{D}}; "
	                            "long long b = {{BIG}}; float e = {{EPS}}; int d2 = {{D}}; }",
	                            "t.cu.tmpl", p, 5, &out, &err), 0);
	const char *body = strchr(out, '\n') + 1;
	assert_true(!strncmp(out, "/* generated from t.cu.tmpl", 27));
	assert_string_equal(body, "void k_d576(){ int a = x-(-3); int d = 576; long long b = "
	                          "1099511627776LL; float e = 0x1.4f8b58p-17f; int d2 = 576; }");
	free(out);
	/* Float literals round-trip exactly, including subnormals and extremes. */
	const float vals[] = {1e-5f, -0.0f, 0.1f, FLT_MAX, FLT_MIN, 0x1p-149f, -3.14159274f, 1.0f / 3};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		gen_param f = {.name = "F", .type = GEN_PARAM_FLOAT, .f = vals[i]};
		assert_int_equal(gen_render("{{F}}", "t", &f, 1, &out, &err), 0);
		const char *lit = strchr(out, '\n') + 1;
		float back = strtof(lit + (lit[0] == '('), NULL);
		if (memcmp(&back, &vals[i], sizeof(float)))
			fail_msg("%a printed as %s reads back as %a", (double)vals[i], lit, (double)back);
		free(out);
	}
}

static void test_render_refusals(void **state)
{
	(void)state;
	gen_param d = {.name = "D", .type = GEN_PARAM_INT, .i = 1};
	gen_param two[] = {d, {.name = "E", .type = GEN_PARAM_INT, .i = 2}};
	gen_param dup[] = {d, d};
	expect_error("x {{D}} {{Q}}", &d, 1, "placeholder {{Q}} has no value");
	expect_error("line1\nx {{Q}}", &d, 1, "t.cu.tmpl:2");
	expect_error("x {{D}}", two, 2, "parameter E is never used");
	expect_error("x {{D}}", dup, 2, "parameter D given twice");
	expect_error("x {{D}} {{ D }}", &d, 1, "malformed placeholder");
	expect_error("x {{D}} {{D\n}}", &d, 1, "unterminated placeholder");
	expect_error("x {{D}} {{1D}}", &d, 1, "malformed");
	gen_param id = {.name = "N", .type = GEN_PARAM_IDENT, .s = "a-b"};
	expect_error("{{N}}", &id, 1, "not a C identifier");
	/* A long URI is rendered whole (it once was cut at 63 characters without
	 * a word), and one beyond the supported length is refused. */
	char longid[601];
	memset(longid, 'k', 600);
	longid[600] = 0;
	longid[130] = 0;
	gen_param mid = {.name = "N", .type = GEN_PARAM_IDENT, .s = longid};
	char *r = NULL;
	sw_err e2 = {0};
	assert_int_equal(gen_render("{{N}}", "t.cu.tmpl", &mid, 1, &r, &e2), 0);
	assert_non_null(strstr(r, longid));
	free(r);
	longid[130] = 'k';
	expect_error("{{N}}", &mid, 1, "at most 511 are supported");
	gen_param inf = {.name = "F", .type = GEN_PARAM_FLOAT, .f = INFINITY};
	expect_error("{{F}}", &inf, 1, "only finite values");
	sw_err err = {0};
	char *out;
	assert_int_equal(gen_render_file("/nonexistent/x.cu.tmpl", &d, 1, &out, &err), SW_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/x.cu.tmpl"));
}

static void test_key(void **state)
{
	(void)state;
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT, .s = "ignored"},
		{.name = "DTYPE", .type = GEN_PARAM_IDENT, .s = "bf16"},
		{.name = "DIM", .type = GEN_PARAM_INT, .i = 576},
		{.name = "OFF", .type = GEN_PARAM_INT, .i = -2},
		{.name = "EPS", .type = GEN_PARAM_FLOAT, .f = 1.0f},
	};
	char k[128];
	assert_int_equal(gen_key(k, sizeof(k), "rmsnorm", p, 5), 0);
	assert_string_equal(k, "rmsnorm_bf16_dim576_offm2_eps3f800000");
	assert_int_equal(gen_key(k, 10, "rmsnorm", p, 5), SW_ERANGE);
	/* key_omit_zero: at 0 out of the key (the key before the parameter
	 * existed), any other value in it */
	gen_param w[] = {{.name = "DIM", .type = GEN_PARAM_INT, .i = 8},
	                 {.name = "WINDOW", .type = GEN_PARAM_INT, .i = 0, .key_omit_zero = true}};
	assert_int_equal(gen_key(k, sizeof(k), "attn", w, 2), 0);
	assert_string_equal(k, "attn_dim8");
	w[1].i = 512;
	assert_int_equal(gen_key(k, sizeof(k), "attn", w, 2), 0);
	assert_string_equal(k, "attn_dim8_window512");
	w[1].key_omit_zero = false;
	w[1].i = 0;
	assert_int_equal(gen_key(k, sizeof(k), "attn", w, 2), 0);
	assert_string_equal(k, "attn_dim8_window0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_values),
		cmocka_unit_test(test_render_refusals),
		cmocka_unit_test(test_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
