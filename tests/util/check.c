/* Numerical checking helpers for the tests (check.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "check.h"

uint64_t rng_state = 0x9e3779b97f4a7c15ull;

double rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-52 - 1.0;
}

void fill(float *x, size_t n, double scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(rnd() * scale);
}

float *galloc(size_t n)
{
	float *b = malloc((n + 2 * GUARD) * sizeof(*b));
	assert_non_null(b);
	for (size_t i = 0; i < GUARD; i++) {
		memcpy(&b[i], &CANARY, sizeof(CANARY));
		memcpy(&b[GUARD + n + i], &CANARY, sizeof(CANARY));
	}
	return b + GUARD;
}

void gcheck(const char *what, const float *p, size_t n)
{
	for (size_t i = 0; i < GUARD; i++) {
		if (memcmp(&p[-1 - (ptrdiff_t)i], &CANARY, sizeof(CANARY)) != 0)
			fail_msg("%s: guard before the buffer overwritten at -%zu", what, i + 1);
		if (memcmp(&p[n + i], &CANARY, sizeof(CANARY)) != 0)
			fail_msg("%s: guard after the buffer overwritten at +%zu", what, i);
	}
}

void gfree(float *p)
{
	free(p - GUARD);
}

void check_close(const char *what, const float *got, const double *ref, const double *bound, size_t n)
{
	double se = 0.0, sr = 0.0, sb = 0.0, max_abs = 0.0, max_bound = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			fail_msg("%s[%zu]: %g is not finite (ref %g)", what, i, (double)got[i], ref[i]);
		double d = fabs((double)got[i] - ref[i]);
		if (!(d <= bound[i]))
			fail_msg("%s[%zu]: got %.9g ref %.9g |diff| %.3g > bound %.3g", what, i,
			         (double)got[i], ref[i], d, bound[i]);
		se += d * d;
		sr += ref[i] * ref[i];
		sb += bound[i] * bound[i];
		max_abs = fmax(max_abs, d);
		max_bound = fmax(max_bound, bound[i]);
	}
	if (sr > 0.0 && !(se / sr <= sb / sr))
		fail_msg("%s: NMSE %.3g > derived %.3g", what, se / sr, sb / sr);
	if (!(max_abs <= max_bound))
		fail_msg("%s: max |diff| %.3g > max bound %.3g", what, max_abs, max_bound);
}
