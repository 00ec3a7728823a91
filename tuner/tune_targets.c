/* tune_targets.c — the kernel shapes a Gemma 4 model needs, for `tailor tune --preset/--model`:
 * the norms, every linear (dense and W4A16, at decode and prefill widths) and the attention
 * geometries. */
#include "tune_targets.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4.h"

/* The token counts a model's kernels are tuned for: one decode step and a prefill chunk. */
#define DECODE_M 1
#define PREFILL_M 512
/* The cache length attention decode is tuned at (a bucket; the runtime launches the winner for
 * any length, since only head_dim and the head counts are compiled in). */
#define DECODE_KV 4096
#define W4A16_GROUP 128

typedef struct target_list {
    tailor_tune_target *t;
    int n, cap;
} target_list;

static int add(target_list *l, const char *op, const char *shape_fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int add(target_list *l, const char *op, const char *shape_fmt, ...)
{
    if (!tailor_op_find(op))
        return 0; /* an op this build does not have yet */
    char text[256];
    va_list ap;
    va_start(ap, shape_fmt);
    vsnprintf(text, sizeof text, shape_fmt, ap);
    va_end(ap);
    tailor_shape s;
    if (tailor_shape_parse(NULL, text, &s) != TAILOR_OK)
        return -1;
    for (int i = 0; i < l->n; i++) { /* merge duplicates */
        char a[256], b[256];
        tailor_shape_format(&l->t[i].shape, a, sizeof a);
        tailor_shape_format(&s, b, sizeof b);
        if (strcmp(l->t[i].op, op) == 0 && strcmp(a, b) == 0)
            return 0;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        tailor_tune_target *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        l->t = t;
        l->cap = cap;
    }
    snprintf(l->t[l->n].op, sizeof l->t[l->n].op, "%s", op);
    l->t[l->n].shape = s;
    l->n++;
    return 0;
}

static tailor_status load_config(tailor_ctx *ctx, const char *dir, tailor_gemma4_config *cfg)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = size > 0 ? malloc((size_t)size + 1) : NULL;
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(text);
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot read", path);
    }
    fclose(f);
    text[size] = '\0';
    tailor_status st = tailor_gemma4_config_parse(ctx, text, path, cfg);
    free(text);
    return st;
}

tailor_status tailor_tune_targets(tailor_ctx *ctx, const char *preset, const char *model_dir,
                                  tailor_tune_target **targets, int *count)
{
    tailor_gemma4_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    tailor_status st = preset ? tailor_gemma4_preset(ctx, preset, cfg)
                              : load_config(ctx, model_dir, cfg);
    int n = 0;
    if (st == TAILOR_OK)
        st = tailor_gemma4_shapes(ctx, cfg, NULL, 0, &n);
    tailor_gemma4_shape *shapes = st == TAILOR_OK ? calloc((size_t)(n ? n : 1), sizeof *shapes)
                                                  : NULL;
    if (st == TAILOR_OK && !shapes)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    if (st == TAILOR_OK)
        st = tailor_gemma4_shapes(ctx, cfg, shapes, n, &n);
    target_list l = {0};
    int bad = 0;
    if (st == TAILOR_OK) {
        /* norms: the residual stream (one row per token) and the per-head q/k norms */
        for (int m = DECODE_M; m <= PREFILL_M; m += PREFILL_M - DECODE_M)
            bad |= add(&l, "rmsnorm", "rows=%d,cols=%d", m, cfg->hidden);
        for (int i = 0; i < n; i++) {
            const tailor_gemma4_shape *s = &shapes[i];
            if (s->kind == TAILOR_GEMMA4_SHAPE_LINEAR) {
                /* 16-bit checkpoints run every linear as a dense matmul */
                bad |= add(&l, "matmul", "m=%d,n=%d,k=%d", DECODE_M, s->n, s->k);
                bad |= add(&l, "matmul", "m=%d,n=%d,k=%d", PREFILL_M, s->n, s->k);
                if (strcmp(s->what, "lm_head") == 0 || strcmp(s->what, "ple_model_proj") == 0)
                    continue; /* stay 16-bit under W4A16 too (GEMMA4.md §6) */
                if (s->k % W4A16_GROUP)
                    continue;
                bad |= add(&l, "w4a16_matmul", "m=%d,n=%d,k=%d,group=%d", DECODE_M, s->n, s->k,
                           W4A16_GROUP);
                bad |= add(&l, "w4a16_matmul", "m=%d,n=%d,k=%d,group=%d", PREFILL_M, s->n, s->k,
                           W4A16_GROUP);
            } else {
                bad |= add(&l, "rmsnorm", "rows=%d,cols=%d", cfg->n_heads, s->head_dim);
                bad |= add(&l, "attention_decode",
                           "kv_len=%d,head_dim=%d,heads=%d,kv_heads=%d,window=%d,batch=1",
                           s->window ? s->window : DECODE_KV, s->head_dim, s->n_heads,
                           s->n_kv_heads, s->window);
                bad |= add(&l, "attention_prefill",
                           "q_len=%d,kv_len=%d,head_dim=%d,heads=%d,kv_heads=%d,window=%d",
                           PREFILL_M, PREFILL_M, s->head_dim, s->n_heads, s->n_kv_heads,
                           s->window);
            }
        }
        if (bad)
            st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory listing kernel shapes");
    }
    free(shapes);
    free(cfg);
    if (st) {
        free(l.t);
        return st;
    }
    *targets = l.t;
    *count = l.n;
    return TAILOR_OK;
}
