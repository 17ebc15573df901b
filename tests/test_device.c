/* The device interface (runtime/device.h), one set of tests run on every
 * backend available: host native, host emulate, cuda over the fake driver
 * (tests/util/fake_cuda.c) and, on a machine with a GPU, cuda itself.
 * Memory round trips, GEMMs on awkward shapes against a double reference,
 * kernels (cast, swiglu templates) launched through the interface, a
 * captured graph replayed against eager execution, conditional regions
 * decided by a flag a kernel writes during the replay, and the errors:
 * copies inside a capture, unknown ops, missing kernels, no driver. For the
 * cuda backend the fake's record of driver calls is asserted too (module
 * loads, capture, conditional node construction, plan caching, teardown). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "device/dev_cuda_api.h"
#include "device/dev_cuda_gemm_simple.h"
#include "gemm_simple_emu.h"
#include "device/device.h"
#include "fake_cuda.h"
#include "core/fileio.h"
#include "formats/gguf.h"
#include "kern_util.h"
#include "gen/jit/nvrtc.h"
#include "gen/render.h"
#include "gen/jit/emu_build.h"
#include "kernels/ref/ref.h"

static char g_dir[256];   /* the test "engine directory": kernels.cu, kernels.ptx, cubins */
static char g_cache[300];

/* ---- the test kernels: rendered templates, as an engine would hold them ---- */

enum { K_SWIGLU = 0, K_CAST_Y, K_FLAG, K_N };

#define T_ROWS 3
#define T_FFN 260
#define T_N (T_ROWS * T_FFN)

typedef struct tkern {
	const char *tmpl, *op;
	gen_param p[4];
	int np;
	unsigned grid[3], block[3];
	char key[256];
	char *src;
	const emu_kernel *k;
	rt_kernel_info info;
} tkern;

static tkern g_k[K_N] = {
	[K_SWIGLU] = {"swiglu.cu.tmpl", "swiglu",
	              {{.name = "NAME", .type = GEN_PARAM_IDENT},
	               {.name = "FFN", .type = GEN_PARAM_INT, .i = T_FFN},
	               {.name = "ACT", .type = GEN_PARAM_INT, .i = 0},
	               {.name = "BLOCK", .type = GEN_PARAM_INT, .i = 128}},
	              4, {1, T_ROWS, 1}, {128, 1, 1}},
	[K_CAST_Y] = {"cast.cu.tmpl", "cast",
	              {{.name = "NAME", .type = GEN_PARAM_IDENT},
	               {.name = "N", .type = GEN_PARAM_INT, .i = T_N},
	               {.name = "MODE", .type = GEN_PARAM_INT, .i = 0},
	               {.name = "BLOCK", .type = GEN_PARAM_INT, .i = 128}},
	              4, {(T_N + 127) / 128, 1, 1}, {128, 1, 1}}, /* T_N % 8 != 0: one per thread */
	[K_FLAG] = {"cast.cu.tmpl", "cast",
	            {{.name = "NAME", .type = GEN_PARAM_IDENT},
	             {.name = "N", .type = GEN_PARAM_INT, .i = 2},
	             {.name = "MODE", .type = GEN_PARAM_INT, .i = 0},
	             {.name = "BLOCK", .type = GEN_PARAM_INT, .i = 128}},
	            4, {1, 1, 1}, {128, 1, 1}},
};

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
}

/* ---- backends ---- */

typedef struct backend {
	const char *name;
	rt_dev *(*open)(void);
	bool fake;
} backend;

static rt_dev *must_dev(rt_dev *d, const char *what, const sw_err *err)
{
	if (!d)
		fail_msg("%s: %s", what, err->msg);
	return d;
}

static rt_dev *open_native(void)
{
	sw_err err = {0};
	const rt_dev_opts o = {.src_dir = src_root(), .cache_dir = g_cache};
	return must_dev(rt_dev_host_new(RT_HOST_NATIVE, &o, &err), "host", &err);
}

static rt_dev *open_emulate(void)
{
	sw_err err = {0};
	const rt_dev_opts o = {.src_dir = src_root(), .cache_dir = g_cache,
	                       .emu_compile = gen_emu_module_build};
	return must_dev(rt_dev_host_new(RT_HOST_EMULATE, &o, &err), "host-emulate", &err);
}

static rt_dev *open_fake_cfg(const fake_cuda_cfg *cfg, const rt_cuda_cfg *ccfg, sw_err *err)
{
	rt_cu_api cu;
	rt_lt_api lt;
	fake_cuda_reset(cfg);
	fake_cuda_api(&cu, &lt);
	for (int i = 0; i < K_N; i++)
		fake_cuda_register(g_k[i].key, g_k[i].k);
	return rt_dev_cuda_new_with_api(&cu, &lt, ccfg, err);
}

static rt_dev *open_fake(void)
{
	sw_err err = {0};
	return must_dev(open_fake_cfg(NULL, NULL, &err), "cuda (fake driver)", &err);
}

static rt_dev *open_real_cuda(void)
{
	sw_err err = {0};
	return must_dev(rt_dev_cuda_new(0, &err), "cuda", &err);
}

/* the real GPU again, its GEMMs by the diagnostic kernel (SW_CUDA_GEMM=simple,
 * runtime/device/dev_cuda_gemm_simple.c) instead of cuBLASLt */
static rt_dev *open_real_cuda_simple(void)
{
	sw_err err = {0};
	setenv("SW_CUDA_GEMM", "simple", 1);
	rt_dev *d = rt_dev_cuda_new(0, &err);
	unsetenv("SW_CUDA_GEMM");
	must_dev(d, "cuda (SW_CUDA_GEMM=simple)", &err);
	assert_non_null(strstr(d->desc, "(GEMMs: simple kernel)"));
	return d;
}

static backend g_be[5];
static int g_nbe;

static void close_dev(const backend *b, rt_dev *d)
{
	rt_dev_free(d);
	if (b->fake && fake_cuda_live_allocs())
		fail_msg("cuda (fake): %d device allocation(s) leaked", fake_cuda_live_allocs());
}

#define MUST(call)                                                                     \
	do {                                                                           \
		sw_err err_ = {0};                                                     \
		if ((call) != 0)                                                       \
			fail_msg("%s: %s: %s", d->desc, #call, err_.msg);              \
	} while (0)
/* calls inside MUST name their error argument err_ */

static rt_dptr dalloc(rt_dev *d, size_t n)
{
	rt_dptr p = 0;
	MUST(d->ops->alloc(d, n, &p, &err_));
	assert_true(p != 0);
	return p;
}

static void up(rt_dev *d, rt_dptr dst, const void *src, size_t n)
{
	MUST(d->ops->upload(d, dst, src, n, &err_));
}

static void down(rt_dev *d, void *dst, rt_dptr src, size_t n)
{
	MUST(d->ops->download(d, dst, src, n, &err_));
}

static void dsync(rt_dev *d)
{
	MUST(d->ops->sync(d, &err_));
}

static void run(rt_dev *d, const rt_op *op)
{
	MUST(d->ops->launch(d, op, &err_));
}

/* Loads the three test kernels; kops[i] is then kernel i's op template. */
static void load_kernels(rt_dev *d, rt_op *kops)
{
	for (int i = 0; i < K_N; i++) {
		rt_op *o = &kops[i];
		memset(o, 0, sizeof(*o));
		o->kind = RT_OP_KERNEL;
		snprintf(o->name, sizeof(o->name), "test_%s%d", g_k[i].op, i);
		snprintf(o->op, sizeof(o->op), "%s", g_k[i].op);
		snprintf(o->entry, sizeof(o->entry), "%s", g_k[i].key);
		o->kinfo = &g_k[i].info;
		memcpy(o->grid, g_k[i].grid, sizeof(o->grid));
		memcpy(o->block, g_k[i].block, sizeof(o->block));
		o->layer = -1;
		rt_op_fix_argv(o);
	}
	MUST(d->ops->load_kernels(d, g_dir, kops, K_N, &err_));
}

static rt_op kop(const rt_op *kops, int which, rt_dptr a0, rt_dptr a1, rt_dptr a2)
{
	rt_op o = kops[which];
	o.n_args = which == K_SWIGLU ? 3 : 2;
	o.argval[0] = a0;
	o.argval[1] = a1;
	o.argval[2] = which == K_SWIGLU ? a2 : 0;
	rt_op_fix_argv(&o);
	return o;
}

static rt_op gemm_op(int64_t m, int64_t n, int64_t k, int dtype, rt_dptr C, rt_dptr A, rt_dptr W)
{
	rt_op o;
	memset(&o, 0, sizeof(o));
	o.kind = RT_OP_GEMM;
	snprintf(o.name, sizeof(o.name), "test_gemm");
	snprintf(o.op, sizeof(o.op), "gemm");
	o.m = m, o.n = n, o.k = k, o.dtype = dtype;
	o.n_args = 3;
	o.argval[0] = C, o.argval[1] = A, o.argval[2] = W;
	o.layer = -1;
	rt_op_fix_argv(&o);
	return o;
}

static rt_op memset_op(rt_dptr p, int64_t bytes)
{
	rt_op o;
	memset(&o, 0, sizeof(o));
	o.kind = RT_OP_MEMSET;
	snprintf(o.name, sizeof(o.name), "test_memset");
	snprintf(o.op, sizeof(o.op), "memset");
	o.n_args = 1;
	o.argval[0] = p;
	o.bytes = bytes;
	o.layer = -1;
	rt_op_fix_argv(&o);
	return o;
}

/* ---- setup ---- */

static int setup(void **state)
{
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	snprintf(g_dir, sizeof(g_dir), "%s/tmp/test_device.%d", build, (int)getpid());
	snprintf(g_cache, sizeof(g_cache), "%s/gen/emu", build);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", g_dir);
	if (system(cmd))
		return -1;

	/* kernels.cu (emulate), the emulator kernels (fake driver), the native
	 * kernel infos, a PTX stand-in (the fake accepts any PTX text) */
	size_t total = 0;
	for (int i = 0; i < K_N; i++) {
		tkern *t = &g_k[i];
		t->src = render_kernel(t->tmpl, t->op, t->p, t->np, false, t->key, sizeof(t->key));
		t->k = load_kernel(t->tmpl, t->op, t->p, t->np);
		size_t kl = strlen(t->key);
		if (kl >= sizeof(t->info.uri))
			return -1;
		memcpy(t->info.uri, t->key, kl + 1);
		snprintf(t->info.tmpl, sizeof(t->info.tmpl), "%s", t->tmpl);
		for (int j = 0; j < t->np; j++) {
			if (!strcmp(t->p[j].name, "NAME"))
				continue;
			rt_kparam *kp = &t->info.params[t->info.n_params++];
			snprintf(kp->name, sizeof(kp->name), "%s", t->p[j].name);
			kp->i = t->p[j].i;
			kp->f = (double)t->p[j].i;
		}
		total += strlen(t->src) + 1;
	}
	char *all = calloc(1, total + 1), path[512];
	for (int i = 0; i < K_N; i++) {
		strcat(all, g_k[i].src);
		strcat(all, "\n");
	}
	snprintf(path, sizeof(path), "%s/kernels.cu", g_dir);
	write_file(path, all, strlen(all));
	static const char ptx[] = "// stand-in for the fake driver\n.version 8.3\n.target sm_90\n";
	snprintf(path, sizeof(path), "%s/kernels.ptx", g_dir);
	write_file(path, ptx, sizeof(ptx));

	g_be[g_nbe++] = (backend){"host", open_native, false};
	g_be[g_nbe++] = (backend){"host-emulate", open_emulate, false};
	g_be[g_nbe++] = (backend){"cuda (fake driver)", open_fake, true};
	if (rt_dev_cuda_available()) {
		/* a real GPU: the same kernels through NVRTC, for this device's arch */
		sw_err err = {0};
		rt_dev *d = rt_dev_cuda_new(0, &err);
		gen_nvrtc *nv = gen_nvrtc_open(&err);
		snprintf(path, sizeof(path), "%s/kernels", src_root());
		char *prelude = gen_nvrtc_prelude_load(path, &err), arch[16];
		void *cubin = NULL;
		size_t cs = 0;
		if (d && nv && prelude) {
			snprintf(arch, sizeof(arch), "sm_%d", d->arch);
			if (!gen_nvrtc_compile(nv, prelude, all, "test_kernels.cu", arch, &cubin, &cs, NULL,
			                       0, NULL, NULL, &err)) {
				snprintf(path, sizeof(path), "%s/kernels.%s.cubin", g_dir, arch);
				write_file(path, cubin, cs);
				g_be[g_nbe++] = (backend){"cuda", open_real_cuda, false};
				g_be[g_nbe++] = (backend){"cuda simple GEMM", open_real_cuda_simple, false};
			}
		}
		if (g_nbe < 4)
			print_message("cuda available but not tested: %s\n", err.msg);
		free(cubin);
		free(prelude);
		gen_nvrtc_close(nv);
		rt_dev_free(d);
	}
	free(all);
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	if (system(cmd))
		return -1;
	for (int i = 0; i < K_N; i++)
		free(g_k[i].src);
	fake_cuda_reset(NULL);
	return 0;
}

/* ---- memory ---- */

static void test_roundtrip(void **state)
{
	/* 2 MiB and more: the host's weight-sized buffers, on 2 MiB boundaries
	 * and advised as huge pages (dev_host.c host_big_alloc) */
	static const size_t sizes[] = {1, 3, 257, 4099, 65536 + 7, ((size_t)2 << 20) - 1,
	                               ((size_t)3 << 20) + 5};
	for (int b = 0; b < g_nbe; b++) {
		rt_dev *d = g_be[b].open();
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			const size_t n = sizes[s];
			uint8_t *x = malloc(n), *y = malloc(n);
			assert_non_null(x);
			assert_non_null(y);
			rt_dptr p = dalloc(d, n);
			if (!strcmp(g_be[b].name, "host"))
				assert_int_equal(p % (n >= ((size_t)2 << 20) ? ((size_t)2 << 20) : 256), 0);
			memset(y, 0x5a, n);
			down(d, y, p, n);
			for (size_t i = 0; i < n; i++)
				if (y[i])
					fail_msg("%s: alloc of %zu bytes not zero-filled at %zu", d->desc, n, i);
			for (size_t i = 0; i < n; i++)
				x[i] = (uint8_t)(i * 131 + s);
			up(d, p, x, n);
			down(d, y, p, n);
			assert_memory_equal(x, y, n);
			if (n > 8) { /* a copy at an offset leaves the rest alone */
				up(d, p + 3, "\x01\x02\x03\x04", 4);
				down(d, y, p, n);
				assert_memory_equal(y, x, 3);
				assert_memory_equal(y + 3, "\x01\x02\x03\x04", 4);
				assert_memory_equal(y + 7, x + 7, n - 7);
			}
			d->ops->free(d, p);
			free(x);
			free(y);
		}
		if (d->ops->alloc_host) { /* pinned host memory where there is such a thing */
			void *h = d->ops->alloc_host(d, 1000);
			assert_non_null(h);
			memset(h, 1, 1000);
			d->ops->free_host(d, h);
		}
		assert_true(d->stats.uploads >= 5);
		close_dev(&g_be[b], d);
	}
}

/* ---- GEMM ---- */

/* Inputs are exact 16-bit values, so every product a*w is exact in fp32
 * (8 x 8 or 11 x 11 significant bits); the only error is the fp32
 * accumulation of k terms, within gamma_k * sum |a w| in any order with
 * round-to-nearest (Higham 3.1), twice that if the hardware truncates
 * (tensor-core accumulation may: unit roundoff 2^-23). The bound is that
 * doubled one; a wrong transpose or leading dimension misses it by orders
 * of magnitude. */
static void check_gemm(rt_dev *d, int64_t m, int64_t n, int64_t k, int dtype, int offset)
{
	const size_t na = (size_t)(m * k), nw = (size_t)(n * k), nc = (size_t)(m * n);
	uint16_t *a = malloc(2 * na), *w = malloc(2 * nw);
	float *c = malloc(4 * nc);
	double *ref = malloc(8 * nc), *bound = malloc(8 * nc);
	assert_true(a && w && c && ref && bound);
	for (size_t i = 0; i < na; i++)
		a[i] = dtype == RT_FP16 ? gguf_f32_to_f16((float)rnd()) : gguf_f32_to_bf16((float)rnd());
	for (size_t i = 0; i < nw; i++)
		w[i] = dtype == RT_FP16 ? gguf_f32_to_f16((float)rnd()) : gguf_f32_to_bf16((float)rnd());
	/* offset: operands only 2-byte (A, W) and 4-byte (C) aligned, as engine
	 * slices may be; cuBLASLt must be told (the fake checks) */
	const size_t o16 = offset ? 2 : 0, o32 = offset ? 4 : 0;
	rt_dptr A = dalloc(d, 2 * na + o16), W = dalloc(d, 2 * nw + o16), C = dalloc(d, 4 * nc + o32);
	up(d, A + o16, a, 2 * na);
	up(d, W + o16, w, 2 * nw);
	rt_op op = gemm_op(m, n, k, dtype, C + o32, A + o16, W + o16);
	for (int round = 0; round < 2; round++) {
		if (round == 1) {
			/* one new weight at the same address, at a position the host
			 * backend's cache fingerprint does not sample (unless W is
			 * tiny): only the invalidation on upload keeps a stale fp32
			 * copy out */
			w[1] = dtype == RT_FP16 ? gguf_f32_to_f16(1.5f) : gguf_f32_to_bf16(1.5f);
			up(d, W + o16 + 2, &w[1], 2);
		}
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++) {
				double s = 0, sa = 0;
				for (int64_t p = 0; p < k; p++) {
					double x = dtype == RT_FP16 ? gguf_f16_to_f32(a[i * k + p])
					                            : gguf_bf16_to_f32(a[i * k + p]);
					double y = dtype == RT_FP16 ? gguf_f16_to_f32(w[j * k + p])
					                            : gguf_bf16_to_f32(w[j * k + p]);
					s += x * y;
					sa += fabs(x * y);
				}
				ref[i * n + j] = s;
				bound[i * n + j] = 2.0 * gamma_n((int)k) * sa;
			}
		run(d, &op);
		dsync(d);
		down(d, c, C + o32, 4 * nc);
		char what[320];
		snprintf(what, sizeof(what), "%s gemm %s m=%lld n=%lld k=%lld%s%s", d->desc,
		         dtype == RT_FP16 ? "fp16" : "bf16", (long long)m, (long long)n, (long long)k,
		         offset ? " unaligned" : "", round ? " (new W)" : "");
		check_close(what, c, ref, bound, nc);
	}
	d->ops->free(d, A);
	d->ops->free(d, W);
	d->ops->free(d, C);
	free(a);
	free(w);
	free(c);
	free(ref);
	free(bound);
}

static void test_gemm(void **state)
{
	static const int64_t shapes[][3] = {{1, 33, 111}, {26, 576, 192}, {5, 260, 33}, {3, 7, 1}};
	for (int b = 0; b < g_nbe; b++) {
		rt_dev *d = g_be[b].open();
		for (int dt = RT_BF16; dt <= RT_FP16; dt++)
			for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
				check_gemm(d, shapes[s][0], shapes[s][1], shapes[s][2], dt, 0);
		check_gemm(d, 5, 33, 111, RT_BF16, 1);
		/* k = 0: an empty sum is zero (cuBLASLt refuses k = 0; the backends do not) */
		rt_dptr C = dalloc(d, 4 * 6);
		up(d, C, (float[6]){1, 2, 3, 4, 5, 6}, 24);
		rt_op z = gemm_op(2, 3, 0, RT_BF16, C, C, C);
		run(d, &z);
		dsync(d);
		float c[6];
		down(d, c, C, 24);
		for (int i = 0; i < 6; i++)
			assert_true(c[i] == 0.0f);
		d->ops->free(d, C);
		if (g_be[b].fake) { /* one heuristic query per (shape, dtype, alignment) */
			assert_int_equal(fake_cuda_count("cublasLtMatmulAlgoGetHeuristic"), 2 * 4 + 1);
			assert_int_equal(fake_cuda_count("cublasLtMatmul"), 2 * (2 * 4 + 1));
		}
		close_dev(&g_be[b], d);
	}
}

/* ---- kernels ---- */

typedef struct tbufs {
	rt_dptr g, u, y, y16, ye, z, src, flag, flag2;
} tbufs;

static tbufs bufs_new(rt_dev *d)
{
	tbufs t = {
		.g = dalloc(d, 4 * T_N), .u = dalloc(d, 4 * T_N), .y = dalloc(d, 4 * T_N),
		.y16 = dalloc(d, 2 * T_N), .ye = dalloc(d, 4 * T_N), .z = dalloc(d, 64),
		.src = dalloc(d, 8), .flag = dalloc(d, 4), .flag2 = dalloc(d, 4),
	};
	return t;
}

static void bufs_free(rt_dev *d, tbufs *t)
{
	rt_dptr *p = &t->g;
	for (size_t i = 0; i < sizeof(*t) / sizeof(rt_dptr); i++)
		d->ops->free(d, p[i]);
}

static void test_kernels(void **state)
{
	float *g = malloc(4 * T_N), *u = malloc(4 * T_N), *y = malloc(4 * T_N);
	uint16_t *y16 = malloc(2 * T_N);
	double *ref = malloc(8 * T_N), *bound = malloc(8 * T_N);
	assert_true(g && u && y && y16 && ref && bound);
	fill(g, T_N, 6.0);
	fill(u, T_N, 2.0);
	g[0] = -100.0f; /* exp(100) overflows: silu's limit -0 */
	for (int i = 0; i < T_N; i++) {
		double s = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
		ref[i] = s;
		/* float evaluation of g / (1 + expf(-g)) * u: expf within 2 ulp
		 * (CUDA's documented bound; glibc's is tighter), then three
		 * roundings; 8 u |ref| covers it with room */
		bound[i] = 8.0 * U32 * fabs(s) + 1e-30;
	}
	for (int b = 0; b < g_nbe; b++) {
		rt_dev *d = g_be[b].open();
		rt_op kops[K_N];
		load_kernels(d, kops);
		tbufs t = bufs_new(d);
		up(d, t.g, g, 4 * T_N);
		up(d, t.u, u, 4 * T_N);
		rt_op sw = kop(kops, K_SWIGLU, t.y, t.g, t.u), cy = kop(kops, K_CAST_Y, t.y16, t.y, 0);
		run(d, &sw);
		run(d, &cy);
		dsync(d);
		down(d, y, t.y, 4 * T_N);
		down(d, y16, t.y16, 2 * T_N);
		char what[200];
		snprintf(what, sizeof(what), "%s swiglu", d->desc);
		check_close(what, y, ref, bound, T_N);
		for (int i = 0; i < T_N; i++)
			if (y16[i] != gguf_f32_to_bf16(y[i]))
				fail_msg("%s cast[%d]: %#x, expected bf16(%g) = %#x", d->desc, i, y16[i],
				         (double)y[i], gguf_f32_to_bf16(y[i]));
		assert_true(d->stats.launches >= 2);
		bufs_free(d, &t);
		if (g_be[b].fake) {
			static const char *const seq[] = {"cuModuleLoadDataEx ptx", "cuModuleGetFunction",
			                                  "cuLaunchKernel", "cuLaunchKernel",
			                                  "cuStreamSynchronize"};
			const char *miss = NULL;
			if (!fake_cuda_has_seq(seq, 5, &miss)) {
				fake_cuda_print_log();
				fail_msg("fake driver log lacks %s", miss);
			}
			char pat[300];
			snprintf(pat, sizeof(pat), "cuLaunchKernel %s", g_k[K_SWIGLU].key);
			assert_int_equal(fake_cuda_count(pat), 1);
		}
		close_dev(&g_be[b], d);
	}
	free(g);
	free(u);
	free(y);
	free(y16);
	free(ref);
	free(bound);
}

/* ---- graphs ---- */

typedef struct snap {
	float y[T_N];
	uint16_t y16[T_N];
	float c[T_ROWS * 33];
	uint8_t z[64];
} snap;

static void test_graph_replay(void **state)
{
	static float g[T_N], u[T_N];
	static uint16_t w[33 * T_FFN];
	static snap got, want;
	uint8_t junk[64];
	memset(junk, 0xab, sizeof(junk));
	for (int i = 0; i < 33 * T_FFN; i++)
		w[i] = gguf_f32_to_bf16((float)rnd());
	for (int b = 0; b < g_nbe; b++) {
		rt_dev *d = g_be[b].open();
		rt_op kops[K_N];
		load_kernels(d, kops);
		tbufs t = bufs_new(d);
		rt_dptr W = dalloc(d, sizeof(w)), C = dalloc(d, sizeof(got.c));
		up(d, W, w, sizeof(w));
		/* a small forward step: kernel, kernel, memset, GEMM on the cast output */
		rt_op ops[4] = {kop(kops, K_SWIGLU, t.y, t.g, t.u), kop(kops, K_CAST_Y, t.y16, t.y, 0),
		                memset_op(t.z, 64), gemm_op(T_ROWS, 33, T_FFN, RT_BF16, C, t.y16, W)};
		rt_graph *gr = NULL;
		/* once eagerly first: a GEMM shape's first run (cuda: cuBLASLt's
		 * heuristic and trial) must not be captured */
		for (int i = 0; i < 4; i++)
			run(d, &ops[i]);
		dsync(d);
		MUST(d->ops->graph_begin(d, &err_));
		assert_true(d->capturing);
		for (int i = 0; i < 4; i++)
			run(d, &ops[i]);
		MUST(d->ops->graph_end(d, &gr, &err_));
		assert_false(d->capturing);
		assert_non_null(gr);
		const uint64_t launches0 = d->stats.launches;
		for (int r = 0; r < 3; r++) {
			/* fresh inputs each time: the graph reads memory at replay,
			 * nothing captured by value */
			fill(g, T_N, 4.0);
			fill(u, T_N, 1.0);
			snap *s[2] = {&got, &want};
			for (int pass = 0; pass < 2; pass++) {
				up(d, t.g, g, sizeof(g));
				up(d, t.u, u, sizeof(u));
				up(d, t.z, junk, sizeof(junk));
				if (pass == 0) {
					MUST(d->ops->graph_launch(d, gr, &err_));
				} else {
					for (int i = 0; i < 4; i++)
						run(d, &ops[i]);
				}
				dsync(d);
				down(d, s[pass]->y, t.y, sizeof(got.y));
				down(d, s[pass]->y16, t.y16, sizeof(got.y16));
				down(d, s[pass]->c, C, sizeof(got.c));
				down(d, s[pass]->z, t.z, sizeof(got.z));
			}
			if (memcmp(&got, &want, sizeof(got)))
				fail_msg("%s: graph replay %d differs from eager execution", d->desc, r);
			for (int i = 0; i < 64; i++)
				assert_int_equal(got.z[i], 0);
		}
		assert_int_equal(d->stats.graph_launches, 3);
		assert_true(d->stats.launches >= launches0 + 4 * 3);
		if (g_be[b].fake) {
			static const char *const seq[] = {"cuStreamBeginCapture", "cuLaunchKernel",
			                                  "cuLaunchKernel", "cuMemsetD8Async", "cublasLtMatmul",
			                                  "cuStreamEndCapture", "cuGraphInstantiate",
			                                  "cuGraphLaunch", "cuGraphLaunch", "cuGraphLaunch"};
			const char *miss = NULL;
			if (!fake_cuda_has_seq(seq, 10, &miss)) {
				fake_cuda_print_log();
				fail_msg("fake driver log lacks %s", miss);
			}
		}
		d->ops->graph_free(d, gr);
		d->ops->free(d, W);
		d->ops->free(d, C);
		bufs_free(d, &t);
		close_dev(&g_be[b], d);
	}
}

/* cast_flag writes bf16(src[0]), bf16(src[1]) into the 4 flag bytes: the
 * int32 there is nonzero iff either is; so the decision is made by a kernel
 * inside the replay, after the host last touched the flag. */
static void test_graph_if(void **state)
{
	static float g[T_N], u[T_N], y[T_N], sevens[T_N], ye[T_N];
	static uint16_t y16[T_N];
	uint8_t junk[64], z[64];
	memset(junk, 0xab, sizeof(junk));
	for (int i = 0; i < T_N; i++)
		sevens[i] = 7.0f;
	fill(g, T_N, 4.0);
	fill(u, T_N, 1.0);
	for (int b = 0; b < g_nbe; b++) {
		rt_dev *d = g_be[b].open();
		rt_op kops[K_N];
		load_kernels(d, kops);
		tbufs t = bufs_new(d);
		up(d, t.g, g, sizeof(g));
		up(d, t.u, u, sizeof(u));
		rt_op eager = kop(kops, K_SWIGLU, t.ye, t.g, t.u);
		run(d, &eager);
		dsync(d);
		down(d, ye, t.ye, sizeof(ye));
		rt_op fl = kop(kops, K_FLAG, t.flag, t.src, 0), sw = kop(kops, K_SWIGLU, t.y, t.g, t.u);
		rt_op ms = memset_op(t.z, 64), cy = kop(kops, K_CAST_Y, t.y16, t.y, 0);
		rt_graph *gr = NULL;
		/* flag <- src; if (flag) { swiglu; if (flag2) { memset z } }; cast y */
		MUST(d->ops->graph_begin(d, &err_));
		run(d, &fl);
		MUST(d->ops->graph_if_begin(d, t.flag, &err_));
		run(d, &sw);
		MUST(d->ops->graph_if_begin(d, t.flag2, &err_));
		run(d, &ms);
		MUST(d->ops->graph_if_end(d, &err_));
		MUST(d->ops->graph_if_end(d, &err_));
		run(d, &cy);
		MUST(d->ops->graph_end(d, &gr, &err_));
		static const struct {
			float src[2];
			int32_t preset, inner;
		} cases[] = {{{1.0f, 0.0f}, 0, 1}, {{0.0f, 0.5f}, 0, 0}, {{0.0f, 0.0f}, 1, 1},
		             {{2.0f, 0.0f}, 0, 1}};
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			const bool outer = cases[c].src[0] != 0 || cases[c].src[1] != 0;
			const bool inner = outer && cases[c].inner;
			up(d, t.src, cases[c].src, 8);
			up(d, t.flag, &cases[c].preset, 4); /* the opposite of what the kernel writes */
			up(d, t.flag2, &cases[c].inner, 4);
			up(d, t.y, sevens, sizeof(sevens));
			up(d, t.z, junk, sizeof(junk));
			MUST(d->ops->graph_launch(d, gr, &err_));
			dsync(d);
			down(d, y, t.y, sizeof(y));
			down(d, y16, t.y16, sizeof(y16));
			down(d, z, t.z, sizeof(z));
			if (memcmp(y, outer ? ye : sevens, sizeof(y)))
				fail_msg("%s case %zu: the IF region was %s", d->desc, c,
				         outer ? "skipped, flag set" : "taken, flag clear");
			for (int i = 0; i < 64; i++)
				if (z[i] != (inner ? 0 : 0xab))
					fail_msg("%s case %zu: the nested IF region was %s", d->desc, c,
					         inner ? "skipped, both flags set" : "taken");
			for (int i = 0; i < T_N; i++) /* the op after the regions always runs */
				assert_int_equal(y16[i], gguf_f32_to_bf16(y[i]));
		}
		if (g_be[b].fake) {
			char sw_pat[300], cy_pat[300], ms_pat[64] = "cuMemsetD8Async";
			snprintf(sw_pat, sizeof(sw_pat), "cuLaunchKernel %s", g_k[K_SWIGLU].key);
			snprintf(cy_pat, sizeof(cy_pat), "cuLaunchKernel %s", g_k[K_CAST_Y].key);
			const char *const seq[] = {
				"cuStreamBeginCapture", "cuLaunchKernel",
				/* outer IF: handle on the captured graph, set kernel, node, body capture */
				"cuStreamGetCaptureInfo", "cuGraphConditionalHandleCreate",
				"cuLaunchKernel " RT_CUDA_SET_COND_ENTRY, "cuStreamGetCaptureInfo",
				"cuGraphAddNode conditional", "cuStreamUpdateCaptureDependencies",
				"cuStreamBeginCaptureToGraph body", sw_pat,
				/* inner IF, one level down */
				"cuGraphConditionalHandleCreate", "cuLaunchKernel " RT_CUDA_SET_COND_ENTRY,
				"cuGraphAddNode conditional", "cuStreamBeginCaptureToGraph body", ms_pat,
				"cuStreamEndCapture", "cuStreamEndCapture", cy_pat, "cuStreamEndCapture",
				"cuGraphInstantiate", "cuGraphLaunch"};
			const char *miss = NULL;
			if (!fake_cuda_has_seq(seq, (int)(sizeof(seq) / sizeof(seq[0])), &miss)) {
				fake_cuda_print_log();
				fail_msg("fake driver log lacks %s (in order)", miss);
			}
			assert_int_equal(fake_cuda_count("cuGraphConditionalHandleCreate"), 2);
		}
		d->ops->graph_free(d, gr);
		bufs_free(d, &t);
		close_dev(&g_be[b], d);
	}
}

/* ---- errors ---- */

static void expect_err(int rc, const sw_err *err, const char *needle, const char *what)
{
	if (rc == 0)
		fail_msg("%s: succeeded, expected an error mentioning '%s'", what, needle);
	if (!strstr(err->msg, needle))
		fail_msg("%s: error '%s' does not mention '%s'", what, err->msg, needle);
}

static void test_errors(void **state)
{
	for (int b = 0; b < g_nbe; b++) {
		rt_dev *d = g_be[b].open();
		sw_err err = {0};
		char buf[16] = {0};
		rt_dptr p = dalloc(d, 16), q = 0;
		rt_graph *gr = NULL;
		rt_op kops[K_N];
		load_kernels(d, kops);

		/* capture refuses what is not a launch, and stays usable */
		MUST(d->ops->graph_begin(d, &err_));
		expect_err(d->ops->upload(d, p, buf, 16, &err), &err, "inside a graph capture", d->desc);
		expect_err(d->ops->download(d, buf, p, 16, &err), &err, "inside a graph capture", d->desc);
		expect_err(d->ops->alloc(d, 16, &q, &err), &err, "inside a graph capture", d->desc);
		expect_err(d->ops->sync(d, &err), &err, "inside a graph capture", d->desc);
		expect_err(d->ops->graph_begin(d, &err), &err, "already capturing", d->desc);
		expect_err(d->ops->graph_if_end(d, &err), &err, "without a matching", d->desc);
		rt_op ms = memset_op(p, 16);
		run(d, &ms);
		MUST(d->ops->graph_end(d, &gr, &err_));
		MUST(d->ops->graph_launch(d, gr, &err_));
		dsync(d);
		/* an open region at graph_end */
		MUST(d->ops->graph_begin(d, &err_));
		MUST(d->ops->graph_if_begin(d, p, &err_));
		rt_graph *g2 = NULL;
		expect_err(d->ops->graph_end(d, &g2, &err), &err, "still open", d->desc);
		assert_null(g2);
		assert_false(d->capturing);
		expect_err(d->ops->graph_if_begin(d, p, &err), &err, "outside a graph capture", d->desc);
		MUST(d->ops->graph_begin(d, &err_));
		expect_err(d->ops->graph_launch(d, gr, &err), &err, "inside a graph capture", d->desc);
		MUST(d->ops->graph_end(d, &g2, &err_));
		d->ops->graph_free(d, g2);
		d->ops->graph_free(d, gr);

		/* ops that cannot run */
		rt_op bad = memset_op(p, 16);
		bad.kind = 99;
		snprintf(bad.name, sizeof(bad.name), "bogus_op");
		expect_err(d->ops->launch(d, &bad, &err), &err, "bogus_op", d->desc);
		assert_non_null(strstr(err.msg, "unknown op kind"));
		assert_false(d->ops->supports_op(d, &bad));
		rt_op unloaded = kops[K_CAST_Y];
		unloaded.fn = NULL;
		snprintf(unloaded.op, sizeof(unloaded.op), "no_such_op");
		int rc = d->ops->launch(d, &unloaded, &err);
		expect_err(rc, &err, unloaded.name, d->desc);
		/* a kernel the module lacks */
		rt_op missing = kops[K_CAST_Y];
		snprintf(missing.entry, sizeof(missing.entry), "no_such_kernel_entry");
		snprintf(missing.op, sizeof(missing.op), "no_such_op");
		rc = d->ops->load_kernels(d, g_dir, &missing, 1, &err);
		expect_err(rc, &err, strcmp(d->ops->name, "host") || strstr(d->desc, "emulate")
		                         ? "no_such_kernel_entry" : "no_such_op", d->desc);

		/* IF regions nest 8 deep on every backend; a misaligned flag is
		 * refused; a device freed in the middle of a capture cleans up */
		MUST(d->ops->graph_begin(d, &err_));
		expect_err(d->ops->graph_if_begin(d, p + 2, &err), &err, "aligned int32", d->desc);
		for (int i = 0; i < 8; i++)
			MUST(d->ops->graph_if_begin(d, p, &err_));
		expect_err(d->ops->graph_if_begin(d, p, &err), &err, "nested", d->desc);
		run(d, &ms);
		d->ops->free(d, p);
		close_dev(&g_be[b], d);
	}
}

/* ---- cuda specifics, on the fake driver ---- */

static void test_cuda_fake_lifecycle(void **state)
{
	sw_err err = {0};
	gen_nvrtc *nv = gen_nvrtc_open(&err);
	const bool have_nvrtc = nv != NULL;
	gen_nvrtc_close(nv);

	rt_dev *d = open_fake();
	assert_int_equal(d->arch, 90);
	assert_string_equal(d->desc, "cuda: Fake H100, sm_90");
	/* the set-conditional kernel: the embedded PTX, JIT-compiled by the
	 * driver; never an NVRTC cubin, even where NVRTC loads (the runtime does
	 * not link it) */
	const char *const init[] = {"cuInit", "cuDeviceGetCount", "cuDeviceGet",
	                            "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuStreamCreate",
	                            "cuMemAlloc", "cublasLtCreate", "cuModuleLoadDataEx ptx",
	                            "cuModuleGetFunction " RT_CUDA_SET_COND_ENTRY};
	const char *miss = NULL;
	if (!fake_cuda_has_seq(init, 10, &miss)) {
		fake_cuda_print_log();
		fail_msg("init: fake driver log lacks %s", miss);
	}
	const int n_init = fake_cuda_n_calls();
	assert_int_equal(fake_cuda_count("cuModuleLoadDataEx cubin"), 0);
	assert_int_equal(fake_cuda_count("cuModuleLoadDataEx ptx"), 1);
	print_message("  set-conditional kernel from the embedded PTX (NVRTC %s here, not used)\n",
	              have_nvrtc ? "loads" : "absent");
	rt_op kops[K_N];
	load_kernels(d, kops);
	/* the engine kernels: the sm_90 cubin where the setup wrote one (a real
	 * GPU of arch 90 is present: NVRTC compiled for it), else the PTX */
	char cubin[300];
	snprintf(cubin, sizeof(cubin), "%s/kernels.sm_90.cubin", g_dir);
	const char *const how = access(cubin, R_OK) == 0 ? "cuModuleLoadDataEx cubin"
	                                                 : "cuModuleLoadDataEx ptx";
	const char *const load[] = {how, "cuModuleGetFunction"};
	assert_true(fake_cuda_has_seq(load, 2, NULL));
	assert_true(fake_cuda_find(how, n_init) >= n_init);
	/* the loaded kernel serves an IF region */
	rt_dptr p = dalloc(d, 16);
	MUST(d->ops->graph_begin(d, &err_));
	MUST(d->ops->graph_if_begin(d, p, &err_));
	MUST(d->ops->graph_if_end(d, &err_));
	rt_graph *g = NULL;
	MUST(d->ops->graph_end(d, &g, &err_));
	d->ops->graph_free(d, g);
	d->ops->free(d, p);
	rt_dev_free(d);
	const char *const fini[] = {"cuStreamSynchronize", "cublasLtDestroy", "cuMemFree",
	                            "cuModuleUnload", "cuModuleUnload", "cuStreamDestroy",
	                            "cuDevicePrimaryCtxRelease"};
	if (!fake_cuda_has_seq(fini, 7, &miss)) {
		fake_cuda_print_log();
		fail_msg("teardown: fake driver log lacks %s", miss);
	}
	assert_int_equal(fake_cuda_live_allocs(), 0);

	/* the PTX image the driver refuses: the device works, IF regions are
	 * refused with the reason */
	rt_cu_api cu;
	rt_lt_api lt;
	fake_cuda_reset(NULL);
	fake_cuda_api(&cu, &lt);
	fake_cuda_fail("cuModuleLoadDataEx", CUDA_ERROR_INVALID_IMAGE, 1);
	d = rt_dev_cuda_new_with_api(&cu, &lt, NULL, &err);
	assert_non_null(d);
	const char *const tried[] = {"cuModuleLoadDataEx ptx"};
	assert_true(fake_cuda_has_seq(tried, 1, NULL));
	assert_int_equal(fake_cuda_count("cuModuleLoadDataEx cubin"), 0);
	p = dalloc(d, 16);
	MUST(d->ops->graph_begin(d, &err_));
	assert_int_equal(d->ops->graph_if_begin(d, p, &err), SW_ENOTSUP);
	assert_non_null(strstr(err.msg, "set-conditional kernel did not load"));
	assert_non_null(strstr(err.msg, "CUDA_ERROR_INVALID_IMAGE"));
	g = NULL;
	MUST(d->ops->graph_end(d, &g, &err_));
	d->ops->graph_free(d, g);
	d->ops->free(d, p);
	rt_dev_free(d);
	assert_int_equal(fake_cuda_live_allocs(), 0);
}

/* SW_CUDA_GEMM=simple on the fake driver: the PTX module and its two entries
 * load at open, no cuBLASLt plan is made, and a GEMM is one launch of the
 * dtype's entry; the emulator runs kernels/gemm_simple.cuh for it, checked
 * against the double-precision reference (on a real GPU: test_gemm's
 * backend "cuda simple GEMM") */
static void test_cuda_fake_simple_gemm(void **state)
{
	sw_err err = {0};
	rt_cu_api cu;
	rt_lt_api lt;
	fake_cuda_reset(NULL);
	fake_cuda_api(&cu, &lt);
	gemm_simple_emu_register(fake_cuda_register);
	const rt_cuda_cfg cfg = {.simple_gemm = true};
	rt_dev *d = must_dev(rt_dev_cuda_new_with_api(&cu, &lt, &cfg, &err), "fake simple", &err);
	assert_string_equal(d->desc, "cuda: Fake H100, sm_90 (GEMMs: simple kernel)");
	assert_int_equal(fake_cuda_count("cuModuleLoadDataEx ptx"), 2); /* set-cond + GEMM */
	const char *const got[] = {"cuModuleGetFunction " RT_CUDA_GEMM_SIMPLE_F16,
	                           "cuModuleGetFunction " RT_CUDA_GEMM_SIMPLE_BF16};
	assert_true(fake_cuda_has_seq(got, 2, NULL));
	check_gemm(d, 5, 33, 111, RT_FP16, 0);
	check_gemm(d, 3, 130, 40, RT_BF16, 1); /* two blocks across n, unaligned operands */
	/* two rounds each (check_gemm rewrites one weight) */
	assert_int_equal(fake_cuda_count("cuLaunchKernel " RT_CUDA_GEMM_SIMPLE_F16), 2);
	assert_int_equal(fake_cuda_count("cuLaunchKernel " RT_CUDA_GEMM_SIMPLE_BF16), 2);
	assert_int_equal(fake_cuda_count("cublasLtMatmulAlgoGetHeuristic"), 0);
	assert_int_equal(fake_cuda_count("cublasLtMatmul"), 0);
	rt_dev_free(d);
	assert_int_equal(fake_cuda_count("cuModuleUnload"), 2);
	assert_int_equal(fake_cuda_live_allocs(), 0);
}

static void test_cuda_fake_errors(void **state)
{
	sw_err err = {0};
	/* no device: the driver is there, the GPU is not */
	fake_cuda_cfg none = {.n_devices = 0, .cc_major = 9};
	assert_null(open_fake_cfg(&none, NULL, &err));
	assert_int_equal(err.code, SW_ENOTSUP);
	assert_non_null(strstr(err.msg, "no CUDA device"));
	fake_cuda_cfg nodev = {.n_devices = 1, .cc_major = 9, .init_result = CUDA_ERROR_NO_DEVICE};
	assert_null(open_fake_cfg(&nodev, NULL, &err));
	assert_int_equal(err.code, SW_ENOTSUP);
	assert_non_null(strstr(err.msg, "no CUDA device"));
	assert_int_equal(fake_cuda_live_allocs(), 0);
	/* a bad ordinal */
	rt_cuda_cfg two = {.ordinal = 2};
	assert_null(open_fake_cfg(NULL, &two, &err));
	assert_non_null(strstr(err.msg, "device 2"));

	/* a driver older than conditional nodes: everything else works */
	fake_cuda_cfg old = {.n_devices = 1, .cc_major = 8, .cc_minor = 6, .no_conditionals = true};
	rt_dev *d = open_fake_cfg(&old, NULL, &err);
	assert_non_null(d);
	assert_int_equal(d->arch, 86);
	rt_dptr p = dalloc(d, 16);
	MUST(d->ops->graph_begin(d, &err_));
	int rc = d->ops->graph_if_begin(d, p, &err);
	assert_int_equal(rc, SW_ENOTSUP);
	assert_non_null(strstr(err.msg, "12.4"));
	assert_non_null(d->no_cond);
	rt_graph *g = NULL;
	MUST(d->ops->graph_end(d, &g, &err_));
	d->ops->graph_free(d, g);

	/* a failing driver call: the message names the call, the error, where */
	fake_cuda_fail("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY, 1);
	rt_dptr q = 0;
	rc = d->ops->alloc(d, 1 << 20, &q, &err);
	assert_int_equal(rc, SW_ENOMEM);
	assert_non_null(strstr(err.msg, "cuMemAlloc"));
	assert_non_null(strstr(err.msg, "CUDA_ERROR_OUT_OF_MEMORY"));
	assert_non_null(strstr(err.msg, "dev_cuda.c:"));
	/* a launch the driver refuses: the op is named */
	rt_op kops[K_N];
	load_kernels(d, kops);
	rt_op big = kop(kops, K_FLAG, p, p, 0);
	big.block[0] = 2048;
	rc = d->ops->launch(d, &big, &err);
	assert_true(rc != 0);
	assert_non_null(strstr(err.msg, "CUDA_ERROR_INVALID_VALUE"));
	assert_non_null(strstr(err.msg, big.name));
	/* cuBLASLt failures go through their own checker */
	fake_cuda_fail("cublasLtMatmulAlgoGetHeuristic", CUDA_ERROR_UNKNOWN, 1);
	rt_op gm = gemm_op(1, 1, 1, RT_BF16, p, p, p);
	rc = d->ops->launch(d, &gm, &err);
	assert_true(rc != 0);
	assert_non_null(strstr(err.msg, "cublasLt"));
	assert_non_null(strstr(err.msg, "CUBLAS_STATUS_NOT_INITIALIZED"));
	d->ops->free(d, p);
	rt_dev_free(d);
	assert_int_equal(fake_cuda_live_allocs(), 0);
}

/* The fallback PTX of the set-conditional kernel assembles (when ptxas is
 * at hand): the one part of the conditional path checkable without a GPU
 * beyond the fake. */
static void test_cond_ptx_assembles(void **state)
{
	const char *home = getenv("CUDA_HOME") && *getenv("CUDA_HOME") ? getenv("CUDA_HOME")
	                                                               : "/usr/local/cuda";
	char ptxas[600], path[600], cmd[2000];
	snprintf(ptxas, sizeof(ptxas), "%s/bin/ptxas", home);
	if (access(ptxas, X_OK) != 0) {
		print_message("  SKIPPED: no %s\n", ptxas);
		return;
	}
	snprintf(path, sizeof(path), "%s/cond.ptx", g_dir);
	write_file(path, rt_cuda_cond_ptx(), strlen(rt_cuda_cond_ptx()));
	static const char *archs[] = {"sm_80", "sm_90"};
	for (int a = 0; a < 2; a++) {
		snprintf(cmd, sizeof(cmd), "'%s' -arch=%s '%s' -o '%s.%s.cubin' 2>&1", ptxas, archs[a], path,
		         path, archs[a]);
		if (system(cmd) != 0)
			fail_msg("ptxas %s rejects the embedded set-conditional PTX", archs[a]);
	}
	/* the diagnostic GEMM's PTX (SW_CUDA_GEMM=simple): both entries, each
	 * assembling for sm_80 (its target) and sm_90, and the text NVRTC makes
	 * of kernels/gemm_simple.cuh now (else: make gemm-simple-ptx) */
	const char *g = rt_cuda_gemm_simple_ptx();
	assert_non_null(strstr(g, ".entry " RT_CUDA_GEMM_SIMPLE_F16 "("));
	assert_non_null(strstr(g, ".entry " RT_CUDA_GEMM_SIMPLE_BF16 "("));
	snprintf(path, sizeof(path), "%s/gemm_simple.ptx", g_dir);
	write_file(path, g, strlen(g));
	static const char *garchs[] = {"sm_80", "sm_90"};
	for (int a = 0; a < 2; a++) {
		snprintf(cmd, sizeof(cmd), "'%s' -arch=%s '%s' -o '%s.%s.cubin' 2>&1", ptxas, garchs[a],
		         path, path, garchs[a]);
		if (system(cmd) != 0)
			fail_msg("ptxas %s rejects the embedded simple-GEMM PTX", garchs[a]);
	}
	sw_err err = {0};
	gen_nvrtc *nv = gen_nvrtc_open(&err);
	char *prelude = NULL, *src = NULL, *fresh = NULL;
	size_t nf = 0;
	if (nv) {
		snprintf(path, sizeof(path), "%s/kernels", src_root());
		prelude = gen_nvrtc_prelude_load(path, &err);
		snprintf(path, sizeof(path), "%s/kernels/gemm_simple.cuh", src_root());
		src = sw_read_file(path, 1 << 20, NULL);
		assert_true(prelude && src);
		if (gen_nvrtc_ptx(nv, prelude, src, "gemm_simple.cu", "compute_80", &fresh, &nf, &err))
			fail_msg("NVRTC on kernels/gemm_simple.cuh: %s", err.msg);
		/* the same NVRTC (its release line) must make the same text */
		const char *rel = "// Cuda compilation tools, ";
		const char *r1 = strstr(g, rel), *r2 = strstr(fresh, rel);
		if (r1 && r2 && strcspn(r1, "\n") == strcspn(r2, "\n") &&
		    !strncmp(r1, r2, strcspn(r1, "\n"))) {
			if (strcmp(g, fresh) != 0)
				fail_msg("runtime/device/gemm_simple_ptx.inc is not NVRTC's output for "
				         "kernels/gemm_simple.cuh: run make gemm-simple-ptx");
		} else {
			print_message("  another NVRTC than the embedded PTX's: its text not compared\n");
		}
		free(fresh);
		free(src);
		free(prelude);
		gen_nvrtc_close(nv);
	}
	/* a value of SW_CUDA_GEMM other than cublaslt or simple: refused, named */
	setenv("SW_CUDA_GEMM", "cutlass", 1);
	rt_dev *d = rt_dev_cuda_new(0, &err);
	unsetenv("SW_CUDA_GEMM");
	assert_null(d);
	assert_int_equal(err.code, SW_EINVAL);
	assert_non_null(strstr(err.msg, "SW_CUDA_GEMM: expected cublaslt or simple, found 'cutlass'"));
}

static void test_open(void **state)
{
	sw_err err = {0};
	rt_dev *d = rt_dev_open("bogus", NULL, &err);
	assert_null(d);
	assert_int_equal(err.code, SW_EINVAL);
	assert_non_null(strstr(err.msg, "host-emulate"));
	d = rt_dev_open("host", NULL, &err);
	assert_non_null(d);
	assert_string_equal(d->desc, "host (native)");
	rt_dev_free(d);
	if (rt_dev_cuda_available()) {
		print_message("  a CUDA device is present: the no-driver case is not checked here\n");
		return;
	}
	/* no driver: cuda is refused as unsupported, with the reason; auto falls back */
	d = rt_dev_cuda_new(0, &err);
	assert_null(d);
	assert_int_equal(err.code, SW_ENOTSUP);
	if (strncmp(err.msg, "no CUDA", 7))
		fail_msg("unexpected message: %s", err.msg);
	print_message("  cuda: %s\n", err.msg);
	assert_null(rt_dev_open("cuda", NULL, &err));
	assert_int_equal(err.code, SW_ENOTSUP);
	d = rt_dev_open("auto", NULL, &err);
	assert_non_null(d);
	assert_string_equal(d->desc, "host (native)");
	rt_dev_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_gemm),
		cmocka_unit_test(test_kernels),
		cmocka_unit_test(test_graph_replay),
		cmocka_unit_test(test_graph_if),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_cuda_fake_lifecycle),
		cmocka_unit_test(test_cuda_fake_errors),
		cmocka_unit_test(test_cuda_fake_simple_gemm),
		cmocka_unit_test(test_cond_ptx_assembles),
		cmocka_unit_test(test_open),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
