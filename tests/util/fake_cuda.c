/* Fake CUDA driver + cuBLASLt on host memory (fake_cuda.h). Graph nodes
 * keep their dependencies; instantiation checks that every graph (and IF
 * body) is one chain, which is what the backend's single stream must
 * produce, and flattens it into a replay list. */
#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/host_gemm.h"
#include "fake_cuda.h"
#include "formats/gguf.h"

#define FK_MAX_DEPS 8
#define FK_MAX_ARGS 16
#define FK_MAX_HANDLES 256
#define FK_MAX_KERNELS 1024
#define FK_ALGOS 4 /* candidates a heuristic query returns at most */

enum { FK_KERNEL = 0, FK_MEMSET, FK_MATMUL, FK_COND };

struct CUctx_st {
	int refs;
};

struct CUfunc_st {
	char name[256];
	const emu_kernel *k;  /* NULL: the set-conditional kernel */
	int max_dyn;          /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
	struct CUfunc_st *next;
};

struct CUmod_st {
	bool cubin;
	struct CUfunc_st *fns;
	/* a real image (an ELF cubin, or PTX declaring entries): kept, so that
	 * cuModuleGetFunction finds only the entries it defines; NULL for a
	 * stand-in (PTX without .entry), where the registry alone decides */
	unsigned char *image;
	size_t image_n;
};

typedef struct fk_mm {
	int transa, transb, atype, ctype;
	uint64_t m, n, k;
	int64_t lda, ldb, ldc;
	float alpha, beta;
	const void *a, *b, *c;
	void *d;
} fk_mm;

struct CUgraphNode_st {
	int kind;
	struct CUgraph_st *owner;
	struct CUgraphNode_st *deps[FK_MAX_DEPS];
	int nd;
	/* kernel */
	struct CUfunc_st *f;
	unsigned grid[3], block[3], smem;
	uint64_t args[FK_MAX_ARGS];
	/* memset */
	CUdeviceptr ptr;
	unsigned char val;
	size_t bytes;
	/* matmul */
	fk_mm mm;
	/* conditional */
	CUgraphConditionalHandle h;
	struct CUgraph_st *body[1];
};

struct CUgraph_st {
	struct CUgraphNode_st **nodes;
	int n, cap;
	struct CUgraph_st *parent; /* a body graph's enclosing graph */
};

/* A replay step: a node copy, and for an IF its body's steps. */
typedef struct fk_step {
	struct CUgraphNode_st node;
	struct fk_step *body;
	int n_body;
} fk_step;

struct CUgraphExec_st {
	fk_step *steps;
	int n;
};

struct CUstream_st {
	bool capturing;
	uint64_t id;
	struct CUgraph_st *g;
	struct CUgraphNode_st *front[FK_MAX_DEPS];
	int n_front;
	CUresult pending;
};

typedef struct fk_handle {
	struct CUgraph_st *g;
	unsigned def, flags, value;
} fk_handle;

typedef struct fk_alloc {
	void *p;
	size_t bytes;
} fk_alloc;

static struct {
	fake_cuda_cfg cfg;
	char **calls;           /* grows: an engine run logs tens of thousands */
	int n_calls, cap_calls;
	char last_error[1024];
	struct CUctx_st ctx;
	fk_alloc *allocs;
	int n_allocs, cap_allocs;
	fk_handle handles[FK_MAX_HANDLES];
	int n_handles;
	struct {
		char name[256];
		const emu_kernel *k;
	} kernels[FK_MAX_KERNELS];
	int n_kernels;
	uint64_t capture_ids;
	int n_capturing;        /* streams capturing now */
	uint64_t algo_serial;   /* heuristic candidates handed out */
	uint64_t *algo_used;    /* serials that ran outside a capture */
	int n_algo_used, cap_algo_used;
	int n_threads;          /* threads that made the context current */
	uint64_t if_taken, if_skipped;
	char fail_call[64];
	CUresult fail_code;
	int fail_count;
} F;

/* ---- bookkeeping ---- */

/* Makes room for element n of the array at *p (capacity *cap); nonzero
 * when out of memory. */
static int fk_grow(void **p, int *cap, int n, size_t elt)
{
	if (n < *cap)
		return 0;
	int c = *cap ? 2 * *cap : 16;
	void *q = realloc(*p, elt * (size_t)c);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

/* The calling thread's current context, and its number for the log. */
static _Thread_local struct CUctx_st *t_cur;
static _Thread_local int t_num = -1;

static void log_call(const char *name, const char *detail)
{
	if (F.n_calls == F.cap_calls) {
		int cap = F.cap_calls ? 2 * F.cap_calls : 1024;
		char **c = realloc(F.calls, sizeof(*c) * (size_t)cap);
		if (!c)
			return;
		F.calls = c;
		F.cap_calls = cap;
	}
	size_t n = strlen(name) + (detail ? strlen(detail) + 1 : 0) + 1;
	char *s = malloc(n);
	if (!s)
		return;
	snprintf(s, n, "%s%s%s", name, detail ? " " : "", detail ? detail : "");
	F.calls[F.n_calls++] = s;
}

__attribute__((format(printf, 2, 3))) static CUresult fk_err(CUresult r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(F.last_error, sizeof(F.last_error), fmt, ap);
	va_end(ap);
	return r;
}

/* Calls that need no current context on the calling thread. */
static bool ctx_free(const char *name)
{
	static const char *const free_calls[] = {"cuInit", "cuDeviceGetCount", "cuDeviceGet",
	                                         "cuDevicePrimaryCtxRetain",
	                                         "cuDevicePrimaryCtxRelease", "cuCtxSetCurrent"};
	for (size_t i = 0; i < sizeof(free_calls) / sizeof(free_calls[0]); i++)
		if (!strcmp(name, free_calls[i]))
			return true;
	return false;
}

/* Logs the call; returns an injected failure for it, a missing context, or 0. */
static CUresult enter(const char *name, const char *detail)
{
	log_call(name, detail);
	if (F.fail_count > 0 && !strcmp(F.fail_call, name) && --F.fail_count == 0)
		return fk_err(F.fail_code, "fake: injected failure of %s", name);
	if (!ctx_free(name) && t_cur != &F.ctx)
		return fk_err(CUDA_ERROR_INVALID_CONTEXT, "fake: %s on a thread with no current context "
		              "(cuCtxSetCurrent first, on this thread)", name);
	return CUDA_SUCCESS;
}

#define ENTER(detail)                                                                  \
	do {                                                                           \
		CUresult r_ = enter(__func__ + 3, (detail));                           \
		if (r_)                                                                \
			return r_;                                                     \
	} while (0)

static fk_alloc *find_alloc(const void *p)
{
	for (int i = 0; i < F.n_allocs; i++)
		if (F.allocs[i].p == p)
			return &F.allocs[i];
	return NULL;
}

/* Whether [p, p + n) lies inside one live device allocation. */
static bool in_device(uint64_t p, size_t n)
{
	for (int i = 0; i < F.n_allocs; i++) {
		uint64_t b = (uint64_t)(uintptr_t)F.allocs[i].p;
		if (p >= b && p + n <= b + F.allocs[i].bytes)
			return true;
	}
	return false;
}

void fake_cuda_reset(const fake_cuda_cfg *cfg)
{
	static const fake_cuda_cfg def = {.n_devices = 1, .cc_major = 9, .cc_minor = 0,
	                                  .name = "Fake H100"};
	for (int i = 0; i < F.n_calls; i++)
		free(F.calls[i]);
	free(F.calls);
	for (int i = 0; i < F.n_allocs; i++)
		emu_free(F.allocs[i].p);
	free(F.allocs);
	free(F.algo_used);
	memset(&F, 0, sizeof(F));
	t_cur = NULL; /* this thread's; other threads' were cleared when they ended */
	t_num = -1;
	F.cfg = cfg ? *cfg : def;
	if (!F.cfg.name)
		F.cfg.name = "Fake GPU";
}

void fake_cuda_register(const char *name, const emu_kernel *k)
{
	for (int i = 0; i < F.n_kernels; i++)
		if (!strcmp(F.kernels[i].name, name)) {
			F.kernels[i].k = k;
			return;
		}
	if (F.n_kernels < FK_MAX_KERNELS) {
		snprintf(F.kernels[F.n_kernels].name, sizeof(F.kernels[0].name), "%s", name);
		F.kernels[F.n_kernels++].k = k;
	}
}

int fake_cuda_n_calls(void)
{
	return F.n_calls;
}

const char *fake_cuda_call(int i)
{
	return i >= 0 && i < F.n_calls ? F.calls[i] : NULL;
}

static bool matches(const char *entry, const char *pat)
{
	size_t n = strlen(pat);
	return !strncmp(entry, pat, n) && (entry[n] == 0 || entry[n] == ' ');
}

int fake_cuda_count(const char *pat)
{
	int c = 0;
	for (int i = 0; i < F.n_calls; i++)
		c += matches(F.calls[i], pat);
	return c;
}

int fake_cuda_find(const char *pat, int from)
{
	for (int i = from < 0 ? 0 : from; i < F.n_calls; i++)
		if (matches(F.calls[i], pat))
			return i;
	return -1;
}

bool fake_cuda_has_seq(const char *const *pats, int n, const char **missing)
{
	int at = 0;
	for (int i = 0; i < n; i++) {
		int j = fake_cuda_find(pats[i], at);
		if (j < 0) {
			if (missing)
				*missing = pats[i];
			return false;
		}
		at = j + 1;
	}
	return true;
}

void fake_cuda_print_log(void)
{
	for (int i = 0; i < F.n_calls; i++)
		fprintf(stderr, "  fake %4d %s\n", i, F.calls[i]);
}

const char *fake_cuda_last_error(void)
{
	return F.last_error;
}

int fake_cuda_live_allocs(void)
{
	return F.n_allocs;
}

void fake_cuda_if_counts(uint64_t *taken, uint64_t *skipped)
{
	*taken = F.if_taken;
	*skipped = F.if_skipped;
}

void fake_cuda_fail(const char *call, CUresult r, int count)
{
	snprintf(F.fail_call, sizeof(F.fail_call), "%s", call);
	F.fail_code = r;
	F.fail_count = count;
}

/* ---- device, context, errors ---- */

/* The opt-in dynamic shared memory per block of the faked arch (the CUDA
 * programming guide's table: sm_80 163 KB, sm_86/89 99 KB, sm_90 227 KB). */
static int fk_smem_optin(void)
{
	const int cc = 10 * F.cfg.cc_major + F.cfg.cc_minor;
	return cc >= 90 ? 232448 : cc == 80 || cc == 87 ? 166912 : cc >= 86 ? 101376 : 49152;
}

static CUresult fk_cuInit(unsigned flags)
{
	ENTER(NULL);
	return F.cfg.init_result;
}

static CUresult fk_cuDriverGetVersion(int *v)
{
	*v = F.cfg.driver_version ? F.cfg.driver_version : F.cfg.no_conditionals ? 12020 : 13000;
	return CUDA_SUCCESS;
}

static const struct {
	CUresult r;
	const char *name, *desc;
} errs[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	 "operation not permitted when stream is capturing"},
};

static CUresult fk_cuGetErrorName(CUresult r, const char **s)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].r == r) {
			*s = errs[i].name;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fk_cuGetErrorString(CUresult r, const char **s)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].r == r) {
			*s = errs[i].desc;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fk_cuDeviceGetCount(int *n)
{
	ENTER(NULL);
	*n = F.cfg.n_devices;
	return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceGet(CUdevice *d, int ordinal)
{
	ENTER(NULL);
	if (ordinal < 0 || ordinal >= F.cfg.n_devices)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: device %d of %d", ordinal, F.cfg.n_devices);
	*d = ordinal;
	return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceGetName(char *name, int len, CUdevice d)
{
	snprintf(name, (size_t)len, "%s", F.cfg.name);
	return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceGetAttribute(int *v, int attrib, CUdevice d)
{
	if (attrib == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
		*v = F.cfg.cc_major;
	else if (attrib == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
		*v = F.cfg.cc_minor;
	else if (attrib == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
		*v = fk_smem_optin();
	else
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: attribute %d not faked", attrib);
	return CUDA_SUCCESS;
}

static CUresult fk_cuDeviceTotalMem(size_t *b, CUdevice d)
{
	*b = (size_t)80 << 30;
	return CUDA_SUCCESS;
}

static CUresult fk_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	ENTER(NULL);
	F.ctx.refs++;
	*c = &F.ctx;
	return CUDA_SUCCESS;
}

static CUresult fk_cuDevicePrimaryCtxRelease(CUdevice d)
{
	ENTER(NULL);
	if (F.ctx.refs <= 0)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: primary context released more than retained");
	F.ctx.refs--;
	return CUDA_SUCCESS;
}

static CUresult fk_cuCtxSetCurrent(CUcontext c)
{
	char th[32];
	if (t_num < 0)
		t_num = F.n_threads++;
	snprintf(th, sizeof(th), "thread %d", t_num);
	ENTER(th);
	if (c && c != &F.ctx)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: unknown context");
	t_cur = c;
	return CUDA_SUCCESS;
}

static CUresult fk_cuCtxGetCurrent(CUcontext *c)
{
	*c = t_cur;
	return CUDA_SUCCESS;
}

/* ---- memory ---- */

static CUresult fk_cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
	ENTER(NULL);
	if (!bytes)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: cuMemAlloc of 0 bytes");
	if (fk_grow((void **)&F.allocs, &F.cap_allocs, F.n_allocs, sizeof(*F.allocs)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	void *q = emu_alloc(bytes, "fake-cuda"); /* 0xff-filled, as garbage would be */
	if (!q)
		return CUDA_ERROR_OUT_OF_MEMORY;
	F.allocs[F.n_allocs++] = (fk_alloc){q, bytes};
	*p = (CUdeviceptr)(uintptr_t)q;
	return CUDA_SUCCESS;
}

static CUresult fk_cuMemFree(CUdeviceptr p)
{
	ENTER(NULL);
	fk_alloc *a = find_alloc((void *)(uintptr_t)p);
	if (!a)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: cuMemFree of %#llx: not an allocation",
		              (unsigned long long)p);
	emu_free(a->p);
	*a = F.allocs[--F.n_allocs];
	return CUDA_SUCCESS;
}

static CUresult fk_cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
	ENTER(NULL);
	*p = malloc(bytes);
	return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fk_cuMemFreeHost(void *p)
{
	ENTER(NULL);
	free(p);
	return CUDA_SUCCESS;
}

static CUresult not_capturing(CUstream s, const char *what)
{
	if (!s)
		return fk_err(CUDA_ERROR_INVALID_HANDLE, "fake: %s on the NULL stream (the backend must "
		              "use its own stream)", what);
	if (s->capturing)
		return fk_err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "fake: %s on a capturing stream", what);
	return CUDA_SUCCESS;
}

static CUresult fk_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	char nb[24];
	snprintf(nb, sizeof(nb), "%zu", n);
	ENTER(nb);
	CUresult r = not_capturing(s, "cuMemcpyHtoDAsync");
	if (r)
		return r;
	if (!in_device(dst, n))
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: HtoD of %zu bytes at %#llx outside any "
		              "allocation", n, (unsigned long long)dst);
	memcpy((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

static CUresult fk_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	char nb[24];
	snprintf(nb, sizeof(nb), "%zu", n);
	ENTER(nb);
	CUresult r = not_capturing(s, "cuMemcpyDtoHAsync");
	if (r)
		return r;
	if (!in_device(src, n))
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: DtoH of %zu bytes at %#llx outside any "
		              "allocation", n, (unsigned long long)src);
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

/* ---- graphs: building ---- */

static struct CUgraph_st *graph_new(struct CUgraph_st *parent)
{
	struct CUgraph_st *g = calloc(1, sizeof(*g));
	if (g)
		g->parent = parent;
	return g;
}

static void graph_free(struct CUgraph_st *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n; i++) {
		if (g->nodes[i]->kind == FK_COND)
			graph_free(g->nodes[i]->body[0]);
		free(g->nodes[i]);
	}
	free(g->nodes);
	free(g);
}

static struct CUgraphNode_st *node_add(struct CUgraph_st *g, int kind,
                                       struct CUgraphNode_st *const *deps, size_t nd)
{
	if (nd > FK_MAX_DEPS)
		return NULL;
	if (g->n == g->cap) {
		int cap = g->cap ? 2 * g->cap : 16;
		struct CUgraphNode_st **n = realloc(g->nodes, sizeof(*n) * (size_t)cap);
		if (!n)
			return NULL;
		g->nodes = n;
		g->cap = cap;
	}
	struct CUgraphNode_st *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->kind = kind;
	x->owner = g;
	for (size_t i = 0; i < nd; i++)
		x->deps[i] = deps[i];
	x->nd = (int)nd;
	g->nodes[g->n++] = x;
	return x;
}

/* Adds a node to s's capture after its frontier, and makes it the frontier. */
static struct CUgraphNode_st *capture_node(CUstream s, int kind)
{
	struct CUgraphNode_st *x = node_add(s->g, kind, s->front, (size_t)s->n_front);
	if (x) {
		s->front[0] = x;
		s->n_front = 1;
	}
	return x;
}

static CUresult fk_cuStreamCreate(CUstream *s, unsigned flags)
{
	ENTER(NULL);
	if (!(flags & CU_STREAM_NON_BLOCKING))
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: a blocking stream (it would order against "
		              "the legacy stream; the backend wants CU_STREAM_NON_BLOCKING)");
	*s = calloc(1, sizeof(**s));
	return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fk_cuStreamDestroy(CUstream s)
{
	ENTER(NULL);
	if (s && s->capturing)
		return fk_err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "fake: destroying a capturing stream");
	free(s);
	return CUDA_SUCCESS;
}

static CUresult fk_cuStreamSynchronize(CUstream s)
{
	ENTER(NULL);
	CUresult r = not_capturing(s, "cuStreamSynchronize");
	if (r)
		return r;
	r = s->pending;
	s->pending = CUDA_SUCCESS;
	return r;
}

static CUresult fk_cuStreamBeginCapture(CUstream s, int mode)
{
	ENTER(NULL);
	if (!s || s->capturing)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: begin capture on %s",
		              s ? "a capturing stream" : "the NULL stream");
	if (!(s->g = graph_new(NULL)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->capturing = true;
	s->id = ++F.capture_ids;
	s->n_front = 0;
	F.n_capturing++;
	return CUDA_SUCCESS;
}

static CUresult fk_cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                               const CUgraphEdgeData *edges, size_t n, int mode)
{
	ENTER("body");
	if (!s || s->capturing || !g || n > FK_MAX_DEPS)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: begin capture to graph: bad arguments");
	s->capturing = true;
	s->id = ++F.capture_ids;
	F.n_capturing++;
	s->g = g;
	for (size_t i = 0; i < n; i++)
		s->front[i] = deps[i];
	s->n_front = (int)n;
	return CUDA_SUCCESS;
}

static CUresult fk_cuStreamEndCapture(CUstream s, CUgraph *g)
{
	ENTER(NULL);
	if (!s || !s->capturing)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: end capture on a stream not capturing");
	s->capturing = false;
	F.n_capturing--;
	*g = s->g;
	s->g = NULL;
	s->n_front = 0;
	return CUDA_SUCCESS;
}

static CUresult fk_cuStreamGetCaptureInfo(CUstream s, int *status, uint64_t *id, CUgraph *g,
                                          const CUgraphNode **deps, const CUgraphEdgeData **edges,
                                          size_t *nd)
{
	ENTER(NULL);
	if (!s)
		return fk_err(CUDA_ERROR_INVALID_HANDLE, "fake: capture info of the NULL stream");
	*status = s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	if (id)
		*id = s->id;
	if (g)
		*g = s->capturing ? s->g : NULL;
	if (deps)
		*deps = (const CUgraphNode *)s->front;
	if (edges)
		*edges = NULL;
	if (nd)
		*nd = (size_t)s->n_front;
	return CUDA_SUCCESS;
}

static CUresult fk_cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *deps,
                                                     const CUgraphEdgeData *edges, size_t n,
                                                     unsigned flags)
{
	ENTER(NULL);
	if (!s || !s->capturing)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: update dependencies of a stream not "
		              "capturing");
	if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES)
		s->n_front = 0;
	for (size_t i = 0; i < n; i++) {
		if (s->n_front == FK_MAX_DEPS)
			return CUDA_ERROR_INVALID_VALUE;
		if (deps[i]->owner != s->g)
			return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: dependency from another graph");
		s->front[s->n_front++] = deps[i];
	}
	return CUDA_SUCCESS;
}

static bool graph_within(const struct CUgraph_st *g, const struct CUgraph_st *anc)
{
	for (; g; g = g->parent)
		if (g == anc)
			return true;
	return false;
}

static CUresult fk_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *h, CUgraph g,
                                                  CUcontext ctx, unsigned def, unsigned flags)
{
	ENTER(NULL);
	if (!g || ctx != &F.ctx || flags > CU_GRAPH_COND_ASSIGN_DEFAULT)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: conditional handle: bad arguments");
	if (F.n_handles == FK_MAX_HANDLES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	F.handles[F.n_handles] = (fk_handle){g, def, flags, def};
	*h = (CUgraphConditionalHandle)++F.n_handles;
	return CUDA_SUCCESS;
}

static fk_handle *handle_get(CUgraphConditionalHandle h)
{
	return h >= 1 && h <= (CUgraphConditionalHandle)F.n_handles ? &F.handles[h - 1] : NULL;
}

static CUresult fk_cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                  const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
	ENTER(p && p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL ? "conditional" : "other");
	if (!g || !p)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: cuGraphAddNode: NULL graph or params");
	if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
		return fk_err(CUDA_ERROR_NOT_SUPPORTED, "fake: only conditional nodes are added by hand");
	if (p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: CUgraphNodeParams reserved fields not zero");
	const CUDA_CONDITIONAL_NODE_PARAMS *c = &p->conditional;
	fk_handle *h = handle_get(c->handle);
	if (c->type != CU_GRAPH_COND_TYPE_IF || c->size != 1 || c->ctx != &F.ctx || !h)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: conditional node: type %d size %u, handle "
		              "%llu", c->type, c->size, (unsigned long long)c->handle);
	if (!graph_within(g, h->g))
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: the handle was created on another graph "
		              "(it must be this graph or an enclosing one)");
	for (size_t i = 0; i < n; i++)
		if (deps[i]->owner != g)
			return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: dependency from another graph");
	if (edges)
		for (size_t i = 0; i < n; i++)
			if (edges[i].from_port || edges[i].to_port || edges[i].type)
				return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: non-default edge data");
	struct CUgraphNode_st *x = node_add(g, FK_COND, (struct CUgraphNode_st *const *)deps, n);
	if (!x || !(x->body[0] = graph_new(g)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->h = c->handle;
	p->conditional.phGraph_out = x->body;
	*node = x;
	return CUDA_SUCCESS;
}

/* A graph must be one chain: node i depends on node i-1 only (node 0 on
 * nothing), bodies likewise. Anything else could run concurrently on a GPU
 * and would be a race the host replay hides. */
static CUresult check_chain(const struct CUgraph_st *g, const char *where)
{
	for (int i = 0; i < g->n; i++) {
		const struct CUgraphNode_st *x = g->nodes[i];
		bool ok = i == 0 ? x->nd == 0 : x->nd == 1 && x->deps[0] == g->nodes[i - 1];
		if (!ok)
			return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: %s node %d of %d (%s) depends on %d "
			              "node(s)%s, not just on node %d: it could run concurrently on a GPU",
			              where, i, g->n, x->kind == FK_COND ? "IF" : x->kind == FK_KERNEL ?
			              x->f->name : x->kind == FK_MEMSET ? "memset" : "matmul", x->nd,
			              x->nd == 1 ? " (another one)" : "", i - 1);
		if (x->kind == FK_COND) {
			CUresult r = check_chain(x->body[0], "IF body");
			if (r)
				return r;
		}
	}
	return CUDA_SUCCESS;
}

static bool handle_used(const struct CUgraph_st *g, CUgraphConditionalHandle h)
{
	for (int i = 0; i < g->n; i++)
		if (g->nodes[i]->kind == FK_COND &&
		    (g->nodes[i]->h == h || handle_used(g->nodes[i]->body[0], h)))
			return true;
	return false;
}

static void steps_free(fk_step *s, int n)
{
	for (int i = 0; i < n; i++)
		steps_free(s[i].body, s[i].n_body);
	free(s);
}

static fk_step *flatten(const struct CUgraph_st *g, int *n)
{
	fk_step *s = calloc((size_t)(g->n ? g->n : 1), sizeof(*s));
	if (!s)
		return NULL;
	for (int i = 0; i < g->n; i++) {
		s[i].node = *g->nodes[i];
		if (g->nodes[i]->kind == FK_COND &&
		    !(s[i].body = flatten(g->nodes[i]->body[0], &s[i].n_body))) {
			steps_free(s, i);
			return NULL;
		}
	}
	*n = g->n;
	return s;
}

static CUresult fk_cuGraphInstantiate(CUgraphExec *x, CUgraph g, unsigned long long flags)
{
	ENTER(NULL);
	if (!g)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: instantiate a NULL graph");
	CUresult r = check_chain(g, "graph");
	if (r)
		return r;
	for (int i = 0; i < F.n_handles; i++)
		if (F.handles[i].g == g && !handle_used(g, (CUgraphConditionalHandle)(i + 1)))
			return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: conditional handle %d has no node", i + 1);
	struct CUgraphExec_st *e = calloc(1, sizeof(*e));
	if (!e || !(e->steps = flatten(g, &e->n))) {
		free(e);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*x = e;
	return CUDA_SUCCESS;
}

static CUresult fk_cuGraphExecDestroy(CUgraphExec x)
{
	ENTER(NULL);
	if (x)
		steps_free(x->steps, x->n);
	free(x);
	return CUDA_SUCCESS;
}

static CUresult fk_cuGraphDestroy(CUgraph g)
{
	ENTER(NULL);
	if (g && g->parent)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: destroying an IF body graph (it belongs to "
		              "its node)");
	graph_free(g);
	return CUDA_SUCCESS;
}

/* ---- modules and kernels ---- */

static uint64_t rd_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Bytes of an ELF64 image (the driver is given no size): the furthest end
 * of its header tables and sections; 0 if it is not little-endian ELF64. */
static size_t elf_size(const unsigned char *b)
{
	if (b[4] != 2 || b[5] != 1)
		return 0;
	const uint64_t phoff = rd_le(b + 0x20, 8), shoff = rd_le(b + 0x28, 8);
	const uint64_t phes = rd_le(b + 0x36, 2), phn = rd_le(b + 0x38, 2);
	const uint64_t shes = rd_le(b + 0x3a, 2), shn = rd_le(b + 0x3c, 2);
	uint64_t end = 64;
	if (phoff + phn * phes > end)
		end = phoff + phn * phes;
	if (shoff + shn * shes > end)
		end = shoff + shn * shes;
	if (shes < 0x28 || shn > 65535)
		return 0;
	for (uint64_t i = 0; i < shn; i++) {
		const unsigned char *sh = b + shoff + i * shes;
		const uint64_t type = rd_le(sh + 4, 4), off = rd_le(sh + 0x18, 8), sz = rd_le(sh + 0x20, 8);
		if (type != 8 /* SHT_NOBITS */ && off + sz > end)
			end = off + sz;
	}
	return end < ((uint64_t)1 << 32) ? (size_t)end : 0;
}

/* Whether a kept image defines entry name: PTX ".entry name(" (or
 * whitespace), an ELF string "\0name\0" (its symbol table). */
static bool image_defines(const struct CUmod_st *m, const char *name)
{
	const size_t n = strlen(name);
	if (!m->cubin) {
		for (const char *p = strstr((const char *)m->image, ".entry"); p;
		     p = strstr(p + 6, ".entry")) {
			const char *q = p + 6;
			while (*q == ' ' || *q == '\t')
				q++;
			if (!strncmp(q, name, n) && (q[n] == '(' || q[n] == ' ' || q[n] == '\n' ||
			                             q[n] == '\t'))
				return true;
		}
		return false;
	}
	for (size_t i = 1; i + n + 1 <= m->image_n; i++)
		if (m->image[i - 1] == 0 && m->image[i + n] == 0 && !memcmp(m->image + i, name, n))
			return true;
	return false;
}

static CUresult fk_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n_opts,
                                      CUjit_option *opts, void **vals)
{
	const unsigned char *b = image;
	bool cubin = b && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
	bool ptx = b && !cubin && (strstr(image, ".version") || strstr(image, ".entry"));
	ENTER(cubin ? "cubin" : ptx ? "ptx" : "invalid");
	if (!cubin && !ptx)
		return fk_err(CUDA_ERROR_INVALID_IMAGE, "fake: the image is neither an ELF cubin nor PTX");
	for (unsigned i = 0; i < n_opts; i++)
		if (opts[i] == CU_JIT_ERROR_LOG_BUFFER && vals[i])
			((char *)vals[i])[0] = 0;
	*m = calloc(1, sizeof(**m));
	if (!*m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	(*m)->cubin = cubin;
	size_t keep = cubin ? elf_size(b) : strstr(image, ".entry") ? strlen(image) + 1 : 0;
	if (keep && ((*m)->image = malloc(keep))) {
		memcpy((*m)->image, b, keep);
		(*m)->image_n = keep;
	}
	return CUDA_SUCCESS;
}

static CUresult fk_cuModuleUnload(CUmodule m)
{
	ENTER(NULL);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	for (struct CUfunc_st *f = m->fns, *nx; f; f = nx) {
		nx = f->next;
		free(f);
	}
	free(m->image);
	free(m);
	return CUDA_SUCCESS;
}

static CUresult fk_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	ENTER(name);
	const emu_kernel *k = NULL;
	bool set_cond = !strcmp(name, RT_CUDA_SET_COND_ENTRY);
	for (int i = 0; i < F.n_kernels && !set_cond && !k; i++)
		if (!strcmp(F.kernels[i].name, name))
			k = F.kernels[i].k;
	if (!m || (!set_cond && !k))
		return fk_err(CUDA_ERROR_NOT_FOUND, "fake: no kernel named %s", name);
	if (m->image && !image_defines(m, name))
		return fk_err(CUDA_ERROR_NOT_FOUND, "fake: the module's %s defines no entry %s (a C++-"
		              "mangled or misspelt name?)", m->cubin ? "cubin" : "PTX", name);
	struct CUfunc_st *x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->k = k;
	x->next = m->fns;
	m->fns = x;
	*f = x;
	return CUDA_SUCCESS;
}

static CUresult fk_cuFuncSetAttribute(CUfunction f, int attrib, int value)
{
	char d[300];
	snprintf(d, sizeof(d), "%s %d", f ? f->name : "(null)", value);
	ENTER(d);
	if (!f || attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: cuFuncSetAttribute: only the dynamic "
		              "shared memory size is faked");
	if (value < 0 || value > fk_smem_optin())
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: %d bytes of dynamic shared memory for %s: "
		              "the device allows %d", value, f->name, fk_smem_optin());
	f->max_dyn = value;
	return CUDA_SUCCESS;
}

/* Runs one kernel node; in_graph: whether a graph launch runs it. */
static CUresult run_kernel(const struct CUgraphNode_st *x, bool in_graph)
{
	if (!x->f->k) { /* the set-conditional kernel: handle = (*flag != 0) */
		fk_handle *h = handle_get(x->args[0]);
		const uint64_t flag = x->args[1];
		if (!h || !in_graph)
			return fk_err(CUDA_ERROR_LAUNCH_FAILED, "fake: cudaGraphSetConditional %s",
			              h ? "outside a graph launch" : "with an unknown handle");
		if (!in_device(flag, 4) || flag % 4)
			return fk_err(CUDA_ERROR_LAUNCH_FAILED, "fake: set-conditional flag %#llx is not an "
			              "aligned int32 in device memory", (unsigned long long)flag);
		int32_t v;
		memcpy(&v, (const void *)(uintptr_t)flag, sizeof(v));
		h->value = v != 0;
		return CUDA_SUCCESS;
	}
	void *argv[FK_MAX_ARGS];
	for (int i = 0; i < FK_MAX_ARGS; i++)
		argv[i] = (void *)&x->args[i];
	emu_report rep;
	memset(&rep, 0, sizeof(rep));
	emu_dim3 g = {x->grid[0], x->grid[1], x->grid[2]}, b = {x->block[0], x->block[1], x->block[2]};
	if (emu_launch(x->f->k, g, b, x->smem, argv, &rep))
		return fk_err(CUDA_ERROR_LAUNCH_FAILED, "fake: kernel %s: %s", x->f->name, rep.msg);
	return CUDA_SUCCESS;
}

static CUresult fk_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, unsigned smem, CUstream s,
                                  void **params, void **extra)
{
	ENTER(f ? f->name : "(null)");
	if (!f || !s || !params || extra)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: launch needs a function, a stream and "
		              "kernelParams");
	/* the hardware limits (every arch since sm_30): grid y, z <= 65535,
	 * block z <= 64, 1024 threads */
	if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024 ||
	    gx > 0x7fffffffu || gy > 65535 || gz > 65535 || bz > 64)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: launch of %s with grid (%u,%u,%u) block "
		              "(%u,%u,%u)", f->name, gx, gy, gz, bx, by, bz);
	/* past 48 KB only up to the function's opt-in */
	if (smem > 49152 && (int64_t)smem > f->max_dyn)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: launch of %s with %u bytes of dynamic "
		              "shared memory, its CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES is %d",
		              f->name, smem, f->max_dyn);
	struct CUgraphNode_st tmp, *x = &tmp;
	if (s->capturing) {
		if (!(x = capture_node(s, FK_KERNEL)))
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		memset(&tmp, 0, sizeof(tmp));
	}
	x->f = f;
	x->grid[0] = gx, x->grid[1] = gy, x->grid[2] = gz;
	x->block[0] = bx, x->block[1] = by, x->block[2] = bz;
	x->smem = smem;
	/* the driver copies the parameters at launch (8 bytes each: every
	 * argument of these kernels is a pointer or a 64-bit slot) */
	int na = f->k ? f->k->n_args : 2;
	for (int i = 0; i < na && i < FK_MAX_ARGS; i++)
		memcpy(&x->args[i], params[i], sizeof(uint64_t));
	if (s->capturing)
		return CUDA_SUCCESS;
	CUresult r = run_kernel(x, false);
	if (r && !s->pending)
		s->pending = r; /* as on a GPU: reported by the next synchronisation */
	return CUDA_SUCCESS;
}

static CUresult fk_cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
	ENTER(NULL);
	if (!s)
		return fk_err(CUDA_ERROR_INVALID_HANDLE, "fake: memset on the NULL stream");
	if (!in_device(p, n))
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: memset of %zu bytes at %#llx outside any "
		              "allocation", n, (unsigned long long)p);
	if (s->capturing) {
		struct CUgraphNode_st *x = capture_node(s, FK_MEMSET);
		if (!x)
			return CUDA_ERROR_OUT_OF_MEMORY;
		x->ptr = p, x->val = v, x->bytes = n;
		return CUDA_SUCCESS;
	}
	memset((void *)(uintptr_t)p, v, n);
	return CUDA_SUCCESS;
}

/* ---- cuBLASLt ---- */

#define LT_MAGIC 0x5eedf00dull

struct cublasLtContext {
	int live;
};

static float lt_get(int type, const void *p, size_t i)
{
	if (type == CUDA_R_32F)
		return ((const float *)p)[i];
	uint16_t h = ((const uint16_t *)p)[i];
	return type == CUDA_R_16F ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
}

/* An operand as a dense fp32 column-major (rows, cols) matrix, ld rows. */
static float *mm_f32(int type, const void *p, uint64_t rows, uint64_t cols, int64_t ld)
{
	const uint64_t cnt = rows * cols;
	float *f = malloc(sizeof(*f) * (size_t)(cnt ? cnt : 1));
	if (f)
		for (uint64_t j = 0; j < cols; j++)
			for (uint64_t i = 0; i < rows; i++)
				f[i + j * rows] = lt_get(type, p, i + j * (size_t)ld);
	return f;
}

/* The host backend's order (fake_cuda_cfg.gemm_blas). Below the host's BLAS
 * threshold (hg_blas_min_m rows of its row-major A) the host runs the
 * 16-bit GEMM of runtime/device/host_gemm.c, row-major C (m, n) =
 * A (m, k) W (n, k)^T; cuBLASLt's column-major D (m, n) = A^T B with dense
 * leading dimensions is that GEMM with A := B, W := A, m := n, n := m, so
 * the same call gives the same float operations. From the threshold on,
 * both operands are converted to fp32 as dev_host.c converts them, then ONE
 * column-major cblas_sgemm with cuBLASLt's transposes: dev_host.c's
 * row-major sgemm(N, T, m, n, k) is, inside CBLAS, exactly this
 * column-major sgemm(T, N, n, m, k) on the same fp32 arrays. Either way
 * the results are bit-identical. */
static void mm_run_blas(const fk_mm *x)
{
	if (x->transa && !x->transb && x->atype != CUDA_R_32F && x->ctype == CUDA_R_32F &&
	    x->alpha == 1.0f && x->beta == 0.0f && x->lda == (int64_t)x->k &&
	    x->ldb == (int64_t)x->k && x->ldc == (int64_t)x->m && (int64_t)x->n < hg_blas_min_m()) {
		hg_gemm16(x->d, x->b, x->a, (int64_t)x->n, (int64_t)x->m, (int64_t)x->k,
		          x->atype != CUDA_R_16F, HG_PATH_AUTO, 0);
		return;
	}
	const uint64_t ar = x->transa ? x->k : x->m, ac = x->transa ? x->m : x->k;
	const uint64_t br = x->transb ? x->n : x->k, bc = x->transb ? x->k : x->n;
	float *a = mm_f32(x->atype, x->a, ar, ac, x->lda), *b = mm_f32(x->atype, x->b, br, bc, x->ldb);
	float *d = x->d;
	if (a && b) {
		if (x->beta != 0 && x->c != x->d)
			for (uint64_t j = 0; j < x->n; j++)
				for (uint64_t i = 0; i < x->m; i++)
					d[i + j * (size_t)x->ldc] = lt_get(x->ctype, x->c, i + j * (size_t)x->ldc);
		cblas_sgemm(CblasColMajor, x->transa ? CblasTrans : CblasNoTrans,
		            x->transb ? CblasTrans : CblasNoTrans, (int)x->m, (int)x->n, (int)x->k,
		            x->alpha, a, (int)ar, b, (int)br, x->beta, d, (int)x->ldc);
	}
	free(a);
	free(b);
}

/* D (m,n) = alpha op(A) op(B) + beta C, column-major, in double (or, with
 * cfg.gemm_blas, in the host backend's fp32 order). */
static void mm_run(const fk_mm *x)
{
	if (F.cfg.gemm_blas) {
		mm_run_blas(x);
		return;
	}
	for (uint64_t j = 0; j < x->n; j++)
		for (uint64_t i = 0; i < x->m; i++) {
			double acc = 0;
			for (uint64_t p = 0; p < x->k; p++) {
				size_t ia = x->transa ? p + i * (size_t)x->lda : i + p * (size_t)x->lda;
				size_t ib = x->transb ? j + p * (size_t)x->ldb : p + j * (size_t)x->ldb;
				acc += (double)lt_get(x->atype, x->a, ia) * lt_get(x->atype, x->b, ib);
			}
			size_t ic = i + j * (size_t)x->ldc;
			double v = x->alpha * acc;
			if (x->beta != 0)
				v += x->beta * lt_get(x->ctype, x->c, ic);
			((float *)x->d)[ic] = (float)v;
		}
}

static cublasStatus_t lt_enter(const char *name)
{
	return enter(name, NULL) ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

#define LT_ENTER()                                                                     \
	do {                                                                           \
		if (lt_enter(__func__ + 3))                                            \
			return CUBLAS_STATUS_NOT_INITIALIZED;                          \
	} while (0)

static cublasStatus_t fk_cublasLtCreate(cublasLtHandle_t *h)
{
	LT_ENTER();
	*h = calloc(1, sizeof(**h));
	(*h)->live = 1;
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fk_cublasLtDestroy(cublasLtHandle_t h)
{
	LT_ENTER();
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

static const char *fk_cublasLtGetStatusString(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	default: return "CUBLAS_STATUS_UNKNOWN";
	}
}

/* desc data: [0] compute [1] scale [2] transa [3] transb [4] magic */
static cublasStatus_t fk_cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, int compute, int scale)
{
	LT_ENTER();
	*d = calloc(1, sizeof(**d));
	(*d)->data[0] = (uint64_t)compute;
	(*d)->data[1] = (uint64_t)scale;
	(*d)->data[4] = LT_MAGIC;
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fk_cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	free(d);
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fk_cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int attr,
                                                        const void *buf, size_t n)
{
	LT_ENTER();
	if (attr != CUBLASLT_MATMUL_DESC_TRANSA && attr != CUBLASLT_MATMUL_DESC_TRANSB)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (n != sizeof(int32_t)) {
		fk_err(0, "fake: TRANSA/TRANSB is an int32 (cublasOperation_t), given %zu bytes", n);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	int32_t v;
	memcpy(&v, buf, sizeof(v));
	d->data[attr == CUBLASLT_MATMUL_DESC_TRANSA ? 2 : 3] = (uint64_t)v;
	return CUBLAS_STATUS_SUCCESS;
}

/* layout data: [0] type [1] rows [2] cols [3] ld [4] magic */
static cublasStatus_t fk_cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, int type,
                                                    uint64_t rows, uint64_t cols, int64_t ld)
{
	LT_ENTER();
	if (ld < (int64_t)rows || ld < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	*l = calloc(1, sizeof(**l));
	(*l)->data[0] = (uint64_t)type;
	(*l)->data[1] = rows;
	(*l)->data[2] = cols;
	(*l)->data[3] = (uint64_t)ld;
	(*l)->data[4] = LT_MAGIC;
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fk_cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	free(l);
	return CUBLAS_STATUS_SUCCESS;
}

/* pref data: [0] max workspace [1..4] min alignment A B C D [5] magic */
static cublasStatus_t fk_cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	LT_ENTER();
	*p = calloc(1, sizeof(**p));
	for (int i = 1; i <= 4; i++)
		(*p)->data[i] = 256; /* cuBLASLt's default assumption */
	(*p)->data[5] = LT_MAGIC;
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fk_cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	free(p);
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fk_cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                              int attr, const void *buf, size_t n)
{
	LT_ENTER();
	if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
		if (n != sizeof(uint64_t))
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&p->data[0], buf, 8);
		return CUBLAS_STATUS_SUCCESS;
	}
	if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
	    attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
		if (n != sizeof(uint32_t))
			return CUBLAS_STATUS_INVALID_VALUE;
		uint32_t v;
		memcpy(&v, buf, 4);
		p->data[1 + attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
		return CUBLAS_STATUS_SUCCESS;
	}
	return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* Checks the problem and fills x (pointers excepted). */
static cublasStatus_t mm_setup(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                               cublasLtMatrixLayout_t d, fk_mm *x)
{
	if (!op || !a || !b || !c || !d || op->data[4] != LT_MAGIC || a->data[4] != LT_MAGIC ||
	    b->data[4] != LT_MAGIC || c->data[4] != LT_MAGIC || d->data[4] != LT_MAGIC)
		return CUBLAS_STATUS_INVALID_VALUE;
	memset(x, 0, sizeof(*x));
	x->transa = op->data[2] == CUBLAS_OP_T;
	x->transb = op->data[3] == CUBLAS_OP_T;
	x->atype = (int)a->data[0];
	x->ctype = (int)c->data[0];
	if (op->data[0] != CUBLAS_COMPUTE_32F || op->data[1] != CUDA_R_32F ||
	    a->data[0] != b->data[0] || (x->atype != CUDA_R_16F && x->atype != CUDA_R_16BF) ||
	    c->data[0] != CUDA_R_32F || d->data[0] != CUDA_R_32F) {
		fk_err(0, "fake: unsupported type combination");
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	const uint64_t m = x->transa ? a->data[2] : a->data[1], k = x->transa ? a->data[1] : a->data[2];
	const uint64_t kb = x->transb ? b->data[2] : b->data[1], n = x->transb ? b->data[1] : b->data[2];
	if (k != kb || c->data[1] != m || c->data[2] != n || memcmp(c->data, d->data, 5 * 8)) {
		fk_err(0, "fake: inconsistent shapes: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu",
		       (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb,
		       (unsigned long long)n, (unsigned long long)c->data[1],
		       (unsigned long long)c->data[2]);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	x->m = m, x->n = n, x->k = k;
	x->lda = (int64_t)a->data[3], x->ldb = (int64_t)b->data[3], x->ldc = (int64_t)c->data[3];
	return CUBLAS_STATUS_SUCCESS;
}

/* algo data: [0] magic [1..4] the alignments it assumes [5] its workspace */
static cublasStatus_t fk_cublasLtMatmulAlgoGetHeuristic(
	cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
	cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
	int requested, cublasLtMatmulHeuristicResult_t *res, int *returned)
{
	LT_ENTER();
	fk_mm x;
	cublasStatus_t s = mm_setup(op, a, b, c, d, &x);
	*returned = 0;
	if (s)
		return s;
	if (!h || !pref || pref->data[5] != LT_MAGIC || requested < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (F.n_capturing) {
		fk_err(0, "fake: cublasLtMatmulAlgoGetHeuristic while %d stream(s) capture (a query is "
		       "no launch: plan before capturing)", F.n_capturing);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	/* up to FK_ALGOS candidates, best first, each with its own serial */
	const int n = requested < FK_ALGOS ? requested : FK_ALGOS;
	for (int k = 0; k < n; k++) {
		memset(&res[k], 0, sizeof(res[k]));
		res[k].algo.data[0] = LT_MAGIC;
		for (int i = 1; i <= 4; i++)
			res[k].algo.data[i] = pref->data[i];
		res[k].workspaceSize = pref->data[0] < 4096 ? pref->data[0] : 4096;
		res[k].algo.data[5] = res[k].workspaceSize;
		res[k].algo.data[6] = (uint64_t)k;
		res[k].algo.data[7] = ++F.algo_serial;
		res[k].wavesCount = 1.0f;
	}
	*returned = n;
	return CUBLAS_STATUS_SUCCESS;
}

static bool algo_used(uint64_t serial)
{
	for (int i = 0; i < F.n_algo_used; i++)
		if (F.algo_used[i] == serial)
			return true;
	return false;
}

static cublasStatus_t fk_cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                        const void *alpha, const void *a, cublasLtMatrixLayout_t la,
                                        const void *b, cublasLtMatrixLayout_t lb, const void *beta,
                                        const void *c, cublasLtMatrixLayout_t lc, void *d,
                                        cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo,
                                        void *ws, size_t ws_bytes, CUstream s)
{
	char det[32];
	snprintf(det, sizeof(det), "algo %d", algo ? (int)algo->data[6] : -1);
	if (enter("cublasLtMatmul", det))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	fk_mm x;
	cublasStatus_t st = mm_setup(op, la, lb, lc, ld, &x);
	if (st)
		return st;
	if (!h || !algo || algo->data[0] != LT_MAGIC || !s) {
		fk_err(0, "fake: cublasLtMatmul needs a handle, a heuristic's algorithm and a stream");
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	const void *ptrs[4] = {a, b, c, d};
	for (int i = 0; i < 4; i++)
		if ((uintptr_t)ptrs[i] % algo->data[1 + i]) {
			fk_err(0, "fake: operand %c at %p is not %llu-byte aligned as the algorithm assumes",
			       "ABCD"[i], ptrs[i], (unsigned long long)algo->data[1 + i]);
			return CUBLAS_STATUS_INVALID_VALUE;
		}
	if (ws_bytes < algo->data[5] || (algo->data[5] && !in_device((uintptr_t)ws, algo->data[5]))) {
		fk_err(0, "fake: workspace of %zu bytes at %p for an algorithm needing %llu", ws_bytes, ws,
		       (unsigned long long)algo->data[5]);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	const size_t es = x.atype == CUDA_R_32F ? 4 : 2;
	const size_t na = (size_t)((x.transa ? x.m : x.k) - 1) * (size_t)x.lda +
	                  (x.transa ? x.k : x.m);
	const size_t nb = (size_t)((x.transb ? x.k : x.n) - 1) * (size_t)x.ldb +
	                  (x.transb ? x.n : x.k);
	const size_t nd = (size_t)(x.n - 1) * (size_t)x.ldc + x.m;
	if (!in_device((uintptr_t)a, na * es) || !in_device((uintptr_t)b, nb * es) ||
	    !in_device((uintptr_t)d, nd * 4)) {
		fk_err(0, "fake: a matmul operand runs outside its allocation");
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if ((int)algo->data[6] < F.cfg.lt_bad_algos) {
		fk_err(0, "fake: algorithm %d refuses this problem (cfg.lt_bad_algos %d)",
		       (int)algo->data[6], F.cfg.lt_bad_algos);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	if (s->capturing && !algo_used(algo->data[7])) {
		fk_err(0, "fake: first use of cuBLASLt algorithm %llu inside a capture (it may load a "
		       "kernel module: run it once before capturing)", (unsigned long long)algo->data[7]);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	if (!s->capturing && !algo_used(algo->data[7])) {
		if (fk_grow((void **)&F.algo_used, &F.cap_algo_used, F.n_algo_used,
		            sizeof(*F.algo_used)))
			return CUBLAS_STATUS_NOT_INITIALIZED;
		F.algo_used[F.n_algo_used++] = algo->data[7];
	}
	memcpy(&x.alpha, alpha, sizeof(float)); /* host pointer mode: read at the call */
	memcpy(&x.beta, beta, sizeof(float));
	x.a = a, x.b = b, x.c = c, x.d = d;
	if (s->capturing) {
		struct CUgraphNode_st *n = capture_node(s, FK_MATMUL);
		if (!n)
			return CUBLAS_STATUS_NOT_INITIALIZED;
		n->mm = x;
		return CUBLAS_STATUS_SUCCESS;
	}
	mm_run(&x);
	return CUBLAS_STATUS_SUCCESS;
}

/* ---- graph launch ---- */

static CUresult run_steps(const fk_step *s, int n)
{
	CUresult r = CUDA_SUCCESS;
	for (int i = 0; i < n && !r; i++) {
		const struct CUgraphNode_st *x = &s[i].node;
		switch (x->kind) {
		case FK_KERNEL:
			r = run_kernel(x, true);
			break;
		case FK_MEMSET:
			memset((void *)(uintptr_t)x->ptr, x->val, x->bytes);
			break;
		case FK_MATMUL:
			mm_run(&x->mm);
			break;
		case FK_COND: {
			fk_handle *h = handle_get(x->h);
			if (h->value)
				r = run_steps(s[i].body, s[i].n_body);
			*(h->value ? &F.if_taken : &F.if_skipped) += 1;
			break;
		}
		}
	}
	return r;
}

static void reset_handles(const fk_step *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i].node.kind == FK_COND) {
			fk_handle *h = handle_get(s[i].node.h);
			if (h->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
				h->value = h->def;
			reset_handles(s[i].body, s[i].n_body);
		}
}

static CUresult fk_cuGraphLaunch(CUgraphExec x, CUstream s)
{
	ENTER(NULL);
	CUresult r = not_capturing(s, "cuGraphLaunch");
	if (r)
		return r;
	if (!x)
		return fk_err(CUDA_ERROR_INVALID_VALUE, "fake: launch of a NULL graph exec");
	reset_handles(x->steps, x->n);
	r = run_steps(x->steps, x->n);
	if (r && !s->pending)
		s->pending = r;
	return CUDA_SUCCESS;
}

void fake_cuda_api(rt_cu_api *cu, rt_lt_api *lt)
{
	memset(cu, 0, sizeof(*cu));
	memset(lt, 0, sizeof(*lt));
#define CU(n) cu->n = fk_##n
	CU(cuInit);
	CU(cuDriverGetVersion);
	CU(cuGetErrorName);
	CU(cuGetErrorString);
	CU(cuDeviceGetCount);
	CU(cuDeviceGet);
	CU(cuDeviceGetName);
	CU(cuDeviceGetAttribute);
	CU(cuDeviceTotalMem);
	CU(cuDevicePrimaryCtxRetain);
	CU(cuDevicePrimaryCtxRelease);
	CU(cuCtxSetCurrent);
	CU(cuCtxGetCurrent);
	CU(cuMemAlloc);
	CU(cuMemFree);
	CU(cuMemHostAlloc);
	CU(cuMemFreeHost);
	CU(cuMemcpyHtoDAsync);
	CU(cuMemcpyDtoHAsync);
	CU(cuMemsetD8Async);
	CU(cuStreamCreate);
	CU(cuStreamDestroy);
	CU(cuStreamSynchronize);
	CU(cuModuleLoadDataEx);
	CU(cuModuleUnload);
	CU(cuModuleGetFunction);
	CU(cuFuncSetAttribute);
	CU(cuLaunchKernel);
	CU(cuStreamBeginCapture);
	CU(cuStreamEndCapture);
	CU(cuGraphInstantiate);
	CU(cuGraphLaunch);
	CU(cuGraphExecDestroy);
	CU(cuGraphDestroy);
	if (!F.cfg.no_conditionals) {
		CU(cuStreamGetCaptureInfo);
		CU(cuStreamUpdateCaptureDependencies);
		CU(cuStreamBeginCaptureToGraph);
		CU(cuGraphConditionalHandleCreate);
		CU(cuGraphAddNode);
	}
#undef CU
#define LT(n) lt->n = fk_##n
	LT(cublasLtCreate);
	LT(cublasLtDestroy);
	LT(cublasLtGetStatusString);
	LT(cublasLtMatmulDescCreate);
	LT(cublasLtMatmulDescDestroy);
	LT(cublasLtMatmulDescSetAttribute);
	LT(cublasLtMatrixLayoutCreate);
	LT(cublasLtMatrixLayoutDestroy);
	LT(cublasLtMatmulPreferenceCreate);
	LT(cublasLtMatmulPreferenceDestroy);
	LT(cublasLtMatmulPreferenceSetAttribute);
	LT(cublasLtMatmulAlgoGetHeuristic);
	LT(cublasLtMatmul);
#undef LT
}
