/* op_embed.c — the op "embed": Gemma 4's scaled token embedding and the token-identity part of
 * the per-layer embeddings (GEMMA4.md §2.2, §2.3 step 1), and its C reference.
 *
 * Buffers (T = fp16 or bf16):
 *   table [vocab, cols]  T            IN   embed_tokens (cols = H) or embed_tokens_per_layer
 *                                          (cols = layers*256, layer-major); may be mapped host
 *                                          memory, only the rows of the ids are read
 *   ids   [tokens]       i32          IN   token ids; ids outside [0, vocab) read row 0 (pad)
 *   out   [tokens, cols] T or fp32    OUT  fp32 when out_f32=1 (the residual stream)
 * out = T(table[id] * T(sqrt(scale_dim))) exactly as transformers rounds it (scale_dim = H for
 * the token embedding: 39.25 for E2B in bf16; 256 for PLE: exactly 16); the fp32 output holds
 * the same rounded value. */
#include <math.h>

#include "op.h"

enum { EM_TABLE = 0, EM_IDS, EM_OUT };

static const tailor_shape_key embed_keys[] = {
    {"tokens", -1, "tokens looked up"},
    {"cols", -1, "width of a table row (hidden size, or layers*256 for PLE)"},
    {"vocab", 262144, "rows of the table"},
    {"scale_dim", 0, "the scale is sqrt(scale_dim) rounded to the dtype (0: cols)"},
    {"out_f32", 0, "1: write fp32 (the residual stream); 0: the dtype"},
    {NULL, 0, NULL},
};

static tailor_status embed_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                    tailor_op_buffers *out)
{
    long long tokens = tailor_shape_get(shape, "tokens", 0);
    long long cols = tailor_shape_get(shape, "cols", 0);
    long long vocab = tailor_shape_get(shape, "vocab", 262144);
    long long out_f32 = tailor_shape_get(shape, "out_f32", 0);
    if (tokens <= 0 || cols <= 0 || vocab <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "embed: tokens, cols and vocab must be positive");
    if (tokens > 65535 || vocab > 2147483647LL)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "embed: tokens must be at most 65535 and vocab fit in 32 bits");
    if (out_f32 > 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "embed: out_f32 must be 0 or 1");
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "embed: dtype must be fp16 or bf16");
    *out = (tailor_op_buffers){
        .count = 3,
        .b = {
            [EM_TABLE] = {"table", dtype, (size_t)(vocab * cols), TAILOR_BUF_IN, 0, 0},
            [EM_IDS] = {"ids", TAILOR_DTYPE_I32, (size_t)tokens, TAILOR_BUF_IN, 0, 0},
            /* exact: a product of two 16-bit floats is exact in fp32, then one rounding */
            [EM_OUT] = {"out", out_f32 ? TAILOR_DTYPE_F32 : dtype, (size_t)(tokens * cols),
                        TAILOR_BUF_OUT, 0, 0},
        },
    };
    return TAILOR_OK;
}

/* The table's fill: element i is the stream's value number i (small values, as embedding
 * rows have). */
typedef struct table_fill {
    tailor_dtype dtype;
    void *dst;
    uint64_t seed;
} table_fill;

static void table_fill_range(void *user, size_t i0, size_t i1)
{
    const table_fill *t = user;
    uint64_t s = tailor_fill_uniform01_skip(t->seed, i0);
    for (size_t i = i0; i < i1; i++)
        tailor_dtype_store(t->dtype, t->dst, i, (tailor_fill_uniform01(&s) * 2 - 1) * 0.08f);
}

static void embed_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                       void *const *host, uint64_t seed)
{
    long long vocab = tailor_shape_get(shape, "vocab", 262144);
    size_t nt = bufs->b[EM_TABLE].count;
    table_fill table = {dtype, host[EM_TABLE], seed};
    tailor_fill_parallel(nt, table_fill_range, &table); /* 400M values for Gemma 4's vocabulary */
    uint64_t s = tailor_fill_uniform01_skip(seed, nt);
    int32_t *ids = host[EM_IDS];
    for (size_t t = 0; t < bufs->b[EM_IDS].count; t++)
        ids[t] = (int32_t)(tailor_fill_uniform01(&s) * (float)vocab) % (int32_t)vocab;
    /* the last rows, and ids out of range (they read row 0) */
    if (bufs->b[EM_IDS].count > 1)
        ids[1] = (int32_t)vocab - 1;
    if (bufs->b[EM_IDS].count > 2)
        ids[2] = (int32_t)(vocab + 7 > 2147483647LL ? -1 : vocab + 7);
    if (bufs->b[EM_IDS].count > 3)
        ids[3] = -5;
}

/* sqrt(scale_dim) rounded to the dtype, as transformers' embed_scale.to(weight.dtype). */
static float embed_scale(const tailor_shape *shape, tailor_dtype dtype)
{
    long long d = tailor_shape_get(shape, "scale_dim", 0);
    if (d <= 0)
        d = tailor_shape_get(shape, "cols", 0);
    uint16_t s;
    tailor_dtype_store(dtype, &s, 0, sqrtf((float)d));
    return tailor_dtype_load(dtype, &s, 0);
}

static tailor_status embed_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                     tailor_dtype dtype, const tailor_op_buffers *bufs,
                                     void *const *host, float *const *ref)
{
    (void)ctx;
    size_t cols = (size_t)tailor_shape_get(shape, "cols", 0);
    long long vocab = tailor_shape_get(shape, "vocab", 262144);
    float scale = embed_scale(shape, dtype);
    const int32_t *ids = host[EM_IDS];
    for (size_t t = 0; t < bufs->b[EM_IDS].count; t++) {
        size_t id = ids[t] >= 0 && ids[t] < vocab ? (size_t)ids[t] : 0;
        for (size_t c = 0; c < cols; c++) {
            uint16_t p;
            tailor_dtype_store(dtype, &p, 0,
                               tailor_dtype_load(dtype, host[EM_TABLE], id * cols + c) * scale);
            ref[EM_OUT][t * cols + c] = tailor_dtype_load(dtype, &p, 0);
        }
    }
    return TAILOR_OK;
}

static double embed_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double n = (double)tailor_shape_get(shape, "tokens", 0) *
               (double)tailor_shape_get(shape, "cols", 0);
    double t = (double)tailor_dtype_size(dtype);
    return n * (t + (tailor_shape_get(shape, "out_f32", 0) ? 4.0 : t)) +
           4.0 * (double)tailor_shape_get(shape, "tokens", 0);
}

static double embed_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return (double)tailor_shape_get(shape, "tokens", 0) * (double)tailor_shape_get(shape, "cols", 0);
}

const tailor_op tailor_op_embed = {
    .name = "embed",
    .summary = "Gemma 4 embedding lookup times sqrt(dim) rounded like transformers (token "
               "embedding and PLE)",
    .keys = embed_keys,
    .describe = embed_describe,
    .fill = embed_fill,
    .reference = embed_reference,
    .bytes = embed_bytes,
    .flops = embed_flops,
};
