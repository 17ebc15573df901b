/* draft_pick template (the n-gram-first drafter's pick, gen/drafter_eagle3.c)
 * in the emulator vs ref_draft_pick, and both against the rule stated in
 * the template: hk = 0 when node 1 is present, else LEVELS without a
 * controller (CTRL 0) or the controller's RT_CTRL_HEAD_K clamped to [0,
 * LEVELS]; go[j] = j < hk; RT_ST_HEAD = hk > 0; RT_ST_DRAFTED = hk exactly
 * when hk > 0; every other state word, token and ctrl word untouched. Node
 * 1 absent or present (ids 0 and large), later nodes anything, the state
 * and go words holding junk from an earlier iteration, HEAD_K from -2 to
 * LEVELS + 2; LEVELS 1 .. N - 1, blocks of 32 and 64. Then NVRTC for sm_80
 * / sm_90: zero spills. */
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

static const emu_kernel *kern(int n_nodes, int levels, int ctrl, int block)
{
	gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_NODES", n_nodes),
	                 I("LEVELS", levels), I("CTRL", ctrl), I("BLOCK", block)};
	return load_kernel("draft_pick.cu.tmpl", "draft_pick", p, 5);
}

static void test_draft_pick_kernel(void **state)
{
	(void)state;
	int falls = 0, keeps = 0, partial = 0, plain = 0;
	for (int n = 2; n <= 8; n += 3)
		for (int levels = 1; levels < n; levels++)
			for (int ctl = 0; ctl <= 1; ctl++)
				for (int block = 32; block <= 64; block += 32)
					for (int rep = 0; rep < 8; rep++) {
						const emu_kernel *k = kern(n, levels, ctl, block);
						int32_t *go = emu_alloc((size_t)levels * 4, "go");
						int32_t *tok = emu_alloc((size_t)n * 4, "tree_tokens");
						int32_t *st = emu_alloc(RT_ST_WORDS * 4, "state");
						int32_t *cw = emu_alloc(RT_CTRL_STATS * 4, "ctrl");
						int32_t want_go[8], want_st[RT_ST_WORDS], tok0[8], st0[RT_ST_WORDS];
						int32_t cw0[RT_CTRL_STATS];
						for (int i = 0; i < n; i++)
							tok[i] = rnd_int(3) ? rnd_int(49152) : -1;
						if (rep % 2)
							tok[1] = -1; /* no n-gram draft: half the cases */
						else if (rep % 4 == 2)
							tok[1] = 0; /* id 0 is a token, not absence */
						for (int i = 0; i < RT_ST_WORDS; i++)
							st[i] = rnd_int(1000) - 500;
						for (int i = 0; i < RT_CTRL_STATS; i++)
							cw[i] = rnd_int(1000) - 500;
						cw[RT_CTRL_HEAD_K] = rnd_int(levels + 5) - 2;
						for (int j = 0; j < levels; j++)
							go[j] = want_go[j] = rnd_int(5) - 2;
						memcpy(want_st, st, sizeof(want_st));
						memcpy(tok0, tok, (size_t)n * 4);
						memcpy(st0, st, sizeof(st0));
						memcpy(cw0, cw, sizeof(cw0));
						ref_draft_pick(levels, want_go, tok, want_st, ctl ? cw : NULL);
						/* the rule, stated independently of ref */
						const int hk0 = ctl ? cw[RT_CTRL_HEAD_K] : levels;
						const int hk = tok[1] >= 0 ? 0 : hk0 < 0 ? 0 : hk0 > levels ? levels : hk0;
						for (int j = 0; j < levels; j++)
							assert_int_equal(want_go[j], j < hk);
						for (int i = 0; i < RT_ST_WORDS; i++)
							assert_int_equal(want_st[i], i == RT_ST_HEAD ? hk > 0
							                 : i == RT_ST_DRAFTED && hk > 0 ? hk : st0[i]);
						falls += hk > 0;
						keeps += tok[1] >= 0;
						partial += hk > 0 && hk < levels;
						plain += tok[1] < 0 && hk == 0;
						void *args[] = {&go, &tok, &st, &cw};
						char what[96];
						snprintf(what, sizeof(what), "draft_pick N %d LEVELS %d CTRL %d BLOCK %d "
						         "rep %d", n, levels, ctl, block, rep);
						kern_out o[4] = {{.name = "go", .type = KERN_I32, .got = go,
						                  .want = want_go, .n = (size_t)levels},
						                 {.name = "state", .type = KERN_I32, .got = st,
						                  .want = want_st, .n = RT_ST_WORDS},
						                 {.name = "tree_tokens", .type = KERN_I32, .got = tok,
						                  .want = tok0, .n = (size_t)n},
						                 {.name = "ctrl", .type = KERN_I32, .got = cw, .want = cw0,
						                  .n = RT_CTRL_STATS}};
						kern_launch_expect(what, k, d3(1, 1, 1), d3((unsigned)block, 1, 1), args,
						                   o, 4);
						emu_free(go);
						emu_free(tok);
						emu_free(st);
						emu_free(cw);
					}
	assert_true(falls > 20 && keeps > 20 && partial > 5 && plain > 5);
}

static void test_draft_pick_nvrtc(void **state)
{
	(void)state;
	for (int ctl = 0; ctl <= 1; ctl++) {
		gen_param p[] = {{.name = "NAME", .type = GEN_PARAM_IDENT}, I("N_NODES", 7),
		                 I("LEVELS", 2), I("CTRL", ctl), I("BLOCK", 32)};
		nvrtc_check_ex("draft_pick.cu.tmpl", "draft_pick", p, 5, false);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_draft_pick_kernel),
		cmocka_unit_test(test_draft_pick_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
