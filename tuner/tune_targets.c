/* tune_targets.c — the kernel shapes a Gemma 4 model needs, for `tailor tune --preset/--model`:
 * exactly what the GPU runtime launches, found by its own dry pass (tailor_gemma4_gpu_kernels)
 * for a 16-bit run and, where the weights allow, a W4A16 one (--quantize w4a16). */
#include "tune_targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4.h"

/* A KV cache longer than any prefill chunk, so that the dry pass covers chunks with history. */
#define TARGET_MAX_TOKENS 32768

typedef struct target_list {
    tailor_tune_target *t;
    int n, cap;
} target_list;

/* Appends (op, shape text) unless already listed. */
static tailor_status add(tailor_ctx *ctx, target_list *l, const char *op, const char *text)
{
    tailor_shape s;
    tailor_status st = tailor_shape_parse(ctx, text, &s);
    if (st)
        return st;
    for (int i = 0; i < l->n; i++) {
        char a[256];
        tailor_shape_format(&l->t[i].shape, a, sizeof a);
        if (strcmp(l->t[i].op, op) == 0 && strcmp(a, text) == 0)
            return TAILOR_OK;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        tailor_tune_target *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t)
            return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory listing kernel shapes");
        l->t = t;
        l->cap = cap;
    }
    snprintf(l->t[l->n].op, sizeof l->t[l->n].op, "%s", op);
    l->t[l->n].shape = s;
    l->n++;
    return TAILOR_OK;
}

/* The kernels of one dry pass (quantize 0/1) of a model with max_tokens positions into l. */
static tailor_status add_run(tailor_ctx *ctx, target_list *l, const tailor_gemma4_config *cfg,
                             const tailor_gemma4 *m, int quantize, int max_tokens)
{
    /* the quantized pass also lists the int4 LM head (--quantize-head) */
    tailor_gemma4_gpu_opts o = {.max_tokens = max_tokens, .quantize = quantize,
                                .quantize_head = quantize};
    tailor_gemma4_kernel_use *uses = NULL;
    int n = 0;
    tailor_status st = tailor_gemma4_gpu_kernels(ctx, cfg, m, &o, &uses, &n);
    for (int i = 0; i < n && st == TAILOR_OK; i++)
        st = add(ctx, l, uses[i].op, uses[i].shape);
    free(uses);
    return st;
}

/* Both kinds of run: a long one (every prefill chunk with history) and a short one, whose full
 * layers' decode attention is tuned at TAILOR_GEMMA4_SHORT_CONTEXT (the rest is listed twice and
 * kept once). */
static tailor_status add_pass(tailor_ctx *ctx, target_list *l, const tailor_gemma4_config *cfg,
                              const tailor_gemma4 *m, int quantize)
{
    tailor_status st = add_run(ctx, l, cfg, m, quantize, TARGET_MAX_TOKENS);
    return st ? st : add_run(ctx, l, cfg, m, quantize, TAILOR_GEMMA4_SHORT_CONTEXT);
}

static tailor_status load_config(tailor_ctx *ctx, const char *dir, tailor_gemma4_config *cfg)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text;
    tailor_status st = tailor_read_file(ctx, path, (size_t)64 << 20, &text, NULL);
    if (st)
        return st;
    st = tailor_gemma4_config_parse(ctx, text, path, cfg);
    free(text);
    return st;
}

tailor_status tailor_tune_targets(tailor_ctx *ctx, const char *preset, const char *model_dir,
                                  tailor_tune_target **targets, int *count)
{
    *targets = NULL;
    *count = 0;
    tailor_gemma4_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    tailor_gemma4 *m = NULL;
    tailor_status st = TAILOR_OK;
    if (preset) {
        st = tailor_gemma4_preset(ctx, preset, cfg);
    } else {
        /* the weights decide which matrices are int4; a config alone is enough for the rest */
        st = load_config(ctx, model_dir, cfg);
        if (st == TAILOR_OK && (st = tailor_gemma4_open(ctx, model_dir, &m)) == TAILOR_OK)
            *cfg = *tailor_gemma4_get_config(m);
    }
    target_list l = {0};
    if (st == TAILOR_OK) /* as the checkpoint is (16-bit, or its own W4A16) */
        st = add_pass(ctx, &l, cfg, m, 0);
    if (st == TAILOR_OK && !(m && tailor_gemma4_is_w4a16(m))) /* --quantize w4a16 */
        st = add_pass(ctx, &l, cfg, m, 1);
    tailor_gemma4_close(m);
    free(cfg);
    if (st) {
        free(l.t);
        return st;
    }
    *targets = l.t;
    *count = l.n;
    return TAILOR_OK;
}
