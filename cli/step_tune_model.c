/* step_tune_model.c — `tailor bench model --step-tune`: the decode step's costliest kernels
 * re-ranked by the step's own time (tuner/step_tune.h). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "gemma4.h"
#include "step_tune.h"

/* What one step timing runs. */
typedef struct step_timing {
    tailor_gemma4_gpu *g;
    const int32_t *ids;
    int plen, ndec;
} step_timing;

/* tailor_step_timer: the graph captured again (the kernels may have changed; capturing uploads
 * it), the prompt, then ndec timed decode steps; microseconds per step. */
static tailor_status time_step(tailor_ctx *ctx, void *user, double *us)
{
    step_timing *s = user;
    int32_t next = 0;
    tailor_status st = tailor_gemma4_gpu_recapture(ctx, s->g);
    if (st == TAILOR_OK)
        st = tailor_gemma4_gpu_prefill(ctx, s->g, s->ids, s->plen, NULL, &next);
    double t0 = cli_now_s();
    for (int i = 0; i < s->ndec && st == TAILOR_OK; i++)
        st = tailor_gemma4_gpu_step(ctx, s->g, next, NULL, &next);
    *us = 1e6 * (cli_now_s() - t0) / s->ndec;
    return st;
}

/* The kernels of one profiled decode step (after the prompt), each with its summed time. */
static tailor_status step_kernels(tailor_ctx *ctx, step_timing *s, tailor_step_kernel **out,
                                  int *n)
{
    enum { CAP = 256 };
    *n = 0;
    tailor_gemma4_gpu_prof *p = calloc(CAP, sizeof *p);
    tailor_step_kernel *list = calloc(CAP, sizeof *list);
    int np = 0;
    double total = 0;
    int32_t next = 0;
    tailor_status st = p && list ? TAILOR_OK
                                 : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    if (st == TAILOR_OK) {
        tailor_gemma4_gpu_reset(s->g);
        st = tailor_gemma4_gpu_prefill(ctx, s->g, s->ids, s->plen, NULL, &next);
    }
    if (st == TAILOR_OK)
        st = tailor_gemma4_gpu_profile_step(ctx, s->g, next, p, CAP, &np, &total);
    for (int i = 0; i < np && st == TAILOR_OK; i++) { /* (op, shape) entries summed per kernel */
        int j = 0;
        while (j < *n && list[j].kernel != p[i].kernel)
            j++;
        if (j == *n)
            list[(*n)++].kernel = p[i].kernel;
        list[j].us += p[i].us;
    }
    free(p);
    if (st)
        free(list), list = NULL, *n = 0;
    *out = list;
    return st;
}

static void on_try(void *user, const tailor_step_try *t)
{
    (void)user;
    if (t->failed) {
        printf("  %-16s %s: %s could not be tried: %s\n", t->op, t->shape, t->to, t->failed);
        return;
    }
    char alone[32] = "no trial recorded"; /* the winner's own time, when the cache has it */
    if (t->alone_from >= 0)
        snprintf(alone, sizeof alone, "%.2f us alone", t->alone_from);
    printf("  %-16s %s\n    %s (%s) -> %s (%.2f us alone): step %.1f -> %.1f us (medians), "
           "%d of %d pairs won: %s\n",
           t->op, t->shape, t->from, alone, t->to, t->alone_to, t->step_from, t->step_to, t->wins,
           t->pairs, t->kept ? "kept" : "not kept");
    fflush(stdout);
}

int32_t *cli_prompt_ids(int vocab, int n)
{
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    for (int i = 0; ids && i < n; i++)
        ids[i] = 2 + (int32_t)((i * 7919) % (vocab - 2));
    return ids;
}

tailor_status step_tune_model(tailor_ctx *ctx, tailor_gemma4_gpu *g, tailor_kernels *ks,
                              tailor_cache *cache, int vocab, int plen, int ndec)
{
    int32_t *ids = cli_prompt_ids(vocab, plen);
    if (!ids)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    step_timing s = {g, ids, plen, ndec};
    tailor_step_kernel *list = NULL;
    int n = 0;
    tailor_step_tune_result r;
    tailor_step_tune_options o = {.progress = on_try};
    printf("step tuning: the costliest decode kernels' other configurations, timed in the step "
           "(%d prompt tokens, %d decode steps a timing)\n", plen, ndec);
    tailor_status st = step_kernels(ctx, &s, &list, &n);
    if (st == TAILOR_OK)
        st = tailor_step_tune(ctx, ks, cache, list, n, time_step, &s, &o, &r);
    free(list);
    free(ids);
    if (st == TAILOR_OK)
        printf("step tuning: %d kernels, %d configurations tried (%d could not be), %d kept; "
               "step %.1f -> %.1f us (medians of %d timings; spread %.2f %%, margin %.2f %%)\n",
               r.kernels,
               r.tried, r.failed, r.kept, r.first_us, r.last_us, TAILOR_STEP_NOISE_SAMPLES, 100 * r.noise,
               100 * r.margin);
    return st;
}
