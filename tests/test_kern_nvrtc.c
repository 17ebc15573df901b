/* Every kernel template rendered and compiled by NVRTC with prelude_cuda.h
 * for sm_80 and sm_90 (no GPU needed): it must compile, ptxas must report
 * zero spill bytes, and each kernel's registers/stack/smem are printed.
 * Also philox.h under NVRTC (it relies on the prelude's uint32_t). Skips,
 * saying so, only when libnvrtc cannot be loaded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/fileio.h"
#include "gen/jit/nvrtc.h"
#include "gen/render.h"
#include "kern_util.h"

static gen_nvrtc *g_nv;
static char *g_prelude;

static int setup(void **state)
{
	sw_err err = {0};
	char kdir[512];
	(void)state;
	g_nv = gen_nvrtc_open(&err);
	if (!g_nv)
		fprintf(stderr, "test_kern_nvrtc: SKIPPING: %s\n", err.msg);
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	g_prelude = gen_nvrtc_prelude_load(kdir, &err);
	if (!g_prelude)
		fprintf(stderr, "test_kern_nvrtc: %s\n", err.msg);
	return g_prelude ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gen_nvrtc_close(g_nv);
	free(g_prelude);
	return 0;
}

static void compile_all_archs(const char *src, const char *name, int n_kernels)
{
	static const char *archs[] = {"sm_80", "sm_90"};
	for (int a = 0; a < 2; a++) {
		gen_kernel_res res[8];
		int n = 0;
		void *cubin = NULL;
		size_t cs = 0;
		sw_err err = {0};
		if (gen_nvrtc_compile(g_nv, g_prelude, src, name, archs[a], &cubin, &cs, res, 8, &n, NULL,
		                      &err))
			fail_msg("%s", err.msg);
		assert_non_null(cubin);
		assert_true(cs > 0);
		free(cubin);
		if (n != n_kernels)
			fail_msg("%s %s: ptxas reported %d kernels, want %d", name, archs[a], n, n_kernels);
		for (int i = 0; i < n; i++) {
			print_message("  %-5s %-58s %3d regs %4d B stack %5d B smem %d bar, spills %d/%d\n",
			              archs[a], res[i].name, res[i].regs, res[i].stack, res[i].smem,
			              res[i].barriers, res[i].spill_stores, res[i].spill_loads);
			if (res[i].spill_stores || res[i].spill_loads)
				fail_msg("%s %s: %d bytes spill stores, %d bytes spill loads", res[i].name,
				         archs[a], res[i].spill_stores, res[i].spill_loads);
			assert_true(res[i].regs > 0);
		}
	}
}

static void one(const char *tmpl, const char *op, gen_param *p, int np)
{
	char key[256];
	char *src = render_kernel(tmpl, op, p, np, false, key, sizeof(key));
	compile_all_archs(src, key, 1);
	free(src);
}

#define I(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}
#define NM {.name = "NAME", .type = GEN_PARAM_IDENT}

static void test_nvrtc_templates(void **state)
{
	(void)state;
	if (!g_nv)
		skip();
	for (int v = 0; v < 2; v++) { /* vector and scalar paths */
		int dim = v ? 111 : 576;
		gen_param emb[] = {NM, I("DIM", dim), I("N_ROWS", 49152), I("BLOCK", 128)};
		one("embedding.cu.tmpl", "embedding_f32", emb, 4);
		gen_param rms[] = {NM, I("DIM", dim), I("BLOCK", 256),
		                   {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = 1e-5f}};
		one("rmsnorm_residual.cu.tmpl", "rmsnorm_residual_f32", rms, 4);
		gen_param rope[] = {NM, I("N_HEADS", 9), I("HEAD_DIM", v ? 10 : 64), I("ROT_DIM", v ? 8 : 64),
		                    I("BLOCK", 128)};
		one("rope.cu.tmpl", "rope_f32", rope, 5);
		gen_param sw[] = {NM, I("FFN", v ? 1535 : 1536), I("ACT", 0), I("BLOCK", 256)};
		one("swiglu.cu.tmpl", "swiglu_f32", sw, 4);
		gen_param am[] = {NM, I("N", v ? 32001 : 49152), I("BLOCK", 512)};
		one("argmax.cu.tmpl", "argmax_f32", am, 3);
		for (int m = 0; m < 4; m++) {
			gen_param c[] = {NM, I("N", v ? 1001 : 4096), I("MODE", m), I("BLOCK", 128)};
			one("cast.cu.tmpl", "cast", c, 4);
		}
	}
}

/* The vocabulary itself: every macro used once, and philox.h after it. */
static void test_nvrtc_vocabulary(void **state)
{
	(void)state;
	if (!g_nv)
		skip();
	char path[512];
	snprintf(path, sizeof(path), "%s/kernels/philox.h", src_root());
	char *philox = sw_read_file(path, SW_CAP_IMAGE, NULL);
	assert_non_null(philox);
	static const char body[] =
		"KERNEL(vocab_probe, (float *RESTRICT, y), (uint32_t *, u), (int32_t *, k), (uint64_t, seed))\n"
		"{\n"
		"\tSHARED(float, sh, 64);\n"
		"\tDYN_SHARED(float, dyn);\n"
		"\tint t = (int)TID_X;\n"
		"\tSST(sh, t, (float)t);\n"
		"\tSST(dyn, t, 1.0f);\n"
		"\tSYNC();\n"
		"\tfloat v = SLD(sh, (t + 1) & 63) + SLD(dyn, t);\n"
		"\tv += SHFL_XOR(v, 1) + SHFL_DOWN(v, 2) + SHFL_UP(v, 3) + SHFL_IDX(v, 4);\n"
		"\tint32_t i = SHFL_XOR(t, 1);\n"
		"\tuint32_t w = SHFL_IDX((uint32_t)t, 0);\n"
		"\tv = WARP_SUM(v) + WARP_MAX(v) + BLOCK_SUM(v) + BLOCK_MAX(v) + (float)WARP_SUM_I32(i);\n"
		"\tATOMIC_ADD_F32(y, v); ATOMIC_ADD_I32(k, 1); ATOMIC_ADD_U32(u, 1u); ATOMIC_MAX_I32(k + 1, t);\n"
		"\tATOMIC_MAX_U32(u + 1, w); ATOMIC_MIN_I32(k + 2, t); ATOMIC_CAS_U32(u + 2, 0u, 1u);\n"
		"\tATOMIC_EXCH_U32(u + 3, 5u);\n"
		"\tuint16_t hb = F32_TO_BF16(v), hh = F32_TO_F16(v);\n"
		"\tf32x4 q = LD_F32X4(y + 4);\n"
		"\tq.x += BF16_TO_F32(hb) + F16_TO_F32(hh) + BITS_F32(F32_BITS(v));\n"
		"\tST_F32X4(y + 8, q);\n"
		"\tST_F32X2(y + 12, MAKE_F32X2(q.x, q.y));\n"
		"\tu32x4 z = LD_U32X4(u + 4); ST_U32X4(u + 8, MAKE_U32X4(z.x, z.y, z.z, z.w));\n"
		"\tfloat s, c; SINCOSF(v, &s, &c);\n"
		"\ty[16 + t] = s + c + (float)(LANE_ID + WARP_ID) + (float)(BID_X + BDIM_X + GDIM_X) +\n"
		"\t            sw_uniform(seed, 1u, (uint32_t)t, SW_RNG_ACCEPT) - SW_INF * 0.0f;\n"
		"\tif (v < -1e30f) DEV_TRAP(\"impossible\");\n"
		"}\n";
	size_t n = strlen(philox) + sizeof(body) + 2;
	char *src = malloc(n);
	snprintf(src, n, "%s\n%s", philox, body);
	compile_all_archs(src, "vocab_probe", 1);
	free(src);
	free(philox);
}

/* The prelude NVRTC gets is prelude_cuda.h with prelude_common.h's text in
 * place of its #include, each file read here on its own: the shared part
 * reaches NVRTC (which has no include path) and the compile cache key,
 * which hashes this text. */
static void test_nvrtc_prelude_text(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof(path), "%s/kernels/prelude_common.h", src_root());
	char *common = sw_read_file(path, SW_CAP_IMAGE, NULL);
	snprintf(path, sizeof(path), "%s/kernels/prelude_cuda.h", src_root());
	char *cuda = sw_read_file(path, SW_CAP_IMAGE, NULL);
	assert_non_null(common);
	assert_non_null(cuda);
	static const char inc[] = "#include \"prelude_common.h\"\n";
	const char *at = strstr(cuda, inc);
	assert_non_null(at); /* the CUDA prelude does include the shared part */
	assert_null(strstr(g_prelude, inc));
	size_t head = (size_t)(at - cuda), cl = strlen(common);
	assert_int_equal(strlen(g_prelude), strlen(cuda) - strlen(inc) + cl);
	assert_memory_equal(g_prelude, cuda, head);
	assert_memory_equal(g_prelude + head, common, cl);
	assert_string_equal(g_prelude + head + cl, at + strlen(inc));
	free(common);
	free(cuda);
}

static void test_parse_resources(void **state)
{
	(void)state;
	static const char log[] =
		"ptxas info    : 0 bytes gmem\n"
		"ptxas info    : Compiling entry function 'k_a' for 'sm_90'\n"
		"ptxas info    : Function properties for k_a\n"
		"    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
		"ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 392 bytes cmem[0]\n"
		"ptxas info    : Compiling entry function 'k_b' for 'sm_90'\n"
		"ptxas info    : Function properties for k_b\n"
		"    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
		"ptxas info    : Used 12 registers, 368 bytes cmem[0]\n";
	gen_kernel_res r[4];
	assert_int_equal(gen_nvrtc_parse_resources(log, r, 4), 2);
	assert_string_equal(r[0].name, "k_a");
	assert_int_equal(r[0].regs, 40);
	assert_int_equal(r[0].barriers, 1);
	assert_int_equal(r[0].smem, 256);
	assert_int_equal(r[0].stack, 8);
	assert_int_equal(r[0].spill_stores, 4);
	assert_int_equal(r[0].spill_loads, 12);
	assert_int_equal(r[0].cmem0, 392);
	assert_string_equal(r[1].name, "k_b");
	assert_int_equal(r[1].regs, 12);
	assert_int_equal(r[1].smem, 0);
	assert_int_equal(r[1].cmem0, 368);
	/* NVRTC prefixes the properties line ("ptxas         .     ..."): the
	 * parser once read zero spills from it, which made every zero-spill
	 * assertion vacuous. */
	static const char nvrtc_log[] =
		"ptxas info    : Compiling entry function 'k_c' for 'sm_90'\n"
		"ptxas info    : Function properties for k_c\n"
		"ptxas         .     32 bytes stack frame, 16 bytes spill stores, 24 bytes spill loads\n"
		"ptxas info    : Used 255 registers, used 0 barriers, 32 bytes cumulative stack size\n";
	assert_int_equal(gen_nvrtc_parse_resources(nvrtc_log, r, 4), 1);
	assert_int_equal(r[0].stack, 32);
	assert_int_equal(r[0].spill_stores, 16);
	assert_int_equal(r[0].spill_loads, 24);
	assert_int_equal(r[0].regs, 255);
}

/* End to end through NVRTC: a kernel squeezed to 32 registers by its launch
 * bounds must be reported as spilling, so the zero-spill checks can fail. */
static void test_nvrtc_detects_spills(void **state)
{
	(void)state;
	if (!g_nv)
		skip();
	static const char src[] =
		"extern \"C\" __global__ void __launch_bounds__(1024, 2) spill_k(float *y, const float *x, int n)\n"
		"{\n"
		"	float a[48];\n"
		"#pragma unroll\n"
		"	for (int i = 0; i < 48; i++) a[i] = x[threadIdx.x + i * n];\n"
		"	float s = 0;\n"
		"#pragma unroll\n"
		"	for (int r = 0; r < 4; r++)\n"
		"#pragma unroll\n"
		"		for (int i = 0; i < 48; i++) s += a[i] * a[(i + r + 1) % 48];\n"
		"#pragma unroll\n"
		"	for (int i = 0; i < 48; i++) y[threadIdx.x + i * n] = a[i] * s;\n"
		"}\n";
	gen_kernel_res res[2];
	int n = 0;
	sw_err err = {0};
	assert_int_equal(gen_nvrtc_compile(g_nv, "", src, "spill_k", "sm_80", NULL, NULL, res, 2, &n, NULL, &err), 0);
	assert_int_equal(n, 1);
	printf("  spill_k sm_80: %d regs, %d B spill stores, %d B spill loads\n", res[0].regs, res[0].spill_stores,
	       res[0].spill_loads);
	assert_true(res[0].spill_stores > 0);
	assert_true(res[0].spill_loads > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_resources),
		cmocka_unit_test(test_nvrtc_prelude_text),
		cmocka_unit_test(test_nvrtc_detects_spills),
		cmocka_unit_test(test_nvrtc_vocabulary),
		cmocka_unit_test(test_nvrtc_templates),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
