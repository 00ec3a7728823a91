/* op_residual_norm.c — the op "residual_norm": one seam of a Gemma 4 decoder layer (GEMMA4.md
 * §2.4) on the fp32 residual stream, and its C reference.
 *
 * Buffers (rows = tokens, cols = hidden size H; T = fp16 or bf16):
 *   a      [rows, cols] T     IN     the sublayer output (attention, MLP or PLE projection)
 *   x      [rows, cols] fp32  INOUT  the residual stream, updated in place
 *   w_post [cols]       T     IN     the norm applied to a (post_attention/post_feedforward/...)
 *   w_next [cols]       T     IN     the norm of the next sublayer's input (or the final norm)
 *   scalar [1]          fp32  IN     the layer scalar (mode 1)
 *   y      [rows, cols] T     OUT    the next sublayer's input
 * Modes (shape key `mode`):
 *   0: x += RMSNorm_{w_post}(a);               y = RMSNorm_{w_next}(x)
 *   1: x = (x + RMSNorm_{w_post}(a)) * scalar; y = RMSNorm_{w_next}(x)   (end of a layer)
 *   2: x += RMSNorm_{w_post}(a);               y = T(x)                  (PLE gate input)
 *   3: y = RMSNorm_{w_next}(x); x untouched                              (first layer's input)
 * Numerics: everything in fp32 (mean of squares, eps 1e-6, times w itself, add, scale); y is
 * rounded once; x is never rounded to T. Unused buffers of a mode are still bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

enum { RN_ADD_NORM = 0, RN_ADD_SCALE_NORM = 1, RN_ADD_CAST = 2, RN_NORM = 3 };
enum { RN_A = 0, RN_X, RN_W_POST, RN_W_NEXT, RN_SCALAR, RN_Y };

static const tailor_shape_key residual_norm_keys[] = {
    {"rows", -1, "rows (tokens)"},
    {"cols", -1, "width of each row (hidden size)"},
    {"mode", 0,
     "0: x += norm(a), y = norm(x); 1: also x *= scalar before y; 2: x += norm(a), y = x; "
     "3: y = norm(x) only"},
    {NULL, 0, NULL},
};

static tailor_status residual_norm_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                            tailor_dtype dtype, tailor_op_buffers *out)
{
    long long rows = tailor_shape_get(shape, "rows", 0), cols = tailor_shape_get(shape, "cols", 0);
    long long mode = tailor_shape_get(shape, "mode", 0);
    if (rows <= 0 || cols <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "residual_norm: rows and cols must be positive");
    if (mode < RN_ADD_NORM || mode > RN_NORM)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "residual_norm: mode %lld is unknown (0 to 3)", mode);
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "residual_norm: dtype must be fp16 or bf16");
    size_t n = (size_t)(rows * cols);
    double rtol = dtype == TAILOR_DTYPE_BF16 ? 1.0 / 128 : 1.0 / 1024;
    *out = (tailor_op_buffers){
        .count = 6,
        .b = {
            [RN_A] = {"a", dtype, n, TAILOR_BUF_IN, 0, 0},
            [RN_X] = {"x", TAILOR_DTYPE_F32, n, TAILOR_BUF_INOUT, 1e-4, 1e-5},
            [RN_W_POST] = {"w_post", dtype, (size_t)cols, TAILOR_BUF_IN, 0, 0},
            [RN_W_NEXT] = {"w_next", dtype, (size_t)cols, TAILOR_BUF_IN, 0, 0},
            [RN_SCALAR] = {"scalar", TAILOR_DTYPE_F32, 1, TAILOR_BUF_IN, 0, 0},
            [RN_Y] = {"y", dtype, n, TAILOR_BUF_OUT, 1e-5, rtol},
        },
    };
    return TAILOR_OK;
}

void tailor_fill_seam(tailor_dtype dtype, float *x, size_t n, void *w_post, void *w_next,
                      size_t cols, float *scalar, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) /* a residual stream of larger values */
        x[i] = (tailor_fill_uniform01(&s) * 2 - 1) * (i % 89 == 0 ? 300.0f : 20.0f);
    for (size_t i = 0; i < cols; i++) { /* weights around 1, some negative */
        tailor_dtype_store(dtype, w_post, i, tailor_fill_uniform01(&s) * 2.5f - 0.5f);
        tailor_dtype_store(dtype, w_next, i, tailor_fill_uniform01(&s) * 2.5f - 0.5f);
    }
    *scalar = 0.25f + tailor_fill_uniform01(&s);
}

tailor_buffer_spec tailor_seam_x_spec(const char *name, tailor_dtype dtype, size_t count,
                                      tailor_buffer_role role)
{
    tailor_buffer_spec s = {"", TAILOR_DTYPE_F32, count, role, dtype == TAILOR_DTYPE_BF16 ? 0.05 : 0.01,
                            1e-4};
    snprintf(s.name, sizeof s.name, "%s", name);
    return s;
}

tailor_buffer_spec tailor_seam_y_spec(tailor_dtype dtype, size_t count)
{
    int bf = dtype == TAILOR_DTYPE_BF16;
    return (tailor_buffer_spec){"y", dtype, count, TAILOR_BUF_OUT, bf ? 0.02 : 0.004,
                                bf ? 1.0 / 64 : 1.0 / 256};
}

void tailor_seam_weight_specs(tailor_buffer_spec b[3], tailor_dtype dtype, size_t count)
{
    b[0] = (tailor_buffer_spec){"w_post", dtype, count, TAILOR_BUF_IN, 0, 0};
    b[1] = (tailor_buffer_spec){"w_next", dtype, count, TAILOR_BUF_IN, 0, 0};
    b[2] = (tailor_buffer_spec){"scalar", TAILOR_DTYPE_F32, 1, TAILOR_BUF_IN, 0, 0};
}

tailor_status tailor_seam_mode_check(tailor_ctx *ctx, const char *op, const tailor_shape *shape)
{
    long long mode = tailor_shape_get(shape, "mode", 0);
    if (mode < 0 || mode > 2)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "%s: mode=%lld must be 0, 1 or 2 (the seams next to a product)",
                                op, mode);
    return TAILOR_OK;
}

void tailor_fill_seam_row(tailor_dtype dtype, void *t, float *x, size_t cols, void *w_post,
                          void *w_next, float *scalar, uint64_t seed)
{
    tailor_fill_seam(dtype, x, cols, w_post, w_next, cols, scalar, seed);
    uint64_t s = seed ^ 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < cols; i++) { /* unit scale: uniform in +-sqrt(3), no outliers */
        x[i] = (tailor_fill_uniform01(&s) * 2 - 1) * 1.7320508f;
        tailor_dtype_store(dtype, t, i, (tailor_fill_uniform01(&s) * 2 - 1) * 1.7320508f);
    }
}

static void residual_norm_fill(const tailor_shape *shape, tailor_dtype dtype,
                               const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[RN_A].count; i++) /* sublayer output with outliers */
        tailor_dtype_store(dtype, host[RN_A], i,
                           (tailor_fill_uniform01(&s) * 2 - 1) * (i % 97 == 0 ? 40.0f : 3.0f));
    tailor_fill_seam(dtype, host[RN_X], bufs->b[RN_X].count, host[RN_W_POST], host[RN_W_NEXT],
                     (size_t)tailor_shape_get(shape, "cols", 0), host[RN_SCALAR], s);
}

/* 1 / sqrt(mean of squares + eps) of n values, the sum in double. */
static float inv_rms_f32(const float *v, size_t n)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)v[i] * (double)v[i];
    return (float)(1.0 / sqrt(ss / (double)n + 1e-6));
}

tailor_status tailor_ref_seam(tailor_ctx *ctx, tailor_dtype dtype, int mode, size_t rows,
                              size_t cols, const float *a, const float *x, const void *w_post,
                              const void *w_next, float scalar, float *x_out, float *y_out)
{
    (void)ctx;
    for (size_t r = 0; r < rows; r++) {
        float *xo = x_out + r * cols, *yo = y_out + r * cols;
        if (mode == RN_NORM) {
            memcpy(xo, x + r * cols, cols * sizeof *xo);
        } else {
            const float *row = a + r * cols;
            float inv = inv_rms_f32(row, cols);
            for (size_t c = 0; c < cols; c++) {
                float v = x[r * cols + c] + row[c] * inv * tailor_dtype_load(dtype, w_post, c);
                xo[c] = mode == RN_ADD_SCALE_NORM ? v * scalar : v;
            }
        }
        if (mode == RN_ADD_CAST) {
            memcpy(yo, xo, cols * sizeof *yo);
            continue;
        }
        float inv = inv_rms_f32(xo, cols);
        for (size_t c = 0; c < cols; c++)
            yo[c] = xo[c] * inv * tailor_dtype_load(dtype, w_next, c);
    }
    return TAILOR_OK;
}

static tailor_status residual_norm_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                             tailor_dtype dtype, const tailor_op_buffers *bufs,
                                             void *const *host, float *const *ref)
{
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t cols = (size_t)tailor_shape_get(shape, "cols", 0);
    size_t n = bufs->b[RN_A].count;
    float *a = malloc(n * sizeof *a);
    if (!a)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "residual_norm: out of memory");
    for (size_t i = 0; i < n; i++)
        a[i] = tailor_dtype_load(dtype, host[RN_A], i);
    tailor_status st = tailor_ref_seam(ctx, dtype, (int)tailor_shape_get(shape, "mode", 0), rows,
                                       cols, a, host[RN_X], host[RN_W_POST], host[RN_W_NEXT],
                                       ((const float *)host[RN_SCALAR])[0], ref[RN_X], ref[RN_Y]);
    free(a);
    return st;
}

static double residual_norm_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double rows = (double)tailor_shape_get(shape, "rows", 0);
    double cols = (double)tailor_shape_get(shape, "cols", 0);
    double t = (double)tailor_dtype_size(dtype);
    switch (tailor_shape_get(shape, "mode", 0)) {
    case RN_NORM: return rows * cols * (4 + t) + cols * t; /* x in, y out, w_next */
    case RN_ADD_CAST: return rows * cols * (2 * t + 8) + cols * t;
    default: return rows * cols * (2 * t + 8) + 2 * cols * t + 4;
    }
}

static double residual_norm_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 10.0 * (double)tailor_shape_get(shape, "rows", 0) *
           (double)tailor_shape_get(shape, "cols", 0);
}

const tailor_op tailor_op_residual_norm = {
    .name = "residual_norm",
    .summary = "Gemma 4 layer seam: fp32 residual += RMSNorm(a), optional layer scalar, "
               "RMSNorm of the result",
    .keys = residual_norm_keys,
    .describe = residual_norm_describe,
    .fill = residual_norm_fill,
    .reference = residual_norm_reference,
    .bytes = residual_norm_bytes,
    .flops = residual_norm_flops,
};
