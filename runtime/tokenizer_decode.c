/* tokenizer_decode.c — ids to text through the tokenizer.json decoder, whole or one id at a time. */
#include "tokenizer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char replacement_char[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* A token's text during decoding: borrowed from the pool or owned. */
typedef struct piece {
    const char *p;
    size_t len;
    char *owned;
} piece;

typedef struct piece_vec {
    piece *v;
    size_t n, cap;
} piece_vec;

static int pv_push(piece_vec *pv, const char *p, size_t len, char *owned)
{
    if (pv->n == pv->cap) {
        size_t cap = pv->cap ? pv->cap * 2 : 64;
        piece *q = realloc(pv->v, cap * sizeof *q);
        if (!q) {
            free(owned);
            return -1;
        }
        pv->v = q;
        pv->cap = cap;
    }
    pv->v[pv->n++] = (piece){p, len, owned};
    return 0;
}

static void pv_free(piece_vec *pv)
{
    for (size_t i = 0; i < pv->n; i++)
        free(pv->v[i].owned);
    free(pv->v);
    pv->v = NULL;
    pv->n = pv->cap = 0;
}

/* The byte of a "<0xNN>" piece, else -1. */
static int piece_byte(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static int utf8_valid(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t n = tok_utf8_len(s + i, len - i);
        if (n == 1 && s[i] >= 0x80)
            return 0;
        i += n;
    }
    return 1;
}

/* Copies s with the step's pattern replaced; malloc'd, NULL on no memory. */
static char *replace_alloc(const tailor_tokenizer *tok, const tok_step *step, const char *s, size_t len,
                           size_t *out_len)
{
    size_t n = tok_replace_size(tok, step, s, len);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    tok_replace_write(tok, step, s, len, out);
    out[n] = '\0';
    *out_len = n;
    return out;
}

static int step_replace(const tailor_tokenizer *tok, const tok_step *step, piece_vec *pv)
{
    const char *pat = tok->pool + step->pattern.off;
    for (size_t i = 0; i < pv->n; i++) {
        piece *t = &pv->v[i];
        if (!memmem(t->p, t->len, pat, step->pattern.len))
            continue;
        size_t len;
        char *s = replace_alloc(tok, step, t->p, t->len, &len);
        if (!s)
            return -1;
        free(t->owned);
        *t = (piece){s, len, s};
    }
    return 0;
}

/* Emits a run of byte values: the bytes when they are valid UTF-8, else U+FFFD per byte. */
static int flush_bytes(piece_vec *out, const unsigned char *bytes, size_t n)
{
    if (n == 0)
        return 0;
    int ok = utf8_valid(bytes, n);
    size_t len = ok ? n : 3 * n;
    char *s = malloc(len + 1);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (ok)
            s[i] = (char)bytes[i];
        else
            memcpy(s + 3 * i, replacement_char, 3);
    }
    s[len] = '\0';
    return pv_push(out, s, len, s);
}

static int step_byte_fallback(piece_vec *pv)
{
    piece_vec out = {0};
    unsigned char *bytes = malloc(pv->n + 1);
    size_t nb = 0;
    int r = bytes ? 0 : -1;
    for (size_t i = 0; i < pv->n && r == 0; i++) {
        piece *t = &pv->v[i];
        int b = piece_byte(t->p, t->len);
        if (b >= 0) {
            bytes[nb++] = (unsigned char)b;
            continue;
        }
        r = flush_bytes(&out, bytes, nb);
        nb = 0;
        if (r == 0) {
            r = pv_push(&out, t->p, t->len, t->owned);
            t->owned = NULL;
        }
    }
    if (r == 0)
        r = flush_bytes(&out, bytes, nb);
    free(bytes);
    pv_free(pv);
    *pv = out;
    return r;
}

/* Joins the pieces with `sep` into one owned string. */
static char *join(const piece_vec *pv, const char *sep, size_t *out_len)
{
    size_t seplen = strlen(sep), len = 0;
    for (size_t i = 0; i < pv->n; i++)
        len += pv->v[i].len + (i ? seplen : 0);
    char *s = malloc(len + 1), *d = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < pv->n; i++) {
        if (i) {
            memcpy(d, sep, seplen);
            d += seplen;
        }
        memcpy(d, pv->v[i].p, pv->v[i].len);
        d += pv->v[i].len;
    }
    *d = '\0';
    *out_len = len;
    return s;
}

static int step_fuse(piece_vec *pv)
{
    size_t len;
    char *s = join(pv, "", &len);
    if (!s)
        return -1;
    pv_free(pv);
    return pv_push(pv, s, len, s);
}

/* The text of an id, or NULL for ids outside the vocabulary. */
static const char *id_text(const tailor_tokenizer *tok, int32_t id, size_t *len)
{
    if (id < 0 || id >= tok->nids || tok->id_str[id].len == TOK_NO_STR)
        return NULL;
    *len = tok->id_str[id].len;
    return tok->pool + tok->id_str[id].off;
}

tailor_status tailor_tokenizer_decode(tailor_ctx *ctx, const tailor_tokenizer *tok, const int32_t *ids,
                                      size_t n, int skip_special, char **text, size_t *len)
{
    if (!tok || !text || (!ids && n))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_decode needs a tokenizer, "
                                "ids and an output pointer");
    *text = NULL;
    piece_vec pv = {0};
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        size_t tl;
        const char *t = id_text(tok, ids[i], &tl);
        if (t && !(skip_special && tok->id_special[ids[i]]))
            r = pv_push(&pv, t, tl, NULL);
    }
    for (size_t k = 0; k < tok->ndecoder && r == 0; k++) {
        const tok_step *step = &tok->decoder[k];
        r = step->kind == TOK_STEP_REPLACE         ? step_replace(tok, step, &pv)
            : step->kind == TOK_STEP_BYTE_FALLBACK ? step_byte_fallback(&pv)
                                                   : step_fuse(&pv);
    }
    size_t out_len = 0;
    char *s = r == 0 ? join(&pv, tok->ndecoder ? "" : " ", &out_len) : NULL;
    pv_free(&pv);
    if (!s)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory decoding %zu ids", n);
    *text = s;
    if (len)
        *len = out_len;
    return TAILOR_OK;
}

/* ---------------------------------------------------------------- streaming */

typedef enum utf8_state { UTF8_COMPLETE, UTF8_INCOMPLETE, UTF8_INVALID } utf8_state;

/* Whether p[0..n) is one whole UTF-8 character, the start of one, or neither. */
static utf8_state utf8_prefix_state(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return n == 1 ? UTF8_COMPLETE : UTF8_INVALID;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else
        return UTF8_INVALID;
    if (n > need)
        return UTF8_INVALID;
    for (size_t i = 1; i < n; i++) {
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (p[i] < l || p[i] > h)
            return UTF8_INVALID;
    }
    return n == need ? UTF8_COMPLETE : UTF8_INCOMPLETE;
}

/* A growable byte buffer that starts on the stack. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    char *heap;
} sbuf;

/* Makes room for `need` bytes plus a NUL, keeping the content. */
static int sb_reserve(sbuf *b, size_t need)
{
    if (need + 1 <= b->cap)
        return 0;
    char *h = malloc(need + 1);
    if (!h)
        return -1;
    memcpy(h, b->p, b->len);
    free(b->heap);
    b->heap = b->p = h;
    b->cap = need + 1;
    return 0;
}

/* Sets the content to s[0..n); s must not point into b. */
static int sb_set(sbuf *b, const char *s, size_t n)
{
    b->len = 0;
    if (sb_reserve(b, n))
        return -1;
    memcpy(b->p, s, n);
    b->len = n;
    return 0;
}

/* Puts s[0..n) before the content; s must not point into b. */
static int sb_prepend(sbuf *b, const char *s, size_t n)
{
    if (sb_reserve(b, b->len + n))
        return -1;
    memmove(b->p + n, b->p, b->len);
    memcpy(b->p, s, n);
    b->len += n;
    return 0;
}

/* How much of a run of bytes is whole characters: the length of its longest prefix of whole
 * valid UTF-8 characters into *whole; UTF8_COMPLETE when that is all of it, UTF8_INCOMPLETE when
 * the rest is the start of a valid character, UTF8_INVALID when the run cannot become valid. */
static utf8_state utf8_run_state(const unsigned char *p, size_t n, size_t *whole)
{
    size_t i = 0;
    *whole = 0;
    while (i < n) {
        size_t len = 1;
        utf8_state s = utf8_prefix_state(p + i, 1);
        while (s == UTF8_INCOMPLETE && i + len < n)
            s = utf8_prefix_state(p + i, ++len);
        if (s != UTF8_COMPLETE)
            return s;
        i += len;
        *whole = i;
    }
    return UTF8_COMPLETE;
}

/* What ByteFallback makes of the run the stream holds, as a whole run ended here: its bytes when
 * they are valid UTF-8, else U+FFFD per byte, into rep; returns the length. */
static size_t held_release(const tailor_detok_stream *st, char rep[3 * sizeof st->pending])
{
    size_t whole, n = (size_t)st->npending;
    if (utf8_run_state(st->pending, n, &whole) == UTF8_COMPLETE) {
        memcpy(rep, st->pending, n);
        return n;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(rep + 3 * i, replacement_char, 3);
    return 3 * n;
}

/* Applies the byte-fallback step to one token in streaming fashion, deciding each run of byte
 * tokens as a whole as the whole decode does; 1 when output is held back. */
static int stream_bytes(tailor_detok_stream *st, sbuf *cur, int *oom)
{
    int b = piece_byte(cur->p, cur->len);
    char rep[3 * sizeof st->pending];
    if (b < 0) { /* the run ends: release it before the token's text */
        size_t nrep = held_release(st, rep);
        st->npending = st->broken = 0;
        if (nrep && sb_prepend(cur, rep, nrep))
            *oom = 1;
        return 0;
    }
    if (st->broken) { /* the run is U+FFFD per byte whatever follows */
        *oom |= sb_set(cur, replacement_char, 3) != 0;
        return 0;
    }
    st->pending[st->npending++] = (unsigned char)b;
    size_t whole;
    utf8_state s = utf8_run_state(st->pending, (size_t)st->npending, &whole);
    if (s == UTF8_INVALID) {
        st->broken = 1;
        *oom |= sb_set(cur, rep, held_release(st, rep)) != 0;
        st->npending = 0;
        return 0;
    }
    if (st->npending < (int)sizeof st->pending)
        return 1;
    /* a valid run longer than the stream can hold: its whole characters go out now */
    *oom |= sb_set(cur, (const char *)st->pending, whole) != 0;
    memmove(st->pending, st->pending + whole, (size_t)st->npending - whole);
    st->npending -= (int)whole;
    return 0;
}

/* Applies a Replace step to the buffer, on the stack unless the text is long. */
static int stream_replace(const tailor_tokenizer *tok, const tok_step *step, sbuf *cur)
{
    if (!memmem(cur->p, cur->len, tok->pool + step->pattern.off, step->pattern.len))
        return 0;
    char tmp[512];
    size_t n = tok_replace_size(tok, step, cur->p, cur->len);
    char *dst = n < sizeof tmp ? tmp : malloc(n + 1);
    if (!dst)
        return 1;
    tok_replace_write(tok, step, cur->p, cur->len, dst);
    dst[n] = '\0';
    int r = sb_set(cur, dst, n);
    if (dst != tmp)
        free(dst);
    return r ? 1 : 0;
}

/* Whether the stream arguments can be used (a zeroed or stepped stream, an output buffer). */
static int stream_args_ok(const tailor_tokenizer *tok, const tailor_detok_stream *st,
                          const char *out, size_t out_size, const size_t *out_len)
{
    return tok && st && out_len && (out || !out_size) && st->npending >= 0 &&
           st->npending < (int)sizeof st->pending && (st->broken == 0 || st->broken == 1);
}

/* Copies the decoded text to out (NUL-terminated when room allows) and its length to *out_len;
 * TAILOR_ERR_NOMEM when the decoding ran out of memory, TAILOR_ERR_MISUSE when out is too small
 * (the message names token `id`, or the held bytes for -1). */
static tailor_status copy_out(tailor_ctx *ctx, const sbuf *cur, int oom, int32_t id, char *out,
                              size_t out_size, size_t *out_len)
{
    char what[32] = "the held bytes";
    if ((oom || cur->len > out_size) && id >= 0)
        snprintf(what, sizeof what, "token %d", (int)id);
    if (oom)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory decoding %s", what);
    if (cur->len > out_size)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "the output buffer of %zu bytes is too "
                                "small for %s (%zu bytes)", out_size, what, cur->len);
    memcpy(out, cur->p, cur->len);
    if (cur->len < out_size)
        out[cur->len] = '\0';
    *out_len = cur->len;
    return TAILOR_OK;
}

tailor_status tailor_tokenizer_decode_step(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                           tailor_detok_stream *st, int32_t id, char *out,
                                           size_t out_size, size_t *out_len)
{
    if (!stream_args_ok(tok, st, out, out_size, out_len))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_decode_step needs a "
                                "tokenizer, a zeroed stream and an output buffer");
    *out_len = 0;
    size_t tl;
    const char *t = id_text(tok, id, &tl);
    if (!t) {
        if (out_size)
            out[0] = '\0';
        return TAILOR_OK;
    }
    char stack[512];
    sbuf cur = {stack, 0, sizeof stack, NULL};
    tailor_detok_stream next = *st;
    int oom = sb_set(&cur, t, tl), held = 0;
    for (size_t k = 0; k < tok->ndecoder && !oom && !held; k++) {
        const tok_step *step = &tok->decoder[k];
        if (step->kind == TOK_STEP_REPLACE) {
            oom = stream_replace(tok, step, &cur);
        } else if (step->kind == TOK_STEP_BYTE_FALLBACK) {
            held = stream_bytes(&next, &cur, &oom);
        }
    }
    if (held)
        cur.len = 0;
    tailor_status rc = copy_out(ctx, &cur, oom, id, out, out_size, out_len);
    if (rc == TAILOR_OK)
        *st = next;
    free(cur.heap);
    return rc;
}

tailor_status tailor_tokenizer_decode_flush(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                            tailor_detok_stream *st, char *out, size_t out_size,
                                            size_t *out_len)
{
    if (!stream_args_ok(tok, st, out, out_size, out_len))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_tokenizer_decode_flush needs a "
                                "tokenizer, a stream and an output buffer");
    *out_len = 0;
    char rep[3 * sizeof st->pending] = {0}, stack[64];
    size_t nrep = held_release(st, rep);
    sbuf cur = {stack, 0, sizeof stack, NULL};
    int oom = sb_set(&cur, rep, nrep), after = 0;
    /* the held bytes stopped at ByteFallback: the Replace steps after it apply to what they
     * become, as they do to a run that decode_step releases */
    for (size_t k = 0; k < tok->ndecoder && !oom && nrep; k++) {
        const tok_step *step = &tok->decoder[k];
        if (after && step->kind == TOK_STEP_REPLACE)
            oom = stream_replace(tok, step, &cur);
        after |= step->kind == TOK_STEP_BYTE_FALLBACK;
    }
    tailor_status rc = copy_out(ctx, &cur, oom, -1, out, out_size, out_len);
    if (rc == TAILOR_OK)
        st->npending = st->broken = 0;
    free(cur.heap);
    return rc;
}
