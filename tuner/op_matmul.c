/* op_matmul.c — the op "matmul": out[m, n] = a[m, k] · w[n, k]^T (PyTorch Linear layout), a
 * and w both in the dtype (fp16 or bf16), fp32 accumulation, one rounding to the dtype; and its
 * C reference (an fp32 matmul of the dtype values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

static const tailor_shape_key matmul_keys[] = {
    {"m", -1, "rows of the activation (tokens)"},
    {"n", -1, "output features (rows of the weight)"},
    {"k", -1, "input features (a multiple of 8: rows are read in 16-byte pieces)"},
    {NULL, 0, NULL},
};

/* Shape values of one instance. */
typedef struct matmul_dims {
    long long m, n, k;
} matmul_dims;

static matmul_dims dims_of(const tailor_shape *shape)
{
    matmul_dims d = {tailor_shape_get(shape, "m", 0), tailor_shape_get(shape, "n", 0),
                     tailor_shape_get(shape, "k", 0)};
    return d;
}

/* Standard deviation of the fill's weights: about that of a trained projection. */
#define MATMUL_W_SIGMA 0.02

/* Tolerance. Every kernel accumulates in fp32 and rounds once to the dtype: the output carries
 * at most half an ulp of the dtype relative to |ref| (bf16 2^-8, fp16 2^-11), and rtol is one
 * full ulp (2^-7, 2^-10) so that fp32 summation noise pushing a value across a rounding
 * boundary still passes. That noise (any summation order, split-k included) is about
 * 2^-24 * sqrt(k) * |terms|, far below atol = sigma / 4096 (bf16) or sigma / 32768 (fp16),
 * where sigma = 0.02 * sqrt(k) is the output's standard deviation under fill's distributions;
 * atol only matters for outputs that cancel to near zero. A wrong element, a missed k tile or
 * a swapped row moves an output by about sigma, thousands of times the tolerance. */
static void tolerance(const matmul_dims *d, tailor_dtype dtype, double *atol, double *rtol)
{
    double sigma = MATMUL_W_SIGMA * sqrt((double)d->k);
    int bf = dtype == TAILOR_DTYPE_BF16;
    *atol = sigma / (bf ? 4096.0 : 32768.0);
    *rtol = bf ? 1.0 / 128 : 1.0 / 1024;
}

static tailor_status matmul_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                     tailor_dtype dtype, tailor_op_buffers *out)
{
    matmul_dims d = dims_of(shape);
    if (d.m <= 0 || d.n <= 0 || d.k <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "matmul: m=%lld, n=%lld and k=%lld must all be positive", d.m,
                                d.n, d.k);
    if (d.k % 8 != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "matmul: k=%lld is not a multiple of 8 (rows are read in 16-byte "
                                "pieces)",
                                d.k);
    if (d.m > 0x7fffffffLL || d.n > 0x7fffffffLL || d.k > 0x7fffffffLL)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "matmul: m, n and k must each fit in 32 bits");
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "matmul: dtype must be fp16 or bf16");
    double atol, rtol;
    tolerance(&d, dtype, &atol, &rtol);
    size_t m = (size_t)d.m, n = (size_t)d.n, k = (size_t)d.k;
    memset(out, 0, sizeof *out);
    out->count = 3;
    out->b[0] = (tailor_buffer_spec){"a", dtype, m * k, TAILOR_BUF_IN, 0, 0};
    out->b[1] = (tailor_buffer_spec){"w", dtype, n * k, TAILOR_BUF_IN, 0, 0};
    out->b[2] = (tailor_buffer_spec){"out", dtype, m * n, TAILOR_BUF_OUT, atol, rtol};
    return TAILOR_OK;
}

/* splitmix64: the fill's random stream. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-sqrt(3), sqrt(3)): mean 0, variance 1; cheap enough for a 400M-element weight. */
static float next_unit(uint64_t *s)
{
    return ((float)(next_u64(s) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f;
}

/* Activations with variance 1 and a few large values (every 61st is x8, as real activations
 * have outliers); weights with sigma 0.02. */
static void matmul_fill(const tailor_shape *shape, tailor_dtype dtype,
                        const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    (void)shape;
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[0].count; i++)
        tailor_dtype_store(dtype, host[0], i, next_unit(&s) * (i % 61 == 7 ? 8.0f : 1.0f));
    for (size_t i = 0; i < bufs->b[1].count; i++)
        tailor_dtype_store(dtype, host[1], i, next_unit(&s) * (float)MATMUL_W_SIGMA);
}

/* Dot product with eight partial sums (fp32, like the kernels; lets the compiler vectorise). */
static float dot_f32(const float *x, const float *y, size_t k)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= k; i += 8)
        for (size_t j = 0; j < 8; j++)
            acc[j] += x[i + j] * y[i + j];
    for (; i < k; i++)
        acc[0] += x[i] * y[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Converts rows [row0, row0 + rows) of a [*, k] dtype matrix to floats. */
static void rows_to_f32(tailor_dtype dtype, const void *src, size_t row0, size_t rows, size_t k,
                        float *dst)
{
    for (size_t i = 0; i < rows * k; i++)
        dst[i] = tailor_dtype_load(dtype, src, row0 * k + i);
}

/* out = a · w^T in tiles of TILE rows of a and of w, so that only two [TILE, k] float tiles
 * are held (the LM head's weight would be 1.6 GB as floats). */
enum { REF_TILE = 64 };

static tailor_status matmul_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                      tailor_dtype dtype, const tailor_op_buffers *bufs,
                                      void *const *host, float *const *ref)
{
    (void)bufs;
    matmul_dims d = dims_of(shape);
    size_t m = (size_t)d.m, n = (size_t)d.n, k = (size_t)d.k;
    float *at = malloc(REF_TILE * k * sizeof *at), *wt = malloc(REF_TILE * k * sizeof *wt);
    if (!at || !wt) {
        free(at);
        free(wt);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                "matmul reference: no memory for two %d x %zu tiles", REF_TILE, k);
    }
    for (size_t m0 = 0; m0 < m; m0 += REF_TILE) {
        size_t mt = m - m0 < REF_TILE ? m - m0 : REF_TILE;
        rows_to_f32(dtype, host[0], m0, mt, k, at);
        for (size_t n0 = 0; n0 < n; n0 += REF_TILE) {
            size_t nt = n - n0 < REF_TILE ? n - n0 : REF_TILE;
            rows_to_f32(dtype, host[1], n0, nt, k, wt);
            for (size_t i = 0; i < mt; i++)
                for (size_t j = 0; j < nt; j++)
                    ref[2][(m0 + i) * n + n0 + j] = dot_f32(at + i * k, wt + j * k, k);
        }
    }
    free(at);
    free(wt);
    return TAILOR_OK;
}

static double matmul_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    matmul_dims d = dims_of(shape);
    double m = (double)d.m, n = (double)d.n, k = (double)d.k;
    return (m * k + n * k + m * n) * (double)tailor_dtype_size(dtype);
}

static double matmul_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    matmul_dims d = dims_of(shape);
    return 2.0 * (double)d.m * (double)d.n * (double)d.k;
}

const tailor_op tailor_op_matmul = {
    .name = "matmul",
    .summary = "out[m,n] = a[m,k] w[n,k]^T, a and w 16-bit (dense Linear), fp32 accumulation",
    .keys = matmul_keys,
    .describe = matmul_describe,
    .fill = matmul_fill,
    .reference = matmul_reference,
    .bytes = matmul_bytes,
    .flops = matmul_flops,
};
