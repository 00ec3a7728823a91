/* op_w4a16.c — the op "w4a16_matmul": out[m, n] = a[m, k] · W[n, k]^T with W int4 in groups of
 * `group` along k (compressed-tensors pack-quantized, repacked by runtime/w4a16.c), and its C
 * reference (dequantize as HF does, then an fp32 matmul). Also "w4a16_seam": the same product
 * back to the hidden size followed by the layer seam (decode); "w4a16_pro": the seam before it;
 * "w4a16_glu": a stacked gate|up product gated in the epilogue (decode). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "op.h"
#include "parallel.h"
#include "w4a16.h"

/* The int4 weight's shape keys, the same in every w4a16 op. */
#define W4_WEIGHT_KEYS                                                                          \
    {"group", 128, "columns per scale (a multiple of 32 dividing k)"},                          \
    {"zp", 0, "1: asymmetric, with packed zero points; 0: symmetric"},                          \
    {"s_ld", 0, "row stride of scales and zeros: 0 = n rounded up to 16; more = one part of "   \
                "matrices stacked along n"}

static const tailor_shape_key w4a16_keys[] = {
    {"m", -1, "rows of the activation (tokens)"},
    {"n", -1, "output features (rows of the weight)"},
    {"k", -1, "input features (a multiple of 32)"},
    W4_WEIGHT_KEYS,
    {NULL, 0, NULL},
};

/* Shape values of one instance. */
typedef struct w4a16_dims {
    int m, n, k, group, zp, s_ld;
} w4a16_dims;

static w4a16_dims dims_of(const tailor_shape *shape)
{
    w4a16_dims d = {
        (int)tailor_shape_get(shape, "m", 0),     (int)tailor_shape_get(shape, "n", 0),
        (int)tailor_shape_get(shape, "k", 0),     (int)tailor_shape_get(shape, "group", 128),
        (int)tailor_shape_get(shape, "zp", 0) != 0, (int)tailor_shape_get(shape, "s_ld", 0),
    };
    return d;
}

/* The kernel layout of an instance: its own, or with s_ld the stride of a stack's part. */
static tailor_status layout_of(tailor_ctx *ctx, const w4a16_dims *d, tailor_w4a16_layout *lay)
{
    tailor_status st = tailor_w4a16_layout_init(ctx, d->n, d->k, d->group, d->zp, lay);
    if (st == TAILOR_OK && d->s_ld != 0)
        st = tailor_w4a16_layout_set_ld(ctx, lay, d->s_ld);
    return st;
}

static int find_buffer(const tailor_op_buffers *bufs, const char *name)
{
    for (int i = 0; i < bufs->count; i++)
        if (strcmp(bufs->b[i].name, name) == 0)
            return i;
    return -1;
}

/* Tolerance. Every kernel accumulates in fp32 and rounds once to the dtype, so the output
 * carries half an ulp of the dtype relative to |ref| (bf16 2^-8, fp16 2^-11): rtol is one full
 * ulp (2^-7, 2^-10) to leave room for fp32 summation noise, which over k <= 21504 terms of
 * random sign stays orders of magnitude below that. Kernels may apply the group scale after
 * summing (q - zp) * a instead of rounding each (q - zp) * scale to the dtype as the reference
 * does: each weight then differs by up to half an ulp, a random-sign error whose standard
 * deviation is about 0.6 * 2^-8 (bf16) or 0.6 * 2^-11 (fp16) of the output's own standard
 * deviation sigma = 0.02 * sqrt(E[(q - zp)^2] * k) (fill's distributions: E = 21.5 symmetric,
 * 42.5 with random zero points). atol = sigma/64 (bf16) or sigma/512 (fp16) is about seven of
 * those standard deviations, so it neither fails a correct kernel over millions of outputs nor
 * hides a wrong layout (a misplaced nibble or scale moves outputs by about sigma).
 * That Gaussian argument misses single large terms (a product of two normals and a uniform is
 * heavy-tailed: one |a * w| of 4 at k = 64 moved an output by 1.05 atol on the H200), so the
 * fill is bounded (|a| <= W4_A_MAX, |scale| <= W4_SCALE_MAX) and atol adds the worst rounding
 * of one such term. a_rms, a_max: the activations' scale and bound when they are not the
 * plain fill's (w4a16_pro's normed row). */
#define W4_A_MAX 4.0
#define W4_SCALE_SIGMA 0.02
#define W4_SCALE_MAX (3 * W4_SCALE_SIGMA)

static void tolerance_scaled(const w4a16_dims *d, tailor_dtype dtype, double a_rms, double a_max,
                             double *atol, double *rtol)
{
    int bf = dtype == TAILOR_DTYPE_BF16;
    double sigma = W4_SCALE_SIGMA * sqrt((d->zp ? 42.5 : 21.5) * (double)d->k) * a_rms;
    double w_max = (d->zp ? 15.0 : 8.0) * W4_SCALE_MAX;
    *atol = sigma / (bf ? 64.0 : 512.0) + ldexp(a_max * w_max, bf ? -8 : -11);
    *rtol = bf ? 1.0 / 128 : 1.0 / 1024;
}

static void tolerance(const w4a16_dims *d, tailor_dtype dtype, double *atol, double *rtol)
{
    tolerance_scaled(d, dtype, 1.0, W4_A_MAX, atol, rtol);
}

static tailor_status w4a16_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                    tailor_dtype dtype, tailor_op_buffers *out)
{
    w4a16_dims d = dims_of(shape);
    if (d.m <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "w4a16_matmul: m=%d must be positive",
                                d.m);
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "w4a16_matmul: dtype must be fp16 or bf16");
    tailor_w4a16_layout lay;
    tailor_status st = layout_of(ctx, &d, &lay);
    if (st != TAILOR_OK)
        return tailor_wrap_error(ctx, "w4a16_matmul");
    double atol, rtol;
    tolerance(&d, dtype, &atol, &rtol);
    size_t m = (size_t)d.m;
    memset(out, 0, sizeof *out);
    int i = 0;
    out->b[i++] = (tailor_buffer_spec){"a", dtype, m * (size_t)d.k, TAILOR_BUF_IN, 0, 0};
    out->b[i++] = (tailor_buffer_spec){"qweight", TAILOR_DTYPE_I32, lay.qweight_words,
                                       TAILOR_BUF_IN, 0, 0};
    out->b[i++] = (tailor_buffer_spec){"scales", dtype, lay.scale_count, TAILOR_BUF_IN, 0, 0};
    if (d.zp)
        out->b[i++] = (tailor_buffer_spec){"zeros", TAILOR_DTYPE_U8, lay.zero_count,
                                           TAILOR_BUF_IN, 0, 0};
    out->b[i++] = (tailor_buffer_spec){"out", dtype, m * (size_t)d.n, TAILOR_BUF_OUT, atol, rtol};
    out->count = i;
    return TAILOR_OK;
}

/* Standard normal (Box-Muller). */
static float next_normal(uint64_t *s)
{
    double u1 = ((double)(tailor_fill_u64(s) >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    double u2 = (double)(tailor_fill_u64(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* A standard normal cut at +-lim (the tolerance counts on the bound). */
static float clamped_normal(uint64_t *s, float lim)
{
    float v = next_normal(s);
    return v > lim ? lim : v < -lim ? -lim : v;
}

/* Random int4 weights for checkpoint rows [row0, row0 + rows): packed words, scales ~ N(0,1)
 * * 0.02 in the dtype, zero points in -8..7. */
static void random_ct_block(const tailor_w4a16_layout *lay, int rows, tailor_dtype dtype,
                            int32_t *packed, void *scales, int32_t *zeros, uint64_t *s)
{
    size_t words = (size_t)rows * (size_t)(lay->k / 8);
    for (size_t i = 0; i < words; i += 2) { /* every nibble uniform in 0..15: q in -8..7 */
        uint64_t r = tailor_fill_u64(s);
        packed[i] = (int32_t)(uint32_t)r;
        if (i + 1 < words)
            packed[i + 1] = (int32_t)(uint32_t)(r >> 32);
    }
    for (size_t i = 0; i < (size_t)rows * (size_t)lay->groups; i++)
        tailor_dtype_store(dtype, scales, i,
                           clamped_normal(s, (float)(W4_SCALE_MAX / W4_SCALE_SIGMA)) *
                               (float)W4_SCALE_SIGMA);
    if (lay->has_zp)
        for (size_t i = 0; i < (size_t)((rows + 7) / 8) * (size_t)lay->groups; i++)
            zeros[i] = (int32_t)(uint32_t)tailor_fill_u64(s);
}

/* Draws of tailor_fill_u64 random_ct_block makes for a full block of 8 rows: a word per two
 * packed words, two per scale (Box-Muller), one per zero-point word. */
static uint64_t ct_block_draws(const tailor_w4a16_layout *lay)
{
    return (uint64_t)lay->k / 2 + 16u * (uint64_t)lay->groups +
           (lay->has_zp ? (uint64_t)lay->groups : 0);
}

enum { FILL_BLOCK = 8, FILL_TASK_ROWS = 512 }; /* rows a random_ct_block, rows a task */

typedef struct w4_fill_job {
    const tailor_w4a16_layout *lay;
    tailor_dtype dtype;
    uint32_t *qweight;
    void *scales;
    uint8_t *zeros;
    uint64_t first; /* the stream's state before row 0 */
} w4_fill_job;

/* Rows [task * FILL_TASK_ROWS, ...) of the weight, 8 at a time in checkpoint form, each block
 * repacked at once (a task's scratch is one block): the stream is started at the task's first
 * block, so the values are those of one serial pass. fill cannot report failure: if the
 * scratch cannot be allocated these rows are left as they were, and verification fails. */
static void w4_fill_task(void *user, int task)
{
    const w4_fill_job *j = user;
    const tailor_w4a16_layout *lay = j->lay;
    int row_end = (task + 1) * FILL_TASK_ROWS < lay->n ? (task + 1) * FILL_TASK_ROWS : lay->n;
    uint64_t s = j->first + (uint64_t)task * (FILL_TASK_ROWS / FILL_BLOCK) *
                                ct_block_draws(lay) * TAILOR_FILL_U64_STEP;
    int32_t *packed = malloc((size_t)FILL_BLOCK * (size_t)(lay->k / 8) * sizeof *packed);
    uint16_t *scales = malloc((size_t)FILL_BLOCK * (size_t)lay->groups * sizeof *scales);
    int32_t *zeros = malloc((size_t)lay->groups * sizeof *zeros);
    if (packed && scales && zeros)
        for (int row0 = task * FILL_TASK_ROWS; row0 < row_end; row0 += FILL_BLOCK) {
            int rows = row_end - row0 < FILL_BLOCK ? row_end - row0 : FILL_BLOCK;
            random_ct_block(lay, rows, j->dtype, packed, scales, zeros, &s);
            (void)tailor_w4a16_repack_rows(NULL, lay, row0, rows, packed, scales, j->dtype,
                                           lay->has_zp ? zeros : NULL, j->dtype, j->qweight,
                                           j->scales, j->zeros);
        }
    free(packed);
    free(scales);
    free(zeros);
}

/* Fills the weight in checkpoint form and repacks it (the packer is exercised on every tuning
 * run), on every CPU, host memory small whatever the weight's size; *s ends past the weight's
 * draws. Rows of the kernel layout are disjoint in memory, so tasks never share a word. */
static void fill_weights(const tailor_w4a16_layout *lay, tailor_dtype dtype, uint32_t *qweight,
                         void *scales_out, uint8_t *zeros_out, uint64_t *s)
{
    w4_fill_job j = {lay, dtype, qweight, scales_out, zeros_out, *s};
    tailor_parallel_for((lay->n + FILL_TASK_ROWS - 1) / FILL_TASK_ROWS, w4_fill_task, &j);
    uint64_t full = (uint64_t)(lay->n / FILL_BLOCK), tail = (uint64_t)(lay->n % FILL_BLOCK);
    uint64_t tail_draws = tail ? (tail * (uint64_t)lay->k / 8 + 1) / 2 +
                                     2 * tail * (uint64_t)lay->groups +
                                     (lay->has_zp ? (uint64_t)lay->groups : 0)
                               : 0;
    *s += (full * ct_block_draws(lay) + tail_draws) * TAILOR_FILL_U64_STEP;
}

static void w4a16_fill(const tailor_shape *shape, tailor_dtype dtype,
                       const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    w4a16_dims d = dims_of(shape);
    tailor_w4a16_layout lay;
    if (layout_of(NULL, &d, &lay) != TAILOR_OK)
        return; /* describe refused this shape already */
    uint64_t s = seed;
    int ia = find_buffer(bufs, "a"), iz = find_buffer(bufs, "zeros");
    for (size_t i = 0; i < bufs->b[ia].count; i++)
        tailor_dtype_store(dtype, host[ia], i, clamped_normal(&s, (float)W4_A_MAX));
    fill_weights(&lay, dtype, host[find_buffer(bufs, "qweight")],
                 host[find_buffer(bufs, "scales")], iz >= 0 ? host[iz] : NULL, &s);
}

/* out = a · W^T in tiles of TILE rows of a and of W, so that only two [TILE, k] float tiles
 * are ever held (the largest Gemma 4 weight would be 352 MB as floats). */
enum { REF_TILE = 64 };

/* The reference in column tiles of REF_TILE weight rows, one per parallel task: each task
 * dequantizes its rows once and dots them with every activation row. */
typedef struct w4a16_ref_job {
    const tailor_w4a16_layout *lay;
    w4a16_dims d;
    tailor_dtype dtype;
    const uint32_t *qw;
    const void *scales;
    const uint8_t *zeros;
    const float *a;    /* [m, k] activations as floats */
    float *out;        /* [m, n] */
    atomic_int failed; /* a task ran out of memory or could not dequantize */
} w4a16_ref_job;

static void w4a16_ref_task(void *user, int task)
{
    w4a16_ref_job *j = user;
    int n0 = task * REF_TILE;
    int nt = j->d.n - n0 < REF_TILE ? j->d.n - n0 : REF_TILE;
    size_t k = (size_t)j->d.k;
    float *wt = malloc((size_t)nt * k * sizeof *wt);
    if (!wt || tailor_w4a16_dequantize(NULL, j->lay, n0, nt, j->qw, j->scales, j->dtype, j->zeros,
                                       wt) != TAILOR_OK) {
        atomic_store(&j->failed, 1);
        free(wt);
        return;
    }
    for (int i = 0; i < j->d.m; i++)
        for (int c = 0; c < nt; c++)
            j->out[(size_t)i * (size_t)j->d.n + (size_t)(n0 + c)] =
                tailor_ref_dot(j->a + (size_t)i * k, wt + (size_t)c * k, j->d.k);
    free(wt);
}

/* out[m, n] = a · W^T, a given as floats [m, k], W the weight of dims d in buffers qw, scales
 * and zeros (NULL when symmetric). */
static tailor_status w4a16_ref_product_of(tailor_ctx *ctx, const w4a16_dims *dd,
                                          tailor_dtype dtype, const void *qw, const void *scales,
                                          const void *zeros, const float *a, float *out)
{
    w4a16_dims d = *dd;
    tailor_w4a16_layout lay;
    tailor_status st = layout_of(ctx, &d, &lay);
    if (st != TAILOR_OK)
        return st;
    w4a16_ref_job j = {
        .lay = &lay, .d = d, .dtype = dtype, .qw = qw, .scales = scales, .zeros = zeros,
        .a = a, .out = out,
    };
    atomic_init(&j.failed, 0);
    tailor_parallel_for((d.n + REF_TILE - 1) / REF_TILE, w4a16_ref_task, &j);
    if (atomic_load(&j.failed))
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                "w4a16_matmul reference: a tile of %d x %d could not be "
                                "dequantized (out of memory)",
                                REF_TILE, d.k);
    return TAILOR_OK;
}

/* out[m, n] = a · W^T with the weight in the op's buffers qweight, scales and zeros. */
static tailor_status w4a16_ref_product(tailor_ctx *ctx, const tailor_shape *shape,
                                       tailor_dtype dtype, const tailor_op_buffers *bufs,
                                       void *const *host, const float *a, float *out)
{
    w4a16_dims d = dims_of(shape);
    int iz = find_buffer(bufs, "zeros");
    return w4a16_ref_product_of(ctx, &d, dtype, host[find_buffer(bufs, "qweight")],
                                host[find_buffer(bufs, "scales")], iz >= 0 ? host[iz] : NULL, a,
                                out);
}

static tailor_status w4a16_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                     tailor_dtype dtype, const tailor_op_buffers *bufs,
                                     void *const *host, float *const *ref)
{
    w4a16_dims d = dims_of(shape);
    int ia = find_buffer(bufs, "a"), io = find_buffer(bufs, "out");
    if (io < 0)
        io = find_buffer(bufs, "t"); /* w4a16_seam's product */
    size_t mk = (size_t)d.m * (size_t)d.k;
    float *a = malloc(mk * sizeof *a);
    if (!a)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                "w4a16_matmul reference: no memory for the %d x %d activations",
                                d.m, d.k);
    for (size_t i = 0; i < mk; i++)
        a[i] = tailor_dtype_load(dtype, host[ia], i);
    tailor_status st = w4a16_ref_product(ctx, shape, dtype, bufs, host, a, ref[io]);
    free(a);
    return st;
}

static double w4a16_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims d = dims_of(shape);
    double es = (double)tailor_dtype_size(dtype), groups = d.group > 0 ? d.k / d.group : 0;
    double m = d.m, n = d.n, k = d.k;
    return m * k * es            /* activations */
           + n * k / 2           /* packed weights */
           + n * groups * es     /* scales */
           + (d.zp ? n * groups : 0) /* zero points, one byte each in the kernel layout */
           + m * n * es;         /* output */
}

static double w4a16_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    w4a16_dims d = dims_of(shape);
    return 2.0 * d.m * (double)d.n * (double)d.k;
}

const tailor_op tailor_op_w4a16_matmul = {
    .name = "w4a16_matmul",
    .spaced_timing = 1, /* session 16: +7 % W4A16 decode (docs/perf/model.md) */
    .summary = "out[m,n] = a[m,k] W[n,k]^T, W int4 with a 16-bit scale per group (W4A16)",
    .keys = w4a16_keys,
    .describe = w4a16_describe,
    .fill = w4a16_fill,
    .reference = w4a16_reference,
    .bytes = w4a16_bytes,
    .flops = w4a16_flops,
};

/* ---- w4a16_seam: t = a · W^T (int4), then the layer seam on t ---------------------------------
 *
 * Buffers: those of w4a16_matmul with the product named t [m, n] (n = the hidden size), then
 * the seam's x [m, n] fp32 INOUT, w_post, w_next [n], scalar [1] fp32, y [m, n] OUT; mode 0..2
 * as residual_norm. Tolerances of x and y as matmul_seam's (tuner/op_matmul.c). */

static const tailor_shape_key w4a16_seam_keys[] = {
    {"m", -1, "rows of the activation (tokens)"},
    {"n", -1, "output features: the hidden size (the seam's row width)"},
    {"k", -1, "input features (a multiple of 32)"},
    W4_WEIGHT_KEYS,
    {"mode", 0, "the seam: 0 x += norm(t), y = norm(x); 1 also x *= scalar; 2 y = x"},
    {NULL, 0, NULL},
};

static tailor_status w4a16_seam_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                         tailor_dtype dtype, tailor_op_buffers *out)
{
    tailor_status st = w4a16_describe(ctx, shape, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "w4a16_seam");
    if ((st = tailor_seam_mode_check(ctx, "w4a16_seam", shape)))
        return st;
    w4a16_dims d = dims_of(shape);
    size_t mn = (size_t)d.m * (size_t)d.n, n = (size_t)d.n;
    int i = out->count;
    snprintf(out->b[i - 1].name, sizeof out->b[i - 1].name, "t");
    out->b[i++] = tailor_seam_x_spec("x", dtype, mn, TAILOR_BUF_INOUT);
    tailor_seam_weight_specs(&out->b[i], dtype, n); /* w_post, w_next, scalar */
    i += 3;
    out->b[i++] = tailor_seam_y_spec(dtype, mn);
    out->count = i;
    return TAILOR_OK;
}

static void w4a16_seam_fill(const tailor_shape *shape, tailor_dtype dtype,
                            const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    w4a16_fill(shape, dtype, bufs, host, seed);
    int ix = find_buffer(bufs, "x"), ip = find_buffer(bufs, "w_post");
    tailor_fill_seam(dtype, host[ix], bufs->b[ix].count, host[ip], host[find_buffer(bufs, "w_next")],
                     bufs->b[ip].count, host[find_buffer(bufs, "scalar")], seed ^ 0x9e3779b9u);
}

static tailor_status w4a16_seam_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                          tailor_dtype dtype, const tailor_op_buffers *bufs,
                                          void *const *host, float *const *ref)
{
    tailor_status st = w4a16_reference(ctx, shape, dtype, bufs, host, ref);
    if (st)
        return st;
    w4a16_dims d = dims_of(shape);
    size_t mn = (size_t)d.m * (size_t)d.n;
    int it = find_buffer(bufs, "t"), ix = find_buffer(bufs, "x"), iy = find_buffer(bufs, "y");
    float *t = malloc(mn * sizeof *t);
    if (!t)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "w4a16_seam reference: out of memory");
    for (size_t i = 0; i < mn; i++) { /* the product as the kernel stores it: rounded */
        uint16_t r;
        tailor_dtype_store(dtype, &r, 0, ref[it][i]);
        t[i] = tailor_dtype_load(dtype, &r, 0);
    }
    st = tailor_ref_seam(ctx, dtype, (int)tailor_shape_get(shape, "mode", 0), (size_t)d.m,
                         (size_t)d.n, t, host[ix], host[find_buffer(bufs, "w_post")],
                         host[find_buffer(bufs, "w_next")],
                         ((const float *)host[find_buffer(bufs, "scalar")])[0], ref[ix], ref[iy]);
    free(t);
    return st;
}

static double w4a16_seam_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims d = dims_of(shape);
    double mn = (double)d.m * d.n, e = (double)tailor_dtype_size(dtype);
    return w4a16_bytes(shape, dtype) + mn * (8 + e) + 2.0 * d.n * e;
}

static double w4a16_seam_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims d = dims_of(shape);
    return w4a16_flops(shape, dtype) + 10.0 * d.m * (double)d.n;
}

const tailor_op tailor_op_w4a16_seam = {
    .name = "w4a16_seam",
    .spaced_timing = 1, /* session 16: +7 % W4A16 decode (docs/perf/model.md) */
    .summary = "t[m,n] = a W^T (W4A16), then Gemma 4's layer seam on t: fp32 residual += "
               "RMSNorm(t), next input = RMSNorm(residual)",
    .keys = w4a16_seam_keys,
    .describe = w4a16_seam_describe,
    .fill = w4a16_seam_fill,
    .reference = w4a16_seam_reference,
    .bytes = w4a16_seam_bytes,
    .flops = w4a16_seam_flops,
};

/* ---- w4a16_glu: h = gelu_tanh(a · Wg[j]) * (a · Wu[j]) (decode) ------------------------------
 *
 * A layer's stacked gate|up as one int4 matrix of 2n rows (gate rows 0..n-1, up rows n..2n-1;
 * s_ld the stack's scale stride, 0 = 2n rounded up to 16), Gemma 4's gating in the GEMV's
 * epilogue. Buffers: w4a16_matmul's of the stack, with out [m, n]. Roundings as matmul_glu
 * (transformers): both products to the dtype, gelu_tanh in fp32 rounded, the product rounded. */

static const tailor_shape_key w4a16_glu_keys[] = {
    {"m", -1, "rows of the activation (tokens)"},
    {"n", -1, "outputs: gate rows (the stacked weight has 2n rows)"},
    {"k", -1, "input features (a multiple of 32)"},
    {"group", 128, "columns per scale (a multiple of 32 dividing k)"},
    {"zp", 0, "1: asymmetric, with packed zero points; 0: symmetric"},
    {"s_ld", 0, "row stride of the stack's scales and zeros: 0 = 2n rounded up to 16"},
    {NULL, 0, NULL},
};

/* The stacked weight's product as a w4a16_matmul shape: n doubled. */
static tailor_shape glu_stack_shape(const tailor_shape *shape)
{
    tailor_shape s = *shape;
    (void)tailor_shape_set(&s, "n", 2 * tailor_shape_get(shape, "n", 0));
    return s;
}

static tailor_status w4a16_glu_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                        tailor_dtype dtype, tailor_op_buffers *out)
{
    tailor_shape stack = glu_stack_shape(shape);
    tailor_status st = w4a16_describe(ctx, &stack, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "w4a16_glu");
    w4a16_dims d = dims_of(shape);
    int io = find_buffer(out, "out"), bf = dtype == TAILOR_DTYPE_BF16;
    /* Each product may differ from the reference's by the int4 tolerance (the scale applied to
     * fp32 sums, w4a16_matmul's atol); h moves by |gelu'(g)| <= 1.13 times the gate's error
     * times |u|, plus |gelu(g)| <= |g| times the up's: both products are bounded in practice
     * by four of their standard deviations (sigma = 0.02 sqrt(E k), tolerance_scaled). Three
     * roundings (the products, gelu, h) may each land on the other side of a tie: rtol as
     * matmul_glu. A misplaced row or nibble moves h by about sigma^2. */
    double atol, rtol;
    tolerance(&d, dtype, &atol, &rtol);
    double sigma = W4_SCALE_SIGMA * sqrt((d.zp ? 42.5 : 21.5) * (double)d.k);
    out->b[io].count = (size_t)d.m * (size_t)d.n;
    out->b[io].atol = 2.2 * atol * 4 * sigma;
    out->b[io].rtol = bf ? 1.0 / 32 : 1.0 / 256;
    return TAILOR_OK;
}

static void w4a16_glu_fill(const tailor_shape *shape, tailor_dtype dtype,
                           const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    tailor_shape stack = glu_stack_shape(shape);
    w4a16_fill(&stack, dtype, bufs, host, seed);
}

/* h[i, j] = gelu_tanh(g) * u of the stack's products gu [m, 2n] (gate j, up n + j), with
 * transformers' roundings. */
static void glu_gate_rows(tailor_dtype dtype, const float *gu, size_t m, size_t n, float *h)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            h[i * n + j] = tailor_ref_gate(dtype, tailor_ref_round(dtype, gu[i * 2 * n + j]),
                                           tailor_ref_round(dtype, gu[i * 2 * n + n + j]));
        }
}

static tailor_status w4a16_glu_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                         tailor_dtype dtype, const tailor_op_buffers *bufs,
                                         void *const *host, float *const *ref)
{
    w4a16_dims d = dims_of(shape);
    tailor_shape stack = glu_stack_shape(shape);
    size_t m = (size_t)d.m, n = (size_t)d.n, k = (size_t)d.k;
    float *a = malloc(m * k * sizeof *a), *gu = malloc(m * 2 * n * sizeof *gu);
    tailor_status st = TAILOR_OK;
    if (!a || !gu)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                              "w4a16_glu reference: no memory for %zu x %zu products", m, 2 * n);
    int ia = find_buffer(bufs, "a");
    for (size_t i = 0; st == TAILOR_OK && i < m * k; i++)
        a[i] = tailor_dtype_load(dtype, host[ia], i);
    if (st == TAILOR_OK)
        st = w4a16_ref_product(ctx, &stack, dtype, bufs, host, a, gu);
    if (st == TAILOR_OK)
        glu_gate_rows(dtype, gu, m, n, ref[find_buffer(bufs, "out")]);
    free(a);
    free(gu);
    return st;
}

static double w4a16_glu_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    tailor_shape stack = glu_stack_shape(shape);
    w4a16_dims d = dims_of(shape);
    /* the stack's product less half its output */
    return w4a16_bytes(&stack, dtype) - (double)d.m * d.n * (double)tailor_dtype_size(dtype);
}

static double w4a16_glu_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    tailor_shape stack = glu_stack_shape(shape);
    return w4a16_flops(&stack, dtype);
}

const tailor_op tailor_op_w4a16_glu = {
    .name = "w4a16_glu",
    .spaced_timing = 1, /* session 16: +7 % W4A16 decode (docs/perf/model.md) */
    .summary = "h[m,n] = gelu_tanh(a Wg[n]^T) * (a Wu[n]^T), gate|up stacked in one int4 matrix "
               "of 2n rows: Gemma 4's gating fused into a W4A16 GEMV (decode)",
    .keys = w4a16_glu_keys,
    .describe = w4a16_glu_describe,
    .fill = w4a16_glu_fill,
    .reference = w4a16_glu_reference,
    .bytes = w4a16_glu_bytes,
    .flops = w4a16_glu_flops,
};

/* ---- w4a16_pro: the layer seam before an int4 projection, then the product --------------------
 *
 * Decode (m = 1), as matmul_pro (tuner/op_matmul.c) with w4a16_matmul's weights: x_out = x_in +
 * RMSNorm_{w_post}(t) [* scalar], a = RMSNorm_{w_next}(x_out) (mode 0, 1) or T(x_out) (mode 2),
 * y = a as the seam kernel stores it, out = a (rounded) · W^T. Buffers: those of w4a16_matmul
 * with the activation named t [k], then x_in [k] fp32, x_out [k] fp32 OUT, y [k] OUT, w_post,
 * w_next [k], scalar [1] fp32. Tolerances of x_out and y as matmul_seam's. */

static const tailor_shape_key w4a16_pro_keys[] = {
    {"m", -1, "rows of the activation (1: decode)"},
    {"n", -1, "output features"},
    {"k", -1, "input features: the hidden size, the seam's row width (a multiple of 32)"},
    W4_WEIGHT_KEYS,
    {"mode", 0, "the seam before: 0 x += norm(t), a = norm(x); 1 also x *= scalar; 2 a = x"},
    {"glu", 0, "1: the weight is a gate|up stack of 2n rows, gated as w4a16_glu (s_ld: the "
               "stack's; 0 = 2n rounded up to 16)"},
    {NULL, 0, NULL},
};

static tailor_status w4a16_pro_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                        tailor_dtype dtype, tailor_op_buffers *out)
{
    long long glu = tailor_shape_get(shape, "glu", 0);
    if (glu != 0 && glu != 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "w4a16_pro: glu=%lld must be 0 or 1", glu);
    tailor_status st = glu ? w4a16_glu_describe(ctx, shape, dtype, out)
                           : w4a16_describe(ctx, shape, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "w4a16_pro");
    w4a16_dims d = dims_of(shape);
    if (d.m != 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16_pro: m=%d, but the seam prologue serves one row (m=1)", d.m);
    if ((st = tailor_seam_mode_check(ctx, "w4a16_pro", shape)))
        return st;
    size_t k = (size_t)d.k;
    int bf = dtype == TAILOR_DTYPE_BF16, i = out->count;
    snprintf(out->b[find_buffer(out, "a")].name, sizeof out->b[0].name, "t");
    /* the row a is the seam's (rms about 1.5, |a| <= TAILOR_PRO_A_MAX: tailor_fill_seam_row),
     * and one element of it may round the other way in a correct kernel (its fp32 statistics
     * differ in the last bits): one step of a at its bound times the largest weight */
    int io = find_buffer(out, "out");
    double atol, rtol, w_max = (d.zp ? 15.0 : 8.0) * W4_SCALE_MAX;
    tolerance_scaled(&d, dtype, 2.0, TAILOR_PRO_A_MAX, &atol, &rtol);
    atol += ldexp(w_max, (int)floor(log2(TAILOR_PRO_A_MAX)) - (bf ? 7 : 10));
    if (glu) /* the gated product's bound (w4a16_glu_describe) over the normed row's sigma */
        atol *= 2.2 * 4 * 2.0 * W4_SCALE_SIGMA * sqrt((d.zp ? 42.5 : 21.5) * (double)d.k);
    out->b[io].atol = atol;
    out->b[i++] = (tailor_buffer_spec){"x_in", TAILOR_DTYPE_F32, k, TAILOR_BUF_IN, 0, 0};
    out->b[i++] = tailor_seam_x_spec("x_out", dtype, k, TAILOR_BUF_OUT);
    out->b[i++] = tailor_seam_y_spec(dtype, k);
    tailor_seam_weight_specs(&out->b[i], dtype, k); /* w_post, w_next, scalar */
    out->count = i + 3;
    return TAILOR_OK;
}

static void w4a16_pro_fill(const tailor_shape *shape, tailor_dtype dtype,
                           const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    tailor_shape stack = glu_stack_shape(shape);
    w4a16_dims d = dims_of(tailor_shape_get(shape, "glu", 0) ? &stack : shape);
    tailor_w4a16_layout lay;
    if (layout_of(NULL, &d, &lay) != TAILOR_OK)
        return; /* describe refused this shape already */
    uint64_t s = seed;
    int it = find_buffer(bufs, "t"), iz = find_buffer(bufs, "zeros");
    fill_weights(&lay, dtype, host[find_buffer(bufs, "qweight")],
                 host[find_buffer(bufs, "scales")], iz >= 0 ? host[iz] : NULL, &s);
    tailor_fill_seam_row(dtype, host[it], host[find_buffer(bufs, "x_in")], bufs->b[it].count,
                         host[find_buffer(bufs, "w_post")], host[find_buffer(bufs, "w_next")],
                         host[find_buffer(bufs, "scalar")], seed ^ 0x9e3779b9u);
}

static tailor_status w4a16_pro_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                         tailor_dtype dtype, const tailor_op_buffers *bufs,
                                         void *const *host, float *const *ref)
{
    w4a16_dims d = dims_of(shape);
    size_t k = (size_t)d.k;
    int it = find_buffer(bufs, "t"), iy = find_buffer(bufs, "y");
    float *t = malloc(k * sizeof *t), *a = malloc(k * sizeof *a);
    tailor_status st = TAILOR_OK;
    if (!t || !a)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "w4a16_pro reference: out of memory");
    for (size_t i = 0; st == TAILOR_OK && i < k; i++)
        t[i] = tailor_dtype_load(dtype, host[it], i);
    if (st == TAILOR_OK)
        st = tailor_ref_seam(ctx, dtype, (int)tailor_shape_get(shape, "mode", 0), 1, k, t,
                             host[find_buffer(bufs, "x_in")], host[find_buffer(bufs, "w_post")],
                             host[find_buffer(bufs, "w_next")],
                             ((const float *)host[find_buffer(bufs, "scalar")])[0],
                             ref[find_buffer(bufs, "x_out")], ref[iy]);
    for (size_t i = 0; st == TAILOR_OK && i < k; i++) { /* the GEMV reads the row in the dtype */
        uint16_t r;
        tailor_dtype_store(dtype, &r, 0, ref[iy][i]);
        a[i] = tailor_dtype_load(dtype, &r, 0);
    }
    float *out = ref[find_buffer(bufs, "out")];
    if (st == TAILOR_OK && tailor_shape_get(shape, "glu", 0)) { /* the stack's product, gated */
        tailor_shape stack = glu_stack_shape(shape);
        float *gu = malloc(2 * (size_t)d.n * sizeof *gu);
        st = gu ? w4a16_ref_product(ctx, &stack, dtype, bufs, host, a, gu)
                : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "w4a16_pro reference: out of memory");
        if (st == TAILOR_OK)
            glu_gate_rows(dtype, gu, 1, (size_t)d.n, out);
        free(gu);
    } else if (st == TAILOR_OK) {
        st = w4a16_ref_product(ctx, shape, dtype, bufs, host, a, out);
    }
    free(t);
    free(a);
    return st;
}

static double w4a16_pro_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims d = dims_of(shape);
    double k = (double)d.k, e = (double)tailor_dtype_size(dtype);
    double product = tailor_shape_get(shape, "glu", 0) ? w4a16_glu_bytes(shape, dtype)
                                                       : w4a16_bytes(shape, dtype);
    return product + k * (8 + 3 * e); /* + x in and out, y, the norm weights */
}

static double w4a16_pro_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims d = dims_of(shape);
    double product = tailor_shape_get(shape, "glu", 0) ? w4a16_glu_flops(shape, dtype)
                                                       : w4a16_flops(shape, dtype);
    return product + 10.0 * (double)d.k;
}

const tailor_op tailor_op_w4a16_pro = {
    .name = "w4a16_pro",
    .spaced_timing = 1, /* session 16: +7 % W4A16 decode (docs/perf/model.md) */
    .summary = "the layer seam before an int4 projection as its prologue (decode): x += "
               "RMSNorm(t), a = RMSNorm(x), then out = a W^T (W4A16)",
    .keys = w4a16_pro_keys,
    .describe = w4a16_pro_describe,
    .fill = w4a16_pro_fill,
    .reference = w4a16_pro_reference,
    .bytes = w4a16_pro_bytes,
    .flops = w4a16_pro_flops,
};

/* ---- w4a16_mlp: out = down · (gelu_tanh(a · Wg) * (a · Wu)), one launch (decode) --------------
 *
 * A layer's whole int4 MLP for one row: w4a16_glu's gate|up stack (2n rows of k columns, s_ld
 * its scale stride) into h [n], then the down projection dqweight / dscales / dzeros (k rows of n
 * columns, d_ld its scale stride, 0 = k rounded up to 16; the same group and zero-point kind) of
 * h into out [k]. Buffers: w4a16_glu's with its output named h (both are checked: a wrong h
 * would hide in out's wider tolerance), then the down weight and out. h goes into the down
 * product rounded to the dtype, as the two launches it replaces store it. */

static const tailor_shape_key w4a16_mlp_keys[] = {
    {"m", -1, "rows of the activation (1: decode)"},
    {"n", -1, "intermediate size: gate rows (the stacked gate|up has 2n rows), down columns"},
    {"k", -1, "hidden size: gate|up columns, down rows (a multiple of 32)"},
    {"group", 128, "columns per scale of both weights (a multiple of 32 dividing k and n)"},
    {"zp", 0, "1: asymmetric, with packed zero points (both weights); 0: symmetric"},
    {"s_ld", 0, "row stride of the gate|up stack's scales and zeros: 0 = 2n rounded up to 16"},
    {"d_ld", 0, "row stride of the down weight's scales and zeros: 0 = k rounded up to 16"},
    {NULL, 0, NULL},
};

/* The down projection as a w4a16_matmul of h: n = k, k = n, s_ld = d_ld. */
static w4a16_dims mlp_down_dims(const tailor_shape *shape)
{
    w4a16_dims d = dims_of(shape);
    int n = d.n;
    d.n = d.k;
    d.k = n;
    d.s_ld = (int)tailor_shape_get(shape, "d_ld", 0);
    return d;
}

static tailor_status w4a16_mlp_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                        tailor_dtype dtype, tailor_op_buffers *out)
{
    w4a16_dims d = dims_of(shape);
    if (d.m != 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16_mlp: m=%d, but the fused MLP serves one decode row (m=1)",
                                d.m);
    tailor_status st = w4a16_glu_describe(ctx, shape, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "w4a16_mlp");
    w4a16_dims dd = mlp_down_dims(shape);
    tailor_w4a16_layout lay;
    if ((st = layout_of(ctx, &dd, &lay)))
        return tailor_wrap_error(ctx, "w4a16_mlp: the down projection (%d x %d)", dd.n, dd.k);
    int ih = find_buffer(out, "out"), i = out->count, bf = dtype == TAILOR_DTYPE_BF16;
    snprintf(out->b[ih].name, sizeof out->b[ih].name, "h");
    out->b[i++] = (tailor_buffer_spec){"dqweight", TAILOR_DTYPE_I32, lay.qweight_words,
                                       TAILOR_BUF_IN, 0, 0};
    out->b[i++] = (tailor_buffer_spec){"dscales", dtype, lay.scale_count, TAILOR_BUF_IN, 0, 0};
    if (d.zp)
        out->b[i++] = (tailor_buffer_spec){"dzeros", TAILOR_DTYPE_U8, lay.zero_count,
                                           TAILOR_BUF_IN, 0, 0};
    /* out sums n products of h (rms at most sigma1^2: |gelu(g)| <= |g|, g and u independent of
     * sigma1 = 0.02 sqrt(E k)) with int4 weights: sigma_out = 0.02 sqrt(E n) sigma1^2. Besides
     * w4a16_matmul's own differences (the scale applied to fp32 sums: ~0.6 ulp of sigma_out, a
     * random-sign sum), the kernel's h may round the other way than the reference's in any
     * element (the products' fp32 sums differ in their last bits): at most one ulp of each h,
     * random in sign, about one ulp of sigma_out together. atol is about seven of those
     * standard deviations (bf16 sigma_out / 32, fp16 / 256), plus the rounding of the largest
     * single term (|h| <= (4 sigma1)^2 by the fill's bound, |w| <= 8 * 0.06); a misplaced
     * nibble, scale or row of h moves out by about sigma_out. */
    double e = d.zp ? 42.5 : 21.5;
    double sigma1 = W4_SCALE_SIGMA * sqrt(e * (double)d.k);
    double sigma_out = W4_SCALE_SIGMA * sqrt(e * (double)d.n) * sigma1 * sigma1;
    double w_max = (d.zp ? 15.0 : 8.0) * W4_SCALE_MAX, h_max = 16.0 * sigma1 * sigma1;
    out->b[i++] = (tailor_buffer_spec){"out", dtype, (size_t)d.k, TAILOR_BUF_OUT,
                                       sigma_out / (bf ? 32.0 : 256.0) +
                                           ldexp(h_max * w_max, bf ? -8 : -11),
                                       bf ? 1.0 / 128 : 1.0 / 1024};
    out->count = i;
    return TAILOR_OK;
}

static void w4a16_mlp_fill(const tailor_shape *shape, tailor_dtype dtype,
                           const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    tailor_shape stack = glu_stack_shape(shape);
    w4a16_dims d = dims_of(&stack), dd = mlp_down_dims(shape);
    tailor_w4a16_layout lay, dlay;
    if (layout_of(NULL, &d, &lay) != TAILOR_OK || layout_of(NULL, &dd, &dlay) != TAILOR_OK)
        return; /* describe refused this shape already */
    uint64_t s = seed;
    int ia = find_buffer(bufs, "a"), iz = find_buffer(bufs, "zeros");
    int idz = find_buffer(bufs, "dzeros");
    for (size_t i = 0; i < bufs->b[ia].count; i++)
        tailor_dtype_store(dtype, host[ia], i, clamped_normal(&s, (float)W4_A_MAX));
    fill_weights(&lay, dtype, host[find_buffer(bufs, "qweight")],
                 host[find_buffer(bufs, "scales")], iz >= 0 ? host[iz] : NULL, &s);
    fill_weights(&dlay, dtype, host[find_buffer(bufs, "dqweight")],
                 host[find_buffer(bufs, "dscales")], idz >= 0 ? host[idz] : NULL, &s);
}

static tailor_status w4a16_mlp_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                         tailor_dtype dtype, const tailor_op_buffers *bufs,
                                         void *const *host, float *const *ref)
{
    w4a16_dims d = dims_of(shape), dd = mlp_down_dims(shape);
    tailor_shape stack = glu_stack_shape(shape);
    size_t n = (size_t)d.n, k = (size_t)d.k;
    float *a = malloc(k * sizeof *a), *gu = malloc(2 * n * sizeof *gu), *h = malloc(n * sizeof *h);
    tailor_status st = TAILOR_OK;
    if (!a || !gu || !h)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "w4a16_mlp reference: out of memory");
    int ia = find_buffer(bufs, "a"), ih = find_buffer(bufs, "h"), idz = find_buffer(bufs, "dzeros");
    for (size_t i = 0; st == TAILOR_OK && i < k; i++)
        a[i] = tailor_dtype_load(dtype, host[ia], i);
    if (st == TAILOR_OK)
        st = w4a16_ref_product(ctx, &stack, dtype, bufs, host, a, gu);
    if (st == TAILOR_OK) {
        glu_gate_rows(dtype, gu, 1, n, ref[ih]);
        for (size_t j = 0; j < n; j++) /* the down product reads h as stored: in the dtype */
            h[j] = tailor_ref_round(dtype, ref[ih][j]);
        st = w4a16_ref_product_of(ctx, &dd, dtype, host[find_buffer(bufs, "dqweight")],
                                  host[find_buffer(bufs, "dscales")],
                                  idz >= 0 ? host[idz] : NULL, h, ref[find_buffer(bufs, "out")]);
    }
    free(a);
    free(gu);
    free(h);
    return st;
}

static double w4a16_mlp_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims dd = mlp_down_dims(shape);
    tailor_shape down = {0};
    (void)tailor_shape_set(&down, "m", 1);
    (void)tailor_shape_set(&down, "n", dd.n);
    (void)tailor_shape_set(&down, "k", dd.k);
    (void)tailor_shape_set(&down, "group", dd.group);
    (void)tailor_shape_set(&down, "zp", dd.zp);
    /* both weights, a and out; h once (written, then read back from L2) */
    return w4a16_glu_bytes(shape, dtype) + w4a16_bytes(&down, dtype) -
           (double)dd.k * (double)tailor_dtype_size(dtype);
}

static double w4a16_mlp_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    w4a16_dims d = dims_of(shape);
    return w4a16_glu_flops(shape, dtype) + 2.0 * (double)d.n * (double)d.k;
}

const tailor_op tailor_op_w4a16_mlp = {
    .name = "w4a16_mlp",
    .spaced_timing = 1, /* as the two W4A16 GEMVs it replaces */
    .summary = "out[k] = Wd (gelu_tanh(a Wg^T) * (a Wu^T)): a layer's whole int4 MLP for one "
               "decode row in one launch (gate|up stacked, the two phases meet at a grid "
               "barrier)",
    .keys = w4a16_mlp_keys,
    .describe = w4a16_mlp_describe,
    .fill = w4a16_mlp_fill,
    .reference = w4a16_mlp_reference,
    .bytes = w4a16_mlp_bytes,
    .flops = w4a16_mlp_flops,
};
