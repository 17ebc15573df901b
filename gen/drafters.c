/* The drafter registry (drafters.h): the table from draft kind to the
 * gen_drafter its file defines. A new kind of drafter is its file, its
 * value in drafters.h's enum and its row here. */
#include <string.h>

#include "drafter.h"
#include "drafters.h"

extern const gen_drafter gen_drafter_layerskip, gen_drafter_model, /* drafter_model.c */
       gen_drafter_ngram, gen_drafter_block, gen_drafter_eagle3;

static const gen_drafter *const drafters[GEN_DRAFT_N] = {
	[GEN_DRAFT_LAYERSKIP] = &gen_drafter_layerskip,
	[GEN_DRAFT_MODEL] = &gen_drafter_model,
	[GEN_DRAFT_NGRAM] = &gen_drafter_ngram,
	[GEN_DRAFT_BLOCK] = &gen_drafter_block,
	[GEN_DRAFT_EAGLE3] = &gen_drafter_eagle3,
};

const gen_drafter *gen_drafter_of(int kind)
{
	return kind >= 0 && kind < GEN_DRAFT_N ? drafters[kind] : NULL;
}

bool gen_drafter_takes(const gen_drafter *dr, const char *method)
{
	for (const char *const *m = dr->methods; *m; m++) {
		const char *colon = strchr(*m, ':');
		if (colon ? !strncmp(method, *m, (size_t)(colon - *m + 1)) : !strcmp(method, *m))
			return true;
	}
	return false;
}

int gen_draft_kind_of(const char *method)
{
	for (int i = 0; i < GEN_DRAFT_N; i++)
		if (drafters[i] && gen_drafter_takes(drafters[i], method))
			return i;
	return -1;
}
