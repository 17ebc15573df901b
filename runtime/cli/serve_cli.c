/* `specwright serve ENGINE_DIR`: the HTTP server (runtime/serve) over one
 * built engine on the best backend. The engine is loaded and its graph
 * captured (one warm-up generation) while /health says "loading". SIGTERM,
 * SIGINT or SIGHUP (core/stopsig.h: taken the same way whatever threads the
 * libraries start) stops it gracefully and the process exits 0: during
 * loading once the current loading step returns; while serving, queued
 * requests get 503 and the running one finishes (or is ended after the
 * grace, its stream still closed properly). Signals during the stop are
 * logged and change nothing: a running stream is never cut by one. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/stopsig.h"
#include "engine/engine.h"
#include "gen/render.h"
#include "gen/jit/emu_build.h"
#include "serve/server.h"

typedef struct serve_ctx {
	cli_session s;
	rt_engine *e;
	rt_dev *dev;
	int32_t *out;
	uint64_t base_seed, n_req;
	sw_serve_backend b;
} serve_ctx;

static int be_encode(void *user, const sw_req *r, int32_t *ids, int cap, sw_err *err)
{
	serve_ctx *c = user;
	if (r->kind == SW_REQ_COMPLETION)
		return rt_tokenize(c->s.tok, r->prompt, strlen(r->prompt), rt_tokenizer_add_bos(c->s.tok), false,
		                   ids, cap, err);
	size_t n = 4096;
	for (int i = 0; i < r->n_msgs; i++)
		n += strlen(r->contents[i]) + 64;
	char *buf = malloc(n);
	if (!buf)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int len = rt_chat_format_msgs(c->s.tok, (const char *const *)r->roles, (const char *const *)r->contents,
	                              r->n_msgs, buf, n, err);
	/* parse_special: the template's own <|im_start|> markers become their ids */
	int rc = len < 0 ? len : rt_tokenize(c->s.tok, buf, (size_t)len, false, true, ids, cap, err);
	free(buf);
	return rc;
}

/* The request's sampling values: what it gives over the engine's defaults
 * (the spec's, engine.json $.spec.sampling). They are run-time words of the
 * engine (no rebuild, no recapture). */
static rt_engine_sampling req_sampling(const serve_ctx *c, const sw_req *r)
{
	rt_engine_sampling s = c->e->man->samp;
	if (r->has_temperature)
		s.temperature = (float)r->temperature;
	if (r->has_top_p)
		s.top_p = (float)r->top_p;
	if (r->has_top_k)
		s.top_k = r->top_k;
	return s;
}

/* What the engine cannot honour is refused, naming the parameter: a
 * temperature above 0 on a greedy engine (request.c has checked the
 * ranges). Thread-safe: reads only the loaded manifest. */
static int be_check_sampling(void *user, const sw_req *r, const char **param, sw_err *err)
{
	serve_ctx *c = user;
	rt_engine_sampling s = req_sampling(c, r);
	if (s.temperature > 0 && !rt_engine_samples(c->e)) { /* the client's words, no server paths */
		*param = "temperature";
		return sw_errf(err, SW_ENOTSUP, "temperature %g cannot be honoured: the engine '%s' "
		               "verifies greedily, which is exact at temperature 0 only (omit temperature or "
		               "set it to 0, or serve an engine built with a sampling method)",
		               (double)s.temperature, c->e->man->name);
	}
	if (rt_engine_check_sampling(c->e, &s, err)) { /* ranges: request.c checked them first */
		*param = !(s.top_p > 0 && s.top_p <= 1) ? "top_p" : s.top_k < 0 ? "top_k" : "temperature";
		return err->code ? err->code : SW_EINVAL;
	}
	return 0;
}

static int be_piece(void *user, void *state, int32_t tok, char *out, size_t cap)
{
	serve_ctx *c = user;
	rt_detok *dt = state;
	if (tok < 0)
		return rt_detok_flush(dt, out, cap);
	if (rt_token_is_eog(c->s.tok, tok))
		return -1;
	if (rt_token_type(c->s.tok, tok) == RT_TT_CONTROL)
		return 0; /* control tokens are not text */
	int k = rt_detok_push(dt, c->s.tok, tok, out, cap);
	return k > 0 ? k : 0;
}

static int be_generate(void *user, const sw_req *r, const int32_t *ids, int n_ids, int max_new,
                       sw_serve_emit emit, void *sink, sw_serve_gen *g, sw_err *err)
{
	serve_ctx *c = user;
	/* the request's seed, else a fresh one; a run-time word like the
	 * sampling values (rt_engine_reseed recaptures nothing) */
	uint64_t seed = r->has_seed ? r->seed : c->base_seed + 0x9E3779B97F4A7C15ull * ++c->n_req;
	int rc = rt_engine_reseed(c->e, seed, err);
	if (rc)
		return rc;
	const rt_engine_sampling samp = req_sampling(c, r);
	rt_engine_run run = {.prompt = ids, .n_prompt = n_ids, .max_new = max_new, .eos = rt_token_eos(c->s.tok),
	                     .is_eog = cli_is_eog, .eog_user = c->s.tok, .on_tokens = emit, .cb_user = sink,
	                     .samp = &samp};
	rt_engine_stats st;
	int n = rt_engine_generate(c->e, &run, c->out, &st, err);
	if (n < 0)
		return n;
	int nodes = c->e->man->n_nodes - 1; /* draft tokens per iteration */
	g->n_prompt = n_ids;
	g->n_drafts = (uint64_t)st.n_iters;
	g->n_draft_tokens = (uint64_t)st.n_iters * (uint64_t)(nodes > 0 ? nodes : 0);
	g->n_accepted = n > st.n_iters ? (uint64_t)(n - st.n_iters) : 0;
	g->n_pos = c->e->man->depth < SW_SERVE_MAX_POS ? c->e->man->depth : SW_SERVE_MAX_POS;
	for (int d = 0; d < g->n_pos; d++)
		g->accepted_by_pos[d] = st.pos_accepted[d];
	return n;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: specwright serve ENGINE_DIR [--host 127.0.0.1] [--port 8080] [--queue 16]\n"
	           "         [--backend auto|host|host-emulate|cuda] [--model GGUF] [--max-body BYTES]\n"
	           "         [--default-max-tokens N] [--seed N] [--quiet] [--draft-model DIR: a block\n"
	           "         drafter engine's drafter directory, default the one it was built from]\n"
	           "         [--weights DIR_OR_FILE: where the engine's weights are, when not at the\n"
	           "         absolute paths it recorded at build]\n"
	           "         [--max-connections N (default queue + 64)] [--header-timeout S (default 10)]\n"
	           "         [--max-connections-per-client N (default queue + 4, at most half of\n"
	           "         --max-connections)]\n"
	           "OpenAI-compatible: POST /v1/completions, POST /v1/chat/completions (stream: true for\n"
	           "server-sent events), GET /v1/models, GET /health, GET /metrics (Prometheus).\n"
	           "Connections: at most --max-connections open (defaults: 80 with the default queue of\n"
	           "16), at most --max-connections-per-client of them (20) from one source address. A\n"
	           "new connection past either evicts the oldest idle one (its own address's at the cap,\n"
	           "anyone's when the table is full); with none idle it is closed unanswered. Idle: no\n"
	           "request since it connected or had its last answer; one with a request in progress is\n"
	           "never evicted. The per-client default lets one address (a proxy's) fill the queue and\n"
	           "the running slot: behind nginx every connection comes from nginx's address. A\n"
	           "connection must send a complete request (headers and body) within --header-timeout\n"
	           "seconds of connecting or of its previous answer, else it is closed; one with a\n"
	           "request keeps its slot while it waits, runs and streams (600 s of inactivity at most).\n"
	           "Room: a request's max_tokens is refused above the room its prompt leaves, which is\n"
	           "the engine's context less the prompt and what a speculative iteration keeps for its\n"
	           "draft tree (the tree's nodes less 2): asked for at most that, it gets that many\n"
	           "tokens unless it stops first (end of generation, a stop string).\n"
	           "Signals: SIGTERM, SIGINT or SIGHUP stops gracefully, exit 0: during loading, once the\n"
	           "current loading step returns; while serving, no new requests (503), queued ones get\n"
	           "503, the running one finishes (after 30 s it is ended at its next iteration,\n"
	           "finish_reason \"length\"), and every stream ends with its final chunk and [DONE].\n"
	           "A second signal during the stop is logged and changes nothing (SIGKILL ends at once).\n");
}

static int arg_int(const char *opt, const char *v, long lo, long hi, long *out)
{
	char *end;
	long x = v ? strtol(v, &end, 10) : 0;
	if (!v || !*v || *end || x < lo || x > hi) {
		fprintf(stderr, "specwright serve: %s expects an integer in [%ld, %ld], found \"%s\"\n", opt, lo, hi,
		        v ? v : "(nothing)");
		return -1;
	}
	*out = x;
	return 0;
}

int cli_serve(int argc, char **argv)
{
	sw_server_opts so = {.host = "127.0.0.1", .port = 8080, .queue = 16, .max_body = 1 << 20,
	                     .default_max_tokens = 256, .shutdown_grace_s = 30};
	cli_opts o = {.chat = -1, .ctx = 1 << 30, .seed = 1234, .max_new = 64};
	const char *dir = NULL;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		long x;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--host") && v) {
			so.host = v, i++;
		} else if (!strcmp(a, "--port")) {
			if (arg_int(a, v, 0, 65535, &x))
				return 2;
			so.port = (int)x, i++;
		} else if (!strcmp(a, "--queue")) {
			if (arg_int(a, v, 0, 100000, &x))
				return 2;
			so.queue = (int)x, i++;
		} else if (!strcmp(a, "--max-body")) {
			if (arg_int(a, v, 256, 1L << 30, &x))
				return 2;
			so.max_body = (size_t)x, i++;
		} else if (!strcmp(a, "--default-max-tokens")) {
			if (arg_int(a, v, 1, 1 << 24, &x))
				return 2;
			so.default_max_tokens = (int)x, i++;
		} else if (!strcmp(a, "--seed")) {
			if (arg_int(a, v, 0, 0x7fffffffffffffffL, &x))
				return 2;
			o.seed = (uint64_t)x, i++;
		} else if (!strcmp(a, "--backend") && v) {
			o.backend = v, i++;
		} else if (!strcmp(a, "--model") && v) {
			o.model_override = v, i++;
		} else if (!strcmp(a, "--draft-model") && v) {
			o.draft_model = v, i++;
		} else if (!strcmp(a, "--weights") && v) {
			o.weights = v, i++;
		} else if (!strcmp(a, "--max-connections")) {
			if (arg_int(a, v, 1, 100000, &x))
				return 2;
			so.max_connections = (int)x, i++;
		} else if (!strcmp(a, "--max-connections-per-client")) {
			if (arg_int(a, v, 1, 100000, &x))
				return 2;
			so.max_client_connections = (int)x, i++;
		} else if (!strcmp(a, "--header-timeout")) {
			if (arg_int(a, v, 1, 3600, &x))
				return 2;
			so.header_timeout_s = (double)x, i++;
		} else if (!strcmp(a, "--quiet")) {
			so.quiet = true;
		} else if (a[0] != '-' && !dir) {
			dir = a;
		} else {
			fprintf(stderr, "specwright serve: unknown or incomplete option \"%s\"\n", a);
			usage(stderr);
			return 2;
		}
	}
	sw_err err = {0};
	if (sw_server_opts_resolve(&so, &err)) { /* defaults filled; a cap above the table refused */
		fprintf(stderr, "specwright serve: %s\n", err.msg);
		return 2;
	}
	if (!dir || !cli_is_engine_dir(dir)) {
		fprintf(stderr, "specwright serve: expected an engine directory (from `specwright build`), found "
		                "\"%s\"\n",
		        dir ? dir : "(nothing)");
		return 2;
	}
	/* before any thread of ours starts (main() calls nothing that starts one
	 * before this); threads the libraries started earlier only pass a
	 * signal on (stopsig.h) */
	if (sw_stopsig_setup(&err)) {
		fprintf(stderr, "specwright serve: %s\n", err.msg);
		return 1;
	}
	sw_server *srv = sw_server_start(&so, &err);
	if (!srv) {
		fprintf(stderr, "specwright serve: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "serve: listening on http://%s:%d (loading %s)\n", so.host, sw_server_port(srv), dir);
	serve_ctx c = {0};
	int rc = 1, sig = 0;
/* a stop signal during loading: stop before the next step */
#define STOP_IF_SIGNALLED()                                                                                 \
	do {                                                                                                \
		if ((sig = sw_stopsig_wait(0)) != 0)                                                        \
			goto stopped_loading;                                                               \
	} while (0)
	if (!(c.e = rt_engine_load(dir, &err)))
		goto out;
	/* verified whole (issue 40): the drafter's files, the re-plan */
	cli_weights w;
	if (cli_engine_weights_find(c.e->man, dir, &o, &w, &err) ||
	    cli_engine_verify(c.e->man, dir, &w, NULL, NULL, &err))
		goto out;
	STOP_IF_SIGNALLED();
	o.model = w.target;
	if (!o.model[0]) {
		sw_errf(&err, SW_EINVAL, "%s/engine.json: built from a shape, not a weights file: give the weights "
		                         "with --model PATH", dir);
		goto out;
	}
	if (c.e->man->draft_kind == RT_ENGINE_DRAFT_MODEL) {
		sw_errf(&err, SW_ENOTSUP, "%s: serving engines with a separate draft model is not supported yet", dir);
		goto out;
	}
	o.ctx = c.e->man->max_ctx;
	if (cli_session_open(&c.s, &o, &err)) {
		sw_err_prefix(&err, "engine %s: target", dir);
		goto out;
	}
	STOP_IF_SIGNALLED();
	const rt_dev_opts dopts = {.emu_compile = gen_emu_module_build};
	if (!(c.dev = rt_dev_open(o.backend ? o.backend : "auto", &dopts, &err)))
		goto out;
	STOP_IF_SIGNALLED();
	if (o.draft_model && c.e->man->draft_kind != RT_ENGINE_DRAFT_BLOCK &&
	    c.e->man->draft_kind != RT_ENGINE_DRAFT_EAGLE3) {
		sw_errf(&err, SW_EINVAL, "%s: --draft-model cannot apply: the engine does not draft with a "
		        "block drafter or an EAGLE-3 head", dir);
		goto out;
	}
	if (c.e->man->draft_kind == RT_ENGINE_DRAFT_EAGLE3) {
		/* the engine's head directory (or --draft-model DIR): bind uploads
		 * its tensors, its digest checked */
		const char *hp = w.draft;
		rt_eagle3 *h = rt_eagle3_load(hp, c.s.target, &err);
		int hrc = h ? cli_engine_bind_eagle3(c.e, c.dev, c.s.target, h, o.seed, &err) : 1;
		rt_eagle3_free(h);
		if (hrc)
			goto out;
	} else if (c.e->man->draft_kind == RT_ENGINE_DRAFT_BLOCK) {
		/* the engine's drafter directory (or --draft-model DIR, a bundle's
		 * copy): bind uploads its tensors, its digest checked */
		const char *bp = w.draft;
		rt_block_drafter *bd = bp[0] ? rt_block_drafter_load(bp, c.s.target, &err) : NULL;
		if (!bd && !bp[0])
			sw_errf(&err, SW_EINVAL, "%s/engine.json: $.spec.draft: built from a block drafter's "
			        "shape, no weights to serve with", dir);
		int brc = bd ? cli_engine_bind_block(c.e, c.dev, c.s.target, bd, o.seed, &err) : 1;
		rt_block_drafter_free(bd);
		if (brc)
			goto out;
	} else if (cli_engine_bind(c.e, c.dev, c.s.target, NULL, o.seed, &err)) {
		goto out;
	}
	STOP_IF_SIGNALLED();
	c.base_seed = o.seed;
	if (!(c.out = malloc(sizeof(*c.out) * (size_t)(c.e->man->max_ctx + 1)))) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out;
	}
	/* warm-up: one short generation captures the graph before /health says ok */
	{
		int32_t bos = rt_token_eos(c.s.tok) >= 0 ? 1 : 0;
		rt_engine_run run = {.prompt = &bos, .n_prompt = 1, .max_new = 2, .eos = -1};
		rt_engine_stats st;
		if (rt_engine_generate(c.e, &run, c.out, &st, &err) < 0)
			goto out;
	}
	STOP_IF_SIGNALLED();
#undef STOP_IF_SIGNALLED
	snprintf(c.b.model_id, sizeof(c.b.model_id), "%s", c.e->man->name);
	c.b.user = &c;
	c.b.max_ctx = c.e->man->max_ctx;
	/* The room the engine keeps (engine.c, kernels/ref/step.c): it takes a
	 * prompt of P tokens when P + n_nodes <= max_ctx, and runs an iteration
	 * while the committed length L (P - 1 at first: the last prompt token is
	 * the root) leaves room for the whole tree, L + n_nodes <= max_ctx; each
	 * iteration emits at least one token and commits as many. So it always
	 * reaches L = max_ctx - n_nodes + 1, i.e. max_ctx - n_nodes + 2 - P
	 * tokens (more when the last iterations accept drafts): that is the
	 * room a request is told, and max_tokens up to it is kept exactly. */
	c.b.max_prompt = c.e->man->max_ctx - c.e->man->n_nodes;
	c.b.max_total = c.e->man->max_ctx - c.e->man->n_nodes + 2;
	c.b.encode = be_encode;
	c.b.check_sampling = be_check_sampling;
	c.b.piece = be_piece;
	c.b.piece_state_size = sizeof(rt_detok);
	c.b.generate = be_generate;
	sw_server_ready(srv, &c.b);
	fprintf(stderr, "serve: ready: model \"%s\" on %s, context %d, queue %d\n", c.b.model_id, c.dev->desc,
	        c.e->man->max_ctx, so.queue);
	while (!(sig = sw_stopsig_wait(-1)))
		;
	fprintf(stderr, "serve: %s: stopping (queued requests get 503, the running one finishes)\n", strsignal(sig));
	sw_server_quiesce(srv);
	while (!sw_server_drained(srv, 0.2))
		if ((sig = sw_stopsig_wait(0)) != 0)
			fprintf(stderr, "serve: %s again: already stopping; the running request goes on to its end "
			        "(SIGKILL ends the process at once)\n", strsignal(sig));
	rc = 0;
	goto out;
stopped_loading:
	fprintf(stderr, "serve: %s while loading: stopping before serving\n", strsignal(sig));
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "specwright serve: %s\n", err.msg);
	sw_server_stop(srv);
	rt_engine_free(c.e);
	if (c.dev)
		rt_dev_free(c.dev);
	cli_session_close(&c.s);
	free(c.out);
	if (!rc)
		fprintf(stderr, "serve: stopped\n");
	return rc;
}
