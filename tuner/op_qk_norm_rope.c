/* op_qk_norm_rope.c — the op "qk_norm_rope": Gemma 4's per-head RMSNorm followed by RoPE
 * (GEMMA4.md §2.5) on [tokens, heads, head_dim], and its C reference.
 *
 * Buffers (T = fp16 or bf16):
 *   x        [tokens, heads, head_dim] T     IN (INOUT when inplace=1)  q, k or raw v heads
 *   w        [head_dim]                T     IN   q_norm / k_norm weight (unused when weight=0)
 *   pos      [tokens]                  i32   IN   position of each token
 *   inv_freq [head_dim / 2]            fp32  IN   RoPE inverse frequencies of the layer, as
 *            transformers computes them in fp32: 1 / powf(theta, (float)(2j) / head_dim) for the
 *            rotating pairs j, 0 for the others (models/gemma4 tailor_gemma4_rope_freqs)
 *   out      [tokens, heads, head_dim] T     OUT  (absent when inplace=1: x is updated)
 * Shape keys: rope 0 (none: v), 1 (default: every pair, theta 1e4), 2 (proportional: the first
 * int(0.25 * head_dim) / 2 pairs, theta 1e6, exponent over the full head_dim; the rest are an
 * exact identity). Numerics: statistics in fp32, eps 1e-6, times w itself, angle = (float)pos *
 * inv_freq[j] in fp32, cos/sin in fp32, NeoX pairing j <-> j + head_dim/2:
 * out[j] = a cos - b sin, out[j + d/2] = b cos + a sin; one rounding to T at the end (HF rounds
 * after the norm and evaluates RoPE in bf16; this is the more accurate of the two). */
#include <math.h>
#include <stdlib.h>

#include "op.h"

enum { QR_X = 0, QR_W, QR_POS, QR_INV_FREQ, QR_OUT };

static const tailor_shape_key qk_norm_rope_keys[] = {
    {"tokens", -1, "tokens (rows of the projection)"},
    {"heads", -1, "heads per token"},
    {"head_dim", -1, "width of each head (256 sliding, 512 full)"},
    {"weight", 1, "1: multiply by the norm weight; 0: weightless norm (v)"},
    {"rope", 1, "0: none; 1: default (theta 1e4, every pair); 2: proportional (theta 1e6, "
                "first quarter of the pairs)"},
    {"inplace", 0, "1: the kernel updates x in place (no out buffer)"},
    {NULL, 0, NULL},
};

/* Pairs that rotate for a rope kind. */
static int rot_pairs(long long rope, long long head_dim)
{
    if (rope == 1)
        return (int)(head_dim / 2);
    if (rope == 2)
        return (int)(head_dim / 4) / 2; /* int(0.25 * d) // 2 */
    return 0;
}

static tailor_status qk_norm_rope_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                           tailor_dtype dtype, tailor_op_buffers *out)
{
    long long tokens = tailor_shape_get(shape, "tokens", 0);
    long long heads = tailor_shape_get(shape, "heads", 0);
    long long hd = tailor_shape_get(shape, "head_dim", 0);
    long long weight = tailor_shape_get(shape, "weight", 1), rope = tailor_shape_get(shape, "rope", 1);
    long long inplace = tailor_shape_get(shape, "inplace", 0);
    if (tokens <= 0 || heads <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "qk_norm_rope: tokens and heads must be positive");
    if (hd < 2 || hd % 2)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "qk_norm_rope: head_dim %lld must be even and positive", hd);
    if (weight > 1 || rope > 2 || inplace > 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "qk_norm_rope: weight and inplace must be 0 or 1, rope 0 to 2");
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "qk_norm_rope: dtype must be fp16 or bf16");
    size_t n = (size_t)(tokens * heads * hd);
    double rtol = dtype == TAILOR_DTYPE_BF16 ? 1.0 / 128 : 1.0 / 1024;
    *out = (tailor_op_buffers){
        .count = inplace ? 4 : 5,
        .b = {
            [QR_X] = {"x", dtype, n, inplace ? TAILOR_BUF_INOUT : TAILOR_BUF_IN, 1e-4, rtol},
            [QR_W] = {"w", dtype, (size_t)hd, TAILOR_BUF_IN, 0, 0},
            [QR_POS] = {"pos", TAILOR_DTYPE_I32, (size_t)tokens, TAILOR_BUF_IN, 0, 0},
            [QR_INV_FREQ] = {"inv_freq", TAILOR_DTYPE_F32, (size_t)(hd / 2), TAILOR_BUF_IN, 0, 0},
            [QR_OUT] = {"out", dtype, n, TAILOR_BUF_OUT, 1e-4, rtol},
        },
    };
    return TAILOR_OK;
}

static void qk_norm_rope_fill(const tailor_shape *shape, tailor_dtype dtype,
                              const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    long long hd = tailor_shape_get(shape, "head_dim", 0), rope = tailor_shape_get(shape, "rope", 1);
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[QR_X].count; i++)
        tailor_dtype_store(dtype, host[QR_X], i,
                           (tailor_fill_uniform01(&s) * 2 - 1) * (i % 61 == 0 ? 30.0f : 3.0f));
    for (size_t i = 0; i < bufs->b[QR_W].count; i++)
        tailor_dtype_store(dtype, host[QR_W], i, tailor_fill_uniform01(&s) * 2.5f - 0.5f);
    /* positions: 0, small, and large (the fp32 angle of a long context) */
    int32_t *pos = host[QR_POS];
    for (size_t t = 0; t < bufs->b[QR_POS].count; t++)
        pos[t] = t == 0 ? 0 : t % 3 == 1 ? (int32_t)t : (int32_t)(tailor_fill_uniform01(&s) * 131072.0f);
    float *f = host[QR_INV_FREQ];
    float theta = rope == 2 ? 1e6f : 1e4f;
    int rot = rot_pairs(rope, hd);
    for (long long j = 0; j < hd / 2; j++)
        f[j] = j < rot ? 1.0f / powf(theta, (float)(2 * j) / (float)hd) : 0.0f;
}

static tailor_status qk_norm_rope_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                            tailor_dtype dtype, const tailor_op_buffers *bufs,
                                            void *const *host, float *const *ref)
{
    size_t tokens = (size_t)tailor_shape_get(shape, "tokens", 0);
    size_t heads = (size_t)tailor_shape_get(shape, "heads", 0);
    size_t hd = (size_t)tailor_shape_get(shape, "head_dim", 0);
    int weight = tailor_shape_get(shape, "weight", 1) != 0;
    int rot = rot_pairs(tailor_shape_get(shape, "rope", 1), (long long)hd);
    float *dst = ref[bufs->count == 4 ? QR_X : QR_OUT];
    float *v = malloc(hd * sizeof *v);
    if (!v)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "qk_norm_rope: out of memory");
    const int32_t *pos = host[QR_POS];
    const float *inv_freq = host[QR_INV_FREQ];
    for (size_t r = 0; r < tokens * heads; r++) {
        for (size_t c = 0; c < hd; c++)
            v[c] = tailor_dtype_load(dtype, host[QR_X], r * hd + c);
        tailor_ref_norm_rope(v, hd, dtype, weight ? host[QR_W] : NULL, (float)pos[r / heads],
                             inv_freq, (size_t)rot);
        for (size_t c = 0; c < hd; c++)
            dst[r * hd + c] = v[c];
    }
    free(v);
    return TAILOR_OK;
}

static double qk_norm_rope_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double n = (double)tailor_shape_get(shape, "tokens", 0) *
               (double)tailor_shape_get(shape, "heads", 0) *
               (double)tailor_shape_get(shape, "head_dim", 0);
    return 2 * n * (double)tailor_dtype_size(dtype) +
           4.0 * (double)tailor_shape_get(shape, "tokens", 0);
}

static double qk_norm_rope_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 10.0 * (double)tailor_shape_get(shape, "tokens", 0) *
           (double)tailor_shape_get(shape, "heads", 0) *
           (double)tailor_shape_get(shape, "head_dim", 0);
}

const tailor_op tailor_op_qk_norm_rope = {
    .name = "qk_norm_rope",
    .summary = "Gemma 4 per-head RMSNorm (q/k weighted, v weightless) then NeoX RoPE, default or "
               "proportional",
    .keys = qk_norm_rope_keys,
    .describe = qk_norm_rope_describe,
    .fill = qk_norm_rope_fill,
    .reference = qk_norm_rope_reference,
    .bytes = qk_norm_rope_bytes,
    .flops = qk_norm_rope_flops,
};
