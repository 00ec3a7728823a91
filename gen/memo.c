/* memo.c — compile results kept for the rest of a run (tailor_compile_memo, gen.h).
 *
 * The binary of an instantiation depends on the template text, the headers it may include, the
 * kernel name, the target (sm, PTX or cubin, arch-specific) and the defines; nothing else, in
 * particular not the shape it was planned for (shape values that matter are defines). First-boot
 * tuning plans the same configuration for many shapes (every W4A16 shape with the same group,
 * every prefill chunk of one head_dim), so a run that keeps what it compiled compiles each once. */
#include "gen.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "sha256.h"

typedef struct memo_item {
    uint8_t key[32];
    tailor_compile_result r;
} memo_item;

/* Keys being compiled right now: a second request for one waits for that compile instead of
 * running its own (a tuner's compile threads and a tailor_compile_ahead's meet on the same
 * instantiations). */
enum { MEMO_MAX_INFLIGHT = 256 };

struct tailor_compile_memo {
    pthread_mutex_t lock;
    pthread_cond_t landed; /* a compile in flight ended */
    size_t max_bytes, bytes;
    int hits, misses;
    memo_item *items;
    int count, cap;
    uint8_t inflight[MEMO_MAX_INFLIGHT][32];
    int ninflight;
    tailor_jit_fn jit; /* fixed before the memo is shared: read without the lock */
    void *jit_user;
};

tailor_compile_memo *tailor_compile_memo_create(size_t max_bytes)
{
    tailor_compile_memo *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    if (pthread_cond_init(&m->landed, NULL) != 0) {
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
    }
    m->max_bytes = max_bytes;
    return m;
}

void tailor_compile_memo_destroy(tailor_compile_memo *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->count; i++)
        tailor_compile_result_free(&m->items[i].r);
    free(m->items);
    pthread_cond_destroy(&m->landed);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void tailor_compile_memo_stats(tailor_compile_memo *m, int *hits, int *misses, size_t *bytes)
{
    pthread_mutex_lock(&m->lock);
    *hits = m->hits;
    *misses = m->misses;
    *bytes = m->bytes;
    pthread_mutex_unlock(&m->lock);
}

void tailor_compile_memo_set_jit(tailor_compile_memo *m, tailor_jit_fn fn, void *user)
{
    m->jit = fn;
    m->jit_user = user;
}

size_t tailor_compile_memo_capacity(const tailor_compile_memo *m)
{
    return m->max_bytes; /* fixed at creation: no lock */
}

/* A string into the digest with its length first, so that no two field lists hash alike. */
static void hash_text(tailor_sha256 *s, const char *text)
{
    uint64_t n = text ? strlen(text) : 0;
    tailor_sha256_update(s, &n, sizeof n);
    if (n)
        tailor_sha256_update(s, text, (size_t)n);
}

static void hash_int(tailor_sha256 *s, int v)
{
    int64_t x = v;
    tailor_sha256_update(s, &x, sizeof x);
}

static int cmp_define_names(const void *a, const void *b)
{
    return strcmp((*(const tailor_define *const *)a)->name, (*(const tailor_define *const *)b)->name);
}

/* The key of a request: every input of the compiler, headers included. The defines go in by
 * name: a space's `defines` table comes out of Lua in hash order, which differs between Lua
 * states (per-state string seeds), and the order of -D flags changes nothing. */
static tailor_status request_key(tailor_ctx *ctx, const tailor_compile_request *req,
                                 uint8_t key[32])
{
    const int nd = req->ndefines > 0 ? req->ndefines : 0;
    const tailor_define **defs = malloc((size_t)(nd ? nd : 1) * sizeof *defs);
    if (!defs)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nd; i++)
        defs[i] = &req->defines[i];
    qsort(defs, (size_t)nd, sizeof *defs, cmp_define_names);
    char **names = NULL, **texts = NULL;
    int count = 0;
    tailor_status st = tailor_template_headers(ctx, &names, &texts, &count);
    if (st) {
        free(defs);
        return st;
    }
    tailor_sha256 s;
    tailor_sha256_init(&s);
    hash_text(&s, req->source_name);
    hash_text(&s, req->source);
    hash_text(&s, req->kernel_name);
    hash_int(&s, req->sm);
    hash_int(&s, req->ptx);
    hash_int(&s, req->arch_specific);
    hash_int(&s, nd);
    for (int i = 0; i < nd; i++) {
        hash_text(&s, defs[i]->name);
        hash_text(&s, defs[i]->value);
    }
    free(defs);
    hash_int(&s, count);
    for (int i = 0; i < count; i++) {
        hash_text(&s, names[i]);
        hash_text(&s, texts[i]);
    }
    tailor_template_headers_free(names, texts, count);
    tailor_sha256_final(&s, key);
    return TAILOR_OK;
}

static char *dup_bytes(const void *p, size_t n)
{
    char *q = malloc(n ? n : 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

/* A deep copy of src into dst (image, log and native image duplicated). */
static tailor_status result_copy(tailor_ctx *ctx, tailor_compile_result *dst,
                                 const tailor_compile_result *src)
{
    *dst = *src;
    dst->image = dup_bytes(src->image, src->image_size);
    dst->log = src->log ? dup_bytes(src->log, strlen(src->log) + 1) : NULL;
    dst->native = src->native ? dup_bytes(src->native, src->native_size) : NULL;
    if (!dst->image || (src->log && !dst->log) || (src->native && !dst->native)) {
        tailor_compile_result_free(dst);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    }
    return TAILOR_OK;
}

/* Index of key in the memo, or -1. Called with the lock held. */
static int find(const tailor_compile_memo *m, const uint8_t key[32])
{
    for (int i = 0; i < m->count; i++)
        if (memcmp(m->items[i].key, key, 32) == 0)
            return i;
    return -1;
}

/* Index of key among the compiles in flight, or -1. Lock held. */
static int inflight_index(const tailor_compile_memo *m, const uint8_t key[32])
{
    for (int i = 0; i < m->ninflight; i++)
        if (memcmp(m->inflight[i], key, 32) == 0)
            return i;
    return -1;
}

/* Keeps a copy of r under key unless it is there already or the memo is full. Lock held. */
static void keep(tailor_compile_memo *m, const uint8_t key[32], const tailor_compile_result *r)
{
    size_t size = r->image_size + r->native_size + (r->log ? strlen(r->log) + 1 : 0);
    if (find(m, key) >= 0 || m->bytes + size > m->max_bytes)
        return;
    if (m->count == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        memo_item *items = realloc(m->items, (size_t)cap * sizeof *items);
        if (!items)
            return;
        m->items = items;
        m->cap = cap;
    }
    memo_item *it = &m->items[m->count];
    memcpy(it->key, key, 32);
    if (result_copy(NULL, &it->r, r) != TAILOR_OK)
        return;
    it->r.reused = 0;
    m->count++;
    m->bytes += size;
}

/* The memo's JIT of a fresh PTX result into r->native, outside the lock (it takes as long as a
 * compile). Its failure is not the compile's: native stays NULL and the loader reports it. */
static void jit_native(const tailor_compile_memo *m, tailor_compile_result *r)
{
    if (!m->jit || !r->is_ptx)
        return;
    tailor_ctx *scratch = tailor_ctx_create();
    if (scratch && m->jit(scratch, m->jit_user, r->image, &r->native, &r->native_size) != TAILOR_OK) {
        free(r->native);
        r->native = NULL;
        r->native_size = 0;
    }
    tailor_ctx_destroy(scratch);
}

tailor_status tailor_gen_compile_memo(tailor_ctx *ctx, tailor_compile_memo *m,
                                      const tailor_compile_request *req, tailor_compile_result *out)
{
    if (!m)
        return tailor_gen_compile(ctx, req, out);
    memset(out, 0, sizeof *out);
    uint8_t key[32];
    tailor_status st = request_key(ctx, req, key);
    if (st)
        return st;
    pthread_mutex_lock(&m->lock);
    int i, claimed = 0;
    for (;;) {
        if ((i = find(m, key)) >= 0)
            break;
        if (inflight_index(m, key) < 0) {
            claimed = m->ninflight < MEMO_MAX_INFLIGHT;
            if (claimed)
                memcpy(m->inflight[m->ninflight++], key, 32);
            break;
        }
        pthread_cond_wait(&m->landed, &m->lock); /* another thread compiles it: take its result */
    }
    if (i >= 0) {
        m->hits++;
        st = result_copy(ctx, out, &m->items[i].r);
        pthread_mutex_unlock(&m->lock);
        if (st == TAILOR_OK) {
            out->seconds = 0.0;
            out->reused = 1;
        }
        return st;
    }
    m->misses++;
    pthread_mutex_unlock(&m->lock);
    st = tailor_gen_compile(ctx, req, out);
    if (st == TAILOR_OK)
        jit_native(m, out);
    pthread_mutex_lock(&m->lock);
    if (st == TAILOR_OK)
        keep(m, key, out);
    if (claimed) { /* a failure is not kept: a waiter then compiles and reports it itself */
        int j = inflight_index(m, key);
        memmove(m->inflight[j], m->inflight[j + 1], (size_t)(m->ninflight - j - 1) * 32);
        m->ninflight--;
        pthread_cond_broadcast(&m->landed);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}
