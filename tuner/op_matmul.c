/* op_matmul.c — the op "matmul": out[m, n] = a[m, k] · w[n, k]^T (PyTorch Linear layout), a
 * and w both in the dtype (fp16 or bf16), fp32 accumulation, one rounding to the dtype; and its
 * C reference (an fp32 matmul of the dtype values). Also the ops with an epilogue: "matmul_glu",
 * the same product with Gemma 4's gelu_tanh gating (decode: gate|up in one pass), and
 * "matmul_seam", a projection back to the hidden size followed by the layer seam. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "parallel.h"

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
 * boundary still passes. Rounded to nearest, that noise (any summation order, split-k
 * included) is about 2^-24 * sqrt(k) * |terms|, below sigma / 4096 (bf16) or sigma / 32768
 * (fp16), where sigma = 0.02 * sqrt(k) is the output's standard deviation under fill's
 * distributions. Tensor cores do not round their fp32 accumulation to nearest: an mma step
 * may drop up to an ulp of the running sum, always the same way, so the error grows with the
 * number of steps, not with its square root — up to (k / 8) * 2^-23 * sigma with m16n8k8
 * steps. atol is the sum of the two (the second for the T4 profile's mma kernels at k = 12288
 * fp16: rehearsed on an H100 they were 1.07e-4 off at an output of 0.027, where the first term
 * alone allowed 9.4e-5); it only matters for outputs that cancel toward zero.
 * A wrong element, a missed k tile or a swapped row moves an output by about sigma, over a
 * thousand times the tolerance at every k up to 60,000 (Gemma 4's largest is 21,504). */
static void tolerance(const matmul_dims *d, tailor_dtype dtype, double *atol, double *rtol)
{
    double sigma = MATMUL_W_SIGMA * sqrt((double)d->k);
    int bf = dtype == TAILOR_DTYPE_BF16;
    *atol = sigma / (bf ? 4096.0 : 32768.0) + ldexp(sigma * (double)d->k / 8.0, -23);
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

/* Uniform in [-sqrt(3), sqrt(3)): mean 0, variance 1; cheap enough for a 400M-element weight. */
static float next_unit(uint64_t *s)
{
    return ((float)(tailor_fill_u64(s) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f;
}

/* One buffer of the fill: element i takes the stream's value number first + i. */
typedef struct unit_fill {
    tailor_dtype dtype;
    void *dst;
    uint64_t first; /* the stream's state before element 0 */
    int outliers;   /* every 61st element x8 */
    float scale;
} unit_fill;

static void unit_fill_range(void *user, size_t i0, size_t i1)
{
    const unit_fill *f = user;
    uint64_t s = f->first + (uint64_t)i0 * TAILOR_FILL_U64_STEP;
    for (size_t i = i0; i < i1; i++)
        tailor_dtype_store(f->dtype, f->dst, i,
                           next_unit(&s) * f->scale * (f->outliers && i % 61 == 7 ? 8.0f : 1.0f));
}

/* Activations with variance 1 and a few large values (every 61st is x8, as real activations
 * have outliers); weights with sigma 0.02. One stream: the weights follow the activations. The
 * buffers fill on every CPU (the LM head's weight is 400M values). */
static void matmul_fill(const tailor_shape *shape, tailor_dtype dtype,
                        const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    (void)shape;
    size_t na = bufs->b[0].count;
    unit_fill a = {dtype, host[0], seed, 1, 1.0f};
    unit_fill w = {dtype, host[1], seed + (uint64_t)na * TAILOR_FILL_U64_STEP, 0,
                   (float)MATMUL_W_SIGMA};
    tailor_fill_parallel(na, unit_fill_range, &a);
    tailor_fill_parallel(bufs->b[1].count, unit_fill_range, &w);
}

/* Converts rows [row0, row0 + rows) of a [*, k] dtype matrix to floats. */
static void rows_to_f32(tailor_dtype dtype, const void *src, size_t row0, size_t rows, size_t k,
                        float *dst)
{
    for (size_t i = 0; i < rows * k; i++)
        dst[i] = tailor_dtype_load(dtype, src, row0 * k + i);
}

/* out = a · w^T in tiles of TILE rows of a and of w, so that a task holds only two [TILE, k]
 * float tiles (the LM head's weight would be 1.6 GB as floats); one task per column tile, on
 * every CPU. */
enum { REF_TILE = 64 };

typedef struct matmul_ref_job {
    tailor_dtype dtype;
    const void *a, *w;
    size_t m, n, k;
    float *out;
    atomic_int failed; /* a task found no memory for its tiles */
} matmul_ref_job;

static void matmul_ref_task(void *user, int task)
{
    matmul_ref_job *j = user;
    size_t k = j->k, n0 = (size_t)task * REF_TILE;
    size_t nt = j->n - n0 < REF_TILE ? j->n - n0 : REF_TILE;
    size_t mt_max = j->m < REF_TILE ? j->m : REF_TILE;
    float *at = malloc(mt_max * k * sizeof *at), *wt = malloc(nt * k * sizeof *wt);
    if (!at || !wt) {
        atomic_store(&j->failed, 1);
        free(at);
        free(wt);
        return;
    }
    rows_to_f32(j->dtype, j->w, n0, nt, k, wt);
    for (size_t m0 = 0; m0 < j->m; m0 += REF_TILE) {
        size_t mt = j->m - m0 < REF_TILE ? j->m - m0 : REF_TILE;
        rows_to_f32(j->dtype, j->a, m0, mt, k, at);
        for (size_t i = 0; i < mt; i++)
            for (size_t c = 0; c < nt; c++)
                j->out[(m0 + i) * j->n + n0 + c] = tailor_ref_dot(at + i * k, wt + c * k, k);
    }
    free(at);
    free(wt);
}

static tailor_status matmul_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                      tailor_dtype dtype, const tailor_op_buffers *bufs,
                                      void *const *host, float *const *ref)
{
    (void)bufs;
    matmul_dims d = dims_of(shape);
    matmul_ref_job j = {.dtype = dtype, .a = host[0], .w = host[1], .m = (size_t)d.m,
                        .n = (size_t)d.n, .k = (size_t)d.k, .out = ref[2]};
    atomic_init(&j.failed, 0);
    tailor_parallel_for((int)((j.n + REF_TILE - 1) / REF_TILE), matmul_ref_task, &j);
    if (atomic_load(&j.failed))
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                "matmul reference: no memory for two %d x %zu tiles", REF_TILE, j.k);
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

/* ---- matmul_glu: h = gelu_tanh(a · w[j]) * u[j] ------------------------------------------------
 *
 * Buffers: a [m, k]; w [2n, k] (ext = 0: gate rows 0..n-1, up rows n..2n-1, the stacked gate|up
 * of a layer) or [n, k] (ext = 1: the PLE gate); u [m, u_ld] (ext = 1 only: the layer's PLE
 * input, u_ld = 0 meaning n); out [m, n]. Roundings as transformers: the gate and up
 * projections to the dtype, gelu_tanh in fp32 rounded, the product rounded. */

enum { GLU_A = 0, GLU_W, GLU_OUT, GLU_U };

static const tailor_shape_key glu_keys[] = {
    {"m", -1, "rows of the activation (tokens)"},
    {"n", -1, "outputs (gate rows; the intermediate size, or 256 for PLE)"},
    {"k", -1, "input features (a multiple of 8)"},
    {"ext", 0, "0: the up rows follow the gate rows in w; 1: u comes from a buffer"},
    {"u_ld", 0, "ext=1: row stride of u in elements (0: n)"},
    {NULL, 0, NULL},
};

static tailor_status glu_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                  tailor_op_buffers *out)
{
    long long ext = tailor_shape_get(shape, "ext", 0), uld = tailor_shape_get(shape, "u_ld", 0);
    tailor_status st = matmul_describe(ctx, shape, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "matmul_glu");
    matmul_dims d = dims_of(shape);
    if (ext != 0 && ext != 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "matmul_glu: ext=%lld must be 0 or 1",
                                ext);
    if (uld == 0)
        uld = d.n;
    if (ext && uld < d.n)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "matmul_glu: u_ld=%lld is less than n=%lld", uld, d.n);
    size_t m = (size_t)d.m, n = (size_t)d.n, k = (size_t)d.k;
    int bf = dtype == TAILOR_DTYPE_BF16;
    /* |h| <= ~3 |u|: one ulp of the gate (summation order) moves gelu by at most ~1.1 ulp of
     * |g|, relatively more only where gelu is tiny (large negative g), which atol covers; two
     * more roundings (gelu, product). A wrong element is off by O(0.1). */
    double atol = bf ? 4e-3 : 5e-4, rtol = bf ? 1.0 / 32 : 1.0 / 256;
    out->count = ext ? 4 : 3;
    out->b[GLU_A] = (tailor_buffer_spec){"a", dtype, m * k, TAILOR_BUF_IN, 0, 0};
    out->b[GLU_W] = (tailor_buffer_spec){"w", dtype, (ext ? 1 : 2) * n * k, TAILOR_BUF_IN, 0, 0};
    out->b[GLU_OUT] = (tailor_buffer_spec){"out", dtype, m * n, TAILOR_BUF_OUT, atol, rtol};
    if (ext)
        out->b[GLU_U] = (tailor_buffer_spec){"u", dtype, (m - 1) * (size_t)uld + n, TAILOR_BUF_IN,
                                             0, 0};
    return TAILOR_OK;
}

static void glu_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                     void *const *host, uint64_t seed)
{
    matmul_fill(shape, dtype, bufs, host, seed);
    if (bufs->count > GLU_U) {
        uint64_t s = seed ^ 0x5bd1e995u;
        for (size_t i = 0; i < bufs->b[GLU_U].count; i++)
            tailor_dtype_store(dtype, host[GLU_U], i, next_unit(&s) * 2.0f);
    }
}

static tailor_status glu_reference(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                   const tailor_op_buffers *bufs, void *const *host,
                                   float *const *ref)
{
    matmul_dims d = dims_of(shape);
    size_t m = (size_t)d.m, n = (size_t)d.n, k = (size_t)d.k;
    int ext = bufs->count > GLU_U;
    size_t uld = (size_t)tailor_shape_get(shape, "u_ld", 0);
    uld = uld ? uld : n;
    float *av = malloc(m * k * sizeof *av), *gw = malloc(k * sizeof *gw), *uw = malloc(k * sizeof *uw);
    if (!av || !gw || !uw) {
        free(av);
        free(gw);
        free(uw);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "matmul_glu reference: out of memory");
    }
    rows_to_f32(dtype, host[GLU_A], 0, m, k, av);
    for (size_t j = 0; j < n; j++) {
        rows_to_f32(dtype, host[GLU_W], j, 1, k, gw);
        if (!ext)
            rows_to_f32(dtype, host[GLU_W], n + j, 1, k, uw);
        for (size_t i = 0; i < m; i++) {
            float g = tailor_ref_round(dtype, tailor_ref_dot(av + i * k, gw, k));
            float u = ext ? tailor_dtype_load(dtype, host[GLU_U], i * uld + j)
                          : tailor_ref_round(dtype, tailor_ref_dot(av + i * k, uw, k));
            ref[GLU_OUT][i * n + j] = tailor_ref_gate(dtype, g, u);
        }
    }
    free(av);
    free(gw);
    free(uw);
    return TAILOR_OK;
}

static double glu_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    matmul_dims d = dims_of(shape);
    double m = (double)d.m, n = (double)d.n, k = (double)d.k;
    double rows = tailor_shape_get(shape, "ext", 0) ? n : 2 * n;
    return (m * k + rows * k + 2 * m * n) * (double)tailor_dtype_size(dtype);
}

static double glu_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    matmul_dims d = dims_of(shape);
    double rows = tailor_shape_get(shape, "ext", 0) ? 1.0 : 2.0;
    return 2.0 * rows * (double)d.m * (double)d.n * (double)d.k;
}

const tailor_op tailor_op_matmul_glu = {
    .name = "matmul_glu",
    .summary = "h[m,n] = gelu_tanh(a w[n]^T) * (a w[n+j]^T, or u): Gemma 4's gating fused into a "
               "16-bit matmul",
    .keys = glu_keys,
    .describe = glu_describe,
    .fill = glu_fill,
    .reference = glu_reference,
    .bytes = glu_bytes,
    .flops = glu_flops,
};

/* ---- matmul_seam: t = a · w^T, then the layer seam on t ------------------------------------
 *
 * Buffers: a [m, k], w [n, k] (n = the hidden size: o_proj, down_proj, per_layer_projection),
 * t [m, n] OUT (the product, rounded: what residual_norm would have read), and the seam's
 * x [m, n] fp32 INOUT, w_post, w_next [n], scalar [1] fp32, y [m, n] OUT with mode 0..2 as
 * residual_norm (3, the norm alone, has no product before it). */

enum { SM_A = 0, SM_W, SM_T, SM_X, SM_W_POST, SM_W_NEXT, SM_SCALAR, SM_Y };

static const tailor_shape_key seam_keys[] = {
    {"m", -1, "rows of the activation (tokens)"},
    {"n", -1, "output features: the hidden size (the seam's row width)"},
    {"k", -1, "input features (a multiple of 8)"},
    {"mode", 0, "the seam: 0 x += norm(t), y = norm(x); 1 also x *= scalar; 2 y = x"},
    {NULL, 0, NULL},
};

static tailor_status seam_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_op_buffers *out)
{
    tailor_status st = matmul_describe(ctx, shape, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "matmul_seam");
    if ((st = tailor_seam_mode_check(ctx, "matmul_seam", shape)))
        return st;
    matmul_dims d = dims_of(shape);
    size_t m = (size_t)d.m, n = (size_t)d.n, k = (size_t)d.k;
    double atol, rtol;
    tolerance(&d, dtype, &atol, &rtol);
    /* x and y: tailor_seam_x_spec / tailor_seam_y_spec (op.h) say why */
    out->count = 8;
    out->b[SM_A] = (tailor_buffer_spec){"a", dtype, m * k, TAILOR_BUF_IN, 0, 0};
    out->b[SM_W] = (tailor_buffer_spec){"w", dtype, n * k, TAILOR_BUF_IN, 0, 0};
    out->b[SM_T] = (tailor_buffer_spec){"t", dtype, m * n, TAILOR_BUF_OUT, atol, rtol};
    out->b[SM_X] = tailor_seam_x_spec("x", dtype, m * n, TAILOR_BUF_INOUT);
    tailor_seam_weight_specs(&out->b[SM_W_POST], dtype, n); /* w_post, w_next, scalar */
    out->b[SM_Y] = tailor_seam_y_spec(dtype, m * n);
    return TAILOR_OK;
}

static void seam_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                      void *const *host, uint64_t seed)
{
    matmul_fill(shape, dtype, bufs, host, seed); /* a and w, as the plain matmul's */
    tailor_fill_seam(dtype, host[SM_X], bufs->b[SM_X].count, host[SM_W_POST], host[SM_W_NEXT],
                     bufs->b[SM_W_POST].count, host[SM_SCALAR], seed ^ 0x9e3779b9u);
}

static tailor_status seam_reference(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                    const tailor_op_buffers *bufs, void *const *host,
                                    float *const *ref)
{
    matmul_dims d = dims_of(shape);
    size_t m = (size_t)d.m, n = (size_t)d.n;
    /* the product as the plain matmul's reference, into ref[t]; the seam reads it rounded */
    float *refs[3] = {NULL, NULL, ref[SM_T]};
    tailor_status st = matmul_reference(ctx, shape, dtype, bufs, host, refs);
    if (st)
        return st;
    float *t = malloc(m * n * sizeof *t);
    if (!t)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "matmul_seam reference: out of memory");
    for (size_t i = 0; i < m * n; i++)
        t[i] = tailor_ref_round(dtype, ref[SM_T][i]);
    st = tailor_ref_seam(ctx, dtype, (int)tailor_shape_get(shape, "mode", 0), m, n, t,
                         host[SM_X], host[SM_W_POST], host[SM_W_NEXT],
                         ((const float *)host[SM_SCALAR])[0], ref[SM_X], ref[SM_Y]);
    free(t);
    return st;
}

static double seam_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    matmul_dims d = dims_of(shape);
    double m = (double)d.m, n = (double)d.n, e = (double)tailor_dtype_size(dtype);
    return matmul_bytes(shape, dtype) + m * n * (8 + e) + 2 * n * e;
}

static double seam_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    matmul_dims d = dims_of(shape);
    return matmul_flops(shape, dtype) + 10.0 * (double)d.m * (double)d.n;
}

const tailor_op tailor_op_matmul_seam = {
    .name = "matmul_seam",
    .summary = "t[m,n] = a w^T (16-bit), then Gemma 4's layer seam on t: fp32 residual += "
               "RMSNorm(t), next input = RMSNorm(residual)",
    .keys = seam_keys,
    .describe = seam_describe,
    .fill = seam_fill,
    .reference = seam_reference,
    .bytes = seam_bytes,
    .flops = seam_flops,
};

/* ---- matmul_pro: the layer seam before a 16-bit projection, then the product ------------------
 *
 * Decode (m = 1): x_out = x_in + RMSNorm_{w_post}(t) [* scalar] and a = RMSNorm_{w_next}(x_out)
 * (mode 0, 1), or a = T(x_out) (mode 2), as residual_norm's reference; a rounded to the dtype;
 * then out = a · w^T (glu 0), gelu_tanh(a · w[j]) * (a · w[n + j]) (glu 1, stacked gate|up) or
 * gelu_tanh(a · w[j]) * u[j] (glu 2), as matmul / matmul_glu. The seam's row width is k.
 * Buffers: t [k], x_in [k] fp32, x_out [k] fp32 OUT, y [k] OUT (a as the seam kernel stores
 * it), w_post, w_next [k], scalar [1] fp32,
 * w [n or 2n, k], u [n] (glu 2: one row of the PLE input, stride u_ld), out [n]. */

enum { PRO_T = 0, PRO_X_IN, PRO_X_OUT, PRO_Y, PRO_W_POST, PRO_W_NEXT, PRO_SCALAR, PRO_W, PRO_OUT,
       PRO_U };

static const tailor_shape_key pro_keys[] = {
    {"m", -1, "rows of the activation (1: decode)"},
    {"n", -1, "output features (gate rows with glu 1 or 2)"},
    {"k", -1, "input features: the hidden size, the seam's row width (a multiple of 8)"},
    {"mode", 0, "the seam before: 0 x += norm(t), a = norm(x); 1 also x *= scalar; 2 a = x"},
    {"glu", 0, "0 plain; 1 gate|up stacked in w, gated; 2 gate gated with u from a buffer"},
    {"u_ld", 0, "glu=2: length of u's row (0: n)"},
    {NULL, 0, NULL},
};

static tailor_status pro_describe(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                  tailor_op_buffers *out)
{
    long long glu = tailor_shape_get(shape, "glu", 0);
    long long uld = tailor_shape_get(shape, "u_ld", 0);
    tailor_status st = matmul_describe(ctx, shape, dtype, out);
    if (st)
        return tailor_wrap_error(ctx, "matmul_pro");
    matmul_dims d = dims_of(shape);
    if (d.m != 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "matmul_pro: m=%lld, but the seam prologue serves one row (m=1)",
                                d.m);
    if ((st = tailor_seam_mode_check(ctx, "matmul_pro", shape)))
        return st;
    if (glu < 0 || glu > 2)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "matmul_pro: glu=%lld must be 0, 1 or 2",
                                glu);
    if (uld == 0)
        uld = d.n;
    if (glu == 2 && uld < d.n)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "matmul_pro: u_ld=%lld is less than n=%lld", uld, d.n);
    size_t n = (size_t)d.n, k = (size_t)d.k;
    int bf = dtype == TAILOR_DTYPE_BF16;
    /* out as matmul (glu 0) or matmul_glu, plus one rounding step of a: where the fp32
     * statistics of two correct kernels differ in the last bits, an element of a (<= PRO_A_MAX,
     * tailor_fill_seam_row) may round the other way, moving a product by that step times a
     * weight (<= sqrt(3) sigma_w), and a gated one by up to ~4 times that. x_out as
     * matmul_seam's x. */
    double atol, rtol;
    tolerance(&d, dtype, &atol, &rtol);
    if (glu) {
        atol = bf ? 4e-3 : 5e-4;
        rtol = bf ? 1.0 / 32 : 1.0 / 256;
    }
    double step = ldexp(1.0, (int)floor(log2(TAILOR_PRO_A_MAX)) - (bf ? 7 : 10));
    atol += (glu ? 4.0 : 1.0) * step * 1.7320508 * MATMUL_W_SIGMA;
    memset(out, 0, sizeof *out);
    out->count = glu == 2 ? 10 : 9;
    out->b[PRO_T] = (tailor_buffer_spec){"t", dtype, k, TAILOR_BUF_IN, 0, 0};
    out->b[PRO_X_IN] = (tailor_buffer_spec){"x_in", TAILOR_DTYPE_F32, k, TAILOR_BUF_IN, 0, 0};
    out->b[PRO_X_OUT] = tailor_seam_x_spec("x_out", dtype, k, TAILOR_BUF_OUT);
    out->b[PRO_Y] = tailor_seam_y_spec(dtype, k);
    tailor_seam_weight_specs(&out->b[PRO_W_POST], dtype, k); /* w_post, w_next, scalar */
    out->b[PRO_W] = (tailor_buffer_spec){"w", dtype, (glu == 1 ? 2 : 1) * n * k, TAILOR_BUF_IN,
                                         0, 0};
    out->b[PRO_OUT] = (tailor_buffer_spec){"out", dtype, n, TAILOR_BUF_OUT, atol, rtol};
    if (glu == 2)
        out->b[PRO_U] = (tailor_buffer_spec){"u", dtype, n, TAILOR_BUF_IN, 0, 0}; /* one row */
    return TAILOR_OK;
}

static void pro_fill(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                     void *const *host, uint64_t seed)
{
    (void)shape;
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[PRO_W].count; i++)
        tailor_dtype_store(dtype, host[PRO_W], i, next_unit(&s) * (float)MATMUL_W_SIGMA);
    tailor_fill_seam_row(dtype, host[PRO_T], host[PRO_X_IN], bufs->b[PRO_T].count,
                         host[PRO_W_POST], host[PRO_W_NEXT], host[PRO_SCALAR], seed ^ 0x9e3779b9u);
    if (bufs->count > PRO_U)
        for (size_t i = 0; i < bufs->b[PRO_U].count; i++)
            tailor_dtype_store(dtype, host[PRO_U], i, next_unit(&s) * 2.0f);
}

static tailor_status pro_reference(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                                   const tailor_op_buffers *bufs, void *const *host,
                                   float *const *ref)
{
    (void)bufs;
    matmul_dims d = dims_of(shape);
    size_t n = (size_t)d.n, k = (size_t)d.k;
    int glu = (int)tailor_shape_get(shape, "glu", 0);
    float *t = malloc(k * sizeof *t), *a = malloc(k * sizeof *a), *w = malloc(k * sizeof *w);
    float *u = malloc(k * sizeof *u);
    tailor_status st = TAILOR_OK;
    if (!t || !a || !w || !u)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "matmul_pro reference: out of memory");
    if (st == TAILOR_OK) {
        for (size_t i = 0; i < k; i++)
            t[i] = tailor_dtype_load(dtype, host[PRO_T], i);
        st = tailor_ref_seam(ctx, dtype, (int)tailor_shape_get(shape, "mode", 0), 1, k, t,
                             host[PRO_X_IN], host[PRO_W_POST], host[PRO_W_NEXT],
                             ((const float *)host[PRO_SCALAR])[0], ref[PRO_X_OUT], a);
    }
    for (size_t i = 0; st == TAILOR_OK && i < k; i++) {
        ref[PRO_Y][i] = a[i];
        a[i] = tailor_ref_round(dtype, a[i]); /* the GEMV reads the row in the dtype */
    }
    for (size_t j = 0; st == TAILOR_OK && j < n; j++) {
        rows_to_f32(dtype, host[PRO_W], j, 1, k, w);
        float g = tailor_ref_dot(a, w, k);
        if (glu == 0) {
            ref[PRO_OUT][j] = g;
            continue;
        }
        float uv;
        if (glu == 1) {
            rows_to_f32(dtype, host[PRO_W], n + j, 1, k, u);
            uv = tailor_ref_round(dtype, tailor_ref_dot(a, u, k));
        } else {
            uv = tailor_dtype_load(dtype, host[PRO_U], j);
        }
        ref[PRO_OUT][j] = tailor_ref_gate(dtype, tailor_ref_round(dtype, g), uv);
    }
    free(t);
    free(a);
    free(w);
    free(u);
    return st;
}

static double pro_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    matmul_dims d = dims_of(shape);
    double n = (double)d.n, k = (double)d.k, e = (double)tailor_dtype_size(dtype);
    double rows = tailor_shape_get(shape, "glu", 0) == 1 ? 2 * n : n;
    /* the weight, t, y, x in and out, the two norm weights, the output (and u) */
    return (rows * k + 4 * k + n) * e + 8 * k + (tailor_shape_get(shape, "glu", 0) == 2 ? n * e : 0);
}

static double pro_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    matmul_dims d = dims_of(shape);
    double rows = tailor_shape_get(shape, "glu", 0) == 1 ? 2.0 : 1.0;
    return 2.0 * rows * (double)d.n * (double)d.k + 10.0 * (double)d.k;
}

const tailor_op tailor_op_matmul_pro = {
    .name = "matmul_pro",
    .summary = "the layer seam before a 16-bit projection as its prologue (decode): x += "
               "RMSNorm(t), a = RMSNorm(x), then out = a w^T (or gated, as matmul_glu)",
    .keys = pro_keys,
    .describe = pro_describe,
    .fill = pro_fill,
    .reference = pro_reference,
    .bytes = pro_bytes,
    .flops = pro_flops,
};
