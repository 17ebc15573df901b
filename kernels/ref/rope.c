/* Rotary position embedding, GGUF/ggml "normal" mode: adjacent pairs
 * (x[2i], x[2i+1]) rotate by pos * inv_freq[i]. HF checkpoints use the
 * rotate_half (NeoX) pairing (x[i], x[i+hd/2]); for Llama the GGUF converter
 * permutes the Q/K weight rows so that both give the same attention scores.
 * Qwen2/Qwen3 rows are not permuted (in GGUF either): ref_rope_neox rotates
 * the NeoX pairs themselves. */
#include <math.h>

#include "ref.h"

/* Frequencies are computed in double and rounded once, so they do not depend
 * on the iterated powf of one library or another. The Llama-3.1 rule follows
 * HF _compute_llama3_parameters: high-frequency components (short wavelength)
 * are kept, low-frequency ones divided by factor, the band between blended
 * linearly in orig_ctx / wavelen. */
void ref_rope_freqs(float *inv_freq, int rot_dim, float theta, int scaling, float factor,
                    float low_freq_factor, float high_freq_factor, int orig_ctx)
{
	const double two_pi = 6.283185307179586476925286766559;

	for (int i = 0; i < rot_dim / 2; i++) {
		double f = pow((double)theta, -2.0 * i / rot_dim);

		if (scaling == 1) {
			f /= factor;
		} else if (scaling == 2) {
			double wavelen = two_pi / f;
			double low_wavelen = (double)orig_ctx / low_freq_factor;
			double high_wavelen = (double)orig_ctx / high_freq_factor;

			if (wavelen > low_wavelen) {
				f /= factor;
			} else if (wavelen >= high_wavelen) {
				double smooth = ((double)orig_ctx / wavelen - low_freq_factor) /
				                ((double)high_freq_factor - low_freq_factor);
				f = (1.0 - smooth) * f / factor + smooth * f;
			}
		}
		inv_freq[i] = (float)f;
	}
}

/* Positions outer, pairs next, heads inner: each (cos, sin) is computed once
 * and applied to every head. The angle and the rotation are done in double
 * because pos * inv_freq reaches thousands of radians, where an fp32 angle
 * already carries ~1e-4 rad of rounding error. */
void ref_rope(float *x, const int32_t *pos, int T, int n_heads, int head_dim, int rot_dim,
              const float *inv_freq)
{
	for (int t = 0; t < T; t++) {
		float *xt = x + (size_t)t * n_heads * head_dim;

		for (int i = 0; i < rot_dim / 2; i++) {
			double a = (double)pos[t] * inv_freq[i];
			double c = cos(a), s = sin(a);

			for (int h = 0; h < n_heads; h++) {
				float *p = xt + (size_t)h * head_dim + 2 * i;
				double x0 = p[0], x1 = p[1];

				p[0] = (float)(x0 * c - x1 * s);
				p[1] = (float)(x0 * s + x1 * c);
			}
		}
	}
}

/* NeoX pairing: x[i] and x[i + rot_dim/2] rotate by pos * inv_freq[i], that
 * is x * cos + rotate_half(x) * sin with rotate_half(x) = (-x2, x1). The same
 * double angle and rotation as ref_rope: the two modes differ in the pairing
 * only, bit for bit (tests/test_ref_rope.c). */
void ref_rope_neox(float *x, const int32_t *pos, int T, int n_heads, int head_dim, int rot_dim,
                   const float *inv_freq)
{
	const int half = rot_dim / 2;

	for (int t = 0; t < T; t++) {
		float *xt = x + (size_t)t * n_heads * head_dim;

		for (int i = 0; i < half; i++) {
			double a = (double)pos[t] * inv_freq[i];
			double c = cos(a), s = sin(a);

			for (int h = 0; h < n_heads; h++) {
				float *p = xt + (size_t)h * head_dim;
				double x0 = p[i], x1 = p[i + half];

				p[i] = (float)(x0 * c - x1 * s);
				p[i + half] = (float)(x0 * s + x1 * c);
			}
		}
	}
}
