/* op_gather_cols.c — the op "gather_cols": out[r, j] = a[r, idx[j]], every row's columns in a
 * new order, and its C reference. The W4A16 runtime runs it before the product of an int4
 * matrix stored in activation order (runtime/w4a16.h, tailor_w4a16_order_from_groups), whose
 * columns are sorted by group: the activations follow the weight's columns.
 *
 * Buffers (T = fp16 or bf16):
 *   a   [rows, cols] T    IN   the activations, row-major
 *   idx [cols]       i32  IN   the order: output column j reads column idx[j] (a permutation
 *                              of 0..cols-1 where the runtime runs it; any index below cols is
 *                              valid)
 *   out [rows, cols] T    OUT  exact copies of a's elements */
#include "op.h"

enum { GC_A = 0, GC_IDX, GC_OUT };

static const tailor_shape_key gather_cols_keys[] = {
    {"rows", -1, "rows (tokens)"},
    {"cols", -1, "columns of a row (the matrix's k)"},
    {NULL, 0, NULL},
};

static tailor_status gather_cols_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                          tailor_dtype dtype, tailor_op_buffers *out)
{
    long long rows = tailor_shape_get(shape, "rows", 0);
    long long cols = tailor_shape_get(shape, "cols", 0);
    if (rows <= 0 || cols <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gather_cols: rows and cols must be positive");
    if (rows > 65535)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gather_cols: rows=%lld exceeds the grid's 65535 rows", rows);
    if (cols > (1ll << 30))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gather_cols: cols=%lld exceeds 2^30", cols);
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gather_cols: dtype must be fp16 or bf16");
    *out = (tailor_op_buffers){
        .count = 3,
        .b = {
            [GC_A] = {"a", dtype, (size_t)(rows * cols), TAILOR_BUF_IN, 0, 0},
            [GC_IDX] = {"idx", TAILOR_DTYPE_I32, (size_t)cols, TAILOR_BUF_IN, 0, 0},
            [GC_OUT] = {"out", dtype, (size_t)(rows * cols), TAILOR_BUF_OUT, 0, 0},
        },
    };
    return TAILOR_OK;
}

/* Random values in a, and idx a random permutation: a misplaced or repeated column shows. */
static void gather_cols_fill(const tailor_shape *shape, tailor_dtype dtype,
                             const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[GC_A].count; i++)
        tailor_dtype_store(dtype, host[GC_A], i, (tailor_fill_uniform01(&s) * 2 - 1) * 8.0f);
    tailor_fill_permutation(host[GC_IDX], (size_t)tailor_shape_get(shape, "cols", 0), &s);
}

static tailor_status gather_cols_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                           tailor_dtype dtype, const tailor_op_buffers *bufs,
                                           void *const *host, float *const *ref)
{
    (void)bufs;
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t cols = (size_t)tailor_shape_get(shape, "cols", 0);
    const int32_t *idx = host[GC_IDX];
    for (size_t j = 0; j < cols; j++)
        if (idx[j] < 0 || (size_t)idx[j] >= cols)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "gather_cols: idx[%zu] = %d is not a column below %zu", j,
                                    (int)idx[j], cols);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            ref[GC_OUT][r * cols + j] = tailor_dtype_load(dtype, host[GC_A], r * cols + (size_t)idx[j]);
    return TAILOR_OK;
}

static double gather_cols_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double rows = (double)tailor_shape_get(shape, "rows", 0);
    double cols = (double)tailor_shape_get(shape, "cols", 0);
    return 2.0 * rows * cols * (double)tailor_dtype_size(dtype) + 4.0 * cols;
}

const tailor_op tailor_op_gather_cols = {
    .name = "gather_cols",
    .summary = "out[r, j] = a[r, idx[j]]: activations in an int4 matrix's activation order",
    .keys = gather_cols_keys,
    .describe = gather_cols_describe,
    .fill = gather_cols_fill,
    .reference = gather_cols_reference,
    .bytes = gather_cols_bytes,
    .flops = tailor_op_no_flops,
};
