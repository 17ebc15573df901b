/* ref_matmul, ref_mlp_swiglu and ref_lm_head (the specification's loops)
 * and the host forward's CBLAS forms (runtime/model/gemm.h: rt_matmul,
 * rt_mlp_swiglu, rt_lm_head) against naive double loops on awkward shapes
 * (T = 1 and odd, n_in/n_out in {33, 111, 260}), with guard zones around
 * outputs and scratch and elementwise bounds derived from fp32 rounding
 * (each composite op propagates the bounds of its parts). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/ref/ref.h"
#include "model/gemm.h"

#include "check.h"

/* Exact (double) x @ w^T and the fp32 bound gamma_{n_in+1} * sum |x w| per
 * element (n_in products and additions; +1 for the final store). */
static void naive_matmul(double *y, double *bound, const float *x, const float *w, int T, int n_in,
                         int n_out)
{
	for (int t = 0; t < T; t++)
		for (int o = 0; o < n_out; o++) {
			double s = 0.0, a = 0.0;
			for (int i = 0; i < n_in; i++) {
				double p = (double)x[(size_t)t * n_in + i] * w[(size_t)o * n_in + i];
				s += p;
				a += fabs(p);
			}
			y[(size_t)t * n_out + o] = s;
			bound[(size_t)t * n_out + o] = gamma_n(n_in + 1) * a;
		}
}

/* The specification and the host forward's speed path, held to one bound. */
typedef struct impl {
	const char *name;
	void (*matmul)(float *y, const float *x, const float *w, int T, int n_in, int n_out);
	void (*mlp)(float *out, const float *x, const float *w_gate, const float *w_up,
	            const float *w_down, int T, int dim, int ffn, float *scratch);
	void (*lm_head)(float *logits, const float *x, const float *norm_w, const float *lm_head,
	                int T, int dim, int vocab, float eps, float *scratch);
} impl;
static const impl IMPLS[] = {
	{"ref", ref_matmul, ref_mlp_swiglu, ref_lm_head},
	{"rt (CBLAS)", rt_matmul, rt_mlp_swiglu, rt_lm_head},
};

static const int SIZES[] = {33, 111, 260};
static const int TS[] = {1, 3, 7, 33};

static void test_matmul(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2 * 4 * 3 * 3; i++) {
		const impl *m = &IMPLS[i / 36];
		const int T = TS[i / 9 % 4], n_in = SIZES[i / 3 % 3], n_out = SIZES[i % 3];
		float *x = galloc((size_t)T * n_in), *w = galloc((size_t)n_out * n_in);
		float *y = galloc((size_t)T * n_out);
		double *ref = malloc((size_t)T * n_out * sizeof(*ref));
		double *bound = malloc((size_t)T * n_out * sizeof(*bound));
		char what[96];

		fill(x, (size_t)T * n_in, 2.0);
		fill(w, (size_t)n_out * n_in, 0.5);
		m->matmul(y, x, w, T, n_in, n_out);
		naive_matmul(ref, bound, x, w, T, n_in, n_out);
		snprintf(what, sizeof(what), "%s matmul T%d in%d out%d", m->name, T, n_in, n_out);
		check_close(what, y, ref, bound, (size_t)T * n_out);
		gcheck(what, y, (size_t)T * n_out);
		gfree(x);
		gfree(w);
		gfree(y);
		free(ref);
		free(bound);
	}
}

/* Cancellation: rows built so that the exact result is 0 for half the
 * outputs; the bound (relative to sum |x w|, not to |y|) must still hold. */
static void test_matmul_cancellation(void **state)
{
	const int T = 5, n_in = 111, n_out = 33;
	float *x = galloc((size_t)T * n_in), *w = galloc((size_t)n_out * n_in), *y = galloc((size_t)T * n_out);
	double ref[5 * 33], bound[5 * 33];
	(void)state;
	fill(x, (size_t)T * n_in, 1.0);
	fill(w, (size_t)n_out * n_in, 1.0);
	for (int t = 0; t < T; t++) /* x = (a, -a, ...) pairs, w with equal pairs -> exact 0 */
		for (int i = 0; i + 1 < n_in; i += 2)
			x[(size_t)t * n_in + i + 1] = -x[(size_t)t * n_in + i];
	for (int o = 0; o < n_out; o += 2)
		for (int i = 0; i + 1 < n_in; i += 2)
			w[(size_t)o * n_in + i + 1] = w[(size_t)o * n_in + i];
	naive_matmul(ref, bound, x, w, T, n_in, n_out);
	for (size_t m = 0; m < 2; m++) {
		IMPLS[m].matmul(y, x, w, T, n_in, n_out);
		check_close(IMPLS[m].name, y, ref, bound, (size_t)T * n_out);
		gcheck("matmul cancellation", y, (size_t)T * n_out);
	}
	gfree(x);
	gfree(w);
	gfree(y);
}

static double silu_d(double g)
{
	return g / (1.0 + exp(-g));
}

/* MLP bound, propagated: g, u carry the matmul bounds dg, du; h = silu(g) u
 * then carries |silu'| dg (|u| + du) + |silu(g)| du + 6 u_32 |h| (the SwiGLU
 * rounding, see test_ref_swiglu.c), with |silu'| <= 1.1 everywhere; the down
 * projection adds sum_k |w_dk| dh_k to its own gamma_{ffn+1} sum |w_dk| (|h_k| + dh_k). */
static void test_mlp(void **state)
{
	static const int dims[][3] = {{1, 33, 111}, {3, 111, 260}, {7, 260, 33}, {5, 64, 96}};
	(void)state;
	for (int c = 0; c < 8; c++) {
		const impl *m = &IMPLS[c / 4];
		const int T = dims[c % 4][0], dim = dims[c % 4][1], ffn = dims[c % 4][2];
		float *x = galloc((size_t)T * dim), *wg = galloc((size_t)ffn * dim);
		float *wu = galloc((size_t)ffn * dim), *wd = galloc((size_t)dim * ffn);
		float *out = galloc((size_t)T * dim), *scratch = galloc((size_t)2 * T * ffn);
		double *g = malloc((size_t)T * ffn * sizeof(*g)), *dg = malloc((size_t)T * ffn * sizeof(*dg));
		double *u = malloc((size_t)T * ffn * sizeof(*u)), *du = malloc((size_t)T * ffn * sizeof(*du));
		double *ref = malloc((size_t)T * dim * sizeof(*ref));
		double *bound = malloc((size_t)T * dim * sizeof(*bound));
		char what[96];

		fill(x, (size_t)T * dim, 2.0);
		fill(wg, (size_t)ffn * dim, 0.3);
		fill(wu, (size_t)ffn * dim, 0.3);
		fill(wd, (size_t)dim * ffn, 0.3);
		m->mlp(out, x, wg, wu, wd, T, dim, ffn, scratch);
		naive_matmul(g, dg, x, wg, T, dim, ffn);
		naive_matmul(u, du, x, wu, T, dim, ffn);
		for (size_t i = 0; i < (size_t)T * ffn; i++) {
			double h = silu_d(g[i]) * u[i];
			double dh = 1.1 * dg[i] * (fabs(u[i]) + du[i]) + fabs(silu_d(g[i])) * du[i] +
			            6.0 * U32 * fabs(h);
			g[i] = h; /* reuse: g now holds h, dg holds dh */
			dg[i] = dh;
		}
		for (int t = 0; t < T; t++)
			for (int o = 0; o < dim; o++) {
				double s = 0.0, prop = 0.0, mag = 0.0;
				for (int k = 0; k < ffn; k++) {
					double wk = wd[(size_t)o * ffn + k], h = g[(size_t)t * ffn + k];
					s += wk * h;
					prop += fabs(wk) * dg[(size_t)t * ffn + k];
					mag += fabs(wk) * (fabs(h) + dg[(size_t)t * ffn + k]);
				}
				ref[(size_t)t * dim + o] = s;
				bound[(size_t)t * dim + o] = prop + gamma_n(ffn + 1) * mag;
			}
		snprintf(what, sizeof(what), "%s mlp T%d dim%d ffn%d", m->name, T, dim, ffn);
		check_close(what, out, ref, bound, (size_t)T * dim);
		gcheck(what, out, (size_t)T * dim);
		gcheck("mlp scratch", scratch, (size_t)2 * T * ffn);
		gfree(x);
		gfree(wg);
		gfree(wu);
		gfree(wd);
		gfree(out);
		gfree(scratch);
		free(g);
		free(dg);
		free(u);
		free(du);
		free(ref);
		free(bound);
	}
}

/* lm_head = rmsnorm then projection. The normalised x carries the RMSNorm
 * bound (gamma_dim / 2 + 6 u) |xn_i| (derived in test_ref_rmsnorm.c), which
 * the projection propagates as sum |w| dxn plus its own dot-product bound. */
static void test_lm_head(void **state)
{
	static const int dims[][3] = {{1, 33, 260}, {3, 111, 33}, {7, 64, 111}, {2, 260, 257}};
	const float eps = 1e-5f;
	(void)state;
	for (int c = 0; c < 8; c++) {
		const impl *m = &IMPLS[c / 4];
		const int T = dims[c % 4][0], dim = dims[c % 4][1], vocab = dims[c % 4][2];
		float *x = galloc((size_t)T * dim), *nw = galloc((size_t)dim);
		float *lm = galloc((size_t)vocab * dim), *logits = galloc((size_t)T * vocab);
		float *scratch = galloc((size_t)T * dim);
		float *x_copy = malloc((size_t)T * dim * sizeof(*x_copy));
		double *xn = malloc((size_t)T * dim * sizeof(*xn)), *dxn = malloc((size_t)T * dim * sizeof(*dxn));
		double *ref = malloc((size_t)T * vocab * sizeof(*ref));
		double *bound = malloc((size_t)T * vocab * sizeof(*bound));
		char what[96];

		fill(x, (size_t)T * dim, 3.0);
		for (int i = 0; i < dim; i++)
			nw[i] = (float)(1.0 + 0.5 * rnd());
		fill(lm, (size_t)vocab * dim, 0.2);
		memcpy(x_copy, x, (size_t)T * dim * sizeof(*x));
		m->lm_head(logits, x, nw, lm, T, dim, vocab, eps, scratch);
		assert_memory_equal(x, x_copy, (size_t)T * dim * sizeof(*x));
		for (int t = 0; t < T; t++) {
			double ss = 0.0;
			for (int i = 0; i < dim; i++)
				ss += (double)x[(size_t)t * dim + i] * x[(size_t)t * dim + i];
			double r = 1.0 / sqrt(ss / dim + eps);
			for (int i = 0; i < dim; i++) {
				size_t j = (size_t)t * dim + i;
				xn[j] = x[j] * r * nw[i];
				dxn[j] = (gamma_n(dim) / 2 + 6.0 * U32) * fabs(xn[j]);
			}
		}
		for (int t = 0; t < T; t++)
			for (int o = 0; o < vocab; o++) {
				double s = 0.0, prop = 0.0, mag = 0.0;
				for (int i = 0; i < dim; i++) {
					double wk = lm[(size_t)o * dim + i];
					size_t j = (size_t)t * dim + i;
					s += wk * xn[j];
					prop += fabs(wk) * dxn[j];
					mag += fabs(wk) * (fabs(xn[j]) + dxn[j]);
				}
				ref[(size_t)t * vocab + o] = s;
				bound[(size_t)t * vocab + o] = prop + gamma_n(dim + 1) * mag;
			}
		snprintf(what, sizeof(what), "%s lm_head T%d dim%d vocab%d", m->name, T, dim, vocab);
		check_close(what, logits, ref, bound, (size_t)T * vocab);
		gcheck(what, logits, (size_t)T * vocab);
		gcheck("lm_head scratch", scratch, (size_t)T * dim);
		gfree(x);
		gfree(nw);
		gfree(lm);
		gfree(logits);
		gfree(scratch);
		free(x_copy);
		free(xn);
		free(dxn);
		free(ref);
		free(bound);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matmul),
		cmocka_unit_test(test_matmul_cancellation),
		cmocka_unit_test(test_mlp),
		cmocka_unit_test(test_lm_head),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
