/* The host backend's gemv16: kernels/ref/gemv16.c's exact operations and
 * order (so the host's engines give the generated kernel's bits), fast
 * enough for the engines that choose it. Not the host's own GEMM
 * (host_gemm.c), whose order is its lanes'. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "host_gemm.h"
#include "host_pool.h"

/* Vector lanes are G16_G rows of W (a constant count the compiler turns
 * into vector FMAs, A's element broadcast), each lane the row's own fmaf
 * chain per slot; G16_U slots' chains at once hide the FMA latency and are
 * then added to the rows' sums in slot order. */
#define G16_G 16
#define G16_U 4 /* the four accumulators below */

typedef struct g16_job {
	float *C;
	const float *af;      /* (m, k): A widened */
	const uint16_t *W;
	int64_t m, n, k;
	int f16, S;
	int rc;
} g16_job;

static void g16_part(void *ctx, int part, int n_parts)
{
	g16_job *j = ctx;
	const int S = j->S;
	const int64_t k = j->k, nc = k / 8;
	const int64_t groups = (j->n + G16_G - 1) / G16_G;
	const int64_t g0 = groups * part / n_parts, g1 = groups * (part + 1) / n_parts;
	float *wf = malloc(sizeof(float) * (size_t)(G16_G * k));
	float *wt = malloc(sizeof(float) * (size_t)(G16_G * k)); /* (k, G16_G) */
	if (!wf || !wt) {
		j->rc = SW_ENOMEM;
		goto out_free;
	}
	for (int64_t g = g0; g < g1; g++) {
		const int64_t r0 = g * G16_G;
		const int nr = j->n - r0 < G16_G ? (int)(j->n - r0) : G16_G;
		for (int t = 0; t < G16_G; t++) /* rows past n: row n - 1, not stored */
			hg_to_f32(wf + t * k, j->W + (r0 + (t < nr ? t : nr - 1)) * k, k, !j->f16);
		for (int64_t x = 0; x < k; x++)
			for (int t = 0; t < G16_G; t++)
				wt[x * G16_G + t] = wf[t * k + x];
		for (int64_t i = 0; i < j->m; i++) {
			const float *a = j->af + i * k;
			float sum[G16_G];
			for (int t = 0; t < G16_G; t++)
				sum[t] = 0.0f;
			for (int s0 = 0; s0 < S; s0 += G16_U) {
				float c0a[G16_G], c1a[G16_G], c2a[G16_G], c3a[G16_G]; /* G16_U == 4 */
				for (int t = 0; t < G16_G; t++)
					c0a[t] = c1a[t] = c2a[t] = c3a[t] = 0.0f;
				for (int64_t c0 = s0; c0 < nc; c0 += S) {
					const int64_t nu = nc - c0 < G16_U ? nc - c0 : G16_U; /* slots with a chunk */
					for (int e = 0; e < 8; e++) {
						const int64_t x = 8 * c0 + e;
						const float *w0 = wt + x * G16_G;
						const float a0 = a[x], a1 = nu > 1 ? a[x + 8] : 0.0f;
						const float a2 = nu > 2 ? a[x + 16] : 0.0f, a3 = nu > 3 ? a[x + 24] : 0.0f;
						if (nu == G16_U) {
							for (int t = 0; t < G16_G; t++) {
								c0a[t] = fmaf(a0, w0[t], c0a[t]);
								c1a[t] = fmaf(a1, w0[8 * G16_G + t], c1a[t]);
								c2a[t] = fmaf(a2, w0[16 * G16_G + t], c2a[t]);
								c3a[t] = fmaf(a3, w0[24 * G16_G + t], c3a[t]);
							}
						} else { /* the last round: slots past nc take no step */
							for (int t = 0; t < G16_G; t++) {
								c0a[t] = fmaf(a0, w0[t], c0a[t]);
								if (nu > 1)
									c1a[t] = fmaf(a1, w0[8 * G16_G + t], c1a[t]);
								if (nu > 2)
									c2a[t] = fmaf(a2, w0[16 * G16_G + t], c2a[t]);
							}
						}
					}
				}
				for (int t = 0; t < G16_G; t++)
					sum[t] = (((sum[t] + c0a[t]) + c1a[t]) + c2a[t]) + c3a[t];
			}
			for (int t = 0; t < nr; t++)
				j->C[i * j->n + r0 + t] = sum[t];
		}
	}
out_free:
	free(wf);
	free(wt);
}

int hg_gemv16(float *C, const uint16_t *A, const uint16_t *W, int64_t m, int64_t n, int64_t k,
              bool f16, int ks, int threads)
{
	if (m < 1 || n < 1 || k < 8 || k % 8 || ks < 1 || ks > 32)
		return SW_EINVAL;
	g16_job j = {.C = C, .W = W, .m = m, .n = n, .k = k, .f16 = f16, .S = 32 * ks};
	float *af = malloc(sizeof(float) * (size_t)(m * k));
	if (!af)
		return SW_ENOMEM;
	hg_to_f32(af, A, m * k, !f16);
	j.af = af;
	const int64_t parts = hg_parts(threads, (n + G16_G - 1) / G16_G, 1 + 1024 / k);
	if (parts <= 1)
		g16_part(&j, 0, 1);
	else
		hp_run(g16_part, &j, (int)parts);
	free(af);
	return j.rc;
}
