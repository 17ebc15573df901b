/* argmax template in the emulator vs a scalar loop with rt_argmax's rule
 * (first index of the maximum): awkward widths, heavy ties, -inf entries,
 * all -inf rows, one-element rows, a vocabulary-sized row. Exact. */
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

static int loop_argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static void check(int T, int N, int block, int mode)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N", .type = GEN_PARAM_INT, .i = N},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	const emu_kernel *k = load_kernel("argmax.cu.tmpl", "argmax_f32", p, 3);
	float *x = emu_alloc((size_t)T * N * sizeof(float), "x");
	int32_t *out = emu_alloc((size_t)T * sizeof(int32_t), "out");

	for (size_t i = 0; i < (size_t)T * N; i++) {
		double r = rnd();
		if (mode == 0)
			x[i] = (float)r;
		else if (mode == 1) /* five values: ties everywhere, the max repeated */
			x[i] = (float)floor((r + 1.0) * 2.5);
		else                /* mostly -inf */
			x[i] = r < 0.8 ? -INFINITY : (float)r;
	}
	if (mode == 2)
		for (int i = 0; i < N; i++)
			x[i] = -INFINITY; /* row 0 all -inf: index 0 */
	int32_t *want = malloc((size_t)T * sizeof(*want));
	char what[96];
	for (int t = 0; t < T; t++)
		want[t] = loop_argmax(x + (size_t)t * N, N);
	snprintf(what, sizeof(what), "%s mode %d", k->name, mode);
	void *args[] = {&out, &x};
	kern_out o = {.name = "argmax", .type = KERN_I32, .got = out, .want = want, .n = (size_t)T};
	kern_launch_expect(what, k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	emu_free(x);
	emu_free(out);
	free(want);
}

static void test_argmax_shapes(void **state)
{
	static const int Ns[] = {1, 3, 33, 111, 260, 576};
	static const int Ts[] = {1, 3, 7};
	(void)state;
	for (int a = 0; a < 6; a++)
		for (int b = 0; b < 3; b++)
			for (int m = 0; m < 3; m++) {
				check(Ts[b], Ns[a], 32, m);
				check(Ts[b], Ns[a], 256, m);
			}
}

static void test_argmax_vocab(void **state)
{
	(void)state;
	check(2, 49152, 256, 0);
	check(2, 49152, 256, 1);
	check(3, 32001, 512, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argmax_shapes),
		cmocka_unit_test(test_argmax_vocab),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
