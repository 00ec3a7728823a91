/* test_bad_checkpoint.c — broken Gemma 4 checkpoints, made from a good tiny one a single defect
 * at a time (safetensors headers, the shard index, config.json, tensors, W4A16 groups,
 * tokenizer.json) and run through the real loaders. Each must fail with the expected status and
 * one line naming the file and the field (tensor name or JSON key), leave *out NULL, and reserve
 * nothing near what a lying header claims. Under `make asan` the same run shows that none of them
 * crashes or reads outside a mapping. */
#include <cjson/cJSON.h>
#include <string.h>

#include "gemma4.h"
#include "safetensors.h"
#include "test_gemma4_writer.h"
#include "testlib.h"
#include "tokenizer.h"

/* ---- a checkpoint in memory ------------------------------------------------------------------ */

enum { N_SHARDS_MAX = 2 };
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"

typedef struct shard {
    const char *name;
    cJSON *hdr;            /* header object: __metadata__, then one entry per tensor */
    const tw_tensor **t;   /* its tensors (in the ckpt's tw), in data-section order */
    int n;
    uint8_t *extra;        /* bytes after theirs that no tensor owns (m_named_twice), or NULL */
    size_t extra_len;
    size_t len;            /* data section bytes, extra included */
} shard;

typedef struct ckpt {
    tw_spec spec;
    cJSON *cfg;  /* config.json */
    tw *w;       /* the tensors, until ckpt_build turns them into shards */
    int sharded; /* 0: model.safetensors; 1: two shards (layer 1 in the second) and an index */
    int built;
    shard sh[N_SHARDS_MAX];
    int n_shards;
    cJSON *index;
    /* damage done while writing (shard 0) */
    const char *cfg_text;    /* config.json written as is */
    const char *header_text; /* shard 0's header written as is */
    const char *header_tail; /* appended to shard 0's header text (before the padding) */
    int64_t hlen;            /* >= 0: the header length written instead of the true one */
    long cut;                /* >= 0: shard 0 cut to this many bytes */
    int cut_from_end;        /* cut is counted back from the end */
    int drop_shard2;         /* the second shard is not written */
    /* tokenizer.json */
    cJSON *tok;
    const char *tok_text;
} ckpt;

/* The good model: two layers (sliding, full), PLE, head dims 8 and 16, bf16. */
static const tw_spec base_spec = {.H = 16, .L = 2, .nq = 2, .nkv = 1, .hd = 8, .ghd = 16,
                                  .inter = 24, .W = 3, .P = 4, .vocab = 32, .types = "sf",
                                  .dtype = "BF16", .seed = 5};

static const char *good_tokenizer =
    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<pad>\":0,\"<eos>\":1,\"<bos>\":2,\"a\":3,\"b\":4,"
    "\"ab\":5},\"merges\":[[\"a\",\"b\"]],\"unk_token\":null},"
    "\"added_tokens\":[{\"id\":2,\"content\":\"<bos>\",\"special\":true}]}";

static void ckpt_init(ckpt *c)
{
    memset(c, 0, sizeof *c);
    c->spec = base_spec;
    char text[16384];
    tw_config_json(&c->spec, text, sizeof text);
    c->cfg = cJSON_Parse(text);
    c->w = calloc(1, sizeof *c->w);
    tw_model_tensors(&c->spec, c->w);
    c->tok = cJSON_Parse(good_tokenizer);
    c->hlen = -1;
    c->cut = -1;
}

static void ckpt_free(ckpt *c)
{
    cJSON_Delete(c->cfg);
    cJSON_Delete(c->index);
    cJSON_Delete(c->tok);
    for (int i = 0; i < c->n_shards; i++) {
        cJSON_Delete(c->sh[i].hdr);
        free(c->sh[i].t);
        free(c->sh[i].extra);
    }
    tw_free(c->w);
    free(c->w);
}

static cJSON *raw(const char *json)
{
    cJSON *v = cJSON_Parse(json);
    if (!v) {
        fprintf(stderr, "test bug: bad JSON literal %s\n", json);
        exit(1);
    }
    return v;
}

/* Sets obj[key] to the JSON literal `json` (NULL: removes it). */
static void set(cJSON *obj, const char *key, const char *json)
{
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    if (json)
        cJSON_AddItemToObject(obj, key, raw(json));
}

/* The object holding the text model's fields. */
static cJSON *text_cfg(ckpt *c)
{
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->cfg, "text_config");
    return cJSON_IsObject(tc) ? tc : c->cfg;
}

static void cfg_set(ckpt *c, const char *key, const char *json) { set(text_cfg(c), key, json); }

/* Turns the flat config into the released nested form (model_type gemma4 + text_config). */
static void cfg_nest(ckpt *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "architectures", raw("[\"Gemma4ForConditionalGeneration\"]"));
    cJSON_AddStringToObject(root, "model_type", "gemma4");
    cJSON_DeleteItemFromObjectCaseSensitive(c->cfg, "architectures");
    cJSON_AddItemToObject(root, "text_config", c->cfg);
    c->cfg = root;
}

/* ---- tensors, before ckpt_build ---- */

static tw_tensor *tensor(ckpt *c, const char *name)
{
    for (int i = 0; i < c->w->n; i++)
        if (strcmp(c->w->t[i].name, name) == 0)
            return &c->w->t[i];
    fprintf(stderr, "test bug: no tensor %s\n", name);
    exit(1);
}

static void tensor_remove(ckpt *c, const char *name)
{
    tw_tensor *t = tensor(c, name);
    free(t->data);
    *t = c->w->t[--c->w->n];
}

static size_t dtype_bytes(const char *dtype)
{
    return strcmp(dtype, "F32") == 0 || strcmp(dtype, "I32") == 0 ? 4
           : strcmp(dtype, "I64") == 0                            ? 8
           : strcmp(dtype, "I8") == 0 || strcmp(dtype, "U8") == 0 ? 1
                                                                  : 2;
}

/* Gives tensor `name` a new dtype and shape (a, b; b < 0: 1-D; a < 0: unchanged shape), with
 * zeroed data of the matching size: a well-formed file whose tensor is not what the model
 * wants. */
static void tensor_reshape(ckpt *c, const char *name, const char *dtype, int64_t a, int64_t b)
{
    tw_tensor *t = tensor(c, name);
    if (dtype)
        snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    if (a >= 0) {
        t->ndim = b < 0 ? 1 : 2;
        t->shape[0] = a;
        t->shape[1] = b < 0 ? 0 : b;
    }
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    free(t->data);
    t->nbytes = n * dtype_bytes(t->dtype);
    t->data = calloc(t->nbytes ? t->nbytes : 1, 1);
}

static void tensor_add(ckpt *c, const char *name, const char *dtype, int64_t a, int64_t b)
{
    int64_t one = 1;
    tw_add_raw(c->w, name, dtype, 1, &one, NULL, 0);
    tensor_reshape(c, name, dtype, a, b);
}

static void tensor_set_i32(ckpt *c, const char *name, size_t i, int32_t v)
{
    memcpy(tensor(c, name)->data + 4 * i, &v, 4);
}

/* Replaces base.weight [n, k] (k a multiple of 8) by compressed-tensors W4A16 tensors
 * (GEMMA4.md §6): packed int32 [n, k/8], a bf16 scale [n, ceil(k/group)], weight_shape (n, k),
 * and, asym, zero points int32 [ceil(n/8), groups]. The config gets a quantization_config. */
static void quantize(ckpt *c, const char *base, int group, int asym)
{
    char nm[300];
    snprintf(nm, sizeof nm, "%s.weight", base);
    tw_tensor *t = tensor(c, nm);
    int64_t n = t->shape[0], k = t->shape[1], groups = (k + group - 1) / group;
    tensor_remove(c, nm);
    snprintf(nm, sizeof nm, "%s.weight_packed", base);
    tensor_add(c, nm, "I32", n, (k + 7) / 8);
    snprintf(nm, sizeof nm, "%s.weight_scale", base);
    tensor_add(c, nm, "BF16", n, groups);
    uint16_t half = tailor_f32_to_bf16(0.5f);
    for (int64_t i = 0; i < n * groups; i++)
        memcpy(tensor(c, nm)->data + 2 * i, &half, 2);
    snprintf(nm, sizeof nm, "%s.weight_shape", base);
    tensor_add(c, nm, "I64", 2, -1);
    memcpy(tensor(c, nm)->data, &n, 8);
    memcpy(tensor(c, nm)->data + 8, &k, 8);
    if (asym) {
        snprintf(nm, sizeof nm, "%s.weight_zero_point", base);
        tensor_add(c, nm, "I32", (n + 7) / 8, groups);
    }
    char q[512];
    snprintf(q, sizeof q,
             "{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\","
             "\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":{"
             "\"num_bits\":4,\"type\":\"int\",\"symmetric\":%s,\"strategy\":\"group\","
             "\"group_size\":%d}}}}", asym ? "false" : "true", group);
    set(c->cfg, "quantization_config", q);
}

#define Q0 "model.layers.0.self_attn.q_proj" /* [nq * hd, H] = [16, 16] */

/* The nested form with quantization_config inside text_config rather than at the top. */
static void q_into_text_config(ckpt *c)
{
    cfg_nest(c);
    cJSON *q = cJSON_DetachItemFromObjectCaseSensitive(c->cfg, "quantization_config");
    cJSON_AddItemToObject(text_cfg(c), "quantization_config", q);
}

/* quantization_config.config_groups.group_0 of a quantize()d checkpoint (at the top or in
 * text_config), and its weights. */
static cJSON *q_group(ckpt *c)
{
    cJSON *q = cJSON_GetObjectItemCaseSensitive(c->cfg, "quantization_config");
    if (!q)
        q = cJSON_GetObjectItemCaseSensitive(text_cfg(c), "quantization_config");
    cJSON *groups = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
    return cJSON_GetObjectItemCaseSensitive(groups, "group_0");
}

static cJSON *q_weights(ckpt *c) { return cJSON_GetObjectItemCaseSensitive(q_group(c), "weights"); }

/* ---- shards ---- */

/* Splits the tensors into shards (layer 1 in the second when sharded), each with its header as
 * tw_header_text lays it out (parsed, for the cases to damage), and the index. The tensors are
 * not changed after this. Idempotent. */
static void ckpt_build(ckpt *c)
{
    if (c->built)
        return;
    c->built = 1;
    c->n_shards = c->sharded ? 2 : 1;
    c->sh[0].name = c->sharded ? SHARD1 : "model.safetensors";
    c->sh[1].name = SHARD2;
    cJSON *map = NULL;
    if (c->sharded) {
        c->index = raw("{\"metadata\":{\"total_size\":0},\"weight_map\":{}}");
        map = cJSON_GetObjectItemCaseSensitive(c->index, "weight_map");
    }
    for (int s = 0; s < c->n_shards; s++)
        c->sh[s].t = malloc((size_t)(c->w->n ? c->w->n : 1) * sizeof *c->sh[s].t);
    for (int i = 0; i < c->w->n; i++) {
        const tw_tensor *t = &c->w->t[i];
        shard *sh = &c->sh[c->sharded && strstr(t->name, "layers.1.") ? 1 : 0];
        sh->t[sh->n++] = t;
        sh->len += t->nbytes;
        if (map)
            cJSON_AddStringToObject(map, t->name, sh->name);
    }
    for (int s = 0; s < c->n_shards; s++) {
        char *text = tw_header_text(c->sh[s].t, c->sh[s].n);
        c->sh[s].hdr = raw(text);
        free(text);
    }
}

/* The header entry of tensor `name` in shard s. */
static cJSON *entry(ckpt *c, int s, const char *name)
{
    ckpt_build(c);
    cJSON *e = cJSON_GetObjectItemCaseSensitive(c->sh[s].hdr, name);
    if (!e) {
        fprintf(stderr, "test bug: no header entry %s\n", name);
        exit(1);
    }
    return e;
}

/* Sets field `key` of tensor `name`'s header entry (shard 0) to a JSON literal. */
static void hdr_set(ckpt *c, const char *name, const char *key, const char *json)
{
    set(entry(c, 0, name), key, json);
}

static int write_text(const char *dir, const char *name, const char *text)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return tw_write_text(p, text);
}

static int write_json(const char *dir, const char *name, const cJSON *v)
{
    char *text = cJSON_PrintUnformatted(v);
    int rc = write_text(dir, name, text);
    free(text);
    return rc;
}

/* Writes shard s through tw_write_file: its header as the cases left it (shard 0: header_text
 * instead, header_tail after it, hlen as the length), its tensors' bytes and any extra; shard 0
 * then cut to `cut` bytes (counted back from the end with cut_from_end). */
static void write_shard(const ckpt *c, int s, const char *dir)
{
    const shard *sh = &c->sh[s];
    char *json = cJSON_PrintUnformatted(sh->hdr);
    const char *head = s == 0 && c->header_text ? c->header_text : json;
    const char *tail = s == 0 && c->header_tail ? c->header_tail : "";
    size_t n = strlen(head) + strlen(tail) + 1;
    char *h = malloc(n);
    snprintf(h, n, "%s%s", head, tail);
    tw_bytes *d = malloc((size_t)(sh->n + 1) * sizeof *d);
    for (int i = 0; i < sh->n; i++) {
        d[i].p = sh->t[i]->data;
        d[i].n = sh->t[i]->nbytes;
    }
    d[sh->n].p = sh->extra;
    d[sh->n].n = sh->extra_len;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, sh->name);
    CHECKF(tw_write_file(p, h, s == 0 ? c->hlen : -1, d, sh->n + 1) == 0, "cannot write %s", p);
    if (s == 0 && c->cut >= 0) {
        struct stat st;
        CHECKF(stat(p, &st) == 0, "cannot stat %s", p);
        off_t keep = c->cut_from_end ? st.st_size - (off_t)c->cut : (off_t)c->cut;
        CHECKF(truncate(p, keep) == 0, "cannot cut %s", p);
    }
    free(d);
    free(h);
    free(json);
}

static void ckpt_write(ckpt *c, const char *dir)
{
    ckpt_build(c);
    if (c->cfg_text)
        write_text(dir, "config.json", c->cfg_text);
    else
        write_json(dir, "config.json", c->cfg);
    for (int s = 0; s < c->n_shards; s++)
        if (!(s == 1 && c->drop_shard2))
            write_shard(c, s, dir);
    if (c->index)
        write_json(dir, INDEX, c->index);
    if (c->tok_text)
        write_text(dir, "tokenizer.json", c->tok_text);
    else
        write_json(dir, "tokenizer.json", c->tok);
}

/* ---- the cases ------------------------------------------------------------------------------ */

typedef enum loader { LOAD_MODEL, LOAD_TOKENIZER } loader;

typedef struct bad_case {
    const char *name;
    void (*make)(ckpt *c); /* one defect */
    loader load;
    tailor_status want;
    const char *file;  /* the file the message must name */
    const char *field; /* the tensor or JSON key it must name */
    const char *also;  /* another substring (the value, the rule broken), or NULL */
} bad_case;

#define LN0 "model.layers.0.input_layernorm.weight"
#define LN0B "model.layers.0.post_attention_layernorm.weight"
#define DOWN1 "model.layers.1.mlp.down_proj.weight"

/* safetensors headers */
static void m_hlen_past_end(ckpt *c) { c->hlen = 1 << 20; }
static void m_hlen_zero(ckpt *c) { c->hlen = 0; }
static void m_hlen_huge(ckpt *c) { c->hlen = INT64_MAX; }
static void m_hdr_not_json(ckpt *c) { c->header_text = "this is not JSON at all"; }
static void m_hdr_array(ckpt *c) { c->header_text = "[1, 2, 3]"; }
static void m_hdr_trailing(ckpt *c) { c->header_tail = "garbage"; }
static void m_hdr_newline(ckpt *c) { c->header_tail = "\n"; }
static void m_hdr_tab_cr(ckpt *c) { c->header_tail = "\t\r\n"; }
static void m_hdr_ws_then_garbage(ckpt *c) { c->header_tail = " \t x"; }
static void m_off_past_end(ckpt *c) { hdr_set(c, LN0, "data_offsets", "[0, 100000]"); }
static void m_off_reversed(ckpt *c) { hdr_set(c, LN0, "data_offsets", "[32, 0]"); }
static void m_off_single(ckpt *c) { hdr_set(c, LN0, "data_offsets", "[0]"); }
static void m_off_strings(ckpt *c) { hdr_set(c, LN0, "data_offsets", "[\"0\", \"32\"]"); }
static void m_off_fraction(ckpt *c) { hdr_set(c, LN0, "data_offsets", "[0.5, 32.5]"); }
static void m_off_overlap(ckpt *c)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(entry(c, 0, LN0), "data_offsets");
    cJSON_ReplaceItemInObjectCaseSensitive(entry(c, 0, LN0B), "data_offsets",
                                           cJSON_Duplicate(a, 1));
}
static void m_off_vs_shape(ckpt *c) { hdr_set(c, LN0, "shape", "[17]"); }
static void m_dtype_unknown(ckpt *c) { hdr_set(c, LN0, "dtype", "\"Q4_K\""); }
static void m_dtype_number(ckpt *c) { hdr_set(c, LN0, "dtype", "16"); }
static void m_dtype_missing(ckpt *c) { hdr_set(c, LN0, "dtype", NULL); }
static void m_dim_negative(ckpt *c) { hdr_set(c, LN0, "shape", "[-16]"); }
static void m_dim_fraction(ckpt *c) { hdr_set(c, LN0, "shape", "[15.5]"); }
static void m_dim_string(ckpt *c) { hdr_set(c, LN0, "shape", "[\"16\"]"); }
static void m_shape_not_list(ckpt *c) { hdr_set(c, LN0, "shape", "16"); }
static void m_shape_nine_dims(ckpt *c) { hdr_set(c, LN0, "shape", "[1,1,1,1,1,1,1,1,16]"); }
static void m_shape_overflow(ckpt *c) { hdr_set(c, LN0, "shape", "[4294967296, 4294967296, 2]"); }
static void m_shape_wraps(ckpt *c)
{ /* 2^62 BF16 elements: 2^63 bytes, a product that fits 64 bits only before the dtype size */
    hdr_set(c, LN0, "shape", "[2147483648, 2147483648]");
}
static void m_entry_not_object(ckpt *c)
{
    ckpt_build(c);
    cJSON_ReplaceItemInObjectCaseSensitive(c->sh[0].hdr, LN0, raw("5"));
}
static void m_named_twice(ckpt *c)
{ /* a second entry of the same name, with bytes of its own at the end of the data */
    ckpt_build(c);
    shard *sh = &c->sh[0];
    char off[64];
    snprintf(off, sizeof off, "[%zu, %zu]", sh->len, sh->len + 32);
    cJSON *e = raw("{\"dtype\":\"BF16\",\"shape\":[16]}");
    cJSON_AddItemToObject(e, "data_offsets", raw(off));
    cJSON_AddItemToObject(sh->hdr, LN0, e);
    sh->extra = calloc(32, 1);
    sh->extra_len = 32;
    sh->len += 32;
}
static void m_meta_number(ckpt *c) { ckpt_build(c); set(c->sh[0].hdr, "__metadata__", "5"); }
static void m_meta_value(ckpt *c)
{
    ckpt_build(c);
    set(c->sh[0].hdr, "__metadata__", "{\"format\":1}");
}
static void m_meta_tensor(ckpt *c)
{ /* a tensor entry under the reserved name */
    ckpt_build(c);
    set(c->sh[0].hdr, "__metadata__",
        "{\"dtype\":\"BF16\",\"shape\":[16],\"data_offsets\":[0,32]}");
}
static void m_empty_file(ckpt *c) { c->cut = 0; }
static void m_cut_header(ckpt *c) { c->cut = 40; }
static void m_cut_data(ckpt *c) { c->cut = 10; c->cut_from_end = 1; }

/* the shard index */
static void m_shard_missing(ckpt *c) { c->sharded = 1; c->drop_shard2 = 1; }
static void m_index_absent_tensor(ckpt *c)
{
    c->sharded = 1;
    ckpt_build(c);
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(c->index, "weight_map"),
                            "model.layers.1.extra.weight", SHARD2);
}
static void m_index_wrong_shard(ckpt *c)
{
    c->sharded = 1;
    ckpt_build(c);
    set(cJSON_GetObjectItemCaseSensitive(c->index, "weight_map"), LN0, "\"" SHARD2 "\"");
}
static void m_index_map_list(ckpt *c)
{
    c->sharded = 1;
    ckpt_build(c);
    set(c->index, "weight_map", "[]");
}
static void m_index_array(ckpt *c)
{
    c->sharded = 1;
    ckpt_build(c);
    cJSON_Delete(c->index);
    c->index = raw("[{\"weight_map\":{}}]");
}
static void m_index_path(ckpt *c)
{
    c->sharded = 1;
    ckpt_build(c);
    set(cJSON_GetObjectItemCaseSensitive(c->index, "weight_map"), LN0, "\"../" SHARD1 "\"");
}
static void m_index_number(ckpt *c)
{
    c->sharded = 1;
    ckpt_build(c);
    set(cJSON_GetObjectItemCaseSensitive(c->index, "weight_map"), LN0, "1");
}

/* config.json */
static void m_cfg_not_json(ckpt *c) { c->cfg_text = "{\"model_type\": \"gemma4_text\", "; }
static void m_cfg_array(ckpt *c) { c->cfg_text = "[{\"model_type\": \"gemma4_text\"}]"; }
static void m_cfg_missing(ckpt *c) { cfg_set(c, "hidden_size", NULL); }
static void m_cfg_negative(ckpt *c) { cfg_set(c, "num_attention_heads", "-2"); }
static void m_cfg_zero_hd(ckpt *c) { cfg_set(c, "head_dim", "0"); }
static void m_cfg_zero_kv(ckpt *c) { cfg_set(c, "num_key_value_heads", "0"); }
static void m_cfg_zero_window(ckpt *c) { cfg_set(c, "sliding_window", "0"); }
static void m_cfg_huge(ckpt *c) { cfg_set(c, "vocab_size", "1e12"); }
static void m_cfg_lying_hidden(ckpt *c) { cfg_set(c, "hidden_size", "999999999"); }
static void m_cfg_lying_hd(ckpt *c)
{ /* 2 heads x 400000000 fits the product limit; only q_norm's length shows the lie */
    cfg_set(c, "head_dim", "400000000");
}
static void m_cfg_heads_overflow(ckpt *c)
{ /* 999999999 query heads x head_dim 8 wraps a 32-bit int */
    cfg_set(c, "num_attention_heads", "999999999");
}
static void m_cfg_no_divide(ckpt *c)
{
    cfg_set(c, "num_attention_heads", "3");
    cfg_set(c, "num_key_value_heads", "2");
}
static void m_cfg_nested_odd_hd(ckpt *c)
{
    cfg_nest(c);
    cfg_set(c, "head_dim", "7");
}
static void m_cfg_nested_odd_ghd(ckpt *c)
{ /* layer 1 is the full one */
    cfg_nest(c);
    cfg_set(c, "global_head_dim", "15");
}
static void m_cfg_nested_plc_hd(ckpt *c)
{
    cfg_nest(c);
    cfg_set(c, "per_layer_config", "{\"1\":{\"head_dim\":15}}");
}
static void m_cfg_nested_no_divide(ckpt *c)
{
    cfg_nest(c);
    cfg_set(c, "num_attention_heads", "3");
    cfg_set(c, "num_key_value_heads", "2");
}
static void m_cfg_nested_shared_all(ckpt *c)
{
    cfg_nest(c);
    cfg_set(c, "num_kv_shared_layers", "2");
}
static void m_cfg_types_short(ckpt *c) { cfg_set(c, "layer_types", "[\"full_attention\"]"); }
static void m_cfg_types_name(ckpt *c)
{
    cfg_set(c, "layer_types", "[\"sliding_attention\", \"chunked_attention\"]");
}
static void m_cfg_types_string(ckpt *c) { cfg_set(c, "layer_types", "\"sliding_attention\""); }
static void m_cfg_types_null_item(ckpt *c)
{
    cfg_set(c, "layer_types", "[null, \"full_attention\"]");
}
static void m_cfg_text_string(ckpt *c)
{
    cfg_nest(c);
    set(c->cfg, "text_config", "\"gemma4_text\"");
}
static void m_cfg_text_missing_field(ckpt *c)
{
    cfg_nest(c);
    cfg_set(c, "intermediate_size", NULL);
}
static void m_cfg_hidden_string(ckpt *c) { cfg_set(c, "hidden_size", "\"16\""); }
static void m_cfg_bool_string(ckpt *c) { cfg_set(c, "use_double_wide_mlp", "\"no\""); }
static void m_cfg_eps_string(ckpt *c) { cfg_set(c, "rms_norm_eps", "\"1e-6\""); }
static void m_cfg_act_number(ckpt *c) { cfg_set(c, "hidden_activation", "7"); }
static void m_cfg_rope_number(ckpt *c) { cfg_set(c, "rope_parameters", "10000"); }
static void m_cfg_rope_kind_list(ckpt *c)
{
    cfg_set(c, "rope_parameters", "{\"sliding_attention\":[10000], \"full_attention\":null}");
}
static void m_cfg_rope_type_number(ckpt *c)
{
    cfg_set(c, "rope_parameters", "{\"full_attention\":{\"rope_type\":2,\"rope_theta\":1e6}}");
}
static void m_cfg_theta_negative(ckpt *c)
{
    cfg_set(c, "rope_parameters", "{\"sliding_attention\":{\"rope_theta\":-10000}}");
}
static void m_cfg_theta_huge(ckpt *c)
{
    cfg_set(c, "rope_parameters", "{\"full_attention\":{\"rope_theta\":1e300}}");
}
static void m_cfg_partial(ckpt *c)
{
    cfg_set(c, "rope_parameters", "{\"full_attention\":{\"partial_rotary_factor\":2.0}}");
}
static void m_cfg_eps_negative(ckpt *c) { cfg_set(c, "rms_norm_eps", "-1e-6"); }
static void m_cfg_softcap_negative(ckpt *c) { cfg_set(c, "final_logit_softcapping", "-30"); }
static void m_cfg_model_type_number(ckpt *c) { set(c->cfg, "model_type", "4"); }
static void m_cfg_shared_all(ckpt *c) { cfg_set(c, "num_kv_shared_layers", "2"); }
static void m_cfg_plc_key(ckpt *c) { cfg_set(c, "per_layer_config", "{\"7\":{\"head_dim\":16}}"); }
static void m_cfg_untied(ckpt *c) { set(c->cfg, "tie_word_embeddings", "false"); }
static void m_cfg_arch_string(ckpt *c) { set(c->cfg, "architectures", "\"Gemma4ForCausalLM\""); }

/* tensors */
static void m_missing(ckpt *c) { tensor_remove(c, DOWN1); }
static void m_q_rows(ckpt *c) { tensor_reshape(c, Q0 ".weight", NULL, 17, 16); }
static void m_norm_len(ckpt *c) { tensor_reshape(c, LN0, NULL, 17, -1); }
static void m_norm_i32(ckpt *c) { tensor_reshape(c, LN0, "I32", -1, -1); }
static void m_q_i8(ckpt *c) { tensor_reshape(c, Q0 ".weight", "I8", -1, -1); }
static void m_embed_cols(ckpt *c) { tensor_reshape(c, "model.embed_tokens.weight", NULL, 32, 17); }
static void m_k_1d(ckpt *c)
{
    tensor_reshape(c, "model.layers.0.self_attn.k_proj.weight", NULL, 128, -1);
}
static void m_gate_1d(ckpt *c)
{
    tensor_reshape(c, "model.layers.0.mlp.gate_proj.weight", NULL, 384, -1);
}
static void m_scalar_two(ckpt *c) { tensor_reshape(c, "model.layers.1.layer_scalar", NULL, 2, -1); }
static void m_qnorm_u8(ckpt *c)
{
    tensor_reshape(c, "model.layers.0.self_attn.q_norm.weight", "U8", -1, -1);
}
static void m_ple_cols(ckpt *c)
{
    tensor_reshape(c, "model.embed_tokens_per_layer.weight", NULL, 32, 9);
}

/* W4A16 */
static void m_w4_good(ckpt *c) { quantize(c, Q0, 8, 1); }
static void m_w4_partial_group(ckpt *c) { quantize(c, Q0, 12, 0); } /* k 16: groups of 12 and 4 */
static void m_w4_packed_f32(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_packed", "F32", -1, -1);
}
static void m_w4_packed_cols(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_packed", NULL, 16, 3);
}
static void m_w4_scale_rows(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_scale", NULL, 17, 2);
}
static void m_w4_scale_cols(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_scale", NULL, 16, 17);
}
static void m_w4_scale_int(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_scale", "I32", -1, -1);
}
static void m_w4_groups(ckpt *c)
{ /* group_size 8 says 2 groups of k 16; the scale has 1 */
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_scale", NULL, 16, 1);
}
static void m_w4_group_nodiv(ckpt *c)
{ /* group_size 12 does not divide k 16: 2 groups, but the scale has 3 */
    quantize(c, Q0, 12, 0);
    tensor_reshape(c, Q0 ".weight_scale", NULL, 16, 3);
}
static void m_w4_shape(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    int64_t k = 24;
    memcpy(tensor(c, Q0 ".weight_shape")->data + 8, &k, 8);
}
static void m_w4_shape_f32(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_reshape(c, Q0 ".weight_shape", "F32", -1, -1);
}
static void m_w4_no_shape(ckpt *c) { quantize(c, Q0, 8, 0); tensor_remove(c, Q0 ".weight_shape"); }
static void m_w4_no_scale(ckpt *c) { quantize(c, Q0, 8, 0); tensor_remove(c, Q0 ".weight_scale"); }
static void m_w4_zp(ckpt *c)
{
    quantize(c, Q0, 8, 1);
    tensor_reshape(c, Q0 ".weight_zero_point", NULL, 3, 2);
}
static void m_w4_gidx(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_add(c, Q0 ".weight_g_idx", "I32", 16, -1);
    tensor_set_i32(c, Q0 ".weight_g_idx", 5, 2); /* 2 groups: 0 and 1 */
}
static void m_w4_gidx_negative(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    tensor_add(c, Q0 ".weight_g_idx", "I32", 16, -1);
    tensor_set_i32(c, Q0 ".weight_g_idx", 0, -1);
}
static void m_w4_gs_string(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    set(q_weights(c), "group_size", "\"8\"");
}
static void m_w4_gs_zero(ckpt *c) { quantize(c, Q0, 8, 0); set(q_weights(c), "group_size", "0"); }
static void m_w4_gs_huge(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    set(q_weights(c), "group_size", "1e12");
}
static void m_w4_gs_fraction(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    set(q_weights(c), "group_size", "7.5");
}
static void m_w4_bits_string(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    set(q_weights(c), "num_bits", "\"4\"");
}
static void m_w4_bits_8(ckpt *c) { quantize(c, Q0, 8, 0); set(q_weights(c), "num_bits", "8"); }
static void m_w4_nested_bits_string(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    q_into_text_config(c);
    set(q_weights(c), "num_bits", "\"4\"");
}
static void m_w4_nested_bits_8(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    q_into_text_config(c);
    set(q_weights(c), "num_bits", "8");
}
static void m_w4_nested_method(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    q_into_text_config(c);
    set(cJSON_GetObjectItemCaseSensitive(text_cfg(c), "quantization_config"), "quant_method",
        "\"gptq\"");
}
static void m_w4_nested_good(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    q_into_text_config(c);
}
static void m_w4_groups_list(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    set(cJSON_GetObjectItemCaseSensitive(c->cfg, "quantization_config"), "config_groups",
        "[{\"weights\":{\"num_bits\":4,\"group_size\":8},\"format\":\"int-quantized\"}]");
}
static void m_w4_weights_number(ckpt *c)
{
    quantize(c, Q0, 8, 0);
    set(q_group(c), "weights", "4");
}

/* tokenizer.json */
static cJSON *tok_model(ckpt *c) { return cJSON_GetObjectItemCaseSensitive(c->tok, "model"); }
static cJSON *tok_vocab(ckpt *c) { return cJSON_GetObjectItemCaseSensitive(tok_model(c), "vocab"); }
static void m_tok_not_json(ckpt *c) { c->tok_text = "{\"model\": {\"type\": \"BPE\""; }
static void m_tok_no_vocab(ckpt *c) { set(tok_model(c), "vocab", NULL); }
static void m_tok_vocab_list(ckpt *c) { set(tok_model(c), "vocab", "[\"a\", \"b\"]"); }
static void m_tok_id_negative(ckpt *c) { set(tok_vocab(c), "b", "-1"); }
static void m_tok_id_huge(ckpt *c) { set(tok_vocab(c), "b", "16777216"); }
static void m_tok_id_fraction(ckpt *c) { set(tok_vocab(c), "b", "4.5"); }
static void m_tok_id_string(ckpt *c) { set(tok_vocab(c), "b", "\"4\""); }
static void m_tok_merge_one(ckpt *c) { set(tok_model(c), "merges", "[[\"a\"]]"); }
static void m_tok_merge_numbers(ckpt *c) { set(tok_model(c), "merges", "[[3, 4]]"); }
static void m_tok_merge_three(ckpt *c) { set(tok_model(c), "merges", "[\"a b c\"]"); }
static void m_tok_merge_unknown(ckpt *c) { set(tok_model(c), "merges", "[[\"a\", \"z\"]]"); }
static void m_tok_merges_object(ckpt *c) { set(tok_model(c), "merges", "{\"a\": \"b\"}"); }
static void m_tok_added_id(ckpt *c)
{
    set(c->tok, "added_tokens", "[{\"id\":16777216,\"content\":\"<x>\",\"special\":true}]");
}
static void m_tok_added_list(ckpt *c) { set(c->tok, "added_tokens", "{\"id\":2}"); }
static void m_tok_added_content(ckpt *c)
{
    set(c->tok, "added_tokens", "[{\"id\":2,\"content\":5}]");
}
static void m_tok_unk_number(ckpt *c) { set(tok_model(c), "unk_token", "3"); }

#define ST "model.safetensors"
#define CFG "config.json"
#define TOK "tokenizer.json"
#define PARSE TAILOR_ERR_PARSE
#define NOTF TAILOR_ERR_NOT_FOUND
#define UNSUP TAILOR_ERR_UNSUPPORTED
#define M LOAD_MODEL
#define T LOAD_TOKENIZER

static const bad_case cases[] = {
    /* safetensors: the header */
    {"header length past the end", m_hlen_past_end, M, PARSE, ST, "header", "1048576"},
    {"header length zero", m_hlen_zero, M, PARSE, ST, "header length", NULL},
    {"header length 2^63-1", m_hlen_huge, M, PARSE, ST, "header length", NULL},
    {"header not JSON", m_hdr_not_json, M, PARSE, ST, "header", "JSON"},
    {"header a JSON array", m_hdr_array, M, PARSE, ST, "header", "JSON object"},
    {"bytes after the header JSON", m_hdr_trailing, M, PARSE, ST, "header", "after its JSON"},
    {"newline padding (accepted)", m_hdr_newline, M, TAILOR_OK, NULL, NULL, NULL},
    {"tab and CR padding (accepted)", m_hdr_tab_cr, M, TAILOR_OK, NULL, NULL, NULL},
    {"garbage after whitespace padding", m_hdr_ws_then_garbage, M, PARSE,
     ST, "header", "only JSON whitespace"},
    {"__metadata__ a number", m_meta_number, M, PARSE, ST, "__metadata__", NULL},
    {"__metadata__ value a number", m_meta_value, M, PARSE, ST, "__metadata__", "format"},
    {"__metadata__ a tensor entry", m_meta_tensor, M, PARSE, ST, "__metadata__", "shape"},
    {"entry not an object", m_entry_not_object, M, PARSE, ST, LN0, NULL},
    {"tensor named twice", m_named_twice, M, PARSE, ST, LN0, "twice"},
    /* safetensors: offsets */
    {"data_offsets past the end", m_off_past_end, M, PARSE, ST, LN0, "past the end"},
    {"data_offsets reversed", m_off_reversed, M, PARSE, ST, LN0, "data_offsets"},
    {"data_offsets one number", m_off_single, M, PARSE, ST, LN0, "data_offsets"},
    {"data_offsets strings", m_off_strings, M, PARSE, ST, LN0, "data_offsets"},
    {"data_offsets fractional", m_off_fraction, M, PARSE, ST, LN0, "data_offsets"},
    {"data_offsets overlapping", m_off_overlap, M, PARSE, ST, LN0, "overlaps"},
    {"offsets disagree with shape", m_off_vs_shape, M, PARSE, ST, LN0, "34 bytes"},
    /* safetensors: dtype and shape */
    {"dtype unknown", m_dtype_unknown, M, PARSE, ST, LN0, "Q4_K"},
    {"dtype a number", m_dtype_number, M, PARSE, ST, LN0, "dtype"},
    {"dtype missing", m_dtype_missing, M, PARSE, ST, LN0, "dtype"},
    {"dim negative", m_dim_negative, M, PARSE, ST, LN0, "shape"},
    {"dim fractional", m_dim_fraction, M, PARSE, ST, LN0, "shape"},
    {"dim a string", m_dim_string, M, PARSE, ST, LN0, "shape"},
    {"shape not a list", m_shape_not_list, M, PARSE, ST, LN0, "shape"},
    {"shape of nine dims", m_shape_nine_dims, M, PARSE, ST, LN0, "dimensions"},
    {"shape product overflows", m_shape_overflow, M, PARSE, ST, LN0, "overflows"},
    {"shape x dtype size wraps", m_shape_wraps, M, PARSE, ST, LN0, "shape"},
    /* safetensors: the file */
    {"empty file", m_empty_file, M, PARSE, ST, "truncated", NULL},
    {"cut inside the header", m_cut_header, M, PARSE, ST, "header", "truncated"},
    {"cut inside the data", m_cut_data, M, PARSE, ST, "model.layers.", "past the end"},
    /* the shard index */
    {"index names a missing shard", m_shard_missing, M, TAILOR_ERR_IO,
     INDEX, SHARD2, "model.layers.1."},
    {"index names an absent tensor", m_index_absent_tensor, M, NOTF,
     INDEX, "model.layers.1.extra.weight", SHARD2},
    {"index names the wrong shard", m_index_wrong_shard, M, NOTF, INDEX, LN0, SHARD2},
    {"index weight_map a list", m_index_map_list, M, PARSE, INDEX, "weight_map", NULL},
    {"index a JSON array", m_index_array, M, PARSE, INDEX, "weight_map", NULL},
    {"index entry a path", m_index_path, M, PARSE, INDEX, LN0, "file name"},
    {"index entry a number", m_index_number, M, PARSE, INDEX, LN0, NULL},
    /* config.json */
    {"config not JSON", m_cfg_not_json, M, PARSE, CFG, "JSON", NULL},
    {"config a JSON array", m_cfg_array, M, PARSE, CFG, "JSON object", NULL},
    {"field missing", m_cfg_missing, M, PARSE, CFG, "hidden_size", "missing"},
    {"field negative", m_cfg_negative, M, PARSE, CFG, "num_attention_heads", NULL},
    {"head_dim zero", m_cfg_zero_hd, M, PARSE, CFG, "head_dim", NULL},
    {"num_key_value_heads zero", m_cfg_zero_kv, M, PARSE, CFG, "num_key_value_heads", NULL},
    {"sliding_window zero", m_cfg_zero_window, M, PARSE, CFG, "sliding_window", NULL},
    {"field huge", m_cfg_huge, M, PARSE, CFG, "vocab_size", "too large"},
    {"hidden_size lies (999999999)", m_cfg_lying_hidden, M, PARSE,
     CFG, "embed_tokens", "999999999"},
    {"head_dim lies (400000000)", m_cfg_lying_hd, M, PARSE, CFG, "head_dim", "400000000"},
    {"heads x head_dim overflow", m_cfg_heads_overflow, M, PARSE,
     CFG, "num_attention_heads", "999999999"},
    {"heads do not divide", m_cfg_no_divide, M, PARSE, CFG, "num_key_value_heads", NULL},
    {"head_dim odd, nested", m_cfg_nested_odd_hd, M, PARSE,
     CFG, "layer 0: text_config.head_dim 7", "positive even"},
    {"global_head_dim odd, nested", m_cfg_nested_odd_ghd, M, PARSE,
     CFG, "layer 1: text_config.global_head_dim 15", "positive even"},
    {"per_layer_config head_dim odd, nested", m_cfg_nested_plc_hd, M, PARSE,
     CFG, "layer 1: text_config.per_layer_config.1.head_dim 15", "positive even"},
    {"heads do not divide, nested", m_cfg_nested_no_divide, M, PARSE,
     CFG, "text_config.num_attention_heads 3 is not a multiple of text_config.num_key_value_heads",
     NULL},
    {"every layer KV-shared, nested", m_cfg_nested_shared_all, M, PARSE,
     CFG, "text_config.num_kv_shared_layers 2", NULL},
    {"layer_types too short", m_cfg_types_short, M, PARSE, CFG, "layer_types", "2"},
    {"layer_types unknown name", m_cfg_types_name, M, PARSE, CFG, "layer_types[1]", NULL},
    {"layer_types a string", m_cfg_types_string, M, PARSE, CFG, "layer_types", NULL},
    {"layer_types null item", m_cfg_types_null_item, M, PARSE, CFG, "layer_types[0]", NULL},
    {"text_config a string", m_cfg_text_string, M, PARSE, CFG, "text_config", NULL},
    {"text_config lacks a field", m_cfg_text_missing_field, M, PARSE,
     CFG, "text_config.intermediate_size", NULL},
    {"int field a string", m_cfg_hidden_string, M, PARSE, CFG, "hidden_size", NULL},
    {"bool field a string", m_cfg_bool_string, M, PARSE, CFG, "use_double_wide_mlp", NULL},
    {"float field a string", m_cfg_eps_string, M, PARSE, CFG, "rms_norm_eps", NULL},
    {"hidden_activation a number", m_cfg_act_number, M, PARSE, CFG, "hidden_activation", NULL},
    {"rope_parameters a number", m_cfg_rope_number, M, PARSE, CFG, "rope_parameters", NULL},
    {"rope_parameters kind a list", m_cfg_rope_kind_list, M, PARSE,
     CFG, "rope_parameters.sliding_attention", NULL},
    {"rope_type a number", m_cfg_rope_type_number, M, PARSE, CFG, "rope_type", NULL},
    {"rope_theta negative", m_cfg_theta_negative, M, PARSE, CFG, "rope_theta", NULL},
    {"rope_theta past float", m_cfg_theta_huge, M, PARSE, CFG, "rope_theta", NULL},
    {"partial_rotary_factor 2", m_cfg_partial, M, PARSE, CFG, "partial_rotary_factor", NULL},
    {"rms_norm_eps negative", m_cfg_eps_negative, M, PARSE, CFG, "rms_norm_eps", NULL},
    {"softcapping negative", m_cfg_softcap_negative, M, PARSE,
     CFG, "final_logit_softcapping", NULL},
    {"model_type a number", m_cfg_model_type_number, M, PARSE, CFG, "model_type", NULL},
    {"every layer KV-shared", m_cfg_shared_all, M, PARSE, CFG, "num_kv_shared_layers", NULL},
    {"per_layer_config bad key", m_cfg_plc_key, M, PARSE, CFG, "per_layer_config", "'7'"},
    {"tie_word_embeddings false", m_cfg_untied, M, UNSUP, CFG, "tie_word_embeddings", NULL},
    {"architectures a string", m_cfg_arch_string, M, PARSE, CFG, "architectures", NULL},
    /* tensors */
    {"tensor missing", m_missing, M, NOTF, ST, DOWN1, NULL},
    {"matrix rows wrong", m_q_rows, M, PARSE, ST, Q0 ".weight", "[17, 16]"},
    {"vector length wrong", m_norm_len, M, PARSE, ST, LN0, "[17]"},
    {"vector dtype I32", m_norm_i32, M, PARSE, ST, LN0, "I32"},
    {"matrix dtype I8", m_q_i8, M, PARSE, ST, Q0 ".weight", "I8"},
    {"embedding columns wrong", m_embed_cols, M, PARSE,
     ST, "model.embed_tokens.weight", "[32, 17]"},
    {"k_proj 1-D", m_k_1d, M, PARSE, ST, "model.layers.0.self_attn.k_proj.weight", "[128]"},
    {"gate_proj 1-D", m_gate_1d, M, PARSE, ST, "model.layers.0.mlp.gate_proj.weight", "[384]"},
    {"layer_scalar of two", m_scalar_two, M, PARSE, ST, "model.layers.1.layer_scalar", "[2]"},
    {"q_norm dtype U8", m_qnorm_u8, M, PARSE, ST, "model.layers.0.self_attn.q_norm.weight", "U8"},
    {"PLE table columns", m_ple_cols, M, PARSE,
     ST, "model.embed_tokens_per_layer.weight", "[32, 9]"},
    /* W4A16 */
    {"W4A16 asym (accepted)", m_w4_good, M, TAILOR_OK, NULL, NULL, NULL},
    {"W4A16 partial group (accepted)", m_w4_partial_group, M, TAILOR_OK, NULL, NULL, NULL},
    {"packed dtype F32", m_w4_packed_f32, M, PARSE, ST, Q0 ".weight_packed", "F32"},
    {"packed columns wrong", m_w4_packed_cols, M, PARSE, ST, Q0 ".weight_packed", "[16, 3]"},
    {"scale rows wrong", m_w4_scale_rows, M, PARSE, ST, Q0 ".weight_scale", "[17, 2]"},
    {"scale more groups than k", m_w4_scale_cols, M, PARSE, ST, Q0 ".weight_scale", "[16, 17]"},
    {"scale dtype I32", m_w4_scale_int, M, PARSE, ST, Q0 ".weight_scale", "I32"},
    {"scale groups vs group_size", m_w4_groups, M, PARSE, ST, Q0 ".weight_scale", "2 groups of 8"},
    {"group_size not dividing k", m_w4_group_nodiv, M, PARSE,
     ST, Q0 ".weight_scale", "2 groups of 12"},
    {"weight_shape disagrees", m_w4_shape, M, PARSE, ST, Q0 ".weight_shape", "(16, 16)"},
    {"weight_shape dtype F32", m_w4_shape_f32, M, PARSE, ST, Q0 ".weight_shape", "F32"},
    {"weight_shape missing", m_w4_no_shape, M, NOTF, ST, Q0 ".weight_packed", "weight_shape"},
    {"weight_scale missing", m_w4_no_scale, M, NOTF, ST, Q0 ".weight_packed", "weight_scale"},
    {"zero point shape wrong", m_w4_zp, M, PARSE, ST, Q0 ".weight_zero_point", "[3, 2]"},
    {"g_idx past the groups", m_w4_gidx, M, PARSE, ST, Q0 ".weight_g_idx", "below 2"},
    {"g_idx negative", m_w4_gidx_negative, M, PARSE, ST, Q0 ".weight_g_idx", "below 2"},
    {"group_size a string", m_w4_gs_string, M, PARSE, CFG, "group_size", NULL},
    {"group_size zero", m_w4_gs_zero, M, PARSE, CFG, "group_size", NULL},
    {"group_size 1e12", m_w4_gs_huge, M, PARSE, CFG, "group_size", NULL},
    {"group_size fractional", m_w4_gs_fraction, M, PARSE, CFG, "group_size", NULL},
    {"num_bits a string", m_w4_bits_string, M, PARSE, CFG, "num_bits", NULL},
    {"num_bits 8", m_w4_bits_8, M, UNSUP, CFG, "num_bits", "8"},
    {"W4A16 nested in text_config (accepted)", m_w4_nested_good, M, TAILOR_OK, NULL, NULL, NULL},
    {"num_bits a string, nested", m_w4_nested_bits_string, M, PARSE,
     CFG, "field text_config.quantization_config.config_groups.group_0.weights.num_bits",
     "not an integer"},
    {"num_bits 8, nested", m_w4_nested_bits_8, M, UNSUP,
     CFG, "text_config.quantization_config.config_groups.group_0.weights.num_bits 8", NULL},
    {"quant_method gptq, nested", m_w4_nested_method, M, UNSUP,
     CFG, "text_config.quantization_config.quant_method 'gptq'", NULL},
    {"config_groups a list", m_w4_groups_list, M, PARSE, CFG, "config_groups", NULL},
    {"config group weights a number", m_w4_weights_number, M, PARSE, CFG, "weights", NULL},
    /* tokenizer.json */
    {"tokenizer not JSON", m_tok_not_json, T, PARSE, TOK, "JSON", NULL},
    {"model.vocab missing", m_tok_no_vocab, T, PARSE, TOK, "model.vocab", NULL},
    {"model.vocab a list", m_tok_vocab_list, T, PARSE, TOK, "model.vocab", NULL},
    {"vocab id negative", m_tok_id_negative, T, PARSE, TOK, "model.vocab", "\"b\""},
    {"vocab id 2^24", m_tok_id_huge, T, PARSE, TOK, "model.vocab", "\"b\""},
    {"vocab id fractional", m_tok_id_fraction, T, PARSE, TOK, "model.vocab", "\"b\""},
    {"vocab id a string", m_tok_id_string, T, PARSE, TOK, "model.vocab", "\"b\""},
    {"merge of one", m_tok_merge_one, T, PARSE, TOK, "model.merges[0]", NULL},
    {"merge of numbers", m_tok_merge_numbers, T, PARSE, TOK, "model.merges[0]", NULL},
    {"merge of three", m_tok_merge_three, T, PARSE, TOK, "model.merges[0]", NULL},
    {"merge of an unknown token", m_tok_merge_unknown, T, PARSE, TOK, "model.merges[0]", "\"z\""},
    {"merges an object", m_tok_merges_object, T, PARSE, TOK, "model.merges", NULL},
    {"added token id 2^24", m_tok_added_id, T, PARSE, TOK, "added_tokens[0].id", NULL},
    {"added_tokens an object", m_tok_added_list, T, PARSE, TOK, "added_tokens", NULL},
    {"added content a number", m_tok_added_content, T, PARSE, TOK, "added_tokens[0].content", NULL},
    {"unk_token a number", m_tok_unk_number, T, PARSE, TOK, "model.unk_token", NULL},
};

/* ---- running a case ------------------------------------------------------------------------- */

/* Peak virtual size of this process in bytes: a lying header that makes a loader reserve its
 * claim shows here even when the pages are never touched. */
static double vm_peak(void) { return test_proc_status_bytes("VmPeak"); }

static tailor_status load(tailor_ctx *ctx, loader l, const char *dir, int *out_null)
{
    char p[600];
    if (l == LOAD_TOKENIZER) {
        snprintf(p, sizeof p, "%s/tokenizer.json", dir);
        tailor_tokenizer *tok = (tailor_tokenizer *)0x1;
        tailor_status s = tailor_tokenizer_open(ctx, p, &tok);
        *out_null = tok == NULL;
        if (s == TAILOR_OK)
            tailor_tokenizer_close(tok);
        return s;
    }
    tailor_gemma4 *m = (tailor_gemma4 *)0x1;
    tailor_status s = tailor_gemma4_open(ctx, dir, &m);
    *out_null = m == NULL;
    if (s == TAILOR_OK)
        tailor_gemma4_close(m);
    return s;
}

static void run_case(tailor_ctx *ctx, const char *root, int i, const bad_case *bc)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/case%03d", root, i);
    if (mkdir(dir, 0755) != 0) {
        fprintf(stderr, "cannot make %s\n", dir);
        exit(1);
    }
    ckpt c;
    ckpt_init(&c);
    bc->make(&c);
    ckpt_write(&c, dir);
    ckpt_free(&c);

    tailor_ctx_clear(ctx);
    double peak0 = vm_peak();
    int out_null = 0;
    tailor_status s = load(ctx, bc->load, dir, &out_null);
    double grew = vm_peak() - peak0;
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(s == bc->want, "%s: status %s, want %s (%s)", bc->name, tailor_status_name(s),
           tailor_status_name(bc->want), msg);
    CHECKF(grew < 256.0 * 1024 * 1024, "%s: the load reserved %.0f MiB", bc->name,
           grew / (1024.0 * 1024.0));
    if (bc->want == TAILOR_OK) {
        printf("  %-32s -> loads\n", bc->name);
        return;
    }
    CHECKF(out_null, "%s: *out not cleared on failure", bc->name);
    CHECKF(*msg && !strchr(msg, '\n'), "%s: the message is not one line: '%s'", bc->name, msg);
    CHECKF(strstr(msg, bc->file), "%s: message does not name the file %s: %s", bc->name, bc->file,
           msg);
    CHECKF(strstr(msg, bc->field), "%s: message does not name '%s': %s", bc->name, bc->field, msg);
    CHECKF(!bc->also || strstr(msg, bc->also), "%s: message lacks '%s': %s", bc->name, bc->also,
           msg);
    printf("  %-32s -> %s\n", bc->name, msg);
}

/* The generator itself: the good checkpoint, flat, nested and sharded, loads; so does its
 * tokenizer. Every case above differs from these by its one defect. */
static void test_good(tailor_ctx *ctx, const char *root)
{
    for (int v = 0; v < 3; v++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/good%d", root, v);
        mkdir(dir, 0755);
        ckpt c;
        ckpt_init(&c);
        if (v == 1)
            cfg_nest(&c);
        c.sharded = v == 2;
        ckpt_write(&c, dir);
        ckpt_free(&c);
        int out_null = 0;
        CHECK_OK(ctx, load(ctx, LOAD_MODEL, dir, &out_null));
        CHECK_OK(ctx, load(ctx, LOAD_TOKENIZER, dir, &out_null));
    }
}

/* A checkpoint valid for the CPU forward with head_dim 4096, beyond what the GPU forward plans
 * for: the dry GPU plan (tailor tune --model --list) must refuse it or plan it, not write past
 * a buffer sized for smaller heads. */
static void test_gpu_plan_wide_heads(tailor_ctx *ctx, const char *root)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/wide", root);
    mkdir(dir, 0755);
    tw_spec s = base_spec;
    s.hd = 4096;
    s.ghd = 4096;
    s.nq = 1;
    CHECK(tw_write_model(&s, dir) == 0);
    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    if (!m)
        return;
    tailor_gemma4_gpu_opts o = {.max_tokens = 8};
    tailor_gemma4_kernel_use *uses = NULL;
    int n = 0;
    tailor_status st =
        tailor_gemma4_gpu_kernels(ctx, tailor_gemma4_get_config(m), m, &o, &uses, &n);
    printf("  %-32s -> %s%s\n", "GPU plan of head_dim 4096", tailor_status_name(st),
           st ? tailor_ctx_message(ctx) : "");
    CHECKF(st == TAILOR_OK || strstr(tailor_ctx_message(ctx), "head_dim"),
           "GPU plan of head_dim 4096: %s", tailor_ctx_message(ctx));
    free(uses);
    tailor_gemma4_close(m);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    char root[256];
    tw_tmpdir(root, sizeof root, "badckpt");
    printf("broken checkpoints under %s (seed %llu)\n", root, (unsigned long long)base_spec.seed);
    test_good(ctx, root);
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++)
        run_case(ctx, root, i, &cases[i]);
    test_gpu_plan_wide_heads(ctx, root);
    tw_rmdir(root);
    tailor_ctx_destroy(ctx);
    return test_finish("test_bad_checkpoint");
}
