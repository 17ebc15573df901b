/* `specwright build` end to end (gen/build.h, gen/inspect.h): the real-model
 * engine (NVRTC for sm_80 and sm_90, resources recorded, zero spills), cold
 * then cached (timed, byte-identical outputs), a truncated and a corrupted
 * cache entry (misses that rebuild and rewrite the entry), the 7B-class shape
 * specs, --no-compile, and the roofline projection's arithmetic. Uses a fresh
 * cache directory so "cold" means cold. Skips the NVRTC parts, saying so,
 * when libnvrtc cannot be loaded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <cmocka.h>

#include "core/fileio.h"
#include "core/timing.h"
#include "gen/build.h"
#include "gen/inspect.h"
#include "core/json.h"
#include "gen/jit/nvrtc.h"
#include "device/dev_cuda_api.h"
#include "engine/manifest.h"
#include "core/tree.h"
#include "kernels/sample_layout.h"
#include "kernels/verify_layout.h"
#include "kern_util.h"

static char g_tmp[256];
static char g_cache[300];
static bool g_nvrtc;
static bool g_verbose = true; /* print each resources table */

static int setup(void **state)
{
	(void)state;
	sw_err err = {0};
	snprintf(g_tmp, sizeof(g_tmp), "/tmp/sw_test_build_XXXXXX");
	if (!mkdtemp(g_tmp))
		return -1;
	snprintf(g_cache, sizeof(g_cache), "%s/cache", g_tmp);
	gen_nvrtc *nv = gen_nvrtc_open(&err);
	g_nvrtc = nv != NULL;
	if (!nv)
		fprintf(stderr, "test_build: SKIPPING NVRTC builds: %s\n", err.msg);
	gen_nvrtc_close(nv);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void same_file(const char *a_dir, const char *b_dir, const char *name)
{
	char pa[512], pb[512];
	size_t la = 0, lb = 0;
	snprintf(pa, sizeof(pa), "%s/%s", a_dir, name);
	snprintf(pb, sizeof(pb), "%s/%s", b_dir, name);
	char *a = sw_read_file(pa, SW_CAP_IMAGE, &la), *b = sw_read_file(pb, SW_CAP_IMAGE, &lb);
	if (!a || !b)
		fail_msg("missing %s or %s", pa, pb);
	if (la != lb || memcmp(a, b, la))
		fail_msg("%s and %s differ", pa, pb);
	free(a);
	free(b);
}

static gen_spec *load(const char *path)
{
	gen_spec *s = malloc(sizeof(*s));
	sw_err err = {0};
	assert_non_null(s);
	if (gen_spec_load(path, NULL, s, &err))
		fail_msg("%s", err.msg);
	return s;
}

static void build(const gen_spec *s, const char *out, bool no_compile, gen_build_stats *st)
{
	gen_build_opts o = {.out_dir = out, .cache_dir = g_cache, .no_compile = no_compile};
	sw_err err = {0};
	if (gen_build(s, &o, st, &err))
		fail_msg("%s", err.msg);
}

/* resources.json: every kernel of engine.json, every arch, registers > 0,
 * zero spills; prints the table. */
static void check_resources(const char *dir, const gen_spec *s)
{
	char path[512];
	size_t n = 0;
	sw_err err = {0};
	snprintf(path, sizeof(path), "%s/resources.json", dir);
	char *t = sw_read_file(path, SW_CAP_IMAGE, &n);
	assert_non_null(t);
	json_value *r = json_parse(t, n, path, &err);
	if (!r)
		fail_msg("%s", err.msg);
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *e = sw_read_file(path, SW_CAP_IMAGE, &n);
	json_value *eng = json_parse(e, n, path, &err);
	if (!eng)
		fail_msg("%s", err.msg);
	/* one record per kernel entry (tree attention has _part and _merge), in
	 * engine.json's kernel order; every op's entry among them */
	const json_value *ks = json_get(eng, "kernels"), *rk = json_get(r, "kernels");
	size_t n_entries = 0;
	for (size_t i = 0; i < ks->n; i++) {
		const json_value *es = json_get(ks->items[i], "entries");
		for (size_t e = 0; e < es->n; e++, n_entries++) {
			assert_true(n_entries < rk->n);
			assert_string_equal(json_get(rk->items[n_entries], "name")->str, es->items[e]->str);
			assert_string_equal(json_get(rk->items[n_entries], "kernel")->str,
			                    json_get(ks->items[i], "uri")->str);
		}
	}
	assert_int_equal(n_entries, rk->n);
	const json_value *phases = json_get(eng, "phases");
	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *ops = json_get(phases->items[ph], "ops");
		for (size_t i = 0; i < ops->n; i++) {
			const json_value *en = json_get(ops->items[i], "entry");
			if (!en)
				continue;
			size_t j = 0;
			while (j < rk->n && strcmp(json_get(rk->items[j], "name")->str, en->str))
				j++;
			if (j == rk->n)
				fail_msg("%s: op entry %s not in resources.json", dir, en->str);
		}
	}
	if (g_verbose)
		print_message("  %-58s %-6s regs spill stack smem bar\n", "kernel", "arch");
	for (size_t i = 0; i < rk->n; i++) {
		const json_value *k = rk->items[i], *archs = json_get(k, "archs");
		assert_int_equal(archs->n, (size_t)s->n_archs);
		for (size_t a = 0; a < archs->n; a++) {
			const json_value *x = archs->members[a].value;
			int regs = (int)json_get(x, "registers")->integer;
			int ss = (int)json_get(x, "spill_stores")->integer;
			int sl = (int)json_get(x, "spill_loads")->integer;
			if (g_verbose)
				print_message("  %-58.58s %-6s %4d %2d/%-2d %5d %5d %3d\n",
				              json_get(k, "name")->str, archs->members[a].key, regs, ss, sl,
				              (int)json_get(x, "stack")->integer,
				              (int)json_get(x, "smem")->integer,
				              (int)json_get(x, "barriers")->integer);
			assert_true(regs > 0);
			if (ss || sl)
				fail_msg("%s: %s spills %d/%d bytes on %s", dir, json_get(k, "name")->str, ss,
				         sl, archs->members[a].key);
		}
	}
	json_free(eng);
	json_free(r);
	free(e);
	free(t);
}

static void check_engine_files(const char *dir, const gen_spec *s, bool compiled)
{
	char path[512];
	size_t n = 0;
	snprintf(path, sizeof(path), "%s/kernels.cu", dir);
	char *src = sw_read_file(path, SW_CAP_IMAGE, &n);
	assert_non_null(src);
	char *nl = strchr(src, '\n');
	assert_non_null(nl);
	*nl = 0;
	assert_non_null(strstr(src, "GENERATED"));
	assert_non_null(strstr(src, "DO NOT EDIT"));
	/* the cuda backend's set-conditional kernel rides along (issue 14 item 9) */
	assert_non_null(strstr(nl + 1, "__global__ void " RT_CUDA_SET_COND_ENTRY "("));
	free(src);
	/* $.toolkit: the NVRTC that compiled, and the driver floor it implies
	 * (issue 14 item 1): "X.Y" and X * 1000 + Y * 10, as the manifest checks */
	sw_err err = {0};
	rt_manifest *m = rt_manifest_load(dir, &err);
	if (!m)
		fail_msg("%s", err.msg);
	if (compiled) {
		int maj = 0, min = 0;
		assert_int_equal(sscanf(m->nvrtc_version, "%d.%d", &maj, &min), 2);
		assert_int_equal(m->min_driver, 1000 * maj + 10 * min);
	} else {
		assert_string_equal(m->nvrtc_version, "");
		assert_int_equal(m->min_driver, 0);
	}
	rt_manifest_free(m);
	for (int a = 0; a < s->n_archs; a++) {
		snprintf(path, sizeof(path), "%s/kernels.%s.cubin", dir, s->archs[a]);
		char *c = sw_read_file(path, SW_CAP_IMAGE, &n);
		if (!compiled) {
			assert_null(c);
			continue;
		}
		assert_non_null(c);
		assert_true(n > 4 && !memcmp(c, "\177ELF", 4));
		/* the cubin defines the entry (its symbol string) */
		const char *sym = "\0" RT_CUDA_SET_COND_ENTRY "\0";
		assert_non_null(memmem(c, n, sym, strlen(RT_CUDA_SET_COND_ENTRY) + 2));
		free(c);
	}
	snprintf(path, sizeof(path), "%s/kernels.ptx", dir);
	char *ptx = sw_read_file(path, SW_CAP_IMAGE, &n);
	if (compiled) {
		assert_non_null(ptx);
		assert_non_null(strstr(ptx, ".entry"));
		assert_non_null(strstr(ptx, ".entry " RT_CUDA_SET_COND_ENTRY "("));
	}
	free(ptx);
}

static const char *entry_for(const char *suffix, char *out, size_t n)
{
	DIR *d = opendir(g_cache);
	struct dirent *e;
	out[0] = 0;
	assert_non_null(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, suffix) && !strstr(e->d_name, ".tmp"))
			snprintf(out, n, "%s/%s", g_cache, e->d_name);
	closedir(d);
	return out;
}

static void test_build_real_model(void **state)
{
	(void)state;
	const char *model = "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(model, R_OK)) {
		print_message("test_build: SKIPPING the real model: %s not fetched (make model)\n", model);
		skip();
	}
	if (!g_nvrtc)
		skip();
	gen_spec *s = load("models/specs/smollm2-eagle25.json");
	gen_build_stats cold, warm, again;
	char d1[400], d2[400], d3[400];
	snprintf(d1, sizeof(d1), "%s/smol1", g_tmp);
	snprintf(d2, sizeof(d2), "%s/smol2", g_tmp);
	snprintf(d3, sizeof(d3), "%s/smol3", g_tmp);

	build(s, d1, false, &cold);
	/* each kernel and the set-conditional kernel for sm_80, sm_90; the PTX */
	const int n_entries = 2 * (cold.n_kernels + 1) + 1;
	assert_int_equal(cold.cache_hits, 0);
	assert_int_equal(cold.cache_misses, n_entries);
	assert_int_equal(cold.max_spill_bytes, 0);
	check_engine_files(d1, s, true);
	check_resources(d1, s);

	build(s, d2, false, &warm);
	assert_int_equal(warm.cache_hits, n_entries);
	assert_int_equal(warm.cache_misses, 0);
	print_message("  real model (%s): %d kernels, %d ops; build cold %.3f s (NVRTC %s %.3f s), "
	              "cached %.3f s\n", s->name, cold.n_kernels, cold.n_ops, cold.seconds,
	              cold.nvrtc_version, cold.compile_seconds, warm.seconds);
	static const char *files[] = {"engine.json", "kernels.cu", "kernels.sm_80.cubin",
	                              "kernels.sm_90.cubin", "kernels.ptx", "resources.json"};
	for (int i = 0; i < 6; i++)
		same_file(d1, d2, files[i]);

	/* a truncated entry and a flipped byte: both misses, rebuilt, rewritten */
	char e90[600], e80[600];
	entry_for(".sm_90.kernel.entry", e90, sizeof(e90));
	entry_for(".sm_80.kernel.entry", e80, sizeof(e80));
	assert_true(e90[0] && e80[0]);
	size_t n90 = 0, n80 = 0;
	char *orig90 = sw_read_file(e90, SW_CAP_IMAGE, &n90), *orig80 = sw_read_file(e80, SW_CAP_IMAGE, &n80);
	assert_int_equal(truncate(e90, (off_t)(n90 / 2)), 0);
	FILE *f = fopen(e80, "r+b");
	assert_non_null(f);
	fseek(f, (long)(n80 / 2), SEEK_SET);
	fputc(orig80[n80 / 2] ^ 0x5a, f);
	fclose(f);
	build(s, d3, false, &again);
	assert_int_equal(again.cache_misses, 2);
	assert_int_equal(again.cache_hits, n_entries - 2);
	size_t m90 = 0, m80 = 0;
	char *new90 = sw_read_file(e90, SW_CAP_IMAGE, &m90), *new80 = sw_read_file(e80, SW_CAP_IMAGE, &m80);
	assert_int_equal(m90, n90);
	assert_int_equal(m80, n80);
	assert_memory_equal(new80, orig80, n80);
	assert_memory_equal(new90, orig90, n90);
	for (int i = 0; i < 6; i++)
		same_file(d1, d3, files[i]);
	build(s, d3, false, &again); /* the rewritten entries are valid */
	assert_int_equal(again.cache_hits, n_entries);
	assert_int_equal(again.cache_misses, 0);
	free(orig90);
	free(orig80);
	free(new90);
	free(new80);

	/* inspect: the projection's arithmetic */
	gen_inspect_summary sum;
	sw_err err = {0};
	FILE *devnull = fopen("/dev/null", "w");
	if (gen_inspect(d1, 0, devnull, &sum, &err))
		fail_msg("%s", err.msg);
	fclose(devnull);
	assert_true(sum.tau == 3.0);
	double tot = 0;
	for (int i = 0; i < sum.n_phases; i++)
		if (strcmp(sum.phase[i], "prefill"))
			tot += sum.phase_us[i];
	assert_true(tot == sum.iter_us && tot > 0);
	assert_true(sum.tokens_per_s == sum.tau / (sum.iter_us * 1e-6));
	assert_int_equal(sum.n_phases, s->tree.depth_max + 5); /* + the draft catch-up */
	if (gen_inspect(d1, 2.5, NULL, &sum, &err))
		fail_msg("%s", err.msg);
	assert_true(sum.tau == 2.5);
	free(s);
}

/* engine.json of a spec text with its tree replaced (for the chain:5 rows). */
static gen_spec *with_tree(const char *path, const char *tree)
{
	size_t n = 0;
	char *t = sw_read_file(path, SW_CAP_IMAGE, &n), out[4096];
	sw_err err = {0};
	assert_non_null(t);
	char *p = strstr(t, "\"tree\": \"");
	assert_non_null(p);
	char *q = strchr(p + 9, '"');
	snprintf(out, sizeof(out), "%.*s\"tree\": \"%s\"%s", (int)(p - t), t, tree, q + 1);
	/* chain:5 has depth 5: a roofline.tau of the spec stays valid */
	gen_spec *s = malloc(sizeof(*s));
	assert_non_null(s);
	if (gen_spec_parse(out, strlen(out), path, NULL, s, &err))
		fail_msg("%s", err.msg);
	free(t);
	return s;
}

static void test_build_7b_shapes(void **state)
{
	(void)state;
	static const char *specs[] = {"models/specs/llama2-7b-eagle25.json",
	                              "models/specs/llama3-8b-eagle25.json",
	                              "models/specs/smollm2-eagle25.json"};
	for (int i = 0; i < 3; i++) {
		if (i == 2 && access("models/cache/SmolLM2-135M-Instruct.Q4_1.gguf", R_OK))
			continue;
		char dir[400];
		gen_build_stats st;
		gen_spec *s = load(specs[i]);
		snprintf(dir, sizeof(dir), "%s/shape%d", g_tmp, i);
		if (i < 2 && g_nvrtc) {
			build(s, dir, false, &st);
			print_message("  %s: %d kernels, build %.3f s (%d misses)\n", s->name, st.n_kernels,
			              st.seconds, st.cache_misses);
			assert_int_equal(st.max_spill_bytes, 0);
			check_engine_files(dir, s, true);
			check_resources(dir, s);
		}
		/* the projected iteration: eagle25 as specified, and chain:5 */
		for (int t = 0; t < 2; t++) {
			gen_spec *ts = t ? with_tree(specs[i], "chain:5") : s;
			char d2[420];
			gen_inspect_summary sum;
			sw_err err = {0};
			snprintf(d2, sizeof(d2), "%s_%s", dir, t ? "chain5" : "tree");
			build(ts, d2, true, &st);
			check_engine_files(d2, ts, false);
			if (gen_inspect(d2, 0, NULL, &sum, &err))
				fail_msg("%s", err.msg);
			print_message("  H100 projection %-36s %-8s iteration %8.1f us (verify %7.1f us), "
			              "tau %.2f (%s) -> %6.0f tok/s\n", s->name, t ? "chain:5" : "eagle25",
			              sum.iter_us, sum.phase_us[sum.n_phases - 3], sum.tau, sum.tau_src,
			              sum.tokens_per_s);
			assert_true(sum.iter_us > 0);
			if (t)
				free(ts);
		}
		free(s);
	}
}

/* A spec text with its tree (and optionally its "verify" object) replaced. */
static gen_spec *with_tree_verify(const char *path, const char *tree, const char *verify)
{
	size_t n = 0;
	char *t = sw_read_file(path, SW_CAP_IMAGE, &n), out[4096], tmp[4096];
	sw_err err = {0};
	assert_non_null(t);
	char *p = strstr(t, "\"tree\": \"");
	assert_non_null(p);
	char *q = strchr(p + 9, '"');
	snprintf(out, sizeof(out), "%.*s\"tree\": \"%s\"%s", (int)(p - t), t, tree, q + 1);
	if (verify) {
		p = strstr(out, "\"verify\": {");
		assert_non_null(p);
		q = strchr(p, '}');
		snprintf(tmp, sizeof(tmp), "%.*s\"verify\": %s%s", (int)(p - out), out, verify, q + 1);
		snprintf(out, sizeof(out), "%s", tmp);
	}
	gen_spec *s = malloc(sizeof(*s));
	assert_non_null(s);
	if (gen_spec_parse(out, strlen(out), path, NULL, s, &err))
		fail_msg("%s", err.msg);
	free(t);
	return s;
}

/* The NVRTC matrix: the real model and the Llama-2-7B / Llama-3-8B shapes,
 * each with chain:5, eagle25 and sequoia63 (and biseq16 with SpecHub on the
 * Llama-3-8B shape), for the spec's archs (sm_80, sm_90): built with zero
 * spills, every planned kernel entry in resources.json. All share one cache,
 * so a kernel two engines have in common compiles once; a second pass is
 * all hits. Then the projected H100 iteration of each. */
static void test_build_matrix(void **state)
{
	(void)state;
	if (!g_nvrtc)
		skip();
	static const char *specs[] = {"models/specs/smollm2-eagle25.json",
	                              "models/specs/llama2-7b-eagle25.json",
	                              "models/specs/llama3-8b-eagle25.json"};
	static const char *trees[] = {"chain:5", "eagle25", "sequoia63", "biseq16"};
	double secs[2] = {0, 0};
	int misses[2] = {0, 0}, hits[2] = {0, 0}, n_built = 0;
	g_verbose = false;
	for (int pass = 0; pass < 2; pass++) {
		double t0 = sw_now_s();
		for (int i = 0; i < 3; i++) {
			if (i == 0 && access("models/cache/SmolLM2-135M-Instruct.Q4_1.gguf", R_OK))
				continue;
			for (int t = 0; t < 4; t++) {
				if (t == 3 && i != 2)
					continue;
				gen_spec *s = with_tree_verify(specs[i], trees[t],
				                               t == 3 ? "{\"method\": \"spechub\", \"expand\": "
				                                        "\"spechub\"}" : NULL);
				char dir[400];
				gen_build_stats st;
				snprintf(dir, sizeof(dir), "%s/matrix_%d_%d_%d", g_tmp, i, t, pass);
				build(s, dir, false, &st);
				assert_int_equal(st.max_spill_bytes, 0);
				check_engine_files(dir, s, true);
				check_resources(dir, s);
				misses[pass] += st.cache_misses;
				hits[pass] += st.cache_hits;
				if (pass == 0) {
					gen_inspect_summary sum;
					sw_err err = {0};
					n_built++;
					if (gen_inspect(dir, 0, NULL, &sum, &err))
						fail_msg("%s", err.msg);
					print_message("  %-36s %-9s %3d kernels: H100 iteration %8.1f us "
					              "(verify %7.1f us), tau %.2f (%s) -> %6.0f tok/s\n", s->name,
					              trees[t], st.n_kernels, sum.iter_us,
					              sum.phase_us[sum.n_phases - 3], sum.tau, sum.tau_src,
					              sum.tokens_per_s);
				}
				free(s);
			}
		}
		secs[pass] = sw_now_s() - t0;
	}
	g_verbose = true;
	print_message("  NVRTC matrix: %d engines; first pass %.1f s (%d compiles, %d hits), "
	              "second %.1f s (%d compiles, %d hits)\n", n_built, secs[0], misses[0], hits[0],
	              secs[1], misses[1], hits[1]);
	assert_int_equal(misses[1], 0);
}

/* Block-drafter engines through the planner (issue 12): the SmolLM2 chain:8
 * and Cartesian branch:3,2,2,1,1 engines with the trained drafter, and the
 * Llama-3-8B-shaped engine (B = 16, a 1-layer drafter given by its shape),
 * for sm_80 and sm_90: zero spills, every kernel in resources.json; then the
 * projected H100 iteration and the drafter's share of it. */
static void test_build_block_engines(void **state)
{
	(void)state;
	if (!g_nvrtc)
		skip();
	static const char *specs[] = {"models/specs/smollm2-block-chain.json",
	                              "models/specs/smollm2-block-tree.json",
	                              "models/specs/llama3-8b-block.json"};
	g_verbose = false;
	for (int i = 0; i < 3; i++) {
		if (i < 2 && access("models/cache/SmolLM2-135M-Instruct.Q4_1.gguf", R_OK))
			continue;
		gen_spec *s = load(specs[i]);
		char dir[400];
		gen_build_stats st;
		gen_inspect_summary sum;
		sw_err err = {0};
		snprintf(dir, sizeof(dir), "%s/block%d", g_tmp, i);
		build(s, dir, false, &st);
		assert_int_equal(st.max_spill_bytes, 0);
		check_engine_files(dir, s, true);
		check_resources(dir, s);
		if (gen_inspect(dir, 0, NULL, &sum, &err))
			fail_msg("%s", err.msg);
		print_message("  %-36s %3d kernels, 0 spills: H100 iteration %8.1f us, drafter %6.1f us "
		              "(%4.1f%%), tau %.2f (%s) -> %6.0f tok/s\n", s->name, st.n_kernels,
		              sum.iter_us, sum.draft_us, 100.0 * sum.draft_us / sum.iter_us, sum.tau,
		              sum.tau_src, sum.tokens_per_s);
		assert_true(sum.draft_us > 0 && sum.draft_us < sum.iter_us);
		free(s);
	}
	g_verbose = true;
}

/* The NVRTC matrix over head dims and vocabularies: shapes of Qwen2-0.5B
 * (head dim 64, vocabulary 151936), Qwen2-7B (128, 152064, with a
 * layer-skip draft head over the first 151936 ids: Qwen2-0.5B's, so the
 * verify kernel's VQ < V), Qwen2-7B drafted by a separate Qwen2-0.5B (its
 * vocabulary a prefix of the target's: the draft's embedding reads 151936
 * rows for 152064 ids, the padding as zero rows), one with head dim 80 and one with 96 (Phi-3-mini:
 * 3072 / 32, vocabulary 32064) and Gemma-2B (head dim 256, one KV head,
 * vocabulary 256000: tree attention takes the output in two 128-dim parts),
 * each with eagle25 (RRSw), for sm_80 and sm_90: zero spills, every kernel
 * in resources.json; then the projected H100 iteration and verify's
 * share. */
static void test_build_head_dims(void **state)
{
	(void)state;
	if (!g_nvrtc)
		skip();
	static const char *shapes[][4] = {
		/* name, shape, draft, tree */
		{"qwen2-0.5b-shape", "\"n_layers\": 24, \"dim\": 896, \"n_heads\": 14, \"n_kv_heads\": 2, "
		 "\"ffn_dim\": 4864, \"vocab\": 151936", "\"layerskip:0-5\"", "eagle25"},
		{"qwen2-7b-shape", "\"n_layers\": 28, \"dim\": 3584, \"n_heads\": 28, \"n_kv_heads\": 4, "
		 "\"ffn_dim\": 18944, \"vocab\": 152064", "\"layerskip:0-6@151936\"", "eagle25"},
		{"qwen2-7b-0.5b-draft", "\"n_layers\": 28, \"dim\": 3584, \"n_heads\": 28, "
		 "\"n_kv_heads\": 4, \"ffn_dim\": 18944, \"vocab\": 152064",
		 "{\"method\": \"model\", \"shape\": {\"n_layers\": 24, \"dim\": 896, \"n_heads\": 14, "
		 "\"n_kv_heads\": 2, \"ffn_dim\": 4864, \"vocab\": 151936, \"rope_theta\": 1000000, "
		 "\"norm_eps\": 1e-6}}", "eagle25"},
		{"hd80-shape", "\"n_layers\": 32, \"dim\": 2560, \"n_heads\": 32, \"n_kv_heads\": 32, "
		 "\"ffn_dim\": 10240, \"vocab\": 51200", "\"layerskip:0-7\"", "sequoia63"},
		{"phi3-mini-shape", "\"n_layers\": 32, \"dim\": 3072, \"n_heads\": 32, \"n_kv_heads\": 32, "
		 "\"ffn_dim\": 8192, \"vocab\": 32064", "\"layerskip:0-7\"", "eagle25"},
		{"gemma-2b-shape", "\"n_layers\": 18, \"dim\": 2048, \"head_dim\": 256, \"n_heads\": 8, "
		 "\"n_kv_heads\": 1, \"ffn_dim\": 16384, \"vocab\": 256000", "\"layerskip:0-4\"", "eagle25"},
	};
	g_verbose = false;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		char text[2048], dir[400];
		sw_err err = {0};
		snprintf(text, sizeof(text),
		         "{\"name\": \"%s\", \"target\": {\"shape\": {%s, \"rope_theta\": 1000000, "
		         "\"norm_eps\": 1e-6, \"max_ctx\": 4096}}, \"draft\": %s, \"tree\": \"%s\", "
		         "\"verify\": {\"method\": \"rrsw\", \"expand\": \"sample-wor\"}, "
		         "\"sampling\": {\"temperature\": 0.8, \"top_k\": 0, \"top_p\": 0.95}, "
		         "\"max_context\": 4096, \"dtype\": \"bf16\", \"archs\": [\"sm_80\", \"sm_90\"], "
		         "\"roofline\": {\"context\": 2048}}",
		         shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
		gen_spec *s = malloc(sizeof(*s));
		assert_non_null(s);
		if (gen_spec_parse(text, strlen(text), shapes[i][0], NULL, s, &err))
			fail_msg("%s", err.msg);
		gen_build_stats st;
		gen_inspect_summary sum;
		snprintf(dir, sizeof(dir), "%s/hd_%zu", g_tmp, i);
		build(s, dir, false, &st);
		assert_int_equal(st.max_spill_bytes, 0);
		check_engine_files(dir, s, true);
		check_resources(dir, s);
		if (s->draft_kind == GEN_DRAFT_MODEL) {
			/* the draft's embedding: its 151936 rows, every id the target commits */
			char rp[500];
			size_t n = 0;
			snprintf(rp, sizeof(rp), "%s/engine.json", dir);
			char *r = sw_read_file(rp, SW_CAP_IMAGE, &n);
			assert_non_null(r);
			assert_non_null(strstr(r, "embedding16_dim896_n_rows151936_n_ids152064"));
			assert_non_null(strstr(r, "embedding16_dim3584_n_rows152064_n_ids152064"));
			free(r);
		}
		if (gen_inspect(dir, 0, NULL, &sum, &err))
			fail_msg("%s", err.msg);
		const double v = sum.phase_us[sum.n_phases - 2]; /* accept: the verify kernel */
		print_message("  %-18s head dim %3d V %6d VQ %6d: %3d kernels, H100 iteration %8.1f us, "
		              "verification %6.1f us (%4.1f%%)\n", s->name, s->target.cfg.head_dim,
		              s->target.cfg.vocab, s->draft_vocab, st.n_kernels, sum.iter_us, v,
		              100.0 * v / sum.iter_us);
		free(s);
	}
	g_verbose = true;
}

/* The block drafter's kernels (issue 12) at the SmolLM2 block engine's
 * shapes (dim 576, vocabulary 49152, draft vocabulary 8192, B 8, bf16) and
 * Llama-3-8B-shaped ones (dim 4096, 128256, 32768, B 16, fp16), for sm_80
 * and sm_90 with zero spills (nvrtc_check_ex asserts it and prints the
 * registers): block_embed (FIRST 0 and 1), feature_tap (the verify tree's
 * rows and a prefill chunk's), block_unmask (a middle pass, and the final
 * over a mapped draft vocabulary),
 * tree_expand with Q_BY_DEPTH 1 on a Cartesian tree (every rule; SpecHub
 * on a binary one) and verify with Q_BY_DEPTH 1 and VQ = the draft
 * vocabulary (every method; the chain method on chain:B). Template by
 * template until the planner's block engines join the matrix above. */
static void test_build_block_kernels(void **state)
{
	(void)state;
	if (!g_nvrtc)
		skip();
#define BI(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}
#define BN {.name = "NAME", .type = GEN_PARAM_IDENT}
	static const struct {
		const char *name, *cart, *bin;
		int dim, vocab, vd, B, is_f16;
	} shapes[] = {{"SmolLM2", "branch:4,2,2,1", "branch:2,2,2,1", 576, 49152, 8192, 8, 0},
	              {"Llama-3-8B", "branch:4,3,2,2,1,1", "branch:2,2,2,2,1,1", 4096, 128256, 32768,
	               16, 1}};
	for (int i = 0; i < 2; i++) {
		rt_tree cart, bin, chain;
		sw_err err = {0};
		char cs[32];
		snprintf(cs, sizeof(cs), "chain:%d", shapes[i].B);
		if (rt_tree_parse(shapes[i].cart, NULL, &cart, &err) ||
		    rt_tree_parse(shapes[i].bin, NULL, &bin, &err) || rt_tree_parse(cs, NULL, &chain, &err))
			fail_msg("%s", err.msg);
		const int B = shapes[i].B, D = shapes[i].dim, V = shapes[i].vocab, VD = shapes[i].vd;
		print_message("  %s block kernels (B %d, dim %d, V %d, Vd %d; trees %s (%d nodes), %s, "
		              "%s)\n", shapes[i].name, B, D, V, VD, shapes[i].cart, cart.n, shapes[i].bin,
		              cs);
		for (int first = 0; first < 2; first++) {
			gen_param p[] = {BN, BI("B", B), BI("DIM", D), BI("N_ROWS", V),
			                 BI("IS_F16", shapes[i].is_f16), BI("FIRST", first), BI("BLOCK", 128)};
			nvrtc_check_ex("block_embed.cu.tmpl", "block_embed", p, 7, false);
		}
		const int rows[2] = {cart.n, 128};
		for (int r = 0; r < 2; r++) {
			gen_param p[] = {BN, BI("ROWS", rows[r]), BI("DIM", D), BI("N_TAPS", 3),
			                 BI("SLOT", r + 1), BI("BLOCK", 128)};
			nvrtc_check_ex("feature_tap.cu.tmpl", "feature_tap", p, 6, false);
		}
		for (int fin = 0; fin < 2; fin++) {
			gen_param p[] = {BN, BI("B", B), BI("VD", VD), BI("PASS", fin ? 0 : 1), BI("STEPS", 4),
			                 BI("FINAL", fin), BI("MAPPED", fin), BI("BLOCK", 256)};
			nvrtc_check_ex("block_unmask.cu.tmpl", "block_unmask", p, 8, true);
		}
		for (int rule = 0; rule < 4; rule++) {
			const rt_tree *t = rule == 3 ? &bin : &cart;
			const int nl = t->level_start[2] - t->level_start[1];
			int km = 1;
			for (int u = t->level_start[1]; u < t->level_start[2]; u++)
				km = t->n_children[u] > km ? t->n_children[u] : km;
			gen_param p[] = {BN, BI("N_NODES", t->n), BI("V", VD), BI("RULE", rule),
			                 BI("LEVEL_BEGIN", t->level_start[1]), BI("BLOCK", 256),
			                 BI("Q_BY_DEPTH", 1), BI("MAPPED", 0),
			                 BI("SLICES", sw_expand_slices(nl, VD, 256)), BI("KMAX", km)};
			nvrtc_check_ex("tree_expand.cu.tmpl", "expand", p, 10, true);
		}
		for (int m = 0; m <= 5; m++) {
			const rt_tree *t = m == 3 ? &bin : m == 5 ? &chain : &cart;
			gen_param p[] = {BN, BI("N_NODES", t->n), BI("V", V), BI("VQ", VD), BI("METHOD", m),
			                 BI("CHAIN_Q", 1), BI("BLOCK", 256),
			                 BI("SLICES", sw_verify_slices(t->n, V, 256, m)), BI("Q_BY_DEPTH", 1)};
			nvrtc_check_ex("verify.cu.tmpl", "verify", p, 9, true);
		}
	}
#undef BI
#undef BN
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_real_model),
		cmocka_unit_test(test_build_7b_shapes),
		cmocka_unit_test(test_build_matrix),
		cmocka_unit_test(test_build_head_dims),
		cmocka_unit_test(test_build_block_kernels),
		cmocka_unit_test(test_build_block_engines),
	};
	/* e.g. CMOCKA_FILTER='*head_dims' (as test_kern_tree_attention.c) */
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
