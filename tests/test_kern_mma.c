/* The tensor-core vocabulary of the preludes alone (MMA_16816_F32_BF16/_F16,
 * LDMATRIX_X4/_TRANS): kernels written here as one source, built for the
 * emulator exactly as the templates are and compiled by NVRTC for sm_80 and
 * sm_90 (zero spills). Every lane's fragments are built on the host from the
 * PTX ISA layout formulas, written element by element as the ISA states them
 * ("Matrix Fragments for mma.m16n8k16 with floating point type", ldmatrix),
 * independently of the register-by-register formulation in prelude_emu.h:
 * probe matrices (identity B shows A, identity A shows B, zero A shows C)
 * must come back exactly; random bf16/fp16 matrices (wide exponents, fp16
 * subnormals) are checked bit for bit against the emulator's documented
 * order and against a double reference within a bound that holds for any
 * order; ldmatrix with scattered row addresses, then the two ways the
 * attention kernel feeds B (K rows via ldmatrix, V rows via ldmatrix.trans).
 * Misuse is reported: a divergent or partial warp (lanes at different
 * sites, missing lanes, or lanes that reach an mma after lane-dependent
 * branches with no SYNCWARP() between), a misaligned or
 * non-shared ldmatrix address. cp.async (CP_ASYNC_16/COMMIT/WAIT, the
 * attention kernel's K/V pipeline): copies and zero-fills land by groups,
 * visible to other threads after the wait and a SYNC(); in the emulator a
 * read before the wait sees the poison (copies land at the wait), issuing
 * into a buffer another thread reads in the same interval is a race, and a
 * thread that exits with copies outstanding is reported. */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/emu.h"
#include "core/fileio.h"
#include "formats/gguf.h"
#include "kern_util.h"
#include "gen/jit/nvrtc.h"
#include "gen/jit/emu_build.h"
#include "gen/render.h"

/* One source for both backends. mma_k: warp w of the grid multiplies its own
 * fragments a (32 lanes x 4 u32), b (x 2), c (x 4 f32) into d. ldm_k: a
 * 32 x 40 16-bit tile in shared memory (32 x 32 used, 8 of padding per row),
 * lane l gives row rows[l] at column cols[l]; x4 and x4.trans results out.
 * gemm_k: C (16 x 8) = A (16 x 32) B (32 x 8) from shared memory, A through
 * ldmatrix, B once from bt (8 x 32, n-major: the K tile of attention, plain
 * ldmatrix) into c0 and once from bk (32 x 8, k-major: the V tile,
 * ldmatrix.trans) into c1. */
static const char *SRC =
	"KERNEL(mma_k, (float *RESTRICT, d), (const uint32_t *RESTRICT, a),\n"
	"       (const uint32_t *RESTRICT, b), (const float *RESTRICT, c), (const int32_t *RESTRICT, f16))\n"
	"{\n"
	"	const size_t w = (size_t)BID_X * (BDIM_X / 32) + (size_t)WARP_ID, l = (size_t)LANE_ID;\n"
	"	uint32_t af[4], bf[2];\n"
	"	float cf[4], df[4];\n"
	"	UNROLL\n"
	"	for (int i = 0; i < 4; i++) {\n"
	"		af[i] = a[(w * 32 + l) * 4 + i];\n"
	"		cf[i] = c[(w * 32 + l) * 4 + i];\n"
	"	}\n"
	"	bf[0] = b[(w * 32 + l) * 2];\n"
	"	bf[1] = b[(w * 32 + l) * 2 + 1];\n"
	"	if (*f16)\n"
	"		MMA_16816_F32_F16(df, af, bf, cf);\n"
	"	else\n"
	"		MMA_16816_F32_BF16(df, af, bf, cf);\n"
	"	UNROLL\n"
	"	for (int i = 0; i < 4; i++)\n"
	"		d[(w * 32 + l) * 4 + i] = df[i];\n"
	"}\n"
	"\n"
	"KERNEL(ldm_k, (uint32_t *RESTRICT, out), (const uint16_t *RESTRICT, m),\n"
	"       (const int32_t *RESTRICT, rows), (const int32_t *RESTRICT, cols))\n"
	"{\n"
	"	SHARED(u32x4, sm, 32 * 40 / 8);\n"
	"	const uint16_t *s16 = (const uint16_t *)sm;\n"
	"	for (int i = (int)TID_X; i < 32 * 40 / 8; i += 32)\n"
	"		SST(sm, i, LD_U32X4(m + 8 * i));\n"
	"	SYNC();\n"
	"	const int l = LANE_ID;\n"
	"	uint32_t r[4], t[4];\n"
	"	LDMATRIX_X4(r, s16 + rows[l] * 40 + cols[l]);\n"
	"	LDMATRIX_X4_TRANS(t, s16 + rows[l] * 40 + cols[l]);\n"
	"	UNROLL\n"
	"	for (int i = 0; i < 4; i++) {\n"
	"		out[4 * l + i] = r[i];\n"
	"		out[128 + 4 * l + i] = t[i];\n"
	"	}\n"
	"}\n"
	"\n"
	"KERNEL(gemm_k, (float *RESTRICT, c0), (float *RESTRICT, c1), (const uint16_t *RESTRICT, a),\n"
	"       (const uint16_t *RESTRICT, bt), (const uint16_t *RESTRICT, bk), (const int32_t *RESTRICT, f16))\n"
	"{\n"
	"	SHARED(u32x4, sa, 16 * 40 / 8); /* 16 x 32, rows padded to 40 */\n"
	"	SHARED(u32x4, sbt, 8 * 40 / 8); /* 8 x 32, rows padded to 40 */\n"
	"	SHARED(u32x4, sbk, 32 * 16 / 8); /* 32 x 8, rows padded to 16 */\n"
	"	const int l = LANE_ID;\n"
	"	for (int i = l; i < 16 * 5; i += 32)\n"
	"		SST(sa, i, i % 5 < 4 ? LD_U32X4(a + 32 * (i / 5) + 8 * (i % 5)) : MAKE_U32X4(0u, 0u, 0u, 0u));\n"
	"	for (int i = l; i < 8 * 5; i += 32)\n"
	"		SST(sbt, i, i % 5 < 4 ? LD_U32X4(bt + 32 * (i / 5) + 8 * (i % 5)) : MAKE_U32X4(0u, 0u, 0u, 0u));\n"
	"	for (int i = l; i < 32 * 2; i += 32)\n"
	"		SST(sbk, i, i % 2 < 1 ? LD_U32X4(bk + 8 * (i / 2)) : MAKE_U32X4(0u, 0u, 0u, 0u));\n"
	"	SYNC();\n"
	"	const uint16_t *a16 = (const uint16_t *)sa, *t16 = (const uint16_t *)sbt, *k16 = (const uint16_t *)sbk;\n"
	"	float acc0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc1[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
	"	uint32_t bt4[4], bk4[4];\n"
	"	LDMATRIX_X4(bt4, t16 + (l & 7) * 40 + 8 * (l >> 3));\n"
	"	LDMATRIX_X4_TRANS(bk4, k16 + l * 16);\n"
	"	UNROLL\n"
	"	for (int kc = 0; kc < 2; kc++) {\n"
	"		uint32_t af[4];\n"
	"		LDMATRIX_X4(af, a16 + ((l & 7) + 8 * ((l >> 3) & 1)) * 40 + 16 * kc + 8 * (l >> 4));\n"
	"		if (*f16) {\n"
	"			MMA_16816_F32_F16(acc0, af, bt4 + 2 * kc, acc0);\n"
	"			MMA_16816_F32_F16(acc1, af, bk4 + 2 * kc, acc1);\n"
	"		} else {\n"
	"			MMA_16816_F32_BF16(acc0, af, bt4 + 2 * kc, acc0);\n"
	"			MMA_16816_F32_BF16(acc1, af, bk4 + 2 * kc, acc1);\n"
	"		}\n"
	"	}\n"
	"	UNROLL\n"
	"	for (int i = 0; i < 4; i++) {\n"
	"		c0[4 * l + i] = acc0[i];\n"
	"		c1[4 * l + i] = acc1[i];\n"
	"	}\n"
	"}\n"
	"\n"
	"KERNEL(cpa_k, (u32x4 *RESTRICT, out), (const uint16_t *RESTRICT, src))\n"
	"{\n"
	"	SHARED(u32x4, sm, 3 * 32);\n"
	"	const int l = LANE_ID;\n"
	"	CP_ASYNC_16(sm + l, src + 8 * l, 1);\n"
	"	CP_ASYNC_COMMIT();\n"
	"	CP_ASYNC_16(sm + 32 + l, src + 8 * (32 + l), !(l & 1)); /* odd lanes: zeros */\n"
	"	CP_ASYNC_COMMIT();\n"
	"	CP_ASYNC_16(sm + 64 + l, src + 8 * (64 + l), 1);\n"
	"	CP_ASYNC_COMMIT();\n"
	"	CP_ASYNC_WAIT(1); /* groups 0 and 1 of this thread landed */\n"
	"	SYNC();           /* ... and of every thread */\n"
	"	out[l] = SLD(sm, (l + 1) & 31);\n"
	"	out[32 + l] = SLD(sm, 32 + ((l + 1) & 31));\n"
	"	CP_ASYNC_WAIT(0);\n"
	"	SYNC();\n"
	"	out[64 + l] = SLD(sm, 64 + ((l + 5) & 31));\n"
	"}\n";

/* Misuse, for the emulator only: lanes 0-15 and 16-31 at different mma
 * sites; a 48-thread block (a 16-lane second warp); a misaligned and a
 * global ldmatrix row. */
static const char *BAD_SRC =
	"KERNEL(bad_div_k, (float *RESTRICT, d))\n"
	"{\n"
	"	uint32_t a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};\n"
	"	float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
	"	if (LANE_ID < 16)\n"
	"		MMA_16816_F32_BF16(c, a, b, c);\n"
	"	else\n"
	"		MMA_16816_F32_BF16(c, a, b, c);\n"
	"	d[TID_X] = c[0];\n"
	"}\n"
	"KERNEL(bad_branch_k, (float *RESTRICT, d))\n"
	"{\n"
	"	SHARED(float, sb, 64);\n"
	"	uint32_t a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};\n"
	"	float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
	"	SST(sb, TID_X, 1.0f);\n"
	"	if (LANE_ID < 16)\n"
	"		c[1] = SLD(sb, TID_X);\n"
	"	MMA_16816_F32_BF16(c, a, b, c);\n"
	"	d[TID_X] = c[0];\n"
	"}\n"
	"KERNEL(good_branch_k, (float *RESTRICT, d))\n"
	"{\n"
	"	SHARED(float, sb, 64);\n"
	"	uint32_t a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};\n"
	"	float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
	"	SST(sb, TID_X, 1.0f);\n"
	"	if (LANE_ID < 16)\n"
	"		c[1] = SLD(sb, TID_X);\n"
	"	SYNCWARP();\n"
	"	MMA_16816_F32_BF16(c, a, b, c);\n"
	"	d[TID_X] = c[0];\n"
	"}\n"
	"KERNEL(bad_shfl_partial_k, (float *RESTRICT, d))\n"
	"{\n"
	"	d[TID_X] = SHFL_XOR((float)TID_X, 1);\n"
	"}\n"
	"KERNEL(bad_partial_k, (float *RESTRICT, d))\n"
	"{\n"
	"	uint32_t a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};\n"
	"	float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
	"	MMA_16816_F32_BF16(c, a, b, c);\n"
	"	d[TID_X] = c[0];\n"
	"}\n"
	"KERNEL(bad_align_k, (uint32_t *RESTRICT, out), (const uint16_t *RESTRICT, m))\n"
	"{\n"
	"	SHARED(u32x4, sm, 8 * 16 / 8);\n"
	"	if (TID_X < 16)\n"
	"		SST(sm, TID_X, MAKE_U32X4(0u, 0u, 0u, 0u));\n"
	"	SYNC();\n"
	"	uint32_t r[4];\n"
	"	LDMATRIX_X4(r, (const uint16_t *)sm + (LANE_ID & 7) * 16 + (LANE_ID == 5 ? 4 : 0));\n"
	"	out[TID_X] = r[0];\n"
	"}\n"
	"KERNEL(bad_global_k, (uint32_t *RESTRICT, out), (const uint16_t *RESTRICT, m))\n"
	"{\n"
	"	uint32_t r[4];\n"
	"	LDMATRIX_X4(r, m + 8 * LANE_ID);\n"
	"	out[TID_X] = r[0];\n"
	"}\n"
	"KERNEL(cpa_nowait_k, (u32x4 *RESTRICT, out), (const uint16_t *RESTRICT, m))\n"
	"{\n"
	"	SHARED(u32x4, sm, 32);\n"
	"	CP_ASYNC_16(sm + LANE_ID, m + 8 * LANE_ID, 1);\n"
	"	CP_ASYNC_COMMIT();\n"
	"	SYNC(); /* no CP_ASYNC_WAIT: nothing has to have landed */\n"
	"	out[LANE_ID] = SLD(sm, (LANE_ID + 1) & 31);\n"
	"	SYNC(); /* the copies may land only now: after the reads */\n"
	"	CP_ASYNC_WAIT(0);\n"
	"}\n"
	"KERNEL(cpa_race_k, (u32x4 *RESTRICT, out), (const uint16_t *RESTRICT, m))\n"
	"{\n"
	"	SHARED(u32x4, sm, 32);\n"
	"	SST(sm, LANE_ID, MAKE_U32X4(0u, 0u, 0u, 0u));\n"
	"	SYNC();\n"
	"	out[LANE_ID] = SLD(sm, (LANE_ID + 1) & 31); /* lane l reads l + 1's ... */\n"
	"	CP_ASYNC_16(sm + LANE_ID, m + 8 * LANE_ID, 1); /* ... which l + 1 refills */\n"
	"	CP_ASYNC_COMMIT();\n"
	"	CP_ASYNC_WAIT(0);\n"
	"}\n"
	"KERNEL(cpa_exit_k, (u32x4 *RESTRICT, out), (const uint16_t *RESTRICT, m))\n"
	"{\n"
	"	SHARED(u32x4, sm, 32);\n"
	"	CP_ASYNC_16(sm + LANE_ID, m + 8 * LANE_ID, 1);\n"
	"	CP_ASYNC_COMMIT();\n"
	"	out[LANE_ID] = MAKE_U32X4(0u, 0u, 0u, 0u); /* exits, copies outstanding */\n"
	"}\n";

static void *load_module(const char *src, const char *key)
{
	char kdir[512], cache[512];
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	sw_err err = {0};
	void *h = NULL;
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	snprintf(cache, sizeof(cache), "%s/gen/emu", build);
	if (gen_emu_module_build(src, key, kdir, cache, &h, &err))
		fail_msg("%s", err.msg);
	return h; /* stays loaded for the test's life */
}

static const emu_kernel *sym(void *h, const char *name)
{
	char s[128];
	snprintf(s, sizeof(s), "%s_emu", name);
	const emu_kernel *k = dlsym(h, s);
	if (!k)
		fail_msg("no symbol %s", s);
	return k;
}

static uint16_t to16(int f16, float x)
{
	return f16 ? gguf_f32_to_f16(x) : gguf_f32_to_bf16(x);
}

static float from16(int f16, uint16_t h)
{
	return f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
}

/* ---- the PTX ISA layouts, as the ISA states them (element indices) ---- */

/* A: a_i, i = 0..7, two per register (a_2r low, a_2r+1 high):
 * row = groupID for 0 <= i < 2 || 4 <= i < 6, else groupID + 8;
 * col = threadID_in_group * 2 + (i & 1), + 8 for i >= 4. */
static void ptx_a(int lane, int i, int *row, int *col)
{
	const int gid = lane >> 2, tig = lane % 4;
	*row = (i < 2 || (i >= 4 && i < 6)) ? gid : gid + 8;
	*col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}

/* B: b_i, i = 0..3: row = threadID_in_group * 2 + (i & 1), + 8 for i >= 2;
 * col = groupID. */
static void ptx_b(int lane, int i, int *row, int *col)
{
	*row = (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
	*col = lane >> 2;
}

/* C/D: c_i, i = 0..3: row = groupID for i < 2, else groupID + 8;
 * col = threadID_in_group * 2 + (i & 1). */
static void ptx_c(int lane, int i, int *row, int *col)
{
	*row = i < 2 ? lane >> 2 : (lane >> 2) + 8;
	*col = (lane % 4) * 2 + (i & 1);
}

/* Fragments of one warp from A (16 x 16), B (16 x 8), C (16 x 8), 16-bit
 * codes for A and B. */
static void frag_pack(const uint16_t *A, const uint16_t *B, const float *C, uint32_t *fa,
                      uint32_t *fb, float *fc)
{
	for (int l = 0; l < 32; l++) {
		int r, c;
		for (int i = 0; i < 8; i++) {
			ptx_a(l, i, &r, &c);
			uint32_t v = A[r * 16 + c];
			if (i & 1)
				fa[l * 4 + i / 2] |= v << 16;
			else
				fa[l * 4 + i / 2] = v;
		}
		for (int i = 0; i < 4; i++) {
			ptx_b(l, i, &r, &c);
			uint32_t v = B[r * 8 + c];
			if (i & 1)
				fb[l * 2 + i / 2] |= v << 16;
			else
				fb[l * 2 + i / 2] = v;
		}
		for (int i = 0; i < 4; i++) {
			ptx_c(l, i, &r, &c);
			fc[l * 4 + i] = C[r * 8 + c];
		}
	}
}

/* D (16 x 8) back from the per-lane d fragments. */
static void frag_unpack(const float *fd, float *D)
{
	for (int l = 0; l < 32; l++)
		for (int i = 0; i < 4; i++) {
			int r, c;
			ptx_c(l, i, &r, &c);
			D[r * 8 + c] = fd[l * 4 + i];
		}
}

/* A bound that holds in any summation order with every fp32 addition off
 * by at most 2u relative (round to nearest gives u; the factor 2 admits
 * tensor cores that truncate): the 17 terms c + sum_k a_k b_k, each product
 * exact, give |d - exact| <= gamma'_16 (|c| + sum |a_k b_k|), gamma'_n =
 * n 2u / (1 - n 2u) (Higham 3.1 with 2u). */
static double gamma2(int n)
{
	return n * 2.0 * U32 / (1.0 - n * 2.0 * U32);
}

/* Random 16-bit values: sign, significand and exponent all random, over
 * 2^-e..2^e (fp16: including subnormals when e reaches below 2^-14). */
static uint16_t rnd16(int f16, int e)
{
	double x = (rnd() + 1.0) * 0.5 + 0.5; /* [0.5, 1.5) */
	int ex = (int)floor((rnd() + 1.0) * 0.5 * (2 * e + 1)) - e;
	double v = ldexp(x, ex) * (rnd() < 0 ? -1.0 : 1.0);
	return to16(f16, (float)v);
}

typedef struct mbufs {
	float *d, *c;
	uint32_t *a, *b;
	int32_t *f16;
} mbufs;

/* Runs mma_k on nw warps (2 per block) of packed fragments. */
static void run_mma(const emu_kernel *k, mbufs *m, int nw)
{
	void *args[] = {&m->d, &m->a, &m->b, &m->c, &m->f16};
	launch(k, d3((unsigned)(nw / 2), 1, 1), d3(64, 1, 1), args);
}

static void test_mma_layout_probes(void **state)
{
	(void)state;
	void *h = load_module(SRC, "mma_vocab");
	const emu_kernel *k = sym(h, "mma_k");
	for (int f16 = 0; f16 < 2; f16++) {
		mbufs m;
		const int nw = 4;
		m.d = emu_alloc(nw * 128 * sizeof(float), "d");
		m.c = emu_alloc(nw * 128 * sizeof(float), "c");
		m.a = emu_alloc(nw * 128 * sizeof(uint32_t), "a");
		m.b = emu_alloc(nw * 64 * sizeof(uint32_t), "b");
		m.f16 = emu_alloc(sizeof(int32_t), "f16");
		*m.f16 = f16;
		uint16_t A[4][256], B[4][128];
		float C[4][128], D[128];
		/* Probe values: small integers, distinct per element, exact in
		 * both dtypes (|v| <= 256), so every sum below is exact. */
		for (int p = 0; p < 4; p++) {
			for (int r = 0; r < 16; r++)
				for (int c = 0; c < 16; c++) {
					float av = (float)(r * 16 + c + 1) * (c % 2 ? -1.0f : 1.0f);
					/* warp 0: A probe, B = [I; 0]; warp 1: A probe, B = [0; I];
					 * warp 2: A = I, B probe; warp 3: A = 0, C probe */
					A[p][r * 16 + c] = to16(f16, p < 2 ? av / 2.0f : p == 2 ? (r == c) : 0.0f);
				}
			for (int r = 0; r < 16; r++)
				for (int c = 0; c < 8; c++) {
					float bv = (float)(r * 8 + c + 1) * (r % 3 ? 1.0f : -1.0f);
					B[p][r * 8 + c] = to16(f16, p == 0 ? (r == c) : p == 1 ? (r == c + 8)
					                                    : p == 2 ? bv : 0.0f);
					C[p][r * 8 + c] = p == 3 ? (float)(1000 + r * 8 + c) : 0.0f;
				}
			frag_pack(A[p], B[p], C[p], m.a + p * 128, m.b + p * 64, m.c + p * 128);
		}
		run_mma(k, &m, nw);
		for (int p = 0; p < 4; p++) {
			float want[128];
			char what[96];
			frag_unpack(m.d + p * 128, D);
			for (int r = 0; r < 16; r++)
				for (int c = 0; c < 8; c++)
					want[r * 8 + c] = p == 0 ? from16(f16, A[p][r * 16 + c])
					                  : p == 1 ? from16(f16, A[p][r * 16 + c + 8])
					                  : p == 2 ? from16(f16, B[p][r * 8 + c])
					                           : C[p][r * 8 + c];
			/* every probe value is nonzero and exact: bit equality is value
			 * equality here */
			snprintf(what, sizeof(what), "%s probe %d (D[r][c] is in lane (r %% 8) * 4 + c / 2)",
			         f16 ? "f16" : "bf16", p);
			kern_out o = {.name = "D", .type = KERN_F32, .got = D, .want = want, .n = 128,
			              .dims = {16, 8}};
			kern_expect(what, &o);
		}
		emu_free(m.d);
		emu_free(m.c);
		emu_free(m.a);
		emu_free(m.b);
		emu_free(m.f16);
	}
}

static void test_mma_random(void **state)
{
	(void)state;
	void *h = load_module(SRC, "mma_vocab");
	const emu_kernel *k = sym(h, "mma_k");
	const int nw = 64;
	rng_state = 0x3141592653589793ull;
	for (int f16 = 0; f16 < 2; f16++) {
		mbufs m;
		m.d = emu_alloc(nw * 128 * sizeof(float), "d");
		m.c = emu_alloc(nw * 128 * sizeof(float), "c");
		m.a = emu_alloc(nw * 128 * sizeof(uint32_t), "a");
		m.b = emu_alloc(nw * 64 * sizeof(uint32_t), "b");
		m.f16 = emu_alloc(sizeof(int32_t), "f16");
		*m.f16 = f16;
		uint16_t (*A)[256] = malloc(nw * sizeof(*A)), (*B)[128] = malloc(nw * sizeof(*B));
		float (*C)[128] = malloc(nw * sizeof(*C)), D[128];
		/* bf16: exponents +-20; fp16: +-7 for the products' range, with a
		 * quarter of the warps at 2^-16..2^-24 (subnormals) in A */
		for (int p = 0; p < nw; p++) {
			for (int i = 0; i < 256; i++)
				A[p][i] = f16 && p % 4 == 3 ? to16(1, (float)ldexp(rnd(), -14 - (i % 10)))
				                            : rnd16(f16, f16 ? 7 : 20);
			for (int i = 0; i < 128; i++) {
				B[p][i] = rnd16(f16, f16 ? 7 : 20);
				C[p][i] = p % 8 == 0 ? 0.0f : (float)(rnd() * ldexp(1.0, (int)(rnd() * 10)));
			}
			frag_pack(A[p], B[p], C[p], m.a + p * 128, m.b + p * 64, m.c + p * 128);
		}
		run_mma(k, &m, nw);
		double worst = 0.0;
		for (int p = 0; p < nw; p++) {
			float ord[128];
			double ex[128], bound[128], mag[128];
			char what[64];
			frag_unpack(m.d + p * 128, D);
			for (int r = 0; r < 16; r++)
				for (int c = 0; c < 8; c++) {
					const int i = r * 8 + c;
					ex[i] = C[p][i];
					mag[i] = fabs(ex[i]);
					ord[i] = C[p][i];
					for (int kk = 0; kk < 16; kk++) {
						const float x = from16(f16, A[p][r * 16 + kk]);
						const float y = from16(f16, B[p][kk * 8 + c]);
						ex[i] += (double)x * y;
						mag[i] += fabs((double)x * y);
						ord[i] = ord[i] + x * y; /* the documented order; x * y is exact */
					}
					bound[i] = gamma2(16) * mag[i];
					if (mag[i] > 0)
						worst = fmax(worst, fabs(D[i] - ex[i]) / mag[i]);
				}
			snprintf(what, sizeof(what), "%s warp %d", f16 ? "f16" : "bf16", p);
			const kern_out outs[] = {
				{.name = "D (the documented order)", .type = KERN_F32, .got = D, .want = ord,
				 .n = 128, .dims = {16, 8}},
				{.name = "D (any order, vs exact)", .type = KERN_F32, .got = D, .ref = ex,
				 .bound = bound, .n = 128, .dims = {16, 8}},
			};
			for (int i = 0; i < 2; i++)
				kern_expect(what, &outs[i]);
		}
		print_message("  %s: %d random mma, worst |d - exact| / sum|terms| = %.3g (bound %.3g)\n",
		              f16 ? "f16" : "bf16", nw, worst, gamma2(16));
		free(A);
		free(B);
		free(C);
		emu_free(m.d);
		emu_free(m.c);
		emu_free(m.a);
		emu_free(m.b);
		emu_free(m.f16);
	}
}

/* ldmatrix with scattered rows: lane l points at row rows[l] (a
 * permutation) and column cols[l] (per matrix, a multiple of 8). */
static void test_ldmatrix(void **state)
{
	(void)state;
	void *h = load_module(SRC, "mma_vocab");
	const emu_kernel *k = sym(h, "ldm_k");
	uint32_t *out = emu_alloc(256 * sizeof(uint32_t), "out");
	uint16_t *mm = emu_alloc(32 * 40 * sizeof(uint16_t), "m");
	int32_t *rows = emu_alloc(32 * sizeof(int32_t), "rows");
	int32_t *cols = emu_alloc(32 * sizeof(int32_t), "cols");
	for (int i = 0; i < 32 * 40; i++)
		mm[i] = (uint16_t)(0x1000 + i); /* element (r, c) = 0x1000 + 40 r + c */
	for (int l = 0; l < 32; l++) {
		rows[l] = (l * 13 + 7) % 32;
		cols[l] = 8 * ((l / 8 + l % 3) % 4);
	}
	void *args[] = {&out, &mm, &rows, &cols};
	uint32_t want[256];
	for (int l = 0; l < 32; l++)
		for (int i = 0; i < 4; i++) {
			/* matrix i: rows from lanes 8i..8i+7; thread l receives (row
			 * l/4, cols 2(l%4), +1), or with .trans (rows 2(l%4), +1, col l/4) */
			const int g = l / 4, q = l % 4;
			const int rr = rows[8 * i + g], cc = cols[8 * i + g];
			want[4 * l + i] = (uint32_t)mm[rr * 40 + cc + 2 * q] |
			                  (uint32_t)mm[rr * 40 + cc + 2 * q + 1] << 16;
			const int r0 = rows[8 * i + 2 * q], c0 = cols[8 * i + 2 * q];
			const int r1 = rows[8 * i + 2 * q + 1], c1 = cols[8 * i + 2 * q + 1];
			want[128 + 4 * l + i] = (uint32_t)mm[r0 * 40 + c0 + g] |
			                        (uint32_t)mm[r1 * 40 + c1 + g] << 16;
		}
	const kern_out outs[] = { /* [lane][register] */
		{.name = "ldmatrix", .type = KERN_U32, .got = out, .want = want, .n = 128, .dims = {32, 4}},
		{.name = "ldmatrix.trans", .type = KERN_U32, .got = out + 128, .want = want + 128,
		 .n = 128, .dims = {32, 4}},
	};
	kern_launch_expect("ldmatrix x4", k, d3(1, 1, 1), d3(32, 1, 1), args, outs, 2);
	emu_free(out);
	emu_free(mm);
	emu_free(rows);
	emu_free(cols);
}

/* cp.async: three groups per thread, the middle one zero-filled on odd
 * lanes; groups 0 and 1 read (another lane's) after WAIT(1) + SYNC, group
 * 2 after WAIT(0) + SYNC. */
static void test_cp_async(void **state)
{
	(void)state;
	void *h = load_module(SRC, "mma_vocab");
	const emu_kernel *k = sym(h, "cpa_k");
	uint32_t *out = emu_alloc(96 * 16, "out");
	uint16_t *src = emu_alloc(96 * 16, "src");
	for (int i = 0; i < 96 * 8; i++)
		src[i] = (uint16_t)(0x3000 + 7 * i);
	void *args[] = {&out, &src};
	uint32_t want[96 * 4] = {0};
	for (int l = 0; l < 32; l++) {
		const int v[3] = {(l + 1) & 31, 32 + ((l + 1) & 31), 64 + ((l + 5) & 31)};
		for (int gi = 0; gi < 3; gi++)
			if (gi != 1 || !(v[1] & 1))
				memcpy(want + 4 * (32 * gi + l), src + 8 * v[gi], 16);
	}
	kern_out o = {.name = "out", .type = KERN_U32, .got = out, .want = want, .n = 96 * 4,
	              .dims = {3, 32, 4}}; /* [group][lane][word] */
	kern_launch_expect("cp.async", k, d3(1, 1, 1), d3(32, 1, 1), args, &o, 1);
	emu_free(out);
	emu_free(src);
}

/* The attention kernel's two ways of feeding B, on one 16 x 32 x 8 GEMM. */
static void test_gemm_both_b(void **state)
{
	(void)state;
	void *h = load_module(SRC, "mma_vocab");
	const emu_kernel *k = sym(h, "gemm_k");
	rng_state = 0x2718281828459045ull;
	for (int f16 = 0; f16 < 2; f16++) {
		float *c0 = emu_alloc(128 * sizeof(float), "c0"), *c1 = emu_alloc(128 * sizeof(float), "c1");
		uint16_t *a = emu_alloc(16 * 32 * 2, "a"), *bt = emu_alloc(8 * 32 * 2, "bt");
		uint16_t *bk = emu_alloc(32 * 8 * 2, "bk");
		int32_t *fl = emu_alloc(sizeof(int32_t), "f16");
		*fl = f16;
		for (int i = 0; i < 16 * 32; i++)
			a[i] = to16(f16, (float)(3.0 * rnd()));
		for (int kk = 0; kk < 32; kk++)
			for (int n = 0; n < 8; n++)
				bt[n * 32 + kk] = bk[kk * 8 + n] = to16(f16, (float)(3.0 * rnd()));
		void *args[] = {&c0, &c1, &a, &bt, &bk, &fl};
		launch(k, d3(1, 1, 1), d3(32, 1, 1), args);
		float D0[128], D1[128];
		frag_unpack(c0, D0);
		frag_unpack(c1, D1);
		double ex[128], bound[128];
		for (int r = 0; r < 16; r++)
			for (int n = 0; n < 8; n++) {
				double mag = 0.0;
				ex[r * 8 + n] = 0.0;
				for (int kk = 0; kk < 32; kk++) {
					double t = (double)from16(f16, a[r * 32 + kk]) * from16(f16, bk[kk * 8 + n]);
					ex[r * 8 + n] += t;
					mag += fabs(t);
				}
				bound[r * 8 + n] = gamma2(32) * mag;
			}
		const kern_out outs[] = {
			{.name = "C (ldmatrix B)", .type = KERN_F32, .got = D0, .ref = ex, .bound = bound,
			 .n = 128, .dims = {16, 8}},
			{.name = "C (ldmatrix.trans B)", .type = KERN_F32, .got = D1, .ref = ex,
			 .bound = bound, .n = 128, .dims = {16, 8}},
			/* same products, same order: the two feeds agree bit for bit */
			{.name = "C (ldmatrix.trans B) vs C (ldmatrix B)", .type = KERN_F32, .got = D1,
			 .want = D0, .n = 128, .dims = {16, 8}},
		};
		for (int i = 0; i < 3; i++)
			kern_expect(f16 ? "f16 gemm" : "bf16 gemm", &outs[i]);
		emu_free(c0);
		emu_free(c1);
		emu_free(a);
		emu_free(bt);
		emu_free(bk);
		emu_free(fl);
	}
}

static void expect_fail(const emu_kernel *k, unsigned threads, void **args, int code,
                        const char *needle)
{
	emu_report rep;
	int rc = emu_launch(k, d3(1, 1, 1), d3(threads, 1, 1), 0, args, &rep);
	if (rc != code || !strstr(rep.msg, needle))
		fail_msg("%s: expected %d with '%s', got %d: %s", k->name, code, needle, rc, rep.msg);
	print_message("  reported as expected: %s\n", rep.msg);
}

static void test_mma_misuse(void **state)
{
	(void)state;
	void *h = load_module(BAD_SRC, "mma_vocab_bad");
	float *d = emu_alloc(64 * sizeof(float), "d");
	uint32_t *out = emu_alloc(64 * sizeof(uint32_t), "out");
	uint16_t *m = emu_alloc(32 * 8 * 2, "m");
	void *a1[] = {&d}, *a2[] = {&out, &m};
	expect_fail(sym(h, "bad_div_k"), 32, a1, EMU_ESHFL, "warp divergence");
	expect_fail(sym(h, "bad_partial_k"), 48, a1, EMU_ESHFL, "needs all 32");
	/* lanes reaching an mma along different paths (a lane-dependent branch
	 * with a shared access): flagged; with SYNCWARP() before it: fine */
	expect_fail(sym(h, "bad_branch_k"), 64, a1, EMU_ESHFL, "partial warp at the mma/ldmatrix");
	launch(sym(h, "good_branch_k"), d3(1, 1, 1), d3(64, 1, 1), a1);
	/* a full-mask shuffle in a warp of 16 lanes */
	expect_fail(sym(h, "bad_shfl_partial_k"), 48, a1, EMU_ESHFL, "warp shuffle");
	expect_fail(sym(h, "bad_align_k"), 32, a2, EMU_EALIGN, "not 16-byte aligned");
	expect_fail(sym(h, "bad_global_k"), 32, a2, EMU_ESHARED, "not in shared memory");
	/* cp.async: a read before the wait sees the block's poison, not the copy */
	uint32_t *o4 = emu_alloc(32 * 16, "out4");
	uint16_t *m4 = emu_alloc(32 * 16, "m4");
	memset(m4, 0, 32 * 16);
	void *a3[] = {&o4, &m4};
	launch(sym(h, "cpa_nowait_k"), d3(1, 1, 1), d3(32, 1, 1), a3);
	for (int i = 0; i < 32 * 4; i++)
		assert_int_equal(o4[i], 0xffffffffu);
	expect_fail(sym(h, "cpa_race_k"), 32, a3, EMU_ERACE, "no SYNC() between");
	{
		emu_report rep;
		int rc = emu_launch(sym(h, "cpa_exit_k"), d3(2, 1, 1), d3(32, 1, 1), 0, a3, &rep);
		if (rc != EMU_EINVAL || !strstr(rep.msg, "never completed"))
			fail_msg("cpa_exit_k: expected EINVAL 'never completed', got %d: %s", rc, rep.msg);
		print_message("  reported as expected: %s\n", rep.msg);
	}
	emu_free(o4);
	emu_free(m4);
	emu_free(d);
	emu_free(out);
	emu_free(m);
}

static void test_mma_nvrtc(void **state)
{
	static const char *archs[] = {"sm_80", "sm_90"};
	sw_err err = {0};
	(void)state;
	gen_nvrtc *nv = nvrtc_or_skip("test_kern_mma");
	char *prelude = load_prelude_cuda();
	for (int a = 0; a < 2; a++) {
		gen_kernel_res res[4];
		int n = 0;
		char *log = NULL;
		if (gen_nvrtc_compile(nv, prelude, SRC, "mma_vocab", archs[a], NULL, NULL, res, 4, &n,
		                      &log, &err))
			fail_msg("%s", err.msg);
		/* the inline PTX reached ptxas as the instructions named */
		assert_int_equal(n, 4);
		for (int i = 0; i < n; i++) {
			print_message("  %-5s %-10s %3d regs %4d B stack %5d B smem, spills %d/%d\n",
			              archs[a], res[i].name, res[i].regs, res[i].stack, res[i].smem,
			              res[i].spill_stores, res[i].spill_loads);
			if (res[i].spill_stores || res[i].spill_loads || res[i].stack)
				fail_msg("%s %s: spills %d/%d, stack %d", res[i].name, archs[a],
				         res[i].spill_stores, res[i].spill_loads, res[i].stack);
		}
		free(log);
	}
	free(prelude);
	gen_nvrtc_close(nv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mma_layout_probes),
		cmocka_unit_test(test_mma_random),
		cmocka_unit_test(test_ldmatrix),
		cmocka_unit_test(test_gemm_both_b),
		cmocka_unit_test(test_cp_async),
		cmocka_unit_test(test_mma_misuse),
		cmocka_unit_test(test_mma_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
