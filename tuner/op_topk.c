/* op_topk.c — the op "topk": each row's k largest values with their column, in the order
 * tailor_sampler_next ranks candidates (runtime/sampler.h): larger value first, lower column
 * first among equals, NaN never. A sampled decode step downloads these k pairs instead of the
 * whole row of logits (models/gemma4/gpu.c), and the host sampler draws from them.
 *
 * Buffers (the dtype only picks which kernels may run: bf16 from sm_80):
 *   x    [rows, n] fp32  IN   the rows (the soft-capped logits)
 *   vals [rows, k] fp32  OUT  the k best values of each row, best first
 *   ids  [rows, k] i32   OUT  their columns; a row with fewer than k values that are not NaN
 *                             fills the rest with id -1 and value 0
 * Workspace of the template (bytes from the space): part (each split block's k best as sort
 * keys) and count (rows unsigned counters) — zero count once; the kernel leaves it at zero. */
#include <math.h>
#include <stdlib.h>

#include "op.h"

enum { TK_X = 0, TK_VALS, TK_IDS };

/* The largest k a space may be asked for (the merge sorts splits x k keys in shared memory). */
#define TOPK_MAX_K 1024

static const tailor_shape_key topk_keys[] = {
    {"rows", -1, "rows (1 for a decode step)"},
    {"n", 262144, "values per row (the vocabulary)"},
    {"k", 64, "candidates kept per row"},
    {NULL, 0, NULL},
};

static tailor_status topk_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_op_buffers *out)
{
    long long rows = tailor_shape_get(shape, "rows", 0), n = tailor_shape_get(shape, "n", 262144);
    long long k = tailor_shape_get(shape, "k", 64);
    if (rows <= 0 || rows > 65535)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "topk: rows=%lld must lie in 1..65535",
                                rows);
    if (n <= 0 || n > 2147483647LL)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "topk: n=%lld must lie in 1..2^31-1", n);
    if (k < 1 || k > TOPK_MAX_K || k > n)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "topk: k=%lld must lie in 1..%d and not exceed n=%lld", k,
                                TOPK_MAX_K, n);
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "topk: dtype must be fp16 or bf16");
    *out = (tailor_op_buffers){
        .count = 3,
        .b = {
            [TK_X] = {"x", TAILOR_DTYPE_F32, (size_t)(rows * n), TAILOR_BUF_IN, 0, 0},
            [TK_VALS] = {"vals", TAILOR_DTYPE_F32, (size_t)(rows * k), TAILOR_BUF_OUT, 0, 0},
            [TK_IDS] = {"ids", TAILOR_DTYPE_I32, (size_t)(rows * k), TAILOR_BUF_OUT, 0, 0},
        },
    };
    return TAILOR_OK;
}

/* Rows like soft-capped logits (|x| < 30) that make the order's rules matter, by row mod 3:
 * 0 coarse (multiples of 1/8, so ties cross the k-th place and the lower column must win), 1
 * fine-grained with a few clear winners, 2 at most zero (-|coarse|: hundreds of zeros at the
 * top, -0 and +0 by turns, equal, so ranked by column); every row has NaN (never a candidate). */
static void topk_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                      void *const *host, uint64_t seed)
{
    (void)dtype;
    (void)bufs;
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t n = (size_t)tailor_shape_get(shape, "n", 262144);
    float *x = host[TK_X];
    uint64_t s = seed;
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        for (size_t c = 0; c < n; c++) {
            float u = (tailor_fill_uniform01(&s) * 2 - 1) * 20.0f, q = floorf(u * 8) / 8;
            float top0 = q != 0 ? -fabsf(q) : c % 2 ? -0.0f : 0.0f; /* zeros of both signs */
            row[c] = r % 3 == 1 ? u : r % 3 == 2 ? top0 : q;
        }
        for (size_t j = 0; j < 3 && r % 3 == 1; j++) /* clear winners, one maybe at column 0 */
            row[j == 0 ? 0 : (size_t)(tailor_fill_uniform01(&s) * (float)n) % n] = 25.0f + (float)j;
        for (size_t j = 0; j < 1 + n / 64; j++)
            row[(size_t)(tailor_fill_uniform01(&s) * (float)n) % n] = NAN;
        row[(size_t)(tailor_fill_uniform01(&s) * (float)n) % n] = 0.0f;
        row[(size_t)(tailor_fill_uniform01(&s) * (float)n) % n] = -0.0f;
    }
}

typedef struct topk_item {
    float v;
    int32_t id;
} topk_item;

/* The order: larger value first, lower column among equals (no NaN reaches here). */
static int topk_before(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static tailor_status topk_reference(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                    const tailor_op_buffers *bufs, void *const *host,
                                    float *const *ref)
{
    (void)dtype;
    (void)bufs;
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t n = (size_t)tailor_shape_get(shape, "n", 262144), k = (size_t)tailor_shape_get(shape, "k", 64);
    topk_item *items = malloc(n * sizeof *items);
    if (!items)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "topk: out of memory");
    const float *x = host[TK_X];
    for (size_t r = 0; r < rows; r++) {
        size_t m = 0;
        for (size_t c = 0; c < n; c++)
            if (!isnan(x[r * n + c]))
                items[m++] = (topk_item){x[r * n + c], (int32_t)c};
        qsort(items, m, sizeof *items, topk_before);
        for (size_t j = 0; j < k; j++) {
            ref[TK_VALS][r * k + j] = j < m ? items[j].v : 0.0f;
            ref[TK_IDS][r * k + j] = j < m ? (float)items[j].id : -1.0f;
        }
    }
    free(items);
    return TAILOR_OK;
}

static double topk_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    double rows = (double)tailor_shape_get(shape, "rows", 0);
    return rows * (4.0 * (double)tailor_shape_get(shape, "n", 262144) +
                   8.0 * (double)tailor_shape_get(shape, "k", 64));
}

static double topk_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return (double)tailor_shape_get(shape, "rows", 0) * (double)tailor_shape_get(shape, "n", 262144);
}

const tailor_op tailor_op_topk = {
    .name = "topk",
    .summary = "each row's k largest values and their columns (larger first, lower column on "
               "ties, NaN never): the candidates a sampled decode step downloads",
    .keys = topk_keys,
    .describe = topk_describe,
    .fill = topk_fill,
    .reference = topk_reference,
    .bytes = topk_bytes,
    .flops = topk_flops,
};
