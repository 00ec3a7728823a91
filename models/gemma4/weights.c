/* weights.c — opens a Gemma 4 checkpoint folder and binds its text tensors to the layer plan,
 * geometry taken from tensor shapes and cross-checked against config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4.h"
#include "gemma4_internal.h"

typedef struct binder {
    tailor_ctx *ctx;
    tailor_gemma4 *m;
    const char *prefix;  /* "model." or "model.language_model." */
    char cfg_path[600];
} binder;

/* ---- tensors --------------------------------------------------------------------------------------- */

static const tailor_st_tensor *find(binder *b, const char *suffix)
{
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, suffix);
    return tailor_st_find(b->m->st, name);
}

static int is_float(tailor_st_dtype d)
{
    return d == TAILOR_ST_F32 || d == TAILOR_ST_F16 || d == TAILOR_ST_BF16;
}

static int is_int(tailor_st_dtype d) { return d == TAILOR_ST_I32 || d == TAILOR_ST_I64; }

static tailor_status shape_error(binder *b, const tailor_st_tensor *t, const char *want)
{
    char got[128] = "";
    size_t o = 0;
    for (int i = 0; i < t->ndim && o < sizeof got - 24; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%lld", i ? ", " : "",
                              (long long)t->shape[i]);
    return tailor_set_error(b->ctx, TAILOR_ERR_PARSE,
                            "%s: tensor '%s' is %s [%s] but %s expects %s", t->file, t->name,
                            tailor_st_dtype_name(t->dtype), got, b->cfg_path, want);
}

static int is_2d(const tailor_st_tensor *t, int64_t r, int64_t c)
{
    return t->ndim == 2 && t->shape[0] == r && t->shape[1] == c;
}

/* Binds a float vector of length n (a [n] tensor) as an fp32 copy in the arena. */
static tailor_status bind_vec(binder *b, const char *suffix, int n, const float **out)
{
    const tailor_st_tensor *t = find(b, suffix);
    if (!t)
        return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND, "%s: tensor '%s%s' is missing",
                                tailor_st_path(b->m->st), b->prefix, suffix);
    if (!is_float(t->dtype) || t->numel != n || t->ndim > 1) {
        char want[64];
        snprintf(want, sizeof want, "a float vector [%d]", n);
        return shape_error(b, t, want);
    }
    tailor_gemma4 *m = b->m;
    if (m->arena_used + (size_t)n > m->arena_cap)
        return tailor_set_error(b->ctx, TAILOR_ERR_MISUSE, "gemma4: vector arena too small "
                                                           "(a bug)");
    float *v = m->arena + m->arena_used;
    m->arena_used += (size_t)n;
    for (int i = 0; i < n; i++)
        v[i] = tailor_st_load_f32(t, i);
    *out = v;
    return TAILOR_OK;
}

static tailor_status bind_int4(binder *b, const char *base, const tailor_st_tensor *packed,
                               int n, int k, g4_mat *mat)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight_scale", base);
    const tailor_st_tensor *scale = find(b, name);
    snprintf(name, sizeof name, "%s.weight_shape", base);
    const tailor_st_tensor *shp = find(b, name);
    snprintf(name, sizeof name, "%s.weight_zero_point", base);
    const tailor_st_tensor *zp = find(b, name);
    snprintf(name, sizeof name, "%s.weight_g_idx", base);
    const tailor_st_tensor *gi = find(b, name);
    if (!scale || !shp)
        return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND,
                                "%s: tensor '%s%s.weight_packed' has no %s next to it",
                                packed->file, b->prefix, base,
                                !scale ? "weight_scale" : "weight_shape");
    char want[96];
    snprintf(want, sizeof want, "weight_shape (%d, %d)", n, k);
    if (!is_int(shp->dtype) || shp->numel != 2 || tailor_st_load_i64(shp, 0) != n ||
        tailor_st_load_i64(shp, 1) != k)
        return shape_error(b, shp, want);
    snprintf(want, sizeof want, "I32 [%d, %d]", n, (k + 7) / 8);
    if (packed->dtype != TAILOR_ST_I32 || !is_2d(packed, n, (k + 7) / 8))
        return shape_error(b, packed, want);
    if (!is_float(scale->dtype) || scale->ndim != 2 || scale->shape[0] != n ||
        scale->shape[1] < 1 || scale->shape[1] > k) {
        snprintf(want, sizeof want, "a float [%d, groups] scale", n);
        return shape_error(b, scale, want);
    }
    int groups = (int)scale->shape[1];
    int group = 0;
    if (gi) {
        snprintf(want, sizeof want, "an int [%d] g_idx with values below %d", k, groups);
        if (!is_int(gi->dtype) || gi->numel != k || gi->ndim != 1)
            return shape_error(b, gi, want);
        for (int c = 0; c < k; c++) {
            int64_t g = tailor_st_load_i64(gi, c);
            if (g < 0 || g >= groups)
                return shape_error(b, gi, want);
        }
    } else {
        group = b->m->cfg.quant_group > 0 ? b->m->cfg.quant_group : (k + groups - 1) / groups;
        if ((k + group - 1) / group != groups) {
            snprintf(want, sizeof want, "%d groups of %d columns", (k + group - 1) / group, group);
            return shape_error(b, scale, want);
        }
    }
    if (zp) {
        snprintf(want, sizeof want, "I32 [%d, %d] zero points", (n + 7) / 8, groups);
        if (zp->dtype != TAILOR_ST_I32 || !is_2d(zp, (n + 7) / 8, groups))
            return shape_error(b, zp, want);
    }
    mat->int4 = 1;
    mat->packed = packed;
    mat->scale = scale;
    mat->zp = zp;
    mat->g_idx = gi;
    mat->group = group;
    mat->groups = groups;
    b->m->w4a16 = 1;
    if (k > b->m->max_k)
        b->m->max_k = k;
    return TAILOR_OK;
}

/* Binds base.weight (dense) or base.weight_packed (+ scale, shape, ...) as an [n, k] matrix.
 * rows_free: accept any row count (returned in *rows) — used where the plan is checked after. */
static tailor_status bind_mat(binder *b, const char *base, int n, int k, g4_mat *mat)
{
    memset(mat, 0, sizeof *mat);
    mat->n = n;
    mat->k = k;
    char name[256];
    snprintf(name, sizeof name, "%s.weight", base);
    const tailor_st_tensor *t = find(b, name);
    if (t) {
        if (!is_float(t->dtype) || !is_2d(t, n, k)) {
            char want[64];
            snprintf(want, sizeof want, "a float [%d, %d] matrix", n, k);
            return shape_error(b, t, want);
        }
        mat->w = t;
        return TAILOR_OK;
    }
    snprintf(name, sizeof name, "%s.weight_packed", base);
    t = find(b, name);
    if (t)
        return bind_int4(b, base, t, n, k, mat);
    return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND,
                            "%s: tensor '%s%s.weight' (or .weight_packed) is missing",
                            tailor_st_path(b->m->st), b->prefix, base);
}

/* Rows of base's matrix (base.weight, else the W4A16 base.weight_packed) into *rows, -1 when
 * neither exists; a tensor of another rank is an error naming it. */
static tailor_status mat_rows(binder *b, const char *base, int64_t *rows)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight", base);
    const tailor_st_tensor *t = find(b, name);
    if (!t) {
        snprintf(name, sizeof name, "%s.weight_packed", base);
        t = find(b, name);
    }
    *rows = t ? t->shape[0] : -1;
    return !t || t->ndim == 2 ? TAILOR_OK : shape_error(b, t, "a 2-D matrix");
}

static tailor_status disagree(binder *b, int layer, const char *what, long long tensor_says,
                              long long config_says)
{
    return tailor_set_error(b->ctx, TAILOR_ERR_PARSE,
                            "%s: layer %d: the tensors give %s %lld but %s says %lld",
                            tailor_st_path(b->m->st), layer, what, tensor_says, b->cfg_path,
                            config_says);
}

/* Takes layer i's geometry from its tensors (head_dim from q_norm's length, KV heads from
 * k_proj's rows, v_proj's presence, the MLP width from gate_proj's rows) and checks it against
 * the plan. Reads shapes only: it runs before anything is sized from the config. */
static tailor_status check_layer(binder *b, int i)
{
    tailor_gemma4 *m = b->m;
    tailor_gemma4_config *cfg = &m->cfg;
    tailor_gemma4_layer *ly = &cfg->layer[i];
    char base[128];
    tailor_status s;

    snprintf(base, sizeof base, "layers.%d.self_attn.q_norm.weight", i);
    const tailor_st_tensor *qn = find(b, base);
    if (!qn)
        return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND, "%s: tensor '%s%s' is missing",
                                tailor_st_path(m->st), b->prefix, base);
    if (qn->numel != ly->head_dim)
        return disagree(b, i, "head_dim (q_norm length)", (long long)qn->numel, ly->head_dim);
    int hd = ly->head_dim;
    if (!ly->kv_shared) {
        snprintf(base, sizeof base, "layers.%d.self_attn.k_proj", i);
        int64_t rows = 0, v_rows = 0;
        if ((s = mat_rows(b, base, &rows)) != TAILOR_OK)
            return s;
        if (rows < 0)
            return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND,
                                    "%s: tensor '%s%s.weight' is missing", tailor_st_path(m->st),
                                    b->prefix, base);
        if (rows % hd || rows / hd != ly->n_kv_heads)
            return disagree(b, i, "KV heads (k_proj rows / head_dim)", (long long)(rows / hd),
                            ly->n_kv_heads);
        snprintf(base, sizeof base, "layers.%d.self_attn.v_proj", i);
        if ((s = mat_rows(b, base, &v_rows)) != TAILOR_OK)
            return s;
        int has_v = v_rows >= 0;
        if (has_v != ly->has_v_proj)
            return tailor_set_error(b->ctx, TAILOR_ERR_PARSE,
                                    "%s: layer %d %s v_proj but %s (attention_k_eq_v %s on a %s "
                                    "layer) says it should%s", tailor_st_path(m->st), i,
                                    has_v ? "has a" : "has no", b->cfg_path,
                                    cfg->k_eq_v ? "true" : "false",
                                    ly->full ? "full" : "sliding", ly->has_v_proj ? "" : " not");
    }
    snprintf(base, sizeof base, "layers.%d.mlp.gate_proj", i);
    int64_t inter = 0;
    if ((s = mat_rows(b, base, &inter)) != TAILOR_OK)
        return s;
    if (inter >= 0 && inter != ly->inter)
        return disagree(b, i, "MLP width (gate_proj rows)", (long long)inter, ly->inter);
    return TAILOR_OK;
}

/* Binds layer i's weights (its geometry already checked by check_layer). */
static tailor_status bind_layer(binder *b, int i)
{
    tailor_gemma4 *m = b->m;
    tailor_gemma4_config *cfg = &m->cfg;
    tailor_gemma4_layer *ly = &cfg->layer[i];
    g4_layer_w *w = &m->layers[i];
    int H = cfg->hidden, P = cfg->ple_dim, hd = ly->head_dim;
    char base[128];
    tailor_status s;
    /* both inside G4_DIM_MAX (config.c check_layer_geometry) */
    int qd = cfg->n_heads * hd, kvd = ly->n_kv_heads * hd;
#define VEC(suffix, n, dst)                                                                        \
    snprintf(base, sizeof base, "layers.%d.%s", i, suffix);                                        \
    if ((s = bind_vec(b, base, n, dst)) != TAILOR_OK)                                             \
    return s
#define MAT(suffix, n, k, dst)                                                                     \
    snprintf(base, sizeof base, "layers.%d.%s", i, suffix);                                        \
    if ((s = bind_mat(b, base, n, k, dst)) != TAILOR_OK)                                          \
    return s
    VEC("input_layernorm.weight", H, &w->input_ln);
    VEC("post_attention_layernorm.weight", H, &w->post_attn_ln);
    VEC("pre_feedforward_layernorm.weight", H, &w->pre_ff_ln);
    VEC("post_feedforward_layernorm.weight", H, &w->post_ff_ln);
    VEC("self_attn.q_norm.weight", hd, &w->q_norm);
    const float *scalar = NULL;
    VEC("layer_scalar", 1, &scalar);
    w->layer_scalar = scalar[0];
    MAT("self_attn.q_proj", qd, H, &w->q);
    MAT("self_attn.o_proj", H, qd, &w->o);
    if (!ly->kv_shared) {
        VEC("self_attn.k_norm.weight", hd, &w->k_norm);
        MAT("self_attn.k_proj", kvd, H, &w->k);
        if (ly->has_v_proj) {
            MAT("self_attn.v_proj", kvd, H, &w->v);
        }
    }
    MAT("mlp.gate_proj", ly->inter, H, &w->gate);
    MAT("mlp.up_proj", ly->inter, H, &w->up);
    MAT("mlp.down_proj", H, ly->inter, &w->down);
    if (P > 0) {
        VEC("post_per_layer_input_norm.weight", H, &w->post_ple_ln);
        MAT("per_layer_input_gate", P, H, &w->ple_gate);
        MAT("per_layer_projection", H, P, &w->ple_proj);
    }
#undef VEC
#undef MAT
    return TAILOR_OK;
}

/* The embedding [vocab, H] and, when present, the PLE table [ple_vocab, L x P], which settles
 * P when the config is silent. Shapes only, like check_layer. */
static tailor_status check_embeddings(binder *b)
{
    tailor_gemma4 *m = b->m;
    tailor_gemma4_config *cfg = &m->cfg;
    int H = cfg->hidden, L = cfg->n_layers;
    m->embed = find(b, "embed_tokens.weight");
    if (!is_float(m->embed->dtype) || !is_2d(m->embed, cfg->vocab, H)) {
        char want[64];
        snprintf(want, sizeof want, "a float [%d, %d] embedding", cfg->vocab, H);
        return shape_error(b, m->embed, want);
    }
    m->ple_embed = find(b, "embed_tokens_per_layer.weight");
    if (m->ple_embed) {
        const tailor_st_tensor *t = m->ple_embed;
        if (!is_float(t->dtype) || t->ndim != 2 || t->shape[1] % L || t->shape[1] == 0 ||
            t->shape[1] > G4_DIM_MAX)
            return shape_error(b, t, "a float [vocab, layers x P] table");
        int P = (int)(t->shape[1] / L);
        if (cfg->ple_dim < 0)
            cfg->ple_dim = P;
        if (P != cfg->ple_dim)
            return tailor_set_error(b->ctx, TAILOR_ERR_PARSE,
                                    "%s: tensor '%s' gives hidden_size_per_layer_input %d but %s "
                                    "says %d", t->file, t->name, P, b->cfg_path, cfg->ple_dim);
        if (t->shape[0] != cfg->ple_vocab) {
            char want[64];
            snprintf(want, sizeof want, "[%d, %d] (vocab_size_per_layer_input)", cfg->ple_vocab,
                     L * P);
            return shape_error(b, t, want);
        }
    } else {
        if (cfg->ple_dim > 0)
            return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND,
                                    "%s: %s says hidden_size_per_layer_input %d but tensor "
                                    "'%sembed_tokens_per_layer.weight' is missing",
                                    tailor_st_path(m->st), b->cfg_path, cfg->ple_dim, b->prefix);
        cfg->ple_dim = 0;
    }
    return TAILOR_OK;
}

/* The final norm and the PLE projection and its norm. */
static tailor_status bind_globals(binder *b)
{
    tailor_gemma4 *m = b->m;
    tailor_gemma4_config *cfg = &m->cfg;
    int H = cfg->hidden, L = cfg->n_layers;
    tailor_status s = bind_vec(b, "norm.weight", H, &m->final_norm);
    if (s == TAILOR_OK && cfg->ple_dim > 0) {
        s = bind_vec(b, "per_layer_projection_norm.weight", cfg->ple_dim, &m->ple_proj_norm);
        if (s == TAILOR_OK)
            s = bind_mat(b, "per_layer_model_projection", L * cfg->ple_dim, H,
                         &m->ple_model_proj);
    }
    return s;
}

static size_t arena_floats(const tailor_gemma4_config *cfg, int P)
{
    size_t n = (size_t)cfg->hidden + (size_t)(P > 0 ? P : 0);
    for (int i = 0; i < cfg->n_layers; i++)
        n += 5u * (size_t)cfg->hidden + 2u * (size_t)cfg->layer[i].head_dim + 1u;
    return n;
}

static tailor_status open_bound(binder *b, const char *dir)
{
    tailor_gemma4 *m = b->m;
    snprintf(b->cfg_path, sizeof b->cfg_path, "%s/config.json", dir);
    char *json;
    tailor_status s = tailor_read_file(b->ctx, b->cfg_path, G4_MAX_TEXT, &json, NULL);
    if (s)
        return s;
    s = tailor_gemma4_config_parse(b->ctx, json, b->cfg_path, &m->cfg);
    if (s == TAILOR_OK && m->cfg.moe)
        s = tailor_set_error(b->ctx, TAILOR_ERR_UNSUPPORTED,
                             "%s: enable_moe_block is true: this is a Gemma 4 mixture-of-experts "
                             "model (26B-A4B), recognised but not supported yet", b->cfg_path);
    free(json);
    if (s != TAILOR_OK)
        return s;
    s = tailor_st_open(b->ctx, dir, &m->st);
    if (s != TAILOR_OK)
        return s;
    if (tailor_st_find(m->st, "model.language_model.embed_tokens.weight"))
        b->prefix = "model.language_model.";
    else if (tailor_st_find(m->st, "model.embed_tokens.weight"))
        b->prefix = "model.";
    else
        return tailor_set_error(b->ctx, TAILOR_ERR_NOT_FOUND,
                                "%s: has neither 'model.language_model.embed_tokens.weight' nor "
                                "'model.embed_tokens.weight': not a Gemma 4 text checkpoint",
                                tailor_st_path(m->st));
    /* every size the arena takes (H, head dims, P) confirmed by a tensor before it is sized:
     * a config that lies cannot make it large */
    s = check_embeddings(b);
    for (int i = 0; i < m->cfg.n_layers && s == TAILOR_OK; i++)
        s = check_layer(b, i);
    if (s != TAILOR_OK)
        return s;
    m->arena_cap = arena_floats(&m->cfg, m->cfg.ple_dim);
    m->arena = calloc(m->arena_cap, sizeof *m->arena);
    m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers);
    if (!m->arena || !m->layers)
        return tailor_set_error(b->ctx, TAILOR_ERR_NOMEM, "%s: out of memory", dir);
    s = bind_globals(b);
    for (int i = 0; i < m->cfg.n_layers && s == TAILOR_OK; i++)
        s = bind_layer(b, i);
    return s;
}

tailor_status tailor_gemma4_open(tailor_ctx *ctx, const char *dir, tailor_gemma4 **out)
{
    *out = NULL;
    if (!dir || !*dir)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4: no model folder given");
    tailor_gemma4 *m = calloc(1, sizeof *m);
    if (!m)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", dir);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    binder b = {ctx, m, "model.", ""};
    tailor_status s = open_bound(&b, dir);
    if (s != TAILOR_OK) {
        tailor_gemma4_close(m);
        return s;
    }
    tailor_log(ctx, TAILOR_LOG_DEBUG, "%s: %d layers, hidden %d, %s, %zu bytes mapped", dir,
               m->cfg.n_layers, m->cfg.hidden, m->w4a16 ? "W4A16" : "dense",
               tailor_st_mapped_bytes(m->st));
    *out = m;
    return TAILOR_OK;
}

void tailor_gemma4_close(tailor_gemma4 *m)
{
    if (!m)
        return;
    tailor_st_close(m->st);
    free(m->layers);
    free(m->arena);
    free(m);
}

const tailor_gemma4_config *tailor_gemma4_get_config(const tailor_gemma4 *m)
{
    return m ? &m->cfg : NULL;
}

int tailor_gemma4_is_w4a16(const tailor_gemma4 *m) { return m ? m->w4a16 : 0; }
