/* The host backend (device.h): device memory is host memory, GEMMs run on
 * the engine's 16-bit weights (host_gemm.c; the BLAS in fp32 for large m),
 * and kernels run either natively (host_ops.c:
 * the kernels/ref specification of each op) or as the generated kernels
 * themselves in the SIMT emulator (emulate mode: engine_dir/kernels.cu
 * compiled against prelude_emu.h). A graph is the recorded op list, with
 * IF regions, replayed. Not fast and not meant to be: it is the executable
 * specification the cuda backend is compared with. */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device.h"
#include "kernels/emu.h"
#include "kernels/half.h"
#include "core/fileio.h"
#include "core/timing.h"
#include "host_gemm.h"
#include "host_ops.h"
#include "host_repack.h"

/* the cuda backend's limit too, so a graph that captures here captures there */
#define HOST_MAX_IF_DEPTH 8

typedef struct host_alloc {
	uintptr_t p;
	size_t bytes;
} host_alloc;

/* One recorded step: an op; the start of an IF region that skips to
 * record `end` when the int32 at flag is 0; or the start (n_rows > 0: its
 * tokens, n_rows, cap) or end (n_rows 0) of a rows region. */
enum { HOST_REC_OP = 0, HOST_REC_IF, HOST_REC_ROWS };
typedef struct host_rec {
	int kind;
	rt_op op;
	rt_dptr flag;
	int end;
	int n_rows, cap;
} host_rec;

typedef struct host_graph {
	host_rec *recs;
	int n, cap;
} host_graph;

typedef struct host_dev {
	int mode;                 /* enum rt_host_mode */
	char src_dir[512], cache_dir[512];
	rt_emu_compile_fn emu_compile; /* emulate mode: kernels.cu -> loaded module */
	host_alloc *allocs;
	int n_allocs, cap_allocs;
	int64_t blas_min_m;       /* GEMMs with m >= this go to the BLAS */
	float *a32, *w32;         /* the BLAS path's scratch: A and W widened */
	size_t a32_n, w32_n;
	void **mods;              /* emulate: dlopen'ed kernel modules */
	int n_mods;
	host_graph *rec;          /* the graph being captured */
	int if_stack[HOST_MAX_IF_DEPTH], depth;
	bool in_rows;             /* capture: a rows region is open */
	int rows_full, rows_live; /* the rows region running now (0, 0: none) */
} host_dev;

static int op_fail(rt_dev *d, const rt_op *op, int rc, sw_err *err)
{
	char layer[24] = "";
	if (op->layer >= 0)
		snprintf(layer, sizeof(layer), ", layer %d", op->layer);
	sw_err_prefix(err, "%s: op %s (%s%s)", d->desc, op->name, op->op, layer);
	return rc;
}

static int refuse_capture(rt_dev *d, const char *what, sw_err *err)
{
	return sw_errf(err, SW_EINVAL, "%s: %s inside a graph capture (only launches can be "
	               "captured)", d->desc, what);
}

/* ---- GEMM ---- */

static float *grow(float **buf, size_t *have, size_t need)
{
	if (*have >= need)
		return *buf;
	float *p = realloc(*buf, sizeof(float) * need);
	if (!p)
		return NULL;
	*buf = p;
	*have = need;
	return p;
}

/* C (m, n) = A (m, k) W (n, k)^T. Below blas_min_m rows the 16-bit GEMM
 * (weights streamed once, widened in registers); from there on the GEMM is
 * arithmetic-bound and OpenBLAS's packed sgemm is faster, so A and W are
 * widened into scratch for this call (no copy outlives it). q8_0_a8 and
 * gguf_a8 always take the int8 GEMM: its numbers are the engine's, at
 * every m. */
static int host_gemm(rt_dev *d, const rt_op *op, sw_err *err)
{
	host_dev *h = d->impl;
	const int64_t m = op->rows_live && op->m == op->rows_full ? op->rows_live : op->m;
	const int64_t n = op->n, k = op->k;
	float *C = (float *)(uintptr_t)op->argval[0];
	const uint16_t *A = (const uint16_t *)(uintptr_t)op->argval[1];
	const uint16_t *W = (const uint16_t *)(uintptr_t)op->argval[2];
	const bool bf16 = op->dtype == RT_BF16, q8 = op->dtype == RT_Q8_0;
	const bool a8 = op->dtype == RT_Q8_0_A8, gg = op->dtype == RT_GGUF_A8;

	if (op->dtype != RT_BF16 && op->dtype != RT_FP16 && !q8 && !a8 && !gg)
		return sw_errf(err, SW_ENOTSUP, "GEMM dtype %d (bf16, fp16, q8_0, q8_0_a8 or gguf_a8 "
		               "expected)", op->dtype);
	if (m < 0 || n < 0 || k < 0)
		return sw_errf(err, SW_EINVAL, "GEMM shape m=%lld n=%lld k=%lld", (long long)m,
		               (long long)n, (long long)k);
	if (m == 0 || n == 0)
		return 0;
	if (m < h->blas_min_m || k == 0 || a8 || gg) { /* k = 0: some BLAS builds reject it */
		int rc = gg   ? hg_gemm_gguf_a8(C, A, W, m, n, k, op->wtype, false, HG_PATH_AUTO, 0)
		         : a8 && op->wtype == HG_GGUF_Q8_0R /* repacked at load */
		              ? hg_gemm_q8a8r(C, A, W, m, n, k, false, HG_PATH_AUTO, 0)
		         : a8 ? hg_gemm_q8a8(C, A, W, m, n, k, false, HG_PATH_AUTO, 0)
		         : q8 ? hg_gemm_q8(C, A, W, m, n, k, false, HG_PATH_AUTO, 0)
		              : hg_gemm16(C, A, W, m, n, k, bf16, HG_PATH_AUTO, 0);
		return rc ? sw_errf(err, rc, "GEMM m=%lld n=%lld k=%lld: %s", (long long)m,
		                    (long long)n, (long long)k, rc == SW_ENOMEM ? "out of memory"
		                    : "invalid") : 0;
	}
	if (!grow(&h->a32, &h->a32_n, (size_t)(m * k)) || !grow(&h->w32, &h->w32_n, (size_t)(n * k)))
		return sw_errf(err, SW_ENOMEM, "out of memory (GEMM scratch, %lld x %lld)",
		               (long long)(m > n ? m : n), (long long)k);
	hg_to_f32(h->a32, A, m * k, bf16);
	if (q8)
		hg_q8_to_f32(h->w32, W, n, k);
	else
		hg_to_f32(h->w32, W, n * k, bf16);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, h->a32,
	            (int)k, h->w32, (int)k, 0.0f, C, (int)n);
	return 0;
}

/* ---- memory ---- */

/* A native buffer: 256-byte aligned; one of 2 MiB or more (the weights,
 * which every decode step streams whole) on 2 MiB boundaries and advised
 * as transparent huge pages where the kernel offers them (Linux
 * "madvise" mode): a GEMV reading 15-30 MB a call otherwise takes a TLB
 * miss every 4 KiB. The advice only changes the page size, never the
 * contents; free() releases either kind. */
#define HOST_HUGE ((size_t)2 << 20)
static void *host_big_alloc(size_t n)
{
	if (n < HOST_HUGE)
		return aligned_alloc(256, n);
	const size_t r = (n + HOST_HUGE - 1) / HOST_HUGE * HOST_HUGE;
	void *p = aligned_alloc(HOST_HUGE, r);
#ifdef MADV_HUGEPAGE
	if (p)
		(void)madvise(p, r, MADV_HUGEPAGE);
#endif
	return p;
}

static int host_alloc_fn(rt_dev *d, size_t bytes, rt_dptr *out, sw_err *err)
{
	host_dev *h = d->impl;
	*out = 0;
	if (d->capturing)
		return refuse_capture(d, "alloc", err);
	const size_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
	if (h->n_allocs == h->cap_allocs) {
		int cap = h->cap_allocs ? 2 * h->cap_allocs : 16;
		host_alloc *na = realloc(h->allocs, sizeof(*na) * (size_t)cap);
		if (!na)
			return sw_errf(err, SW_ENOMEM, "out of memory");
		h->allocs = na;
		h->cap_allocs = cap;
	}
	/* emulate: emu_alloc's guard zones catch a kernel writing past a buffer */
	void *p = h->mode == RT_HOST_EMULATE ? emu_alloc(n, "device") : host_big_alloc(n);
	if (!p)
		return sw_errf(err, SW_ENOMEM, "%s: alloc of %zu bytes: out of memory", d->desc, bytes);
	memset(p, 0, n); /* emu_alloc fills with 0xff; faults the pages in (huge ones if given) */
	h->allocs[h->n_allocs++] = (host_alloc){(uintptr_t)p, n};
	*out = (rt_dptr)(uintptr_t)p;
	return 0;
}

static void host_free_fn(rt_dev *d, rt_dptr p)
{
	host_dev *h = d->impl;
	if (!p)
		return;
	for (int i = 0; i < h->n_allocs; i++)
		if (h->allocs[i].p == (uintptr_t)p) {
			h->allocs[i] = h->allocs[--h->n_allocs];
			break;
		}
	if (h->mode == RT_HOST_EMULATE)
		emu_free((void *)(uintptr_t)p);
	else
		free((void *)(uintptr_t)p);
}

static int host_upload(rt_dev *d, rt_dptr dst, const void *src, size_t bytes, sw_err *err)
{
	if (d->capturing)
		return refuse_capture(d, "upload", err);
	if (!bytes)
		return 0;
	memcpy((void *)(uintptr_t)dst, src, bytes);
	d->stats.uploads++;
	return 0;
}

static int host_download(rt_dev *d, void *dst, rt_dptr src, size_t bytes, sw_err *err)
{
	if (d->capturing)
		return refuse_capture(d, "download", err);
	if (bytes)
		memcpy(dst, (const void *)(uintptr_t)src, bytes);
	d->stats.downloads++;
	return 0;
}

/* ---- kernels ---- */

/* Issue 24: the Q4_0 / Q4_1 / Q8_0 GEMM weights only GEMMs read, repacked
 * for the vector GEMMs (host_repack.c; results unchanged). At load_kernels,
 * which the engine's bind calls once its weights are uploaded. */
static int repack_weights(rt_dev *d, rt_op *ops, int n, sw_err *err)
{
	const int rc = rt_host_repack_weights(ops, n, false);
	return rc < 0 ? sw_errf(err, rc, "%s: repacking the GGUF GEMM weights: out of memory",
	                        d->desc)
	              : 0;
}

static int host_load_kernels(rt_dev *d, const char *engine_dir, rt_op *ops, int n, sw_err *err)
{
	host_dev *h = d->impl;
	char path[1200], kdir[600], sym[260];
	int rc = repack_weights(d, ops, n, err);
	if (rc)
		return rc;

	if (h->mode == RT_HOST_NATIVE) {
		/* each kernel's implementation kept in its fn (exec_op calls it) */
		for (int i = 0; i < n; i++) {
			if (ops[i].kind != RT_OP_KERNEL)
				continue;
			const rt_host_native_fn f = rt_host_native_find(&ops[i]);
			if (!f)
				return sw_errf(err, SW_ENOTSUP, "%s: op %s: no native host implementation of "
				               "op type '%s' (entry %s); use host-emulate", d->desc, ops[i].name,
				               ops[i].op, ops[i].entry);
			ops[i].fn = (void *)f;
		}
		return 0;
	}
	snprintf(path, sizeof(path), "%s/kernels.cu", engine_dir);
	char *src = sw_read_file(path, SW_CAP_SOURCE, NULL);
	if (!src)
		return sw_errf(err, SW_EIO, "%s: cannot read the generated kernels (host-emulate compiles "
		               "them)", path);
	void **mods = realloc(h->mods, sizeof(*mods) * (size_t)(h->n_mods + 1));
	if (!mods) {
		free(src);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	h->mods = mods;
	void *lib = NULL;
	snprintf(kdir, sizeof(kdir), "%s/kernels", h->src_dir);
	/* one key for every engine: the module's hash covers the source, so
	 * engines with different kernels get different cache entries */
	rc = h->emu_compile(src, "engine-kernels", kdir, h->cache_dir, &lib, err);
	free(src);
	if (rc)
		return sw_err_prefix(err, "%s", path);
	h->mods[h->n_mods++] = lib;
	for (int i = 0; i < n; i++) {
		rt_op *o = &ops[i];
		if (o->kind != RT_OP_KERNEL)
			continue;
		snprintf(sym, sizeof(sym), "%s_emu", o->entry);
		if (!(o->fn = dlsym(lib, sym)))
			return sw_errf(err, SW_EINVAL, "%s: op %s (%s): no kernel %s in the generated source",
			               path, o->name, o->op, o->entry);
	}
	return 0;
}

static bool host_supports_op(rt_dev *d, const rt_op *op)
{
	host_dev *h = d->impl;
	switch (op->kind) {
	case RT_OP_KERNEL:
		return h->mode == RT_HOST_EMULATE || rt_host_native_supports(op);
	case RT_OP_GEMM: /* q8_0, q8_0_a8, gguf_a8: k whole blocks (the manifest checks it too) */
		return op->dtype == RT_BF16 || op->dtype == RT_FP16 ||
		       (rt_dtype_q8(op->dtype) && op->k % HG_Q8_BLOCK == 0) ||
		       (op->dtype == RT_GGUF_A8 && hg_gguf_block(op->wtype) &&
		        op->k % hg_gguf_block(op->wtype) == 0);
	case RT_OP_MEMSET:
		return true;
	default:
		return false;
	}
}

/* Whether op can run; checked at launch and at capture, so a bad op in a
 * graph fails when it is recorded, not on some later replay. */
static int check_op(rt_dev *d, const rt_op *op, sw_err *err)
{
	host_dev *h = d->impl;
	switch (op->kind) {
	case RT_OP_KERNEL:
		if (h->mode == RT_HOST_EMULATE && !op->fn)
			return sw_errf(err, SW_EINVAL, "kernel %s not loaded (load_kernels first)", op->entry);
		if (h->mode == RT_HOST_NATIVE && !op->fn && !rt_host_native_supports(op))
			return sw_errf(err, SW_ENOTSUP, "no native host implementation of op type '%s'; use "
			               "host-emulate", op->op);
		return 0;
	case RT_OP_GEMM:
	case RT_OP_MEMSET:
		return 0;
	default:
		return sw_errf(err, SW_EINVAL, "unknown op kind %d", op->kind);
	}
}

/* timed: add the op's wall time to stats.seconds_ops (eager launches); a
 * graph replay is timed once as a whole, like one cuGraphLaunch, so that
 * the engine's "host overhead" is its own bookkeeping and not ~50 ns of
 * clock reads per op. */
static int exec_op(rt_dev *d, const rt_op *op_in, bool timed, sw_err *err)
{
	host_dev *h = d->impl;
	int rc = 0;
	double t0 = timed ? sw_now_s() : 0.0;
	rt_op live; /* inside a rows region: the op stamped with its live rows */
	const rt_op *op = op_in;
	if (h->rows_live && h->rows_live < h->rows_full) {
		live = *op_in;
		rt_op_fix_argv(&live);
		live.rows_full = h->rows_full;
		live.rows_live = h->rows_live;
		op = &live;
	}

	if ((rc = check_op(d, op, err)))
		return op_fail(d, op, rc, err);
	switch (op->kind) {
	case RT_OP_KERNEL:
		if (h->mode == RT_HOST_NATIVE) { /* fn: set at load_kernels, else the registry */
			rc = op->fn ? ((rt_host_native_fn)op->fn)(op, err) : rt_host_native_run(op, err);
		} else {
			void *argv[RT_OP_MAX_ARGS];
			for (int i = 0; i < RT_OP_MAX_ARGS; i++)
				argv[i] = (void *)&op->argval[i];
			emu_report rep;
			memset(&rep, 0, sizeof(rep));
			emu_dim3 g = {op->grid[0], op->grid[1], op->grid[2]};
			emu_dim3 b = {op->block[0], op->block[1], op->block[2]};
			if (emu_launch((const emu_kernel *)op->fn, g, b, op->dyn_smem, argv, &rep))
				rc = sw_errf(err, SW_EINVAL, "kernel %s: emulator: %s", op->entry, rep.msg);
		}
		break;
	case RT_OP_GEMM:
		rc = host_gemm(d, op, err);
		d->stats.gemms++;
		break;
	case RT_OP_MEMSET:
		if (op->bytes > 0) { /* a rows region zeroes the live rows' share */
			const int64_t b = op->rows_live && op->bytes % op->rows_full == 0
			                      ? op->bytes / op->rows_full * op->rows_live : op->bytes;
			memset((void *)(uintptr_t)op->argval[0], 0, (size_t)b);
		}
		d->stats.memsets++;
		break;
	}
	if (rc)
		return op_fail(d, op, rc, err);
	d->stats.launches++;
	if (timed)
		d->stats.seconds_ops += sw_now_s() - t0;
	return 0;
}

/* ---- graphs ---- */

static host_rec *rec_push(host_graph *g)
{
	if (g->n == g->cap) {
		int cap = g->cap ? 2 * g->cap : 64;
		host_rec *r = realloc(g->recs, sizeof(*r) * (size_t)cap);
		if (!r)
			return NULL;
		g->recs = r;
		g->cap = cap;
	}
	host_rec *r = &g->recs[g->n++];
	memset(r, 0, sizeof(*r));
	return r;
}

static int host_launch(rt_dev *d, const rt_op *op, sw_err *err)
{
	host_dev *h = d->impl;
	if (!d->capturing)
		return exec_op(d, op, true, err);
	int rc = check_op(d, op, err);
	if (rc)
		return op_fail(d, op, rc, err);
	host_rec *r = rec_push(h->rec);
	if (!r)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	r->op = *op;
	rt_op_fix_argv(&r->op);
	return 0;
}

static void graph_free_impl(host_graph *g)
{
	if (g) {
		free(g->recs);
		free(g);
	}
}

static int host_graph_begin(rt_dev *d, sw_err *err)
{
	host_dev *h = d->impl;
	if (d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_begin while already capturing", d->desc);
	if (!(h->rec = calloc(1, sizeof(*h->rec))))
		return sw_errf(err, SW_ENOMEM, "out of memory");
	h->depth = 0;
	d->capturing = true;
	return 0;
}

static int host_graph_if_begin(rt_dev *d, rt_dptr flag, sw_err *err)
{
	host_dev *h = d->impl;
	if (!d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_begin outside a graph capture", d->desc);
	if (h->depth == HOST_MAX_IF_DEPTH)
		return sw_errf(err, SW_ERANGE, "%s: graph_if_begin: more than %d nested regions", d->desc,
		               HOST_MAX_IF_DEPTH);
	if (!flag || flag % 4)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_begin: flag address %#llx is not an aligned "
		               "int32", d->desc, (unsigned long long)flag);
	host_rec *r = rec_push(h->rec);
	if (!r)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	r->kind = HOST_REC_IF;
	r->flag = flag;
	r->end = -1;
	h->if_stack[h->depth++] = h->rec->n - 1;
	return 0;
}

static int host_graph_if_end(rt_dev *d, sw_err *err)
{
	host_dev *h = d->impl;
	if (!d->capturing || h->depth == 0)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_end without a matching graph_if_begin",
		               d->desc);
	h->rec->recs[h->if_stack[--h->depth]].end = h->rec->n;
	return 0;
}

/* The live rows of a region: min(cap, 1 + the last present node), >= 1. */
static void rows_start(host_dev *h, const int32_t *tok, int n_rows, int cap)
{
	int last = 0;
	for (int i = n_rows - 1; i > 0; i--)
		if (tok[i] >= 0) {
			last = i;
			break;
		}
	int L = last + 1 < cap ? last + 1 : cap;
	h->rows_full = n_rows;
	/* native ops only: emulate runs the generated kernels, fixed-shape */
	h->rows_live = h->mode == RT_HOST_NATIVE ? (L < 1 ? 1 : L) : n_rows;
}

static int host_rows_begin(rt_dev *d, rt_dptr tokens, int n_rows, int cap, sw_err *err)
{
	host_dev *h = d->impl;
	if (n_rows < 1 || cap < 1 || !tokens || tokens % 4)
		return sw_errf(err, SW_EINVAL, "%s: rows_begin: %d rows, cap %d, tokens %#llx (expected "
		               ">= 1, >= 1, an aligned int32 array)", d->desc, n_rows, cap,
		               (unsigned long long)tokens);
	if (d->capturing && h->in_rows)
		return sw_errf(err, SW_EINVAL, "%s: rows_begin inside a rows region", d->desc);
	if (!d->capturing) { /* eager: from here on (an earlier failed run's region ends) */
		rows_start(h, (const int32_t *)(uintptr_t)tokens, n_rows, cap);
		return 0;
	}
	host_rec *r = rec_push(h->rec);
	if (!r)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	r->kind = HOST_REC_ROWS;
	r->flag = tokens;
	r->n_rows = n_rows;
	r->cap = cap;
	h->in_rows = true;
	return 0;
}

static int host_rows_end(rt_dev *d, sw_err *err)
{
	host_dev *h = d->impl;
	if (d->capturing && !h->in_rows)
		return sw_errf(err, SW_EINVAL, "%s: rows_end without rows_begin", d->desc);
	if (!d->capturing) {
		h->rows_full = h->rows_live = 0;
		return 0;
	}
	host_rec *r = rec_push(h->rec);
	if (!r)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	r->kind = HOST_REC_ROWS; /* n_rows 0: the end */
	h->in_rows = false;
	return 0;
}

static int host_graph_end(rt_dev *d, rt_graph **out, sw_err *err)
{
	host_dev *h = d->impl;
	*out = NULL;
	if (!d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_end without graph_begin", d->desc);
	d->capturing = false;
	host_graph *g = h->rec;
	h->rec = NULL;
	if (h->in_rows) {
		h->in_rows = false;
		graph_free_impl(g);
		return sw_errf(err, SW_EINVAL, "%s: graph_end with a rows region still open", d->desc);
	}
	if (h->depth) {
		int open = h->depth;
		h->depth = 0;
		graph_free_impl(g);
		return sw_errf(err, SW_EINVAL, "%s: graph_end with %d graph_if region(s) still open",
		               d->desc, open);
	}
	*out = (rt_graph *)g;
	return 0;
}

static int host_graph_launch(rt_dev *d, rt_graph *gr, sw_err *err)
{
	host_dev *h = d->impl;
	host_graph *g = (host_graph *)gr;
	if (d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_launch inside a graph capture", d->desc);
	d->stats.graph_launches++;
	const double t0 = sw_now_s();
	for (int i = 0; i < g->n; i++) {
		const host_rec *r = &g->recs[i];
		if (r->kind == HOST_REC_IF) {
			int32_t v;
			memcpy(&v, (const void *)(uintptr_t)r->flag, sizeof(v));
			if (!v)
				i = r->end - 1;
			continue;
		}
		if (r->kind == HOST_REC_ROWS) {
			if (r->n_rows)
				rows_start(h, (const int32_t *)(uintptr_t)r->flag, r->n_rows, r->cap);
			else
				h->rows_full = h->rows_live = 0;
			continue;
		}
		if (i + 1 < g->n) /* the next record under this op (a decode step evicts them all) */
			rt_op_prefetch(&g->recs[i + 1].op);
		int rc = exec_op(d, &r->op, false, err);
		if (rc) {
			h->rows_full = h->rows_live = 0;
			sw_err_prefix(err, "graph replay, step %d of %d", i, g->n);
			return rc;
		}
	}
	h->rows_full = h->rows_live = 0; /* an IF skipping past a region's end */
	d->stats.seconds_ops += sw_now_s() - t0;
	return 0;
}

static void host_graph_free(rt_dev *d, rt_graph *g)
{
	graph_free_impl((host_graph *)g);
}

static int host_sync(rt_dev *d, sw_err *err)
{
	return d->capturing ? refuse_capture(d, "sync", err) : 0;
}

static void host_destroy(rt_dev *d)
{
	if (!d)
		return;
	host_dev *h = d->impl;
	if (h) {
		graph_free_impl(h->rec);
		for (int i = 0; i < h->n_allocs; i++) {
			void *p = (void *)h->allocs[i].p;
			if (h->mode == RT_HOST_EMULATE)
				emu_free(p);
			else
				free(p);
		}
		free(h->allocs);
		for (int i = 0; i < h->n_mods; i++)
			dlclose(h->mods[i]);
		free(h->mods);
		free(h->a32);
		free(h->w32);
		free(h);
	}
	free(d);
}

static const struct rt_dev_ops host_ops = {
	/* .name = */ "host",
	/* .alloc = */ host_alloc_fn,
	/* .free = */ host_free_fn,
	/* .alloc_host = */ NULL,
	/* .free_host = */ NULL,
	/* .upload = */ host_upload,
	/* .download = */ host_download,
	/* .load_kernels = */ host_load_kernels,
	/* .supports_op = */ host_supports_op,
	/* .launch = */ host_launch,
	/* .graph_begin = */ host_graph_begin,
	/* .graph_end = */ host_graph_end,
	/* .graph_if_begin = */ host_graph_if_begin,
	/* .graph_if_end = */ host_graph_if_end,
	/* .graph_launch = */ host_graph_launch,
	/* .graph_free = */ host_graph_free,
	/* .sync = */ host_sync,
	/* .destroy = */ host_destroy,
	/* .rows_begin = */ host_rows_begin,
	/* .rows_end = */ host_rows_end,
};

rt_dev *rt_dev_host_new(int mode, const rt_dev_opts *o, sw_err *err)
{
	static const rt_dev_opts none;
	if (!o)
		o = &none;
	if (mode != RT_HOST_NATIVE && mode != RT_HOST_EMULATE) {
		sw_errf(err, SW_EINVAL, "host backend: mode %d (native 0 or emulate 1)", mode);
		return NULL;
	}
	if (mode == RT_HOST_EMULATE && !o->emu_compile) {
		sw_errf(err, SW_ENOTSUP, "host-emulate: no emulator compiler (rt_dev_opts.emu_compile "
		        "is NULL): this program links the runtime without the generator, which builds "
		        "kernels.cu for the emulator (gen_emu_module_build); use host or cuda");
		return NULL;
	}
	rt_dev *d = calloc(1, sizeof(*d));
	host_dev *h = calloc(1, sizeof(*h));
	if (!d || !h) {
		free(d);
		free(h);
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	const char *s = o->src_dir ? o->src_dir : getenv("SW_SRC_DIR");
	const char *c = o->cache_dir ? o->cache_dir : getenv("SPECWRIGHT_CACHE");
	snprintf(h->src_dir, sizeof(h->src_dir), "%s", s && *s ? s : ".");
	snprintf(h->cache_dir, sizeof(h->cache_dir), "%s", c && *c ? c : "build/cache");
	h->mode = mode;
	h->emu_compile = o->emu_compile;
	h->blas_min_m = hg_blas_min_m();
	d->ops = &host_ops;
	d->impl = h;
	snprintf(d->desc, sizeof(d->desc), "host (%s)", mode == RT_HOST_NATIVE ? "native" : "emulate");
	d->gguf_blocks = mode == RT_HOST_NATIVE;
	if (mode == RT_HOST_EMULATE) {
		char p[600];
		snprintf(p, sizeof(p), "%s/kernels/prelude_emu.h", h->src_dir);
		if (access(p, R_OK) != 0) {
			sw_errf(err, SW_EINVAL, "host-emulate: %s not found: run from the specwright source "
			        "tree or set SW_SRC_DIR to it", p);
			host_destroy(d);
			return NULL;
		}
	}
	return d;
}
