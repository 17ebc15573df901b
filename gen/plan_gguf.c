/* The gguf_a8 dtype's per-layer weight types (plan_gguf.h). */
#include <string.h>

#include "formats/gguf.h"
#include "plan_gguf.h"

int gen_plan_wtype_block(const char *dt, int *bytes)
{
	static const int types[] = {GGML_T_Q8_0, GGML_T_Q4_0, GGML_T_Q4_1, GGML_T_Q5_0, GGML_T_Q4_K,
	                            GGML_T_Q6_K};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(dt, gen_wtype_name(types[i])))
			return gen_wtype_block(types[i], bytes);
	*bytes = 0;
	return 0;
}

void gen_plan_gguf_layers(gen_plan *p, const gen_spec *s, const int bufs[GEN_WT_LM_HEAD])
{
	if (s->dtype != GEN_DTYPE_GGUF_A8)
		return;
	for (int w = 0; w < GEN_WT_LM_HEAD; w++) {
		if (!s->target.wmixed[w] || bufs[w] < 0)
			continue;
		gen_buf *b = &p->bufs[bufs[w]];
		b->ltypes = s->target.wtype_l[w];
		b->n_ltypes = (int)b->shape[0];
	}
}

double gen_plan_w_bytes(const gen_plan *p, int buf, int dt16)
{
	const gen_buf *b = &p->bufs[buf];
	int bb, blk = gen_plan_wtype_block(b->dtype, &bb);
	if (!blk)
		return dt16;
	if (!b->ltypes || b->n_ltypes < 1)
		return (double)bb / blk;
	double sum = 0;
	for (int l = 0; l < b->n_ltypes; l++) {
		blk = gen_wtype_block(b->ltypes[l], &bb);
		sum += (double)bb / blk;
	}
	return sum / b->n_ltypes;
}

void gen_plan_write_ltypes(FILE *f, const gen_buf *b)
{
	if (!b->ltypes)
		return;
	fprintf(f, ", \"layer_dtypes\": [");
	for (int l = 0; l < b->n_ltypes; l++)
		fprintf(f, "%s\"%s\"", l ? ", " : "", gen_wtype_name(b->ltypes[l]));
	fprintf(f, "]");
}
