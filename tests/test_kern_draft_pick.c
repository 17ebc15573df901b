/* draft_pick template (the n-gram-first drafter's pick, gen/plan_eagle3.c)
 * in the emulator vs ref_draft_pick, and both against the rule stated in
 * the template: go = RT_ST_HEAD = (node 1 absent), RT_ST_DRAFTED = LEVELS
 * exactly when go, every other state word and token untouched. Node 1 absent or present
 * (ids 0 and large), later nodes anything, the state and go words holding
 * junk from an earlier iteration; LEVELS 1 .. N - 1, blocks of 32 and 64.
 * Then NVRTC for sm_80 / sm_90: zero spills. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/emu.h"
#include "kernels/engine_state.h"
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"
#include "testutil.h"

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}

static uint64_t rng = 0x5eed0d1ce5ULL;

static int rnd_int(int n) { return (int)(tu_rand(&rng) % (uint64_t)n); }

static const emu_kernel *kern(int n_nodes, int levels, int block)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_NODES", n_nodes),
	                 I("LEVELS", levels), I("BLOCK", block)};
	return load_kernel("draft_pick.cu.tmpl", "draft_pick", p, 4);
}

static void test_draft_pick_kernel(void **state)
{
	(void)state;
	int falls = 0, keeps = 0;
	for (int n = 2; n <= 8; n += 3)
		for (int levels = 1; levels < n; levels++)
			for (int block = 32; block <= 64; block += 32)
				for (int rep = 0; rep < 8; rep++) {
					const emu_kernel *k = kern(n, levels, block);
					int32_t *go = emu_alloc(4, "go");
					int32_t *tok = emu_alloc((size_t)n * 4, "tree_tokens");
					int32_t *st = emu_alloc(RT_ST_WORDS * 4, "state");
					int32_t want_go, want_st[RT_ST_WORDS], tok0[8], st0[RT_ST_WORDS];
					for (int i = 0; i < n; i++)
						tok[i] = rnd_int(3) ? rnd_int(49152) : -1;
					if (rep % 2)
						tok[1] = -1; /* no n-gram draft: half the cases */
					else if (rep % 4 == 2)
						tok[1] = 0; /* id 0 is a token, not absence */
					for (int i = 0; i < RT_ST_WORDS; i++)
						st[i] = rnd_int(1000) - 500;
					go[0] = rnd_int(5) - 2;
					want_go = go[0];
					memcpy(want_st, st, sizeof(want_st));
					memcpy(tok0, tok, (size_t)n * 4);
					memcpy(st0, st, sizeof(st0));
					ref_draft_pick(levels, &want_go, tok, want_st);
					/* the rule, stated independently of ref */
					assert_int_equal(want_go, tok[1] < 0);
					for (int i = 0; i < RT_ST_WORDS; i++)
						assert_int_equal(want_st[i], i == RT_ST_HEAD ? tok[1] < 0
						                 : i == RT_ST_DRAFTED && tok[1] < 0 ? levels : st0[i]);
					falls += want_go;
					keeps += !want_go;
					void *args[] = {&go, &tok, &st};
					char what[96];
					snprintf(what, sizeof(what), "draft_pick N %d LEVELS %d BLOCK %d rep %d", n,
					         levels, block, rep);
					kern_out o[3] = {{.name = "go", .type = KERN_I32, .got = go, .want = &want_go,
					                  .n = 1},
					                 {.name = "state", .type = KERN_I32, .got = st, .want = want_st,
					                  .n = RT_ST_WORDS},
					                 {.name = "tree_tokens", .type = KERN_I32, .got = tok,
					                  .want = tok0, .n = (size_t)n}};
					kern_launch_expect(what, k, d3(1, 1, 1), d3((unsigned)block, 1, 1), args, o, 3);
					emu_free(go);
					emu_free(tok);
					emu_free(st);
				}
	assert_true(falls > 20 && keeps > 20);
}

static void test_draft_pick_nvrtc(void **state)
{
	(void)state;
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_NODES", 7), I("LEVELS", 1),
	                 I("BLOCK", 32)};
	nvrtc_check_ex("draft_pick.cu.tmpl", "draft_pick", p, 4, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_draft_pick_kernel),
		cmocka_unit_test(test_draft_pick_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
