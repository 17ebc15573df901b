/* engine.json reader and validator (manifest.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "extent.h"
#include "manifest_check.h"
#include "core/digest.h"
#include "core/fileio.h"
#include "core/json.h"
#include "core/wformat.h"
#include "device/host_ops.h"
#include "kernels/engine_state.h"

typedef struct jctx {
	const char *file;
	sw_err *err;
	int rc;
} jctx;

static int64_t jint(jctx *j, const json_value *o, const char *key, const char *path, int64_t min,
                    int64_t max)
{
	int64_t v = 0;
	if (!j->rc)
		j->rc = json_get_int(o, key, path, min, max, &v, j->err);
	return v;
}

static double jnum(jctx *j, const json_value *o, const char *key, const char *path)
{
	double v = 0;
	if (!j->rc)
		j->rc = json_get_number(o, key, path, -1e300, 1e300, &v, j->err);
	return v;
}

static const char *jstr(jctx *j, const json_value *o, const char *key, const char *path)
{
	static const char empty[1];
	const char *s = NULL;
	if (j->rc || json_get_string(o, key, path, &s, j->err)) {
		j->rc = j->rc ? j->rc : SW_EINVAL;
		return empty;
	}
	return s;
}

static const json_value *jarr(jctx *j, const json_value *o, const char *key, const char *path,
                              size_t min, size_t max)
{
	const json_value *a = NULL;
	if (!j->rc)
		j->rc = json_get_array(o, key, path, min, max, &a, j->err);
	return j->rc ? NULL : a;
}

static const json_value *jobj(jctx *j, const json_value *o, const char *key, const char *path)
{
	const json_value *a = NULL;
	if (!j->rc)
		j->rc = json_get_object(o, key, path, &a, j->err);
	return j->rc ? NULL : a;
}

/* An int array of exactly n entries in [min, max]. */
static void jints(jctx *j, const json_value *o, const char *key, const char *path, int n, int min,
                  int max, int32_t *out)
{
	char p[160];
	const json_value *a = jarr(j, o, key, path, (size_t)n, (size_t)n);
	json_path_key(p, sizeof(p), path, key);
	for (int i = 0; a && i < n && !j->rc; i++) {
		int64_t v;
		char pi[192];
		j->rc = json_as_int(a->items[i], json_path_index(pi, sizeof(pi), p, (size_t)i), min, max,
		                    &v, j->err);
		out[i] = (int32_t)v;
	}
}

const char *rt_manifest_arch_name(int arch)
{
	static const char *const names[] = {"llama", "qwen2", "qwen3", "gemma3"};
	return arch >= 0 && arch < 4 ? names[arch] : "unknown";
}

static void read_cfg(jctx *j, const json_value *c, const char *path, rt_engine_shape *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	/* the family (gen/arch.h); engines written before it had no key: llama */
	const json_value *a = json_get(c, "arch");
	if (a && !j->rc) {
		const char *s = jstr(j, c, "arch", path);
		cfg->arch = -1;
		for (int i = 0; i < 4 && !j->rc; i++)
			if (!strcmp(s, rt_manifest_arch_name(i)))
				cfg->arch = i;
		if (!j->rc && cfg->arch < 0)
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.arch: expected \"llama\", \"qwen2\", "
			                "\"qwen3\" or \"gemma3\", found \"%.40s\"", j->file, path, s);
	}
	cfg->n_layers = (int)jint(j, c, "n_layers", path, 1, 1024);
	cfg->dim = (int)jint(j, c, "dim", path, 1, 1 << 20);
	cfg->n_heads = (int)jint(j, c, "n_heads", path, 1, 1024);
	cfg->n_kv_heads = (int)jint(j, c, "n_kv_heads", path, 1, 1024);
	cfg->head_dim = (int)jint(j, c, "head_dim", path, 1, 1024);
	cfg->ffn_dim = (int)jint(j, c, "ffn_dim", path, 1, 1 << 22);
	cfg->vocab = (int)jint(j, c, "vocab", path, 1, 1 << 24);
	cfg->rope_theta = (float)jnum(j, c, "rope_theta", path);
	cfg->norm_eps = (float)jnum(j, c, "norm_eps", path);
	bool tied = false;
	if (!j->rc)
		j->rc = json_get_bool(c, "tied_embd", path, &tied, j->err);
	cfg->tied_embd = tied;
}

/* A weights digest (core/digest.h): its prefix and 16 lower-case hex digits. */
static void read_digest(jctx *j, const json_value *o, const char *path, char out[32])
{
	const char *d = jstr(j, o, "digest", path);
	const size_t pl = strlen(SW_DIGEST_PREFIX);
	bool ok = strlen(d) == pl + 16 && !strncmp(d, SW_DIGEST_PREFIX, pl);
	for (size_t i = pl; ok && d[i]; i++)
		ok = (d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f');
	if (!j->rc && !ok)
		j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.digest: expected \"" SW_DIGEST_PREFIX
		                "\" and 16 hex digits, found \"%.40s\"", j->file, path, d);
	if (!j->rc)
		snprintf(out, 32, "%s", d);
}

/* A model's source ($.spec.target, $.spec.draft of a model or block
 * draft): {"shape": true}, or a "path" and the "digest" of the weights the
 * build bound it to (gen/plan.c write_src). The digest is required with a
 * path (a check must not depend on a field an edit can delete); only a
 * block drafter's source over a shape-built target has none (the build
 * digests the drafter with the target's weights). */
static void read_source(jctx *j, const json_value *o, const char *path, bool digest_optional,
                        char *src, size_t src_n, char digest[32])
{
	const json_value *sh = json_get(o, "shape");
	if (j->rc)
		return;
	if (sh) {
		if (sh->type != JSON_BOOL || !sh->boolean || json_get(o, "path") || json_get(o, "digest"))
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s: \"shape\": true and no path or digest "
			                "(an engine built from shapes), or a path and a digest, expected", j->file,
			                path);
		return;
	}
	snprintf(src, src_n, "%s", jstr(j, o, "path", path));
	if (!j->rc && (json_get(o, "digest") || !digest_optional))
		read_digest(j, o, path, digest);
}

static int parse_spec(rt_manifest *e, jctx *j, const json_value *spec)
{
	const char *P = "$.spec";
	snprintf(e->name, sizeof(e->name), "%s", jstr(j, spec, "name", P));
	const json_value *t = jobj(j, spec, "target", P);
	bool target_shape = false;
	if (t) {
		read_source(j, t, "$.spec.target", false, e->target_path, sizeof(e->target_path),
		            e->target_digest);
		target_shape = json_get(t, "shape") != NULL;
	}
	const json_value *d = jobj(j, spec, "draft", P);
	if (d) {
		const char *m = jstr(j, d, "method", "$.spec.draft");
		if (!strncmp(m, "ngram", 5)) {
			e->draft_kind = RT_ENGINE_DRAFT_NGRAM;
		} else if (!strncmp(m, "layerskip", 9)) {
			e->draft_kind = RT_ENGINE_DRAFT_LAYERSKIP;
			const json_value *ls = jarr(j, d, "layers", "$.spec.draft", 1, 256);
			if (ls) {
				e->n_skip = (int)ls->n;
				for (int i = 0; i < e->n_skip && !j->rc; i++) {
					int64_t v;
					char pi[64];
					snprintf(pi, sizeof(pi), "$.spec.draft.layers[%d]", i);
					j->rc = json_as_int(ls->items[i], pi, 0, 1023, &v, j->err);
					e->skip_layers[i] = (int)v;
				}
			}
			e->draft_vocab = (int)jint(j, d, "vocab", "$.spec.draft", 1, 1 << 24);
		} else if (!strcmp(m, "block")) {
			/* a block drafter: its weights' directory and digest, B and S */
			e->draft_kind = RT_ENGINE_DRAFT_BLOCK;
			read_source(j, d, "$.spec.draft", target_shape, e->draft_path, sizeof(e->draft_path),
			            e->draft_digest);
			e->block = (int)jint(j, d, "block", "$.spec.draft", 2, 64);
			e->steps = (int)jint(j, d, "steps", "$.spec.draft", 1, 16);
			e->draft_vocab = (int)jint(j, d, "vocab", "$.spec.draft", 1, 1 << 24);
		} else if (!strcmp(m, "eagle3")) {
			/* an EAGLE-3 head (gen/drafter_eagle3.c): its directory, Vd */
			e->draft_kind = RT_ENGINE_DRAFT_EAGLE3;
			read_source(j, d, "$.spec.draft", target_shape, e->draft_path, sizeof(e->draft_path),
			            e->draft_digest);
			e->draft_vocab = (int)jint(j, d, "vocab", "$.spec.draft", 1, 1 << 24);
		} else {
			e->draft_kind = RT_ENGINE_DRAFT_MODEL;
			read_source(j, d, "$.spec.draft", false, e->draft_path, sizeof(e->draft_path),
			            e->draft_digest);
		}
	}
	const json_value *v = jobj(j, spec, "verify", P);
	if (v) {
		snprintf(e->verify, sizeof(e->verify), "%s", jstr(j, v, "method", "$.spec.verify"));
		snprintf(e->expand, sizeof(e->expand), "%s", jstr(j, v, "expand", "$.spec.verify"));
	}
	const json_value *s = jobj(j, spec, "sampling", P);
	if (s) {
		e->samp.temperature = (float)jnum(j, s, "temperature", "$.spec.sampling");
		e->samp.top_k = (int)jint(j, s, "top_k", "$.spec.sampling", 0, 1 << 24);
		e->samp.top_p = (float)jnum(j, s, "top_p", "$.spec.sampling");
		/* the request defaults, read at run time (engine.h) */
		if (!j->rc && !(e->samp.temperature >= 0.0f && e->samp.temperature <= 100.0f))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.spec.sampling.temperature: %g, "
			                       "expected 0 to 100", j->file, (double)e->samp.temperature);
		if (!j->rc && !(e->samp.top_p > 0.0f && e->samp.top_p <= 1.0f))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.spec.sampling.top_p: %g, expected "
			                       "0 < top_p <= 1", j->file, (double)e->samp.top_p);
	}
	const json_value *ct = json_get(spec, "control");
	if (ct && !j->rc) {
		const json_value *cv = json_get(ct, "cost");
		if (!cv) {
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.spec.control.cost: missing (expected "
			                "\"measure\", \"flat\" or an array)", j->file);
		} else if (cv->type == JSON_STRING && !strcmp(cv->str, "measure")) {
			e->ctrl = RT_CTRL_MEASURE;
		} else if (cv->type == JSON_STRING && !strcmp(cv->str, "flat")) {
			e->ctrl = RT_CTRL_FLAT;
		} else if (!(j->rc = json_as_array(cv, "$.spec.control.cost", 1, RT_CTRL_MAX_COST,
		                                   j->err))) {
			e->ctrl = RT_CTRL_TABLE;
			e->n_ctrl_cost = (int)cv->n;
			for (size_t i = 0; i < cv->n && !j->rc; i++) {
				char pi[64];
				snprintf(pi, sizeof(pi), "$.spec.control.cost[%zu]", i);
				j->rc = json_as_number(cv->items[i], pi, 1.0, 1000.0, &e->ctrl_cost[i], j->err);
			}
		}
	}
	e->max_ctx = (int)jint(j, spec, "max_context", P, 2, 1 << 24);
	e->chunk = (int)jint(j, spec, "prefill_chunk", P, 1, 1 << 16);
	const char *dt = jstr(j, spec, "dtype", P);
	if (!j->rc) {
		if (!strcmp(dt, "bf16"))
			e->dtype = RT_BF16;
		else if (!strcmp(dt, "fp16"))
			e->dtype = RT_FP16;
		else if (!strcmp(dt, "q8_0"))
			e->dtype = RT_Q8_0;
		else if (!strcmp(dt, "q8_0_a8"))
			e->dtype = RT_Q8_0_A8;
		else if (!strcmp(dt, "gguf_a8"))
			e->dtype = RT_GGUF_A8;
		else
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.spec.dtype: expected \"bf16\", \"fp16\", "
			                "\"q8_0\", \"q8_0_a8\" or \"gguf_a8\", found \"%s\"", j->file, dt);
	}
	return j->rc;
}

static int parse_shapes(rt_manifest *e, jctx *j, const json_value *sh)
{
	const json_value *tc = jobj(j, sh, "target", "$.shapes");
	if (tc)
		read_cfg(j, tc, "$.shapes.target", &e->tcfg);
	const json_value *dc = json_get(sh, "draft");
	if (!j->rc && dc && dc->type == JSON_OBJECT)
		read_cfg(j, dc, "$.shapes.draft", &e->dcfg);
	const json_value *t = jobj(j, sh, "tree", "$.shapes");
	if (!t)
		return j->rc;
	const char *P = "$.shapes.tree";
	int n = (int)jint(j, t, "nodes", P, 1, RT_ENGINE_MAX_NODES);
	int D = (int)jint(j, t, "depth", P, 0, RT_ENGINE_MAX_NODES - 1);
	if (j->rc)
		return j->rc;
	e->n_nodes = n;
	e->depth = D;
	int32_t *tb = e->tree_table;
	jints(j, t, "parent", P, n, -1, n - 1, tb);
	jints(j, t, "n_children", P, n, 0, n - 1, tb + n);
	jints(j, t, "child_start", P, n, 0, n, tb + 2 * n);
	jints(j, t, "child_list", P, n, 0, n - 1, tb + 3 * n);
	jints(j, t, "node_depth", P, n, 0, D, tb + 4 * n);
	int32_t ls[RT_ENGINE_MAX_NODES + 2];
	jints(j, t, "level_start", P, D + 2, 0, n, ls);
	for (int i = 0; i < D + 2; i++)
		e->level_start[i] = ls[i];
	/* the executor relies on BFS order (parents first, levels contiguous) */
	for (int i = 1; !j->rc && i < n; i++)
		if (tb[i] >= i || tb[4 * n + i] != tb[4 * n + tb[i]] + 1)
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s: node %d: parent %d / depth %d is not a "
			                "BFS tree", j->file, P, i, tb[i], tb[4 * n + i]);
	return j->rc;
}

static int parse_buffers(rt_manifest *e, jctx *j, const json_value *root)
{
	const json_value *ar = jobj(j, root, "arena", "$");
	if (ar)
		e->arena_bytes = jint(j, ar, "bytes", "$.arena", 1, INT64_MAX);
	const json_value *b = jarr(j, root, "buffers", "$", 1, 100000);
	if (!b)
		return j->rc;
	e->bufs = calloc(b->n, sizeof(*e->bufs));
	if (!e->bufs)
		return j->rc = sw_errf(j->err, SW_ENOMEM, "out of memory");
	e->n_bufs = (int)b->n;
	for (int i = 0; i < e->n_bufs && !j->rc; i++) {
		char p[64];
		snprintf(p, sizeof(p), "$.buffers[%d]", i);
		rt_engine_buf *x = &e->bufs[i];
		const json_value *o = b->items[i];
		snprintf(x->name, sizeof(x->name), "%s", jstr(j, o, "name", p));
		snprintf(x->kind, sizeof(x->kind), "%s", jstr(j, o, "kind", p));
		snprintf(x->dtype, sizeof(x->dtype), "%s", jstr(j, o, "dtype", p));
		const json_value *s = jarr(j, o, "shape", p, 1, 4);
		for (int d = 0; s && d < (int)s->n && !j->rc; d++) {
			char pd[96];
			snprintf(pd, sizeof(pd), "%s.shape[%d]", p, d);
			j->rc = json_as_int(s->items[d], pd, 0, INT64_MAX, &x->shape[d], j->err);
		}
		x->rank = s ? (int)s->n : 0;
		x->bytes = jint(j, o, "bytes", p, 0, INT64_MAX);
		x->offset = jint(j, o, "offset", p, 0, INT64_MAX);
		if (!j->rc)
			j->rc = rt_manifest_parse_ltypes(x, json_get(o, "layer_dtypes"), j->file, p, j->err);
		if (!j->rc && x->offset + x->bytes > e->arena_bytes)
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s (%s): offset %lld + %lld bytes exceeds the "
			                "arena (%lld bytes)", j->file, p, x->name, (long long)x->offset,
			                (long long)x->bytes, (long long)e->arena_bytes);
	}
	return j->rc;
}

int rt_manifest_buf_find(const rt_manifest *e, const char *name)
{
	for (int i = 0; i < e->n_bufs; i++)
		if (!strcmp(e->bufs[i].name, name))
			return i;
	return -1;
}

static int find_kernel(const rt_manifest *e, const char *uri)
{
	for (int i = 0; i < e->n_kernels; i++)
		if (!strcmp(e->kernels[i].uri, uri))
			return i;
	return -1;
}

/* Whether node j is node i or one of its ancestors. */
static bool tree_visible(const rt_manifest *e, int i, int j)
{
	for (int u = i; u >= 0; u = e->tree_table[u])
		if (u == j)
			return true;
	return false;
}

/* $.toolkit (absent when the build compiled nothing): the NVRTC that wrote
 * the cubins and PTX and the driver floor it implies (gen/build.c). */
static int parse_toolkit(rt_manifest *e, jctx *j, const json_value *root)
{
	const json_value *tk = json_get(root, "toolkit");
	int maj = 0, min = 0;
	char tail = 0;
	if (!tk)
		return 0;
	if (tk->type != JSON_OBJECT)
		return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.toolkit: expected an object", j->file);
	const char *v = jstr(j, tk, "nvrtc", "$.toolkit");
	if (j->rc)
		return j->rc;
	if (sscanf(v, "%d.%d%c", &maj, &min, &tail) != 2 || maj < 1 || maj > 99 || min < 0 ||
	    min > 9)
		return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.toolkit.nvrtc: expected \"MAJOR.MINOR\" "
		                       "(NVRTC's version, e.g. \"13.0\"), found \"%s\"", j->file, v);
	snprintf(e->nvrtc_version, sizeof(e->nvrtc_version), "%d.%d", maj, min);
	e->min_driver = (int)jint(j, tk, "min_driver", "$.toolkit", 1000, 99990);
	if (!j->rc && e->min_driver != 1000 * maj + 10 * min)
		return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.toolkit.min_driver: %d, expected %d "
		                       "(what NVRTC %s's PTX needs)", j->file, e->min_driver,
		                       1000 * maj + 10 * min, e->nvrtc_version);
	return j->rc;
}

static int parse_kernels(rt_manifest *e, jctx *j, const json_value *root)
{
	const json_value *ks = jarr(j, root, "kernels", "$", 0, 100000);
	if (!ks)
		return j->rc;
	e->kernels = calloc(ks->n ? ks->n : 1, sizeof(*e->kernels));
	if (!e->kernels)
		return j->rc = sw_errf(j->err, SW_ENOMEM, "out of memory");
	e->n_kernels = (int)ks->n;
	for (int i = 0; i < e->n_kernels && !j->rc; i++) {
		char p[64];
		snprintf(p, sizeof(p), "$.kernels[%d]", i);
		rt_kernel_info *k = &e->kernels[i];
		const json_value *o = ks->items[i];
		snprintf(k->uri, sizeof(k->uri), "%s", jstr(j, o, "uri", p));
		const char *tp = jstr(j, o, "template", p);
		const char *sl = strrchr(tp, '/');
		snprintf(k->tmpl, sizeof(k->tmpl), "%s", sl ? sl + 1 : tp);
		/* dynamic shared memory its launches provide (required: the plan
		 * states it for every kernel, 0 for none); 227 KiB is the largest
		 * opt-in of any arch (sm_90) */
		k->dyn_smem = (int)jint(j, o, "dyn_smem", p, 0, 232448);
		const json_value *pr = jobj(j, o, "params", p);
		for (size_t m = 0; pr && m < pr->n; m++) {
			const json_value *v = pr->members[m].value;
			if (v->type != JSON_NUMBER)
				continue; /* identifiers (TREE) are in the uri already */
			if (k->n_params == RT_OP_MAX_PARAMS) {
				j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.params: more than %d numbers",
				                j->file, p, RT_OP_MAX_PARAMS);
				break;
			}
			rt_kparam *q = &k->params[k->n_params++];
			snprintf(q->name, sizeof(q->name), "%s", pr->members[m].key);
			q->f = v->number;
			/* (a float out of int64's range is no integer: 0 never equals it) */
			q->i = v->is_int ? v->integer : fabs(v->number) < 9e18 ? (int64_t)v->number : 0;
		}
		if (j->rc)
			break;
		/* the constants are the ones the kernel was rendered with: its uri
		 * (gen/render.c gen_key) spells each, and the device runs the uri's
		 * kernel, so params that disagree would bound another kernel */
		for (int m = 0; m < k->n_params && !j->rc; m++) {
			const rt_kparam *q = &k->params[m];
			/* an int constant as its digits, a float one as its bits (a float
			 * that happens to be whole, TEMP 1, reads as an int here) */
			char tok[2][96];
			const float f = (float)q->f;
			uint32_t u;
			memcpy(&u, &f, sizeof(u));
			for (int w = 0; w < 2; w++) {
				size_t t = 0;
				tok[w][t++] = '_';
				for (const char *c = q->name; *c && t + 1 < 64; c++)
					tok[w][t++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
				if (w == 0 && (double)q->i == q->f && q->i != INT64_MIN)
					snprintf(tok[w] + t, sizeof(tok[w]) - t, "%s%lld", q->i < 0 ? "m" : "",
					         (long long)(q->i < 0 ? -q->i : q->i));
				else
					snprintf(tok[w] + t, sizeof(tok[w]) - t, "%08x", u);
			}
			bool found = false;
			for (int w = 0; w < 2 && !found; w++)
				for (const char *at = k->uri; !found && (at = strstr(at, tok[w]));) {
					at += strlen(tok[w]);
					found = !*at || *at == '_';
				}
			if (!found)
				j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.params.%s: %.17g, but the kernel's uri "
				                "\"%s\" has no \"%s\": expected the constant it was rendered "
				                "with", j->file, p, q->name, q->f, k->uri, tok[0]);
		}
		if (j->rc)
			break;
		/* and the launch provides what the kernel was rendered to use */
		{
			const rt_op pk = {.kinfo = k};
			const long long want = rt_op_param_i(&pk, "DYN_SMEM", 0);
			if (k->dyn_smem != want) {
				j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.dyn_smem: %d, expected %lld (the "
				                "kernel's DYN_SMEM constant, 0 without one)", j->file, p,
				                k->dyn_smem, want);
				break;
			}
		}
		/* tree attention with a baked mask: rebuild the rows the kernel
		 * has as a constant table (the native backend reads them) */
		rt_op probe = {.kinfo = k};
		const json_value *mk = json_get(o, "mask");
		int block_mask = 0; /* 1 causal, 2 bidirectional: a block drafter's table */
		if (mk) {
			const char *ms = jstr(j, o, "mask", p);
			if (j->rc)
				break;
			block_mask = !strcmp(ms, "block_causal") ? 1 : !strcmp(ms, "block_bidirectional") ? 2 : 0;
			if (!block_mask || !strstr(k->tmpl, "tree_attention") ||
			    rt_op_param_i(&probe, "MASKED", 0) != 1 ||
			    rt_op_param_i(&probe, "T", 0) != rt_op_param_i(&probe, "N_BLK", 0))
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.mask: \"%s\", expected "
				                       "\"block_causal\" or \"block_bidirectional\" on a masked "
				                       "tree attention with T = N_BLK", j->file, p, ms);
		}
		if (block_mask) {
			const int T = (int)rt_op_param_i(&probe, "T", 0), mw = (T + 63) / 64;
			if (T < 1 || T > 64)
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s: block attention T %d, "
				                       "expected 1..64 block rows", j->file, p, T);
			k->mask = calloc((size_t)T * mw, sizeof(*k->mask));
			if (!k->mask)
				return j->rc = sw_errf(j->err, SW_ENOMEM, "out of memory");
			for (int r = 0; r < T; r++)
				for (int c = 0; c < T; c++)
					if (block_mask == 2 || c <= r)
						k->mask[(size_t)r * mw + c / 64] |= 1ull << (c % 64);
		} else if (strstr(k->tmpl, "tree_attention") && rt_op_param_i(&probe, "MASKED", 0) == 1) {
			const int T = (int)rt_op_param_i(&probe, "T", 0),
			          nb = (int)rt_op_param_i(&probe, "N_BLK", 0), mw = (nb + 63) / 64;
			if (T < 1 || nb < T || nb > e->n_nodes)
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s: tree attention T %d, N_BLK "
				                       "%d do not fit the %d-node tree", j->file, p, T, nb,
				                       e->n_nodes);
			k->mask = calloc((size_t)T * mw, sizeof(*k->mask));
			if (!k->mask)
				return j->rc = sw_errf(j->err, SW_ENOMEM, "out of memory");
			for (int r = 0; r < T; r++)
				for (int c = 0; c < nb; c++)
					if (tree_visible(e, nb - T + r, c))
						k->mask[(size_t)r * mw + c / 64] |= 1ull << (c % 64);
		}
	}
	return j->rc;
}

static int parse_op(rt_manifest *e, jctx *j, const json_value *o, const char *p, rt_engine_pop *x)
{
	memset(x, 0, sizeof(*x));
	x->kernel = -1;
	snprintf(x->name, sizeof(x->name), "%s", jstr(j, o, "name", p));
	snprintf(x->op, sizeof(x->op), "%s", jstr(j, o, "op", p));
	const char *ex = jstr(j, o, "exec", p);
	if (j->rc)
		return j->rc;
	if (!strcmp(ex, "kernel"))
		x->exec = RT_EXEC_KERNEL;
	else if (!strcmp(ex, "cublaslt"))
		x->exec = RT_EXEC_CUBLASLT;
	else if (!strcmp(ex, "memset"))
		x->exec = RT_EXEC_MEMSET;
	else
		return j->rc = sw_errf(j->err, SW_ENOTSUP, "%s: %s (%s): exec \"%s\": this runtime runs "
		                       "\"kernel\", \"cublaslt\" and \"memset\" ops (rebuild the engine with "
		                       "this specwright)", j->file, p, x->name, ex);
	x->repeat = (int)jint(j, o, "repeat", p, 1, 1024);
	if (json_get(o, "layer0"))
		x->layer0 = (int)jint(j, o, "layer0", p, 0, 1023);
	const json_value *ly = json_get(o, "layers");
	if (ly && ly->type == JSON_STRING)
		x->layers = !strcmp(ly->str, "draft") ? 2 : 1;
	if (x->exec == RT_EXEC_KERNEL) {
		const char *uri = jstr(j, o, "uri", p);
		snprintf(x->entry, sizeof(x->entry), "%s", jstr(j, o, "entry", p));
		if (!j->rc && (x->kernel = find_kernel(e, uri)) < 0)
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.uri: kernel \"%s\" is not in "
			                       "$.kernels", j->file, p, uri);
		int32_t g[3] = {0}, b[3] = {0};
		jints(j, o, "grid", p, 3, 1, INT32_MAX, g);
		jints(j, o, "block", p, 3, 1, 1024, b);
		for (int i = 0; i < 3; i++) {
			x->grid[i] = (unsigned)g[i];
			x->block[i] = (unsigned)b[i];
		}
	} else if (x->exec == RT_EXEC_CUBLASLT) {
		const json_value *gm = jobj(j, o, "gemm", p);
		char pg[160];
		snprintf(pg, sizeof(pg), "%s.gemm", p);
		if (gm) {
			x->m = jint(j, gm, "m", pg, 1, INT32_MAX);
			x->n = jint(j, gm, "n", pg, 1, INT32_MAX);
			x->k = jint(j, gm, "k", pg, 1, INT32_MAX);
		}
		const char *gu = jstr(j, o, "uri", p); /* rt_manifest_check_plan: the shape's uri */
		if (!j->rc && strlen(gu) >= sizeof(x->gemm_uri))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.uri: %zu bytes, expected a GEMM "
			                       "uri (gemm_DTYPE_f32acc_mM_nN_kK)", j->file, p, strlen(gu));
		snprintf(x->gemm_uri, sizeof(x->gemm_uri), "%s", gu);
	}
	x->est_bytes = jnum(j, o, "bytes", p);
	x->est_flops = jnum(j, o, "flops", p);
	if (!j->rc && x->exec == RT_EXEC_MEMSET) {
		if (!(x->est_bytes >= 0 && x->est_bytes < 9e18) || x->est_bytes != floor(x->est_bytes))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.bytes (op %s): memset of %.17g "
			                       "bytes, expected a whole number >= 0", j->file, p, x->name,
			                       x->est_bytes);
		x->bytes = (int64_t)x->est_bytes;
	}
	const json_value *as = jarr(j, o, "args", p, 0, RT_OP_MAX_ARGS);
	for (int i = 0; as && i < (int)as->n && !j->rc; i++) {
		char pa[128];
		snprintf(pa, sizeof(pa), "%s.args[%d]", p, i);
		const json_value *a = as->items[i];
		if (json_get(a, "scalar")) {
			const char *sc = jstr(j, a, "scalar", pa);
			if (!j->rc && strcmp(sc, "seed"))
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.scalar: expected \"seed\", "
				                       "found \"%s\"", j->file, pa, sc);
			x->arg_buf[i] = -1;
		} else {
			const char *bn = jstr(j, a, "buf", pa);
			x->arg_off[i] = jint(j, a, "offset", pa, 0, INT64_MAX);
			if (!j->rc && (x->arg_buf[i] = rt_manifest_buf_find(e, bn)) < 0)
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.buf: no buffer \"%s\"", j->file,
				                       pa, bn);
			if (!j->rc && x->arg_off[i] > e->bufs[x->arg_buf[i]].bytes)
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.offset: %lld is past buffer %s "
				                       "(%lld bytes)", j->file, pa, (long long)x->arg_off[i],
				                       bn, (long long)e->bufs[x->arg_buf[i]].bytes);
		}
	}
	x->n_args = as ? (int)as->n : 0;
	return j->rc;
}

static int parse_phases(rt_manifest *e, jctx *j, const json_value *root)
{
	const json_value *ph = jarr(j, root, "phases", "$", 1, RT_ENGINE_MAX_PHASES);
	if (!ph)
		return j->rc;
	int total = 0;
	for (size_t i = 0; i < ph->n; i++) {
		const json_value *ops = json_get(ph->items[i], "ops");
		total += ops && ops->type == JSON_ARRAY ? (int)ops->n : 0;
	}
	e->ops = calloc(total ? (size_t)total : 1, sizeof(*e->ops));
	if (!e->ops)
		return j->rc = sw_errf(j->err, SW_ENOMEM, "out of memory");
	e->n_phases = (int)ph->n;
	e->ph_prefill = e->ph_iter_first = -1;
	for (int i = 0; i < e->n_phases && !j->rc; i++) {
		char p[64];
		snprintf(p, sizeof(p), "$.phases[%d]", i);
		rt_engine_phase *P = &e->phases[i];
		snprintf(P->name, sizeof(P->name), "%s", jstr(j, ph->items[i], "name", p));
		P->rows = (int)jint(j, ph->items[i], "rows", p, 0, 1 << 20);
		P->gate_buf = -1;
		const json_value *g = json_get(ph->items[i], "if");
		if (g && !j->rc) {
			char pg[96];
			snprintf(pg, sizeof(pg), "%s.if", p);
			const char *bn = jstr(j, g, "buf", pg);
			P->gate_word = (int)jint(j, g, "word", pg, 0, 1 << 20);
			if (!j->rc && ((P->gate_buf = rt_manifest_buf_find(e, bn)) < 0 ||
			               4 * (int64_t)(P->gate_word + 1) > e->bufs[P->gate_buf].bytes))
				j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s: word %d of buffer \"%s\" does not "
				                "exist", j->file, pg, P->gate_word, bn);
		}
		const json_value *ops = jarr(j, ph->items[i], "ops", p, 0, 100000);
		P->first = e->n_ops;
		for (int k = 0; ops && k < (int)ops->n && !j->rc; k++) {
			char po[96];
			snprintf(po, sizeof(po), "%s.ops[%d]", p, k);
			parse_op(e, j, ops->items[k], po, &e->ops[e->n_ops++]);
		}
		P->n = e->n_ops - P->first;
		if (!strcmp(P->name, "prefill"))
			e->ph_prefill = i;
		else if (e->ph_iter_first < 0)
			e->ph_iter_first = i;
	}
	if (!j->rc && (e->ph_prefill != 0 || e->ph_iter_first != 1))
		j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.phases: expected \"prefill\" first and the "
		                "iteration's phases after it", j->file);
	return j->rc;
}

/* --- bounds: every buffer where the plan put it, every op inside its buffers */

int rt_manifest_wtype(const char *dt)
{
	static const int types[] = {SW_WT_Q8_0, SW_WT_Q4_0, SW_WT_Q4_1, SW_WT_Q5_0, SW_WT_Q4_K,
	                            SW_WT_Q6_K};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(dt, sw_wformat_gemm_name(types[i])))
			return types[i];
	return -1;
}

/* Bytes of one element of dtype dt, 0 when this runtime has no such dtype
 * (1 for the GGUF block types, whose bytes go by block) */
static int64_t dtype_size(const char *dt)
{
	return !strcmp(dt, "f32") || !strcmp(dt, "i32") ? 4 : !strcmp(dt, "u64") ? 8
	       : !strcmp(dt, "bf16") || !strcmp(dt, "fp16") ? 2 : rt_manifest_wtype(dt) >= 0 ? 1 : 0;
}

static int cmp_buf_off(const void *a, const void *b, void *ctx)
{
	const rt_engine_buf *bs = ctx;
	const int64_t x = bs[*(const int *)a].offset, y = bs[*(const int *)b].offset;
	return x < y ? -1 : x > y;
}

/* Each buffer's bytes are its shape times its dtype (gen/plan.c add_buf),
 * and no two buffers share a byte: the planner lays them one after another
 * in the arena (a tied lm_head is the tok_embd buffer itself, not a second
 * one over it). */
static int check_buffers(rt_manifest *e, jctx *j)
{
	for (int i = 0; i < e->n_bufs && !j->rc; i++) {
		const rt_engine_buf *b = &e->bufs[i];
		int64_t n = dtype_size(b->dtype);
		if (!n)
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.buffers[%d].dtype (%s): \"%s\", "
			                       "expected f32, i32, u64, bf16, fp16, q8_0, q4_0, q4_1, q5_0, q4_k or q6_k",
			                       j->file, i, b->name, b->dtype);
		const int wt = rt_manifest_wtype(b->dtype);
		const bool q8 = wt >= 0; /* a GGUF block type */
		const int64_t blk = q8 ? sw_wformat_block(wt) : 1, bb = q8 ? sw_wformat_block_bytes(wt) : 1;
		if (q8 && (strcmp(b->kind, "weight") || b->rank < 1 || b->shape[b->rank - 1] % blk))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.buffers[%d] (%s): %s %s with rows "
			                       "of %lld, expected a weight whose rows are whole %lld-element "
			                       "blocks", j->file, i, b->name, b->dtype, b->kind,
			                       (long long)(b->rank ? b->shape[b->rank - 1] : 0),
			                       (long long)blk);
		for (int d = 0; d < b->rank; d++)
			n = b->shape[d] && n > INT64_MAX / b->shape[d] ? -1 : n < 0 ? -1 : n * b->shape[d];
		if (q8 && n > 0) /* q8_0 34 bytes a block of 32, q4_1 20, ... */
			n = n / blk * bb;
		char per[64];
		snprintf(per, sizeof(per), "%lld bytes per %lld elements of", (long long)bb,
		         (long long)blk);
		if (n != b->bytes)
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.buffers[%d].bytes (%s): %lld, "
			                       "expected %s%lld (its shape times %s %s)", j->file, i,
			                       b->name, (long long)b->bytes, n < 0 ? "more than " : "",
			                       (long long)(n < 0 ? INT64_MAX : n),
			                       q8 ? per : dtype_size(b->dtype) == 2
			                       ? "2-byte" : dtype_size(b->dtype) == 4 ? "4-byte" : "8-byte",
			                       b->dtype);
	}
	int *ix = malloc(sizeof(*ix) * (size_t)e->n_bufs);
	if (!ix)
		return j->rc = sw_errf(j->err, SW_ENOMEM, "out of memory");
	for (int i = 0; i < e->n_bufs; i++)
		ix[i] = i;
	qsort_r(ix, (size_t)e->n_bufs, sizeof(*ix), cmp_buf_off, e->bufs);
	int last = -1; /* the buffer reaching furthest so far */
	for (int i = 0; i < e->n_bufs && !j->rc; i++) {
		const rt_engine_buf *b = &e->bufs[ix[i]];
		if (!b->bytes)
			continue;
		if (last >= 0 && e->bufs[last].offset + e->bufs[last].bytes > b->offset)
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.buffers[%d] (%s): bytes [%lld, %lld) "
			                "overlap $.buffers[%d] (%s) at [%lld, %lld): expected disjoint "
			                "buffers, as the planner lays them out", j->file, ix[i], b->name,
			                (long long)b->offset, (long long)(b->offset + b->bytes), last,
			                e->bufs[last].name, (long long)e->bufs[last].offset,
			                (long long)(e->bufs[last].offset + e->bufs[last].bytes));
		if (last < 0 || b->offset + b->bytes > e->bufs[last].offset + e->bufs[last].bytes)
			last = ix[i];
	}
	free(ix);
	int tt = rt_manifest_buf_find(e, "tree_table");
	if (!j->rc && tt >= 0 && e->bufs[tt].bytes < 5 * 4 * (int64_t)e->n_nodes)
		j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.buffers[%d] (tree_table): %lld bytes, "
		                "expected at least %d (5 x %d nodes, i32)", j->file, tt,
		                (long long)e->bufs[tt].bytes, 20 * e->n_nodes, e->n_nodes);
	return j->rc;
}

static void op_path(const rt_manifest *e, int i, char *p, size_t n)
{
	for (int ph = 0; ph < e->n_phases; ph++)
		if (i >= e->phases[ph].first && i < e->phases[ph].first + e->phases[ph].n) {
			snprintf(p, n, "$.phases[%d].ops[%d]", ph, i - e->phases[ph].first);
			return;
		}
	snprintf(p, n, "$.ops[%d]", i);
}

/* Whether arg a of op x takes a per-layer slice (engine.c resolve_one). */
static bool arg_layered(const rt_manifest *e, const rt_engine_pop *x, int a)
{
	const rt_engine_buf *b = &e->bufs[x->arg_buf[a]];
	const char *dot = strchr(b->name, '.');
	return x->layers && (!strcmp(b->kind, "kv") ||
	                     (!strcmp(b->kind, "weight") && dot && rt_manifest_field_layered(dot + 1)));
}

/* The slice of layer repetition l (engine.c resolve_one's layer map), or -1. */
static int arg_slice(const rt_manifest *e, const rt_engine_pop *x, int a, int l)
{
	const rt_engine_buf *b = &e->bufs[x->arg_buf[a]];
	l += x->layer0;
	if (x->layers == 2 && e->draft_kind == RT_ENGINE_DRAFT_LAYERSKIP &&
	    !strcmp(b->kind, "weight"))
		return l < e->n_skip ? e->skip_layers[l] : -1;
	return l;
}

/* The GEMM's operands as the planner declares them: A and W in the engine
 * dtype (q8_0 and q8_0_a8: A fp16, W q8_0; gguf_a8: W any GGUF block type), C f32; W's rows are k long and it has at
 * least n of them. */
static int check_gemm_shapes(const rt_manifest *e, jctx *j, const rt_engine_pop *x,
                             const char *p)
{
	static const char *const role[3] = {"C", "A", "W"};
	const char *dt = e->dtype == RT_BF16 ? "bf16" : "fp16";
	for (int a = 0; a < 3; a++) {
		const rt_engine_buf *b = &e->bufs[x->arg_buf[a]];
		const char *want = a == 2 && rt_dtype_q8(e->dtype) ? "q8_0" : a ? dt : "f32";
		if (a == 2 && e->dtype == RT_GGUF_A8) {
			if (rt_manifest_wtype(b->dtype) < 0)
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.args[2] (op %s, gemm W): "
				                       "buffer %s is %s, expected q8_0, q4_0, q4_1, q5_0, q4_k or q6_k (a "
				                       "gguf_a8 engine)", j->file, p, x->name, b->name, b->dtype);
			continue;
		}
		if (strcmp(b->dtype, want))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.args[%d] (op %s, gemm %s): buffer "
			                       "%s is %s, expected %s", j->file, p, a, x->name, role[a],
			                       b->name, b->dtype, want);
	}
	const rt_engine_buf *w = &e->bufs[x->arg_buf[2]];
	if (!strcmp(w->kind, "weight") &&
	    (w->rank < 2 || w->shape[w->rank - 1] != x->k || w->shape[w->rank - 2] < x->n))
		return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.gemm (op %s): n %lld, k %lld; weight "
		                       "%s has rows of %lld and %lld of them: expected k = its row length "
		                       "and n <= its rows", j->file, p, x->name, (long long)x->n,
		                       (long long)x->k, w->name,
		                       (long long)(w->rank ? w->shape[w->rank - 1] : 0),
		                       (long long)(w->rank > 1 ? w->shape[w->rank - 2] : 0));
	return 0;
}

/* Every op's every argument: [offset, offset + extent) inside its buffer
 * (inside its layer's slice, for a per-layer op's layered argument) for
 * every layer the op runs; written arguments not overlapping the others
 * except where the kernel works in place. */
static int check_op_bounds(rt_manifest *e, jctx *j)
{
	for (int i = 0; i < e->n_ops && !j->rc; i++) {
		const rt_engine_pop *x = &e->ops[i];
		char p[96], why[512];
		rt_extent ex;
		op_path(e, i, p, sizeof(p));
		/* resolve_ops runs a repeated op once per layer: only per-layer ops repeat */
		if (x->repeat > 1 && !x->layers)
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.repeat (op %s): repeat %d without "
			                       "\"layers\", expected 1 (only per-layer ops repeat)", j->file,
			                       p, x->name, x->repeat);
		if (rt_extent_op(e, x, &ex, why, sizeof(why)))
			return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s (op %s, %s): %s", j->file, p,
			                       x->name, x->op, why);
		if (x->exec == RT_EXEC_CUBLASLT && check_gemm_shapes(e, j, x, p))
			return j->rc;
		int64_t lo[RT_OP_MAX_ARGS], hi[RT_OP_MAX_ARGS]; /* arena bytes, repetition 0 */
		for (int a = 0; a < x->n_args; a++) {
			lo[a] = hi[a] = -1;
			if (x->arg_buf[a] < 0)
				continue;
			const rt_engine_buf *b = &e->bufs[x->arg_buf[a]];
			const bool lay = arg_layered(e, x, a);
			const int64_t nl = lay ? b->shape[0] : 1, slice = nl > 0 ? b->bytes / nl : 0;
			const int reps = lay ? x->repeat : 1;
			for (int l = 0; l < reps; l++) {
				const int id = lay ? arg_slice(e, x, a, l) : 0;
				if (id < 0)
					return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.repeat (op %s): %d "
					                       "layers, the layer-skip draft runs %d "
					                       "($.spec.draft.layers)", j->file, p, x->name,
					                       x->repeat, e->n_skip);
				if (id >= nl)
					return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.args[%d] (op %s, buffer "
					                       "%s): layer %d takes slice %d, expected one of the "
					                       "buffer's %lld", j->file, p, a, x->name, b->name, l,
					                       id, (long long)nl);
				/* one slice, or (kv_commit) every slice from this one on */
				const int64_t base = (int64_t)id * slice;
				const int64_t lim = lay && !(ex.whole & (1u << a)) ? slice : b->bytes - base;
				if (ex.bytes[a] > lim - x->arg_off[a])
					return j->rc = sw_errf(
					           j->err, SW_EINVAL, "%s: %s.args[%d] (op %s, %s, buffer %s): "
					           "offset %lld + extent %lld (%s) past the end of %s of %lld "
					           "bytes: expected offset + extent <= %lld", j->file, p, a,
					           x->name, x->op, b->name, (long long)x->arg_off[a],
					           (long long)ex.bytes[a], ex.what[a],
					           lay && !(ex.whole & (1u << a)) ? "the layer slice" : "the buffer",
					           (long long)lim, (long long)lim);
				if (l == 0) {
					lo[a] = b->offset + base + x->arg_off[a];
					hi[a] = lo[a] + ex.bytes[a];
				}
			}
		}
		for (int a = 0; a < x->n_args; a++)
			for (int c = 0; c < x->n_args; c++) {
				if (a == c || !(ex.writes & (1u << a)) || lo[a] < 0 || lo[c] < 0 ||
				    lo[a] >= hi[c] || lo[c] >= hi[a])
					continue;
				if ((c == a + 1 && (ex.alias_ok & (1u << c))) ||
				    (a == c + 1 && (ex.alias_ok & (1u << a))) ||
				    ((ex.alias_any >> a & 1u) && (ex.alias_any >> c & 1u)))
					continue;
				return j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s.args[%d] and args[%d] (op %s, "
				                       "%s): written bytes [%lld, %lld) overlap [%lld, %lld) of "
				                       "the arena: expected separate ranges (the kernel does "
				                       "not work in place there)", j->file, p, a, c, x->name,
				                       x->op, (long long)lo[a], (long long)hi[a],
				                       (long long)lo[c], (long long)hi[c]);
			}
	}
	return j->rc;
}

rt_manifest *rt_manifest_load(const char *dir, sw_err *err)
{
	char path[1100];
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *text = sw_read_capped(path, SW_CAP_ENGINE_JSON, "an engine.json", &len, err);
	if (!text) {
		const int e = errno;
		if (err && err->code == SW_EIO)
			sw_errf(err, SW_EIO, "%s: cannot read: %s (is %s an engine directory from "
			        "`specwright build`?)", path, strerror(e), dir);
		return NULL;
	}
	rt_manifest *e = rt_manifest_parse(dir, text, len, err);
	free(text);
	return e;
}

rt_manifest *rt_manifest_parse(const char *dir, const char *text, size_t len, sw_err *err)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	json_value *root = json_parse(text, len, path, err);
	if (!root)
		return NULL;
	rt_manifest *e = calloc(1, sizeof(*e));
	if (!e) {
		json_free(root);
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(e->dir, sizeof(e->dir), "%s", dir);
	jctx j = {.file = path, .err = err};
	const char *fmt = jstr(&j, root, "format", "$");
	if (!j.rc && strcmp(fmt, "specwright-engine/1"))
		j.rc = sw_errf(err, SW_EINVAL, "%s: $.format: expected \"specwright-engine/1\", found "
		               "\"%s\"", path, fmt);
	const json_value *spec = jobj(&j, root, "spec", "$");
	if (spec)
		parse_spec(e, &j, spec);
	const json_value *sh = jobj(&j, root, "shapes", "$");
	if (sh)
		parse_shapes(e, &j, sh);
	if (!j.rc && e->draft_kind != RT_ENGINE_DRAFT_NGRAM && !e->dcfg.n_layers)
		j.rc = sw_errf(err, SW_EINVAL, "%s: $.shapes.draft: null, but the draft is a model",
		               path);
	if (!j.rc && e->draft_kind == RT_ENGINE_DRAFT_LAYERSKIP && e->n_skip != e->dcfg.n_layers)
		j.rc = sw_errf(err, SW_EINVAL, "%s: $.spec.draft.layers: %d layers, $.shapes.draft has "
		               "%d", path, e->n_skip, e->dcfg.n_layers);
	if (!j.rc && e->draft_kind == RT_ENGINE_DRAFT_MODEL && e->dcfg.vocab > e->tcfg.vocab)
		j.rc = sw_errf(err, SW_EINVAL, "%s: $.shapes.draft.vocab: expected at most the target's "
		               "%d (the target's vocabulary or a prefix of it), found %d", path,
		               e->tcfg.vocab, e->dcfg.vocab);
	for (int i = 0; !j.rc && i < e->n_skip; i++)
		if (e->skip_layers[i] >= e->tcfg.n_layers)
			j.rc = sw_errf(err, SW_EINVAL, "%s: $.spec.draft.layers[%d]: %d, the target has %d "
			               "layers", path, i, e->skip_layers[i], e->tcfg.n_layers);
	if (!j.rc)
		parse_toolkit(e, &j, root);
	if (!j.rc)
		j.rc = rt_manifest_parse_draft_files(e, root, path, err);
	if (!j.rc)
		parse_buffers(e, &j, root);
	if (!j.rc)
		parse_kernels(e, &j, root);
	if (!j.rc)
		check_buffers(e, &j);
	if (!j.rc)
		parse_phases(e, &j, root);
	int si = j.rc ? -1 : rt_manifest_buf_find(e, "state");
	if (!j.rc && (si < 0 || e->bufs[si].bytes < 4 * (RT_ST_WORDS + 8)))
		j.rc = sw_errf(err, SW_EINVAL, "%s: $.buffers: no \"state\" buffer of at least %d words "
		               "(an engine from an older specwright: rebuild it)", path, RT_ST_WORDS + 8);
	if (!j.rc)
		e->ring = (int)(e->bufs[si].bytes / 4 - RT_ST_WORDS);
	if (!j.rc)
		check_op_bounds(e, &j);
	if (!j.rc)
		j.rc = rt_manifest_check_plan(e, path, err);
	json_free(root);
	if (j.rc) {
		rt_manifest_free(e);
		return NULL;
	}
	return e;
}

void rt_manifest_free(rt_manifest *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->n_kernels; i++)
		free(e->kernels[i].mask);
	free(e->kernels);
	for (int i = 0; e->bufs && i < e->n_bufs; i++)
		free(e->bufs[i].ltype);
	free(e->bufs);
	free(e->ops);
	free(e);
}

int rt_manifest_phase_find(const rt_manifest *e, const char *name)
{
	for (int i = 0; i < e->n_phases; i++)
		if (!strcmp(e->phases[i].name, name))
			return i;
	return -1;
}

bool rt_manifest_field_layered(const char *f)
{
	return strcmp(f, "tok_embd") && strcmp(f, "out_norm") && strcmp(f, "lm_head") &&
	       strcmp(f, "inv_freq") && strcmp(f, "mask_embd") && strcmp(f, "fc") &&
	       strcmp(f, "fc_norm") && strcmp(f, "d2t") && strcmp(f, "t2d");
}
