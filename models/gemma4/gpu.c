/* gpu.c — the Gemma 4 forward on the GPU from tuned kernels (GEMMA4.md §2): run state, KV cache,
 * prefill in chunks and the decode step captured as a CUDA graph. Weights are bound in
 * gpu_weights.c. Every kernel is a cached winner launched through tuner/kernels.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4_gpu.h"
#include "half.h"
#include "sampler.h"

/* ---- launching ops ------------------------------------------------------------------------------- */

void g4g_put(tailor_shape *s, const char *key, long long v) { (void)tailor_shape_set(s, key, v); }

/* Profiling: adds one timed launch of kernel k (op on `actual`) to g->prof. */
static void prof_add(tailor_gemma4_gpu *g, const char *op, tailor_op_kernel *k,
                     const tailor_shape *actual, double us)
{
    char shape[160];
    tailor_shape_format(actual, shape, sizeof shape);
    int i = 0;
    while (i < g->prof_n && (strcmp(g->prof[i].op, op) != 0 || strcmp(g->prof[i].shape, shape) != 0))
        i++;
    if (i == g->prof_n) {
        if (g->prof_n == g->prof_cap)
            return;
        tailor_gemma4_gpu_prof *e = &g->prof[g->prof_n++];
        memset(e, 0, sizeof *e);
        snprintf(e->op, sizeof e->op, "%s", op);
        snprintf(e->shape, sizeof e->shape, "%s", shape);
        e->kernel = k;
    }
    g->prof[i].calls++;
    g->prof[i].us += us;
}

static tailor_status launch(tailor_ctx *ctx, tailor_gemma4_gpu *g, const char *op,
                            tailor_op_kernel *k, const tailor_shape *actual,
                            const tailor_binding *b, int nb)
{
    if (!g->prof)
        return tailor_op_kernel_launch(ctx, g->ks, k, actual, b, nb);
    float ms = 0;
    tailor_status st = tailor_gpu_timer_start(ctx, g->gpu, &g->prof_timer);
    if (st == TAILOR_OK)
        st = tailor_op_kernel_launch(ctx, g->ks, k, actual, b, nb);
    if (st == TAILOR_OK)
        st = tailor_gpu_timer_stop(ctx, g->gpu, &g->prof_timer);
    if (st == TAILOR_OK)
        st = tailor_gpu_timer_elapsed_ms(ctx, &g->prof_timer, &ms);
    if (st == TAILOR_OK)
        prof_add(g, op, k, actual, 1e3 * (double)ms);
    return st;
}

/* Dry run: adds (op, tuned) to g->rec once. */
static tailor_status record(tailor_ctx *ctx, tailor_gemma4_gpu *g, const char *op,
                            const tailor_shape *tuned)
{
    char shape[256];
    tailor_shape_format(tuned, shape, sizeof shape);
    for (int i = 0; i < g->rec_n; i++)
        if (strcmp(g->rec[i].op, op) == 0 && strcmp(g->rec[i].shape, shape) == 0)
            return TAILOR_OK;
    if (g->rec_n == g->rec_cap) {
        int cap = g->rec_cap ? 2 * g->rec_cap : 64;
        tailor_gemma4_kernel_use *r = realloc(g->rec, (size_t)cap * sizeof *r);
        if (!r)
            return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: out of memory");
        g->rec = r;
        g->rec_cap = cap;
    }
    tailor_gemma4_kernel_use *u = &g->rec[g->rec_n++];
    snprintf(u->op, sizeof u->op, "%s", op);
    snprintf(u->shape, sizeof u->shape, "%s", shape);
    return TAILOR_OK;
}

/* Whether `sel` ("k=v,k=v", or empty) holds for shape s. */
static int shape_matches(const char *sel, const tailor_shape *s)
{
    tailor_shape want;
    if (!*sel)
        return 1;
    if (tailor_shape_parse(NULL, sel, &want) != TAILOR_OK)
        return 0;
    for (int i = 0; i < want.count; i++)
        if (tailor_shape_get(s, want.dims[i].key, -1) != want.dims[i].value)
            return 0;
    return 1;
}

/* opts.knockout: whether this launch of op on `actual` is one to skip. */
static int knocked_out(const tailor_gemma4_gpu *g, const char *op, const tailor_shape *actual)
{
    for (const char *p = g->knockout; *p;) {
        size_t n = strcspn(p, ";"), name = strcspn(p, ":;");
        char sel[256] = "";
        if (name < n)
            snprintf(sel, sizeof sel, "%.*s", (int)(n - name - 1), p + name + 1);
        if (strlen(op) == name && strncmp(op, p, name) == 0 && shape_matches(sel, actual))
            return 1;
        p += n + (p[n] == ';');
    }
    return 0;
}

/* Whether a launch of op keeps g->ob and its source as they were (ordered_input): the gather
 * itself, and the plain int4 product, which reads g->ob and writes none of the buffers a gather
 * reads (y, att, hb, ph: its outputs are q, k, v, gate, up, the stacks' dec, tb, pg, logits). */
static int keeps_gathered(const char *op)
{
    return strcmp(op, "gather_cols") == 0 || strcmp(op, "w4a16_matmul") == 0;
}

tailor_status g4g_run(tailor_ctx *ctx, tailor_gemma4_gpu *g, const char *op,
                      const tailor_shape *tuned, const tailor_shape *actual,
                      const tailor_binding *b, int nb)
{
    if (!keeps_gathered(op))
        g->gathered.src = 0;
    if (g->dry)
        return record(ctx, g, op, tuned);
    if (knocked_out(g, op, actual))
        return TAILOR_OK;
    tailor_op_kernel *k = NULL;
    tailor_status st = tailor_kernels_get(ctx, g->ks, op, tuned, g->dt, &k);
    if (st == TAILOR_OK)
        st = launch(ctx, g, op, k, actual, b, nb);
    if (st == TAILOR_ERR_MISUSE && tuned != actual) {
        /* the winner of the bucket cannot run this exact shape: use the shape's own winner */
        tailor_ctx_clear(ctx);
        st = tailor_kernels_get(ctx, g->ks, op, actual, g->dt, &k);
        if (st == TAILOR_OK)
            st = launch(ctx, g, op, k, actual, b, nb);
    }
    if (st)
        return tailor_wrap_error(ctx, "gemma4 gpu: %s", op);
    return TAILOR_OK;
}

/* The width a kernel is tuned at for `rows` rows: one row (decode) is its own shape; anything
 * wider is tuned at `chunk` (g->tchunk, the prefill chunk of an uncapped run, or a smaller cap
 * of the op), whose winner runs every narrower width (spaces keep their pruning rules out of
 * purpose "launch", docs/search-spaces.md). So a model needs a fixed set of tuned shapes,
 * which tailor_gemma4_gpu_kernels lists. */
static long long tuned_rows(long long rows, long long chunk) { return rows <= 1 ? 1 : chunk; }

/* Runs op on `actual`, tuned at the same shape with `key` set by tuned_rows(., chunk). */
static tailor_status run_rows(tailor_ctx *ctx, tailor_gemma4_gpu *g, const char *op,
                              const tailor_shape *actual, const char *key, long long chunk,
                              const tailor_binding *b, int nb)
{
    tailor_shape tuned = *actual;
    g4g_put(&tuned, key, tuned_rows(tailor_shape_get(actual, key, 1), chunk));
    return g4g_run(ctx, g, op, &tuned, actual, b, nb);
}

static CUdeviceptr off(CUdeviceptr p, size_t elems, size_t esize) { return p + elems * esize; }

static tailor_status seam(tailor_ctx *ctx, tailor_gemma4_gpu *g, int mode, int T, CUdeviceptr a,
                          CUdeviceptr w_post, CUdeviceptr w_next, CUdeviceptr scalar);

/* ---- decode seams: where each goes ----------------------------------------------------------
 * A seam follows a one-row projection back to the hidden size (linear_seam). Where it runs is
 * seam_at's choice, by opts.seams and the GEMV that reads its normed row next:
 *   G4G_SEAM_PROLOGUE  owed (g->owing): that GEMV runs it first in every block (op matmul_pro,
 *                      glu 0/1/2; w4a16_pro for int4 weights), reading the residual from g->x
 *                      and writing it to g->x_next, which then swap, and leaving g->y as the
 *                      seam kernel would. Anything else that needs g->x or g->y settles the
 *                      debt first with the seam kernel (seam_settle).
 *   G4G_SEAM_EPILOGUE  in the projection's last block (matmul_seam, w4a16_seam).
 *   G4G_SEAM_KERNEL    a residual_norm launch after the projection.
 * Prefill (several rows) always runs the seam kernel. */
typedef enum { G4G_SEAM_KERNEL, G4G_SEAM_PROLOGUE, G4G_SEAM_EPILOGUE } g4g_seam_at;

/* Where a decode seam goes whose normed row `next` reads (NULL: no GEMV reads it next). The
 * default (docs/perf/model.md): the prologue of a 16-bit GEMV, a kernel before an int4 one. */
static g4g_seam_at seam_at(const tailor_gemma4_gpu *g, const g4g_mat *next)
{
    const int int4 = next && next->int4;
    switch (g->seams) {
    case TAILOR_GEMMA4_SEAMS_KERNEL:
        return G4G_SEAM_KERNEL;
    case TAILOR_GEMMA4_SEAMS_PROLOGUE:
        return G4G_SEAM_PROLOGUE;
    case TAILOR_GEMMA4_SEAMS_EPILOGUE:
        return G4G_SEAM_EPILOGUE;
    case TAILOR_GEMMA4_SEAMS_MIXED:
        return int4 ? G4G_SEAM_EPILOGUE : G4G_SEAM_PROLOGUE;
    default:
        return int4 ? G4G_SEAM_KERNEL : G4G_SEAM_PROLOGUE;
    }
}

static tailor_status seam_settle(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    if (!g->owing)
        return TAILOR_OK;
    g->owing = 0;
    return seam(ctx, g, g->owed.mode, 1, g->owed.t, g->owed.w_post, g->owed.w_next,
                g->owed.scalar);
}

/* Whether the owed seam can be the prologue of w's one-row GEMV of g->y (not of a matrix in
 * activation order: its GEMV reads the row gathered). */
static int seam_payable(const tailor_gemma4_gpu *g, const g4g_mat *w, CUdeviceptr a, int m)
{
    return g->owing && m == 1 && a == g->y && w->k == g->cfg.hidden && !w->order &&
           seam_at(g, w) == G4G_SEAM_PROLOGUE;
}

/* The input of w's product: a itself, or for a matrix in activation order a's m rows gathered
 * into that order (op gather_cols) in g->ob — once for the parts of a stack that prefill runs
 * one after another (k then v, gate then up): g->gathered says what g->ob holds until a launch
 * of another kind than these products (g4g_run) may have changed its source. */
static tailor_status ordered_input(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_mat *w,
                                   CUdeviceptr a, int m, CUdeviceptr *in)
{
    *in = a;
    if (!w->order)
        return TAILOR_OK;
    *in = g->ob;
    if (g->gathered.src == a && g->gathered.order == w->order && g->gathered.rows == m)
        return TAILOR_OK;
    tailor_shape s = {0};
    g4g_put(&s, "rows", m);
    g4g_put(&s, "cols", w->k);
    tailor_binding b[] = {{"a", a}, {"idx", w->order}, {"out", g->ob}};
    tailor_status st = run_rows(ctx, g, "gather_cols", &s, "rows", g->tchunk, b, 3);
    g->gathered.src = st ? 0 : a;
    g->gathered.order = w->order;
    g->gathered.rows = m;
    return st;
}

/* The owed seam, then h = (w's product of the normed row): plain (glu 0) or gated (1: w a
 * stacked gate|up of n gate rows; 2: u from the PLE input, row length u_ld). */
static tailor_status pay_seam(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_mat *w, int n,
                              int glu, CUdeviceptr u, int u_ld, CUdeviceptr out)
{
    tailor_shape s = {0};
    g4g_put(&s, "m", 1);
    g4g_put(&s, "n", n);
    g4g_put(&s, "k", w->k);
    g4g_put(&s, "mode", g->owed.mode);
    if (w->int4) { /* int4: plain, or a gate|up stack gated (glu 1; no PLE input) */
        g4g_put(&s, "group", w->group);
        g4g_put(&s, "zp", w->zp);
        g4g_put(&s, "s_ld", w->s_ld);
        g4g_put(&s, "glu", glu);
    } else {
        g4g_put(&s, "glu", glu);
        g4g_put(&s, "u_ld", glu == 2 ? u_ld : 0);
    }
    tailor_binding b[] = {{"out", out},
                          {"w", w->w},
                          {"u", u ? u : w->w},
                          {"qweight", w->qw},
                          {"scales", w->sc},
                          {"zeros", w->zp ? w->zs : w->sc},
                          {"t", g->owed.t},
                          {"x_in", g->x},
                          {"x_out", g->x_next},
                          {"y", g->y},
                          {"w_post", g->owed.w_post},
                          {"w_next", g->owed.w_next},
                          {"scalar", g->owed.scalar}};
    g->owing = 0;
    tailor_status st = g4g_run(ctx, g, w->int4 ? "w4a16_pro" : "matmul_pro", &s, &s, b, 13);
    CUdeviceptr x = g->x;
    g->x = g->x_next;
    g->x_next = x;
    return st;
}

/* out[m, n] = a[m, k] W^T. */
static tailor_status linear(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_mat *w, CUdeviceptr a,
                            CUdeviceptr out, int m)
{
    if (seam_payable(g, w, a, m))
        return pay_seam(ctx, g, w, w->n, 0, 0, 0, out);
    tailor_status st = seam_settle(ctx, g);
    if (st || (st = ordered_input(ctx, g, w, a, m, &a)))
        return st;
    tailor_shape s = {0};
    g4g_put(&s, "m", m);
    g4g_put(&s, "n", w->n);
    g4g_put(&s, "k", w->k);
    if (w->int4) {
        g4g_put(&s, "group", w->group);
        g4g_put(&s, "zp", w->zp);
        g4g_put(&s, "s_ld", w->s_ld);
        tailor_binding b[] = {{"a", a}, {"qweight", w->qw}, {"scales", w->sc},
                              {"zeros", w->zp ? w->zs : w->sc}, {"out", out}};
        return run_rows(ctx, g, "w4a16_matmul", &s, "m", g->tchunk, b, 5);
    }
    tailor_binding b[] = {{"a", a}, {"w", w->w}, {"out", out}};
    return run_rows(ctx, g, "matmul", &s, "m", g->tchunk, b, 3);
}

/* Residual seam (op residual_norm): mode 0 x += n_post(a), y = n_next(x); 1 with the layer
 * scalar; 2 y = T(x); 3 y = n_next(x) only. */
static tailor_status seam(tailor_ctx *ctx, tailor_gemma4_gpu *g, int mode, int rows, CUdeviceptr a,
                          CUdeviceptr w_post, CUdeviceptr w_next, CUdeviceptr scalar)
{
    tailor_shape s = {0};
    g4g_put(&s, "rows", rows);
    g4g_put(&s, "cols", g->cfg.hidden);
    g4g_put(&s, "mode", mode);
    tailor_binding b[] = {{"a", a},           {"x", g->x},           {"w_post", w_post},
                          {"w_next", w_next}, {"scalar", scalar},    {"y", g->y}};
    return run_rows(ctx, g, "residual_norm", &s, "rows", g->tchunk, b, 6);
}

/* The seam of a product already in g->tb (T rows), placed at `at` (PROLOGUE: owed to the next
 * GEMV; otherwise a residual_norm kernel). */
static tailor_status seam_of_tb(tailor_ctx *ctx, tailor_gemma4_gpu *g, g4g_seam_at at, int T,
                                int mode, CUdeviceptr w_post, CUdeviceptr w_next,
                                CUdeviceptr scalar)
{
    if (at != G4G_SEAM_PROLOGUE)
        return seam(ctx, g, mode, T, g->tb, w_post, w_next, scalar);
    g->owing = 1;
    g->owed.mode = mode;
    g->owed.t = g->tb;
    g->owed.w_post = w_post;
    g->owed.w_next = w_next;
    g->owed.scalar = scalar;
    return TAILOR_OK;
}

/* A projection back to the hidden size, g->tb = a W^T, then seam(mode, g->tb, ...), placed by
 * seam_at (one row) or as a kernel (prefill). `next` is the GEMV that reads the normed row next
 * (NULL: not a GEMV). */
static tailor_status linear_seam(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_mat *w,
                                 CUdeviceptr a, int T, int mode, CUdeviceptr w_post,
                                 CUdeviceptr w_next, CUdeviceptr scalar, const g4g_mat *next)
{
    const g4g_seam_at at = T == 1 ? seam_at(g, next) : G4G_SEAM_KERNEL;
    if (at == G4G_SEAM_PROLOGUE || at == G4G_SEAM_KERNEL) {
        tailor_status st = linear(ctx, g, w, a, g->tb, T);
        return st ? st : seam_of_tb(ctx, g, at, T, mode, w_post, w_next, scalar);
    }
    tailor_status st = seam_settle(ctx, g); /* the epilogue writes g->x and g->y */
    if (st || (st = ordered_input(ctx, g, w, a, 1, &a)))
        return st;
    tailor_shape s = {0};
    g4g_put(&s, "m", 1);
    g4g_put(&s, "n", w->n);
    g4g_put(&s, "k", w->k);
    g4g_put(&s, "mode", mode);
    if (w->int4) {
        g4g_put(&s, "group", w->group);
        g4g_put(&s, "zp", w->zp);
        g4g_put(&s, "s_ld", w->s_ld);
    }
    tailor_binding b[] = {{"a", a},           {"t", g->tb},          {"x", g->x},
                          {"y", g->y},        {"w_post", w_post},    {"w_next", w_next},
                          {"scalar", scalar}, {"w", w->w},           {"qweight", w->qw},
                          {"scales", w->sc},  {"zeros", w->zp ? w->zs : w->sc}};
    return g4g_run(ctx, g, w->int4 ? "w4a16_seam" : "matmul_seam", &s, &s, b, 11);
}

static tailor_status gelu(tailor_ctx *ctx, tailor_gemma4_gpu *g, int rows, int inter,
                          CUdeviceptr gate, CUdeviceptr up, int u_ld, CUdeviceptr h)
{
    tailor_shape s = {0};
    g4g_put(&s, "rows", rows);
    g4g_put(&s, "inter", inter);
    g4g_put(&s, "u_ld", u_ld == inter ? 0 : u_ld);
    tailor_binding b[] = {{"g", gate}, {"u", up}, {"h", h}};
    return run_rows(ctx, g, "gelu_gate", &s, "rows", g->tchunk, b, 3);
}

/* One row (decode, the default): h[n] = gelu_tanh(y . gate) * up in one GEMV (op matmul_glu, or
 * w4a16_glu for an int4 w), the up rows following the gate rows in w (a stacked gate|up,
 * w->n = 2n) or, with u (16-bit w only), up read from u (the layer's PLE input). Replaces a
 * matmul and a gelu_gate launch. */
static tailor_status glu(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_mat *w, int n,
                         CUdeviceptr u, int u_ld, CUdeviceptr h)
{
    if (seam_payable(g, w, g->y, 1))
        return pay_seam(ctx, g, w, n, u ? 2 : 1, u, u_ld, h);
    CUdeviceptr a = g->y;
    tailor_status st = seam_settle(ctx, g);
    if (st || (st = ordered_input(ctx, g, w, a, 1, &a)))
        return st;
    tailor_shape s = {0};
    g4g_put(&s, "m", 1);
    g4g_put(&s, "n", n);
    g4g_put(&s, "k", w->k);
    if (w->int4) {
        g4g_put(&s, "group", w->group);
        g4g_put(&s, "zp", w->zp);
        g4g_put(&s, "s_ld", w->s_ld);
        tailor_binding b[] = {{"a", a},
                              {"qweight", w->qw},
                              {"scales", w->sc},
                              {"zeros", w->zp ? w->zs : w->sc},
                              {"out", h}};
        return g4g_run(ctx, g, "w4a16_glu", &s, &s, b, 5);
    }
    g4g_put(&s, "ext", u ? 1 : 0);
    g4g_put(&s, "u_ld", u ? u_ld : 0);
    tailor_binding b[] = {{"a", a}, {"w", w->w}, {"u", u ? u : w->w}, {"out", h}};
    return g4g_run(ctx, g, "matmul_glu", &s, &s, b, 4);
}

/* Whether layer L's decode MLP can run as one w4a16_mlp: an int4 gate|up stack and an int4 down
 * of the same group and zero-point kind, neither in activation order, and the option on. */
static int mlp_fusable(const tailor_gemma4_gpu *g, const g4g_layer *L, int inter)
{
    const g4g_mat *gu = &L->gu, *d = &L->down;
    return g->mlp_fused && g4g_mat_present(gu) && gu->int4 && d->int4 && gu->n == 2 * inter &&
           d->k == inter && gu->k == d->n && gu->group == d->group && gu->zp == d->zp &&
           !gu->order && !d->order;
}

/* One decode row's MLP in one launch (op w4a16_mlp): g->tb = down(gelu(gate y) * (up y)), h in
 * g->hb; then the down projection's seam, placed as linear_seam places it (an epilogue, which
 * the fused kernel has not, becomes the seam kernel). */
static tailor_status mlp_fused(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_layer *L,
                               int inter, int mode, CUdeviceptr w_post, CUdeviceptr w_next,
                               CUdeviceptr scalar, const g4g_mat *next)
{
    tailor_status st = seam_settle(ctx, g); /* the MLP reads g->y */
    if (st)
        return st;
    const g4g_mat *gu = &L->gu, *d = &L->down;
    tailor_shape s = {0};
    g4g_put(&s, "m", 1);
    g4g_put(&s, "n", inter);
    g4g_put(&s, "k", gu->k);
    g4g_put(&s, "group", gu->group);
    g4g_put(&s, "zp", gu->zp);
    g4g_put(&s, "s_ld", gu->s_ld);
    g4g_put(&s, "d_ld", d->s_ld);
    tailor_binding b[] = {{"a", g->y},           {"qweight", gu->qw},
                          {"scales", gu->sc},    {"zeros", gu->zp ? gu->zs : gu->sc},
                          {"dqweight", d->qw},   {"dscales", d->sc},
                          {"dzeros", d->zp ? d->zs : d->sc},
                          {"h", g->hb},          {"out", g->tb}};
    if ((st = g4g_run(ctx, g, "w4a16_mlp", &s, &s, b, 9)))
        return st;
    g4g_seam_at at = seam_at(g, next);
    return seam_of_tb(ctx, g, at == G4G_SEAM_PROLOGUE ? at : G4G_SEAM_KERNEL, 1, mode, w_post,
                      w_next, scalar);
}

/* ---- the pieces of one pass ------------------------------------------------------------------- */

/* Scaled embedding into x (fp32) and, with PLE, into h0 (dtype), then the per-layer inputs. */
static tailor_status embed_rows(tailor_ctx *ctx, tailor_gemma4_gpu *g, int T)
{
    const tailor_gemma4_config *c = &g->cfg;
    for (int f32 = 1; f32 >= (c->ple_dim > 0 ? 0 : 1); f32--) {
        tailor_shape s = {0};
        g4g_put(&s, "tokens", T);
        g4g_put(&s, "cols", c->hidden);
        g4g_put(&s, "vocab", c->vocab);
        g4g_put(&s, "scale_dim", c->hidden);
        g4g_put(&s, "out_f32", f32);
        tailor_binding b[] = {{"table", g->embed}, {"ids", g->tok}, {"out", f32 ? g->x : g->h0}};
        tailor_status st = run_rows(ctx, g, "embed", &s, "tokens", g->tchunk, b, 3);
        if (st)
            return st;
    }
    if (c->ple_dim <= 0)
        return TAILOR_OK;
    tailor_status st = linear(ctx, g, &g->ple_model_proj, g->h0, g->pc, T);
    if (st)
        return st;
    /* a dry model records both forms: where the table lives is decided by free memory at create */
    int first = g->ple_table != 0, last = g->dry ? 1 : first;
    for (int gather = first; gather <= last; gather++) {
        tailor_shape s = {0};
        g4g_put(&s, "tokens", T);
        g4g_put(&s, "layers", c->n_layers);
        g4g_put(&s, "dim", c->ple_dim);
        g4g_put(&s, "hidden", c->hidden);
        g4g_put(&s, "gather", gather);
        tailor_binding b[] = {{"c", g->pc}, {"e", gather ? g->ple_table : g->pe},
                              {"w", g->ple_norm}, {"out", g->pli}, {"ids", g->tok}};
        st = run_rows(ctx, g, "gemma4_ple", &s, "tokens", g->tchunk, b, gather ? 5 : 4);
        if (st)
            return st;
    }
    return TAILOR_OK;
}

/* The cache slots layer i's kernels are tuned at: the ring of W slots, or G4G_DECODE_KV for a
 * full layer's linear cache whatever max_tokens is (slots is a runtime argument). */
static long long tuned_slots(const tailor_gemma4_gpu *g, int i)
{
    return g->cfg.layer[i].full ? G4G_DECODE_KV : g->layers[i].slots;
}

/* The cache slots layer i's decode attention is tuned at: as tuned_slots, but a full layer's
 * cache of at most G4G_DECODE_KV_SHORT slots is tuned at that length. */
static long long attention_tuned_slots(const tailor_gemma4_gpu *g, int i)
{
    if (g->cfg.layer[i].full && g->max_tokens <= G4G_DECODE_KV_SHORT)
        return G4G_DECODE_KV_SHORT;
    return tuned_slots(g, i);
}

/* History rows a prefill chunk at p0 attends to on layer i's cache. */
static int hist_rows(const tailor_gemma4_gpu *g, int i, int p0)
{
    const tailor_gemma4_layer *ly = &g->cfg.layer[i];
    if (ly->full)
        return p0;
    int w = g->cfg.sliding_window - 1;
    return p0 < w ? p0 : w;
}

/* K and V of the T new rows into layer i's cache; in prefill also the linear history + rows.
 * kraw, vraw: the raw projections when already computed (a decode stack), else 0: projected
 * here into g->kb, g->vb. qraw (one decode row, else 0): the raw q, prepared in the same launch
 * into g->qb (gemma4_kv_store q_heads) instead of by prep_q. */
static tailor_status kv_update(tailor_ctx *ctx, tailor_gemma4_gpu *g, int i, int T, int p0,
                               int decode, CUdeviceptr kraw, CUdeviceptr vraw, CUdeviceptr qraw)
{
    const tailor_gemma4_layer *ly = &g->cfg.layer[i];
    g4g_layer *L = &g->layers[i];
    size_t es = g->es, hd = (size_t)ly->head_dim, nkv = (size_t)ly->n_kv_heads;
    tailor_status st = TAILOR_OK;
    if (!kraw) {
        kraw = g->kb;
        vraw = g->vb;
        st = linear(ctx, g, &L->k, g->y, g->kb, T);
        if (st == TAILOR_OK && ly->has_v_proj)
            st = linear(ctx, g, &L->v, g->y, g->vb, T);
    }
    if (st)
        return st;
    int nh = decode ? 0 : hist_rows(g, i, p0);
    if (nh > 0) {
        tailor_shape s = {0}, t = {0};
        g4g_put(&s, "rows", nh);
        g4g_put(&s, "kv_heads", (long long)nkv);
        g4g_put(&s, "head_dim", (long long)hd);
        g4g_put(&s, "slots", L->slots);
        g4g_put(&s, "first", p0 - nh);
        t = s;
        long long ts = tuned_slots(g, i);
        g4g_put(&t, "rows", ts < g->tchunk ? ts : g->tchunk);
        g4g_put(&t, "slots", ts);
        g4g_put(&t, "first", 0);
        tailor_binding b[] = {{"k_cache", L->kc}, {"v_cache", L->vc}, {"k_lin", L->klin},
                              {"v_lin", L->vlin}};
        if ((st = g4g_run(ctx, g, "gemma4_kv_gather", &t, &s, b, 4)))
            return st;
    }
    tailor_shape s = {0};
    g4g_put(&s, "tokens", T);
    g4g_put(&s, "kv_heads", (long long)nkv);
    g4g_put(&s, "head_dim", (long long)hd);
    g4g_put(&s, "slots", L->slots);
    g4g_put(&s, "lin", decode ? 0 : 1);
    if (qraw)
        g4g_put(&s, "q_heads", g->cfg.n_heads);
    CUdeviceptr kl = decode ? L->kc : off(L->klin, (size_t)nh * nkv * hd, es);
    CUdeviceptr vl = decode ? L->vc : off(L->vlin, (size_t)nh * nkv * hd, es);
    tailor_binding b[] = {{"k", kraw},
                          {"v", ly->has_v_proj ? vraw : kraw},
                          {"w", L->k_norm},
                          {"inv_freq", L->inv_freq},
                          {"pos", g->posb},
                          {"k_cache", L->kc},
                          {"v_cache", L->vc},
                          {"positions", L->positions},
                          {"k_lin", kl},
                          {"v_lin", vl},
                          {"q", qraw},
                          {"wq", L->q_norm},
                          {"q_out", g->qb}};
    tailor_shape t = s;
    long long ts = tuned_slots(g, i);
    g4g_put(&t, "slots", ts);
    g4g_put(&t, "tokens", tuned_rows(T, ts < g->tchunk ? ts : g->tchunk));
    return g4g_run(ctx, g, "gemma4_kv_store", &t, &s, b, qraw ? 13 : 10);
}

/* q of layer i normed and rotated (op qk_norm_rope) from x (g->qb itself, or a q|k|v stack's
 * output) into g->qb. */
static tailor_status prep_q(tailor_ctx *ctx, tailor_gemma4_gpu *g, int i, int T, CUdeviceptr x)
{
    const tailor_gemma4_layer *ly = &g->cfg.layer[i];
    const g4g_layer *L = &g->layers[i];
    tailor_shape s = {0};
    g4g_put(&s, "tokens", T);
    g4g_put(&s, "heads", g->cfg.n_heads);
    g4g_put(&s, "head_dim", ly->head_dim);
    g4g_put(&s, "weight", 1);
    g4g_put(&s, "rope", ly->full ? 2 : 1);
    g4g_put(&s, "inplace", x == g->qb);
    tailor_binding b[] = {{"x", x}, {"w", L->q_norm}, {"pos", g->posb},
                          {"inv_freq", L->inv_freq}, {"out", g->qb}};
    return run_rows(ctx, g, "qk_norm_rope", &s, "tokens", g->tchunk, b, 5);
}

/* Attention of layer i: q against its source's cache into g->att. q is normed and rotated
 * (g->qb), or with raw_q (decode only) the raw projection that attention_decode prepares
 * itself (prep=1). */
static tailor_status attend(tailor_ctx *ctx, tailor_gemma4_gpu *g, int i, int T, int p0, int decode,
                            CUdeviceptr raw_q)
{
    const tailor_gemma4_config *c = &g->cfg;
    const tailor_gemma4_layer *ly = &c->layer[i];
    const g4g_layer *S = &g->layers[ly->kv_source];
    tailor_shape s = {0};
    g4g_put(&s, "head_dim", ly->head_dim);
    g4g_put(&s, "heads", c->n_heads);
    g4g_put(&s, "kv_heads", ly->n_kv_heads);
    g4g_put(&s, "window", ly->full ? 0 : c->sliding_window);
    tailor_shape t = s;
    if (decode) {
        /* a ring of W slots, or the linear cache of the model's max_tokens: tuned at W, or at
         * one of two lengths whatever max_tokens is (attention_tuned_slots) */
        g4g_put(&s, "kv_len", S->slots);
        g4g_put(&s, "batch", 1);
        g4g_put(&s, "prep", raw_q ? 1 : 0);
        t = s;
        g4g_put(&t, "kv_len", attention_tuned_slots(g, ly->kv_source));
        const g4g_layer *L = &g->layers[i];
        tailor_binding b[] = {{"q", raw_q ? raw_q : g->qb}, {"k_cache", S->kc},
                              {"v_cache", S->vc},           {"positions", S->positions},
                              {"qpos", g->posb},            {"out", g->att},
                              {"q_w", L->q_norm},           {"inv_freq", L->inv_freq}};
        return g4g_run(ctx, g, "attention_decode", &t, &s, b, raw_q ? 8 : 6);
    }
    int nh = hist_rows(g, ly->kv_source, p0);
    g4g_put(&s, "q_len", T);
    g4g_put(&s, "kv_len", nh + T);
    g4g_put(&t, "q_len", g->tchunk); /* every chunk, history or not, runs the chunk's winner */
    g4g_put(&t, "kv_len", g->tchunk);
    tailor_binding b[] = {{"q", g->qb}, {"k", S->klin}, {"v", S->vlin}, {"out", g->att}};
    return g4g_run(ctx, g, "attention_prefill", &t, &s, b, 4);
}

/* The GEMV that reads layer i's output row after the last seam: layer i + 1's q|k|v stack (or
 * q), or after the last layer the int4 LM head (NULL for the 16-bit one: the head is no GEMV
 * of the seam's kind). */
static const g4g_mat *next_input_gemv(const tailor_gemma4_gpu *g, int i, int n_layers)
{
    if (i + 1 < n_layers) {
        const g4g_layer *N = &g->layers[i + 1];
        return g4g_mat_present(&N->qkv) ? &N->qkv : &N->q;
    }
    return g->quantize_head ? &g->lm : NULL;
}

/* Layer i's per-layer-input block after the MLP's seam (mode 2: g->y = the residual in the
 * dtype): gate, gelu times the layer's PLE input, the projection back and its seam. */
static tailor_status ple_block(tailor_ctx *ctx, tailor_gemma4_gpu *g, const g4g_layer *L, int i,
                               int T, CUdeviceptr next, const g4g_mat *next_in)
{
    const tailor_gemma4_config *c = &g->cfg;
    int P = c->ple_dim, LP = c->n_layers * P;
    tailor_status st;
    CUdeviceptr pli = off(g->pli, (size_t)i * (size_t)P, g->es); /* this layer's PLE input */
    if (T == 1 && !L->ple_gate.int4 && g->glu_epilogue)
        st = glu(ctx, g, &L->ple_gate, P, pli, LP, g->ph);
    else if ((st = linear(ctx, g, &L->ple_gate, g->y, g->pg, T)) == TAILOR_OK)
        st = gelu(ctx, g, T, P, g->pg, pli, LP, g->ph);
    if (st)
        return st;
    return linear_seam(ctx, g, &L->ple_proj, g->ph, T, 1, L->post_ple_ln, next, L->scalar,
                       next_in);
}

/* One decoder layer on T rows (input g->y = its normed input, residual g->x). */
static tailor_status layer(tailor_ctx *ctx, tailor_gemma4_gpu *g, int i, int T, int p0, int decode,
                           int n_layers)
{
    const tailor_gemma4_config *c = &g->cfg;
    const tailor_gemma4_layer *ly = &c->layer[i];
    g4g_layer *L = &g->layers[i];
    /* decode (one row) runs a q|k|v stack (dense or int4) as one matrix into g->dec: q, k, v
     * follow each other there; prefill runs the parts (views into the stack) into their own
     * buffers */
    int stacked = decode && T == 1 && g4g_mat_present(&L->qkv);
    size_t qn = (size_t)c->n_heads * (size_t)ly->head_dim;
    size_t kvn = (size_t)ly->n_kv_heads * (size_t)ly->head_dim;
    tailor_status st = stacked ? linear(ctx, g, &L->qkv, g->y, g->dec, T)
                               : linear(ctx, g, &L->q, g->y, g->qb, T);
    if (st)
        return st;
    /* one decode row, when asked: attention_decode normalises and rotates q itself (prep=1) */
    CUdeviceptr raw_q = decode && T == 1 && g->q_prep_in_attention ? (stacked ? g->dec : g->qb) : 0;
    /* else, one decode row of a layer that stores K and V: q prepared in that launch */
    CUdeviceptr q_in_kv = !raw_q && stacked && !ly->kv_shared && g->q_prep_in_kv_store ? g->dec : 0;
    if (!raw_q && !q_in_kv && (st = prep_q(ctx, g, i, T, stacked ? g->dec : g->qb)))
        return st;
    CUdeviceptr kraw = stacked ? off(g->dec, qn, g->es) : 0;
    CUdeviceptr vraw = stacked ? off(g->dec, qn + kvn, g->es) : 0;
    if (!ly->kv_shared && (st = kv_update(ctx, g, i, T, p0, decode, kraw, vraw, q_in_kv)))
        return st;
    if ((st = attend(ctx, g, i, T, p0, decode, raw_q)))
        return st;
    const g4g_mat *mlp_in = g4g_mat_present(&L->gu) ? &L->gu : &L->gate;
    if ((st = linear_seam(ctx, g, &L->o, g->att, T, 0, L->post_attn_ln, L->pre_ff_ln, L->scalar,
                          mlp_in)))
        return st;
    CUdeviceptr next = i + 1 < n_layers ? g->layers[i + 1].input_ln : g->final_norm;
    const g4g_mat *next_in = next_input_gemv(g, i, n_layers);
    int P = c->ple_dim;
    if (T == 1 && mlp_fusable(g, L, ly->inter)) { /* one row, int4: the whole MLP in one launch */
        if (P <= 0)
            return mlp_fused(ctx, g, L, ly->inter, 1, L->post_ff_ln, next, L->scalar, next_in);
        if ((st = mlp_fused(ctx, g, L, ly->inter, 2, L->post_ff_ln, L->post_ff_ln, L->scalar,
                            &L->ple_gate)))
            return st;
        return ple_block(ctx, g, L, i, T, next, next_in);
    }
    if (T == 1 && g4g_mat_present(&L->gu) && g->glu_epilogue) { /* one row: gated in it */
        if ((st = glu(ctx, g, &L->gu, ly->inter, 0, 0, g->hb)))
            return st;
    } else if (T == 1 && g4g_mat_present(&L->gu)) { /* one row: gate|up as one matrix, gating */
        if ((st = linear(ctx, g, &L->gu, g->y, g->dec, T)) ||
            (st = gelu(ctx, g, T, ly->inter, g->dec, off(g->dec, (size_t)ly->inter, g->es),
                       ly->inter, g->hb)))
            return st;
    } else if ((st = linear(ctx, g, &L->gate, g->y, g->gb, T)) ||
               (st = linear(ctx, g, &L->up, g->y, g->ub, T)) ||
               (st = gelu(ctx, g, T, ly->inter, g->gb, g->ub, ly->inter, g->hb)))
        return st;
    if (P <= 0)
        return linear_seam(ctx, g, &L->down, g->hb, T, 1, L->post_ff_ln, next, L->scalar, next_in);
    if ((st = linear_seam(ctx, g, &L->down, g->hb, T, 2, L->post_ff_ln, L->post_ff_ln, L->scalar,
                          &L->ple_gate)))
        return st;
    return ple_block(ctx, g, L, i, T, next, next_in);
}


/* LM head on `rows` rows of g->y starting at row r0, then softcap and argmax. */
static tailor_status head(tailor_ctx *ctx, tailor_gemma4_gpu *g, int r0, int rows)
{
    const tailor_gemma4_config *c = &g->cfg;
    g4g_mat lm = {.n = c->vocab, .k = c->hidden, .w = g->embed}; /* tied to the embedding */
    tailor_status st = seam_settle(ctx, g); /* the LM head is no place for a prologue */
    if (st == TAILOR_OK)
        st = linear(ctx, g, g->lm.qw ? &g->lm : &lm,
                    off(g->y, (size_t)r0 * (size_t)c->hidden, g->es), g->logits, rows);
    if (st)
        return st;
    tailor_shape s = {0};
    g4g_put(&s, "rows", rows);
    g4g_put(&s, "vocab", c->vocab);
    g4g_put(&s, "in_f32", 0);
    g4g_put(&s, "write", 1);
    g4g_put(&s, "feed", 1); /* the next step's token and position, on the device */
    tailor_binding b[] = {{"logits", g->logits}, {"capped", g->capped}, {"ids", g->ids},
                          {"pos", off(g->posb, (size_t)r0, 4)}, {"next_tok", g->tok},
                          {"next_pos", g->posb}};
    return run_rows(ctx, g, "softcap_argmax", &s, "rows", g->logit_rows, b, 6);
}

/* The candidates the op topk keeps: TAILOR_GEMMA4_TOP_K, or the vocabulary if smaller. */
static int top_k(const tailor_gemma4_gpu *g)
{
    return g->cfg.vocab < TAILOR_GEMMA4_TOP_K ? g->cfg.vocab : TAILOR_GEMMA4_TOP_K;
}

tailor_status g4g_top(tailor_ctx *ctx, tailor_gemma4_gpu *g, int row)
{
    tailor_shape s = {0};
    g4g_put(&s, "rows", 1);
    g4g_put(&s, "n", g->cfg.vocab);
    g4g_put(&s, "k", top_k(g));
    tailor_binding b[] = {{"x", off(g->capped, (size_t)row * (size_t)g->cfg.vocab, 4)},
                          {"vals", g->top_vals}, {"ids", g->top_ids}};
    return g4g_run(ctx, g, "topk", &s, &s, b, 3);
}

/* The kernels of one pass over T rows at positions p0.. (tok, pos, pe already on the device):
 * through layers [0, n_layers), the final norm and the LM head of the last row (all rows when
 * all_rows). Queues work only: no host synchronisation (the decode graph captures it). */
tailor_status g4g_pass(tailor_ctx *ctx, tailor_gemma4_gpu *g, int T, int p0, int decode,
                       int n_layers, int all_rows)
{
    g->x = g->x_main; /* seam prologues swap x with x_next */
    g->x_next = g->x_spare;
    g->owing = 0;
    tailor_status st = embed_rows(ctx, g, T);
    if (st == TAILOR_OK)
        st = seam(ctx, g, 3, T, g->tb, g->layers[0].input_ln, g->layers[0].input_ln,
                  g->layers[0].scalar);
    for (int i = 0; i < n_layers && st == TAILOR_OK; i++)
        st = layer(ctx, g, i, T, p0, decode, n_layers);
    if (st == TAILOR_OK)
        st = all_rows ? head(ctx, g, 0, T) : head(ctx, g, T - 1, 1);
    return st;
}

/* ---- host side of a pass ---------------------------------------------------------------------- */

/* Fills the pinned inputs of T tokens at p0 and queues their upload. */
static tailor_status stage_inputs(tailor_ctx *ctx, tailor_gemma4_gpu *g, const int32_t *ids, int T,
                                  int p0)
{
    const tailor_gemma4_config *c = &g->cfg;
    for (int t = 0; t < T; t++) {
        if (ids[t] < 0 || ids[t] >= c->vocab)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "gemma4 gpu: token id %d is outside the vocabulary (0..%d)",
                                    (int)ids[t], c->vocab - 1);
        g->h_tok[t] = ids[t];
        g->h_pos[t] = p0 + t;
    }
    tailor_status st = tailor_gpu_upload_async(ctx, g->gpu, g->tok, g->h_tok, (size_t)T * 4);
    if (st == TAILOR_OK)
        st = tailor_gpu_upload_async(ctx, g->gpu, g->posb, g->h_pos, (size_t)T * 4);
    if (st == TAILOR_OK && c->ple_dim > 0 && !g->ple_table) {
        size_t row = (size_t)c->n_layers * (size_t)c->ple_dim;
        for (int t = 0; t < T; t++)
            g4g_ple_row(g, ids[t], g->h_pe + (size_t)t * row * g->es);
        st = tailor_gpu_upload_async(ctx, g->gpu, g->pe, g->h_pe, (size_t)T * row * g->es);
    }
    return st;
}

/* The argmax `id` the device chose for position p: TAILOR_ERR_VERIFY for -1 (a row of NaN: inf
 * or NaN somewhere upstream), unless launches are knocked out (timing only: *out 0 then). */
static tailor_status take_argmax(tailor_ctx *ctx, const tailor_gemma4_gpu *g, int32_t id, int p,
                                 int32_t *out)
{
    if (id < 0 && !g->knockout[0])
        return tailor_set_error(ctx, TAILOR_ERR_VERIFY,
                                "gemma4 gpu: inf or NaN in the activations (the logits of "
                                "position %d are not finite; compute dtype %s)",
                                p, tailor_dtype_name(g->dt));
    if (out)
        *out = id < 0 ? 0 : id;
    return TAILOR_OK;
}

/* A pass's outputs the host asked for: the soft-capped logits of its rows, the last row's
 * candidates (the op topk), the last row's argmax; each may be NULL. */
typedef struct g4g_wants {
    float *logits;
    float *top_vals;
    int32_t *top_ids;
    int32_t *next;
} g4g_wants;

/* Queues the candidates' kernel over the last row and their download (w->top_vals set). */
static tailor_status queue_top_read(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    tailor_status st = g4g_top(ctx, g, g->top_row);
    if (st == TAILOR_OK)
        st = tailor_gpu_download_async(ctx, g->gpu, g->h_top_vals, g->top_vals,
                                       TAILOR_GEMMA4_TOP_K * 4);
    if (st == TAILOR_OK)
        st = tailor_gpu_download_async(ctx, g->gpu, g->h_top_ids, g->top_ids,
                                       TAILOR_GEMMA4_TOP_K * 4);
    return st;
}

/* Copies the downloaded candidates out (after the stream is done). */
static void take_top(const tailor_gemma4_gpu *g, float *vals, int32_t *ids)
{
    for (int i = 0; i < TAILOR_GEMMA4_TOP_K; i++) {
        int kept = i < top_k(g);
        vals[i] = kept ? g->h_top_vals[i] : 0.0f;
        ids[i] = kept ? g->h_top_ids[i] : -1;
    }
}

/* Reads back the argmax of `rows` rows (and what else w asks for), after the stream is done. An
 * argmax of -1 means a row of NaN: inf or NaN somewhere upstream. */
static tailor_status read_out(tailor_ctx *ctx, tailor_gemma4_gpu *g, int rows, const g4g_wants *w,
                              int p_last)
{
    const tailor_gemma4_config *c = &g->cfg;
    g->top_row = rows - 1;
    tailor_status st = tailor_gpu_download_async(ctx, g->gpu, g->h_ids, g->ids, (size_t)rows * 4);
    if (st == TAILOR_OK && w->logits)
        st = tailor_gpu_download_async(ctx, g->gpu, w->logits, g->capped,
                                       (size_t)rows * (size_t)c->vocab * 4);
    if (st == TAILOR_OK && w->top_vals)
        st = queue_top_read(ctx, g);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, g->gpu);
    if (st)
        return st;
    for (int r = 0; r < rows && st == TAILOR_OK; r++)
        st = take_argmax(ctx, g, g->h_ids[r], p_last - rows + 1 + r,
                         r == rows - 1 ? w->next : NULL);
    if (st == TAILOR_OK && w->top_vals)
        take_top(g, w->top_vals, w->top_ids);
    return st;
}

tailor_status tailor_gemma4_gpu_prefill(tailor_ctx *ctx, tailor_gemma4_gpu *g, const int32_t *ids,
                                        int n, float *logits, int32_t *next)
{
    if (n < 1 || g->pos + n > g->max_tokens)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 gpu: %d prompt tokens at position %d exceed the %d "
                                "positions of the KV cache", n, g->pos, g->max_tokens);
    tailor_status st = TAILOR_OK;
    for (int done = 0; done < n && st == TAILOR_OK;) {
        int T = n - done < g->chunk ? n - done : g->chunk;
        int last = done + T == n;
        st = stage_inputs(ctx, g, ids + done, T, g->pos);
        if (st == TAILOR_OK)
            st = g4g_pass(ctx, g, T, g->pos, 0, g->cfg.n_layers, g->all_logits);
        if (st == TAILOR_OK && (g->all_logits || last)) {
            int rows = g->all_logits ? T : 1;
            float *dst = !logits ? NULL
                         : g->all_logits ? logits + (size_t)done * (size_t)g->cfg.vocab
                                         : logits;
            st = read_out(ctx, g, rows, &(g4g_wants){.logits = dst, .next = next},
                          g->pos + T - 1);
        } else if (st == TAILOR_OK) {
            st = tailor_gpu_sync(ctx, g->gpu); /* the pinned inputs are reused next chunk */
        }
        if (st == TAILOR_OK)
            g->pos += T;
        done += T;
    }
    return st;
}

int g4g_greedy_queues(const tailor_gemma4_gpu *g)
{
    return (g->cfg.ple_dim <= 0 || g->ple_table) && !g->knockout[0];
}

/* Queues one decode step at position p (its inputs on the device): the captured graph, or the
 * pass kernel by kernel. */
static tailor_status queue_step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int p)
{
    /* a graph captured before a kernel of the set changed would launch the old one */
    int graph = g->graph.exec && g->graph_generation == tailor_kernels_generation(g->ks);
    g->top_row = 0; /* a decode step's logits are row 0 */
    return graph ? tailor_gpu_graph_launch(ctx, g->gpu, &g->graph)
                 : g4g_pass(ctx, g, 1, p, 1, g->cfg.n_layers, 0);
}

/* One decode step for token and what w asks for. */
static tailor_status step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token, const g4g_wants *w)
{
    if (g->pos >= g->max_tokens)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 gpu: all %d positions of the KV cache are used",
                                g->max_tokens);
    tailor_status st = stage_inputs(ctx, g, &token, 1, g->pos);
    if (st == TAILOR_OK)
        st = queue_step(ctx, g, g->pos);
    if (st == TAILOR_OK)
        st = read_out(ctx, g, 1, w, g->pos);
    if (st == TAILOR_OK)
        g->pos++;
    return st;
}

tailor_status tailor_gemma4_gpu_step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                     float *logits, int32_t *next)
{
    return step(ctx, g, token, &(g4g_wants){.logits = logits, .next = next});
}

tailor_status tailor_gemma4_gpu_step_top(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                         float *vals, int32_t *ids, int32_t *next)
{
    return step(ctx, g, token, &(g4g_wants){.top_vals = vals, .top_ids = ids, .next = next});
}

/* TAILOR_ERR_MISUSE unless capped's row g->top_row holds the last position's logits (`what`
 * the caller wants of them). */
static tailor_status check_last_row(tailor_ctx *ctx, const tailor_gemma4_gpu *g, const char *what)
{
    if (g->pos < 1 || g->top_row < 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 gpu: no logits to %s (%s)", what,
                                g->pos < 1 ? "no position processed yet"
                                           : "a greedy decode stopped with a step queued past "
                                             "the last kept position");
    return TAILOR_OK;
}

tailor_status tailor_gemma4_gpu_logits(tailor_ctx *ctx, tailor_gemma4_gpu *g, float *logits)
{
    size_t V = (size_t)g->cfg.vocab;
    tailor_status st = check_last_row(ctx, g, "read");
    if (st == TAILOR_OK)
        st = tailor_gpu_download_async(ctx, g->gpu, logits,
                                       off(g->capped, (size_t)g->top_row * V, 4), V * 4);
    return st == TAILOR_OK ? tailor_gpu_sync(ctx, g->gpu) : st;
}

tailor_status tailor_gemma4_gpu_draw(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_sampler *smp,
                                     const float *vals, const int32_t *ids, float *row, int32_t *id,
                                     int *read_row)
{
    *id = tailor_sampler_next_top(smp, vals, ids, TAILOR_GEMMA4_TOP_K);
    *read_row = *id == TAILOR_SAMPLER_UNDECIDED; /* ties past the list */
    if (!*read_row)
        return TAILOR_OK;
    tailor_status st = tailor_gemma4_gpu_logits(ctx, g, row);
    if (st == TAILOR_OK)
        *id = tailor_sampler_next(smp, row);
    return st;
}

tailor_status tailor_gemma4_gpu_top(tailor_ctx *ctx, tailor_gemma4_gpu *g, float *vals,
                                    int32_t *ids)
{
    tailor_status st = check_last_row(ctx, g, "rank");
    if (st == TAILOR_OK)
        st = queue_top_read(ctx, g);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, g->gpu);
    if (st == TAILOR_OK)
        take_top(g, vals, ids);
    return st;
}

/* Greedy steps one at a time (the PLE table on the host: each step's row is staged by the host
 * from the id the step before chose; or a knockout, which may leave the feed out). */
static tailor_status greedy_one_by_one(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token, int n,
                                       int32_t *out, int *kept, tailor_gemma4_id_fn on_id,
                                       void *arg)
{
    for (int i = 0; i < n; i++) {
        tailor_status st = tailor_gemma4_gpu_step(ctx, g, token, NULL, &token);
        if (st)
            return st;
        if (out)
            out[i] = token;
        *kept = i + 1;
        if (on_id && on_id(arg, token))
            break;
    }
    return TAILOR_OK;
}

/* Queues step i of a greedy run (position p): the step, then its argmax's download into
 * h_queue and a mark after it. */
static tailor_status queue_greedy_step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int i, int p)
{
    int q = i % G4G_QUEUE;
    tailor_status st = queue_step(ctx, g, p);
    if (st == TAILOR_OK)
        st = tailor_gpu_download_async(ctx, g->gpu, &g->h_queue[q], g->ids, 4);
    return st ? st : tailor_gpu_mark_record(ctx, g->gpu, &g->marks[q]);
}

tailor_status tailor_gemma4_gpu_greedy(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token, int n,
                                       int32_t *out, int *kept, tailor_gemma4_id_fn on_id,
                                       void *arg)
{
    *kept = 0;
    if (n < 1)
        return TAILOR_OK;
    if (g->pos + n > g->max_tokens)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 gpu: %d decode steps at position %d exceed the %d "
                                "positions of the KV cache", n, g->pos, g->max_tokens);
    if (!g4g_greedy_queues(g))
        return greedy_one_by_one(ctx, g, token, n, out, kept, on_id, arg);
    int p0 = g->pos, queued = 0;
    tailor_status st = stage_inputs(ctx, g, &token, 1, p0);
    for (int i = 0; i < n && st == TAILOR_OK; i++) {
        while (queued < n && queued < i + G4G_QUEUE && st == TAILOR_OK) {
            st = queue_greedy_step(ctx, g, queued, p0 + queued);
            queued++;
        }
        if (st == TAILOR_OK)
            st = tailor_gpu_mark_wait(ctx, g->gpu, &g->marks[i % G4G_QUEUE]);
        if (st)
            break;
        int32_t id = 0;
        st = take_argmax(ctx, g, g->h_queue[i % G4G_QUEUE], p0 + i, &id);
        if (st)
            break;
        if (out)
            out[i] = id;
        g->pos = p0 + i + 1;
        *kept = i + 1;
        if (on_id && on_id(arg, id))
            break;
    }
    /* a step queued past a stop finishes before the next input is staged; its logits replace
     * the kept position's, so there are none to rank until the next step */
    if (*kept < n && *kept < queued)
        g->top_row = -1;
    tailor_status sync = tailor_gpu_sync(ctx, g->gpu);
    return st ? st : sync;
}

tailor_status tailor_gemma4_gpu_profile_step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                             tailor_gemma4_gpu_prof *out, int cap, int *n,
                                             double *total_us)
{
    *n = 0;
    *total_us = 0;
    if (g->pos >= g->max_tokens)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 gpu: all %d positions of the KV cache are used",
                                g->max_tokens);
    tailor_status st = tailor_gpu_timer_create(ctx, g->gpu, &g->prof_timer);
    if (st == TAILOR_OK)
        st = stage_inputs(ctx, g, &token, 1, g->pos);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, g->gpu);
    g->prof = out;
    g->prof_cap = cap;
    g->prof_n = 0;
    if (st == TAILOR_OK)
        st = g4g_pass(ctx, g, 1, g->pos, 1, g->cfg.n_layers, 0);
    g->prof = NULL;
    int32_t next;
    if (st == TAILOR_OK)
        st = read_out(ctx, g, 1, &(g4g_wants){.next = &next}, g->pos);
    if (st == TAILOR_OK)
        g->pos++;
    tailor_gpu_timer_destroy(g->gpu, &g->prof_timer);
    *n = g->prof_n;
    for (int i = 0; i < g->prof_n; i++)
        *total_us += out[i].us;
    return st;
}

void tailor_gemma4_gpu_reset(tailor_gemma4_gpu *g)
{
    g->pos = 0;
    for (int i = 0; i < g->cfg.n_layers; i++)
        if (g->layers[i].positions)
            tailor_gpu_memset8(NULL, g->gpu, g->layers[i].positions, 0xff,
                               (size_t)g->layers[i].slots * 4);
    tailor_gpu_sync(NULL, g->gpu);
}

int tailor_gemma4_gpu_pos(const tailor_gemma4_gpu *g) { return g ? g->pos : 0; }

/* ---- warm-up and the decode graph ------------------------------------------------------------- */

/* One eager decode step at position 0 (loads or tunes every decode kernel and allocates their
 * workspaces), then, unless the model was loaded without one, the same step captured as a
 * graph (a capture that fails is a warning: the steps then run kernel by kernel). Resets the
 * cache afterwards. */
tailor_status g4g_warm_up(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    int32_t tok = g->cfg.bos_id > 0 && g->cfg.bos_id < g->cfg.vocab ? g->cfg.bos_id : 0;
    tailor_status st = stage_inputs(ctx, g, &tok, 1, 0);
    if (st == TAILOR_OK)
        st = g4g_pass(ctx, g, 1, 0, 1, g->cfg.n_layers, 0);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, g->gpu);
    if (st == TAILOR_OK && g->want_graph) {
        tailor_status cs = tailor_gpu_capture_begin(ctx, g->gpu);
        if (cs == TAILOR_OK) {
            cs = g4g_pass(ctx, g, 1, 0, 1, g->cfg.n_layers, 0);
            tailor_status es = tailor_gpu_capture_end(ctx, g->gpu, cs == TAILOR_OK, &g->graph);
            g->graph_generation = tailor_kernels_generation(g->ks);
            if (cs == TAILOR_OK)
                cs = es;
        }
        if (cs != TAILOR_OK) {
            tailor_log(ctx, TAILOR_LOG_WARN,
                       "gemma4 gpu: the decode step could not be captured as a CUDA graph (%s); "
                       "decoding kernel by kernel", tailor_ctx_message(ctx));
            tailor_ctx_clear(ctx);
            tailor_gpu_graph_destroy(g->gpu, &g->graph);
        }
    }
    tailor_gemma4_gpu_reset(g);
    return st;
}

tailor_status tailor_gemma4_gpu_recapture(tailor_ctx *ctx, tailor_gemma4_gpu *g)
{
    tailor_gpu_graph_destroy(g->gpu, &g->graph);
    tailor_status st = g4g_warm_up(ctx, g);
    if (st == TAILOR_OK && g->want_graph && !g->graph.exec) /* timings would compare unlike */
        st = tailor_set_error(ctx, TAILOR_ERR_CUDA, "gemma4 gpu: the decode step could not be "
                              "captured again as a CUDA graph (the warning above says why)");
    return st;
}

/* ---- debugging: layer by layer against the CPU reference --------------------------------------- */

tailor_status tailor_gemma4_gpu_debug_layers(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                             double tol, int *first_bad)
{
    *first_bad = -1;
    if (!g->model)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 gpu: layer debugging needs a checkpoint, not random weights");
    const tailor_gemma4_config *c = &g->cfg;
    size_t V = (size_t)c->vocab;
    float *gl = malloc(V * sizeof *gl);
    if (!gl)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 gpu: out of memory");
    tailor_status st = TAILOR_OK;
    for (int l = 0; l < c->n_layers && st == TAILOR_OK; l++) {
        tailor_gemma4_gpu_reset(g);
        st = stage_inputs(ctx, g, &token, 1, 0);
        if (st == TAILOR_OK)
            st = g4g_pass(ctx, g, 1, 0, 1, l + 1, 0);
        int32_t id = 0;
        if (st == TAILOR_OK)
            st = read_out(ctx, g, 1, &(g4g_wants){.logits = gl, .next = &id}, 0);
        if (st)
            break;
        /* the CPU reference with the same depth */
        tailor_gemma4_cpu *cpu = NULL;
        tailor_gemma4_cpu_opts o = {.max_tokens = 1, .layers = l + 1};
        const float *cl = NULL;
        st = tailor_gemma4_cpu_create(ctx, g->model, &o, &cpu);
        if (st == TAILOR_OK)
            st = tailor_gemma4_cpu_step(ctx, cpu, token, &cl);
        if (st == TAILOR_OK) {
            double md = 0, mr = 0;
            for (size_t v = 0; v < V; v++) {
                double d = fabs((double)gl[v] - cl[v]);
                md = d > md ? d : md;
                mr = fabs(cl[v]) > mr ? fabs(cl[v]) : mr;
            }
            int bad = md > tol;
            if (bad && *first_bad < 0)
                *first_bad = l;
            tailor_log(ctx, bad ? TAILOR_LOG_WARN : TAILOR_LOG_INFO,
                       "debug layers: through layer %d (%s, head_dim %d%s): max |gpu - cpu| logit "
                       "= %.4g (max |cpu| %.3g)%s", l, c->layer[l].full ? "full" : "sliding",
                       c->layer[l].head_dim, c->layer[l].kv_shared ? ", kv-shared" : "", md, mr,
                       bad ? "  <-- over tolerance" : "");
        }
        tailor_gemma4_cpu_destroy(cpu);
    }
    free(gl);
    tailor_gemma4_gpu_reset(g);
    return st;
}
