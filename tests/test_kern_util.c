/* The kernel tests' comparison harness itself (tests/util/kern_util.h), on
 * arrays whose differences are placed by hand: every dtype sees a one-bit
 * change at a known element, F32 tells -0 from +0 and one NaN payload from
 * another, the count is exact, and the bounded comparison accepts matching
 * NaN and infinities and values on their bound. Not a template test: it
 * has no template of its own (like test_kern_mma, _nvrtc, _render). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kern_util.h"

static void test_mismatch_count_every_dtype(void **state)
{
	static const kern_dtype types[] = {KERN_F32, KERN_I32, KERN_U32, KERN_U16, KERN_U8};
	static const size_t sizes[] = {4, 4, 4, 2, 1};
	(void)state;
	for (int t = 0; t < 5; t++) {
		enum { N = 37 };
		unsigned char a[N * 4], b[N * 4];
		for (size_t i = 0; i < sizeof(a); i++)
			a[i] = b[i] = (unsigned char)(i * 29 + 3);
		kern_out o = {.name = "x", .type = types[t], .got = a, .want = b, .n = N,
		              .dims = {N}};
		assert_int_equal(kern_mismatches("identical", &o), 0);
		kern_expect("identical", &o);
		/* one bit in element 17 (its last byte), then one more in 30 */
		a[17 * sizes[t] + sizes[t] - 1] ^= 1;
		assert_int_equal(kern_mismatches("one bit", &o), 1);
		a[30 * sizes[t]] ^= 0x80;
		assert_int_equal(kern_mismatches("two elements", &o), 2);
		/* outside n: not compared */
		o.n = 17;
		assert_int_equal(kern_mismatches("prefix", &o), 0);
	}
}

static void test_mismatch_float_representation(void **state)
{
	(void)state;
	const float pz = 0.0f, nz = -0.0f;
	uint32_t q1 = 0x7fc00001u, q2 = 0x7fc00002u;
	float n1, n2;
	memcpy(&n1, &q1, 4);
	memcpy(&n2, &q2, 4);
	float got[4] = {1.5f, pz, n1, INFINITY}, want[4] = {1.5f, nz, n2, INFINITY};
	kern_out o = {.name = "y", .type = KERN_F32, .got = got, .want = want, .n = 4};
	assert_int_equal(kern_mismatches("-0 vs +0, NaN payloads", &o), 2);
	want[1] = pz;
	want[2] = n1;
	assert_int_equal(kern_mismatches("the same bits", &o), 0);
}

static void test_bounded_accepts(void **state)
{
	(void)state;
	const float got[6] = {1.0f, 2.0f + 0x1p-20f, NAN, INFINITY, -INFINITY, -3.0f};
	const double ref[6] = {1.0, 2.0, NAN, INFINITY, -INFINITY, -3.0 - 0x1p-21};
	const double bound[6] = {0.0, 0x1p-20, 0.0, 0.0, 0.0, 0x1p-21};
	kern_expect_close("on the bound, NaN and inf matched", "y", got, ref, bound, 6);
	/* the dtype bounds: f32 2^-24, bf16 2^-8, fp16 2^-11 */
	assert_true(kern_unit_roundoff(KERN_F32, 0) == 0x1p-24);
	assert_true(kern_unit_roundoff(KERN_U16, 0) == 0x1p-8);
	assert_true(kern_unit_roundoff(KERN_U16, 1) == 0x1p-11);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mismatch_count_every_dtype),
		cmocka_unit_test(test_mismatch_float_representation),
		cmocka_unit_test(test_bounded_accepts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
