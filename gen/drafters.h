/* The drafter registry: one row per kind of drafter, the gen_drafter of its
 * file gen/drafter_NAME.c (gen/drafter.h), which the spec parser (spec.c:
 * the "$.draft" methods and keys, each kind's parse and checks), the
 * planner (plan_build.c, plan.c), build (build.c: the weights and files
 * it binds), the re-plan (replan.c: "$.draft" from the echo) and a
 * family's check (arch_gemma.c) read alike. A spec's draft kind is its
 * row. No gen/ header included: spec.h includes this one. */
#ifndef GEN_DRAFTERS_H
#define GEN_DRAFTERS_H

/* The rows, in the table's order (drafters.c), which is the order of the
 * methods an unknown one's refusal lists and of the "$.draft" keys. */
enum gen_draft_kind { GEN_DRAFT_LAYERSKIP = 0, GEN_DRAFT_MODEL, GEN_DRAFT_NGRAM, GEN_DRAFT_BLOCK,
                      GEN_DRAFT_EAGLE3, GEN_DRAFT_N };

struct gen_drafter;

/* The drafter of a kind (enum gen_draft_kind), NULL for none. */
const struct gen_drafter *gen_drafter_of(int kind);
/* The kind whose drafter answers to a "$.draft" method (the first in the
 * table's order), -1 for none. */
int gen_draft_kind_of(const char *method);

#endif
