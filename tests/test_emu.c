/* The SIMT emulator's own checks: each seeded bug (shared race, divergent
 * barrier, deadlock, guard-zone write, uninitialised shared read, misaligned
 * vector load, a lane missing from a shuffle) is reported with where it
 * happened; correct kernels (block reduction, shuffles, atomics, big grids)
 * pass and give CUDA's results. The kernels are written here with the device
 * vocabulary and compiled straight into this binary with prelude_emu.h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/prelude_emu.h"

static emu_dim3 d3(unsigned x, unsigned y, unsigned z)
{
	emu_dim3 d = {x, y, z};
	return d;
}

/* Launch and expect code; the message must mention every needle. */
static void expect(const emu_kernel *k, emu_dim3 g, emu_dim3 b, void **args, int code,
                   const char *needle1, const char *needle2)
{
	emu_report rep;
	int rc = emu_launch(k, g, b, 0, args, &rep);

	if (rc != code)
		fail_msg("%s: expected code %d, got %d: %s", k->name, code, rc, rep.msg);
	assert_int_equal(rep.code, code);
	if (needle1 && !strstr(rep.msg, needle1))
		fail_msg("%s: message lacks '%s': %s", k->name, needle1, rep.msg);
	if (needle2 && !strstr(rep.msg, needle2))
		fail_msg("%s: message lacks '%s': %s", k->name, needle2, rep.msg);
	if (code)
		print_message("  reported as expected: %s\n", rep.msg);
}

/* ---- seeded bugs ---- */

/* Neighbour exchange without the barrier between write and read. */
KERNEL(k_race_rw, (float *, out))
{
	SHARED(float, buf, 64);
	int t = (int)TID_X;
	SST(buf, t, (float)t);
	out[t] = SLD(buf, (t + 1) % 64);
}

/* Reading the lower neighbour: the writer ran first (fiber order). */
KERNEL(k_race_raw, (float *, out))
{
	SHARED(float, buf, 64);
	int t = (int)TID_X;
	SST(buf, t, (float)t);
	out[t] = SLD(buf, (t + 63) % 64);
}

/* The same with the barrier: correct. */
KERNEL(k_norace_rw, (float *, out))
{
	SHARED(float, buf, 64);
	int t = (int)TID_X;
	SST(buf, t, (float)t);
	SYNC();
	out[t] = SLD(buf, (t + 1) % 64);
}

/* Read, then overwrite the neighbour's slot in the same interval (WAR). */
KERNEL(k_race_war, (float *, out))
{
	SHARED(float, buf, 64);
	int t = (int)TID_X;
	SST(buf, t, 1.0f);
	SYNC();
	out[t] = SLD(buf, t);
	SST(buf, (t + 1) % 64, 2.0f);
}

/* Everybody accumulates into one word: plain RMW races, atomics do not. */
KERNEL(k_race_ww, (float *, out))
{
	SHARED(float, acc, 1);
	if (TID_X == 0)
		SST(acc, 0, 0.0f);
	SYNC();
	SST(acc, 0, SLD(acc, 0) + 1.0f);
	SYNC();
	out[TID_X] = SLD(acc, 0);
}

KERNEL(k_atomic_ok, (float *, out))
{
	SHARED(float, acc, 1);
	if (TID_X == 0)
		SST(acc, 0, 0.0f);
	SYNC();
	ATOMIC_ADD_F32(&acc[0], 1.0f);
	SYNC();
	out[TID_X] = SLD(acc, 0);
	ATOMIC_ADD_F32(&out[0], 0.5f); /* global atomics: no tracking, just the RMW */
}

KERNEL(k_uninit, (float *, out))
{
	SHARED(float, buf, 32);
	if (TID_X < 31)
		SST(buf, TID_X, 1.0f);
	SYNC();
	out[TID_X] = SLD(buf, 31 - TID_X);
}

KERNEL(k_sh_overflow, (float *, out))
{
	SHARED(float, buf, 32);
	SST(buf, TID_X + 1, 1.0f); /* thread 31 writes buf[32] */
	out[TID_X] = 0.0f;
}

KERNEL(k_div_exit, (float *, out))
{
	if (TID_X < 16)
		SYNC();
	out[TID_X] = 1.0f;
}

KERNEL(k_div_site, (float *, out))
{
	if (TID_X < 16)
		SYNC();
	SYNC();
	out[TID_X] = 1.0f;
}

/* Per-thread trip counts: the same SYNC site, different instances. */
KERNEL(k_div_count, (const int *, trips), (float *, out))
{
	for (int i = 0; i < trips[TID_X]; i++)
		SYNC();
	SYNC();
	out[TID_X] = 1.0f;
}

/* Half a warp waits at a shuffle for lanes that wait at the block barrier. */
KERNEL(k_deadlock, (float *, out))
{
	float v = (float)TID_X;
	if (TID_X < 16)
		v = SHFL_XOR(v, 1);
	else
		SYNC();
	out[TID_X] = v;
}

KERNEL(k_shfl_exit, (float *, out))
{
	if (LANE_ID >= 8)
		return;
	out[TID_X] = SHFL_XOR(1.0f, 1);
}

/* Block of 48: warp 1 has 16 lanes, the butterfly reads lanes 16..31. */
KERNEL(k_shfl_partial, (float *, out))
{
	out[TID_X] = WARP_SUM(1.0f);
}

KERNEL(k_oob, (float *, y), (int, n), (int, off))
{
	int i = (int)(BID_X * BDIM_X + TID_X);
	if (i < n)
		y[i] = 1.0f;
	if (i == 0)
		y[off] = 2.0f;
}

KERNEL(k_misaligned, (const float *, x), (float *, y))
{
	f32x4 v = LD_F32X4(x + 1);
	y[TID_X] = v.x;
}

static void test_race_read_after_write(void **state)
{
	(void)state;
	float *out = emu_alloc(64 * sizeof(float), "out");
	void *args[] = {&out};
	expect(&k_race_rw_emu, d3(1, 1, 1), d3(64, 1, 1), args, EMU_ERACE, "race on shared buf",
	       "writes it");
	expect(&k_race_raw_emu, d3(1, 1, 1), d3(64, 1, 1), args, EMU_ERACE, "race on shared buf",
	       "reads it");
	expect(&k_norace_rw_emu, d3(1, 1, 1), d3(64, 1, 1), args, 0, NULL, NULL);
	for (int t = 0; t < 64; t++)
		assert_true(out[t] == (float)((t + 1) % 64));
	/* Fiber order makes this one show up as thread 1 reading what thread 0
	 * wrote; either order is the same race. */
	expect(&k_race_war_emu, d3(1, 1, 1), d3(64, 1, 1), args, EMU_ERACE, "race on shared buf",
	       "no SYNC()");
	expect(&k_race_ww_emu, d3(2, 1, 1), d3(64, 1, 1), args, EMU_ERACE, "race on shared acc",
	       "block (0,0,0)");
	expect(&k_atomic_ok_emu, d3(1, 1, 1), d3(64, 1, 1), args, 0, NULL, NULL);
	assert_true(out[0] == 64.0f + 64 * 0.5f);
	for (int t = 1; t < 64; t++)
		assert_true(out[t] == 64.0f);
	emu_free(out);
}

static void test_shared_checks(void **state)
{
	(void)state;
	float *out = emu_alloc(32 * sizeof(float), "out");
	void *args[] = {&out};
	expect(&k_uninit_emu, d3(1, 1, 1), d3(32, 1, 1), args, EMU_ESHARED,
	       "uninitialised shared buf[+124 bytes]", "thread (0,0,0)");
	expect(&k_sh_overflow_emu, d3(1, 1, 1), d3(32, 1, 1), args, EMU_ESHARED,
	       "outside every shared array", "thread (31,0,0)");
	emu_free(out);
}

static void test_barrier_divergence(void **state)
{
	(void)state;
	float *out = emu_alloc(32 * sizeof(float), "out");
	int *trips = emu_alloc(32 * sizeof(int), "trips");
	void *args[] = {&out};
	void *args2[] = {&trips, &out};
	expect(&k_div_exit_emu, d3(1, 1, 1), d3(32, 1, 1), args, EMU_EBARRIER, "barrier divergence",
	       "has exited");
	expect(&k_div_site_emu, d3(1, 1, 1), d3(32, 1, 1), args, EMU_EBARRIER, "barrier divergence",
	       "thread (16,0,0)");
	for (int i = 0; i < 32; i++)
		trips[i] = 3;
	expect(&k_div_count_emu, d3(1, 1, 1), d3(32, 1, 1), args2, 0, NULL, NULL);
	trips[7] = 2;
	expect(&k_div_count_emu, d3(1, 1, 1), d3(32, 1, 1), args2, EMU_EBARRIER,
	       "barrier divergence", "thread (7,0,0)");
	emu_free(out);
	emu_free(trips);
}

static void test_deadlock_and_shuffle_errors(void **state)
{
	(void)state;
	float *out = emu_alloc(64 * sizeof(float), "out");
	void *args[] = {&out};
	expect(&k_deadlock_emu, d3(1, 1, 1), d3(64, 1, 1), args, EMU_EDEADLOCK, "deadlock",
	       "waits at the shuffle");
	expect(&k_shfl_exit_emu, d3(1, 1, 1), d3(32, 1, 1), args, EMU_ESHFL, "lane 8",
	       "never joins the warp shuffle");
	expect(&k_shfl_partial_emu, d3(1, 1, 1), d3(48, 1, 1), args, EMU_ESHFL, "does not exist",
	       "block of 48 threads");
	emu_free(out);
}

static void test_guard_zones(void **state)
{
	(void)state;
	int n = 100, off = 100;
	float *y = emu_alloc((size_t)n * sizeof(float), "y_out");
	void *args[] = {&y, &n, &off};
	expect(&k_oob_emu, d3(4, 1, 1), d3(32, 1, 1), args, EMU_EGUARD, "buffer 'y_out'",
	       "byte offset 400 (past its end)");
	off = -1;
	expect(&k_oob_emu, d3(4, 1, 1), d3(32, 1, 1), args, EMU_EGUARD, "buffer 'y_out'",
	       "byte offset -4 (before its start)");
	off = 5;
	expect(&k_oob_emu, d3(4, 1, 1), d3(32, 1, 1), args, 0, NULL, NULL);
	emu_free(y);
	float *x = emu_alloc(64, "x");
	float *z = emu_alloc(64 * sizeof(float), "z");
	void *args2[] = {&x, &z};
	expect(&k_misaligned_emu, d3(1, 1, 1), d3(32, 1, 1), args2, EMU_EALIGN, "16-byte vector",
	       "not 16-byte aligned");
	emu_free(x);
	emu_free(z);
}

/* ---- correct kernels ---- */

/* Block sum: strided per-thread partials, warp butterfly, one slot per warp
 * in shared memory, the first warp reduces the slots. */
KERNEL(k_block_sum, (const float *, x), (float *, out), (int, n))
{
	SHARED(float, part, 32);
	const float *row = x + (size_t)BID_X * n;
	float s = 0.0f;
	for (int i = (int)TID_X; i < n; i += (int)BDIM_X)
		s += row[i];
	s = WARP_SUM(s);
	int nw = (int)(BDIM_X + 31) / 32;
	if (LANE_ID == 0)
		SST(part, WARP_ID, s);
	SYNC();
	if (WARP_ID == 0) {
		s = LANE_ID < nw ? SLD(part, LANE_ID) : 0.0f;
		s = WARP_SUM(s);
		if (LANE_ID == 0)
			out[BID_X] = s;
	}
}

static void test_block_reduction(void **state)
{
	static const int ns[] = {1, 33, 111, 260, 576, 4097};
	static const unsigned blocks[] = {32, 96, 256, 1024};
	uint64_t rng = 12345;
	(void)state;
	for (int a = 0; a < 6; a++)
		for (int b = 0; b < 4; b++) {
			int n = ns[a], rows = 3;
			float *x = emu_alloc((size_t)rows * n * sizeof(float), "x");
			float *out = emu_alloc((size_t)rows * sizeof(float), "out");
			void *args[] = {&x, &out, &n};
			/* Integers: every partial sum is exact, so the result must be
			 * bit-equal to the serial sum whatever the order. */
			for (int i = 0; i < rows * n; i++) {
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
				x[i] = (float)((int)(rng >> 40) % 2001 - 1000);
			}
			expect(&k_block_sum_emu, d3((unsigned)rows, 1, 1), d3(blocks[b], 1, 1), args, 0, NULL,
			       NULL);
			for (int r = 0; r < rows; r++) {
				double s = 0.0;
				for (int i = 0; i < n; i++)
					s += x[(size_t)r * n + i];
				assert_true(out[r] == (float)s);
			}
			/* Reals: within gamma_n sum|x| (Higham 3.1), any order. */
			for (int i = 0; i < rows * n; i++) {
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
				x[i] = (float)((double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0);
			}
			expect(&k_block_sum_emu, d3((unsigned)rows, 1, 1), d3(blocks[b], 1, 1), args, 0, NULL,
			       NULL);
			for (int r = 0; r < rows; r++) {
				double s = 0.0, sa = 0.0, u = 0x1p-24, g = n * u / (1 - n * u);
				for (int i = 0; i < n; i++) {
					s += x[(size_t)r * n + i];
					sa += fabs(x[(size_t)r * n + i]);
				}
				if (!(fabs(out[r] - s) <= g * sa))
					fail_msg("n %d block %u: %g vs %g", n, blocks[b], (double)out[r], s);
			}
			emu_free(x);
			emu_free(out);
		}
}

/* Every shuffle form on float, int and unsigned values. */
KERNEL(k_shuffles, (int32_t *, out), (float *, fout))
{
	int l = LANE_ID;
	int32_t v = l * 3 + 1;
	uint32_t u = 0x80000000u + (uint32_t)l;
	float f = (float)l + 0.25f;
	int base = (int)TID_X * 12;
	out[base + 0] = SHFL_XOR(v, 5);
	out[base + 1] = SHFL_DOWN(v, 3);
	out[base + 2] = SHFL_UP(v, 3);
	out[base + 3] = SHFL_IDX(v, (l * 7) % 32);
	out[base + 4] = (int32_t)(SHFL_XOR(u, 16) - 0x80000000u);
	out[base + 5] = SHFL_IDX(v, 35); /* src lane taken mod 32 */
	out[base + 6] = WARP_SUM_I32(v);
	fout[TID_X * 3 + 0] = SHFL_DOWN(f, 1);
	fout[TID_X * 3 + 1] = WARP_SUM(f);
	fout[TID_X * 3 + 2] = WARP_MAX(l == 9 ? 100.0f : f);
}

static void test_shuffles(void **state)
{
	(void)state;
	int nt = 64;
	int32_t *out = emu_alloc((size_t)nt * 12 * sizeof(int32_t), "out");
	float *fout = emu_alloc((size_t)nt * 3 * sizeof(float), "fout");
	void *args[] = {&out, &fout};
	expect(&k_shuffles_emu, d3(1, 1, 1), d3((unsigned)nt, 1, 1), args, 0, NULL, NULL);
	for (int t = 0; t < nt; t++) {
		int l = t % 32;
		int32_t *o = out + t * 12;
#define V(lane) ((lane) * 3 + 1)
		assert_int_equal(o[0], V(l ^ 5));
		assert_int_equal(o[1], l + 3 < 32 ? V(l + 3) : V(l)); /* out of range: own value */
		assert_int_equal(o[2], l >= 3 ? V(l - 3) : V(l));
		assert_int_equal(o[3], V((l * 7) % 32));
		assert_int_equal(o[4], l ^ 16);
		assert_int_equal(o[5], V(3));
		assert_int_equal(o[6], 32 * 1 + 3 * (31 * 32 / 2));
#undef V
		float f1 = l + 1 < 32 ? (float)(l + 1) + 0.25f : (float)l + 0.25f;
		assert_true(fout[t * 3 + 0] == f1);
		assert_true(fout[t * 3 + 1] == 31.0f * 32.0f / 2.0f + 8.0f);
		assert_true(fout[t * 3 + 2] == 100.0f);
	}
	emu_free(out);
	emu_free(fout);
}

/* Ids of a 3-D grid of 3-D blocks, one element per thread. */
KERNEL(k_ids, (uint32_t *, out))
{
	uint32_t b = BID_X + GDIM_X * (BID_Y + GDIM_Y * BID_Z);
	uint32_t t = TID_LINEAR;
	uint32_t n = BDIM_X * BDIM_Y * BDIM_Z;
	uint32_t *o = out + ((size_t)b * n + t) * 2;
	o[0] = (BID_X << 20) | (BID_Y << 10) | BID_Z;
	o[1] = (TID_X << 20) | (TID_Y << 10) | TID_Z;
}

static void test_many_blocks(void **state)
{
	(void)state;
	emu_dim3 g = d3(37, 5, 3), b = d3(8, 4, 3);
	size_t nb = 37 * 5 * 3, nt = 8 * 4 * 3;
	uint32_t *out = emu_alloc(nb * nt * 2 * sizeof(*out), "ids");
	void *args[] = {&out};
	expect(&k_ids_emu, g, b, args, 0, NULL, NULL);
	for (unsigned bz = 0; bz < g.z; bz++)
		for (unsigned by = 0; by < g.y; by++)
			for (unsigned bx = 0; bx < g.x; bx++)
				for (unsigned tz = 0; tz < b.z; tz++)
					for (unsigned ty = 0; ty < b.y; ty++)
						for (unsigned tx = 0; tx < b.x; tx++) {
							size_t bi = bx + g.x * (by + g.y * bz);
							size_t ti = tx + b.x * (ty + b.y * tz);
							uint32_t *o = out + (bi * nt + ti) * 2;
							assert_int_equal(o[0], (bx << 20) | (by << 10) | bz);
							assert_int_equal(o[1], (tx << 20) | (ty << 10) | tz);
						}
	emu_free(out);
	/* 2000 blocks of the reduction, each row its own sum. */
	int n = 256, rows = 2000;
	float *x = emu_alloc((size_t)rows * n * sizeof(float), "x");
	float *s = emu_alloc((size_t)rows * sizeof(float), "s");
	void *a2[] = {&x, &s, &n};
	for (int i = 0; i < rows * n; i++)
		x[i] = (float)(i / n);
	expect(&k_block_sum_emu, d3((unsigned)rows, 1, 1), d3(128, 1, 1), a2, 0, NULL, NULL);
	for (int r = 0; r < rows; r++)
		assert_true(s[r] == (float)r * n);
	emu_free(x);
	emu_free(s);
}

/* Dynamic shared memory: reverse a row through it. */
KERNEL(k_dyn, (const float *, x), (float *, y), (int, n))
{
	DYN_SHARED(float, buf);
	for (int i = (int)TID_X; i < n; i += (int)BDIM_X)
		SST(buf, i, x[i]);
	SYNC();
	for (int i = (int)TID_X; i < n; i += (int)BDIM_X)
		y[i] = SLD(buf, n - 1 - i);
}

static void test_dynamic_shared(void **state)
{
	(void)state;
	int n = 1000;
	float *x = emu_alloc((size_t)n * sizeof(float), "x"), *y = emu_alloc((size_t)n * sizeof(float), "y");
	void *args[] = {&x, &y, &n};
	emu_report rep;
	for (int i = 0; i < n; i++)
		x[i] = (float)i;
	assert_int_equal(emu_launch(&k_dyn_emu, d3(1, 1, 1), d3(96, 1, 1), (size_t)n * sizeof(float), args,
	                            &rep), 0);
	for (int i = 0; i < n; i++)
		assert_true(y[i] == (float)(n - 1 - i));
	/* One float short: the last reads land in the redzone. */
	int rc = emu_launch(&k_dyn_emu, d3(1, 1, 1), d3(96, 1, 1), (size_t)(n - 1) * sizeof(float), args,
	                    &rep);
	assert_int_equal(rc, EMU_ESHARED);
	emu_free(x);
	emu_free(y);
}

/* ---- speed ---- */

KERNEL(k_spin, (int, iters), (float *, out))
{
	float v = (float)TID_X;
	for (int i = 0; i < iters; i++) {
		v = v * 0.5f + 1.0f;
		SYNC();
	}
	out[TID_X] = v;
}

static void test_speed(void **state)
{
	(void)state;
	int iters = 2000;
	float *out = emu_alloc(256 * sizeof(float), "out");
	void *args[] = {&iters, &out};
	emu_report rep;
	assert_int_equal(emu_launch(&k_spin_emu, d3(4, 1, 1), d3(256, 1, 1), 0, args, &rep), 0);
	double sps = (double)rep.switches / rep.seconds;
	print_message("  emulator: %llu switches, %llu barriers in %.3f s: %.1f M switches/s\n",
	              (unsigned long long)rep.switches, (unsigned long long)rep.barriers, rep.seconds,
	              sps * 1e-6);
	assert_int_equal(rep.barriers, 4 * iters);
	/* Generous floor (a loaded machine): swapcontext manages ~2-5 M/s. */
	assert_true(sps > 5e6);
	emu_free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_race_read_after_write),
		cmocka_unit_test(test_shared_checks),
		cmocka_unit_test(test_barrier_divergence),
		cmocka_unit_test(test_deadlock_and_shuffle_errors),
		cmocka_unit_test(test_guard_zones),
		cmocka_unit_test(test_block_reduction),
		cmocka_unit_test(test_shuffles),
		cmocka_unit_test(test_many_blocks),
		cmocka_unit_test(test_dynamic_shared),
		cmocka_unit_test(test_speed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
