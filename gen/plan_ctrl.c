/* The draft-length controller's spec block, template parameters and
 * engine.json echo (plan_ctrl.h). The defaults (probe 8 doubling to 256
 * while drafts fail, prior 0.5 of weight 1, one-token matches 0.1 of weight
 * 4, decay 0.9) were tuned on models/prompts/tune-general.txt and
 * tune-copy.txt only, against measured cost tables: a replay of
 * ngram_lookup + draft_ctrl over each prompt's greedy tokens (cost = the sum
 * of cost[k] over the iterations; tests/tools/ctrl_replay.py); the held-out
 * sets are for the reported numbers (runtime/engine/README.md). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "kernels/engine_state.h"
#include "plan_ctrl.h"


static int opt_num(const json_value *o, const char *key, double lo, double hi, double *out,
                   sw_err *err)
{
	return json_get(o, key) ? json_get_number(o, key, "$.control", lo, hi, out, err) : 0;
}

int gen_ctrl_parse(const json_value *root, bool ngram, bool greedy, int depth, int head,
                   gen_ctrl *c, sw_err *err)
{
	static const char *const keys[] = {"mode", "probe", "probe_max", "prior", "prior_weight",
	                                   "prior_1", "prior_1_weight", "decay", "cost", NULL};
	const json_value *o = json_get(root, "control"), *v;
	const char *s;
	int rc;
	memset(c, 0, sizeof(*c));
	c->on = ngram;
	c->head = head;
	c->probe = 8;
	c->probe_max = 256;
	c->prior = 0.5;
	c->prior_w = 1.0;
	c->prior1 = 0.1;
	c->prior1_w = 4.0;
	c->decay = 0.9;
	c->cost_kind = greedy ? GEN_CTRL_COST_MEASURE : GEN_CTRL_COST_FLAT;
	if (!o)
		return 0;
	if ((rc = json_as_object(o, "$.control", err)) ||
	    (rc = json_check_keys(o, "$.control", keys, err)))
		return rc;
	if (json_get(o, "mode")) {
		if ((rc = json_get_string(o, "mode", "$.control", &s, err)))
			return rc;
		if (strcmp(s, "cost") && strcmp(s, "off"))
			return json_refuse(err, json_get(o, "mode"), "$.control.mode", "\"cost\" or \"off\"",
			           "\"%.40s\"", s);
		c->on = !strcmp(s, "cost");
		if (c->on && !ngram)
			return json_refuse(err, json_get(o, "mode"), "$.control.mode", "\"off\" (the draft-length "
			           "controller drives n-gram chain drafters only, $.draft.method ngram or "
			           "$.draft.ngram)",
			           "\"cost\"");
	}
	if (json_get(o, "probe")) {
		int64_t p = 0;
		if ((rc = json_get_int(o, "probe", "$.control", 0, 100000, &p, err)))
			return rc;
		c->probe = (int)p;
		c->probe_max = c->probe <= 3125 ? 32 * c->probe : 100000;
	}
	if (json_get(o, "probe_max")) {
		int64_t p = 0;
		if ((rc = json_get_int(o, "probe_max", "$.control", c->probe, 100000, &p, err)))
			return rc;
		c->probe_max = (int)p;
	}
	if ((rc = opt_num(o, "prior", 0.0, 1.0, &c->prior, err)) ||
	    (rc = opt_num(o, "prior_weight", 0.01, 1000.0, &c->prior_w, err)) ||
	    (rc = opt_num(o, "prior_1", 0.0, 1.0, &c->prior1, err)) ||
	    (rc = opt_num(o, "prior_1_weight", 0.01, 1000.0, &c->prior1_w, err)) ||
	    (rc = opt_num(o, "decay", 0.5, 1.0, &c->decay, err)))
		return rc;
	if ((v = json_get(o, "cost"))) {
		if (v->type == JSON_STRING) {
			if (!strcmp(v->str, "measure")) {
				c->cost_kind = GEN_CTRL_COST_MEASURE;
			} else if (!strcmp(v->str, "flat")) {
				c->cost_kind = GEN_CTRL_COST_FLAT;
			} else {
				return json_refuse(err, v, "$.control.cost", "\"measure\", \"flat\" or an array",
				           "\"%.40s\"", v->str);
			}
		} else {
			const size_t n = (size_t)depth + 1 + (size_t)head;
			if (head > 0 && v->type == JSON_ARRAY && v->n != n)
				return json_refuse(err, v, "$.control.cost", "an array of 1 + depth + levels "
				           "entries (drafting 0 .. depth tokens by the lookup, then 1 .. levels by "
				           "the head)", "%zu entries where 1 + %d + %d = %zu", v->n, depth, head,
				           n);
			if ((rc = json_as_array(v, "$.control.cost", n, n, err)))
				return rc;
			for (int i = 0; i < (int)n; i++) {
				char p[64];
				snprintf(p, sizeof(p), "$.control.cost[%d]", i);
				if ((rc = json_as_number(v->items[i], p, 1.0, 1000.0, &c->cost[i], err)))
					return rc;
			}
			if (c->cost[0] != 1.0)
				return json_refuse(err, v->items[0], "$.control.cost[0]", "1 (the cost of an iteration "
				           "that drafts nothing, the unit)", "%g", c->cost[0]);
			c->cost_kind = GEN_CTRL_COST_TABLE;
		}
	}
	return 0;
}

static int32_t q16(double x)
{
	return (int32_t)lround(x * 65536.0);
}

int gen_ctrl_params(const gen_ctrl *c, int n_draft, int min_n, int max_n, int block,
                    gen_param *prm, int cap)
{
	const gen_param all[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N_DRAFT", .type = GEN_PARAM_INT, .i = n_draft},
		{.name = "N_CLASS", .type = GEN_PARAM_INT, .i = max_n - min_n + 1},
		{.name = "MIN_N", .type = GEN_PARAM_INT, .i = min_n},
		{.name = "HEAD", .type = GEN_PARAM_INT, .i = c->head},
		{.name = "PROBE", .type = GEN_PARAM_INT, .i = c->probe},
		{.name = "PROBE_MAX", .type = GEN_PARAM_INT, .i = c->probe_max},
		{.name = "PRIOR_A", .type = GEN_PARAM_INT, .i = q16(c->prior * c->prior_w)},
		{.name = "PRIOR_W", .type = GEN_PARAM_INT, .i = q16(c->prior_w)},
		{.name = "PRIOR1_A", .type = GEN_PARAM_INT, .i = q16(c->prior1 * c->prior1_w)},
		{.name = "PRIOR1_W", .type = GEN_PARAM_INT, .i = q16(c->prior1_w)},
		{.name = "DECAY", .type = GEN_PARAM_INT, .i = q16(c->decay)},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	const int n = (int)(sizeof(all) / sizeof(all[0]));
	if (n > cap)
		return -1;
	memcpy(prm, all, sizeof(all));
	return n;
}

int gen_ctrl_words(int n_draft, int min_n, int max_n, int head)
{
	return RT_CTRL_STATS + 2 * (max_n - min_n + 1) * n_draft + (head > 0 ? 2 * head + 1 : 0);
}

void gen_ctrl_write_json(const gen_ctrl *c, int depth, FILE *f)
{
	if (!c->on)
		return;
	fprintf(f, ",\n    \"control\": {\"mode\": \"cost\", \"probe\": %d, \"probe_max\": %d, "
	        "\"prior\": %.9g, \"prior_weight\": %.9g, \"prior_1\": %.9g, \"prior_1_weight\": %.9g, "
	        "\"decay\": %.9g, \"cost\": ", c->probe, c->probe_max, c->prior, c->prior_w, c->prior1,
	        c->prior1_w, c->decay);
	if (c->cost_kind == GEN_CTRL_COST_TABLE) {
		fprintf(f, "[");
		for (int i = 0; i <= depth + c->head; i++)
			fprintf(f, "%s%.9g", i ? ", " : "", c->cost[i]);
		fprintf(f, "]}");
	} else {
		fprintf(f, "\"%s\"}", c->cost_kind == GEN_CTRL_COST_FLAT ? "flat" : "measure");
	}
}
