/* GGUF v2/v3 reader: header, metadata, tensor infos, alignment, over an mmap
 * (or a caller's buffer, for fuzzing). Every offset and length is checked
 * against the file size before use; a hostile file gets an error, never an
 * out-of-bounds read. Also a minimal writer used by tests and model builders. */
#ifndef RT_GGUF_H
#define RT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/wformat.h"

enum gguf_vtype { /* metadata value types, numbered as in the format */
	GGUF_VT_UINT8 = 0, GGUF_VT_INT8 = 1, GGUF_VT_UINT16 = 2, GGUF_VT_INT16 = 3,
	GGUF_VT_UINT32 = 4, GGUF_VT_INT32 = 5, GGUF_VT_FLOAT32 = 6, GGUF_VT_BOOL = 7,
	GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_UINT64 = 10, GGUF_VT_INT64 = 11,
	GGUF_VT_FLOAT64 = 12,
};

enum ggml_dtype { /* tensor types: the weight formats' ids (core/wformat.h), ggml's numbers */
	GGML_T_F32 = SW_WT_F32, GGML_T_F16 = SW_WT_F16, GGML_T_Q4_0 = SW_WT_Q4_0,
	GGML_T_Q4_1 = SW_WT_Q4_1, GGML_T_Q5_0 = SW_WT_Q5_0, GGML_T_Q5_1 = SW_WT_Q5_1,
	GGML_T_Q8_0 = SW_WT_Q8_0, GGML_T_Q8_1 = SW_WT_Q8_1, GGML_T_Q2_K = SW_WT_Q2_K,
	GGML_T_Q3_K = SW_WT_Q3_K, GGML_T_Q4_K = SW_WT_Q4_K, GGML_T_Q5_K = SW_WT_Q5_K,
	GGML_T_Q6_K = SW_WT_Q6_K, GGML_T_Q8_K = SW_WT_Q8_K, GGML_T_BF16 = SW_WT_BF16,
};

typedef struct gguf_str {
	const char *p; /* NOT NUL-terminated: points into the file */
	uint64_t n;
} gguf_str;

typedef struct gguf_kv {
	gguf_str key;
	uint32_t type;      /* enum gguf_vtype */
	uint32_t arr_type;  /* element type when type == ARRAY */
	uint64_t arr_n;     /* element count when type == ARRAY */
	const uint8_t *val; /* raw little-endian value bytes in the file */
	/* for arrays of strings, string i is read with gguf_arr_str() */
} gguf_kv;

typedef struct gguf_tensor {
	gguf_str name;
	uint32_t n_dims;    /* 1..4 */
	uint64_t ne[4];     /* ggml order: ne[0] is the contiguous (innermost) dim */
	uint32_t type;      /* enum ggml_dtype */
	uint64_t offset;    /* relative to the data section */
	const void *data;   /* validated: data..data+nbytes lies inside the file */
	uint64_t nbytes;
	uint64_t n_elems;
} gguf_tensor;

typedef struct gguf_file {
	const char *path;    /* for messages; "<memory>" for gguf_open_mem */
	const uint8_t *base; /* whole file */
	size_t size;
	uint32_t version;    /* 2 or 3 */
	uint64_t n_kv, n_tensors;
	gguf_kv *kv;         /* (n_kv) */
	gguf_tensor *tensors;/* (n_tensors) */
	uint64_t alignment;  /* general.alignment or 32 */
	const uint8_t *data; /* start of the tensor data section */
	bool mapped;         /* base is an mmap we own */
	uint64_t **arr_str_off; /* per kv: offsets of string array elements, or NULL */
} gguf_file;

gguf_file *gguf_open(const char *path, sw_err *err);
/* Parses a caller-owned buffer (not copied, must outlive the result). */
gguf_file *gguf_open_mem(const void *buf, size_t size, const char *name, sw_err *err);
void gguf_close(gguf_file *f);

/* Metadata look-ups. Getters return 0, SW_EINVAL when the key exists with an
 * incompatible type (message names key, expected and found type), or
 * SW_ENOENT_KEY when absent (message names the key) so callers can default. */
#define SW_ENOENT_KEY (-2)
const gguf_kv *gguf_find(const gguf_file *f, const char *key);
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, sw_err *err); /* any integer type that fits */
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, sw_err *err);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, sw_err *err);   /* f32, f64 or integer */
int gguf_get_bool(const gguf_file *f, const char *key, bool *out, sw_err *err);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, sw_err *err);
/* Arrays: element type and count; numeric elements via gguf_arr_data,
 * strings via gguf_arr_str (validated offsets, O(1)). */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *n, sw_err *err);
const void *gguf_arr_data(const gguf_kv *kv);
gguf_str gguf_arr_str(const gguf_file *f, const gguf_kv *kv, uint64_t i);

const gguf_tensor *gguf_tensor_find(const gguf_file *f, const char *name);
const char *ggml_dtype_name(uint32_t type); /* "Q4_1", or "type#N" */
/* Bytes for n elements of a type (n must be a multiple of its block size);
 * 0 for unknown types. */
uint64_t ggml_dtype_nbytes(uint32_t type, uint64_t n);
/* Dequantizes a whole tensor into out (n_elems floats). Types: F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K (whatever real files need).
 * Others -> SW_ENOTSUP naming the tensor and the type. */
int gguf_tensor_to_f32(const gguf_file *f, const gguf_tensor *t, float *out, sw_err *err);

/* The finite scan (core/wformat.h): every value of t's plain float type
 * (F32, F16, BF16, F64) or every scale field of its blocks is finite, else
 * SW_EINVAL naming the file, the tensor, the first bad element (a block's
 * first element and which scale) and the value found. */
int gguf_tensor_check_finite(const gguf_file *f, const gguf_tensor *t, sw_err *err);
/* The same for every tensor of f, in file order; cost (may be NULL) gains
 * the bytes, tensors and seconds. */
int gguf_check_finite(const gguf_file *f, sw_wscan_cost *cost, sw_err *err);

/* Writer (tests, model builders, derived draft models). Values are copied. */
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_new(uint32_t version, uint64_t alignment);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
void gguf_w_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n); /* numeric */
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, const uint64_t *lens, uint64_t n);
/* ne in ggml order; data is already encoded in `type` (see gguf_quantize). */
void gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne, const void *data, uint64_t nbytes);
int gguf_writer_save(gguf_writer *w, const char *path, sw_err *err); /* temp file + rename */
/* Encodes n floats (n a multiple of the block size) as F32/F16/BF16/Q4_0/Q4_1/Q8_0,
 * round-to-nearest as ggml's reference quantizers do. Returns bytes written. */
uint64_t gguf_quantize(uint32_t type, const float *x, uint64_t n, void *out);

/* Added by the implementation (gguf.c); nothing above changed. */
/* Numeric array values (gguf_arr_data) are an aligned copy owned by the
 * gguf_file, so they may be indexed as uint32_t/float arrays directly. */
/* Scalar metadata of any non-string type (u8 i8 u16 i16 u64 i64 f64 ...);
 * v points at one host value of that type. */
void gguf_w_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v);
/* The file gguf_writer_save would write, in a malloc'd buffer (caller frees). */
int gguf_writer_to_mem(gguf_writer *w, void **out, size_t *size, sw_err *err);
/* Conversions: kernels/half.h (sw_f16_to_f32 ...) under their old names. */
float gguf_f16_to_f32(uint16_t h);
uint16_t gguf_f32_to_f16(float f);
float gguf_bf16_to_f32(uint16_t h);
uint16_t gguf_f32_to_bf16(float f);
bool gguf_dtype_can_dequantize(uint32_t type);
/* Dequantizes n elements (a multiple of the block size) of raw blocks, no
 * file needed: 0, SW_ENOTSUP for types without a dequantizer, SW_EINVAL for
 * a partial block. */
int gguf_dequantize(uint32_t type, const void *src, uint64_t n, float *out);
/* Copies one metadata entry of f (any type but an array of arrays) into w
 * under its own key (gguf_copy.c): 0, or an error naming the file and key. */
int gguf_w_copy_kv(gguf_writer *w, const gguf_file *f, const gguf_kv *kv, sw_err *err);

#endif
