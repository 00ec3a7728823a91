/* safetensors.h — memory-mapped safetensors checkpoints (one file or a sharded index), every
 * header validated before anything is handed out. */
#ifndef TAILOR_SAFETENSORS_H
#define TAILOR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tailor.h"

#define TAILOR_ST_MAX_DIMS 8

/* Element types a safetensors header may name. */
typedef enum tailor_st_dtype {
    TAILOR_ST_BOOL = 0,
    TAILOR_ST_U8,
    TAILOR_ST_I8,
    TAILOR_ST_F8_E4M3,
    TAILOR_ST_F8_E5M2,
    TAILOR_ST_U16,
    TAILOR_ST_I16,
    TAILOR_ST_F16,
    TAILOR_ST_BF16,
    TAILOR_ST_U32,
    TAILOR_ST_I32,
    TAILOR_ST_F32,
    TAILOR_ST_U64,
    TAILOR_ST_I64,
    TAILOR_ST_F64,
    TAILOR_ST_DTYPE_COUNT
} tailor_st_dtype;

/* One tensor of an open checkpoint. Everything it points at is owned by the tailor_st and lives
 * until tailor_st_close. `data` points into the read-only mapping and may be unaligned: read it
 * with memcpy (or the helpers below). */
typedef struct tailor_st_tensor {
    const char *name;                  /* full name, e.g. "model.layers.0.mlp.up_proj.weight" */
    const char *file;                  /* path of the file holding it */
    tailor_st_dtype dtype;
    int ndim;                          /* 0..TAILOR_ST_MAX_DIMS */
    int64_t shape[TAILOR_ST_MAX_DIMS]; /* unused dims are 0 */
    int64_t numel;                     /* product of shape (1 for a scalar) */
    const void *data;                  /* numel * element size bytes */
    size_t nbytes;
} tailor_st_tensor;

typedef struct tailor_st tailor_st;

/* Opens a checkpoint. `path` is a .safetensors file, a model.safetensors.index.json, or a
 * directory holding one of them (the index is preferred). Each file is mapped read-only and its
 * header checked: length sane and inside the file, JSON well formed with only JSON whitespace
 * (space, tab, newline, carriage return) padding it, __metadata__ an object of strings, every
 * dtype known, shape x element size == byte length (no overflow), offsets inside the data
 * section, no two tensors overlapping, no name given twice, every index entry present in its
 * shard. On success *out owns the mappings (free with tailor_st_close). On failure *out is NULL,
 * nothing stays mapped, and the context holds one sentence naming the file and the tensor or
 * field: TAILOR_ERR_IO (unreadable; a shard the index names is reported with the index and the
 * tensor), TAILOR_ERR_PARSE (malformed), TAILOR_ERR_NOT_FOUND (index names a missing tensor). */
tailor_status tailor_st_open(tailor_ctx *ctx, const char *path, tailor_st **out);

/* Unmaps and frees everything; NULL is fine. */
void tailor_st_close(tailor_st *st);

/* The tensor called `name`, or NULL when the checkpoint has none. */
const tailor_st_tensor *tailor_st_find(const tailor_st *st, const char *name);

/* Like tailor_st_find, but a missing tensor is TAILOR_ERR_NOT_FOUND with a sentence naming it
 * and the checkpoint. */
tailor_status tailor_st_get(tailor_ctx *ctx, const tailor_st *st, const char *name,
                            const tailor_st_tensor **out);

/* Number of tensors, and the i-th in name order (0 <= i < count). */
size_t tailor_st_count(const tailor_st *st);
const tailor_st_tensor *tailor_st_at(const tailor_st *st, size_t i);

/* Tells the kernel that [p, p + n) inside one of st's mappings will not be read again soon: its
 * whole pages leave this process's resident set (madvise MADV_DONTNEED; they stay in the page
 * cache, and a later read maps them back). Loaders call it after uploading a tensor, so that
 * streaming a checkpoint larger than memory keeps the resident set small. A range outside the
 * mappings is ignored. */
void tailor_st_release(const tailor_st *st, const void *p, size_t n);

/* Total bytes mapped (all files). */
size_t tailor_st_mapped_bytes(const tailor_st *st);

/* The path given to tailor_st_open (for messages). */
const char *tailor_st_path(const tailor_st *st);

/* Header spelling ("BF16") and byte size of a dtype. */
const char *tailor_st_dtype_name(tailor_st_dtype dtype);
size_t tailor_st_dtype_size(tailor_st_dtype dtype);

/* Element i of a F32, F16 or BF16 tensor as float (other dtypes: integer value converted). */
float tailor_st_load_f32(const tailor_st_tensor *t, int64_t i);

/* Element i of an integer tensor (I8..I64, U8..U64, BOOL) as int64. */
int64_t tailor_st_load_i64(const tailor_st_tensor *t, int64_t i);

#endif
