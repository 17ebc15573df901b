/* The draft-length controller's spec block and its place in the plan
 * (ALGORITHMS.txt 12; DESIGN.md "How much to draft"): the "control" object
 * of an engine spec, the template parameters of templates/draft_ctrl.cu.tmpl
 * and its echo in engine.json. Not the kernel (templates/, kernels/ref/) and
 * not the cost table's measurement (runtime/engine/ctrl.c).
 *
 *   "control": {"mode": "cost" | "off",          default "cost" on ngram engines
 *               "probe": 8,                      draft one token after probe
 *                                                matched iterations in a row that
 *                                                draft none (0: never)
 *               "probe_max": 32 probe,           that interval doubles after each
 *                                                draft with nothing accepted, up to
 *                                                this, and is probe again after an
 *                                                accepted one (at least probe)
 *               "prior": 0.5, "prior_weight": 1, alpha's prior mean and weight
 *               "prior_1": 0.1,                  the same for one-token matches
 *               "prior_1_weight": 4,             (ngram min 1): weak evidence
 *               "decay": 0.9,                    per update of a class's counters
 *               "cost": "measure" | "flat" | [1, c1, .., cD]}
 *                   an iteration drafting k tokens over one drafting none
 *                   on a backend that sizes the verify forward to the
 *                   drafted rows (host): measured at load (CPU-time
 *                   medians over 7 interleaved repetitions, ctrl.c), 1s,
 *                   or this table (D + 1
 *                   numbers, the first 1: reproducible sampled tokens across
 *                   loads). A backend with fixed-shape forwards (cuda
 *                   graphs) always takes 1s: drafting costs it no rows. */
#ifndef GEN_PLAN_CTRL_H
#define GEN_PLAN_CTRL_H

#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"
#include "core/json.h"
#include "core/tree.h"
#include "render.h"

enum gen_ctrl_cost { GEN_CTRL_COST_MEASURE = 0, GEN_CTRL_COST_FLAT, GEN_CTRL_COST_TABLE };

typedef struct gen_ctrl {
	bool on;
	int probe, probe_max;
	double prior, prior_w, prior1, prior1_w, decay;
	int head;                               /* an EAGLE-3 head's levels behind the lookup
	                                         * (one more class), else 0 */
	int cost_kind;                          /* enum gen_ctrl_cost */
	double cost[2 * RT_TREE_MAX_DEPTH + 1]; /* GEN_CTRL_COST_TABLE: depth + 1 + head
	                                          * entries */
} gen_ctrl;

/* Parses $.control of root into c for an engine whose drafter is an n-gram
 * lookup (ngram) or not, over a chain of depth `depth`: defaults when absent
 * (on for ngram, off otherwise); "cost" mode on another drafter is refused.
 * The default cost table is "measure" for a greedy engine (its tokens do
 * not depend on k) and "flat" for a sampling one: a table timed at load
 * differs between processes, and with it k, the iterations and so the
 * random streams, so a seed would no longer give the same tokens in every
 * process (DESIGN.md, "How much to draft"); a sampling engine that wants
 * the controller's savings gives a fixed table, "cost": [1, c1, ...]. With
 * an EAGLE-3 head of `head` levels behind the lookup (head > 0) the head is
 * one more class, and a table has depth + 1 + head entries: then the cost
 * of an iteration whose head drafts 1 .. head levels. */
int gen_ctrl_parse(const json_value *root, bool ngram, bool greedy, int depth, int head,
                   gen_ctrl *c, sw_err *err);

/* The draft_ctrl template's parameters after NAME (prm[0] is set to NAME):
 * returns how many, at most cap. */
int gen_ctrl_params(const gen_ctrl *c, int n_draft, int min_n, int max_n, int block,
                    gen_param *prm, int cap);

/* Words of the per-request "ctrl" buffer (kernels/engine_state.h); head:
 * the levels of an EAGLE-3 head behind the lookup, else 0. */
int gen_ctrl_words(int n_draft, int min_n, int max_n, int head);

/* engine.json's $.spec.control echo (",\n    \"control\": {...}"), nothing
 * when off. */
void gen_ctrl_write_json(const gen_ctrl *c, int depth, FILE *f);

#endif
