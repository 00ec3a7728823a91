/* op_gemma4.c — the small ops only the Gemma 4 runtime needs (models/gemma4/gpu.c), with their
 * C references:
 *
 * gemma4_kv_store: a layer's new K and V into its cache (GEMMA4.md §2.5). For token t at
 *   position p = pos[t] and KV head h, slot = p mod slots:
 *     k_cache[h, slot, :] = T(RoPE(RMSNorm_w(k[t, h, :]), p))    (statistics and angle in fp32)
 *     v_cache[h, slot, :] = T(RMSNorm(v[t, h, :]))               (weightless v_norm)
 *     positions[slot] = p
 *   and, with lin = 1, the same rows into k_lin / v_lin [tokens, kv_heads, head_dim] (the linear
 *   tail attention_prefill reads). k and v are [tokens, kv_heads * head_dim] raw projections
 *   (bind the same buffer twice on K=V layers: V is the raw K). inv_freq [head_dim/2] fp32 holds
 *   the layer's RoPE frequencies (0 for pairs proportional RoPE leaves alone: an exact identity).
 *   Tokens of one launch must fall on distinct slots (tokens <= slots). With q_heads (decode,
 *   lin = 0) also q_out[t, h, :] = T(RoPE(RMSNorm_wq(q[t, h, :]), p)): the layer's q prepared
 *   as k is, which qk_norm_rope would do in a launch of its own.
 * gemma4_kv_gather: rows [0, rows) of k_lin / v_lin [rows, kv_heads, head_dim] = the cache rows
 *   of positions first .. first + rows - 1 (slot = position mod slots): the history a prefill
 *   chunk attends to, in attention_prefill's linear layout.
 * gemma4_ple: the per-layer inputs (GEMMA4.md §2.3 steps 2-3) from the context projection c and
 *   the token-identity rows e [tokens, layers * dim]:
 *     out = T((RMSNorm_w(c * hidden^-1/2) + e * bf16(sqrt(dim))) * 2^-1/2), all in fp32.
 *   With gather = 1, e is the whole table (on the device) and token t reads its row ids[t]; the
 *   callers guarantee ids are rows of the table (a test's table holds tokens + 3 rows).
 * gemma4_fill: deterministic pseudo-random device data (benchmark weights generated on the GPU):
 *   word i of out (u32) is hash(seed, i) (mode 0), or two dtype values
 *   offset + (hash % 2001 - 1000) * scale (mode 1; scale = amp_e6 * 1e-9, offset = off_e6 * 1e-6),
 *   computed with separately rounded multiply and add on both sides, so they agree bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "op.h"

static uint64_t g4_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float g4_uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(g4_next(s) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static int g4_half(tailor_dtype d) { return d == TAILOR_DTYPE_F16 || d == TAILOR_DTYPE_BF16; }

/* One rounding of an fp32 value: half an ulp, plus fp32 noise. */
static double g4_rtol(tailor_dtype d) { return d == TAILOR_DTYPE_BF16 ? 1.0 / 128 : 1.0 / 1024; }

static double g4_dim(const tailor_shape *s, const char *k) { return (double)tailor_shape_get(s, k, 0); }

/* ---- gemma4_kv_store -------------------------------------------------------------------------- */

enum { KS_K = 0, KS_V, KS_W, KS_INV_FREQ, KS_POS, KS_KC, KS_VC, KS_POSITIONS, KS_KLIN, KS_VLIN };
/* With q_heads (decode, lin = 0) the layer's q follows in the slots lin would take. */
enum { KS_Q = KS_KLIN, KS_WQ, KS_QOUT };

static const tailor_shape_key kv_store_keys[] = {
    {"tokens", -1, "new tokens (1 for a decode step)"},
    {"kv_heads", -1, "KV heads of the layer"},
    {"head_dim", -1, "head width (256 sliding, 512 full)"},
    {"slots", -1, "cache slots: the window W of a sliding layer's ring, the capacity of a full one"},
    {"lin", 0, "1: also write the rows to k_lin / v_lin (prefill)"},
    {"q_heads", 0, "decode (lin 0): also q = RoPE(RMSNorm_wq(q)) of this many heads into q_out, "
                   "the qk_norm_rope launch before it folded in"},
    {NULL, 0, NULL},
};

static tailor_status kv_store_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                       tailor_dtype dtype, tailor_op_buffers *out)
{
    long long t = tailor_shape_get(shape, "tokens", 0), h = tailor_shape_get(shape, "kv_heads", 0);
    long long d = tailor_shape_get(shape, "head_dim", 0), s = tailor_shape_get(shape, "slots", 0);
    int lin = tailor_shape_get(shape, "lin", 0) != 0;
    long long qh = tailor_shape_get(shape, "q_heads", 0);
    if (qh < 0 || (qh > 0 && lin))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4_kv_store: q_heads=%lld must be 0, or positive with lin=0 "
                                "(q is folded in for decode only)", qh);
    if (t <= 0 || h <= 0 || d <= 0 || d % 2 != 0 || s < t)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4_kv_store: tokens=%lld, kv_heads=%lld and an even "
                                "head_dim=%lld must be positive, with slots=%lld >= tokens",
                                t, h, d, s);
    if (!g4_half(dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4_kv_store: dtype must be fp16 or bf16");
    size_t n = (size_t)(t * h * d), c = (size_t)(h * s * d);
    double rt = g4_rtol(dtype);
    memset(out, 0, sizeof *out);
    out->count = lin ? 10 : 8;
    out->b[KS_K] = (tailor_buffer_spec){"k", dtype, n, TAILOR_BUF_IN, 0, 0};
    out->b[KS_V] = (tailor_buffer_spec){"v", dtype, n, TAILOR_BUF_IN, 0, 0};
    out->b[KS_W] = (tailor_buffer_spec){"w", dtype, (size_t)d, TAILOR_BUF_IN, 0, 0};
    out->b[KS_INV_FREQ] = (tailor_buffer_spec){"inv_freq", TAILOR_DTYPE_F32, (size_t)d / 2,
                                               TAILOR_BUF_IN, 0, 0};
    out->b[KS_POS] = (tailor_buffer_spec){"pos", TAILOR_DTYPE_I32, (size_t)t, TAILOR_BUF_IN, 0, 0};
    out->b[KS_KC] = (tailor_buffer_spec){"k_cache", dtype, c, TAILOR_BUF_INOUT, 1e-4, rt};
    out->b[KS_VC] = (tailor_buffer_spec){"v_cache", dtype, c, TAILOR_BUF_INOUT, 1e-4, rt};
    out->b[KS_POSITIONS] = (tailor_buffer_spec){"positions", TAILOR_DTYPE_I32, (size_t)s,
                                                TAILOR_BUF_INOUT, 0, 0};
    if (lin) {
        out->b[KS_KLIN] = (tailor_buffer_spec){"k_lin", dtype, n, TAILOR_BUF_OUT, 1e-4, rt};
        out->b[KS_VLIN] = (tailor_buffer_spec){"v_lin", dtype, n, TAILOR_BUF_OUT, 1e-4, rt};
    }
    if (qh > 0) { /* tolerances as qk_norm_rope's */
        size_t nq = (size_t)(t * qh * d);
        out->count = 11;
        out->b[KS_Q] = (tailor_buffer_spec){"q", dtype, nq, TAILOR_BUF_IN, 0, 0};
        out->b[KS_WQ] = (tailor_buffer_spec){"wq", dtype, (size_t)d, TAILOR_BUF_IN, 0, 0};
        out->b[KS_QOUT] = (tailor_buffer_spec){"q_out", dtype, nq, TAILOR_BUF_OUT, 1e-4, rt};
    }
    return TAILOR_OK;
}

static void kv_store_fill(const tailor_shape *shape, tailor_dtype dtype,
                          const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    long long d = tailor_shape_get(shape, "head_dim", 0), slots = tailor_shape_get(shape, "slots", 0);
    for (int b = 0; b < bufs->count; b++) {
        if (bufs->b[b].role == TAILOR_BUF_OUT)
            continue;
        for (size_t i = 0; i < bufs->b[b].count; i++) {
            float v = g4_uniform(&s);
            int qs = bufs->count == 11; /* q folded in: KS_Q and KS_WQ are q's */
            if (b == KS_K || b == KS_V || (qs && b == KS_Q))
                v *= 4.0f; /* raw projections, of any scale */
            else if (b == KS_W || (qs && b == KS_WQ))
                v = 1.0f + 0.5f * v;
            if (b == KS_INV_FREQ) /* default RoPE, theta 1e4 */
                ((float *)host[b])[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)d);
            else if (b == KS_POS) /* consecutive positions from a random start */
                ((int32_t *)host[b])[i] = (int32_t)(1000 + (seed % 4096) + i);
            else if (b == KS_POSITIONS)
                ((int32_t *)host[b])[i] = (int32_t)(i % 3 == 0 ? -1 : (long long)i);
            else
                tailor_dtype_store(dtype, host[b], i, v);
        }
    }
    (void)slots;
}

/* The normalised (and for k rotated) head vector src[d] at position p into dst[d]. */
static void kv_store_row(const float *src, const float *w, const float *inv_freq, int p, int d,
                         float *dst)
{
    double ss = 0;
    for (int j = 0; j < d; j++)
        ss += (double)src[j] * src[j];
    float inv = (float)(1.0 / sqrt(ss / d + 1e-6));
    for (int j = 0; j < d; j++)
        dst[j] = src[j] * inv * (w ? w[j] : 1.0f);
    if (!inv_freq)
        return;
    for (int j = 0; j < d / 2; j++) {
        float ang = (float)p * inv_freq[j], c = cosf(ang), sn = sinf(ang);
        float a = dst[j], b = dst[j + d / 2];
        dst[j] = a * c - b * sn;
        dst[j + d / 2] = b * c + a * sn;
    }
}

static tailor_status kv_store_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                        tailor_dtype dtype, const tailor_op_buffers *bufs,
                                        void *const *host, float *const *ref)
{
    int T = (int)tailor_shape_get(shape, "tokens", 0), H = (int)tailor_shape_get(shape, "kv_heads", 0);
    int d = (int)tailor_shape_get(shape, "head_dim", 0), S = (int)tailor_shape_get(shape, "slots", 0);
    int lin = tailor_shape_get(shape, "lin", 0) != 0;
    for (int b = KS_KC; b <= KS_POSITIONS; b++)
        for (size_t i = 0; i < bufs->b[b].count; i++)
            ref[b][i] = tailor_dtype_load(bufs->b[b].dtype, host[b], i);
    float *src = malloc(2 * (size_t)d * sizeof *src), *w = malloc(2 * (size_t)d * sizeof *w);
    if (!src || !w) {
        free(src);
        free(w);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4_kv_store: out of memory");
    }
    float *dst = src + d, *wq = w + d; /* wq: q's norm weight, when q is folded in */
    int QH = (int)tailor_shape_get(shape, "q_heads", 0);
    for (int j = 0; j < d; j++) {
        w[j] = tailor_dtype_load(dtype, host[KS_W], (size_t)j);
        wq[j] = QH > 0 ? tailor_dtype_load(dtype, host[KS_WQ], (size_t)j) : 0.0f;
    }
    const float *freq = host[KS_INV_FREQ];
    for (int t = 0; t < T; t++) {
        int p = ((const int32_t *)host[KS_POS])[t], slot = p % S;
        ref[KS_POSITIONS][slot] = (float)p;
        for (int h = 0; h < QH; h++) { /* q, normed with wq and rotated as k */
            size_t in = ((size_t)t * QH + h) * d;
            for (int j = 0; j < d; j++)
                src[j] = tailor_dtype_load(dtype, host[KS_Q], in + j);
            kv_store_row(src, wq, freq, p, d, dst);
            for (int j = 0; j < d; j++)
                ref[KS_QOUT][in + j] = dst[j];
        }
        for (int h = 0; h < H; h++) {
            size_t in = ((size_t)t * H + h) * d, at = ((size_t)h * S + slot) * d;
            for (int kv = 0; kv < 2; kv++) {
                for (int j = 0; j < d; j++)
                    src[j] = tailor_dtype_load(dtype, host[kv ? KS_V : KS_K], in + j);
                kv_store_row(src, kv ? NULL : w, kv ? NULL : freq, p, d, dst);
                for (int j = 0; j < d; j++) {
                    ref[kv ? KS_VC : KS_KC][at + j] = dst[j];
                    if (lin)
                        ref[kv ? KS_VLIN : KS_KLIN][in + j] = dst[j];
                }
            }
        }
    }
    free(src);
    free(w);
    return TAILOR_OK;
}

static double kv_store_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double n = g4_dim(shape, "tokens") * g4_dim(shape, "kv_heads") * g4_dim(shape, "head_dim");
    double nq = g4_dim(shape, "tokens") * (double)tailor_shape_get(shape, "q_heads", 0) *
                g4_dim(shape, "head_dim");
    return (n * (tailor_shape_get(shape, "lin", 0) ? 6 : 4) + 2 * nq) *
           (double)tailor_dtype_size(dtype);
}

static double kv_store_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    double heads = g4_dim(shape, "kv_heads") + (double)tailor_shape_get(shape, "q_heads", 0);
    return 10.0 * g4_dim(shape, "tokens") * heads * g4_dim(shape, "head_dim");
}

const tailor_op tailor_op_gemma4_kv_store = {
    .name = "gemma4_kv_store",
    .summary = "Gemma 4: k_norm + RoPE on K, weightless norm on V, written to the KV cache slots",
    .keys = kv_store_keys,
    .describe = kv_store_describe,
    .fill = kv_store_fill,
    .reference = kv_store_reference,
    .bytes = kv_store_bytes,
    .flops = kv_store_flops,
};

/* ---- gemma4_kv_gather ------------------------------------------------------------------------- */

static const tailor_shape_key kv_gather_keys[] = {
    {"rows", -1, "positions gathered"},
    {"kv_heads", -1, "KV heads of the layer"},
    {"head_dim", -1, "head width"},
    {"slots", -1, "cache slots (ring size W, or the full cache's capacity)"},
    {"first", 0, "position of row 0 (slot = position mod slots)"},
    {NULL, 0, NULL},
};

static tailor_status kv_gather_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                        tailor_dtype dtype, tailor_op_buffers *out)
{
    long long r = tailor_shape_get(shape, "rows", 0), h = tailor_shape_get(shape, "kv_heads", 0);
    long long d = tailor_shape_get(shape, "head_dim", 0), s = tailor_shape_get(shape, "slots", 0);
    if (r <= 0 || h <= 0 || d <= 0 || d % 8 != 0 || s < r || tailor_shape_get(shape, "first", 0) < 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4_kv_gather: rows=%lld, kv_heads=%lld and head_dim=%lld (a "
                                "multiple of 8) must be positive, slots=%lld >= rows, first >= 0",
                                r, h, d, s);
    if (!g4_half(dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4_kv_gather: dtype must be fp16 or bf16");
    size_t n = (size_t)(r * h * d), c = (size_t)(h * s * d);
    memset(out, 0, sizeof *out);
    out->count = 4;
    out->b[0] = (tailor_buffer_spec){"k_cache", dtype, c, TAILOR_BUF_IN, 0, 0};
    out->b[1] = (tailor_buffer_spec){"v_cache", dtype, c, TAILOR_BUF_IN, 0, 0};
    out->b[2] = (tailor_buffer_spec){"k_lin", dtype, n, TAILOR_BUF_OUT, 0, 0};
    out->b[3] = (tailor_buffer_spec){"v_lin", dtype, n, TAILOR_BUF_OUT, 0, 0};
    return TAILOR_OK;
}

static void kv_gather_fill(const tailor_shape *shape, tailor_dtype dtype,
                           const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    (void)shape;
    uint64_t s = seed + 11;
    for (int b = 0; b < 2; b++)
        for (size_t i = 0; i < bufs->b[b].count; i++)
            tailor_dtype_store(dtype, host[b], i, g4_uniform(&s) * 3.0f);
}

static tailor_status kv_gather_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                         tailor_dtype dtype, const tailor_op_buffers *bufs,
                                         void *const *host, float *const *ref)
{
    (void)ctx;
    (void)bufs;
    long long R = tailor_shape_get(shape, "rows", 0), H = tailor_shape_get(shape, "kv_heads", 0);
    long long d = tailor_shape_get(shape, "head_dim", 0), S = tailor_shape_get(shape, "slots", 0);
    long long first = tailor_shape_get(shape, "first", 0);
    for (long long r = 0; r < R; r++)
        for (long long h = 0; h < H; h++)
            for (long long j = 0; j < d; j++) {
                size_t from = (size_t)((h * S + (first + r) % S) * d + j);
                size_t to = (size_t)((r * H + h) * d + j);
                ref[2][to] = tailor_dtype_load(dtype, host[0], from);
                ref[3][to] = tailor_dtype_load(dtype, host[1], from);
            }
    return TAILOR_OK;
}

static double kv_gather_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    return 4.0 * g4_dim(shape, "rows") * g4_dim(shape, "kv_heads") * g4_dim(shape, "head_dim") *
           (double)tailor_dtype_size(dtype);
}

const tailor_op tailor_op_gemma4_kv_gather = {
    .name = "gemma4_kv_gather",
    .summary = "Gemma 4: cached K/V of a run of positions into the linear layout of prefill",
    .keys = kv_gather_keys,
    .describe = kv_gather_describe,
    .fill = kv_gather_fill,
    .reference = kv_gather_reference,
    .bytes = kv_gather_bytes,
    .flops = tailor_op_no_flops,
};

/* ---- gemma4_ple --------------------------------------------------------------------------------- */

static const tailor_shape_key ple_keys[] = {
    {"tokens", -1, "tokens"},
    {"layers", -1, "decoder layers L"},
    {"dim", 256, "per-layer input width P"},
    {"hidden", -1, "hidden size H (the context projection is scaled by H^-1/2)"},
    {"gather", 0, "1: e is the whole table and ids [tokens] pick the rows; 0: e holds the rows"},
    {NULL, 0, NULL},
};

/* Rows of a test's table with gather = 1 (any count above tokens: ids are a shuffle of them). */
static long long ple_table_rows(long long tokens) { return tokens + 3; }

static tailor_status ple_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                  tailor_op_buffers *out)
{
    long long t = tailor_shape_get(shape, "tokens", 0), l = tailor_shape_get(shape, "layers", 0);
    long long p = tailor_shape_get(shape, "dim", 256), h = tailor_shape_get(shape, "hidden", 0);
    long long gather = tailor_shape_get(shape, "gather", 0);
    if (t <= 0 || l <= 0 || p <= 0 || h <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4_ple: tokens, layers, dim and hidden must be positive");
    if (gather < 0 || gather > 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4_ple: gather must be 0 or 1");
    if (!g4_half(dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4_ple: dtype must be fp16 or bf16");
    size_t n = (size_t)(t * l * p);
    memset(out, 0, sizeof *out);
    size_t ne = gather ? (size_t)(ple_table_rows(t) * l * p) : n;
    out->count = gather ? 5 : 4;
    out->b[0] = (tailor_buffer_spec){"c", dtype, n, TAILOR_BUF_IN, 0, 0};
    out->b[1] = (tailor_buffer_spec){"e", dtype, ne, TAILOR_BUF_IN, 0, 0};
    out->b[2] = (tailor_buffer_spec){"w", dtype, (size_t)p, TAILOR_BUF_IN, 0, 0};
    out->b[3] = (tailor_buffer_spec){"out", dtype, n, TAILOR_BUF_OUT, 1e-4, g4_rtol(dtype)};
    if (gather)
        out->b[4] = (tailor_buffer_spec){"ids", TAILOR_DTYPE_I32, (size_t)t, TAILOR_BUF_IN, 0, 0};
    return TAILOR_OK;
}

static void ple_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                     void *const *host, uint64_t seed)
{
    uint64_t s = seed + 23;
    for (int b = 0; b < 3; b++)
        for (size_t i = 0; i < bufs->b[b].count; i++) {
            float v = g4_uniform(&s);
            tailor_dtype_store(dtype, host[b], i, b == 0 ? v * 20.0f : b == 1 ? v * 0.05f : 1.0f + 0.5f * v);
        }
    long long t = tailor_shape_get(shape, "tokens", 0), rows = ple_table_rows(t);
    /* distinct rows in reverse order, shifted by 0..2 with the seed (rows = tokens + 3) */
    for (long long i = 0; i < t && bufs->count > 4; i++)
        ((int32_t *)host[4])[i] = (int32_t)(rows - 1 - i - (long long)(seed % 3));
}

static tailor_status ple_reference(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                   const tailor_op_buffers *bufs, void *const *host,
                                   float *const *ref)
{
    (void)ctx;
    long long T = tailor_shape_get(shape, "tokens", 0), L = tailor_shape_get(shape, "layers", 0);
    long long P = tailor_shape_get(shape, "dim", 256), H = tailor_shape_get(shape, "hidden", 0);
    float hs = 1.0f / sqrtf((float)H), es = tailor_round_bf16(sqrtf((float)P));
    float is = 0.70710678118654752f;
    for (long long r = 0; r < T * L; r++) {
        size_t o = (size_t)(r * P);
        double ss = 0;
        for (long long j = 0; j < P; j++) {
            float c = tailor_dtype_load(dtype, host[0], o + (size_t)j) * hs;
            ss += (double)c * c;
        }
        float inv = (float)(1.0 / sqrt(ss / (double)P + 1e-6));
        size_t eo = o; /* token r / L's row, layer r % L */
        if (bufs->count > 4)
            eo = ((size_t)((const int32_t *)host[4])[r / L] * (size_t)L + (size_t)(r % L)) *
                 (size_t)P;
        for (long long j = 0; j < P; j++) {
            float c = tailor_dtype_load(dtype, host[0], o + (size_t)j) * hs * inv *
                      tailor_dtype_load(dtype, host[2], (size_t)j);
            float e = tailor_dtype_load(dtype, host[1], eo + (size_t)j) * es;
            ref[3][o + (size_t)j] = (c + e) * is;
        }
    }
    return TAILOR_OK;
}

static double ple_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    return 3.0 * g4_dim(shape, "tokens") * g4_dim(shape, "layers") * g4_dim(shape, "dim") *
           (double)tailor_dtype_size(dtype);
}

static double ple_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 8.0 * g4_dim(shape, "tokens") * g4_dim(shape, "layers") * g4_dim(shape, "dim");
}

const tailor_op tailor_op_gemma4_ple = {
    .name = "gemma4_ple",
    .summary = "Gemma 4 per-layer inputs: norm of the context projection plus the scaled rows",
    .keys = ple_keys,
    .describe = ple_describe,
    .fill = ple_fill,
    .reference = ple_reference,
    .bytes = ple_bytes,
    .flops = ple_flops,
};

/* ---- gemma4_fill -------------------------------------------------------------------------------- */

static const tailor_shape_key fill_keys[] = {
    {"words", -1, "32-bit words written"},
    {"mode", 0, "0: random bits; 1: two dtype values offset + u * scale per word"},
    {"seed", 1, "stream of this buffer"},
    {"amp_e6", 30000, "mode 1: scale = amp_e6 * 1e-9 (u is an integer in -1000..1000)"},
    {"off_e6", 0, "mode 1: offset = off_e6 * 1e-6"},
    {NULL, 0, NULL},
};

static tailor_status fill_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_op_buffers *out)
{
    long long w = tailor_shape_get(shape, "words", 0);
    if (w <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4_fill: words must be positive");
    if (!g4_half(dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4_fill: dtype must be fp16 or bf16");
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->b[0] = (tailor_buffer_spec){"out", TAILOR_DTYPE_I32, (size_t)w, TAILOR_BUF_OUT, 0, 0};
    return TAILOR_OK;
}

static void fill_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                      void *const *host, uint64_t seed)
{
    (void)shape;
    (void)dtype;
    (void)bufs;
    (void)host;
    (void)seed;
}

/* The device's hash (templates/gemma4_fill.cu): a 32-bit mix of (seed, i). */
static uint32_t fill_hash(uint32_t seed, uint32_t i)
{
    uint32_t x = i * 0x9e3779b1u + seed * 0x85ebca6bu + 0x27d4eb2fu;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static uint16_t fill_half(tailor_dtype dtype, uint32_t h, float off, float scale)
{
    float v = (float)((int)(h % 2001u) - 1000) * scale;
    v = v + off;
    return dtype == TAILOR_DTYPE_BF16 ? tailor_f32_to_bf16(v) : tailor_f32_to_f16(v);
}

static tailor_status fill_reference(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                    const tailor_op_buffers *bufs, void *const *host,
                                    float *const *ref)
{
    (void)ctx;
    (void)host;
    uint32_t seed = (uint32_t)tailor_shape_get(shape, "seed", 1);
    int mode = (int)tailor_shape_get(shape, "mode", 0);
    float scale = (float)((double)tailor_shape_get(shape, "amp_e6", 30000) * 1e-9);
    float off = (float)((double)tailor_shape_get(shape, "off_e6", 0) * 1e-6);
    for (size_t i = 0; i < bufs->b[0].count; i++) {
        uint32_t w = fill_hash(seed, (uint32_t)i);
        if (mode == 1) {
            uint32_t lo = fill_half(dtype, fill_hash(seed ^ 0x5bd1e995u, 2u * (uint32_t)i), off, scale);
            uint32_t hi = fill_half(dtype, fill_hash(seed ^ 0x5bd1e995u, 2u * (uint32_t)i + 1u), off, scale);
            w = lo | (hi << 16);
        }
        ref[0][i] = (float)(int32_t)w;
    }
    return TAILOR_OK;
}

static double fill_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 4.0 * g4_dim(shape, "words");
}

const tailor_op tailor_op_gemma4_fill = {
    .name = "gemma4_fill",
    .summary = "Deterministic pseudo-random device data (benchmark weights made on the GPU)",
    .keys = fill_keys,
    .describe = fill_describe,
    .fill = fill_fill,
    .reference = fill_reference,
    .bytes = fill_bytes,
    .flops = tailor_op_no_flops,
};
