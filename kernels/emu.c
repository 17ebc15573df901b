/* SIMT emulator (see emu.h): blocks run one after another; inside a block
 * every thread is a fiber, switched cooperatively at SYNC() and shuffles.
 * Scheduling is round robin in linear thread order: a fiber that blocks
 * switches straight to the next runnable fiber of higher index, and the last
 * one back to the scheduler, which resolves the waits (warp exchanges first,
 * then the block barrier) or reports why it cannot. Single-threaded: one
 * global emulator state, not reentrant. */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

/* ---- context switch --------------------------------------------------- */

/* AddressSanitizer must be told about every stack switch
 * (__sanitizer_start/finish_switch_fiber), or it takes the fiber stacks for
 * a signal stack and reports overflows that are not there; a stack reused
 * for a new fiber is unpoisoned first (frames of fibers abandoned after an
 * error leave their redzones behind). Both are no-ops without ASan. */
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define ASAN_START(save, to) __sanitizer_start_switch_fiber((save), (to)->bottom, (to)->size)
#define ASAN_FINISH(save) __sanitizer_finish_switch_fiber((save), NULL, NULL)
#define ASAN_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define ASAN_START(save, to) ((void)(save), (void)(to))
#define ASAN_FINISH(save) ((void)(save))
#define ASAN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#if defined(__x86_64__)
/* Saves the callee-saved registers and rsp of the running context into
 * *from and resumes the one whose rsp is `to`. Everything else is
 * caller-saved under the SysV ABI, so this is the whole switch (about 15
 * instructions, no syscall, unlike swapcontext's sigprocmask). MXCSR and
 * the x87 control word are not saved: kernels never change them. */
__asm__(".text\n"
        ".globl sw_emu_switch\n"
        ".hidden sw_emu_switch\n"
        ".type sw_emu_switch,@function\n"
        "sw_emu_switch:\n"
        "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
        "\tmovq %rsp, (%rdi)\n"
        "\tmovq %rsi, %rsp\n"
        "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
        "\tret\n"
        ".size sw_emu_switch, .-sw_emu_switch\n");
void sw_emu_switch(void **from, void *to);

typedef struct fctx {
	void *sp;
	const void *bottom; /* the stack, for ASan */
	size_t size;
} fctx;

/* dying: `from` is never resumed (a finished or failed fiber) */
static void fctx_switch(fctx *from, fctx *to, bool dying)
{
	void *fake = NULL;
	ASAN_START(dying ? NULL : &fake, to);
	sw_emu_switch(&from->sp, to->sp);
	ASAN_FINISH(fake);
}

/* The first switch to a new fiber pops six zero registers and "returns"
 * into entry with rsp = top - 8, as after a call (rsp = 8 mod 16). */
static void fctx_init(fctx *c, char *stack, size_t size, void (*entry)(void))
{
	uint64_t *sp = (uint64_t *)(((uintptr_t)(stack + size)) & ~(uintptr_t)15);

	ASAN_UNPOISON(stack, size);
	c->bottom = stack;
	c->size = size;
	*--sp = 0; /* entry's return address: entry never returns */
	*--sp = (uint64_t)(uintptr_t)entry;
	for (int i = 0; i < 6; i++)
		*--sp = 0;
	c->sp = sp;
}
#else
/* Portable fallback: correct, about 50x slower (a syscall per switch). */
#include <ucontext.h>
typedef struct fctx {
	ucontext_t uc;
	const void *bottom;
	size_t size;
} fctx;

static void fctx_switch(fctx *from, fctx *to, bool dying)
{
	void *fake = NULL;
	ASAN_START(dying ? NULL : &fake, to);
	swapcontext(&from->uc, &to->uc);
	ASAN_FINISH(fake);
}

static void fctx_init(fctx *c, char *stack, size_t size, void (*entry)(void))
{
	ASAN_UNPOISON(stack, size);
	c->bottom = stack;
	c->size = size;
	getcontext(&c->uc);
	c->uc.uc_stack.ss_sp = stack;
	c->uc.uc_stack.ss_size = size;
	c->uc.uc_link = NULL;
	makecontext(&c->uc, entry, 0);
}
#endif

/* ---- state ------------------------------------------------------------ */

enum { T_RUN, T_BAR, T_SHFL, T_DONE };

struct emu_thread {
	fctx ctx;
	int idx;  /* linear index in the block: x + y*bx + z*bx*by */
	int state;
	emu_dim3 tid;
	const char *file; /* site of the SYNC or shuffle it waits at */
	int line;
	uint64_t n_sync;  /* barriers this thread has passed or reached */
	uint64_t shfl_in, shfl_out;
	int shfl_kind, shfl_arg; /* gather: arg = bytes */
	const void *gin;         /* gather: this lane's contribution */
	/* the path since the warp last converged (a barrier, a shuffle, a
	 * gather): a hash of the sites of its shared accesses, their count and
	 * the last one. Lanes that reach an mma/ldmatrix with different paths
	 * took lane-dependent branches: a partial warp on hardware. */
	uint64_t path;
	uint32_t n_path;
	const char *pfile;
	int pline;
};

/* Shadow state of one 2-byte granule of shared memory, for the race and
 * initialisation checks. Epochs number barrier intervals within a block
 * (from 1; the shadow is zeroed per block, so 0 means "never"). */
typedef struct sh_shadow {
	uint32_t wep, rep, aep; /* interval of the last write, read, atomic */
	int16_t writer, reader; /* thread idx */
	int16_t arr;            /* shared array index, -1 = redzone */
	uint8_t multi;          /* >1 distinct readers in rep */
	uint8_t init;           /* ever written in this block */
	int32_t wline, rline;
} sh_shadow;

#define SH_GRAN 2
#define SH_RZ 64 /* redzone bytes before each shared array */
#define SH_ARENA (EMU_MAX_SMEM + 64u * 1024u)
#define SH_MAX_ARRAYS 64
#define STACK_SIZE (64u * 1024u)

typedef struct sh_array {
	const void *site;
	const char *name;
	size_t off, bytes;
} sh_array;

static struct {
	emu_ctx ctx;
	emu_thread th[EMU_MAX_THREADS];
	int n;          /* threads per block */
	fctx sched;
	char *stacks;   /* EMU_MAX_THREADS stacks, each above a PROT_NONE page */
	const emu_kernel *k;
	void **args;
	/* shared memory of the running block */
	unsigned char *sh;
	sh_shadow *shadow;
	size_t sh_used;
	sh_array arr[SH_MAX_ARRAYS];
	int n_arr;
	size_t dyn_off, dyn_bytes;
	uint32_t epoch;
	char uninit[256]; /* first uninitialised read of the interval */
	/* warp gathers: one buffer per warp, overwritten only when all 32 lanes
	 * have joined the warp's next collective, so after every read of it */
	unsigned char gbuf[EMU_MAX_THREADS / 32][32 * EMU_GATHER_MAX];
	/* results */
	emu_report *rep;
	int err;
	uint64_t switches, barriers, shuffles;
} E;

static int emu_failf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int emu_failf(int code, const char *fmt, ...)
{
	va_list ap;

	if (E.err)
		return E.err;
	E.err = code;
	if (E.rep) {
		int k = snprintf(E.rep->msg, sizeof(E.rep->msg), "block (%u,%u,%u): ", E.ctx.bid.x,
		                 E.ctx.bid.y, E.ctx.bid.z);
		va_start(ap, fmt);
		vsnprintf(E.rep->msg + k, sizeof(E.rep->msg) - (size_t)k, fmt, ap);
		va_end(ap);
	}
	return code;
}

static const char *tstr(const emu_thread *t, char *buf, size_t n)
{
	snprintf(buf, n, "thread (%u,%u,%u)", t->tid.x, t->tid.y, t->tid.z);
	return buf;
}

/* ---- fibers ----------------------------------------------------------- */

static void go(emu_thread *from, emu_thread *to)
{
	E.ctx.cur = to;
	E.ctx.tid = to->tid;
	E.switches++;
	fctx_switch(&from->ctx, &to->ctx, from->state == T_DONE);
}

/* The running fiber stops (it blocked, exited or failed): on to the next
 * runnable fiber after it, else back to the scheduler. */
static void yield(void)
{
	emu_thread *t = E.ctx.cur;

	if (!E.err)
		for (int j = t->idx + 1; j < E.n; j++)
			if (E.th[j].state == T_RUN) {
				go(t, &E.th[j]);
				return;
			}
	E.switches++;
	/* a failed fiber is never resumed either: E.err ends the block */
	fctx_switch(&t->ctx, &E.sched, t->state == T_DONE || E.err);
}

static void fiber_main(void)
{
	emu_thread *t = E.ctx.cur;

	ASAN_FINISH(NULL); /* the first switch into a fiber lands here, not in fctx_switch */
	E.k->tramp(E.args);
	t->state = T_DONE;
	yield();
	abort(); /* a finished fiber is never resumed */
}

/* Errors found inside a fiber: record and leave the block for good. */
static void fail_here(void)
{
	yield();
	abort();
}

/* ---- warp convergence ---- */

static void path_note(emu_thread *t, const char *file, int line)
{
	t->path = (t->path ^ (uint64_t)(uintptr_t)file) * 0x100000001b3ull;
	t->path = (t->path ^ (uint64_t)(uint32_t)line) * 0x100000001b3ull;
	t->n_path++;
	t->pfile = file;
	t->pline = line;
}

static void path_reset(emu_thread *t)
{
	t->path = 0;
	t->n_path = 0;
	t->pfile = NULL;
	t->pline = 0;
}

/* ---- device API (called through emu_ctx by prelude_emu.h) ------------ */

static void api_sync(const char *file, int line)
{
	emu_thread *t = E.ctx.cur;

	t->state = T_BAR;
	t->file = file;
	t->line = line;
	t->n_sync++;
	yield();
}

static uint64_t api_shfl(uint64_t v, int kind, int arg, const char *file, int line)
{
	emu_thread *t = E.ctx.cur;

	t->state = T_SHFL;
	t->file = file;
	t->line = line;
	t->shfl_in = v;
	t->shfl_kind = kind;
	t->shfl_arg = arg;
	yield();
	return t->shfl_out;
}

static const void *api_gather(const void *in, size_t bytes, const char *file, int line)
{
	emu_thread *t = E.ctx.cur;
	char b1[48];

	if (bytes == 0 || bytes > EMU_GATHER_MAX) {
		emu_failf(EMU_EINVAL, "%s: warp gather of %zu bytes at %s:%d (1..%d)",
		          tstr(t, b1, sizeof(b1)), bytes, file, line, EMU_GATHER_MAX);
		fail_here();
	}
	t->state = T_SHFL;
	t->file = file;
	t->line = line;
	t->shfl_kind = EMU_WARP_GATHER;
	t->shfl_arg = (int)bytes;
	t->gin = in;
	yield();
	return E.gbuf[t->idx / 32];
}

static void *api_shared(const void *site, const char *name, size_t bytes)
{
	for (int i = 0; i < E.n_arr; i++)
		if (E.arr[i].site == site) {
			if (E.arr[i].bytes != bytes) {
				emu_failf(EMU_ESHARED, "shared array %s declared with %zu and %zu bytes", name,
				          E.arr[i].bytes, bytes);
				fail_here();
			}
			return E.sh + E.arr[i].off;
		}
	size_t off = ((E.sh_used + 15) & ~(size_t)15) + SH_RZ;
	if (E.n_arr == SH_MAX_ARRAYS || off + bytes + SH_RZ > SH_ARENA ||
	    off + bytes - (size_t)SH_RZ * (E.n_arr + 1) > EMU_MAX_SMEM) {
		emu_failf(EMU_ESHARED, "shared array %s (%zu bytes): out of shared memory", name, bytes);
		fail_here();
	}
	sh_array *a = &E.arr[E.n_arr];
	a->site = site;
	a->name = name;
	a->off = off;
	a->bytes = bytes;
	for (size_t g = off / SH_GRAN; g < (off + bytes + SH_GRAN - 1) / SH_GRAN; g++)
		E.shadow[g].arr = (int16_t)E.n_arr;
	E.n_arr++;
	E.sh_used = off + bytes;
	return E.sh + off;
}

/* DYN_SHARED: the launch's dynamic shared memory. A kernel that uses it
 * with none provided is refused here; one that reaches past what its
 * launch provides runs into the redzone after it (api_sh_access). */
static void *api_dyn_shared(void)
{
	if (!E.dyn_bytes) {
		char b1[48];
		emu_failf(EMU_ESHARED, "%s: the kernel uses dynamic shared memory (DYN_SHARED), but its "
		          "launch provides 0 bytes", tstr(E.ctx.cur, b1, sizeof(b1)));
		fail_here();
	}
	return E.sh + E.dyn_off;
}

static const char *arr_name(int a)
{
	return a >= 0 ? E.arr[a].name : "(redzone)";
}

static void *api_sh_access(void *p, size_t bytes, int kind, const char *file, int line)
{
	uintptr_t a = (uintptr_t)p, base = (uintptr_t)E.sh;
	emu_thread *t = E.ctx.cur;
	char b1[48];

	path_note(t, file, line);
	if (a < base || a >= base + SH_ARENA) {
		if (kind == EMU_SH_ATOMIC)
			return p; /* an atomic on global memory */
		emu_failf(EMU_ESHARED, "%s: shared access at %s:%d is not in shared memory",
		          tstr(t, b1, sizeof(b1)), file, line);
		fail_here();
	}
	size_t off = a - base, g0 = off / SH_GRAN, g1 = (off + bytes + SH_GRAN - 1) / SH_GRAN;
	for (size_t g = g0; g < g1; g++) {
		sh_shadow *s = &E.shadow[g];
		int16_t me = (int16_t)t->idx;
		int ar = s->arr;
		size_t aoff = ar >= 0 ? g * SH_GRAN - E.arr[ar].off : 0;

		if (ar < 0 && E.dyn_bytes && g * SH_GRAN >= E.dyn_off + E.dyn_bytes &&
		    g * SH_GRAN < E.dyn_off + E.dyn_bytes + SH_RZ) {
			emu_failf(EMU_ESHARED, "%s: dynamic shared memory access at %s:%d reaches %zu bytes "
			          "in, past the %zu bytes its launch provides", tstr(t, b1, sizeof(b1)),
			          file, line, off + bytes - E.dyn_off, E.dyn_bytes);
			fail_here();
		}
		if (ar < 0 || g * SH_GRAN >= E.sh_used) {
			emu_failf(EMU_ESHARED, "%s: shared access at %s:%d outside every shared array "
			          "(%zu bytes into the arena; last array %s)", tstr(t, b1, sizeof(b1)), file,
			          line, off, E.n_arr ? E.arr[E.n_arr - 1].name : "none");
			fail_here();
		}
		/* Reported at the end of the interval: a write by another thread
		 * later in it makes this a race, the more useful diagnosis. */
		if (kind == EMU_SH_READ && !s->init && !E.uninit[0])
			snprintf(E.uninit, sizeof(E.uninit), "%s: read of uninitialised shared %s[+%zu "
			         "bytes] at %s:%d", tstr(t, b1, sizeof(b1)), arr_name(ar), aoff, file, line);
		if (s->wep == E.epoch && s->writer != me) {
			emu_failf(EMU_ERACE, "race on shared %s[+%zu bytes]: %s %s it at %s:%d after thread "
			          "idx %d wrote it at line %d, no SYNC() between", arr_name(ar), aoff,
			          tstr(t, b1, sizeof(b1)), kind == EMU_SH_READ ? "reads" : "writes", file,
			          line, s->writer, s->wline);
			fail_here();
		}
		if (kind != EMU_SH_READ && s->rep == E.epoch && (s->multi || s->reader != me)) {
			emu_failf(EMU_ERACE, "race on shared %s[+%zu bytes]: %s writes it at %s:%d after "
			          "thread idx %d read it at line %d, no SYNC() between", arr_name(ar), aoff,
			          tstr(t, b1, sizeof(b1)), file, line, s->reader == me ? -1 : s->reader,
			          s->rline);
			fail_here();
		}
		if (kind != EMU_SH_ATOMIC && s->aep == E.epoch) {
			emu_failf(EMU_ERACE, "race on shared %s[+%zu bytes]: %s %s it at %s:%d, updated "
			          "atomically in the same barrier interval", arr_name(ar), aoff,
			          tstr(t, b1, sizeof(b1)), kind == EMU_SH_READ ? "reads" : "writes", file, line);
			fail_here();
		}
		if (kind == EMU_SH_READ) {
			if (s->rep != E.epoch) {
				s->rep = E.epoch;
				s->reader = me;
				s->multi = 0;
				s->rline = line;
			} else if (s->reader != me) {
				s->multi = 1;
			}
		} else if (kind == EMU_SH_WRITE) {
			s->wep = E.epoch;
			s->writer = me;
			s->wline = line;
			s->init = 1;
		} else {
			s->aep = E.epoch;
			s->init = 1;
		}
	}
	return p;
}

static void api_align_fail(const void *p, size_t align, const char *file, int line)
{
	char b1[48];

	emu_failf(EMU_EALIGN, "%s: %zu-byte vector access at %s:%d to %p, not %zu-byte aligned",
	          tstr(E.ctx.cur, b1, sizeof(b1)), align, file, line, p, align);
	fail_here();
}

static void api_fail(int code, const char *file, int line, const char *msg)
{
	char b1[48];

	emu_failf(code, "%s: %s at %s:%d", tstr(E.ctx.cur, b1, sizeof(b1)), msg, file, line);
	fail_here();
}

/* ---- scheduler -------------------------------------------------------- */

/* Exchanges of complete warps; returns how many, or an error. */
static int resolve_shuffles(int *done)
{
	char b1[48], b2[48];

	*done = 0;
	for (int w0 = 0; w0 < E.n; w0 += 32) {
		int w1 = w0 + 32 < E.n ? w0 + 32 : E.n, n_shfl = 0;
		emu_thread *first = NULL;

		for (int i = w0; i < w1; i++)
			if (E.th[i].state == T_SHFL) {
				n_shfl++;
				if (!first)
					first = &E.th[i];
			}
		if (!n_shfl)
			continue;
		for (int i = w0; i < w1; i++) {
			emu_thread *t = &E.th[i];
			if (t->state == T_DONE)
				return emu_failf(EMU_ESHFL, "lane %d (%s) exited and never joins the warp "
				                 "shuffle at %s:%d that lane %d waits at", i - w0,
				                 tstr(t, b1, sizeof(b1)), first->file, first->line,
				                 first->idx - w0);
			if (t->state == T_BAR)
				return emu_failf(EMU_EDEADLOCK, "deadlock: lane %d (%s) waits at SYNC() %s:%d "
				                 "while lane %d (%s) of its warp waits at the shuffle at %s:%d",
				                 i - w0, tstr(t, b1, sizeof(b1)), t->file, t->line,
				                 first->idx - w0, tstr(first, b2, sizeof(b2)), first->file,
				                 first->line);
			if (t->file != first->file || t->line != first->line ||
			    t->shfl_kind != first->shfl_kind ||
			    (t->shfl_kind == EMU_WARP_GATHER && t->shfl_arg != first->shfl_arg))
				return emu_failf(EMU_ESHFL, "warp divergence: lane %d at the shuffle at %s:%d, "
				                 "lane %d at the one at %s:%d", first->idx - w0, first->file,
				                 first->line, i - w0, t->file, t->line);
		}
		/* a full-mask collective names all 32 lanes: none may be missing */
		if (w1 - w0 < 32)
			return emu_failf(EMU_ESHFL, "warp %s at %s:%d in a warp of %d lanes: lane %d of its "
			                 "full mask does not exist, needs all 32 (block of %d threads)",
			                 first->shfl_kind == EMU_WARP_GATHER ? "gather (mma/ldmatrix)"
			                 : "shuffle", first->file, first->line, w1 - w0, w1 - w0, E.n);
		if (first->shfl_kind == EMU_WARP_GATHER) {
			/* mma/ldmatrix (.sync.aligned) need a converged warp: every lane
			 * on the same path since the warp last converged */
			for (int i = w0; i < w1; i++) {
				const emu_thread *t = &E.th[i];
				if (t->path == first->path && t->n_path == first->n_path)
					continue;
				const emu_thread *a = first->n_path ? first : t, *b = a == first ? t : first;
				return emu_failf(EMU_ESHFL, "partial warp at the mma/ldmatrix at %s:%d: lane %d "
				                 "made %u shared accesses since the warp last converged (last "
				                 "at %s:%d), lane %d made %u%s: the lanes took lane-dependent "
				                 "branches; put SYNCWARP() before it", first->file, first->line,
				                 a->idx - w0, a->n_path, a->pfile ? a->pfile : "-", a->pline,
				                 b->idx - w0, b->n_path,
				                 b->n_path == a->n_path ? " on another path" : "");
			}
			const size_t nb = (size_t)first->shfl_arg;
			for (int i = w0; i < w1; i++) {
				memcpy(E.gbuf[w0 / 32] + (size_t)(i - w0) * nb, E.th[i].gin, nb);
				E.th[i].state = T_RUN;
				path_reset(&E.th[i]);
			}
			E.shuffles++;
			(*done)++;
			continue;
		}
		for (int i = w0; i < w1; i++) {
			emu_thread *t = &E.th[i];
			int lane = i - w0, src;

			switch (t->shfl_kind) {
			case EMU_SHFL_XOR: src = lane ^ t->shfl_arg; break;
			case EMU_SHFL_DOWN: src = lane + t->shfl_arg; break;
			case EMU_SHFL_UP: src = lane - t->shfl_arg; break;
			default: src = t->shfl_arg & 31; break;
			}
			/* CUDA: a source outside the 32-lane segment returns the lane's own value. */
			if (src < 0 || src > 31) {
				t->shfl_out = t->shfl_in;
				continue;
			}
			if (w0 + src >= w1)
				return emu_failf(EMU_ESHFL, "%s (lane %d) reads lane %d at the shuffle at %s:%d, "
				                 "which does not exist (block of %d threads)",
				                 tstr(t, b1, sizeof(b1)), lane, src, t->file, t->line, E.n);
			t->shfl_out = E.th[w0 + src].shfl_in;
		}
		for (int i = w0; i < w1; i++) {
			E.th[i].state = T_RUN;
			path_reset(&E.th[i]);
		}
		E.shuffles++;
		(*done)++;
	}
	return 0;
}

static int resolve_barrier(void)
{
	emu_thread *first = NULL, *exited = NULL;
	char b1[48], b2[48];

	for (int i = 0; i < E.n; i++) {
		emu_thread *t = &E.th[i];
		if (t->state == T_BAR && !first)
			first = t;
		if (t->state == T_DONE && !exited)
			exited = t;
	}
	if (!first)
		return emu_failf(EMU_EDEADLOCK, "deadlock: threads wait but none at a resolvable point");
	if (E.uninit[0])
		return emu_failf(EMU_ESHARED, "%s", E.uninit);
	if (exited)
		return emu_failf(EMU_EBARRIER, "barrier divergence: %s waits at SYNC() %s:%d but %s "
		                 "has exited", tstr(first, b1, sizeof(b1)), first->file, first->line,
		                 tstr(exited, b2, sizeof(b2)));
	for (int i = 0; i < E.n; i++) {
		emu_thread *t = &E.th[i];
		if (t->file != first->file || t->line != first->line || t->n_sync != first->n_sync)
			return emu_failf(EMU_EBARRIER, "barrier divergence: %s at SYNC() %s:%d (its barrier "
			                 "#%llu), %s at SYNC() %s:%d (#%llu)", tstr(first, b1, sizeof(b1)),
			                 first->file, first->line, (unsigned long long)first->n_sync,
			                 tstr(t, b2, sizeof(b2)), t->file, t->line,
			                 (unsigned long long)t->n_sync);
	}
	for (int i = 0; i < E.n; i++) {
		E.th[i].state = T_RUN;
		path_reset(&E.th[i]);
	}
	E.epoch++;
	E.barriers++;
	return 0;
}

/* The calling thread's stack, where the scheduler runs (ASan's switch
 * annotations need its bounds to switch back to it). Asked once per thread:
 * on the main thread glibc answers by parsing /proc/self/maps, which was a
 * tenth of an engine test's time when asked at every launch. */
static void sched_stack(void)
{
	static _Thread_local bool known;
	static _Thread_local void *addr;
	static _Thread_local size_t size;
	if (!known) {
		pthread_attr_t a;
		if (pthread_getattr_np(pthread_self(), &a) == 0) {
			pthread_attr_getstack(&a, &addr, &size);
			pthread_attr_destroy(&a);
		}
		known = true;
	}
	E.sched.bottom = addr;
	E.sched.size = size;
}

static int run_block(emu_dim3 bid, emu_dim3 block, size_t dyn)
{
	E.ctx.bid = bid;
	for (int i = 0; i < E.n; i++) {
		emu_thread *t = &E.th[i];
		t->idx = i;
		t->state = T_RUN;
		t->tid.x = (unsigned)i % block.x;
		t->tid.y = ((unsigned)i / block.x) % block.y;
		t->tid.z = (unsigned)i / (block.x * block.y);
		t->n_sync = 0;
		path_reset(t);
		fctx_init(&t->ctx, E.stacks + (size_t)i * STACK_SIZE, STACK_SIZE, fiber_main);
	}
	/* Fresh shared memory: poisoned contents, zero shadow (redzone arr = -1). */
	size_t used = E.sh_used ? E.sh_used + SH_RZ : 0;
	memset(E.sh, 0xff, used);
	for (size_t g = 0; g < (used + SH_GRAN - 1) / SH_GRAN; g++) {
		memset(&E.shadow[g], 0, sizeof(E.shadow[g]));
		E.shadow[g].arr = -1;
	}
	E.n_arr = 0;
	E.sh_used = 0;
	E.epoch = 1;
	E.uninit[0] = 0;
	E.dyn_bytes = dyn;
	if (dyn) {
		static const char dyn_site;
		E.dyn_off = (size_t)((unsigned char *)api_shared(&dyn_site, "dynamic smem", dyn) - E.sh);
	}

	for (;;) {
		int any = -1;
		for (int i = 0; i < E.n; i++)
			if (E.th[i].state == T_RUN) {
				any = i;
				break;
			}
		if (any >= 0) {
			E.ctx.cur = &E.th[any];
			E.ctx.tid = E.th[any].tid;
			E.switches++;
			fctx_switch(&E.sched, &E.th[any].ctx, false);
			if (E.err)
				return E.err;
			continue;
		}
		int n_done = 0, n_shfl_done;
		for (int i = 0; i < E.n; i++)
			n_done += E.th[i].state == T_DONE;
		if (n_done == E.n) {
			if (E.uninit[0])
				return emu_failf(EMU_ESHARED, "%s", E.uninit);
			break;
		}
		if (resolve_shuffles(&n_shfl_done))
			return E.err;
		if (n_shfl_done)
			continue;
		if (resolve_barrier())
			return E.err;
	}
	return 0;
}

static int emu_init(void)
{
	if (E.stacks)
		return 0;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *s = mmap(NULL, (size_t)EMU_MAX_THREADS * STACK_SIZE, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s == MAP_FAILED)
		return EMU_ENOMEM;
	/* A guard page at the bottom of every stack: an overflow faults at once. */
	for (int i = 0; i < EMU_MAX_THREADS; i++)
		mprotect(s + (size_t)i * STACK_SIZE, page, PROT_NONE);
	E.sh = aligned_alloc(256, SH_ARENA);
	E.shadow = calloc(SH_ARENA / SH_GRAN, sizeof(*E.shadow));
	if (!E.sh || !E.shadow) {
		munmap(s, (size_t)EMU_MAX_THREADS * STACK_SIZE);
		free(E.sh);
		free(E.shadow);
		E.sh = NULL;
		E.shadow = NULL;
		return EMU_ENOMEM;
	}
	for (size_t g = 0; g < SH_ARENA / SH_GRAN; g++)
		E.shadow[g].arr = -1;
	E.stacks = s;
	E.ctx.sync = api_sync;
	E.ctx.shfl = api_shfl;
	E.ctx.shared = api_shared;
	E.ctx.dyn_shared = api_dyn_shared;
	E.ctx.sh_access = api_sh_access;
	E.ctx.align_fail = api_align_fail;
	E.ctx.fail = api_fail;
	E.ctx.gather = api_gather;
	return 0;
}

int emu_launch(const emu_kernel *k, emu_dim3 grid, emu_dim3 block, size_t dyn_smem, void **args,
               emu_report *rep)
{
	emu_report local;
	struct timespec t0, t1;
	uint64_t nthreads = (uint64_t)block.x * block.y * block.z;

	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	E.rep = rep;
	E.err = 0;
	E.switches = E.barriers = E.shuffles = 0;
	if (!k || !k->tramp || !k->bind)
		return rep->code = emu_failf(EMU_EINVAL, "no kernel");
	if (!grid.x || !grid.y || !grid.z || !nthreads || nthreads > EMU_MAX_THREADS ||
	    block.z > 64 || grid.y > 65535 || grid.z > 65535)
		return rep->code = emu_failf(EMU_EINVAL, "%s: bad launch shape grid (%u,%u,%u) block "
		                             "(%u,%u,%u)", k->name, grid.x, grid.y, grid.z, block.x,
		                             block.y, block.z);
	if (dyn_smem > EMU_MAX_SMEM)
		return rep->code = emu_failf(EMU_EINVAL, "%s: %zu bytes of dynamic shared memory > %u",
		                             k->name, dyn_smem, EMU_MAX_SMEM);
	if (emu_init())
		return rep->code = emu_failf(EMU_ENOMEM, "cannot allocate fiber stacks");
	E.k = k;
	E.args = args;
	E.n = (int)nthreads;
	sched_stack();
	E.ctx.bdim = block;
	E.ctx.gdim = grid;
	k->bind(&E.ctx);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	emu_dim3 b;
	for (b.z = 0; b.z < grid.z && !E.err; b.z++)
		for (b.y = 0; b.y < grid.y && !E.err; b.y++)
			for (b.x = 0; b.x < grid.x && !E.err; b.x++)
				if (run_block(b, block, dyn_smem))
					break;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (E.err)
		snprintf(rep->msg + strlen(rep->msg), sizeof(rep->msg) - strlen(rep->msg), " [kernel %s]",
		         k->name);
	rep->code = E.err;
	rep->switches = E.switches;
	rep->barriers = E.barriers;
	rep->shuffles = E.shuffles;
	rep->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	E.rep = NULL;
	if (!rep->code)
		emu_check(rep);
	return rep->code;
}

/* ---- device buffers with guard zones ---------------------------------- */

#define GUARD_BYTES 256

typedef struct ebuf {
	struct ebuf *next;
	unsigned char *base; /* GUARD_BYTES | user (n, padded) | GUARD_BYTES */
	size_t n, padded;
	char name[48];
} ebuf;

static ebuf *g_bufs;

static unsigned char canary(size_t i)
{
	return (unsigned char)(0xa5u ^ (i * 31u));
}

static void guard_fill(ebuf *b)
{
	unsigned char *u = b->base + GUARD_BYTES;
	for (size_t i = 0; i < GUARD_BYTES; i++)
		b->base[i] = canary(i);
	for (size_t i = b->n; i < b->padded + GUARD_BYTES; i++)
		u[i] = canary(i);
}

void *emu_alloc(size_t n, const char *name)
{
	ebuf *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->n = n;
	b->padded = (n + 255) & ~(size_t)255;
	b->base = aligned_alloc(256, b->padded + 2 * GUARD_BYTES);
	if (!b->base) {
		free(b);
		return NULL;
	}
	snprintf(b->name, sizeof(b->name), "%s", name ? name : "?");
	memset(b->base + GUARD_BYTES, 0xff, n);
	guard_fill(b);
	b->next = g_bufs;
	g_bufs = b;
	return b->base + GUARD_BYTES;
}

void emu_free(void *p)
{
	for (ebuf **pb = &g_bufs; *pb; pb = &(*pb)->next)
		if ((*pb)->base + GUARD_BYTES == (unsigned char *)p) {
			ebuf *b = *pb;
			*pb = b->next;
			free(b->base);
			free(b);
			return;
		}
}

int emu_check(emu_report *rep)
{
	int code = 0;

	for (ebuf *b = g_bufs; b; b = b->next) {
		unsigned char *u = b->base + GUARD_BYTES;
		long long bad = 0;
		int found = 0;

		for (size_t i = 0; i < GUARD_BYTES && !found; i++)
			if (b->base[i] != canary(i)) {
				bad = (long long)i - GUARD_BYTES;
				found = 1;
			}
		for (size_t i = b->n; i < b->padded + GUARD_BYTES && !found; i++)
			if (u[i] != canary(i)) {
				bad = (long long)i;
				found = 1;
			}
		if (!found)
			continue;
		if (!code && rep) {
			size_t k = strlen(rep->msg);
			snprintf(rep->msg + k, sizeof(rep->msg) - k,
			         "%sout-of-bounds write into buffer '%s' (%zu bytes) at byte offset %lld (%s)",
			         k ? "; " : "", b->name, b->n, bad, bad < 0 ? "before its start" : "past its end");
			rep->code = EMU_EGUARD;
		}
		code = EMU_EGUARD;
		guard_fill(b);
	}
	return code;
}
