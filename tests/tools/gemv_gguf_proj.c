/* The GPU GEMV's projection at Llama-3-8B's shape (issue 38's table): per
 * weight type (all GEMMs in it, the LM head too; and a Q4_K_M-like mix:
 * Q4_K, Q6_K attn_v and ffn_down in llama.cpp's use_more_bits layers, a
 * Q6_K LM head), the bytes one forward of M rows reads through the
 * planner's gemv_gguf and quant_a8 ops (gen/plan.c op_gemv: W, the int8
 * rows 1.25 M k, C 4 M n; quant_a8 3.25 M k per distinct input: 4 a layer
 * and the LM head's) at M = 1, 4, 8, 16, projected on an H200 at 4.3 TB/s
 * (inspect's model: bytes over bandwidth), and the same against the
 * kernel's integer work (an assumption, said below: dp4a and the other
 * integer ops at 64 a clock per SM, 132 SMs, 1.98 GHz): the weights' share
 * of the read rate, t_W / max(t_bytes, t_alu). A projection, not a
 * measurement: launch gaps, L2 hits on a8 and the tail blocks are not
 * modelled. Prints; asserts nothing. */
#include <stdio.h>

#include "core/wformat.h"

#define HBM 4.3e12                    /* B/s, H200 (the figure) */
#define INT_OPS (132.0 * 64 * 1.98e9) /* int32 / dp4a instructions a second, assumed */

enum { D = 4096, F = 14336, KV = 1024, V = 128256, L = 32 };

/* llama.cpp's use_more_bits (tests/util/kquant.c kq_more_bits) */
static int more_bits(int l)
{
	return l < L / 8 || l >= 7 * L / 8 || (l - L / 8) % 3 == 2;
}

/* the weight type of GEMM g (0 wq, 1 wk, 2 wv, 3 wo, 4 gate, 5 up, 6 down,
 * 7 LM head) in layer l, for type t (-1: the Q4_K_M-like mix) */
static int wtype(int t, int g, int l)
{
	if (t >= 0)
		return t;
	if (g == 7)
		return SW_WT_Q6_K;
	return (g == 2 || g == 6) && more_bits(l) ? SW_WT_Q6_K : SW_WT_Q4_K;
}

int main(void)
{
	static const int n[8] = {D, KV, KV, D, F, F, D, V}, k[8] = {D, D, D, D, D, D, F, D};
	static const int types[] = {SW_WT_Q4_0, SW_WT_Q4_1, SW_WT_Q5_0, SW_WT_Q8_0, SW_WT_Q4_K,
	                            SW_WT_Q6_K, -1};
	static const int ms[] = {1, 4, 8, 16};
	printf("Llama-3-8B GEMMs (32 layers + LM head 128256 x 4096), one forward of M rows; H200 "
	       "HBM %.1f TB/s, integer issue %.1f T/s (assumed)\n", HBM / 1e12, INT_OPS / 1e12);
	printf("%-8s %9s | %s\n", "type", "W GB", "M: bytes GB, t_bytes us, t_alu us, weights' share "
	       "of the read rate (bytes only / with the ALU bound)");
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
		const int t = types[ti];
		double w = 0, elems = 0;
		for (int l = 0; l < L; l++)
			for (int g = 0; g < 7; g++) {
				w += (double)sw_wformat_nbytes((uint32_t)wtype(t, g, l), (uint64_t)n[g] * k[g]);
				elems += (double)n[g] * k[g];
			}
		w += (double)sw_wformat_nbytes((uint32_t)wtype(t, 7, 0), (uint64_t)V * D);
		elems += (double)V * D;
		printf("%-8s %9.3f |", t >= 0 ? sw_wformat_get((uint32_t)t)->name : "Q4_K_M~", w / 1e9);
		for (size_t mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
			const double M = ms[mi];
			double act = 0;
			for (int g = 0; g < 8; g++) {
				const double reps = g == 7 ? 1 : L;
				act += reps * (1.25 * M * k[g] + 4.0 * M * n[g]);
				if (g == 0 || g == 3 || g == 4 || g == 6 || g == 7) /* quant_a8 per input */
					act += reps * 3.25 * M * k[g];
			}
			const double bytes = w + act, tb = bytes / HBM, tw = w / HBM;
			/* per weight element and A row: 8 dp4a + ~4 (scale products, fmaf, a8
			 * loads) a 32-element sub-block; per element: ~3 ops a word of 8 to
			 * unpack the quants, shared by the rows (Q5_0: 4 more a word of 4,
			 * the fifth bit's shift, mask, shift and or; other mixes' types
			 * counted as Q4's) */
			const double unpack = t == SW_WT_Q5_0 ? 3.0 / 8 + 1.0 : 3.0 / 8;
			const double ta = elems * (M * 12.0 / 32 + unpack) / INT_OPS;
			printf("  M %2.0f: %6.3f %7.1f %7.1f %3.0f%%/%3.0f%%", M, bytes / 1e9, tb * 1e6,
			       ta * 1e6, 100 * tw / tb, 100 * tw / (tb > ta ? tb : ta));
		}
		printf("\n");
	}
	return 0;
}
