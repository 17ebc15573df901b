/* The n-gram-first drafter's pick, plain C: the specification of
 * templates/draft_pick.cu.tmpl. */
#include "kernels/engine_state.h"
#include "ref.h"

void ref_draft_pick(int levels, int32_t *go, const int32_t *tree_tokens, int32_t *state)
{
	/* node 1 absent: the lookup (or the controller) drafted nothing, so
	 * the head drafts its levels */
	go[0] = tree_tokens[1] < 0;
	state[RT_ST_HEAD] = go[0];
	if (go[0])
		state[RT_ST_DRAFTED] = levels;
}
