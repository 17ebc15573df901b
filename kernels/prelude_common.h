/* The part of the device vocabulary that both backends write alike, in that
 * vocabulary itself: the parameter-list macros, lane and warp ids, the warp
 * and block reductions. Included by prelude_cuda.h and prelude_emu.h at the
 * point where they have defined DEV, UNROLL, SHFL_XOR, SHARED/SLD/SST, SYNC,
 * the thread geometry and SW_INF; NVRTC gets it inlined into prelude_cuda.h's
 * text (gen_nvrtc_prelude_load), the emulator through -I kernels/. Not for
 * inclusion on its own, and nothing backend-specific goes here. */
#ifndef SW_PRELUDE_COMMON_H
#define SW_PRELUDE_COMMON_H

/* ---- parameter lists: KERNEL(name, (type, name), ...) ---- */
#define SW_NARGS(...) SW_NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define SW_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, N, ...) N
#define SW_CAT(a, b) SW_CAT_(a, b)
#define SW_CAT_(a, b) a##b
#define SW_TYPE(T, n) T
#define SW_DECL(T, n) T n
#define SW_PARAMS(...) SW_CAT(SW_P_, SW_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define SW_P_1(a) SW_DECL a
#define SW_P_2(a, ...) SW_DECL a, SW_P_1(__VA_ARGS__)
#define SW_P_3(a, ...) SW_DECL a, SW_P_2(__VA_ARGS__)
#define SW_P_4(a, ...) SW_DECL a, SW_P_3(__VA_ARGS__)
#define SW_P_5(a, ...) SW_DECL a, SW_P_4(__VA_ARGS__)
#define SW_P_6(a, ...) SW_DECL a, SW_P_5(__VA_ARGS__)
#define SW_P_7(a, ...) SW_DECL a, SW_P_6(__VA_ARGS__)
#define SW_P_8(a, ...) SW_DECL a, SW_P_7(__VA_ARGS__)
#define SW_P_9(a, ...) SW_DECL a, SW_P_8(__VA_ARGS__)
#define SW_P_10(a, ...) SW_DECL a, SW_P_9(__VA_ARGS__)
#define SW_P_11(a, ...) SW_DECL a, SW_P_10(__VA_ARGS__)
#define SW_P_12(a, ...) SW_DECL a, SW_P_11(__VA_ARGS__)

/* ---- the calling thread's place in its block ---- */
#define WARP_SIZE 32
#define TID_LINEAR (TID_X + BDIM_X * (TID_Y + BDIM_Y * TID_Z))
#define LANE_ID ((int)(TID_LINEAR & 31u))
#define WARP_ID ((int)(TID_LINEAR >> 5))

/* ---- warp reductions: xor butterfly, every lane gets the result; the
 * same order on both backends, so the same rounding ---- */
DEV float WARP_SUM(float v)
{
	UNROLL
	for (int m = 16; m > 0; m >>= 1)
		v += SHFL_XOR(v, m);
	return v;
}
DEV float WARP_MAX(float v)
{
	UNROLL
	for (int m = 16; m > 0; m >>= 1)
		v = fmaxf(v, SHFL_XOR(v, m));
	return v;
}
DEV int32_t WARP_SUM_I32(int32_t v)
{
	UNROLL
	for (int m = 16; m > 0; m >>= 1)
		v += SHFL_XOR(v, m);
	return v;
}

/* Block-wide sum (every thread gets it). Needs a block of whole warps; ends
 * with a barrier so that the scratch may be reused by the next call. */
DEV float BLOCK_SUM(float v)
{
	SHARED(float, sw_block_red, 32);
	const int nw = (int)((BDIM_X * BDIM_Y * BDIM_Z + 31u) >> 5);
	v = WARP_SUM(v);
	if (LANE_ID == 0)
		SST(sw_block_red, WARP_ID, v);
	SYNC();
	v = LANE_ID < nw ? SLD(sw_block_red, LANE_ID) : 0.0f;
	v = WARP_SUM(v);
	SYNC();
	return v;
}
DEV float BLOCK_MAX(float v)
{
	SHARED(float, sw_block_red, 32);
	const int nw = (int)((BDIM_X * BDIM_Y * BDIM_Z + 31u) >> 5);
	v = WARP_MAX(v);
	if (LANE_ID == 0)
		SST(sw_block_red, WARP_ID, v);
	SYNC();
	v = LANE_ID < nw ? SLD(sw_block_red, LANE_ID) : -SW_INF;
	v = WARP_MAX(v);
	SYNC();
	return v;
}

#endif
