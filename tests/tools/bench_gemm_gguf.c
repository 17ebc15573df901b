/* A microbenchmark of the GGUF-type GEMM (host_gemm.h hg_gemm_gguf_a8) on
 * one thread, next to hg_gemm_q8a8 on the same shape: microseconds per call
 * (the fastest of 41 timed calls after warm-up: the machine is shared and
 * others' load only adds; W in cache when it fits)
 * and the weight bytes read per microsecond. Not a test: nothing is
 * asserted; speed is measured, never checked (COMMON.md). Build with
 * `make build/tools/bench_gemm_gguf`.
 *
 *   build/tools/bench_gemm_gguf [N K [path [cold|hot [ROWS [repack]]]]]   (default 1536 576, auto)
 *
 * path: portable, avx2, avx512, auto. cold: each call reads another of
 * enough copies of W to pass 160 MB (the caches hold none of it, as in a
 * decode step, whose layers' weights stream from memory); the median of
 * the calls instead of the fastest. Types whose block does not divide K are
 * left out (Q4_K, Q6_K: 256). Rows 1, 7 and 26 (decode, a 7-row chain
 * verify, a 26-row tree), or ROWS: row counts separated by commas, 1 to
 * 64 each, at most 16 (`1,2,3,4,5,6,7`: a chain verify's k + 1). repack:
 * Q4_0, Q4_1 and Q8_0 only, the file's layout and the repacked one
 * (hg_gguf_repack, as the host backend does at bind) timed call by call
 * alternately (101 pairs, medians; cold: each pair another copy) and their
 * outputs compared with memcmp. W: random blocks with finite fp16 scales (the
 * numbers do not matter to the time), A: random fp16. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/host_gemm.h"

static uint64_t rs = 88172645463325252ull;

static uint32_t rnd32(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 11);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* One timed GEMM (wtype < 0: q8a8, else the gguf_a8 GEMM of that type; name
 * the type in the message), microseconds; an error ends the program. */
static double call_us(float *C, const uint16_t *A, const uint8_t *W, int64_t m, int64_t n,
                      int64_t k, int wtype, int name, int path)
{
	const double t0 = now_us();
	const int rc = wtype < 0 ? hg_gemm_q8a8(C, A, W, m, n, k, false, path, 1)
	                         : hg_gemm_gguf_a8(C, A, W, m, n, k, wtype, false, path, 1);
	const double t1 = now_us();
	if (rc) {
		fprintf(stderr, "bench_gemm_gguf: %s m %lld: error %d\n", hg_gguf_name(name),
		        (long long)m, rc);
		exit(1);
	}
	return t1 - t0;
}

static int cmp_d(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* fp16 scale bits in [2^-10, 2^-9): positive, normal, finite */
static uint16_t small_f16(void)
{
	return (uint16_t)((5u << 10) | (rnd32() & 0x3ff));
}

/* random blocks of wtype: every fp16 field a small positive normal */
static void fill(uint8_t *W, int wtype, int64_t n_blocks)
{
	const int64_t bb = hg_gguf_block_bytes(wtype);
	for (int64_t i = 0; i < n_blocks * bb; i++)
		W[i] = (uint8_t)rnd32();
	for (int64_t b = 0; b < n_blocks; b++) {
		uint8_t *p = W + b * bb;
		const uint16_t h0 = small_f16(), h1 = small_f16();
		const int64_t at0 = wtype == HG_GGUF_Q6_K ? 208 : 0;
		memcpy(p + at0, &h0, 2);
		if (wtype == HG_GGUF_Q4_1 || wtype == HG_GGUF_Q4_K)
			memcpy(p + 2, &h1, 2);
	}
}

static double time_call(float *C, const uint16_t *A, const uint8_t *W, int64_t m, int64_t n,
                        int64_t k, int wtype, int path, bool q8, int copies, int64_t bytes)
{
	enum { REPS = 41 };
	double t[REPS];
	for (int r = -5; r < REPS; r++) {
		const uint8_t *w = W + (size_t)((r + 5) % copies) * (size_t)bytes;
		const double us = call_us(C, A, w, m, n, k, q8 ? -1 : wtype, wtype, path);
		if (r >= 0)
			t[r] = us;
	}
	qsort(t, REPS, sizeof(t[0]), cmp_d);
	return copies > 1 ? t[REPS / 2] : t[0];
}

/* the file's layout (W) against the repacked one (R, wtype rt), call by
 * call alternately: medians into us[0], us[1]; exits where the bits differ */
static void time_pair(double us[2], float *C, float *C2, const uint16_t *A, const uint8_t *W,
                      const uint8_t *R, int64_t m, int64_t n, int64_t k, int wtype, int rt,
                      int path, int copies, int64_t bytes)
{
	enum { REPS = 101 };
	static double t[2][REPS];
	for (int r = -5; r < REPS; r++) {
		const size_t at = (size_t)((r + 5) % copies) * (size_t)bytes;
		for (int v = 0; v < 2; v++) {
			const double us = call_us(v ? C2 : C, A, (v ? R : W) + at, m, n, k, v ? rt : wtype,
			                          wtype, path);
			if (r >= 0)
				t[v][r] = us;
		}
		if (memcmp(C, C2, sizeof(*C) * (size_t)(m * n))) {
			fprintf(stderr, "bench_gemm_gguf: %s m %lld: the repacked layout's output differs\n",
			        hg_gguf_name(wtype), (long long)m);
			exit(1);
		}
	}
	for (int v = 0; v < 2; v++) {
		qsort(t[v], REPS, sizeof(t[v][0]), cmp_d);
		us[v] = t[v][REPS / 2];
	}
}

int main(int argc, char **argv)
{
	const int64_t n = argc > 2 ? atoll(argv[1]) : 1536, k = argc > 2 ? atoll(argv[2]) : 576;
	int path = HG_PATH_AUTO;
	if (argc > 3)
		path = !strcmp(argv[3], "portable") ? HG_PATH_PORTABLE
		       : !strcmp(argv[3], "avx2")   ? HG_PATH_AVX2
		       : !strcmp(argv[3], "avx512") ? HG_PATH_AVX512
		       : !strcmp(argv[3], "auto")   ? HG_PATH_AUTO
		                                    : -1;
	const bool cold = argc > 4 && !strcmp(argv[4], "cold");
	if (path < 0 || (argc > 4 && !cold && strcmp(argv[4], "hot"))) {
		fprintf(stderr, "bench_gemm_gguf: path: portable, avx2, avx512 or auto, then optionally "
		                "cold or hot; found %s%s%s\n", argv[3], argc > 4 ? " " : "", argc > 4 ? argv[4] : "");
		return 2;
	}
	if (n <= 0 || k <= 0 || k % 32) {
		fprintf(stderr, "bench_gemm_gguf: N K: positive, K a multiple of 32; found %lld %lld\n",
		        (long long)n, (long long)k);
		return 2;
	}
	static const int TYPES[] = {HG_GGUF_Q8_0, HG_GGUF_Q4_0, HG_GGUF_Q4_1, HG_GGUF_Q4_K,
	                            HG_GGUF_Q6_K};
	enum { MAX_MS = 16, MAX_M = 64 };
	int64_t MS[MAX_MS] = {1, 7, 26};
	size_t n_ms = 3;
	if (argc > 5) {
		const char *p = argv[5];
		n_ms = 0;
		for (;;) {
			char *end;
			const long v = strtol(p, &end, 10);
			if (end == p || v < 1 || v > MAX_M || n_ms == MAX_MS || (*end && *end != ',')) {
				fprintf(stderr, "bench_gemm_gguf: ROWS: up to %d row counts of 1 to %d "
				                "separated by commas; found %s\n", MAX_MS, MAX_M, argv[5]);
				return 2;
			}
			MS[n_ms++] = v;
			if (!*end)
				break;
			p = end + 1;
		}
	}
	const bool repack = argc > 6 && !strcmp(argv[6], "repack");
	if (argc > 6 && !repack) {
		fprintf(stderr, "bench_gemm_gguf: the sixth argument: repack or nothing; found %s\n",
		        argv[6]);
		return 2;
	}
	int64_t m_max = 0;
	for (size_t mi = 0; mi < n_ms; mi++)
		m_max = MS[mi] > m_max ? MS[mi] : m_max;
	uint16_t *A = malloc(sizeof(*A) * (size_t)(m_max * k));
	float *C = malloc(sizeof(*C) * (size_t)(m_max * n));
	float *C2 = malloc(sizeof(*C2) * (size_t)(m_max * n));
	if (!A || !C || !C2)
		return 1;
	for (int64_t i = 0; i < m_max * k; i++) /* fp16 in (-1, 1) */
		A[i] = (uint16_t)((rnd32() & 0x8000) | ((rnd32() % 15) << 10) | (rnd32() & 0x3ff));
	printf("bench_gemm_gguf: N %lld K %lld, one thread, %s, us per call (MB/s of W)\n",
	       (long long)n, (long long)k, cold ? "W from memory (median)" : "W hot (fastest)");
	for (size_t ti = 0; ti < sizeof(TYPES) / sizeof(TYPES[0]); ti++) {
		const int t = TYPES[ti];
		if (!hg_gguf_block(t) || k % hg_gguf_block(t) ||
		    (repack && t != HG_GGUF_Q4_0 && t != HG_GGUF_Q4_1 && t != HG_GGUF_Q8_0))
			continue;
		const int64_t nblk = n * (k / hg_gguf_block(t)), bytes = nblk * hg_gguf_block_bytes(t);
		const int copies = cold ? (int)(160000000 / bytes + 2) : 1;
		uint8_t *W = malloc((size_t)bytes * (size_t)copies);
		if (!W)
			return 1;
		fill(W, t, nblk);
		for (int c = 1; c < copies; c++)
			memcpy(W + (size_t)c * (size_t)bytes, W, (size_t)bytes);
		if (repack) {
			uint8_t *R = malloc((size_t)bytes * (size_t)copies);
			int rt = 0;
			if (!R)
				return 1;
			memcpy(R, W, (size_t)bytes);
			if ((rt = hg_gguf_repack(R, n, k, t)) < 0)
				return 1;
			for (int c = 1; c < copies; c++)
				memcpy(R + (size_t)c * (size_t)bytes, R, (size_t)bytes);
			printf("  %-5s %6.2f MB, file layout -> repacked:", hg_gguf_name(t),
			       (double)bytes / 1e6);
			for (size_t mi = 0; mi < n_ms; mi++) {
				double us[2];
				time_pair(us, C, C2, A, W, R, MS[mi], n, k, t, rt, path, copies, bytes);
				printf("  m %lld %.1f -> %.1f us (%.2f)", (long long)MS[mi], us[0], us[1],
				       us[1] / us[0]);
			}
			printf("\n");
			free(R);
			free(W);
			continue;
		}
		for (int q8 = t == HG_GGUF_Q8_0; q8 >= (t == HG_GGUF_Q8_0); q8--) {
			printf("  %-5s%-9s %6.2f MB:", hg_gguf_name(t), q8 ? " (q8a8)" : "",
			       (double)bytes / 1e6);
			for (size_t mi = 0; mi < n_ms; mi++) {
				const double us = time_call(C, A, W, MS[mi], n, k, t, path, q8, copies, bytes);
				printf("  m %2lld %8.1f us (%5.0f)", (long long)MS[mi], us, (double)bytes / us);
			}
			printf("\n");
		}
		free(W);
	}
	free(A);
	free(C);
	free(C2);
	return 0;
}
