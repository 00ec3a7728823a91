/* test_attention.c — the attention ops on the CPU: references against a naive full softmax
 * (causal and sliding masks, chunked prefill, GQA/MQA), exact single-visible-key rows, the ring
 * buffer mapping of the decode fill, FLOP/byte counts, and the spaces' budgets (T4 keeps head_dim
 * 512 survivors, a vLLM-Triton-on-Turing-like tile is refused, the H200 plans stay small). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "op.h"
#include "plan.h"
#include "space.h"
#include "testlib.h"

#define SEED 20240605u

/* An op instance (testlib's) with its op and dtype, filled and referenced. */
typedef struct instance {
    test_op_inst t;
    const tailor_op *op;
    tailor_dtype dtype;
} instance;

static void instance_free(instance *in) { test_op_inst_free(&in->t); }

/* Describes, fills and runs the reference; 0 on failure (already counted). */
static int instance_make(tailor_ctx *ctx, instance *in, const char *op, const char *shape,
                         tailor_dtype dtype, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    in->op = tailor_op_find(op);
    in->dtype = dtype;
    CHECKF(in->op != NULL, "op %s is registered", op);
    if (!in->op)
        return 0;
    int ok = test_op_inst_make(ctx, in->op, shape, dtype, &in->t);
    CHECKF(ok, "%s %s: %s", op, shape, tailor_ctx_message(ctx));
    if (!ok)
        return 0;
    in->op->fill(&in->t.shape, dtype, &in->t.bufs, in->t.host, seed);
    tailor_status st = in->op->reference(ctx, &in->t.shape, dtype, &in->t.bufs, in->t.host,
                                         in->t.ref);
    CHECKF(st == TAILOR_OK, "%s reference: %s", op, tailor_ctx_message(ctx));
    return st == TAILOR_OK;
}

static long long dim(const instance *in, const char *key)
{
    return tailor_shape_get(&in->t.shape, key, 0);
}

static float load(const instance *in, int buf, size_t i)
{
    return tailor_dtype_load(in->t.bufs.b[buf].dtype, in->t.host[buf], i);
}

static float round_to(tailor_dtype dtype, double v)
{
    return dtype == TAILOR_DTYPE_BF16 ? tailor_round_bf16((float)v) : tailor_round_f16((float)v);
}

/* The naive softmax row: all n candidate keys scored in double, the mask applied as -inf, one
 * softmax over the full row, p rounded to the dtype, P·V in double. */
static void naive_row(tailor_dtype dtype, const float *q, const float *k, const float *v,
                      const int *visible, int n, int hd, double *out)
{
    double *s = malloc((size_t)n * sizeof *s), m = -INFINITY, l = 0;
    for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int d = 0; d < hd; d++)
            acc += (double)q[d] * k[(size_t)j * (size_t)hd + (size_t)d];
        s[j] = visible[j] ? acc : -INFINITY;
        m = fmax(m, s[j]);
    }
    for (int j = 0; j < n; j++) {
        s[j] = visible[j] ? exp(s[j] - m) : 0.0;
        l += s[j];
    }
    for (int d = 0; d < hd; d++)
        out[d] = 0;
    for (int j = 0; j < n; j++) {
        double p = round_to(dtype, s[j] / l);
        for (int d = 0; d < hd; d++)
            out[d] += p * v[(size_t)j * (size_t)hd + (size_t)d];
    }
    free(s);
}

/* Compares one reference row against the naive one with the op's own tolerance; returns the
 * largest absolute difference. */
static double compare_row(const instance *in, int outbuf, size_t off, const double *naive, int hd,
                          const char *what)
{
    const tailor_buffer_spec *b = &in->t.bufs.b[outbuf];
    double worst = 0;
    int bad = 0;
    for (int d = 0; d < hd; d++) {
        double got = in->t.ref[outbuf][off + (size_t)d], diff = fabs(got - naive[d]);
        if (isnan(got) || diff > b->atol + b->rtol * fabs(naive[d]))
            bad++;
        if (diff > worst || isnan(got))
            worst = isnan(got) ? INFINITY : diff;
    }
    CHECKF(bad == 0, "%s: %d of %d elements differ from the naive softmax (worst %g)", what, bad,
           hd, worst);
    return worst;
}

/* ---- prefill ---- */

static void check_prefill_naive(tailor_ctx *ctx, const char *shape, tailor_dtype dtype)
{
    instance in;
    if (!instance_make(ctx, &in, "attention_prefill", shape, dtype, SEED)) {
        instance_free(&in);
        return;
    }
    int ql = (int)dim(&in, "q_len"), kl = (int)dim(&in, "kv_len"), hd = (int)dim(&in, "head_dim");
    int heads = (int)dim(&in, "heads"), kvh = (int)dim(&in, "kv_heads"), w = (int)dim(&in, "window");
    float *q = malloc((size_t)hd * sizeof *q), *k = malloc((size_t)kl * (size_t)hd * sizeof *k);
    float *v = malloc((size_t)kl * (size_t)hd * sizeof *v);
    int *vis = malloc((size_t)kl * sizeof *vis);
    double *row = malloc((size_t)hd * sizeof *row), worst = 0, sum = 0;
    for (int h = 0; h < heads; h++) {
        int g = h * kvh / heads; /* contiguous groups: the same as h / (heads / kvh) */
        for (int u = 0; u < kl; u++)
            for (int d = 0; d < hd; d++) {
                size_t src = ((size_t)u * (size_t)kvh + (size_t)g) * (size_t)hd + (size_t)d;
                k[(size_t)u * (size_t)hd + (size_t)d] = load(&in, 1, src);
                v[(size_t)u * (size_t)hd + (size_t)d] = load(&in, 2, src);
            }
        for (int i = 0; i < ql; i++) {
            int t = kl - ql + i;
            for (int u = 0; u < kl; u++)
                vis[u] = t - u >= 0 && (w == 0 || t - u < w);
            for (int d = 0; d < hd; d++)
                q[d] = load(&in, 0, ((size_t)i * (size_t)heads + (size_t)h) * (size_t)hd + (size_t)d);
            naive_row(dtype, q, k, v, vis, kl, hd, row);
            double e = compare_row(&in, 3, ((size_t)i * (size_t)heads + (size_t)h) * (size_t)hd,
                                   row, hd, shape);
            worst = fmax(worst, e);
            for (int d = 0; d < hd; d++)
                sum += fabs(in.t.ref[3][((size_t)i * (size_t)heads + (size_t)h) * (size_t)hd +
                                      (size_t)d] - row[d]);
        }
    }
    double mean = sum / ((double)ql * heads * hd);
    /* Only rounding-boundary flips of p separate the two: tiny on average. */
    CHECKF(mean < 2e-4, "%s %s: mean difference %g to the naive softmax", shape,
           tailor_dtype_name(dtype), mean);
    printf("prefill %-62s %s worst %.3g mean %.3g\n", shape, tailor_dtype_name(dtype), worst, mean);
    free(q);
    free(k);
    free(v);
    free(vis);
    free(row);
    instance_free(&in);
}

/* Rows with one visible key (window 1, or the very first position) must return that key's V row
 * exactly, read from KV head h / (heads / kv_heads) — which also pins the GQA mapping. */
static void check_prefill_single_key(tailor_ctx *ctx, const char *shape, tailor_dtype dtype)
{
    instance in;
    if (!instance_make(ctx, &in, "attention_prefill", shape, dtype, SEED + 1)) {
        instance_free(&in);
        return;
    }
    long long ql = dim(&in, "q_len"), kl = dim(&in, "kv_len"), hd = dim(&in, "head_dim");
    long long heads = dim(&in, "heads"), kvh = dim(&in, "kv_heads"), w = dim(&in, "window");
    int rows = 0, exact = 0, other_head_differs = 0;
    for (long long i = 0; i < ql; i++) {
        long long t = kl - ql + i;
        if (!(w == 1 || t == 0))
            continue;
        for (long long h = 0; h < heads; h++) {
            long long g = h / (heads / kvh), other = (g + 1) % kvh;
            int same = 1, differs = 0;
            for (long long d = 0; d < hd; d++) {
                float got = in.t.ref[3][(i * heads + h) * hd + d];
                same &= got == load(&in, 2, (size_t)((t * kvh + g) * hd + d));
                differs |= got != load(&in, 2, (size_t)((t * kvh + other) * hd + d));
            }
            rows++;
            exact += same;
            other_head_differs += kvh == 1 || differs;
        }
    }
    CHECKF(rows > 0, "%s: the shape has single-key rows", shape);
    CHECKF(exact == rows, "%s: %d of %d single-key rows equal V of their KV head exactly", shape,
           exact, rows);
    CHECKF(other_head_differs == rows, "%s: rows distinguish the KV heads", shape);
    instance_free(&in);
}

static void check_prefill_counts(tailor_ctx *ctx)
{
    const tailor_op *op = tailor_op_find("attention_prefill");
    tailor_shape s;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1",
                                     &s));
    CHECK_OK(ctx, tailor_op_complete_shape(ctx, op, &s));
    double causal = 8192.0 * 8193.0 / 2.0;
    CHECKF(fabs(op->flops(&s, TAILOR_DTYPE_BF16) - 4.0 * causal * 512 * 8) < 1.0,
           "causal prefill FLOPs count only the kept pairs (%g)", op->flops(&s, TAILOR_DTYPE_BF16));
    tailor_shape_set(&s, "window", 1024);
    double windowed = 1024.0 * 1025.0 / 2.0 + (8192.0 - 1024.0) * 1024.0;
    CHECKF(fabs(op->flops(&s, TAILOR_DTYPE_BF16) - 4.0 * windowed * 512 * 8) < 1.0,
           "windowed prefill FLOPs (%g)", op->flops(&s, TAILOR_DTYPE_BF16));
    /* Chunked: 100 new queries after 900 cached positions, full causal. */
    tailor_shape c;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "q_len=100,kv_len=1000,head_dim=256,heads=2,kv_heads=1",
                                     &c));
    CHECK_OK(ctx, tailor_op_complete_shape(ctx, op, &c));
    double pairs = (901.0 + 1000.0) * 100.0 / 2.0;
    CHECKF(fabs(op->flops(&c, TAILOR_DTYPE_F16) - 4.0 * pairs * 256 * 2) < 1.0,
           "chunked prefill FLOPs (%g)", op->flops(&c, TAILOR_DTYPE_F16));
    tailor_op_buffers b;
    tailor_shape bad;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "q_len=10,kv_len=5,head_dim=256,heads=2,kv_heads=1", &bad));
    CHECK(op->describe(ctx, &bad, TAILOR_DTYPE_F16, &b) == TAILOR_ERR_MISUSE);
    CHECK_OK(ctx, tailor_shape_parse(ctx, "q_len=1,kv_len=5,head_dim=256,heads=6,kv_heads=4", &bad));
    CHECK(op->describe(ctx, &bad, TAILOR_DTYPE_F16, &b) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "kv_heads") != NULL);
}

/* ---- decode ---- */

/* prep = 1: q' = RoPE(RMSNorm(q) * w) of one raw head row, all in double, rounded to the dtype
 * once (what qk_norm_rope computes before a prep = 0 decode). */
static void naive_prep(tailor_dtype dtype, const instance *in, size_t off, long long hd,
                       long long pos, float *q)
{
    double ss = 0, lo, hi;
    for (long long d = 0; d < hd; d++) {
        double x = load(in, 0, off + (size_t)d);
        ss += x * x;
    }
    double inv = 1.0 / sqrt(ss / (double)hd + 1e-6);
    const float *inv_freq = in->t.host[7];
    for (long long j = 0; j < hd / 2; j++) {
        lo = load(in, 0, off + (size_t)j) * inv * load(in, 6, (size_t)j);
        hi = load(in, 0, off + (size_t)(j + hd / 2)) * inv * load(in, 6, (size_t)(j + hd / 2));
        double a = (double)(float)((float)pos * inv_freq[j]);
        q[j] = round_to(dtype, lo * cos(a) - hi * sin(a));
        q[j + hd / 2] = round_to(dtype, hi * cos(a) + lo * sin(a));
    }
}

static void check_decode(tailor_ctx *ctx, const char *shape, tailor_dtype dtype)
{
    instance in;
    if (!instance_make(ctx, &in, "attention_decode", shape, dtype, SEED + 2)) {
        instance_free(&in);
        return;
    }
    long long kl = dim(&in, "kv_len"), hd = dim(&in, "head_dim"), heads = dim(&in, "heads");
    long long kvh = dim(&in, "kv_heads"), w = dim(&in, "window"), batch = dim(&in, "batch");
    long long slots = w > 0 ? w : kl, prep = dim(&in, "prep");
    const int32_t *pos = in.t.host[3], *qpos = in.t.host[4];
    double raw_moves = 0; /* prep: how far the output is from attending with the raw q */
    CHECKF(qpos[0] == kl - 1, "%s: sequence 0 is at the last position", shape);
    int stale = 0, single = 0;
    float *q = malloc((size_t)hd * sizeof *q), *k = malloc((size_t)(slots * hd) * sizeof *k);
    float *v = malloc((size_t)(slots * hd) * sizeof *v);
    int *vis = malloc((size_t)slots * sizeof *vis);
    double *row = malloc((size_t)hd * sizeof *row), worst = 0;
    for (long long b = 0; b < batch; b++) {
        long long t = qpos[b], own = w > 0 ? t % w : t, nvis = 0;
        CHECKF(t >= 0 && t < kl, "%s: qpos[%lld]=%lld in range", shape, b, t);
        CHECKF(pos[b * slots + own] == t, "%s: sequence %lld keeps its own position %lld in slot "
               "%lld", shape, b, t, own);
        for (long long s = 0; s < slots; s++) {
            long long p = pos[b * slots + s];
            /* Ring: a slot only ever holds positions congruent to it. */
            if (w > 0 && p >= 0)
                CHECKF(p % w == s, "%s: slot %lld holds position %lld", shape, s, p);
            vis[s] = p >= 0 && t - p >= 0 && (w == 0 || t - p < w);
            /* the kernels stream only min(slots, t + 1) slots (attn_live_split) */
            CHECKF(!(vis[s] && s > t), "%s: slot %lld past qpos %lld is visible", shape, s, t);
            stale += p >= 0 && !vis[s];
            nvis += vis[s];
        }
        single += nvis == 1;
        for (long long h = 0; h < heads; h++) {
            long long g = h / (heads / kvh);
            for (long long s = 0; s < slots; s++)
                for (long long d = 0; d < hd; d++) {
                    size_t src = (size_t)((((b * kvh + g) * slots) + s) * hd + d);
                    k[s * hd + d] = load(&in, 1, src);
                    v[s * hd + d] = load(&in, 2, src);
                }
            for (long long d = 0; d < hd; d++)
                q[d] = load(&in, 0, (size_t)((b * heads + h) * hd + d));
            if (prep) {
                naive_row(dtype, q, k, v, vis, (int)slots, (int)hd, row);
                for (long long d = 0; d < hd; d++)
                    raw_moves = fmax(raw_moves, fabs(row[d] - in.t.ref[5][(b * heads + h) * hd + d]));
                naive_prep(dtype, &in, (size_t)((b * heads + h) * hd), hd, t, q);
            }
            naive_row(dtype, q, k, v, vis, (int)slots, (int)hd, row);
            worst = fmax(worst, compare_row(&in, 5, (size_t)((b * heads + h) * hd), row, (int)hd,
                                            shape));
            if (nvis == 1) { /* exactly the V row of the one visible slot */
                int same = 1;
                for (long long d = 0; d < hd; d++)
                    same &= in.t.ref[5][(b * heads + h) * hd + d] == (float)row[d];
                CHECKF(same, "%s: single-key row of sequence %lld head %lld is V exactly", shape,
                       b, h);
            }
        }
    }
    if (slots >= 16 && kl > 2 * slots)
        CHECKF(stale > 0, "%s: the fill leaves stale slots for the mask to drop", shape);
    if (w == 1)
        CHECKF(single == batch, "%s: window 1 leaves one visible key per sequence", shape);
    if (prep)
        CHECKF(raw_moves > 10 * in.t.bufs.b[5].atol, "%s: preparing q changes the output (%g)",
               shape, raw_moves);
    printf("decode  %-62s %s worst %.3g stale %d single-key %d\n", shape,
           tailor_dtype_name(dtype), worst, stale, single);
    free(q);
    free(k);
    free(v);
    free(vis);
    free(row);
    instance_free(&in);
}

/* ---- the spaces' budgets ---- */

static int plan_survivors(tailor_ctx *ctx, const char *profile, const char *op, const char *shape,
                          tailor_dtype dtype)
{
    const tailor_device_info *dev = tailor_device_profile_find(profile);
    CHECKF(dev != NULL, "profile %s exists", profile);
    tailor_shape s;
    tailor_plan plan;
    if (!dev || tailor_shape_parse(ctx, shape, &s))
        return -1;
    tailor_status st = tailor_plan_build(ctx, dev, op, &s, dtype, &plan);
    CHECKF(st == TAILOR_OK, "plan %s %s on %s: %s", op, shape, profile, tailor_ctx_message(ctx));
    if (st)
        return -1;
    int n = tailor_plan_survivors(&plan);
    printf("plan %-4s %-17s %-62s %s: %d of %d survive\n", profile, op, shape,
           tailor_dtype_name(dtype), n, plan.count);
    tailor_plan_free(&plan);
    return n;
}

static void check_budgets(tailor_ctx *ctx)
{
    const char *pf512 = "q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0";
    const char *pf256 = "q_len=8192,kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=1024";
    const char *dc512 = "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1";
    const char *dc256 = "kv_len=32768,head_dim=256,heads=16,kv_heads=8,window=1024,batch=4";
    CHECK(plan_survivors(ctx, "t4", "attention_prefill", pf512, TAILOR_DTYPE_F16) > 0);
    CHECK(plan_survivors(ctx, "t4", "attention_decode", dc512, TAILOR_DTYPE_F16) > 0);
    CHECK(plan_survivors(ctx, "t4", "attention_prefill", pf512, TAILOR_DTYPE_BF16) == 0);
    int n;
    /* prefill has three default spaces (16- and 32-row warps; warpgroup MMAs at head_dim 256 on
     * sm_90a): tuning stays under 64 trials at head_dim 512 and 96 at 256 (the default spaces:
     * experimental ones are left out whatever the environment says) */
    unsetenv("TAILOR_EXPERIMENTAL");
    n = plan_survivors(ctx, "h200", "attention_prefill", pf512, TAILOR_DTYPE_BF16);
    CHECK(n > 0 && n <= 64);
    n = plan_survivors(ctx, "h200", "attention_prefill", pf256, TAILOR_DTYPE_BF16);
    CHECK(n > 0 && n <= 96);
    /* decode has three templates (v1, wide, transposed; the transposed one with and without its
     * early stages, EARLY, and at every cache length: dc256's 1,024-slot ring has 32 of them; v1
     * with and without its flat merge, FLAT: 12 more at each): a few more survivors */
    n = plan_survivors(ctx, "h200", "attention_decode", dc512, TAILOR_DTYPE_BF16);
    CHECK(n > 0 && n <= 80);
    n = plan_survivors(ctx, "h200", "attention_decode", dc256, TAILOR_DTYPE_BF16);
    CHECK(n > 0 && n <= 96);

    /* vLLM's Triton kernel on Turing: a 64-row Q tile and 32-key tiles at head_dim 512 (98,304 B
     * for Q and one K tile alone). In this template: WM=4 (BM 64), BN=32, Q in shared memory. */
    const tailor_device_info *t4 = tailor_device_profile_find("t4");
    tailor_space *space = NULL;
    CHECK_OK(ctx, tailor_space_load(ctx, "attention_prefill", &space));
    tailor_config cfg;
    CHECK_OK(ctx, tailor_config_parse_json(ctx, "{\"ASYNC\":0,\"BN\":32,\"MMA_K\":8,\"Q_REGS\":0,"
                                                "\"STAGES\":1,\"WM\":4,\"WN\":2}", &cfg));
    tailor_shape s;
    CHECK_OK(ctx, tailor_shape_parse(ctx, pf512, &s));
    tailor_launch launch;
    if (space && t4 &&
        tailor_space_evaluate(ctx, space, &cfg, &s, TAILOR_DTYPE_F16, t4, 0, &launch) == TAILOR_OK) {
        char reason[512] = "";
        tailor_verdict v = tailor_budget_check(t4, "attention_prefill", space, &cfg,
                                               TAILOR_DTYPE_F16, &launch, reason, sizeof reason);
        CHECKF(v == TAILOR_REFUSED_SMEM, "the 64x32 tile at head_dim 512 is refused on a T4 "
               "(verdict %s: %s)", tailor_verdict_name(v), reason);
        /* sMax 4*2*64 + 2 * (sQ 64*520 + sK,sV 2*32*520 + sP 64*40) */
        CHECKF(launch.smem_dynamic == 512 + 2 * (64 * 520 + 2 * 32 * 520 + 64 * 40),
               "shared memory formula (%lld)", launch.smem_dynamic);
        /* the refusal says why, with the numbers: what the block needs and what the card has */
        CHECKF(strstr(reason, "needs 138,752 B shared memory per block") &&
                   strstr(reason, "allows 65,536 B"),
               "the refusal names both sizes: %s", reason);
        printf("refused on t4: %s\n", reason);
    } else {
        CHECKF(0, "evaluate the vLLM-like configuration: %s", tailor_ctx_message(ctx));
    }
    tailor_space_destroy(space);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    printf("seed %u\n", SEED);
    const tailor_dtype dts[2] = {TAILOR_DTYPE_F16, TAILOR_DTYPE_BF16};
    for (int i = 0; i < 2; i++) {
        tailor_dtype dt = dts[i];
        /* full causal, GQA 2 */
        check_prefill_naive(ctx, "q_len=33,kv_len=33,head_dim=256,heads=4,kv_heads=2", dt);
        /* chunked prefill after history, sliding window shorter than the sequence, MQA */
        check_prefill_naive(ctx, "q_len=20,kv_len=70,head_dim=512,heads=4,kv_heads=1,window=17", dt);
        /* window longer than the sequence (= full causal) */
        check_prefill_naive(ctx, "q_len=9,kv_len=40,head_dim=256,heads=2,kv_heads=2,window=500", dt);
        check_prefill_single_key(ctx, "q_len=12,kv_len=30,head_dim=256,heads=8,kv_heads=2,window=1",
                                 dt);
        check_prefill_single_key(ctx, "q_len=5,kv_len=5,head_dim=512,heads=4,kv_heads=4", dt);
        /* ring far past the window (wrapped ~6000 times), GQA 4, several sequences */
        check_decode(ctx, "kv_len=100000,head_dim=256,heads=8,kv_heads=2,window=16,batch=3", dt);
        /* window longer than some sequences (partly filled ring), MQA */
        check_decode(ctx, "kv_len=50,head_dim=512,heads=4,kv_heads=1,window=64,batch=4", dt);
        /* full layer, linear cache */
        check_decode(ctx, "kv_len=77,head_dim=512,heads=8,kv_heads=4,window=0,batch=3", dt);
        /* window 1: one visible key everywhere */
        check_decode(ctx, "kv_len=1000,head_dim=256,heads=4,kv_heads=2,window=1,batch=2", dt);
        /* q prepared in the kernel (prep=1): E2B's sliding and full layers, GQA, a far position */
        check_decode(ctx, "kv_len=130,head_dim=256,heads=8,kv_heads=1,window=512,batch=2,prep=1", dt);
        check_decode(ctx, "kv_len=300,head_dim=512,heads=8,kv_heads=2,window=0,batch=3,prep=1", dt);
        check_decode(ctx, "kv_len=70000,head_dim=256,heads=4,kv_heads=1,window=64,batch=1,prep=1",
                     dt);
    }
    check_prefill_counts(ctx);
    check_budgets(ctx);
    tailor_ctx_destroy(ctx);
    return test_finish("test_attention");
}
