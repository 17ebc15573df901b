/* Tiny random block drafters for tests: writes a drafter directory
 * (config.json + model.safetensors, F32) over a tiny target, with knobs to
 * corrupt it for the malformed-file tests. */
#ifndef BLOCK_UTIL_H
#define BLOCK_UTIL_H

#include <stdint.h>

#include "model/ctx.h"

typedef struct tbu_opts {
	const char *cond;       /* "features" or "tokens" */
	const char *attn;       /* "bidirectional" or "causal" */
	int block, draft_vocab, n_layers, n_heads, n_kv_heads, head_dim, ffn;
	int n_taps, taps[8];
	int window;
	double scale;           /* weight scale (1: logits O(1..3)) */
	double qk_scale, vo_scale; /* extra factors on wq/wk and wv/wo (default 1;
	                            * qk 0: uniform attention, every row mixes all) */
	const int32_t *map;     /* non-NULL: "d2t": true and a d2t tensor (I64 offsets)
	                         * mapping draft id i to target id map[i] */
	int map_bad;            /* 1: d2t[0] out of range; 2: the tensor omitted */
	/* corruption knobs (tests of malformed files) */
	const char *config_override; /* non-NULL: written as config.json verbatim */
	const char *skip_tensor;     /* omitted from the file */
	const char *bad_tensor;      /* written with its first dimension + 1 */
	const char *extra_tensor;    /* an extra (4) tensor of this name */
} tbu_opts;

/* Defaults for target m: features over taps {0, last}, B = 4, Vd = vocab,
 * one layer with the target's heads. */
tbu_opts tbu_default(const rt_model *m);
/* The config text for o over target m (what tbu_write writes). */
void tbu_config_text(const rt_model *m, const tbu_opts *o, char *out, size_t cap);
/* Writes dir/config.json and dir/model.safetensors; returns 0 or -1. */
int tbu_write(const char *dir, const rt_model *m, const tbu_opts *o, uint64_t seed);
/* A fresh temporary directory (mkdtemp) under /tmp; path in out (>= 64). */
void tbu_tmpdir(char *out);
void tbu_rmdir(const char *dir);

#endif
