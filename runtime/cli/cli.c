/* Option parsing, session set-up and stats printing for the CLI (cli.h). */
#include "cli.h"
#include "core/fileio.h"
#include "core/output.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "decode/block_decode.h"
#include "decode/eagle3_draft.h"
#include "formats/gguf.h"
#include "model/model_gguf.h"
#include "core/tree.h"
#include "decode/tree_verify.h"

static int bad(const char *cmd, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "specwright %s: ", cmd);
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n(see `specwright help`)\n");
	return 2;
}

static int parse_int(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end || end == v || x < lo || x > hi) {
		fprintf(stderr, "specwright %s: option %s expects an integer in [%ld, %ld], found '%s'\n",
		        cmd, opt, lo, hi, v);
		return 2;
	}
	*out = (int)x;
	return 0;
}

/* A number in [lo, hi], or (lo, hi] when lo_open (a bound the value may
 * approach but not take: top-p 0 keeps no token). */
static int parse_float(const char *cmd, const char *opt, const char *v, double lo, bool lo_open,
                       double hi, float *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || *end || end == v || !((lo_open ? x > lo : x >= lo) && x <= hi)) {
		fprintf(stderr, "specwright %s: option %s expects a number in %c%.15g, %.15g], found '%s'\n",
		        cmd, opt, lo_open ? '(' : '[', lo, hi, v);
		return 2;
	}
	*out = (float)x;
	return 0;
}

int cli_parse(int argc, char **argv, int first, const char *cmd, cli_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->draft = "ngram"; /* pays on any model: layer-skip needs a model-specific layer set */
	o->gamma = 4;
	o->temperature = 0.0f;
	o->top_p = 1.0f;
	o->seed = 1234;
	o->max_new = 128;
	o->chat = -1;
	o->ctx = 2048;
	o->baseline = true;
	o->n_prompts = 20;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() do { if (!v) return bad(cmd, "option %s needs a value%s", a, ""); i++; } while (0)
		if (a[0] == '-' && a[1] != '\0' && o->n_given < (int)(sizeof(o->given) / sizeof(*o->given)))
			o->given[o->n_given++] = a;
		if (a[0] != '-' || a[1] == '\0') {
			if (o->model)
				return bad(cmd, "unexpected argument '%s' (the model is already '%s')", a, o->model);
			o->model = a;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			NEED_VALUE(); o->prompt = v;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--prompt-file")) {
			NEED_VALUE(); o->prompt_file = v;
		} else if (!strcmp(a, "--tokenizer")) {
			NEED_VALUE(); o->tokenizer = v;
		} else if (!strcmp(a, "--draft")) {
			NEED_VALUE(); o->draft = v;
		} else if (!strcmp(a, "--dump")) {
			NEED_VALUE(); o->dump = v;
		} else if (!strcmp(a, "--dump-logits")) {
			NEED_VALUE(); o->dump_logits = v;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			NEED_VALUE(); o->output = v;
		} else if (!strcmp(a, "--layers")) {
			NEED_VALUE(); o->layers = v;
		} else if (!strcmp(a, "--type")) {
			NEED_VALUE(); o->wtype = v;
		} else if (!strcmp(a, "--embd-type")) {
			NEED_VALUE(); o->embd_type = v;
		} else if (!strcmp(a, "-P") || !strcmp(a, "--prompt-len")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 1, 1 << 20, &o->prompt_len)) return 2;
		} else if (!strcmp(a, "--random-weights")) {
			NEED_VALUE();
			char *end;
			errno = 0;
			unsigned long long s = strtoull(v, &end, 0);
			if (errno || *end || end == v || v[0] == '-')
				return bad(cmd, "option %s expects a non-negative integer seed, found '%s'", a, v);
			o->random_weights = true;
			o->random_seed = s;
		} else if (!strcmp(a, "--lossy-eps")) {
			NEED_VALUE(); if (parse_float(cmd, a, v, 0, false, 1, &o->lossy_eps)) return 2;
		} else if (!strcmp(a, "--tree")) {
			NEED_VALUE(); o->tree = v;
		} else if (!strcmp(a, "--verify")) {
			NEED_VALUE(); o->verify = v;
		} else if (!strcmp(a, "--expand")) {
			NEED_VALUE(); o->expand = v;
		} else if (!strcmp(a, "--corpus")) {
			NEED_VALUE(); o->corpus = v;
		} else if (!strcmp(a, "--prompt-set")) {
			NEED_VALUE(); o->prompt_set = v;
		} else if (!strcmp(a, "--drafters")) {
			NEED_VALUE(); o->drafters = v;
		} else if (!strcmp(a, "--adaptive")) {
			NEED_VALUE(); o->adaptive = v;
		} else if (!strcmp(a, "--acc-head")) {
			NEED_VALUE(); o->acc_head = v;
		} else if (!strcmp(a, "--tokens")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 16, 1 << 24, &o->n_tokens)) return 2;
		} else if (!strcmp(a, "-g") || !strcmp(a, "--gamma")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 1, RT_MAX_GAMMA, &o->gamma)) return 2;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
			NEED_VALUE(); if (parse_float(cmd, a, v, 0, false, 100, &o->temperature)) return 2;
		} else if (!strcmp(a, "--top-k")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 0, 1 << 30, &o->top_k)) return 2;
		} else if (!strcmp(a, "--top-p")) {
			NEED_VALUE(); if (parse_float(cmd, a, v, 0, true, 1, &o->top_p)) return 2;
		} else if (!strcmp(a, "--seed")) {
			NEED_VALUE();
			char *end;
			errno = 0;
			unsigned long long s = strtoull(v, &end, 0);
			if (errno || *end || end == v || v[0] == '-')
				return bad(cmd, "option %s expects a non-negative integer, found '%s'", a, v);
			o->seed = s;
		} else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) {
			/* at least one token everywhere (a model, an engine, bench,
			 * profile), refused here before anything loads */
			NEED_VALUE(); if (parse_int(cmd, a, v, 1, 1 << 20, &o->max_new)) return 2;
		} else if (!strcmp(a, "--ctx")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 2, 1 << 20, &o->ctx)) return 2;
		} else if (!strcmp(a, "--prompts")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 1, 10000, &o->n_prompts)) return 2;
			o->n_prompts_given = true;
		} else if (!strcmp(a, "--chat")) {
			o->chat = 1;
		} else if (!strcmp(a, "--no-chat")) {
			o->chat = 0;
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--backend")) {
			if (!v)
				return bad(cmd, "option %s needs a value%s", a, "");
			if (strcmp(v, "auto") && strcmp(v, "host") && strcmp(v, "host-emulate") && strcmp(v, "cuda"))
				return bad(cmd, "--backend expects auto, host, host-emulate or cuda, found '%s'%s", v, "");
			o->backend = v;
			i++;
		} else if (!strcmp(a, "--model")) {
			if (!v)
				return bad(cmd, "option %s needs a value%s", a, "");
			o->model_override = v;
			i++;
		} else if (!strcmp(a, "--draft-model")) {
			if (!v)
				return bad(cmd, "option %s needs a value%s", a, "");
			o->draft_model = v;
			i++;
		} else if (!strcmp(a, "--weights")) {
			NEED_VALUE(); o->weights = v;
		} else if (!strcmp(a, "--eager")) {
			o->eager = true;
		} else if (!strcmp(a, "--no-baseline")) {
			o->baseline = false;
		} else if (!strcmp(a, "--ids")) {
			NEED_VALUE(); o->ids = v;
		} else if (!strcmp(a, "--target-only")) {
			o->target_only = true;
		} else if (!strcmp(a, "--rows")) {
			NEED_VALUE(); if (parse_int(cmd, a, v, 1, 4096, &o->rows)) return 2;
		} else {
			return bad(cmd, "unknown option '%s'%s", a, "");
		}
#undef NEED_VALUE
	}
	if (!o->model)
		return bad(cmd, "missing the model argument (a .gguf file or an HF directory)%s%s", "", "");
	if (o->lossy_eps > 0 && o->tree)
		return bad(cmd, "--lossy-eps applies to chain drafting only, not with --tree%s%s", "", "");
	if ((o->adaptive || o->acc_head) && o->tree)
		return bad(cmd, "--adaptive and --acc-head apply to chain drafting only, not with --tree%s%s", "", "");
	if ((o->verify || o->expand) && !o->tree)
		return bad(cmd, "--verify and --expand need --tree%s%s", "", "");
	if (o->prompt_set && o->corpus)
		return bad(cmd, "give either --prompt-set (prompts a line, verbatim) or --corpus (prompts cut from "
		           "text, after an instruction), not both%s%s", "", "");
	if (o->prompt_set && strcmp(cmd, "bench"))
		return bad(cmd, "--prompt-set applies to bench only, not to %s%s", cmd, "");
	if (o->prompt && o->prompt_file)
		return bad(cmd, "give either -p or -f, not both%s%s", "", "");
	if (o->ids && (o->prompt || o->prompt_file))
		return bad(cmd, "give the prompt either as text (-p/-f) or as token ids (--ids), not both%s%s", "", "");
	if (o->ids && strcmp(cmd, "run") && strcmp(cmd, "generate") && strcmp(cmd, "eval") && strcmp(cmd, "profile"))
		return bad(cmd, "--ids applies to run, generate, eval and profile, not to %s%s", cmd, "");
	if (o->ids && o->chat == 1)
		return bad(cmd, "--chat cannot apply to --ids: token ids are fed as given, without the chat template%s%s", "", "");
	if (o->target_only && strcmp(cmd, "run"))
		return bad(cmd, "--target-only applies to `run ENGINE_DIR` only (`generate` is target-only already)%s%s", "", "");
	if (o->rows && strcmp(cmd, "profile"))
		return bad(cmd, "--rows applies to `profile ENGINE_DIR` only (the verify forward's per-op "
		           "cost at N rows)%s%s", "", "");
	if (o->embd_type && strcmp(cmd, "derive-draft"))
		return bad(cmd, "--embd-type applies to derive-draft only%s%s", "", "");
	if (o->random_weights && strcmp(cmd, "run") && strcmp(cmd, "profile"))
		return bad(cmd, "--random-weights applies to `run ENGINE_DIR` and `profile ENGINE_DIR` only "
		           "(timing a built engine)%s%s", "", "");
	if (o->prompt_len && !o->random_weights)
		return bad(cmd, "-P N (a synthetic prompt of N token ids) needs --random-weights%s%s", "", "");
	if (o->prompt_len && o->ids)
		return bad(cmd, "give the prompt either as token ids (--ids) or as the length of a synthetic "
		           "one (-P N), not both%s%s", "", "");
	if (o->dump_logits && (strcmp(cmd, "run") || !o->random_weights))
		return bad(cmd, "--dump-logits FILE applies to `run ENGINE_DIR --random-weights SEED` only (the "
		           "target's logits of a run on random weights, for the shape check)%s%s", "", "");
	if (o->weights && ((strcmp(cmd, "run") && strcmp(cmd, "profile") && strcmp(cmd, "bench")) ||
	                   !cli_is_engine_dir(o->model)))
		return bad(cmd, "--weights DIR_OR_FILE applies to `run`, `profile` and `bench` of an engine "
		           "directory (where the engine's weights are), not to '%s'%s", o->model, "");
	if (o->weights && o->random_weights)
		return bad(cmd, "--weights with --random-weights: the engine runs on random weights, it "
		           "reads none%s%s", "", "");
	if (o->random_weights && (o->prompt || o->prompt_file))
		return bad(cmd, "--random-weights takes no prompt text (no tokenizer): give -P N, the "
		           "synthetic prompt's length%s%s", "", "");
	return 0;
}

const char *cli_given(const cli_opts *o, const char *const *names)
{
	for (int i = 0; i < o->n_given; i++)
		for (const char *const *n = names; *n; n++)
			if (!strcmp(o->given[i], *n))
				return o->given[i];
	return NULL;
}

bool cli_is_eog(const void *tok, int32_t id)
{
	return rt_token_is_eog((const rt_tokenizer *)tok, id);
}

int cli_make_drafter(cli_session *s, const char *spec, int max_ctx, rt_drafter **out, sw_err *err)
{
	*out = NULL;
	if (!strcmp(spec, "none"))
		return 0;
	if (!strncmp(spec, "layerskip:", 10)) {
		s->draft_model = rt_model_layerskip_parse(s->target, spec + 10, err);
		if (!s->draft_model)
			return SW_EINVAL;
	} else if (!strncmp(spec, "model:", 6)) {
		s->draft_model = rt_model_load(spec + 6, err);
		if (!s->draft_model)
			return sw_err_prefix(err, "--draft %s", spec);
		/* the target's vocabulary or a prefix of it, the same tokens */
		if (rt_draft_vocab_check(s->target->name, s->target->cfg.vocab, spec + 6,
		                         s->draft_model->cfg.vocab, err))
			return sw_err_prefix(err, "--draft %s", spec);
		if (s->draft_model->cfg.vocab < s->target->cfg.vocab) {
			/* seen over the target's ids: q = 0 and a zero embedding beyond its own */
			rt_model *pad = rt_model_pad_vocab(s->draft_model, s->target->cfg.vocab, true, err);
			if (!pad)
				return sw_err_prefix(err, "--draft %s", spec);
			s->draft_model = pad;
		}
	} else if (!strncmp(spec, "ngram", 5)) {
		int lo = 1, hi = 3;
		if (spec[5] == ':' ) {
			if (sscanf(spec + 6, "%d:%d", &lo, &hi) != 2)
				return sw_errf(err, SW_EINVAL, "--draft %s: expected ngram or ngram:MIN:MAX", spec);
		} else if (spec[5]) {
			return sw_errf(err, SW_EINVAL, "--draft %s: expected ngram or ngram:MIN:MAX", spec);
		}
		*out = rt_drafter_ngram(lo, hi, err);
		return *out ? 0 : SW_EINVAL;
	} else if (!strncmp(spec, "block:", 6)) {
		/* block:DIR[,steps=S] */
		char dir[4096];
		int steps = 1;
		snprintf(dir, sizeof(dir), "%s", spec + 6);
		char *comma = strchr(dir, ',');
		if (comma) {
			*comma = 0;
			char *end;
			if (strncmp(comma + 1, "steps=", 6) || (steps = (int)strtol(comma + 7, &end, 10), *end) || end == comma + 7)
				return sw_errf(err, SW_EINVAL, "--draft %s: expected block:DIR or block:DIR,steps=S", spec);
		}
		/* a fresh context: the drafter sets the target's taps (bench
		 * re-makes drafters between prompts) */
		rt_ctx_truncate(s->tctx, 0);
		rt_block_drafter_free(s->block);
		s->block = rt_block_drafter_load(dir, s->target, err);
		if (!s->block)
			return sw_err_prefix(err, "--draft %s", spec);
		*out = rt_drafter_block(s->block, s->tctx, steps, err);
		return *out ? 0 : sw_err_prefix(err, "--draft %s", spec);
	} else if (!strncmp(spec, "eagle3:", 7)) {
		/* eagle3:DIR, a public-format EAGLE-3 head; a fresh context for
		 * its taps, as for block: */
		rt_ctx_truncate(s->tctx, 0);
		rt_eagle3_free(s->eagle3);
		s->eagle3 = rt_eagle3_load(spec + 7, s->target, err);
		if (!s->eagle3)
			return sw_err_prefix(err, "--draft %s", spec);
		*out = rt_drafter_eagle3(s->eagle3, s->tctx, 16, err);
		return *out ? 0 : sw_err_prefix(err, "--draft %s", spec);
	} else {
		return sw_errf(err, SW_EINVAL, "--draft '%s': expected none, layerskip:N, model:PATH or ngram[:MIN:MAX], block:DIR[,steps=S] or eagle3:DIR",
		               spec);
	}
	*out = rt_drafter_model(s->draft_model, max_ctx, err);
	return *out ? 0 : SW_ENOMEM;
}

int cli_session_open(cli_session *s, const cli_opts *o, sw_err *err)
{
	memset(s, 0, sizeof(*s));
	s->target = rt_model_load(o->model, err);
	if (!s->target)
		return SW_EINVAL;
	const char *tpath = o->tokenizer ? o->tokenizer : o->model;
	gguf_file *f = gguf_open(tpath, err);
	if (!f)
		return sw_err_prefix(err, "tokenizer (pass a GGUF with --tokenizer)");
	s->tok = rt_tokenizer_from_gguf(f, err);
	gguf_close(f);
	if (!s->tok)
		return SW_EINVAL;
	if (rt_tokenizer_vocab(s->tok) != s->target->cfg.vocab) /* an id without a text, or a text without an id */
		return sw_errf(err, SW_EINVAL, "%s: tokenizer.ggml.tokens: expected %d tokens (the vocabulary of "
		               "%s), found %d", tpath, s->target->cfg.vocab, s->target->name, rt_tokenizer_vocab(s->tok));
	int ctx = o->ctx;
	if (s->target->cfg.max_ctx > 0 && ctx > s->target->cfg.max_ctx)
		return sw_errf(err, SW_ERANGE, "--ctx %d exceeds the model's trained context of %d", ctx,
		               s->target->cfg.max_ctx);
	s->tctx = rt_ctx_new(s->target, ctx, ctx < 256 ? ctx : 256, err);
	if (!s->tctx)
		return SW_ENOMEM;
	return 0;
}

void cli_session_close(cli_session *s)
{
	rt_drafter_free(s->drafter);
	rt_ctx_free(s->tctx);
	rt_model_free(s->draft_model);
	rt_block_drafter_free(s->block);
	rt_eagle3_free(s->eagle3);
	rt_tokenizer_free(s->tok);
	rt_model_free(s->target);
	memset(s, 0, sizeof(*s));
}

char *cli_read_prompt(const cli_opts *o, sw_err *err)
{
	if (!o->prompt_file) {
		char *t = strdup(o->prompt ? o->prompt : "Hello");
		if (!t)
			sw_errf(err, SW_ENOMEM, "out of memory");
		return t;
	}
	size_t len = 0;
	char *t = sw_read_capped(o->prompt_file, SW_CAP_TEXT, "a prompt file", &len, err);
	if (!t)
		return sw_err_prefix(err, "cannot open the prompt file (-f)"), NULL;
	const char *nul = memchr(t, 0, len);
	if (nul) {
		sw_errf(err, SW_EINVAL, "%s: the prompt holds a NUL byte at offset %zu (a text prompt expected)",
		        strcmp(o->prompt_file, "-") ? o->prompt_file : "standard input", (size_t)(nul - t));
		free(t);
		return NULL;
	}
	return t;
}

int cli_encode_prompt(const cli_session *s, const char *text, bool chat, int32_t *ids, int cap, sw_err *err)
{
	if (!chat)
		return rt_tokenize(s->tok, text, strlen(text), rt_tokenizer_add_bos(s->tok), false, ids, cap, err);
	size_t n = strlen(text) + 4096;
	char *buf = malloc(n);
	if (!buf)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int len = rt_chat_format(s->tok, text, buf, n, err);
	int rc = len < 0 ? len : rt_tokenize(s->tok, buf, (size_t)len, false, true, ids, cap, err);
	free(buf);
	return rc;
}

int cli_parse_ids(const char *s, int vocab, int32_t *ids, sw_err *err)
{
	int n = 0;
	const char *p = s;
	for (;;) {
		while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long x = strtol(p, &end, 10);
		if (end == p || errno || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n'))
			return sw_errf(err, SW_EINVAL, "--ids: expected token ids separated by spaces or commas, "
			               "found '%.*s' at offset %d", (int)strcspn(p, " ,\t\n"), p, (int)(p - s));
		if (x < 0 || x >= vocab)
			return sw_errf(err, SW_ERANGE, "--ids: token id %ld (number %d in the list) is outside the model's "
			               "vocabulary [0, %d)", x, n + 1, vocab);
		if (ids)
			ids[n] = (int32_t)x;
		n++;
		p = end;
	}
	if (n == 0)
		return sw_errf(err, SW_EINVAL, "--ids: expected at least one token id, found '%s'", s);
	return n;
}

int cli_prompt_tokens(const cli_opts *o, const cli_session *s, bool chat, int32_t **ids, sw_err *err)
{
	*ids = NULL;
	if (o->ids) {
		int n = cli_parse_ids(o->ids, s->target->cfg.vocab, NULL, err);
		if (n < 0)
			return n;
		if (!(*ids = malloc(sizeof(**ids) * (size_t)n)))
			return sw_errf(err, SW_ENOMEM, "out of memory");
		return cli_parse_ids(o->ids, s->target->cfg.vocab, *ids, err);
	}
	char *text = cli_read_prompt(o, err);
	if (!text)
		return err->code ? err->code : SW_EINVAL;
	/* a token covers at least one byte: never truncates, and an over-long
	 * prompt gets its real token count in the error */
	int cap = (int)strlen(text) + 4096;
	if (!(*ids = malloc(sizeof(**ids) * (size_t)cap))) {
		free(text);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	int n = cli_encode_prompt(s, text, chat, *ids, cap, err);
	free(text);
	if (n < 0) {
		free(*ids);
		*ids = NULL;
	}
	return n;
}

void cli_print_stats(FILE *f, const char *label, const rt_stats *st, int gamma, bool json)
{
	double N = st->n_tokens ? (double)st->n_tokens : 1;
	double tau = st->n_target_calls ? (double)st->n_tokens / st->n_target_calls : 0;
	double gen_s = st->t_total - st->t_prefill;
	double tps = gen_s > 0 ? st->n_tokens / gen_s : 0;
	double acc = st->n_drafted ? (double)st->n_accepted / st->n_drafted : 0;
	if (json) {
		fprintf(f, "{\"label\":\"%s\",\"tokens\":%llu,\"prompt_tokens\":%d,\"target_calls\":%llu,"
		        "\"draft_calls\":%llu,\"drafted\":%llu,\"accepted\":%llu,\"tau\":%.4f,"
		        "\"acceptance\":%.4f,\"discard_rate\":%.4f,\"verification_rate\":%.4f,"
		        "\"tok_per_s\":%.3f,\"t_prefill\":%.4f,\"t_total\":%.4f,\"t_target\":%.4f,\"t_draft\":%.4f,"
		        "\"per_position_acceptance\":[",
		        label, (unsigned long long)st->n_tokens, st->n_prompt, (unsigned long long)st->n_target_calls,
		        (unsigned long long)st->n_draft_calls, (unsigned long long)st->n_drafted,
		        (unsigned long long)st->n_accepted, tau, acc, (st->n_drafted - st->n_accepted) / N,
		        st->n_target_calls / N, tps, st->t_prefill, st->t_total, st->t_target, st->t_draft);
		for (int j = 0; j < gamma && j < RT_MAX_GAMMA; j++)
			fprintf(f, "%s%.4f", j ? "," : "",
			        st->pos_tried[j] ? (double)st->pos_accepted[j] / st->pos_tried[j] : 0.0);
		fprintf(f, "]}\n");
		return;
	}
	fprintf(f, "[%s] %llu tokens in %.2fs (+%.2fs prefill of %d): %.2f tok/s, tau %.3f, "
	        "acceptance %.3f, discard rate %.3f, verification rate %.3f\n",
	        label, (unsigned long long)st->n_tokens, gen_s, st->t_prefill, st->n_prompt, tps, tau, acc,
	        (st->n_drafted - st->n_accepted) / N, st->n_target_calls / N);
	if (st->n_drafted) {
		fprintf(f, "[%s] per-position acceptance:", label);
		for (int j = 0; j < gamma && j < RT_MAX_GAMMA; j++)
			fprintf(f, " %.3f", st->pos_tried[j] ? (double)st->pos_accepted[j] / st->pos_tried[j] : 0.0);
		fprintf(f, "\n[%s] time: target %.2fs (%llu calls), draft %.2fs (%llu forwards)\n", label,
		        st->t_target, (unsigned long long)st->n_target_calls, st->t_draft,
		        (unsigned long long)st->n_draft_calls);
	}
}

int cli_tree_setup(const cli_opts *o, cli_session *s, rt_tree_cfg *tcfg, sw_err *err)
{
	if (!s->draft_model && !rt_drafter_drafts_trees(s->drafter))
		return sw_errf(err, SW_EINVAL, "--tree needs a draft model, a block drafter or an EAGLE-3 head: --draft layerskip:..., model:PATH, block:DIR or eagle3:DIR (found '%s')",
		               o->draft);
	rt_tree *t = (rt_tree *)tcfg->tree;
	int rc = rt_tree_parse(o->tree, NULL, t, err);
	if (rc)
		return rc;
	int rule = -1, method = -1;
	if (o->expand && (rule = rt_expand_rule_parse(o->expand)) < 0)
		return sw_errf(err, SW_EINVAL, "--expand '%s': expected topk, sample, sample-wor or spechub", o->expand);
	if (o->verify && (method = rt_verify_method_parse(o->verify)) < 0)
		return sw_errf(err, SW_EINVAL, "--verify '%s': expected greedy, rrs, rrsw, spechub or onehot", o->verify);
	static const int pair[][2] = {
		{ RT_EXPAND_SAMPLE, RT_VERIFY_RRS },     { RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW },
		{ RT_EXPAND_TOPK, RT_VERIFY_ONEHOT },    { RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB },
		{ RT_EXPAND_TOPK, RT_VERIFY_GREEDY },
	};
	bool greedy = o->temperature <= 0;
	if (rule < 0 && method < 0) {
		/* at T = 0 verification accepts the target's argmax only, so a
		 * node's best children are its draft's top-k, not k samples */
		rule = greedy ? RT_EXPAND_TOPK : RT_EXPAND_SAMPLE;
		method = greedy ? RT_VERIFY_GREEDY : RT_VERIFY_RRS;
	}
	for (size_t i = 0; i < sizeof(pair) / sizeof(pair[0]) && (rule < 0 || method < 0); i++) {
		if (rule < 0 && pair[i][1] == method)
			rule = pair[i][0];
		if (method < 0 && pair[i][0] == rule)
			method = pair[i][1];
	}
	if (!rt_verify_compatible(rule, method, greedy))
		return sw_errf(err, SW_EINVAL, "--verify %s is not exact with --expand %s at temperature %g",
		               rt_verify_method_name(method), rt_expand_rule_name(rule), o->temperature);
	tcfg->rule = rule;
	tcfg->method = method;
	if (t->n > s->tctx->max_block)
		return sw_errf(err, SW_ERANGE, "--tree %s has %d nodes, more than the verification block of %d",
		               o->tree, t->n, s->tctx->max_block);
	return 0;
}

void cli_print_tree_stats(FILE *f, const rt_stats *st, bool json)
{
	double r0 = st->rank_tried[0] ? (double)st->rank_accepted[0] / st->rank_tried[0] : 0;
	double r1 = st->rank_tried[1] ? (double)st->rank_accepted[1] / st->rank_tried[1] : 0;
	if (json)
		fprintf(f, "{\"first_draft_acceptance\":%.4f,\"second_draft_acceptance\":%.4f}\n", r0, r1);
	else
		fprintf(f, "[tree] first-draft acceptance %.3f, second-draft acceptance %.3f (given the first was rejected)\n",
		        r0, r1);
}

bool cli_output_clashes(const cli_opts *o, const char *path, const char *opt)
{
	sw_err err = {0};
	if (sw_outfile_check(path, opt, &err)) {
		fprintf(stderr, "specwright: error: %s\n", err.msg);
		return true;
	}
	const char *draft_path = o->draft && strchr(o->draft, ':') ? strchr(o->draft, ':') + 1 : NULL;
	const struct { const char *what, *path; } in[] = {
		{ "the model", o->model },         { "--tokenizer", o->tokenizer },
		{ "-f", o->prompt_file },          { "--corpus", o->corpus },
		{ "--prompt-set", o->prompt_set }, { "--acc-head", o->acc_head },
		{ "--draft", draft_path },         { "--draft-model", o->draft_model },
		{ "--model", o->model_override },
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		if (in[i].path && sw_same_file(path, in[i].path)) {
			fprintf(stderr, "specwright: %s %s: the same file as %s (%s): refusing to write over an "
			        "input; give another path\n", opt, path, in[i].what, in[i].path);
			return true;
		}
	return false;
}
