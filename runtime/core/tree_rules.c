/* Names, parsing and the exact pairs of the expansion rules and
 * verification methods (tree_rules.h). The rules themselves are
 * kernels/ref's. */
#include "tree_rules.h"

#include <string.h>

static const char *const RULE_NAMES[] = { "topk", "sample", "sample-wor", "spechub" };
static const char *const METHOD_NAMES[] = { "greedy", "rrs", "rrsw", "spechub", "onehot" };
_Static_assert(sizeof(RULE_NAMES) / sizeof(RULE_NAMES[0]) == RT_EXPAND_RULES,
               "a name for every expansion rule");
_Static_assert(sizeof(METHOD_NAMES) / sizeof(METHOD_NAMES[0]) == RT_VERIFY_METHODS,
               "a name for every verification method");

int rt_expand_rule_parse(const char *s)
{
	for (int i = 0; s && i < RT_EXPAND_RULES; i++)
		if (!strcmp(s, RULE_NAMES[i]))
			return i;
	return -1;
}

int rt_verify_method_parse(const char *s)
{
	for (int i = 0; s && i < RT_VERIFY_METHODS; i++)
		if (!strcmp(s, METHOD_NAMES[i]))
			return i;
	return -1;
}

const char *rt_expand_rule_name(int rule)
{
	return rule >= 0 && rule < RT_EXPAND_RULES ? RULE_NAMES[rule] : "?";
}

const char *rt_verify_method_name(int method)
{
	return method >= 0 && method < RT_VERIFY_METHODS ? METHOD_NAMES[method] : "?";
}

bool rt_verify_compatible(int rule, int method, bool greedy)
{
	if (rule < 0 || rule >= RT_EXPAND_RULES || method < 0 || method >= RT_VERIFY_METHODS)
		return false;
	if (method == RT_VERIFY_GREEDY)
		return greedy;
	/* The one-hot rule is exact for any fixed set of children, hence for
	 * children drawn by any rule whose randomness is independent of the
	 * verification uniforms (ALGORITHMS.txt 8, option b). */
	if (method == RT_VERIFY_ONEHOT)
		return true;
	return (rule == RT_EXPAND_SAMPLE && method == RT_VERIFY_RRS) ||
	       (rule == RT_EXPAND_SAMPLE_WOR && method == RT_VERIFY_RRSW) ||
	       (rule == RT_EXPAND_SPECHUB && method == RT_VERIFY_SPECHUB);
}
