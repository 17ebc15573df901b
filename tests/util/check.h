/* Numerical checking helpers shared by the op and kernel tests: fp32 error
 * bounds (Higham's gamma_n), a seeded splitmix64 source independent of the
 * engine's Philox, guard-zone buffers, and the elementwise + NMSE comparison
 * against a double-precision reference with derived per-element bounds. */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* fp32 unit roundoff u = 2^-24 and gamma_n = n u / (1 - n u) (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 3.1): a length-n fp32
 * dot product, in any summation order, with or without FMA, lies within
 * gamma_n * sum |a_i b_i| of the exact value. References computed in double
 * from the same fp32 inputs carry ~n 2^-53 error, negligible against this. */
#define U32 0x1p-24
static inline double gamma_n(int n)
{
	return n * U32 / (1.0 - n * U32);
}

/* splitmix64 -> uniform in [-1, 1); reseed by assigning rng_state. */
extern uint64_t rng_state;
double rnd(void);
void fill(float *x, size_t n, double scale);

/* Guard zones: GUARD floats of a NaN bit pattern no op produces on either
 * side of every output; any write outside the output shows up as a change. */
#define GUARD 16
static const uint32_t CANARY = 0x7fc0deadu;
float *galloc(size_t n);
void gcheck(const char *what, const float *p, size_t n);
void gfree(float *p);

/* Every element finite and within its derived bound; then the NMSE, checked
 * against the NMSE those same bounds imply (sum bound^2 / sum ref^2), so the
 * summary statistic and the elementwise test cannot disagree silently. */
void check_close(const char *what, const float *got, const double *ref, const double *bound, size_t n);

#endif
