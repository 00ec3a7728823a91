/* op_rmsnorm.c — the op "rmsnorm" (Gemma 4, GEMMA4.md §2.1) and its C reference:
 * y = x * (mean(x^2) + 1e-6)^-1/2 * w in fp32, rounded once to the dtype. */
#include <math.h>

#include "half.h"
#include "op.h"

static const tailor_shape_key rmsnorm_keys[] = {
    {"rows", -1, "rows normalised (tokens x heads)"},
    {"cols", -1, "width of each row (hidden size or head dim)"},
    {"weight", 1, "1: multiply by the weight; 0: weightless norm (Gemma 4's v_norm)"},
    {NULL, 0, NULL},
};

static tailor_status rmsnorm_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                      tailor_dtype dtype, tailor_op_buffers *out)
{
    long long rows = tailor_shape_get(shape, "rows", 0), cols = tailor_shape_get(shape, "cols", 0);
    if (rows <= 0 || cols <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "rmsnorm: rows and cols must be positive");
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "rmsnorm: dtype must be fp16 or bf16");
    /* One rounding of a value computed in fp32: half an ulp of the dtype, plus fp32 noise. */
    double rtol = dtype == TAILOR_DTYPE_BF16 ? 1.0 / 128 : 1.0 / 1024;
    *out = (tailor_op_buffers){
        .count = 3,
        .b = {
            {"x", dtype, (size_t)(rows * cols), TAILOR_BUF_IN, 0, 0},
            {"w", dtype, (size_t)cols, TAILOR_BUF_IN, 0, 0},
            {"out", dtype, (size_t)(rows * cols), TAILOR_BUF_OUT, 1e-5, rtol},
        },
    };
    return TAILOR_OK;
}

static void rmsnorm_fill(const tailor_shape *shape, tailor_dtype dtype,
                         const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    (void)shape;
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[0].count; i++) /* activations with a few large outliers */
        tailor_dtype_store(dtype, host[0], i,
                           (tailor_fill_uniform01(&s) * 2 - 1) * (i % 97 == 0 ? 40.0f : 3.0f));
    for (size_t i = 0; i < bufs->b[1].count; i++) /* weights around 1, some negative */
        tailor_dtype_store(dtype, host[1], i, tailor_fill_uniform01(&s) * 2.5f - 0.5f);
}

static tailor_status rmsnorm_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                       tailor_dtype dtype, const tailor_op_buffers *bufs,
                                       void *const *host, float *const *ref)
{
    (void)ctx;
    (void)bufs;
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t cols = (size_t)tailor_shape_get(shape, "cols", 0);
    int weight = tailor_shape_get(shape, "weight", 1) != 0;
    for (size_t r = 0; r < rows; r++) {
        double ss = 0;
        for (size_t c = 0; c < cols; c++) {
            double v = tailor_dtype_load(dtype, host[0], r * cols + c);
            ss += v * v;
        }
        float inv = (float)(1.0 / sqrt(ss / (double)cols + 1e-6));
        for (size_t c = 0; c < cols; c++) {
            float v = tailor_dtype_load(dtype, host[0], r * cols + c) * inv;
            if (weight)
                v *= tailor_dtype_load(dtype, host[1], c);
            ref[2][r * cols + c] = v;
        }
    }
    return TAILOR_OK;
}

static double rmsnorm_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double rows = (double)tailor_shape_get(shape, "rows", 0);
    double cols = (double)tailor_shape_get(shape, "cols", 0);
    return (2 * rows * cols + cols) * (double)tailor_dtype_size(dtype);
}

static double rmsnorm_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 4.0 * (double)tailor_shape_get(shape, "rows", 0) *
           (double)tailor_shape_get(shape, "cols", 0);
}

const tailor_op tailor_op_rmsnorm = {
    .name = "rmsnorm",
    .summary = "Gemma 4 RMSNorm: fp32 statistics, times the weight itself, one rounding",
    .keys = rmsnorm_keys,
    .describe = rmsnorm_describe,
    .fill = rmsnorm_fill,
    .reference = rmsnorm_reference,
    .bytes = rmsnorm_bytes,
    .flops = rmsnorm_flops,
};
