/* `specwright run|profile ENGINE_DIR --random-weights SEED [-P N]`: timing
 * only. The engine's weights are filled on the device from the seed
 * (rt_engine_bind_random), the prompt is N token ids drawn from the same
 * generator (Philox stream lane 0xffffffff, which no buffer uses: id =
 * word % vocab), no model file or tokenizer is read and no text is printed;
 * an id map (an EAGLE-3 head's d2t/t2d) is a synthetic valid one, said so;
 * run reports tok/s, tau, acceptance and the host overhead per iteration,
 * profile its per-op table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine/random_weights.h"
#include "gen/jit/emu_build.h" /* gen_emu_module_build, for host-emulate */
#include "kernels/philox.h"

#define PROMPT_LANE 0xffffffffu
#define DEFAULT_PROMPT 32

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

int cli_engine_random(cli_opts *o, bool profile)
{
	const char *cmd = profile ? "profile" : "run", *dir = o->model;
	sw_err err = {0};
	rt_engine *e = NULL;
	rt_dev *dev = NULL;
	int32_t *ids = NULL, *out = NULL;
	int rc = 1;
	rt_engine_sampling samp;
	if (!(e = rt_engine_load(dir, &err)) || cli_engine_refuse_fixed(e->man, o, dir, &err) ||
	    refuse_model_opts(o, dir, &err) || cli_engine_sampling(e, o, dir, &samp, &err))
		goto out_err;
	const int P = o->prompt_len ? o->prompt_len : DEFAULT_PROMPT;
	if (P + 1 >= e->man->max_ctx) {
		sw_errf(&err, SW_EINVAL, "-P %d: expected a prompt shorter than the engine's context "
		        "(%d, $.spec.max_context) minus one", P, e->man->max_ctx);
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
	for (int i = 0; i < P; i += 4) {
		uint32_t w[4];
		sw_rand_u32x4(o->random_seed, (uint32_t)(i / 4), 0, SW_RNG_FILL, PROMPT_LANE, w);
		for (int j = 0; j < 4 && i + j < P; j++)
			ids[i + j] = (int32_t)(w[j] % (uint32_t)e->man->tcfg.vocab);
	}
	if (profile) {
		if (rt_engine_profile(e, ids, P, o->max_new, o->rows, &samp, o->json ? stdout : stderr, &err))
			goto out_err;
		rc = 0;
		goto out;
	}
	rt_engine_run r = {.prompt = ids, .n_prompt = P, .max_new = o->max_new, .eos = -1,
	                   .eager = o->eager, .samp = &samp};
	rt_engine_stats st;
	int n = rt_engine_generate(e, &r, out, &st, &err);
	if (n < 0)
		goto out_err;
	const double tau = st.n_iters ? (double)st.n_tokens / st.n_iters : 0;
	const double tps = st.t_decode > 0 ? st.n_tokens / st.t_decode : 0;
	if (o->json) {
		printf("{\"engine\": \"%s\", \"backend\": \"%s\", \"random_weights\": %llu, \"tokens\": [",
		       e->man->name, dev->desc, (unsigned long long)o->random_seed);
		for (int i = 0; i < n; i++)
			printf("%s%d", i ? ", " : "", out[i]);
		printf("], \"synthetic_maps\": %s, \"n_prompt\": %d, \"n_tokens\": %d, \"iterations\": %d, \"tau\": %.4f, "
		       "\"tok_per_s\": %.3f, \"prefill_s\": %.4f, \"decode_s\": %.4f, \"capture_s\": %.4f, "
		       "\"host_overhead_us\": %.3f, \"acceptance\": [",
		       rt_engine_random_has_maps(e) ? "true" : "false", st.n_prompt, st.n_tokens, st.n_iters,
		       tau, tps, st.t_prefill, st.t_decode, st.t_capture, st.host_overhead_us);
		for (int d = 0; d < e->man->depth && d < RT_ENGINE_MAX_DEPTH; d++)
			printf("%s%.4f", d ? ", " : "",
			       st.pos_tried[d] ? (double)st.pos_accepted[d] / st.pos_tried[d] : 0.0);
		printf("]}\n");
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
	}
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "specwright %s: error: %s\n", cmd, err.msg);
out:
	free(ids);
	free(out);
	rt_engine_free(e);
	if (dev)
		rt_dev_free(dev);
	return rc;
}
