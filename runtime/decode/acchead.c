/* The SpecDec++ acceptance-prediction head (load, save, forward), the stop
 * rule and the time model (acchead.h). fp32 throughout, as the reference
 * casts the draft's hidden state to fp32 before the head. */
#include "core/output.h"
#include "acchead.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"

rt_acchead *rt_acchead_new(int dim, int n_layers, sw_err *err)
{
	if (dim < 1 || dim > (1 << 16) || n_layers < 0 || n_layers > 1024) {
		sw_errf(err, SW_EINVAL, "acceptance head: dim %d / %d layers out of range", dim, n_layers);
		return NULL;
	}
	rt_acchead *h = calloc(1, sizeof(*h));
	if (!h)
		goto out_nomem;
	h->dim = dim;
	h->n_layers = n_layers;
	h->w = calloc((size_t)dim * dim, sizeof(*h->w));
	h->b = calloc((size_t)dim, sizeof(*h->b));
	h->w2 = calloc(2 * (size_t)dim, sizeof(*h->w2));
	h->b2 = calloc(2, sizeof(*h->b2));
	if (!h->w || !h->b || !h->w2 || !h->b2) {
		rt_acchead_free(h);
		goto out_nomem;
	}
	return h;
out_nomem:
	sw_errf(err, SW_ENOMEM, "acceptance head: out of memory for dim %d", dim);
	return NULL;
}

void rt_acchead_free(rt_acchead *h)
{
	if (!h)
		return;
	free(h->w);
	free(h->b);
	free(h->w2);
	free(h->b2);
	free(h);
}

static double splitmix_uniform(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

void rt_acchead_init_random(rt_acchead *h, uint64_t seed)
{
	uint64_t s = seed;
	float a = (float)(1.0 / sqrt((double)h->dim));
	for (size_t i = 0; i < (size_t)h->dim * h->dim; i++)
		h->w[i] = a * (float)(2 * splitmix_uniform(&s) - 1);
	for (int i = 0; i < h->dim; i++)
		h->b[i] = a * (float)(2 * splitmix_uniform(&s) - 1);
	for (int i = 0; i < 2 * h->dim; i++)
		h->w2[i] = a * (float)(2 * splitmix_uniform(&s) - 1);
	for (int i = 0; i < 2; i++)
		h->b2[i] = a * (float)(2 * splitmix_uniform(&s) - 1);
}

void rt_acchead_forward(const rt_acchead *h, const float *x, float logits[2], float *y, float *scratch)
{
	int d = h->dim;
	float *cur = scratch, *z = scratch + d;
	memcpy(cur, x, (size_t)d * sizeof(*cur));
	for (int l = 0; l < h->n_layers; l++) {
		for (int i = 0; i < d; i++) {
			const float *wr = h->w + (size_t)i * d;
			float acc = h->b[i];
			for (int j = 0; j < d; j++)
				acc += wr[j] * cur[j];
			z[i] = acc / (1.0f + expf(-acc)); /* SiLU */
		}
		for (int i = 0; i < d; i++)
			cur[i] += z[i];
	}
	for (int c = 0; c < 2; c++) {
		float acc = h->b2[c];
		for (int j = 0; j < d; j++)
			acc += h->w2[(size_t)c * d + j] * cur[j];
		logits[c] = acc;
	}
	if (y)
		memcpy(y, cur, (size_t)d * sizeof(*y));
}

float rt_acchead_prob(const rt_acchead *h, const float *x, float *scratch)
{
	float lg[2];
	rt_acchead_forward(h, x, lg, NULL, scratch);
	/* softmax(l)[1] = sigmoid(l1 - l0), stable for either sign */
	float d = lg[1] - lg[0];
	return d >= 0 ? 1.0f / (1.0f + expf(-d)) : expf(d) / (1.0f + expf(d));
}

/* ---- loading ---- */

struct head_entry {
	const safetensors_tensor *t;
	int idx;       /* the Sequential index i of model.{i} */
	bool block;    /* model.{i}.linear.* (a ResBlock) vs model.{i}.* */
	bool bias;
};

/* Splits "PREFIXmodel.I[.linear].(weight|bias)"; returns the prefix length
 * or -1 when the name does not have that form. */
static int parse_head_name(const char *name, struct head_entry *e)
{
	size_t n = strlen(name);
	const char *sfx;
	if (n > 7 && !strcmp(name + n - 7, ".weight")) {
		e->bias = false;
		n -= 7;
	} else if (n > 5 && !strcmp(name + n - 5, ".bias")) {
		e->bias = true;
		n -= 5;
	} else {
		return -1;
	}
	e->block = n > 7 && !strncmp(name + n - 7, ".linear", 7);
	if (e->block)
		n -= 7;
	size_t dig = n;
	while (dig > 0 && name[dig - 1] >= '0' && name[dig - 1] <= '9')
		dig--;
	if (dig == n || n - dig > 6 || dig < 6)
		return -1;
	sfx = name + dig - 6;
	if (strncmp(sfx, "model.", 6))
		return -1;
	e->idx = atoi(name + dig);
	return (int)(dig - 6);
}

static bool shape_is(const safetensors_tensor *t, int nd, int64_t a, int64_t b)
{
	if (t->n_dims != nd || t->shape[0] != a)
		return false;
	return nd == 1 || t->shape[1] == b;
}

static void shape_str(const safetensors_tensor *t, char *buf, size_t cap)
{
	int o = snprintf(buf, cap, "(");
	for (int i = 0; i < t->n_dims && o < (int)cap; i++)
		o += snprintf(buf + o, cap - (size_t)o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
	if (o < (int)cap)
		snprintf(buf + o, cap - (size_t)o, ")");
}

rt_acchead *rt_acchead_load(const char *path, int dim, sw_err *err)
{
	safetensors_file *f = NULL;
	struct head_entry *es = NULL;
	rt_acchead *h = NULL;
	float *tmp = NULL;
	if (safetensors_open(path, &f, err)) {
		sw_err_prefix(err, "acceptance head");
		return NULL;
	}
	for (size_t i = 0; i < f->n_tensors; i++)
		if (safetensors_numeric(f, &f->tensors[i], err)) {
			sw_err_prefix(err, "acceptance head");
			safetensors_free(f);
			return NULL;
		}
	size_t nt = f->n_tensors;
	es = calloc(nt ? nt : 1, sizeof(*es));
	if (!es) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	int plen = -1, final_idx = -1, max_block = -1;
	const char *pname = NULL;
	const safetensors_tensor *fw = NULL, *fb = NULL;
	for (size_t i = 0; i < nt; i++) {
		const safetensors_tensor *t = &f->tensors[i];
		int pl = parse_head_name(t->name, &es[i]);
		es[i].t = t;
		if (pl < 0) {
			sw_errf(err, SW_EINVAL,
			        "%s: unexpected tensor '%s' (an acceptance head holds [PREFIX]model.I.linear.weight/bias "
			        "for its tied ResBlock and [PREFIX]model.K.weight/bias for the final Linear)",
			        path, t->name);
			goto out_free;
		}
		if (plen < 0) {
			plen = pl;
			pname = t->name;
		} else if (pl != plen || strncmp(t->name, pname, (size_t)pl)) {
			sw_errf(err, SW_EINVAL, "%s: tensors '%s' and '%s' have different prefixes (one head per file)",
			        path, pname, t->name);
			goto out_free;
		}
		if (es[i].block) {
			if (es[i].idx > max_block)
				max_block = es[i].idx;
		} else {
			if (final_idx >= 0 && final_idx != es[i].idx) {
				sw_errf(err, SW_EINVAL, "%s: two final Linear layers, model.%d and model.%d (expected one, after the ResBlocks)",
				        path, final_idx, es[i].idx);
				goto out_free;
			}
			final_idx = es[i].idx;
			if (es[i].bias)
				fb = t;
			else
				fw = t;
		}
	}
	if (nt == 0) {
		sw_errf(err, SW_EINVAL, "%s: no tensors (expected an acceptance head)", path);
		goto out_free;
	}
	if (final_idx < 0 || !fw || !fb) {
		int k = final_idx >= 0 ? final_idx : max_block + 1;
		sw_errf(err, SW_EINVAL, "%s: final Linear missing: expected %.*smodel.%d.weight (2, h) and %.*smodel.%d.bias (2)",
		        path, plen, pname, k, plen, pname, k);
		goto out_free;
	}
	if (max_block >= final_idx) {
		sw_errf(err, SW_EINVAL, "%s: ResBlock %.*smodel.%d.linear after the final Linear model.%d", path, plen, pname,
		        max_block, final_idx);
		goto out_free;
	}
	int k = final_idx;
	char sb[64];
	if (fw->n_dims != 2 || fw->shape[0] != 2 || (dim > 0 && fw->shape[1] != dim)) {
		shape_str(fw, sb, sizeof(sb));
		sw_errf(err, SW_EINVAL, "%s: %s has shape %s, expected (2, %d)%s", path, fw->name, sb,
		        dim > 0 ? dim : (int)(fw->n_dims == 2 ? fw->shape[1] : 0),
		        dim > 0 ? " (2 classes by the draft's hidden size)" : "");
		goto out_free;
	}
	int d = (int)fw->shape[1];
	if (d < 1) {
		sw_errf(err, SW_EINVAL, "%s: %s has an empty hidden dimension", path, fw->name);
		goto out_free;
	}
	if (!shape_is(fb, 1, 2, 0)) {
		shape_str(fb, sb, sizeof(sb));
		sw_errf(err, SW_EINVAL, "%s: %s has shape %s, expected (2)", path, fb->name, sb);
		goto out_free;
	}
	h = rt_acchead_new(d, k, err);
	if (!h)
		goto out_free;
	tmp = malloc((size_t)d * d * sizeof(*tmp));
	if (!tmp) {
		sw_errf(err, SW_ENOMEM, "%s: out of memory", path);
		goto out_free_head;
	}
	safetensors_to_f32(fw, h->w2);
	safetensors_to_f32(fb, h->b2);
	/* The ResBlock copies: the first stored one defines the block, every
	 * other stored copy must equal it bit for bit after conversion. */
	const safetensors_tensor *ref_w = NULL, *ref_b = NULL;
	for (int bias = 0; bias < 2; bias++) {
		for (size_t i = 0; i < nt; i++) {
			const struct head_entry *e = &es[i];
			if (!e->block || e->bias != bias)
				continue;
			const safetensors_tensor *t = e->t;
			bool ok = bias ? shape_is(t, 1, d, 0) : shape_is(t, 2, d, d);
			if (!ok) {
				shape_str(t, sb, sizeof(sb));
				sw_errf(err, SW_EINVAL, "%s: %s has shape %s, expected (%d%s%.0d)", path, t->name, sb, d,
				        bias ? "" : ", ", bias ? 0 : d);
				goto out_free_head;
			}
			const safetensors_tensor **ref = bias ? &ref_b : &ref_w;
			float *dst = bias ? h->b : h->w;
			if (!*ref) {
				*ref = t;
				safetensors_to_f32(t, dst);
				continue;
			}
			safetensors_to_f32(t, tmp);
			if (memcmp(tmp, dst, (size_t)t->numel * sizeof(*tmp))) {
				sw_errf(err, SW_EINVAL,
				        "%s: %s differs from %s: the ResBlock is ONE weight-tied module applied %d times "
				        "(PyTorch [ResBlock(h)] * k), so its stored copies must be identical",
				        path, t->name, (*ref)->name, k);
				goto out_free_head;
			}
		}
	}
	/* Every stored block index needs both tensors. */
	for (size_t i = 0; i < nt; i++) {
		if (!es[i].block)
			continue;
		bool has[2] = { false, false };
		for (size_t j = 0; j < nt; j++)
			if (es[j].block && es[j].idx == es[i].idx)
				has[es[j].bias] = true;
		if (!has[0] || !has[1]) {
			sw_errf(err, SW_EINVAL, "%s: ResBlock %.*smodel.%d.linear has its %s but not its %s", path, plen, pname,
			        es[i].idx, has[0] ? "weight" : "bias", has[0] ? "bias" : "weight");
			goto out_free_head;
		}
	}
	if (k > 0 && !ref_w) {
		sw_errf(err, SW_EINVAL, "%s: the final Linear is model.%d, so %d ResBlock(s) precede it, but no %.*smodel.I.linear.weight is stored",
		        path, k, k, plen, pname);
		goto out_free_head;
	}
	free(tmp);
	free(es);
	safetensors_free(f);
	return h;
out_free_head:
	rt_acchead_free(h);
	h = NULL;
out_free:
	free(tmp);
	free(es);
	safetensors_free(f);
	return NULL;
}

/* ---- saving ---- */

static int put_u64(FILE *f, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return fwrite(b, 1, 8, f) == 8 ? 0 : -1;
}

int rt_acchead_save(const rt_acchead *h, const char *path, sw_err *err)
{
	int k = h->n_layers, d = h->dim;
	size_t cap = 256 + (size_t)(k + 1) * 256;
	char *hdr = malloc(cap + 8);
	if (!hdr)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", path);
	size_t o = 0;
	uint64_t off = 0, wsz = (uint64_t)d * d * 4, bsz = (uint64_t)d * 4;
	o += (size_t)snprintf(hdr + o, cap - o, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < k; i++) {
		o += (size_t)snprintf(hdr + o, cap - o,
		                      ",\"model.%d.linear.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]}",
		                      i, d, d, (unsigned long long)off, (unsigned long long)(off + wsz));
		off += wsz;
		o += (size_t)snprintf(hdr + o, cap - o,
		                      ",\"model.%d.linear.bias\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%llu,%llu]}",
		                      i, d, (unsigned long long)off, (unsigned long long)(off + bsz));
		off += bsz;
	}
	o += (size_t)snprintf(hdr + o, cap - o,
	                      ",\"model.%d.weight\":{\"dtype\":\"F32\",\"shape\":[2,%d],\"data_offsets\":[%llu,%llu]}", k, d,
	                      (unsigned long long)off, (unsigned long long)(off + 8 * (uint64_t)d));
	off += 8 * (uint64_t)d;
	o += (size_t)snprintf(hdr + o, cap - o,
	                      ",\"model.%d.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%llu,%llu]}}", k,
	                      (unsigned long long)off, (unsigned long long)(off + 8));
	while (o % 8) /* the data section starts 8-aligned, padded with spaces */
		hdr[o++] = ' ';
	/* core/output.h: an exclusive temporary, checked writes, fsync,
	 * rename: a crash or a full disk never leaves a half-written head */
	sw_outfile of;
	int rc = sw_outfile_open(&of, path, "-o", err);
	if (rc) {
		free(hdr);
		return rc;
	}
	FILE *f = of.f;
	bool ok = put_u64(f, o) == 0 && fwrite(hdr, 1, o, f) == o;
	for (int i = 0; ok && i < k; i++)
		ok = fwrite(h->w, 4, (size_t)d * d, f) == (size_t)d * d && fwrite(h->b, 4, (size_t)d, f) == (size_t)d;
	ok = ok && fwrite(h->w2, 4, 2 * (size_t)d, f) == 2 * (size_t)d && fwrite(h->b2, 4, 2, f) == 2;
	free(hdr);
	if (!ok && !of.werr)
		of.werr = errno ? errno : EIO;
	if ((rc = sw_outfile_commit(&of, err)))
		return rc;
	return 0;
}

/* ---- stop rule ---- */

bool rt_adaptive_stop(const rt_adaptive *a, int step, int max, double p_prev, double *cum)
{
	double acc = step == 1 ? 1.0 : p_prev;
	*cum *= acc;
	bool stop = (1.0 - *cum) > (double)a->threshold;
	if (step >= max)
		stop = true;
	else if (step < a->min_len)
		stop = false;
	return stop;
}

int rt_adaptive_parse(const char *s, rt_adaptive *a, sw_err *err)
{
	memset(a, 0, sizeof(*a));
	a->predictor = RT_ADAPT_PROXY;
	a->min_len = 2;
	a->max_len = 20;
	char *end;
	errno = 0;
	double h = strtod(s, &end);
	if (errno || end == s || !(h >= 0 && h <= 1))
		return sw_errf(err, SW_EINVAL, "--adaptive '%s': expected h[:min:max] with h in [0, 1]", s);
	a->threshold = (float)h;
	if (*end == ':') {
		int lo, hi, n = 0;
		if (sscanf(end + 1, "%d:%d%n", &lo, &hi, &n) != 2 || end[1 + n] != '\0')
			return sw_errf(err, SW_EINVAL, "--adaptive '%s': expected h:min:max after h, e.g. 0.3:2:20", s);
		if (lo < 1 || hi < lo || hi > RT_MAX_GAMMA)
			return sw_errf(err, SW_ERANGE, "--adaptive '%s': need 1 <= min <= max <= %d", s, RT_MAX_GAMMA);
		a->min_len = lo;
		a->max_len = hi;
	} else if (*end) {
		return sw_errf(err, SW_EINVAL, "--adaptive '%s': expected h[:min:max], e.g. 0.7 or 0.3:2:20", s);
	}
	return 0;
}

/* ---- time model ---- */

void rt_time_model_compute(const rt_stats *st, rt_time_model *tm)
{
	memset(tm, 0, sizeof(*tm));
	tm->N_target = (double)st->n_target_calls;
	tm->N_draft = (double)st->n_draft_calls;
	tm->N_discard = (double)(st->n_drafted - st->n_accepted);
	tm->N = (double)(st->n_accepted + st->n_target_calls);
	tm->t_draft = st->n_draft_calls ? st->t_draft / (double)st->n_draft_calls : 0.0;
	tm->t_target = st->n_target_calls ? st->t_target / (double)st->n_target_calls : 0.0;
	if (tm->N > 0) {
		tm->D = tm->N_discard / tm->N;
		tm->V = tm->N_target / tm->N;
	}
	tm->T_total = tm->t_draft * tm->N_draft + tm->t_target * tm->N_target;
	tm->T_per_token = tm->t_draft * tm->D + (tm->t_target - tm->t_draft) * tm->V + tm->t_draft;
}
