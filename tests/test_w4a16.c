/* test_w4a16.c — the W4A16 packer (compressed-tensors -> kernel layout), the host dequantizer
 * and the w4a16_matmul op's describe/fill/reference against naive loops. CPU only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "op.h"
#include "testlib.h"
#include "w4a16.h"

static const uint64_t SEED = 0x5eed4a16u;

/* Naive unpack of the checkpoint layout: q in -8..7 of column k of row n. */
static int ct_q(const int32_t *packed, int k_cols, int n, int k)
{
    uint32_t w = (uint32_t)packed[(size_t)n * (size_t)((k_cols + 7) / 8) + (size_t)(k / 8)];
    return (int)((w >> (4 * (k % 8))) & 0xfu) - 8;
}

static int ct_zp(const int32_t *zeros, int groups, int n, int g)
{
    uint32_t w = (uint32_t)zeros[(size_t)(n / 8) * (size_t)groups + (size_t)g];
    return (int)((w >> (4 * (n % 8))) & 0xfu) - 8;
}

static float round_to(tailor_dtype dt, float v)
{
    return dt == TAILOR_DTYPE_BF16 ? tailor_round_bf16(v) : tailor_round_f16(v);
}

/* One weight in both layouts, from random q, scales and zero points. */
typedef struct weight {
    tailor_w4a16_layout lay;
    int8_t *q, *zp;          /* [n, k], [n, groups] */
    float *scale;            /* [n, groups], already a bf16/fp16 value */
    int32_t *packed, *zeros; /* checkpoint */
    uint32_t *qweight;       /* kernel */
    uint16_t *scales_k;
    uint8_t *zeros_k;
} weight;

static void weight_free(weight *w)
{
    free(w->q);
    free(w->zp);
    free(w->scale);
    free(w->packed);
    free(w->zeros);
    free(w->qweight);
    free(w->scales_k);
    free(w->zeros_k);
}

static int weight_make(tailor_ctx *ctx, weight *w, int n, int k, int group, int zp,
                       tailor_dtype dt, test_rng *rng)
{
    memset(w, 0, sizeof *w);
    if (tailor_w4a16_layout_init(ctx, n, k, group, zp, &w->lay) != TAILOR_OK)
        return 0;
    int groups = w->lay.groups;
    w->q = malloc((size_t)n * (size_t)k);
    w->zp = malloc((size_t)n * (size_t)groups);
    w->scale = malloc((size_t)n * (size_t)groups * sizeof *w->scale);
    w->packed = calloc(w->lay.ct_words, sizeof *w->packed);
    w->zeros = calloc((size_t)((n + 7) / 8) * (size_t)groups, sizeof *w->zeros);
    w->qweight = malloc(w->lay.qweight_words * sizeof *w->qweight);
    w->scales_k = malloc(w->lay.scale_count * sizeof *w->scales_k);
    w->zeros_k = malloc(w->lay.scale_count);
    uint16_t *scales_ct = malloc((size_t)n * (size_t)groups * sizeof *scales_ct);
    if (!w->q || !w->zp || !w->scale || !w->packed || !w->zeros || !w->qweight || !w->scales_k ||
        !w->zeros_k || !scales_ct) {
        free(scales_ct);
        return 0;
    }
    for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
        w->q[i] = (int8_t)((int)(test_rng_next(rng) % 16) - 8);
    for (size_t i = 0; i < (size_t)n * (size_t)groups; i++) {
        w->zp[i] = zp ? (int8_t)((int)(test_rng_next(rng) % 16) - 8) : 0;
        w->scale[i] = round_to(dt, test_rng_normal(rng) * 0.02f);
        tailor_dtype_store(dt, scales_ct, i, w->scale[i]);
    }
    tailor_w4a16_ct_pack(n, k, w->q, w->packed);
    if (zp)
        tailor_w4a16_ct_pack_zeros(n, groups, w->zp, w->zeros);
    tailor_status st = tailor_w4a16_repack(ctx, &w->lay, w->packed, scales_ct, dt,
                                           zp ? w->zeros : NULL, dt, w->qweight, w->scales_k,
                                           zp ? w->zeros_k : NULL);
    free(scales_ct);
    return st == TAILOR_OK;
}

/* The checkpoint packer agrees with a naive unpack, and the kernel layout holds every value
 * exactly once at the position the layout comment describes. */
static void check_pack_round_trip(tailor_ctx *ctx, int n, int k, int group, int zp,
                                  tailor_dtype dt, test_rng *rng)
{
    weight w;
    CHECKF(weight_make(ctx, &w, n, k, group, zp, dt, rng), "n=%d k=%d group=%d", n, k, group);
    if (!w.qweight) {
        weight_free(&w);
        return;
    }
    int bad_ct = 0, bad_kernel = 0, bad_scale = 0, bad_zp = 0;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < k; c++) {
            int q = w.q[(size_t)r * (size_t)k + (size_t)c];
            bad_ct += ct_q(w.packed, k, r, c) != q;
            /* kernel layout, decoded straight from the comment in w4a16.h */
            int chunk = c / 32, p = (c % 32) / 8, t = (c % 8) / 2, h = c % 2;
            uint32_t word = w.qweight[(size_t)r * (size_t)(k / 8) + (size_t)(4 * chunk + t)];
            bad_kernel += (int)((word >> (4 * (p + 4 * h))) & 0xfu) - 8 != q;
        }
    for (int r = 0; r < w.lay.n_pad; r++)
        for (int g = 0; g < w.lay.groups; g++) {
            size_t i = (size_t)g * (size_t)w.lay.n_pad + (size_t)r;
            float want = r < n ? w.scale[(size_t)r * (size_t)w.lay.groups + (size_t)g] : 0.0f;
            bad_scale += tailor_dtype_load(dt, w.scales_k, i) != want;
            if (zp) {
                int zwant = r < n ? w.zp[(size_t)r * (size_t)w.lay.groups + (size_t)g] : 0;
                bad_zp += (int)w.zeros_k[i] - 8 != zwant;
                if (r < n)
                    bad_zp += ct_zp(w.zeros, w.lay.groups, r, g) != zwant;
            }
        }
    CHECKF(bad_ct == 0, "%d checkpoint nibbles differ (n=%d k=%d)", bad_ct, n, k);
    CHECKF(bad_kernel == 0, "%d kernel nibbles differ (n=%d k=%d)", bad_kernel, n, k);
    CHECKF(bad_scale == 0, "%d scales differ (n=%d k=%d group=%d)", bad_scale, n, k, group);
    CHECKF(bad_zp == 0, "%d zero points differ (n=%d group=%d)", bad_zp, n, group);

    /* host dequantize == round((q - zp) * scale), on a row range that starts mid-weight */
    int row0 = n > 3 ? 3 : 0, rows = n - row0;
    float *deq = malloc((size_t)rows * (size_t)k * sizeof *deq);
    if (deq) {
        CHECK_OK(ctx, tailor_w4a16_dequantize(ctx, &w.lay, row0, rows, w.qweight, w.scales_k, dt,
                                              zp ? w.zeros_k : NULL, deq));
        int bad = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < k; c++) {
                size_t gi = (size_t)(row0 + r) * (size_t)w.lay.groups + (size_t)(c / group);
                float want = round_to(dt, (float)(w.q[(size_t)(row0 + r) * (size_t)k + (size_t)c] -
                                                  w.zp[gi]) * w.scale[gi]);
                bad += deq[(size_t)r * (size_t)k + (size_t)c] != want;
            }
        CHECKF(bad == 0, "%d dequantized values differ (n=%d k=%d group=%d zp=%d)", bad, n, k,
               group, zp);
        free(deq);
    }
    weight_free(&w);
}

/* --quantize / --quantize-head's quantizer on a dense fp32 weight: every dequantized value is
 * within half a scale step of the weight (the largest of a group lands on +-7 steps), scales are
 * max|w| / 7 in the dtype, a zero group stays zero, and the result goes through the checkpoint
 * repack and the dequantizer like any compressed-tensors weight. */
static void check_quantizer(tailor_ctx *ctx, int n, int k, tailor_dtype dt, test_rng *rng)
{
    tailor_w4a16_layout lay;
    CHECK_OK(ctx, tailor_w4a16_layout_init(ctx, n, k, 128, 0, &lay));
    float *w = malloc((size_t)n * (size_t)k * sizeof *w);
    float *deq = malloc((size_t)n * (size_t)k * sizeof *deq);
    int32_t *packed = malloc(lay.ct_words * sizeof *packed);
    uint16_t *scales = malloc((size_t)n * (size_t)lay.groups * sizeof *scales);
    uint32_t *qw = malloc(lay.qweight_words * sizeof *qw);
    uint16_t *ksc = malloc(lay.scale_count * sizeof *ksc);
    if (!w || !deq || !packed || !scales || !qw || !ksc) {
        CHECK(!"out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
        w[i] = 0.05f * test_rng_normal(rng) * (1.0f + (float)(i / (size_t)k % 5));
    for (int c = 0; c < 128 && k >= 256; c++) /* row 0, group 1: all zero */
        w[128 + c] = 0.0f;
    tailor_w4a16_quantize_rows(&lay, w, TAILOR_DTYPE_F32, dt, 0, n, packed, scales);
    CHECK_OK(ctx, tailor_w4a16_repack(ctx, &lay, packed, scales, dt, NULL, dt, qw, ksc, NULL));
    CHECK_OK(ctx, tailor_w4a16_dequantize(ctx, &lay, 0, n, qw, ksc, dt, NULL, deq));
    int bad = 0, bad_scale = 0, at_seven = 0;
    for (int r = 0; r < n; r++)
        for (int g = 0; g < lay.groups; g++) {
            float amax = 0;
            for (int c = g * 128; c < (g + 1) * 128; c++)
                amax = fmaxf(amax, fabsf(w[(size_t)r * (size_t)k + (size_t)c]));
            float s = tailor_dtype_load(dt, scales, (size_t)r * (size_t)lay.groups + (size_t)g);
            bad_scale += s != round_to(dt, amax / 7.0f);
            for (int c = g * 128; c < (g + 1) * 128; c++) {
                size_t i = (size_t)r * (size_t)k + (size_t)c;
                /* half a step, the dtype's rounding of q * scale, and a scale rounded below
                 * amax / 7 that clamps the largest values at 7 steps */
                double lim = 0.5 * s + fabs(deq[i]) / 128.0 + 7.0 * fabs(amax / 7.0 - s) + 1e-12;
                bad += fabs((double)deq[i] - w[i]) > lim;
                at_seven += amax > 0 && fabsf(w[i]) == amax && fabsf(deq[i]) == round_to(dt, 7 * s);
            }
        }
    CHECKF(bad == 0 && bad_scale == 0, "quantizer n=%d k=%d %s: %d values off by more than half "
           "a step, %d scales not max|w|/7", n, k, tailor_dtype_name(dt), bad, bad_scale);
    CHECKF(at_seven >= n * lay.groups - 1, "quantizer: the largest value of each group is 7 steps "
           "(%d of %d groups)", at_seven, n * lay.groups);
    if (k >= 256) {
        int zero = 1;
        for (int c = 128; c < 256; c++)
            zero &= deq[c] == 0.0f;
        CHECKF(zero && tailor_dtype_load(dt, scales, 1) == 0.0f, "quantizer: a zero group stays zero");
    }
done:
    free(w);
    free(deq);
    free(packed);
    free(scales);
    free(qw);
    free(ksc);
}

static void check_layout_refusals(tailor_ctx *ctx)
{
    tailor_w4a16_layout lay;
    CHECK(tailor_w4a16_layout_init(ctx, 64, 200, 40, 0, &lay) == TAILOR_ERR_UNSUPPORTED);
    CHECK(strstr(tailor_ctx_message(ctx), "k=200") != NULL);
    CHECK(tailor_w4a16_layout_init(ctx, 64, 256, 48, 0, &lay) == TAILOR_ERR_UNSUPPORTED);
    CHECK(tailor_w4a16_layout_init(ctx, 64, 192, 128, 0, &lay) == TAILOR_ERR_UNSUPPORTED);
    CHECK(tailor_w4a16_layout_init(ctx, 0, 256, 32, 0, &lay) == TAILOR_ERR_MISUSE);
    CHECK_OK(ctx, tailor_w4a16_layout_init(ctx, 200, 352, 32, 1, &lay));
    CHECK(lay.n_pad == 208 && lay.groups == 11 && lay.qweight_words == 200u * 44u);
    CHECK(lay.ct_zero_words == 25u * 11u && lay.zero_count == 208u * 11u);
    /* repacking a block that does not start on an 8-row boundary is refused */
    uint32_t qw[8];
    int32_t packed[8] = {0};
    uint16_t sc[16] = {0};
    CHECK_OK(ctx, tailor_w4a16_layout_init(ctx, 16, 32, 32, 0, &lay));
    CHECK(tailor_w4a16_repack_rows(ctx, &lay, 4, 1, packed, sc, TAILOR_DTYPE_BF16, NULL,
                                   TAILOR_DTYPE_BF16, qw, sc, NULL) == TAILOR_ERR_MISUSE);
    /* a stack's stride: a multiple of 16 of at least n_pad, and the counts follow it */
    CHECK_OK(ctx, tailor_w4a16_layout_init(ctx, 200, 352, 32, 1, &lay));
    CHECK(tailor_w4a16_layout_set_ld(ctx, &lay, 200) == TAILOR_ERR_MISUSE);
    CHECK(tailor_w4a16_layout_set_ld(ctx, &lay, 216) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "216") != NULL && lay.ld == 208);
    CHECK_OK(ctx, tailor_w4a16_layout_set_ld(ctx, &lay, 224));
    CHECK(lay.ld == 224 && lay.scale_count == 224u * 11u && lay.zero_count == 224u * 11u);
}

/* The weight fill runs in tasks of rows on every CPU, each starting the stream where a serial
 * pass would be: no two rows (the same row index in neighbouring tasks above all, or two
 * blocks of 8 rows) come out equal, and every row's scales are set. */
static void check_fill_rows_distinct(tailor_ctx *ctx, uint64_t seed)
{
    const tailor_op *op = tailor_op_find("w4a16_matmul");
    test_op_inst in;
    const int n = 1100, k = 256; /* three tasks of 512 rows, a last block of 4 */
    char text[96];
    snprintf(text, sizeof text, "m=1,n=%d,k=%d,group=64,zp=1", n, k);
    if (!op || !test_op_inst_make(ctx, op, text, TAILOR_DTYPE_BF16, &in)) {
        CHECK(0);
        return;
    }
    op->fill(&in.shape, TAILOR_DTYPE_BF16, &in.bufs, in.host, seed);
    const uint32_t *qw = in.host[test_op_inst_buffer(&in, "qweight")];
    const uint16_t *sc = in.host[test_op_inst_buffer(&in, "scales")];
    size_t words = (size_t)k / 8;
    int same = 0, unset = 0;
    for (int r = 0; r < n; r++) {
        for (int other = r + 1; other < n; other++)
            same += memcmp(qw + (size_t)r * words, qw + (size_t)other * words, words * 4) == 0;
        unset += sc[r] == 0; /* group 0's scale of row r ([G, Np]) */
    }
    CHECKF(same == 0, "%d pairs of the %d filled rows are equal", same, n);
    CHECKF(unset == 0, "%d of %d rows without a scale", unset, n);
    test_op_inst_free(&in);
}

/* The op's reference on a small case against a naive triple loop over the naive dequantized
 * weight (read back through the documented kernel layout), and a perturbed output that the
 * tolerance must reject. */
static void check_op(tailor_ctx *ctx, const tailor_op *op, int m, int n, int k, int group, int zp,
                     int s_ld, tailor_dtype dt, uint64_t seed)
{
    test_op_inst in;
    char text[128];
    snprintf(text, sizeof text, "m=%d,n=%d,k=%d,group=%d,zp=%d,s_ld=%d", m, n, k, group, zp, s_ld);
    int made = test_op_inst_make(ctx, op, text, dt, &in);
    CHECKF(made, "describe %s: %s", text, tailor_ctx_message(ctx));
    if (!made) {
        test_op_inst_free(&in);
        return;
    }
    CHECK(in.bufs.count == (zp ? 5 : 4));
    op->fill(&in.shape, dt, &in.bufs, in.host, seed);
    CHECK_OK(ctx, op->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));

    int ia = test_op_inst_buffer(&in, "a"), iq = test_op_inst_buffer(&in, "qweight"), is = test_op_inst_buffer(&in, "scales");
    int iz = test_op_inst_buffer(&in, "zeros"), io = test_op_inst_buffer(&in, "out");
    CHECK(ia == 0 && iq == 1 && is == 2 && io == in.bufs.count - 1 && (zp ? iz == 3 : iz < 0));
    const uint32_t *qw = in.host[iq];
    const uint8_t *zk = iz >= 0 ? in.host[iz] : NULL;
    int n_pad = s_ld ? s_ld : (n + 15) / 16 * 16, nonzero_q = 0; /* the scales' row stride */
    CHECKF(in.bufs.b[is].count == (size_t)n_pad * (size_t)(k / group), "%s: scales hold [G, %d]",
           text, n_pad);
    double worst = 0, ss = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0;
            for (int c = 0; c < k; c++) {
                int chunk = c / 32, p = (c % 32) / 8, t = (c % 8) / 2, h = c % 2;
                uint32_t word = qw[(size_t)j * (size_t)(k / 8) + (size_t)(4 * chunk + t)];
                int u = (int)((word >> (4 * (p + 4 * h))) & 0xfu);
                size_t si = (size_t)(c / group) * (size_t)n_pad + (size_t)j;
                int z = zk ? zk[si] : 8;
                nonzero_q += u != z;
                float wv = round_to(dt, (float)(u - z) * tailor_dtype_load(dt, in.host[is], si));
                acc += (double)tailor_dtype_load(dt, in.host[ia], (size_t)i * (size_t)k +
                                                                   (size_t)c) * wv;
            }
            double got = in.ref[io][(size_t)i * (size_t)n + (size_t)j];
            double err = fabs(got - acc) / (0.02 * sqrt(21.5 * k)); /* relative to sigma */
            worst = err > worst ? err : worst;
            ss += acc * acc;
        }
    CHECKF(worst < 1e-5, "%s %s: reference differs from the naive loop by %g sigma", text,
           tailor_dtype_name(dt), worst);
    CHECKF(nonzero_q > m * n * k / 2, "%s: the fill left too many zero weights", text);
    double rms = sqrt(ss / ((double)m * n));
    double sigma = 0.02 * sqrt((zp ? 42.5 : 21.5) * k);
    CHECKF(rms > 0.5 * sigma && rms < 2 * sigma, "%s: output rms %g, fill should give ~%g", text,
           rms, sigma);

    /* the comparison: the reference rounded to the dtype passes; a value off by sigma/4 fails */
    const tailor_buffer_spec *spec = &in.bufs.b[io];
    void *got = calloc(spec->count, tailor_dtype_size(dt));
    if (got) {
        for (size_t i = 0; i < spec->count; i++)
            tailor_dtype_store(dt, got, i, in.ref[io][i]);
        CHECK_OK(ctx, tailor_op_compare(ctx, spec, got, in.ref[io]));
        size_t bad = spec->count / 2;
        tailor_dtype_store(dt, got, bad, in.ref[io][bad] + (float)sigma / 4);
        CHECK(tailor_op_compare(ctx, spec, got, in.ref[io]) == TAILOR_ERR_VERIFY);
        free(got);
    }
    CHECK(op->bytes(&in.shape, dt) > (double)n * k / 2);
    CHECK(op->flops(&in.shape, dt) == 2.0 * m * n * k);
    test_op_inst_free(&in);
}

/* w4a16_seam against the two ops it replaces: w4a16_matmul's reference of the same inputs,
 * rounded, then residual_norm's reference on it. */
static void check_seam_op(tailor_ctx *ctx, const char *text, tailor_dtype dt, uint64_t seed)
{
    const tailor_op *ws = tailor_op_find("w4a16_seam"), *wm = tailor_op_find("w4a16_matmul");
    const tailor_op *rn = tailor_op_find("residual_norm");
    CHECK(ws && wm && rn);
    if (!ws || !wm || !rn)
        return;
    test_op_inst in, mi, ri;
    CHECKF(test_op_inst_make(ctx, ws, text, dt, &in), "%s: %s", text, tailor_ctx_message(ctx));
    ws->fill(&in.shape, dt, &in.bufs, in.host, seed);
    CHECK_OK(ctx, ws->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));
    long long m = tailor_shape_get(&in.shape, "m", 0), n = tailor_shape_get(&in.shape, "n", 0);
    char mtext[128], rtext[96];
    snprintf(mtext, sizeof mtext, "m=%lld,n=%lld,k=%lld,group=%lld,zp=%lld", m, n,
             tailor_shape_get(&in.shape, "k", 0), tailor_shape_get(&in.shape, "group", 0),
             tailor_shape_get(&in.shape, "zp", 0));
    snprintf(rtext, sizeof rtext, "rows=%lld,cols=%lld,mode=%lld", m, n,
             tailor_shape_get(&in.shape, "mode", 0));
    CHECK(test_op_inst_make(ctx, wm, mtext, dt, &mi));
    CHECK(test_op_inst_make(ctx, rn, rtext, dt, &ri));
    for (int b = 0; b < mi.bufs.count; b++) { /* the product's inputs */
        int j = test_op_inst_buffer(&in, mi.bufs.b[b].name);
        if (mi.bufs.b[b].role == TAILOR_BUF_IN && j >= 0)
            memcpy(mi.host[b], in.host[j], in.bufs.b[j].count * tailor_dtype_size(in.bufs.b[j].dtype));
    }
    CHECK_OK(ctx, wm->reference(ctx, &mi.shape, dt, &mi.bufs, mi.host, mi.ref));
    const char *copy[] = {"x", "w_post", "w_next", "scalar"};
    for (int i = 0; i < 4; i++) {
        int a = test_op_inst_buffer(&in, copy[i]), b = test_op_inst_buffer(&ri, copy[i]);
        if (a >= 0 && b >= 0)
            memcpy(ri.host[b], in.host[a], in.bufs.b[a].count * tailor_dtype_size(in.bufs.b[a].dtype));
    }
    int mo = test_op_inst_buffer(&mi, "out"), ra = test_op_inst_buffer(&ri, "a");
    int it = test_op_inst_buffer(&in, "t");
    double worst = 0;
    for (long long i = 0; i < m * n; i++) {
        tailor_dtype_store(dt, ri.host[ra], (size_t)i, mi.ref[mo][i]);
        double d = fabs((double)in.ref[it][i] - mi.ref[mo][i]);
        worst = d > worst ? d : worst;
    }
    CHECK_OK(ctx, rn->reference(ctx, &ri.shape, dt, &ri.bufs, ri.host, ri.ref));
    const char *outs[] = {"x", "y"};
    for (int o = 0; o < 2; o++) {
        int a = test_op_inst_buffer(&in, outs[o]), b = test_op_inst_buffer(&ri, outs[o]);
        for (long long i = 0; i < m * n; i++) {
            double d = fabs((double)in.ref[a][i] - ri.ref[b][i]);
            worst = d > worst ? d : worst;
        }
    }
    CHECKF(worst == 0, "%s: fused reference differs from w4a16_matmul + residual_norm by %g", text,
           worst);
    test_op_inst_free(&ri);
    test_op_inst_free(&mi);
    test_op_inst_free(&in);
}

static void emulate_exact_gemv(const test_op_inst *in, tailor_dtype dt, const float *a, int n,
                               int k, int group, int zp, float *out);

static float test_gelu(float z)
{
    return 0.5f * z * (1.f + tanhf(0.7978845608028654f * (z + 0.044715f * z * z * z)));
}

/* What the GLU kernel stores (the stack's exact-weight products, gated with transformers'
 * roundings) is within w4a16_glu's tolerance of its reference: worst |diff|/tol printed. */
static void check_glu_tolerance(tailor_ctx *ctx, const test_op_inst *in, tailor_dtype dt)
{
    int m = (int)tailor_shape_get(&in->shape, "m", 0), n = (int)tailor_shape_get(&in->shape, "n", 0);
    int k = (int)tailor_shape_get(&in->shape, "k", 0);
    int group = (int)tailor_shape_get(&in->shape, "group", 0);
    int zp = (int)tailor_shape_get(&in->shape, "zp", 0);
    int ia = test_op_inst_buffer(in, "a"), io = test_op_inst_buffer(in, "out");
    float *a = malloc((size_t)k * sizeof *a), *gu = malloc(2 * (size_t)n * sizeof *gu);
    uint16_t *got = malloc((size_t)m * (size_t)n * sizeof *got);
    double worst = 0;
    for (int r = 0; a && gu && got && r < m; r++) {
        for (int c = 0; c < k; c++)
            a[c] = tailor_dtype_load(dt, in->host[ia], (size_t)r * (size_t)k + (size_t)c);
        emulate_exact_gemv(in, dt, a, 2 * n, k, group, zp, gu); /* rounded to the dtype */
        for (int j = 0; j < n; j++) {
            float h = round_to(dt, round_to(dt, test_gelu(gu[j])) * gu[n + j]);
            tailor_dtype_store(dt, got, (size_t)r * (size_t)n + (size_t)j, h);
            double e = test_tol_ratio(&in->bufs.b[io], h, in->ref[io][(size_t)r * (size_t)n + (size_t)j]);
            worst = e > worst ? e : worst;
        }
    }
    CHECK(a && gu && got);
    if (got)
        CHECKF(tailor_op_compare(ctx, &in->bufs.b[io], got, in->ref[io]) == TAILOR_OK,
               "w4a16_glu: the exact-weight GLU GEMV is outside the tolerance: %s",
               tailor_ctx_message(ctx));
    printf("w4a16_glu %s: exact-weight kernel, worst |diff|/tol %.3f\n", tailor_dtype_name(dt),
           worst);
    free(a);
    free(gu);
    free(got);
}

/* w4a16_glu against the two ops it replaces: w4a16_matmul's reference of the stack (2n rows, the
 * same inputs), rounded, then gelu_tanh gating's (op gelu_gate) on its two halves; bit for bit.
 * Then its tolerance: the reference passes, and one output moved by a fifth of sigma^2 (what a
 * misplaced row or nibble does, about sigma^2) fails. */
static void check_glu_op(tailor_ctx *ctx, const char *text, tailor_dtype dt, uint64_t seed)
{
    const tailor_op *wg = tailor_op_find("w4a16_glu"), *wm = tailor_op_find("w4a16_matmul");
    const tailor_op *gg = tailor_op_find("gelu_gate");
    CHECK(wg && wm && gg);
    if (!wg || !wm || !gg)
        return;
    test_op_inst in, mi, gi;
    CHECKF(test_op_inst_make(ctx, wg, text, dt, &in), "%s: %s", text, tailor_ctx_message(ctx));
    wg->fill(&in.shape, dt, &in.bufs, in.host, seed);
    CHECK_OK(ctx, wg->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));
    long long m = tailor_shape_get(&in.shape, "m", 0), n = tailor_shape_get(&in.shape, "n", 0);
    long long k = tailor_shape_get(&in.shape, "k", 0), zp = tailor_shape_get(&in.shape, "zp", 0);
    char mtext[128], gtext[96];
    snprintf(mtext, sizeof mtext, "m=%lld,n=%lld,k=%lld,group=%lld,zp=%lld,s_ld=%lld", m, 2 * n, k,
             tailor_shape_get(&in.shape, "group", 0), zp,
             tailor_shape_get(&in.shape, "s_ld", 0));
    snprintf(gtext, sizeof gtext, "rows=%lld,inter=%lld,g_ld=%lld,u_ld=%lld", m, n, 2 * n, 2 * n);
    CHECK(test_op_inst_make(ctx, wm, mtext, dt, &mi));
    CHECK(test_op_inst_make(ctx, gg, gtext, dt, &gi));
    for (int b = 0; b < mi.bufs.count; b++) { /* the stack's product: the same inputs */
        int j = test_op_inst_buffer(&in, mi.bufs.b[b].name);
        CHECK(mi.bufs.b[b].role != TAILOR_BUF_IN || (j >= 0 && in.bufs.b[j].count == mi.bufs.b[b].count));
        if (mi.bufs.b[b].role == TAILOR_BUF_IN && j >= 0)
            memcpy(mi.host[b], in.host[j], in.bufs.b[j].count * tailor_dtype_size(in.bufs.b[j].dtype));
    }
    CHECK_OK(ctx, wm->reference(ctx, &mi.shape, dt, &mi.bufs, mi.host, mi.ref));
    int mo = test_op_inst_buffer(&mi, "out"), ig = test_op_inst_buffer(&gi, "g");
    int iu = test_op_inst_buffer(&gi, "u"), ih = test_op_inst_buffer(&gi, "h");
    int io = test_op_inst_buffer(&in, "out");
    for (long long i = 0; i < m * 2 * n; i++) { /* gate and up, rounded: [m, 2n] as g and u */
        if ((size_t)i < gi.bufs.b[ig].count)
            tailor_dtype_store(dt, gi.host[ig], (size_t)i, mi.ref[mo][i]);
        if (i >= n)
            tailor_dtype_store(dt, gi.host[iu], (size_t)(i - n), mi.ref[mo][i]);
    }
    CHECK_OK(ctx, gg->reference(ctx, &gi.shape, dt, &gi.bufs, gi.host, gi.ref));
    double worst = 0;
    for (long long i = 0; i < m * n; i++) {
        double d = fabs((double)in.ref[io][i] - gi.ref[ih][i]);
        worst = d > worst ? d : worst;
    }
    CHECKF(worst == 0, "%s: fused reference differs from w4a16_matmul + gelu_gate by %g", text,
           worst);
    const tailor_buffer_spec *spec = &in.bufs.b[io];
    CHECK(spec->count == (size_t)(m * n));
    void *got = malloc(spec->count * 2);
    for (size_t i = 0; i < spec->count; i++)
        tailor_dtype_store(dt, got, i, in.ref[io][i]);
    CHECK_OK(ctx, tailor_op_compare(ctx, spec, got, in.ref[io]));
    double sigma = 0.02 * sqrt((zp ? 42.5 : 21.5) * (double)k);
    size_t bad = spec->count / 2;
    tailor_dtype_store(dt, got, bad, in.ref[io][bad] + (float)(sigma * sigma / 5));
    CHECKF(tailor_op_compare(ctx, spec, got, in.ref[io]) == TAILOR_ERR_VERIFY,
           "%s: an output off by sigma^2/5 = %g passed (atol %g)", text, sigma * sigma / 5,
           spec->atol);
    free(got);
    if (tailor_shape_get(&in.shape, "s_ld", 0) == 0) /* the emulation takes the stack's own stride */
        check_glu_tolerance(ctx, &in, dt);
    CHECK(wg->bytes(&in.shape, dt) > (double)(n * k)); /* 2n rows of k/2 bytes */
    CHECK(wg->flops(&in.shape, dt) == 4.0 * (double)(m * n * k));
    test_op_inst_free(&gi);
    test_op_inst_free(&mi);
    test_op_inst_free(&in);
}

/* Copies instance src's buffer `from` into dst's buffer `to` (the same count and dtype). */
static void copy_buffer(test_op_inst *dst, const char *to, const test_op_inst *src,
                        const char *from)
{
    int i = test_op_inst_buffer(dst, to), j = test_op_inst_buffer(src, from);
    CHECKF(i >= 0 && j >= 0 && dst->bufs.b[i].count == src->bufs.b[j].count &&
               dst->bufs.b[i].dtype == src->bufs.b[j].dtype,
           "buffer %s against %s", to, from);
    if (i >= 0 && j >= 0 && dst->bufs.b[i].count == src->bufs.b[j].count)
        memcpy(dst->host[i], src->host[j],
               src->bufs.b[j].count * tailor_dtype_size(src->bufs.b[j].dtype));
}

/* w4a16_mlp against the two ops it replaces: w4a16_glu's reference of the stack (its h, bit for
 * bit), then w4a16_matmul's of the down weight on h rounded to the dtype (out, bit for bit).
 * Then out's tolerance: the reference passes, one output moved by a fifth of its sigma fails;
 * and the shapes it refuses. */
static void check_mlp_op(tailor_ctx *ctx, const char *text, tailor_dtype dt, uint64_t seed)
{
    const tailor_op *wf = tailor_op_find("w4a16_mlp"), *wg = tailor_op_find("w4a16_glu");
    const tailor_op *wm = tailor_op_find("w4a16_matmul");
    CHECK(wf && wg && wm);
    if (!wf || !wg || !wm)
        return;
    test_op_inst in, gi, di;
    CHECKF(test_op_inst_make(ctx, wf, text, dt, &in), "%s: %s", text, tailor_ctx_message(ctx));
    wf->fill(&in.shape, dt, &in.bufs, in.host, seed);
    CHECK_OK(ctx, wf->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));
    long long n = tailor_shape_get(&in.shape, "n", 0), k = tailor_shape_get(&in.shape, "k", 0);
    long long zp = tailor_shape_get(&in.shape, "zp", 0), g = tailor_shape_get(&in.shape, "group", 0);
    char gtext[128], dtext[128];
    snprintf(gtext, sizeof gtext, "m=1,n=%lld,k=%lld,group=%lld,zp=%lld,s_ld=%lld", n, k, g, zp,
             tailor_shape_get(&in.shape, "s_ld", 0));
    snprintf(dtext, sizeof dtext, "m=1,n=%lld,k=%lld,group=%lld,zp=%lld,s_ld=%lld", k, n, g, zp,
             tailor_shape_get(&in.shape, "d_ld", 0));
    CHECK(test_op_inst_make(ctx, wg, gtext, dt, &gi));
    CHECK(test_op_inst_make(ctx, wm, dtext, dt, &di));
    copy_buffer(&gi, "a", &in, "a");
    copy_buffer(&gi, "qweight", &in, "qweight");
    copy_buffer(&gi, "scales", &in, "scales");
    copy_buffer(&di, "qweight", &in, "dqweight");
    copy_buffer(&di, "scales", &in, "dscales");
    if (zp) {
        copy_buffer(&gi, "zeros", &in, "zeros");
        copy_buffer(&di, "zeros", &in, "dzeros");
    }
    CHECK_OK(ctx, wg->reference(ctx, &gi.shape, dt, &gi.bufs, gi.host, gi.ref));
    int ih = test_op_inst_buffer(&in, "h"), io = test_op_inst_buffer(&in, "out");
    int go = test_op_inst_buffer(&gi, "out"), da = test_op_inst_buffer(&di, "a");
    int dout = test_op_inst_buffer(&di, "out");
    double worst_h = 0, worst_out = 0;
    for (long long j = 0; j < n; j++) {
        worst_h = fmax(worst_h, fabs((double)in.ref[ih][j] - gi.ref[go][j]));
        tailor_dtype_store(dt, di.host[da], (size_t)j, gi.ref[go][j]); /* h as stored */
    }
    CHECK_OK(ctx, wm->reference(ctx, &di.shape, dt, &di.bufs, di.host, di.ref));
    for (long long j = 0; j < k; j++)
        worst_out = fmax(worst_out, fabs((double)in.ref[io][j] - di.ref[dout][j]));
    CHECKF(worst_h == 0 && worst_out == 0,
           "%s: fused reference differs from w4a16_glu + w4a16_matmul (h by %g, out by %g)", text,
           worst_h, worst_out);
    const tailor_buffer_spec *spec = &in.bufs.b[io];
    CHECK(spec->count == (size_t)k && in.bufs.b[ih].count == (size_t)n);
    void *got = malloc(spec->count * 2);
    for (size_t i = 0; i < spec->count; i++)
        tailor_dtype_store(dt, got, i, in.ref[io][i]);
    CHECK_OK(ctx, tailor_op_compare(ctx, spec, got, in.ref[io]));
    double e = zp ? 42.5 : 21.5, s1 = 0.02 * sqrt(e * (double)k);
    double sigma_out = 0.02 * sqrt(e * (double)n) * s1 * s1;
    size_t bad = spec->count / 3;
    tailor_dtype_store(dt, got, bad, in.ref[io][bad] + (float)(sigma_out / 5));
    CHECKF(tailor_op_compare(ctx, spec, got, in.ref[io]) == TAILOR_ERR_VERIFY,
           "%s: an output off by sigma_out/5 = %g passed (atol %g)", text, sigma_out / 5,
           spec->atol);
    free(got);
    CHECK(wf->bytes(&in.shape, dt) > (double)(2 * n * k) * 0.75); /* 3nk nibbles at least */
    CHECK(wf->flops(&in.shape, dt) == 6.0 * (double)(n * k));
    test_op_inst_free(&di);
    test_op_inst_free(&gi);
    test_op_inst_free(&in);
}

/* The shapes w4a16_mlp refuses, each with a sentence naming what is wrong. */
static void check_mlp_refusals(tailor_ctx *ctx)
{
    const tailor_op *wf = tailor_op_find("w4a16_mlp");
    static const struct {
        const char *shape, *says;
    } bad[] = {
        {"m=2,n=256,k=512,group=128", "m=2"},        /* decode serves one row */
        {"m=1,n=200,k=512,group=32", "down projection"}, /* n is no multiple of 32 */
        {"m=1,n=256,k=512,group=96", "group"},       /* no valid group */
    };
    for (size_t i = 0; wf && i < sizeof bad / sizeof bad[0]; i++) {
        tailor_shape s;
        tailor_op_buffers b;
        CHECK_OK(ctx, tailor_shape_parse(ctx, bad[i].shape, &s));
        CHECK_OK(ctx, tailor_op_complete_shape(ctx, wf, &s));
        CHECKF(wf->describe(ctx, &s, TAILOR_DTYPE_BF16, &b) != TAILOR_OK &&
                   strstr(tailor_ctx_message(ctx), bad[i].says),
               "w4a16_mlp %s: %s", bad[i].shape, tailor_ctx_message(ctx));
        tailor_ctx_clear(ctx);
    }
}

/* w4a16_pro against the two ops it replaces: residual_norm's reference on t (x and the row),
 * the row rounded, then w4a16_matmul's reference on it; bit for bit. */
static void check_pro_op(tailor_ctx *ctx, const char *text, tailor_dtype dt, uint64_t seed)
{
    const tailor_op *wp = tailor_op_find("w4a16_pro"), *rn = tailor_op_find("residual_norm");
    CHECK(wp && rn);
    if (!wp || !rn)
        return;
    test_op_inst in, mi, ri;
    CHECKF(test_op_inst_make(ctx, wp, text, dt, &in), "%s: %s", text, tailor_ctx_message(ctx));
    wp->fill(&in.shape, dt, &in.bufs, in.host, seed);
    CHECK_OK(ctx, wp->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));
    long long n = tailor_shape_get(&in.shape, "n", 0), k = tailor_shape_get(&in.shape, "k", 0);
    /* glu = 1: the product is w4a16_glu's (a gate|up stack of 2n rows, gated) */
    const tailor_op *wm =
        tailor_op_find(tailor_shape_get(&in.shape, "glu", 0) ? "w4a16_glu" : "w4a16_matmul");
    char mtext[128], rtext[96];
    snprintf(mtext, sizeof mtext, "m=1,n=%lld,k=%lld,group=%lld,zp=%lld,s_ld=%lld", n, k,
             tailor_shape_get(&in.shape, "group", 0), tailor_shape_get(&in.shape, "zp", 0),
             tailor_shape_get(&in.shape, "s_ld", 0));
    snprintf(rtext, sizeof rtext, "rows=1,cols=%lld,mode=%lld", k,
             tailor_shape_get(&in.shape, "mode", 0));
    CHECK(test_op_inst_make(ctx, wm, mtext, dt, &mi));
    CHECK(test_op_inst_make(ctx, rn, rtext, dt, &ri));
    const char *from[] = {"x_in", "w_post", "w_next", "scalar", "t"};
    const char *to[] = {"x", "w_post", "w_next", "scalar", "a"};
    for (int i = 0; i < 5; i++) {
        int a = test_op_inst_buffer(&in, from[i]), b = test_op_inst_buffer(&ri, to[i]);
        CHECK(a >= 0 && b >= 0);
        if (a >= 0 && b >= 0)
            memcpy(ri.host[b], in.host[a], in.bufs.b[a].count * tailor_dtype_size(in.bufs.b[a].dtype));
    }
    CHECK_OK(ctx, rn->reference(ctx, &ri.shape, dt, &ri.bufs, ri.host, ri.ref));
    for (int b = 0; b < mi.bufs.count; b++) { /* the weights */
        int j = test_op_inst_buffer(&in, mi.bufs.b[b].name);
        if (mi.bufs.b[b].role == TAILOR_BUF_IN && j >= 0)
            memcpy(mi.host[b], in.host[j], in.bufs.b[j].count * tailor_dtype_size(in.bufs.b[j].dtype));
    }
    int ma = test_op_inst_buffer(&mi, "a"), ry = test_op_inst_buffer(&ri, "y");
    for (long long i = 0; i < k; i++)
        tailor_dtype_store(dt, mi.host[ma], (size_t)i, ri.ref[ry][i]);
    CHECK_OK(ctx, wm->reference(ctx, &mi.shape, dt, &mi.bufs, mi.host, mi.ref));
    double worst = 0;
    const char *mine[] = {"x_out", "y", "out"}, *theirs[] = {"x", "y", "out"};
    for (int o = 0; o < 3; o++) {
        int a = test_op_inst_buffer(&in, mine[o]);
        const test_op_inst *src = o < 2 ? &ri : &mi;
        int b = test_op_inst_buffer(src, theirs[o]);
        long long cnt = o < 2 ? k : n;
        for (long long i = 0; i < cnt; i++) {
            double d = fabs((double)in.ref[a][i] - src->ref[b][i]);
            worst = d > worst ? d : worst;
        }
    }
    CHECKF(worst == 0, "%s: the prologue's reference differs from residual_norm + %s by %g", text,
           wm->name, worst);
    test_op_inst_free(&ri);
    test_op_inst_free(&mi);
    test_op_inst_free(&in);
}

/* What a GEMV kernel computes: each weight as (q - zp) * scale exactly in fp32 (the scale
 * applied after the sum, no rounding of the weight to the dtype as the reference does), the
 * sum in another order; a the activations as floats [k], out [n] rounded to the dtype. */
static void emulate_exact_gemv(const test_op_inst *in, tailor_dtype dt, const float *a, int n,
                               int k, int group, int zp, float *out)
{
    tailor_w4a16_layout lay;
    CHECK_OK(NULL, tailor_w4a16_layout_init(NULL, n, k, group, zp, &lay));
    const uint32_t *qw = in->host[test_op_inst_buffer(in, "qweight")];
    const void *sc = in->host[test_op_inst_buffer(in, "scales")];
    int iz = test_op_inst_buffer(in, "zeros");
    const uint8_t *zs = iz >= 0 ? in->host[iz] : NULL;
    for (int j = 0; j < n; j++) {
        float acc = 0;
        for (int g = 0; g < k / group; g++) {
            size_t si = (size_t)g * (size_t)lay.n_pad + (size_t)j;
            float part = 0;
            for (int c = g * group + group - 1; c >= g * group; c--) { /* reversed order */
                int nib;
                size_t pos = tailor_w4a16_kernel_pos(&lay, j, c, &nib);
                int q = (int)((qw[pos] >> (4 * nib)) & 0xfu) - (zs ? zs[si] : 8);
                part += a[c] * (float)q;
            }
            acc += part * tailor_dtype_load(dt, sc, si);
        }
        out[j] = round_to(dt, acc);
    }
}

/* The tolerance holds what a correct kernel may differ by: the exact-weight GEMV of the same
 * inputs passes, over many seeds, at the shape whose single heavy term once failed on the H200
 * (m=8 rows of k=64 with zero points, bf16); and a misplaced nibble still fails. */
static void check_tolerance_covers_exact_weights(tailor_ctx *ctx, tailor_dtype dt)
{
    const tailor_op *op = tailor_op_find("w4a16_matmul");
    const int m = 8, n = 1024, k = 64, group = 64;
    double worst = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        test_op_inst in;
        CHECK(test_op_inst_make(ctx, op, "m=8,n=1024,k=64,group=64,zp=1", dt, &in));
        op->fill(&in.shape, dt, &in.bufs, in.host, seed);
        CHECK_OK(ctx, op->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));
        int ia = test_op_inst_buffer(&in, "a"), io = test_op_inst_buffer(&in, "out");
        float *a = malloc((size_t)k * sizeof *a), *row = malloc((size_t)n * sizeof *row);
        uint16_t *got = malloc((size_t)m * (size_t)n * sizeof *got);
        CHECK(a && row && got);
        for (int r = 0; a && row && got && r < m; r++) {
            for (int c = 0; c < k; c++)
                a[c] = tailor_dtype_load(dt, in.host[ia], (size_t)(r * k + c));
            emulate_exact_gemv(&in, dt, a, n, k, group, 1, row);
            for (int j = 0; j < n; j++) {
                tailor_dtype_store(dt, got, (size_t)(r * n + j), row[j]);
                double e = test_tol_ratio(&in.bufs.b[io], row[j], in.ref[io][r * n + j]);
                worst = e > worst ? e : worst;
            }
        }
        if (got) {
            CHECKF(tailor_op_compare(ctx, &in.bufs.b[io], got, in.ref[io]) == TAILOR_OK,
                   "%s seed %llu: exact-weight GEMV outside the tolerance: %s",
                   tailor_dtype_name(dt), (unsigned long long)seed, tailor_ctx_message(ctx));
            /* one weight off by 8 steps (a nibble's top bit) where the activation is largest
             * still fails */
            int big = 0;
            for (int c = 1; c < k; c++)
                if (fabsf(tailor_dtype_load(dt, in.host[ia], (size_t)c)) >
                    fabsf(tailor_dtype_load(dt, in.host[ia], (size_t)big)))
                    big = c;
            size_t si = 0; /* group 0, row 0 */
            float bad = tailor_dtype_load(dt, got, 0) +
                        8.0f * tailor_dtype_load(dt, in.host[ia], (size_t)big) *
                            tailor_dtype_load(dt, in.host[test_op_inst_buffer(&in, "scales")], si);
            if (fabsf(tailor_dtype_load(dt, in.host[test_op_inst_buffer(&in, "scales")], si)) > 0.01f) {
                tailor_dtype_store(dt, got, 0, bad);
                CHECK(tailor_op_compare(ctx, &in.bufs.b[io], got, in.ref[io]) == TAILOR_ERR_VERIFY);
            }
        }
        free(a);
        free(row);
        free(got);
        test_op_inst_free(&in);
    }
    printf("w4a16 %s: exact-weight GEMV worst |diff|/tol %.3f over 24 seeds\n",
           tailor_dtype_name(dt), worst);
}

/* w4a16_pro's product as the GEMV computes it: exact weights (emulate_exact_gemv). The checks
 * run at the shapes of the H200 failures (k=64 group 64 with zero points; k=352 group 32). */
static void pro_product(const test_op_inst *in, tailor_dtype dt, const float *a, float *out)
{
    emulate_exact_gemv(in, dt, a, (int)tailor_shape_get(&in->shape, "n", 0),
                       (int)tailor_shape_get(&in->shape, "k", 0),
                       (int)tailor_shape_get(&in->shape, "group", 0),
                       (int)tailor_shape_get(&in->shape, "zp", 0), out);
}

/* The int4 head's group: 128 where it divides, else 64 or 32 (test models), else none. */
/* Activation order: a g_idx with `group` columns in each group (a shuffle) gives the stable
 * sort by group (column j of the order in group j / group, ascending within a group); a
 * weight's rows reordered by it (tailor_w4a16_order_rows) and its input gathered by it give the
 * product of the stored weight with g_idx's grouping; a g_idx with one group short, or a value
 * out of range, is no order. */
static void check_activation_order(int n, int k, int group, test_rng *rng)
{
    int groups = k / group;
    int32_t *gi = malloc((size_t)k * sizeof *gi), *order = malloc((size_t)k * sizeof *order);
    int8_t *q = malloc((size_t)n * (size_t)k);
    int32_t *packed = malloc((size_t)n * (size_t)(k / 8) * sizeof *packed);
    int32_t *ordered = malloc((size_t)n * (size_t)(k / 8) * sizeof *ordered);
    float *x = malloc((size_t)k * sizeof *x), *s = malloc((size_t)n * (size_t)groups * sizeof *s);
    if (!gi || !order || !q || !packed || !ordered || !x || !s) {
        CHECKF(0, "out of memory");
        goto out;
    }
    for (int c = 0; c < k; c++)
        gi[c] = c / group;
    for (int c = k; c > 1; c--) { /* Fisher-Yates */
        int r = (int)(test_rng_next(rng) % (uint64_t)c), t = gi[c - 1];
        gi[c - 1] = gi[r];
        gi[r] = t;
    }
    CHECK(tailor_w4a16_order_from_groups(k, group, gi, order) == 1);
    int bad_group = 0, bad_stable = 0, moved = 0;
    for (int j = 0; j < k; j++) {
        bad_group += gi[order[j]] != j / group;
        bad_stable += j % group != 0 && order[j] <= order[j - 1];
        moved += order[j] != j;
    }
    CHECKF(bad_group == 0 && bad_stable == 0 && moved > 0,
           "order of k=%d group=%d: %d columns in another group, %d out of ascending order, %d "
           "moved", k, group, bad_group, bad_stable, moved);

    for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
        q[i] = (int8_t)((int)(test_rng_next(rng) % 16) - 8);
    for (int c = 0; c < k; c++)
        x[c] = test_rng_normal(rng);
    for (int i = 0; i < n * groups; i++)
        s[i] = test_rng_normal(rng) * 0.02f;
    tailor_w4a16_ct_pack(n, k, q, packed);
    tailor_w4a16_order_rows(n, k, order, packed, ordered);
    int bad_nibble = 0;
    double worst = 0;
    for (int r = 0; r < n; r++) {
        double stored = 0, reordered = 0;
        for (int j = 0; j < k; j++) {
            int qs = ct_q(packed, k, r, j), qo = ct_q(ordered, k, r, j);
            bad_nibble += qo != ct_q(packed, k, r, order[j]);
            stored += (double)x[j] * qs * s[r * groups + gi[j]];
            reordered += (double)x[order[j]] * qo * s[r * groups + j / group];
        }
        worst = fmax(worst, fabs(stored - reordered));
    }
    CHECKF(bad_nibble == 0 && worst < 1e-9,
           "reordered rows: %d nibbles misplaced, products differ by %.3g", bad_nibble, worst);

    gi[0] = (gi[0] + 1) % groups; /* one group a column short, another a column over */
    int uneven = tailor_w4a16_order_from_groups(k, group, gi, order);
    gi[0] = groups; /* out of range */
    int beyond = tailor_w4a16_order_from_groups(k, group, gi, order);
    CHECKF(uneven == 0 && beyond == 0, "no order from uneven groups (%d) or a g_idx of %d (%d)",
           uneven, groups, beyond);
out:
    free(gi);
    free(order);
    free(q);
    free(packed);
    free(ordered);
    free(x);
    free(s);
}

static void check_group_for(void)
{
    static const int k[] = {1536, 2560, 5376, 64, 96, 192, 32, 48, 0, 8};
    static const int want[] = {128, 128, 128, 64, 32, 64, 32, 0, 0, 0};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        CHECKF(tailor_w4a16_group_for(k[i]) == want[i], "group_for(%d) = %d, want %d", k[i],
               tailor_w4a16_group_for(k[i]), want[i]);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    printf("seed %llu\n", (unsigned long long)SEED);
    test_rng rng;
    test_rng_seed(&rng, SEED);

    static const int groups[] = {32, 64, 128};
    for (int gi = 0; gi < 3; gi++)
        for (int zp = 0; zp < 2; zp++) {
            check_pack_round_trip(ctx, 37, 384, groups[gi], zp, TAILOR_DTYPE_BF16, &rng);
            check_pack_round_trip(ctx, 8, 128, groups[gi], zp, TAILOR_DTYPE_F16, &rng);
        }
    check_pack_round_trip(ctx, 1, 32, 32, 1, TAILOR_DTYPE_F16, &rng);
    check_pack_round_trip(ctx, 200, 352, 32, 1, TAILOR_DTYPE_BF16, &rng);
    check_layout_refusals(ctx);
    check_fill_rows_distinct(ctx, SEED + 7);
    check_group_for();
    check_activation_order(5, 256, 32, &rng);
    check_activation_order(3, 1536, 128, &rng);
    check_activation_order(130, 512, 64, &rng);  /* rows over several tasks */
    check_activation_order(2, 33024, 128, &rng); /* wider than the unpacked row: nibble by nibble */
    check_quantizer(ctx, 40, 384, TAILOR_DTYPE_BF16, &rng);
    check_quantizer(ctx, 16, 1536, TAILOR_DTYPE_F16, &rng);

    check_seam_op(ctx, "m=1,n=256,k=512,group=128,mode=0", TAILOR_DTYPE_BF16, SEED + 100);
    check_seam_op(ctx, "m=3,n=200,k=320,group=32,zp=1,mode=1", TAILOR_DTYPE_F16, SEED + 101);
    check_seam_op(ctx, "m=2,n=1536,k=256,group=64,mode=2", TAILOR_DTYPE_BF16, SEED + 102);
    check_tolerance_covers_exact_weights(ctx, TAILOR_DTYPE_BF16);
    check_tolerance_covers_exact_weights(ctx, TAILOR_DTYPE_F16);
    for (int d = 0; d < 2; d++) {
        tailor_dtype dt = d ? TAILOR_DTYPE_F16 : TAILOR_DTYPE_BF16;
        test_pro_tolerance(ctx, "w4a16_pro", "m=1,n=200,k=352,group=32,zp=1,mode=2", dt, pro_product);
        test_pro_tolerance(ctx, "w4a16_pro", "m=1,n=32,k=64,group=64,zp=1,mode=2", dt, pro_product);
        test_pro_tolerance(ctx, "w4a16_pro", "m=1,n=512,k=1536,group=128,mode=0", dt, pro_product);
        test_pro_tolerance(ctx, "w4a16_pro", "m=1,n=256,k=1536,group=64,zp=1,mode=1", dt, pro_product);
    }
    check_pro_op(ctx, "m=1,n=256,k=512,group=128,mode=0", TAILOR_DTYPE_BF16, SEED + 103);
    check_pro_op(ctx, "m=1,n=200,k=320,group=32,zp=1,mode=1", TAILOR_DTYPE_F16, SEED + 104);
    check_pro_op(ctx, "m=1,n=96,k=1536,group=64,mode=2", TAILOR_DTYPE_BF16, SEED + 105);
    check_pro_op(ctx, "m=1,n=256,k=512,group=128,mode=0,glu=1", TAILOR_DTYPE_BF16, SEED + 110);
    check_pro_op(ctx, "m=1,n=200,k=320,group=32,zp=1,mode=1,glu=1", TAILOR_DTYPE_F16, SEED + 111);
    check_mlp_op(ctx, "m=1,n=256,k=512,group=128", TAILOR_DTYPE_BF16, SEED + 120);
    check_mlp_op(ctx, "m=1,n=96,k=352,group=32,zp=1", TAILOR_DTYPE_F16, SEED + 121);
    check_mlp_op(ctx, "m=1,n=128,k=1536,group=64,s_ld=512,d_ld=1600", TAILOR_DTYPE_BF16,
                 SEED + 122);
    check_mlp_op(ctx, "m=1,n=6144,k=1536,group=128", TAILOR_DTYPE_BF16, SEED + 123);
    check_mlp_refusals(ctx);
    check_glu_op(ctx, "m=1,n=256,k=512,group=128", TAILOR_DTYPE_BF16, SEED + 106);
    check_glu_op(ctx, "m=3,n=200,k=320,group=32,zp=1", TAILOR_DTYPE_F16, SEED + 107);
    check_glu_op(ctx, "m=1,n=6144,k=1536,group=128", TAILOR_DTYPE_BF16, SEED + 108);
    check_glu_op(ctx, "m=2,n=96,k=1536,group=64,s_ld=256", TAILOR_DTYPE_F16, SEED + 109);

    const tailor_op *op = tailor_op_find("w4a16_matmul");
    CHECK(op != NULL);
    if (op) {
        uint64_t seed = SEED;
        check_op(ctx, op, 3, 200, 352, 32, 0, 0, TAILOR_DTYPE_BF16, seed++);
        check_op(ctx, op, 3, 200, 352, 32, 1, 0, TAILOR_DTYPE_F16, seed++);
        check_op(ctx, op, 1, 67, 256, 64, 0, 0, TAILOR_DTYPE_F16, seed++);
        check_op(ctx, op, 5, 130, 512, 128, 1, 0, TAILOR_DTYPE_BF16, seed++);
        check_op(ctx, op, 70, 33, 768, 128, 0, 0, TAILOR_DTYPE_BF16, seed++);
        check_op(ctx, op, 2, 17, 4096, 4096, 0, 0, TAILOR_DTYPE_BF16, seed++);
        /* one part of a stack: scale rows of stride s_ld (the stack's n) */
        check_op(ctx, op, 3, 256, 352, 32, 1, 2560, TAILOR_DTYPE_BF16, seed++);
        check_op(ctx, op, 1, 200, 256, 64, 0, 528, TAILOR_DTYPE_F16, seed++);
        tailor_shape sh;
        tailor_op_buffers bufs;
        CHECK_OK(ctx, tailor_shape_parse(ctx, "m=1,n=64,k=200,group=8", &sh));
        CHECK(op->describe(ctx, &sh, TAILOR_DTYPE_BF16, &bufs) != TAILOR_OK);
        CHECK(strstr(tailor_ctx_message(ctx), "w4a16_matmul") != NULL);
    }
    /* a seam mode with no product next to it (residual_norm's 3) is refused, naming the op; the
     * seam's weights follow the product's buffers in the order the kernels take them */
    static const char *const fused[] = {"w4a16_seam", "w4a16_pro", "matmul_seam", "matmul_pro"};
    for (size_t f = 0; f < sizeof fused / sizeof fused[0]; f++) {
        const tailor_op *fo = tailor_op_find(fused[f]);
        CHECK(fo != NULL);
        if (!fo)
            continue;
        tailor_shape sh;
        tailor_op_buffers bufs;
        CHECK_OK(ctx, tailor_shape_parse(ctx, "m=1,n=64,k=256,group=128,mode=3", &sh));
        CHECK(fo->describe(ctx, &sh, TAILOR_DTYPE_BF16, &bufs) == TAILOR_ERR_MISUSE);
        CHECKF(strstr(tailor_ctx_message(ctx), fused[f]) && strstr(tailor_ctx_message(ctx), "mode=3"),
               "%s: %s", fused[f], tailor_ctx_message(ctx));
        CHECK_OK(ctx, tailor_shape_parse(ctx, "m=1,n=64,k=256,group=128,mode=1", &sh));
        CHECK_OK(ctx, fo->describe(ctx, &sh, TAILOR_DTYPE_BF16, &bufs));
        int wp = -1;
        for (int i = 0; i < bufs.count; i++)
            if (strcmp(bufs.b[i].name, "w_post") == 0)
                wp = i;
        CHECKF(wp >= 0 && wp + 2 < bufs.count && strcmp(bufs.b[wp + 1].name, "w_next") == 0 &&
                   strcmp(bufs.b[wp + 2].name, "scalar") == 0 &&
                   bufs.b[wp + 2].dtype == TAILOR_DTYPE_F32 && bufs.b[wp + 2].count == 1 &&
                   bufs.b[wp].role == TAILOR_BUF_IN,
               "%s: w_post, w_next, scalar (at %d)", fused[f], wp);
    }
    tailor_ctx_destroy(ctx);
    return test_finish("test_w4a16");
}
