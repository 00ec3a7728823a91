/* tokenizer.c — loads a tokenizer.json (BPE) with cJSON; decodes ids; builds the chat prompt. */
#include "tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tokenizer.json larger than this is refused unread (the largest real ones are ~35 MB). */
#define TOKENIZER_MAX_BYTES ((size_t)1 << 30)

/* Defined in tokenizer_encode.c: the normalizer applied to s, malloc'd, NULL when out of memory. */
char *tok_normalize_alloc(const tailor_tokenizer *tok, const char *s, size_t len, size_t *out_len);

/* ---------------------------------------------------------------- small helpers */

static uint32_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, folded to 32 bits */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

size_t tok_utf8_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else
        return 1;
    if (avail < n || s[1] < lo || s[1] > hi)
        return 1;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 1;
    return n;
}

/* Appends len bytes (plus a NUL, not counted) to the pool; the string's place in *out. */
static int pool_add(tailor_tokenizer *tok, const char *s, size_t len, tok_str *out)
{
    if (tok->pool_len + len + 1 > tok->pool_cap) {
        size_t cap = tok->pool_cap ? tok->pool_cap : 1 << 20;
        while (cap < tok->pool_len + len + 1)
            cap *= 2;
        char *p = realloc(tok->pool, cap);
        if (!p)
            return -1;
        tok->pool = p;
        tok->pool_cap = cap;
    }
    if (tok->pool_len + len + 1 > UINT32_MAX)
        return -1;
    memcpy(tok->pool + tok->pool_len, s, len);
    tok->pool[tok->pool_len + len] = '\0';
    out->off = (uint32_t)tok->pool_len;
    out->len = (uint32_t)len;
    tok->pool_len += len + 1;
    return 0;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

/* Builds a map over keys[0..n); a key seen twice keeps its first index. */
static int strmap_build(tok_strmap *map, const tok_str *keys, size_t n, const char *pool)
{
    size_t cap = pow2_at_least(n * 2 + 1);
    map->slots = malloc(cap * sizeof *map->slots);
    map->hashes = malloc(cap * sizeof *map->hashes);
    if (!map->slots || !map->hashes)
        return -1;
    map->mask = cap - 1;
    memset(map->slots, 0xff, cap * sizeof *map->slots);
    for (size_t i = 0; i < n; i++) {
        const char *s = pool + keys[i].off;
        uint32_t h = hash_bytes(s, keys[i].len);
        size_t j = h & map->mask;
        int dup = 0;
        while (map->slots[j] >= 0) {
            const tok_str *k = &keys[map->slots[j]];
            if (map->hashes[j] == h && k->len == keys[i].len && memcmp(pool + k->off, s, k->len) == 0) {
                dup = 1;
                break;
            }
            j = (j + 1) & map->mask;
        }
        if (!dup) {
            map->slots[j] = (int32_t)i;
            map->hashes[j] = h;
        }
    }
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *map, const tok_str *keys, const char *pool, const char *s,
                       size_t len)
{
    if (!map->slots)
        return -1;
    uint32_t h = hash_bytes(s, len);
    for (size_t j = h & map->mask; map->slots[j] >= 0; j = (j + 1) & map->mask) {
        const tok_str *k = &keys[map->slots[j]];
        if (map->hashes[j] == h && k->len == len && memcmp(pool + k->off, s, len) == 0)
            return map->slots[j];
    }
    return -1;
}

int32_t tok_vocab_lookup(const tailor_tokenizer *tok, const char *s, size_t len)
{
    int32_t k = tok_strmap_get(&tok->vocab_map, tok->vocab_key, tok->pool, s, len);
    return k < 0 ? -1 : tok->vocab_id[k];
}

static void strmap_free(tok_strmap *map)
{
    free(map->slots);
    free(map->hashes);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte of a "<0xNN>" token (Hugging Face's ByteFallback test), else -1. */
static int byte_token_parse(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    if (hi < 0 || lo < 0)
        return -1;
    return hi * 16 + lo;
}

/* ---------------------------------------------------------------- loading */

typedef struct loader {
    tailor_ctx *ctx;
    const char *path;
    tailor_tokenizer *tok;
} loader;

static tailor_status fail(loader *L, tailor_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static tailor_status fail(loader *L, tailor_status code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tailor_set_error(L->ctx, code, "%s: %s", L->path, msg);
}

static tailor_status nomem(loader *L)
{
    return fail(L, TAILOR_ERR_NOMEM, "out of memory while loading the tokenizer");
}

/* The member `name` of obj, or NULL. */
static const cJSON *member(const cJSON *obj, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(obj, name);
}

/* A boolean member: *out = its value, `dflt` when absent or null. Fails when of another type. */
static tailor_status get_bool(loader *L, const cJSON *obj, const char *name, const char *where,
                              int dflt, int *out)
{
    const cJSON *v = member(obj, name);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return TAILOR_OK;
    }
    if (!cJSON_IsBool(v))
        return fail(L, TAILOR_ERR_PARSE, "field '%s.%s' is not true or false", where, name);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return TAILOR_OK;
}

/* A string member, required; *out points into the JSON tree. */
static tailor_status get_string(loader *L, const cJSON *obj, const char *name, const char *where,
                                const char **out)
{
    const cJSON *v = member(obj, name);
    if (!cJSON_IsString(v) || !v->valuestring)
        return fail(L, TAILOR_ERR_PARSE, "field '%s.%s' is missing or not a string", where, name);
    *out = v->valuestring;
    return TAILOR_OK;
}

/* A token id: an integer in [0, 2^24). */
static int json_id(const cJSON *v, int32_t *out)
{
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d < 16777216.0) || d != (double)(int32_t)d)
        return -1;
    *out = (int32_t)d;
    return 0;
}

/* The literal of a {"String": "..."} pattern; Regex patterns are refused. */
static tailor_status get_pattern(loader *L, const cJSON *obj, const char *where, tok_str *out)
{
    const cJSON *p = member(obj, "pattern");
    if (!cJSON_IsObject(p))
        return fail(L, TAILOR_ERR_PARSE, "field '%s.pattern' is missing or not an object", where);
    const cJSON *s = member(p, "String");
    if (!s) {
        if (member(p, "Regex"))
            return fail(L, TAILOR_ERR_UNSUPPORTED,
                        "field '%s.pattern' is a Regex, which this tokenizer does not support "
                        "(only String patterns)", where);
        return fail(L, TAILOR_ERR_PARSE, "field '%s.pattern' has neither String nor Regex", where);
    }
    if (!cJSON_IsString(s) || !s->valuestring)
        return fail(L, TAILOR_ERR_PARSE, "field '%s.pattern.String' is not a string", where);
    if (pool_add(L->tok, s->valuestring, strlen(s->valuestring), out))
        return nomem(L);
    return TAILOR_OK;
}

static tailor_status load_vocab(loader *L, const cJSON *model)
{
    tailor_tokenizer *tok = L->tok;
    const cJSON *vocab = member(model, "vocab");
    if (!cJSON_IsObject(vocab))
        return fail(L, TAILOR_ERR_PARSE, "field 'model.vocab' is missing or not an object");
    int n = cJSON_GetArraySize(vocab);
    if (n <= 0)
        return fail(L, TAILOR_ERR_PARSE, "field 'model.vocab' is empty");
    tok->nvocab = n;
    tok->vocab_key = malloc((size_t)n * sizeof *tok->vocab_key);
    tok->vocab_id = malloc((size_t)n * sizeof *tok->vocab_id);
    if (!tok->vocab_key || !tok->vocab_id)
        return nomem(L);
    int32_t i = 0, maxid = -1;
    for (const cJSON *e = vocab->child; e; e = e->next, i++) {
        int32_t id;
        if (json_id(e, &id))
            return fail(L, TAILOR_ERR_PARSE,
                        "field 'model.vocab' gives \"%.60s\" an id that is not an integer in "
                        "[0, 16777216)", e->string ? e->string : "");
        if (pool_add(tok, e->string, strlen(e->string), &tok->vocab_key[i]))
            return nomem(L);
        tok->vocab_id[i] = id;
        if (id > maxid)
            maxid = id;
    }
    tok->nids = maxid + 1;
    if (strmap_build(&tok->vocab_map, tok->vocab_key, (size_t)n, tok->pool))
        return nomem(L);
    return TAILOR_OK;
}

/* The two halves of merges[i]: ["a", "b"] or the older "a b". */
static tailor_status merge_halves(loader *L, const cJSON *m, int i, const char **a, size_t *alen,
                                  const char **b, size_t *blen)
{
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
        cJSON_IsString(m->child->next)) {
        *a = m->child->valuestring;
        *alen = strlen(*a);
        *b = m->child->next->valuestring;
        *blen = strlen(*b);
        return TAILOR_OK;
    }
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (sp && !strchr(sp + 1, ' ')) {
            *a = s;
            *alen = (size_t)(sp - s);
            *b = sp + 1;
            *blen = strlen(sp + 1);
            return TAILOR_OK;
        }
    }
    return fail(L, TAILOR_ERR_PARSE,
                "field 'model.merges[%d]' is neither a pair of strings nor a string \"a b\"", i);
}

static void merge_insert(tailor_tokenizer *tok, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & tok->merge_mask;
    while (tok->merges[j].key != UINT64_MAX && tok->merges[j].key != key)
        j = (j + 1) & tok->merge_mask;
    /* A pair listed twice keeps its last rank, as Hugging Face's map does. */
    tok->merges[j] = (tok_merge){key, rank, id};
}

/* The code point of the UTF-8 character at s (tok_utf8_len bytes; a lone byte stands for itself). */
static uint32_t decode_cp(const unsigned char *s, size_t n)
{
    switch (n) {
    case 2: return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    case 3: return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    case 4:
        return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
               (s[3] & 0x3F);
    default: return s[0];
    }
}

/* The code point of the last character of s[0..len), len > 0. */
static uint32_t last_cp(const char *s, size_t len)
{
    size_t i = len - 1;
    while (i > 0 && len - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    const unsigned char *u = (const unsigned char *)s + i;
    size_t n = tok_utf8_len(u, len - i);
    return n == len - i ? decode_cp(u, n) : (unsigned char)s[len - 1];
}

static uint64_t junction_hash_key(uint32_t x, uint32_t y) { return (uint64_t)x << 32 | y; }

static size_t junction_slot(uint64_t key, size_t mask)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 24) & mask;
}

static void junction_add(tailor_tokenizer *tok, const char *a, size_t alen, const char *b, size_t blen)
{
    uint32_t x = last_cp(a, alen);
    uint32_t y = decode_cp((const unsigned char *)b, tok_utf8_len((const unsigned char *)b, blen));
    uint64_t key = junction_hash_key(x, y);
    size_t j = junction_slot(key, tok->junction_mask);
    while (tok->junction_key[j] != UINT64_MAX && tok->junction_key[j] != key)
        j = (j + 1) & tok->junction_mask;
    tok->junction_key[j] = key;
    if (x < 65536)
        tok->left_end[x >> 3] |= (uint8_t)(1u << (x & 7));
    if (y < 65536)
        tok->right_start[y >> 3] |= (uint8_t)(1u << (y & 7));
}

size_t tok_replace_size(const tailor_tokenizer *tok, const tok_step *step, const char *s,
                        size_t len)
{
    const char *pat = tok->pool + step->pattern.off;
    size_t plen = step->pattern.len, out = len;
    for (const char *p = s, *end = s + len; (p = memmem(p, (size_t)(end - p), pat, plen)); p += plen)
        out = out - plen + step->content.len;
    return out;
}

void tok_replace_write(const tailor_tokenizer *tok, const tok_step *step, const char *s, size_t len,
                       char *dst)
{
    const char *pat = tok->pool + step->pattern.off, *rep = tok->pool + step->content.off;
    size_t plen = step->pattern.len, rlen = step->content.len;
    const char *p = s, *end = s + len;
    for (const char *m; (m = memmem(p, (size_t)(end - p), pat, plen)); p = m + plen) {
        memcpy(dst, p, (size_t)(m - p));
        dst += m - p;
        memcpy(dst, rep, rlen);
        dst += rlen;
    }
    memcpy(dst, p, (size_t)(end - p));
}

int tok_is_junction(const tailor_tokenizer *tok, uint32_t x, uint32_t y)
{
    if (x < 65536 && !(tok->left_end[x >> 3] & (1u << (x & 7))))
        return 0;
    if (y < 65536 && !(tok->right_start[y >> 3] & (1u << (y & 7))))
        return 0;
    uint64_t key = junction_hash_key(x, y);
    for (size_t j = junction_slot(key, tok->junction_mask);; j = (j + 1) & tok->junction_mask) {
        if (tok->junction_key[j] == key)
            return 1;
        if (tok->junction_key[j] == UINT64_MAX)
            return 0;
    }
}

/* Rehashes the junctions into a table sized for their count (small enough to stay in cache). */
static tailor_status compact_junctions(loader *L)
{
    tailor_tokenizer *tok = L->tok;
    size_t count = 0;
    for (size_t j = 0; j <= tok->junction_mask; j++)
        count += tok->junction_key[j] != UINT64_MAX;
    size_t cap = pow2_at_least(count * 2 + 1);
    uint64_t *keys = malloc(cap * sizeof *keys);
    if (!keys)
        return nomem(L);
    memset(keys, 0xff, cap * sizeof *keys);
    for (size_t j = 0; j <= tok->junction_mask; j++) {
        uint64_t key = tok->junction_key[j];
        if (key == UINT64_MAX)
            continue;
        size_t k = junction_slot(key, cap - 1);
        while (keys[k] != UINT64_MAX)
            k = (k + 1) & (cap - 1);
        keys[k] = key;
    }
    free(tok->junction_key);
    tok->junction_key = keys;
    tok->junction_mask = cap - 1;
    return TAILOR_OK;
}

static tailor_status load_merges(loader *L, const cJSON *model)
{
    tailor_tokenizer *tok = L->tok;
    const cJSON *merges = member(model, "merges");
    if (!cJSON_IsArray(merges))
        return fail(L, TAILOR_ERR_PARSE, "field 'model.merges' is missing or not an array");
    size_t n = (size_t)cJSON_GetArraySize(merges);
    size_t cap = pow2_at_least(n * 2 + 1);
    tok->merges = malloc(cap * sizeof *tok->merges);
    if (!tok->merges)
        return nomem(L);
    for (size_t j = 0; j < cap; j++)
        tok->merges[j].key = UINT64_MAX;
    tok->merge_mask = cap - 1;
    tok->nmerges = n;
    tok->junction_key = malloc(cap * sizeof *tok->junction_key);
    tok->left_end = calloc(8192, 1);
    tok->right_start = calloc(8192, 1);
    if (!tok->junction_key || !tok->left_end || !tok->right_start)
        return nomem(L);
    memset(tok->junction_key, 0xff, cap * sizeof *tok->junction_key);
    tok->junction_mask = cap - 1;
    char *joined = NULL;
    size_t jcap = 0;
    int i = 0;
    tailor_status st = TAILOR_OK;
    for (const cJSON *m = merges->child; m && st == TAILOR_OK; m = m->next, i++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        if ((st = merge_halves(L, m, i, &a, &alen, &b, &blen)) != TAILOR_OK)
            break;
        int32_t ia = tok_vocab_lookup(tok, a, alen), ib = tok_vocab_lookup(tok, b, blen);
        if (ia < 0 || ib < 0) {
            st = fail(L, TAILOR_ERR_PARSE, "field 'model.merges[%d]' names \"%.60s\", which is not in "
                      "model.vocab", i, ia < 0 ? a : b);
            break;
        }
        if (alen + blen > jcap) {
            jcap = (alen + blen) * 2;
            char *p = realloc(joined, jcap);
            if (!p) {
                st = nomem(L);
                break;
            }
            joined = p;
        }
        memcpy(joined, a, alen);
        memcpy(joined + alen, b, blen);
        int32_t id = tok_vocab_lookup(tok, joined, alen + blen);
        if (id < 0) {
            st = fail(L, TAILOR_ERR_PARSE, "field 'model.merges[%d]' makes \"%.60s%.60s\", which is "
                      "not in model.vocab", i, a, b);
            break;
        }
        merge_insert(tok, ia, ib, (uint32_t)i, id);
        if (alen > 0 && blen > 0)
            junction_add(tok, a, alen, b, blen);
    }
    free(joined);
    return st == TAILOR_OK ? compact_junctions(L) : st;
}

static tailor_status load_model(loader *L, const cJSON *root)
{
    tailor_tokenizer *tok = L->tok;
    const cJSON *model = member(root, "model");
    if (!cJSON_IsObject(model))
        return fail(L, TAILOR_ERR_PARSE, "field 'model' is missing or not an object");
    const char *type = NULL;
    tailor_status st = get_string(L, model, "type", "model", &type);
    if (st)
        return st;
    if (strcmp(type, "BPE") != 0)
        return fail(L, TAILOR_ERR_UNSUPPORTED, "field 'model.type' is \"%s\"; only BPE is supported",
                    type);
    const cJSON *dropout = member(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return fail(L, TAILOR_ERR_UNSUPPORTED, "field 'model.dropout' is set; BPE dropout is not supported");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = member(model, affixes[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && v->valuestring[0] == '\0'))
            return fail(L, TAILOR_ERR_UNSUPPORTED, "field 'model.%s' is set; it is not supported",
                        affixes[i]);
    }
    if ((st = get_bool(L, model, "fuse_unk", "model", 0, &tok->fuse_unk)) ||
        (st = get_bool(L, model, "byte_fallback", "model", 0, &tok->byte_fallback)) ||
        (st = get_bool(L, model, "ignore_merges", "model", 0, &tok->ignore_merges)))
        return st;
    if ((st = load_vocab(L, model)) || (st = load_merges(L, model)))
        return st;
    tok->unk_id = -1;
    const cJSON *unk = member(model, "unk_token");
    if (unk && !cJSON_IsNull(unk)) {
        if (!cJSON_IsString(unk))
            return fail(L, TAILOR_ERR_PARSE, "field 'model.unk_token' is not a string");
        tok->unk_id = tok_vocab_lookup(tok, unk->valuestring, strlen(unk->valuestring));
        if (tok->unk_id < 0)
            return fail(L, TAILOR_ERR_PARSE, "field 'model.unk_token' names \"%.60s\", which is not in "
                        "model.vocab", unk->valuestring);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tok->byte_id[b] = tok_vocab_lookup(tok, name, 6);
    }
    tok->chunking = !tok->ignore_merges;
    return TAILOR_OK;
}

/* ---- added tokens */

/* Adds s as a path of the trie ending at tok->added[added]; the root is a table by first byte. */
static tailor_status trie_add(tok_trie *t, const char *s, size_t len, int32_t added)
{
    int32_t parent = -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int32_t node = parent < 0 ? t->root[c] : t->nodes[parent].child;
        while (node >= 0 && t->nodes[node].byte != c)
            node = t->nodes[node].sibling;
        if (node < 0) {
            if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 256;
                tok_trie_node *p = realloc(t->nodes, cap * sizeof *p);
                if (!p)
                    return TAILOR_ERR_NOMEM;
                t->nodes = p;
                t->cap = cap;
            }
            node = (int32_t)t->n++;
            int32_t head = parent < 0 ? -1 : t->nodes[parent].child;
            t->nodes[node] = (tok_trie_node){.child = -1, .sibling = head, .added = -1, .byte = c};
            if (parent < 0)
                t->root[c] = node;
            else
                t->nodes[parent].child = node;
        }
        parent = node;
    }
    if (t->nodes[parent].added < 0) /* the first token of a content wins */
        t->nodes[parent].added = added;
    return TAILOR_OK;
}

static tailor_status load_one_added(loader *L, const cJSON *a, int i, tok_added *out)
{
    tailor_tokenizer *tok = L->tok;
    char where[64];
    snprintf(where, sizeof where, "added_tokens[%d]", i);
    if (!cJSON_IsObject(a))
        return fail(L, TAILOR_ERR_PARSE, "field '%s' is not an object", where);
    const char *content = NULL;
    tailor_status st = get_string(L, a, "content", where, &content);
    if (st)
        return st;
    if (json_id(member(a, "id"), &out->id))
        return fail(L, TAILOR_ERR_PARSE, "field '%s.id' is missing or not an integer in [0, 16777216)",
                    where);
    int special = 0, normalized = 0, lstrip = 0, rstrip = 0, single_word = 0;
    if ((st = get_bool(L, a, "special", where, 0, &special)) ||
        (st = get_bool(L, a, "normalized", where, !special, &normalized)) ||
        (st = get_bool(L, a, "lstrip", where, 0, &lstrip)) ||
        (st = get_bool(L, a, "rstrip", where, 0, &rstrip)) ||
        (st = get_bool(L, a, "single_word", where, 0, &single_word)))
        return st;
    out->special = (unsigned char)special;
    out->normalized = (unsigned char)normalized;
    out->lstrip = (unsigned char)lstrip;
    out->rstrip = (unsigned char)rstrip;
    out->single_word = (unsigned char)single_word;
    if (pool_add(tok, content, strlen(content), &out->content))
        return nomem(L);
    out->match = out->content;
    return TAILOR_OK;
}

/* Normalized added tokens are matched after normalization, so their trie key is normalized too. */
static tailor_status normalize_added_match(loader *L, tok_added *a)
{
    tailor_tokenizer *tok = L->tok;
    if (!a->normalized || tok->nnormalizer == 0)
        return TAILOR_OK;
    size_t len;
    char *norm = tok_normalize_alloc(tok, tok->pool + a->content.off, a->content.len, &len);
    if (!norm)
        return nomem(L);
    int r = pool_add(tok, norm, len, &a->match);
    free(norm);
    return r ? nomem(L) : TAILOR_OK;
}

static tailor_status load_added(loader *L, const cJSON *root)
{
    tailor_tokenizer *tok = L->tok;
    for (int b = 0; b < 256; b++)
        tok->trie_raw.root[b] = tok->trie_norm.root[b] = -1;
    const cJSON *arr = member(root, "added_tokens");
    if (!arr || cJSON_IsNull(arr))
        return TAILOR_OK;
    if (!cJSON_IsArray(arr))
        return fail(L, TAILOR_ERR_PARSE, "field 'added_tokens' is not an array");
    size_t n = (size_t)cJSON_GetArraySize(arr);
    tok->added = calloc(n ? n : 1, sizeof *tok->added);
    tok->added_content = calloc(n ? n : 1, sizeof *tok->added_content);
    if (!tok->added || !tok->added_content)
        return nomem(L);
    int i = 0;
    for (const cJSON *a = arr->child; a; a = a->next, i++) {
        tok_added *t = &tok->added[tok->nadded];
        tailor_status st = load_one_added(L, a, i, t);
        if (st == TAILOR_OK)
            st = normalize_added_match(L, t);
        if (st)
            return st;
        if (t->match.len == 0)
            continue; /* an empty string can never match */
        tok->added_content[tok->nadded] = t->content;
        tok_trie *trie = t->normalized && tok->nnormalizer ? &tok->trie_norm : &tok->trie_raw;
        if (trie_add(trie, tok->pool + t->match.off, t->match.len, (int32_t)tok->nadded))
            return nomem(L);
        if (t->id >= tok->nids)
            tok->nids = t->id + 1;
        tok->nadded++;
    }
    if (strmap_build(&tok->added_map, tok->added_content, tok->nadded, tok->pool))
        return nomem(L);
    return TAILOR_OK;
}

/* ---- normalizer, pre-tokenizer, decoder: each a Sequence (possibly nested) of simple steps */

typedef enum step_family { FAMILY_NORMALIZER, FAMILY_PRETOK, FAMILY_DECODER } step_family;

static const char *const family_field[] = {"normalizer", "pre_tokenizer", "decoder"};
static const char *const family_list[] = {"normalizers", "pretokenizers", "decoders"};
static const char *const family_supported[] = {
    "Replace, Sequence", "Split with a String pattern, Sequence", "Replace, ByteFallback, Fuse, Sequence"};

static tailor_status parse_split(loader *L, const cJSON *obj, const char *where, tok_step *step)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    const char *behavior = NULL;
    int invert = 0;
    tailor_status st;
    if ((st = get_pattern(L, obj, where, &step->pattern)) ||
        (st = get_string(L, obj, "behavior", where, &behavior)) ||
        (st = get_bool(L, obj, "invert", where, 0, &invert)))
        return st;
    if (invert)
        return fail(L, TAILOR_ERR_UNSUPPORTED, "field '%s.invert' is true, which is not supported", where);
    for (int b = 0; b < 5; b++)
        if (strcmp(behavior, names[b]) == 0) {
            step->behavior = (tok_split_behavior)b;
            return TAILOR_OK;
        }
    return fail(L, TAILOR_ERR_PARSE, "field '%s.behavior' is \"%.40s\", not a known split behavior",
                where, behavior);
}

static tailor_status parse_step(loader *L, step_family fam, const cJSON *obj, const char *where,
                                tok_step *steps, size_t *nsteps)
{
    tailor_tokenizer *tok = L->tok;
    if (!obj || cJSON_IsNull(obj))
        return TAILOR_OK;
    if (!cJSON_IsObject(obj))
        return fail(L, TAILOR_ERR_PARSE, "field '%s' is not an object", where);
    const char *type = NULL;
    tailor_status st = get_string(L, obj, "type", where, &type);
    if (st)
        return st;
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = member(obj, family_list[fam]);
        if (!cJSON_IsArray(list))
            return fail(L, TAILOR_ERR_PARSE, "field '%s.%s' is missing or not an array", where,
                        family_list[fam]);
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            char sub[160];
            snprintf(sub, sizeof sub, "%s.%s[%d]", where, family_list[fam], i);
            if ((st = parse_step(L, fam, e, sub, steps, nsteps)) != TAILOR_OK)
                return st;
        }
        return TAILOR_OK;
    }
    if (*nsteps == TOK_MAX_STEPS)
        return fail(L, TAILOR_ERR_UNSUPPORTED, "field '%s' has more than %d steps", family_field[fam],
                    TOK_MAX_STEPS);
    tok_step *step = &steps[*nsteps];
    memset(step, 0, sizeof *step);
    if (fam != FAMILY_PRETOK && strcmp(type, "Replace") == 0) {
        const char *content = NULL;
        step->kind = TOK_STEP_REPLACE;
        if ((st = get_pattern(L, obj, where, &step->pattern)) ||
            (st = get_string(L, obj, "content", where, &content)))
            return st;
        if (step->pattern.len == 0)
            return fail(L, TAILOR_ERR_UNSUPPORTED, "field '%s.pattern' is empty", where);
        if (pool_add(tok, content, strlen(content), &step->content))
            return nomem(L);
    } else if (fam == FAMILY_PRETOK && strcmp(type, "Split") == 0) {
        step->kind = TOK_STEP_SPLIT;
        if ((st = parse_split(L, obj, where, step)))
            return st;
        if (step->pattern.len == 0)
            return fail(L, TAILOR_ERR_UNSUPPORTED, "field '%s.pattern' is empty", where);
    } else if (fam == FAMILY_DECODER && strcmp(type, "ByteFallback") == 0) {
        step->kind = TOK_STEP_BYTE_FALLBACK;
    } else if (fam == FAMILY_DECODER && strcmp(type, "Fuse") == 0) {
        step->kind = TOK_STEP_FUSE;
    } else {
        return fail(L, TAILOR_ERR_UNSUPPORTED, "field '%s.type' is \"%.40s\", which this tokenizer "
                    "does not support (supported: %s)", where, type, family_supported[fam]);
    }
    (*nsteps)++;
    return TAILOR_OK;
}

static tailor_status load_pipeline(loader *L, const cJSON *root)
{
    tailor_tokenizer *tok = L->tok;
    tailor_status st;
    if ((st = parse_step(L, FAMILY_NORMALIZER, member(root, "normalizer"), "normalizer",
                         tok->normalizer, &tok->nnormalizer)) ||
        (st = parse_step(L, FAMILY_PRETOK, member(root, "pre_tokenizer"), "pre_tokenizer",
                         tok->pretok, &tok->npretok)) ||
        (st = parse_step(L, FAMILY_DECODER, member(root, "decoder"), "decoder", tok->decoder,
                         &tok->ndecoder)))
        return st;
    return TAILOR_OK;
}

/* id -> text, special flags and byte values, once vocabulary and added tokens are known. */
static tailor_status build_id_tables(loader *L)
{
    tailor_tokenizer *tok = L->tok;
    size_t n = (size_t)tok->nids;
    tok->id_str = malloc(n * sizeof *tok->id_str);
    tok->id_special = calloc(n, 1);
    tok->id_byte = calloc(n, 1);
    tok->bmp_id = malloc(65536 * sizeof *tok->bmp_id);
    if (!tok->id_str || !tok->id_special || !tok->id_byte || !tok->bmp_id)
        return nomem(L);
    for (size_t i = 0; i < n; i++)
        tok->id_str[i] = (tok_str){0, TOK_NO_STR};
    memset(tok->bmp_id, 0xff, 65536 * sizeof *tok->bmp_id);
    for (int32_t i = 0; i < tok->nvocab; i++) {
        tok_str k = tok->vocab_key[i];
        const unsigned char *s = (const unsigned char *)tok->pool + k.off;
        tok->id_str[tok->vocab_id[i]] = k;
        if (k.len >= 1 && k.len <= 3 && tok_utf8_len(s, k.len) == k.len) {
            uint32_t cp = k.len == 1 ? s[0]
                        : k.len == 2 ? (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F)
                                     : (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 |
                                           (s[2] & 0x3F);
            tok->bmp_id[cp] = tok->vocab_id[i];
        }
    }
    for (size_t i = 0; i < tok->nadded; i++) {
        tok->id_str[tok->added[i].id] = tok->added[i].content;
        tok->id_special[tok->added[i].id] = tok->added[i].special;
    }
    for (size_t i = 0; i < n; i++) {
        if (tok->id_str[i].len == TOK_NO_STR)
            continue;
        int b = byte_token_parse(tok->pool + tok->id_str[i].off, tok->id_str[i].len);
        if (b >= 0)
            tok->id_byte[i] = (unsigned char)(b + 1);
    }
    tok->bos_id = tailor_tokenizer_token_id(tok, "<bos>");
    return TAILOR_OK;
}

static tailor_status parse_root(loader *L, const char *data, size_t size, cJSON **root)
{
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(data, &end, 0);
    if (!*root) {
        size_t at = end && end >= data ? (size_t)(end - data) : 0;
        if (at > size)
            at = size;
        size_t line = 1;
        for (size_t i = 0; i < at; i++)
            line += data[i] == '\n';
        return fail(L, TAILOR_ERR_PARSE, "malformed JSON near byte %zu (line %zu)", at, line);
    }
    if (!cJSON_IsObject(*root))
        return fail(L, TAILOR_ERR_PARSE, "the top level is not a JSON object");
    return TAILOR_OK;
}

tailor_status tailor_tokenizer_open(tailor_ctx *ctx, const char *path, tailor_tokenizer **out)
{
    if (!out)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_open needs an output pointer");
    *out = NULL;
    if (!path)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_open needs a path");
    loader L = {ctx, path, calloc(1, sizeof(tailor_tokenizer))};
    if (!L.tok)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory opening %s", path);
    char *data = NULL;
    size_t size = 0;
    cJSON *root = NULL;
    tailor_status st = tailor_read_file(ctx, path, TOKENIZER_MAX_BYTES, &data, &size);
    if (st == TAILOR_OK)
        st = parse_root(&L, data, size, &root);
    free(data);
    if (st == TAILOR_OK)
        st = load_model(&L, root);
    if (st == TAILOR_OK)
        st = load_pipeline(&L, root);
    if (st == TAILOR_OK)
        st = load_added(&L, root);
    if (st == TAILOR_OK)
        st = build_id_tables(&L);
    cJSON_Delete(root);
    if (st != TAILOR_OK) {
        tailor_tokenizer_close(L.tok);
        return st;
    }
    *out = L.tok;
    return TAILOR_OK;
}

void tailor_tokenizer_close(tailor_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->pool);
    free(tok->id_str);
    free(tok->id_special);
    free(tok->id_byte);
    free(tok->vocab_key);
    free(tok->vocab_id);
    strmap_free(&tok->vocab_map);
    free(tok->bmp_id);
    free(tok->merges);
    free(tok->junction_key);
    free(tok->left_end);
    free(tok->right_start);
    free(tok->added);
    free(tok->added_content);
    strmap_free(&tok->added_map);
    free(tok->trie_raw.nodes);
    free(tok->trie_norm.nodes);
    free(tok);
}

int tailor_tokenizer_vocab_size(const tailor_tokenizer *tok) { return tok ? tok->nids : 0; }

int32_t tailor_tokenizer_token_id(const tailor_tokenizer *tok, const char *token)
{
    if (!tok || !token)
        return -1;
    size_t len = strlen(token);
    int32_t a = tok_strmap_get(&tok->added_map, tok->added_content, tok->pool, token, len);
    if (a >= 0)
        return tok->added[a].id;
    return tok_vocab_lookup(tok, token, len);
}
