/* The draft-length controller's host side (ctrl.h): the cost table (given,
 * flat, or measured by timed verify forwards at each row count) and the
 * per-request reset of its device words. On the host backend the verify
 * forward runs only the drafted rows (device.h rows regions), so drafting k
 * tokens costs a forward of 1 + k rows; on a GPU the forward is nearly flat
 * in rows and the table is 1s. An engine with an EAGLE-3 head behind the
 * lookup (gen/drafter_eagle3.c) has `levels` more entries: an iteration whose
 * head drafts k levels, the verify at 1 + k rows and the k level phases
 * timed alike. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl.h"
#include "core/timing.h"
#include "kernels/engine_state.h"

/* the least measured cost of each drafted row, over a plain step */
#define CTRL_FLOOR 0.05
/* timed forwards per row count at load (interleaved; the median ratio) */
#define CTRL_REPS 7
#define CTRL_MAX_REPS 31

int rt_engine_ctrl_levels(const rt_engine *e)
{
	const int b = rt_manifest_buf_find(e->man, "e3_go");
	return e->man->ctrl == RT_CTRL_NONE || b < 0 ? 0 : (int)(e->man->bufs[b].bytes / 4);
}

int rt_engine_set_ctrl_cost(rt_engine *e, const double *cost, int n, sw_err *err)
{
	const rt_manifest *m = e->man;
	if (m->ctrl == RT_CTRL_NONE)
		return sw_errf(err, SW_EINVAL, "%s: the engine has no draft-length controller "
		               "($.spec.control)", m->dir);
	const int H = rt_engine_ctrl_levels(e);
	if (n != m->depth + 1 + H) {
		if (H)
			return sw_errf(err, SW_EINVAL, "%s: draft cost table of %d entries, expected %d "
			               "(drafting 0 .. %d tokens by the lookup, then 1 .. %d levels by the "
			               "head)", m->dir, n, m->depth + 1 + H, m->depth, H);
		return sw_errf(err, SW_EINVAL, "%s: draft cost table of %d entries, expected %d (drafting "
		               "0 .. %d tokens)", m->dir, n, m->depth + 1, m->depth);
	}
	int32_t q[RT_CTRL_MAX_COST];
	for (int i = 0; i < n; i++) {
		if (!(cost[i] >= 1.0 && cost[i] <= 1000.0) || (i == 0 && cost[i] != 1.0))
			return sw_errf(err, SW_EINVAL, "%s: draft cost[%d] = %g, expected %s", m->dir, i,
			               cost[i], i ? "1 to 1000 (over an iteration drafting none)" : "1");
		q[i] = (int32_t)lround(cost[i] * 65536.0);
	}
	const rt_dptr p = rt_engine_buf_addr(e, "ctrl_cost");
	int rc = e->dev->ops->upload(e->dev, p, q, sizeof(*q) * (size_t)n, err);
	if (rc)
		return rc;
	memcpy(e->ctrl_cost, cost, sizeof(*cost) * (size_t)n);
	e->ctrl_cost_src = "set";
	return 0;
}

/* One timed verify forward at `rows` rows, the iteration's draft phases run
 * first (positions, the lookup) and every node made present (token 0): the
 * CPU seconds of this process (every thread's), which a loaded machine
 * disturbs far less than wall-clock (at load 15 on 2 cores a 10 ms forward
 * took 50 ms of wall-clock, and 2 rows timed 1.7x or 0.95x of 1 row from
 * one load to the next). */
static int time_verify(rt_engine *e, int ph_v, int rows, double *s, sw_err *err)
{
	rt_dev *d = e->dev;
	const int nn = e->man->n_nodes;
	int32_t tok[RT_ENGINE_MAX_NODES];
	int rc;
	if ((rc = rt_engine_run_phases(e, e->man->ph_iter_first, ph_v, false, 0, err)))
		return rc;
	memset(tok, 0, sizeof(tok));
	if ((rc = d->ops->upload(d, rt_engine_buf_addr(e, "tree_tokens"), tok, sizeof(*tok) *
	                         (size_t)nn, err)) || (rc = d->ops->sync(d, err)))
		return rc;
	const double t0 = sw_cpu_s();
	if ((rc = rt_engine_run_phases(e, ph_v, ph_v + 1, false, rows, err)) ||
	    (rc = d->ops->sync(d, err)))
		return rc;
	*s = sw_cpu_s() - t0;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The k level phases of the head, the iteration's phases before them run
 * first and every gate word opened: the CPU seconds of each level. */
static int time_levels(rt_engine *e, int ph_d0, int H, double *s, sw_err *err)
{
	rt_dev *d = e->dev;
	int32_t go[RT_ENGINE_MAX_NODES];
	int rc;
	if ((rc = rt_engine_run_phases(e, e->man->ph_iter_first, ph_d0, false, 0, err)))
		return rc;
	for (int j = 0; j < H; j++)
		go[j] = 1;
	if ((rc = d->ops->upload(d, rt_engine_buf_addr(e, "e3_go"), go, sizeof(*go) * (size_t)H,
	                         err)) || (rc = d->ops->sync(d, err)))
		return rc;
	for (int j = 0; j < H; j++) {
		const double t0 = sw_cpu_s();
		if ((rc = rt_engine_run_phases(e, ph_d0 + j, ph_d0 + j + 1, false, 0, err)) ||
		    (rc = d->ops->sync(d, err)))
			return rc;
		s[j] = sw_cpu_s() - t0;
	}
	return 0;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int rt_engine_ctrl_measure(rt_engine *e, int reps, double *cost, sw_err *err)
{
	const rt_manifest *m = e->man;
	rt_dev *d = e->dev;
	const int nn = m->n_nodes, D = m->depth, ph_v = rt_manifest_phase_find(m, "verify");
	const int H = rt_engine_ctrl_levels(e), ph_d0 = rt_manifest_phase_find(m, "draft_0");
	for (int k = 0; k <= D + H; k++)
		cost[k] = 1.0;
	if (!d->ops->rows_begin || ph_v < 0 || nn != D + 1)
		return 0; /* fixed-shape forwards (cuda), or not a chain: flat */
	if (H && (ph_d0 < 0 || ph_d0 + H > ph_v))
		return sw_errf(err, SW_EINVAL, "%s/engine.json: %d head levels but no phases draft_0 .. "
		               "draft_%d before verify", m->dir, H, H - 1);
	/* a context of a few hundred tokens (the cache holds zeros; the cost is
	 * the weights' and the rows'), the root and every node present */
	int32_t hdr[RT_ST_WORDS] = {0};
	hdr[RT_ST_TLEN] = hdr[RT_ST_DLEN] = m->max_ctx - nn - 1 < 256 ? m->max_ctx - nn - 1 : 256;
	hdr[RT_ST_HLEN] = hdr[RT_ST_TLEN] > 0 ? hdr[RT_ST_TLEN] - 1 : 0;
	hdr[RT_ST_MAXNEW] = 1 << 30;
	hdr[RT_ST_EOS] = -1;
	hdr[RT_ST_LAST] = -1;
	int rc;
	if (hdr[RT_ST_TLEN] < 0)
		hdr[RT_ST_TLEN] = hdr[RT_ST_DLEN] = hdr[RT_ST_HLEN] = 0;
	if ((rc = d->ops->upload(d, rt_engine_buf_addr(e, "state"), hdr, sizeof(hdr), err)))
		return rc;
	if (reps < 1 || reps > CTRL_MAX_REPS)
		return sw_errf(err, SW_EINVAL, "%s: draft cost measurement: %d repetitions, expected 1 "
		               "to %d", m->dir, reps, CTRL_MAX_REPS);
	/* ratio[r][rep]: rows r + 1 over 1 row within one repetition (the row
	 * counts interleaved, so a burst of load hits adjacent timings alike);
	 * the median over the repetitions (a burst in either timing moves one
	 * ratio, not the median); lev[k][rep]: the head's first k + 1 levels
	 * over 1 row, timed in the same repetition */
	double t[RT_ENGINE_MAX_NODES], th[RT_ENGINE_MAX_NODES];
	double ratio[RT_ENGINE_MAX_NODES][CTRL_MAX_REPS], lev[RT_ENGINE_MAX_NODES][CTRL_MAX_REPS];
	for (int rep = 0; rep < reps; rep++) {
		for (int r = 1; r <= nn; r++)
			if ((rc = time_verify(e, ph_v, r, &t[r - 1], err)))
				return sw_err_prefix(err, "%s: draft cost measurement, %d rows", m->dir, r);
		if (H && (rc = time_levels(e, ph_d0, H, th, err)))
			return sw_err_prefix(err, "%s: draft cost measurement, the head's levels", m->dir);
		for (int r = 1; r <= nn; r++)
			ratio[r - 1][rep] = t[0] > 0 ? t[r - 1] / t[0] : 1.0;
		for (int j = 0; j < H; j++)
			lev[j][rep] = (j ? lev[j - 1][rep] : 0.0) + (t[0] > 0 ? th[j] / t[0] : 0.0);
	}
	/* floored at 1 + CTRL_FLOOR k: an iteration that drafts has costs the
	 * verify timing leaves out (the lookup's, a longer accept and commit);
	 * without the floor a near-zero acceptance would still look worth
	 * drafting for */
	for (int k = 1; k <= D; k++) {
		double c = median(ratio[k], reps);
		c = c < cost[k - 1] ? cost[k - 1] : c; /* more rows never cost less */
		c = c < 1.0 + CTRL_FLOOR * k ? 1.0 + CTRL_FLOOR * k : c;
		cost[k] = c > 1000.0 ? 1000.0 : c;
	}
	/* the head's k levels: the lookup's k on the verify, its levels on top
	 * (more levels never cost less) */
	for (int k = 1; k <= H; k++) {
		double c = cost[k] + median(lev[k - 1], reps);
		c = k > 1 && c < cost[D + k - 1] ? cost[D + k - 1] : c;
		cost[D + k] = c > 1000.0 ? 1000.0 : c;
	}
	return 0;
}

int rt_engine_ctrl_bind(rt_engine *e, sw_err *err)
{
	const rt_manifest *m = e->man;
	double cost[RT_CTRL_MAX_COST];
	const int H = rt_engine_ctrl_levels(e);
	int rc;
	if (m->ctrl == RT_CTRL_NONE)
		return 0;
	if (!rt_engine_buf_addr(e, "ctrl") || !rt_engine_buf_addr(e, "ctrl_cost"))
		return sw_errf(err, SW_EINVAL, "%s/engine.json: $.spec.control is set but the buffers "
		               "\"ctrl\" and \"ctrl_cost\" are missing", m->dir);
	const bool sized = e->dev->ops->rows_begin != NULL;
	if (m->ctrl == RT_CTRL_TABLE && sized) {
		if (m->n_ctrl_cost != m->depth + 1 + H)
			return sw_errf(err, SW_EINVAL, "%s/engine.json: $.spec.control.cost: %d entries, "
			               "expected %d (drafting 0 .. %d tokens%s)", m->dir, m->n_ctrl_cost,
			               m->depth + 1 + H, m->depth, H ? ", then the head's 1 .. levels" : "");
		memcpy(cost, m->ctrl_cost, sizeof(*cost) * (size_t)m->n_ctrl_cost);
	} else if (m->ctrl == RT_CTRL_MEASURE && sized) {
		if ((rc = rt_engine_ctrl_measure(e, CTRL_REPS, cost, err)))
			return rc;
	} else {
		for (int k = 0; k <= m->depth + H; k++)
			cost[k] = 1.0;
	}
	if ((rc = rt_engine_set_ctrl_cost(e, cost, m->depth + 1 + H, err)))
		return rc;
	e->ctrl_cost_src = !sized ? "flat: fixed-shape verify forward" : m->ctrl == RT_CTRL_TABLE
	                   ? "spec" : m->ctrl == RT_CTRL_FLAT ? "flat" : "measured";
	return 0;
}

int rt_engine_ctrl_reset(rt_engine *e, sw_err *err)
{
	const int b = rt_manifest_buf_find(e->man, "ctrl");
	if (e->man->ctrl == RT_CTRL_NONE || b < 0)
		return 0;
	const size_t n = (size_t)e->man->bufs[b].bytes;
	void *z = calloc(1, n);
	if (!z)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	int rc = e->dev->ops->upload(e->dev, rt_engine_buf_addr(e, "ctrl"), z, n, err);
	free(z);
	return rc;
}
