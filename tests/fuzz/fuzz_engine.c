/* libFuzzer target for the engine manifest reader (runtime/engine/manifest.c):
 * arbitrary bytes as engine.json. Every field is range-checked against the others (buffers
 * inside the arena, args inside buffers, kernels named by ops, a BFS tree,
 * gates on existing words), so an accepted engine must be self-consistent:
 * checked here and abort() on a violation. test_engine checks messages. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/manifest.h"
#include "kernels/engine_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sw_err err;
	rt_manifest *e = rt_manifest_parse("fuzz", (const char *)data, size, &err);
	if (!e)
		return 0;
	for (int i = 0; i < e->n_bufs; i++)
		if (e->bufs[i].offset + e->bufs[i].bytes > e->arena_bytes)
			abort();
	for (int i = 1; i < e->n_nodes; i++)
		if (e->tree_table[i] < 0 || e->tree_table[i] >= i)
			abort();
	for (int p = 0; p < e->n_phases; p++)
		if (e->phases[p].gate_buf >= e->n_bufs || e->phases[p].n < 0 ||
		    e->phases[p].first < 0 || e->phases[p].first + e->phases[p].n > e->n_ops)
			abort();
	for (int i = 0; i < e->n_ops; i++)
		for (int a = 0; a < e->ops[i].n_args; a++)
			if (e->ops[i].arg_buf[a] >= e->n_bufs ||
			    (e->ops[i].arg_buf[a] >= 0 &&
			     e->ops[i].arg_off[a] > e->bufs[e->ops[i].arg_buf[a]].bytes))
				abort();
	if (e->ring < 8)
		abort();
	rt_manifest_free(e);
	return 0;
}
