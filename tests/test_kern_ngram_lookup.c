/* ngram_lookup template and ref_ngram_lookup. First the reference against
 * the host drafter it specifies, independently: rt_drafter_ngram's propose
 * (runtime/drafter.c) on random sequences over vocabularies of 3..8 tokens
 * (so n-grams recur), with and without planted repeats longer than max_n,
 * lengths 1..200, several (min_n, max_n) and draft lengths; same count, same
 * tokens, and the rest absent (-1). Then the kernel in the emulator vs the reference
 * at S = 1, 2, 3, lengths around the block size, 200, 2000 and S = MAX_CTX,
 * sequences with no earlier occurrence at all (every node absent), the
 * history past S filled with copies of the suffix so that a read beyond S
 * would change the pick; exact equality of every output word, guard zones
 * from emu_alloc. Then NVRTC (sm_80, sm_90): zero spills. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine_state.h"
#include "kernels/ref/ref.h"
#include "decode/chain.h"

#include "op_harness.h"
#include "testutil.h"

static uint64_t rnd64(void) /* splitmix64 (tu_rand) on the shared state */
{
	return tu_rand(&rng_state);
}

static int rnd_int(int n) { return (int)(rnd64() % (uint64_t)n); }

/* S random tokens over vocab; planted: some stretches copied from earlier
 * ones (up to 24 tokens), so suffixes of up to 16 recur; vocab 0: all
 * distinct (no n-gram ever recurs). */
static void make_seq(int32_t *h, int S, int vocab, bool planted)
{
	for (int i = 0; i < S; i++)
		h[i] = vocab ? 1000 + rnd_int(vocab) : 5000 + i;
	if (!planted || !vocab)
		return;
	for (int i = 1; i < S;) {
		int len = 1 + rnd_int(24), src = rnd_int(i);
		if (rnd_int(3) == 0) {
			for (int j = 0; j < len && i < S; j++, i++)
				h[i] = h[src + j < i ? src + j : src];
		} else {
			i += len;
		}
	}
}

static void test_ngram_ref_vs_drafter(void **state)
{
	static const int nn[][2] = {{1, 1}, {1, 3}, {2, 4}, {3, 3}, {1, 16}, {4, 6}, {16, 16}};
	static const int gammas[] = {1, 2, 5, 8};
	int32_t hist[200], out[8], tok[8];
	int proposed = 0, total = 0;
	(void)state;
	for (int c = 0; c < 7; c++) {
		sw_err err = {0};
		rt_drafter *d = rt_drafter_ngram(nn[c][0], nn[c][1], &err);
		if (!d)
			fail_msg("%s", err.msg);
		for (int rep = 0; rep < 300; rep++) {
			const int S = rep < 8 ? 1 + rep : 1 + rnd_int(200);
			const int vocab = rep % 11 == 10 ? 0 : 3 + rnd_int(6);
			const int gamma = gammas[rep % 4];
			make_seq(hist, S, vocab, rep % 2);
			int k = ref_ngram_lookup(out, hist, S, nn[c][0], nn[c][1], gamma);
			int kd = d->ops->propose(d, hist, S, gamma, NULL, 0, 0, tok, NULL, &err);
			if (k != kd)
				fail_msg("ngram:%d-%d S %d vocab %d gamma %d: ref proposes %d, drafter %d",
				         nn[c][0], nn[c][1], S, vocab, gamma, k, kd);
			char what[96];
			snprintf(what, sizeof(what), "ngram:%d-%d S %d gamma %d, ref vs drafter", nn[c][0],
			         nn[c][1], S, gamma);
			kern_expect_equal(what, "token", KERN_I32, out, tok, (size_t)k);
			for (int i = k; i < gamma; i++)
				assert_int_equal(out[i], -1); /* absent */
			proposed += k > 0;
			total++;
		}
		rt_drafter_free(d);
	}
	/* both outcomes must have been exercised, plenty of each */
	assert_true(proposed > total / 4 && proposed < total - total / 20);
}

typedef struct cfg {
	int min_n, max_n, n_draft, max_ctx, block;
} cfg;

static const emu_kernel *kern(const cfg *c)
{
	gen_param p[] = {OH_NAME, OH_I("MIN_N", c->min_n), OH_I("MAX_N", c->max_n),
	                 OH_I("N_DRAFT", c->n_draft), OH_I("MAX_CTX", c->max_ctx),
	                 OH_I("BLOCK", c->block)};
	return oh_load(SW_OP_ngram_lookup, p, 6);
}

/* One lookup at length S; returns how many the reference proposed. */
static int check(const cfg *c, int S, int vocab, bool planted)
{
	const emu_kernel *k = kern(c);
	int32_t *hist = emu_alloc((size_t)c->max_ctx * 4, "hist");
	int32_t *st = emu_alloc((RT_ST_WORDS + 16) * 4, "state");
	int32_t *out = emu_alloc((size_t)c->n_draft * 4, "out");
	int32_t *info = emu_alloc(2 * 4, "info");
	int32_t *ref = malloc((size_t)c->n_draft * 4), rinfo[2];

	make_seq(hist, S, vocab, planted);
	for (int i = S; i < c->max_ctx; i++) /* beyond S: the suffix again, a trap */
		hist[i] = hist[S - 1 - (i - S) % (S < c->max_n ? S : c->max_n)];
	for (int i = 0; i < RT_ST_WORDS + 16; i++)
		st[i] = 7777;
	st[RT_ST_TLEN] = S - 1;
	int n = ref_ngram_lookup_info(ref, rinfo, hist, S, c->min_n, c->max_n, c->n_draft);
	/* the signal: a proposal iff a match, its tokens follow the match's end */
	assert_true((n > 0) == (rinfo[0] > 0));
	if (n > 0) {
		assert_true(rinfo[0] >= c->min_n && rinfo[0] <= c->max_n && rinfo[1] + 1 < S);
		assert_int_equal(ref[0], hist[rinfo[1] + 1]);
		for (int j = 0; j < rinfo[0]; j++)
			assert_int_equal(hist[rinfo[1] - j], hist[S - 1 - j]);
	}
	info[0] = info[1] = 7777;
	void *args[] = {&out, &hist, &st, &info};
	char what[128];
	snprintf(what, sizeof(what), "%s S %d vocab %d (ref proposed %d)", k->name, S, vocab, n);
	kern_out o[2] = {{.name = "out", .type = KERN_I32, .got = out, .want = ref,
	                  .n = (size_t)c->n_draft},
	                 {.name = "info", .type = KERN_I32, .got = info, .want = rinfo, .n = 2}};
	kern_launch_expect(what, k, d3(1, 1, 1), d3((unsigned)c->block, 1, 1), args, o, 2);
	emu_free(info);
	emu_free(hist);
	emu_free(st);
	emu_free(out);
	free(ref);
	return n;
}

static void test_ngram_kernel(void **state)
{
	static const cfg cfgs[] = {{1, 3, 4, 256, 128}, {2, 4, 7, 256, 64}, {3, 3, 1, 256, 32},
	                           {1, 16, 5, 2048, 128}, {1, 1, 3, 256, 32}};
	(void)state;
	int hits = 0, misses = 0;
	for (int ci = 0; ci < 5; ci++) {
		const cfg *c = &cfgs[ci];
		const int lens[] = {1, 2, 3, 4, c->block - 1, c->block + 1, c->block + 2, 200, c->max_ctx};
		for (int li = 0; li < 9; li++)
			for (int rep = 0; rep < 6; rep++) {
				int S = lens[li];
				int vocab = rep == 5 ? 0 : 3 + rnd_int(6);
				int n = check(c, S, vocab, rep % 2);
				hits += n > 0;
				misses += n == 0;
			}
		if (c->max_ctx > 1000)
			for (int rep = 0; rep < 4; rep++)
				check(c, 2000, 3 + rnd_int(6), rep % 2);
	}
	assert_true(hits > 50 && misses > 20);
}

static void test_ngram_nvrtc(void **state)
{
	/* the planner's chain drafters (ngram:1-3 and 2-16, chain:5 / chain:12) */
	static const cfg cfgs[] = {{1, 3, 4, 8192, 128}, {2, 16, 11, 32768, 128}};
	(void)state;
	for (int i = 0; i < 2; i++) {
		const cfg *c = &cfgs[i];
		gen_param p[] = {OH_NAME, OH_I("MIN_N", c->min_n), OH_I("MAX_N", c->max_n),
		                 OH_I("N_DRAFT", c->n_draft), OH_I("MAX_CTX", c->max_ctx),
		                 OH_I("BLOCK", c->block)};
		oh_nvrtc_p(SW_OP_ngram_lookup, p, 6);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ngram_ref_vs_drafter),
		cmocka_unit_test(test_ngram_kernel),
		cmocka_unit_test(test_ngram_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
