/* The C block-drafter forward on a trained drafter, for check_drafter.py:
 * check_c MODEL DRAFTER IDS_FILE feeds ids[0..n-1) to the target (taps on;
 * tokens drafters: the last `window` of them are the window), runs one
 * drafter pass with ids[n-1] as the anchor and prints, per block
 * row, its logits for ids 0..3 and its maximum. Built and run by
 * make_drafters.sh; not part of the library. */
#include <stdio.h>
#include <stdlib.h>

#include "model/block_drafter.h"

int main(int argc, char **argv)
{
	sw_err err;
	if (argc != 4) {
		fprintf(stderr, "usage: check_c MODEL DRAFTER IDS_FILE\n");
		return 2;
	}
	rt_model *m = rt_model_load(argv[1], &err);
	rt_block_drafter *bd = m ? rt_block_drafter_load(argv[2], m, &err) : NULL;
	if (!bd) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	int32_t ids[1024];
	int n = 0;
	FILE *f = fopen(argv[3], "r");
	while (f && n < 1024 && fscanf(f, "%d", &ids[n]) == 1)
		n++;
	if (f)
		fclose(f);
	int B = bd->cfg.block, Vd = bd->cfg.draft_vocab;
	rt_ctx *c = rt_ctx_new(m, 1024, 256, &err);
	rt_bd_state *st = rt_bd_state_new(bd, 1024, &err);
	float *lg = malloc((size_t)B * Vd * sizeof(float));
	int32_t blk[RT_BD_MAX_BLOCK];
	blk[0] = ids[n - 1];
	for (int j = 1; j < B; j++)
		blk[j] = -1;
	bool feat = bd->cfg.cond == RT_BD_FEATURES;
	int n_win = feat ? 0 : bd->cfg.window < n - 1 ? bd->cfg.window : n - 1;
	if (n < 2 || !c || !st || !lg ||
	    (feat && (rt_ctx_set_taps(c, bd->cfg.taps, bd->cfg.n_taps, &err) || rt_ctx_feed(c, ids, n - 1, NULL, &err) ||
	              rt_bd_append(st, c->tap_cache, n - 1, &err))) ||
	    rt_bd_forward(st, blk, n - 1, ids + n - 1 - n_win, n_win, lg, &err)) {
		fprintf(stderr, "check_c: %s\n", n < 2 ? "need at least 2 ids" : err.msg);
		return 1;
	}
	for (int j = 0; j < B; j++) {
		const float *r = lg + (size_t)j * Vd;
		float mx = r[0];
		for (int v = 1; v < Vd; v++)
			mx = r[v] > mx ? r[v] : mx;
		printf("%.6f %.6f %.6f %.6f %.6f\n", r[0], r[1], r[2], r[3], mx);
	}
	free(lg);
	rt_bd_state_free(st);
	rt_ctx_free(c);
	rt_block_drafter_free(bd);
	rt_model_free(m);
	return 0;
}
