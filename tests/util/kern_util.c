/* Kernel-test plumbing (kern_util.h). */
#include <dlfcn.h>
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
	char *ph = sw_read_file(path, NULL);
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
