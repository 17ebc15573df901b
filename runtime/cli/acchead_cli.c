/* The CLI side of SpecDec++: `run --adaptive h[:min:max] [--acc-head FILE]`
 * set-up and the `train-head` command (cli.h). Kept out of main.c so the
 * shared dispatcher only gains a few lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>
#include <sys/stat.h>

#include "decode/acchead.h"
#include "cli.h"
#include "core/fileio.h"

int cli_adaptive_setup(const cli_opts *o, cli_session *s, rt_gen_cfg *cfg, rt_acchead **head, sw_err *err)
{
	*head = NULL;
	if (!o->adaptive) {
		if (o->acc_head)
			return sw_errf(err, SW_EINVAL, "--acc-head needs --adaptive h[:min:max]");
		return 0;
	}
	if (!s->drafter || !s->draft_model)
		return sw_errf(err, SW_EINVAL, "--adaptive needs a draft model (--draft layerskip:... or model:PATH), found '%s'",
		               o->draft);
	rt_adaptive a;
	int rc = rt_adaptive_parse(o->adaptive, &a, err);
	if (rc)
		return rc;
	if (o->acc_head) {
		*head = rt_acchead_load(o->acc_head, s->draft_model->cfg.dim, err);
		if (!*head)
			return sw_err_prefix(err, "--acc-head");
		a.predictor = RT_ADAPT_HEAD;
		a.head = *head;
	}
	/* gamma is the hard maximum of the loop: the adaptive bound sets it */
	cfg->gamma = a.max_len;
	if (a.max_len + 1 > s->tctx->max_block)
		return sw_errf(err, SW_ERANGE, "--adaptive %s: max %d exceeds the verification block of %d", o->adaptive,
		               a.max_len, s->tctx->max_block - 1);
	return rt_drafter_set_adaptive(s->drafter, &a, err);
}

void cli_print_time_model(FILE *f, const rt_stats *st, bool json)
{
	rt_time_model tm;
	rt_time_model_compute(st, &tm);
	if (json)
		fprintf(f, "{\"t_draft_per_forward\":%.6f,\"t_target_per_forward\":%.6f,\"drafts_per_round\":%.4f,"
		        "\"T_eq21\":%.6f,\"T_per_token_eq23\":%.6f}\n",
		        tm.t_draft, tm.t_target, st->n_iters ? (double)st->n_drafted / st->n_iters : 0.0, tm.T_total,
		        tm.T_per_token);
	else
		fprintf(f, "[specdec++] %.2f drafts/round; per forward: draft %.4fs, target %.4fs; "
		        "T = t_d*N_draft + t_t*N_target = %.3fs, T/N (Eq. 2.3) = %.4fs\n",
		        st->n_iters ? (double)st->n_drafted / st->n_iters : 0.0, tm.t_draft, tm.t_target, tm.T_total,
		        tm.T_per_token);
}

/* Corpus text: --corpus FILE, else the fortunes file, else the KJV Genesis
 * and Psalms through the `bible` program (bible-kjv stores its text
 * compressed), verse references stripped. */
static char *load_corpus(const char *path, const char **used, sw_err *err)
{
	static const char *fortunes = "/usr/share/games/fortunes/fortunes";
	FILE *f = NULL;
	bool is_pipe = false;
	if (path) {
		f = fopen(path, "rb");
		*used = path;
	} else if (access(fortunes, R_OK) == 0) {
		f = fopen(fortunes, "rb");
		*used = fortunes;
	} else if (access("/usr/bin/bible", X_OK) == 0) {
		f = popen("/usr/bin/bible -f 'Gen1:1-50:26' 'Ps1:1-150:6' 2>/dev/null", "r");
		is_pipe = true;
		*used = "bible-kjv (Genesis, Psalms)";
	}
	if (!f) {
		sw_errf(err, SW_EIO, "train-head: %s: cannot read the corpus (give a text file with --corpus FILE)",
		        path ? path : "no default corpus (fortunes or bible-kjv) installed");
		return NULL;
	}
	struct stat st = {0};
	if (!is_pipe && (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SW_CAP_TEXT)) {
		fclose(f);
		sw_errf(err, SW_EINVAL, "train-head: %s: %lld bytes or not a regular file; expected a text file of at most "
		        "%zu bytes", *used, S_ISREG(st.st_mode) ? (long long)st.st_size : -1LL, SW_CAP_TEXT);
		return NULL;
	}
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	char line[8192];
	while (buf && fgets(line, sizeof(line), f)) {
		const char *p = line;
		if (is_pipe) { /* "Ge1:1 In the beginning" -> "In the beginning" */
			const char *sp = strchr(line, ' ');
			if (sp && strchr(line, ':') && strchr(line, ':') < sp)
				p = sp + 1;
		}
		size_t k = strlen(p);
		if (n + k + 1 > cap) {
			char *nb = realloc(buf, cap = 2 * (n + k + 1));
			if (!nb)
				free(buf);
			buf = nb;
			if (!buf)
				break;
		}
		memcpy(buf + n, p, k);
		n += k;
	}
	if (is_pipe)
		pclose(f);
	else
		fclose(f);
	if (!buf) {
		sw_errf(err, SW_ENOMEM, "train-head: out of memory reading the corpus");
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

int cli_train_head(const cli_opts *o)
{
	sw_err err = { 0 };
	cli_session s;
	char *text = NULL;
	int32_t *ids = NULL;
	rt_acchead *h = NULL;
	int rc = 1;
	memset(&s, 0, sizeof(s));
	if (!o->output || (strncmp(o->draft, "layerskip:", 10) && strncmp(o->draft, "model:", 6))) {
		fprintf(stderr, "specwright train-head: -o HEAD.safetensors and --draft layerskip:SPEC (or model:PATH) are required\n");
		return 2;
	}
	if (cli_output_clashes(o, o->output, "-o"))
		return 2;
	rt_acchead_train_cfg cfg;
	rt_acchead_train_defaults(&cfg);
	cfg.verbose = 1;
	cfg.seed = o->seed;
	if (o->n_tokens > 0)
		cfg.n_tokens = o->n_tokens;
	if (o->layers) {
		char *end;
		long k = strtol(o->layers, &end, 10);
		if (*end || end == o->layers || k < 0 || k > 16) {
			fprintf(stderr, "specwright train-head: --layers expects the head's block count k in [0, 16], found '%s'\n",
			        o->layers);
			return 2;
		}
		cfg.n_layers = (int)k;
	}
	if (cli_session_open(&s, o, &err) || cli_make_drafter(&s, o->draft, 256, &s.drafter, &err))
		goto out_err;
	const char *used = NULL;
	text = load_corpus(o->corpus, &used, &err);
	if (!text)
		goto out_err;
	size_t len = strlen(text);
	ids = malloc((len + 16) * sizeof(*ids));
	if (!ids) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}
	int n = rt_tokenize(s.tok, text, len, false, false, ids, (int)len + 16, &err);
	if (n < 0)
		goto out_err;
	fprintf(stderr, "train-head: corpus %s, %d tokens; draft %s (hidden %d); head k = %d; %d labelled positions\n", used,
	        n, o->draft, s.draft_model->cfg.dim, cfg.n_layers, cfg.n_tokens);
	rt_acchead_train_report rep;
	if (rt_acchead_train(s.target, s.draft_model, ids, n, &cfg, &h, &rep, &err))
		goto out_err;
	fprintf(stderr, "train-head: data %.1fs, training %.1fs; %d train / %d held out; mean label %.4f\n",
	        rep.seconds_data, rep.seconds_train, rep.n_train, rep.n_test, rep.mean_label);
	fprintf(stderr, "train-head: weighted soft BCE (w_rej %g): train %.4f -> %.4f; held out %.4f vs best constant %.4f\n",
	        cfg.w_rej, rep.train_loss_first, rep.train_loss_last, rep.test_loss, rep.test_loss_const);
	fprintf(stderr, "train-head: unweighted BCE held out %.4f vs the mean label's %.4f (the weights bias p_hat low)\n",
	        rep.test_bce, rep.test_bce_const);
	if (rt_acchead_save(h, o->output, &err))
		goto out_err;
	fprintf(stderr, "wrote %s\n", o->output);
	rc = 0;
	goto out_free;
out_err:
	fprintf(stderr, "specwright train-head: error: %s\n", err.msg);
out_free:
	rt_acchead_free(h);
	free(ids);
	free(text);
	cli_session_close(&s);
	return rc;
}
