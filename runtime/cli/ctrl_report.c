/* What the draft-length controller did in a run (runtime/engine/ctrl.h):
 * its cost table and the iterations by tokens drafted (in an engine that
 * looks for an n-gram match first, the head's costs and how many
 * iterations the EAGLE-3 head drafted), as
 * text or as JSON fields; with SW_CTRL_TRACE=1 also each iteration's decision. Used by
 * `run` and `bench` (engine_cli.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

bool cli_ctrl_trace_on(void)
{
	const char *v = getenv("SW_CTRL_TRACE");
	return v && *v && strcmp(v, "0");
}

void cli_ctrl_report(FILE *f, const rt_engine *e, const rt_engine_stats *st, const int8_t *trace,
                     int n_trace, bool json)
{
	const int D = e->man->depth, H = rt_engine_ctrl_levels(e);
	if (!st->ctrl && st->ngram_first) { /* n-gram first, the controller off */
		if (json)
			fprintf(f, ", \"iterations_by_head\": %llu", (unsigned long long)st->by_head);
		else
			fprintf(f, "n-gram first: the EAGLE-3 head drafted %llu of %d iterations\n",
			        (unsigned long long)st->by_head, st->n_iters);
		return;
	}
	if (!st->ctrl)
		return;
	if (json) {
		fprintf(f, ", \"control\": {\"cost_source\": \"%s\", \"cost\": [",
		        e->ctrl_cost_src ? e->ctrl_cost_src : "");
		for (int k = 0; k <= D; k++)
			fprintf(f, "%s%.4f", k ? ", " : "", e->ctrl_cost[k]);
		if (H) {
			fprintf(f, "], \"head_cost\": [");
			for (int k = 1; k <= H; k++)
				fprintf(f, "%s%.4f", k > 1 ? ", " : "", e->ctrl_cost[D + k]);
		}
		fprintf(f, "], \"iterations_by_drafted\": [");
		for (int k = 0; k <= D && k <= RT_ENGINE_MAX_DEPTH; k++)
			fprintf(f, "%s%llu", k ? ", " : "", (unsigned long long)st->drafted[k]);
		fprintf(f, "]");
		if (st->ngram_first)
			fprintf(f, ", \"iterations_by_head\": %llu", (unsigned long long)st->by_head);
		if (trace) {
			fprintf(f, ", \"drafted\": [");
			for (int i = 0; i < n_trace; i++)
				fprintf(f, "%s%d", i ? ", " : "", trace[i]);
			fprintf(f, "]");
		}
		fprintf(f, "}");
		return;
	}
	fprintf(f, "draft-length controller: cost of drafting 0..%d (%s):", D,
	        e->ctrl_cost_src ? e->ctrl_cost_src : "?");
	for (int k = 0; k <= D; k++)
		fprintf(f, " %.2f", e->ctrl_cost[k]);
	if (H) {
		fprintf(f, "; the head's 1..%d levels:", H);
		for (int k = 1; k <= H; k++)
			fprintf(f, " %.2f", e->ctrl_cost[D + k]);
	}
	fprintf(f, "; iterations by tokens drafted:");
	for (int k = 0; k <= D && k <= RT_ENGINE_MAX_DEPTH; k++)
		fprintf(f, " %d:%llu", k, (unsigned long long)st->drafted[k]);
	if (st->ngram_first)
		fprintf(f, "; the EAGLE-3 head drafted %llu of them, the n-gram lookup the rest",
		        (unsigned long long)st->by_head);
	fprintf(f, "\n");
	if (trace) {
		fprintf(f, "drafted per iteration:");
		for (int i = 0; i < n_trace; i++)
			fprintf(f, " %d", trace[i]);
		fprintf(f, "\n");
	}
}
