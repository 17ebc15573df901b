/* Kernel-test plumbing (kern_util.h). */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fileio.h"
#include "kern_util.h"
#include "gen/jit/emu_build.h"
#include "gen/jit/nvrtc.h"

const char *src_root(void)
{
	const char *r = getenv("SW_SRC_DIR");
	return r && *r ? r : ".";
}

char *render_kernel(const char *tmpl, const char *op, gen_param *p, int np, bool philox, char *key,
                    size_t nkey)
{
	char path[512];
	sw_err err = {0};
	char *src = NULL;

	assert_int_equal(gen_key(key, nkey, op, p, np), 0);
	for (int i = 0; i < np; i++)
		if (!strcmp(p[i].name, "NAME"))
			p[i].s = key;
	snprintf(path, sizeof(path), "%s/templates/%s", src_root(), tmpl);
	if (gen_render_file(path, p, np, &src, &err))
		fail_msg("%s", err.msg);
	if (!philox)
		return src;
	snprintf(path, sizeof(path), "%s/kernels/philox.h", src_root());
	char *ph = sw_read_file(path, SW_CAP_IMAGE, NULL);
	assert_non_null(ph);
	size_t n = strlen(ph) + strlen(src) + 2;
	char *all = malloc(n);
	assert_non_null(all);
	snprintf(all, n, "%s\n%s", ph, src);
	free(ph);
	free(src);
	return all;
}

const emu_kernel *load_kernel_ex(const char *tmpl, const char *op, gen_param *p, int np, bool philox)
{
	char key[256], kdir[512], cache[512], sym[300];
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	sw_err err = {0};
	void *h = NULL;
	char *src = render_kernel(tmpl, op, p, np, philox, key, sizeof(key));

	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	snprintf(cache, sizeof(cache), "%s/gen/emu", build);
	if (gen_emu_module_build(src, key, kdir, cache, &h, &err))
		fail_msg("%s", err.msg);
	free(src);
	snprintf(sym, sizeof(sym), "%s_emu", key);
	const emu_kernel *k = dlsym(h, sym); /* the module stays loaded for the test's life */
	if (!k)
		fail_msg("%s: no symbol %s", key, sym);
	return k;
}

const emu_kernel *load_kernel(const char *tmpl, const char *op, gen_param *p, int np)
{
	return load_kernel_ex(tmpl, op, p, np, false);
}

gen_nvrtc *nvrtc_or_skip(const char *who)
{
	sw_err err = {0};
	gen_nvrtc *nv = gen_nvrtc_open(&err);
	if (!nv) {
		print_message("%s: SKIPPING NVRTC: %s\n", who, err.msg);
		skip();
	}
	return nv;
}

char *load_prelude_cuda(void)
{
	char kdir[512];
	sw_err err = {0};
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	char *prelude = gen_nvrtc_prelude_load(kdir, &err);
	if (!prelude)
		fail_msg("%s", err.msg);
	return prelude;
}

void nvrtc_check_ex(const char *tmpl, const char *op, gen_param *p, int np, bool philox)
{
	static const char *archs[] = {"sm_80", "sm_90"};
	char key[256];
	sw_err err = {0};
	gen_nvrtc *nv = gen_nvrtc_open(&err);
	if (!nv) {
		print_message("  NVRTC SKIPPED: %s\n", err.msg);
		return;
	}
	char *prelude = load_prelude_cuda();
	char *src = render_kernel(tmpl, op, p, np, philox, key, sizeof(key));
	for (int a = 0; a < 2; a++) {
		gen_kernel_res res[4];
		int n = 0;
		void *cubin = NULL;
		size_t cs = 0;
		if (gen_nvrtc_compile(nv, prelude, src, key, archs[a], &cubin, &cs, res, 4, &n, NULL, &err))
			fail_msg("%s", err.msg);
		free(cubin);
		assert_int_equal(n, 1);
		print_message("  %-5s %-60s %3d regs %4d B stack %5d B smem, spills %d/%d\n", archs[a],
		              res[0].name, res[0].regs, res[0].stack, res[0].smem, res[0].spill_stores,
		              res[0].spill_loads);
		if (res[0].spill_stores || res[0].spill_loads)
			fail_msg("%s %s: spills %d/%d", res[0].name, archs[a], res[0].spill_stores,
			         res[0].spill_loads);
	}
	free(src);
	free(prelude);
	gen_nvrtc_close(nv);
}

emu_dim3 d3(unsigned x, unsigned y, unsigned z)
{
	emu_dim3 d = {x, y, z};
	return d;
}

void launch(const emu_kernel *k, emu_dim3 g, emu_dim3 b, void **args)
{
	emu_report rep;
	if (emu_launch(k, g, b, 0, args, &rep))
		fail_msg("%s: %s", k->name, rep.msg);
}

uint32_t *kern_seed(uint64_t seed)
{
	uint32_t *w = emu_alloc(2 * sizeof(*w), "seed");
	w[0] = (uint32_t)seed;
	w[1] = (uint32_t)(seed >> 32);
	return w;
}

/* ---- comparison ---- */

static size_t type_size(kern_dtype t)
{
	return t == KERN_U16 ? 2 : t == KERN_U8 ? 1 : 4;
}

/* The shape, "3x111" (or the element count when o->dims is empty). */
static void shape_str(char *buf, size_t n, const kern_out *o)
{
	size_t k = (size_t)snprintf(buf, n, "%zu", o->n);
	if (o->dims[0] > 0) {
		k = 0;
		for (int d = 0; d < 4 && o->dims[d] > 0 && k < n; d++)
			k += (size_t)snprintf(buf + k, n - k, "%s%d", d ? "x" : "", o->dims[d]);
	}
}

/* Element i as a multi-index over the shape: "[2][17]" (or "[i]"). */
static void index_str(char *buf, size_t n, const kern_out *o, size_t i)
{
	int nd = 0;
	while (nd < 4 && o->dims[nd] > 0)
		nd++;
	if (!nd) {
		snprintf(buf, n, "[%zu]", i);
		return;
	}
	size_t idx[4], r = i, k = 0;
	for (int d = nd - 1; d >= 0; d--) {
		idx[d] = r % (size_t)o->dims[d];
		r /= (size_t)o->dims[d];
	}
	for (int d = 0; d < nd && k < n; d++)
		k += (size_t)snprintf(buf + k, n - k, "[%zu]", idx[d]);
}

static void value_str(char *buf, size_t n, kern_dtype t, const void *base, size_t i)
{
	const unsigned char *p = (const unsigned char *)base + i * type_size(t);
	switch (t) {
	case KERN_F32: {
		float f;
		uint32_t u;
		memcpy(&f, p, 4);
		memcpy(&u, p, 4);
		snprintf(buf, n, "%.9g (%a, 0x%08" PRIx32 ")", (double)f, (double)f, u);
		break;
	}
	case KERN_I32: {
		int32_t v;
		memcpy(&v, p, 4);
		snprintf(buf, n, "%" PRId32, v);
		break;
	}
	case KERN_U32: {
		uint32_t v;
		memcpy(&v, p, 4);
		snprintf(buf, n, "%" PRIu32 " (0x%08" PRIx32 ")", v, v);
		break;
	}
	case KERN_U16: {
		uint16_t v;
		memcpy(&v, p, 2);
		snprintf(buf, n, "0x%04x", v);
		break;
	}
	case KERN_U8:
		snprintf(buf, n, "%u", *p);
		break;
	}
}

size_t kern_mismatches(const char *what, const kern_out *o)
{
	const size_t es = type_size(o->type);
	const unsigned char *g = o->got, *w = o->want;
	size_t bad = 0, first = 0;
	assert_non_null(o->got);
	assert_non_null(o->want);
	for (size_t i = 0; i < o->n; i++)
		if (memcmp(g + i * es, w + i * es, es) && !bad++)
			first = i;
	if (bad) {
		char at[96], sh[64], gv[80], wv[80];
		index_str(at, sizeof(at), o, first);
		shape_str(sh, sizeof(sh), o);
		value_str(gv, sizeof(gv), o->type, g, first);
		value_str(wv, sizeof(wv), o->type, w, first);
		print_message("  MISMATCH %s: %s%s = %s, want %s (shape %s; %zu of %zu differ)\n", what,
		              o->name, at, gv, wv, sh, bad, o->n);
	}
	return bad;
}

void kern_expect(const char *what, const kern_out *o)
{
	char label[256], at[96], sh[64];
	if (!o->bound) {
		size_t bad = kern_mismatches(what, o);
		if (bad)
			fail_msg("%s: %s: %zu mismatching elements (first above)", what, o->name, bad);
		return;
	}
	assert_int_equal(o->type, KERN_F32);
	assert_non_null(o->ref);
	const float *got = o->got;
	size_t n_fin = 0;
	for (size_t i = 0; i < o->n; i++) {
		double r = o->ref[i], g = (double)got[i];
		bool ok = isnan(r) ? isnan(g) : isinf(r) ? g == r : isfinite(g);
		if (!ok) {
			index_str(at, sizeof(at), o, i);
			shape_str(sh, sizeof(sh), o);
			fail_msg("%s: %s%s = %.9g, want %.9g (shape %s)%s", what, o->name, at, g, r, sh,
			         isfinite(r) ? ": not finite" : "");
		}
		n_fin += isfinite(r);
	}
	shape_str(sh, sizeof(sh), o);
	snprintf(label, sizeof(label), "%s: %s (shape %s, flat index)", what, o->name, sh);
	if (n_fin == o->n) {
		check_close(label, got, o->ref, o->bound, o->n);
		return;
	}
	/* the NMSE and the bounds over the finite elements only */
	float *fg = malloc((n_fin ? n_fin : 1) * sizeof(*fg));
	double *fr = malloc((n_fin ? n_fin : 1) * sizeof(*fr)), *fb = malloc((n_fin ? n_fin : 1) * sizeof(*fb));
	assert_true(fg && fr && fb);
	for (size_t i = 0, k = 0; i < o->n; i++)
		if (isfinite(o->ref[i])) {
			fg[k] = got[i];
			fr[k] = o->ref[i];
			fb[k++] = o->bound[i];
		}
	check_close(label, fg, fr, fb, n_fin);
	free(fg);
	free(fr);
	free(fb);
}

void kern_expect_equal(const char *what, const char *name, kern_dtype type, const void *got,
                       const void *want, size_t n)
{
	kern_out o = {.name = name, .type = type, .got = got, .want = want, .n = n};
	kern_expect(what, &o);
}

void kern_expect_close(const char *what, const char *name, const float *got, const double *ref,
                       const double *bound, size_t n)
{
	kern_out o = {.name = name, .type = KERN_F32, .got = got, .ref = ref, .bound = bound, .n = n};
	kern_expect(what, &o);
}

void kern_launch_expect(const char *what, const emu_kernel *k, emu_dim3 g, emu_dim3 b,
                        void **args, const kern_out *outs, int n_outs)
{
	launch(k, g, b, args);
	for (int i = 0; i < n_outs; i++)
		kern_expect(what, &outs[i]);
}

double kern_unit_roundoff(kern_dtype type, int is_f16)
{
	if (type == KERN_U16)
		return is_f16 ? 0x1p-11 : 0x1p-8;
	return 0x1p-24;
}
