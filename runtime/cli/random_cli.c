/* `specwright run|profile ENGINE_DIR --random-weights SEED [-P N | --ids
 * IDS]`: timing only. The engine's weights are filled on the device from
 * the seed (rt_engine_bind_random), the prompt is --ids as given or N token
 * ids drawn from the same generator (Philox stream lane 0xffffffff, which
 * no buffer uses: id = word % vocab), no model file or tokenizer is read
 * and no text is printed; an id map (an EAGLE-3 head's d2t/t2d) is a
 * synthetic valid one, said so; run reports tok/s, tau, acceptance and the
 * host overhead per iteration (--target-only: one target row a token),
 * profile its per-op table. run --dump-logits FILE writes the target's
 * logits of the first and the last iteration's root row, for the GPU
 * check's comparison with an fp32 forward over the same weights
 * (tests/gpu/random_ref.py). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/output.h"
#include "engine/random_weights.h"
#include "gen/jit/emu_build.h" /* gen_emu_module_build, for host-emulate */
#include "kernels/philox.h"

#define PROMPT_LANE 0xffffffffu
#define DEFAULT_PROMPT 32

/* --dump-logits: the target's logits (buffer "logits", f32 (rows, V)) of
 * row 0, the tree's root, read after every iteration: the first iteration's
 * row is the next-token logits of the prompt, the last one's those of the
 * prompt and every token emitted before it (with --target-only, the last of
 * -n N iterations follows N - 1 tokens). pos[] holds each row's context
 * length. */
typedef struct logit_dump {
	rt_engine *e;
	rt_dptr at;
	int64_t V;
	float *rows;              /* (2, V): the first iteration's, the latest's */
	int n_rows, pos[2], done; /* done: tokens emitted before this iteration */
	int rc;
	sw_err err;
} logit_dump;

static int dump_tokens(void *user, const int32_t *tok, int n)
{
	(void)tok;
	logit_dump *d = user;
	const int slot = d->n_rows ? 1 : 0;
	d->rc = d->e->dev->ops->download(d->e->dev, d->rows + slot * d->V, d->at,
	                                 sizeof(*d->rows) * (size_t)d->V, &d->err);
	d->pos[slot] = d->done;
	d->n_rows = slot + 1;
	d->done += n;
	return d->rc != 0;
}

/* The engine's logits buffer, checked: f32, (rows, V) with V the target's
 * vocabulary. */
static int dump_open(logit_dump *d, rt_engine *e, int n_prompt, sw_err *err)
{
	const int b = rt_manifest_buf_find(e->man, "logits");
	const rt_engine_buf *lb = b >= 0 ? &e->man->bufs[b] : NULL;
	if (!lb || strcmp(lb->dtype, "f32") || lb->rank != 2 || lb->shape[1] != e->man->tcfg.vocab)
		return sw_errf(err, SW_EINVAL, "%s/engine.json: --dump-logits reads buffer \"logits\" as f32 "
		               "(rows, %d): found %s%s%s", e->man->dir, e->man->tcfg.vocab,
		               lb ? "dtype " : "no such buffer", lb ? lb->dtype : "", lb ? " of another shape" : "");
	memset(d, 0, sizeof(*d));
	d->e = e;
	d->at = rt_engine_buf_addr(e, "logits");
	d->V = lb->shape[1];
	d->done = n_prompt;
	if (!(d->rows = malloc(sizeof(*d->rows) * 2 * (size_t)d->V)))
		return sw_errf(err, SW_ENOMEM, "out of memory");
	return 0;
}

/* The rows as a NumPy .npy file (format 1.0: magic, header length, a
 * Python dict padded to 64 bytes; little-endian f32, C order). */
static int dump_write(const logit_dump *d, sw_outfile *of, sw_err *err)
{
	char hdr[128];
	int n = snprintf(hdr, sizeof(hdr), "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %lld), }",
	                 d->n_rows, (long long)d->V);
	const int total = (10 + n + 1 + 63) / 64 * 64;
	memset(hdr + n, ' ', (size_t)(total - 10 - n - 1));
	hdr[total - 10 - 1] = '\n';
	const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
	                                 (unsigned char)((total - 10) & 0xff),
	                                 (unsigned char)((total - 10) >> 8)};
	sw_outfile_write(of, magic, sizeof(magic));
	sw_outfile_write(of, hdr, (size_t)(total - 10));
	sw_outfile_write(of, d->rows, sizeof(*d->rows) * (size_t)d->n_rows * (size_t)d->V);
	return sw_outfile_commit(of, err);
}

static int refuse_model_opts(const cli_opts *o, const char *dir, sw_err *err)
{
	static const char *const models[] = {"--model", "--draft-model", "--tokenizer", "--chat",
	                                     "--no-chat", "--no-baseline", NULL};
	const char *a = cli_given(o, models);
	if (a)
		return sw_errf(err, SW_EINVAL, "%s: %s cannot apply with --random-weights (timing only: "
		               "no model, no tokenizer, no text, no reference run)", dir, a);
	return 0;
}

/* Whether path would land in the engine directory dir (said on stderr). */
static bool inside_engine(const char *path, const char *dir)
{
	char d[PATH_MAX], p[PATH_MAX], parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = 0;
	else
		*slash = 0;
	if (!realpath(dir, d) || !realpath(parent, p) || strcmp(d, p))
		return false;
	fprintf(stderr, "specwright run: error: --dump-logits %s: inside the engine directory %s "
	        "(its files are the build's own): give a path outside it\n", path, dir);
	return true;
}

int cli_engine_random(cli_opts *o, bool profile)
{
	const char *cmd = profile ? "profile" : "run", *dir = o->model;
	sw_err err = {0};
	rt_engine *e = NULL;
	rt_dev *dev = NULL;
	int32_t *ids = NULL, *out = NULL;
	int rc = 1;
	rt_engine_sampling samp;
	logit_dump dump = {0};
	sw_outfile of = {0};
	bool of_open = false;
	/* the output's place checked before the work: not an input, and not
	 * inside the engine directory (its files are the build's own) */
	if (o->dump_logits && (cli_output_clashes(o, o->dump_logits, "--dump-logits") ||
	                       inside_engine(o->dump_logits, dir)))
		return 2;
	if (!(e = rt_engine_load(dir, &err)) || cli_engine_refuse_fixed(e->man, o, dir, &err) ||
	    refuse_model_opts(o, dir, &err) || cli_engine_sampling(e, o, dir, &samp, &err))
		goto out_err;
	int P = o->prompt_len ? o->prompt_len : DEFAULT_PROMPT;
	if (o->ids) { /* the prompt as given, each id inside the engine's vocabulary */
		if ((P = cli_parse_ids(o->ids, e->man->tcfg.vocab, NULL, &err)) < 0)
			goto out_err;
	}
	if (P + 1 >= e->man->max_ctx) {
		sw_errf(&err, SW_EINVAL, "%s %d: expected a prompt shorter than the engine's context "
		        "(%d, $.spec.max_context) minus one", o->ids ? "--ids: a prompt of" : "-P", P,
		        e->man->max_ctx);
		goto out_err;
	}
	const rt_dev_opts dopts = {.emu_compile = gen_emu_module_build};
	if (!(dev = rt_dev_open(o->backend ? o->backend : "auto", &dopts, &err)))
		goto out_err;
	fprintf(stderr, "specwright %s: timing only: random weights (seed %llu); no text\n", cmd,
	        (unsigned long long)o->random_seed);
	if (rt_engine_bind_random(e, dev, o->random_seed, o->seed, &err))
		goto out_err;
	if (rt_engine_random_has_maps(e))
		fprintf(stderr, "specwright %s: the draft vocabulary's id maps (d2t, t2d) are synthetic: "
		        "%d draft ids onto distinct target ids drawn from the seed (a valid map, not a "
		        "trained head's)\n", cmd, e->man->draft_vocab);
	ids = malloc(sizeof(*ids) * (size_t)P);
	out = malloc(sizeof(*out) * (size_t)(o->max_new + 1));
	if (!ids || !out) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}
	if (o->ids) {
		if (cli_parse_ids(o->ids, e->man->tcfg.vocab, ids, &err) < 0)
			goto out_err;
	} else {
		for (int i = 0; i < P; i += 4) {
			uint32_t w[4];
			sw_rand_u32x4(o->random_seed, (uint32_t)(i / 4), 0, SW_RNG_FILL, PROMPT_LANE, w);
			for (int j = 0; j < 4 && i + j < P; j++)
				ids[i + j] = (int32_t)(w[j] % (uint32_t)e->man->tcfg.vocab);
		}
	}
	if (profile) {
		if (rt_engine_profile(e, ids, P, o->max_new, o->rows, &samp, o->json ? stdout : stderr, &err))
			goto out_err;
		rc = 0;
		goto out;
	}
	if (o->dump_logits) {
		if (dump_open(&dump, e, P, &err) || sw_outfile_open(&of, o->dump_logits, "--dump-logits", &err))
			goto out_err;
		of_open = true;
	}
	rt_engine_run r = {.prompt = ids, .n_prompt = P, .max_new = o->max_new, .eos = -1,
	                   .eager = o->eager, .target_only = o->target_only, .samp = &samp,
	                   .on_tokens = o->dump_logits ? dump_tokens : NULL, .cb_user = &dump};
	rt_engine_stats st;
	int n = rt_engine_generate(e, &r, out, &st, &err);
	if (n >= 0 && dump.rc) {
		err = dump.err;
		sw_err_prefix(&err, "--dump-logits: reading the logits");
		n = -1;
	}
	if (n < 0)
		goto out_err;
	if (o->dump_logits) {
		of_open = false;
		if (dump_write(&dump, &of, &err))
			goto out_err;
	}
	const double tau = st.n_iters ? (double)st.n_tokens / st.n_iters : 0;
	const double tps = st.t_decode > 0 ? st.n_tokens / st.t_decode : 0;
	if (o->json) {
		printf("{\"engine\": \"%s\", \"backend\": \"%s\", \"random_weights\": %llu, \"prompt_ids\": [",
		       e->man->name, dev->desc, (unsigned long long)o->random_seed);
		for (int i = 0; i < P; i++)
			printf("%s%d", i ? ", " : "", ids[i]);
		printf("], \"tokens\": [");
		for (int i = 0; i < n; i++)
			printf("%s%d", i ? ", " : "", out[i]);
		printf("], \"target_only\": %s, \"synthetic_maps\": %s, \"n_prompt\": %d, \"n_tokens\": %d, "
		       "\"iterations\": %d, \"tau\": %.4f, "
		       "\"tok_per_s\": %.3f, \"prefill_s\": %.4f, \"decode_s\": %.4f, \"capture_s\": %.4f, "
		       "\"host_overhead_us\": %.3f, \"acceptance\": [", o->target_only ? "true" : "false",
		       rt_engine_random_has_maps(e) ? "true" : "false", st.n_prompt, st.n_tokens, st.n_iters,
		       tau, tps, st.t_prefill, st.t_decode, st.t_capture, st.host_overhead_us);
		for (int d = 0; d < e->man->depth && d < RT_ENGINE_MAX_DEPTH; d++)
			printf("%s%.4f", d ? ", " : "",
			       st.pos_tried[d] ? (double)st.pos_accepted[d] / st.pos_tried[d] : 0.0);
		printf("]");
		if (o->dump_logits) {
			printf(", \"dump_logits\": {\"rows\": %d, \"positions\": [", dump.n_rows);
			for (int i = 0; i < dump.n_rows; i++)
				printf("%s%d", i ? ", " : "", dump.pos[i]);
			printf("]}");
		}
		printf("}\n");
	} else {
		fprintf(stderr, "engine %s on %s (random weights, seed %llu): %d prompt ids, %d tokens in %d "
		        "iterations (tau %.3f), %.2f tok/s, prefill %.3f s, graph capture %.3f s\n",
		        e->man->name, dev->desc, (unsigned long long)o->random_seed, st.n_prompt,
		        st.n_tokens, st.n_iters, tau, tps, st.t_prefill, st.t_capture);
		fprintf(stderr, "acceptance by depth:");
		for (int d = 0; d < e->man->depth && d < RT_ENGINE_MAX_DEPTH; d++)
			fprintf(stderr, " %.3f", st.pos_tried[d] ? (double)st.pos_accepted[d] / st.pos_tried[d] : 0.0);
		fprintf(stderr, "\nhost overhead per iteration (op execution excluded): %.2f us\n",
		        st.host_overhead_us);
		if (o->dump_logits)
			fprintf(stderr, "logits of the root row after %d and %d ids (the first and the last "
			        "iteration) written to %s\n", dump.pos[0], dump.pos[dump.n_rows - 1],
			        o->dump_logits);
	}
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "specwright %s: error: %s\n", cmd, err.msg);
out:
	if (of_open)
		sw_outfile_abort(&of);
	free(dump.rows);
	free(ids);
	free(out);
	rt_engine_free(e);
	if (dev)
		rt_dev_free(dev);
	return rc;
}
