/* The vocabulary of a drafted tree's sampling: the rules that expand a node
 * into its children and the methods that verify the drafted tree, with
 * their names as specs and command lines write them and which pairs are
 * exact. Values are kernels/ref's (ref.h REF_EXPAND_*, REF_VERIFY_*, where
 * their meanings are specified); the host decoder's rules are in
 * runtime/decode/tree_verify.h, the engine's in templates/. Shared by the
 * generator and the host decoder. */
#ifndef RT_TREE_RULES_H
#define RT_TREE_RULES_H

#include <stdbool.h>

#include "kernels/ref/ref.h"

enum rt_expand_rule {
	RT_EXPAND_TOPK = REF_EXPAND_TOPK,
	RT_EXPAND_SAMPLE = REF_EXPAND_SAMPLE,
	RT_EXPAND_SAMPLE_WOR = REF_EXPAND_SAMPLE_WOR,
	RT_EXPAND_SPECHUB = REF_EXPAND_SPECHUB,
};
#define RT_EXPAND_RULES 4 /* the rules are 0 .. RT_EXPAND_RULES - 1 */

enum rt_verify_method {
	RT_VERIFY_GREEDY = REF_VERIFY_GREEDY,
	RT_VERIFY_RRS = REF_VERIFY_RRS,
	RT_VERIFY_RRSW = REF_VERIFY_RRSW,
	RT_VERIFY_SPECHUB = REF_VERIFY_SPECHUB,
	RT_VERIFY_ONEHOT = REF_VERIFY_ONEHOT,
};
#define RT_VERIFY_METHODS 5 /* the methods are 0 .. RT_VERIFY_METHODS - 1 */

/* Parses "topk", "sample", "sample-wor", "spechub" / "greedy", "rrs",
 * "rrsw", "spechub", "onehot"; -1 when unknown. Names for printing ("?"
 * for a value outside the enum). */
int rt_expand_rule_parse(const char *s);
int rt_verify_method_parse(const char *s);
const char *rt_expand_rule_name(int rule);
const char *rt_verify_method_name(int method);
/* Whether (rule, method) is exact: SAMPLE->RRS, SAMPLE_WOR->RRSW,
 * SPECHUB->SPECHUB, and ONEHOT with every rule (the one-hot rule is exact for
 * any fixed children, so for children drawn independently of the
 * verification uniforms; it is the exact rule for TOPK). GREEDY pairs with
 * every rule but only when greedy (temperature 0). False for e.g. TOPK+RRS
 * or SAMPLE_WOR+RRS. */
bool rt_verify_compatible(int rule, int method, bool greedy);

#endif
