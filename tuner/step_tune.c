/* step_tune.c — a kernel's verified configurations re-ranked by the step they run in
 * (step_tune.h). */
#include "step_tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the alternatives the cache recorded --------------------------------------------------- */

typedef struct alt_scan {
    const tailor_cache_key *key; /* k's */
    const char *own_template, *own_params;
    double within, fastest;      /* fastest: -1 until the key's first timed trial */
    double own_us;               /* the own configuration's trial time, -1 if not recorded */
    int max, n;
    char **templates, **params;
    double *alone;
    int nomem;
} alt_scan;

static int same_key(const tailor_cache_key *a, const tailor_cache_key *b)
{
    return strcmp(a->fingerprint, b->fingerprint) == 0 && strcmp(a->op, b->op) == 0 &&
           strcmp(a->shape, b->shape) == 0 && strcmp(a->dtype, b->dtype) == 0 &&
           strcmp(a->space_hash, b->space_hash) == 0;
}

/* tailor_cache_foreach_trial callback: the key's timed trials come fastest first. */
static int scan_trial(void *user, const tailor_cache_key *key, const tailor_cache_trial *t)
{
    alt_scan *s = user;
    if (!same_key(key, s->key) || strcmp(t->outcome, "timed") != 0 || t->median_us < 0)
        return 0;
    if (s->fastest < 0)
        s->fastest = t->median_us;
    if (strcmp(t->template_name, s->own_template) == 0 && strcmp(t->params_json, s->own_params) == 0) {
        s->own_us = t->median_us;
        return 0;
    }
    if (t->median_us > s->within * s->fastest || s->n == s->max)
        return s->own_us >= 0; /* the rest are slower still; go on only to find the own time */
    s->templates[s->n] = strdup(t->template_name);
    s->params[s->n] = strdup(t->params_json);
    if (!s->templates[s->n] || !s->params[s->n]) {
        free(s->templates[s->n]);
        free(s->params[s->n]);
        s->nomem = 1;
        return 1;
    }
    s->alone[s->n++] = t->median_us;
    return 0;
}

tailor_status tailor_step_alternatives(tailor_ctx *ctx, tailor_cache *cache,
                                       const tailor_cache_key *key, const char *own_template,
                                       const char *own_params, double within, int max,
                                       char **template_names, char **params_json,
                                       double *alone_us, int *n, double *own_us)
{
    alt_scan s = {.key = key, .own_template = own_template, .own_params = own_params,
                  .within = within, .fastest = -1, .own_us = -1, .max = max,
                  .templates = template_names, .params = params_json, .alone = alone_us};
    tailor_status st = tailor_cache_foreach_trial(ctx, cache, key->fingerprint, key->op,
                                                  scan_trial, &s);
    *n = s.n;
    *own_us = s.own_us;
    if (st == TAILOR_OK && s.nomem)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    return st;
}

/* ---- the decision -------------------------------------------------------------------------- */

int tailor_step_keeps(const double *step_from, const double *step_to, int pairs, double margin,
                      int *wins)
{
    *wins = 0;
    for (int i = 0; i < pairs; i++)
        if (step_to[i] < step_from[i] * (1.0 - margin))
            (*wins)++;
    return pairs > 0 && *wins == pairs;
}

double tailor_step_noise(const double *us, int n)
{
    if (n < 2)
        return 0;
    double lo = us[0], hi = us[0], sum = 0;
    for (int i = 0; i < n; i++) {
        lo = us[i] < lo ? us[i] : lo;
        hi = us[i] > hi ? us[i] : hi;
        sum += us[i];
    }
    return sum > 0 ? (hi - lo) / (sum / n) : 0;
}

static int by_cost(const void *a, const void *b)
{
    double x = ((const tailor_step_kernel *)a)->us, y = ((const tailor_step_kernel *)b)->us;
    return (x < y) - (x > y);
}

static double median_of(double *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: n is a handful */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

enum { MAX_PAIRS = 15, MAX_ALTS = 16, NOISE_SAMPLES = TAILOR_STEP_NOISE_SAMPLES };

/* Times the step with k's own configuration and with the one being tried, `pairs` times each,
 * alternating which goes first; leaves k on its own. */
static tailor_status time_pairs(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                tailor_step_timer timer, void *user, int pairs, double *from,
                                double *to)
{
    tailor_status st = TAILOR_OK;
    for (int p = 0; p < pairs && st == TAILOR_OK; p++) {
        for (int half = 0; half < 2 && st == TAILOR_OK; half++) {
            int alt = (p + half) % 2; /* pair 0: own first; pair 1: the alternative first; ... */
            tailor_op_kernel_use_try(set, k, alt);
            st = timer(ctx, user, alt ? &to[p] : &from[p]);
        }
    }
    tailor_op_kernel_use_try(set, k, 0);
    return st;
}

/* Tries one alternative of k; fills t. A failure to load it is reported in t, not returned. */
static tailor_status try_one(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                             const char *tmpl, const char *params, double alone,
                             tailor_step_timer timer, void *user,
                             const tailor_step_tune_options *o, tailor_step_try *t)
{
    snprintf(t->from, sizeof t->from, "%s", tailor_op_kernel_describe(k));
    t->alone_to = alone;
    t->pairs = o->pairs;
    tailor_status ts = tailor_op_kernel_try(ctx, set, k, tmpl, params);
    if (ts == TAILOR_ERR_CUDA || ts == TAILOR_ERR_NOMEM)
        return ts; /* the device or the host is in trouble: not this configuration's fault */
    if (ts) {
        snprintf(t->to, sizeof t->to, "%s %s", tmpl, params);
        t->failed = tailor_ctx_message(ctx);
        return TAILOR_OK;
    }
    tailor_op_kernel_use_try(set, k, 1);
    snprintf(t->to, sizeof t->to, "%s", tailor_op_kernel_describe(k));
    tailor_op_kernel_use_try(set, k, 0);
    double from[MAX_PAIRS], to[MAX_PAIRS];
    tailor_status st = time_pairs(ctx, set, k, timer, user, o->pairs, from, to);
    int keep = st == TAILOR_OK && tailor_step_keeps(from, to, o->pairs, o->margin, &t->wins);
    if (st == TAILOR_OK) {
        t->step_from = median_of(from, o->pairs);
        t->step_to = median_of(to, o->pairs);
    }
    tailor_status ss = tailor_op_kernel_settle(ctx, set, k, keep, alone);
    t->kept = keep && ss == TAILOR_OK; /* a failed cache write leaves k on its old one */
    return st ? st : ss;
}

/* v, or dflt when v is not positive; at most max. */
static int count_or(int v, int dflt, int max) { return v <= 0 ? dflt : v > max ? max : v; }

/* The options with their defaults filled in and bounds applied. */
static tailor_step_tune_options with_defaults(const tailor_step_tune_options *in)
{
    tailor_step_tune_options o = in ? *in : (tailor_step_tune_options){0};
    o.max_kernels = count_or(o.max_kernels, 12, 1 << 20);
    o.alternatives = count_or(o.alternatives, 3, MAX_ALTS);
    o.pairs = count_or(o.pairs, 3, MAX_PAIRS);
    if (o.within <= 1.0)
        o.within = 1.3;
    if (o.margin <= 0)
        o.margin = 0.002;
    return o;
}

/* Tries k's alternatives in turn (the winner may change between them). */
static tailor_status tune_kernel(tailor_ctx *ctx, tailor_kernels *set, tailor_cache *cache,
                                 tailor_op_kernel *k, tailor_step_timer timer, void *user,
                                 const tailor_step_tune_options *o, tailor_step_tune_result *out)
{
    char *tmpl[MAX_ALTS] = {0}, *params[MAX_ALTS] = {0};
    double alone[MAX_ALTS];
    int na = 0;
    double own = -1;
    char own_params[1024];
    tailor_op_kernel_keybuf kb;
    tailor_op_kernel_config_json(k, own_params, sizeof own_params);
    tailor_status st = tailor_op_kernel_key(ctx, set, k, &kb);
    if (st == TAILOR_OK)
        st = tailor_step_alternatives(ctx, cache, &kb.key, tailor_op_kernel_template(k),
                                      own_params, o->within, o->alternatives, tmpl, params, alone,
                                      &na, &own);
    for (int i = 0; i < na && st == TAILOR_OK; i++) {
        tailor_step_try t = {.op = tailor_op_kernel_op(k), .shape = tailor_op_kernel_shape(k),
                             .alone_from = own};
        st = try_one(ctx, set, k, tmpl[i], params[i], alone[i], timer, user, o, &t);
        if (st)
            break; /* t is half filled: nothing to report */
        if (t.kept)
            own = alone[i];
        out->tried++;
        out->failed += t.failed != NULL;
        out->kept += t.kept;
        if (o->progress)
            o->progress(o->progress_user, &t);
        if (t.failed)
            tailor_ctx_clear(ctx);
    }
    for (int i = 0; i < na; i++) {
        free(tmpl[i]);
        free(params[i]);
    }
    return st;
}

/* n timings of the step as it stands. */
static tailor_status time_step_n(tailor_ctx *ctx, tailor_step_timer timer, void *user, double *us,
                                 int n)
{
    tailor_status st = TAILOR_OK;
    for (int i = 0; i < n && st == TAILOR_OK; i++)
        st = timer(ctx, user, &us[i]);
    return st;
}

tailor_status tailor_step_tune(tailor_ctx *ctx, tailor_kernels *set, tailor_cache *cache,
                               tailor_step_kernel *list, int n, tailor_step_timer timer, void *user,
                               const tailor_step_tune_options *opts,
                               tailor_step_tune_result *out)
{
    memset(out, 0, sizeof *out);
    tailor_step_tune_options o = with_defaults(opts);
    qsort(list, (size_t)n, sizeof *list, by_cost);
    /* the margin is at least what the same step varies by from timing to timing */
    double base[NOISE_SAMPLES];
    tailor_status st = time_step_n(ctx, timer, user, base, NOISE_SAMPLES);
    if (st)
        return st;
    out->noise = tailor_step_noise(base, NOISE_SAMPLES);
    out->first_us = median_of(base, NOISE_SAMPLES);
    if (o.margin < out->noise)
        o.margin = out->noise;
    out->margin = o.margin;
    for (int i = 0; i < n && i < o.max_kernels && st == TAILOR_OK; i++) {
        out->kernels++;
        st = tune_kernel(ctx, set, cache, list[i].kernel, timer, user, &o, out);
    }
    double last[NOISE_SAMPLES];
    if (st == TAILOR_OK)
        st = time_step_n(ctx, timer, user, last, NOISE_SAMPLES);
    if (st == TAILOR_OK)
        out->last_us = median_of(last, NOISE_SAMPLES);
    return st;
}
