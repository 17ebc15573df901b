/* The n-gram-first drafter's pick, plain C: the specification of
 * templates/draft_pick.cu.tmpl. */
#include "kernels/engine_state.h"
#include "ref.h"

void ref_draft_pick(int levels, int32_t *go, const int32_t *tree_tokens, int32_t *state,
                    const int32_t *ctrl)
{
	/* node 1 absent: the lookup (or the controller) drafted nothing, so
	 * the head drafts its first hk levels: all of them, or as many as the
	 * controller chose (0: a plain step) */
	int hk = ctrl ? ctrl[RT_CTRL_HEAD_K] : levels;
	hk = tree_tokens[1] >= 0 || hk < 0 ? 0 : hk > levels ? levels : hk;
	for (int j = 0; j < levels; j++)
		go[j] = j < hk;
	state[RT_ST_HEAD] = hk > 0;
	if (hk > 0)
		state[RT_ST_DRAFTED] = hk;
}
