/* Engine executor (engine.h). engine.json is the only interface to the
 * generator: this file never calls gen/, so an engine directory plus the
 * weights is all a deployment needs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "kernels/engine_state.h"
#include "core/fileio.h"
#include "core/timing.h"
#include "formats/gguf.h"
#include "device/host_ops.h"
#include "core/json.h"

/* --- engine.json ------------------------------------------------------- */

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

static void read_cfg(jctx *j, const json_value *c, const char *path, rt_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
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

static int parse_spec(rt_engine *e, jctx *j, const json_value *spec)
{
	const char *P = "$.spec";
	snprintf(e->name, sizeof(e->name), "%s", jstr(j, spec, "name", P));
	const json_value *t = jobj(j, spec, "target", P);
	if (t && json_get(t, "path"))
		snprintf(e->target_path, sizeof(e->target_path), "%s", jstr(j, t, "path", "$.spec.target"));
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
		} else {
			e->draft_kind = RT_ENGINE_DRAFT_MODEL;
			if (json_get(d, "path"))
				snprintf(e->draft_path, sizeof(e->draft_path), "%s",
				         jstr(j, d, "path", "$.spec.draft"));
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
	}
	e->max_ctx = (int)jint(j, spec, "max_context", P, 2, 1 << 24);
	e->chunk = (int)jint(j, spec, "prefill_chunk", P, 1, 1 << 16);
	const char *dt = jstr(j, spec, "dtype", P);
	if (!j->rc) {
		if (!strcmp(dt, "bf16"))
			e->dtype = RT_BF16;
		else if (!strcmp(dt, "fp16"))
			e->dtype = RT_FP16;
		else
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: $.spec.dtype: expected \"bf16\" or \"fp16\", "
			                "found \"%s\"", j->file, dt);
	}
	return j->rc;
}

static int parse_shapes(rt_engine *e, jctx *j, const json_value *sh)
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

static int parse_buffers(rt_engine *e, jctx *j, const json_value *root)
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
		if (!j->rc && x->offset + x->bytes > e->arena_bytes)
			j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s (%s): offset %lld + %lld bytes exceeds the "
			                "arena (%lld bytes)", j->file, p, x->name, (long long)x->offset,
			                (long long)x->bytes, (long long)e->arena_bytes);
	}
	return j->rc;
}

static int find_buf(const rt_engine *e, const char *name)
{
	for (int i = 0; i < e->n_bufs; i++)
		if (!strcmp(e->bufs[i].name, name))
			return i;
	return -1;
}

static int find_kernel(const rt_engine *e, const char *uri)
{
	for (int i = 0; i < e->n_kernels; i++)
		if (!strcmp(e->kernels[i].uri, uri))
			return i;
	return -1;
}

/* Whether node j is node i or one of its ancestors. */
static bool tree_visible(const rt_engine *e, int i, int j)
{
	for (int u = i; u >= 0; u = e->tree_table[u])
		if (u == j)
			return true;
	return false;
}

static int parse_kernels(rt_engine *e, jctx *j, const json_value *root)
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
			q->i = v->is_int ? v->integer : (int64_t)v->number;
		}
		if (j->rc)
			break;
		/* tree attention with a baked mask: rebuild the rows the kernel
		 * has as a constant table (the native backend reads them) */
		rt_op probe = {.kinfo = k};
		if (strstr(k->tmpl, "tree_attention") && rt_op_param_i(&probe, "MASKED", 0) == 1) {
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

/* A planned op as engine.json states it, before addresses exist. */
typedef struct eop {
	char name[48], op[32], entry[208];
	int exec;                 /* 0 kernel, 1 cublaslt, 2 memset */
	int kernel;               /* index into e->kernels, or -1 */
	unsigned grid[3], block[3];
	int repeat;
	int layers;               /* 0 none, 1 target, 2 draft */
	int64_t m, n, k;
	int64_t bytes;            /* memset: bytes zeroed (the op's "bytes") */
	double est_bytes, est_flops; /* the planner's DRAM bytes / flops per launch */
	int n_args;
	int arg_buf[RT_OP_MAX_ARGS];      /* -1: scalar */
	int64_t arg_off[RT_OP_MAX_ARGS];
	char arg_scalar[RT_OP_MAX_ARGS][16];
} eop;

typedef struct eplan {
	eop *ops;
	int n_ops;
} eplan;

static int parse_op(rt_engine *e, jctx *j, const json_value *o, const char *p, eop *x)
{
	memset(x, 0, sizeof(*x));
	x->kernel = -1;
	snprintf(x->name, sizeof(x->name), "%s", jstr(j, o, "name", p));
	snprintf(x->op, sizeof(x->op), "%s", jstr(j, o, "op", p));
	const char *ex = jstr(j, o, "exec", p);
	if (j->rc)
		return j->rc;
	if (!strcmp(ex, "kernel"))
		x->exec = 0;
	else if (!strcmp(ex, "cublaslt"))
		x->exec = 1;
	else if (!strcmp(ex, "memset"))
		x->exec = 2;
	else
		return j->rc = sw_errf(j->err, SW_ENOTSUP, "%s: %s (%s): exec \"%s\": this runtime runs "
		                       "\"kernel\", \"cublaslt\" and \"memset\" ops (rebuild the engine with "
		                       "this specwright)", j->file, p, x->name, ex);
	x->repeat = (int)jint(j, o, "repeat", p, 1, 1024);
	const json_value *ly = json_get(o, "layers");
	if (ly && ly->type == JSON_STRING)
		x->layers = !strcmp(ly->str, "draft") ? 2 : 1;
	if (x->exec == 0) {
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
	} else if (x->exec == 1) {
		const json_value *gm = jobj(j, o, "gemm", p);
		char pg[160];
		snprintf(pg, sizeof(pg), "%s.gemm", p);
		if (gm) {
			x->m = jint(j, gm, "m", pg, 1, INT32_MAX);
			x->n = jint(j, gm, "n", pg, 1, INT32_MAX);
			x->k = jint(j, gm, "k", pg, 1, INT32_MAX);
		}
	}
	x->est_bytes = jnum(j, o, "bytes", p);
	x->est_flops = jnum(j, o, "flops", p);
	if (x->exec == 2)
		x->bytes = (int64_t)x->est_bytes;
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
			snprintf(x->arg_scalar[i], sizeof(x->arg_scalar[i]), "%s", sc);
		} else {
			const char *bn = jstr(j, a, "buf", pa);
			x->arg_off[i] = jint(j, a, "offset", pa, 0, INT64_MAX);
			if (!j->rc && (x->arg_buf[i] = find_buf(e, bn)) < 0)
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

static int parse_phases(rt_engine *e, jctx *j, const json_value *root, eplan *pl)
{
	const json_value *ph = jarr(j, root, "phases", "$", 1, RT_ENGINE_MAX_PHASES);
	if (!ph)
		return j->rc;
	int total = 0;
	for (size_t i = 0; i < ph->n; i++) {
		const json_value *ops = json_get(ph->items[i], "ops");
		total += ops && ops->type == JSON_ARRAY ? (int)ops->n : 0;
	}
	pl->ops = calloc(total ? (size_t)total : 1, sizeof(*pl->ops));
	if (!pl->ops)
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
			if (!j->rc && ((P->gate_buf = find_buf(e, bn)) < 0 ||
			               4 * (int64_t)(P->gate_word + 1) > e->bufs[P->gate_buf].bytes))
				j->rc = sw_errf(j->err, SW_EINVAL, "%s: %s: word %d of buffer \"%s\" does not "
				                "exist", j->file, pg, P->gate_word, bn);
		}
		const json_value *ops = jarr(j, ph->items[i], "ops", p, 0, 100000);
		P->first = pl->n_ops;
		for (int k = 0; ops && k < (int)ops->n && !j->rc; k++) {
			char po[96];
			snprintf(po, sizeof(po), "%s.ops[%d]", p, k);
			parse_op(e, j, ops->items[k], po, &pl->ops[pl->n_ops++]);
		}
		P->n = pl->n_ops - P->first;
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



struct rt_engine_priv {
	eplan plan;
};

rt_engine *rt_engine_load(const char *dir, sw_err *err)
{
	char path[1100];
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *text = sw_read_file(path, &len);
	if (!text) {
		sw_errf(err, SW_EIO, "%s: cannot read (is %s an engine directory from `specwright "
		        "build`?)", path, dir);
		return NULL;
	}
	rt_engine *e = rt_engine_parse(dir, text, len, err);
	free(text);
	return e;
}

rt_engine *rt_engine_parse(const char *dir, const char *text, size_t len, sw_err *err)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	json_value *root = json_parse(text, len, path, err);
	if (!root)
		return NULL;
	rt_engine *e = calloc(1, sizeof(*e) + sizeof(struct rt_engine_priv));
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
	for (int i = 0; !j.rc && i < e->n_skip; i++)
		if (e->skip_layers[i] >= e->tcfg.n_layers)
			j.rc = sw_errf(err, SW_EINVAL, "%s: $.spec.draft.layers[%d]: %d, the target has %d "
			               "layers", path, i, e->skip_layers[i], e->tcfg.n_layers);
	if (!j.rc)
		parse_buffers(e, &j, root);
	if (!j.rc)
		parse_kernels(e, &j, root);
	struct rt_engine_priv *pv = (struct rt_engine_priv *)(e + 1);
	if (!j.rc)
		parse_phases(e, &j, root, &pv->plan);
	int si = j.rc ? -1 : find_buf(e, "state");
	if (!j.rc && (si < 0 || e->bufs[si].bytes < 4 * (RT_ST_WORDS + 8)))
		j.rc = sw_errf(err, SW_EINVAL, "%s: $.buffers: no \"state\" buffer of at least %d words "
		               "(an engine from an older specwright: rebuild it)", path, RT_ST_WORDS + 8);
	if (!j.rc)
		e->ring = (int)(e->bufs[si].bytes / 4 - RT_ST_WORDS);
	json_free(root);
	if (j.rc) {
		rt_engine_free(e);
		return NULL;
	}
	return e;
}

void rt_engine_free(rt_engine *e)
{
	if (!e)
		return;
	struct rt_engine_priv *pv = (struct rt_engine_priv *)(e + 1);
	if (e->dev) {
		if (e->graph)
			e->dev->ops->graph_free(e->dev, e->graph);
		if (e->arena)
			e->dev->ops->free(e->dev, e->arena);
		if (e->host_state) {
			if (e->dev->ops->free_host)
				e->dev->ops->free_host(e->dev, e->host_state);
			else
				free(e->host_state);
		}
	}
	for (int i = 0; i < e->n_kernels; i++)
		free(e->kernels[i].mask);
	free(e->kernels);
	free(e->bufs);
	free(e->ops);
	free(e->op_cost);
	free(e->op_seed);
	free(pv->plan.ops);
	free(e);
}

int rt_engine_reseed(rt_engine *e, uint64_t seed, sw_err *err)
{
	if (!e->dev)
		return sw_errf(err, SW_EINVAL, "%s: engine not bound to a device", e->dir);
	/* the seed is a by-value kernel argument baked into the graph's launch
	 * records: rewrite it in every resolved op, recapture on the next run */
	for (int i = 0; i < e->n_ops; i++)
		for (int a = 0; a < e->ops[i].n_args; a++)
			if (e->op_seed[i] & (1u << a))
				e->ops[i].argval[a] = seed;
	e->seed = seed;
	if (e->graph) {
		e->dev->ops->graph_free(e->dev, e->graph);
		e->graph = NULL;
	}
	return 0;
}

int rt_engine_phase_find(const rt_engine *e, const char *name)
{
	for (int i = 0; i < e->n_phases; i++)
		if (!strcmp(e->phases[i].name, name))
			return i;
	return -1;
}

rt_dptr rt_engine_buf_addr(const rt_engine *e, const char *name)
{
	int b = find_buf(e, name);
	return b < 0 || !e->arena ? 0 : e->arena + (rt_dptr)e->bufs[b].offset;
}

/* --- binding: arena, weights, resolved ops ------------------------------ */

static int64_t el_bytes(const char *dt)
{
	return !strcmp(dt, "f32") || !strcmp(dt, "i32") ? 4 : !strcmp(dt, "u64") ? 8 : 2;
}

static int check_model(const rt_engine *e, const rt_model *m, const rt_config *want,
                       const char *role, sw_err *err)
{
	const rt_config *c = &m->cfg;
	if (m->kind != RT_MODEL_LLAMA)
		return sw_errf(err, SW_EINVAL, "%s: the %s must be a Llama-architecture model", m->name,
		               role);
#define CHK(f)                                                                               \
	if (c->f != want->f)                                                                 \
		return sw_errf(err, SW_EINVAL, "%s: %s " #f " %d, engine %s/engine.json expects %d", \
		               m->name, role, (int)c->f, e->dir, (int)want->f);
	CHK(n_layers) CHK(dim) CHK(n_heads) CHK(n_kv_heads) CHK(head_dim) CHK(ffn_dim) CHK(vocab)
#undef CHK
	if (c->tied_embd != want->tied_embd)
		return sw_errf(err, SW_EINVAL, "%s: %s tied_embd %d, engine expects %d", m->name, role,
		               c->tied_embd, want->tied_embd);
	return 0;
}

/* The fp32 source of weight buffer `field` for layer l (l < 0: not layered). */
static const float *weight_src(const rt_model *m, const char *field, int l, size_t *n)
{
	const rt_config *c = &m->cfg;
	const size_t D = (size_t)c->dim, F = (size_t)c->ffn_dim,
	             qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
	const rt_layer_weights *L = l >= 0 ? &m->w.layers[l] : NULL;
	struct {
		const char *name;
		const float *p;
		size_t n;
	} t[] = {
		{"tok_embd", m->w.tok_embd, (size_t)c->vocab * D},
		{"out_norm", m->w.out_norm, D},
		{"lm_head", m->w.lm_head, (size_t)c->vocab * D},
		{"inv_freq", m->inv_freq, (size_t)c->head_dim / 2},
		{"attn_norm", L ? L->attn_norm : NULL, D},
		{"ffn_norm", L ? L->ffn_norm : NULL, D},
		{"wq", L ? L->wq : NULL, qd * D},
		{"wk", L ? L->wk : NULL, kvd * D},
		{"wv", L ? L->wv : NULL, kvd * D},
		{"wo", L ? L->wo : NULL, D * qd},
		{"w_gate", L ? L->w_gate : NULL, F * D},
		{"w_up", L ? L->w_up : NULL, F * D},
		{"w_down", L ? L->w_down : NULL, D * F},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].name, field)) {
			*n = t[i].n;
			return t[i].p;
		}
	return NULL;
}

static bool layered_field(const char *f)
{
	return strcmp(f, "tok_embd") && strcmp(f, "out_norm") && strcmp(f, "lm_head") &&
	       strcmp(f, "inv_freq");
}

static int upload_weights(rt_engine *e, const rt_engine_buf *b, const rt_model *m, sw_err *err)
{
	const char *field = strchr(b->name, '.') + 1;
	const bool layered = layered_field(field);
	const int nl = layered ? (int)b->shape[0] : 1;
	const int64_t es = el_bytes(b->dtype);
	const int64_t per = b->bytes / nl;
	void *stage = malloc((size_t)per);
	int rc = 0;
	if (!stage)
		return sw_errf(err, SW_ENOMEM, "out of memory staging %s", b->name);
	for (int l = 0; l < nl && !rc; l++) {
		size_t n = 0;
		const float *src = weight_src(m, field, layered ? l : -1, &n);
		if (!src || (int64_t)n * es != per) {
			rc = sw_errf(err, SW_EINVAL, "%s/engine.json: buffer %s (%lld bytes per %s) does not "
			             "match %s (%zu elements)", e->dir, b->name, (long long)per,
			             layered ? "layer" : "buffer", m->name, n);
			break;
		}
		if (es == 4) {
			memcpy(stage, src, (size_t)per);
		} else {
			uint16_t *h = stage;
			const bool f16 = !strcmp(b->dtype, "fp16");
			for (size_t i = 0; i < n; i++)
				h[i] = f16 ? gguf_f32_to_f16(src[i]) : gguf_f32_to_bf16(src[i]);
		}
		rc = e->dev->ops->upload(e->dev, e->arena + (rt_dptr)(b->offset + l * per), stage,
		                         (size_t)per, err);
	}
	free(stage);
	return rc;
}

/* Launch record n: planned op x for its l-th repetition. */
static int resolve_one(rt_engine *e, const eop *x, int l, int n, sw_err *err)
{
	e->op_cost[2 * n] = x->est_bytes;
	e->op_cost[2 * n + 1] = x->est_flops;
	rt_op *o = &e->ops[n];
	o->kind = x->exec == 0 ? RT_OP_KERNEL : x->exec == 1 ? RT_OP_GEMM : RT_OP_MEMSET;
	snprintf(o->name, sizeof(o->name), "%s", x->name);
	snprintf(o->op, sizeof(o->op), "%s", x->op);
	snprintf(o->entry, sizeof(o->entry), "%s", x->entry);
	o->kinfo = x->kernel >= 0 ? &e->kernels[x->kernel] : NULL;
	memcpy(o->grid, x->grid, sizeof(o->grid));
	memcpy(o->block, x->block, sizeof(o->block));
	o->m = x->m;
	o->n = x->n;
	o->k = x->k;
	o->dtype = e->dtype;
	o->bytes = x->bytes;
	o->layer = x->layers ? l : -1;
	o->n_args = x->n_args;
	rt_op_fix_argv(o);
	for (int a = 0; a < x->n_args; a++) {
		if (x->arg_buf[a] < 0) {
			o->argval[a] = e->seed;
			e->op_seed[n] |= 1u << a;
			continue;
		}
		const rt_engine_buf *b = &e->bufs[x->arg_buf[a]];
		rt_dptr p = e->arena + (rt_dptr)(b->offset + x->arg_off[a]);
		bool w = !strcmp(b->kind, "weight"), kv = !strcmp(b->kind, "kv");
		if (x->layers && (kv || (w && layered_field(strchr(b->name, '.') + 1)))) {
			/* weights through the draft's layer map, caches by run layer */
			int id = w && x->layers == 2 &&
			                 e->draft_kind == RT_ENGINE_DRAFT_LAYERSKIP
			             ? e->skip_layers[l] : l;
			if (id >= b->shape[0])
				return sw_errf(err, SW_EINVAL, "%s/engine.json: op %s layer %d: "
				               "buffer %s has %lld layers", e->dir, x->name, id,
				               b->name, (long long)b->shape[0]);
			p += (rt_dptr)(id * (b->bytes / b->shape[0]));
		}
		o->argval[a] = p;
	}
	return 0;
}

static int resolve_ops(rt_engine *e, sw_err *err)
{
	const eplan *pl = &((struct rt_engine_priv *)(e + 1))->plan;
	int total = 0;
	for (int i = 0; i < pl->n_ops; i++)
		total += pl->ops[i].repeat;
	e->ops = calloc(total ? (size_t)total : 1, sizeof(*e->ops));
	e->op_cost = calloc(total ? (size_t)total : 1, 2 * sizeof(double));
	e->op_seed = calloc(total ? (size_t)total : 1, sizeof(*e->op_seed));
	if (!e->ops || !e->op_cost || !e->op_seed)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int n = 0;
	for (int ph = 0; ph < e->n_phases; ph++) {
		const rt_engine_phase *P = &e->phases[ph];
		int first = n;
		/* a run of consecutive per-layer ops (same repeat, same model) is
		 * one transformer block: executed layer by layer, each op of the
		 * block once per layer in plan order */
		for (int i0 = P->first; i0 < P->first + P->n;) {
			int i1 = i0 + 1;
			while (pl->ops[i0].repeat > 1 && i1 < P->first + P->n &&
			       pl->ops[i1].repeat == pl->ops[i0].repeat &&
			       pl->ops[i1].layers == pl->ops[i0].layers)
				i1++;
			for (int l = 0; l < pl->ops[i0].repeat; l++)
				for (int i = i0; i < i1; i++) {
					const eop *x = &pl->ops[i];
					int rc = resolve_one(e, x, l, n, err);
					if (rc)
						return rc;
					n++;
				}
			i0 = i1;
		}
		e->phases[ph].first = first;
		e->phases[ph].n = n - first;
	}
	e->n_ops = n;
	return 0;
}

int rt_engine_bind(rt_engine *e, rt_dev *dev, const rt_model *target, const rt_model *draft,
                   uint64_t seed, sw_err *err)
{
	int rc;
	if (e->dev)
		return sw_errf(err, SW_EINVAL, "%s: engine already bound to a device", e->dir);
	if ((rc = check_model(e, target, &e->tcfg, "target", err)))
		return rc;
	if (e->draft_kind == RT_ENGINE_DRAFT_MODEL) {
		if (!draft)
			return sw_errf(err, SW_EINVAL, "%s: the engine drafts with a separate model: give "
			               "it (--draft-model PATH)", e->dir);
		if ((rc = check_model(e, draft, &e->dcfg, "draft", err)))
			return rc;
	}
	e->dev = dev;
	e->seed = seed;
	if ((rc = dev->ops->alloc(dev, (size_t)e->arena_bytes, &e->arena, err)))
		return sw_err_prefix(err, "%s: arena of %lld bytes", e->dir, (long long)e->arena_bytes);
	size_t hs = sizeof(int32_t) * (size_t)(RT_ST_WORDS + e->ring);
	e->host_state = dev->ops->alloc_host ? dev->ops->alloc_host(dev, hs) : malloc(hs);
	if (!e->host_state)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (int i = 0; i < e->n_bufs; i++) {
		const rt_engine_buf *b = &e->bufs[i];
		if (strcmp(b->kind, "weight"))
			continue;
		const rt_model *m = !strncmp(b->name, "draft.", 6) ? draft : target;
		if (!strchr(b->name, '.') || !m)
			return sw_errf(err, SW_EINVAL, "%s/engine.json: weight buffer %s has no source",
			               e->dir, b->name);
		if ((rc = upload_weights(e, b, m, err)))
			return rc;
	}
	rt_dptr tt = rt_engine_buf_addr(e, "tree_table");
	if (!tt)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: no tree_table buffer", e->dir);
	if ((rc = dev->ops->upload(dev, tt, e->tree_table, sizeof(int32_t) * 5 * (size_t)e->n_nodes,
	                           err)))
		return rc;
	if ((rc = resolve_ops(e, err)))
		return rc;
	for (int i = 0; i < e->n_ops; i++)
		if (dev->ops->supports_op && !dev->ops->supports_op(dev, &e->ops[i]))
			return sw_errf(err, SW_ENOTSUP, "%s: backend %s cannot run op %s (%s)", e->dir,
			               dev->desc, e->ops[i].name, e->ops[i].op);
	return dev->ops->load_kernels(dev, e->dir, e->ops, e->n_ops, err);
}

/* --- running ------------------------------------------------------------- */

/* Runs (or, while capturing, records) phases [ph0, ph1). A gated phase is
 * a conditional region of the graph; run eagerly, its flag is read first. */
static int run_phases(rt_engine *e, int ph0, int ph1, sw_err *err)
{
	rt_dev *d = e->dev;
	for (int ph = ph0; ph < ph1; ph++) {
		const rt_engine_phase *P = &e->phases[ph];
		int rc = 0;
		if (P->gate_buf >= 0) {
			rt_dptr flag = e->arena + (rt_dptr)(e->bufs[P->gate_buf].offset + 4 * P->gate_word);
			if (d->capturing) {
				if (!d->ops->graph_if_begin)
					return sw_errf(err, SW_ENOTSUP, "backend %s has no conditional graph "
					               "regions (phase %s)", d->desc, P->name);
				if ((rc = d->ops->graph_if_begin(d, flag, err)))
					return sw_err_prefix(err, "phase %s", P->name);
			} else {
				int32_t go = 0;
				if ((rc = d->ops->download(d, &go, flag, sizeof(go), err)))
					return rc;
				if (!go)
					continue;
			}
		}
		for (int i = P->first; i < P->first + P->n && !rc; i++)
			if ((rc = d->ops->launch(d, &e->ops[i], err)))
				return sw_err_prefix(err, "phase %s, op %s", P->name, e->ops[i].name);
		if (P->gate_buf >= 0 && d->capturing && (rc = d->ops->graph_if_end(d, err)))
			return sw_err_prefix(err, "phase %s", P->name);
	}
	return 0;
}

static int upload_i32(rt_engine *e, const char *buf, int64_t word, const int32_t *v, int n,
                      sw_err *err)
{
	rt_dptr p = rt_engine_buf_addr(e, buf);
	if (!p)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: no buffer %s", e->dir, buf);
	return e->dev->ops->upload(e->dev, p + (rt_dptr)(4 * word), v, sizeof(*v) * (size_t)n, err);
}

static int prefill(rt_engine *e, const int32_t *prompt, int n_pre, sw_err *err)
{
	const int C = e->chunk;
	int32_t *tok = malloc(sizeof(*tok) * (size_t)C * 2), *pos = tok + C;
	int rc = 0;
	if (!tok)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (int done = 0; done < n_pre && !rc;) {
		/* a short tail re-runs the chunk ending at n_pre (recomputing rows
		 * the cache already holds, identically) rather than run past it */
		int start = done + C > n_pre && n_pre >= C ? n_pre - C : done;
		int real = n_pre - start < C ? n_pre - start : C;
		for (int i = 0; i < C; i++) {
			tok[i] = i < real ? prompt[start + i] : prompt[n_pre - 1];
			pos[i] = start + i;
		}
		int32_t lens[2] = {start, start};
		if ((rc = upload_i32(e, "tokens", 0, tok, C, err)) || (rc = upload_i32(e, "pos", 0, pos, C, err)) ||
		    (rc = upload_i32(e, "state", RT_ST_TLEN, lens, 2, err)))
			break;
		rc = run_phases(e, e->ph_prefill, e->ph_prefill + 1, err);
		done = start + real;
	}
	free(tok);
	return rc;
}

int rt_engine_generate(rt_engine *e, const rt_engine_run *r, int32_t *out, rt_engine_stats *st,
                       sw_err *err)
{
	rt_dev *d = e->dev;
	int rc;
	memset(st, 0, sizeof(*st));
	if (!d)
		return sw_errf(err, SW_EINVAL, "%s: engine not bound to a device", e->dir);
	const int P = r->n_prompt;
	if (P < 1)
		return sw_errf(err, SW_EINVAL, "empty prompt: need at least one token");
	if (r->max_new < 1)
		return sw_errf(err, SW_EINVAL, "max_new %d: need at least 1", r->max_new);
	if (P + e->n_nodes > e->max_ctx)
		return sw_errf(err, SW_ERANGE, "prompt of %d tokens plus the %d-node tree exceeds the "
		               "engine's max_context %d (%s/engine.json): shorten the prompt or build "
		               "with a larger max_context", P, e->n_nodes, e->max_ctx, e->dir);
	for (int i = 0; i < P; i++)
		if (r->prompt[i] < 0 || r->prompt[i] >= e->tcfg.vocab)
			return sw_errf(err, SW_EINVAL, "prompt token %d: id %d outside the vocabulary [0, %d)",
			               i, r->prompt[i], e->tcfg.vocab);
	st->n_prompt = P;
	const double ops0 = d->stats.seconds_ops;
	double t0 = sw_now_s();
	if ((rc = prefill(e, r->prompt, P - 1, err)))
		return rc;
	int32_t hdr[RT_ST_WORDS] = {0}, zero[8] = {0};
	hdr[RT_ST_TLEN] = hdr[RT_ST_DLEN] = P - 1;
	hdr[RT_ST_ROOT] = r->prompt[P - 1];
	hdr[RT_ST_LAST] = P >= 2 ? r->prompt[P - 2] : -1;
	hdr[RT_ST_MAXNEW] = r->max_new;
	hdr[RT_ST_EOS] = r->eos;
	if ((rc = upload_i32(e, "state", 0, hdr, RT_ST_WORDS, err)) ||
	    (rc = upload_i32(e, "iter", 0, zero, 1, err)) ||
	    (rc = upload_i32(e, "counts", 0, zero, 5, err)) ||
	    (rc = upload_i32(e, "kv_done", 0, zero, 2, err)))
		return rc;
	if (rt_engine_buf_addr(e, "ngram_hist") && (rc = upload_i32(e, "ngram_hist", 0, r->prompt, P, err)))
		return rc;
	if ((rc = d->ops->sync(d, err)))
		return rc;
	st->t_prefill = sw_now_s() - t0;

	const int ph0 = e->ph_iter_first, ph1 = e->n_phases;
	if (!r->eager && !e->graph) {
		double tc = sw_now_s();
		if ((rc = d->ops->graph_begin(d, err)))
			return rc;
		rc = run_phases(e, ph0, ph1, err);
		rt_graph *g = NULL;
		int rc2 = d->ops->graph_end(d, &g, rc ? NULL : err);
		if (rc || rc2) {
			if (g)
				d->ops->graph_free(d, g);
			return rc ? rc : rc2;
		}
		e->graph = g;
		st->t_capture = sw_now_s() - tc;
	}

	const double ops1 = d->stats.seconds_ops;
	t0 = sw_now_s();
	int n_out = 0, stop = 0;
	const size_t hbytes = sizeof(int32_t) * (size_t)(RT_ST_WORDS + e->ring);
	const rt_dptr sp = rt_engine_buf_addr(e, "state");
	while (!stop) {
		rc = r->eager ? run_phases(e, ph0, ph1, err) : d->ops->graph_launch(d, e->graph, err);
		if (rc || (rc = d->ops->download(d, e->host_state, sp, hbytes, err)))
			return rc;
		const int32_t *hs = e->host_state, *ring = hs + RT_ST_WORDS;
		const int nout = hs[RT_ST_NOUT];
		if (nout <= n_out || nout - n_out > e->depth + 1)
			return sw_errf(err, SW_EINVAL, "iteration %d: the device reported %d tokens after %d "
			               "(a kernel broke the state invariant)", st->n_iters, nout, n_out);
		if (nout - n_out > e->ring)
			return sw_errf(err, SW_EINVAL, "output ring of %d overrun", e->ring);
		const int first = n_out, acc = nout - n_out - 1;
		for (int dd = 0; dd < e->depth && dd <= acc && dd < RT_MAX_GAMMA; dd++) {
			st->pos_tried[dd]++;
			st->pos_accepted[dd] += dd < acc;
		}
		for (; n_out < nout; n_out++) {
			out[n_out] = ring[n_out % e->ring];
			if (r->is_eog && r->is_eog(r->eog_user, out[n_out]) && !stop) {
				stop = RT_STOP_EOS;
				n_out++;
				break;
			}
		}
		st->n_iters++;
		if (r->on_tokens) {
			/* the caller's streaming (detokenise, write) is not engine overhead */
			double tcb = sw_now_s();
			if (r->on_tokens(r->cb_user, out + first, n_out - first))
				stop = stop ? stop : RT_STOP_EOS;
			st->t_callback += sw_now_s() - tcb;
		}
		if (hs[RT_ST_STOP])
			stop = hs[RT_ST_STOP];
		if (n_out >= r->max_new)
			stop = stop ? stop : RT_STOP_MAXNEW;
	}
	st->t_decode = sw_now_s() - t0;
	st->t_ops = d->stats.seconds_ops - ops1;
	st->t_prefill -= 0; /* prefill op time stays inside t_prefill */
	(void)ops0;
	st->n_tokens = n_out;
	st->stop = stop;
	st->host_overhead_us =
		st->n_iters ? 1e6 * (st->t_decode - st->t_ops - st->t_callback) / st->n_iters : 0;
	return n_out;
}

/* --- profile ------------------------------------------------------------- */

typedef struct prof_row {
	char phase[32], name[48];
	int launches;
	double seconds, bytes, flops;
} prof_row;

int rt_engine_profile(rt_engine *e, const int32_t *prompt, int n_prompt, int iters, FILE *f,
                      sw_err *err)
{
	rt_engine_stats st;
	int32_t *out = malloc(sizeof(*out) * 2);
	prof_row *rows = calloc((size_t)e->n_ops, sizeof(*rows));
	int n_rows = 0, rc;
	if (!out || !rows) {
		free(out);
		free(rows);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	/* prefill and state set-up through generate (one token), then eager
	 * iterations with a sync after every op; the device's own state keeps
	 * advancing, so every iteration is a real one */
	rt_engine_run r = {.prompt = prompt, .n_prompt = n_prompt, .max_new = 1 << 30, .eos = -1,
	                   .eager = true};
	r.max_new = 1;
	if ((rc = rt_engine_generate(e, &r, out, &st, err)) < 0)
		goto out;
	int32_t big = 1 << 30;
	if ((rc = upload_i32(e, "state", RT_ST_MAXNEW, &big, 1, err)))
		goto out;
	int32_t zero = 0;
	if ((rc = upload_i32(e, "state", RT_ST_STOP, &zero, 1, err)))
		goto out;
	double t_all = 0;
	for (int it = 0; it < iters && !rc; it++)
		for (int ph = e->ph_iter_first; ph < e->n_phases && !rc; ph++)
			for (int i = e->phases[ph].first; i < e->phases[ph].first + e->phases[ph].n; i++) {
				double t0 = sw_now_s();
				if ((rc = e->dev->ops->launch(e->dev, &e->ops[i], err)) ||
				    (rc = e->dev->ops->sync(e->dev, err)))
					break;
				double dt = sw_now_s() - t0;
				t_all += dt;
				int k = 0;
				while (k < n_rows && (strcmp(rows[k].phase, e->phases[ph].name) ||
				                      strcmp(rows[k].name, e->ops[i].name)))
					k++;
				if (k == n_rows) {
					snprintf(rows[k].phase, sizeof(rows[k].phase), "%s", e->phases[ph].name);
					snprintf(rows[k].name, sizeof(rows[k].name), "%s", e->ops[i].name);
					n_rows++;
				}
				rows[k].launches++;
				rows[k].seconds += dt;
				rows[k].bytes += e->op_cost[2 * i];
				rows[k].flops += e->op_cost[2 * i + 1];
			}
	if (rc)
		goto out;
	fprintf(f, "profile of %s on %s: %d iterations, per iteration %.3f ms (synchronised after "
	        "every op: launch latency included)\n", e->name, e->dev->desc, iters,
	        iters ? 1e3 * t_all / iters : 0.0);
	fprintf(f, "%-16s %-18s %8s %12s %10s %10s %6s\n", "phase", "op", "launches", "us/iter",
	        "GB/s", "GFLOP/s", "share");
	for (int k = 0; k < n_rows; k++) {
		const prof_row *w = &rows[k];
		fprintf(f, "%-16s %-18s %8d %12.2f %10.2f %10.2f %5.1f%%\n", w->phase, w->name,
		        w->launches / (iters ? iters : 1), 1e6 * w->seconds / (iters ? iters : 1),
		        w->seconds > 0 ? w->bytes / w->seconds * 1e-9 : 0.0,
		        w->seconds > 0 ? w->flops / w->seconds * 1e-9 : 0.0,
		        t_all > 0 ? 100.0 * w->seconds / t_all : 0.0);
	}
	rc = 0;
out:
	free(out);
	free(rows);
	return rc < 0 ? rc : 0;
}
