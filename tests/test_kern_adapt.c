/* adapt template (SpecDec++ adaptive draft length in the graph) in the
 * emulator vs ref_adapt, and ref_adapt vs the host's own stop rule.
 * Whole iterations are simulated as the captured graph runs them: levels
 * 0..D-1 in order, a level skipped when its go flag is 0; at each level the
 * "expansion" writes that level's q row and draws node level+1's token from
 * it, then the kernel (device buffers) and ref_adapt (host twins) run and
 * every word of go, cum and tree_tokens must agree. Buffers start with the
 * previous iteration's state or stale junk. q rows range from flat to
 * peaked, and a quarter of the drawn tokens get a probability on the edge
 * of the threshold (1 - h, or the value that brings the running product to
 * 1 - h, exactly and one float ulp either side): a float product there
 * decides differently (checked by hand on a mutated template). After each iteration the
 * outcome (drafted length, go flags, the -1 marks, cum) is checked against
 * rt_adaptive_stop (runtime/acchead.c) driven over the same tokens and q
 * the way md_propose_adaptive (runtime/drafter.c) drives it. h in {0, 0.3,
 * 0.7, 1}, bounds (1, D), (2, D), (1, 2), also (3, 6) and (1, 1); blocks
 * smaller than the chain. Chains with absent nodes (-1: no candidate left).
 * Then NVRTC for sm_80 / sm_90: zero spills. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/acchead.h"
#include "kernels/ref/ref.h"
#include "core/tree.h"

#include "op_harness.h"
#include "testutil.h"

#define MAX_D 48

static uint64_t rnd64(void) /* splitmix64 (tu_rand) on the shared state */
{
	return tu_rand(&rng_state);
}

static int rnd_int(int n) { return (int)(rnd64() % (uint64_t)n); }
static double rnd_unit(void) { return (double)(rnd64() >> 11) * 0x1p-53; }

typedef struct cfg {
	int D, V, min_steps, max_steps, block;
	float h;
	int absent; /* 1 in `absent` drawn tokens is -1 (no candidate left), 0: none */
} cfg;

static const emu_kernel *adapt_kernel(const cfg *c, int level)
{
	gen_param p[] = {OH_NAME, OH_I("LEVEL", level), OH_I("N_NODES", c->D + 1),
	                 OH_I("DEPTH", c->D), OH_I("V", c->V), OH_I("MIN_STEPS", c->min_steps),
	                 OH_I("MAX_STEPS", c->max_steps), OH_F("H", c->h), OH_I("BLOCK", c->block)};
	return oh_load(SW_OP_adapt, p, 9);
}

/* One iteration's draws, made up front: q rows 0..D-1 and the token of
 * node i+1 drawn from row i. The simulation reveals row L and token L+1
 * when level L runs; the host rule reads the same values. */
typedef struct draws {
	float *q;   /* (D, V) */
	int32_t *y; /* y[i] = node i's token, i = 1..D */
} draws;

static void draw_iteration(const cfg *c, draws *w)
{
	double cprev = 1.0; /* the host's product before row i's factor */
	for (int i = 0; i < c->D; i++) {
		float *q = w->q + (size_t)i * c->V;
		/* softmax(a * noise), a from flat to peaked: p_hat spans (0, 1] */
		const double a = (double[]){0.3, 2.0, 6.0, 14.0}[rnd_int(4)];
		double s = 0, z[4096];
		for (int v = 0; v < c->V; v++)
			s += z[v] = exp(a * (rnd_unit() - 0.5) * 2.0);
		for (int v = 0; v < c->V; v++)
			q[v] = (float)(z[v] / s);
		double u = rnd_unit() * s, cs = 0;
		int y = c->V - 1;
		for (int v = 0; v < c->V; v++)
			if ((cs += z[v]) > u) {
				y = v;
				break;
			}
		w->y[i + 1] = y;
		if (c->absent && rnd_int(c->absent) == 0) {
			/* tree_expand found no candidate: the node is absent, its
			 * p_hat 0; q must never be indexed by it */
			w->y[i + 1] = -1;
			cprev = 0.0;
			continue;
		}
		/* The rule reads only q(y): an edge value there need not
		 * renormalise. Edges: the product lands on 1 - h (a tie: continue)
		 * or within a float ulp of it, where a float product or a
		 * threshold computed in float would decide differently. */
		if (rnd_int(4) == 0) {
			const float e = rnd_int(2) ? 1.0f - c->h : (float)((1.0 - (double)c->h) / cprev);
			const float edges[] = {e, nextafterf(e, 0.0f), nextafterf(e, 2.0f), 1.0f, 0.5f};
			float v = edges[rnd_int(5)];
			q[y] = v > 1.0f ? 1.0f : v;
		}
		cprev *= (double)q[y];
	}
}

/* rt_adaptive_stop over the draws, as md_propose_adaptive runs it with
 * gamma = D: the drafted length; *cum_out the final running product. */
static int host_rule(const cfg *c, const draws *w, double *cum_out)
{
	rt_adaptive a = {.predictor = RT_ADAPT_PROXY, .threshold = c->h, .min_len = c->min_steps,
	                 .max_len = c->max_steps};
	int max = a.max_len < c->D ? a.max_len : c->D;
	double cum = 1.0, p_prev = 1.0;
	for (int j = 0; j < max; j++) {
		int step = j + 1;
		if (rt_adaptive_stop(&a, step, max, p_prev, &cum)) {
			*cum_out = cum;
			return step;
		}
		p_prev = w->y[j + 1] < 0 ? 0.0 : (double)w->q[(size_t)j * c->V + w->y[j + 1]];
	}
	*cum_out = cum;
	return max;
}

typedef struct sim {
	int32_t *go, *tok; /* go (D), tok (D + 1) */
	float *cum, *q;    /* cum (1), q (D + 1, V) */
} sim;

static void sim_alloc(sim *s, const cfg *c, bool device)
{
	size_t n = (size_t)c->D + 1;
	if (device) {
		s->go = emu_alloc((size_t)c->D * 4, "go");
		s->tok = emu_alloc(n * 4, "tree_tokens");
		s->cum = emu_alloc(4, "cum");
		s->q = emu_alloc(n * c->V * 4, "draft_probs");
	} else {
		s->go = malloc((size_t)c->D * 4);
		s->tok = malloc(n * 4);
		s->cum = malloc(4);
		s->q = malloc(n * c->V * 4);
	}
}

static void sim_free(sim *s, bool device)
{
	void (*f)(void *) = device ? emu_free : free;
	f(s->go);
	f(s->tok);
	f(s->cum);
	f(s->q);
}

/* Stale state at the start of an iteration: the previous iteration's
 * buffers as they are, or junk (go flags 0/1, tokens in [0, V), any cum);
 * the root token and the q rows the drafts will overwrite are junk too. */
static void stale(const cfg *c, sim *h, int iter)
{
	if (iter == 0 || rnd_int(2)) {
		for (int j = 0; j < c->D; j++)
			h->go[j] = rnd_int(2);
		for (int j = 1; j <= c->D; j++)
			h->tok[j] = rnd_int(c->V);
		h->cum[0] = (float)rnd_unit();
	}
	h->tok[0] = rnd_int(c->V);
	for (size_t i = 0; i < (size_t)(c->D + 1) * c->V; i += 7)
		h->q[i] = (float)rnd_unit();
}

typedef struct stats {
	long iters, drafted, hist[MAX_D + 1];
} stats;

/* Checks the end state of one iteration against the host rule. */
static void check_outcome(const cfg *c, const draws *w, const sim *s, stats *st, const char *what)
{
	double cum;
	int n = host_rule(c, w, &cum);
	int32_t want_tok[MAX_D + 1], want_go[MAX_D];
	const float want_cum = (float)cum;
	char label[256];
	for (int j = 1; j <= c->D; j++)
		want_tok[j] = j <= n ? w->y[j] : -1;
	for (int j = 0; j < c->D; j++)
		want_go[j] = j + 1 < n;
	snprintf(label, sizeof(label), "%s: host rule drafts %d", what, n);
	const kern_out outs[] = {
		{.name = "tree_tokens[1:]", .type = KERN_I32, .got = s->tok + 1, .want = want_tok + 1,
		 .n = (size_t)c->D},
		{.name = "go", .type = KERN_I32, .got = s->go, .want = want_go, .n = (size_t)c->D},
		{.name = "cum", .type = KERN_F32, .got = s->cum, .want = &want_cum, .n = 1},
	};
	for (int i = 0; i < 3; i++)
		kern_expect(label, &outs[i]);
	st->iters++;
	st->drafted += n;
	st->hist[n]++;
}

static void print_stats(const cfg *c, const stats *st, const char *tag)
{
	char h[256];
	int o = 0, last = 1;
	for (int n = 1; n <= c->D; n++)
		last = st->hist[n] ? n : last;
	for (int n = 1; n <= last && o < 200; n++)
		o += snprintf(h + o, sizeof(h) - (size_t)o, " %ld", st->hist[n]);
	print_message("  %-7s D %2d V %4d h %.1f bounds (%d,%2d) block %3d: %5ld iterations, mean drafted "
	              "%.2f, by length 1..%s\n",
	              tag, c->D, c->V, (double)c->h, c->min_steps, c->max_steps, c->block, st->iters,
	              (double)st->drafted / (double)st->iters, h);
}

/* n_iter whole iterations, kernel (emulated) vs ref_adapt after every level,
 * then the outcome vs the host rule. */
static void run_kernel(const cfg *c, int n_iter)
{
	const emu_kernel *k[MAX_D] = {0};
	const size_t N = (size_t)c->D + 1;
	rt_tree t;
	sw_err err = {0};
	char spec[32], what[160];
	snprintf(spec, sizeof(spec), "chain:%d", c->D);
	if (rt_tree_parse(spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	int32_t *table = emu_alloc(5 * N * 4, "tree_table");
	rt_tree_table(&t, table);
	sim d, h;
	sim_alloc(&d, c, true);
	sim_alloc(&h, c, false);
	draws w = {malloc((size_t)c->D * c->V * 4), malloc(N * 4)};
	stats st = {0};
	for (int it = 0; it < n_iter; it++) {
		draw_iteration(c, &w);
		stale(c, &h, it);
		memcpy(d.go, h.go, (size_t)c->D * 4);
		memcpy(d.tok, h.tok, N * 4);
		memcpy(d.cum, h.cum, 4);
		memcpy(d.q, h.q, N * c->V * 4);
		for (int L = 0; L < c->D; L++) {
			if (L > 0 && h.go[L - 1] == 0)
				continue; /* the IF node skips the level: no expansion, no adapt */
			memcpy(h.q + (size_t)L * c->V, w.q + (size_t)L * c->V, (size_t)c->V * 4);
			memcpy(d.q + (size_t)L * c->V, w.q + (size_t)L * c->V, (size_t)c->V * 4);
			h.tok[L + 1] = d.tok[L + 1] = w.y[L + 1];
			if (!k[L])
				k[L] = adapt_kernel(c, L);
			void *args[] = {&d.go, &d.cum, &d.tok, &d.q, &table};
			launch(k[L], d3(1, 1, 1), d3((unsigned)c->block, 1, 1), args);
			ref_adapt(L, (int)N, c->D, c->V, c->min_steps, c->max_steps, c->h, h.go, h.cum, h.tok, h.q);
			snprintf(what, sizeof(what), "D %d h %g bounds (%d,%d) iteration %d level %d", c->D,
			         (double)c->h, c->min_steps, c->max_steps, it, L);
			const kern_out outs[] = {
				{.name = "go", .type = KERN_I32, .got = d.go, .want = h.go, .n = (size_t)c->D},
				{.name = "tree_tokens", .type = KERN_I32, .got = d.tok, .want = h.tok, .n = N},
				{.name = "cum", .type = KERN_F32, .got = d.cum, .want = h.cum, .n = 1},
				{.name = "draft_probs (read only)", .type = KERN_F32, .got = d.q, .want = h.q,
				 .n = N * (size_t)c->V, .dims = {(int)N, c->V}},
			};
			for (int i = 0; i < 4; i++)
				kern_expect(what, &outs[i]);
		}
		snprintf(what, sizeof(what), "D %d h %g bounds (%d,%d) iteration %d", c->D, (double)c->h,
		         c->min_steps, c->max_steps, it);
		check_outcome(c, &w, &d, &st, what);
	}
	print_stats(c, &st, "kernel");
	free(w.q);
	free(w.y);
	sim_free(&d, true);
	sim_free(&h, false);
	emu_free(table);
}

/* The same simulation with ref_adapt alone, many more iterations. */
static void run_ref(const cfg *c, int n_iter)
{
	const size_t N = (size_t)c->D + 1;
	sim h;
	sim_alloc(&h, c, false);
	draws w = {malloc((size_t)c->D * c->V * 4), malloc(N * 4)};
	stats st = {0};
	char what[128];
	for (int it = 0; it < n_iter; it++) {
		draw_iteration(c, &w);
		stale(c, &h, it);
		for (int L = 0; L < c->D; L++) {
			if (L > 0 && h.go[L - 1] == 0)
				continue;
			memcpy(h.q + (size_t)L * c->V, w.q + (size_t)L * c->V, (size_t)c->V * 4);
			h.tok[L + 1] = w.y[L + 1];
			ref_adapt(L, (int)N, c->D, c->V, c->min_steps, c->max_steps, c->h, h.go, h.cum, h.tok, h.q);
		}
		snprintf(what, sizeof(what), "ref D %d h %g bounds (%d,%d) iteration %d", c->D, (double)c->h,
		         c->min_steps, c->max_steps, it);
		check_outcome(c, &w, &h, &st, what);
	}
	print_stats(c, &st, "ref");
	free(w.q);
	free(w.y);
	sim_free(&h, false);
}

static const float HS[] = {0.0f, 0.3f, 0.7f, 1.0f};

static void grid(int D, int V, int block, bool kernel, int n_iter)
{
	const int bounds[3][2] = {{1, D}, {2, D}, {1, 2}};
	for (int hi = 0; hi < 4; hi++)
		for (int b = 0; b < 3; b++) {
			cfg c = {.D = D, .V = V, .min_steps = bounds[b][0], .max_steps = bounds[b][1],
			         .block = block, .h = HS[hi]};
			if (kernel)
				run_kernel(&c, n_iter);
			else
				run_ref(&c, n_iter);
		}
}

static void test_adapt_ref_vs_host(void **state)
{
	(void)state;
	rng_state = 11;
	grid(5, 37, 32, false, 20000);
	grid(8, 1000, 32, false, 1000); /* the q draws dominate: 8000 exp per iteration */
	grid(40, 7, 32, false, 5000);
}

static void test_adapt_kernel(void **state)
{
	(void)state;
	rng_state = 12;
	grid(5, 37, 32, true, 600);
	/* blocks smaller than the chain: the go and token writes stride */
	cfg c = {.D = 40, .V = 7, .min_steps = 1, .max_steps = 40, .block = 32, .h = 0.7f};
	run_kernel(&c, 400);
	cfg c2 = {.D = 40, .V = 1000, .min_steps = 2, .max_steps = 40, .block = 32, .h = 0.3f};
	run_kernel(&c2, 200);
	cfg c3 = {.D = 8, .V = 1000, .min_steps = 3, .max_steps = 6, .block = 64, .h = 0.3f};
	run_kernel(&c3, 300);
	/* max 1: stop right after the first token, whatever h */
	cfg c4 = {.D = 5, .V = 37, .min_steps = 1, .max_steps = 1, .block = 32, .h = 0.7f};
	run_kernel(&c4, 100);
}

/* Absent nodes (-1) in the chain: p_hat 0, the level after stops unless
 * the bounds or h = 1 say go on; kernel == ref == the host rule with p_hat
 * 0, and the q rows are never indexed by -1 (the emulator's guard zones
 * sit before draft_probs row 0). */
static void test_adapt_absent(void **state)
{
	(void)state;
	rng_state = 13;
	for (int hi = 0; hi < 4; hi++) {
		cfg c = {.D = 6, .V = 37, .min_steps = 1, .max_steps = 6, .block = 32, .h = HS[hi], .absent = 3};
		run_kernel(&c, 200);
		run_ref(&c, 2000);
		cfg c2 = {.D = 6, .V = 37, .min_steps = 3, .max_steps = 6, .block = 32, .h = HS[hi], .absent = 2};
		run_kernel(&c2, 200);
		run_ref(&c2, 2000);
	}
}

static void test_adapt_nvrtc(void **state)
{
	(void)state;
	static const struct { int level, D, V, block; } ks[] = {
		{0, 8, 32003, 32}, {6, 8, 32003, 32}, {38, 40, 128256, 64}, {3, 6, 49152, 128}};
	for (int i = 0; i < 4; i++) {
		cfg c = {.D = ks[i].D, .V = ks[i].V, .min_steps = 2, .max_steps = ks[i].D, .block = ks[i].block,
		         .h = 0.3f};
		gen_param p[] = {OH_NAME, OH_I("LEVEL", ks[i].level), OH_I("N_NODES", c.D + 1),
		                 OH_I("DEPTH", c.D), OH_I("V", c.V), OH_I("MIN_STEPS", c.min_steps),
		                 OH_I("MAX_STEPS", c.max_steps), OH_F("H", c.h),
		                 OH_I("BLOCK", c.block)};
		oh_nvrtc_p(SW_OP_adapt, p, 9);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adapt_ref_vs_host),
		cmocka_unit_test(test_adapt_kernel),
		cmocka_unit_test(test_adapt_absent),
		cmocka_unit_test(test_adapt_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
