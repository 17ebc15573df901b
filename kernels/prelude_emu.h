/* Device vocabulary for the SIMT emulator (kernels/emu.c): the same kernel
 * source that prelude_cuda.h compiles for NVRTC, compiled by the C compiler
 * and run with each CUDA thread a fiber. Every name here has a twin in
 * prelude_cuda.h with the same meaning; a template may use nothing else
 * (plus C11/C++ common arithmetic and the float math functions).
 * Shared memory goes through SHARED/DYN_SHARED and its accesses through
 * SLD/SST (plain loads/stores on the GPU), which is how the emulator sees
 * races and uninitialised reads. What both preludes write alike is
 * prelude_common.h, included below. Not for host code. */
#ifndef SW_PRELUDE_EMU_H
#define SW_PRELUDE_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "emu.h"
#include "half.h"

#define SW_EMU 1
/* The architecture whose code path the emulator runs (prelude_cuda.h:
 * __CUDA_ARCH__): sm_90's; a test may #undef it and define 800 in the
 * source to run sm_80's. */
#define SW_ARCH 900

/* The emulator context of this translation unit; KERNEL's descriptor binds
 * it at launch, so a dlopen'ed kernel module needs no host symbols. */
static emu_ctx *emu__ctx;
static __attribute__((unused)) void emu__bind(emu_ctx *c)
{
	emu__ctx = c;
}

/* ---- parameter lists: KERNEL(name, (type, name), ...); SW_PARAMS and
 * SW_NARGS are prelude_common.h's ---- */
#define SW_UNPACK(A, ...) SW_CAT(SW_U_, SW_NARGS(__VA_ARGS__))(A, __VA_ARGS__)
#define SW_ARG(A, i, p) (*(SW_TYPE p *)(A)[i])
#define SW_U_1(A, p0) SW_ARG(A, 0, p0)
#define SW_U_2(A, p0, p1) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1)
#define SW_U_3(A, p0, p1, p2) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2)
#define SW_U_4(A, p0, p1, p2, p3) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3)
#define SW_U_5(A, p0, p1, p2, p3, p4) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4)
#define SW_U_6(A, p0, p1, p2, p3, p4, p5) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5)
#define SW_U_7(A, p0, p1, p2, p3, p4, p5, p6) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5), SW_ARG(A, 6, p6)
#define SW_U_8(A, p0, p1, p2, p3, p4, p5, p6, p7) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5), SW_ARG(A, 6, p6), SW_ARG(A, 7, p7)
#define SW_U_9(A, p0, p1, p2, p3, p4, p5, p6, p7, p8) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5), SW_ARG(A, 6, p6), SW_ARG(A, 7, p7), SW_ARG(A, 8, p8)
#define SW_U_10(A, p0, p1, p2, p3, p4, p5, p6, p7, p8, p9) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5), SW_ARG(A, 6, p6), SW_ARG(A, 7, p7), SW_ARG(A, 8, p8), SW_ARG(A, 9, p9)
#define SW_U_11(A, p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5), SW_ARG(A, 6, p6), SW_ARG(A, 7, p7), SW_ARG(A, 8, p8), SW_ARG(A, 9, p9), SW_ARG(A, 10, p10)
#define SW_U_12(A, p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11) SW_ARG(A, 0, p0), SW_ARG(A, 1, p1), SW_ARG(A, 2, p2), SW_ARG(A, 3, p3), SW_ARG(A, 4, p4), SW_ARG(A, 5, p5), SW_ARG(A, 6, p6), SW_ARG(A, 7, p7), SW_ARG(A, 8, p8), SW_ARG(A, 9, p9), SW_ARG(A, 10, p10), SW_ARG(A, 11, p11)

/* KERNEL(name, (T0, a0), (T1, a1), ...) { body }: the kernel function plus
 * `const emu_kernel name_emu`, whose trampoline takes void **args like
 * cuLaunchKernel. KERNEL_LB adds __launch_bounds__(max_threads) on the GPU. */
#define KERNEL(name, ...)                                                              \
	static void name(SW_PARAMS(__VA_ARGS__));                                      \
	static void name##_emu_tramp(void **emu__a)                                    \
	{                                                                              \
		name(SW_UNPACK(emu__a, __VA_ARGS__));                                  \
	}                                                                              \
	const emu_kernel name##_emu = {#name, name##_emu_tramp, emu__bind,             \
	                               SW_NARGS(__VA_ARGS__)};                        \
	static void name(SW_PARAMS(__VA_ARGS__))
#define KERNEL_LB(max_threads, name, ...) KERNEL(name, __VA_ARGS__)
#define DEV static inline __attribute__((unused))
#define RESTRICT __restrict__
#define UNROLL 
#define NO_UNROLL 

/* ---- thread geometry (TID_LINEAR, LANE_ID, WARP_ID: prelude_common.h) ---- */
#define TID_X (emu__ctx->tid.x)
#define TID_Y (emu__ctx->tid.y)
#define TID_Z (emu__ctx->tid.z)
#define BID_X (emu__ctx->bid.x)
#define BID_Y (emu__ctx->bid.y)
#define BID_Z (emu__ctx->bid.z)
#define BDIM_X (emu__ctx->bdim.x)
#define BDIM_Y (emu__ctx->bdim.y)
#define BDIM_Z (emu__ctx->bdim.z)
#define GDIM_X (emu__ctx->gdim.x)
#define GDIM_Y (emu__ctx->gdim.y)
#define GDIM_Z (emu__ctx->gdim.z)

/* ---- block barrier ---- */
#define SYNC() emu__ctx->sync(__FILE__, __LINE__)

/* ---- shared memory ---- */
/* SHARED(T, name, n): block-wide array of n T (16-byte aligned). */
#define SHARED(T, name, n)                                                             \
	static const char name##_emu_site;                                             \
	T *name = (T *)emu__ctx->shared(&name##_emu_site, #name, sizeof(T) * (size_t)(n))
/* DYN_SHARED(T, name): the launch's dynamic shared memory as T *. */
#define DYN_SHARED(T, name) T *name = (T *)emu__ctx->dyn_shared()
/* Checked shared loads/stores: SLD(a, i) is a[i], SST(a, i, v) is a[i] = v. */
#define SLD(a, i)                                                                      \
	(*(__typeof__(&(a)[0]))emu__ctx->sh_access((void *)&(a)[i], sizeof((a)[0]),       \
	                                           EMU_SH_READ, __FILE__, __LINE__))
#define SST(a, i, v)                                                                   \
	(*(__typeof__(&(a)[0]))emu__ctx->sh_access((void *)&(a)[i], sizeof((a)[0]),       \
	                                           EMU_SH_WRITE, __FILE__, __LINE__) = (v))

/* ---- warp shuffles (full mask) ---- */
DEV uint64_t emu__shfl(uint64_t v, int kind, int arg, const char *f, int l)
{
	return emu__ctx->shfl(v, kind, arg, f, l);
}
DEV float emu__shfl_f32(float v, int kind, int arg, const char *f, int l)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	u = (uint32_t)emu__shfl(u, kind, arg, f, l);
	memcpy(&v, &u, 4);
	return v;
}
DEV int32_t emu__shfl_i32(int32_t v, int kind, int arg, const char *f, int l)
{
	return (int32_t)(uint32_t)emu__shfl((uint32_t)v, kind, arg, f, l);
}
DEV uint32_t emu__shfl_u32(uint32_t v, int kind, int arg, const char *f, int l)
{
	return (uint32_t)emu__shfl(v, kind, arg, f, l);
}
#define EMU__SHFL(v, kind, arg)                                                        \
	_Generic((v), float: emu__shfl_f32, int32_t: emu__shfl_i32, uint32_t: emu__shfl_u32)( \
		(v), kind, (int)(arg), __FILE__, __LINE__)
#define SHFL_XOR(v, m) EMU__SHFL(v, EMU_SHFL_XOR, m)
#define SHFL_DOWN(v, d) EMU__SHFL(v, EMU_SHFL_DOWN, d)
#define SHFL_UP(v, d) EMU__SHFL(v, EMU_SHFL_UP, d)
#define SHFL_IDX(v, src) EMU__SHFL(v, EMU_SHFL_IDX, src)
/* __syncwarp(): the warp's 32 lanes meet (a shuffle that moves nothing), so
 * the warp is converged after it; the emulator flags an mma/ldmatrix that
 * lanes reach along different paths since the warp last converged */
#define SYNCWARP() ((void)emu__shfl(0u, EMU_SHFL_IDX, 0, __FILE__, __LINE__))
/* set bits of a 64-bit word (__popcll) */
#define POPC64(x) __builtin_popcountll((unsigned long long)(x))

/* ---- atomics (fibers never interleave inside one, so plain RMW; the
 * shared-memory tracker sees them as atomic, not as racing accesses) ---- */
#define EMU__AT(p) ((__typeof__(p))emu__ctx->sh_access((void *)(p), sizeof(*(p)), EMU_SH_ATOMIC, \
                                                       __FILE__, __LINE__))
DEV float emu__atomic_add_f32(float *p, float v) { float o = *p; *p = o + v; return o; }
DEV int32_t emu__atomic_add_i32(int32_t *p, int32_t v) { int32_t o = *p; *p = (int32_t)((uint32_t)o + (uint32_t)v); return o; }
DEV uint32_t emu__atomic_add_u32(uint32_t *p, uint32_t v) { uint32_t o = *p; *p = o + v; return o; }
DEV int32_t emu__atomic_max_i32(int32_t *p, int32_t v) { int32_t o = *p; if (v > o) *p = v; return o; }
DEV uint32_t emu__atomic_max_u32(uint32_t *p, uint32_t v) { uint32_t o = *p; if (v > o) *p = v; return o; }
DEV int32_t emu__atomic_min_i32(int32_t *p, int32_t v) { int32_t o = *p; if (v < o) *p = v; return o; }
DEV uint32_t emu__atomic_cas_u32(uint32_t *p, uint32_t cmp, uint32_t v) { uint32_t o = *p; if (o == cmp) *p = v; return o; }
DEV uint32_t emu__atomic_exch_u32(uint32_t *p, uint32_t v) { uint32_t o = *p; *p = v; return o; }
#define ATOMIC_ADD_F32(p, v) emu__atomic_add_f32(EMU__AT(p), (v))
#define ATOMIC_ADD_I32(p, v) emu__atomic_add_i32(EMU__AT(p), (v))
#define ATOMIC_ADD_U32(p, v) emu__atomic_add_u32(EMU__AT(p), (v))
#define ATOMIC_MAX_I32(p, v) emu__atomic_max_i32(EMU__AT(p), (v))
#define ATOMIC_MAX_U32(p, v) emu__atomic_max_u32(EMU__AT(p), (v))
#define ATOMIC_MIN_I32(p, v) emu__atomic_min_i32(EMU__AT(p), (v))
#define ATOMIC_CAS_U32(p, c, v) emu__atomic_cas_u32(EMU__AT(p), (c), (v))
#define ATOMIC_EXCH_U32(p, v) emu__atomic_exch_u32(EMU__AT(p), (v))
/* WAIT_GE_I32(p, v): blocks run one at a time in index order, so a
 * counter that is not yet >= v never will be: reported as a deadlock
 * (prelude_cuda.h spins). */
#define WAIT_GE_I32(p, v)                                                              \
	((void)(*EMU__AT(p) >= (int32_t)(v) ||                                         \
	        ((emu__ctx->fail)(EMU_EDEADLOCK, __FILE__, __LINE__,                   \
	                          "WAIT_GE_I32: a counter no earlier block raised"), 0)))

/* ---- bit casts and bf16/fp16: kernels/half.h's round-to-nearest-even
 * conversions (the host's), plus what cvt.rn does with a NaN: the
 * canonical 0x7fff (as __float2bfloat16_rn / __float2half_rn) where the
 * host keeps a quiet NaN with its sign and payload ---- */
DEV uint32_t F32_BITS(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
DEV float BITS_F32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
DEV float BF16_TO_F32(uint16_t h) { return sw_bf16_to_f32(h); }
DEV uint16_t F32_TO_BF16(float f)
{
	return (F32_BITS(f) & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : sw_f32_to_bf16(f);
}
DEV float F16_TO_F32(uint16_t h) { return sw_f16_to_f32(h); }
DEV uint16_t F32_TO_F16(float f)
{
	return (F32_BITS(f) & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : sw_f32_to_f16(f);
}

/* ---- 16-byte and 8-byte vectors (alignment checked, as the GPU faults) ---- */
typedef struct f32x4 { float x, y, z, w; } __attribute__((aligned(16))) f32x4;
typedef struct f32x2 { float x, y; } __attribute__((aligned(8))) f32x2;
typedef struct u32x4 { uint32_t x, y, z, w; } __attribute__((aligned(16))) u32x4;
typedef struct u32x2 { uint32_t x, y; } __attribute__((aligned(8))) u32x2;
DEV const void *emu__aligned(const void *p, size_t a, const char *f, int l)
{
	if ((uintptr_t)p & (a - 1))
		emu__ctx->align_fail(p, a, f, l);
	return p;
}
#define LD_F32X4(p) (*(const f32x4 *)emu__aligned((p), 16, __FILE__, __LINE__))
#define LD_F32X2(p) (*(const f32x2 *)emu__aligned((p), 8, __FILE__, __LINE__))
#define LD_U32X4(p) (*(const u32x4 *)emu__aligned((p), 16, __FILE__, __LINE__))
#define LD_U32X2(p) (*(const u32x2 *)emu__aligned((p), 8, __FILE__, __LINE__))
#define ST_F32X4(p, v) (*(f32x4 *)emu__aligned((p), 16, __FILE__, __LINE__) = (v))
#define ST_F32X2(p, v) (*(f32x2 *)emu__aligned((p), 8, __FILE__, __LINE__) = (v))
#define ST_U32X4(p, v) (*(u32x4 *)emu__aligned((p), 16, __FILE__, __LINE__) = (v))
#define ST_U32X2(p, v) (*(u32x2 *)emu__aligned((p), 8, __FILE__, __LINE__) = (v))
DEV f32x4 MAKE_F32X4(float x, float y, float z, float w) { f32x4 r = {x, y, z, w}; return r; }
DEV f32x2 MAKE_F32X2(float x, float y) { f32x2 r = {x, y}; return r; }
DEV u32x4 MAKE_U32X4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { u32x4 r = {x, y, z, w}; return r; }
DEV u32x2 MAKE_U32X2(uint32_t x, uint32_t y) { u32x2 r = {x, y}; return r; }

/* ---- 8-bit integer dot products: dp4a.s32.s32 (__dp4a(int, int, int)):
 * c + sum over the four bytes j of (int8)a_j (int8)b_j, exact (|sum| <
 * 2^16), wrapping in int32 as the instruction does ---- */
DEV int32_t DP4A_S8(int32_t a, int32_t b, int32_t c)
{
	int32_t s = 0;
	for (int j = 0; j < 4; j++)
		s += (int32_t)(int8_t)(uint8_t)((uint32_t)a >> (8 * j)) *
		     (int32_t)(int8_t)(uint8_t)((uint32_t)b >> (8 * j));
	return (int32_t)((uint32_t)c + (uint32_t)s);
}

/* ---- math ---- */
#define SW_INF INFINITY
#define SINCOSF(a, s, c) (*(s) = sinf(a), *(c) = cosf(a))
/* Device-side trap: the emulator reports it with the site. */
#define DEV_TRAP(msg) (emu__ctx->fail)(EMU_EINVAL, __FILE__, __LINE__, (msg))

/* ---- parameter-list macros, lane/warp ids, warp and block reductions:
 * written once for both backends ---- */
#include "prelude_common.h"

/* ---- tensor-core fragments: mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}
 * and ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16, warp-collective
 * (every lane of a full warp, converged; here a warp gather, emu.h).
 * Lane l: g = l >> 2, q = l & 3; 16-bit pairs pack the lower column (or
 * row) in the low half. The PTX ISA fragment layouts ("Matrix Fragments for
 * mma.m16n8k16 with floating point type"):
 *   A (16x16, row major), uint32_t a[4]: a[0] = A[g][2q..2q+1],
 *     a[1] = A[g+8][2q..], a[2] = A[g][2q+8..], a[3] = A[g+8][2q+8..]
 *   B (16x8, "col": k down, n across), uint32_t b[2]: b[0] = B[2q..2q+1][g],
 *     b[1] = B[2q+8..2q+9][g]
 *   C, D (16x8 fp32), float c[4]: c[0] = C[g][2q], c[1] = C[g][2q+1],
 *     c[2] = C[g+8][2q], c[3] = C[g+8][2q+1]
 * MMA_16816_F32_BF16(d, a, b, c) / _F16: d = c + A B; d may be c. Every
 * product of two 16-bit values is exact in fp32 (8x8 or 11x11 significand
 * bits, exponents in range), so only the additions round; here, in this
 * documented order, each rounded to nearest in fp32:
 *   d[i] = (((c[i] + p_0) + p_1) + ... + p_15),  p_k = A[row][k] * B[k][col].
 * The GPU's order and rounding inside the tensor core are unspecified (not
 * even round-to-nearest on every part), so a test of a kernel that uses mma
 * derives its bound for ANY order with each addition's relative error up to
 * 2u (u = 2^-24), not this order's exact result.
 * LDMATRIX_X4(r, row) / _TRANS: lanes 8i..8i+7 give the 16-byte aligned
 * shared addresses of rows 0..7 of 8x8 16-bit matrix i; r[i] receives
 * M_i[g][2q..2q+1], or with _TRANS M_i[2q][g] (low) and M_i[2q+1][g]. ---- */
typedef struct emu__mma_in {
	uint32_t a[4], b[2];
	float c[4];
} emu__mma_in;
DEV float emu__h16(uint32_t w, int hi, int f16)
{
	const uint16_t h = (uint16_t)(hi ? w >> 16 : w & 0xffffu);
	return f16 ? F16_TO_F32(h) : BF16_TO_F32(h);
}
DEV void emu__mma16816(float *d, const uint32_t *a, const uint32_t *b, const float *c, int f16,
                       const char *f, int l)
{
	emu__mma_in in;
	memcpy(in.a, a, sizeof(in.a));
	memcpy(in.b, b, sizeof(in.b));
	memcpy(in.c, c, sizeof(in.c));
	const emu__mma_in *all = (const emu__mma_in *)emu__ctx->gather(&in, sizeof(in), f, l);
	const int g = LANE_ID >> 2, q = LANE_ID & 3;
	float ar[2][16], bc[2][16], r[4];
	for (int h = 0; h < 2; h++) /* rows g + 8h of A, columns 2q + h of B */
		for (int k = 0; k < 16; k++) {
			ar[h][k] = emu__h16(all[4 * g + (k & 7) / 2].a[h + 2 * (k >> 3)], k & 1, f16);
			bc[h][k] = emu__h16(all[4 * (2 * q + h) + (k & 7) / 2].b[k >> 3], k & 1, f16);
		}
	for (int i = 0; i < 4; i++) {
		float acc = in.c[i];
		for (int k = 0; k < 16; k++) {
			const float p = ar[i >> 1][k] * bc[i & 1][k]; /* exact */
			acc = acc + p;
		}
		r[i] = acc;
	}
	memcpy(d, r, sizeof(r));
}
#define MMA_16816_F32_BF16(d, a, b, c) emu__mma16816((d), (a), (b), (c), 0, __FILE__, __LINE__)
#define MMA_16816_F32_F16(d, a, b, c) emu__mma16816((d), (a), (b), (c), 1, __FILE__, __LINE__)
DEV uint16_t emu__sld16(const void *p, const char *f, int l)
{
	uint16_t v;
	memcpy(&v, emu__ctx->sh_access((void *)p, 2, EMU_SH_READ, f, l), 2);
	return v;
}
DEV void emu__ldmatrix_x4(uint32_t *r, const void *row, int trans, const char *f, int l)
{
	emu__aligned(row, 16, f, l);
	const unsigned char *const *all =
		(const unsigned char *const *)emu__ctx->gather(&row, sizeof(row), f, l);
	const int g = LANE_ID >> 2, q = LANE_ID & 3;
	for (int i = 0; i < 4; i++) {
		uint32_t lo, hi;
		if (trans) {
			lo = emu__sld16(all[8 * i + 2 * q] + 2 * g, f, l);
			hi = emu__sld16(all[8 * i + 2 * q + 1] + 2 * g, f, l);
		} else {
			lo = emu__sld16(all[8 * i + g] + 4 * q, f, l);
			hi = emu__sld16(all[8 * i + g] + 4 * q + 2, f, l);
		}
		r[i] = lo | hi << 16;
	}
}
#define LDMATRIX_X4(r, row) emu__ldmatrix_x4((r), (row), 0, __FILE__, __LINE__)
#define LDMATRIX_X4_TRANS(r, row) emu__ldmatrix_x4((r), (row), 1, __FILE__, __LINE__)

/* ---- asynchronous global -> shared copies: cp.async.cg.shared.global (16
 * bytes), cp.async.commit_group, cp.async.wait_group N. CP_ASYNC_16(dst,
 * src, valid) queues a copy of 16 bytes from src (or 16 zero bytes when
 * valid == 0, src unread) to shared dst; CP_ASYNC_COMMIT() closes the
 * thread's open copies into a group; CP_ASYNC_WAIT(n) completes every
 * committed group but the newest n. Per thread, as on the GPU: another
 * thread sees the data only after the issuing thread's wait and a SYNC().
 * Here a copy lands at the wait (the latest moment the GPU allows), through
 * the shared-memory checker, so reading it before the wait sees the block's
 * 0xff poison (NaN in 16 and 32 bits) or the previous contents: wrong
 * results; and the issue itself is checked as a write (the GPU may land it
 * at once), so issuing into a buffer another thread still reads in the same
 * barrier interval is a race. The source is read at issue (the kernels copy
 * read-only data). A thread that exits with copies outstanding is reported
 * at the next copy any thread of that module issues. ---- */
#define EMU__CPA_MAX 128 /* outstanding copies per thread */
typedef struct emu__cpa_entry {
	void *dst;
	unsigned char data[16];
	uint32_t group; /* 0: not committed yet */
} emu__cpa_entry;
static struct emu__cpa_thread {
	emu_dim3 bid;             /* block the entries belong to */
	int n;
	uint32_t committed;
	emu__cpa_entry e[EMU__CPA_MAX];
} emu__cpa[EMU_MAX_THREADS];
static __attribute__((unused)) void emu__cp_async16(void *dst, const void *src, int valid,
                                                    const char *f, int l)
{
	struct emu__cpa_thread *t = &emu__cpa[TID_LINEAR];
	emu__aligned(dst, 16, f, l);
	if (t->n && (t->bid.x != BID_X || t->bid.y != BID_Y || t->bid.z != BID_Z)) {
		(emu__ctx->fail)(EMU_EINVAL, f, l, "cp.async: a thread of an earlier block exited with "
		               "copies never completed by CP_ASYNC_WAIT");
		return;
	}
	if (t->n == EMU__CPA_MAX) {
		(emu__ctx->fail)(EMU_EINVAL, f, l, "cp.async: more than EMU__CPA_MAX copies outstanding");
		return;
	}
	if (!t->n)
		t->committed = 0;
	t->bid = emu__ctx->bid;
	emu__ctx->sh_access(dst, 16, EMU_SH_WRITE, f, l); /* the GPU may land it now */
	emu__cpa_entry *e = &t->e[t->n++];
	e->dst = dst;
	e->group = 0;
	if (valid)
		memcpy(e->data, emu__aligned(src, 16, f, l), 16);
	else
		memset(e->data, 0, 16);
}
static __attribute__((unused)) void emu__cp_async_commit(void)
{
	struct emu__cpa_thread *t = &emu__cpa[TID_LINEAR];
	int any = 0;
	for (int i = 0; i < t->n; i++)
		if (!t->e[i].group) {
			t->e[i].group = t->committed + 1;
			any = 1;
		}
	t->committed += (uint32_t)any; /* an empty group completes at once */
}
static __attribute__((unused)) void emu__cp_async_wait(int n, const char *f, int l)
{
	struct emu__cpa_thread *t = &emu__cpa[TID_LINEAR];
	int k = 0;
	if (n < 0) {
		(emu__ctx->fail)(EMU_EINVAL, f, l, "cp.async: CP_ASYNC_WAIT of a negative count");
		return;
	}
	for (int i = 0; i < t->n; i++) {
		emu__cpa_entry *e = &t->e[i];
		if (e->group && e->group + (uint32_t)n <= t->committed)
			memcpy(emu__ctx->sh_access(e->dst, 16, EMU_SH_WRITE, f, l), e->data, 16);
		else
			t->e[k++] = *e;
	}
	t->n = k;
}
#define CP_ASYNC_16(dst, src, valid) emu__cp_async16((dst), (src), (valid), __FILE__, __LINE__)
#define CP_ASYNC_COMMIT() emu__cp_async_commit()
#define CP_ASYNC_WAIT(n) emu__cp_async_wait((n), __FILE__, __LINE__)

/* ---- constant tables baked into a generated source (tree masks): file
 * scope, read-only ---- */
#define DEV_CONST static const
/* ---- memory fence: blocks run one at a time here, nothing to order ---- */
#define FENCE() ((void)0)

#endif
