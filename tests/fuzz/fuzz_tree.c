/* libFuzzer target for gen/tree.c. The first byte picks the entry point:
 * 'J' the rest is a tree file's text (rt_tree_from_json_text), 'P' the rest
 * is raw paths for rt_tree_from_paths (0xFF ends a path, other bytes are
 * signed ranks), anything else the rest is a spec string (rt_tree_parse).
 * Every accepted tree is checked for its invariants and rebuilt from its own
 * paths in reverse order, which must give the same bytes; abort() on any
 * violation. tests/test_tree.c checks the answers themselves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tree.h"

static void check(const rt_tree *t)
{
	static int paths[RT_TREE_MAX_NODES][RT_TREE_MAX_DEPTH];
	static const int *ptrs[RT_TREE_MAX_NODES];
	static int lens[RT_TREE_MAX_NODES];
	static rt_tree u;
	int n = t->n;

	if (n < 2 || n > RT_TREE_MAX_NODES || t->words != (n + 63) / 64 || t->parent[0] != -1)
		abort();
	if (t->depth_max < 1 || t->depth_max > RT_TREE_MAX_DEPTH || t->level_start[0] != 0 ||
	    t->level_start[t->depth_max + 1] != n)
		abort();
	for (int i = 1; i < n; i++) {
		int p = t->parent[i];
		if (p < 0 || p >= i || t->depth[i] != t->depth[p] + 1)
			abort();
		if (t->child_list[t->child_start[p] + t->rank[i]] != i)
			abort();
		if (t->depth[i] < t->depth[i - 1])
			abort();
	}
	for (int i = 0; i < n; i++) {
		int bits = 0;
		for (int j = 0; j < t->words * 64; j++)
			bits += rt_tree_visible(t, i, j);
		/* self + ancestors = depth + 1 bits, and they include self and root */
		if (bits != t->depth[i] + 1 || !rt_tree_visible(t, i, i) || !rt_tree_visible(t, i, 0))
			abort();
	}
	/* paths spelled by the parent chains, listed deepest first */
	for (int i = 1; i < n; i++) {
		int k = n - 1 - i, d = t->depth[i];
		for (int j = i; j != 0; j = t->parent[j])
			paths[k][--d] = t->rank[j];
		ptrs[k] = paths[k];
		lens[k] = t->depth[i];
	}
	if (rt_tree_from_paths(ptrs, lens, n - 1, t->name, &u, NULL))
		abort();
	if (memcmp(&u, t, sizeof(u)))
		abort();
}

static void run_paths(const uint8_t *data, size_t size)
{
	static int buf[4096];
	static const int *ptrs[RT_TREE_MAX_NODES + 8];
	static int lens[RT_TREE_MAX_NODES + 8];
	static rt_tree t;
	int n = 0, k = 0;
	size_t i = 0;

	/* up to 263 paths, so the too-many check is reachable */
	while (i < size && n < RT_TREE_MAX_NODES + 8 && k < 4096) {
		ptrs[n] = buf + k;
		lens[n] = 0;
		while (i < size && data[i] != 0xFF && k < 4096)
			buf[k++] = (int8_t)data[i++], lens[n]++;
		i++;
		n++;
	}
	if (rt_tree_from_paths(ptrs, lens, n, "fuzz", &t, NULL) == 0)
		check(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static rt_tree t;
	sw_err err;
	char spec[256];

	if (size == 0)
		return 0;
	if (data[0] == 'J') {
		if (rt_tree_from_json_text((const char *)data + 1, size - 1, "fuzz.json", &t, &err) == 0)
			check(&t);
		return 0;
	}
	if (data[0] == 'P') {
		run_paths(data + 1, size - 1);
		return 0;
	}
	if (size - 1 >= sizeof(spec))
		return 0;
	memcpy(spec, data + 1, size - 1);
	spec[size - 1] = '\0';
	/* Stay off the file system beyond models/trees: a spec ending in .json
	 * would open any path the fuzzer spells. */
	if (strchr(spec, '/') || strstr(spec, ".json"))
		return 0;
	if (rt_tree_parse(spec, NULL, &t, &err) == 0)
		check(&t);
	return 0;
}
