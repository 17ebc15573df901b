/* `specwright run ENGINE_DIR` and `specwright profile ENGINE_DIR`: a built
 * engine on a device backend (cuda when a driver and GPU are present, else
 * host), with the host reference path as the baseline: greedy engines must
 * reproduce its tokens, and the run says whether they did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "device/host_gemm.h"
#include "device/host_pool.h"
#include "engine/engine.h"
#include "gen/render.h"
#include "gen/jit/emu_build.h"
#include "gen/replan.h"
#include "kernels/engine_state.h"
#include "model/eagle3.h"
#include "model/model_gguf.h"
#include "core/fileio.h"
#include "core/timing.h"

bool cli_is_engine_dir(const char *path)
{
	char p[1100];
	struct stat st;
	snprintf(p, sizeof(p), "%s/engine.json", path);
	/* lstat: an engine.json that is there in any form (unreadable, a
	 * directory, a dangling link) makes this an engine directory, so the
	 * engine loader names engine.json and what is wrong with it, rather
	 * than the model loader asking for a config.json */
	return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode) && lstat(p, &st) == 0;
}

/* --- where an engine's weights are, and the engine verified whole --------- */

/* One bound weight (role "target"/"draft", recorded path rec): given
 * explicitly, else found under --weights DIR (else at rec, where it still
 * is: a folder may hold some of an engine's weights), else rec itself;
 * checked present. */
static int find_one(const char *dir, const char *role, const char *rec, const char *given,
                    const char *wdir, char *out, size_t n, sw_err *err)
{
	struct stat st;
	if (given) {
		snprintf(out, n, "%s", given);
	} else if (wdir && rec[0]) {
		/* DIR/NAME, or DIR/ENGINE-NAME as a bundle's weights/ names a clash */
		char eng[1100];
		const char *base = strrchr(rec, '/') ? strrchr(rec, '/') + 1 : rec;
		snprintf(eng, sizeof(eng), "%s", dir);
		size_t el = strlen(eng);
		while (el > 1 && eng[el - 1] == '/')
			eng[--el] = 0;
		const char *ename = strrchr(eng, '/') ? strrchr(eng, '/') + 1 : eng;
		snprintf(out, n, "%.2000s/%.1000s", wdir, base);
		if (stat(out, &st)) {
			char alt[4096];
			snprintf(alt, sizeof(alt), "%.2000s/%.500s-%.1000s", wdir, ename, base);
			if (stat(alt, &st) && stat(rec, &st))
				return sw_errf(err, SW_EINVAL, "engine %s: %s weights: neither %s nor %s (--weights "
				               "%s), nor %s, where the engine was built with them", dir, role, out, alt,
				               wdir, rec);
			snprintf(out, n, "%s", stat(alt, &st) ? rec : alt);
		}
	} else {
		snprintf(out, n, "%s", rec);
	}
	if (out[0] && stat(out, &st))
		return sw_errf(err, SW_EINVAL, "engine %s: %s weights %s: cannot open (%s)%s", dir, role, out,
		               strerror(errno), given ? "" : ": the engine records the absolute path its "
		               "weights had at build; where they are elsewhere (a bundle without "
		               "--with-weights on another machine), give --weights DIR_OR_FILE (the folder "
		               "that holds them, or the target's file)");
	return 0;
}

int cli_engine_weights_find(const rt_manifest *m, const char *dir, const cli_opts *o,
                            cli_weights *w, sw_err *err)
{
	struct stat st;
	const char *wdir = NULL, *wfile = NULL;
	memset(w, 0, sizeof(*w));
	if (o->weights) {
		if (stat(o->weights, &st))
			return sw_errf(err, SW_EINVAL, "--weights %s: cannot open (%s): expected the folder "
			               "holding the engine's weights, or the target's weights file", o->weights,
			               strerror(errno));
		if (S_ISDIR(st.st_mode))
			wdir = o->weights;
		else
			wfile = o->weights;
	}
	const char *tgiven = o->model_override ? o->model_override : wfile;
	if ((m->target_path[0] || tgiven) &&
	    find_one(dir, "target", m->target_path, tgiven, wdir, w->target, sizeof(w->target), err))
		return SW_EINVAL;
	const bool drafter = m->draft_kind == RT_ENGINE_DRAFT_MODEL ||
	                     m->draft_kind == RT_ENGINE_DRAFT_BLOCK ||
	                     m->draft_kind == RT_ENGINE_DRAFT_EAGLE3;
	if (drafter && (m->draft_path[0] || o->draft_model) &&
	    find_one(dir, "draft", m->draft_path, o->draft_model, wdir, w->draft, sizeof(w->draft), err))
		return SW_EINVAL;
	return 0;
}

int cli_engine_verify(const rt_manifest *m, const char *dir, const cli_weights *w, double *ms,
                      bool *src, sw_err *err)
{
	const char *dp = w && w->draft[0] ? w->draft : m->draft_path;
	if (m->n_draft_files && rt_manifest_draft_files_check(m, dp, err))
		return sw_err_prefix(err, "engine %s", dir);
	const gen_replan_opts ro = {.target_path = w && w->target[0] ? w->target : NULL,
	                            .draft_path = dp[0] ? dp : NULL};
	gen_replan_stats st;
	if (gen_engine_replan_check(dir, &ro, &st, err))
		return SW_EINVAL;
	if (ms)
		*ms = 1e3 * st.seconds;
	if (src)
		*src = st.source_checked;
	return 0;
}

/* --- the engine's weights from a loaded model ------------------------------ */

static int model_weight(void *user, const char *field, int l, const float **data, size_t *n,
                        sw_err *err)
{
	const rt_model *m = user;
	if (l >= m->cfg.n_layers)
		return sw_errf(err, SW_EINVAL, "%s: weight %s: layer %d of %d", m->name, field, l,
		               m->cfg.n_layers);
	/* an unknown field or a layered one asked without its layer gives NULL:
	 * bind reports the buffer that has no source */
	*data = rt_model_weight(m, field, l, n);
	return 0;
}

int cli_engine_weights(rt_engine_weights *w, const rt_model *m, const char *role, sw_err *err)
{
	const rt_config *c = &m->cfg;
	if (m->kind != RT_MODEL_LLAMA)
		return sw_errf(err, SW_EINVAL, "%s: the %s must be a transformer (llama, qwen2, qwen3), "
		               "found a table model", m->name, role);
	memset(w, 0, sizeof(*w));
	w->name = m->name;
	w->shape = (rt_engine_shape){
		.arch = c->arch, .n_layers = c->n_layers, .dim = c->dim, .n_heads = c->n_heads,
		.n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .ffn_dim = c->ffn_dim,
		.vocab = c->vocab, .rope_theta = c->rope_theta, .norm_eps = c->norm_eps,
		.tied_embd = c->tied_embd,
	};
	w->get = model_weight;
	w->user = (void *)m;
	return 0;
}

static int block_weight(void *user, const char *field, int l, const float **data, size_t *n,
                        sw_err *err)
{
	const rt_block_drafter *bd = user;
	if (l >= bd->cfg.n_layers)
		return sw_errf(err, SW_EINVAL, "%s: weight %s: layer %d of %d", bd->name, field, l,
		               bd->cfg.n_layers);
	*n = 0;
	*data = rt_bd_weight(bd, field, l, n);
	return 0;
}

int cli_block_weights(rt_engine_weights *w, const rt_block_drafter *bd, const rt_model *target,
                      sw_err *err)
{
	const rt_bd_config *c = &bd->cfg;
	if (c->cond != RT_BD_FEATURES)
		return sw_errf(err, SW_EINVAL, "%s/config.json: $.conditioning \"tokens\": an engine "
		               "drafts with features-conditioned block drafters only", bd->name);
	memset(w, 0, sizeof(*w));
	w->name = bd->name;
	w->shape = (rt_engine_shape){
		.n_layers = c->n_layers, .dim = c->dim, .n_heads = c->n_heads,
		.n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .ffn_dim = c->ffn_dim,
		.vocab = c->vocab, .rope_theta = c->rope_theta, .norm_eps = c->norm_eps,
		.tied_embd = target->cfg.tied_embd,
		.arch = target->cfg.arch, /* engine.json's draft shape is the target's family */
	};
	w->get = block_weight;
	w->user = (void *)bd;
	return 0;
}

static int eagle3_weight(void *user, const char *field, int l, const float **data, size_t *n,
                         sw_err *err)
{
	const rt_eagle3 *h = user;
	if (l > 0)
		return sw_errf(err, SW_EINVAL, "%s: weight %s: layer %d of 1", h->name, field, l);
	*data = rt_e3_weight(h, field, n);
	return 0;
}

int cli_eagle3_weights(rt_engine_weights *w, const rt_eagle3 *h, sw_err *err)
{
	const rt_config *c = &h->cfg.head;
	(void)err;
	memset(w, 0, sizeof(*w));
	w->name = h->name;
	w->shape = (rt_engine_shape){
		.arch = RT_ARCH_LLAMA, .n_layers = 1, .dim = c->dim, .n_heads = c->n_heads,
		.n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .ffn_dim = c->ffn_dim,
		.vocab = c->vocab, .rope_theta = c->rope_theta, .norm_eps = c->norm_eps,
		.tied_embd = c->tied_embd,
	};
	w->get = eagle3_weight;
	w->user = (void *)h;
	return 0;
}

int cli_engine_bind_eagle3(rt_engine *e, rt_dev *dev, const rt_model *target, const rt_eagle3 *h,
                           uint64_t seed, sw_err *err)
{
	rt_engine_weights tw, dw;
	int rc;
	if ((rc = cli_engine_weights(&tw, target, "target", err)) ||
	    (rc = cli_eagle3_weights(&dw, h, err)))
		return rc;
	return rt_engine_bind(e, dev, &tw, &dw, seed, err);
}

int cli_engine_bind_block(rt_engine *e, rt_dev *dev, const rt_model *target,
                          const rt_block_drafter *bd, uint64_t seed, sw_err *err)
{
	rt_engine_weights tw, dw;
	int rc;
	if ((rc = cli_engine_weights(&tw, target, "target", err)) ||
	    (rc = cli_block_weights(&dw, bd, target, err)))
		return rc;
	return rt_engine_bind(e, dev, &tw, &dw, seed, err);
}

int cli_engine_bind(rt_engine *e, rt_dev *dev, const rt_model *target, const rt_model *draft,
                    uint64_t seed, sw_err *err)
{
	rt_engine_weights tw, dw;
	int rc;
	if ((rc = cli_engine_weights(&tw, target, "target", err)))
		return rc;
	if (draft && (rc = cli_engine_weights(&dw, draft, "draft", err)))
		return rc;
	return rt_engine_bind(e, dev, &tw, draft ? &dw : NULL, seed, err);
}

typedef struct stream {
	const rt_tokenizer *tok;
	rt_detok dt;
	bool quiet;
} stream;

static int on_tokens(void *user, const int32_t *tok, int n)
{
	stream *s = user;
	char buf[512];
	for (int i = 0; i < n && !s->quiet; i++) {
		if (rt_token_type(s->tok, tok[i]) == RT_TT_CONTROL)
			continue; /* <|im_end|> and friends end the text, they are not part of it */
		int k = rt_detok_push(&s->dt, s->tok, tok[i], buf, sizeof(buf));
		if (k > 0)
			fwrite(buf, 1, (size_t)k, stdout);
	}
	fflush(stdout);
	return 0;
}

/* Everything both commands need: session (target, tokenizer, host ctx),
 * engine bound to its device, prompt ids. */
typedef struct engine_job {
	cli_session s;
	rt_model *draft;
	rt_block_drafter *block;  /* a block-drafter engine's drafter */
	rt_eagle3 *eagle3;        /* an EAGLE-3 engine's head */
	rt_engine *e;
	rt_dev *dev;
	int32_t *ids;
	int n_prompt;
	rt_engine_sampling samp;  /* this run's: the engine's defaults, -t/--top-k/--top-p over them */
	cli_weights w;            /* the weights this run binds */
	double verify_ms;         /* the engine's re-plan (cli_engine_verify) */
	bool verify_src;          /* kernels.cu compared with its rendered source */
} engine_job;

static void job_close(engine_job *j)
{
	rt_engine_free(j->e);
	if (j->dev)
		rt_dev_free(j->dev);
	rt_model_free(j->draft);
	rt_block_drafter_free(j->block);
	rt_eagle3_free(j->eagle3);
	cli_session_close(&j->s);
	free(j->ids);
}

/* An engine fixes its drafter, tree, verification and context at build
 * time: an option that would change them is refused, naming the engine's
 * value, never silently ignored. Sampling (-t, --top-k, --top-p, --seed) is
 * a run-time value: given ones replace the engine's defaults, and what the
 * engine cannot honour (a temperature on a greedy engine) is refused. */
int cli_engine_sampling(const rt_engine *e, const cli_opts *o, const char *dir,
                        rt_engine_sampling *s, sw_err *err)
{
	static const char *const temp[] = {"-t", "--temp", "--temperature", NULL};
	static const char *const topk[] = {"--top-k", NULL};
	static const char *const topp[] = {"--top-p", NULL};
	*s = e->man->samp;
	if (cli_given(o, temp))
		s->temperature = o->temperature;
	if (cli_given(o, topk))
		s->top_k = o->top_k;
	if (cli_given(o, topp))
		s->top_p = o->top_p;
	if (rt_engine_check_sampling(e, s, err))
		return sw_err_prefix(err, "specwright run %s", dir);
	return 0;
}

int cli_engine_refuse_fixed(const rt_manifest *m, const cli_opts *o, const char *dir, sw_err *err)
{
	static const char *const structural[] = {"--draft", "--tree", "--gamma", "-g", "--expand", "--verify",
	                                         "--adaptive", "--acc-head", "--lossy-eps", "--ctx", NULL};
	static const char *const dmodel[] = {"--draft-model", NULL};
	const char *a;
	if ((a = cli_given(o, structural)))
		return sw_errf(err, SW_EINVAL, "%s: %s cannot apply: an engine's drafter, tree (%d nodes, depth %d), "
		               "verification (%s/%s) and context (%d) are fixed at build time; rebuild the engine "
		               "from a spec with what you want", dir, a, m->n_nodes, m->depth, m->expand, m->verify,
		               m->max_ctx);
	/* --draft-model: a draft model's file, or a block drafter's or an
	 * EAGLE-3 head's directory (a bundle's copy; the digest binds each) */
	if ((a = cli_given(o, dmodel)) && m->draft_kind != RT_ENGINE_DRAFT_MODEL &&
	    m->draft_kind != RT_ENGINE_DRAFT_BLOCK && m->draft_kind != RT_ENGINE_DRAFT_EAGLE3)
		return sw_errf(err, SW_EINVAL, "%s: %s cannot apply: the engine drafts with %s, not a separate "
		               "model or a block drafter", dir, a,
		               m->draft_kind == RT_ENGINE_DRAFT_NGRAM ? "n-grams" : "a layer-skip view");
	return 0;
}

static int job_open(engine_job *j, cli_opts *o, sw_err *err)
{
	const char *dir = o->model;
	memset(j, 0, sizeof(*j));
	if (!(j->e = rt_engine_load(dir, err)))
		return SW_EINVAL;
	if (cli_engine_refuse_fixed(j->e->man, o, dir, err) || cli_engine_sampling(j->e, o, dir, &j->samp, err))
		return SW_EINVAL;
	/* the engine verified whole before any of it runs (issue 40) */
	if (cli_engine_weights_find(j->e->man, dir, o, &j->w, err) ||
	    cli_engine_verify(j->e->man, dir, &j->w, &j->verify_ms, &j->verify_src, err))
		return SW_EINVAL;
	const char *mpath = j->w.target;
	if (!mpath[0])
		return sw_errf(err, SW_EINVAL, "%s/engine.json: built from a shape, not a weights file: "
		               "give the weights with --model PATH (or --weights FILE)", dir);
	cli_opts so = *o;
	so.model = mpath;
	if (so.ctx > j->e->man->max_ctx)
		so.ctx = j->e->man->max_ctx;
	if (cli_session_open(&j->s, &so, err))
		return sw_err_prefix(err, "engine %s: target", dir);
	if (j->e->man->draft_kind == RT_ENGINE_DRAFT_MODEL) {
		const char *dp = j->w.draft;
		if (!dp[0])
			return sw_errf(err, SW_EINVAL, "%s: the engine drafts with a separate model: give "
			               "it with --draft-model PATH", dir);
		if (!(j->draft = rt_model_load(dp, err)))
			return SW_EINVAL;
		if (rt_draft_vocab_check(mpath, j->s.target->cfg.vocab, dp, j->draft->cfg.vocab, err))
			return sw_err_prefix(err, "engine %s: draft", dir);
	}
	/* the CLI links the generator: host-emulate compiles with it */
	const rt_dev_opts dopts = {.emu_compile = gen_emu_module_build};
	if (!(j->dev = rt_dev_open(o->backend ? o->backend : "auto", &dopts, err)))
		return SW_EINVAL;
	if (j->e->man->draft_kind == RT_ENGINE_DRAFT_BLOCK) {
		/* the drafter directory the engine was built from, or --draft-model
		 * DIR (its digest binds it) */
		const char *bp = j->w.draft;
		if (!bp[0])
			return sw_errf(err, SW_EINVAL, "%s/engine.json: $.spec.draft: built from a block "
			               "drafter's shape, no weights to run with; build from a spec whose "
			               "draft has \"path\": DIR, or give --draft-model DIR", dir);
		if (!(j->block = rt_block_drafter_load(bp, j->s.target, err)))
			return sw_err_prefix(err, "engine %s: block drafter", dir);
		if (cli_engine_bind_block(j->e, j->dev, j->s.target, j->block, o->seed, err))
			return SW_EINVAL;
	} else if (j->e->man->draft_kind == RT_ENGINE_DRAFT_EAGLE3) {
		/* the head directory the engine was built from, or --draft-model DIR */
		const char *hp = j->w.draft;
		if (!(j->eagle3 = rt_eagle3_load(hp, j->s.target, err)))
			return sw_err_prefix(err, "engine %s: EAGLE-3 head", dir);
		if (cli_engine_bind_eagle3(j->e, j->dev, j->s.target, j->eagle3, o->seed, err))
			return SW_EINVAL;
	} else if (cli_engine_bind(j->e, j->dev, j->s.target, j->draft, o->seed, err)) {
		return SW_EINVAL;
	}
	j->n_prompt = cli_prompt_tokens(o, &j->s, o->chat < 0 ? rt_tokenizer_has_chat(j->s.tok) : o->chat,
	                                &j->ids, err);
	return j->n_prompt < 0 ? j->n_prompt : 0;
}

/* The decode part of a reference run (after the prompt's feed): tokens fed
 * one at a time, wall and CPU seconds. */
typedef struct ref_decode {
	int n_fed;
	double wall, cpu;
} ref_decode;

/* Target-only greedy decoding on the host reference path (fp32). dec, when
 * not NULL, gets the decode part alone. */
static int reference_greedy(engine_job *j, int n, int32_t eos, int32_t *out, double *secs,
                            ref_decode *dec, const int32_t *cmp, double *margin, sw_err *err)
{
	rt_ctx *c = j->s.tctx;
	const int V = j->s.target->cfg.vocab;
	float *logits = malloc(sizeof(*logits) * (size_t)V);
	int k = 0;
	if (!logits)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	double t0 = sw_now_s();
	rt_ctx_truncate(c, 0);
	int rc = rt_ctx_feed(c, j->ids, j->n_prompt, logits, err), fed = 0;
	const double t1 = sw_now_s(), c1 = sw_cpu_s();
	bool same = cmp != NULL;
	while (!rc && k < n) {
		out[k] = rt_argmax(logits, V);
		if (same && cmp[k] != out[k]) {
			/* the first divergence: how far below the reference's pick the
			 * engine's token scored (a near-tie when small) */
			same = false;
			if (margin && cmp[k] >= 0 && cmp[k] < V)
				*margin = (double)logits[out[k]] - logits[cmp[k]];
		}
		if (out[k++] == eos || c->len + 1 >= c->max_ctx)
			break;
		rc = rt_ctx_feed(c, &out[k - 1], 1, logits, err);
		fed++;
	}
	*secs = sw_now_s() - t0;
	if (dec)
		*dec = (ref_decode){fed, sw_now_s() - t1, sw_cpu_s() - c1};
	free(logits);
	return rc ? rc : k;
}

int cli_engine_run(cli_opts *o)
{
	if (o->random_weights)
		return cli_engine_random(o, false);
	sw_err err = {0};
	engine_job j;
	int rc = 1;
	int32_t *out = malloc(sizeof(*out) * (size_t)(o->max_new + 1));
	int32_t *ref = malloc(sizeof(*ref) * (size_t)(o->max_new + 1));
	if (!out || !ref) {
		free(out);
		free(ref);
		fprintf(stderr, "specwright run: out of memory\n");
		return 1;
	}
	if (job_open(&j, o, &err))
		goto out_err;
	const rt_engine *e = j.e;
	const bool greedy = j.samp.temperature <= 0.0f;
	const int32_t eos = rt_token_eos(j.s.tok);
	stream sm = {.tok = j.s.tok, .quiet = o->json};
	rt_engine_run r = {.prompt = j.ids, .n_prompt = j.n_prompt, .max_new = o->max_new, .eos = eos,
	                   .is_eog = cli_is_eog, .eog_user = j.s.tok, .on_tokens = on_tokens,
	                   .cb_user = &sm, .eager = o->eager, .samp = &j.samp,
	                   .target_only = o->target_only};
	rt_engine_stats st;
	int8_t *trace = cli_ctrl_trace_on() ? calloc((size_t)o->max_new + 1, 1) : NULL;
	r.trace = trace;
	r.trace_cap = trace ? o->max_new + 1 : 0;
	int n = rt_engine_generate(j.e, &r, out, &st, &err);
	if (n < 0) {
		free(trace);
		goto out_err;
	}
	/* the baseline that matters: the same engine's target-only decode on the
	 * same backend (a target forward per token) */
	rt_engine_stats tst = {0};
	int n_to = -1, to_match = -1;
	if (o->baseline && !o->target_only) {
		rt_engine_run tr = r;
		tr.on_tokens = NULL;
		tr.trace = NULL;
		tr.target_only = true;
		tr.max_new = n;
		if ((n_to = rt_engine_generate(j.e, &tr, ref, &tst, &err)) < 0) {
			free(trace);
			goto out_err;
		}
		to_match = 0;
		while (to_match < n && to_match < n_to && out[to_match] == ref[to_match])
			to_match++;
	}
	const double to_tps = tst.t_decode > 0 ? tst.n_tokens / tst.t_decode : 0;
	char tail[64];
	int k = rt_detok_flush(&sm.dt, tail, sizeof(tail));
	if (k > 0 && !o->json)
		fwrite(tail, 1, (size_t)k, stdout);
	if (!o->json)
		printf("\n");
	fflush(stdout); /* the text before the statistics on stderr */
	int n_ref = -1, match = -1;
	double t_ref = 0, margin = -1;
	if (o->baseline && greedy) {
		n_ref = reference_greedy(&j, n, eos, ref, &t_ref, NULL, out, &margin, &err);
		if (n_ref < 0)
			goto out_err;
		match = 0;
		while (match < n && match < n_ref && out[match] == ref[match])
			match++;
	}
	static const char *const stops[] = {"none", "eos", "max_new", "context"};
	const double tau = st.n_iters ? (double)st.n_tokens / st.n_iters : 0;
	const double tps = st.t_decode > 0 ? st.n_tokens / st.t_decode : 0;
	FILE *f = o->json ? stdout : stderr;
	if (o->json) {
		fprintf(f, "{\"engine\": \"%s\", \"backend\": \"%s\", \"tokens\": [", e->man->name,
		        j.dev->desc);
		for (int i = 0; i < n; i++)
			fprintf(f, "%s%d", i ? ", " : "", out[i]);
		fprintf(f, "], \"replan_ms\": %.3f, \"kernels_cu_checked\": %s", j.verify_ms,
		        j.verify_src ? "true" : "false");
		fprintf(f, ", \"n_prompt\": %d, \"n_tokens\": %d, \"iterations\": %d, \"tau\": %.4f, "
		        "\"tok_per_s\": %.3f, \"prefill_s\": %.4f, \"decode_s\": %.4f, \"capture_s\": %.4f, "
		        "\"host_overhead_us\": %.3f, \"stop\": \"%s\", \"acceptance\": [",
		        st.n_prompt, st.n_tokens, st.n_iters, tau, tps, st.t_prefill, st.t_decode,
		        st.t_capture, st.host_overhead_us, stops[st.stop & 3]);
		for (int d = 0; d < e->man->depth && d < RT_ENGINE_MAX_DEPTH; d++)
			fprintf(f, "%s%.4f", d ? ", " : "",
			        st.pos_tried[d] ? (double)st.pos_accepted[d] / st.pos_tried[d] : 0.0);
		fprintf(f, "]");
		if (match >= 0)
			fprintf(f, ", \"reference_tokens\": %d, \"greedy_match\": %d, \"reference_s\": %.4f",
			        n_ref, match, t_ref);
		if (margin >= 0)
			fprintf(f, ", \"diverge_margin\": %.6g", margin);
		if (n_to >= 0)
			fprintf(f, ", \"target_only\": {\"tokens_identical\": %d, \"tok_per_s\": %.3f, "
			        "\"speedup\": %.4f}", to_match, to_tps, to_tps > 0 ? tps / to_tps : 0.0);
		cli_ctrl_report(f, e, &st, trace, trace ? st.n_iters : 0, true);
		fprintf(f, "}\n");
	} else {
		fprintf(f, "engine %s on %s: %d prompt tokens, %d tokens in %d iterations (tau %.3f), "
		        "%.2f tok/s, prefill %.3f s, graph capture %.3f s, stop: %s\n", e->man->name,
		        j.dev->desc, st.n_prompt, st.n_tokens, st.n_iters, tau, tps, st.t_prefill,
		        st.t_capture, stops[st.stop & 3]);
		fprintf(f, "engine verified: engine.json re-planned from its spec echo in %.1f ms%s\n",
		        j.verify_ms, j.verify_src ? ", kernels.cu equal to its rendered source"
		                                  : " (no source tree here: kernels.cu by its sha256)");
		fprintf(f, "acceptance by depth:");
		for (int d = 0; d < e->man->depth && d < RT_ENGINE_MAX_DEPTH; d++)
			fprintf(f, " %.3f", st.pos_tried[d] ? (double)st.pos_accepted[d] / st.pos_tried[d] : 0.0);
		fprintf(f, "\nhost overhead per iteration (op execution excluded): %.2f us\n",
		        st.host_overhead_us);
		if (match >= 0)
			fprintf(f, "greedy reference (host fp32, target only): %d of %d tokens identical%s, "
			        "%.2f tok/s\n", match, n < n_ref ? n : n_ref,
			        match == (n < n_ref ? n : n_ref) ? "" : " (diverged: see the note on dtype "
			        "rounding in README)", t_ref > 0 ? n_ref / t_ref : 0.0);
		if (margin >= 0)
			fprintf(f, "first divergence at token %d: the engine's token scores %.4g below the "
			        "reference's in its fp32 logits%s\n", match, margin,
			        margin < 0.05 ? " (a near-tie)" : "");
		if (n_to >= 0)
			fprintf(f, "target-only decode (same engine, same backend): %d of %d tokens "
			        "identical%s, %.2f tok/s; speculative %.2fx\n", to_match, n,
			        greedy ? "" : " (sampled: not expected)", to_tps,
			        to_tps > 0 ? tps / to_tps : 0.0);
		cli_ctrl_report(f, e, &st, trace, trace ? st.n_iters : 0, false);
	}
	free(trace);
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "specwright run: error: %s\n", err.msg);
out:
	job_close(&j);
	free(out);
	free(ref);
	return rc;
}

int cli_engine_profile(cli_opts *o)
{
	if (o->random_weights)
		return cli_engine_random(o, true);
	sw_err err = {0};
	engine_job j;
	int rc = 1;
	if (job_open(&j, o, &err))
		goto out_err;
	rc = rt_engine_profile(j.e, j.ids, j.n_prompt, o->max_new, o->rows, &j.samp,
	                       o->json ? stdout : stderr, &err);
	if (rc)
		goto out_err;
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "specwright profile: error: %s\n", err.msg);
	rc = 1;
out:
	job_close(&j);
	return rc;
}

/* ---- bench: the memory roofline and the cost of a verify ---- */

typedef struct bw_job {
	const uint64_t *buf;
	size_t words;
	uint64_t sums[256];
} bw_job;

static void bw_part(void *ctx, int part, int n_parts)
{
	bw_job *b = ctx;
	const size_t w0 = b->words * (size_t)part / (size_t)n_parts;
	const size_t w1 = b->words * (size_t)(part + 1) / (size_t)n_parts;
	uint64_t s[8] = {0};
	for (size_t i = w0; i + 8 <= w1; i += 8)
		for (int l = 0; l < 8; l++)
			s[l] += b->buf[i + l];
	b->sums[part % 256] += s[0] ^ s[1] ^ s[2] ^ s[3] ^ s[4] ^ s[5] ^ s[6] ^ s[7];
}

/* The machine's streaming read bandwidth in bytes/s: a 512 MiB buffer (16x
 * a 32 MiB LLC) read by every thread of the host pool, the median of 5
 * passes after a memset that faults the pages in. *per_cpu: the same bytes
 * per CPU-second of the readers (on a shared machine the wall-clock rate
 * includes the time other processes held the cores; this one does not). */
static double read_bandwidth(int *threads, double *per_cpu)
{
	const size_t bytes = (size_t)512 << 20;
	bw_job b = {.buf = malloc(bytes), .words = bytes / 8};
	double t[5], c[5];
	*threads = hp_threads();
	*per_cpu = 0;
	if (!b.buf)
		return 0;
	memset((void *)b.buf, 1, bytes);
	for (int r = 0; r < 5; r++) {
		const double t0 = sw_now_s(), c0 = sw_cpu_s();
		hp_run(bw_part, &b, 4 * *threads);
		t[r] = sw_now_s() - t0;
		c[r] = sw_cpu_s() - c0;
	}
	free((void *)b.buf);
	*per_cpu = bytes / cli_median(c, 5);
	return bytes / cli_median(t, 5);
}

/* Replays the ops of one engine phase eagerly, `reps` times, each replay
 * synchronised: its median wall and CPU seconds. rows > 0: the phase runs
 * as a rows region capped at that many rows (device.h; host: every op of
 * the tree forward at `rows` rows, the one-row forward target-only decoding
 * runs; a device without regions runs the planned shape); 0: the planned
 * shape. gemm_only skips the kernels. The replay changes no state the next
 * generate reads: phases after it (accept, commit) do not run, and a
 * generate starts from its prefill. */
static int phase_replay(rt_engine *e, int ph, int rows, bool gemm_only, int reps, double *wall,
                        double *cpu, sw_err *err)
{
	double w[16], c[16];
	rt_dev *d = e->dev;
	const rt_dptr tok = rt_engine_buf_addr(e, "tree_tokens");
	const bool region = rows > 0 && d->ops->rows_begin && tok &&
	                    e->man->phases[ph].rows == e->man->n_nodes;
	reps = reps > 16 ? 16 : reps;
	for (int r = 0; r < reps; r++) {
		const double t0 = sw_now_s(), c0 = sw_cpu_s();
		int rc = region ? d->ops->rows_begin(d, tok, e->man->n_nodes, rows, err) : 0;
		for (int i = e->ph_ops[ph].first; !rc && i < e->ph_ops[ph].first + e->ph_ops[ph].n; i++)
			if (e->ops[i].kind == RT_OP_GEMM || !gemm_only)
				rc = d->ops->launch(d, &e->ops[i], err);
		if (!rc && region)
			rc = d->ops->rows_end(d, err);
		if (rc || (rc = d->ops->sync(d, err)))
			return rc;
		w[r] = sw_now_s() - t0;
		c[r] = sw_cpu_s() - c0;
	}
	*wall = cli_median(w, reps);
	*cpu = cli_median(c, reps);
	return 0;
}

/* The verify forward's cost by rows (1, 2, 4, 8, 16, 26 and the planned
 * rows, those the tree has): the tree forward and its GEMMs alone replayed
 * as a rows region (phase_replay, 5 each, medians) at the context the last
 * generate left, every node made present (the bench's last step: the next
 * generate rewrites the tokens), wall-clock and per CPU-second, each against
 * one row. What the draft-length controller's "measure" table
 * (runtime/engine/ctrl.c) times at bind for a chain, on the engine's own
 * dtype and device. */
static int verify_rows_table(rt_engine *e, int ph, int planned, sw_err *err)
{
	int rows[8], n = 0;
	static const int want[] = {1, 2, 4, 8, 16, 26};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (want[i] < planned)
			rows[n++] = want[i];
	rows[n++] = planned;
	double fw[8], fc[8], gw[8], gc[8];
	/* every node present (token 0, as the controller's measurement does):
	 * a region runs the rows up to the last present node */
	int32_t tok[RT_ENGINE_MAX_NODES] = {0};
	int rc = e->dev->ops->upload(e->dev, rt_engine_buf_addr(e, "tree_tokens"), tok,
	                             sizeof(*tok) * (size_t)e->man->n_nodes, err);
	if (rc || (rc = e->dev->ops->sync(e->dev, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		if ((rc = phase_replay(e, ph, rows[i], false, 5, &fw[i], &fc[i], err)) ||
		    (rc = phase_replay(e, ph, rows[i], true, 5, &gw[i], &gc[i], err)))
			return rc;
	}
	printf("\nverify cost by rows (%s, engine dtype %s): the tree forward and its GEMMs alone, "
	       "medians of 5 replays, ms and against 1 row\n\n| rows | forward ms | x | per CPU-s "
	       "ms | x | GEMMs ms | x | GEMMs per CPU-s ms | x |\n|---|---|---|---|---|---|---|---|"
	       "---|\n", e->man->name, e->man->dtype == RT_GGUF_A8 ? "gguf_a8" : e->man->dtype == RT_Q8_0_A8
	       ? "q8_0_a8" : e->man->dtype == RT_Q8_0 ? "q8_0" : e->man->dtype == RT_BF16 ? "bf16"
	       : "fp16");
	for (int i = 0; i < n; i++)
		printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", rows[i],
		       1e3 * fw[i], fw[0] > 0 ? fw[i] / fw[0] : 0, 1e3 * fc[i],
		       fc[0] > 0 ? fc[i] / fc[0] : 0, 1e3 * gw[i], gw[0] > 0 ? gw[i] / gw[0] : 0,
		       1e3 * gc[i], gc[0] > 0 ? gc[i] / gc[0] : 0);
	return 0;
}

/* A generate of max_new tokens after one of a single token (the same
 * prefill, whose CPU time the second one's minus the first one's leaves
 * out): *cpu_tok is the decode's tokens per CPU-second. Returns the
 * second's token count, or < 0 with err. */
static int timed_generate(rt_engine *e, rt_engine_run *r, int max_new, int32_t *out,
                          rt_engine_stats *st, double *cpu_tok, sw_err *err)
{
	r->max_new = 1;
	double c0 = sw_cpu_s();
	const int n1 = rt_engine_generate(e, r, out, st, err);
	const double cpu1 = sw_cpu_s() - c0;
	if (n1 < 0)
		return n1;
	r->max_new = max_new;
	c0 = sw_cpu_s();
	const int n = rt_engine_generate(e, r, out, st, err);
	const double cpuM = sw_cpu_s() - c0;
	*cpu_tok = n > n1 && cpuM - cpu1 > 0 ? (n - n1) / (cpuM - cpu1) : 0;
	return n;
}

/* Bytes a target-only decode step reads: the engine's weight buffers (the
 * tied embedding is read whole by the lm head; its one-row lookup is
 * negligible, and so is the embedding of an engine whose LM head is a
 * buffer of its own, a q8_0 engine's) plus K and V of `ctx` positions, at
 * kv_bytes each. f32: every weight as fp32 (the host reference's). */
/* The weights a target-only step reads, in words: "fp16", "q8_0 (int8 GEMM
 * inputs)", or for gguf_a8 the GGUF block types of the target's GEMM
 * weights as the engine keeps them ("gguf_a8: q4_1 + q8_0 blocks, int8 GEMM
 * inputs"), into out. */
static const char *weights_label(const rt_engine *e, char *out, size_t n)
{
	if (e->man->dtype != RT_GGUF_A8) {
		snprintf(out, n, "%s", e->man->dtype == RT_Q8_0 ? "q8_0 weights"
		         : e->man->dtype == RT_Q8_0_A8 ? "q8_0 weights (int8 GEMM inputs)"
		         : e->man->dtype == RT_BF16 ? "bf16 weights" : "fp16 weights");
		return out;
	}
	bool seen[32] = {false};
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (strcmp(b->kind, "weight") || strncmp(b->name, "target.", 7))
			continue;
		for (int l = 0; l < (b->ltype ? b->shape[0] : 1); l++) {
			const int t = b->ltype ? b->ltype[l] : rt_manifest_wtype(b->dtype);
			if (t >= 0 && t < 32)
				seen[t] = true;
		}
	}
	size_t k = (size_t)snprintf(out, n, "gguf_a8: the file's own");
	const char *sep = " ";
	for (int t = 0; t < 32 && k < n; t++)
		if (seen[t] && hg_gguf_name(t)) {
			k += (size_t)snprintf(out + k, n - k, "%s%s", sep, hg_gguf_name(t));
			sep = " + ";
		}
	if (k < n)
		snprintf(out + k, n - k, " blocks (int8 GEMM inputs), fp16 embedding row");
	return out;
}

static double step_bytes(const rt_engine *e, bool f32, int kv_bytes, double ctx)
{
	double w = 0;
	const bool own_head = rt_engine_buf_addr(e, "target.lm_head") != 0;
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (strcmp(b->kind, "weight") || strncmp(b->name, "target.", 7) ||
		    (own_head && !strcmp(b->name, "target.tok_embd")))
			continue;
		double n = 1;
		for (int d = 0; d < b->rank; d++)
			n *= (double)b->shape[d];
		if (!f32 && b->ltype) { /* gguf_a8, per-layer types: each layer reads its own blocks */
			for (int l = 0; l < b->shape[0]; l++) {
				const int t = b->ltype[l];
				w += n / (double)b->shape[0] / (double)hg_gguf_block(t) *
				     (double)hg_gguf_block_bytes(t);
			}
			continue;
		}
		w += f32 ? 4 * n : (double)b->bytes;
	}
	const rt_engine_shape *c = &e->man->tcfg;
	return w + 2.0 * c->n_layers * c->n_kv_heads * c->head_dim * kv_bytes * ctx;
}

/* Single-quotes s for sh; false when s holds a quote (not passed on). */
static bool sh_quote(char *out, size_t n, const char *s)
{
	if (strchr(s, '\'') || strlen(s) + 3 > n)
		return false;
	snprintf(out, n, "'%s'", s);
	return true;
}

/* The llama.cpp side-by-side (tests/reference/llamacpp_bench.py, run with
 * the llama-cpp-python build that `make check-reference` leaves in REF):
 * the target's GGUF as shipped, its F16 and Q8_0 copies (written into REF
 * once), each target-only and with llama.cpp's prompt lookup, on the same
 * prompt ids, max_new tokens, the host pool's thread count. Prints its
 * table, then the engine's rates against each row. eng[4]: the engine's
 * target-only and speculative tok/s, wall-clock and per CPU-second. */
static int llamacpp_side(const char *ref, const char *model, const char *ids, int max_new,
                         int threads, const double eng[4], sw_err *err)
{
	char q[4][1024], cmd[8192], line[512], label[16][96];
	double wall[16], cpu[16];
	int n = 0;
	const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
	char f16[1024], q8[1024];
	snprintf(f16, sizeof(f16), "%s/%.*s-F16.gguf", ref, (int)strcspn(base, "."), base);
	snprintf(q8, sizeof(q8), "%s/%.*s-Q8_0.gguf", ref, (int)strcspn(base, "."), base);
	if (!sh_quote(q[0], sizeof(q[0]), ref) || !sh_quote(q[1], sizeof(q[1]), model) ||
	    !sh_quote(q[2], sizeof(q[2]), f16) || !sh_quote(q[3], sizeof(q[3]), q8) ||
	    strchr(ids, '\''))
		return sw_errf(err, SW_EINVAL, "$SW_LLAMACPP_REF %s / model %s: a path with a quote", ref,
		               model);
	const int len = snprintf(cmd, sizeof(cmd),
	         "R=%s; [ -x \"$R/venv/bin/python\" ] && [ -f \"$R/venv/.ok\" ] || { echo \"no "
	         "llama-cpp-python build in $R (make check-reference REF_DIR=$R builds it)\" >&2; "
	         "exit 3; }; PYTHONPATH=\"$(echo \"$R\"/llama_cpp_python-*/vendor/llama.cpp/gguf-py):"
	         "tests/reference\" \"$R/venv/bin/python\" tests/reference/llamacpp_bench.py '%s' "
	         "%s %s %s --f16 %s %s --q8 %s %s --lookup --machine --n-gen %d --threads %d",
	         q[0], ids, q[1], q[2], q[3], q[1], q[2], q[1], q[3], max_new, threads);
	if (len < 0 || (size_t)len >= sizeof(cmd))
		return sw_errf(err, SW_EINVAL, "$SW_LLAMACPP_REF %s / model %s: paths too long", ref, model);
	fprintf(stderr, "bench: llama.cpp side by side (%s) ...\n", ref);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	if (!p)
		return sw_errf(err, SW_EIO, "cannot run tests/reference/llamacpp_bench.py");
	printf("\n");
	while (fgets(line, sizeof(line), p)) {
		char lb[96];
		double w, c;
		if (sscanf(line, "ROW\t%95[^\t]\t%lf\t%lf", lb, &w, &c) == 3) {
			if (n < 16) {
				snprintf(label[n], sizeof(label[n]), "%s", lb);
				wall[n] = w;
				cpu[n++] = c;
			}
		} else {
			fputs(line, stdout);
		}
	}
	const int st = pclose(p);
	if (st != 0 || n == 0)
		return sw_errf(err, SW_EIO, "tests/reference/llamacpp_bench.py failed (status %d, %d rows)",
		               st, n);
	printf("\n| llama.cpp row | engine target-only vs it: wall-clock | per CPU-second | engine "
	       "speculative vs it: wall-clock | per CPU-second |\n|---|---|---|---|---|\n");
	for (int i = 0; i < n; i++)
		printf("| %s | %.2fx | %.2fx | %.2fx | %.2fx |\n", label[i],
		       wall[i] > 0 ? eng[0] / wall[i] : 0, cpu[i] > 0 ? eng[1] / cpu[i] : 0,
		       wall[i] > 0 ? eng[2] / wall[i] : 0, cpu[i] > 0 ? eng[3] / cpu[i] : 0);
	return 0;
}

/* `specwright bench ENGINE_DIR`: the engine against the host fp32
 * target-only reference over prompts cut from a corpus: median tok/s of
 * each, the median per-prompt ratio, tau, acceptance by depth, host overhead
 * per iteration, and for greedy engines how many prompts kept the
 * reference's tokens. Both decoders run in this process, one after the
 * other on each prompt.
 *
 * Then (issue 15) the costs behind those rates: the machine's read
 * bandwidth, measured first; per decoder the decode-only tok/s wall-clock
 * and per CPU-second, and the share of the memory roofline (bytes a
 * target-only step reads / bandwidth, over the measured time per token: a
 * speculative decoder can pass 100%). The engine's target-only rate is a
 * target-only generate on the same engine and device (rt_engine_run
 * .target_only: no drafting, one target forward a token, of one row where
 * the device sizes its tree forward: host), whose tokens must equal the
 * speculative run's; the verify-cost line sets the tree forward at its
 * planned rows against it at one row. The decode CPU time of either is a
 * generate of max_new tokens minus one of a single token (the same
 * prefill); speculative and target-only run alternately $SW_BENCH_REPS
 * times a prompt (default 3) and each rate is the median. $SW_BENCH_IDS
 * names a file to receive the prompts' token ids, one prompt a line, for
 * tests/reference/llamacpp_bench.py. */
#define BENCH_MAX_REPS 15

int cli_engine_bench(cli_opts *o)
{
	sw_err err = {0};
	engine_job j;
	int rc = 1, np = 0;
	char **prompts = NULL;
	int32_t *out = NULL, *ref = NULL, *ids = NULL;
	double *tps = NULL, *rtps = NULL, *ratio = NULL, *ovh = NULL;
	FILE *idf = NULL;
	char idtmp[64] = ""; /* the prompt ids for the llama.cpp side-by-side, when no $SW_BENCH_IDS */
	const char *corpus = NULL;
	memset(&j, 0, sizeof(j));
	sw_err rerr = {0};
	if ((np = cli_bench_prompts(o, &prompts, &corpus, &rerr)) < 1) {
		fprintf(stderr, "specwright bench: %s\n", rerr.msg);
		np = 0;
		goto out;
	}
	cli_opts jo = *o;
	jo.prompt = prompts[0];
	if (job_open(&j, &jo, &err))
		goto out_err;
	const char *idp = getenv("SW_BENCH_IDS"), *lref = getenv("SW_LLAMACPP_REF");
	if (lref && *lref && !(idp && *idp)) { /* the side-by-side needs the ids: a temp file */
		snprintf(idtmp, sizeof(idtmp), "/tmp/specwright-bench-ids-XXXXXX");
		int fd = mkstemp(idtmp);
		if (fd < 0 || !(idf = fdopen(fd, "w"))) {
			sw_errf(&err, SW_EIO, "%s: cannot write a temporary file", idtmp);
			idtmp[0] = 0;
			goto out_err;
		}
		idp = idtmp;
	} else if (idp && *idp && !(idf = fopen(idp, "w"))) {
		sw_errf(&err, SW_EIO, "%s ($SW_BENCH_IDS): cannot write", idp);
		goto out_err;
	}
	int bw_threads = 1;
	double bwc = 0;
	const double bw = read_bandwidth(&bw_threads, &bwc);
	printf("memory read bandwidth: %.2f GB/s wall-clock, %.2f GB per CPU-second (512 MiB "
	       "streamed by %d threads, median of 5)\n\n", bw / 1e9, bwc / 1e9, bw_threads);
	size_t longest = 0; /* ids: at most one a byte, plus the chat template's */
	for (int i = 0; i < np; i++)
		longest = strlen(prompts[i]) > longest ? strlen(prompts[i]) : longest;
	const int M = o->max_new, cap = (int)longest + 4096;
	enum { S_TPS, S_RTPS, S_RATIO, S_OVH, S_RDEC, S_RCPU, S_EDEC, S_ECPU, S_T1W, S_T1C, S_VW,
	       S_G1, S_GT, S_CTX, S_TOW, S_TOC, S_SPW, S_SPC, S_VC, S_G1C, S_GTC, S_N };
	out = malloc(sizeof(*out) * (size_t)(2 * M + 2));
	ref = malloc(sizeof(*ref) * (size_t)(M + 1));
	ids = malloc(sizeof(*ids) * (size_t)cap);
	tps = calloc((size_t)np * S_N, sizeof(*tps));
	if (!out || !ref || !ids || !tps) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}
	double *sv[S_N];
	for (int k = 0; k < S_N; k++)
		sv[k] = tps + (size_t)k * np;
	rtps = sv[S_RTPS];
	ratio = sv[S_RATIO];
	ovh = sv[S_OVH];
	const rt_engine *e = j.e;
	const bool greedy = j.samp.temperature <= 0.0f;
	const int32_t eos = rt_token_eos(j.s.tok);
	const int ph_verify = rt_manifest_phase_find(e->man, "verify");
	int verify_rows = 0;
	for (int i = 0; ph_verify >= 0 && i < e->ph_ops[ph_verify].n; i++) {
		const rt_op *op = &e->ops[e->ph_ops[ph_verify].first + i];
		if (op->kind == RT_OP_GEMM && op->m > verify_rows)
			verify_rows = (int)op->m;
	}
	uint64_t tried[RT_ENGINE_MAX_DEPTH] = {0}, acc[RT_ENGINE_MAX_DEPTH] = {0};
	long toks = 0, iters = 0;
	const char *rep_env = getenv("SW_BENCH_REPS");
	char *rep_end = NULL;
	const long reps_l = rep_env && *rep_env ? strtol(rep_env, &rep_end, 10) : 3;
	const int reps = (int)reps_l;
	if (reps_l < 1 || reps_l > BENCH_MAX_REPS || (rep_end && *rep_end)) {
		sw_errf(&err, SW_EINVAL, "$SW_BENCH_REPS: expected 1 to %d, found \"%.20s\"",
		        BENCH_MAX_REPS, rep_env);
		goto out_err;
	}
	int same = 0, used = 0, to_same = 0;
	int32_t *to_out = NULL; /* target-only tokens (the second half of out) */
	for (int i = 0; i < np; i++) {
		fprintf(stderr, "bench: prompt %d of %d (engine, then the fp32 reference) ...\n", i + 1, np);
		free(j.ids);
		j.ids = NULL;
		int n_prompt = cli_encode_prompt(&j.s, prompts[i],
		                                 o->chat < 0 ? rt_tokenizer_has_chat(j.s.tok) : o->chat, ids,
		                                 cap, &err);
		if (n_prompt < 0)
			goto out_err;
		if (n_prompt + e->man->n_nodes + M > e->man->max_ctx)
			continue; /* does not fit the engine's context: skipped, counted below */
		j.ids = malloc(sizeof(*j.ids) * (size_t)n_prompt);
		if (!j.ids) {
			sw_errf(&err, SW_ENOMEM, "out of memory");
			goto out_err;
		}
		memcpy(j.ids, ids, sizeof(*ids) * (size_t)n_prompt);
		j.n_prompt = n_prompt;
		if (idf) {
			for (int t = 0; t < n_prompt; t++)
				fprintf(idf, "%s%d", t ? " " : "", ids[t]);
			fprintf(idf, "\n");
		}
		rt_engine_run r = {.prompt = j.ids, .n_prompt = n_prompt, .max_new = 1, .eos = eos,
		                   .is_eog = cli_is_eog, .eog_user = j.s.tok, .samp = &j.samp};
		rt_engine_stats st, st_to;
		double ecpu_tok = 0, tcpu_tok = 0;
		int8_t btrace[1024];
		r.trace = cli_ctrl_trace_on() ? btrace : NULL;
		r.trace_cap = (int)sizeof(btrace);
		/* speculative and target-only alternated reps times (SW_BENCH_REPS,
		 * default 3): the median of each decoder's rates, so a burst of load
		 * on a shared machine moves one sample, not the ratio */
		double es_c[BENCH_MAX_REPS], es_w[BENCH_MAX_REPS], to_c[BENCH_MAX_REPS],
		       to_w[BENCH_MAX_REPS];
		int n = 0, tn = 0;
		to_out = out + M + 1;
		for (int rep = 0; rep < reps; rep++) {
			n = timed_generate(j.e, &r, M, out, &st, &es_c[rep], &err);
			if (n < 0)
				goto out_err;
			es_w[rep] = st.t_decode > 0 ? n / st.t_decode : 0;
			/* target-only on the same engine and device: one row a token */
			rt_engine_run rt = r;
			rt.target_only = true;
			rt.trace = NULL;
			tn = timed_generate(j.e, &rt, M, to_out, &st_to, &to_c[rep], &err);
			if (tn < 0)
				goto out_err;
			to_w[rep] = st_to.t_decode > 0 ? tn / st_to.t_decode : 0;
		}
		ecpu_tok = cli_median(es_c, reps);
		tcpu_tok = cli_median(to_c, reps);
		to_same += tn == n && !memcmp(out, to_out, sizeof(*out) * (size_t)n);
		sv[S_TOW][used] = cli_median(to_w, reps);
		sv[S_TOC][used] = tcpu_tok;
		double t_ref = 0;
		ref_decode rd;
		int n_ref = reference_greedy(&j, n, eos, ref, &t_ref, &rd, NULL, NULL, &err);
		if (n_ref < 0)
			goto out_err;
		if (ph_verify >= 0 &&
		    (phase_replay(j.e, ph_verify, 0, false, 5, &sv[S_VW][used], &sv[S_VC][used], &err) ||
		     phase_replay(j.e, ph_verify, 1, false, 5, &sv[S_T1W][used], &sv[S_T1C][used],
		                  &err) ||
		     phase_replay(j.e, ph_verify, 0, true, 5, &sv[S_GT][used], &sv[S_GTC][used], &err) ||
		     phase_replay(j.e, ph_verify, 1, true, 5, &sv[S_G1][used], &sv[S_G1C][used], &err)))
			goto out_err;
		tps[used] = cli_median(es_w, reps);
		rtps[used] = t_ref > 0 ? n_ref / t_ref : 0;
		ratio[used] = rtps[used] > 0 ? tps[used] / rtps[used] : 0;
		ovh[used] = st.host_overhead_us;
		sv[S_RDEC][used] = rd.wall > 0 ? rd.n_fed / rd.wall : 0;
		sv[S_RCPU][used] = rd.cpu > 0 ? rd.n_fed / rd.cpu : 0;
		sv[S_EDEC][used] = tps[used];
		sv[S_ECPU][used] = ecpu_tok;
		sv[S_CTX][used] = n_prompt + 0.5 * n;
		sv[S_SPW][used] = sv[S_TOW][used] > 0 ? sv[S_EDEC][used] / sv[S_TOW][used] : 0;
		sv[S_SPC][used] = sv[S_TOC][used] > 0 ? sv[S_ECPU][used] / sv[S_TOC][used] : 0;
		fprintf(stderr, "bench: prompt %d: tau %.3f, speculative vs target-only %.2fx wall-clock, "
		        "%.2fx per CPU-second\n", i + 1, st.n_iters ? (double)n / st.n_iters : 0.0,
		        sv[S_SPW][used], sv[S_SPC][used]);
		cli_ctrl_report(stderr, e, &st, r.trace, r.trace && st.n_iters < r.trace_cap ? st.n_iters
		                : r.trace_cap, false);
		used++;
		same += greedy && n == n_ref && !memcmp(out, ref, sizeof(*out) * (size_t)n);
		toks += n;
		iters += st.n_iters;
		for (int d = 0; d < e->man->depth && d < RT_ENGINE_MAX_DEPTH; d++) {
			tried[d] += st.pos_tried[d];
			acc[d] += st.pos_accepted[d];
		}
	}
	printf("### Engine %s on %s: %d of %d prompts from %s (%s; the rest exceed max_context %d), "
	       "%d new tokens\n\n", e->man->name, j.dev->desc, used, np, corpus,
	       o->prompt_set ? "verbatim" : "cut, after an instruction", e->man->max_ctx, M);
	printf("| engine | backend | median tok/s | reference tok/s | median speedup | tau | "
	       "acceptance by depth | host overhead us/iter | greedy == reference |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %s | %.2f | %.2f | %.2fx | %.3f | ", e->man->name, j.dev->desc,
	       cli_median(tps, used),
	       cli_median(rtps, used), cli_median(ratio, used), iters ? (double)toks / iters : 0.0);
	for (int d = 0; d < e->man->depth && d < 6; d++)
		printf("%s%.3f", d ? " " : "", tried[d] ? (double)acc[d] / tried[d] : 0.0);
	printf(" | %.2f | ", cli_median(ovh, used));
	if (greedy)
		printf("%d/%d |\n", same, used);
	else
		printf("- |\n");

	/* the costs: decode only (prefill excluded), medians over the prompts */
	const double ctx = cli_median(sv[S_CTX], used);
	const double bytes16 = step_bytes(e, false, 2, ctx), bytes32 = step_bytes(e, true, 4, ctx);
	const double t1w = cli_median(sv[S_T1W], used), t1c = cli_median(sv[S_T1C], used);
	const double edec = cli_median(sv[S_EDEC], used), rdec = cli_median(sv[S_RDEC], used);
	char wlabel[160];
	const double kvb = step_bytes(e, false, 2, ctx) - step_bytes(e, false, 2, 0);
	printf("\nDecode only, medians over %d prompts; roofline: a target-only step reads %.1f MB "
	       "a token (%s: %.1f MB; fp16 K/V at context %.0f: %.1f MB; the fp32 reference %.1f "
	       "MB) at %.2f GB/s: %.1f tok/s (%.1f for the reference)\n\n", used, bytes16 / 1e6,
	       weights_label(e, wlabel, sizeof(wlabel)), (bytes16 - kvb) / 1e6, ctx, kvb / 1e6,
	       bytes32 / 1e6, bw / 1e9, bw / bytes16, bw / bytes32);
	const double rcpu = cli_median(sv[S_RCPU], used), ecpu = cli_median(sv[S_ECPU], used);
	printf("| decoder | tok/s | tok per CPU-s | share of the roofline: wall-clock | per "
	       "CPU-second |\n|---|---|---|---|---|\n");
	printf("| reference fp32, target only (host ctx) | %.2f | %.2f | %.0f%% | %.0f%% |\n", rdec,
	       rcpu, 100.0 * rdec * bytes32 / bw, 100.0 * rcpu * bytes32 / bwc);
	const double tow = cli_median(sv[S_TOW], used), toc = cli_median(sv[S_TOC], used);
	printf("| engine target only (same engine and device, one forward of the present rows a "
	       "token) | %.2f | %.2f | %.0f%% | %.0f%% |\n", tow, toc, 100.0 * tow * bytes16 / bw,
	       100.0 * toc * bytes16 / bwc);
	printf("| engine %s (speculative) | %.2f | %.2f | %.0f%% | %.0f%% |\n", e->man->name, edec, ecpu,
	       100.0 * edec * bytes16 / bw, 100.0 * ecpu * bytes16 / bwc);
	printf("\nspeculative vs target-only on the engine: median of the per-prompt ratios %.2fx "
	       "wall-clock, %.2fx per CPU-second; ratio of the medians %.2fx, %.2fx; target-only "
	       "tokens == speculative tokens on %d of %d prompts\n", cli_median(sv[S_SPW], used),
	       cli_median(sv[S_SPC], used), tow > 0 ? edec / tow : 0, toc > 0 ? ecpu / toc : 0,
	       to_same, used);
	if (ph_verify >= 0) {
		const double vw = cli_median(sv[S_VW], used), g1 = cli_median(sv[S_G1], used);
		const double gt = cli_median(sv[S_GT], used);
		printf("\nverify cost: the tree forward (phase verify) at its %d rows %.2f ms vs at 1 row "
		       "%.2f ms (%.1f tok/s per CPU-second): %.2fx; its GEMMs alone %.2f ms vs %.2f ms: "
		       "%.2fx\n", verify_rows, 1e3 * vw, 1e3 * t1w, t1c > 0 ? 1 / t1c : 0,
		       t1w > 0 ? vw / t1w : 0, 1e3 * gt, 1e3 * g1, g1 > 0 ? gt / g1 : 0);
		/* the same in CPU seconds (every thread's), which a loaded machine
		 * disturbs less than wall-clock */
		const double vc = cli_median(sv[S_VC], used), gtc = cli_median(sv[S_GTC], used);
		const double g1c = cli_median(sv[S_G1C], used);
		printf("verify cost per CPU-second: %d rows %.2f ms vs 1 row %.2f ms: %.2fx; its GEMMs "
		       "alone %.2f ms vs %.2f ms: %.2fx\n", verify_rows, 1e3 * vc, 1e3 * t1c,
		       t1c > 0 ? vc / t1c : 0, 1e3 * gtc, 1e3 * g1c, g1c > 0 ? gtc / g1c : 0);
		if (j.dev->ops->rows_begin && verify_rows_table(j.e, ph_verify, verify_rows, &err))
			goto out_err;
	}
	if (lref && *lref) {
		if (idf && fclose(idf)) {
			idf = NULL;
			sw_errf(&err, SW_EIO, "%s: write failed", idp);
			goto out_err;
		}
		idf = NULL;
		const double eng[4] = {tow, toc, edec, ecpu};
		if (llamacpp_side(lref, j.w.target, idp, M, bw_threads, eng, &err))
			goto out_err;
	}
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "specwright bench: error: %s\n", err.msg);
	rc = 1;
out:
	if (idf)
		fclose(idf);
	if (idtmp[0])
		unlink(idtmp);
	job_close(&j);
	for (int i = 0; prompts && i < np; i++)
		free(prompts[i]);
	free(prompts);
	free(out);
	free(ref);
	free(ids);
	free(tps);
	return rc;
}
