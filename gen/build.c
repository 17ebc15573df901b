/* Engine directory writer (build.h): plans, renders, and drives the
 * per-kernel NVRTC compiles, the nvJitLink link and the PTX through
 * gen/jit/ (nvrtc.h: the compilers, cache.h: the compile cache and the
 * atomic writes). Every file is written to a temp name and renamed into
 * place. */
#include <pthread.h>
#include <signal.h>
#include <errno.h>
#include <sys/stat.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/wparts.h"
#include "core/fileio.h"
#include "core/output.h"
#include "core/sha256.h"
#include "core/timing.h"
#include "formats/engine_files.h"
#include "model/ctx.h"
#include "build.h"
#include "gen/jit/cache.h"
#include "core/hash.h"
#include "gen/jit/nvrtc.h"
#include "drafter.h"
#include "plan.h"
#include "render.h"

/* ptxas prints "Compile time = 12.0 ms" lines: dropped, so an entry depends
 * only on its key (and rebuilding one reproduces it byte for byte). */
static void drop_timing_lines(char *log)
{
	char *w = log;
	for (char *l = log; *l;) {
		char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l + 1) : strlen(l);
		if (!memmem(l, n, "Compile time =", 14)) {
			memmove(w, l, n);
			w += n;
		}
		l += n;
	}
	*w = 0;
}

const char *gen_build_cache_dir(const gen_build_opts *o)
{
	const char *e = getenv("SPECWRIGHT_CACHE");
	if (o && o->cache_dir && *o->cache_dir)
		return o->cache_dir;
	return e && *e ? e : "build/cache";
}

/* --- the build ------------------------------------------------------------ */

typedef struct res_table {
	int n_archs, n_kernels;
	gen_kernel_res *r; /* [arch][kernel], by plan kernel order; regs 0 = not reported */
} res_table;

/* One record per kernel entry (a __global__ function), with its kernel. */
static int write_resources(const char *path, const gen_plan *p, const res_table *rt, sw_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int n_out = 0, total = 0;
	if (!f)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", path);
	for (int k = 0; k < p->n_kernels; k++)
		total += p->kernels[k].n_entries;
	fprintf(f, "{\n  \"generated\": \"by specwright build from ptxas -v; do not edit\",\n"
	        "  \"kernels\": [\n");
	for (int k = 0; k < p->n_kernels; k++) {
		const gen_kernel *K = &p->kernels[k];
		for (int e = 0; e < K->n_entries; e++) {
			fprintf(f, "    {\"name\": \"%s%s\", \"kernel\": \"%s\", \"archs\": {", K->uri,
			        K->entry[e], K->uri);
			for (int a = 0; a < rt->n_archs; a++) {
				const gen_kernel_res *r = &rt->r[(a * rt->n_kernels + k) * 2 + e];
				fprintf(f, "%s\n      \"%s\": {\"registers\": %d, \"spill_stores\": %d, "
				        "\"spill_loads\": %d, \"stack\": %d, \"smem\": %d, \"barriers\": %d, "
				        "\"cmem0\": %d}", a ? "," : "", p->spec->archs[a], r->regs,
				        r->spill_stores, r->spill_loads, r->stack, r->smem, r->barriers,
				        r->cmem0);
			}
			fprintf(f, "}}%s\n", ++n_out < total ? "," : "");
		}
	}
	fprintf(f, "  ]\n}\n");
	fclose(f);
	int rc = buf ? gen_jit_write_file(path, buf, len, err) : sw_errf(err, SW_ENOMEM, "out of memory");
	free(buf);
	return rc;
}

static long long kparam(const gen_kernel *k, const char *name)
{
	for (int i = 0; i < k->n_params; i++)
		if (!strcmp(k->params[i].name, name))
			return k->params[i].i;
	return 0;
}

/* One kernel's source as NVRTC compiles it on its own (the prelude goes in
 * front at compile time): kernels/philox.h when it draws random numbers, the
 * generated-from line, the baked mask table when it has one, the rendered
 * template. with_philox false: the philox text is left to the caller (the
 * whole kernels.cu has it once). */
static int kernel_source(const gen_plan *p, int ki, const char *src_dir, const char *philox,
                         bool with_philox, char **out, sw_err *err)
{
	gen_kernel kk = p->kernels[ki];
	char path[1024], *src = NULL, *buf = NULL;
	size_t len = 0;
	int rc;
	for (int i = 0; i < kk.n_params; i++) {
		if (!strcmp(kk.params[i].name, "NAME"))
			kk.params[i].s = kk.uri;
		else if (!strcmp(kk.params[i].name, "TREE"))
			kk.params[i].s = kk.tree_id;
	}
	snprintf(path, sizeof(path), "%s/templates/%s", src_dir, kk.tmpl);
	if ((rc = gen_render_file(path, kk.params, kk.n_params, &src, err)))
		return rc;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		free(src);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	if (with_philox && (kk.prefix & GEN_PREFIX_PHILOX))
		fprintf(f, "%s\n", philox);
	const char *nl = strchr(src, '\n');
	size_t head = nl ? (size_t)(nl - src) + 1 : 0;
	fwrite(src, 1, head, f);
	if (kk.prefix & GEN_PREFIX_MASK) {
		int T = (int)kparam(&kk, "T"), nb = (int)kparam(&kk, "N_BLK"), mw = (nb + 63) / 64;
		uint64_t *rows = calloc((size_t)T * mw, sizeof(*rows));
		if (rows) {
			gen_plan_kernel_mask(p, &kk, T, nb, rows);
			fprintf(f, "DEV_CONST uint64_t %s_mask[%d] = {", kk.uri, T * mw);
			for (int i = 0; i < T * mw; i++)
				fprintf(f, "%s0x%llxull", i ? ", " : "", (unsigned long long)rows[i]);
			fprintf(f, "};\n");
		}
		free(rows);
	}
	fputs(src + head, f);
	fclose(f);
	free(src);
	if (!buf)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	*out = buf;
	return 0;
}

/* kernels.cu: the header line, philox.h once when any kernel needs it, then
 * every kernel with its mask, then the set-conditional kernel. ksrc[k] gets
 * each kernel's standalone source, ksrc[n_kernels] the set-conditional's. */
static int render_all(const gen_plan *p, const char *src_dir, const char *philox,
                      const char *set_cond, char **ksrc, char **out, size_t *out_len, sw_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc = 0, any_philox = 0;
	if (!f)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	for (int k = 0; k < p->n_kernels; k++)
		any_philox |= p->kernels[k].prefix & GEN_PREFIX_PHILOX;
	fprintf(f, "/* GENERATED by specwright build (engine \"%s\"): %d kernels; DO NOT EDIT. "
	        "Compiled with kernels/prelude_cuda.h prepended (NVRTC) or prelude_emu.h "
	        "(emulator). */\n", p->spec->name, p->n_kernels);
	if (any_philox)
		fprintf(f, "\n/* ---- kernels/philox.h ---- */\n%s\n", philox);
	for (int k = 0; k < p->n_kernels && !rc; k++) {
		char *src = NULL;
		if (!(rc = kernel_source(p, k, src_dir, philox, false, &src, err)))
			fprintf(f, "\n/* ---- %s ---- */\n%s", p->kernels[k].uri, src);
		free(src);
		if (!rc)
			rc = kernel_source(p, k, src_dir, philox, true, &ksrc[k], err);
	}
	/* the cuda backend's IF-node setter rides along (NVRTC only) */
	fprintf(f, "\n/* ---- kernels/graph_set_cond.cuh ---- */\n%s", set_cond);
	if (!rc && !(ksrc[p->n_kernels] = strdup(set_cond)))
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	if (!buf)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	*out = buf;
	*out_len = len;
	return 0;
}

/* kernels/philox.h and kernels/graph_set_cond.cuh under src_dir: what
 * kernels.cu holds besides the templates. */
static int read_prefixes(const char *src_dir, char **philox, char **set_cond, sw_err *err)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/kernels/philox.h", src_dir);
	if (!(*philox = sw_read_file(path, SW_CAP_SOURCE, NULL)))
		return sw_errf(err, SW_EIO, "%s: cannot read: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/kernels/graph_set_cond.cuh", src_dir);
	if (!(*set_cond = sw_read_file(path, SW_CAP_SOURCE, NULL))) {
		free(*philox);
		*philox = NULL;
		return sw_errf(err, SW_EIO, "%s: cannot read: %s", path, strerror(errno));
	}
	return 0;
}

int gen_build_render(const gen_plan *p, const char *src_dir, char **out, size_t *out_len,
                     sw_err *err)
{
	char *philox = NULL, *set_cond = NULL;
	char **ksrc = NULL;
	int rc = read_prefixes(src_dir, &philox, &set_cond, err);
	if (!rc && !(ksrc = calloc((size_t)p->n_kernels + 1, sizeof(*ksrc))))
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
	if (!rc)
		rc = render_all(p, src_dir, philox, set_cond, ksrc, out, out_len, err);
	for (int k = 0; ksrc && k <= p->n_kernels; k++)
		free(ksrc[k]);
	free(ksrc);
	free(philox);
	free(set_cond);
	return rc;
}

/* --- per-kernel compiles (cached, in parallel) and the nvJitLink link ----- */

typedef struct kjob {
	int k, a;              /* kernel, arch */
	char path[1200];       /* cache entry */
	uint64_t key[2];
	void *cubin;
	size_t cubin_len;
	char *log;
	int rc;
	sw_err err;
} kjob;

typedef struct kpool {
	gen_nvrtc *nv;
	const gen_plan *p;
	const char *prelude;
	char **ksrc;
	kjob *jobs;
	int n_jobs, next;
	pthread_mutex_t mu;
} kpool;

static void *kpool_worker(void *arg)
{
	kpool *kp = arg;
	for (;;) {
		pthread_mutex_lock(&kp->mu);
		int j = kp->next < kp->n_jobs ? kp->next++ : -1;
		pthread_mutex_unlock(&kp->mu);
		if (j < 0)
			return NULL;
		kjob *J = &kp->jobs[j];
		if (J->cubin) /* a cache hit */
			continue;
		const char *uri = J->k < kp->p->n_kernels ? kp->p->kernels[J->k].uri : "graph_set_cond";
		J->rc = gen_nvrtc_compile_x(kp->nv, kp->prelude, kp->ksrc[J->k], uri,
		                            kp->p->spec->archs[J->a], true, &J->cubin, &J->cubin_len,
		                            NULL, 0, NULL, &J->log, &J->err);
		if (!J->rc && !J->log)
			J->log = calloc(1, 1);
		if (J->log)
			drop_timing_lines(J->log);
		if (!J->rc)
			J->rc = gen_jit_cache_put(J->path, J->key, J->cubin, J->cubin_len, J->log, &J->err);
	}
}

/* Links one arch's relocatable per-kernel cubins into one. */
static int link_arch(gen_nvjitlink *jl, const char *arch, const kjob *jobs, int n, void **out,
                     size_t *out_len, sw_err *err)
{
	const void **cubins = calloc((size_t)(n ? n : 1), sizeof(*cubins));
	size_t *lens = calloc((size_t)(n ? n : 1), sizeof(*lens));
	int rc;
	if (!cubins || !lens) {
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
		goto out_free;
	}
	for (int i = 0; i < n; i++) {
		cubins[i] = jobs[i].cubin;
		lens[i] = jobs[i].cubin_len;
	}
	rc = gen_nvjitlink_cubins(jl, arch, cubins, lens, n, out, out_len, err);
out_free:
	free(cubins);
	free(lens);
	return rc;
}

static int write_manifest(const char *dir, const gen_spec *s, const char *json, size_t json_len,
                          const char *nvrtc_version, sw_err *err);


/* The digest of the weights behind the plan's `tag`.* buffers (core/digest.h):
 * each buffer in plan order, each layer of a layered one, as bind uploads
 * them (runtime/engine/engine.c upload_weights), read from w. */
static int weights_digest(const gen_plan *p, const char *tag, const gen_weights_src *w,
                          char *out, size_t n, sw_err *err)
{
	sw_digest d;
	sw_digest_init(&d);
	const size_t tl = strlen(tag);
	int rc = 0;
	for (int i = 0; i < p->n_bufs && !rc; i++) {
		const gen_buf *b = &p->bufs[i];
		if (strcmp(b->kind, "weight") || strncmp(b->name, tag, tl) || b->name[tl] != '.')
			continue;
		const char *field = b->name + tl + 1;
		const bool layered = strcmp(field, "tok_embd") && strcmp(field, "out_norm") &&
		                     strcmp(field, "lm_head") && strcmp(field, "inv_freq") &&
		                     strcmp(field, "mask_embd") && strcmp(field, "fc") &&
		                     strcmp(field, "fc_norm") && strcmp(field, "d2t") &&
		                     strcmp(field, "t2d");
		/* a fused buffer (core/wparts.h): each part over the layers, as
		 * the unfused engine's buffers would be */
		const char *parts[SW_WPARTS_MAX];
		int np = sw_wparts(field, parts);
		if (!np) {
			parts[0] = field;
			np = 1;
		}
		for (int q = 0; q < np && !rc; q++)
			for (int l = 0; l < (layered ? (int)b->shape[0] : 1) && !rc; l++) {
				const char *f = parts[q];
				size_t k = 0;
				const float *x = w->get(w->h, f, layered ? l : -1, &k);
				if (!x)
					rc = sw_errf(err, SW_EINVAL, "%s: no weight %s (layer %d) for buffer %s",
					             w->path, f, layered ? l : -1, b->name);
				else
					sw_digest_weight(&d, f, layered ? l : -1, x, k);
			}
	}
	if (!rc)
		sw_digest_format(&d, out, n);
	return rc;
}

static const float *target_wget(const void *h, const char *field, int layer, size_t *n)
{
	return rt_model_weight(h, field, layer, n);
}

/* Binds the engine to its weights (bind refuses others, issue 16): the
 * digests of the target's and of the drafter's (gen_drafter.weights_open)
 * in the plan. */
static int plan_digests(gen_plan *plan, const gen_spec *s, sw_err *err)
{
	int rc;
	if (!s->target.from_shape) {
		rt_model *m = rt_model_load(s->target.path, err);
		if (!m)
			return sw_err_prefix(err, "digest of the target's weights");
		const gen_weights_src w = {.path = s->target.path, .h = m, .get = target_wget};
		rc = weights_digest(plan, "target", &w, plan->target_digest,
		                    sizeof(plan->target_digest), err);
		rt_model_free(m);
		if (rc)
			return rc;
	}
	gen_weights_src w = {0};
	if (plan->drafter->weights_open && plan->drafter->weights_open(s, &w, err))
		return sw_err_prefix(err, "digest of the draft's weights");
	if (!w.h)
		return 0;
	rc = weights_digest(plan, "draft", &w, plan->draft_digest, sizeof(plan->draft_digest), err);
	w.close(w.h);
	return rc;
}

static int build_into(const gen_spec *s, const gen_build_opts *o, gen_build_stats *st, sw_err *err)
{
	const char *src_dir = o->src_dir ? o->src_dir : getenv("SW_SRC_DIR");
	const char *cache = gen_build_cache_dir(o);
	char path[1100];
	gen_plan plan;
	char *src = NULL, *prelude = NULL, *json = NULL, *philox = NULL, *set_cond = NULL;
	char **ksrc = NULL;
	kjob *jobs = NULL;
	int n_jobs = 0;
	gen_nvjitlink *jl = NULL;
	size_t src_len = 0, json_len = 0;
	gen_nvrtc *nv = NULL;
	res_table rt = {0};
	int rc;
	double t0 = sw_now_s();

	if (!src_dir || !*src_dir)
		src_dir = ".";
	memset(st, 0, sizeof(*st));
	if (gen_jit_mkdirs(o->out_dir))
		return sw_errf(err, SW_EIO, "%s: cannot create the engine directory: %s", o->out_dir,
		               strerror(errno));
	if ((rc = gen_plan_build(s, &plan, err)))
		return rc;
	if ((rc = gen_plan_check_restrict(&plan, src_dir, err)))
		goto out_free_plan;
	st->n_kernels = plan.n_kernels;
	st->n_ops = plan.n_ops;
	if ((rc = plan_digests(&plan, s, err)))
		goto out_free_plan;

	/* engine.json */
	FILE *f = open_memstream(&json, &json_len);
	if (!f) {
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
		goto out_free_plan;
	}
	rc = gen_plan_write_json(&plan, f);
	fclose(f);
	if (rc || !json) {
		rc = sw_errf(err, SW_ENOMEM, "engine.json: cannot format");
		goto out_free;
	}
	/* engine.json is written last (build_files), with the list of every
	 * other file */

	/* kernels.cu, and each kernel's own source for the per-kernel compiles */
	if ((rc = read_prefixes(src_dir, &philox, &set_cond, err)))
		goto out_free;
	if (!(ksrc = calloc((size_t)plan.n_kernels + 1, sizeof(*ksrc)))) {
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
		goto out_free;
	}
	if ((rc = render_all(&plan, src_dir, philox, set_cond, ksrc, &src, &src_len, err)))
		goto out_free;
	snprintf(path, sizeof(path), "%s/kernels.cu", o->out_dir);
	if ((rc = gen_jit_write_file(path, src, src_len, err)))
		goto out_free;
	if (o->log)
		fprintf(o->log, "build: %s: %d phases, %d ops, %d kernels, arena %.3f GiB\n", s->name,
		        plan.n_phases, plan.n_ops, plan.n_kernels, plan.arena_bytes / 1073741824.0);
	if (o->no_compile)
		goto out_done;
	/* compile jobs per arch: the plan's kernels, then the set-conditional one */
	const int nk = plan.n_kernels + 1;

	/* NVRTC */
	nv = gen_nvrtc_open(err);
	if (!nv) {
		rc = sw_err_prefix(err, "cannot compile the engine's kernels (use --no-compile to "
		                   "plan and render without NVRTC)");
		goto out_free;
	}
	if ((rc = gen_nvrtc_version(nv, st->nvrtc_version, sizeof(st->nvrtc_version), err))) {
		sw_err_prefix(err, "cannot compile the engine's kernels (use --no-compile to plan and "
		              "render without NVRTC)");
		goto out_free;
	}
	snprintf(path, sizeof(path), "%s/kernels", src_dir);
	if (!(prelude = gen_nvrtc_prelude_load(path, err))) {
		rc = err ? err->code : SW_EIO;
		goto out_free;
	}
	if (gen_jit_mkdirs(cache)) {
		rc = sw_errf(err, SW_EIO, "%s: cannot create the compile cache: %s", cache,
		             strerror(errno));
		goto out_free;
	}
	rt.n_archs = s->n_archs;
	rt.n_kernels = plan.n_kernels;
	rt.r = calloc((size_t)s->n_archs * (plan.n_kernels ? plan.n_kernels : 1) * 2, sizeof(*rt.r));
	n_jobs = s->n_archs * nk;
	jobs = calloc((size_t)(n_jobs ? n_jobs : 1), sizeof(*jobs));
	if (!rt.r || !jobs) {
		rc = sw_errf(err, SW_ENOMEM, "out of memory");
		goto out_free;
	}
	if (!(jl = gen_nvjitlink_open(err))) {
		rc = sw_err_prefix(err, "libnvJitLink cannot be loaded: it links the per-kernel "
		                   "cubins into kernels.sm_XX.cubin (use --no-compile to plan and "
		                   "render only)");
		goto out_free;
	}
	double tc = sw_now_s();
	/* One NVRTC program per (kernel, arch), each a cache entry of its own:
	 * engines that share a kernel (the same shapes under another tree, the
	 * draft's and the target's identical layers) compile it once. */
	for (int a = 0; a < s->n_archs; a++)
		for (int k = 0; k < nk; k++) {
			kjob *J = &jobs[a * nk + k];
			J->k = k;
			J->a = a;
			gen_jit_cache_key(J->key, prelude, ksrc[k], GEN_NVRTC_RDC_OPTS, s->archs[a],
			          st->nvrtc_version);
			snprintf(J->path, sizeof(J->path), "%s/%016" PRIx64 "%016" PRIx64 ".%s.kernel.entry",
			         cache, J->key[0], J->key[1], s->archs[a]);
			if (!gen_jit_cache_get(J->path, J->key, &J->cubin, &J->cubin_len, &J->log))
				st->cache_hits++;
			else
				st->cache_misses++;
		}
	if (st->cache_misses) {
		kpool kp = {.nv = nv, .p = &plan, .prelude = prelude, .ksrc = ksrc, .jobs = jobs,
		            .n_jobs = n_jobs};
		long nproc = sysconf(_SC_NPROCESSORS_ONLN);
		int nt = nproc < 1 ? 1 : nproc > 16 ? 16 : (int)nproc;
		nt = nt > st->cache_misses ? st->cache_misses : nt;
		pthread_t th[16];
		int started = 0;
		if (o->log)
			fprintf(o->log, "build: NVRTC %s: %d kernel compiles on %d threads ...\n",
			        st->nvrtc_version, st->cache_misses, nt);
		pthread_mutex_init(&kp.mu, NULL);
		for (int i = 1; i < nt; i++)
			started += !pthread_create(&th[started], NULL, kpool_worker, &kp);
		kpool_worker(&kp);
		for (int i = 0; i < started; i++)
			pthread_join(th[i], NULL);
		pthread_mutex_destroy(&kp.mu);
		for (int j = 0; j < n_jobs && !rc; j++)
			if (jobs[j].rc) {
				*err = jobs[j].err;
				rc = jobs[j].rc;
			}
		if (rc)
			goto out_free;
	}
	gen_kernel_res res[4];
	for (int a = 0; a < s->n_archs && !rc; a++) {
		for (int k = 0; k < plan.n_kernels && !rc; k++) {
			const gen_kernel *K = &plan.kernels[k];
			int n = gen_nvrtc_parse_resources(jobs[a * nk + k].log, res, 4);
			for (int e = 0; e < K->n_entries && !rc; e++) {
				char ename[256];
				gen_kernel_res *dst = &rt.r[(a * plan.n_kernels + k) * 2 + e];
				snprintf(ename, sizeof(ename), "%s%s", K->uri, K->entry[e]);
				for (int i = 0; i < n; i++)
					if (!strcmp(res[i].name, ename))
						*dst = res[i];
				if (!dst->name[0])
					rc = sw_errf(err, SW_EINVAL, "%s (%s): ptxas reported no resources "
					             "for kernel %s", "kernels.cu", s->archs[a], ename);
				int sp = dst->spill_stores > dst->spill_loads ? dst->spill_stores
				                                              : dst->spill_loads;
				if (sp > st->max_spill_bytes)
					st->max_spill_bytes = sp;
			}
		}
		void *cubin = NULL;
		size_t cubin_len = 0;
		if (!rc)
			rc = link_arch(jl, s->archs[a], jobs + a * nk, nk, &cubin, &cubin_len, err);
		if (!rc) {
			snprintf(path, sizeof(path), "%s/kernels.%s.cubin", o->out_dir, s->archs[a]);
			rc = gen_jit_write_file(path, cubin, cubin_len, err);
		}
		free(cubin);
	}
	if (rc)
		goto out_free;

	/* PTX for the lowest arch: the JIT fallback on GPUs without a cubin */
	{
		int lo = 0;
		for (int a = 1; a < s->n_archs; a++)
			if (atoi(s->archs[a] + 3) < atoi(s->archs[lo] + 3))
				lo = a;
		char varch[24], cpath[1200], *log = NULL;
		void *ptx = NULL;
		size_t ptx_len = 0;
		uint64_t key[2];
		snprintf(varch, sizeof(varch), "compute_%s", s->archs[lo] + 3);
		gen_jit_cache_key(key, prelude, src, GEN_NVRTC_PTX_OPTS, varch, st->nvrtc_version);
		snprintf(cpath, sizeof(cpath), "%s/%016" PRIx64 "%016" PRIx64 ".%s.ptx.entry", cache,
		         key[0], key[1], varch);
		if (!gen_jit_cache_get(cpath, key, &ptx, &ptx_len, &log)) {
			st->cache_hits++;
		} else {
			st->cache_misses++;
			char *pt = NULL;
			rc = gen_nvrtc_ptx(nv, prelude, src, "kernels.cu", varch, &pt, &ptx_len, err);
			ptx = pt;
			if (!rc)
				rc = gen_jit_cache_put(cpath, key, ptx, ptx_len, "", err);
		}
		if (!rc) {
			snprintf(path, sizeof(path), "%s/kernels.ptx", o->out_dir);
			rc = gen_jit_write_file(path, ptx, ptx_len, err);
		}
		free(ptx);
		free(log);
		if (rc)
			goto out_free;
	}
	st->compile_seconds = sw_now_s() - tc;

	snprintf(path, sizeof(path), "%s/resources.json", o->out_dir);
	if ((rc = write_resources(path, &plan, &rt, err)))
		goto out_free;
	if (st->max_spill_bytes && !s->allow_spills) {
		for (int a = 0; a < s->n_archs; a++)
			for (int k = 0; k < 2 * plan.n_kernels; k++) {
				const gen_kernel_res *r = &rt.r[a * plan.n_kernels * 2 + k];
				if (r->spill_stores || r->spill_loads) {
					rc = sw_errf(err, SW_ERANGE, "%s: kernel %s spills on %s (%d bytes "
					             "stores, %d bytes loads); set \"allow_spills\": true to "
					             "accept it (nothing was written)", s->file, r->name,
					             s->archs[a], r->spill_stores, r->spill_loads);
					goto out_free;
				}
			}
	}
out_done:
	if ((rc = write_manifest(o->out_dir, s, json, json_len, st->nvrtc_version, err)))
		goto out_free;
	st->seconds = sw_now_s() - t0;
	if (o->log)
		fprintf(o->log, "build: written in %.2f s (NVRTC %s: %d cache hits, %d misses, "
		        "%.2f s compiling)\n", st->seconds,
		        st->nvrtc_version[0] ? st->nvrtc_version : "not run", st->cache_hits,
		        st->cache_misses, st->compile_seconds);
	rc = 0;
out_free:
	for (int j = 0; j < n_jobs; j++) {
		free(jobs[j].cubin);
		free(jobs[j].log);
	}
	free(jobs);
	if (ksrc)
		for (int k = 0; k <= plan.n_kernels; k++)
			free(ksrc[k]);
	free(ksrc);
	free(philox);
	free(set_cond);
	gen_nvjitlink_close(jl);
	free(rt.r);
	free(prelude);
	gen_nvrtc_close(nv);
	free(src);
	free(json);
out_free_plan:
	gen_plan_free(&plan);
	return rc;
}

/* One file's integrity record into m: `"name": {"bytes": N, "sha256":
 * "64 hex"}` after sep. */
static int file_record(FILE *m, const char *sep, const char *name, const char *path, sw_err *err)
{
	char hex[65];
	uint64_t n = 0;
	int rc = sw_sha256_file(path, hex, &n, err);
	if (!rc)
		fprintf(m, "%s\n    \"%s\": {\"bytes\": %" PRIu64 ", \"sha256\": \"%s\"}", sep, name, n, hex);
	return rc;
}

/* Whether name may stand in engine.json as written (no quote, backslash
 * or control character to escape). */
static bool plain_json_name(const char *name)
{
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == '"' || *c == '\\')
			return false;
	return name[0] != 0;
}

/* $.draft_files (formats/engine_files.h): the files of the drafter the
 * engine binds, each with its size and sha256 (issue 40), which `run`,
 * `serve`, `profile` and `bundle` check before the drafter is loaded
 * (runtime/engine/manifest_files.c): an EAGLE-3 head's or a block
 * drafter's config.json and model.safetensors (the d2t / t2d maps are
 * tensors there; a shape-only head has config.json alone), a draft
 * model's file (".", the path itself) or its HF directory's config.json
 * and safetensors. The weights digest ($.spec.draft.digest) covers the
 * uploaded floats only: a head's taps or norm_before_residual in
 * config.json, or a dropped t2d the loader would rebuild, change no float.
 * Nothing for a drafter without files (n-gram, layer-skip, a shape). */
static int write_draft_files(FILE *m, const gen_spec *s, sw_err *err)
{
	const gen_drafter *dr = gen_drafter_of(s->draft_kind);
	if (!dr || !dr->files || s->draft.from_shape || !s->draft.path[0])
		return 0;
	char path[1100];
	struct stat st;
	int rc = 0, n = 0;
	char *names[64];
	if (stat(s->draft.path, &st))
		return sw_errf(err, SW_EIO, "%s: cannot record the drafter's files: %s", s->draft.path,
		               strerror(errno));
	fprintf(m, ",\n  \"" RT_ENGINE_DRAFT_FILES "\": {");
	if (!S_ISDIR(st.st_mode)) {
		rc = file_record(m, "", ".", s->draft.path, err);
		fprintf(m, "\n  }");
		return rc;
	}
	if ((n = dr->files(s, names, 64, err)) < 0) {
		rc = n;
		n = 0;
	}
	for (int i = 0; i < n && !rc; i++) {
		if (!names[i])
			rc = sw_errf(err, SW_ENOMEM, "out of memory");
		else if (!plain_json_name(names[i]))
			rc = sw_errf(err, SW_EINVAL, "%s: a drafter file whose name needs escaping cannot be "
			             "recorded: rename it", s->draft.path);
		if (rc)
			break;
		snprintf(path, sizeof(path), "%.1000s/%.90s", s->draft.path, names[i]);
		rc = file_record(m, i ? "," : "", names[i], path, err);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	fprintf(m, "\n  }");
	return rc;
}

/* engine.json with a "files" member: every other file of the directory
 * with its size and sha256, which the executor checks at load
 * (runtime/formats/engine_files.c): a garbage cubin, a missing
 * resources.json or an edited kernels.cu is refused, and host-emulate
 * compiles only what the build wrote; and $.draft_files, the drafter's
 * files (write_draft_files). Then engine.sum, engine.json's own size and
 * sha256 (the record inside engine.json cannot hold its own digest), so
 * any edit of engine.json is refused too: by the deployable runtime, which
 * has only this record (and, in a bundle, bundle.json); the CLI also
 * re-plans the engine from its spec echo (gen/replan.h), which an edit
 * that recomputes these records does not pass. */
static int write_manifest(const char *dir, const gen_spec *s, const char *json, size_t json_len,
                          const char *nvrtc_version, sw_err *err)
{
	char path[1400], *buf = NULL;
	size_t blen = 0;
	FILE *m = open_memstream(&buf, &blen);
	if (!m)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	size_t end = json_len;
	while (end > 0 && json[end - 1] != '}')
		end--;
	if (!end) {
		fclose(m);
		free(buf);
		return sw_errf(err, SW_EINVAL, "engine.json: not an object");
	}
	end--; /* the closing brace */
	while (end > 0 && (json[end - 1] == '\n' || json[end - 1] == ' '))
		end--;
	fwrite(json, 1, end, m);
	/* the driver floor of what NVRTC X.Y wrote: its PTX (ISA of X.Y) needs a
	 * driver of X.Y or later to JIT, its cubins one of X.0 or later (minor
	 * version compatibility); the backend falls back to PTX on an arch
	 * without a cubin, so the floor is X.Y (runtime/engine checks it at
	 * bind against cuDriverGetVersion) */
	int vmaj = 0, vmin = 0;
	if (nvrtc_version && sscanf(nvrtc_version, "%d.%d", &vmaj, &vmin) == 2)
		fprintf(m, ",\n  \"toolkit\": {\"nvrtc\": \"%d.%d\", \"min_driver\": %d}", vmaj, vmin,
		        1000 * vmaj + 10 * vmin);
	int rc = write_draft_files(m, s, err);
	fprintf(m, ",\n  \"files\": {");
	DIR *d = rc ? NULL : opendir(dir);
	int n = 0;
	struct dirent *de;
	char names[64][256];
	while (d && (de = readdir(d)) && n < 64)
		if (de->d_name[0] != '.' && strcmp(de->d_name, "engine.json") &&
		    strlen(de->d_name) < sizeof(names[0]))
			snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
	if (d)
		closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
	for (int i = 0; i < n && !rc; i++) {
		snprintf(path, sizeof(path), "%.1100s/%.255s", dir, names[i]);
		rc = file_record(m, i ? "," : "", names[i], path, err);
	}
	fprintf(m, "\n  }\n}\n");
	fclose(m);
	if (!rc) {
		snprintf(path, sizeof(path), "%s/engine.json", dir);
		rc = gen_jit_write_file(path, buf, blen, err);
	}
	if (!rc) {
		char sum[160], hex[65];
		sw_sha256 h;
		sw_sha256_init(&h);
		sw_sha256_update(&h, buf, blen);
		sw_sha256_hex(&h, hex);
		int sl = snprintf(sum, sizeof(sum), "{\"engine.json\": {\"bytes\": %zu, \"sha256\": "
		                  "\"%s\"}}\n", blen, hex);
		snprintf(path, sizeof(path), "%s/" RT_ENGINE_SUM, dir);
		rc = gen_jit_write_file(path, sum, (size_t)sl, err);
	}
	free(buf);
	return rc;
}

/* An existing -o is replaced only when it holds an engine this program
 * built and nothing else (runtime/formats/engine_files.h). */
static int engine_owned(const char *dir, void *ctx, sw_err *err)
{
	(void)ctx;
	return rt_engine_dir_is_built(dir, err);
}

/* Builds into a fresh temporary beside the target and puts it in place as
 * the last step, after every check (core/output.h): a kill, a full disk or
 * a refused build (spills) leaves the old directory (or none), never a
 * partial one, and two builds into one directory each land whole. An
 * existing directory is replaced only if it is an engine directory (or
 * empty); nothing else of the user's is ever removed. */
int gen_build(const gen_spec *s, const gen_build_opts *o, gen_build_stats *st, sw_err *err)
{
	sw_outdir od;
	int rc = sw_outdir_begin(&od, o->out_dir, "an engine directory", engine_owned, NULL, err);
	if (rc)
		return rc;
	gen_build_opts to = *o;
	to.out_dir = od.tmp;
	if ((rc = build_into(s, &to, st, err))) {
		sw_outdir_abort(&od);
		return rc;
	}
	if ((rc = sw_outdir_commit(&od, err)))
		return rc;
	if (o->log)
		fprintf(o->log, "build: %s is in place\n", od.target);
	return 0;
}

/* --- `specwright build SPEC.json -o DIR [--no-compile] [--cache DIR]` ------- */

int gen_build_main(int argc, char **argv)
{
	const char *spec_path = NULL;
	gen_build_opts o = {.log = stderr};
	gen_build_stats st;
	sw_err err = {0};
	gen_spec *s;

	for (int i = 2; i < argc; i++) {
		if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc)
			o.out_dir = argv[++i];
		else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
			o.cache_dir = argv[++i];
		else if (!strcmp(argv[i], "--no-compile"))
			o.no_compile = true;
		else if (argv[i][0] != '-' && !spec_path)
			spec_path = argv[i];
		else {
			fprintf(stderr, "specwright build: unexpected argument '%s'\n", argv[i]);
			spec_path = NULL;
			break;
		}
	}
	if (!spec_path || !o.out_dir) {
		fprintf(stderr, "usage: specwright build SPEC.json -o ENGINE_DIR [--no-compile] "
		        "[--cache DIR]\n  (cache default: $SPECWRIGHT_CACHE, else build/cache)\n");
		return 2;
	}
	if (!(s = malloc(sizeof(*s)))) {
		fprintf(stderr, "specwright build: out of memory\n");
		return 1;
	}
	int rc = gen_spec_load(spec_path, NULL, s, &err);
	if (!rc)
		rc = gen_build(s, &o, &st, &err);
	free(s);
	if (rc) {
		fprintf(stderr, "specwright build: error: %s\n", err.msg);
		return 1;
	}
	return 0;
}
