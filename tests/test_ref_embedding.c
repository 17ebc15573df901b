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

#include "kernels/ref/ref.h"

#include "check.h"

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
