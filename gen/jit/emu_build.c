/* The emulator's C build: a rendered kernel source (or a whole
 * kernels.cu) compiled by the host C compiler with -include prelude_emu.h
 * into a shared object, cached by a hash in its file name, and dlopen'ed.
 * The NVRTC path is nvrtc.h; the kernel tests, the host-emulate device and
 * test_engine_cuda all come through here. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "emu_build.h"

int gen_emu_module_build(const char *src, const char *key, const char *kernels_dir,
                         const char *cache_dir, void **handle, sw_err *err)
{
	const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
	char path[1024], cpath[1200], so[1200], tmp[1300], cmd[4096], log[1400];
	uint64_t h = SW_FNV64_BASIS;
	int rc = 0;

	*handle = NULL;
	snprintf(cmd, sizeof(cmd), "%s -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -shared -Wall -Wextra "
	         "-Werror -Wno-unused-parameter -Wno-unused-variable -I'%s' -include prelude_emu.h",
	         cc, kernels_dir);
	h = sw_fnv1a64(h, src, strlen(src));
	h = sw_fnv1a64(h, cmd, strlen(cmd));
	/* what prelude_emu.h includes: a change to any of them is a new module */
	static const char *deps[] = {"prelude_emu.h", "prelude_common.h", "emu.h", "half.h"};
	for (int i = 0; i < (int)(sizeof(deps) / sizeof(deps[0])); i++) {
		size_t len = 0;
		snprintf(path, sizeof(path), "%s/%s", kernels_dir, deps[i]);
		char *t = sw_read_file(path, SW_CAP_SOURCE, &len);
		if (!t)
			return sw_errf(err, SW_EIO, "%s: cannot read: %s", path, strerror(errno));
		h = sw_fnv1a64(h, t, len);
		free(t);
	}
	if (gen_jit_mkdirs(cache_dir))
		return sw_errf(err, SW_EIO, "%s: cannot create: %s", cache_dir, strerror(errno));
	snprintf(cpath, sizeof(cpath), "%s/%s-%016llx.c", cache_dir, key, (unsigned long long)h);
	snprintf(so, sizeof(so), "%s/%s-%016llx.so", cache_dir, key, (unsigned long long)h);
	if (access(so, R_OK) != 0) {
		snprintf(tmp, sizeof(tmp), "%s.tmp%d", so, (int)getpid());
		snprintf(log, sizeof(log), "%s.log", cpath);
		if ((rc = gen_jit_write_file(cpath, src, strlen(src), err)))
			return rc;
		size_t k = strlen(cmd);
		snprintf(cmd + k, sizeof(cmd) - k, " -o '%s' '%s' -lm > '%s' 2>&1", tmp, cpath, log);
		if (system(cmd) != 0) {
			char *l = sw_read_file(log, SW_CAP_SOURCE, NULL);
			rc = sw_errf(err, SW_EINVAL, "%s: emulator build failed:\n%.700s", cpath,
			             l ? l : "(no log)");
			free(l);
			unlink(tmp);
			return rc;
		}
		unlink(log);
		if (rename(tmp, so))
			return sw_errf(err, SW_EIO, "%s: cannot rename into place: %s", so, strerror(errno));
	}
	*handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!*handle)
		return sw_errf(err, SW_EIO, "%s: dlopen: %s", so, dlerror());
	return 0;
}
