/* test_gemma4_golden.c — needs no fixtures: the proportional RoPE layout, and the cached
 * reference forward (ring-buffer sliding cache) against (a) the same forward with a linear cache
 * and (b) an independent whole-sequence recompute written here, over generations several
 * times longer than the sliding window, on tiny random checkpoints of every layout. */
#include <math.h>
#include <string.h>

#include "gemma4.h"
#include "safetensors.h"
#include "sampler.h"
#include "test_gemma4_writer.h"
#include "testlib.h"

/* ---- RoPE layout ------------------------------------------------------------------------------ */

static void test_rope_layout(tailor_ctx *ctx)
{
    tailor_gemma4_config cfg;
    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-e2b", &cfg));
    CHECK(cfg.layer[4].full && cfg.layer[4].head_dim == 512);
    CHECK(!cfg.layer[0].full && cfg.layer[0].head_dim == 256);
    float f[256];
    tailor_gemma4_rope_freqs(&cfg, 4, f);
    /* proportional: 64 of 256 pairs rotate, exponent over 512, base 1e6 */
    CHECK(f[0] == 1.0f);
    CHECKF(fabs(f[63] - pow(1e6, -126.0 / 512.0)) < 1e-9, "f[63] = %g", (double)f[63]);
    CHECKF(fabs(f[1] - pow(1e6, -2.0 / 512.0)) < 1e-7, "f[1] = %g", (double)f[1]);
    int zeros = 0;
    for (int j = 64; j < 256; j++)
        zeros += f[j] == 0.0f;
    CHECKF(zeros == 192, "%d of the pairs 64..255 are unrotated (want 192)", zeros);
    tailor_gemma4_rope_freqs(&cfg, 0, f);
    CHECK(f[0] == 1.0f);
    CHECKF(fabs(f[127] - pow(1e4, -254.0 / 256.0)) < 1e-9, "sliding f[127] = %g", (double)f[127]);

    /* apply at position 3: dim 0 pairs with 256 and turns by 3 rad; dims 64..255 stay */
    float x[512];
    for (int i = 0; i < 512; i++)
        x[i] = (float)(i % 7) - 3.0f;
    float y[512];
    memcpy(y, x, sizeof x);
    tailor_gemma4_rope_freqs(&cfg, 4, f);
    tailor_gemma4_rope_apply(f, 512, 3, y);
    CHECKF(fabsf(y[0] - (x[0] * cosf(3) - x[256] * sinf(3))) < 1e-5, "y[0] = %g", (double)y[0]);
    CHECKF(fabsf(y[256] - (x[256] * cosf(3) + x[0] * sinf(3))) < 1e-5, "y[256] = %g",
           (double)y[256]);
    int same = 1;
    for (int i = 64; i < 256; i++)
        same &= y[i] == x[i] && y[i + 256] == x[i + 256];
    CHECKF(same, "proportional RoPE changed a dimension it must leave alone");
    CHECK(y[63] != x[63] || x[63] == 0 || x[319] == 0);
}

/* ---- an independent whole-sequence forward ---------------------------------------------------- */

typedef struct naive {
    const tw_spec *s;
    tailor_st *st;
    const char *pre;
} naive;

static float *nv_get(naive *nv, const char *fmt, int i)
{
    char suffix[200], name[260];
    snprintf(suffix, sizeof suffix, fmt, i);
    snprintf(name, sizeof name, "%s%s", nv->pre, suffix);
    const tailor_st_tensor *t = tailor_st_find(nv->st, name);
    if (!t)
        return NULL;
    float *v = malloc((size_t)t->numel * sizeof *v);
    for (int64_t j = 0; j < t->numel; j++)
        v[j] = tailor_st_load_f32(t, j);
    return v;
}

static void nv_rms(double *x, const float *w, int n)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++)
        x[i] = x[i] * r * (w ? w[i] : 1.0);
}

static void nv_mv(const float *W, const double *x, double *y, int n, int k)
{
    for (int r = 0; r < n; r++) {
        double s = 0;
        for (int c = 0; c < k; c++)
            s += (double)W[(size_t)r * k + c] * x[c];
        y[r] = s;
    }
}

static double nv_gelu(double z) { return 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))); }

static void nv_rope(double *x, int d, int pos, int full)
{
    int half = d / 2, rot = full ? (int)(0.25 * d) / 2 : half;
    double base = full ? 1e6 : 1e4;
    for (int j = 0; j < rot; j++) {
        double a = pos * pow(base, -2.0 * j / d), c = cos(a), s = sin(a);
        double u = x[j], v = x[j + half];
        x[j] = u * c - v * s;
        x[j + half] = v * c + u * s;
    }
}

/* logits[T][vocab] for the whole sequence, recomputed from scratch with no cache. */
static void naive_forward(naive *nv, const int32_t *ids, int T, float *logits)
{
    const tw_spec *s = nv->s;
    int H = s->H, L = s->L, P = s->P, V = s->vocab;
    double *x = calloc((size_t)T * H, sizeof *x), *pli = calloc((size_t)T * L * (P ? P : 1), sizeof *pli);
    float *E = nv_get(nv, "embed_tokens.weight", 0);
    double es = tailor_round_bf16((float)sqrt((double)H));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < H; j++)
            x[(size_t)t * H + j] = E[(size_t)ids[t] * H + j] * es;
    if (P) {
        float *EP = nv_get(nv, "embed_tokens_per_layer.weight", 0), *Wpm = nv_get(nv, "per_layer_model_projection.weight", 0);
        float *pn = nv_get(nv, "per_layer_projection_norm.weight", 0);
        double *c = malloc((size_t)L * P * sizeof *c);
        double ps = tailor_round_bf16((float)sqrt((double)P)); /* bf16(sqrt(P)), as HF in bf16 */
        for (int t = 0; t < T; t++) {
            nv_mv(Wpm, x + (size_t)t * H, c, L * P, H);
            for (int l = 0; l < L; l++) {
                double *cl = c + (size_t)l * P;
                for (int j = 0; j < P; j++)
                    cl[j] /= sqrt((double)H);
                nv_rms(cl, pn, P);
                for (int j = 0; j < P; j++)
                    pli[((size_t)t * L + l) * P + j] =
                        (cl[j] + EP[(size_t)ids[t] * L * P + (size_t)l * P + j] * ps) / sqrt(2.0);
            }
        }
        free(EP), free(Wpm), free(pn), free(c);
    }
    double **K = calloc((size_t)L, sizeof *K), **Vv = calloc((size_t)L, sizeof *Vv);
    int first_shared = L - s->shared;
    size_t big = (size_t)T * 4096;
    double *y = malloc((size_t)H * sizeof *y), *q = malloc(big * sizeof *q), *tmp = malloc(65536 * sizeof *tmp);
    double *att = malloc(4096 * sizeof *att), *o = malloc((size_t)T * H * sizeof *o), *sc = malloc((size_t)T * sizeof *sc);
    double *g = malloc(65536 * sizeof *g), *u = malloc(65536 * sizeof *u);
    for (int i = 0; i < L; i++) {
        int full = tw_full(s, i), hd = full ? s->ghd : s->hd;
        int shared = s->shared && i >= first_shared;
        int src = i;
        if (shared)
            for (int j = first_shared - 1; j >= 0; j--)
                if (tw_full(s, j) == full) {
                    src = j;
                    break;
                }
        int nkv = full && s->k_eq_v && s->ngkv ? s->ngkv : s->nkv, kvd = nkv * hd, qd = s->nq * hd;
        int inter = s->inter * (s->double_wide && shared ? 2 : 1);
        float *in_ln = nv_get(nv, "layers.%d.input_layernorm.weight", i), *pa = nv_get(nv, "layers.%d.post_attention_layernorm.weight", i);
        float *pf = nv_get(nv, "layers.%d.pre_feedforward_layernorm.weight", i), *pof = nv_get(nv, "layers.%d.post_feedforward_layernorm.weight", i);
        float *Wq = nv_get(nv, "layers.%d.self_attn.q_proj.weight", i), *qn = nv_get(nv, "layers.%d.self_attn.q_norm.weight", i);
        float *Wo = nv_get(nv, "layers.%d.self_attn.o_proj.weight", i), *lsc = nv_get(nv, "layers.%d.layer_scalar", i);
        float *Wg = nv_get(nv, "layers.%d.mlp.gate_proj.weight", i), *Wu = nv_get(nv, "layers.%d.mlp.up_proj.weight", i);
        float *Wd = nv_get(nv, "layers.%d.mlp.down_proj.weight", i);
        if (!shared) {
            float *Wk = nv_get(nv, "layers.%d.self_attn.k_proj.weight", i), *Wv = nv_get(nv, "layers.%d.self_attn.v_proj.weight", i);
            float *kn = nv_get(nv, "layers.%d.self_attn.k_norm.weight", i);
            K[i] = malloc((size_t)T * kvd * sizeof(double));
            Vv[i] = malloc((size_t)T * kvd * sizeof(double));
            for (int t = 0; t < T; t++) {
                memcpy(y, x + (size_t)t * H, (size_t)H * sizeof *y);
                nv_rms(y, in_ln, H);
                double *kt = K[i] + (size_t)t * kvd, *vt = Vv[i] + (size_t)t * kvd;
                nv_mv(Wk, y, kt, kvd, H);
                if (Wv)
                    nv_mv(Wv, y, vt, kvd, H);
                else
                    memcpy(vt, kt, (size_t)kvd * sizeof *vt); /* K=V: raw K */
                for (int h = 0; h < nkv; h++) {
                    nv_rms(kt + h * hd, kn, hd);
                    nv_rope(kt + h * hd, hd, t, full);
                    nv_rms(vt + h * hd, NULL, hd);
                }
            }
            free(Wk), free(Wv), free(kn);
        }
        for (int t = 0; t < T; t++) {
            memcpy(y, x + (size_t)t * H, (size_t)H * sizeof *y);
            nv_rms(y, in_ln, H);
            nv_mv(Wq, y, q, qd, H);
            for (int h = 0; h < s->nq; h++) {
                double *qh = q + h * hd;
                nv_rms(qh, qn, hd);
                nv_rope(qh, hd, t, full);
                int kvh = h / (s->nq / nkv);
                double mx = -1e300, sum = 0;
                for (int uu = 0; uu <= t; uu++) {
                    sc[uu] = -1e300;
                    if (!full && t - uu >= s->W)
                        continue;
                    double d = 0;
                    for (int e = 0; e < hd; e++)
                        d += qh[e] * K[src][(size_t)uu * kvd + kvh * hd + e];
                    sc[uu] = d;
                    mx = d > mx ? d : mx;
                }
                for (int uu = 0; uu <= t; uu++) {
                    sc[uu] = sc[uu] <= -1e299 ? 0 : exp(sc[uu] - mx);
                    sum += sc[uu];
                }
                for (int e = 0; e < hd; e++) {
                    double a = 0;
                    for (int uu = 0; uu <= t; uu++)
                        a += sc[uu] / sum * Vv[src][(size_t)uu * kvd + kvh * hd + e];
                    att[h * hd + e] = a;
                }
            }
            nv_mv(Wo, att, o + (size_t)t * H, H, qd);
        }
        for (int t = 0; t < T; t++) {
            double *xt = x + (size_t)t * H, *ot = o + (size_t)t * H;
            nv_rms(ot, pa, H);
            for (int j = 0; j < H; j++)
                xt[j] += ot[j];
            memcpy(y, xt, (size_t)H * sizeof *y);
            nv_rms(y, pf, H);
            nv_mv(Wg, y, g, inter, H);
            nv_mv(Wu, y, u, inter, H);
            for (int j = 0; j < inter; j++)
                g[j] = nv_gelu(g[j]) * u[j];
            nv_mv(Wd, g, tmp, H, inter);
            nv_rms(tmp, pof, H);
            for (int j = 0; j < H; j++)
                xt[j] += tmp[j];
            if (P) {
                float *Wpg = nv_get(nv, "layers.%d.per_layer_input_gate.weight", i), *Wpp = nv_get(nv, "layers.%d.per_layer_projection.weight", i);
                float *ppn = nv_get(nv, "layers.%d.post_per_layer_input_norm.weight", i);
                nv_mv(Wpg, xt, g, P, H);
                for (int j = 0; j < P; j++)
                    g[j] = nv_gelu(g[j]) * pli[((size_t)t * L + i) * P + j];
                nv_mv(Wpp, g, tmp, H, P);
                nv_rms(tmp, ppn, H);
                for (int j = 0; j < H; j++)
                    xt[j] += tmp[j];
                free(Wpg), free(Wpp), free(ppn);
            }
            for (int j = 0; j < H; j++)
                xt[j] *= lsc[0];
        }
        free(in_ln), free(pa), free(pf), free(pof), free(Wq), free(qn), free(Wo), free(lsc), free(Wg), free(Wu), free(Wd);
    }
    float *fn = nv_get(nv, "norm.weight", 0);
    for (int t = 0; t < T; t++) {
        double *xt = x + (size_t)t * H;
        nv_rms(xt, fn, H);
        for (int v = 0; v < V; v++) {
            double l = 0;
            for (int j = 0; j < H; j++)
                l += (double)E[(size_t)v * H + j] * xt[j];
            logits[(size_t)t * V + v] = (float)(30.0 * tanh(l / 30.0));
        }
    }
    for (int i = 0; i < L; i++)
        free(K[i]), free(Vv[i]);
    free(K), free(Vv), free(x), free(pli), free(E), free(fn), free(y), free(q), free(tmp), free(att), free(o), free(sc), free(g), free(u);
}

/* ---- cached vs linear vs naive -------------------------------------------------------------- */

/* opts.layers (layer-by-layer debugging): all layers reproduce the full step exactly; one layer
 * gives finite, different logits (and, with PLE, reads the whole per-layer row: the bug it
 * had was a row stride of `layers` instead of the model's layer count). */
static void check_truncated(tailor_ctx *ctx, const char *label, const tailor_gemma4 *m,
                            int32_t id, const float *full, int V)
{
    int L = tailor_gemma4_get_config(m)->n_layers;
    for (int layers = L; layers >= 1; layers -= L > 1 ? L - 1 : 1) {
        tailor_gemma4_cpu *run = NULL;
        tailor_gemma4_cpu_opts o = {.max_tokens = 1, .layers = layers};
        CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &o, &run));
        const float *a = NULL;
        if (run)
            CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, run, id, &a));
        double md = 0;
        int finite = 1;
        for (int v = 0; a && v < V; v++) {
            finite &= isfinite(a[v]) != 0;
            double d = fabs((double)a[v] - full[v]);
            md = d > md ? d : md;
        }
        if (a && layers == L)
            CHECKF(md == 0.0, "%s: all %d layers through opts.layers differ by %g", label, L, md);
        if (a && layers < L)
            CHECKF(finite && md > 1e-3, "%s: %d of %d layers: finite %d, difference %g", label,
                   layers, L, finite, md);
        tailor_gemma4_cpu_destroy(run);
        if (L == 1)
            break;
    }
}

static void run_case(tailor_ctx *ctx, const char *label, const tw_spec *s, int n_prompt, int n_gen)
{
    char dir[256];
    tw_tmpdir(dir, sizeof dir, "golden");
    CHECK(tw_write_model(s, dir) == 0);
    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    if (!m) {
        tw_rmdir(dir);
        return;
    }
    int T = n_prompt + n_gen, V = s->vocab;
    tailor_gemma4_cpu *ring = NULL, *lin = NULL;
    tailor_gemma4_cpu_opts o1 = {.max_tokens = T}, o2 = {.max_tokens = T, .linear_cache = 1};
    CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &o1, &ring));
    CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &o2, &lin));
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    float *cached = malloc((size_t)T * V * sizeof *cached), *ref = malloc((size_t)T * V * sizeof *ref);
    test_rng r;
    test_rng_seed(&r, s->seed + 1);
    ids[0] = 2;
    for (int t = 1; t < n_prompt; t++)
        ids[t] = 3 + (int32_t)(test_rng_next(&r) % (uint64_t)(V - 3));
    double max_lin = 0;
    for (int t = 0; t < T && ring && lin; t++) {
        const float *a = NULL, *b = NULL;
        CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, ring, ids[t], &a));
        CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, lin, ids[t], &b));
        if (!a || !b)
            break;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)a[v] - b[v]);
            max_lin = d > max_lin ? d : max_lin;
        }
        memcpy(cached + (size_t)t * V, a, (size_t)V * sizeof *a);
        if (t + 1 < T && t + 1 >= n_prompt)
            ids[t + 1] = tailor_argmax(a, V); /* greedy generation */
    }
    /* same arithmetic in the same order: the ring must reproduce the linear cache exactly */
    CHECKF(max_lin == 0.0, "%s: ring cache differs from linear cache by %g", label, max_lin);
    check_truncated(ctx, label, m, ids[0], cached, V);

    naive nv = {s, NULL, s->nested ? "model.language_model." : "model."};
    char path[300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(ctx, tailor_st_open(ctx, path, &nv.st));
    if (nv.st) {
        naive_forward(&nv, ids, T, ref);
        /* fp32 step path vs a double recompute: differences are fp32 rounding (~1e-7 relative
         * per op) through a few layers (measured ~1e-5); 2e-4 absolute on logits of magnitude
         * ~10 is far below any layout error (a wrong RoPE pair, mask, source layer or scale
         * moves logits by >1e-3: using sqrt(P) instead of bf16(sqrt(P)) alone gives 7e-4) */
        double max_d = 0, max_l = 0;
        for (size_t i = 0; i < (size_t)T * V; i++) {
            double d = fabs((double)cached[i] - ref[i]);
            max_d = d > max_d ? d : max_d;
            max_l = fabs(ref[i]) > max_l ? fabs(ref[i]) : max_l;
        }
        CHECKF(max_d < 2e-4, "%s: cached step logits differ from the whole-sequence recompute by "
                             "%g (max |logit| %g)", label, max_d, max_l);
        printf("%s: T=%d W=%d, ring==linear exactly, max |cached - recompute| = %.3g (max |logit| "
               "%.3g)\n", label, T, s->W, max_d, max_l);
        tailor_st_close(nv.st);
    }
    free(ids), free(cached), free(ref);
    tailor_gemma4_cpu_destroy(ring);
    tailor_gemma4_cpu_destroy(lin);
    tailor_gemma4_close(m);
    tw_rmdir(dir);
}

/* A NaN in the weights (the final norm's first value) reaches every logit: the step reports it,
 * as the GPU forward does, rather than handing out logits whose argmax is 0. */
static void test_nonfinite(tailor_ctx *ctx)
{
    tw_spec s = {.H = 32, .L = 2, .nq = 2, .nkv = 1, .hd = 16, .ghd = 32, .inter = 40, .W = 4,
                 .P = 0, .vocab = 64, .types = "sf", .dtype = "F32", .seed = 20260107};
    char dir[256], path[600], cfg[16384];
    tw_tmpdir(dir, sizeof dir, "nonfinite");
    tw_config_json(&s, cfg, sizeof cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(tw_write_text(path, cfg) == 0);
    tw *w = calloc(1, sizeof *w);
    tw_model_tensors(&s, w);
    int poisoned = 0;
    for (int i = 0; i < w->n; i++) {
        if (strcmp(w->t[i].name, "model.norm.weight") == 0) {
            ((float *)w->t[i].data)[0] = NAN;
            poisoned = 1;
        }
    }
    CHECK(poisoned);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(tw_write(w, path) == 0);
    tw_free(w);
    free(w);
    tailor_gemma4 *m = NULL;
    tailor_gemma4_cpu *run = NULL;
    tailor_gemma4_cpu_opts o = {.max_tokens = 4};
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    if (m)
        CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &o, &run));
    if (run) {
        const float *logits = NULL;
        CHECK(tailor_gemma4_cpu_step(ctx, run, 2, &logits) == TAILOR_ERR_VERIFY && !logits);
        CHECKF(strstr(tailor_ctx_message(ctx), "gemma4 cpu: inf or NaN in the activations (the "
                                               "logits of position 0 are not finite"),
               "%s", tailor_ctx_message(ctx));
        CHECK(tailor_gemma4_cpu_pos(run) == 0);
    }
    tailor_gemma4_cpu_destroy(run);
    tailor_gemma4_close(m);
    tw_rmdir(dir);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    test_rope_layout(ctx);
    test_nonfinite(ctx);

    uint64_t seed = 20260101;
    printf("seed %llu\n", (unsigned long long)seed);
    /* E2B-like: PLE, KV sharing by type (layer 5 full reads 2, layer 4 sliding reads 3),
     * double-wide MLP, window 5, 48 positions */
    tw_spec e2b = {.H = 32, .L = 6, .nq = 2, .nkv = 1, .hd = 16, .ghd = 32, .inter = 48, .W = 5,
                   .P = 8, .shared = 2, .double_wide = 1, .vocab = 64, .types = "ssfssf",
                   .dtype = "BF16", .seed = seed};
    run_case(ctx, "e2b-like", &e2b, 12, 36);
    /* same, with per_layer_config instead of global_head_dim */
    tw_spec e2b_plc = e2b;
    e2b_plc.per_layer_config = 1;
    e2b_plc.seed = seed + 10;
    run_case(ctx, "e2b-like per_layer_config", &e2b_plc, 10, 30);
    /* 31B-like: K=V full layers with their own KV-head count, GQA 2 and 4, F32 weights */
    tw_spec keqv = {.H = 32, .L = 5, .nq = 4, .nkv = 2, .ngkv = 1, .hd = 16, .ghd = 32,
                    .inter = 40, .W = 7, .P = 0, .k_eq_v = 1, .vocab = 64, .types = "ssfsf",
                    .dtype = "F32", .seed = seed + 20};
    run_case(ctx, "k=v", &keqv, 9, 31);
    /* nested config, model.language_model. prefix, E4B-like sharing without double width */
    tw_spec nested = {.H = 32, .L = 5, .nq = 2, .nkv = 2, .hd = 16, .ghd = 32, .inter = 40,
                      .W = 4, .P = 8, .shared = 2, .vocab = 64, .types = "sfssf", .nested = 1,
                      .dtype = "BF16", .seed = seed + 30};
    run_case(ctx, "nested", &nested, 8, 28);

    tailor_ctx_destroy(ctx);
    return test_finish("test_gemma4_golden");
}
