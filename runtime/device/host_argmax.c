/* hg_argmax_row (host_argmax.h): ref_argmax_row's index in two vector
 * passes. ref_argmax_row keeps the first index whose value is greater than
 * every earlier non-NaN value, so (x[0] not NaN) its answer is the first i
 * with x[i] == M, M the largest non-NaN value: == holds for -0 against +0
 * as ref's > fails for them, so the first of equal zeros is found either
 * way. Pass 1 takes M with max_ps(v, m), which returns m when v is NaN
 * (m never is: it starts at x[0]); pass 2 finds the first lane equal to M.
 * x[0] NaN: ref never moves, 0. A logits row of 49152 fp32 (192 KB) is
 * read twice from L2 instead of once by a scalar loop with a dependent
 * load per element (tests/test_host_argmax.c holds every path to ref). */
#include "host_argmax.h"
#include "host_gemm.h"
#include "kernels/ref/ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AM_X86 1
#else
#define AM_X86 0
#endif

/* the first i >= i0 with x[i] == mx (it exists: mx is some x[i]) */
static int first_eq_c(const float *x, int i0, int n, float mx)
{
	for (int i = i0; i < n; i++)
		if (x[i] == mx)
			return i;
	return 0;
}

#if AM_X86
#define AM_AVX2 __attribute__((target("avx2")))
#define AM_AVX512 __attribute__((target("avx512f")))

static AM_AVX2 int argmax_avx2(const float *x, int n)
{
	__m256 m = _mm256_set1_ps(x[0]);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
	float l[8], mx = x[0];
	_mm256_storeu_ps(l, m);
	for (int j = 0; j < 8; j++)
		mx = l[j] > mx ? l[j] : mx;
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	const __m256 vm = _mm256_set1_ps(mx);
	for (i = 0; i + 8 <= n; i += 8) {
		const int b = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
		if (b)
			return i + __builtin_ctz((unsigned)b);
	}
	return first_eq_c(x, i, n, mx);
}

static AM_AVX512 int argmax_avx512(const float *x, int n)
{
	__m512 m = _mm512_set1_ps(x[0]), m1 = m;
	int i = 0;
	for (; i + 32 <= n; i += 32) { /* two independent max chains */
		m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
		m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
	}
	m = _mm512_max_ps(m1, m);
	for (; i + 16 <= n; i += 16)
		m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
	float l[16], mx = x[0];
	_mm512_storeu_ps(l, m);
	for (int j = 0; j < 16; j++)
		mx = l[j] > mx ? l[j] : mx;
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	const __m512 vm = _mm512_set1_ps(mx);
	for (i = 0; i + 16 <= n; i += 16) {
		const __mmask16 b = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vm, _CMP_EQ_OQ);
		if (b)
			return i + __builtin_ctz((unsigned)b);
	}
	return first_eq_c(x, i, n, mx);
}
#endif

int hg_argmax_row(const float *x, int n, int path)
{
	if (n < 1 || x[0] != x[0]) /* empty; x[0] NaN: ref never moves */
		return 0;
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
	if (!hg_path_available(path))
		path = HG_PATH_PORTABLE;
#if AM_X86
	if (path == HG_PATH_AVX512)
		return argmax_avx512(x, n);
	if (path == HG_PATH_AVX2)
		return argmax_avx2(x, n);
#endif
	return ref_argmax_row(x, n);
}
