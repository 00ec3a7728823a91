/* forward.c — the plain-C fp32 reference forward of Gemma 4 (GEMMA4.md §2), one token per step,
 * with a KV cache: a ring of W slots on sliding layers, a linear cache on full layers. Weights
 * are read from the mapping and converted per row; the step path allocates nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4.h"
#include "gemma4_internal.h"
#include "half.h"
#include "w4a16.h"

struct tailor_gemma4_cpu {
    const tailor_gemma4 *m;
    int max_tokens;
    int pos;          /* positions processed */
    int linear_cache; /* every layer keeps max_tokens slots */
    int run_layers;   /* layers a step runs (opts.layers, else all) */
    /* KV cache, per layer that owns one (NULL on KV-shared layers) */
    float **kc, **vc; /* [L] -> [slots][n_kv_heads * head_dim] */
    int **slot_pos;   /* [L] -> [slots]: position held by each slot, -1 = empty */
    int *slots;       /* [L] */
    float **inv_freq; /* [L] -> [head_dim / 2] */
    /* activations */
    float *x;       /* [H] residual stream */
    float *y;       /* [H] normed input of a block */
    float *t;       /* [H] block output */
    float *q;       /* [n_heads * max head_dim] */
    float *kv;      /* [max kv dim] raw k, then v when it is the raw k */
    float *vraw;    /* [max kv dim] */
    float *att;     /* [n_heads * max head_dim] */
    float *scores;  /* [max_tokens] */
    float *gate;    /* [max inter] */
    float *up;      /* [max inter] */
    float *pli;     /* [L * P] per-layer inputs of this token */
    float *ple_tmp; /* [max(P, 1)] */
    float *logits;  /* [vocab] */
    float *scratch; /* [max k] one dequantized int4 row */
    float *head;    /* [vocab, H] the dequantized int4 head (opts.quantize_head), or NULL */
    float **qw;     /* opts.quantize: [L * G4_QMATS] -> [n, k] dequantized int4 copies of the
                       layers' linears (NULL entries: used as stored), or NULL */
    float embed_scale, ple_scale, ple_proj_scale, ple_input_scale;
};

/* ---- weights as fp32 --------------------------------------------------------------------------- */

static float dot_f32(const float *a, const float *b, int n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static float dot_bf16(const uint8_t *w, const float *x, int n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        uint16_t h[4];
        memcpy(h, w + 2 * (size_t)i, 8);
        s0 += tailor_bf16_to_f32(h[0]) * x[i];
        s1 += tailor_bf16_to_f32(h[1]) * x[i + 1];
        s2 += tailor_bf16_to_f32(h[2]) * x[i + 2];
        s3 += tailor_bf16_to_f32(h[3]) * x[i + 3];
    }
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, w + 2 * (size_t)i, 2);
        s0 += tailor_bf16_to_f32(h) * x[i];
    }
    return (s0 + s1) + (s2 + s3);
}

/* Dense row r of a F32/F16/BF16 [rows, k] tensor into out[k]. */
static void dense_row(const tailor_st_tensor *t, int64_t r, int k, float *out)
{
    const uint8_t *p = (const uint8_t *)t->data + (size_t)r * (size_t)k * tailor_st_dtype_size(t->dtype);
    if (t->dtype == TAILOR_ST_F32) {
        memcpy(out, p, (size_t)k * 4);
    } else {
        for (int c = 0; c < k; c++) {
            uint16_t h;
            memcpy(&h, p + 2 * (size_t)c, 2);
            out[c] = t->dtype == TAILOR_ST_BF16 ? tailor_bf16_to_f32(h) : tailor_f16_to_f32(h);
        }
    }
}

static float round_to(tailor_st_dtype d, float v)
{
    return d == TAILOR_ST_BF16 ? tailor_round_bf16(v) : d == TAILOR_ST_F16 ? tailor_round_f16(v) : v;
}

/* Row r of an int4 matrix: W[r, c] = round_scale_dtype((q - zp) * scale), as compressed-tensors
 * dequantizes (GEMMA4.md §6). */
static void int4_row(const g4_mat *m, int r, float *out)
{
    int kw = (m->k + 7) / 8;
    const uint8_t *pk = (const uint8_t *)m->packed->data + (size_t)r * (size_t)kw * 4;
    tailor_st_dtype sd = m->scale->dtype;
    for (int c = 0; c < m->k; c++) {
        uint32_t word;
        memcpy(&word, pk + 4 * (size_t)(c / 8), 4);
        int q = (int)((word >> (4 * (c % 8))) & 15u) - 8;
        int g = m->g_idx ? (int)tailor_st_load_i64(m->g_idx, c) : c / m->group;
        float s = tailor_st_load_f32(m->scale, (int64_t)r * m->groups + g);
        int z = 0;
        if (m->zp) {
            int64_t zi = (int64_t)(r / 8) * m->groups + g;
            uint32_t zw = (uint32_t)tailor_st_load_i64(m->zp, zi);
            z = (int)((zw >> (4 * (r % 8))) & 15u) - 8;
        }
        out[c] = round_to(sd, (float)(q - z) * s);
    }
}

void g4_mat_row(const g4_mat *m, int r, float *out)
{
    if (m->int4)
        int4_row(m, r, out);
    else
        dense_row(m->w, r, m->k, out);
}

void g4_matvec(const g4_mat *m, const float *x, float *y, float *scratch)
{
    if (!m->int4 && m->w->dtype == TAILOR_ST_BF16) {
        const uint8_t *base = m->w->data;
        for (int r = 0; r < m->n; r++)
            y[r] = dot_bf16(base + (size_t)r * (size_t)m->k * 2, x, m->k);
        return;
    }
    if (!m->int4 && m->w->dtype == TAILOR_ST_F32 && ((uintptr_t)m->w->data & 3u) == 0) {
        const float *base = m->w->data;
        for (int r = 0; r < m->n; r++)
            y[r] = dot_f32(base + (size_t)r * (size_t)m->k, x, m->k);
        return;
    }
    for (int r = 0; r < m->n; r++) {
        g4_mat_row(m, r, scratch);
        y[r] = dot_f32(scratch, x, m->k);
    }
}

/* ---- the small ops ------------------------------------------------------------------------------- */

/* out = x * (mean(x^2) + eps)^-1/2 * w (w NULL: no weight). out may alias x. */
static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = powf((float)(ss / n) + eps, -0.5f);
    for (int i = 0; i < n; i++)
        out[i] = w ? x[i] * r * w[i] : x[i] * r;
}

static float gelu_tanh(float z)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * z * (1.0f + tanhf(k * (z + 0.044715f * z * z * z)));
}

/* ---- run state ------------------------------------------------------------------------------------ */

static float *falloc(size_t n, int *ok)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        *ok = 0;
    return p;
}

/* The int4 copy of a dense [n, k] matrix w (dtype wd) that tailor_w4a16_quantize_rows makes
 * with layout lay and scales in dtype sd (what the GPU's --quantize and --quantize-head upload),
 * dequantized to fp32 into *out (malloc'd, n x k). */
static tailor_status dequantized_copy(tailor_ctx *ctx, const tailor_w4a16_layout *lay,
                                      const void *w, tailor_dtype wd, tailor_dtype sd, float **out)
{
    enum { ROWS = 256 };
    size_t K = (size_t)lay->k, wpr = K / 8, G = (size_t)lay->groups;
    *out = malloc((size_t)lay->n * K * sizeof **out);
    int32_t *packed = malloc(ROWS * wpr * sizeof *packed);
    uint16_t *scales = malloc(ROWS * G * sizeof *scales);
    if (!*out || !packed || !scales) {
        free(*out);
        *out = NULL;
        free(packed);
        free(scales);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 cpu: out of memory");
    }
    for (int r0 = 0; r0 < lay->n; r0 += ROWS) {
        int rows = lay->n - r0 < ROWS ? lay->n - r0 : ROWS;
        tailor_w4a16_quantize_rows(lay, w, wd, sd, r0, rows, packed, scales);
        for (int r = 0; r < rows; r++)
            for (size_t c = 0; c < K; c++) {
                uint32_t word = (uint32_t)packed[(size_t)r * wpr + c / 8];
                int q = (int)((word >> (4 * (c % 8))) & 0xfu) - 8;
                float sc = tailor_dtype_load(sd, scales, (size_t)r * G + c / (size_t)lay->group);
                (*out)[((size_t)r0 + (size_t)r) * K + c] = (float)q * sc;
            }
    }
    free(packed);
    free(scales);
    return TAILOR_OK;
}

/* opts.quantize_head: the int4 copy of the tied embedding that the GPU's quantize_head makes
 * (group tailor_w4a16_group_for(hidden), scales in dtype sd), dequantized into st->head. */
static tailor_status quantized_head(tailor_ctx *ctx, tailor_gemma4_cpu *st, tailor_dtype sd)
{
    const tailor_gemma4_config *cfg = &st->m->cfg;
    const tailor_st_tensor *e = st->m->embed;
    tailor_dtype ed;
    tailor_w4a16_layout lay;
    int group = tailor_w4a16_group_for(cfg->hidden);
    if ((sd != TAILOR_DTYPE_F16 && sd != TAILOR_DTYPE_BF16) || !g4_st_dtype(e->dtype, &ed) ||
        !group || tailor_w4a16_layout_init(NULL, cfg->vocab, cfg->hidden, group, 0, &lay))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 cpu: quantize_head needs a 16-bit scale dtype, a float "
                                "embedding and a hidden size 32 divides (hidden %d)", cfg->hidden);
    return dequantized_copy(ctx, &lay, e->data, ed, sd, &st->head);
}

/* The layers' linears opts.quantize turns into int4, in the order of st->qw's entries. */
enum { G4_QMATS = 7 };
static const g4_mat *quantizable_mat(const g4_layer_w *w, int j)
{
    const g4_mat *const mats[G4_QMATS] = {&w->q, &w->k, &w->v, &w->o, &w->gate, &w->up, &w->down};
    return mats[j];
}

/* opts.quantize: st->qw[i * G4_QMATS + j] for every 16-bit linear the GPU's --quantize w4a16
 * makes int4 (g4_quantize_layout, as the loader decides), scales in dtype sd. The others, the
 * int4 ones included, stay NULL and are read as stored. */
static tailor_status quantized_linears(tailor_ctx *ctx, tailor_gemma4_cpu *st, tailor_dtype sd)
{
    const tailor_gemma4_config *cfg = &st->m->cfg;
    if (sd != TAILOR_DTYPE_F16 && sd != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 cpu: quantize needs a 16-bit scale dtype");
    st->qw = calloc((size_t)cfg->n_layers * G4_QMATS, sizeof *st->qw);
    if (!st->qw)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 cpu: out of memory");
    for (int i = 0; i < cfg->n_layers; i++) {
        const tailor_gemma4_layer *ly = &cfg->layer[i];
        for (int j = 0; j < G4_QMATS; j++) {
            const g4_mat *m = quantizable_mat(&st->m->layers[i], j);
            if (((j == 1 || j == 2) && ly->kv_shared) || (j == 2 && !ly->has_v_proj) || m->int4)
                continue;
            tailor_dtype wd;
            tailor_w4a16_layout lay;
            if (!m->w || !g4_st_dtype(m->w->dtype, &wd) ||
                !g4_quantize_layout(m->n, m->k, &lay))
                continue;
            tailor_status qs = dequantized_copy(ctx, &lay, m->w->data, wd, sd,
                                                &st->qw[i * G4_QMATS + j]);
            if (qs)
                return qs;
        }
    }
    return TAILOR_OK;
}

/* y = W x for linear j (quantizable_mat's order) of layer i: the dequantized int4 copy where
 * opts.quantize made one, else the weights as stored. */
static void layer_matvec(tailor_gemma4_cpu *st, int i, int j, const float *x, float *y)
{
    const g4_mat *m = quantizable_mat(&st->m->layers[i], j);
    const float *qw = st->qw ? st->qw[i * G4_QMATS + j] : NULL;
    if (!qw) {
        g4_matvec(m, x, y, st->scratch);
        return;
    }
    for (int r = 0; r < m->n; r++)
        y[r] = dot_f32(qw + (size_t)r * (size_t)m->k, x, m->k);
}

tailor_status tailor_gemma4_cpu_create(tailor_ctx *ctx, const tailor_gemma4 *m,
                                       const tailor_gemma4_cpu_opts *opts,
                                       tailor_gemma4_cpu **out)
{
    *out = NULL;
    if (!m || !opts || opts->max_tokens < 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 cpu: a model and max_tokens >= 1 are needed");
    const tailor_gemma4_config *cfg = &m->cfg;
    if (cfg->moe)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "gemma4 cpu: the mixture-of-experts model is not supported yet");
    tailor_gemma4_cpu *st = calloc(1, sizeof *st);
    if (!st)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "gemma4 cpu: out of memory");
    st->m = m;
    st->max_tokens = opts->max_tokens;
    st->linear_cache = opts->linear_cache;
    st->run_layers = opts->layers > 0 && opts->layers < m->cfg.n_layers ? opts->layers
                                                                        : m->cfg.n_layers;
    int L = cfg->n_layers, H = cfg->hidden, P = cfg->ple_dim > 0 ? cfg->ple_dim : 0;
    int ok = 1;
    st->kc = calloc((size_t)L, sizeof *st->kc);
    st->vc = calloc((size_t)L, sizeof *st->vc);
    st->slot_pos = calloc((size_t)L, sizeof *st->slot_pos);
    st->slots = calloc((size_t)L, sizeof *st->slots);
    st->inv_freq = calloc((size_t)L, sizeof *st->inv_freq);
    if (!st->kc || !st->vc || !st->slot_pos || !st->slots || !st->inv_freq)
        ok = 0;
    int max_hd = 0, max_kvd = 0, max_inter = 0;
    for (int i = 0; i < L && ok; i++) {
        const tailor_gemma4_layer *ly = &cfg->layer[i];
        int kvd = ly->n_kv_heads * ly->head_dim;
        max_hd = ly->head_dim > max_hd ? ly->head_dim : max_hd;
        max_kvd = kvd > max_kvd ? kvd : max_kvd;
        max_inter = ly->inter > max_inter ? ly->inter : max_inter;
        st->inv_freq[i] = falloc((size_t)ly->head_dim / 2, &ok);
        if (ok)
            tailor_gemma4_rope_freqs(cfg, i, st->inv_freq[i]);
        if (ly->kv_shared)
            continue;
        int slots = st->max_tokens;
        if (!ly->full && !st->linear_cache && cfg->sliding_window < slots)
            slots = cfg->sliding_window;
        st->slots[i] = slots;
        st->kc[i] = falloc((size_t)slots * (size_t)kvd, &ok);
        st->vc[i] = falloc((size_t)slots * (size_t)kvd, &ok);
        st->slot_pos[i] = calloc((size_t)slots, sizeof(int));
        if (!st->slot_pos[i])
            ok = 0;
    }
    int max_k = m->max_k > H ? m->max_k : H;
    max_k = max_inter > max_k ? max_inter : max_k;
    max_k = cfg->n_heads * max_hd > max_k ? cfg->n_heads * max_hd : max_k;
    max_k = L * P > max_k ? L * P : max_k; /* the PLE row of one token */
    if (ok) {
        st->x = falloc((size_t)H, &ok);
        st->y = falloc((size_t)H, &ok);
        st->t = falloc((size_t)H, &ok);
        st->q = falloc((size_t)cfg->n_heads * (size_t)max_hd, &ok);
        st->kv = falloc((size_t)max_kvd, &ok);
        st->vraw = falloc((size_t)max_kvd, &ok);
        st->att = falloc((size_t)cfg->n_heads * (size_t)max_hd, &ok);
        st->scores = falloc((size_t)st->max_tokens, &ok);
        st->gate = falloc((size_t)max_inter, &ok);
        st->up = falloc((size_t)max_inter, &ok);
        st->pli = falloc((size_t)L * (size_t)P, &ok);
        st->ple_tmp = falloc((size_t)(P > 0 ? P : 1), &ok);
        st->logits = falloc((size_t)cfg->vocab, &ok);
        st->scratch = falloc((size_t)max_k, &ok);
    }
    if (!ok) {
        tailor_gemma4_cpu_destroy(st);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                "gemma4 cpu: out of memory for %d positions of KV cache",
                                opts->max_tokens);
    }
    /* transformers: embed_scale.to(weight dtype) = bf16(sqrt(H)) for the released bf16 models */
    st->embed_scale = tailor_round_bf16((float)sqrt((double)H));
    st->ple_scale = P ? tailor_round_bf16((float)sqrt((double)P)) : 0.0f;
    st->ple_proj_scale = (float)pow((double)H, -0.5);
    st->ple_input_scale = (float)pow(2.0, -0.5);
    tailor_status qs = TAILOR_OK;
    if (opts->quantize_head)
        qs = quantized_head(ctx, st, (tailor_dtype)opts->quantize_head);
    if (qs == TAILOR_OK && opts->quantize)
        qs = quantized_linears(ctx, st, (tailor_dtype)opts->quantize);
    if (qs) {
        tailor_gemma4_cpu_destroy(st);
        return qs;
    }
    tailor_gemma4_cpu_reset(st);
    *out = st;
    return TAILOR_OK;
}

void tailor_gemma4_cpu_destroy(tailor_gemma4_cpu *st)
{
    if (!st)
        return;
    int L = st->m ? st->m->cfg.n_layers : 0;
    for (int i = 0; i < L; i++) {
        if (st->kc)
            free(st->kc[i]);
        if (st->vc)
            free(st->vc[i]);
        if (st->slot_pos)
            free(st->slot_pos[i]);
        if (st->inv_freq)
            free(st->inv_freq[i]);
    }
    free(st->kc);
    free(st->vc);
    free(st->slot_pos);
    free(st->slots);
    free(st->inv_freq);
    float *bufs[] = {st->x,   st->y,    st->t,   st->q,    st->kv,      st->vraw,   st->att,
                     st->scores, st->gate, st->up, st->pli, st->ple_tmp, st->logits, st->scratch,
                     st->head};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    for (int i = 0; st->qw && i < L * G4_QMATS; i++)
        free(st->qw[i]);
    free(st->qw);
    free(st);
}

void tailor_gemma4_cpu_reset(tailor_gemma4_cpu *st)
{
    st->pos = 0;
    for (int i = 0; i < st->m->cfg.n_layers; i++)
        for (int s = 0; s < st->slots[i]; s++)
            st->slot_pos[i][s] = -1;
}

int tailor_gemma4_cpu_pos(const tailor_gemma4_cpu *st) { return st ? st->pos : 0; }

/* ---- the step ---------------------------------------------------------------------------------------- */

/* Per-layer inputs of this token (GEMMA4.md §2.3), from the scaled embedding in st->x. */
static void per_layer_inputs(tailor_gemma4_cpu *st, int32_t token)
{
    const tailor_gemma4 *m = st->m;
    int L = m->cfg.n_layers, P = m->cfg.ple_dim;
    g4_matvec(&m->ple_model_proj, st->x, st->pli, st->scratch);
    int32_t pid = token < m->cfg.ple_vocab ? token : 0;
    dense_row(m->ple_embed, pid, L * P, st->scratch); /* the token's row: [L * P], layer-major */
    for (int l = 0; l < L; l++) {
        float *c = st->pli + (size_t)l * (size_t)P;
        for (int j = 0; j < P; j++)
            c[j] *= st->ple_proj_scale;
        rmsnorm(c, c, m->ple_proj_norm, P, m->cfg.rms_eps);
        const float *e = st->scratch + (size_t)l * (size_t)P;
        for (int j = 0; j < P; j++)
            c[j] = (c[j] + e[j] * st->ple_scale) * st->ple_input_scale;
    }
}

/* Attention of layer i for the current position; input st->y, output st->t ([H]). */
static void attention(tailor_gemma4_cpu *st, int i)
{
    const tailor_gemma4 *m = st->m;
    const tailor_gemma4_config *cfg = &m->cfg;
    const tailor_gemma4_layer *ly = &cfg->layer[i];
    const g4_layer_w *w = &m->layers[i];
    int hd = ly->head_dim, nq = cfg->n_heads, nkv = ly->n_kv_heads, kvd = nkv * hd;
    int pos = st->pos;

    layer_matvec(st, i, 0, st->y, st->q);
    for (int h = 0; h < nq; h++) {
        float *qh = st->q + (size_t)h * (size_t)hd;
        rmsnorm(qh, qh, w->q_norm, hd, cfg->rms_eps);
        tailor_gemma4_rope_apply(st->inv_freq[i], hd, pos, qh);
    }
    int src = ly->kv_source;
    int slots = st->slots[src];
    if (!ly->kv_shared) {
        /* K, and V (the raw K on K=V layers: taken before k_norm and RoPE) */
        layer_matvec(st, i, 1, st->y, st->kv);
        if (ly->has_v_proj)
            layer_matvec(st, i, 2, st->y, st->vraw);
        else
            memcpy(st->vraw, st->kv, (size_t)kvd * sizeof(float));
        int slot = pos % slots;
        float *kd = st->kc[i] + (size_t)slot * (size_t)kvd;
        float *vd = st->vc[i] + (size_t)slot * (size_t)kvd;
        for (int g = 0; g < nkv; g++) {
            rmsnorm(kd + g * hd, st->kv + g * hd, w->k_norm, hd, cfg->rms_eps);
            tailor_gemma4_rope_apply(st->inv_freq[i], hd, pos, kd + g * hd);
            rmsnorm(vd + g * hd, st->vraw + g * hd, NULL, hd, cfg->rms_eps);
        }
        st->slot_pos[i][slot] = pos;
    }
    /* visible positions: causal, and on sliding layers the last W including this one */
    int first = ly->full ? 0 : pos - cfg->sliding_window + 1;
    if (first < 0)
        first = 0;
    const float *kc = st->kc[src], *vc = st->vc[src];
    const int *sp = st->slot_pos[src];
    int group = nq / nkv;
    for (int h = 0; h < nq; h++) {
        const float *qh = st->q + (size_t)h * (size_t)hd;
        int g = h / group;
        float mx = -INFINITY;
        for (int p = first; p <= pos; p++) {
            int slot = p % slots;
            float s = -INFINITY;
            if (sp[slot] == p) /* anything else is a bookkeeping bug: leave it out */
                s = dot_f32(qh, kc + (size_t)slot * (size_t)kvd + (size_t)g * (size_t)hd, hd);
            st->scores[p - first] = s; /* scaling 1.0 (GEMMA4.md §2.5) */
            mx = s > mx ? s : mx;
        }
        float sum = 0;
        for (int p = first; p <= pos; p++) {
            float e = expf(st->scores[p - first] - mx);
            st->scores[p - first] = e;
            sum += e;
        }
        float *oh = st->att + (size_t)h * (size_t)hd;
        memset(oh, 0, (size_t)hd * sizeof(float));
        for (int p = first; p <= pos; p++) {
            float pr = st->scores[p - first] / sum;
            const float *vh = vc + (size_t)(p % slots) * (size_t)kvd + (size_t)g * (size_t)hd;
            for (int d = 0; d < hd; d++)
                oh[d] += pr * vh[d];
        }
    }
    layer_matvec(st, i, 3, st->att, st->t);
}

static void mlp(tailor_gemma4_cpu *st, int i)
{
    int I = st->m->cfg.layer[i].inter;
    layer_matvec(st, i, 4, st->y, st->gate);
    layer_matvec(st, i, 5, st->y, st->up);
    for (int j = 0; j < I; j++)
        st->gate[j] = gelu_tanh(st->gate[j]) * st->up[j];
    layer_matvec(st, i, 6, st->gate, st->t);
}

static void layer(tailor_gemma4_cpu *st, int i)
{
    const tailor_gemma4_config *cfg = &st->m->cfg;
    const g4_layer_w *w = &st->m->layers[i];
    int H = cfg->hidden, P = cfg->ple_dim;
    float eps = cfg->rms_eps;

    rmsnorm(st->y, st->x, w->input_ln, H, eps);
    attention(st, i);
    rmsnorm(st->t, st->t, w->post_attn_ln, H, eps);
    for (int j = 0; j < H; j++)
        st->x[j] += st->t[j];

    rmsnorm(st->y, st->x, w->pre_ff_ln, H, eps);
    mlp(st, i);
    rmsnorm(st->t, st->t, w->post_ff_ln, H, eps);
    for (int j = 0; j < H; j++)
        st->x[j] += st->t[j];

    if (P > 0) {
        g4_matvec(&w->ple_gate, st->x, st->ple_tmp, st->scratch);
        const float *pl = st->pli + (size_t)i * (size_t)P;
        for (int j = 0; j < P; j++)
            st->ple_tmp[j] = gelu_tanh(st->ple_tmp[j]) * pl[j];
        g4_matvec(&w->ple_proj, st->ple_tmp, st->t, st->scratch);
        rmsnorm(st->t, st->t, w->post_ple_ln, H, eps);
        for (int j = 0; j < H; j++)
            st->x[j] += st->t[j];
    }
    for (int j = 0; j < H; j++)
        st->x[j] *= w->layer_scalar;
}

/* Index of the first value of v[0..n) that is inf or NaN; -1 when all are finite. */
static int first_nonfinite(const float *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return i;
    return -1;
}

tailor_status tailor_gemma4_cpu_step(tailor_ctx *ctx, tailor_gemma4_cpu *st, int32_t token,
                                     const float **logits)
{
    *logits = NULL;
    const tailor_gemma4 *m = st->m;
    const tailor_gemma4_config *cfg = &m->cfg;
    if (token < 0 || token >= cfg->vocab)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 cpu: token id %d is outside the vocabulary (0..%d)",
                                (int)token, cfg->vocab - 1);
    if (st->pos >= st->max_tokens)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gemma4 cpu: all %d positions of the run state are used",
                                st->max_tokens);
    int H = cfg->hidden;
    dense_row(m->embed, token, H, st->x);
    for (int j = 0; j < H; j++)
        st->x[j] *= st->embed_scale;
    if (cfg->ple_dim > 0)
        per_layer_inputs(st, token);
    for (int i = 0; i < st->run_layers; i++)
        layer(st, i);
    rmsnorm(st->y, st->x, m->final_norm, H, cfg->rms_eps);
    for (int v = 0; v < cfg->vocab; v++) { /* tied LM head: the unscaled embedding */
        const uint8_t *row = (const uint8_t *)m->embed->data +
                             (size_t)v * (size_t)H * tailor_st_dtype_size(m->embed->dtype);
        float l;
        if (st->head) {
            l = dot_f32(st->head + (size_t)v * (size_t)H, st->y, H);
        } else if (m->embed->dtype == TAILOR_ST_BF16) {
            l = dot_bf16(row, st->y, H);
        } else {
            dense_row(m->embed, v, H, st->scratch);
            l = dot_f32(st->scratch, st->y, H);
        }
        if (cfg->softcap > 0)
            l = tanhf(l / cfg->softcap) * cfg->softcap;
        st->logits[v] = l;
    }
    int bad = first_nonfinite(st->logits, cfg->vocab);
    if (bad >= 0) /* as the GPU forward reports it: garbage out is an error, not an argmax */
        return tailor_set_error(ctx, TAILOR_ERR_VERIFY,
                                "gemma4 cpu: inf or NaN in the activations (the logits of "
                                "position %d are not finite, logit %d first)", st->pos, bad);
    st->pos++;
    *logits = st->logits;
    return TAILOR_OK;
}
