/* ref_embedding: rows copied bit for bit (no arithmetic, so equality, not a
 * bound), ids at both ends of the table, repeated ids, and out-of-range ids
 * (negative, == n_rows) rejected with -1 before anything is written. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ref.h"

/* ---- shared by the ref-op tests (each file carries its own copy so that one
 * test binary never depends on another test's code) ---- */

/* fp32 unit roundoff u = 2^-24 and gamma_n = n u / (1 - n u) (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 3.1): a length-n fp32
 * dot product, in any summation order, with or without FMA, lies within
 * gamma_n * sum |a_i b_i| of the exact value. The references below are
 * computed in double from the same fp32 inputs, so their own error (~n 2^-53)
 * is negligible against these bounds. */
#define U32 0x1p-24
static inline double gamma_n(int n)
{
	return n * U32 / (1.0 - n * U32);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
/* splitmix64 -> uniform in [-1, 1); independent of the library's Philox. */
static inline double rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-52 - 1.0;
}

static inline void fill(float *x, size_t n, double scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(rnd() * scale);
}

/* Guard zones: GUARD floats of a NaN bit pattern no op produces on either
 * side of every output; any write outside the output shows up as a change. */
#define GUARD 16
static const uint32_t CANARY = 0x7fc0deadu;

static inline float *galloc(size_t n)
{
	float *b = malloc((n + 2 * GUARD) * sizeof(*b));
	assert_non_null(b);
	for (size_t i = 0; i < GUARD; i++) {
		memcpy(&b[i], &CANARY, sizeof(CANARY));
		memcpy(&b[GUARD + n + i], &CANARY, sizeof(CANARY));
	}
	return b + GUARD;
}

static inline void gcheck(const char *what, const float *p, size_t n)
{
	for (size_t i = 0; i < GUARD; i++) {
		if (memcmp(&p[-1 - (ptrdiff_t)i], &CANARY, sizeof(CANARY)) != 0)
			fail_msg("%s: guard before the buffer overwritten at -%zu", what, i + 1);
		if (memcmp(&p[n + i], &CANARY, sizeof(CANARY)) != 0)
			fail_msg("%s: guard after the buffer overwritten at +%zu", what, i);
	}
}

static inline void gfree(float *p)
{
	free(p - GUARD);
}

/* Every element finite and within its derived bound; then the NMSE, checked
 * against the NMSE those same bounds imply (sum bound^2 / sum ref^2), so the
 * summary statistic and the elementwise test cannot disagree silently. */
static inline void check_close(const char *what, const float *got, const double *ref, const double *bound,
                        size_t n)
{
	double se = 0.0, sr = 0.0, sb = 0.0, max_abs = 0.0, max_bound = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			fail_msg("%s[%zu]: %g is not finite (ref %g)", what, i, (double)got[i], ref[i]);
		double d = fabs((double)got[i] - ref[i]);
		if (!(d <= bound[i]))
			fail_msg("%s[%zu]: got %.9g ref %.9g |diff| %.3g > bound %.3g", what, i,
			         (double)got[i], ref[i], d, bound[i]);
		se += d * d;
		sr += ref[i] * ref[i];
		sb += bound[i] * bound[i];
		max_abs = fmax(max_abs, d);
		max_bound = fmax(max_bound, bound[i]);
	}
	if (sr > 0.0 && !(se / sr <= sb / sr))
		fail_msg("%s: NMSE %.3g > derived %.3g", what, se / sr, sb / sr);
	if (!(max_abs <= max_bound))
		fail_msg("%s: max |diff| %.3g > max bound %.3g", what, max_abs, max_bound);
}
/* ---- end of shared helpers ---- */

static void test_embedding_rows(void **state)
{
	static const int dims[] = {1, 33, 111, 260};
	static const int Ts[] = {1, 5, 33};
	const int n_rows = 111;
	(void)state;
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++) {
			const int dim = dims[a], T = Ts[b];
			float *table = galloc((size_t)n_rows * dim), *y = galloc((size_t)T * dim);
			int32_t *tok = malloc((size_t)T * sizeof(*tok));
			char what[64];

			fill(table, (size_t)n_rows * dim, 1.0);
			for (int t = 0; t < T; t++) /* first, last, a repeat, then random */
				tok[t] = t == 0 ? 0 : t == 1 ? n_rows - 1 : t == 2 ? 0
				       : (int32_t)((rnd() + 1.0) / 2.0 * n_rows);
			assert_int_equal(ref_embedding(y, table, tok, T, dim, n_rows), 0);
			snprintf(what, sizeof(what), "embedding T%d dim%d", T, dim);
			for (int t = 0; t < T; t++) {
				const float *row = table + (size_t)tok[t] * dim;
				for (int i = 0; i < dim; i++)
					if (!isfinite(y[(size_t)t * dim + i]))
						fail_msg("%s: non-finite at %d,%d", what, t, i);
				assert_memory_equal(y + (size_t)t * dim, row, (size_t)dim * sizeof(*y));
			}
			gcheck(what, y, (size_t)T * dim);
			gfree(table);
			gfree(y);
			free(tok);
		}
}

static void test_embedding_bad_id(void **state)
{
	const int n_rows = 33, dim = 33, T = 3;
	static const int32_t bad[] = {-1, 33, INT32_MAX, INT32_MIN};
	float *table = galloc((size_t)n_rows * dim), *y = galloc((size_t)T * dim);
	(void)state;
	fill(table, (size_t)n_rows * dim, 1.0);
	for (int b = 0; b < 4; b++) {
		/* The bad id is last, so an op that wrote as it went would already
		 * have touched rows 0 and 1. */
		int32_t tok[3] = {4, 5, bad[b]};
		for (int i = 0; i < T * dim; i++)
			memcpy(&y[i], &CANARY, sizeof(CANARY));
		assert_int_equal(ref_embedding(y, table, tok, T, dim, n_rows), -1);
		for (int i = 0; i < T * dim; i++)
			assert_memory_equal(&y[i], &CANARY, sizeof(CANARY));
		gcheck("embedding bad id", y, (size_t)T * dim);
	}
	gfree(table);
	gfree(y);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedding_rows),
		cmocka_unit_test(test_embedding_bad_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
