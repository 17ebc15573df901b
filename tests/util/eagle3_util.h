/* Tiny random EAGLE-3 heads for tests, written in the public checkpoint
 * format (config.json + model.safetensors with F32 weights, d2t I64 offsets,
 * t2d BOOL) over a given target, with knobs to corrupt them for the
 * malformed-file tests. The PyTorch cross-check of the forward uses
 * tests/tools/eagle3_tiny.py instead (independent of this writer). */
#ifndef EAGLE3_UTIL_H
#define EAGLE3_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/ctx.h"

typedef struct te3_opts {
	int draft_vocab;        /* Vd */
	const int32_t *used;    /* (Vd) target ids of the draft ids, or NULL: Vd ids spread over [0, V) */
	int n_heads, n_kv_heads, ffn;
	int taps[3];            /* eagle_config.eagle_aux_hidden_state_layer_ids (output of layer i) */
	double scale;           /* weight scale (1: logits O(1..3)) */
	bool own_embd;          /* write embed_tokens.weight (random) */
	bool no_maps;           /* write neither d2t nor t2d */
	/* corruption knobs */
	const char *config_override; /* config.json verbatim */
	const char *skip_tensor;     /* omitted */
	const char *bad_tensor;      /* written with its first dimension + 1 */
	const char *extra_tensor;    /* an extra (4) F32 tensor of this name */
	int d2t_bad;            /* 1: d2t[0] out of range; 2: d2t[1] repeats d2t[0]'s id; 3: d2t as F32 */
	bool t2d_bad;           /* t2d disagreeing with d2t at the first draftable id */
} te3_opts;

/* Defaults over target m: Vd = V, the target's heads, ffn 2*dim, taps {0,
 * L/2, L-1}, scale 1. */
te3_opts te3_default(const rt_model *m);
/* Writes dir/config.json and dir/model.safetensors; returns 0 or -1. */
int te3_write(const char *dir, const rt_model *m, const te3_opts *o, uint64_t seed);
/* Removes the files te3_write or tests/tools/eagle3_tiny.py write, and dir. */
void te3_rmdir(const char *dir);

#endif
