/* config.c — Gemma 4 config.json parsing, the layer plan, presets and their kernel shapes. */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4.h"
#include "gemma4_internal.h"

/* ---- small JSON readers: every failure names the file and the field ------------------------ */

typedef struct jsrc {
    tailor_ctx *ctx;
    const char *file;
    const char *prefix; /* "" or "text_config." */
} jsrc;

/* The one sentence for a field of the wrong type or range: "FILE: field PREFIXKEY is not WANT". */
static tailor_status field_error(const jsrc *j, const char *key, const char *want)
{
    return tailor_set_error(j->ctx, TAILOR_ERR_PARSE, "%s: field %s%s is not %s", j->file,
                            j->prefix, key, want);
}

static tailor_status get_int(const jsrc *j, const cJSON *obj, const char *key, int required,
                             int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tailor_set_error(j->ctx, TAILOR_ERR_PARSE, "%s: field %s%s is missing", j->file,
                                    j->prefix, key);
        *out = def;
        return TAILOR_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0)
        return field_error(j, key, "a non-negative integer");
    if (v->valuedouble > G4_DIM_MAX)
        return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                "%s: field %s%s is %.17g, too large (at most %d)", j->file,
                                j->prefix, key, v->valuedouble, G4_DIM_MAX);
    *out = (int)v->valuedouble;
    return TAILOR_OK;
}

/* What a float field may hold; every one is finite and fits a float. */
typedef enum float_range { FLOAT_NONNEG, FLOAT_POSITIVE, FLOAT_UNIT } float_range;

static const char *const float_range_text[] = {"a non-negative number", "a positive number",
                                               "a number in [0, 1]"};

static tailor_status get_float(const jsrc *j, const cJSON *obj, const char *key, float def,
                               float_range range, float *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return TAILOR_OK;
    }
    if (!cJSON_IsNumber(v))
        return field_error(j, key, "a number");
    double d = v->valuedouble;
    float f = (float)(d >= 0 && d <= FLT_MAX ? d : 0);
    if (!(d >= 0 && d <= FLT_MAX) || (range == FLOAT_POSITIVE && !(f > 0)) ||
        (range == FLOAT_UNIT && d > 1))
        return tailor_set_error(j->ctx, TAILOR_ERR_PARSE, "%s: field %s%s is %g, not %s",
                                j->file, j->prefix, key, d, float_range_text[range]);
    *out = f;
    return TAILOR_OK;
}

/* An optional string field: *out = its text, or def when absent or null. */
static tailor_status get_string(const jsrc *j, const cJSON *obj, const char *key,
                                const char *def, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = def;
    if (!v || cJSON_IsNull(v))
        return TAILOR_OK;
    if (!cJSON_IsString(v))
        return field_error(j, key, "a string");
    *out = v->valuestring;
    return TAILOR_OK;
}

/* An optional object field: *out = it, or NULL when absent or null. */
static tailor_status get_object(const jsrc *j, const cJSON *obj, const char *key,
                                const cJSON **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return TAILOR_OK;
    if (!cJSON_IsObject(v))
        return field_error(j, key, "an object");
    *out = v;
    return TAILOR_OK;
}

/* A boolean field: *out = its value, def when absent or null. */
static tailor_status get_bool(const jsrc *j, const cJSON *obj, const char *key, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return TAILOR_OK;
    }
    if (!cJSON_IsBool(v))
        return field_error(j, key, "true or false");
    *out = cJSON_IsTrue(v);
    return TAILOR_OK;
}

/* ---- the layer plan ----------------------------------------------------------------------------- */

/* A value of the layer plan and the config key it came from, for messages. */
typedef struct g4_pick {
    int v;
    char key[64]; /* "head_dim", "global_head_dim", "per_layer_config.3.head_dim", ... */
} g4_pick;

/* Layer i's head_dim: its per_layer_config override (0 = none), else global_head_dim on full
 * layers and head_dim on sliding ones. */
static g4_pick pick_head_dim(const tailor_gemma4_config *cfg, int i, const int *hd_override)
{
    g4_pick p;
    if (hd_override && hd_override[i]) {
        p.v = hd_override[i];
        snprintf(p.key, sizeof p.key, "per_layer_config.%d.head_dim", i);
    } else {
        int full = cfg->layer[i].full;
        p.v = full ? cfg->global_head_dim : cfg->head_dim;
        snprintf(p.key, sizeof p.key, "%s", full ? "global_head_dim" : "head_dim");
    }
    return p;
}

/* Layer i's KV heads: its per_layer_config override (0 = none), else
 * num_global_key_value_heads on K=V full layers that give it, num_key_value_heads otherwise. */
static g4_pick pick_kv_heads(const tailor_gemma4_config *cfg, int i, const int *kv_override)
{
    g4_pick p;
    if (kv_override && kv_override[i]) {
        p.v = kv_override[i];
        snprintf(p.key, sizeof p.key, "per_layer_config.%d.num_key_value_heads", i);
    } else {
        int global = cfg->layer[i].full && cfg->k_eq_v && cfg->n_global_kv_heads;
        p.v = global ? cfg->n_global_kv_heads : cfg->n_kv_heads;
        snprintf(p.key, sizeof p.key, "%s",
                 global ? "num_global_key_value_heads" : "num_key_value_heads");
    }
    return p;
}

/* Layer i's head_dim, KV heads (picked as hd and kv) and MLP width as derived: a positive even
 * head_dim, KV heads dividing the query heads, and every width a matrix has inside G4_DIM_MAX.
 * Failures name the config key the value came from, `prefix` ("" or "text_config.") before it. */
static tailor_status check_layer_geometry(tailor_ctx *ctx, const char *file, const char *prefix,
                                          const tailor_gemma4_config *cfg, int i,
                                          const g4_pick *hd, const g4_pick *kv)
{
    const tailor_gemma4_layer *ly = &cfg->layer[i];
    if (ly->head_dim <= 0 || ly->head_dim % 2)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: layer %d: %s%s %d is not a positive even number", file, i,
                                prefix, hd->key, ly->head_dim);
    if (ly->n_kv_heads <= 0 || cfg->n_heads % ly->n_kv_heads)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: layer %d: %snum_attention_heads %d is not a multiple of %s%s "
                                "%d", file, i, prefix, cfg->n_heads, prefix, kv->key,
                                ly->n_kv_heads);
    if ((long long)cfg->n_heads * ly->head_dim > G4_DIM_MAX) /* KV heads <= query heads */
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: layer %d: %snum_attention_heads %d x %s%s %d is too large (at "
                                "most %d)", file, i, prefix, cfg->n_heads, prefix, hd->key,
                                ly->head_dim, G4_DIM_MAX);
    if (ly->inter > G4_DIM_MAX) /* only a doubled width can be */
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: layer %d: %sintermediate_size %d doubled "
                                "(use_double_wide_mlp) is too large (at most %d)", file, i, prefix,
                                cfg->intermediate, G4_DIM_MAX);
    return TAILOR_OK;
}

/* Derives every layer's plan from cfg's scalars, cfg->layer[i].full, and optional per-layer
 * overrides (0 = none) of head_dim and KV heads. */
tailor_status g4_derive_plan(tailor_ctx *ctx, const char *file, const char *prefix,
                             tailor_gemma4_config *cfg, const int *hd_override,
                             const int *kv_override)
{
    int L = cfg->n_layers;
    int first_shared = L - cfg->n_kv_shared;
    if (cfg->n_kv_shared < 0 || (first_shared <= 0 && cfg->n_kv_shared > 0))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: %snum_kv_shared_layers %d leaves no layer that owns a cache "
                                "(num_hidden_layers %d)", file, prefix, cfg->n_kv_shared, L);
    for (int i = 0; i < L; i++) {
        tailor_gemma4_layer *ly = &cfg->layer[i];
        int full = ly->full;
        g4_pick hd = pick_head_dim(cfg, i, hd_override), kv = pick_kv_heads(cfg, i, kv_override);
        ly->head_dim = hd.v;
        ly->n_kv_heads = kv.v;
        ly->has_v_proj = !(full && cfg->k_eq_v);
        ly->kv_shared = cfg->n_kv_shared > 0 && i >= first_shared;
        ly->kv_source = i;
        /* intermediate <= G4_DIM_MAX, so doubled it still fits an int (checked below) */
        ly->inter = cfg->intermediate * (cfg->double_wide_mlp && ly->kv_shared ? 2 : 1);
        tailor_status s = check_layer_geometry(ctx, file, prefix, cfg, i, &hd, &kv);
        if (s != TAILOR_OK)
            return s;
        if (ly->kv_shared) {
            int src = -1;
            for (int j = first_shared - 1; j >= 0 && src < 0; j--)
                if (cfg->layer[j].full == full)
                    src = j;
            if (src < 0)
                return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                        "%s: KV-shared layer %d (%s) has no earlier non-shared "
                                        "layer of its type to read from", file, i,
                                        full ? "full_attention" : "sliding_attention");
            ly->kv_source = src;
            if (cfg->layer[src].head_dim != ly->head_dim)
                return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                        "%s: KV-shared layer %d has head_dim %d but its source "
                                        "layer %d has %d", file, i, ly->head_dim, src,
                                        cfg->layer[src].head_dim);
            ly->n_kv_heads = cfg->layer[src].n_kv_heads;
            ly->has_v_proj = cfg->layer[src].has_v_proj;
        }
    }
    return TAILOR_OK;
}

/* ---- config.json ---------------------------------------------------------------------------------- */

static tailor_status parse_layer_types(const jsrc *j, const cJSON *tc, tailor_gemma4_config *cfg)
{
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(tc, "layer_types");
    int L = cfg->n_layers;
    if (!lt || cJSON_IsNull(lt)) { /* transformers' default: 5 sliding, 1 full */
        for (int i = 0; i < L; i++)
            cfg->layer[i].full = (i + 1) % 6 == 0;
    } else {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != L)
            return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                    "%s: field %slayer_types is not a list of %d layer types",
                                    j->file, j->prefix, L);
        for (int i = 0; i < L; i++) {
            const cJSON *e = cJSON_GetArrayItem(lt, i);
            if (cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0)
                cfg->layer[i].full = 1;
            else if (cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0)
                cfg->layer[i].full = 0;
            else
                return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                        "%s: field %slayer_types[%d] is neither sliding_attention "
                                        "nor full_attention", j->file, j->prefix, i);
        }
    }
    cfg->layer[L - 1].full = 1; /* transformers forces the last layer to full attention */
    return TAILOR_OK;
}

/* per_layer_config (transformers >= 5.15): {"2": {"head_dim": 512, ...}, ...} or a list. */
static tailor_status parse_per_layer(const jsrc *j, const cJSON *tc, int L, int *hd, int *kv)
{
    const cJSON *plc = cJSON_GetObjectItemCaseSensitive(tc, "per_layer_config");
    if (!plc || cJSON_IsNull(plc))
        return TAILOR_OK;
    if (!cJSON_IsObject(plc) && !cJSON_IsArray(plc))
        return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                "%s: field %sper_layer_config is neither an object nor a list",
                                j->file, j->prefix);
    int idx = 0;
    for (const cJSON *e = plc->child; e; e = e->next, idx++) {
        int i = idx;
        if (cJSON_IsObject(plc)) {
            char *endp = NULL;
            long v = strtol(e->string, &endp, 10);
            if (!*e->string || *endp || v < 0 || v >= L)
                return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                        "%s: field %sper_layer_config has key '%s', not a layer "
                                        "index below %d", j->file, j->prefix, e->string, L);
            i = (int)v;
        } else if (i >= L) {
            return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                    "%s: field %sper_layer_config lists more than %d layers",
                                    j->file, j->prefix, L);
        }
        if (cJSON_IsNull(e))
            continue;
        if (!cJSON_IsObject(e))
            return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                    "%s: field %sper_layer_config[%d] is not an object", j->file,
                                    j->prefix, i);
        jsrc sub = *j;
        char pre[96];
        snprintf(pre, sizeof pre, "%sper_layer_config.%d.", j->prefix, i);
        sub.prefix = pre;
        tailor_status s = get_int(&sub, e, "head_dim", 0, 0, &hd[i]);
        if (s == TAILOR_OK)
            s = get_int(&sub, e, "num_key_value_heads", 0, 0, &kv[i]);
        if (s != TAILOR_OK)
            return s;
    }
    return TAILOR_OK;
}

static tailor_status parse_rope(const jsrc *j, const cJSON *tc, tailor_gemma4_config *cfg)
{
    cfg->rope_theta_sliding = 10000.0f;
    cfg->rope_theta_full = 1000000.0f;
    cfg->partial_rotary_full = 0.25f;
    cfg->rope_factor_full = 1.0f;
    const cJSON *rp = NULL;
    tailor_status s = get_object(j, tc, "rope_parameters", &rp);
    if (s != TAILOR_OK || !rp)
        return s;
    char rpre[96];
    snprintf(rpre, sizeof rpre, "%srope_parameters.", j->prefix);
    jsrc kind = *j;
    kind.prefix = rpre;
    const char *kinds[2] = {"sliding_attention", "full_attention"};
    for (int k = 0; k < 2; k++) {
        const cJSON *r = NULL;
        if ((s = get_object(&kind, rp, kinds[k], &r)) != TAILOR_OK)
            return s;
        if (!r)
            continue;
        char pre[128];
        snprintf(pre, sizeof pre, "%s%s.", rpre, kinds[k]);
        jsrc sub = *j;
        sub.prefix = pre;
        const char *t = NULL;
        if ((s = get_string(&sub, r, "rope_type", "default", &t)) != TAILOR_OK)
            return s;
        if (strcmp(t, "default") != 0 && strcmp(t, "proportional") != 0)
            return tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                    "%s: field %srope_type '%s' is not supported (default or "
                                    "proportional)", j->file, pre, t);
        float factor = 1.0f;
        s = get_float(&sub, r, "factor", 1.0f, FLOAT_POSITIVE, &factor);
        if (s != TAILOR_OK)
            return s;
        if (k == 0) {
            s = get_float(&sub, r, "rope_theta", 10000.0f, FLOAT_POSITIVE,
                          &cfg->rope_theta_sliding);
            if (s == TAILOR_OK && factor != 1.0f)
                s = tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                     "%s: field %sfactor %g is not supported on sliding layers",
                                     j->file, pre, (double)factor);
        } else {
            s = get_float(&sub, r, "rope_theta", 1000000.0f, FLOAT_POSITIVE,
                          &cfg->rope_theta_full);
            if (s == TAILOR_OK)
                s = get_float(&sub, r, "partial_rotary_factor", 1.0f, FLOAT_UNIT,
                              &cfg->partial_rotary_full);
            cfg->rope_factor_full = factor;
        }
        if (s != TAILOR_OK)
            return s;
    }
    return TAILOR_OK;
}

/* use_bidirectional_attention: null or false (causal), or "vision" (image tokens only, which a
 * text run never has). "all" (or true) changes the text model and is refused. */
static tailor_status check_bidirectional(const jsrc *j, const cJSON *tc)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, "use_bidirectional_attention");
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) ||
        (cJSON_IsString(v) && strcmp(v->valuestring, "vision") == 0))
        return TAILOR_OK;
    if (cJSON_IsTrue(v) || (cJSON_IsString(v) && strcmp(v->valuestring, "all") == 0))
        return tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                "%s: field %suse_bidirectional_attention '%s' is not supported",
                                j->file, j->prefix, cJSON_IsTrue(v) ? "true" : "all");
    return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                            "%s: field %suse_bidirectional_attention is neither null, \"vision\" "
                            "nor \"all\"", j->file, j->prefix);
}

static tailor_status parse_text_config(const jsrc *j, const cJSON *tc, tailor_gemma4_config *cfg)
{
    tailor_status s = TAILOR_OK;
#define INT_FIELD(key, req, def, dst)                                                              \
    if (s == TAILOR_OK)                                                                            \
    s = get_int(j, tc, key, req, def, dst)
    INT_FIELD("vocab_size", 1, 0, &cfg->vocab);
    INT_FIELD("hidden_size", 1, 0, &cfg->hidden);
    INT_FIELD("num_hidden_layers", 1, 0, &cfg->n_layers);
    INT_FIELD("num_attention_heads", 1, 0, &cfg->n_heads);
    INT_FIELD("num_key_value_heads", 1, 0, &cfg->n_kv_heads);
    INT_FIELD("num_global_key_value_heads", 0, 0, &cfg->n_global_kv_heads);
    INT_FIELD("head_dim", 1, 0, &cfg->head_dim);
    INT_FIELD("global_head_dim", 0, 512, &cfg->global_head_dim);
    INT_FIELD("intermediate_size", 1, 0, &cfg->intermediate);
    INT_FIELD("sliding_window", 1, 0, &cfg->sliding_window);
    INT_FIELD("hidden_size_per_layer_input", 0, -1, &cfg->ple_dim);
    INT_FIELD("vocab_size_per_layer_input", 0, 0, &cfg->ple_vocab);
    INT_FIELD("num_kv_shared_layers", 0, 0, &cfg->n_kv_shared);
    INT_FIELD("num_experts", 0, 0, &cfg->n_experts);
    INT_FIELD("top_k_experts", 0, 0, &cfg->top_k_experts);
    INT_FIELD("moe_intermediate_size", 0, 0, &cfg->moe_inter);
    INT_FIELD("bos_token_id", 0, 2, &cfg->bos_id);
#undef INT_FIELD
    if (s == TAILOR_OK)
        s = get_bool(j, tc, "use_double_wide_mlp", 0, &cfg->double_wide_mlp);
    if (s == TAILOR_OK)
        s = get_bool(j, tc, "attention_k_eq_v", 0, &cfg->k_eq_v);
    if (s == TAILOR_OK)
        s = get_bool(j, tc, "enable_moe_block", 0, &cfg->moe);
    if (s == TAILOR_OK)
        s = get_float(j, tc, "rms_norm_eps", 1e-6f, FLOAT_NONNEG, &cfg->rms_eps);
    if (s == TAILOR_OK)
        s = get_float(j, tc, "final_logit_softcapping", 0.0f, FLOAT_NONNEG, &cfg->softcap);
    if (s != TAILOR_OK)
        return s;
    if (cfg->n_layers < 1 || cfg->n_layers > TAILOR_GEMMA4_MAX_LAYERS)
        return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                "%s: field %snum_hidden_layers %d is outside 1..%d", j->file,
                                j->prefix, cfg->n_layers, TAILOR_GEMMA4_MAX_LAYERS);
    const struct {
        const char *key;
        int value;
    } sizes[] = {{"vocab_size", cfg->vocab},
                 {"hidden_size", cfg->hidden},
                 {"num_attention_heads", cfg->n_heads},
                 {"num_key_value_heads", cfg->n_kv_heads},
                 {"intermediate_size", cfg->intermediate},
                 {"sliding_window", cfg->sliding_window}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value < 1)
            return tailor_set_error(j->ctx, TAILOR_ERR_PARSE, "%s: field %s%s is zero", j->file,
                                    j->prefix, sizes[i].key);
    if (cfg->ple_vocab == 0)
        cfg->ple_vocab = cfg->vocab;
    if ((long long)cfg->n_layers * cfg->ple_dim > G4_DIM_MAX)
        return tailor_set_error(j->ctx, TAILOR_ERR_PARSE,
                                "%s: field %shidden_size_per_layer_input %d x num_hidden_layers %d "
                                "is too large (at most %d)", j->file, j->prefix, cfg->ple_dim,
                                cfg->n_layers, G4_DIM_MAX);

    const char *act = NULL;
    if ((s = get_string(j, tc, "hidden_activation", "gelu_pytorch_tanh", &act)) != TAILOR_OK)
        return s;
    if (strcmp(act, "gelu_pytorch_tanh") != 0)
        return tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                "%s: field %shidden_activation '%s' is not supported "
                                "(gelu_pytorch_tanh)", j->file, j->prefix, act);
    int bias = 0;
    s = get_bool(j, tc, "attention_bias", 0, &bias);
    if (s == TAILOR_OK && bias)
        s = tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                             "%s: field %sattention_bias true is not supported", j->file,
                             j->prefix);
    if (s == TAILOR_OK)
        s = check_bidirectional(j, tc);
    if (s == TAILOR_OK)
        s = parse_layer_types(j, tc, cfg);
    if (s == TAILOR_OK)
        s = parse_rope(j, tc, cfg);
    if (s != TAILOR_OK)
        return s;
    int hd[TAILOR_GEMMA4_MAX_LAYERS] = {0}, kv[TAILOR_GEMMA4_MAX_LAYERS] = {0};
    s = parse_per_layer(j, tc, cfg->n_layers, hd, kv);
    if (s != TAILOR_OK)
        return s;
    /* a per_layer_config-only config (global_head_dim popped) still needs the full width for
     * presets and shapes: take it from the first full layer's override */
    for (int i = 0; i < cfg->n_layers; i++) {
        if (cfg->layer[i].full && hd[i]) {
            cfg->global_head_dim = hd[i];
            break;
        }
    }
    return g4_derive_plan(j->ctx, j->file, j->prefix, cfg, hd, kv);
}

/* architectures, when given: a list whose first name is a Gemma 4 text architecture. */
static tailor_status check_architectures(tailor_ctx *ctx, const char *file, const cJSON *root)
{
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (!arch || cJSON_IsNull(arch))
        return TAILOR_OK;
    const cJSON *a0 = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
    if (!cJSON_IsArray(arch) || (a0 && !cJSON_IsString(a0)))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: field architectures is not a list of "
                                "names", file);
    if (a0 && strcmp(a0->valuestring, "Gemma4ForCausalLM") &&
        strcmp(a0->valuestring, "Gemma4ForConditionalGeneration") &&
        strcmp(a0->valuestring, "Gemma4Model") && strcmp(a0->valuestring, "Gemma4TextModel"))
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "%s: architectures[0] '%s' is not a Gemma 4 text architecture",
                                file, a0->valuestring);
    return TAILOR_OK;
}

/* The LM head is the embedding (GEMMA4.md §1.1): tie_word_embeddings false, at the top or in
 * text_config, would mean an lm_head.weight this loader never reads. */
static tailor_status check_tied(const jsrc *j, const cJSON *root, const cJSON *tc)
{
    jsrc top = *j;
    top.prefix = "";
    int tied_top = 1, tied_text = 1;
    tailor_status s = get_bool(&top, root, "tie_word_embeddings", 1, &tied_top);
    if (s == TAILOR_OK && tc != root)
        s = get_bool(j, tc, "tie_word_embeddings", 1, &tied_text);
    if (s == TAILOR_OK && !(tied_top && tied_text))
        s = tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                             "%s: field %stie_word_embeddings is false: a separate LM head "
                             "(lm_head.weight) is not supported", j->file,
                             tied_top ? j->prefix : "");
    return s;
}

/* ---- quantization_config ------------------------------------------------------------------- */

/* One config group g, its key g->string under j (prefix "...quantization_config.config_groups."):
 * format pack-quantized when given, weights.num_bits 4 when given, weights.group_size a positive
 * integer into *group (-1 or null: per channel, *group left as it is). */
static tailor_status parse_quant_group(const jsrc *j, const cJSON *g, int *group)
{
    if (!cJSON_IsObject(g)) /* null too: a group that says nothing is not a group */
        return field_error(j, g->string, "an object");
    char pre[256], wpre[288];
    snprintf(pre, sizeof pre, "%s%s.", j->prefix, g->string);
    jsrc gj = *j;
    gj.prefix = pre;
    const char *fmt = NULL;
    tailor_status s = get_string(&gj, g, "format", NULL, &fmt);
    if (s == TAILOR_OK && fmt && strcmp(fmt, "pack-quantized") != 0)
        s = tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                             "%s: %sformat '%s' is not supported (pack-quantized only)", j->file,
                             pre, fmt);
    const cJSON *w = NULL;
    if (s == TAILOR_OK)
        s = get_object(&gj, g, "weights", &w);
    if (s != TAILOR_OK || !w)
        return s;
    snprintf(wpre, sizeof wpre, "%sweights.", pre);
    jsrc wj = *j;
    wj.prefix = wpre;
    const cJSON *bits = cJSON_GetObjectItemCaseSensitive(w, "num_bits");
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(w, "group_size");
    if (bits && !cJSON_IsNull(bits)) {
        if (!cJSON_IsNumber(bits) || bits->valuedouble != floor(bits->valuedouble))
            return field_error(&wj, "num_bits", "an integer");
        if (bits->valuedouble != 4)
            return tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                    "%s: %snum_bits %g is not supported (4 only)", j->file, wpre,
                                    bits->valuedouble);
    }
    if (gs && !cJSON_IsNull(gs) && !(cJSON_IsNumber(gs) && gs->valuedouble == -1)) {
        if (!cJSON_IsNumber(gs) || gs->valuedouble != floor(gs->valuedouble) ||
            gs->valuedouble < 1 || gs->valuedouble > G4_DIM_MAX)
            return field_error(&wj, "group_size",
                               "a positive integer (or -1) of at most 1000000000");
        *group = (int)gs->valuedouble;
    }
    return TAILOR_OK;
}

/* quantization_config, at the top or (absent there) in text_config, its messages prefixed by
 * where it sits: compressed-tensors pack-quantized only; the group size of its config groups
 * (the last that gives one) into cfg->quant_group. */
static tailor_status parse_quant(const jsrc *j, const cJSON *root, tailor_gemma4_config *cfg)
{
    jsrc at = *j;
    const cJSON *holder = root;
    at.prefix = "";
    if (!cJSON_GetObjectItemCaseSensitive(root, "quantization_config")) {
        holder = cJSON_GetObjectItemCaseSensitive(root, "text_config"); /* NULL is fine */
        at.prefix = "text_config.";
    }
    const cJSON *q = NULL;
    tailor_status s = get_object(&at, holder, "quantization_config", &q);
    if (s != TAILOR_OK || !q)
        return s;
    char pre[64], gpre[96];
    snprintf(pre, sizeof pre, "%squantization_config.", at.prefix);
    jsrc qj = *j;
    qj.prefix = pre;
    const cJSON *meth = cJSON_GetObjectItemCaseSensitive(q, "quant_method");
    if (!cJSON_IsString(meth) || strcmp(meth->valuestring, "compressed-tensors") != 0)
        return tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                "%s: %squant_method '%s' is not supported (compressed-tensors "
                                "pack-quantized only)", j->file, pre,
                                cJSON_IsString(meth) ? meth->valuestring : "?");
    const char *fmt = NULL;
    if ((s = get_string(&qj, q, "format", NULL, &fmt)) != TAILOR_OK)
        return s;
    if (fmt && strcmp(fmt, "pack-quantized") != 0)
        return tailor_set_error(j->ctx, TAILOR_ERR_UNSUPPORTED,
                                "%s: %sformat '%s' is not supported (pack-quantized only)",
                                j->file, pre, fmt);
    const cJSON *groups = NULL;
    if ((s = get_object(&qj, q, "config_groups", &groups)) != TAILOR_OK || !groups)
        return s;
    snprintf(gpre, sizeof gpre, "%sconfig_groups.", pre);
    jsrc gj = *j;
    gj.prefix = gpre;
    for (const cJSON *g = groups->child; g && s == TAILOR_OK; g = g->next)
        s = parse_quant_group(&gj, g, &cfg->quant_group);
    return s;
}

tailor_status tailor_gemma4_config_parse(tailor_ctx *ctx, const char *json, const char *file,
                                         tailor_gemma4_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (!file)
        file = "config.json";
    const char *endp = NULL;
    cJSON *root = cJSON_ParseWithOpts(json ? json : "", &endp, 0);
    if (!root || !cJSON_IsObject(root)) {
        size_t at = endp && json ? (size_t)(endp - json) : 0;
        cJSON_Delete(root);
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: not a JSON object (malformed near byte %zu)", file, at);
    }
    jsrc j = {ctx, file, ""};
    tailor_status s = TAILOR_OK;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *tc = root;
    if (!cJSON_IsString(mt)) {
        s = tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: field model_type is missing or not a "
                             "string", file);
    } else if (strcmp(mt->valuestring, "gemma4") == 0) {
        tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
        j.prefix = "text_config.";
        if (!cJSON_IsObject(tc))
            s = tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                 "%s: model_type gemma4 but field text_config is not an object",
                                 file);
    } else if (strcmp(mt->valuestring, "gemma4_text") != 0) {
        s = tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                             "%s: model_type '%s' is not a Gemma 4 text model (expected gemma4 "
                             "or gemma4_text)", file, mt->valuestring);
    }
    if (s == TAILOR_OK)
        s = check_architectures(ctx, file, root);
    if (s == TAILOR_OK)
        s = parse_text_config(&j, tc, cfg);
    if (s == TAILOR_OK)
        s = check_tied(&j, root, tc);
    if (s == TAILOR_OK)
        s = parse_quant(&j, root, cfg);
    cJSON_Delete(root);
    if (s != TAILOR_OK)
        memset(cfg, 0, sizeof *cfg);
    return s;
}

/* ---- presets ----------------------------------------------------------------------------------- */

static const char *const preset_names[] = {"gemma-4-e2b", "gemma-4-e4b", "gemma-4-31b",
                                           "gemma-4-26b-a4b", NULL};

const char *const *tailor_gemma4_preset_names(void) { return preset_names; }

tailor_status tailor_gemma4_preset(tailor_ctx *ctx, const char *name, tailor_gemma4_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char base[64];
    snprintf(base, sizeof base, "%s", name ? name : "");
    size_t n = strlen(base);
    if (n > 3 && strcmp(base + n - 3, "-it") == 0)
        base[n - 3] = 0;
    for (char *p = base; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    int which = -1;
    for (int i = 0; preset_names[i]; i++)
        if (strcmp(base, preset_names[i]) == 0)
            which = i;
    if (which < 0)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                                "preset '%s' is unknown (known: gemma-4-e2b, gemma-4-e4b, "
                                "gemma-4-31b, gemma-4-26b-a4b)", name ? name : "");
    /* GEMMA4.md §1.1 */
    static const struct {
        int H, L, nq, nkv, ngkv, inter, W, P, shared, dw, keqv, moe, period;
    } v[4] = {
        {1536, 35, 8, 1, 0, 6144, 512, 256, 20, 1, 0, 0, 5},
        {2560, 42, 8, 2, 0, 10240, 512, 256, 18, 0, 0, 0, 6},
        {5376, 60, 32, 16, 4, 21504, 1024, 0, 0, 0, 1, 0, 6},
        {2816, 30, 16, 8, 2, 2112, 1024, 0, 0, 0, 1, 1, 6},
    };
    cfg->vocab = 262144;
    cfg->hidden = v[which].H;
    cfg->n_layers = v[which].L;
    cfg->n_heads = v[which].nq;
    cfg->n_kv_heads = v[which].nkv;
    cfg->n_global_kv_heads = v[which].ngkv;
    cfg->head_dim = 256;
    cfg->global_head_dim = 512;
    cfg->intermediate = v[which].inter;
    cfg->sliding_window = v[which].W;
    cfg->ple_dim = v[which].P;
    cfg->ple_vocab = 262144;
    cfg->n_kv_shared = v[which].shared;
    cfg->double_wide_mlp = v[which].dw;
    cfg->k_eq_v = v[which].keqv;
    cfg->moe = v[which].moe;
    if (cfg->moe) {
        cfg->n_experts = 128;
        cfg->top_k_experts = 8;
        cfg->moe_inter = 704;
    }
    cfg->bos_id = 2;
    cfg->rms_eps = 1e-6f;
    cfg->softcap = 30.0f;
    cfg->rope_theta_sliding = 10000.0f;
    cfg->rope_theta_full = 1000000.0f;
    cfg->partial_rotary_full = 0.25f;
    cfg->rope_factor_full = 1.0f;
    for (int i = 0; i < cfg->n_layers; i++)
        cfg->layer[i].full = (i + 1) % v[which].period == 0;
    cfg->layer[cfg->n_layers - 1].full = 1;
    return g4_derive_plan(ctx, preset_names[which], "", cfg, NULL, NULL);
}

/* ---- shapes -------------------------------------------------------------------------------------- */

typedef struct shape_list {
    tailor_gemma4_shape *out;
    int cap, n;
} shape_list;

static void add_shape(shape_list *sl, tailor_gemma4_shape s, int count)
{
    for (int i = 0; i < sl->n && i < sl->cap; i++) {
        tailor_gemma4_shape *o = &sl->out[i];
        if (o->kind == s.kind && strcmp(o->what, s.what) == 0 && o->n == s.n && o->k == s.k &&
            o->head_dim == s.head_dim && o->n_heads == s.n_heads &&
            o->n_kv_heads == s.n_kv_heads && o->window == s.window) {
            o->count += count;
            return;
        }
    }
    /* beyond cap we cannot merge, so count conservatively: the caller asked for the size only */
    if (sl->n < sl->cap) {
        s.count = count;
        sl->out[sl->n] = s;
    }
    sl->n++;
}

static void add_linear(shape_list *sl, const char *what, int n, int k, int count)
{
    tailor_gemma4_shape s;
    memset(&s, 0, sizeof s);
    s.kind = TAILOR_GEMMA4_SHAPE_LINEAR;
    s.what = what;
    s.n = n;
    s.k = k;
    add_shape(sl, s, count);
}

static void list_shapes(const tailor_gemma4_config *cfg, shape_list *sl)
{
    int H = cfg->hidden, P = cfg->ple_dim > 0 ? cfg->ple_dim : 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        const tailor_gemma4_layer *ly = &cfg->layer[i];
        int qd = cfg->n_heads * ly->head_dim, kvd = ly->n_kv_heads * ly->head_dim;
        add_linear(sl, "q_proj", qd, H, 1);
        if (!ly->kv_shared) {
            add_linear(sl, "k_proj", kvd, H, 1);
            if (ly->has_v_proj)
                add_linear(sl, "v_proj", kvd, H, 1);
        }
        add_linear(sl, "o_proj", H, qd, 1);
        add_linear(sl, "gate_proj", ly->inter, H, 1);
        add_linear(sl, "up_proj", ly->inter, H, 1);
        add_linear(sl, "down_proj", H, ly->inter, 1);
        if (P) {
            add_linear(sl, "ple_gate", P, H, 1);
            add_linear(sl, "ple_proj", H, P, 1);
        }
        if (cfg->moe) {
            add_linear(sl, "router", cfg->n_experts, H, 1);
            add_linear(sl, "expert_gate_up", 2 * cfg->moe_inter, H, cfg->top_k_experts);
            add_linear(sl, "expert_down", H, cfg->moe_inter, cfg->top_k_experts);
        }
        tailor_gemma4_shape a;
        memset(&a, 0, sizeof a);
        a.kind = TAILOR_GEMMA4_SHAPE_ATTENTION;
        a.what = "attention";
        a.head_dim = ly->head_dim;
        a.n_heads = cfg->n_heads;
        a.n_kv_heads = ly->n_kv_heads;
        a.window = ly->full ? 0 : cfg->sliding_window;
        add_shape(sl, a, 1);
    }
    if (P)
        add_linear(sl, "ple_model_proj", cfg->n_layers * P, H, 1);
    add_linear(sl, "lm_head", cfg->vocab, H, 1);
}

tailor_status tailor_gemma4_shapes(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                   tailor_gemma4_shape *out, int cap, int *n_out)
{
    if (!cfg || !n_out || cap < 0 || (cap > 0 && !out))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gemma4 shapes: bad arguments");
    /* list into a private buffer so that merging is exact whatever cap the caller gave */
    enum { MAXS = 64 };
    tailor_gemma4_shape buf[MAXS];
    shape_list sl = {buf, MAXS, 0};
    list_shapes(cfg, &sl);
    int n = sl.n < MAXS ? sl.n : MAXS;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = buf[i];
    *n_out = n;
    return TAILOR_OK;
}

/* ---- RoPE -------------------------------------------------------------------------------------------- */

void tailor_gemma4_rope_freqs(const tailor_gemma4_config *cfg, int layer, float *inv_freq)
{
    const tailor_gemma4_layer *ly = &cfg->layer[layer];
    int d = ly->head_dim, half = d / 2;
    /* transformers: inv_freq = 1 / base ** (arange(0, dim, 2).float() / d), all fp32.
     * Proportional (full layers): the first int(partial * d // 2) pairs rotate with the exponent
     * over the full d; the rest get frequency 0 (cos 1, sin 0: identity). */
    float base = ly->full ? cfg->rope_theta_full : cfg->rope_theta_sliding;
    int rotate = half;
    float factor = 1.0f;
    if (ly->full) {
        rotate = (int)((double)cfg->partial_rotary_full * d) / 2;
        factor = cfg->rope_factor_full > 0 ? cfg->rope_factor_full : 1.0f;
    }
    for (int j = 0; j < half; j++) {
        if (j < rotate) {
            float e = (float)(2 * j) / (float)d;
            inv_freq[j] = 1.0f / powf(base, e) / factor;
        } else {
            inv_freq[j] = 0.0f;
        }
    }
}

void tailor_gemma4_rope_apply(const float *inv_freq, int d, int pos, float *x)
{
    int half = d / 2;
    for (int j = 0; j < half; j++) {
        if (inv_freq[j] == 0.0f)
            continue; /* exact identity */
        float ang = (float)pos * inv_freq[j];
        float c = cosf(ang), s = sinf(ang);
        float a = x[j], b = x[j + half];
        x[j] = a * c - b * s;
        x[j + half] = b * c + a * s;
    }
}
