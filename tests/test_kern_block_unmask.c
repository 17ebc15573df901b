/* block_unmask template (the block drafter's S > 1 step and its final Z and
 * draws) in the emulator vs ref_block_unmask, and ref_block_unmask vs the
 * host reference decoder's own rule (runtime/decode/block_decode.c:
 * rt_block_unmask_step and rt_block_final_draw, the pieces its chain drafter
 * runs), on the same fixed logits per pass, seed and iteration.
 * One case: S passes over B positions with fresh logits (B, VD) per pass;
 * the engine side runs logits_process's specification on them, then the
 * kernel (and the reference) after every pass, FINAL 0 after passes 0..S-2
 * and FINAL 1 after the last; the host side runs the unmask step on the
 * logits and the final draws. Required: the kernel's blk_tok and probs
 * bit for bit the reference's after every launch (guard zones around both);
 * the reference's blk_tok[1..B] equal to the host's fixed[] after every
 * pass and to the host's draft tokens at the end; the final probs (Z) equal
 * to the host's q rows (zero beyond VD) at T > 0, and one-hot at the host's
 * token at T = 0 (where the host takes the argmax of the logits and writes
 * no q). Shapes: B 2, 5, 8, 16; VD 37, 1000, 8192; S 1..5; T 0, 0.8, 1.3
 * with top-k / top-p; logits with ties (the argmax's lower-id rule) on some
 * cases. Counts how many positions were unmasked early, so the test cannot
 * pass with a rule that never fires. Mapped draft vocabularies (MAPPED 1,
 * ref_block_unmask_map): d2t a shuffled choice of VD of the V target ids
 * (not sorted, VD not a multiple of the block), blk_tok in target ids: the
 * kernel bit for bit the reference, the reference's tokens the host's
 * draft ids through d2t (block_decode's blk[] and tok[]), Z in draft ids
 * as the host's. Then NVRTC (sm_80, sm_90). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/block_decode.h"
#include "decode/sampler.h"
#include "kernels/ref/ref.h"

#include "op_harness.h"
#include "testutil.h"

static const emu_kernel *kern(int B, int VD, int pass, int steps, int final, int mapped, int block)
{
	gen_param p[] = {OH_NAME, OH_I("B", B), OH_I("VD", VD), OH_I("PASS", pass),
	                 OH_I("STEPS", steps), OH_I("FINAL", final), OH_I("MAPPED", mapped),
	                 OH_I("BLOCK", block)};
	return oh_load(SW_OP_block_unmask, p, 8);
}

static long g_cases, g_early;

static void check_m(int B, int VD, int S, float temp, int top_k, float top_p, int ties, int sd_i,
                    int mapped)
{
	const int block = VD >= 1000 ? 256 : 32, V = VD + 11; /* the target's vocabulary: wider */
	const uint64_t seed = 0xb1a5c0deull + (uint64_t)sd_i * 104729u + (uint64_t)(B * VD);
	const uint32_t iter_v = (uint32_t)(sd_i * 7 + 3);
	const size_t nv = (size_t)B * VD;
	int32_t *tok = emu_alloc((size_t)(B + 1) * sizeof(*tok), "blk_tok");
	float *probs = emu_alloc(nv * sizeof(*probs), "probs");
	uint32_t *sw = kern_seed(seed);
	int32_t *iter = emu_alloc(sizeof(*iter), "iter");
	float *lg = malloc(nv * sizeof(*lg)), *want_p = malloc(nv * sizeof(*want_p));
	float *row = malloc((size_t)VD * sizeof(*row)), *q = malloc((size_t)B * V * sizeof(*q));
	int *idx = malloc((size_t)V * sizeof(*idx));
	/* the map: VD distinct target ids of V, shuffled (identity: unmapped) */
	int32_t *d2t = emu_alloc((size_t)V * sizeof(*d2t), "d2t");
	for (int v = 0; v < V; v++)
		d2t[v] = v;
	for (int v = V - 1; mapped && v > 0; v--) {
		const int w = (int)(tu_rand(&rng_state) % (uint64_t)(v + 1)), x = d2t[v];
		d2t[v] = d2t[w];
		d2t[w] = x;
	}
#define TGT(y) ((y) >= 0 ? d2t[y] : -1)
	int32_t want_tok[65], fixed[64], host_tok[64];
	rt_sampling s = {.temperature = temp, .top_k = top_k, .top_p = top_p};
	const bool greedy = rt_sampling_greedy(&s);
	char what[160];

	*iter = (int32_t)iter_v;
	tok[0] = want_tok[0] = 4242; /* the anchor: never touched */
	for (int j = 1; j <= B; j++)
		tok[j] = want_tok[j] = -1;
	for (int j = 0; j < B; j++)
		fixed[j] = -1;
	for (int i = 0; i < S; i++) {
		const int final = i == S - 1;
		for (size_t e = 0; e < nv; e++)
			lg[e] = ties ? floorf((float)(2.0 * rnd())) : (float)(4.0 * rnd());
		ref_logits_process(want_p, lg, B, VD, temp, top_k, top_p, idx);
		memcpy(probs, want_p, nv * sizeof(*probs));
		assert_int_equal(ref_block_unmask_map(want_tok, want_p, mapped ? d2t : NULL, B, VD,
		                                      final ? 0 : i, S, final, seed, iter_v),
		                 0);
		const emu_kernel *k = kern(B, VD, final ? 0 : i, S, final, mapped, block);
		void *args[] = {&tok, &probs, &sw, &iter, &d2t};
		snprintf(what, sizeof(what), "%s T %.2f k %d p %.2f ties %d seed %d pass %d%s", k->name,
		         (double)temp, top_k, (double)top_p, ties, sd_i, i, mapped ? " mapped" : "");
		kern_out o[] = {
			{.name = "blk_tok", .type = KERN_I32, .got = tok, .want = want_tok, .n = (size_t)B + 1},
			{.name = "probs", .type = KERN_F32, .got = probs, .want = want_p, .n = nv,
			 .dims = {B, VD}},
		};
		kern_launch_expect(what, k, d3((unsigned)B, 1, 1), d3((unsigned)block, 1, 1), args, o, 2);

		/* the host reference decoder's rule on the same logits */
		if (!final) {
			rt_block_unmask_step(i, S, B, VD, lg, &s, seed, iter_v, fixed, row, idx);
			for (int j = 0; j < B; j++)
				if (TGT(fixed[j]) != want_tok[j + 1])
					fail_msg("%s: position %d: ref_block_unmask fixed %d, block_decode %d", what,
					         j, want_tok[j + 1], fixed[j]);
			continue;
		}
		for (int j = 0; j < B; j++) {
			float *qj = q + (size_t)j * V;
			for (int v = 0; v < V; v++)
				qj[v] = -1.0f; /* greedy: the host writes no q for a drawn position */
			host_tok[j] = rt_block_final_draw(j, fixed[j], lg + (size_t)j * VD, VD, V, &s, seed,
			                                  iter_v, qj, idx);
			g_early += fixed[j] >= 0;
			if (TGT(host_tok[j]) != want_tok[j + 1])
				fail_msg("%s: draft token %d: ref_block_unmask %d, block_decode %d (fixed %d)",
				         what, j, want_tok[j + 1], host_tok[j], fixed[j]);
			const float *z = want_p + (size_t)j * VD;
			if (greedy && fixed[j] < 0) { /* Z one-hot at the host's argmax */
				for (int v = 0; v < VD; v++)
					if (z[v] != (v == host_tok[j] ? 1.0f : 0.0f))
						fail_msg("%s: Z row %d at %d: %g, the host's greedy token is %d", what, j,
						         v, (double)z[v], host_tok[j]);
				continue;
			}
			if (memcmp(z, qj, (size_t)VD * sizeof(*z)))
				fail_msg("%s: Z row %d differs from the host's q row (fixed %d)", what, j,
				         fixed[j]);
			for (int v = VD; v < V; v++)
				if (qj[v] != 0.0f)
					fail_msg("%s: the host's q row %d is %g beyond VD at %d", what, j,
					         (double)qj[v], v);
		}
	}
	assert_int_equal(tok[0], 4242);
	g_cases++;
	emu_free(tok);
	emu_free(probs);
	emu_free(sw);
	emu_free(iter);
	emu_free(d2t);
#undef TGT
	free(lg);
	free(want_p);
	free(row);
	free(q);
	free(idx);
}

static void check(int B, int VD, int S, float temp, int top_k, float top_p, int ties, int sd_i)
{
	check_m(B, VD, S, temp, top_k, top_p, ties, sd_i, 0);
}

/* Mapped: VD 37 (not a multiple of BLOCK 32) and 1000 of V = VD + 11 ids,
 * shuffled; S 1..4, T 0 and 0.8, ties. */
static void test_block_unmask_mapped(void **state)
{
	static const int Bs[] = {3, 8}, VDs[] = {37, 1000};
	(void)state;
	int sd = 300;
	for (int b = 0; b < 2; b++)
		for (int v = 0; v < 2; v++)
			for (int S = 1; S <= 4; S++) {
				check_m(Bs[b], VDs[v], S, 0.8f, 0, 1.0f, 0, sd, 1);
				check_m(Bs[b], VDs[v], S, 0.0f, 0, 1.0f, sd % 2, sd + 1, 1);
				sd += 2;
			}
	print_message("  %ld mapped cases, %ld draft positions fixed by an earlier pass\n", g_cases,
	              g_early);
	assert_true(g_early > 5);
	g_cases = g_early = 0;
}

static void test_block_unmask_shapes(void **state)
{
	static const int Bs[] = {2, 5, 8, 16}, VDs[] = {37, 1000};
	(void)state;
	int sd = 0;
	for (int b = 0; b < 4; b++)
		for (int v = 0; v < 2; v++)
			for (int S = 1; S <= 4; S++) {
				check(Bs[b], VDs[v], S, 0.8f, 0, 1.0f, 0, sd);
				check(Bs[b], VDs[v], S, 0.0f, 0, 1.0f, sd % 2, sd + 1);
				sd += 2;
			}
	print_message("  %ld cases, %ld draft positions fixed by an earlier pass\n", g_cases, g_early);
	assert_true(g_early > 20);
	g_cases = g_early = 0;
}

static void test_block_unmask_sampling(void **state)
{
	(void)state;
	int sd = 100;
	for (int r = 0; r < 3; r++) {
		check(8, 1000, 3, 1.3f, 50, 0.9f, 0, sd++);
		check(5, 37, 5, 0.8f, 5, 1.0f, 1, sd++);
		check(16, 1000, 2, 1.0f, 0, 0.7f, 1, sd++);
		check(16, 37, 5, 0.0f, 3, 0.5f, 1, sd++); /* T 0 ignores top-k / top-p */
	}
	check(8, 8192, 3, 0.8f, 0, 0.95f, 0, sd++); /* the SmolLM2 drafter's vocabulary */
	check(16, 8192, 4, 0.0f, 0, 1.0f, 0, sd++);
	print_message("  %ld cases, %ld draft positions fixed by an earlier pass\n", g_cases, g_early);
	assert_true(g_early > 10);
	g_cases = g_early = 0;
}

/* What the op refuses (nothing written): a pass outside 0..S-2 before the
 * last, steps outside 1..16, B outside 1..128. */
static void test_block_unmask_refused(void **state)
{
	int32_t tok[4] = {1, -1, -1, -1};
	float p[3 * 4] = {0};
	(void)state;
	assert_int_equal(ref_block_unmask(tok, p, 3, 4, 1, 2, 0, 1, 0), REF_EINVAL);
	assert_int_equal(ref_block_unmask(tok, p, 3, 4, -1, 3, 0, 1, 0), REF_EINVAL);
	assert_int_equal(ref_block_unmask(tok, p, 3, 4, 0, 1, 0, 1, 0), REF_EINVAL);
	assert_int_equal(ref_block_unmask(tok, p, 3, 4, 0, 17, 1, 1, 0), REF_EINVAL);
	assert_int_equal(ref_block_unmask(tok, p, 129, 4, 0, 2, 1, 1, 0), REF_EINVAL);
	assert_int_equal(tok[1], -1);
	assert_int_equal(tok[3], -1);
}

static void test_block_unmask_nvrtc(void **state)
{
	/* SmolLM2 (B 8, Vd 8192) and Llama-3-8B-shaped (B 16, Vd 32768): a
	 * middle pass and the final one */
	static const int shapes[][5] = {{8, 8192, 0, 2, 0}, {8, 8192, 0, 2, 1}, {16, 32768, 1, 4, 0},
	                                {16, 32768, 0, 4, 1}};
	(void)state;
	for (int i = 0; i < 8; i++) { /* each unmapped and mapped */
		gen_param p[] = {OH_NAME, OH_I("B", shapes[i % 4][0]), OH_I("VD", shapes[i % 4][1]),
		                 OH_I("PASS", shapes[i % 4][2]), OH_I("STEPS", shapes[i % 4][3]),
		                 OH_I("FINAL", shapes[i % 4][4]), OH_I("MAPPED", i / 4),
		                 OH_I("BLOCK", 256)};
		oh_nvrtc_p(SW_OP_block_unmask, p, 8);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_unmask_shapes),
		cmocka_unit_test(test_block_unmask_sampling),
		cmocka_unit_test(test_block_unmask_mapped),
		cmocka_unit_test(test_block_unmask_refused),
		cmocka_unit_test(test_block_unmask_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
