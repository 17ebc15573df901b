/* The op list (kernels/ops.def) as an enum and a table: the planner checks
 * the ops it emits against it, and the host op registry, the extent rules
 * and the op tests are arrays indexed by it. Header only; no allocation.
 * An op's template is templates/<name>.cu.tmpl, its specification
 * kernels/ref/<name>.c. */
#ifndef SW_OPS_H
#define SW_OPS_H

#include <string.h>

enum sw_op {
#define SW_OP(name, n_args, philox, ref, planned) SW_OP_##name,
#include "ops.def"
#undef SW_OP
	SW_OP_COUNT
};

typedef struct sw_op_info {
	const char *name; /* engine.json "op" */
	const char *tmpl; /* "<name>.cu.tmpl", under templates/ */
	int n_args;       /* the kernel's arguments; -1: by entry (tree attention) */
	int philox;       /* 1: kernels/philox.h goes before the template */
	int planned;      /* 1: scheduled in an engine's phases, so it has an extent rule */
} sw_op_info;

/* Row op of the list; NULL outside [0, SW_OP_COUNT). */
static inline const sw_op_info *sw_op_get(int op)
{
	static const sw_op_info ops[] = {
#define SW_OP(name, n_args, philox, ref, planned) {#name, #name ".cu.tmpl", n_args, philox, planned},
#include "ops.def"
#undef SW_OP
	};
	_Static_assert(sizeof(ops) / sizeof(ops[0]) == SW_OP_COUNT, "one row per op");
	return op >= 0 && op < SW_OP_COUNT ? &ops[op] : (const sw_op_info *)0;
}

/* The op named name (engine.json's "op"), or -1 when no row has it. */
static inline int sw_op_find(const char *name)
{
	for (int i = 0; name && i < SW_OP_COUNT; i++)
		if (!strcmp(sw_op_get(i)->name, name))
			return i;
	return -1;
}

#endif
