/* tokenizer_encode.c — text to ids: added tokens, normalizer, pre-tokenizer, heap-driven BPE. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

/* Used by the loader to normalize added tokens marked `normalized`. */
char *tok_normalize_alloc(const tailor_tokenizer *tok, const char *s, size_t len, size_t *out_len);

/* A symbol of the word being merged: a token id over `len` bytes, in a doubly linked list. */
typedef struct bpe_sym {
    int32_t id;
    int32_t prev, next; /* indices, -1 at the ends */
    uint32_t len;       /* bytes covered; 0 once merged into its left neighbour */
    int32_t cp;         /* the code point of a one-character vocabulary symbol, else -1 */
} bpe_sym;

/* A candidate merge of the symbol at `pos` with its right neighbour. Ordered by key =
 * rank << 32 | pos: lowest rank first, leftmost first on ties, as Hugging Face orders them. */
typedef struct bpe_cand {
    uint64_t key;
    int32_t left, right; /* the ids the pair had when queued; a stale entry no longer matches */
    int32_t merged;
} bpe_cand;

typedef struct tok_span {
    size_t off, len;
    int match;
} tok_span;

/* Scratch space of one encode call; grows, never shrinks. */
typedef struct encode_ws {
    int32_t *ids;
    size_t n, cap;
    char *norm[2];
    size_t norm_cap[2];
    bpe_sym *syms;
    size_t syms_cap;
    bpe_cand *heap;
    size_t heap_cap;
    tok_span *spans[TOK_MAX_STEPS];
    size_t spans_cap[TOK_MAX_STEPS];
    int oom;
} encode_ws;

typedef void (*gap_fn)(const tailor_tokenizer *tok, encode_ws *ws, const char *s, size_t len);

/* Makes *buf hold at least `need` elements of `elem` bytes; sets ws->oom on failure. */
static int grow(encode_ws *ws, void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p = realloc(*buf, c * elem);
    if (!p) {
        ws->oom = 1;
        return -1;
    }
    *buf = p;
    *cap = c;
    return 0;
}

static void push_id(encode_ws *ws, int32_t id)
{
    if (ws->n == ws->cap && grow(ws, (void **)&ws->ids, &ws->cap, ws->n + 1, sizeof *ws->ids))
        return;
    ws->ids[ws->n++] = id;
}

/* ---------------------------------------------------------------- BPE */

static int merge_find(const tailor_tokenizer *tok, int32_t a, int32_t b, uint32_t *rank, int32_t *id)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & tok->merge_mask;
    for (;; j = (j + 1) & tok->merge_mask) {
        const tok_merge *m = &tok->merges[j];
        if (m->key == key) {
            *rank = m->rank;
            *id = m->merged;
            return 1;
        }
        if (m->key == UINT64_MAX)
            return 0;
    }
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].key <= c.key)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n)
{
    bpe_cand top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && h[c + 1].key < h[c].key)
            c++;
        if (last.key <= h[c].key)
            break;
        h[i] = h[c];
        i = c;
    }
    if (m > 0)
        h[i] = last;
    return top;
}

/* Queues the merge of syms[pos] with its right neighbour, if the pair is a merge. */
static void queue_pair(const tailor_tokenizer *tok, encode_ws *ws, size_t *hn, int32_t pos)
{
    const bpe_sym *l = &ws->syms[pos];
    const bpe_sym *r = &ws->syms[l->next];
    uint32_t rank;
    int32_t id;
    if (merge_find(tok, l->id, r->id, &rank, &id))
        heap_push(ws->heap, hn, (bpe_cand){(uint64_t)rank << 32 | (uint32_t)pos, l->id, r->id, id});
}

/* The id of the one-character token s[0..clen), -1 if the vocabulary lacks it. */
static int32_t char_id(const tailor_tokenizer *tok, const unsigned char *s, size_t clen)
{
    switch (clen) {
    case 1:
        return s[0] < 0x80 ? tok->bmp_id[s[0]] : -1;
    case 2:
        return tok->bmp_id[(uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F)];
    case 3:
        return tok->bmp_id[(uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F)];
    default:
        return tok_vocab_lookup(tok, (const char *)s, clen);
    }
}

static void add_sym(encode_ws *ws, size_t *ns, int32_t id, size_t len, int32_t cp)
{
    ws->syms[*ns] = (bpe_sym){id, (int32_t)*ns - 1, (int32_t)*ns + 1, (uint32_t)len, cp};
    (*ns)++;
}

static int32_t utf8_cp(const unsigned char *s, size_t n)
{
    switch (n) {
    case 1: return s[0];
    case 2: return (int32_t)((uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F));
    case 3: return (int32_t)((uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F));
    default:
        return (int32_t)((uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
                         (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F));
    }
}

/* Splits s into initial symbols as Hugging Face's BPE::merge_word does: one per character in
 * the vocabulary, else one per byte (<0xNN>) with byte fallback, else <unk> (runs fused when
 * fuse_unk). Returns the symbol count. */
static size_t initial_symbols(const tailor_tokenizer *tok, encode_ws *ws, const unsigned char *s,
                              size_t len)
{
    size_t ns = 0, unk_len = 0;
    for (size_t i = 0; i < len;) {
        size_t clen = tok_utf8_len(s + i, len - i);
        int32_t id = char_id(tok, s + i, clen);
        if (id >= 0) {
            if (unk_len)
                add_sym(ws, &ns, tok->unk_id, unk_len, -1);
            unk_len = 0;
            add_sym(ws, &ns, id, clen, utf8_cp(s + i, clen));
        } else {
            int bytes_ok = tok->byte_fallback;
            for (size_t k = 0; k < clen && bytes_ok; k++)
                bytes_ok = tok->byte_id[s[i + k]] >= 0;
            if (bytes_ok) {
                /* As in Hugging Face, a pending <unk> is not flushed before byte pieces. */
                for (size_t k = 0; k < clen; k++)
                    add_sym(ws, &ns, tok->byte_id[s[i + k]], 1, -1);
            } else if (tok->unk_id >= 0) {
                if (unk_len && !tok->fuse_unk) {
                    add_sym(ws, &ns, tok->unk_id, unk_len, -1);
                    unk_len = 0;
                }
                unk_len += clen;
            } /* no unk token: the character is dropped, as Hugging Face does */
        }
        i += clen;
    }
    if (unk_len)
        add_sym(ws, &ns, tok->unk_id, unk_len, -1);
    return ns;
}

/* BPE over the symbols [first, first + count): merges by (rank, position) through a binary
 * heap, O(n log n); pushes the resulting ids. */
static void merge_run(const tailor_tokenizer *tok, encode_ws *ws, int32_t first, int32_t count)
{
    int32_t last = first + count - 1;
    if (count == 1) {
        push_id(ws, ws->syms[first].id);
        return;
    }
    ws->syms[first].prev = -1;
    ws->syms[last].next = -1;
    size_t hn = 0;
    for (int32_t i = first; i < last; i++)
        queue_pair(tok, ws, &hn, i);
    while (hn > 0) {
        bpe_cand c = heap_pop(ws->heap, &hn);
        int32_t pos = (int32_t)(uint32_t)c.key;
        bpe_sym *l = &ws->syms[pos];
        if (l->len == 0 || l->id != c.left || l->next < 0)
            continue;
        bpe_sym *r = &ws->syms[l->next];
        if (r->id != c.right)
            continue;
        l->id = c.merged;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0)
            ws->syms[l->next].prev = pos;
        if (l->prev >= 0)
            queue_pair(tok, ws, &hn, l->prev);
        if (l->next >= 0)
            queue_pair(tok, ws, &hn, pos);
    }
    for (int32_t i = first; i >= 0; i = ws->syms[i].next)
        push_id(ws, ws->syms[i].id);
}

/* BPE over one pre-tokenized piece. Gemma's pieces are whole lines (its pre-tokenizer splits on
 * " ", which the normalizer has already turned into "▁"), so the piece is cut into runs first:
 * between two vocabulary characters x y that no merge joins (x never ends a merge's left part
 * while y starts its right part), no symbol can ever span the cut, so BPE on each run gives the
 * same ids as BPE on the whole piece. For Gemma this cuts before nearly every "▁word". */
static void bpe_piece(const tailor_tokenizer *tok, encode_ws *ws, const char *s, size_t len)
{
    if (len == 0)
        return;
    if (tok->ignore_merges) {
        int32_t id = tok_vocab_lookup(tok, s, len);
        if (id >= 0) {
            push_id(ws, id);
            return;
        }
    }
    if (grow(ws, (void **)&ws->syms, &ws->syms_cap, len + 1, sizeof *ws->syms) ||
        grow(ws, (void **)&ws->heap, &ws->heap_cap, 3 * len + 1, sizeof *ws->heap))
        return;
    int32_t ns = (int32_t)initial_symbols(tok, ws, (const unsigned char *)s, len);
    int32_t start = 0;
    for (int32_t i = 1; i < ns && tok->chunking; i++) {
        int32_t x = ws->syms[i - 1].cp, y = ws->syms[i].cp;
        if (x >= 0 && y >= 0 && !tok_is_junction(tok, (uint32_t)x, (uint32_t)y)) {
            merge_run(tok, ws, start, i - start);
            start = i;
        }
    }
    if (ns > start)
        merge_run(tok, ws, start, ns - start);
}

/* ---------------------------------------------------------------- pre-tokenizer */

/* Splits s by a literal pattern into ws->spans[level] following Hugging Face's
 * SplitDelimiterBehavior; returns the span count. */
static size_t split_spans(encode_ws *ws, size_t level, const tok_step *step, const char *pat,
                          const char *s, size_t len)
{
    size_t n = 0, last = 0, plen = step->pattern.len;
    tok_span **sp = &ws->spans[level];
    /* 1. raw alternation of non-match / match spans (no empty ones) */
    for (;;) {
        const char *m = last < len ? memmem(s + last, len - last, pat, plen) : NULL;
        size_t ms = m ? (size_t)(m - s) : len;
        if (grow(ws, (void **)sp, &ws->spans_cap[level], n + 2, sizeof **sp))
            return 0;
        if (ms > last)
            (*sp)[n++] = (tok_span){last, ms - last, 0};
        if (!m)
            break;
        (*sp)[n++] = (tok_span){ms, plen, 1};
        last = ms + plen;
    }
    /* 2. fold in place by behavior (the write index never passes the read index) */
    tok_span *v = *sp;
    size_t out = 0;
    int prev_match = 0;
    size_t carry = SIZE_MAX; /* MergedWithNext: start of a match waiting for its next span */
    for (size_t i = 0; i < n; i++) {
        tok_span t = v[i];
        switch (step->behavior) {
        case TOK_SPLIT_REMOVED:
            if (!t.match)
                v[out++] = t;
            break;
        case TOK_SPLIT_ISOLATED:
            v[out++] = t;
            break;
        case TOK_SPLIT_MERGED_PREV:
            if (t.match && !prev_match && out > 0)
                v[out - 1].len = t.off + t.len - v[out - 1].off;
            else
                v[out++] = t;
            break;
        case TOK_SPLIT_MERGED_NEXT:
            if (t.match && i + 1 < n && !v[i + 1].match) {
                carry = t.off;
            } else {
                if (carry != SIZE_MAX) {
                    t.len += t.off - carry;
                    t.off = carry;
                    carry = SIZE_MAX;
                }
                v[out++] = t;
            }
            break;
        case TOK_SPLIT_CONTIGUOUS:
            if (t.match == prev_match && out > 0)
                v[out - 1].len = t.off + t.len - v[out - 1].off;
            else
                v[out++] = t;
            break;
        }
        prev_match = t.match;
    }
    return out;
}

static void pretokenize(const tailor_tokenizer *tok, encode_ws *ws, size_t level, const char *s,
                        size_t len)
{
    if (level == tok->npretok) {
        bpe_piece(tok, ws, s, len);
        return;
    }
    const tok_step *step = &tok->pretok[level];
    size_t n = split_spans(ws, level, step, tok->pool + step->pattern.off, s, len);
    for (size_t i = 0; i < n && !ws->oom; i++) {
        tok_span t = ws->spans[level][i];
        pretokenize(tok, ws, level + 1, s + t.off, t.len);
    }
}

static void pretokenize_gap(const tailor_tokenizer *tok, encode_ws *ws, const char *s, size_t len)
{
    pretokenize(tok, ws, 0, s, len);
}

/* ---------------------------------------------------------------- added tokens */

/* The longest added token of `trie` that starts at s; its index in tok->added, or -1. */
static int32_t trie_longest(const tok_trie *t, const unsigned char *s, size_t len, size_t *mlen)
{
    int32_t best = -1;
    int32_t node = t->root[s[0]];
    for (size_t i = 1; node >= 0; i++) {
        if (t->nodes[node].added >= 0) {
            best = t->nodes[node].added;
            *mlen = i;
        }
        if (i == len)
            break;
        node = t->nodes[node].child;
        while (node >= 0 && t->nodes[node].byte != s[i])
            node = t->nodes[node].sibling;
    }
    return best;
}

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* An approximation of Rust's `char::is_alphanumeric() || '_'`: non-ASCII bytes count as letters. */
static int is_word(unsigned char c)
{
    return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* Splits s on the added tokens of `trie` (leftmost, then longest, like Hugging Face's
 * Aho-Corasick LeftmostLongest); ids of matches go out, the text between goes to `gap`. */
static void scan_added(const tailor_tokenizer *tok, encode_ws *ws, const tok_trie *trie,
                       const char *s, size_t len, gap_fn gap)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t gap_start = 0, i = 0;
    while (i < len && !ws->oom) {
        size_t mlen = 0;
        int32_t a = trie->root[u[i]] < 0 ? -1 : trie_longest(trie, u + i, len - i, &mlen);
        if (a < 0) {
            i++;
            continue;
        }
        const tok_added *t = &tok->added[a];
        size_t start = i, stop = i + mlen;
        if (t->single_word && ((start > 0 && is_word(u[start - 1])) || (stop < len && is_word(u[stop])))) {
            i = stop; /* not a whole word: skipped, and the search goes on after it */
            continue;
        }
        if (t->lstrip)
            while (start > gap_start && is_space(u[start - 1]))
                start--;
        if (t->rstrip)
            while (stop < len && is_space(u[stop]))
                stop++;
        if (start > gap_start)
            gap(tok, ws, s + gap_start, start - gap_start);
        push_id(ws, t->id);
        gap_start = i = stop;
    }
    if (len > gap_start && !ws->oom)
        gap(tok, ws, s + gap_start, len - gap_start);
}

/* ---------------------------------------------------------------- normalizer */

char *tok_normalize_alloc(const tailor_tokenizer *tok, const char *s, size_t len, size_t *out_len)
{
    char *cur = malloc(len + 1);
    if (!cur)
        return NULL;
    memcpy(cur, s, len);
    for (size_t k = 0; k < tok->nnormalizer; k++) {
        size_t n = tok_replace_size(tok, &tok->normalizer[k], cur, len);
        char *next = malloc(n + 1);
        if (!next) {
            free(cur);
            return NULL;
        }
        tok_replace_write(tok, &tok->normalizer[k], cur, len, next);
        free(cur);
        cur = next;
        len = n;
    }
    cur[len] = '\0';
    *out_len = len;
    return cur;
}

/* Text between non-normalized added tokens: normalize, then split on normalized added tokens. */
static void normalize_gap(const tailor_tokenizer *tok, encode_ws *ws, const char *s, size_t len)
{
    for (size_t k = 0; k < tok->nnormalizer; k++) {
        char **dst = &ws->norm[k & 1];
        size_t n = tok_replace_size(tok, &tok->normalizer[k], s, len);
        if (grow(ws, (void **)dst, &ws->norm_cap[k & 1], n + 1, 1))
            return;
        tok_replace_write(tok, &tok->normalizer[k], s, len, *dst);
        s = *dst;
        len = n;
    }
    scan_added(tok, ws, &tok->trie_norm, s, len, pretokenize_gap);
}

/* ---------------------------------------------------------------- public */

static void ws_free_scratch(encode_ws *ws)
{
    free(ws->norm[0]);
    free(ws->norm[1]);
    free(ws->syms);
    free(ws->heap);
    for (size_t i = 0; i < TOK_MAX_STEPS; i++)
        free(ws->spans[i]);
}

tailor_status tailor_tokenizer_encode(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *text,
                                      size_t len, int add_bos, int32_t **ids, size_t *n)
{
    if (!ids || !n || !tok || (!text && len))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_encode needs a tokenizer, "
                                "text and output pointers");
    *ids = NULL;
    *n = 0;
    if (add_bos && tok->bos_id < 0)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "the tokenizer has no <bos> token to prepend");
    encode_ws ws;
    memset(&ws, 0, sizeof ws);
    if (add_bos)
        push_id(&ws, tok->bos_id);
    if (len)
        scan_added(tok, &ws, &tok->trie_raw, text, len, normalize_gap);
    ws_free_scratch(&ws);
    if (ws.oom) {
        free(ws.ids);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory encoding %zu bytes of text", len);
    }
    *ids = ws.ids;
    *n = ws.n;
    return TAILOR_OK;
}

/* Appends the ids of `s` to the vector (v, n). */
static tailor_status append_encoded(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *s,
                                    size_t len, int32_t **v, size_t *n)
{
    int32_t *ids;
    size_t m;
    tailor_status st = tailor_tokenizer_encode(ctx, tok, s, len, 0, &ids, &m);
    if (st)
        return st;
    int32_t *p = realloc(*v, (*n + m + 1) * sizeof *p);
    if (!p) {
        free(ids);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory building the chat prompt");
    }
    if (m)
        memcpy(p + *n, ids, m * sizeof *ids);
    free(ids);
    *v = p;
    *n += m;
    return TAILOR_OK;
}

static int32_t first_token(const tailor_tokenizer *tok, const char *a, const char *b)
{
    int32_t id = tailor_tokenizer_token_id(tok, a);
    return id >= 0 ? id : tailor_tokenizer_token_id(tok, b);
}

/* Appends <|channel>thought\n<channel|>: the thought channel opened and closed empty. */
static tailor_status append_empty_thought(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                          int32_t **v, size_t *k)
{
    int32_t open = tailor_tokenizer_token_id(tok, "<|channel>");
    int32_t close = tailor_tokenizer_token_id(tok, "<channel|>");
    if (open < 0 || close < 0)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "the tokenizer lacks %s, which the "
                                "checkpoint's chat template puts after the model turn",
                                open < 0 ? "<|channel>" : "<channel|>");
    (*v)[(*k)++] = open; /* append_encoded always leaves room for one more */
    tailor_status st = append_encoded(ctx, tok, "thought\n", 8, v, k);
    if (st == TAILOR_OK)
        (*v)[(*k)++] = close;
    return st;
}

/* Appends the stretch `head` + `text` (trimmed of ASCII white space) as one encoding. */
static tailor_status append_head_text(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                      const char *head, const char *text, int32_t **v, size_t *k)
{
    size_t len = strlen(text), hl = strlen(head);
    while (len && is_space((unsigned char)text[len - 1]))
        len--;
    while (len && is_space((unsigned char)*text)) {
        text++;
        len--;
    }
    char *s = malloc(hl + len + 1);
    if (!s)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory building the chat prompt");
    memcpy(s, head, hl);
    memcpy(s + hl, text, len);
    tailor_status st = append_encoded(ctx, tok, s, hl + len, v, k);
    free(s);
    return st;
}

/* Appends one turn, <|turn>{role}\n[<lead>\n]{text, trimmed}<turn|>\n; sot and eot are the turn
 * tokens, lead (-1: none) a special token that opens the turn's text (<|think|>). */
static tailor_status append_turn(tailor_ctx *ctx, const tailor_tokenizer *tok, int32_t sot,
                                 int32_t eot, const char *role, int32_t lead, const char *text,
                                 int32_t **v, size_t *k)
{
    char head[16];
    snprintf(head, sizeof head, "%s\n", role);
    (*v)[(*k)++] = sot; /* append_encoded always leaves room for one more */
    tailor_status st = TAILOR_OK;
    if (lead >= 0) {
        st = append_encoded(ctx, tok, head, strlen(head), v, k);
        if (st == TAILOR_OK)
            (*v)[(*k)++] = lead;
    }
    if (st == TAILOR_OK)
        st = append_head_text(ctx, tok, lead >= 0 ? "\n" : head, text, v, k);
    if (st == TAILOR_OK) {
        (*v)[(*k)++] = eot;
        st = append_encoded(ctx, tok, "\n", 1, v, k);
    }
    return st;
}

tailor_status tailor_tokenizer_chat_prompt(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                           const char *system_text, const char *user_text,
                                           unsigned flags, int32_t **ids, size_t *n)
{
    if (!tok || !user_text || !ids || !n)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_chat_prompt needs a "
                                "tokenizer, a text and output pointers");
    *ids = NULL;
    *n = 0;
    int32_t sot = first_token(tok, "<|turn>", "<start_of_turn>");
    int32_t eot = first_token(tok, "<turn|>", "<end_of_turn>");
    if (tok->bos_id < 0 || sot < 0 || eot < 0)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "the tokenizer lacks %s, needed for the "
                                "chat prompt", tok->bos_id < 0 ? "<bos>" : sot < 0 ? "<|turn>" : "<turn|>");
    int think = (flags & TAILOR_CHAT_THINK) != 0;
    int32_t think_id = think ? tailor_tokenizer_token_id(tok, "<|think|>") : -1;
    if (think && think_id < 0)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "the tokenizer lacks <|think|>, which "
                                "opens the system turn with thinking on");
    int32_t *v = malloc(4 * sizeof *v);
    size_t k = 0;
    if (!v)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory building the chat prompt");
    v[k++] = tok->bos_id;
    tailor_status st = TAILOR_OK;
    if (system_text || think)
        st = append_turn(ctx, tok, sot, eot, "system", think_id, system_text ? system_text : "",
                         &v, &k);
    if (st == TAILOR_OK)
        st = append_turn(ctx, tok, sot, eot, "user", -1, user_text, &v, &k);
    if (st == TAILOR_OK) {
        v[k++] = sot;
        st = append_encoded(ctx, tok, "model\n", 6, &v, &k);
    }
    if (st == TAILOR_OK && (flags & TAILOR_CHAT_EMPTY_THOUGHT) && !think)
        st = append_empty_thought(ctx, tok, &v, &k);
    if (st) {
        free(v);
        return st;
    }
    *ids = v;
    *n = k;
    return TAILOR_OK;
}
