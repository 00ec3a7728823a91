/* test_gemma4_writer.h — test-only helpers: write safetensors files and tiny random Gemma 4
 * checkpoints (config.json + model.safetensors) into a temporary folder. Header-only (static). */
#ifndef TAILOR_TEST_GEMMA4_WRITER_H
#define TAILOR_TEST_GEMMA4_WRITER_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "half.h"
#include "safetensors.h"
#include "testlib.h"

typedef struct tw_tensor {
    char name[260];
    char dtype[8];
    int ndim;
    int64_t shape[4];
    uint8_t *data;
    size_t nbytes;
} tw_tensor;

#define TW_MAX_TENSORS 1024 /* E2B has 35 layers of up to 17 tensors */

typedef struct tw {
    tw_tensor t[TW_MAX_TENSORS];
    int n;
} tw;

static inline void tw_free(tw *w)
{
    for (int i = 0; i < w->n; i++)
        free(w->t[i].data);
    w->n = 0;
}

/* Adds a tensor with raw bytes (copied). */
static tw_tensor *tw_add_raw(tw *w, const char *name, const char *dtype, int ndim,
                             const int64_t *shape, const void *data, size_t nbytes)
{
    if (w->n >= TW_MAX_TENSORS) {
        fprintf(stderr, "tw: too many tensors\n");
        exit(1);
    }
    tw_tensor *t = &w->t[w->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->data = malloc(nbytes ? nbytes : 1);
    if (data)
        memcpy(t->data, data, nbytes);
    t->nbytes = nbytes;
    return t;
}

/* Adds a float tensor stored as BF16 or F32 (values rounded for BF16). */
static inline void tw_add_f(tw *w, const char *name, const char *dtype, const float *v, int ndim,
                     const int64_t *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    int bf = strcmp(dtype, "BF16") == 0;
    size_t nb = n * (bf ? 2 : 4);
    tw_tensor *t = tw_add_raw(w, name, dtype, ndim, shape, NULL, nb);
    for (size_t i = 0; i < n; i++) {
        if (bf) {
            uint16_t h = tailor_f32_to_bf16(v[i]);
            memcpy(t->data + 2 * i, &h, 2);
        } else {
            memcpy(t->data + 4 * i, &v[i], 4);
        }
    }
}

/* The safetensors header of tensors t[0..n): {"__metadata__":{"format":"pt"}, then each
 * tensor's dtype, shape and data_offsets}, each tensor's bytes right after the previous one's in
 * list order. JSON text, not padded; the caller frees it. */
static inline char *tw_header_text(const tw_tensor *const *t, int n)
{
    size_t cap = 4096 + (size_t)n * 420;
    char *h = malloc(cap);
    if (!h)
        return NULL;
    size_t o = 0;
    uint64_t off = 0;
    o += (size_t)snprintf(h + o, cap - o, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(h + o, cap - o, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i]->name,
                              t[i]->dtype);
        for (int d = 0; d < t[i]->ndim; d++)
            o += (size_t)snprintf(h + o, cap - o, "%s%lld", d ? "," : "",
                                  (long long)t[i]->shape[d]);
        o += (size_t)snprintf(h + o, cap - o, "],\"data_offsets\":[%llu,%llu]}",
                              (unsigned long long)off, (unsigned long long)(off + t[i]->nbytes));
        off += t[i]->nbytes;
    }
    snprintf(h + o, cap - o, "}");
    return h;
}

/* A run of bytes of a safetensors data section. */
typedef struct tw_bytes {
    const void *p;
    size_t n;
} tw_bytes;

/* Writes a safetensors file: the 8-byte little-endian header length, `header` padded with spaces
 * to a multiple of 8 bytes, then data[0..n) in order. hlen >= 0 is written as the length instead
 * of the padded header's (a broken file on purpose). Returns 0 on success. */
static inline int tw_write_file(const char *path, const char *header, int64_t hlen,
                                const tw_bytes *data, int n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t len = strlen(header), padded = (len + 7) / 8 * 8;
    uint64_t hl = hlen >= 0 ? (uint64_t)hlen : padded;
    int ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(header, 1, len, f) == len;
    for (size_t i = len; i < padded && ok; i++)
        ok = fputc(' ', f) != EOF;
    for (int i = 0; i < n && ok; i++)
        ok = data[i].n == 0 || fwrite(data[i].p, 1, data[i].n, f) == data[i].n;
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

/* Writes w's tensors as one safetensors file (tw_header_text, tw_write_file). Returns 0 on
 * success. */
static inline int tw_write(const tw *w, const char *path)
{
    const tw_tensor **t = malloc((size_t)(w->n ? w->n : 1) * sizeof *t);
    tw_bytes *d = malloc((size_t)(w->n ? w->n : 1) * sizeof *d);
    char *h = NULL;
    int rc = -1;
    if (t && d) {
        for (int i = 0; i < w->n; i++) {
            t[i] = &w->t[i];
            d[i].p = w->t[i].data;
            d[i].n = w->t[i].nbytes;
        }
        h = tw_header_text(t, w->n);
    }
    if (h)
        rc = tw_write_file(path, h, -1, d, w->n);
    free(h);
    free(d);
    free(t);
    return rc;
}

static inline int tw_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fputs(text, f);
    fclose(f);
    return 0;
}

/* A fresh folder under the build directory's tmp (or /tmp); caller keeps the buffer. */
static inline void tw_tmpdir(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/tmp/tailor_%s_XXXXXX", tag);
    if (!mkdtemp(buf)) {
        fprintf(stderr, "mkdtemp failed\n");
        exit(1);
    }
}

/* ---- tiny random Gemma 4 checkpoints --------------------------------------------------------- */

typedef struct tw_spec {
    int H, L, nq, nkv, ngkv, hd, ghd, inter, W, P, shared, double_wide, k_eq_v, vocab;
    int nested;          /* 1: Gemma4ForConditionalGeneration config + model.language_model. */
    int per_layer_config; /* 1: full-layer widths as per_layer_config (no global_head_dim) */
    const char *types;   /* one char per layer: 's' sliding, 'f' full */
    const char *dtype;   /* "BF16" or "F32" */
    uint64_t seed;
} tw_spec;

static inline int tw_full(const tw_spec *s, int i) { return s->types[i] == 'f'; }

static inline int tw_first_shared(const tw_spec *s) { return s->L - s->shared; }

static inline void tw_rand(test_rng *r, float *v, size_t n, float mean, float sd)
{
    for (size_t i = 0; i < n; i++)
        v[i] = mean + sd * test_rng_normal(r);
}

/* Uniform values with the given mean and sd from a cheap xorshift (real-size tensors, where
 * normals would take minutes). */
static inline void tw_rand_fast(uint64_t seed, float *v, size_t n, float mean, float sd)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
    const float half = sd * 1.7320508f, a = 2.0f * half / 4294967296.0f;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = mean + a * (float)(uint32_t)(x >> 16) - half;
    }
}

static inline void tw_add_rand(tw *w, test_rng *r, const tw_spec *s, const char *name, int64_t rows,
                        int64_t cols, float mean, float sd)
{
    size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
    int64_t shape[2] = {rows, cols};
    if (n <= ((size_t)1 << 24)) {
        float *v = malloc(n * sizeof *v);
        tw_rand(r, v, n, mean, sd);
        tw_add_f(w, name, s->dtype, v, cols ? 2 : 1, shape);
        free(v);
        return;
    }
    /* real-size tensors: uniform values (tw_rand_fast; r is not drawn from) made and converted
     * in pieces straight into the tensor's bytes, so the writer holds the file once, not a
     * float copy of its largest tensor too */
    (void)r;
    int bf = strcmp(s->dtype, "BF16") == 0;
    tw_tensor *t = tw_add_raw(w, name, s->dtype, cols ? 2 : 1, shape, NULL, n * (bf ? 2 : 4));
    enum { PIECE = 1 << 20 };
    float *v = malloc(PIECE * sizeof *v);
    for (size_t i0 = 0; i0 < n; i0 += PIECE) {
        size_t m = n - i0 < PIECE ? n - i0 : PIECE;
        tw_rand_fast(s->seed ^ ((uint64_t)w->n << 40) ^ (uint64_t)i0, v, m, mean, sd);
        for (size_t i = 0; i < m; i++) {
            if (bf) {
                uint16_t h = tailor_f32_to_bf16(v[i]);
                memcpy(t->data + 2 * (i0 + i), &h, 2);
            } else {
                memcpy(t->data + 4 * (i0 + i), &v[i], 4);
            }
        }
    }
    free(v);
}

/* config.json text for spec s (written into buf). */
static inline void tw_config_json(const tw_spec *s, char *buf, size_t n)
{
    char types[4096] = "", plc[4096] = "";
    size_t o = 0, p = 0;
    for (int i = 0; i < s->L; i++) {
        o += (size_t)snprintf(types + o, sizeof types - o, "%s\"%s\"", i ? "," : "",
                              tw_full(s, i) ? "full_attention" : "sliding_attention");
        if (tw_full(s, i))
            p += (size_t)snprintf(plc + p, sizeof plc - p, "%s\"%d\":{\"head_dim\":%d}",
                                  p ? "," : "", i, s->ghd);
    }
    char text[8192];
    snprintf(text, sizeof text,
             "\"model_type\":\"gemma4_text\",\"vocab_size\":%d,\"hidden_size\":%d,"
             "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"head_dim\":%d,%s\"layer_types\":[%s],"
             "\"sliding_window\":%d,\"final_logit_softcapping\":30.0,\"rms_norm_eps\":1e-06,"
             "\"hidden_activation\":\"gelu_pytorch_tanh\",\"hidden_size_per_layer_input\":%d,"
             "\"vocab_size_per_layer_input\":%d,\"num_kv_shared_layers\":%d,"
             "\"use_double_wide_mlp\":%s,\"attention_k_eq_v\":%s,%s"
             "\"rope_parameters\":{\"sliding_attention\":{\"rope_type\":\"default\","
             "\"rope_theta\":10000.0},\"full_attention\":{\"rope_type\":\"proportional\","
             "\"partial_rotary_factor\":0.25,\"rope_theta\":1000000.0}},"
             "\"tie_word_embeddings\":true,\"bos_token_id\":2,\"eos_token_id\":1",
             s->vocab, s->H, s->inter, s->L, s->nq, s->nkv, s->hd, "", types, s->W, s->P,
             s->vocab, s->shared, s->double_wide ? "true" : "false", s->k_eq_v ? "true" : "false",
             "");
    char geo[4352]; /* room for the whole per_layer_config list (plc) */
    if (s->per_layer_config)
        snprintf(geo, sizeof geo, "\"per_layer_config\":{%s}", plc);
    else if (s->ngkv)
        snprintf(geo, sizeof geo, "\"global_head_dim\":%d,\"num_global_key_value_heads\":%d",
                 s->ghd, s->ngkv);
    else
        snprintf(geo, sizeof geo, "\"global_head_dim\":%d", s->ghd);
    if (s->per_layer_config && s->ngkv) {
        /* per_layer_config carries the full layers' KV heads too */
        p = 0;
        for (int i = 0; i < s->L; i++)
            if (tw_full(s, i))
                p += (size_t)snprintf(plc + p, sizeof plc - p,
                                      "%s\"%d\":{\"head_dim\":%d,\"num_key_value_heads\":%d}",
                                      p ? "," : "", i, s->ghd, s->ngkv);
        snprintf(geo, sizeof geo, "\"per_layer_config\":{%s}", plc);
    }
    if (s->nested)
        snprintf(buf, n,
                 "{\"architectures\":[\"Gemma4ForConditionalGeneration\"],\"model_type\":"
                 "\"gemma4\",\"text_config\":{%s,%s},\"vision_config\":null,"
                 "\"eos_token_id\":[1,106]}", text, geo);
    else
        snprintf(buf, n, "{\"architectures\":[\"Gemma4ForCausalLM\"],%s,%s}", text, geo);
}

/* Adds every tensor of spec s with random values (norms ~ N(1, 0.2), layer_scalar U(0.5, 1.5)). */
static inline void tw_model_tensors(const tw_spec *s, tw *w)
{
    test_rng r;
    test_rng_seed(&r, s->seed);
    const char *pre = s->nested ? "model.language_model." : "model.";
    char nm[256];
    int H = s->H;
#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    tw_add_rand(w, &r, s, NAME("%sembed_tokens.weight", pre), s->vocab, H, 0, 0.5f);
    tw_add_rand(w, &r, s, NAME("%snorm.weight", pre), H, 0, 1, 0.2f);
    if (s->P) {
        tw_add_rand(w, &r, s, NAME("%sembed_tokens_per_layer.weight", pre), s->vocab, s->L * s->P,
                    0, 0.5f);
        tw_add_rand(w, &r, s, NAME("%sper_layer_model_projection.weight", pre), s->L * s->P, H, 0,
                    1.0f / sqrtf((float)H));
        tw_add_rand(w, &r, s, NAME("%sper_layer_projection_norm.weight", pre), s->P, 0, 1, 0.2f);
    }
    for (int i = 0; i < s->L; i++) {
        int full = tw_full(s, i), hd = full ? s->ghd : s->hd;
        int nkv = full && s->k_eq_v && s->ngkv ? s->ngkv : s->nkv;
        int shared = i >= tw_first_shared(s) && s->shared;
        int inter = s->inter * (s->double_wide && shared ? 2 : 1);
        float sdH = 1.0f / sqrtf((float)H);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.input_layernorm.weight", pre, i), H, 0, 1, 0.2f);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.post_attention_layernorm.weight", pre, i), H, 0, 1,
                    0.2f);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.pre_feedforward_layernorm.weight", pre, i), H, 0,
                    1, 0.2f);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.post_feedforward_layernorm.weight", pre, i), H, 0,
                    1, 0.2f);
        float ls = test_rng_uniform(&r, 0.5f, 1.5f);
        int64_t one = 1;
        tw_add_f(w, NAME("%slayers.%d.layer_scalar", pre, i), s->dtype, &ls, 1, &one);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.self_attn.q_proj.weight", pre, i), s->nq * hd, H,
                    0, sdH);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.self_attn.q_norm.weight", pre, i), hd, 0, 1, 0.2f);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.self_attn.o_proj.weight", pre, i), H, s->nq * hd,
                    0, 1.0f / sqrtf((float)(s->nq * hd)));
        if (!shared) {
            tw_add_rand(w, &r, s, NAME("%slayers.%d.self_attn.k_proj.weight", pre, i), nkv * hd, H,
                        0, sdH);
            if (!(full && s->k_eq_v))
                tw_add_rand(w, &r, s, NAME("%slayers.%d.self_attn.v_proj.weight", pre, i),
                            nkv * hd, H, 0, sdH);
            tw_add_rand(w, &r, s, NAME("%slayers.%d.self_attn.k_norm.weight", pre, i), hd, 0, 1,
                        0.2f);
        }
        tw_add_rand(w, &r, s, NAME("%slayers.%d.mlp.gate_proj.weight", pre, i), inter, H, 0, sdH);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.mlp.up_proj.weight", pre, i), inter, H, 0, sdH);
        tw_add_rand(w, &r, s, NAME("%slayers.%d.mlp.down_proj.weight", pre, i), H, inter, 0,
                    1.0f / sqrtf((float)inter));
        if (s->P) {
            tw_add_rand(w, &r, s, NAME("%slayers.%d.per_layer_input_gate.weight", pre, i), s->P, H,
                        0, sdH);
            tw_add_rand(w, &r, s, NAME("%slayers.%d.per_layer_projection.weight", pre, i), H, s->P,
                        0, 1.0f / sqrtf((float)s->P));
            tw_add_rand(w, &r, s, NAME("%slayers.%d.post_per_layer_input_norm.weight", pre, i), H,
                        0, 1, 0.2f);
        }
    }
#undef NAME
}

/* Writes config.json and model.safetensors of spec s into dir. Returns 0 on success. */
static inline int tw_write_model(const tw_spec *s, const char *dir)
{
    char path[600], cfg[16384];
    tw_config_json(s, cfg, sizeof cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (tw_write_text(path, cfg))
        return -1;
    tw *w = calloc(1, sizeof *w);
    tw_model_tensors(s, w);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = tw_write(w, path);
    tw_free(w);
    free(w);
    return rc;
}

/* Removes a folder made by tw_tmpdir and the files in it (one level). */
static inline void tw_rmdir(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- a W4A16 fixture with some linears dense ----------------------------------------------- */

/* Copies the file src to dst. Returns 0 on success. */
static inline int tw_copy_file(const char *src, const char *dst)
{
    size_t n = 0;
    char *b = test_read_file(src, &n);
    FILE *f = b ? fopen(dst, "wb") : NULL;
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f)
        ok = fclose(f) == 0 && ok;
    free(b);
    return ok ? 0 : -1;
}

/* The group size of a compressed-tensors config.json (config_groups.group_0.weights.group_size,
 * nested or not), or 0. */
static inline int tw_quant_group(const char *config_path)
{
    char *text = test_read_file(config_path, NULL);
    cJSON *c = text ? cJSON_Parse(text) : NULL, *q = NULL;
    free(text);
    if (c) {
        q = cJSON_GetObjectItemCaseSensitive(c, "quantization_config");
        if (!q)
            q = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(c, "text_config"), "quantization_config");
    }
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(q, "config_groups"), "group_0"),
            "weights"),
        "group_size");
    int group = cJSON_IsNumber(gs) ? gs->valueint : 0;
    cJSON_Delete(c);
    return group;
}

/* Nibble i (bits 4i..4i+3) of the 32-bit word at element w of an I32 tensor, minus 8. */
static inline int tw_nibble(const tailor_st_tensor *t, int64_t w, int i)
{
    return (int)(((uint32_t)tailor_st_load_i64(t, w) >> (4 * i)) & 15u) - 8;
}

/* The compressed-tensors tensors of one int4 linear (base "model.layers.0.mlp.down_proj"), each
 * NULL when absent. */
typedef struct tw_int4 {
    const tailor_st_tensor *packed, *scale, *shape, *zp, *g_idx;
} tw_int4;

static inline tw_int4 tw_int4_of(const tailor_st *st, const char *base)
{
    const char *part[] = {"weight_packed", "weight_scale", "weight_shape", "weight_zero_point",
                          "weight_g_idx"};
    const tailor_st_tensor *found[5];
    for (int i = 0; i < 5; i++) {
        char nm[300];
        snprintf(nm, sizeof nm, "%s.%s", base, part[i]);
        found[i] = tailor_st_find(st, nm);
    }
    return (tw_int4){found[0], found[1], found[2], found[3], found[4]};
}

/* Adds base.weight in BF16: the int4 matrix base.weight_packed (+ _scale, _shape, optional
 * _zero_point and _g_idx, compressed-tensors pack-quantized) dequantized as the fixtures' reference
 * ran it, bf16((q - zp) * scale). Returns 0 on success. */
static inline int tw_add_dequantized(tw *w, const tailor_st *st, const char *base, int group)
{
    char nm[300];
    tw_int4 t = tw_int4_of(st, base);
    const tailor_st_tensor *pk = t.packed, *sc = t.scale, *shp = t.shape, *zp = t.zp, *gi = t.g_idx;
    if (!pk || !sc || !shp || shp->numel != 2 || group <= 0)
        return -1;
    int64_t n = tailor_st_load_i64(shp, 0), k = tailor_st_load_i64(shp, 1);
    int64_t words = pk->shape[1], groups = sc->shape[1];
    float *v = malloc((size_t)(n * k) * sizeof *v);
    if (!v)
        return -1;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            int64_t g = gi ? tailor_st_load_i64(gi, c) : c / group;
            int q = tw_nibble(pk, r * words + c / 8, (int)(c % 8));
            int z = zp ? tw_nibble(zp, (r / 8) * groups + g, (int)(r % 8)) : 0;
            v[r * k + c] = (float)(q - z) * tailor_st_load_f32(sc, r * groups + g);
        }
    snprintf(nm, sizeof nm, "%s.weight", base);
    int64_t shape[2] = {n, k};
    tw_add_f(w, nm, "BF16", v, 2, shape);
    free(v);
    return 0;
}

/* Adds base's int4 tensors with each group of `group` columns split into two groups of
 * group / 2 that share its scale and zero point (base.weight_scale and _zero_point with every
 * column doubled), each column's half named in a new base.weight_g_idx: `first` of a group's
 * columns, a fixed pseudo-random choice the same for every matrix, go to the first half. The
 * dequantized matrix is unchanged. first = group / 2 gives an activation order the W4A16
 * kernels read; any other count, groups of unequal sizes, which they cannot. base must have
 * no g_idx of its own. Returns 0 on success. */
static inline int tw_add_split_groups(tw *w, const tailor_st *st, const char *base, int group,
                                      int first)
{
    char nm[300];
    tw_int4 t = tw_int4_of(st, base);
    const tailor_st_tensor *pk = t.packed, *sc = t.scale, *shp = t.shape, *zp = t.zp;
    if (!pk || !sc || !shp || shp->numel != 2 || t.g_idx || group < 2 || group % 2 ||
        sc->ndim != 2 || (zp && zp->dtype != TAILOR_ST_I32) || group % 37 == 0)
        return -1;
    int64_t k = tailor_st_load_i64(shp, 1), rows = sc->shape[0], groups = sc->shape[1];
    size_t es = sc->nbytes / (size_t)sc->numel;
    unsigned char *s2 = malloc(sc->nbytes * 2);
    int32_t *z2 = zp ? malloc(zp->nbytes * 2) : NULL, *g2 = malloc((size_t)k * sizeof *g2);
    int rc = s2 && g2 && (!zp || z2) ? 0 : -1;
    for (int64_t r = 0; rc == 0 && r < rows; r++)
        for (int64_t g = 0; g < 2 * groups; g++)
            memcpy(s2 + (size_t)(r * 2 * groups + g) * es,
                   (const unsigned char *)sc->data + (size_t)(r * groups + g / 2) * es, es);
    for (int64_t r = 0; rc == 0 && zp && r < zp->shape[0]; r++)
        for (int64_t g = 0; g < 2 * groups; g++)
            z2[r * 2 * groups + g] = (int32_t)tailor_st_load_i64(zp, r * groups + g / 2);
    for (int64_t c = 0; rc == 0 && c < k; c++) {
        int64_t rank = ((c % group) * 37 + 11) % group; /* a bijection of a group's columns */
        g2[c] = (int32_t)(2 * (c / group) + (rank < first ? 0 : 1));
    }
    if (rc == 0) {
        tw_add_raw(w, pk->name, "I32", pk->ndim, pk->shape, pk->data, pk->nbytes);
        tw_add_raw(w, shp->name, tailor_st_dtype_name(shp->dtype), shp->ndim, shp->shape,
                   shp->data, shp->nbytes);
        int64_t s2shape[2] = {rows, 2 * groups};
        tw_add_raw(w, sc->name, tailor_st_dtype_name(sc->dtype), 2, s2shape, s2, sc->nbytes * 2);
        if (zp) {
            int64_t z2shape[2] = {zp->shape[0], 2 * groups};
            tw_add_raw(w, zp->name, "I32", 2, z2shape, z2, zp->nbytes * 2);
        }
        snprintf(nm, sizeof nm, "%s.weight_g_idx", base);
        tw_add_raw(w, nm, "I32", 1, &k, g2, (size_t)k * sizeof *g2);
    }
    free(s2);
    free(z2);
    free(g2);
    return rc;
}

/* How tw_write_rewritten rewrites one linear (base "model.layers.0.self_attn.k_proj"). */
typedef enum {
    TW_DENSE,       /* stored as 16-bit base.weight (tw_add_dequantized) */
    TW_SPLIT,       /* tw_add_split_groups, an activation order the kernels read */
    TW_SPLIT_UNEVEN /* tw_add_split_groups with groups of unequal sizes */
} tw_how;

typedef struct tw_rewrite {
    const char *base; /* NULL ends a list */
    tw_how how;
} tw_rewrite;

/* Whether tensor `name` belongs to one of the bases in rw: "base." then a compressed-tensors
 * part. */
static inline int tw_rewritten(const char *name, const tw_rewrite *rw)
{
    for (int i = 0; rw[i].base; i++) {
        size_t l = strlen(rw[i].base);
        if (strncmp(name, rw[i].base, l) == 0 && strncmp(name + l, ".weight_", 8) == 0)
            return 1;
    }
    return 0;
}

/* A W4A16 fixture (folder src: config.json, model.safetensors, expected.json, logits.bin) with
 * the linears of rw stored another way, each dequantizing to the values the fixture's reference
 * ran on, so its logits stay the reference of the new folder dst. Returns 0 on success. */
static inline int tw_write_rewritten(tailor_ctx *ctx, const char *src, const char *dst,
                                     const tw_rewrite *rw)
{
    char a[1200], b[1200];
    const char *files[] = {"config.json", "expected.json", "logits.bin"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dst, files[i]);
        if (tw_copy_file(a, b))
            return -1;
    }
    snprintf(a, sizeof a, "%s/config.json", src);
    int group = tw_quant_group(a);
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    tailor_st *st = NULL;
    if (tailor_st_open(ctx, a, &st) != TAILOR_OK)
        return -1;
    tw *w = calloc(1, sizeof *w);
    int rc = w ? 0 : -1;
    for (int i = 0; w && rw[i].base && rc == 0; i++)
        rc = rw[i].how == TW_DENSE
                 ? tw_add_dequantized(w, st, rw[i].base, group)
                 : tw_add_split_groups(w, st, rw[i].base, group,
                                       rw[i].how == TW_SPLIT ? group / 2 : 3 * group / 4);
    for (size_t i = 0; w && rc == 0 && i < tailor_st_count(st); i++) {
        const tailor_st_tensor *t = tailor_st_at(st, i);
        if (!tw_rewritten(t->name, rw))
            tw_add_raw(w, t->name, tailor_st_dtype_name(t->dtype), t->ndim, t->shape, t->data,
                       t->nbytes);
    }
    snprintf(b, sizeof b, "%s/model.safetensors", dst);
    if (rc == 0)
        rc = tw_write(w, b);
    if (w)
        tw_free(w);
    free(w);
    tailor_st_close(st);
    return rc;
}

/* The committed e2b_w4a16_asym rewritten by rw into the folder dst. Returns 0 on success. */
static inline int tw_write_asym_rewritten(tailor_ctx *ctx, const char *dst, const tw_rewrite *rw)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/tests/fixtures/e2b_w4a16_asym", test_source_dir());
    return tw_write_rewritten(ctx, src, dst, rw);
}

/* The partly dense fixture: the linears e2b_w4a16_asym stores 16-bit, k of layer 0 (its q|k|v
 * then no longer of one int4 form), gate of layer 1 (gate|up likewise) and o of layer 2; layer
 * 1's o and down keep their activation order. */
static inline const tw_rewrite *tw_partly_dense(void)
{
    static const tw_rewrite rw[] = {{"model.layers.0.self_attn.k_proj", TW_DENSE},
                                    {"model.layers.1.mlp.gate_proj", TW_DENSE},
                                    {"model.layers.2.self_attn.o_proj", TW_DENSE},
                                    {NULL, TW_DENSE}};
    return rw;
}

/* The regrouped fixture: e2b_w4a16_asym with activation orders the W4A16 kernels read on both
 * stacks of layer 0's q|k|v (one order shared by the three) and layer 2's gate|up, on layer 3's
 * down and on layer 4's PLE gate, besides layer 1's o and down (the committed random orders);
 * and layer 0's o in groups of unequal sizes, which the GPU loader runs dequantized. */
static inline const tw_rewrite *tw_regrouped(void)
{
    static const tw_rewrite rw[] = {{"model.layers.0.self_attn.q_proj", TW_SPLIT},
                                    {"model.layers.0.self_attn.k_proj", TW_SPLIT},
                                    {"model.layers.0.self_attn.v_proj", TW_SPLIT},
                                    {"model.layers.2.mlp.gate_proj", TW_SPLIT},
                                    {"model.layers.2.mlp.up_proj", TW_SPLIT},
                                    {"model.layers.3.mlp.down_proj", TW_SPLIT},
                                    {"model.layers.4.per_layer_input_gate", TW_SPLIT},
                                    {"model.layers.0.self_attn.o_proj", TW_SPLIT_UNEVEN},
                                    {NULL, TW_DENSE}};
    return rw;
}

#endif
