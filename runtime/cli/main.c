/* specwright: the command-line entry. `run` decodes speculatively (and
 * measures target-only decoding in the same run), `generate` is target-only,
 * `eval` dumps greedy tokens and logits for the reference check, `bench`
 * compares drafters over a corpus. Only main() calls exit codes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "decode/acchead.h"
#include "gen/build.h"
#include "cli.h"
#include "decode/block_decode.h"
#include "core/fileio.h"
#include "core/output.h"
#include "formats/gguf.h"
#include "gen/inspect.h"
#include "gen/jit/emu_build.h"
#include "core/tree.h"
#include "decode/tree_verify.h"
#include "device/device.h"
#include "gen/render.h"

int cli_bench(const cli_opts *o);

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: specwright COMMAND MODEL [options]\n"
	        "commands:\n"
	        "  run       speculative decoding, text to stdout, stats to stderr\n"
	        "  generate  target-only decoding\n"
	        "  eval      greedy target-only decoding, writes ids and logits to --dump FILE\n"
	        "  bench     target-only vs each drafter over a corpus, T=0 and T=0.8\n"
	        "  derive-draft  write a draft model GGUF from the target: --layers SPEC --type T -o FILE\n"
	        "                [--embd-type T] [--tokenizer GGUF]: the embedding's type (default T) and a\n"
	        "                copy of a tokenizer (a small test model: the make target gpu-model); a tensor\n"
	        "                whose type stays is copied block for block from a GGUF source\n"
	        "  train-head    train a SpecDec++ acceptance head: --draft layerskip:SPEC -o HEAD.safetensors\n"
	        "                [--tokens N] [--layers k] [--corpus FILE]\n"
	        "  build     SPEC.json -o ENGINE_DIR [--no-compile] [--cache DIR]: plan, render, NVRTC-compile an engine\n"
	        "  inspect   ENGINE_DIR [--tau T] [--gpu h100|h200|BW,TFLOPS,SMS]: kernel resources and the GPU\n"
	        "            roofline projection (default h200; projected, calibrated from the H100 run)\n"
	        "  run       ENGINE_DIR [--backend auto|host|host-emulate|cuda] [--model GGUF] [--eager]:\n"
	        "            a built engine: prefill, then one replayed graph per iteration; greedy\n"
	        "            engines are checked against the host reference path\n"
	        "  profile   ENGINE_DIR [--backend B] [-n ITERS]: per-op timings, achieved GB/s\n"
	        "  run|profile ENGINE_DIR --random-weights SEED [-P N | --ids IDS]: timing only: every\n"
	        "            weight buffer filled on the device from a seeded generator (no model file, no\n"
	        "            tokenizer, no text), a synthetic prompt of N ids (default 32) or IDS; tok/s,\n"
	        "            tau, host overhead; run --dump-logits F.npy: the root row's logits after the\n"
	        "            prompt and after the last iteration (tests/gpu/random_ref.py compares them)\n"
	        "  serve     ENGINE_DIR [--host H] [--port P] [--queue N] [--backend B]: OpenAI-compatible\n"
	        "            HTTP server (completions, chat, SSE streaming, /metrics); serve --help\n"
	        "  bundle    ENGINE_DIR... -o DIR [--with-weights] [--kit KITDIR]: a folder a GPU machine with\n"
	        "            only a driver runs (portable runtime, libraries, launcher DIR/run); bundle --help\n"
	        "  backend   [auto|host|host-emulate|cuda|cuda:N]: the backend that name opens here (auto:\n"
	        "            cuda with a driver and a GPU, else host), its kind on stdout (`make run` picks\n"
	        "            its engine by it), its description on stderr\n"	        "MODEL: a GGUF file (Llama architecture or a markov table) or an HF directory\n"
	        "options:\n"
	        "  -p, --prompt TEXT      prompt text            -f, --prompt-file FILE\n"
	        "  --draft SPEC           none | ngram[:MIN:MAX] | layerskip:N | layerskip:0-9,20-29[@V] | model:PATH |\n"
	        "                         block:DIR[,steps=S] | eagle3:DIR (default ngram; block: a trained block drafter,\n"
	        "                         models/drafters/; eagle3: a public EAGLE-3 head, config.json + model.safetensors)\n"
	        "  -g, --gamma K          draft tokens per iteration (default 4)\n"
	        "  -t, --temp T           temperature, 0 = greedy (default 0)\n"
	        "  --top-k K, --top-p P   truncation of the target (and draft) distribution\n"
	        "  --seed S               Philox seed (default 1234)\n"
	        "  -n, --max-tokens N     tokens to generate, 1 to 1048576 (default 128)\n"
	        "  --chat / --no-chat     apply the model's chat template (default: on for run/generate)\n"
	        "  --ctx N                context length (default 2048)\n"
	        "  --model GGUF           run/bench/profile ENGINE_DIR: the target's weights (default: the\n"
	        "                         engine's own path); --draft-model GGUF: the weights of an engine's\n"
	        "                         separate draft model (a spec with \"draft\": \"model:PATH\"), or a\n"
	        "                         block-drafter engine's drafter directory (default: the engine's)\n"
	        "  --weights DIR_OR_FILE  run/bench/profile/serve ENGINE_DIR: where its weights are when not\n"
	        "                         at the absolute paths it recorded (a folder holding them, or the\n"
	        "                         target's file)\n"
	        "  --tokenizer GGUF       take the tokenizer from this file\n"
	        "  --json                 machine-readable stats on stderr\n"
	        "  --ids \"1 17 42\"        the prompt as token ids (run, generate, eval, profile; no chat template)\n"
	        "  --target-only          run ENGINE_DIR: no drafting, one target forward a token (eager)\n"
	        "  --no-baseline          run: skip the target-only comparison\n"
	        "  --rows N               profile ENGINE_DIR: the verify forward alone, replayed at N rows\n"
	        "                         (host; every draft node present) at the prompt's context\n"
	        "  --adaptive h[:min:max] SpecDec++: stop drafting once P(a rejection) > h (bounds default 2:20;\n"
	        "                         gamma becomes max)\n"
	        "  --acc-head FILE        acceptance head from train-head (default: the draft's q(Y) as predictor)\n"
	        "  --lossy-eps EPS        LOSSY: accept with min(1,(p+eps)/q) (Yin et al.); biased, reports the TV bound\n"
	        "  --tree SPEC            tree drafting: preset (models/trees/NAME.json: medusa63 eagle25 sequoia63\n"
	        "                         biseq8 biseq16 smollm2-e3gpu-63/127/255),\n"
	        "                         FILE.json, chain:K, kary:K:D, branch:b1,b2,.., batch:M:L\n"
	        "  --expand RULE          topk | sample | sample-wor | spechub (default: matches --verify;\n"
	        "                         with neither: topk + greedy at -t 0, sample + rrs above)\n"
	        "  --verify METHOD        greedy | rrs | rrsw | spechub | onehot (default: matches --expand)\n"
	        "  --prompts N, --corpus FILE   bench: number of prompts and their source (cut from the text,\n"
	        "                         each after an instruction: \"Rewrite the following passage...\")\n"
	        "  --prompt-set FILE      bench: FILE's lines after its header, each one prompt as written\n"
	        "                         (models/prompts/*.txt); --prompts N takes the first N\n"
	        "  --drafters 'A;B;...'   bench: only a table of these chain drafters at T=0 and 0.7, each\n"
	        "                         SPEC[|gamma=G][|tree=TREE] (e.g. 'ngram;block:models/drafters/X|gamma=4')\n");
}

struct stream {
	const rt_tokenizer *tok;
	rt_detok dt;
	char buf[4096];
};

static int stream_cb(void *user, const int32_t *tok, int n)
{
	struct stream *s = user;
	for (int i = 0; i < n; i++) {
		if (rt_token_type(s->tok, tok[i]) == RT_TT_CONTROL)
			continue; /* <|im_end|> and friends end the text, they are not part of it */
		int k = rt_detok_push(&s->dt, s->tok, tok[i], s->buf, sizeof(s->buf));
		if (k > 0)
			fwrite(s->buf, 1, (size_t)k, stdout);
	}
	fflush(stdout);
	return 0;
}

static int cmd_decode(const char *cmd, cli_opts *o)
{
	sw_err err = { 0 };
	cli_session s;
	int rc = 1;
	int32_t *ids = NULL, *out = NULL, *out2 = NULL;
	rt_acchead *head = NULL;
	bool spec = !strcmp(cmd, "run");
	bool dump = !strcmp(cmd, "eval");
	sw_outfile of = { 0 };
	if (dump && !o->dump) {
		fprintf(stderr, "specwright eval: --dump FILE is required\n");
		return 2;
	}
	/* the output's place checked before the work: not a device, not an
	 * input (cmd_decode's session reads them) */
	if (dump && cli_output_clashes(o, o->dump, "--dump"))
		return 2;
	if (dump && sw_outfile_open(&of, o->dump, "--dump", &err)) {
		fprintf(stderr, "specwright eval: error: %s\n", err.msg);
		return 2;
	}
	if (cli_session_open(&s, o, &err))
		goto out_err;
	bool chat = o->chat < 0 ? !dump && rt_tokenizer_has_chat(s.tok) : o->chat;
	out = malloc((size_t)(o->max_new + 1) * sizeof(*out));
	out2 = malloc((size_t)(o->max_new + 1) * sizeof(*out2));
	if (!out || !out2) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}
	int n_prompt = cli_prompt_tokens(o, &s, chat, &ids, &err);
	if (n_prompt < 0)
		goto out_err;
	if (n_prompt >= o->ctx) {
		sw_errf(&err, SW_ERANGE, "prompt has %d tokens, more than the context of %d allows (need at least one free position; raise --ctx)",
		        n_prompt, o->ctx);
		goto out_err;
	}
	if (spec && cli_make_drafter(&s, o->draft, o->ctx, &s.drafter, &err))
		goto out_err;
	rt_tree tree;
	rt_tree_cfg tcfg = { &tree, RT_EXPAND_SAMPLE, RT_VERIFY_RRS };
	bool use_tree = spec && o->tree;
	if (use_tree && cli_tree_setup(o, &s, &tcfg, &err))
		goto out_err;
	struct stream st_out = { .tok = s.tok };
	rt_detok_init(&st_out.dt);
	rt_gen_cfg cfg = {
		.samp = { o->temperature, o->top_k, o->top_p },
		.gamma = o->gamma,
		.seed = o->seed,
		.max_new = o->max_new,
		.lossy_eps = o->lossy_eps,
		.is_eog = dump ? NULL : cli_is_eog,
		.eog_user = s.tok,
		.on_tokens = dump ? NULL : stream_cb,
		.cb_user = &st_out,
	};
	if (spec && !use_tree && cli_adaptive_setup(o, &s, &cfg, &head, &err))
		goto out_err;
	rt_stats st;
	int n;
	if (use_tree)
		n = rt_drafter_drafts_trees(s.drafter)
		            ? rt_generate_tree_drafter(s.tctx, s.drafter, &tcfg, ids, n_prompt, &cfg, out, &st, &err)
		            : rt_generate_tree(s.tctx, s.draft_model, &tcfg, ids, n_prompt, &cfg, out, &st, &err);
	else if (spec && s.drafter)
		n = rt_generate_spec(s.tctx, s.drafter, ids, n_prompt, &cfg, out, &st, &err);
	else
		n = rt_generate_target(s.tctx, ids, n_prompt, &cfg, out, &st, &err);
	if (n < 0)
		goto out_err;
	char tail[8];
	int k = rt_detok_flush(&st_out.dt, tail, sizeof(tail));
	if (!dump) {
		fwrite(tail, 1, (size_t)(k > 0 ? k : 0), stdout);
		printf("\n");
		fflush(stdout);
	}
	char label[256];
	if (use_tree)
		snprintf(label, sizeof(label), "%s tree %s %s/%s", o->draft, tree.name,
		         rt_expand_rule_name(tcfg.rule), rt_verify_method_name(tcfg.method));
	else
		snprintf(label, sizeof(label), "%s", spec && s.drafter ? o->draft : "target");
	cli_print_stats(stderr, label, &st, use_tree ? tree.depth_max : o->gamma, o->json);
	if (o->json && !dump) { /* the ids themselves, for checks against other programs */
		fprintf(stderr, "{\"prompt_ids\":[");
		for (int i = 0; i < n_prompt; i++)
			fprintf(stderr, "%s%d", i ? "," : "", ids[i]);
		fprintf(stderr, "],\"ids\":[");
		for (int i = 0; i < n; i++)
			fprintf(stderr, "%s%d", i ? "," : "", out[i]);
		fprintf(stderr, "]}\n");
	}
	if (use_tree)
		cli_print_tree_stats(stderr, &st, o->json);
	if (st.stopped_ctx) /* not a silent end: the draft tree or the next token no longer fits */
		fprintf(stderr, "stop: context (all %d positions of the context are used; raise --ctx)\n", o->ctx);
	if (spec && o->adaptive && !use_tree)
		cli_print_time_model(stderr, &st, o->json);
	if (o->lossy_eps > 0 && spec && s.drafter)
		fprintf(stderr, "LOSSY (eps %g): the output is NOT the target's distribution; the summed per-position TV bias bound is %.4f over %llu tokens\n",
		        o->lossy_eps, st.lossy_tv_sum, (unsigned long long)st.n_tokens);
	if (spec && (s.drafter || use_tree) && o->baseline) {
		/* Target-only decoding of the same number of tokens in the same run:
		 * the speedup the user actually gets on this machine. */
		rt_ctx_truncate(s.tctx, 0);
		rt_gen_cfg bc = cfg;
		bc.is_eog = NULL;
		bc.on_tokens = NULL;
		bc.max_new = n;
		rt_stats bs;
		int nb = rt_generate_target(s.tctx, ids, n_prompt, &bc, out2, &bs, &err);
		if (nb < 0)
			goto out_err;
		cli_print_stats(stderr, "target-only", &bs, 0, o->json);
		double a = (st.t_total - st.t_prefill), b = (bs.t_total - bs.t_prefill);
		if (a > 0 && b > 0 && o->json)
			fprintf(stderr, "{\"speedup\":%.4f}\n", b / a);
		else if (a > 0 && b > 0)
			fprintf(stderr, "speedup over target-only: %.2fx%s\n", b / a,
			        o->temperature <= 0 && memcmp(out, out2, (size_t)n * sizeof(*out)) == 0
			                ? " (greedy outputs identical)" : "");
	}
	if (dump) {
		/* eval: rerun with the logits kept: ids, then n rows of V floats,
		 * through core/output.h: an exclusive temporary, every write
		 * checked, renamed into place; a target that is not a regular
		 * file (/dev/full, /dev/null, a FIFO) is refused, never renamed
		 * over, and a failed write leaves nothing behind. */
		int V = s.target->cfg.vocab;
		float *lg = malloc((size_t)V * sizeof(*lg));
		rt_ctx_truncate(s.tctx, 0);
		int32_t hdr[3] = { n_prompt, n, V };
		sw_outfile_write(&of, hdr, sizeof(hdr));
		sw_outfile_write(&of, ids, sizeof(*ids) * (size_t)n_prompt);
		sw_outfile_write(&of, out, sizeof(*out) * (size_t)n);
		int rc2 = lg ? rt_ctx_feed(s.tctx, ids, n_prompt, lg, &err) : sw_errf(&err, SW_ENOMEM, "out of memory");
		for (int i = 0; !of.werr && rc2 == 0 && i < n; i++) {
			sw_outfile_write(&of, lg, sizeof(*lg) * (size_t)V);
			if (i + 1 < n)
				rc2 = rt_ctx_feed(s.tctx, &out[i], 1, lg, &err);
		}
		free(lg);
		if (rc2)
			goto out_err;
		if (sw_outfile_commit(&of, &err))
			goto out_err;
	}
	rc = 0;
	goto out_free;
out_err:
	fprintf(stderr, "specwright %s: error: %s\n", cmd, err.msg);
out_free:
	sw_outfile_abort(&of); /* nothing when committed */
	free(ids);
	free(out);
	free(out2);
	rt_acchead_free(head);
	cli_session_close(&s);
	return rc;
}

static int parse_wtype(const char *opt, const char *v, uint32_t *type)
{
	static const struct { const char *name; uint32_t type; } types[] = {
		{ "f32", GGML_T_F32 }, { "f16", GGML_T_F16 }, { "bf16", GGML_T_BF16 },
		{ "q8_0", GGML_T_Q8_0 }, { "q4_0", GGML_T_Q4_0 }, { "q4_1", GGML_T_Q4_1 },
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(v, types[i].name)) {
			*type = types[i].type;
			return 0;
		}
	fprintf(stderr, "specwright derive-draft: %s '%s': expected f32, f16, bf16, q8_0, q4_0 or q4_1\n", opt, v);
	return 2;
}

static int cmd_derive(cli_opts *o)
{
	sw_err err = { 0 };
	if (!o->output || !o->layers) {
		fprintf(stderr, "specwright derive-draft: -o FILE and --layers SPEC are required\n");
		return 2;
	}
	if (cli_output_clashes(o, o->output, "-o"))
		return 2;
	rt_derive_opts dop = { .type = GGML_T_Q8_0 };
	if (o->wtype && parse_wtype("--type", o->wtype, &dop.type))
		return 2;
	dop.embd_type = dop.type;
	if (o->embd_type && parse_wtype("--embd-type", o->embd_type, &dop.embd_type))
		return 2;
	int n_copied = 0;
	dop.n_copied = &n_copied;
	rt_model *m = rt_model_load(o->model, &err), *v = NULL;
	gguf_file *src = NULL, *tok = NULL;
	int rc = 1;
	if (!m)
		goto out_err;
	/* a GGUF source: tensors whose type stays are copied block for block */
	struct stat st;
	if (stat(o->model, &st) == 0 && S_ISREG(st.st_mode) && !(src = gguf_open(o->model, &err)))
		goto out_err;
	dop.src = src;
	if (o->tokenizer) {
		if (src && !strcmp(o->tokenizer, o->model))
			dop.tok = src;
		else if (!(dop.tok = tok = gguf_open(o->tokenizer, &err)))
			goto out_err;
	}
	v = rt_model_layerskip_parse(m, o->layers, &err);
	if (!v)
		goto out_err;
	if (v->vocab_limit) {
		sw_errf(&err, SW_EINVAL, "--layers %s: a vocabulary limit cannot be baked into a file", o->layers);
		goto out_err;
	}
	if (rt_llama_derive_gguf(v, o->output, &dop, &err))
		goto out_err;
	fprintf(stderr, "wrote %s: %d of %d layers of %s (%d tensors copied block for block, the rest "
	        "encoded; %s)\n", o->output, v->n_layers_run, m->cfg.n_layers, o->model, n_copied,
	        dop.tok ? "tokenizer copied" : "no tokenizer: drafts with the target's");
	rc = 0;
	goto out_free;
out_err:
	fprintf(stderr, "specwright derive-draft: error: %s\n", err.msg);
out_free:
	rt_model_free(v);
	rt_model_free(m);
	gguf_close(tok);
	gguf_close(src);
	return rc;
}

/* `backend [NAME]`: opens NAME (default auto) as `run ENGINE_DIR --backend
 * NAME` would and says which backend that is. */
static int cmd_backend(int argc, char **argv)
{
	if (argc > 3) {
		fprintf(stderr, "specwright backend: expected at most one backend name, found %d arguments\n", argc - 2);
		return 2;
	}
	sw_err err = {0};
	const char *name = argc > 2 ? argv[2] : "auto";
	const rt_dev_opts dopts = {.emu_compile = gen_emu_module_build};
	rt_dev *d = rt_dev_open(name, &dopts, &err);
	if (!d) {
		fprintf(stderr, "specwright backend: %s: %s\n", name, err.msg);
		return err.code == SW_EINVAL ? 2 : 1;
	}
	printf("%s\n", d->ops->name);
	fprintf(stderr, "backend %s: %s\n", name, d->desc);
	rt_dev_free(d);
	return 0;
}

static int main_cmd(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *cmd = argv[1];
	cli_opts o;
	if (!strcmp(cmd, "build"))
		return gen_build_main(argc, argv);
	if (!strcmp(cmd, "serve"))
		return cli_serve(argc, argv);
	if (!strcmp(cmd, "inspect"))
		return gen_inspect_main(argc, argv);
	if (!strcmp(cmd, "bundle"))
		return cli_bundle(argc, argv);
	if (!strcmp(cmd, "backend"))
		return cmd_backend(argc, argv);
	if (!strcmp(cmd, "profile")) {
		if (cli_parse(argc, argv, 2, cmd, &o))
			return 2;
		if (!o.model || !cli_is_engine_dir(o.model)) {
			fprintf(stderr, "specwright profile: expected an engine directory (from `specwright "
			        "build`), found '%s'\n", o.model ? o.model : "(none)");
			return 2;
		}
		if (o.max_new == 128)
			o.max_new = 8; /* -n: profiled iterations */
		return cli_engine_profile(&o);
	}
	if (!strcmp(cmd, "run") || !strcmp(cmd, "generate") || !strcmp(cmd, "eval") || !strcmp(cmd, "bench") ||
	    !strcmp(cmd, "derive-draft") || !strcmp(cmd, "train-head")) {
		if (cli_parse(argc, argv, 2, cmd, &o))
			return 2;
		if (!strcmp(cmd, "bench"))
			return o.model && cli_is_engine_dir(o.model) ? cli_engine_bench(&o) : cli_bench(&o);
		if (!strcmp(cmd, "derive-draft"))
			return cmd_derive(&o);
		if (!strcmp(cmd, "train-head"))
			return cli_train_head(&o);
		if (!strcmp(cmd, "run") && cli_is_engine_dir(o.model))
			return cli_engine_run(&o);
		if (o.target_only) {
			fprintf(stderr, "specwright run: --target-only applies to an engine directory; for a "
			        "model file use `specwright generate %s`\n", o.model);
			return 2;
		}
		if (o.random_weights) {
			fprintf(stderr, "specwright %s: --random-weights needs an engine directory (from "
			        "`specwright build`), found '%s'\n", cmd, o.model);
			return 2;
		}
		return cmd_decode(cmd, &o);
	}
	fprintf(stderr, "specwright: unknown command '%s' (expected run, generate, eval, bench, derive-draft, train-head, build, inspect, profile, serve, bundle or backend)\n", cmd);
	usage(stderr);
	return 2;
}

/* Every command's text goes to stdout: a write that failed there (a full
 * disk, a closed pipe's EIO, > /dev/full) is an error, not a success with
 * the output lost. */
int main(int argc, char **argv)
{
	int rc = main_cmd(argc, argv);
	errno = 0;
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "specwright: error: writing standard output failed: %s (the output is incomplete)\n",
		        strerror(errno ? errno : EIO));
		return rc ? rc : 1;
	}
	return rc;
}
