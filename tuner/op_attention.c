/* op_attention.c — the ops "attention_prefill" and "attention_decode" (Gemma 4, GEMMA4.md §2.5,
 * §2.8): causal attention with an optional sliding window, GQA/MQA, scaling 1.0, softmax in fp32
 * with the probabilities rounded to the dtype before P·V (HF eager), and their C references.
 *
 * attention_prefill buffers (row-major):
 *   q [q_len, heads, head_dim], k and v [kv_len, kv_heads, head_dim], out [q_len, heads, head_dim];
 *   query i is at position kv_len - q_len + i and sees key u when u <= t and (window == 0 or
 *   u > t - window).
 * attention_decode buffers:
 *   q [batch, heads, head_dim], k_cache and v_cache [batch, kv_heads, slots, head_dim],
 *   positions [batch, slots] int32 (-1 = empty slot), qpos [batch] int32, out like q;
 *   slots = window for a sliding layer's ring buffer (slot = position mod window), kv_len for a
 *   full layer's linear cache (slot = position): the slot of position p is p mod slots, so
 *   while qpos + 1 < slots no slot at or past qpos + 1 holds a visible position (kernels may
 *   stream only the first min(slots, qpos + 1) slots). Slot s is visible when
 *   0 <= positions[s] <= qpos and (window == 0 or positions[s] > qpos - window).
 * Query head h reads KV head h / (heads / kv_heads). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "op.h"
#include "parallel.h"

/* ---- shared pieces ---- */

/* Values of V are N(0,1) clipped to this; the output tolerance is a multiple of it. */
#define ATTN_VCLIP 3.0f

/* Unit roundoff of the dtype (half an ulp at 1). */
static double attn_unit(tailor_dtype dtype) { return dtype == TAILOR_DTYPE_BF16 ? 0x1p-8 : 0x1p-11; }

/* Output tolerance. Kernel and reference each round every probability to the dtype (relative
 * error <= u; the kernel rounds exp(s - running max) before normalising, the reference the
 * normalised p), so |out - ref| <= 2u * sum_u p_u |v_u| <= 2u * VCLIP, plus scores accumulated
 * in another fp32 order (relative 1e-5, negligible), plus fp16 subnormal probabilities (absolute
 * 2^-25 each, random signs: one more u * VCLIP covers them), plus the output's own rounding
 * (rtol u). */
static void attn_tolerance(tailor_dtype dtype, double *atol, double *rtol)
{
    double u = attn_unit(dtype);
    *atol = 2.0 * u * ATTN_VCLIP + (dtype == TAILOR_DTYPE_F16 ? u * ATTN_VCLIP : 0.0) + 1e-6;
    *rtol = u;
}

static uint64_t attn_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static float attn_uniform(uint64_t *s) /* (0, 1) */
{
    return ((float)(attn_next(s) >> 40) + 0.5f) / 16777216.0f;
}

static float attn_normal(uint64_t *s)
{
    float u1 = attn_uniform(s), u2 = attn_uniform(s);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

/* q and k ~ N(0, sigma^2) with sigma^2 = 2.5 / sqrt(head_dim): scores have a standard deviation
 * of about 2.5, so the softmax is neither flat nor one-hot. */
static void attn_fill_qk(tailor_dtype dtype, void *buf, size_t count, long long hd, uint64_t *s)
{
    float sigma = sqrtf(2.5f / sqrtf((float)hd));
    for (size_t i = 0; i < count; i++)
        tailor_dtype_store(dtype, buf, i, attn_normal(s) * sigma);
}

static void attn_fill_v(tailor_dtype dtype, void *buf, size_t count, uint64_t *s)
{
    for (size_t i = 0; i < count; i++)
        tailor_dtype_store(dtype, buf, i, fmaxf(-ATTN_VCLIP, fminf(ATTN_VCLIP, attn_normal(s))));
}

static float *attn_to_f32(tailor_dtype dtype, const void *buf, size_t count)
{
    float *f = malloc(count * sizeof *f);
    if (f)
        for (size_t i = 0; i < count; i++)
            f[i] = tailor_dtype_load(dtype, buf, i);
    return f;
}

static float attn_round(tailor_dtype dtype, float v)
{
    return dtype == TAILOR_DTYPE_BF16 ? tailor_round_bf16(v) : tailor_round_f16(v);
}

static float attn_dot(const float *a, const float *b, long long n)
{
    float acc[8] = {0};
    long long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++)
        acc[0] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* One query row: keys[j] / vals[j] (j < n, rows of hd floats) are the visible keys. Writes the
 * fp32 output (probabilities rounded to the dtype before P·V) to out[hd]; zeros when n == 0.
 * scores is scratch of n floats. */
static void attn_row(tailor_dtype dtype, const float *q, const float *const *keys,
                     const float *const *vals, long long n, long long hd, float *scores, float *out)
{
    memset(out, 0, (size_t)hd * sizeof *out);
    if (n == 0)
        return;
    float m = -INFINITY;
    for (long long j = 0; j < n; j++) {
        scores[j] = attn_dot(q, keys[j], hd);
        m = fmaxf(m, scores[j]);
    }
    double l = 0;
    for (long long j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - m);
        l += scores[j];
    }
    for (long long j = 0; j < n; j++) {
        float p = attn_round(dtype, (float)(scores[j] / l));
        const float *v = vals[j];
        for (long long d = 0; d < hd; d++)
            out[d] += p * v[d];
    }
}

static int attn_visible(long long key_pos, long long t, long long window)
{
    return key_pos >= 0 && key_pos <= t && (window <= 0 || key_pos > t - window);
}

static tailor_status attn_check_heads(tailor_ctx *ctx, const char *op, const tailor_shape *shape,
                                      tailor_dtype dtype)
{
    long long hd = tailor_shape_get(shape, "head_dim", 0);
    long long heads = tailor_shape_get(shape, "heads", 0);
    long long kvh = tailor_shape_get(shape, "kv_heads", 0);
    if (hd <= 0 || hd % 16 != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "%s: head_dim=%lld must be a positive multiple of 16", op, hd);
    if (heads <= 0 || kvh <= 0 || heads % kvh != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "%s: heads=%lld must be a positive multiple of kv_heads=%lld", op,
                                heads, kvh);
    if (tailor_shape_get(shape, "window", 0) < 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: window must be >= 0", op);
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: dtype must be fp16 or bf16", op);
    return TAILOR_OK;
}

/* ---- attention_prefill ---- */

static const tailor_shape_key prefill_keys[] = {
    {"q_len", -1, "new queries (tokens of this chunk)"},
    {"kv_len", -1, "keys: cached history plus the new tokens (>= q_len)"},
    {"head_dim", -1, "head dimension (Gemma 4: 256 sliding, 512 full)"},
    {"heads", -1, "query heads"},
    {"kv_heads", -1, "KV heads (divides heads; 1 = MQA)"},
    {"window", 0, "sliding window W (a query sees itself and W-1 earlier keys); 0 = full causal"},
    {NULL, 0, NULL},
};

static tailor_status prefill_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                      tailor_dtype dtype, tailor_op_buffers *out)
{
    tailor_status st = attn_check_heads(ctx, "attention_prefill", shape, dtype);
    if (st)
        return st;
    long long ql = tailor_shape_get(shape, "q_len", 0), kl = tailor_shape_get(shape, "kv_len", 0);
    if (ql <= 0 || kl < ql)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "attention_prefill: q_len=%lld must be in 1..kv_len=%lld", ql, kl);
    size_t hd = (size_t)tailor_shape_get(shape, "head_dim", 0);
    size_t heads = (size_t)tailor_shape_get(shape, "heads", 0);
    size_t kvh = (size_t)tailor_shape_get(shape, "kv_heads", 0);
    double atol, rtol;
    attn_tolerance(dtype, &atol, &rtol);
    *out = (tailor_op_buffers){
        .count = 4,
        .b = {
            {"q", dtype, (size_t)ql * heads * hd, TAILOR_BUF_IN, 0, 0},
            {"k", dtype, (size_t)kl * kvh * hd, TAILOR_BUF_IN, 0, 0},
            {"v", dtype, (size_t)kl * kvh * hd, TAILOR_BUF_IN, 0, 0},
            {"out", dtype, (size_t)ql * heads * hd, TAILOR_BUF_OUT, atol, rtol},
        },
    };
    return TAILOR_OK;
}

static void prefill_fill(const tailor_shape *shape, tailor_dtype dtype,
                         const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    long long hd = tailor_shape_get(shape, "head_dim", 0);
    attn_fill_qk(dtype, host[0], bufs->b[0].count, hd, &s);
    attn_fill_qk(dtype, host[1], bufs->b[1].count, hd, &s);
    attn_fill_v(dtype, host[2], bufs->b[2].count, &s);
}

/* The prefill reference in pieces of (head, block of query rows), one per parallel task. */
typedef struct prefill_job {
    tailor_dtype dtype;
    long long ql, kl, hd, heads, kvh, window;
    const float *q, *k, *v;
    float *out;
    int row_blocks;
    int failed; /* a task could not get its scratch memory */
} prefill_job;

enum { PREFILL_ROWS_PER_TASK = 128 };

static void prefill_task(void *user, int task)
{
    prefill_job *j = user;
    long long h = task / j->row_blocks;
    long long i0 = (long long)(task % j->row_blocks) * PREFILL_ROWS_PER_TASK;
    long long i1 = i0 + PREFILL_ROWS_PER_TASK < j->ql ? i0 + PREFILL_ROWS_PER_TASK : j->ql;
    const float **kr = malloc((size_t)j->kl * sizeof *kr);
    const float **vr = malloc((size_t)j->kl * sizeof *vr);
    float *scores = malloc((size_t)j->kl * sizeof *scores);
    if (!kr || !vr || !scores) {
        j->failed = 1;
        goto done;
    }
    long long g = h / (j->heads / j->kvh), past = j->kl - j->ql;
    for (long long i = i0; i < i1; i++) {
        long long t = past + i, n = 0;
        long long lo = j->window > 0 && t - j->window + 1 > 0 ? t - j->window + 1 : 0;
        for (long long u = lo; u <= t; u++) {
            kr[n] = j->k + (u * j->kvh + g) * j->hd;
            vr[n] = j->v + (u * j->kvh + g) * j->hd;
            n++;
        }
        attn_row(j->dtype, j->q + (i * j->heads + h) * j->hd, kr, vr, n, j->hd, scores,
                 j->out + (i * j->heads + h) * j->hd);
    }
done:
    free(kr);
    free(vr);
    free(scores);
}

static tailor_status prefill_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                       tailor_dtype dtype, const tailor_op_buffers *bufs,
                                       void *const *host, float *const *ref)
{
    prefill_job j = {
        .dtype = dtype,
        .ql = tailor_shape_get(shape, "q_len", 0),
        .kl = tailor_shape_get(shape, "kv_len", 0),
        .hd = tailor_shape_get(shape, "head_dim", 0),
        .heads = tailor_shape_get(shape, "heads", 0),
        .kvh = tailor_shape_get(shape, "kv_heads", 1),
        .window = tailor_shape_get(shape, "window", 0),
        .out = ref[3],
    };
    float *q = attn_to_f32(dtype, host[0], bufs->b[0].count);
    float *k = attn_to_f32(dtype, host[1], bufs->b[1].count);
    float *v = attn_to_f32(dtype, host[2], bufs->b[2].count);
    tailor_status st = TAILOR_OK;
    if (q && k && v) {
        j.q = q;
        j.k = k;
        j.v = v;
        j.row_blocks = (int)((j.ql + PREFILL_ROWS_PER_TASK - 1) / PREFILL_ROWS_PER_TASK);
        tailor_parallel_for((int)j.heads * j.row_blocks, prefill_task, &j);
    }
    if (!q || !k || !v || j.failed)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                              "attention_prefill: no memory for the reference (kv_len=%lld)", j.kl);
    free(q);
    free(k);
    free(v);
    return st;
}

/* Keys query i (position past + i) sees, summed over the chunk. */
static double prefill_visible_pairs(const tailor_shape *shape)
{
    long long ql = tailor_shape_get(shape, "q_len", 0), kl = tailor_shape_get(shape, "kv_len", 0);
    long long window = tailor_shape_get(shape, "window", 0);
    double total = 0;
    for (long long i = 0; i < ql; i++) {
        long long t = kl - ql + i;
        total += (double)(window > 0 && window < t + 1 ? window : t + 1);
    }
    return total;
}

static double prefill_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double ql = (double)tailor_shape_get(shape, "q_len", 0);
    double kl = (double)tailor_shape_get(shape, "kv_len", 0);
    double hd = (double)tailor_shape_get(shape, "head_dim", 0);
    double heads = (double)tailor_shape_get(shape, "heads", 0);
    double kvh = (double)tailor_shape_get(shape, "kv_heads", 0);
    return (2 * ql * heads + 2 * kl * kvh) * hd * (double)tailor_dtype_size(dtype);
}

/* 2 FLOPs per multiply-add, Q·K and P·V, only for the (query, key) pairs the mask keeps. */
static double prefill_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 4.0 * prefill_visible_pairs(shape) * (double)tailor_shape_get(shape, "head_dim", 0) *
           (double)tailor_shape_get(shape, "heads", 0);
}

const tailor_op tailor_op_attention_prefill = {
    .name = "attention_prefill",
    .summary = "causal/sliding-window attention of a chunk of new queries over cached + new keys "
               "(GQA, scaling 1.0, fp32 softmax)",
    .keys = prefill_keys,
    .describe = prefill_describe,
    .fill = prefill_fill,
    .reference = prefill_reference,
    .bytes = prefill_bytes,
    .flops = prefill_flops,
};

/* ---- attention_decode ---- */

static const tailor_shape_key decode_keys[] = {
    {"kv_len", -1, "tokens so far, the new one included (the longest sequence of the batch)"},
    {"head_dim", -1, "head dimension (Gemma 4: 256 sliding, 512 full)"},
    {"heads", -1, "query heads"},
    {"kv_heads", -1, "KV heads (divides heads; 1 = MQA)"},
    {"window", 0, "sliding window W: a ring buffer of W slots; 0 = full layer, kv_len slots"},
    {"batch", 1, "sequences, one new query each"},
    {"prep", 0, "1: q is the raw projection, RMS-normed (q_w) and rotated (inv_freq, at qpos) in "
                "the kernel"},
    {NULL, 0, NULL},
};

static long long decode_slots(const tailor_shape *shape)
{
    long long w = tailor_shape_get(shape, "window", 0);
    return w > 0 ? w : tailor_shape_get(shape, "kv_len", 0);
}

static tailor_status decode_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                     tailor_dtype dtype, tailor_op_buffers *out)
{
    tailor_status st = attn_check_heads(ctx, "attention_decode", shape, dtype);
    if (st)
        return st;
    long long kl = tailor_shape_get(shape, "kv_len", 0), batch = tailor_shape_get(shape, "batch", 0);
    if (kl <= 0 || batch <= 0 || kl > 0x7fffffffLL)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "attention_decode: kv_len=%lld and batch=%lld must be positive "
                                "(kv_len below 2^31)", kl, batch);
    size_t hd = (size_t)tailor_shape_get(shape, "head_dim", 0);
    size_t heads = (size_t)tailor_shape_get(shape, "heads", 0);
    size_t kvh = (size_t)tailor_shape_get(shape, "kv_heads", 0);
    size_t b = (size_t)batch, slots = (size_t)decode_slots(shape);
    long long prep = tailor_shape_get(shape, "prep", 0);
    if (prep != 0 && prep != 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "attention_decode: prep=%lld is not 0 or 1",
                                prep);
    double atol, rtol;
    attn_tolerance(dtype, &atol, &rtol);
    if (prep) /* q rounded once more, maybe the other way than the reference: one step of u */
        atol += attn_unit(dtype) * ATTN_VCLIP;
    *out = (tailor_op_buffers){
        .count = prep ? 8 : 6,
        .b = {
            {"q", dtype, b * heads * hd, TAILOR_BUF_IN, 0, 0},
            {"k_cache", dtype, b * kvh * slots * hd, TAILOR_BUF_IN, 0, 0},
            {"v_cache", dtype, b * kvh * slots * hd, TAILOR_BUF_IN, 0, 0},
            {"positions", TAILOR_DTYPE_I32, b * slots, TAILOR_BUF_IN, 0, 0},
            {"qpos", TAILOR_DTYPE_I32, b, TAILOR_BUF_IN, 0, 0},
            {"out", dtype, b * heads * hd, TAILOR_BUF_OUT, atol, rtol},
            {"q_w", dtype, hd, TAILOR_BUF_IN, 0, 0},
            {"inv_freq", TAILOR_DTYPE_F32, hd / 2, TAILOR_BUF_IN, 0, 0},
        },
    };
    return TAILOR_OK;
}

/* prep = 1: raw q rows of any scale (the kernel normalises them); weights q_w around the scale
 * attn_fill_qk gives q, so the scores keep their spread; frequencies of GEMMA4.md §2.5's form for
 * the first three quarters of the pairs and 0 (identity) for the rest, as a proportional
 * (partial) RoPE has. */
static void decode_fill_prep(tailor_dtype dtype, void *q, size_t count, void *w, float *inv_freq,
                             long long hd, uint64_t *s)
{
    for (size_t i = 0; i < count; i++)
        tailor_dtype_store(dtype, q, i, attn_normal(s) * (0.25f + 8.0f * attn_uniform(s)));
    float sigma = sqrtf(2.5f / sqrtf((float)hd));
    for (long long j = 0; j < hd; j++)
        tailor_dtype_store(dtype, w, (size_t)j, sigma * (0.5f + attn_uniform(s)));
    for (long long j = 0; j < hd / 2; j++)
        inv_freq[j] = j < 3 * hd / 8 ? 1.0f / powf(10000.0f, (float)(2 * j) / (float)hd) : 0.0f;
}

/* The reference of prep = 1, in place on the fp32 copy of q: each head row prepared as
 * qk_norm_rope's reference does it (every pair rotates; a frequency of 0 leaves it as it is),
 * rounded once to the dtype. */
static void decode_prep_reference(tailor_dtype dtype, float *q, long long rows, long long heads,
                                  long long hd, const void *w, const float *inv_freq,
                                  const int32_t *qpos)
{
    for (long long r = 0; r < rows; r++) {
        float *x = q + r * hd;
        tailor_ref_norm_rope(x, (size_t)hd, dtype, w, (float)qpos[r / heads], inv_freq,
                             (size_t)hd / 2);
        for (long long j = 0; j < hd; j++)
            x[j] = attn_round(dtype, x[j]);
    }
}

/* Position of sequence b's new query: sequence 0 is the longest (kv_len - 1: with a window much
 * shorter than kv_len its ring has wrapped many times), sequence 1 is short (a partly filled ring,
 * single-key rows when it is 0, drawn from 0..2), the others spread evenly below kv_len - 1
 * (kv_len - 1 - (b - 1) kv_len / batch: set by the shape alone, so that decode_bytes can count
 * what the kernels stream). */
static long long decode_qpos(long long b, long long batch, long long kv_len, uint64_t *s)
{
    if (b == 0)
        return kv_len - 1;
    if (b == 1)
        return (long long)(attn_next(s) % (uint64_t)(kv_len < 3 ? kv_len : 3));
    return kv_len - 1 - (b - 1) * kv_len / batch;
}

/* What slot `slot` of sequence b holds when its query is at t. Ring (window W): the latest
 * position p <= t with p = slot mod W, except that every fifth slot other than t's own is one lap
 * stale (p - W: the mask must drop it); -1 if none. Linear cache: p = slot up to t; past t every
 * third slot holds a stale future position (dropped by causality), the rest are empty. */
static int decode_slot_position(long long slot, long long t, long long window, uint64_t *s)
{
    if (window > 0) {
        long long p = t - ((t - slot) % window + window) % window;
        if (p < 0)
            return -1;
        if (p != t && attn_next(s) % 5 == 0)
            p -= window;
        return p < 0 ? -1 : (int)p;
    }
    if (slot <= t)
        return (int)slot;
    return slot % 3 == 0 ? (int)slot : -1;
}

static void decode_fill(const tailor_shape *shape, tailor_dtype dtype,
                        const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    long long hd = tailor_shape_get(shape, "head_dim", 0), kl = tailor_shape_get(shape, "kv_len", 0);
    long long window = tailor_shape_get(shape, "window", 0);
    long long batch = tailor_shape_get(shape, "batch", 1), slots = decode_slots(shape);
    if (tailor_shape_get(shape, "prep", 0)) /* a raw q, its norm weight and frequencies */
        decode_fill_prep(dtype, host[0], bufs->b[0].count, host[6], host[7], hd, &s);
    else
        attn_fill_qk(dtype, host[0], bufs->b[0].count, hd, &s);
    attn_fill_qk(dtype, host[1], bufs->b[1].count, hd, &s); /* empty slots too: finite */
    attn_fill_v(dtype, host[2], bufs->b[2].count, &s);
    int32_t *pos = host[3], *qpos = host[4];
    for (long long b = 0; b < batch; b++) {
        long long t = decode_qpos(b, batch, kl, &s);
        qpos[b] = (int32_t)t;
        for (long long slot = 0; slot < slots; slot++)
            pos[b * slots + slot] = decode_slot_position(slot, t, window, &s);
    }
}

static tailor_status decode_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                      tailor_dtype dtype, const tailor_op_buffers *bufs,
                                      void *const *host, float *const *ref)
{
    long long hd = tailor_shape_get(shape, "head_dim", 0);
    long long heads = tailor_shape_get(shape, "heads", 0);
    long long kvh = tailor_shape_get(shape, "kv_heads", 1);
    long long window = tailor_shape_get(shape, "window", 0);
    long long batch = tailor_shape_get(shape, "batch", 1), slots = decode_slots(shape);
    const int32_t *pos = host[3], *qpos = host[4];
    float *q = attn_to_f32(dtype, host[0], bufs->b[0].count);
    float *k = attn_to_f32(dtype, host[1], bufs->b[1].count);
    float *v = attn_to_f32(dtype, host[2], bufs->b[2].count);
    const float **kr = malloc((size_t)slots * sizeof *kr);
    const float **vr = malloc((size_t)slots * sizeof *vr);
    float *scores = malloc((size_t)slots * sizeof *scores);
    tailor_status st = TAILOR_OK;
    if (!q || !k || !v || !kr || !vr || !scores) {
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                              "attention_decode: no memory for the reference (%lld slots)", slots);
        goto done;
    }
    if (tailor_shape_get(shape, "prep", 0))
        decode_prep_reference(dtype, q, batch * heads, heads, hd, host[6], host[7], qpos);
    long long group = heads / kvh;
    for (long long b = 0; b < batch; b++) {
        for (long long h = 0; h < heads; h++) {
            long long g = h / group, n = 0;
            const float *kb = k + ((b * kvh + g) * slots) * hd, *vb = v + ((b * kvh + g) * slots) * hd;
            for (long long slot = 0; slot < slots; slot++) {
                if (!attn_visible(pos[b * slots + slot], qpos[b], window))
                    continue;
                kr[n] = kb + slot * hd;
                vr[n] = vb + slot * hd;
                n++;
            }
            attn_row(dtype, q + (b * heads + h) * hd, kr, vr, n, hd, scores,
                     ref[5] + (b * heads + h) * hd);
        }
    }
done:
    free(q);
    free(k);
    free(v);
    free(kr);
    free(vr);
    free(scores);
    return st;
}

/* Slots the kernels stream, summed over the sequences: min(slots, qpos + 1) each, sequence 1
 * counted with one (its qpos is drawn from 0..2). */
static double decode_live_slots(const tailor_shape *shape)
{
    long long kl = tailor_shape_get(shape, "kv_len", 0), batch = tailor_shape_get(shape, "batch", 1);
    long long slots = decode_slots(shape), live = 0;
    for (long long b = 0; b < batch; b++) {
        long long t = b == 1 ? 0 : decode_qpos(b, batch, kl, NULL);
        live += t + 1 < slots ? t + 1 : slots;
    }
    return (double)live;
}

/* K and V of the live slots, plus q, out, the positions of every slot and qpos. */
static double decode_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double hd = (double)tailor_shape_get(shape, "head_dim", 0);
    double heads = (double)tailor_shape_get(shape, "heads", 0);
    double kvh = (double)tailor_shape_get(shape, "kv_heads", 0);
    double b = (double)tailor_shape_get(shape, "batch", 1), slots = (double)decode_slots(shape);
    double es = (double)tailor_dtype_size(dtype);
    return 2 * kvh * hd * es * decode_live_slots(shape) +
           b * (2 * heads * hd * es + 4 * (slots + 1));
}

/* q·k and p·v over the live slots */
static double decode_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 4.0 * (double)tailor_shape_get(shape, "heads", 0) *
           (double)tailor_shape_get(shape, "head_dim", 0) * decode_live_slots(shape);
}

const tailor_op tailor_op_attention_decode = {
    .name = "attention_decode",
    .summary = "one new query per sequence over a ring-buffer (sliding) or linear (full) KV cache, "
               "split-KV, GQA, scaling 1.0",
    .keys = decode_keys,
    .describe = decode_describe,
    .fill = decode_fill,
    .reference = decode_reference,
    .bytes = decode_bytes,
    .flops = decode_flops,
};
