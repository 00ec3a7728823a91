/* gpu_weights.c — creating a GPU Gemma 4: weights streamed from the mapped checkpoint (or made on
 * the GPU for benchmarks), the KV cache, activations and pinned buffers, then the warm-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4_gpu.h"
#include "half.h"
#include "upload.h"
#include "w4a16.h"

#define STAGING_BYTES (8u << 20)

static tailor_status dalloc(tailor_ctx *ctx, tailor_gemma4_gpu *g, size_t bytes, size_t *acct,
                            CUdeviceptr *out)
{
    *out = 0;
    bytes = (bytes + 255) & ~(size_t)255;
    if (g->dry) { /* a distinct, aligned, never-dereferenced address */
        *out = g->dry_next;
        g->dry_next += bytes;
        *acct += bytes;
        return TAILOR_OK;
    }
    if (g->nallocs == G4G_MAX_ALLOCS)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4 gpu: too many device buffers");
    tailor_status st = tailor_gpu_alloc(ctx, g->gpu, bytes, out);
    if (st)
        return tailor_wrap_error(ctx, "gemma4 gpu: device memory");
    g->allocs[g->nallocs++] = *out;
    *acct += bytes;
    return tailor_gpu_memset8(ctx, g->gpu, *out, 0, bytes);
}

/* Deterministic pseudo-random device data (op gemma4_fill: mode 0 hashed words, mode 1 dtype
 * values around off_e6 / 1e6 spread by amp_e6 / 1e9 per step), for random-weight models. */
static tailor_status rnd_fill(tailor_ctx *ctx, tailor_gemma4_gpu *g, CUdeviceptr p, size_t bytes,
                              int mode, long long amp_e6, long long off_e6)
{
    if (g->dry && g->like)
        return TAILOR_OK; /* mirroring a checkpoint: its weights are uploaded, not made */
    tailor_shape s = {0}, t = {0};
    g4g_put(&s, "words", (long long)(bytes / 4));
    g4g_put(&s, "mode", mode);
    g4g_put(&s, "seed", (long long)(g->seed++ & 0x7fffffff));
    g4g_put(&s, "amp_e6", amp_e6);
    g4g_put(&s, "off_e6", off_e6);
    g4g_put(&t, "words", 1 << 20);
    g4g_put(&t, "mode", 1);
    tailor_binding b[] = {{"out", p}};
    return g4g_run(ctx, g, "gemma4_fill", &t, &s, b, 1);
}

/* Where a matrix that is part of a stack (q|k|v, gate|up) lands: its rows of the stack's dense
 * buffer (w), or of its int4 buffers (qw; sc and zs at its first column of the stack's [G, s_ld]
 * scale rows). All zero: a buffer of its own. */
typedef struct g4g_place {
    CUdeviceptr w, qw, sc, zs, order;
    int s_ld;
} g4g_place;

/* ---- from a checkpoint ------------------------------------------------------------------------ */

static tailor_status up_vec(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                            const float *v, int n, CUdeviceptr *out)
{
    if (!v)
        return TAILOR_OK;
    tailor_status st = dalloc(ctx, g, (size_t)n * g->es, &g->weight_bytes, out);
    return st ? st : tailor_upload_convert(ctx, u, *out, v, TAILOR_DTYPE_F32, g->dt, (size_t)n);
}

static tailor_status up_f32(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                            const float *v, int n, CUdeviceptr *out)
{
    tailor_status st = dalloc(ctx, g, (size_t)n * 4, &g->weight_bytes, out);
    return st ? st : tailor_upload_convert(ctx, u, *out, v, TAILOR_DTYPE_F32, TAILOR_DTYPE_F32,
                                           (size_t)n);
}

/* Layer i's RoPE inverse frequencies as fp32 [head_dim / 2] on the device: through the staging
 * upload u, or (u NULL) straight, or not at all in a dry run. The host copy is sized by the
 * layer's head_dim, which is whatever the checkpoint holds, and lives only while this runs. */
static tailor_status up_inv_freq(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u, int i,
                                 CUdeviceptr *out)
{
    int half = g->cfg.layer[i].head_dim / 2;
    float *f = malloc((size_t)(half > 0 ? half : 1) * sizeof *f);
    if (!f)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: out of memory");
    tailor_gemma4_rope_freqs(&g->cfg, i, f);
    tailor_status st;
    if (u) {
        st = up_f32(ctx, g, u, f, half, out);
    } else {
        st = dalloc(ctx, g, (size_t)half * 4, &g->weight_bytes, out);
        if (st == TAILOR_OK && !g->dry)
            st = tailor_gpu_upload(ctx, g->gpu, *out, f, (size_t)half * 4);
    }
    free(f);
    return st;
}

/* The int4 buffers of one matrix: its own, or (at != NULL with at->qw) its place in a stack,
 * whose stride lay takes on. */
static tailor_status alloc_w4(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_w4a16_layout *lay,
                              const g4g_place *at, g4g_mat *out, tailor_upload_w4a16_dst *dst)
{
    tailor_status st = TAILOR_OK;
    if (at && at->qw) {
        st = tailor_w4a16_layout_set_ld(ctx, lay, at->s_ld);
        out->qw = at->qw;
        out->sc = at->sc;
        out->zs = at->zs;
        out->s_ld = at->s_ld;
    } else {
        st = dalloc(ctx, g, lay->qweight_words * 4, &g->weight_bytes, &out->qw);
        if (st == TAILOR_OK)
            st = dalloc(ctx, g, lay->scale_count * g->es, &g->weight_bytes, &out->sc);
        if (st == TAILOR_OK && lay->has_zp)
            st = dalloc(ctx, g, lay->zero_count, &g->weight_bytes, &out->zs);
    }
    dst->qweight = out->qw;
    dst->scales = out->sc;
    dst->zeros = out->zs;
    out->int4 = 1;
    out->group = lay->group;
    out->zp = lay->has_zp;
    return st;
}

static int form_of(const tailor_gemma4_gpu *g, const g4_mat *m, int n, int k, int quantizable,
                   int *group, int *zp);

/* The group size of an int4 matrix with weight_g_idx: k over its scale columns (0 when they do
 * not divide k). */
static int g_idx_group(const g4_mat *m) { return m->k % m->groups == 0 ? m->k / m->groups : 0; }

/* The activation order of an int4 matrix with weight_g_idx (tailor_w4a16_order_from_groups):
 * 1 and *order (malloc'd, k entries; NULL when order is NULL) when each of its groups holds
 * g_idx_group columns; 0 when not (it runs dequantized); -1 when out of memory. */
static int mat_order(const g4_mat *m, int32_t **order)
{
    int k = m->k, ok = -1;
    int32_t *gi = malloc((size_t)k * sizeof *gi), *o = malloc((size_t)k * sizeof *o);
    if (gi && o) {
        for (int c = 0; c < k; c++)
            gi[c] = (int32_t)tailor_st_load_i64(m->g_idx, c);
        ok = tailor_w4a16_order_from_groups(k, g_idx_group(m), gi, o);
    }
    free(gi);
    if (ok == 1 && order)
        *order = o;
    else
        free(o);
    return ok;
}

/* Whether two int4 matrices with weight_g_idx have the same one (so one gathered input serves
 * both: parts of one stack). */
static int same_g_idx(const g4_mat *a, const g4_mat *b)
{
    if (a->k != b->k || a->groups != b->groups)
        return 0;
    for (int c = 0; c < a->k; c++)
        if (tailor_st_load_i64(a->g_idx, c) != tailor_st_load_i64(b->g_idx, c))
            return 0;
    return 1;
}

/* The device buffer of a matrix's activation order: its stack's (at->order), or its own. */
static tailor_status alloc_order(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_place *at,
                                 int k, g4g_mat *out)
{
    if (k > g->order_k)
        g->order_k = k;
    if (at && at->order) {
        out->order = at->order;
        return TAILOR_OK;
    }
    return dalloc(ctx, g, (size_t)k * 4, &g->weight_bytes, &out->order);
}

/* An int4 matrix in activation order: its columns stored in that order (uploaded with it), the
 * order beside them for the gather before its product. */
static tailor_status up_mat_ordered(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                                    const g4_mat *m, tailor_dtype sd, const char *what,
                                    const g4g_place *into, g4g_mat *out)
{
    tailor_w4a16_layout lay;
    tailor_upload_w4a16_dst dst;
    int32_t *order = NULL;
    tailor_status st = TAILOR_OK;
    if (mat_order(m, &order) != 1)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: %s: out of memory", what);
    if ((st = tailor_w4a16_layout_init(ctx, m->n, m->k, g_idx_group(m), m->zp != NULL, &lay)))
        st = tailor_wrap_error(ctx, "gemma4 gpu: %s", what);
    if (st == TAILOR_OK)
        st = alloc_w4(ctx, g, &lay, into, out, &dst);
    if (st == TAILOR_OK)
        st = alloc_order(ctx, g, into, m->k, out);
    g->ordered++;
    if (st == TAILOR_OK) /* a stack's parts share one order: each writes the same values */
        st = tailor_gpu_upload(ctx, g->gpu, out->order, order, (size_t)m->k * sizeof *order);
    if (st == TAILOR_OK)
        st = tailor_upload_w4a16(ctx, u, &lay, m->packed->data, m->scale->data, sd,
                                 m->zp ? m->zp->data : NULL, order, g->dt, &dst);
    free(order);
    return st;
}

/* An int4 matrix the kernels cannot read (form_of -1: a weight_g_idx with a group of another
 * number of columns than the others, or k and group outside the kernel layout's rules):
 * dequantized on the host a few rows at a time (what the reference computes) and run as a
 * 16-bit matrix, as the dry pass accounts it. Host memory stays bounded by the row block. */
static tailor_status up_mat_dequantized(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                                        const g4_mat *m, const char *what, g4g_mat *out)
{
    enum { BLOCK_BYTES = 4 << 20 };
    size_t k = (size_t)m->k;
    int rows = (int)(BLOCK_BYTES / (k * sizeof(float)));
    if (rows < 1)
        rows = 1;
    tailor_status st = dalloc(ctx, g, (size_t)m->n * k * g->es, &g->weight_bytes, &out->w);
    if (st)
        return st;
    float *buf = malloc((size_t)rows * k * sizeof *buf);
    if (!buf)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: %s: out of memory", what);
    if (m->g_idx)
        tailor_log(ctx, TAILOR_LOG_INFO,
                   "gemma4 gpu: %s has a weight_g_idx whose groups are not all of %d columns: "
                   "run as a dequantized 16-bit matrix", what, g_idx_group(m));
    else
        tailor_log(ctx, TAILOR_LOG_INFO,
                   "gemma4 gpu: %s: k=%d in groups of %d is no int4 layout the kernels read (k "
                   "and the group multiples of 32, k of the group): run as a dequantized 16-bit "
                   "matrix", what, m->k, m->group);
    for (int r0 = 0; r0 < m->n && st == TAILOR_OK; r0 += rows) {
        int nr = m->n - r0 < rows ? m->n - r0 : rows;
        for (int r = 0; r < nr; r++)
            g4_mat_row(m, r0 + r, buf + (size_t)r * k);
        st = tailor_upload_convert(ctx, u, out->w + (CUdeviceptr)((size_t)r0 * k * g->es), buf,
                                   TAILOR_DTYPE_F32, g->dt, (size_t)nr * k);
    }
    free(buf);
    return st;
}

/* The uploaded tensors of m leave the resident set (they stay in the page cache): streaming a
 * checkpoint keeps host memory bounded by the staging buffers whatever the model size. */
static void release_mat(const tailor_gemma4_gpu *g, const g4_mat *m)
{
    const tailor_st_tensor *ts[] = {m->w, m->packed, m->scale, m->zp, m->g_idx};
    for (int i = 0; i < 5; i++)
        if (ts[i])
            tailor_st_release(g->model->st, ts[i]->data, ts[i]->nbytes);
}

/* One matrix. quantizable: --quantize applies (q/k/v/o/gate/up/down). */
static tailor_status up_mat_unreleased(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                                        const g4_mat *m, int quantizable, const char *what,
                                        const g4g_place *into, g4g_mat *out)
{
    memset(out, 0, sizeof *out);
    out->n = m->n;
    out->k = m->k;
    tailor_w4a16_layout lay;
    tailor_upload_w4a16_dst dst;
    tailor_status st;
    if (m->int4) {
        tailor_dtype sd;
        int group = 0, zp = 0, form = form_of(g, m, m->n, m->k, quantizable, &group, &zp);
        if (form < 0) /* a layout or an order the kernels cannot read */
            return up_mat_dequantized(ctx, g, u, m, what, out);
        if (!g4_st_dtype(m->scale->dtype, &sd))
            return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                    "gemma4 gpu: %s.weight_scale is %s, not a float type", what,
                                    tailor_st_dtype_name(m->scale->dtype));
        if (form == 2)
            return up_mat_ordered(ctx, g, u, m, sd, what, into, out);
        if ((st = tailor_w4a16_layout_init(ctx, m->n, m->k, m->group, m->zp != NULL, &lay)))
            return tailor_wrap_error(ctx, "gemma4 gpu: %s", what);
        if ((st = alloc_w4(ctx, g, &lay, into, out, &dst)))
            return st;
        return tailor_upload_w4a16(ctx, u, &lay, m->packed->data, m->scale->data, sd,
                                   m->zp ? m->zp->data : NULL, NULL, g->dt, &dst);
    }
    tailor_dtype wd;
    if (!g4_st_dtype(m->w->dtype, &wd))
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED, "gemma4 gpu: %s is %s, not a float type",
                                what, tailor_st_dtype_name(m->w->dtype));
    if (g->quantize && quantizable &&
        g4_quantize_layout(m->n, m->k, &lay)) {
        if ((st = alloc_w4(ctx, g, &lay, into, out, &dst)))
            return st;
        return tailor_upload_quantize(ctx, u, &lay, m->w->data, wd, g->dt, &dst);
    }
    if (into && into->w) /* a place in a stack (see stack_alloc) */
        out->w = into->w;
    else if ((st = dalloc(ctx, g, (size_t)m->n * (size_t)m->k * g->es, &g->weight_bytes, &out->w)))
        return st;
    return tailor_upload_convert(ctx, u, out->w, m->w->data, wd, g->dt,
                                 (size_t)m->n * (size_t)m->k);
}

static tailor_status up_mat(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                            const g4_mat *m, int quantizable, const char *what,
                            const g4g_place *into, g4g_mat *out)
{
    tailor_status st = up_mat_unreleased(ctx, g, u, m, quantizable, what, into, out);
    release_mat(g, m);
    return st;
}

/* How a [n, k] matrix lands on the GPU (m NULL: random weights): 0 a dense 16-bit matrix, 1
 * int4 in the kernel layout (*group, *zp), 2 the same in activation order (weight_g_idx whose
 * groups all hold *group columns; g4g_mat.order), -1 another way (any other weight_g_idx, or k
 * and group outside the kernel layout: dequantized into a buffer of its own): never part of a
 * stack. The same decisions as up_mat and rnd_mat. */
static int form_of(const tailor_gemma4_gpu *g, const g4_mat *m, int n, int k, int quantizable,
                   int *group, int *zp)
{
    tailor_w4a16_layout lay;
    if (m && m->int4) {
        int gr = m->g_idx ? g_idx_group(m) : m->group;
        if (tailor_w4a16_layout_init(NULL, n, k, gr, m->zp != NULL, &lay) ||
            (m->g_idx && mat_order(m, NULL) != 1))
            return -1;
        *group = gr;
        *zp = m->zp != NULL;
        return m->g_idx ? 2 : 1;
    }
    if (g->quantize && quantizable && g4_quantize_layout(n, k, &lay)) {
        *group = lay.group;
        *zp = 0;
        return !m && g->act_order ? 2 : 1;
    }
    return 0;
}

/* One stack of `count` [ns[i], k] matrices along n that all land in one form (0 dense, 1 int4
 * with group and zp): *whole is the stack as one [sum ns, k] matrix, into[i] each part's place.
 * An int4 stack needs every part a multiple of 16 rows (its scale columns start at a multiple of
 * 16); 0 and nothing allocated otherwise. */
static tailor_status stack_alloc(tailor_ctx *ctx, tailor_gemma4_gpu *g, const int *ns, int count,
                                 int k, int form, int group, int zp, g4g_place *into,
                                 g4g_mat *whole)
{
    memset(whole, 0, sizeof *whole);
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (form >= 1 && ns[i] % 16 != 0)
            return TAILOR_OK;
        n += ns[i];
    }
    whole->n = n;
    whole->k = k;
    tailor_status st;
    if (form >= 1) {
        tailor_w4a16_layout lay;
        tailor_upload_w4a16_dst dst;
        if ((st = tailor_w4a16_layout_init(ctx, n, k, group, zp, &lay)) ||
            (st = alloc_w4(ctx, g, &lay, NULL, whole, &dst)))
            return st;
        if (form == 2 && (st = alloc_order(ctx, g, NULL, k, whole)))
            return st;
    } else if ((st = dalloc(ctx, g, (size_t)n * (size_t)k * g->es, &g->weight_bytes, &whole->w))) {
        return st;
    }
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        if (form >= 1)
            into[i] = (g4g_place){.qw = whole->qw + off * (size_t)(k / 8) * 4,
                                  .sc = whole->sc + off * g->es,
                                  .zs = whole->zs ? whole->zs + off : 0,
                                  .order = whole->order,
                                  .s_ld = n};
        else
            into[i] = (g4g_place){.w = whole->w + off * (size_t)k * g->es};
        off += (size_t)ns[i];
    }
    return TAILOR_OK;
}

/* The form shared by every one of `count` matrices, or -1. Checkpoint matrices in activation
 * order share it when their g_idx is one; random ones (ms[i] NULL, opts.act_order) have one
 * order per k. */
static int common_form(const tailor_gemma4_gpu *g, const g4_mat *const *ms, const int *ns,
                       int count, int k, int *group, int *zp)
{
    int form = -1;
    for (int i = 0; i < count; i++) {
        int gr = 0, z = 0, f = form_of(g, ms[i], ns[i], k, 1, &gr, &z);
        if (f < 0 || (i > 0 && (f != form || (f >= 1 && (gr != *group || z != *zp)) ||
                                (f == 2 && ms[0] && !same_g_idx(ms[0], ms[i])))))
            return -1;
        form = f;
        *group = gr;
        *zp = z;
    }
    return form;
}

/* Places for q|k|v (when the layer owns its KV) and gate|up when every part lands in the same
 * form (dense, or int4 with one group size and zero-point kind, and one activation order if
 * any); into[] is indexed like
 * up_layer's matrices (0 q, 1 k, 2 v, 4 gate, 5 up), all zero = a buffer of its own. */
static tailor_status plan_stacks(tailor_ctx *ctx, tailor_gemma4_gpu *g, int i, const g4_mat *q,
                                 const g4_mat *k, const g4_mat *v, const g4_mat *gate,
                                 const g4_mat *up, g4g_place into[9])
{
    const tailor_gemma4_layer *ly = &g->cfg.layer[i];
    g4g_layer *L = &g->layers[i];
    int H = g->cfg.hidden, hd = ly->head_dim, kvd = ly->n_kv_heads * hd, group = 0, zp = 0;
    tailor_status st = TAILOR_OK;
    memset(into, 0, 9 * sizeof *into);
    int nq = ly->has_v_proj ? 3 : 2;
    const g4_mat *qkv[3] = {q, k, v};
    int ns[3] = {g->cfg.n_heads * hd, kvd, kvd};
    int form = ly->kv_shared ? -1 : common_form(g, qkv, ns, nq, H, &group, &zp);
    if (form >= 0)
        st = stack_alloc(ctx, g, ns, nq, H, form, group, zp, into, &L->qkv);
    const g4_mat *gu[2] = {gate, up};
    int ng[2] = {ly->inter, ly->inter};
    form = common_form(g, gu, ng, 2, H, &group, &zp);
    if (st == TAILOR_OK && form >= 0)
        st = stack_alloc(ctx, g, ng, 2, H, form, group, zp, into + 4, &L->gu);
    return st;
}

static tailor_status up_layer(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u, int i)
{
    const tailor_gemma4_config *c = &g->cfg;
    const tailor_gemma4_layer *ly = &c->layer[i];
    const g4_layer_w *w = &g->model->layers[i];
    g4g_layer *L = &g->layers[i];
    int H = c->hidden, hd = ly->head_dim;
    tailor_status st = TAILOR_OK;
    const float *vecs[] = {w->input_ln, w->post_attn_ln, w->pre_ff_ln, w->post_ff_ln, w->post_ple_ln};
    CUdeviceptr *dsts[] = {&L->input_ln, &L->post_attn_ln, &L->pre_ff_ln, &L->post_ff_ln,
                           &L->post_ple_ln};
    for (int v = 0; v < 5 && st == TAILOR_OK; v++)
        st = up_vec(ctx, g, u, vecs[v], H, dsts[v]);
    if (st == TAILOR_OK)
        st = up_vec(ctx, g, u, w->q_norm, hd, &L->q_norm);
    if (st == TAILOR_OK && !ly->kv_shared)
        st = up_vec(ctx, g, u, w->k_norm, hd, &L->k_norm);
    if (st == TAILOR_OK)
        st = up_f32(ctx, g, u, &w->layer_scalar, 1, &L->scalar);
    if (st == TAILOR_OK)
        st = up_inv_freq(ctx, g, u, i, &L->inv_freq);
    char what[64];
    struct { const g4_mat *m; g4g_mat *d; int q; const char *n; } mats[] = {
        {&w->q, &L->q, 1, "q_proj"},       {&w->k, &L->k, 1, "k_proj"},
        {&w->v, &L->v, 1, "v_proj"},       {&w->o, &L->o, 1, "o_proj"},
        {&w->gate, &L->gate, 1, "gate_proj"}, {&w->up, &L->up, 1, "up_proj"},
        {&w->down, &L->down, 1, "down_proj"}, {&w->ple_gate, &L->ple_gate, 0, "per_layer_input_gate"},
        {&w->ple_proj, &L->ple_proj, 0, "per_layer_projection"}};
    g4g_place into[9];
    if (st == TAILOR_OK)
        st = plan_stacks(ctx, g, i, &w->q, &w->k, &w->v, &w->gate, &w->up, into);
    for (int k = 0; k < 9 && st == TAILOR_OK; k++) {
        if ((k == 1 || k == 2) && ly->kv_shared)
            continue;
        if (k == 2 && !ly->has_v_proj)
            continue;
        if (k >= 7 && c->ple_dim <= 0)
            continue;
        snprintf(what, sizeof what, "layers.%d.%s", i, mats[k].n);
        st = up_mat(ctx, g, u, mats[k].m, mats[k].q, what, &into[k], mats[k].d);
    }
    return st;
}

static void release_source(void *arg, const void *src, size_t bytes)
{
    tailor_st_release((const tailor_st *)arg, src, bytes);
}

/* opts.quantize_head: the LM head as an int4 copy of the tied embedding (symmetric
 * round-to-nearest, as --quantize; group tailor_w4a16_group_for(hidden): 128 for every Gemma 4,
 * 64 or 32 for small test models), from the checkpoint's rows (embed, of dtype ed) or random
 * (embed NULL); a hidden size no group divides keeps the 16-bit head. */
static tailor_status up_head(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_upload *u,
                             const void *embed, tailor_dtype ed)
{
    tailor_w4a16_layout lay;
    tailor_upload_w4a16_dst dst;
    int group = tailor_w4a16_group_for(g->cfg.hidden);
    if (!group || tailor_w4a16_layout_init(NULL, g->cfg.vocab, g->cfg.hidden, group, 0, &lay))
        return TAILOR_OK; /* the 16-bit head stays */
    g->lm.n = g->cfg.vocab;
    g->lm.k = g->cfg.hidden;
    tailor_status st = alloc_w4(ctx, g, &lay, NULL, &g->lm, &dst);
    if (st)
        return st;
    if (embed)
        return tailor_upload_quantize(ctx, u, &lay, embed, ed, g->dt, &dst);
    st = rnd_fill(ctx, g, g->lm.qw, lay.qweight_words * 4, 0, 0, 0);
    return st ? st : rnd_fill(ctx, g, g->lm.sc, (lay.scale_count * g->es + 3) & ~(size_t)3, 1,
                              1000, 4000);
}

static tailor_status up_model(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    const tailor_gemma4 *m = g->model;
    const tailor_gemma4_config *c = &g->cfg;
    tailor_upload *u = NULL;
    tailor_status st = tailor_upload_create(ctx, g->gpu, STAGING_BYTES, &u);
    if (st)
        return st;
    tailor_upload_set_release(u, release_source, m->st);
    tailor_dtype ed = TAILOR_DTYPE_BF16;
    if (!g4_st_dtype(m->embed->dtype, &ed))
        st = tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED, "gemma4 gpu: embed_tokens is %s",
                              tailor_st_dtype_name(m->embed->dtype));
    size_t ne = (size_t)c->vocab * (size_t)c->hidden;
    if (st == TAILOR_OK)
        st = dalloc(ctx, g, ne * g->es, &g->weight_bytes, &g->embed);
    if (st == TAILOR_OK)
        st = tailor_upload_convert(ctx, u, g->embed, m->embed->data, ed, g->dt, ne);
    if (st == TAILOR_OK && g->quantize_head)
        st = up_head(ctx, g, u, m->embed->data, ed);
    tailor_st_release(m->st, m->embed->data, m->embed->nbytes);
    if (st == TAILOR_OK)
        st = up_vec(ctx, g, u, m->final_norm, c->hidden, &g->final_norm);
    if (st == TAILOR_OK && c->ple_dim > 0) {
        st = up_vec(ctx, g, u, m->ple_proj_norm, c->ple_dim, &g->ple_norm);
        if (st == TAILOR_OK)
            st = up_mat(ctx, g, u, &m->ple_model_proj, 0, "per_layer_model_projection", NULL,
                        &g->ple_model_proj);
    }
    for (int i = 0; i < c->n_layers && st == TAILOR_OK; i++)
        st = up_layer(ctx, g, u, i);
    if (st == TAILOR_OK)
        st = tailor_upload_finish(ctx, u);
    tailor_upload_destroy(u);
    return st;
}

/* ---- random weights made on the GPU ----------------------------------------------------------- */

static tailor_status rnd_vec(tailor_ctx *ctx, tailor_gemma4_gpu *g, int n, CUdeviceptr *out)
{
    size_t bytes = ((size_t)n * g->es + 3) & ~(size_t)3;
    tailor_status st = dalloc(ctx, g, bytes, &g->weight_bytes, out);
    return st ? st : rnd_fill(ctx, g, *out, bytes, 1, 100000, 1000000); /* 1 +- 0.1 */
}

/* The activation order of a random int4 matrix (opts.act_order): a pseudo-random permutation of
 * its k columns, the same for every matrix of that k (the parts of a stack write one buffer). */
static tailor_status rnd_order(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_place *into,
                               int k, g4g_mat *out)
{
    tailor_status st = alloc_order(ctx, g, into, k, out);
    g->ordered++;
    if (st || g->dry)
        return st;
    int32_t *order = malloc((size_t)k * sizeof *order);
    if (!order)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: out of memory");
    uint64_t s = (uint64_t)k; /* one order per k */
    tailor_fill_permutation(order, (size_t)k, &s);
    st = tailor_gpu_upload(ctx, g->gpu, out->order, order, (size_t)k * sizeof *order);
    free(order);
    return st;
}

/* A random [n, k] matrix: int4 when `like` (a dry run's checkpoint matrix) is int4 in a layout
 * the kernels read, else when quantizing a quantizable matrix; otherwise dense (at `into` when
 * it is part of a stack). */
static tailor_status rnd_mat(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4_mat *like, int n,
                             int k, int quantizable, const g4g_place *into, g4g_mat *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->k = k;
    tailor_w4a16_layout lay;
    tailor_upload_w4a16_dst dst;
    tailor_status st;
    int group = 0, zp = 0, form = form_of(g, like, n, k, quantizable, &group, &zp);
    if (form >= 1 && tailor_w4a16_layout_init(NULL, n, k, group, zp, &lay) == TAILOR_OK) {
        if ((st = alloc_w4(ctx, g, &lay, into, out, &dst)))
            return st;
        if (form == 2 && (st = rnd_order(ctx, g, into, k, out)))
            return st;
        if (into && into->qw) /* filled with its stack (fill_stack) */
            return TAILOR_OK;
        if ((st = rnd_fill(ctx, g, out->qw, lay.qweight_words * 4, 0, 0, 0)))
            return st;
        return rnd_fill(ctx, g, out->sc, (lay.scale_count * g->es + 3) & ~(size_t)3, 1, 1000, 4000);
    }
    size_t bytes = (size_t)n * (size_t)k * g->es;
    if (into && into->w)
        out->w = into->w;
    else if ((st = dalloc(ctx, g, bytes, &g->weight_bytes, &out->w)))
        return st;
    return rnd_fill(ctx, g, out->w, bytes & ~(size_t)3, 1, 30000, 0); /* +- 0.03 */
}

/* Random values for a whole int4 stack at once (its parts skip their own fill: their scale
 * columns are strided); nothing for a dense stack, whose parts fill their own rows. */
static tailor_status fill_stack(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_mat *s)
{
    if (!s->int4)
        return TAILOR_OK;
    tailor_w4a16_layout lay;
    tailor_status st = tailor_w4a16_layout_init(ctx, s->n, s->k, s->group, s->zp, &lay);
    if (st == TAILOR_OK)
        st = rnd_fill(ctx, g, s->qw, lay.qweight_words * 4, 0, 0, 0);
    return st ? st : rnd_fill(ctx, g, s->sc, (lay.scale_count * g->es + 3) & ~(size_t)3, 1, 1000,
                              4000);
}

/* ---- the PLE table, on the host ---------------------------------------------------------------- */

static uint32_t ple_hash(uint32_t a, uint32_t b)
{
    uint32_t x = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return x;
}

/* A synthetic row of random weights (any id, any length: a hash of both). */
static void ple_synthetic_row(const tailor_gemma4_gpu *g, uint32_t id, uint16_t *out, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        float v = ((float)(ple_hash(id, (uint32_t)j) % 2001u) - 1000.0f) * 3e-5f;
        out[j] = g->dt == TAILOR_DTYPE_BF16 ? tailor_f32_to_bf16(v) : tailor_f32_to_f16(v);
    }
}

tailor_status g4g_ple_pool_make(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    size_t n = (size_t)g->cfg.n_layers * (size_t)g->cfg.ple_dim;
    g->ple_pool = malloc(G4G_PLE_POOL * n * sizeof *g->ple_pool);
    if (!g->ple_pool)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: out of memory for the "
                                "synthetic PLE rows");
    for (uint32_t r = 0; r < G4G_PLE_POOL; r++)
        ple_synthetic_row(g, r, g->ple_pool + r * n, n);
    return TAILOR_OK;
}

/* A checkpoint's row (`n` elements from element `first`) in another type than the compute
 * dtype (a bf16 checkpoint on a card without bf16): the 16-bit pairs converted in a typed loop,
 * anything else element by element. */
static void ple_convert_row(const tailor_st_tensor *t, size_t first, tailor_dtype dt,
                            uint16_t *out, size_t n)
{
    const uint16_t *s16 = (const uint16_t *)t->data + first;
    if (t->dtype == TAILOR_ST_BF16 && dt == TAILOR_DTYPE_F16) {
        for (size_t j = 0; j < n; j++)
            out[j] = tailor_f32_to_f16(tailor_bf16_to_f32(s16[j]));
    } else if (t->dtype == TAILOR_ST_F16 && dt == TAILOR_DTYPE_BF16) {
        for (size_t j = 0; j < n; j++)
            out[j] = tailor_f32_to_bf16(tailor_f16_to_f32(s16[j]));
    } else {
        for (size_t j = 0; j < n; j++) {
            float v = tailor_st_load_f32(t, (int64_t)(first + j));
            out[j] = dt == TAILOR_DTYPE_BF16 ? tailor_f32_to_bf16(v) : tailor_f32_to_f16(v);
        }
    }
}

void g4g_ple_row(const tailor_gemma4_gpu *g, int32_t id, unsigned char *dst)
{
    const tailor_gemma4_config *c = &g->cfg;
    size_t n = (size_t)c->n_layers * (size_t)c->ple_dim;
    uint16_t *out = (uint16_t *)(void *)dst;
    if (!g->model) { /* random weights: their pool (a dry model stages no inputs) */
        memcpy(out, g->ple_pool + (ple_hash((uint32_t)id, 0u) % G4G_PLE_POOL) * n, n * 2);
        return;
    }
    const tailor_st_tensor *t = g->model->ple_embed;
    size_t first = (size_t)(id < c->ple_vocab ? id : 0) * n;
    if ((t->dtype == TAILOR_ST_BF16 && g->dt == TAILOR_DTYPE_BF16) ||
        (t->dtype == TAILOR_ST_F16 && g->dt == TAILOR_DTYPE_F16))
        memcpy(out, (const uint16_t *)t->data + first, n * 2);
    else
        ple_convert_row(t, first, g->dt, out, n);
}

/* ---- the PLE table, on the device when it fits ------------------------------------------------- */

/* Bytes of the PLE table in the compute dtype (vocab rows of L*P). */
static size_t ple_table_bytes(const tailor_gemma4_gpu *g)
{
    return (size_t)g->cfg.vocab * (size_t)g->cfg.n_layers * (size_t)g->cfg.ple_dim * g->es;
}

/* The table's device copy: the checkpoint's rows streamed through the staging buffer (their
 * pages released behind it, as every weight's), or random rows as the matrices' (+- 0.03). */
static tailor_status ple_table_upload(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    size_t bytes = ple_table_bytes(g);
    tailor_status st = dalloc(ctx, g, bytes, &g->ple_bytes, &g->ple_table);
    if (st || !g->model)
        return st ? st : rnd_fill(ctx, g, g->ple_table, bytes & ~(size_t)3, 1, 30000, 0);
    const tailor_st_tensor *t = g->model->ple_embed;
    tailor_dtype td;
    if (!g4_st_dtype(t->dtype, &td))
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "gemma4 gpu: embed_tokens_per_layer is %s, not a float type",
                                tailor_st_dtype_name(t->dtype));
    tailor_upload *u = NULL;
    st = tailor_upload_create(ctx, g->gpu, STAGING_BYTES, &u);
    if (st)
        return st;
    tailor_upload_set_release(u, release_source, g->model->st);
    st = tailor_upload_convert(ctx, u, g->ple_table, t->data, td, g->dt, bytes / g->es);
    if (st == TAILOR_OK)
        st = tailor_upload_finish(ctx, u);
    tailor_upload_destroy(u);
    return st;
}

/* Where the PLE table lives. On the device, the gemma4_ple kernel reads each token's row by the
 * id on the device, so that a decode step's argmax can feed the next step without the host
 * (tailor_gemma4_gpu_greedy queues steps ahead). It stays on the host (the checkpoint's mapping,
 * or random weights' pool of rows; a row staged per token) when asked (opts.ple_host), when the
 * table's rows are not the vocabulary's, or when free device memory after everything else is
 * short of the table plus what the warm-up may need (ple_reserve); the log says which and why. */
/* Device memory left free beside the PLE table: G4G_PLE_RESERVE for workspaces and the graph,
 * and room for the warm-up to tune a kernel missing from the cache, whose candidates the tuner
 * runs on two copies of the op's buffers; the largest is the LM head's [vocab, hidden] weight. */
static size_t ple_reserve(const tailor_gemma4_gpu *g)
{
    return G4G_PLE_RESERVE + 2 * (size_t)g->cfg.vocab * (size_t)g->cfg.hidden * g->es;
}

static tailor_status place_ple(tailor_ctx *ctx, tailor_gemma4_gpu *g, int ple_host)
{
    const tailor_gemma4_config *c = &g->cfg;
    if (c->ple_dim <= 0)
        return TAILOR_OK;
    size_t bytes = ple_table_bytes(g), free_b = 0, total_b = 0;
    const char *why = NULL;
    char buf[160];
    if (ple_host) {
        why = "as asked";
    } else if (c->ple_vocab != c->vocab) {
        snprintf(buf, sizeof buf, "its %d rows are not the vocabulary's %d", c->ple_vocab,
                 c->vocab);
        why = buf;
    } else {
        tailor_status st = tailor_gpu_mem_info(ctx, g->gpu, &free_b, &total_b);
        if (st)
            return st;
        if (free_b < bytes + ple_reserve(g)) {
            snprintf(buf, sizeof buf, "%.2f GB with %.2f GB kept free, %.2f GB free",
                     (double)bytes / 1e9, (double)ple_reserve(g) / 1e9, (double)free_b / 1e9);
            why = buf;
        }
    }
    if (!why) {
        tailor_log(ctx, TAILOR_LOG_INFO, "gemma4 gpu: the PLE table on the device (%.2f GB)",
                   (double)bytes / 1e9);
        return ple_table_upload(ctx, g);
    }
    tailor_log(ctx, TAILOR_LOG_INFO,
               "gemma4 gpu: the PLE table stays on the host (%s): a row uploaded per token, decode "
               "steps one at a time", why);
    /* the rows of a chunk's tokens, staged in pinned memory and uploaded before each pass */
    size_t rows = (size_t)g->chunk * (size_t)c->n_layers * (size_t)c->ple_dim * g->es;
    tailor_status st = dalloc(ctx, g, rows, &g->act_bytes, &g->pe);
    if (st == TAILOR_OK)
        st = tailor_gpu_host_alloc(ctx, g->gpu, rows, (void **)&g->h_pe);
    if (st == TAILOR_OK && !g->model)
        st = g4g_ple_pool_make(ctx, g);
    return st;
}

static tailor_status rnd_model(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    const tailor_gemma4_config *c = &g->cfg;
    int H = c->hidden, P = c->ple_dim, L = c->n_layers;
    size_t ne = (size_t)c->vocab * (size_t)H * g->es;
    tailor_status st = dalloc(ctx, g, ne, &g->weight_bytes, &g->embed);
    if (st == TAILOR_OK)
        st = rnd_fill(ctx, g, g->embed, ne, 1, 30000, 0);
    if (st == TAILOR_OK && g->quantize_head)
        st = up_head(ctx, g, NULL, NULL, TAILOR_DTYPE_BF16);
    if (st == TAILOR_OK)
        st = rnd_vec(ctx, g, H, &g->final_norm);
    const tailor_gemma4 *m = g->like;
    if (st == TAILOR_OK && P > 0) {
        st = rnd_vec(ctx, g, P, &g->ple_norm);
        if (st == TAILOR_OK)
            st = rnd_mat(ctx, g, m ? &m->ple_model_proj : NULL, L * P, H, 0, NULL,
                         &g->ple_model_proj);
    }
    for (int i = 0; i < L && st == TAILOR_OK; i++) {
        const tailor_gemma4_layer *ly = &c->layer[i];
        g4g_layer *Ly = &g->layers[i];
        const g4_layer_w *w = m ? &m->layers[i] : NULL;
        int hd = ly->head_dim, kvd = ly->n_kv_heads * hd;
        float one = 1.0f;
        CUdeviceptr *vecs[] = {&Ly->input_ln, &Ly->post_attn_ln, &Ly->pre_ff_ln, &Ly->post_ff_ln};
        for (int v = 0; v < 4 && st == TAILOR_OK; v++)
            st = rnd_vec(ctx, g, H, vecs[v]);
        if (st == TAILOR_OK && P > 0)
            st = rnd_vec(ctx, g, H, &Ly->post_ple_ln);
        if (st == TAILOR_OK)
            st = rnd_vec(ctx, g, hd, &Ly->q_norm);
        if (st == TAILOR_OK && !ly->kv_shared)
            st = rnd_vec(ctx, g, hd, &Ly->k_norm);
        if (st == TAILOR_OK)
            st = dalloc(ctx, g, 4, &g->weight_bytes, &Ly->scalar);
        if (st == TAILOR_OK && !g->dry)
            st = tailor_gpu_upload(ctx, g->gpu, Ly->scalar, &one, 4);
        if (st == TAILOR_OK)
            st = up_inv_freq(ctx, g, NULL, i, &Ly->inv_freq);
        g4g_place into[9];
        if (st == TAILOR_OK)
            st = plan_stacks(ctx, g, i, w ? &w->q : NULL, w ? &w->k : NULL, w ? &w->v : NULL,
                             w ? &w->gate : NULL, w ? &w->up : NULL, into);
        if (st == TAILOR_OK)
            st = fill_stack(ctx, g, &Ly->qkv);
        if (st == TAILOR_OK)
            st = fill_stack(ctx, g, &Ly->gu);
        if (st == TAILOR_OK)
            st = rnd_mat(ctx, g, w ? &w->q : NULL, c->n_heads * hd, H, 1, &into[0], &Ly->q);
        if (st == TAILOR_OK && !ly->kv_shared)
            st = rnd_mat(ctx, g, w ? &w->k : NULL, kvd, H, 1, &into[1], &Ly->k);
        if (st == TAILOR_OK && !ly->kv_shared && ly->has_v_proj)
            st = rnd_mat(ctx, g, w ? &w->v : NULL, kvd, H, 1, &into[2], &Ly->v);
        if (st == TAILOR_OK)
            st = rnd_mat(ctx, g, w ? &w->o : NULL, H, c->n_heads * hd, 1, NULL, &Ly->o);
        if (st == TAILOR_OK)
            st = rnd_mat(ctx, g, w ? &w->gate : NULL, ly->inter, H, 1, &into[4], &Ly->gate);
        if (st == TAILOR_OK)
            st = rnd_mat(ctx, g, w ? &w->up : NULL, ly->inter, H, 1, &into[5], &Ly->up);
        if (st == TAILOR_OK)
            st = rnd_mat(ctx, g, w ? &w->down : NULL, H, ly->inter, 1, NULL, &Ly->down);
        if (st == TAILOR_OK && P > 0)
            st = rnd_mat(ctx, g, w ? &w->ple_gate : NULL, P, H, 0, NULL, &Ly->ple_gate);
        if (st == TAILOR_OK && P > 0)
            st = rnd_mat(ctx, g, w ? &w->ple_proj : NULL, H, P, 0, NULL, &Ly->ple_proj);
    }
    return st;
}

/* ---- KV cache, activations, host buffers ------------------------------------------------------- */

static int is_kv_source_of_shared(const tailor_gemma4_config *c, int i)
{
    for (int j = 0; j < c->n_layers; j++)
        if (c->layer[j].kv_shared && c->layer[j].kv_source == i)
            return 1;
    return 0;
}

static tailor_status alloc_kv(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    const tailor_gemma4_config *c = &g->cfg;
    int W = c->sliding_window;
    size_t scratch[2] = {0, 0}; /* lin elements per type (0 sliding, 1 full) */
    tailor_status st = TAILOR_OK;
    for (int i = 0; i < c->n_layers && st == TAILOR_OK; i++) {
        const tailor_gemma4_layer *ly = &c->layer[i];
        g4g_layer *L = &g->layers[i];
        if (ly->kv_shared)
            continue;
        L->slots = ly->full ? g->max_tokens : W;
        size_t kvd = (size_t)ly->n_kv_heads * (size_t)ly->head_dim;
        size_t cache = (size_t)L->slots * kvd * g->es;
        st = dalloc(ctx, g, cache, &g->kv_bytes, &L->kc);
        if (st == TAILOR_OK)
            st = dalloc(ctx, g, cache, &g->kv_bytes, &L->vc);
        if (st == TAILOR_OK)
            st = dalloc(ctx, g, (size_t)L->slots * 4, &g->kv_bytes, &L->positions);
        size_t rows = ly->full ? (size_t)g->max_tokens : (size_t)(W - 1 + g->chunk);
        if (st == TAILOR_OK && is_kv_source_of_shared(c, i)) {
            st = dalloc(ctx, g, rows * kvd * g->es, &g->act_bytes, &L->klin);
            if (st == TAILOR_OK)
                st = dalloc(ctx, g, rows * kvd * g->es, &g->act_bytes, &L->vlin);
        } else if (rows * kvd > scratch[ly->full]) {
            scratch[ly->full] = rows * kvd;
        }
    }
    CUdeviceptr sk[2] = {0, 0}, sv[2] = {0, 0};
    for (int t = 0; t < 2 && st == TAILOR_OK; t++) {
        if (!scratch[t])
            continue;
        st = dalloc(ctx, g, scratch[t] * g->es, &g->act_bytes, &sk[t]);
        if (st == TAILOR_OK)
            st = dalloc(ctx, g, scratch[t] * g->es, &g->act_bytes, &sv[t]);
    }
    for (int i = 0; i < c->n_layers && st == TAILOR_OK; i++) {
        g4g_layer *L = &g->layers[i];
        if (!c->layer[i].kv_shared && !L->klin) {
            L->klin = sk[c->layer[i].full];
            L->vlin = sv[c->layer[i].full];
        }
    }
    return st;
}

static tailor_status alloc_acts(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    const tailor_gemma4_config *c = &g->cfg;
    size_t C = (size_t)g->chunk, H = (size_t)c->hidden, es = g->es;
    size_t maxhd = 0, maxkv = 0, maxi = 0, LP = (size_t)c->n_layers * (size_t)(c->ple_dim > 0 ? c->ple_dim : 1);
    for (int i = 0; i < c->n_layers; i++) {
        const tailor_gemma4_layer *ly = &c->layer[i];
        maxhd = (size_t)ly->head_dim > maxhd ? (size_t)ly->head_dim : maxhd;
        size_t kv = (size_t)ly->n_kv_heads * (size_t)ly->head_dim;
        maxkv = kv > maxkv ? kv : maxkv;
        maxi = (size_t)ly->inter > maxi ? (size_t)ly->inter : maxi;
    }
    size_t P = (size_t)(c->ple_dim > 0 ? c->ple_dim : 1), Q = (size_t)c->n_heads * maxhd;
    size_t V = (size_t)c->vocab, LR = (size_t)g->logit_rows;
    struct { CUdeviceptr *p; size_t bytes; } a[] = {
        {&g->x, C * H * 4},   {&g->y, C * H * es},   {&g->h0, C * H * es},  {&g->tb, C * H * es},
        {&g->qb, C * Q * es}, {&g->att, C * Q * es}, {&g->kb, C * maxkv * es},
        {&g->vb, C * maxkv * es}, {&g->gb, C * maxi * es}, {&g->ub, C * maxi * es},
        {&g->hb, C * maxi * es}, {&g->dec, (Q + 2 * maxkv > 2 * maxi ? Q + 2 * maxkv : 2 * maxi) * es}, {&g->pg, C * P * es}, {&g->ph, C * P * es},
        {&g->pc, C * LP * es}, {&g->pli, C * LP * es},
        {&g->logits, LR * V * es}, {&g->capped, LR * V * 4}, {&g->ids, C * 4},
        {&g->tok, C * 4}, {&g->posb, C * 4}, {&g->x_spare, H * 4},
        {&g->top_vals, TAILOR_GEMMA4_TOP_K * 4}, {&g->top_ids, TAILOR_GEMMA4_TOP_K * 4},
        {&g->ob, C * (size_t)g->order_k * es}}; /* after the weights, which set order_k */
    tailor_status st = TAILOR_OK;
    for (size_t i = 0; i < sizeof a / sizeof a[0] && st == TAILOR_OK; i++)
        if (a[i].bytes)
            st = dalloc(ctx, g, a[i].bytes, &g->act_bytes, a[i].p);
    g->x_main = g->x;
    g->x_next = g->x_spare;
    void *p = NULL;
    size_t host = C * 12 + G4G_QUEUE * 4 + TAILOR_GEMMA4_TOP_K * 8;
    if (g->dry)
        return st;
    if (st == TAILOR_OK)
        st = tailor_gpu_host_alloc(ctx, g->gpu, host, &p);
    if (st == TAILOR_OK) {
        g->h_tok = p;
        g->h_pos = g->h_tok + C;
        g->h_ids = g->h_pos + C;
        g->h_queue = g->h_ids + C;
        g->h_top_ids = g->h_queue + G4G_QUEUE;
        g->h_top_vals = (float *)(g->h_top_ids + TAILOR_GEMMA4_TOP_K);
    }
    for (int i = 0; i < G4G_QUEUE && st == TAILOR_OK; i++)
        st = tailor_gpu_mark_create(ctx, g->gpu, &g->marks[i]);
    return st;
}

/* ---- create / destroy ---------------------------------------------------------------------------- */

/* What the options decide, shared by a real model and a dry one: dtype (o's, else `fallback`),
 * the prefill chunk (min(o->chunk or 512, W, max_tokens); 64 rows when every position's logits
 * are kept), the width prefill kernels are tuned at (the same before the max_tokens cap) and
 * the logit rows. */
static void configure(tailor_gemma4_gpu *g, const tailor_gemma4_config *cfg,
                      const tailor_gemma4_gpu_opts *o, tailor_dtype fallback)
{
    g->cfg = *cfg;
    g->dt = o->dtype == TAILOR_DTYPE_F16 || o->dtype == TAILOR_DTYPE_BF16 ? (tailor_dtype)o->dtype
                                                                          : fallback;
    g->es = 2;
    g->quantize = o->quantize;
    g->quantize_head = o->quantize_head;
    g->glu_epilogue = !o->separate_gating;
    g->q_prep_in_attention = o->attention_q_prep != 0;
    g->q_prep_in_kv_store = !o->separate_q_prep;
    g->mlp_fused = o->fused_mlp != 0;
    g->act_order = o->act_order != 0;
    snprintf(g->knockout, sizeof g->knockout, "%s", o->knockout ? o->knockout : "");
    g->seams = o->seams;
    g->all_logits = o->all_logits;
    g->max_tokens = o->max_tokens;
    int W = cfg->sliding_window > 0 ? cfg->sliding_window : 512;
    int chunk = o->chunk > 0 ? o->chunk : 512;
    if (chunk > W)
        chunk = W;
    if (g->all_logits && chunk > 64)
        chunk = 64;
    g->tchunk = chunk;
    if (chunk > g->max_tokens)
        chunk = g->max_tokens;
    g->chunk = chunk;
    g->logit_rows = g->all_logits ? chunk : 1;
}

/* A zeroed model with its layer array, after the checks every model passes (no MoE,
 * max_tokens >= 1). */
static tailor_status model_new(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                               const tailor_gemma4_gpu_opts *o, tailor_gemma4_gpu **out)
{
    *out = NULL;
    if (cfg->moe)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "gemma4 gpu: the mixture-of-experts model is not supported yet");
    if (!o || o->max_tokens < 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4 gpu: max_tokens must be >= 1");
    tailor_gemma4_gpu *g = calloc(1, sizeof *g);
    if (!g || !(g->layers = calloc((size_t)cfg->n_layers, sizeof *g->layers))) {
        free(g);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: out of memory");
    }
    *out = g;
    return TAILOR_OK;
}

/* A dry model (nothing allocated, uploaded or launched; see tailor_gemma4_gpu.dry) with its
 * weights, KV cache and activations accounted as create() would allocate them. *out is set
 * whenever it was made, even on failure: free it with dry_free. */
static tailor_status dry_model(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                               const tailor_gemma4 *m, const tailor_gemma4_gpu_opts *o,
                               tailor_gemma4_gpu **out)
{
    tailor_status st = model_new(ctx, cfg, o, out);
    if (st)
        return st;
    tailor_gemma4_gpu *g = *out;
    g->dry = 1;
    g->like = m;
    g->dry_next = (CUdeviceptr)1 << 20;
    configure(g, cfg, o, TAILOR_DTYPE_BF16);
    st = rnd_model(ctx, g);
    if (st == TAILOR_OK)
        st = alloc_kv(ctx, g);
    if (st == TAILOR_OK)
        st = alloc_acts(ctx, g);
    return st;
}

static void dry_free(tailor_gemma4_gpu *g)
{
    if (!g)
        return;
    free(g->rec);
    free(g->layers);
    free(g);
}

tailor_status tailor_gemma4_gpu_memory_need(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                            const tailor_gemma4 *m,
                                            const tailor_gemma4_gpu_opts *o,
                                            tailor_gemma4_gpu_memory *out)
{
    memset(out, 0, sizeof *out);
    tailor_gemma4_gpu *g = NULL;
    tailor_status st = dry_model(ctx, cfg, m, o, &g);
    if (st == TAILOR_OK) {
        out->weights = g->weight_bytes;
        out->kv = g->kv_bytes;
        out->acts = g->act_bytes;
        out->ple_table = cfg->ple_dim > 0 ? ple_table_bytes(g) : 0;
    }
    dry_free(g);
    return st;
}

static size_t memory_sum(const tailor_gemma4_gpu_memory *n) { return n->weights + n->kv + n->acts; }

tailor_status tailor_gemma4_gpu_memory_check(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                             const tailor_gemma4 *m,
                                             const tailor_gemma4_gpu_opts *o,
                                             size_t free_bytes, const char *device)
{
    tailor_gemma4_gpu_memory need;
    tailor_status st = tailor_gemma4_gpu_memory_need(ctx, cfg, m, o, &need);
    if (st || memory_sum(&need) <= free_bytes)
        return st;
    char hint[256] = "";
    int int4 = (m && tailor_gemma4_is_w4a16(m)) || o->quantize;
    if (!int4 || !o->quantize_head) { /* what the smallest load of these weights would take */
        tailor_gemma4_gpu_opts q = *o;
        q.quantize = !m || !tailor_gemma4_is_w4a16(m);
        q.quantize_head = 1;
        tailor_gemma4_gpu_memory small;
        if (tailor_gemma4_gpu_memory_need(ctx, cfg, m, &q, &small) == TAILOR_OK)
            snprintf(hint, sizeof hint, "; %s would need %.2f GB", 
                     int4 ? "--quantize-head" : "--quantize w4a16 --quantize-head",
                     (double)memory_sum(&small) / 1e9);
    }
    if (need.kv > need.weights) {
        size_t len = strlen(hint);
        snprintf(hint + len, sizeof hint - len, "; the KV cache shrinks with fewer positions");
    }
    return tailor_set_error(ctx, TAILOR_ERR_BUDGET,
                            "gemma4 gpu: the model needs %.2f GB of GPU memory (weights %.2f GB, "
                            "KV cache %.2f GB for %d positions, activations %.2f GB) and %s has "
                            "%.2f GB free%s",
                            (double)memory_sum(&need) / 1e9, (double)need.weights / 1e9,
                            (double)need.kv / 1e9, o->max_tokens, (double)need.acts / 1e9, device,
                            (double)free_bytes / 1e9, hint);
}

tailor_status tailor_gemma4_gpu_kernels(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                        const tailor_gemma4 *m,
                                        const tailor_gemma4_gpu_opts *o,
                                        tailor_gemma4_kernel_use **out, int *n)
{
    *out = NULL;
    *n = 0;
    tailor_gemma4_gpu *g = NULL;
    int L = cfg->n_layers;
    tailor_status st = dry_model(ctx, cfg, m, o, &g);
    if (st == TAILOR_OK) /* the decode step, and its candidates when sampling */
        st = g4g_pass(ctx, g, 1, 0, 1, L, 0);
    if (st == TAILOR_OK)
        st = g4g_top(ctx, g, 0);
    if (st == TAILOR_OK) /* a one-token prompt, then full chunks without and with history */
        st = g4g_pass(ctx, g, 1, 0, 0, L, g->all_logits);
    if (st == TAILOR_OK && g->chunk > 1)
        st = g4g_pass(ctx, g, g->chunk, 0, 0, L, g->all_logits);
    if (st == TAILOR_OK && g->max_tokens > g->chunk)
        st = g4g_pass(ctx, g, g->chunk, g->chunk, 0, L, g->all_logits);
    if (st == TAILOR_OK) {
        *out = g->rec;
        *n = g->rec_n;
        g->rec = NULL;
    }
    dry_free(g);
    return st;
}

/* The (op, tuned shape) list the model will launch (tailor_gemma4_gpu_kernels), as tune
 * targets; *t malloc'd (NULL, 0 when it cannot be made: nothing then depends on it). */
static void model_targets(const tailor_gemma4_config *cfg, const tailor_gemma4 *m,
                          const tailor_gemma4_gpu_opts *o, tailor_tune_target **t, int *nt)
{
    *t = NULL;
    *nt = 0;
    tailor_ctx *scratch = tailor_ctx_create(); /* errors here are not the caller's */
    tailor_gemma4_kernel_use *uses = NULL;
    int n = 0;
    if (scratch && tailor_gemma4_gpu_kernels(scratch, cfg, m, o, &uses, &n) == TAILOR_OK && n > 0)
        *t = calloc((size_t)n, sizeof **t);
    for (int i = 0; *t && i < n; i++) {
        tailor_tune_target *x = &(*t)[*nt];
        snprintf(x->op, sizeof x->op, "%s", uses[i].op);
        if (tailor_shape_parse(scratch, uses[i].shape, &x->shape) == TAILOR_OK)
            (*nt)++;
    }
    free(uses);
    tailor_ctx_destroy(scratch);
}

static tailor_status create(tailor_ctx *ctx, const tailor_gemma4 *m, const tailor_gemma4_config *cfg,
                            tailor_gpu *gpu, tailor_kernels *ks, const tailor_gemma4_gpu_opts *o,
                            uint64_t seed, tailor_gemma4_gpu **out)
{
    *out = NULL;
    tailor_gemma4_gpu *g = NULL;
    tailor_status st0 = model_new(ctx, cfg, o, &g);
    if (st0)
        return st0;
    const tailor_device_info *dev = tailor_gpu_info(gpu);
    g->gpu = gpu;
    g->ks = ks;
    g->want_graph = !o->no_graph;
    int cached0 = 0, tuned0 = 0;
    tailor_kernels_stats(ks, &cached0, &tuned0);
    tailor_kernels_set_pdl(ks, !o->no_pdl); /* a chain of dependent kernels: see kernels.h */
    g->model = m;
    g->seed = (uint32_t)seed;
    configure(g, cfg, o, tailor_dtype_for_cc(dev->cc_major));
    tailor_gemma4_gpu_opts od = *o;
    od.dtype = (int)g->dt;
    /* the kernels it will launch: how many the cache holds (the first log line says), and the
     * missing winners' candidates compiling on the host's CPUs while the weights stream
     * (tailor_kernels_expect; failing to list them changes nothing but the wait) */
    tailor_tune_target *targets = NULL;
    int ntargets = 0, in_cache = 0, known = 0;
    model_targets(cfg, m, &od, &targets, &ntargets);
    tailor_kernels_count_cached(ks, targets, ntargets, g->dt, &in_cache, &known);
    char kernels[96];
    if (known == 0)
        snprintf(kernels, sizeof kernels, "kernels from the cache, tuned on demand when missing");
    else if (in_cache == known)
        snprintf(kernels, sizeof kernels, "all %d kernels in the cache", known);
    else
        snprintf(kernels, sizeof kernels, "%d of %d kernels in the cache, the rest tuned on demand",
                 in_cache, known);
    /* a rehearsal runs the profile's kernels in the profile's dtype unless --dtype says else */
    const tailor_device_info *reh = tailor_kernels_rehearsal(ks);
    const char *dt_from = reh && g->dt == tailor_dtype_for_cc(reh->cc_major)
                              ? "follows the rehearsed profile"
                          : o->dtype == TAILOR_DTYPE_F16 || o->dtype == TAILOR_DTYPE_BF16
                              ? "--dtype"
                              : "follows the device";
    char rehearsal[320] = "";
    if (reh)
        snprintf(rehearsal, sizeof rehearsal, " (a rehearsal: chosen and compiled under the %s "
                 "profile's budget, %s, sm_%d)", reh->short_name, reh->name,
                 reh->cc_major * 10 + reh->cc_minor);
    tailor_log(ctx, TAILOR_LOG_INFO, "gemma4 gpu: %s, sm_%d, compute %s (%s), weights %s%s%s; %s%s",
               dev->name, dev->cc_major * 10 + dev->cc_minor, tailor_dtype_name(g->dt), dt_from,
               m ? (tailor_gemma4_is_w4a16(m) ? "W4A16 checkpoint" : "16-bit checkpoint")
                 : "random (made on the GPU)",
               o->quantize ? ", quantized to W4A16 on load" : "",
               o->quantize_head ? ", an int4 copy of the embedding as the LM head" : "", kernels,
               rehearsal);
    size_t free_b = 0, total_b = 0; /* before a byte is uploaded: does it fit at all? */
    tailor_status st = tailor_gpu_mem_info(ctx, gpu, &free_b, &total_b);
    if (st == TAILOR_OK)
        st = tailor_gemma4_gpu_memory_check(ctx, cfg, m, &od, free_b, dev->name);
    if (st == TAILOR_OK && ntargets > 0)
        tailor_kernels_expect(ks, targets, ntargets, g->dt);
    free(targets);
    if (st == TAILOR_OK)
        st = m ? up_model(ctx, g) : rnd_model(ctx, g);
    if (st == TAILOR_OK)
        st = alloc_kv(ctx, g);
    if (st == TAILOR_OK)
        st = alloc_acts(ctx, g);
    if (st == TAILOR_OK)
        st = place_ple(ctx, g, o->ple_host);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, gpu);
    if (st == TAILOR_OK)
        st = g4g_warm_up(ctx, g);
    if (st) {
        tailor_gemma4_gpu_destroy(g);
        return st;
    }
    int cached1 = 0, tuned1 = 0; /* this model's share: the set may have served others before */
    tailor_kernels_stats(ks, &cached1, &tuned1);
    g->kernels_cached = cached1 - cached0;
    g->kernels_tuned = tuned1 - tuned0;
    tailor_log(ctx, TAILOR_LOG_INFO,
               "gemma4 gpu: %d kernels from the cache and %d tuned on demand so far (the rest "
               "load when first launched); weights %.2f GB, KV "
               "cache %.1f MB for %d positions, decode step %s, prefill chunk %d",
               g->kernels_cached, g->kernels_tuned, (double)g->weight_bytes / 1e9,
               (double)g->kv_bytes / 1e6, g->max_tokens,
               g->graph.exec ? "a CUDA graph" : "kernel by kernel", g->chunk);
    if (g->ordered)
        tailor_log(ctx, TAILOR_LOG_INFO,
                   "gemma4 gpu: %d int4 matrices in activation order (weight_g_idx): their "
                   "inputs are gathered into it before each product (op gather_cols)",
                   g->ordered);
    *out = g;
    return TAILOR_OK;
}

tailor_status tailor_gemma4_gpu_create(tailor_ctx *ctx, const tailor_gemma4 *m, tailor_gpu *gpu,
                                       tailor_kernels *ks, const tailor_gemma4_gpu_opts *opts,
                                       tailor_gemma4_gpu **out)
{
    return create(ctx, m, &m->cfg, gpu, ks, opts, 0, out);
}

tailor_status tailor_gemma4_gpu_create_random(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                              tailor_gpu *gpu, tailor_kernels *ks,
                                              const tailor_gemma4_gpu_opts *opts, uint64_t seed,
                                              tailor_gemma4_gpu **out)
{
    return create(ctx, NULL, cfg, gpu, ks, opts, seed, out);
}

void tailor_gemma4_gpu_destroy(tailor_gemma4_gpu *g)
{
    if (!g)
        return;
    tailor_gpu_sync(NULL, g->gpu);
    tailor_gpu_graph_destroy(g->gpu, &g->graph);
    for (int i = 0; i < G4G_QUEUE; i++)
        tailor_gpu_mark_destroy(g->gpu, &g->marks[i]);
    for (int i = 0; i < g->nallocs; i++)
        tailor_gpu_free(g->gpu, g->allocs[i]);
    tailor_gpu_host_free(g->gpu, g->h_tok);
    tailor_gpu_host_free(g->gpu, g->h_pe);
    free(g->ple_pool);
    free(g->layers);
    free(g);
}

/* 1 when a layer's linears are int4 (a W4A16 checkpoint or --quantize; not the LM head alone). */
static int linears_int4(const tailor_gemma4_gpu *g)
{
    for (int i = 0; i < g->cfg.n_layers; i++) {
        const g4g_layer *L = &g->layers[i];
        if (L->q.int4 || L->o.int4 || L->gate.int4 || L->down.int4)
            return 1;
    }
    return 0;
}

void tailor_gemma4_gpu_get_info(const tailor_gemma4_gpu *g, tailor_gemma4_gpu_info *info)
{
    memset(info, 0, sizeof *info);
    info->dtype = (int)g->dt;
    info->w4a16 = linears_int4(g);
    info->lm_int4 = g->lm.qw != 0;
    info->weight_bytes = g->weight_bytes;
    /* the embedding is read whole as the LM head, unless the head is its int4 copy */
    info->weight_bytes_token = g->weight_bytes;
    if (g->lm.qw)
        info->weight_bytes_token -= (size_t)g->cfg.vocab * (size_t)g->cfg.hidden * g->es;
    info->kv_bytes = g->kv_bytes;
    info->act_bytes = g->act_bytes;
    info->ple_bytes = g->ple_bytes;
    info->greedy_queued = g4g_greedy_queues(g);
    info->kernels_cached = g->kernels_cached;
    info->kernels_tuned = g->kernels_tuned;
    info->graph = g->graph.exec != NULL;
    info->chunk = g->chunk;
}
