/* test_small_ops.c — the C references of Gemma 4's small ops (residual_norm, qk_norm_rope,
 * gelu_gate, gather_cols, embed, softcap_argmax) against hand-computed values and naive
 * recomputations, and their describe() refusals. CPU only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "op.h"
#include "testlib.h"

#define SEED 20240611ull

/* One op instance on the host (testlib's), its op and dtype; filled by the op (or the test). */
typedef struct host_inst {
    test_op_inst t;
    const tailor_op *op;
    tailor_dtype dtype;
} host_inst;

static int inst_make(tailor_ctx *ctx, host_inst *h, const char *op, const char *shape,
                     tailor_dtype dtype)
{
    memset(h, 0, sizeof *h);
    h->op = tailor_op_find(op);
    h->dtype = dtype;
    CHECKF(h->op != NULL, "op %s is registered", op);
    if (!h->op)
        return -1;
    if (!test_op_inst_make(ctx, h->op, shape, dtype, &h->t)) {
        CHECKF(0, "%s %s: %s", op, shape, tailor_ctx_message(ctx));
        return -1;
    }
    h->op->fill(&h->t.shape, dtype, &h->t.bufs, h->t.host, SEED);
    return 0;
}

static int inst_buf(const host_inst *h, const char *name)
{
    int i = test_op_inst_buffer(&h->t, name);
    if (i >= 0)
        return i;
    CHECKF(0, "op %s has a buffer %s", h->op->name, name);
    return 0;
}

static float in_at(const host_inst *h, const char *name, size_t i)
{
    int b = inst_buf(h, name);
    return tailor_dtype_load(h->t.bufs.b[b].dtype, h->t.host[b], i);
}

static void set_at(host_inst *h, const char *name, size_t i, float v)
{
    int b = inst_buf(h, name);
    tailor_dtype_store(h->t.bufs.b[b].dtype, h->t.host[b], i, v);
}

static float *ref_of(host_inst *h, const char *name) { return h->t.ref[inst_buf(h, name)]; }

static int inst_reference(tailor_ctx *ctx, host_inst *h)
{
    tailor_status st =
        h->op->reference(ctx, &h->t.shape, h->dtype, &h->t.bufs, h->t.host, h->t.ref);
    CHECK_OK(ctx, st);
    return st == TAILOR_OK ? 0 : -1;
}

static void inst_free(host_inst *h) { test_op_inst_free(&h->t); }

static float round_to(tailor_dtype dt, float v)
{
    uint16_t s;
    tailor_dtype_store(dt, &s, 0, v);
    return tailor_dtype_load(dt, &s, 0);
}

static int close_to(double got, double want, double tol) { return fabs(got - want) <= tol; }

/* Expects describe() to refuse the shape with a sentence naming the op. */
static void check_refused(tailor_ctx *ctx, const char *op_name, const char *shape_text,
                          tailor_dtype dtype)
{
    const tailor_op *op = tailor_op_find(op_name);
    tailor_shape shape;
    tailor_op_buffers b;
    CHECK(op != NULL);
    if (!op || tailor_shape_parse(ctx, shape_text, &shape) ||
        tailor_op_complete_shape(ctx, op, &shape)) {
        CHECKF(0, "%s: shape %s parses", op_name, shape_text);
        return;
    }
    tailor_status st = op->describe(ctx, &shape, dtype, &b);
    CHECKF(st == TAILOR_ERR_MISUSE, "%s %s %s refused", op_name, shape_text, tailor_dtype_name(dtype));
    CHECKF(strstr(tailor_ctx_message(ctx), op_name) != NULL, "message names the op: %s",
           tailor_ctx_message(ctx));
}

/* ---- residual_norm ---- */

static double naive_inv_rms(const double *v, size_t n)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += v[i] * v[i];
    return 1.0 / sqrt(ss / (double)n + 1e-6);
}

static void test_residual_norm_hand(tailor_ctx *ctx)
{
    /* a = [3, 4]: mean square 12.5; w_post = [1, 2]; x = [1, -1]; scalar 2; w_next = [1, 1] */
    host_inst h;
    if (inst_make(ctx, &h, "residual_norm", "rows=1,cols=2,mode=1", TAILOR_DTYPE_BF16))
        return;
    const float a[2] = {3, 4}, x[2] = {1, -1}, wp[2] = {1, 2};
    for (size_t i = 0; i < 2; i++) {
        set_at(&h, "a", i, a[i]);
        set_at(&h, "x", i, x[i]);
        set_at(&h, "w_post", i, wp[i]);
        set_at(&h, "w_next", i, 1.0f);
    }
    set_at(&h, "scalar", 0, 2.0f);
    if (inst_reference(ctx, &h) == 0) {
        double r = 1.0 / sqrt(12.5 + 1e-6);
        double x0 = 2 * (1 + 3 * r), x1 = 2 * (-1 + 8 * r); /* 3.69706, 2.52548 */
        CHECKF(close_to(ref_of(&h, "x")[0], x0, 1e-5), "x0 %g vs %g", (double)ref_of(&h, "x")[0], x0);
        CHECKF(close_to(ref_of(&h, "x")[1], x1, 1e-5), "x1 %g vs %g", (double)ref_of(&h, "x")[1], x1);
        double ry = 1.0 / sqrt((x0 * x0 + x1 * x1) / 2 + 1e-6);
        CHECK(close_to(ref_of(&h, "y")[0], x0 * ry, 1e-5));
        CHECK(close_to(ref_of(&h, "y")[1], x1 * ry, 1e-5));
    }
    inst_free(&h);
}

static void test_residual_norm_modes(tailor_ctx *ctx)
{
    for (int mode = 0; mode <= 3; mode++) {
        char shape[64];
        snprintf(shape, sizeof shape, "rows=3,cols=40,mode=%d", mode);
        host_inst h;
        if (inst_make(ctx, &h, "residual_norm", shape, TAILOR_DTYPE_F16))
            continue;
        CHECK(h.t.bufs.b[inst_buf(&h, "x")].dtype == TAILOR_DTYPE_F32);
        CHECK(h.t.bufs.b[inst_buf(&h, "x")].role == TAILOR_BUF_INOUT);
        CHECK(h.t.bufs.b[inst_buf(&h, "y")].role == TAILOR_BUF_OUT);
        CHECK(in_at(&h, "a", 0) != 0.0f && in_at(&h, "scalar", 0) != 0.0f);
        if (inst_reference(ctx, &h)) {
            inst_free(&h);
            continue;
        }
        float s = in_at(&h, "scalar", 0);
        double worst = 0;
        for (size_t r = 0; r < 3; r++) {
            double av[40], xv[40];
            for (size_t c = 0; c < 40; c++) {
                av[c] = in_at(&h, "a", r * 40 + c);
                xv[c] = in_at(&h, "x", r * 40 + c);
            }
            if (mode != 3) {
                double ia = naive_inv_rms(av, 40);
                for (size_t c = 0; c < 40; c++) {
                    xv[c] += av[c] * ia * in_at(&h, "w_post", c);
                    if (mode == 1)
                        xv[c] *= s;
                }
            }
            double ix = naive_inv_rms(xv, 40);
            for (size_t c = 0; c < 40; c++) {
                double y = mode == 2 ? xv[c] : xv[c] * ix * in_at(&h, "w_next", c);
                double ex = fabs(ref_of(&h, "x")[r * 40 + c] - xv[c]) / (1 + fabs(xv[c]));
                double ey = fabs(ref_of(&h, "y")[r * 40 + c] - y) / (1 + fabs(y));
                worst = fmax(worst, fmax(ex, ey));
            }
        }
        CHECKF(worst < 1e-5, "mode %d: worst relative difference %g", mode, worst);
        if (mode == 3) /* x untouched */
            CHECK(ref_of(&h, "x")[5] == in_at(&h, "x", 5));
        inst_free(&h);
    }
    check_refused(ctx, "residual_norm", "rows=0,cols=8", TAILOR_DTYPE_BF16);
    check_refused(ctx, "residual_norm", "rows=1,cols=8,mode=4", TAILOR_DTYPE_BF16);
    check_refused(ctx, "residual_norm", "rows=1,cols=8", TAILOR_DTYPE_F32);
}

/* ---- qk_norm_rope ---- */

static void test_qk_norm_rope_hand(tailor_ctx *ctx)
{
    /* one head of 4, weightless, default RoPE at position 1: inv_freq = [1, 1e4^-0.5 = 0.01] */
    host_inst h;
    if (inst_make(ctx, &h, "qk_norm_rope", "tokens=2,heads=1,head_dim=4,weight=0,rope=1",
                  TAILOR_DTYPE_BF16))
        return;
    int f = inst_buf(&h, "inv_freq");
    const float *inv_freq = h.t.host[f];
    CHECKF(inv_freq[0] == 1.0f && close_to(inv_freq[1], 0.01, 1e-8), "inv_freq %g %g",
           (double)inv_freq[0], (double)inv_freq[1]);
    int32_t *pos = h.t.host[inst_buf(&h, "pos")];
    pos[0] = 1;
    pos[1] = 0;
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < 4; i++)
            set_at(&h, "x", t * 4 + i, (float)(i + 1));
    if (inst_reference(ctx, &h) == 0) {
        const float *o = ref_of(&h, "out");
        double n = 1.0 / sqrt(7.5 + 1e-6);
        double a0 = 1 * n, b0 = 3 * n, a1 = 2 * n, b1 = 4 * n;
        CHECK(close_to(o[0], a0 * cos(1.0) - b0 * sin(1.0), 1e-6));
        CHECK(close_to(o[2], b0 * cos(1.0) + a0 * sin(1.0), 1e-6));
        CHECK(close_to(o[1], a1 * cos(0.01) - b1 * sin(0.01), 1e-6));
        CHECK(close_to(o[3], b1 * cos(0.01) + a1 * sin(0.01), 1e-6));
        for (size_t i = 0; i < 4; i++) /* position 0: the norm alone */
            CHECK(close_to(o[4 + i], (double)(i + 1) * n, 1e-6));
    }
    inst_free(&h);
}

static void test_qk_norm_rope_proportional(tailor_ctx *ctx)
{
    host_inst h;
    if (inst_make(ctx, &h, "qk_norm_rope", "tokens=3,heads=2,head_dim=512,rope=2",
                  TAILOR_DTYPE_BF16))
        return;
    const float *inv_freq = h.t.host[inst_buf(&h, "inv_freq")];
    int nonzero = 0;
    for (int j = 0; j < 256; j++)
        nonzero += inv_freq[j] != 0.0f;
    CHECKF(nonzero == 64 && inv_freq[63] != 0.0f, "proportional: %d rotating pairs", nonzero);
    /* exponent over the full 512: f_1 = 1e6^(-2/512) */
    CHECK(close_to(inv_freq[1], pow(1e6, -2.0 / 512), 1e-7));
    if (inst_reference(ctx, &h) == 0) {
        const int32_t *pos = h.t.host[inst_buf(&h, "pos")];
        double worst = 0;
        for (size_t r = 0; r < 6; r++) {
            double v[512];
            for (size_t c = 0; c < 512; c++)
                v[c] = in_at(&h, "x", r * 512 + c);
            double inv = naive_inv_rms(v, 512);
            for (size_t c = 0; c < 512; c++)
                v[c] *= inv * in_at(&h, "w", c);
            for (size_t j = 0; j < 64; j++) {
                double ang = (double)((float)pos[r / 2] * inv_freq[j]);
                double a = v[j], b = v[j + 256];
                v[j] = a * cos(ang) - b * sin(ang);
                v[j + 256] = b * cos(ang) + a * sin(ang);
            }
            for (size_t c = 0; c < 512; c++)
                worst = fmax(worst, fabs(ref_of(&h, "out")[r * 512 + c] - v[c]));
            /* pairs 64..255 are untouched by the rotation */
            CHECK(ref_of(&h, "out")[r * 512 + 100] == (float)v[100] ||
                  close_to(ref_of(&h, "out")[r * 512 + 100], v[100], 1e-6));
        }
        CHECKF(worst < 1e-4, "proportional RoPE: worst difference %g", worst);
    }
    inst_free(&h);
    /* in place: one INOUT buffer, no out */
    if (inst_make(ctx, &h, "qk_norm_rope", "tokens=1,heads=8,head_dim=256,inplace=1",
                  TAILOR_DTYPE_F16) == 0) {
        CHECK(h.t.bufs.count == 4 && h.t.bufs.b[0].role == TAILOR_BUF_INOUT);
        CHECK(inst_reference(ctx, &h) == 0 && isfinite(h.t.ref[0][7]) && h.t.ref[0][7] != 0.0f);
        inst_free(&h);
    }
    check_refused(ctx, "qk_norm_rope", "tokens=1,heads=1,head_dim=7", TAILOR_DTYPE_BF16);
    check_refused(ctx, "qk_norm_rope", "tokens=1,heads=1,head_dim=256,rope=3", TAILOR_DTYPE_BF16);
    check_refused(ctx, "qk_norm_rope", "tokens=0,heads=1,head_dim=256", TAILOR_DTYPE_BF16);
}

/* ---- gelu_gate ---- */

/* gemma4_kv_store with q folded in (q_heads): its q_out against qk_norm_rope's reference of the
 * same q, weight, positions and frequencies (two references of one computation, within q_out's
 * tolerance), both RoPE kinds; its k/v outputs as without q; q with lin refused. */
static void check_kv_store_q(tailor_ctx *ctx, int head_dim, int rope, tailor_dtype dt)
{
    char ks[128], qs[128];
    snprintf(ks, sizeof ks, "tokens=1,kv_heads=1,head_dim=%d,slots=64,q_heads=8", head_dim);
    snprintf(qs, sizeof qs, "tokens=1,heads=8,head_dim=%d,rope=%d", head_dim, rope);
    host_inst k, q, plain;
    if (inst_make(ctx, &k, "gemma4_kv_store", ks, dt))
        return;
    if (inst_make(ctx, &q, "qk_norm_rope", qs, dt)) {
        inst_free(&k);
        return;
    }
    /* qk_norm_rope's inputs into kv_store's: q, its weight, the position, the frequencies */
    size_t n = (size_t)8 * (size_t)head_dim;
    for (size_t i = 0; i < n; i++)
        set_at(&k, "q", i, in_at(&q, "x", i));
    for (size_t i = 0; i < (size_t)head_dim; i++)
        set_at(&k, "wq", i, in_at(&q, "w", i));
    memcpy(k.t.host[inst_buf(&k, "inv_freq")], q.t.host[inst_buf(&q, "inv_freq")],
           (size_t)head_dim / 2 * sizeof(float));
    ((int32_t *)k.t.host[inst_buf(&k, "pos")])[0] = ((int32_t *)q.t.host[inst_buf(&q, "pos")])[0];
    if (inst_reference(ctx, &k) == 0 && inst_reference(ctx, &q) == 0) {
        const tailor_buffer_spec *spec = &k.t.bufs.b[inst_buf(&k, "q_out")];
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, test_tol_ratio(spec, ref_of(&k, "q_out")[i], ref_of(&q, "out")[i]));
        CHECKF(worst <= 1.0, "kv_store's q (head_dim %d, rope %d) off qk_norm_rope's by %.3f of "
               "its tolerance", head_dim, rope, worst);
        printf("gemma4_kv_store q_heads=8 head_dim=%d rope=%d %s: worst |diff|/tol %.4f\n",
               head_dim, rope, tailor_dtype_name(dt), worst);
        /* the k/v side as without q */
        snprintf(ks, sizeof ks, "tokens=1,kv_heads=1,head_dim=%d,slots=64", head_dim);
        if (inst_make(ctx, &plain, "gemma4_kv_store", ks, dt) == 0) {
            const char *same[] = {"k", "v", "w", "inv_freq", "pos", "k_cache", "v_cache",
                                  "positions"};
            for (int b = 0; b < 8; b++) {
                int x = inst_buf(&k, same[b]), y = inst_buf(&plain, same[b]);
                memcpy(plain.t.host[y], k.t.host[x],
                       k.t.bufs.b[x].count * tailor_dtype_size(k.t.bufs.b[x].dtype));
            }
            if (inst_reference(ctx, &plain) == 0)
                for (int b = 5; b < 8; b++) {
                    int x = inst_buf(&k, same[b]), y = inst_buf(&plain, same[b]);
                    CHECKF(memcmp(k.t.ref[x], plain.t.ref[y],
                                  k.t.bufs.b[x].count * sizeof(float)) == 0,
                           "kv_store's %s changes when q is folded in", same[b]);
                }
            inst_free(&plain);
        }
    }
    inst_free(&q);
    inst_free(&k);
}

static void test_kv_store_q(tailor_ctx *ctx)
{
    check_kv_store_q(ctx, 256, 1, TAILOR_DTYPE_BF16);
    check_kv_store_q(ctx, 512, 2, TAILOR_DTYPE_BF16);
    check_kv_store_q(ctx, 256, 1, TAILOR_DTYPE_F16);
    check_refused(ctx, "gemma4_kv_store", "tokens=4,kv_heads=1,head_dim=256,slots=64,lin=1,q_heads=8",
                  TAILOR_DTYPE_BF16);
}

static void test_gelu_gate(tailor_ctx *ctx)
{
    host_inst h;
    if (inst_make(ctx, &h, "gelu_gate", "rows=2,inter=4,u_ld=8", TAILOR_DTYPE_BF16))
        return;
    CHECK(h.t.bufs.b[inst_buf(&h, "u")].count == 12); /* (rows-1)*u_ld + inter */
    const float g[4] = {1, 0, -3, 2};
    for (size_t i = 0; i < 4; i++) {
        set_at(&h, "g", i, g[i]);
        set_at(&h, "u", i, 2.0f);
        set_at(&h, "g", 4 + i, g[i]);
        set_at(&h, "u", 8 + i, -1.0f); /* row 1 of u starts at u_ld */
        set_at(&h, "u", 4 + i, 1000.0f); /* the gap between rows is never read */
    }
    if (inst_reference(ctx, &h) == 0) {
        const float *o = ref_of(&h, "h");
        /* gelu_tanh(1) = 0.841192 -> bf16 0.83984375; times 2 exactly */
        CHECKF(o[0] == 1.6796875f, "gelu(1)*2 = %.8g", (double)o[0]);
        CHECK(o[1] == 0.0f);
        double gm3 = 0.5 * -3 * (1 + tanh(0.7978845608028654 * (-3 + 0.044715 * -27)));
        CHECK(close_to(o[2], 2 * round_to(TAILOR_DTYPE_BF16, (float)gm3), 1e-7));
        CHECK(o[4] == -0.83984375f);
        CHECK(close_to(o[7], -round_to(TAILOR_DTYPE_BF16, (float)(0.5 * 2 * (1 + tanh(0.7978845608028654 * (2 + 0.044715 * 8))))), 1e-7));
    }
    inst_free(&h);
    /* a fused gate|up output: g and u interleaved by rows of 2*inter */
    if (inst_make(ctx, &h, "gelu_gate", "rows=3,inter=4,g_ld=8,u_ld=8", TAILOR_DTYPE_F16) == 0) {
        CHECK(h.t.bufs.b[inst_buf(&h, "g")].count == 20);
        set_at(&h, "g", 8 + 1, 1.0f);  /* row 1, column 1 */
        set_at(&h, "u", 8 + 1, -4.0f);
        if (inst_reference(ctx, &h) == 0) /* fp16(0.841192) = 0.84130859375 */
            CHECKF(ref_of(&h, "h")[4 + 1] == -4 * 0.84130859375f, "got %.9g",
                   (double)ref_of(&h, "h")[5]);
        inst_free(&h);
    }
    check_refused(ctx, "gelu_gate", "rows=1,inter=8,u_ld=4", TAILOR_DTYPE_BF16);
    check_refused(ctx, "gelu_gate", "rows=1,inter=8,g_ld=6", TAILOR_DTYPE_BF16);
    check_refused(ctx, "gelu_gate", "rows=0,inter=8", TAILOR_DTYPE_F16);
}

/* ---- gather_cols ---- */

/* The fill's idx is a permutation (not the identity), the reference copies a[r, idx[j]] exactly,
 * an index past the row is refused, and so are bad shapes. */
static void test_gather_cols(tailor_ctx *ctx)
{
    host_inst h;
    if (inst_make(ctx, &h, "gather_cols", "rows=3,cols=40", TAILOR_DTYPE_BF16))
        return;
    const int32_t *idx = h.t.host[inst_buf(&h, "idx")];
    int seen[40] = {0}, moved = 0, valid = 1;
    for (int j = 0; j < 40; j++) {
        valid &= idx[j] >= 0 && idx[j] < 40;
        if (valid) {
            seen[idx[j]]++;
            moved += idx[j] != j;
        }
    }
    for (int j = 0; j < 40 && valid; j++)
        valid &= seen[j] == 1;
    CHECKF(valid && moved > 0, "gather_cols' fill: idx a permutation that moves columns (%d moved)",
           moved);
    if (valid && inst_reference(ctx, &h) == 0) {
        const float *o = ref_of(&h, "out");
        int bad = 0;
        for (int r = 0; r < 3; r++)
            for (int j = 0; j < 40; j++)
                bad += o[r * 40 + j] != in_at(&h, "a", (size_t)(r * 40 + idx[j]));
        CHECKF(bad == 0, "gather_cols' reference: %d elements are not a[r, idx[j]]", bad);
        ((int32_t *)h.t.host[inst_buf(&h, "idx")])[7] = 40;
        CHECKF(h.op->reference(ctx, &h.t.shape, h.dtype, &h.t.bufs, h.t.host, h.t.ref) ==
                   TAILOR_ERR_MISUSE && strstr(tailor_ctx_message(ctx), "idx[7]"),
               "gather_cols' reference refuses idx[7] = 40: %s", tailor_ctx_message(ctx));
    }
    inst_free(&h);
    check_refused(ctx, "gather_cols", "rows=0,cols=8", TAILOR_DTYPE_BF16);
    check_refused(ctx, "gather_cols", "rows=70000,cols=8", TAILOR_DTYPE_F16);
    check_refused(ctx, "gather_cols", "rows=1,cols=0", TAILOR_DTYPE_F16);
}

/* ---- embed ---- */

static void test_embed(tailor_ctx *ctx)
{
    static const struct {
        const char *shape;
        tailor_dtype dtype;
        float scale;
    } cases[] = {
        {"tokens=5,cols=1536,vocab=50", TAILOR_DTYPE_BF16, 39.25f},    /* sqrt(1536) = 39.19 */
        {"tokens=5,cols=1536,vocab=50", TAILOR_DTYPE_F16, 39.1875f},   /* in fp16 */
        {"tokens=5,cols=2560,vocab=50,out_f32=1", TAILOR_DTYPE_BF16, 50.5f},
        {"tokens=5,cols=5376,vocab=50", TAILOR_DTYPE_BF16, 73.5f},
        {"tokens=5,cols=512,vocab=50,scale_dim=256", TAILOR_DTYPE_BF16, 16.0f}, /* PLE */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        host_inst h;
        if (inst_make(ctx, &h, "embed", cases[k].shape, cases[k].dtype))
            continue;
        size_t cols = (size_t)tailor_shape_get(&h.t.shape, "cols", 0);
        const int32_t *ids = h.t.host[inst_buf(&h, "ids")];
        CHECK(ids[1] == 49 && ids[2] == 57 && ids[3] == -5); /* last row, out of range */
        if (inst_reference(ctx, &h) == 0) {
            int bad = 0;
            for (size_t t = 0; t < 5; t++) {
                size_t id = ids[t] >= 0 && ids[t] < 50 ? (size_t)ids[t] : 0;
                for (size_t c = 0; c < cols; c++) {
                    float want = round_to(cases[k].dtype,
                                          in_at(&h, "table", id * cols + c) * cases[k].scale);
                    bad += ref_of(&h, "out")[t * cols + c] != want;
                }
            }
            CHECKF(bad == 0, "embed %s: %d values differ from table * %g", cases[k].shape, bad,
                   (double)cases[k].scale);
        }
        inst_free(&h);
    }
    check_refused(ctx, "embed", "tokens=0,cols=8", TAILOR_DTYPE_BF16);
    check_refused(ctx, "embed", "tokens=1,cols=8,out_f32=2", TAILOR_DTYPE_BF16);
}

/* ---- softcap_argmax ---- */

static void test_softcap_argmax(tailor_ctx *ctx)
{
    host_inst h;
    if (inst_make(ctx, &h, "softcap_argmax", "rows=4,vocab=16,in_f32=1", TAILOR_DTYPE_BF16))
        return;
    for (size_t i = 0; i < 64; i++)
        set_at(&h, "logits", i, -1.0f);
    set_at(&h, "logits", 3, 30.0f); /* row 0: a single winner */
    set_at(&h, "logits", 16 + 9, 5.0f); /* row 1: a tie, the lowest index wins */
    set_at(&h, "logits", 16 + 4, 5.0f);
    set_at(&h, "logits", 32 + 0, NAN); /* row 2: NaN never wins */
    set_at(&h, "logits", 32 + 7, 2.0f);
    for (size_t i = 48; i < 64; i++) /* row 3: nothing but NaN */
        set_at(&h, "logits", i, NAN);
    if (inst_reference(ctx, &h) == 0) {
        const float *ids = ref_of(&h, "ids"), *cap = ref_of(&h, "capped");
        CHECK(ids[0] == 3.0f);
        CHECK(ids[1] == 4.0f);
        CHECK(ids[2] == 7.0f);
        CHECK(ids[3] == -1.0f);
        CHECK(close_to(cap[3], 30 * tanh(1.0), 1e-5));
        CHECK(close_to(cap[0], 30 * tanh(-1.0 / 30), 1e-6));
    }
    inst_free(&h);

    /* the filled data: a naive argmax over the whole vocabulary, in a 16-bit type (ties) */
    if (inst_make(ctx, &h, "softcap_argmax", "rows=2,vocab=262144,write=0", TAILOR_DTYPE_BF16) == 0) {
        CHECK(h.t.bufs.b[inst_buf(&h, "capped")].role == TAILOR_BUF_IN);
        if (inst_reference(ctx, &h) == 0) {
            for (size_t r = 0; r < 2; r++) {
                float best = -INFINITY;
                size_t bi = 0, ties = 0;
                for (size_t c = 0; c < 262144; c++) {
                    float v = in_at(&h, "logits", r * 262144 + c);
                    if (v > best) {
                        best = v;
                        bi = c;
                        ties = 0;
                    } else if (v == best) {
                        ties++;
                    }
                }
                CHECKF(ref_of(&h, "ids")[r] == (float)bi, "row %zu: %g vs %zu", r,
                       (double)ref_of(&h, "ids")[r], bi);
                if (r == 0)
                    CHECKF(ties > 0, "row 0 of the fill has a tied maximum (%zu ties)", ties);
                else
                    CHECKF(best == 40.0f && ties == 0, "row 1 has one clear winner");
            }
        }
        inst_free(&h);
    }
    check_refused(ctx, "softcap_argmax", "rows=0", TAILOR_DTYPE_BF16);
    check_refused(ctx, "softcap_argmax", "rows=1,write=2", TAILOR_DTYPE_BF16);
    check_refused(ctx, "softcap_argmax", "rows=1,feed=2", TAILOR_DTYPE_BF16);
}

/* feed=1: the last row's argmax and position + 1 for the next step; a last row of NaN feeds
 * token 0 (ids keeps -1 for the caller to report) */
static void test_softcap_argmax_feed(tailor_ctx *ctx)
{
    for (int nan_last = 0; nan_last < 2; nan_last++) {
        host_inst h;
        if (inst_make(ctx, &h, "softcap_argmax", "rows=3,vocab=16,in_f32=1,feed=1",
                      TAILOR_DTYPE_BF16))
            return;
        CHECK(h.t.bufs.count == 6);
        for (size_t i = 0; i < 48; i++)
            set_at(&h, "logits", i, nan_last && i >= 32 ? NAN : -1.0f);
        set_at(&h, "logits", 2, 3.0f);       /* row 0: 2 */
        set_at(&h, "logits", 16 + 11, 3.0f); /* row 1: 11 */
        if (!nan_last)
            set_at(&h, "logits", 32 + 7, 3.0f); /* row 2: 7 */
        const float pos[3] = {5, 9, 41};
        for (size_t r = 0; r < 3; r++)
            set_at(&h, "pos", r, pos[r]);
        if (inst_reference(ctx, &h) == 0) {
            CHECK(ref_of(&h, "ids")[1] == 11.0f);
            CHECKF(ref_of(&h, "ids")[2] == (nan_last ? -1.0f : 7.0f), "last row's id %g",
                   (double)ref_of(&h, "ids")[2]);
            CHECKF(ref_of(&h, "next_tok")[0] == (nan_last ? 0.0f : 7.0f),
                   "next_tok %g (the last row's argmax, 0 for NaN)",
                   (double)ref_of(&h, "next_tok")[0]);
            CHECKF(ref_of(&h, "next_pos")[0] == 42.0f, "next_pos %g: the last row's position + 1",
                   (double)ref_of(&h, "next_pos")[0]);
        }
        inst_free(&h);
    }
}

/* ---- gemma4_ple ---- */

/* gather=1 (the table on the device, rows picked by id) computes what gather=0 computes from
 * the same rows staged per token. */
static void test_gemma4_ple_gather(tailor_ctx *ctx)
{
    const char *shape = "tokens=4,layers=3,dim=8,hidden=16";
    char gshape[96];
    snprintf(gshape, sizeof gshape, "%s,gather=1", shape);
    host_inst a, b;
    if (inst_make(ctx, &a, "gemma4_ple", gshape, TAILOR_DTYPE_BF16))
        return;
    if (inst_make(ctx, &b, "gemma4_ple", shape, TAILOR_DTYPE_BF16)) {
        inst_free(&a);
        return;
    }
    const size_t T = 4, LP = 3 * 8, rows = a.t.bufs.b[inst_buf(&a, "e")].count / LP;
    CHECKF(rows > T, "the test table holds more rows (%zu) than tokens", rows);
    int moved = 0;
    for (size_t t = 0; t < T; t++) {
        size_t id = (size_t)in_at(&a, "ids", t);
        CHECKF(id < rows, "token %zu's row %zu is inside the table", t, id);
        for (size_t u = 0; u < t; u++) /* else a kernel reading one row for all would pass */
            CHECKF((size_t)in_at(&a, "ids", u) != id, "tokens %zu and %zu read the same row", u, t);
        moved |= id != t;
        for (size_t j = 0; j < LP && id < rows; j++) {
            set_at(&b, "e", t * LP + j, in_at(&a, "e", id * LP + j));
            set_at(&b, "c", t * LP + j, in_at(&a, "c", t * LP + j));
        }
    }
    for (size_t j = 0; j < 8; j++)
        set_at(&b, "w", j, in_at(&a, "w", j));
    CHECKF(moved, "the fill's ids are not the tokens' own indices");
    if (inst_reference(ctx, &a) == 0 && inst_reference(ctx, &b) == 0) {
        int bad = 0;
        for (size_t i = 0; i < T * LP; i++)
            bad += ref_of(&a, "out")[i] != ref_of(&b, "out")[i];
        CHECKF(bad == 0, "gemma4_ple gather=1: %d values differ from the staged rows'", bad);
    }
    inst_free(&a);
    inst_free(&b);
    check_refused(ctx, "gemma4_ple", "tokens=1,layers=3,dim=8,hidden=16,gather=2",
                  TAILOR_DTYPE_BF16);
}

/* ---- topk ---- */

/* whether column a ranks before column b of row l: larger value, lower column among equals */
static int topk_ranks_before(const float *l, size_t a, size_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void test_topk(tailor_ctx *ctx)
{
    host_inst h;
    if (inst_make(ctx, &h, "topk", "rows=2,n=16,k=4", TAILOR_DTYPE_BF16))
        return;
    const float row0[16] = {1, 5, NAN, 5, -2, 7, 0, 5, 3, NAN, -0.0f, 2, 5, 1, 0, 4};
    for (size_t i = 0; i < 16; i++) {
        set_at(&h, "x", i, row0[i]);
        /* row 1: two values, equal zeros of both signs (the lower column first), then -1 */
        set_at(&h, "x", 16 + i, i == 13 ? -0.0f : i == 6 ? 0.0f : NAN);
    }
    if (inst_reference(ctx, &h) == 0) {
        const float *v = ref_of(&h, "vals"), *id = ref_of(&h, "ids");
        CHECKF(id[0] == 5 && id[1] == 1 && id[2] == 3 && id[3] == 7,
               "row 0: 7 first, then the tied 5s by column: got %g %g %g %g", (double)id[0],
               (double)id[1], (double)id[2], (double)id[3]);
        CHECK(v[0] == 7 && v[3] == 5);
        CHECKF(id[4] == 6 && id[5] == 13 && id[6] == -1 && id[7] == -1 && v[6] == 0,
               "row 1: its two values, then id -1 (NaN never): %g %g %g %g", (double)id[4],
               (double)id[5], (double)id[6], (double)id[7]);
    }
    inst_free(&h);

    /* the fill at the full vocabulary: the reference's list is the row's best in the order, and
     * the fill makes the order's rules matter (ties across the k-th place, NaN present) */
    enum { V = 262144, K = 64 };
    if (inst_make(ctx, &h, "topk", "rows=3,n=262144,k=64", TAILOR_DTYPE_BF16) == 0) {
        if (inst_reference(ctx, &h) == 0) {
            for (size_t r = 0; r < 3; r++) {
                const float *l = (const float *)h.t.host[inst_buf(&h, "x")] + r * V;
                const float *id = ref_of(&h, "ids") + r * K, *v = ref_of(&h, "vals") + r * K;
                static unsigned char in_list[V];
                memset(in_list, 0, sizeof in_list);
                int bad = 0, nans = 0, tie_across = 0, neg_zero = 0, pos_zero = 0;
                for (size_t j = 0; j < K; j++) {
                    size_t c = (size_t)id[j];
                    bad += id[j] < 0 || c >= V || isnan(l[c]) || v[j] != l[c] || in_list[c];
                    if (c < V) {
                        in_list[c] = 1;
                        neg_zero += l[c] == 0 && signbit(l[c]);
                        pos_zero += l[c] == 0 && !signbit(l[c]);
                    }
                    bad += j > 0 && !topk_ranks_before(l, (size_t)id[j - 1], c);
                }
                size_t last = (size_t)id[K - 1];
                for (size_t c = 0; c < V; c++) {
                    nans += isnan(l[c]);
                    if (!in_list[c] && !isnan(l[c]) && last < V) {
                        bad += topk_ranks_before(l, c, last);
                        tie_across += l[c] == l[last];
                    }
                }
                CHECKF(bad == 0, "topk row %zu: %d faults in the reference's list", r, bad);
                CHECKF(nans > 0, "topk row %zu of the fill has NaN", r);
                if (r == 0)
                    CHECKF(tie_across > 0, "topk row 0 of the fill ties across the %d-th place", K);
                if (r == 2)
                    CHECKF(neg_zero > 0 && pos_zero > 0 && v[0] == 0,
                           "topk row 2 of the fill: both zeros among the best (%d -0, %d +0)",
                           neg_zero, pos_zero);
            }
        }
        inst_free(&h);
    }
    check_refused(ctx, "topk", "rows=1,n=16,k=17", TAILOR_DTYPE_BF16);
    check_refused(ctx, "topk", "rows=1,n=4096,k=0", TAILOR_DTYPE_BF16);
    check_refused(ctx, "topk", "rows=1,n=4096,k=2000", TAILOR_DTYPE_BF16);
}

int main(void)
{
    printf("seed %llu\n", (unsigned long long)SEED);
    tailor_ctx *ctx = test_ctx();
    test_residual_norm_hand(ctx);
    test_residual_norm_modes(ctx);
    test_qk_norm_rope_hand(ctx);
    test_qk_norm_rope_proportional(ctx);
    test_kv_store_q(ctx);
    test_gelu_gate(ctx);
    test_gather_cols(ctx);
    test_embed(ctx);
    test_softcap_argmax(ctx);
    test_softcap_argmax_feed(ctx);
    test_gemma4_ple_gather(ctx);
    test_topk(ctx);
    tailor_ctx_destroy(ctx);
    return test_finish("test_small_ops");
}
