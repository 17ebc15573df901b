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
#include "kernels/half.h"

/* Blocks of 32 slots: a loop of a constant count the compiler turns into
 * vector FMAs, each lane still its slot's own fmaf chain. */
#define G16_SB 32

typedef struct g16_job {
	float *C;
	const float *at;     /* (m, full rounds, 8, S): A's full rounds, slot-minor */
	const uint16_t *A, *W;
	int64_t m, n, k;
	int f16, S, full, tail; /* slots, full rounds of S chunks, chunks of the last round */
	int n_parts;
	int rc;
} g16_job;

static void g16_part(void *ctx, int part, int n_parts)
{
	g16_job *j = ctx;
	const int S = j->S, full = j->full, tail = j->tail, f16 = j->f16;
	const int64_t n0 = j->n * part / n_parts, n1 = j->n * (part + 1) / n_parts;
	const size_t rl = (size_t)full * 8 * S; /* floats a row's full rounds */
	float *wt = malloc(sizeof(float) * (rl ? rl : 1)), *acc = malloc(sizeof(float) * (size_t)S);
	if (!wt || !acc) {
		j->rc = SW_ENOMEM;
		goto out_free;
	}
	for (int64_t r = n0; r < n1; r++) {
		const uint16_t *w = j->W + r * j->k;
		for (int q = 0; q < full; q++)
			for (int s = 0; s < S; s++)
				for (int e = 0; e < 8; e++)
					wt[((size_t)q * 8 + e) * S + s] =
						sw_half_to_f32(w[((int64_t)q * S + s) * 8 + e], f16);
		for (int64_t i = 0; i < j->m; i++) {
			const float *a = j->at + (size_t)i * rl;
			memset(acc, 0, sizeof(float) * (size_t)S);
			for (size_t x = 0; x < (size_t)full * 8; x++) {
				const float *ax = a + x * S, *wx = wt + x * S;
				for (int sb = 0; sb < S; sb += G16_SB)
					for (int t = 0; t < G16_SB; t++)
						acc[sb + t] = fmaf(ax[sb + t], wx[sb + t], acc[sb + t]);
			}
			const uint16_t *ar = j->A + i * j->k;
			for (int s = 0; s < tail; s++) { /* the last round's chunks, slots 0 .. tail-1 */
				const int64_t c = (int64_t)full * S + s;
				for (int e = 0; e < 8; e++)
					acc[s] = fmaf(sw_half_to_f32(ar[8 * c + e], f16),
					              sw_half_to_f32(w[8 * c + e], f16), acc[s]);
			}
			float sum = 0.0f;
			for (int s = 0; s < S; s++)
				sum += acc[s];
			j->C[i * j->n + r] = sum;
		}
	}
out_free:
	free(wt);
	free(acc);
}

int hg_gemv16(float *C, const uint16_t *A, const uint16_t *W, int64_t m, int64_t n, int64_t k,
              bool f16, int ks, int threads)
{
	if (m < 1 || n < 1 || k < 8 || k % 8 || ks < 1 || ks > 32)
		return SW_EINVAL;
	const int S = 32 * ks;
	const int64_t nc = k / 8;
	g16_job j = {.C = C, .A = A, .W = W, .m = m, .n = n, .k = k, .f16 = f16, .S = S,
	             .full = (int)(nc / S), .tail = (int)(nc % S)};
	const size_t rl = (size_t)j.full * 8 * S;
	const size_t at_n = rl * (size_t)m;
	float *at = malloc(sizeof(float) * (at_n > 0 ? at_n : 1));
	if (!at)
		return SW_ENOMEM;
	for (int64_t i = 0; i < m; i++)
		for (int q = 0; q < j.full; q++)
			for (int s = 0; s < S; s++)
				for (int e = 0; e < 8; e++)
					at[(size_t)i * rl + ((size_t)q * 8 + e) * S + s] =
						sw_half_to_f32(A[i * k + ((int64_t)q * S + s) * 8 + e], f16);
	j.at = at;
	const int64_t parts = hg_parts(threads, n, 1 + 16384 / k);
	if (parts <= 1)
		g16_part(&j, 0, 1);
	else
		hp_run(g16_part, &j, (int)parts);
	free(at);
	return j.rc;
}
