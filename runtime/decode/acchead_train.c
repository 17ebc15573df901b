/* Training the SpecDec++ acceptance head on the CPU (ALGORITHMS.txt 6):
 * data from a corpus with the target and the draft, weighted soft BCE,
 * Adam. The draft is frozen; only the head trains. Not a general trainer:
 * one small MLP, minibatch GEMMs through BLAS.
 *
 * Data, and where it simplifies the reference (data/gen_acceptance.py):
 *  - The reference has the target generate whole responses to prompts. A
 *    single-token CPU forward of the real target costs ~100x a batched one
 *    per token here, so the "target continuation" is teacher-forced: chunk =
 *    ctx_len + cont_len corpus tokens; one batched target forward over the
 *    chunk gives, at every continuation position i, a target sample t_i ~
 *    p(. | corpus_<i) (T = 1). The context of t_i is the real text, not the
 *    target's own earlier samples.
 *  - One batched draft forward over the same chunk gives Y_i ~ q(. | corpus_<i).
 *  - Mixing (r = 0.15): position i of the training sequence takes t_i with
 *    probability r (no label), else Y_i (a draft-token position, labelled);
 *    the ctx_len prefix stays corpus text (no labels), as prompts do.
 *  - Both models then run over the mixed sequence m. Label of a draft-token
 *    position: y_i = min(1, p(m_i | m_<i) / q(m_i | m_<i)) at T = 1, the
 *    probability that m_i would be accepted if the draft proposed it there.
 *    (As in the reference, Y_i was drawn given the unmixed prefix, so its
 *    distribution is not exactly q(. | m_<i); the label is still the exact
 *    acceptance probability of that token in that context.) Input x_i =
 *    the draft's final-normed hidden state at m_i's own position.
 * Loss: L = sum w_rej (1-y)(-log(1-p)) + w_acc y (-log p) over sum of the
 * weights, per minibatch (train.py); logs through softplus for stability. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acchead.h"
#include "core/timing.h"
#include "sampler.h"

void rt_acchead_train_defaults(rt_acchead_train_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->n_tokens = 6144;
	c->n_layers = 1;
	c->ctx_len = 32;
	c->cont_len = 96;
	c->mix_ratio = 0.15f;
	c->w_rej = 6.0f;
	c->w_acc = 1.0f;
	c->epochs = 4;
	c->batch = 32;
	c->lr = 1e-4f;
	c->holdout = 0.15f;
	c->seed = 1;
}

static uint64_t sm_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double sm_uniform(uint64_t *s) { return (double)(sm_next(s) >> 11) * 0x1.0p-53; }

/* log softmax(row)[tok], in double */
static double log_softmax_at(const float *row, int V, int tok)
{
	float mx = -INFINITY;
	for (int v = 0; v < V; v++)
		if (row[v] > mx)
			mx = row[v];
	double s = 0;
	for (int v = 0; v < V; v++)
		s += exp((double)row[v] - mx);
	return (double)row[tok] - mx - log(s);
}

static double softplus(double z) { return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); }

struct dataset {
	float *x; /* (n, dim) */
	float *y; /* (n) */
	int *chunk; /* (n) source chunk, for the held-out split */
	int n, cap, dim;
};

static int ds_push(struct dataset *ds, const float *x, float y, int chunk)
{
	if (ds->n == ds->cap) {
		int nc = ds->cap ? 2 * ds->cap : 1024;
		float *nx = realloc(ds->x, (size_t)nc * ds->dim * sizeof(*nx));
		if (!nx)
			return -1;
		ds->x = nx;
		float *ny = realloc(ds->y, (size_t)nc * sizeof(*ny));
		if (!ny)
			return -1;
		ds->y = ny;
		int *nch = realloc(ds->chunk, (size_t)nc * sizeof(*nch));
		if (!nch)
			return -1;
		ds->chunk = nch;
		ds->cap = nc;
	}
	memcpy(ds->x + (size_t)ds->n * ds->dim, x, (size_t)ds->dim * sizeof(*x));
	ds->y[ds->n] = y;
	ds->chunk[ds->n] = chunk;
	ds->n++;
	return 0;
}

static int gen_data(const rt_model *target, const rt_model *draft, const int32_t *corpus, int n_corpus,
                    const rt_acchead_train_cfg *cfg, struct dataset *ds, int *n_chunks, sw_err *err)
{
	int L = cfg->ctx_len + cfg->cont_len, V = target->cfg.vocab, dim = draft->cfg.dim;
	int rc = 0;
	if (n_corpus < L)
		return sw_errf(err, SW_EINVAL, "train-head: the corpus has %d tokens, a chunk needs %d", n_corpus, L);
	rt_ctx *tc = rt_ctx_new(target, L, L, err);
	rt_ctx *dc = tc ? rt_ctx_new(draft, L, L, err) : NULL;
	float *lt = malloc((size_t)L * V * sizeof(*lt));
	float *ld = malloc((size_t)L * V * sizeof(*ld));
	float *hid = malloc((size_t)L * dim * sizeof(*hid));
	float *pr = malloc((size_t)V * sizeof(*pr));
	int *idx = malloc((size_t)V * sizeof(*idx));
	int32_t *seq = malloc((size_t)L * sizeof(*seq)), *tt = malloc((size_t)L * sizeof(*tt));
	int32_t *yd = malloc((size_t)L * sizeof(*yd)), *pos = malloc((size_t)L * sizeof(*pos));
	bool *lab = malloc((size_t)L * sizeof(*lab));
	if (!tc || !dc) {
		rc = SW_ENOMEM;
		goto out_free;
	}
	if (!lt || !ld || !hid || !pr || !idx || !seq || !tt || !yd || !pos || !lab) {
		rc = sw_errf(err, SW_ENOMEM, "train-head: out of memory for chunks of %d tokens", L);
		goto out_free;
	}
	for (int i = 0; i < L; i++)
		pos[i] = i;
	rt_sampling s1 = { 1.0f, 0, 1.0f };
	uint64_t rng = cfg->seed * 0x2545f4914f6cdd1dull + 7;
	double t0 = sw_now_s();
	int c;
	for (c = 0; ds->n < cfg->n_tokens; c++) {
		int start = (int)(sm_next(&rng) % (uint64_t)(n_corpus - L + 1));
		memcpy(seq, corpus + start, (size_t)L * sizeof(*seq));
		rt_ctx_truncate(tc, 0);
		rt_ctx_truncate(dc, 0);
		if ((rc = rt_ctx_eval(tc, seq, pos, L, NULL, lt, NULL, err)) ||
		    (rc = rt_ctx_eval(dc, seq, pos, L, NULL, ld, NULL, err)))
			goto out_free;
		for (int i = cfg->ctx_len; i < L; i++) {
			rt_probs(pr, lt + (size_t)(i - 1) * V, V, &s1, idx);
			tt[i] = rt_sample_cdf(pr, V, sm_uniform(&rng));
			rt_probs(pr, ld + (size_t)(i - 1) * V, V, &s1, idx);
			yd[i] = rt_sample_cdf(pr, V, sm_uniform(&rng));
			lab[i] = sm_uniform(&rng) >= cfg->mix_ratio;
			seq[i] = lab[i] ? yd[i] : tt[i];
		}
		rt_ctx_truncate(tc, 0);
		rt_ctx_truncate(dc, 0);
		if ((rc = rt_ctx_eval(tc, seq, pos, L, NULL, lt, NULL, err)) ||
		    (rc = rt_ctx_eval(dc, seq, pos, L, NULL, ld, hid, err)))
			goto out_free;
		for (int i = cfg->ctx_len; i < L && ds->n < cfg->n_tokens; i++) {
			if (!lab[i])
				continue;
			double lp = log_softmax_at(lt + (size_t)(i - 1) * V, V, seq[i]);
			double lq = log_softmax_at(ld + (size_t)(i - 1) * V, V, seq[i]);
			float y = (float)exp(fmin(0.0, lp - lq));
			if (ds_push(ds, hid + (size_t)i * dim, y, c)) {
				rc = sw_errf(err, SW_ENOMEM, "train-head: out of memory for %d samples", ds->n);
				goto out_free;
			}
		}
		if (cfg->verbose && (c % 8 == 7 || ds->n >= cfg->n_tokens))
			fprintf(stderr, "train-head: data %d / %d positions (%d chunks, %.1fs)\n", ds->n, cfg->n_tokens, c + 1,
			        sw_now_s() - t0);
	}
	*n_chunks = c;
out_free:
	rt_ctx_free(tc);
	rt_ctx_free(dc);
	free(lt);
	free(ld);
	free(hid);
	free(pr);
	free(idx);
	free(seq);
	free(tt);
	free(yd);
	free(pos);
	free(lab);
	return rc;
}

/* Minibatch forward (and backward when g is non-NULL) of the head.
 * Activations: Ys (k+1, B, d), As (k, B, d). Returns the summed weighted
 * loss and adds the gradient of (loss / wsum) into g. */
struct grads {
	float *w, *b, *w2, *b2;
};

static double head_batch(const rt_acchead *h, const float *x, const float *y, int B, float w_rej, float w_acc,
                         float *Ys, float *As, float *dY, float *dA, float *z, struct grads *g, double *wsum_out)
{
	int d = h->dim, k = h->n_layers;
	memcpy(Ys, x, (size_t)B * d * sizeof(*Ys));
	for (int l = 0; l < k; l++) {
		float *Yl = Ys + (size_t)l * B * d, *Yn = Yl + (size_t)B * d, *Al = As + (size_t)l * B * d;
		for (int i = 0; i < B; i++)
			memcpy(Al + (size_t)i * d, h->b, (size_t)d * sizeof(*Al));
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, d, d, 1.0f, Yl, d, h->w, d, 1.0f, Al, d);
		for (size_t i = 0; i < (size_t)B * d; i++)
			Yn[i] = Yl[i] + Al[i] / (1.0f + expf(-Al[i]));
	}
	const float *Yk = Ys + (size_t)k * B * d;
	double loss = 0, wsum = 0;
	for (int i = 0; i < B; i++) {
		double l0 = h->b2[0], l1 = h->b2[1];
		for (int j = 0; j < d; j++) {
			l0 += (double)h->w2[j] * Yk[(size_t)i * d + j];
			l1 += (double)h->w2[d + j] * Yk[(size_t)i * d + j];
		}
		z[i] = (float)(l1 - l0);
		double wr = w_rej * (1.0 - y[i]), wa = w_acc * (double)y[i];
		loss += wr * softplus(z[i]) + wa * softplus(-z[i]);
		wsum += wr + wa;
	}
	*wsum_out = wsum;
	if (!g)
		return loss;
	/* dL/dz_i = (w_rej (1-y) p - w_acc y (1-p)) / wsum */
	for (int i = 0; i < B; i++) {
		double p = 1.0 / (1.0 + exp(-(double)z[i]));
		double wr = w_rej * (1.0 - y[i]), wa = w_acc * (double)y[i];
		z[i] = (float)((wr * p - wa * (1.0 - p)) / (wsum > 0 ? wsum : 1.0));
	}
	for (int i = 0; i < B; i++) {
		g->b2[0] -= z[i];
		g->b2[1] += z[i];
		for (int j = 0; j < d; j++) {
			float yv = Yk[(size_t)i * d + j];
			g->w2[j] -= z[i] * yv;
			g->w2[d + j] += z[i] * yv;
			dY[(size_t)i * d + j] = z[i] * (h->w2[d + j] - h->w2[j]);
		}
	}
	for (int l = k - 1; l >= 0; l--) {
		const float *Yl = Ys + (size_t)l * B * d, *Al = As + (size_t)l * B * d;
		for (size_t i = 0; i < (size_t)B * d; i++) {
			float a = Al[i], s = 1.0f / (1.0f + expf(-a));
			dA[i] = dY[i] * s * (1.0f + a * (1.0f - s));
		}
		for (int i = 0; i < B; i++)
			for (int j = 0; j < d; j++)
				g->b[j] += dA[(size_t)i * d + j];
		/* tied weights: the gradient of every application adds up */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, B, 1.0f, dA, d, Yl, d, 1.0f, g->w, d);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d, d, 1.0f, dA, d, h->w, d, 1.0f, dY, d);
	}
	return loss;
}

static void adam_step(float *p, const float *g, float *m, float *v, size_t n, float lr, int t)
{
	const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
	float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);
	for (size_t i = 0; i < n; i++) {
		m[i] = b1 * m[i] + (1 - b1) * g[i];
		v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
		p[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
	}
}

int rt_acchead_train(const rt_model *target, const rt_model *draft, const int32_t *corpus, int n_corpus,
                     const rt_acchead_train_cfg *cfg, rt_acchead **out, rt_acchead_train_report *rep,
                     sw_err *err)
{
	*out = NULL;
	memset(rep, 0, sizeof(*rep));
	if (draft->kind != RT_MODEL_LLAMA || target->cfg.vocab != draft->cfg.vocab)
		return sw_errf(err, SW_EINVAL, "train-head: needs a Llama draft with the target's vocabulary");
	if (cfg->n_tokens < 16 || cfg->ctx_len < 1 || cfg->cont_len < 1 || cfg->batch < 1 || cfg->epochs < 1)
		return sw_errf(err, SW_EINVAL, "train-head: bad configuration (tokens %d >= 16, chunk %d+%d, batch %d, epochs %d)",
		               cfg->n_tokens, cfg->ctx_len, cfg->cont_len, cfg->batch, cfg->epochs);
	int d = draft->cfg.dim, k = cfg->n_layers;
	struct dataset ds = { .dim = d };
	rt_acchead *h = NULL;
	float *buf = NULL;
	int *order = NULL;
	int n_chunks = 0, rc;
	double t0 = sw_now_s();
	rc = gen_data(target, draft, corpus, n_corpus, cfg, &ds, &n_chunks, err);
	if (rc)
		goto out_free;
	rep->seconds_data = sw_now_s() - t0;
	/* Held out: the samples of the last chunks (neighbouring positions of
	 * one chunk are correlated, so the split is by chunk). */
	int cut_chunk = n_chunks - (int)ceil(cfg->holdout * n_chunks);
	if (cut_chunk < 1)
		cut_chunk = 1;
	int n_train = 0;
	while (n_train < ds.n && ds.chunk[n_train] < cut_chunk)
		n_train++;
	int n_test = ds.n - n_train;
	if (n_train < cfg->batch || n_test < 1) {
		rc = sw_errf(err, SW_EINVAL, "train-head: %d training / %d held-out samples, too few (raise --tokens)", n_train,
		             n_test);
		goto out_free;
	}
	rep->n_train = n_train;
	rep->n_test = n_test;
	double sy = 0, A = 0, R = 0;
	for (int i = 0; i < n_train; i++) {
		sy += ds.y[i];
		A += cfg->w_acc * ds.y[i];
		R += cfg->w_rej * (1.0 - ds.y[i]);
	}
	rep->mean_label = sy / n_train;
	rep->const_w = A / (A + R);

	h = rt_acchead_new(d, k, err);
	if (!h) {
		rc = SW_ENOMEM;
		goto out_free;
	}
	rt_acchead_init_random(h, cfg->seed ^ 0xacc4eadull);
	int B = cfg->batch;
	size_t np = (size_t)d * d + d + 2 * (size_t)d + 2;
	size_t nbuf = 3 * np + (size_t)(k + 1) * B * d + (size_t)(k > 0 ? k : 1) * B * d + 2 * (size_t)B * d + B +
	              (size_t)B * d + B;
	buf = calloc(nbuf, sizeof(*buf));
	order = malloc((size_t)n_train * sizeof(*order));
	if (!buf || !order) {
		rc = sw_errf(err, SW_ENOMEM, "train-head: out of memory");
		goto out_free;
	}
	float *gr = buf, *mo = gr + np, *ve = mo + np, *Ys = ve + np, *As = Ys + (size_t)(k + 1) * B * d;
	float *dY = As + (size_t)(k > 0 ? k : 1) * B * d, *dA = dY + (size_t)B * d, *z = dA + (size_t)B * d;
	float *xb = z + B, *yb = xb + (size_t)B * d;
	struct grads g = { gr, gr + (size_t)d * d, gr + (size_t)d * d + d, gr + (size_t)d * d + 3 * (size_t)d };
	float *params[4] = { h->w, h->b, h->w2, h->b2 };
	size_t sizes[4] = { (size_t)d * d, (size_t)d, 2 * (size_t)d, 2 };
	for (int i = 0; i < n_train; i++)
		order[i] = i;
	uint64_t rng = cfg->seed + 99;
	int step = 0;
	double t1 = sw_now_s();
	for (int ep = 0; ep < cfg->epochs; ep++) {
		for (int i = n_train - 1; i > 0; i--) {
			int j = (int)(sm_next(&rng) % (uint64_t)(i + 1)), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		double lsum = 0, wsum_all = 0;
		for (int s = 0; s + B <= n_train; s += B) {
			for (int i = 0; i < B; i++) {
				memcpy(xb + (size_t)i * d, ds.x + (size_t)order[s + i] * d, (size_t)d * sizeof(*xb));
				yb[i] = ds.y[order[s + i]];
			}
			memset(gr, 0, np * sizeof(*gr));
			double ws;
			lsum += head_batch(h, xb, yb, B, cfg->w_rej, cfg->w_acc, Ys, As, dY, dA, z, &g, &ws);
			wsum_all += ws;
			step++;
			size_t off = 0;
			for (int q = 0; q < 4; q++) {
				adam_step(params[q], gr + off, mo + off, ve + off, sizes[q], cfg->lr, step);
				off += sizes[q];
			}
		}
		double el = lsum / (wsum_all > 0 ? wsum_all : 1);
		if (ep == 0)
			rep->train_loss_first = el;
		rep->train_loss_last = el;
		if (cfg->verbose)
			fprintf(stderr, "train-head: epoch %d: weighted loss %.4f\n", ep + 1, el);
	}
	/* Held-out evaluation: the weighted loss (normalised over the whole
	 * held-out set) and the unweighted soft BCE, for the head and for the
	 * best constants fitted on the training labels. */
	double lw = 0, lwc = 0, wtot = 0, bce = 0, bcec = 0;
	double zc_w = log(rep->const_w / (1 - rep->const_w)), zc = log(rep->mean_label / (1 - rep->mean_label));
	for (int s = n_train; s < ds.n; s += B) {
		int nb = ds.n - s < B ? ds.n - s : B;
		double ws;
		head_batch(h, ds.x + (size_t)s * d, ds.y + s, nb, cfg->w_rej, cfg->w_acc, Ys, As, dY, dA, z, NULL, &ws);
		for (int i = 0; i < nb; i++) {
			double y = ds.y[s + i], wr = cfg->w_rej * (1 - y), wa = cfg->w_acc * y;
			lw += wr * softplus(z[i]) + wa * softplus(-z[i]);
			lwc += wr * softplus(zc_w) + wa * softplus(-zc_w);
			wtot += wr + wa;
			bce += (1 - y) * softplus(z[i]) + y * softplus(-z[i]);
			bcec += (1 - y) * softplus(zc) + y * softplus(-zc);
		}
	}
	rep->test_loss = lw / wtot;
	rep->test_loss_const = lwc / wtot;
	rep->test_bce = bce / n_test;
	rep->test_bce_const = bcec / n_test;
	rep->seconds_train = sw_now_s() - t1;
	*out = h;
	h = NULL;
	rc = 0;
out_free:
	rt_acchead_free(h);
	free(buf);
	free(order);
	free(ds.x);
	free(ds.y);
	free(ds.chunk);
	return rc;
}
