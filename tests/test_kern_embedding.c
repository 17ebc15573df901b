/* embedding template in the emulator vs ref_embedding: awkward dims, 1 and odd
 * token counts, vector and scalar paths, out-of-range ids. A copy is exact,
 * so the bound is zero: bit equality. */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/emu.h"
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"

static const emu_kernel *kern(int dim, int n_rows, int block)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "DIM", .type = GEN_PARAM_INT, .i = dim},
		{.name = "N_ROWS", .type = GEN_PARAM_INT, .i = n_rows},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	return load_kernel("embedding.cu.tmpl", "embedding_f32", p, 4);
}

static void check(int T, int dim, int block, int bad_at)
{
	const int n_rows = 50;
	const emu_kernel *k = kern(dim, n_rows, block);
	float *table = emu_alloc((size_t)n_rows * dim * sizeof(float), "table");
	float *y = emu_alloc((size_t)T * dim * sizeof(float), "y");
	int32_t *tok = emu_alloc((size_t)T * sizeof(int32_t), "tok");
	int32_t *err = emu_alloc(sizeof(int32_t), "err");
	float *ref = malloc((size_t)T * dim * sizeof(float));
	char what[96];

	for (size_t i = 0; i < (size_t)n_rows * dim; i++)
		table[i] = (float)rnd();
	for (int t = 0; t < T; t++)
		tok[t] = (int32_t)((t * 37 + 11) % n_rows);
	*err = 0;
	assert_int_equal(ref_embedding(ref, table, tok, T, dim, n_rows), 0);
	if (bad_at >= 0) {
		tok[bad_at] = bad_at % 2 ? n_rows : -1;
		/* a bad id's row stays untouched: still emu_alloc's 0xff poison */
		memset(ref + (size_t)bad_at * dim, 0xff, (size_t)dim * sizeof(float));
	}
	void *args[] = {&y, &table, &tok, &err};
	snprintf(what, sizeof(what), "%s T%d bad id at %d", k->name, T, bad_at);
	kern_out o = {.name = "y", .type = KERN_F32, .got = y, .want = ref, .n = (size_t)T * dim,
	              .dims = {T, dim}};
	kern_launch_expect(what, k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	assert_int_equal(*err, bad_at >= 0);
	emu_free(table);
	emu_free(y);
	emu_free(tok);
	emu_free(err);
	free(ref);
}

static void test_embedding_shapes(void **state)
{
	static const int dims[] = {33, 111, 260, 576};
	static const int Ts[] = {1, 3, 7};
	(void)state;
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++) {
			check(Ts[b], dims[a], 32, -1);
			check(Ts[b], dims[a], 128, -1);
		}
}

static void test_embedding_bad_id(void **state)
{
	(void)state;
	check(5, 111, 64, 2);
	check(5, 576, 64, 3);
	check(1, 260, 32, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedding_shapes),
		cmocka_unit_test(test_embedding_bad_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
