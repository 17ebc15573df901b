/* SIMT emulator: runs a CUDA-style grid on the CPU, one block at a time, each
 * thread a fiber with its own stack. Checks what a GPU would silently get
 * wrong: barrier divergence, shuffles a lane never joins, deadlock, shared
 * memory races and uninitialised shared reads, out-of-bounds writes into the
 * guard zones of buffers from emu_alloc, misaligned vector accesses.
 * Not a performance model and not a memory-model checker for global memory.
 * Kernels reach it only through kernels/prelude_emu.h (see that file). */
#ifndef SW_EMU_H
#define SW_EMU_H

#include <stddef.h>
#include <stdint.h>

enum {
	EMU_OK = 0,
	EMU_EINVAL = -22,    /* bad launch: zero/oversized dims, no kernel */
	EMU_ENOMEM = -12,
	EMU_EBARRIER = -1001, /* SYNC() divergence: other site/instance, or a thread exited */
	EMU_ESHFL = -1002,    /* a warp shuffle some lane never joined, or reads a missing lane */
	EMU_EDEADLOCK = -1003, /* no runnable thread and the waits cannot be resolved */
	EMU_ERACE = -1004,    /* shared-memory race inside one barrier interval */
	EMU_ESHARED = -1005,  /* shared memory: uninitialised read, overflow, out of arena */
	EMU_EGUARD = -1006,   /* a guard zone of an emu_alloc buffer was overwritten */
	EMU_EALIGN = -1007,   /* misaligned vector load/store */
};

typedef struct emu_dim3 {
	unsigned x, y, z;
} emu_dim3;

struct emu_ctx;

/* One kernel as the emulator sees it; KERNEL(...) in prelude_emu.h defines
 * `const emu_kernel <name>_emu`. tramp unpacks void **args (cuLaunchKernel
 * convention: args[i] points at the i-th argument) and calls the kernel;
 * bind hands the emulator context to the translation unit the kernel lives
 * in (so a dlopen'ed kernel module needs no symbols from the host binary). */
typedef struct emu_kernel {
	const char *name;
	void (*tramp)(void **args);
	void (*bind)(struct emu_ctx *ctx);
	int n_args;
} emu_kernel;

typedef struct emu_report {
	int code;               /* 0 or an EMU_E* code, the first error seen */
	char msg[768];          /* what, where: block, thread, site, buffer+offset */
	uint64_t switches;      /* fiber context switches performed */
	uint64_t barriers;      /* barrier instances completed (all blocks) */
	uint64_t shuffles;      /* warp shuffle exchanges completed */
	double seconds;         /* wall time of the launch */
} emu_report;

/* Runs kernel k over grid x block threads with dyn_smem bytes of dynamic
 * shared memory. Returns 0 or the EMU_E* code also stored in rep->code
 * (rep may be NULL). Checks the guard zones of every live emu_alloc buffer
 * afterwards. Single-threaded; not reentrant. */
int emu_launch(const emu_kernel *k, emu_dim3 grid, emu_dim3 block, size_t dyn_smem, void **args,
               emu_report *rep);

/* Device buffers: n bytes, 256-byte aligned, with canary-filled guard zones
 * before and after; contents start as a NaN byte pattern (0xff). */
void *emu_alloc(size_t n, const char *name);
void emu_free(void *p);
/* Scans every live buffer's guard zones; on damage fills rep (buffer name,
 * byte offset relative to the buffer start, negative = before) and returns
 * EMU_EGUARD, then restores the canaries so one overwrite is reported once. */
int emu_check(emu_report *rep);

/* Largest block emu_launch accepts (threads). */
#define EMU_MAX_THREADS 1024
/* Static + dynamic shared memory per block (bytes). */
#define EMU_MAX_SMEM (228u * 1024u)

/* ---- interface for prelude_emu.h only ---- */

typedef struct emu_thread emu_thread;

enum { EMU_SH_READ = 0, EMU_SH_WRITE = 1, EMU_SH_ATOMIC = 2 };
enum { EMU_SHFL_XOR = 0, EMU_SHFL_DOWN = 1, EMU_SHFL_UP = 2, EMU_SHFL_IDX = 3,
       EMU_WARP_GATHER = 4 };
/* Bytes one lane may contribute to a warp gather (an mma fragment set is 40). */
#define EMU_GATHER_MAX 64

typedef struct emu_ctx {
	emu_thread *cur;        /* the running fiber */
	emu_dim3 tid, bid, bdim, gdim; /* of cur, and of the launch */
	void (*sync)(const char *file, int line);
	uint64_t (*shfl)(uint64_t v, int kind, int arg, const char *file, int line);
	void *(*shared)(const void *site, const char *name, size_t bytes);
	void *(*dyn_shared)(void);
	void *(*sh_access)(void *p, size_t bytes, int kind, const char *file, int line);
	void (*align_fail)(const void *p, size_t align, const char *file, int line);
	void (*fail)(int code, const char *file, int line, const char *msg);
	/* Warp all-gather, the collective under the mma/ldmatrix vocabulary:
	 * every lane of a full warp contributes `bytes` (<= EMU_GATHER_MAX, the
	 * same at every lane) from `in`; each gets the 32 contributions, lane
	 * after lane, valid until its own next warp collective. Joined like a
	 * shuffle (same site, every lane, or EMU_ESHFL / EMU_EDEADLOCK). */
	const void *(*gather)(const void *in, size_t bytes, const char *file, int line);
} emu_ctx;

#endif
