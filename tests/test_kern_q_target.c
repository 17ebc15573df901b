/* q_target template (a mapped draft vocabulary's q gathered onto the
 * target's ids through t2d) in the emulator vs ref_q_target, and the
 * reference vs the host decoder's own rule (runtime/decode/block_decode.c
 * scatter_q: q[d2t[i]] = q_draft[i], 0 elsewhere) written out here
 * independently. Shapes: DEPTHS 1, 3, 8; VD 37, 100, 1000 of V = VD + 13,
 * 2 VD + 1 and 1037 (VD and V not multiples of the block), the map a
 * shuffled choice of VD target ids (not sorted); the output buffer starts
 * with garbage, so every element must be written. Guard zones around the
 * output are checked by the emulator. Refused (nothing written): a t2d entry
 * outside [-1, VD), V < VD. Then NVRTC (sm_80, sm_90) at SmolLM2's and
 * Llama-3-8B's vocabularies, zero spills. */
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
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}

static void check(int rows, int VD, int V, int block)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("DEPTHS", rows), I("VD", VD),
	                 I("V", V), I("BLOCK", block)};
	const emu_kernel *k = load_kernel("q_target.cu.tmpl", "q_target", p, 5);
	float *out = emu_alloc((size_t)rows * V * sizeof(*out), "out");
	float *q = emu_alloc((size_t)rows * VD * sizeof(*q), "q");
	int32_t *t2d = emu_alloc((size_t)V * sizeof(*t2d), "t2d");
	int32_t *ids = malloc((size_t)V * sizeof(*ids));
	float *want = malloc((size_t)rows * V * sizeof(*want)), *host = calloc((size_t)rows * V, sizeof(*host));

	/* d2t: the first VD of a shuffle of [0, V) */
	for (int v = 0; v < V; v++)
		ids[v] = v;
	for (int v = V - 1; v > 0; v--) {
		const int w = (int)(tu_rand(&rng_state) % (uint64_t)(v + 1)), x = ids[v];
		ids[v] = ids[w];
		ids[w] = x;
	}
	int sorted = 1;
	for (int i = 1; i < VD; i++)
		sorted &= ids[i] > ids[i - 1];
	assert_false(sorted);
	for (int v = 0; v < V; v++)
		t2d[v] = -1;
	for (int i = 0; i < VD; i++)
		t2d[ids[i]] = i;
	for (size_t e = 0; e < (size_t)rows * VD; e++)
		q[e] = (float)(rnd() * 0.5 + 0.5);
	for (size_t e = 0; e < (size_t)rows * V; e++)
		out[e] = want[e] = 12345.0f; /* garbage the kernel must overwrite */
	assert_int_equal(ref_q_target(want, q, t2d, rows, VD, V), 0);
	/* the host decoder's scatter through d2t, independently */
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < VD; i++)
			host[(size_t)r * V + ids[i]] = q[(size_t)r * VD + i];
	assert_memory_equal(want, host, (size_t)rows * V * sizeof(*want));
	void *args[] = {&out, &q, &t2d};
	char what[96];
	snprintf(what, sizeof(what), "%s DEPTHS%d VD%d V%d", k->name, rows, VD, V);
	kern_out o = {.name = "out", .type = KERN_F32, .got = out, .want = want,
	              .n = (size_t)rows * V, .dims = {rows, V}};
	kern_launch_expect(what, k, d3((unsigned)((V + block - 1) / block), (unsigned)rows, 1),
	                   d3((unsigned)block, 1, 1), args, &o, 1);
	emu_free(out);
	emu_free(q);
	emu_free(t2d);
	free(ids);
	free(want);
	free(host);
}

static void test_q_target_shapes(void **state)
{
	static const int rows[] = {1, 3, 8}, vds[] = {37, 100, 1000};
	(void)state;
	for (int r = 0; r < 3; r++)
		for (int d = 0; d < 3; d++) {
			check(rows[r], vds[d], vds[d] + 13, 32);
			check(rows[r], vds[d], 2 * vds[d] + 1, 64);
		}
	check(2, 37, 1037, 256);
}

static void test_q_target_refused(void **state)
{
	int32_t t2d[6] = {-1, 0, 2, 1, -1, -1};
	float q[3] = {0.1f, 0.2f, 0.7f}, out[6] = {9, 9, 9, 9, 9, 9};
	(void)state;
	t2d[5] = 3; /* >= VD */
	assert_int_equal(ref_q_target(out, q, t2d, 1, 3, 6), REF_EINVAL);
	t2d[5] = -2;
	assert_int_equal(ref_q_target(out, q, t2d, 1, 3, 6), REF_EINVAL);
	t2d[5] = -1;
	assert_int_equal(ref_q_target(out, q, t2d, 1, 7, 6), REF_EINVAL); /* V < VD */
	assert_int_equal(ref_q_target(out, q, t2d, 0, 3, 6), REF_EINVAL);
	for (int i = 0; i < 6; i++)
		assert_true(out[i] == 9.0f);
	assert_int_equal(ref_q_target(out, q, t2d, 1, 3, 6), 0);
	assert_true(out[0] == 0.0f && out[1] == 0.1f && out[2] == 0.7f && out[3] == 0.2f && out[5] == 0.0f);
}

static void test_q_target_nvrtc(void **state)
{
	/* SmolLM2 (V 49152, Vd 8192, depth 8), Llama-3-8B (V 128256, Vd 32000,
	 * depth 16) */
	static const int shapes[][3] = {{8, 8192, 49152}, {16, 32000, 128256}};
	(void)state;
	for (int s = 0; s < 2; s++) {
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("DEPTHS", shapes[s][0]),
		                 I("VD", shapes[s][1]), I("V", shapes[s][2]), I("BLOCK", 256)};
		nvrtc_check_ex("q_target.cu.tmpl", "q_target", p, 5, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_q_target_shapes),
		cmocka_unit_test(test_q_target_refused),
		cmocka_unit_test(test_q_target_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
