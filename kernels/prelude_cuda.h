/* Device vocabulary for NVRTC: the CUDA twin of prelude_emu.h (same names,
 * same meaning; see there), the part both write alike in prelude_common.h.
 * Prepended to every generated kernel source, with prelude_common.h inlined
 * at its #include (gen_nvrtc_prelude_load).
 * NVRTC has no libc headers, so the fixed-width types are defined here
 * (kernels/philox.h relies on them). Needs sm_80+ (bf16 conversions). */
#ifndef SW_PRELUDE_CUDA_H
#define SW_PRELUDE_CUDA_H

typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;

#define SW_CUDA 1
/* The compute capability compiled for, x100 (800, 900): for a template
 * whose best shape differs per architecture (one source, one launch). */
#define SW_ARCH __CUDA_ARCH__

/* The launch takes void **args (cuLaunchKernel) natively: no trampoline. */
#define KERNEL(name, ...) extern "C" __global__ void name(SW_PARAMS(__VA_ARGS__))
#define KERNEL_LB(max_threads, name, ...)                                              \
	extern "C" __global__ void __launch_bounds__(max_threads) name(SW_PARAMS(__VA_ARGS__))
#define DEV static __device__ __forceinline__
#define RESTRICT __restrict__
#define UNROLL _Pragma("unroll")
/* a loop kept rolled: its trip count is a template constant, but unrolled
 * it would spill (draft_ctrl's head levels) */
#define NO_UNROLL _Pragma("unroll 1")

/* ---- thread geometry (TID_LINEAR, LANE_ID, WARP_ID: prelude_common.h) ---- */
#define TID_X threadIdx.x
#define TID_Y threadIdx.y
#define TID_Z threadIdx.z
#define BID_X blockIdx.x
#define BID_Y blockIdx.y
#define BID_Z blockIdx.z
#define BDIM_X blockDim.x
#define BDIM_Y blockDim.y
#define BDIM_Z blockDim.z
#define GDIM_X gridDim.x
#define GDIM_Y gridDim.y
#define GDIM_Z gridDim.z

#define SYNC() __syncthreads()

/* ---- shared memory ---- */
#define SHARED(T, name, n) __shared__ __align__(16) T name[n]
#define DYN_SHARED(T, name)                                                            \
	extern __shared__ __align__(16) unsigned char sw_dyn_smem[];                   \
	T *name = (T *)sw_dyn_smem
#define SLD(a, i) ((a)[i])
#define SST(a, i, v) ((a)[i] = (v))

/* ---- warp shuffles (full mask) ---- */
#define SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define SHFL_DOWN(v, d) __shfl_down_sync(0xffffffffu, (v), (d))
#define SHFL_UP(v, d) __shfl_up_sync(0xffffffffu, (v), (d))
#define SHFL_IDX(v, src) __shfl_sync(0xffffffffu, (v), (src))
/* reconverges the warp: before an mma/ldmatrix (.sync.aligned) that follows
 * lane-dependent branches */
#define SYNCWARP() __syncwarp()
/* set bits of a 64-bit word */
#define POPC64(x) __popcll((unsigned long long)(x))

/* ---- atomics ---- */
#define ATOMIC_ADD_F32(p, v) atomicAdd((float *)(p), (float)(v))
#define ATOMIC_ADD_I32(p, v) atomicAdd((int *)(p), (int)(v))
#define ATOMIC_ADD_U32(p, v) atomicAdd((unsigned *)(p), (unsigned)(v))
#define ATOMIC_MAX_I32(p, v) atomicMax((int *)(p), (int)(v))
#define ATOMIC_MAX_U32(p, v) atomicMax((unsigned *)(p), (unsigned)(v))
#define ATOMIC_MIN_I32(p, v) atomicMin((int *)(p), (int)(v))
#define ATOMIC_CAS_U32(p, c, v) atomicCAS((unsigned *)(p), (unsigned)(c), (unsigned)(v))
#define ATOMIC_EXCH_U32(p, v) atomicExch((unsigned *)(p), (unsigned)(v))
/* WAIT_GE_I32(p, v): the calling thread spins until the int32 at p is >= v
 * (a volatile load each time, which L1 does not serve). For a block that
 * waits on blocks holding earlier tickets of an atomic counter: those are
 * resident, so they finish. Follow it with FENCE() and SYNC(). */
#define WAIT_GE_I32(p, v)                                                              \
	do {                                                                           \
		while (*(volatile int *)(p) < (int)(v))                                \
			__nanosleep(64);                                               \
	} while (0)

/* ---- bit casts and bf16/fp16: the cvt.rn instructions that
 * __float2bfloat16_rn / __float2half_rn compile to, without the headers ---- */
DEV uint32_t F32_BITS(float f) { return __float_as_uint(f); }
DEV float BITS_F32(uint32_t u) { return __uint_as_float(u); }
DEV float BF16_TO_F32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
DEV uint16_t F32_TO_BF16(float f)
{
	uint16_t r;
	asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
	return r;
}
DEV float F16_TO_F32(uint16_t h)
{
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
DEV uint16_t F32_TO_F16(float f)
{
	uint16_t r;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
	return r;
}

/* ---- 16-byte and 8-byte vectors ---- */
typedef float4 f32x4;
typedef float2 f32x2;
typedef uint4 u32x4;
typedef uint2 u32x2;
#define LD_F32X4(p) (*(const f32x4 *)(p))
#define LD_F32X2(p) (*(const f32x2 *)(p))
#define LD_U32X4(p) (*(const u32x4 *)(p))
#define LD_U32X2(p) (*(const u32x2 *)(p))
#define ST_F32X4(p, v) (*(f32x4 *)(p) = (v))
#define ST_F32X2(p, v) (*(f32x2 *)(p) = (v))
#define ST_U32X4(p, v) (*(u32x4 *)(p) = (v))
#define ST_U32X2(p, v) (*(u32x2 *)(p) = (v))
#define MAKE_F32X4(x, y, z, w) make_float4((x), (y), (z), (w))
#define MAKE_F32X2(x, y) make_float2((x), (y))
#define MAKE_U32X4(x, y, z, w) make_uint4((x), (y), (z), (w))
#define MAKE_U32X2(x, y) make_uint2((x), (y))

/* ---- 8-bit integer dot products (dp4a, sm_61+): c + the sum of the four
 * signed byte products of a and b, exact in int32 (prelude_emu.h) ---- */
DEV int32_t DP4A_S8(int32_t a, int32_t b, int32_t c) { return __dp4a(a, b, c); }

/* ---- math ---- */
#define SW_INF __int_as_float(0x7f800000)
#define SINCOSF(a, s, c) sincosf((a), (s), (c))
#define DEV_TRAP(msg) __trap()

/* ---- parameter-list macros, lane/warp ids, warp and block reductions:
 * written once for both backends ---- */
#include "prelude_common.h"

/* ---- tensor-core fragments (sm_80+): mma.sync m16n8k16 with fp32
 * accumulators and ldmatrix x4; fragment layouts and the emulator's
 * summation order in prelude_emu.h. Warp-collective: call converged. ---- */
DEV void MMA_16816_F32_BF16(float *d, const uint32_t *a, const uint32_t *b, const float *c)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
	             "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
	             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
	               "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
DEV void MMA_16816_F32_F16(float *d, const uint32_t *a, const uint32_t *b, const float *c)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
	             "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
	             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
	               "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
/* The 32-bit shared-window address ldmatrix takes. */
DEV uint32_t sw_smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}
DEV void LDMATRIX_X4(uint32_t *r, const void *row)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(sw_smem_addr(row)));
}
DEV void LDMATRIX_X4_TRANS(uint32_t *r, const void *row)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(sw_smem_addr(row)));
}

/* ---- asynchronous global -> shared copies (sm_80+ cp.async, semantics in
 * prelude_emu.h): 16 bytes, L1 bypassed (.cg: the data is used once per
 * block, from shared memory); valid == 0 zero-fills without reading src ---- */
DEV void CP_ASYNC_16(void *dst, const void *src, int valid)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
	             :
	             : "r"(sw_smem_addr(dst)), "l"(__cvta_generic_to_global(src)), "r"(valid ? 16 : 0)
	             : "memory");
}
#define CP_ASYNC_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")

/* ---- constant tables baked into a generated source (tree masks): file
 * scope, read-only, in the constant bank (warp-uniform reads broadcast) ---- */
#define DEV_CONST static __constant__ const
/* ---- memory fence: this thread's global writes/reads ordered before its
 * later ones as seen by the whole device (last-block-done patterns) ---- */
#define FENCE() __threadfence()

#endif
