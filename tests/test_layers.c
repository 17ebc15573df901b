/* The layering rule, checked on the code's own include lines: every
 * #include "..." of a .c/.h under runtime/, gen/ and kernels/ is resolved
 * to the folder it names and must be an arrow of the table below (the same
 * table the folders' README.md files state); kernels/ref's <system>
 * includes are the C library's, and its objects link against libc and libm
 * alone. Every violation is printed with file and line; the test fails on
 * any. */
#include <dirent.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

/* Layer -> the layers it may include besides itself, kernels/ and
 * kernels/ref/ (which everything may include, save the rule for
 * kernels/ref below). */
static const struct {
	const char *layer, *may[10];
} allowed[] = {
	/* cli passes gen/jit's emulator compiler to the device it opens */
	{"runtime/cli", {"runtime/serve", "gen", "gen/jit", "runtime/engine", "runtime/decode",
	                 "runtime/model", "runtime/formats", "runtime/device", "runtime/core"}},
	{"runtime/serve", {"runtime/engine", "runtime/device", "runtime/formats", "runtime/core"}},
	{"gen", {"gen/jit", "runtime/model", "runtime/formats", "runtime/core"}},
	{"runtime/decode", {"runtime/model", "runtime/formats", "runtime/core"}},
	{"runtime/model", {"runtime/formats", "runtime/core"}},
	{"runtime/formats", {"runtime/core"}},
	{"runtime/engine", {"runtime/device", "runtime/formats", "runtime/core"}},
	{"runtime/device", {"runtime/core"}},
	{"gen/jit", {"runtime/core"}},
	{"runtime/core", {NULL}},
	{"kernels", {NULL}},
	{"kernels/ref", {NULL}},
};

/* kernels/ref is the specification: of kernels/ it reads only these, and of
 * the system's headers only the C library's (a <cblas.h> there had made the
 * specification of a GEMM a BLAS call, linked from runtime/device's
 * portable sgemm in the portable kit); test_ref_links checks the objects. */
static const char *const ref_may[] = {"kernels/philox.h", "kernels/half.h",
                                      "kernels/engine_state.h", "kernels/ops.def"};
static const char *const ref_sys[] = {"assert.h", "errno.h",  "float.h",  "inttypes.h",
                                      "limits.h", "math.h",   "stdbool.h", "stddef.h",
                                      "stdint.h", "stdio.h",  "stdlib.h", "string.h"};


/* The folder (layer) an include names, written into out; false when it
 * names none of the scanned folders. file_dir: the including file's folder
 * (bare names resolve there, as the compiler does first). */
static bool resolve(const char *file_dir, const char *inc, char *out, size_t n)
{
	char p[600];
	struct stat st;
	const char *slash = strrchr(inc, '/');
	if (!slash) {
		snprintf(p, sizeof(p), "%s/%s", file_dir, inc);
		if (stat(p, &st))
			return false;
		snprintf(out, n, "%s", file_dir);
		return true;
	}
	/* -I. then -Iruntime: "gen/jit/nvrtc.h", "kernels/ref/ref.h", "core/err.h" */
	static const char *const roots[] = {"", "runtime/"};
	for (int r = 0; r < 2; r++) {
		snprintf(p, sizeof(p), "%s%s", roots[r], inc);
		if (stat(p, &st))
			continue;
		snprintf(out, n, "%s%.*s", roots[r], (int)(slash - inc), inc);
		return true;
	}
	return false;
}

/* Headers a layer may not include although the arrow is allowed: the
 * engine reads weight formats from runtime/core/wformat.h (declared once),
 * not from the host backend's GEMM header. */
static const struct {
	const char *layer, *header;
} forbidden[] = {
	{"runtime/engine", "runtime/device/host_gemm.h"},
};

/* Whether a file in layer `from` may include header `inc` resolved to `to`. */
static bool arrow_ok(const char *from, const char *to, const char *inc_path)
{
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
		if (!strcmp(forbidden[i].layer, from) && !strcmp(forbidden[i].header, inc_path))
			return false;
	if (!strcmp(from, to))
		return true;
	if (!strcmp(from, "kernels/ref")) {
		if (strcmp(to, "kernels"))
			return false;
		for (size_t i = 0; i < sizeof(ref_may) / sizeof(ref_may[0]); i++)
			if (!strcmp(ref_may[i], inc_path))
				return true;
		return false;
	}
	if (!strcmp(to, "kernels") || !strcmp(to, "kernels/ref"))
		return true;
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!strcmp(allowed[i].layer, from)) {
			for (int k = 0; k < 10 && allowed[i].may[k]; k++)
				if (!strcmp(allowed[i].may[k], to))
					return true;
			return false;
		}
	return false; /* a folder outside the table: add it to the table first */
}

typedef struct scan {
	int files, includes, violations;
} scan;

static void check_file(scan *s, const char *path, const char *dir)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	if (!f)
		fail_msg("%s: cannot read", path);
	s->files++;
	for (int ln = 1; fgets(line, sizeof(line), f); ln++) {
		const char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p++ != '#')
			continue;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "include", 7))
			continue;
		p += 7;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '<' && !strcmp(dir, "kernels/ref")) {
			const char *q = strchr(p + 1, '>');
			bool std = false;
			for (size_t i = 0; q && i < sizeof(ref_sys) / sizeof(ref_sys[0]); i++)
				std |= strlen(ref_sys[i]) == (size_t)(q - p - 1) &&
				       !strncmp(ref_sys[i], p + 1, (size_t)(q - p - 1));
			if (!std) {
				print_message("  VIOLATION %s:%d: kernels/ref includes %.*s, not a C library "
				              "header\n", path, ln, q ? (int)(q - p + 1) : 1, p);
				s->violations++;
			}
			continue;
		}
		if (*p != '"')
			continue; /* <system> headers */
		const char *q = strchr(p + 1, '"');
		if (!q)
			continue;
		char inc[256], to[600], full[1000];
		snprintf(inc, sizeof(inc), "%.*s", (int)(q - p - 1), p + 1);
		s->includes++;
		if (!resolve(dir, inc, to, sizeof(to))) {
			print_message("  VIOLATION %s:%d: #include \"%s\" names no file of the tree\n", path,
			              ln, inc);
			s->violations++;
			continue;
		}
		/* the header's path from the repository root, for kernels/ref's rule */
		snprintf(full, sizeof(full), "%s/%s", to, strrchr(inc, '/') ? strrchr(inc, '/') + 1 : inc);
		if (arrow_ok(dir, to, full))
			continue;
		print_message("  VIOLATION %s:%d: %s -> %s (#include \"%s\")\n", path, ln, dir, to, inc);
		s->violations++;
	}
	fclose(f);
}

static void scan_dir(scan *s, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		fail_msg("%s: cannot open (run from the repository root)", dir);
	char **names = NULL;
	int n = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, sizeof(*names) * (size_t)(n + 1));
		assert_non_null(names);
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		char p[600];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		size_t l = strlen(names[i]);
		if (!stat(p, &st) && S_ISDIR(st.st_mode))
			scan_dir(s, p);
		else if (l > 2 && (!strcmp(names[i] + l - 2, ".c") || !strcmp(names[i] + l - 2, ".h")))
			check_file(s, p, dir);
		free(names[i]);
	}
	free(names);
}

/* The checker itself against arrows whose verdict the table fixes. */
static void test_table(void **state)
{
	assert_true(arrow_ok("runtime/cli", "gen", "gen/plan.h"));
	assert_true(arrow_ok("runtime/engine", "runtime/device", "runtime/device/device.h"));
	assert_true(arrow_ok("runtime/engine", "runtime/formats", "runtime/formats/gguf.h"));
	assert_true(arrow_ok("runtime/device", "kernels/ref", "kernels/ref/ref.h"));
	assert_true(arrow_ok("kernels/ref", "kernels", "kernels/philox.h"));
	assert_true(arrow_ok("gen", "gen/jit", "gen/jit/nvrtc.h"));
	assert_false(arrow_ok("runtime/engine", "runtime/model", "runtime/model/ctx.h"));
	assert_false(arrow_ok("runtime/engine", "runtime/decode", "runtime/decode/chain.h"));
	assert_false(arrow_ok("runtime/device", "gen", "gen/render.h"));
	assert_false(arrow_ok("runtime/device", "gen/jit", "gen/jit/nvrtc.h"));
	assert_false(arrow_ok("runtime/device", "runtime/formats", "runtime/formats/gguf.h"));
	assert_false(arrow_ok("runtime/model", "runtime/decode", "runtime/decode/sampler.h"));
	assert_false(arrow_ok("runtime/core", "runtime/formats", "runtime/formats/gguf.h"));
	assert_false(arrow_ok("runtime/decode", "gen", "gen/spec.h"));
	/* the generator never depends on the host decoder: the tree and the
	 * verification vocabulary both use are runtime/core's */
	assert_false(arrow_ok("gen", "runtime/decode", "runtime/decode/tree_verify.h"));
	assert_true(arrow_ok("gen", "runtime/core", "runtime/core/tree.h"));
	assert_true(arrow_ok("runtime/decode", "runtime/core", "runtime/core/tree_rules.h"));
	assert_false(arrow_ok("gen/jit", "gen", "gen/render.h"));
	assert_false(arrow_ok("kernels/ref", "kernels", "kernels/emu.h"));
	assert_false(arrow_ok("kernels/ref", "runtime/formats", "runtime/formats/gguf.h"));
	assert_false(arrow_ok("runtime/nosuch", "runtime/core", "runtime/core/err.h"));
	assert_false(arrow_ok("runtime/engine", "runtime/device", "runtime/device/host_gemm.h"));
	assert_true(arrow_ok("runtime/engine", "runtime/core", "runtime/core/wformat.h"));
	assert_true(arrow_ok("runtime/device", "runtime/device", "runtime/device/host_gemm.h"));
	char to[600];
	assert_true(resolve("runtime/engine", "core/err.h", to, sizeof(to)));
	assert_string_equal(to, "runtime/core");
	assert_true(resolve("gen", "gen/jit/nvrtc.h", to, sizeof(to)));
	assert_string_equal(to, "gen/jit");
	assert_true(resolve("runtime/engine", "engine.h", to, sizeof(to)));
	assert_string_equal(to, "runtime/engine");
	assert_false(resolve("runtime/engine", "nosuch/x.h", to, sizeof(to)));
}

static void test_layers(void **state)
{
	scan s = {0};
	scan_dir(&s, "runtime");
	scan_dir(&s, "gen");
	scan_dir(&s, "kernels");
	print_message("  %d files, %d include lines, %d violations\n", s.files, s.includes, s.violations);
	/* the scan saw the tree (a wrong working directory scans nothing) */
	assert_true(s.files >= 80);
	assert_true(s.includes >= 150);
	assert_int_equal(s.violations, 0);
}

/* kernels/ref's objects link against the C library alone: each symbol they
 * leave undefined is defined by one of them or by libc or libm (or, in a
 * sanitizer build, by the compiler's runtimes: libgcc, ASan, UBSan; nm -P over
 * $BUILD/obj/kernels/ref/; the library's own build made them). */
static void test_ref_links(void **state)
{
	(void)state;
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	char cmd[600], line[1024];
	snprintf(cmd, sizeof(cmd), "nm -P %s/obj/kernels/ref/*.o", build);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char (*def)[128] = NULL, (*und)[128] = NULL;
	int n_def = 0, n_und = 0, objects = 0, violations = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[128], type[8];
		size_t l = strlen(line);
		if (l > 2 && line[l - 2] == ':') { /* "build/obj/kernels/ref/add.o:" */
			objects++;
			continue;
		}
		if (sscanf(line, "%127s %7s", name, type) != 2)
			continue;
		char (**set)[128] = type[0] == 'U' ? &und : &def;
		int *n = type[0] == 'U' ? &n_und : &n_def;
		*set = realloc(*set, sizeof(**set) * (size_t)(*n + 1));
		assert_non_null(*set);
		snprintf((*set)[(*n)++], sizeof(**set), "%s", name);
	}
	assert_int_equal(pclose(f), 0);
	void *libc = dlopen("libc.so.6", RTLD_NOW), *libm = dlopen("libm.so.6", RTLD_NOW);
	/* the compiler's runtime helpers (__popcountdi2 where the build has no
	 * popcnt instruction: make asan's flags have no -march) */
	void *libgcc = dlopen("libgcc_s.so.1", RTLD_NOW);
	assert_non_null(libc);
	assert_non_null(libm);
	for (int i = 0; i < n_und; i++) {
		/* a sanitizer build's instrumentation calls its runtime (make asan):
		 * the compiler's, not the code's dependencies */
		bool ok = !strcmp(und[i], "_GLOBAL_OFFSET_TABLE_") || !strncmp(und[i], "__asan_", 7) ||
		          !strncmp(und[i], "__ubsan_", 8) || !strncmp(und[i], "__sanitizer_", 12) ||
		          dlsym(libc, und[i]) || dlsym(libm, und[i]) || (libgcc && dlsym(libgcc, und[i]));
		for (int j = 0; !ok && j < n_def; j++)
			ok = !strcmp(und[i], def[j]);
		if (!ok) {
			print_message("  VIOLATION kernels/ref needs %s, defined neither there nor in libc "
			              "or libm\n", und[i]);
			violations++;
		}
	}
	print_message("  %d objects, %d undefined symbols, %d violations\n", objects, n_und,
	              violations);
	dlclose(libc);
	dlclose(libm);
	if (libgcc)
		dlclose(libgcc);
	free(def);
	free(und);
	assert_true(objects >= 30); /* the folder's objects were there */
	assert_int_equal(violations, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_layers),
		cmocka_unit_test(test_ref_links),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
