/* block_embed template in the emulator vs ref_block_embed: block sizes B =
 * 2, 5, 16, dims on the vector path (8, 576) and the scalar one (100), bf16
 * and fp16 tables of random 16-bit patterns, FIRST 0 (tokens as
 * block_unmask leaves them: valid ids and masked -1s) and FIRST 1 (the
 * block started from the root: blk_tok's B + 1 words rewritten, whatever
 * they held). Bad tokens: -1 at row 0, ids outside [0, N_ROWS), a bad root:
 * the row stays untouched (emu_alloc's poison) and err is 1. Widening is
 * exact, so every output is compared bit for bit: y, blk_tok, blk_pos and
 * err, with the emulator's guard zones around each. Independently of the
 * reference, the masked rows are checked against gguf's widening of the
 * mask table and blk_pos against len + j. Then NVRTC (sm_80, sm_90). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "formats/gguf.h"
#include "kernels/emu.h"
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}

enum { N_ROWS = 61 };

static uint64_t rnd64(void)
{
	return tu_rand(&rng_state);
}

static const emu_kernel *kern(int B, int dim, int is_f16, int first, int block)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("B", B), I("DIM", dim),
	                 I("N_ROWS", N_ROWS), I("IS_F16", is_f16), I("FIRST", first), I("BLOCK", block)};
	return load_kernel("block_embed.cu.tmpl", "block_embed", p, 7);
}

/* Token patterns for FIRST 0: 0 valid ids and -1s at j > 0, 1 also -1 at
 * row 0, 2 also ids N_ROWS and INT32_MIN / 1 << 30. FIRST 1: bad_root
 * makes the root out of range. */
static void check(int B, int dim, int is_f16, int first, int pattern, int bad_root)
{
	const int block = dim % 8 ? 32 : 64;
	const emu_kernel *k = kern(B, dim, is_f16, first, block);
	const size_t ny = (size_t)B * dim;
	uint16_t *tab = emu_alloc((size_t)N_ROWS * dim * sizeof(*tab), "tok_embd");
	uint16_t *msk = emu_alloc((size_t)(B - 1) * dim * sizeof(*msk), "mask_embd");
	float *y = emu_alloc(ny * sizeof(*y), "y");
	int32_t *tok = emu_alloc((size_t)(B + 1) * sizeof(*tok), "blk_tok");
	int32_t *root = emu_alloc(sizeof(*root), "root");
	int32_t *pos = emu_alloc((size_t)B * sizeof(*pos), "blk_pos");
	int32_t *len = emu_alloc(sizeof(*len), "len");
	int32_t *err = emu_alloc(sizeof(*err), "err");
	float *ry = malloc(ny * sizeof(*ry));
	int32_t rtok[17], rpos[16];

	for (size_t i = 0; i < (size_t)N_ROWS * dim; i++)
		tab[i] = (uint16_t)rnd64();
	for (size_t i = 0; i < (size_t)(B - 1) * dim; i++)
		msk[i] = (uint16_t)rnd64();
	*root = bad_root ? N_ROWS + 3 : (int32_t)(rnd64() % N_ROWS);
	*len = (int32_t)(rnd64() % 4000);
	for (int j = 0; j <= B; j++) {
		if (first) /* junk FIRST must overwrite */
			tok[j] = (int32_t)(rnd64() % 1000) - 500;
		else
			tok[j] = j > 0 && rnd64() % 2 ? -1 : (int32_t)(rnd64() % N_ROWS);
	}
	if (!first && B > 2)
		tok[B - 1] = N_ROWS - 1; /* the table's last row */
	if (!first && pattern >= 1)
		tok[0] = -1;
	if (!first && pattern >= 2) {
		tok[1] = N_ROWS;
		tok[B - 1] = B > 2 ? -2147483647 - 1 : tok[B - 1];
		if (B > 3)
			tok[2] = 1 << 30;
	}
	*err = 0;
	memcpy(rtok, tok, (size_t)(B + 1) * sizeof(*tok));
	memset(ry, 0xff, ny * sizeof(*ry)); /* emu_alloc's poison */
	memset(rpos, 0xff, sizeof(rpos));
	const int bad = pattern > 0 || bad_root;
	assert_int_equal(ref_block_embed(ry, tab, msk, rtok, *root, rpos, *len, B, dim, N_ROWS, is_f16,
	                                 first),
	                 bad ? -1 : 0);
	/* independent of the reference: masked rows widened by gguf, positions */
	for (int j = 1; j < B; j++)
		if (rtok[j] == -1)
			for (int i = 0; i < dim; i++) {
				const uint16_t h = msk[(size_t)(j - 1) * dim + i];
				const float w = is_f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
				assert_memory_equal(&ry[(size_t)j * dim + i], &w, sizeof(w));
			}
	for (int j = 0; j < B; j++)
		assert_int_equal(rpos[j], *len + j);
	if (first) {
		assert_int_equal(rtok[0], *root);
		for (int j = 1; j <= B; j++)
			assert_int_equal(rtok[j], -1);
	}

	void *args[] = {&y, &tab, &msk, &tok, &root, &pos, &len, &err};
	char what[128];
	snprintf(what, sizeof(what), "%s B%d DIM%d FIRST%d pattern %d%s", k->name, B, dim, first,
	         pattern, bad_root ? " bad root" : "");
	kern_out o[] = {
		{.name = "y", .type = KERN_F32, .got = y, .want = ry, .n = ny, .dims = {B, dim}},
		{.name = "blk_tok", .type = KERN_I32, .got = tok, .want = rtok, .n = (size_t)B + 1},
		{.name = "blk_pos", .type = KERN_I32, .got = pos, .want = rpos, .n = (size_t)B},
	};
	kern_launch_expect(what, k, d3((unsigned)B, 1, 1), d3((unsigned)block, 1, 1), args, o, 3);
	assert_int_equal(*err, bad);
	emu_free(tab);
	emu_free(msk);
	emu_free(y);
	emu_free(tok);
	emu_free(root);
	emu_free(pos);
	emu_free(len);
	emu_free(err);
	free(ry);
}

static void test_block_embed_shapes(void **state)
{
	static const int Bs[] = {2, 5, 16}, dims[] = {8, 100, 576};
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int b = 0; b < 3; b++)
			for (int d = 0; d < 3; d++)
				for (int first = 0; first < 2; first++)
					check(Bs[b], dims[d], f16, first, 0, 0);
}

static void test_block_embed_bad_tokens(void **state)
{
	static const int Bs[] = {2, 5, 16}, dims[] = {8, 100, 576};
	(void)state;
	for (int f16 = 0; f16 < 2; f16++)
		for (int b = 0; b < 3; b++) {
			check(Bs[b], dims[(b + f16) % 3], f16, 0, 1, 0);
			check(Bs[b], dims[(b + f16 + 1) % 3], f16, 0, 2, 0);
			check(Bs[b], dims[(b + f16 + 2) % 3], f16, 1, 0, 1);
		}
}

static void test_block_embed_nvrtc(void **state)
{
	/* SmolLM2 (576 x 49152, bf16, B 8) and Llama-3-8B (4096 x 128256,
	 * fp16, B 16), FIRST 0 and 1, and the scalar path */
	static const int shapes[][5] = {{8, 576, 49152, 0, 1}, {8, 576, 49152, 0, 0},
	                                {16, 4096, 128256, 1, 1}, {16, 4096, 128256, 1, 0},
	                                {5, 100, 61, 0, 1}};
	(void)state;
	for (int s = 0; s < 5; s++) {
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("B", shapes[s][0]),
		                 I("DIM", shapes[s][1]), I("N_ROWS", shapes[s][2]),
		                 I("IS_F16", shapes[s][3]), I("FIRST", shapes[s][4]), I("BLOCK", 128)};
		nvrtc_check_ex("block_embed.cu.tmpl", "block_embed", p, 7, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_embed_shapes),
		cmocka_unit_test(test_block_embed_bad_tokens),
		cmocka_unit_test(test_block_embed_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
