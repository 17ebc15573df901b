/* safetensors reader: one file over mmap (or a caller's buffer, for fuzzing),
 * and a checkpoint directory (single model.safetensors or shards listed in
 * model.safetensors.index.json). Every offset and size is validated before
 * use. F32, F16 and BF16 tensors, converted to f32; I64 and BOOL (the index
 * maps of EAGLE-3 heads: d2t, t2d), read as int64; I8 (quantized weights
 * whose scales are other tensors: the caller reads t->data). Not a writer. */
#ifndef RT_SAFETENSORS_H
#define RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/wformat.h"

#define SAFETENSORS_MAX_DIMS 8
#define SAFETENSORS_MAX_HEADER (100u << 20) /* the reference implementation's cap */

enum safetensors_dtype {
	SAFETENSORS_F32 = 0,
	SAFETENSORS_F16,
	SAFETENSORS_BF16,
	SAFETENSORS_I64,
	SAFETENSORS_BOOL,  /* one byte, 0 or not */
	SAFETENSORS_I8,    /* int8 codes of a quantized weight (no value without its scale) */
};

typedef struct safetensors_tensor {
	char *name;
	int dtype;               /* enum safetensors_dtype */
	int n_dims;              /* 0 (scalar) .. SAFETENSORS_MAX_DIMS */
	int64_t shape[SAFETENSORS_MAX_DIMS]; /* row-major, shape[n_dims-1] contiguous */
	uint64_t numel;
	const uint8_t *data;     /* validated: inside the file's data section;
				  * NOT aligned: read with memcpy */
	uint64_t nbytes;
} safetensors_tensor;

typedef struct safetensors_file {
	char *name;              /* path, for messages */
	const uint8_t *base;
	size_t size;
	int mapped;              /* base is our mmap */
	safetensors_tensor *tensors; /* header order */
	size_t n_tensors;
} safetensors_file;

/* Maps and parses path. */
int safetensors_open(const char *path, safetensors_file **out, sw_err *err);
/* Parses a caller's buffer, which must outlive the result. name is for messages. */
int safetensors_open_mem(const void *data, size_t len, const char *name,
			 safetensors_file **out, sw_err *err);
void safetensors_free(safetensors_file *f);

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);
const char *safetensors_dtype_name(int dtype);

/* Converts t's numel elements to f32 (F32 is copied bit for bit; I64 and
 * BOOL by value, so a float loader handed an index tensor reads numbers; I8
 * gives NaN: its values need the scale a quantized format keeps elsewhere,
 * so a loader that does not know the format cannot read it as numbers). */
void safetensors_to_f32(const safetensors_tensor *t, float *out);
/* 0 when t holds numbers safetensors_to_f32 reads as they are (every dtype
 * but I8), else SW_ENOTSUP naming file and tensor: a loader that does not
 * take a quantized form asks this before it converts. */
int safetensors_numeric(const safetensors_file *f, const safetensors_tensor *t, sw_err *err);
/* An I64 or BOOL tensor's numel elements as int64 (BOOL: 0 or 1); -1 for
 * a float dtype (nothing written), else 0. */
int safetensors_to_i64(const safetensors_tensor *t, int64_t *out);

/* The finite scan (core/wformat.h's F32, F16 and BF16 rows) of every float
 * tensor of f: 0, or SW_EINVAL naming the file, the tensor, the first
 * non-finite element and its value. cost (may be NULL) gains the bytes,
 * tensors and seconds. */
int safetensors_check_finite(const safetensors_file *f, sw_wscan_cost *cost, sw_err *err);

/* IEEE binary16 / bfloat16 bits to f32, exact (subnormals, inf, NaN kept). */
float safetensors_f16_to_f32(uint16_t h);
float safetensors_bf16_to_f32(uint16_t h);

/* A checkpoint directory: dir/model.safetensors.index.json when present
 * (its weight_map names the shard of each tensor), else dir/model.safetensors. */
typedef struct safetensors_ckpt {
	char *dir;
	safetensors_file **files;
	size_t n_files;
	char **map_names;        /* weight_map keys (NULL when unsharded) */
	size_t *map_file;        /* file index of map_names[i] */
	size_t n_map;
} safetensors_ckpt;

int safetensors_ckpt_open(const char *dir, safetensors_ckpt **out, sw_err *err);
void safetensors_ckpt_free(safetensors_ckpt *c);

/* The tensor called name, or NULL. With an index, a tensor listed in
 * weight_map but absent from its shard is an error (SW_EINVAL); *file (if
 * non-NULL) gets the file holding it, for messages. */
int safetensors_ckpt_find(const safetensors_ckpt *c, const char *name,
			  const safetensors_tensor **t, const safetensors_file **file,
			  sw_err *err);

#endif
