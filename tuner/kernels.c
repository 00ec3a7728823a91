/* kernels.c — loading cached winners and launching them with named buffers. */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"
#include "space.h"
#include "tuner.h"

#define MEMO_SIZE 32
#define KERNELS_MAX_OPS 64 /* ops whose space hash a set keeps (by index in tailor_op_list) */

typedef struct memo_entry {
    char shape[256];
    tailor_launch launch;
    long long last_use;
} memo_entry;

/* Another configuration of a kernel, loaded beside its winner (tailor_op_kernel_try). While
 * `active`, its space, cfg, k and description are swapped with the kernel's own. */
typedef struct kernel_alt {
    int loaded, active;
    tailor_space *space;
    tailor_config cfg;
    tailor_kernel k;
    char description[512];
    tailor_cache_winner w; /* what the cache gets if it is kept (params, binary: malloc'd) */
} kernel_alt;

struct tailor_op_kernel {
    char op[64];
    char shape[256];      /* tuned shape, canonical */
    tailor_dtype dtype;
    tailor_space *space;  /* the winner's template, to evaluate launches */
    tailor_config cfg;
    tailor_kernel k;
    char description[512];
    memo_entry memo[MEMO_SIZE];
    int nmemo;
    long long clock;
    int nws;              /* workspace buffers, by name, grown as needed */
    char ws_name[TAILOR_SPACE_MAX_WORKSPACE][32];
    CUdeviceptr ws_ptr[TAILOR_SPACE_MAX_WORKSPACE];
    long long ws_bytes[TAILOR_SPACE_MAX_WORKSPACE];
    const tailor_op *opdef;
    tailor_op_buffers bufs; /* names of the op's buffers (for the tuned shape) */
    kernel_alt alt;         /* tailor_op_kernel_try */
    struct tailor_op_kernel *next;
};

struct tailor_kernels {
    tailor_gpu *gpu;
    tailor_cache *cache;
    const tailor_device_info *rehearse;
    int allow_tune;
    int from_cache, tuned;
    tailor_op_kernel *list;
    int strategy, trials; /* on-demand tuning (tailor_kernels_set_strategy) */
    tailor_compile_memo *memo; /* on-demand tuning's compiles, made at the first one */
    uint64_t seed;        /* on-demand tuning's (and its compiling ahead's) */
    tailor_compile_ahead *ahead; /* tailor_kernels_expect's */
    int pdl;              /* tailor_kernels_set_pdl */
    int trace;            /* tailor_kernels_set_trace: winners recompiled with TAILOR_TRACE */
    unsigned generation;  /* bumped whenever a launch would differ (tailor_kernels_generation) */
    char hashes[KERNELS_MAX_OPS][65]; /* each op's space hash ("" until its first lookup) */
};

tailor_status tailor_kernels_create(tailor_ctx *ctx, tailor_gpu *gpu, tailor_cache *cache,
                                    const tailor_device_info *rehearse, int allow_tune,
                                    tailor_kernels **out)
{
    tailor_kernels *set = calloc(1, sizeof *set);
    if (!set)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    set->gpu = gpu;
    set->cache = cache;
    set->rehearse = rehearse;
    set->allow_tune = allow_tune;
    set->strategy = TAILOR_STRATEGY_HALVING;
    set->seed = (uint64_t)time(NULL);
    *out = set;
    return TAILOR_OK;
}

static void alt_drop(tailor_gpu *gpu, kernel_alt *a)
{
    if (a->loaded)
        tailor_gpu_unload_kernel(gpu, &a->k);
    tailor_space_destroy(a->space);
    free(a->w.params_json);
    free(a->w.launch_json);
    free(a->w.binary);
    memset(a, 0, sizeof *a);
}

static void op_kernel_free(tailor_gpu *gpu, tailor_op_kernel *k)
{
    alt_drop(gpu, &k->alt);
    for (int i = 0; i < k->nws; i++)
        tailor_gpu_free(gpu, k->ws_ptr[i]);
    tailor_gpu_unload_kernel(gpu, &k->k);
    tailor_space_destroy(k->space);
    free(k);
}

void tailor_kernels_destroy(tailor_kernels *set)
{
    if (!set)
        return;
    for (tailor_op_kernel *k = set->list, *next; k; k = next) {
        next = k->next;
        op_kernel_free(set->gpu, k);
    }
    tailor_compile_ahead_stop(set->ahead, NULL);
    tailor_compile_memo_destroy(set->memo);
    free(set);
}

/* The options on-demand tuning (and its compiling ahead) runs with: the set's profile,
 * strategy, trials and seed, and its memo, made at the first use (NULL when out of memory: then
 * every survivor compiles). */
static tailor_tune_options on_demand_options(tailor_kernels *set)
{
    if (!set->memo)
        set->memo = tailor_tune_memo_create(set->gpu, set->rehearse);
    tailor_tune_options o;
    memset(&o, 0, sizeof o);
    o.rehearse = set->rehearse;
    o.strategy = (tailor_strategy)set->strategy;
    o.trials = set->trials;
    o.seed = set->seed;
    o.memo = set->memo;
    o.ahead = set->ahead; /* its plans (NULL while it is being started) */
    return o;
}

int tailor_kernels_expect(tailor_kernels *set, const tailor_tune_target *targets, int n,
                          tailor_dtype dtype)
{
    tailor_compile_ahead_stop(set->ahead, NULL);
    set->ahead = NULL;
    if (!set->allow_tune || n < 1)
        return 0;
    tailor_tune_options o = on_demand_options(set);
    set->ahead = tailor_compile_ahead_start(tailor_gpu_info(set->gpu), tailor_cache_path(set->cache),
                                            targets, n, dtype, &o);
    return set->ahead != NULL;
}

void tailor_kernels_set_strategy(tailor_kernels *set, int strategy, int trials)
{
    set->strategy = strategy;
    set->trials = trials;
}

void tailor_kernels_stats(const tailor_kernels *set, int *from_cache, int *tuned)
{
    *from_cache = set->from_cache;
    *tuned = set->tuned;
}

const char *tailor_op_kernel_describe(const tailor_op_kernel *k) { return k->description; }

/* The cache key of (op, completed shape, dtype) on this set's device, found without
 * enumerating a configuration (tailor_plan_key); the op's space hash is computed at the op's
 * first lookup in this set and kept (the templates do not change under a running model). text
 * backs the key's strings. */
static tailor_status lookup_key(tailor_ctx *ctx, tailor_kernels *set, const char *op,
                                const tailor_shape *completed, tailor_dtype dtype,
                                tailor_winner_key_text *text, tailor_cache_key *key)
{
    const tailor_op *const *ops = tailor_op_list();
    int i = 0;
    while (ops[i] && strcmp(ops[i]->name, op) != 0)
        i++;
    if (i >= KERNELS_MAX_OPS)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "op '%s' is past the %d ops "
                                "a kernel set keeps", op, KERNELS_MAX_OPS);
    tailor_shape again;
    tailor_status st = tailor_plan_key(ctx, op, completed, dtype, &again, set->hashes[i]);
    if (st)
        return st;
    return tailor_winner_key(ctx, tailor_gpu_info(set->gpu), set->rehearse, op, completed, dtype,
                             set->hashes[i], text, key);
}

/* The cached winner of (op, completed shape, dtype) on this set's device, if any. */
static tailor_status winner_lookup(tailor_ctx *ctx, tailor_kernels *set, const char *op,
                                   const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_cache_winner *w, int *found, char *shape_text,
                                   size_t shape_size)
{
    tailor_winner_key_text text;
    tailor_cache_key key;
    tailor_shape_format(shape, shape_text, shape_size);
    tailor_status st = lookup_key(ctx, set, op, shape, dtype, &text, &key);
    return st ? st : tailor_cache_get_winner(ctx, set->cache, &key, w, found);
}

/* shape with op's optional keys filled in (tailor_op_complete_shape) into *completed; an
 * unknown op fails naming it. */
static tailor_status complete_shape(tailor_ctx *ctx, const char *op, const tailor_shape *shape,
                                    tailor_shape *completed)
{
    const tailor_op *opdef = tailor_op_find(op);
    if (!opdef)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "op '%s' is unknown", op);
    *completed = *shape;
    return tailor_op_complete_shape(ctx, opdef, completed);
}

void tailor_kernels_count_cached(tailor_kernels *set, const tailor_tune_target *targets, int n,
                                 tailor_dtype dtype, int *cached, int *known)
{
    *cached = *known = 0;
    tailor_ctx *scratch = tailor_ctx_create(); /* a target it cannot key is not an error here */
    for (int i = 0; scratch && i < n; i++) {
        tailor_shape completed;
        if (complete_shape(scratch, targets[i].op, &targets[i].shape, &completed) != TAILOR_OK)
            continue;
        tailor_winner_key_text text;
        tailor_cache_key key;
        int found = 0;
        if (lookup_key(scratch, set, targets[i].op, &completed, dtype, &text, &key) != TAILOR_OK ||
            tailor_cache_has_winner(scratch, set->cache, &key, &found) != TAILOR_OK)
            continue;
        (*known)++;
        *cached += found;
    }
    tailor_ctx_destroy(scratch);
}

const tailor_device_info *tailor_kernels_rehearsal(const tailor_kernels *set)
{
    return set->rehearse;
}

/* The device the set's kernels are compiled and their launches evaluated for: the rehearsed
 * profile, else the live GPU. */
static const tailor_device_info *target_device(const tailor_kernels *set)
{
    return set->rehearse ? set->rehearse : tailor_gpu_info(set->gpu);
}

/* The step trace's form of a winner: its configuration compiled again with TAILOR_TRACE
 * (templates/include/tailor_common.cuh) for the target its binary was made for, and loaded. */
static tailor_status load_traced(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                 const tailor_shape *shape, const tailor_cache_winner *w)
{
    const tailor_device_info *dev = target_device(set);
    tailor_launch launch;
    tailor_status st = tailor_space_evaluate(ctx, k->space, &k->cfg, shape, k->dtype, dev,
                                             TAILOR_EVAL_LAUNCH, &launch);
    if (st)
        return st;
    tailor_define trace = {"TAILOR_TRACE", "1"};
    tailor_compile_result r;
    st = tailor_launch_compile(ctx, w->template_name, &launch, k->dtype,
                               dev->cc_major * 10 + dev->cc_minor, set->rehearse != NULL,
                               w->kernel_name, &trace, 1, NULL, &r);
    if (st == TAILOR_OK)
        st = tailor_gpu_load_kernel(ctx, set->gpu, r.image, w->kernel_name, &k->k);
    tailor_compile_result_free(&r);
    return st;
}

static tailor_status load_winner(tailor_ctx *ctx, tailor_kernels *set, const char *op,
                                 const char *shape_text, tailor_dtype dtype,
                                 const tailor_cache_winner *w, tailor_op_kernel **out)
{
    tailor_op_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    snprintf(k->op, sizeof k->op, "%s", op);
    snprintf(k->shape, sizeof k->shape, "%s", shape_text);
    k->dtype = dtype;
    k->opdef = tailor_op_find(op);
    tailor_shape shape;
    tailor_status st = tailor_shape_parse(ctx, shape_text, &shape);
    if (st == TAILOR_OK)
        st = k->opdef->describe(ctx, &shape, dtype, &k->bufs);
    if (st == TAILOR_OK)
        st = tailor_config_parse_json(ctx, w->params_json, &k->cfg);
    if (st == TAILOR_OK)
        st = tailor_space_load(ctx, w->template_name, &k->space);
    if (st == TAILOR_OK && set->trace)
        st = load_traced(ctx, set, k, &shape, w);
    else if (st == TAILOR_OK)
        st = tailor_gpu_load_kernel(ctx, set->gpu, w->binary, w->kernel_name, &k->k);
    if (st) {
        op_kernel_free(set->gpu, k);
        return st;
    }
    char params[384];
    tailor_config_format(&k->cfg, params, sizeof params);
    snprintf(k->description, sizeof k->description, "%s %s", w->template_name, params);
    k->next = set->list;
    set->list = k;
    *out = k;
    return TAILOR_OK;
}

static int pdl_capable(const tailor_kernels *set)
{
    return tailor_pdl_capable(tailor_gpu_info(set->gpu), target_device(set));
}

void tailor_kernels_set_pdl(tailor_kernels *set, int on)
{
    if (set->pdl != (on != 0))
        set->generation++;
    set->pdl = on != 0;
}

unsigned tailor_kernels_generation(const tailor_kernels *set) { return set->generation; }

void tailor_kernels_set_trace(tailor_kernels *set, int on) { set->trace = on != 0; }

/* ---- the step trace ---------------------------------------------------------------------------
 * Each traced module holds tailor_trace_rec: TRACE_SLOTS records of TRACE_FIELDS words, filled
 * with all-ones by arm and reduced into by every block (tailor_common.cuh says what each word
 * is). */

#define TRACE_SLOTS 4093
#define TRACE_FIELDS 6

static tailor_status trace_buffer(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                  CUdeviceptr *p)
{
    size_t bytes = 0;
    tailor_status st = tailor_gpu_kernel_global(ctx, set->gpu, &k->k, "tailor_trace_rec", p, &bytes);
    if (st == TAILOR_OK && bytes != (size_t)TRACE_SLOTS * TRACE_FIELDS * 8)
        st = tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: its trace records are %zu bytes, not "
                              "%d (tailor_common.cuh and kernels.c disagree)", k->description,
                              bytes, TRACE_SLOTS * TRACE_FIELDS * 8);
    return st;
}

tailor_status tailor_kernels_trace_arm(tailor_ctx *ctx, tailor_kernels *set)
{
    if (!set->trace)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "the kernels were not loaded for a trace "
                                "(tailor_kernels_set_trace before the first kernel)");
    tailor_status st = TAILOR_OK;
    for (tailor_op_kernel *k = set->list; k && st == TAILOR_OK; k = k->next) {
        CUdeviceptr p;
        if ((st = trace_buffer(ctx, set, k, &p)) == TAILOR_OK)
            st = tailor_gpu_memset8(ctx, set->gpu, p, 0xff, (size_t)TRACE_SLOTS * TRACE_FIELDS * 8);
    }
    return st == TAILOR_OK ? tailor_gpu_sync(ctx, set->gpu) : st;
}

static int trace_by_release(const void *a, const void *b)
{
    const tailor_trace_launch *x = a, *y = b;
    return x->release_first < y->release_first ? -1 : x->release_first > y->release_first;
}

double tailor_trace_gap_us(const tailor_trace_launch *t, int n, int i)
{
    if (i < 0 || i + 1 >= n || t[i + 1].release_first < t[i].release_first)
        return 0;
    return (double)(t[i + 1].release_first - t[i].release_first) / 1e3;
}

static int trace_sum_by_gap(const void *a, const void *b)
{
    const tailor_trace_sum *x = a, *y = b;
    return x->gap_us < y->gap_us ? 1 : x->gap_us > y->gap_us ? -1 : 0;
}

void tailor_trace_summarize(const tailor_trace_launch *t, int n, tailor_trace_sum *sums,
                            int *nsums)
{
    int ns = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < ns && sums[j].kernel != t[i].kernel)
            j++;
        if (j == ns)
            sums[ns++] = (tailor_trace_sum){t[i].kernel, t[i].op, t[i].shape, t[i].description,
                                            0, 0};
        sums[j].launches++;
        sums[j].gap_us += tailor_trace_gap_us(t, n, i);
    }
    qsort(sums, (size_t)ns, sizeof *sums, trace_sum_by_gap);
    *nsums = ns;
}

tailor_status tailor_kernels_trace_read(tailor_ctx *ctx, tailor_kernels *set,
                                        tailor_trace_launch **out, int *count)
{
    *out = NULL;
    *count = 0;
    size_t words = (size_t)TRACE_SLOTS * TRACE_FIELDS;
    unsigned long long *rec = malloc(words * sizeof *rec);
    tailor_trace_launch *list = NULL;
    int n = 0, cap = 0;
    tailor_status st = rec ? tailor_gpu_sync(ctx, set->gpu)
                           : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    for (tailor_op_kernel *k = set->list; k && st == TAILOR_OK; k = k->next) {
        CUdeviceptr p;
        if ((st = trace_buffer(ctx, set, k, &p)) ||
            (st = tailor_gpu_download(ctx, set->gpu, rec, p, words * sizeof *rec)))
            break;
        for (int i = 0; i < TRACE_SLOTS && st == TAILOR_OK; i++) {
            const unsigned long long *r = &rec[(size_t)i * TRACE_FIELDS];
            if (r[1] == ~0ull)
                continue; /* no launch of this module had this slot */
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                tailor_trace_launch *grown = realloc(list, (size_t)cap * sizeof *list);
                if (!grown) {
                    st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
                    break;
                }
                list = grown;
            }
            tailor_trace_launch *e = &list[n++];
            e->kernel = k;
            e->op = k->op;
            e->shape = k->shape;
            e->description = k->description;
            e->arrive = r[0];
            e->release_first = r[1];
            e->release_last = ~r[2];
            e->blocks = (long long)(r[5] + 1);
            e->shared_slot = r[3] != ~r[4];
        }
    }
    free(rec);
    if (st) {
        free(list);
        return st;
    }
    qsort(list, (size_t)n, sizeof *list, trace_by_release);
    *out = list;
    *count = n;
    return TAILOR_OK;
}

tailor_status tailor_kernels_get(tailor_ctx *ctx, tailor_kernels *set, const char *op,
                                 const tailor_shape *shape, tailor_dtype dtype,
                                 tailor_op_kernel **out)
{
    tailor_shape completed;
    tailor_status st = complete_shape(ctx, op, shape, &completed);
    if (st)
        return st;
    char shape_text[256];
    tailor_shape_format(&completed, shape_text, sizeof shape_text);
    for (tailor_op_kernel *k = set->list; k; k = k->next) {
        if (strcmp(k->op, op) == 0 && strcmp(k->shape, shape_text) == 0 && k->dtype == dtype) {
            *out = k;
            return TAILOR_OK;
        }
    }
    tailor_cache_winner w;
    int found = 0;
    st = winner_lookup(ctx, set, op, &completed, dtype, &w, &found, shape_text, sizeof shape_text);
    if (st)
        return st;
    if (!found) {
        if (!set->allow_tune)
            return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                                    "no tuned kernel for %s %s %s in the cache (run tailor tune)",
                                    op, shape_text, tailor_dtype_name(dtype));
        tailor_log(ctx, TAILOR_LOG_INFO, "tuning %s %s %s on demand (not in the cache)", op,
                   shape_text, tailor_dtype_name(dtype));
        tailor_tune_options o = on_demand_options(set);
        tailor_tune_result r;
        if ((st = tailor_tune(ctx, set->gpu, set->cache, op, &completed, dtype, &o, &r)))
            return st;
        set->tuned++;
        st = winner_lookup(ctx, set, op, &completed, dtype, &w, &found, shape_text,
                           sizeof shape_text);
        if (st == TAILOR_OK && !found)
            st = tailor_set_error(ctx, TAILOR_ERR_SQLITE, "the winner of %s %s vanished from the "
                                  "cache", op, shape_text);
        if (st)
            return st;
    } else {
        set->from_cache++;
    }
    st = load_winner(ctx, set, op, shape_text, dtype, &w, out);
    tailor_cache_winner_free(&w);
    return st;
}

/* ---- another configuration in place of the winner ------------------------------------------ */

tailor_status tailor_op_kernel_key(tailor_ctx *ctx, tailor_kernels *set, const tailor_op_kernel *k,
                                   tailor_op_kernel_keybuf *out)
{
    tailor_shape shape;
    tailor_status st = tailor_shape_parse(ctx, k->shape, &shape);
    return st ? st : lookup_key(ctx, set, k->op, &shape, k->dtype, &out->text, &out->key);
}

const char *tailor_op_kernel_op(const tailor_op_kernel *k) { return k->op; }

const char *tailor_op_kernel_shape(const tailor_op_kernel *k) { return k->shape; }

void tailor_op_kernel_config_json(const tailor_op_kernel *k, char *buf, size_t size)
{
    tailor_config_json(&k->cfg, buf, size);
}

const char *tailor_op_kernel_template(const tailor_op_kernel *k)
{
    return tailor_space_name(k->space);
}

/* (space, cfg)'s launch at the shape `shape_text` on the set's target (at_launch: as a launch,
 * else as the tuner planned it); one it cannot run is TAILOR_ERR_MISUSE saying why. */
static tailor_status fit_at(tailor_ctx *ctx, const tailor_kernels *set, tailor_space *space,
                            const tailor_config *cfg, tailor_dtype dtype, const char *shape_text,
                            int at_launch, tailor_launch *launch)
{
    tailor_shape shape;
    tailor_status st = tailor_shape_parse(ctx, shape_text, &shape);
    if (st == TAILOR_OK)
        st = tailor_space_evaluate(ctx, space, cfg, &shape, dtype, target_device(set), at_launch,
                                   launch);
    if (st == TAILOR_OK && !launch->valid)
        st = tailor_set_error(ctx, TAILOR_ERR_MISUSE, "it cannot run shape %s: %s", shape_text,
                              launch->invalid_reason);
    return st;
}

/* The alternative must run every shape k launches now (those in its launch memo: up to
 * MEMO_SIZE, since its last swap) as k does: one that would fall back to another kernel at one
 * of them is not what the caller means to time. */
static tailor_status alt_fits_launched(tailor_ctx *ctx, const tailor_kernels *set,
                                       tailor_op_kernel *k)
{
    tailor_status st = TAILOR_OK;
    for (int i = 0; i < k->nmemo && st == TAILOR_OK; i++) {
        tailor_launch l;
        if (k->memo[i].launch.valid) /* where k's own falls back, so may it */
            st = fit_at(ctx, set, k->alt.space, &k->alt.cfg, k->dtype, k->memo[i].shape, 1, &l);
    }
    return st;
}

/* alt's cache record: (template, params) compiled for the set's target at k's tuned shape, once
 * it is known to fit there and at every shape k launches. */
static tailor_status alt_compile(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                 const char *template_name, const char *params_json)
{
    kernel_alt *a = &k->alt;
    const tailor_device_info *dev = target_device(set);
    const int sm = dev->cc_major * 10 + dev->cc_minor, ptx = set->rehearse != NULL;
    tailor_launch launch;
    tailor_status st = tailor_config_parse_json(ctx, params_json, &a->cfg);
    if (st == TAILOR_OK)
        st = tailor_space_load(ctx, template_name, &a->space);
    if (st == TAILOR_OK)
        st = fit_at(ctx, set, a->space, &a->cfg, k->dtype, k->shape, 0, &launch);
    if (st == TAILOR_OK)
        st = alt_fits_launched(ctx, set, k);
    if (st)
        return st;
    tailor_cache_winner *w = &a->w;
    snprintf(w->template_name, sizeof w->template_name, "%s", template_name);
    tailor_gen_kernel_name(k->op, template_name, sm, tailor_dtype_name(k->dtype), launch.defines,
                           launch.ndefines, w->kernel_name, sizeof w->kernel_name);
    char lj[512];
    tailor_launch_json(&launch, lj, sizeof lj);
    w->params_json = strdup(params_json);
    w->launch_json = strdup(lj);
    if (!w->params_json || !w->launch_json)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    tailor_compile_result r;
    st = tailor_launch_compile(ctx, template_name, &launch, k->dtype, sm, ptx, w->kernel_name,
                               NULL, 0, NULL, &r);
    if (st == TAILOR_OK) {
        w->binary = r.image; /* taken over */
        w->binary_size = r.image_size;
        r.image = NULL;
        snprintf(w->binary_kind, sizeof w->binary_kind, "%s", ptx ? "ptx" : "cubin");
        snprintf(w->arch, sizeof w->arch, "%s_%d", ptx ? "compute" : "sm", sm);
    }
    tailor_compile_result_free(&r);
    return st;
}

tailor_status tailor_op_kernel_try(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                   const char *template_name, const char *params_json)
{
    if (k->alt.loaded || k->alt.space)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s %s: another configuration is already "
                                "being tried", k->op, k->shape);
    if (set->trace)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "configurations cannot be tried in a "
                                "traced kernel set");
    tailor_op_kernel_keybuf kb;
    tailor_status st = alt_compile(ctx, set, k, template_name, params_json);
    if (st == TAILOR_OK)
        st = tailor_op_kernel_key(ctx, set, k, &kb);
    if (st == TAILOR_OK)
        st = tailor_tuner_verify_winner(ctx, set->gpu, &kb.key, &k->alt.w);
    if (st == TAILOR_OK)
        st = tailor_gpu_load_kernel(ctx, set->gpu, k->alt.w.binary, k->alt.w.kernel_name,
                                    &k->alt.k);
    if (st) {
        alt_drop(set->gpu, &k->alt);
        return tailor_wrap_error(ctx, "trying %s %s for %s %s", template_name, params_json, k->op,
                                 k->shape);
    }
    char params[384];
    tailor_config_format(&k->alt.cfg, params, sizeof params);
    snprintf(k->alt.description, sizeof k->alt.description, "%s %s", template_name, params);
    k->alt.loaded = 1;
    return TAILOR_OK;
}

/* Exchanges the kernel's configuration with its alternative's; launches re-evaluate geometry. */
static void alt_swap(tailor_kernels *set, tailor_op_kernel *k)
{
    kernel_alt *a = &k->alt;
    tailor_space *space = k->space;
    k->space = a->space;
    a->space = space;
    tailor_config cfg = k->cfg;
    k->cfg = a->cfg;
    a->cfg = cfg;
    tailor_kernel kk = k->k;
    k->k = a->k;
    a->k = kk;
    char d[sizeof k->description];
    memcpy(d, k->description, sizeof d);
    memcpy(k->description, a->description, sizeof d);
    memcpy(a->description, d, sizeof d);
    a->active = !a->active;
    k->nmemo = 0; /* launch geometry is the space's: evaluated again */
    set->generation++;
}

void tailor_op_kernel_use_try(tailor_kernels *set, tailor_op_kernel *k, int on)
{
    if (k->alt.loaded && (on != 0) != k->alt.active)
        alt_swap(set, k);
}

tailor_status tailor_op_kernel_settle(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                      int keep, double median_us)
{
    if (!k->alt.loaded)
        return TAILOR_OK;
    tailor_status st = TAILOR_OK;
    if (keep) {
        tailor_op_kernel_keybuf kb;
        tailor_cache_winner old;
        int found = 0;
        st = tailor_op_kernel_key(ctx, set, k, &kb);
        if (st == TAILOR_OK)
            st = tailor_cache_get_winner(ctx, set->cache, &kb.key, &old, &found);
        if (st == TAILOR_OK && found) {
            k->alt.w.n_trials = old.n_trials;
            tailor_cache_winner_free(&old);
        }
        k->alt.w.median_us = median_us;
        k->alt.w.tuned_at = (long long)time(NULL);
        k->alt.w.chosen_in_step = 1;
        if (st == TAILOR_OK)
            st = tailor_cache_put_winner(ctx, set->cache, &kb.key, &k->alt.w);
    }
    tailor_op_kernel_use_try(set, k, keep && st == TAILOR_OK);
    alt_drop(set->gpu, &k->alt); /* now the configuration that lost */
    return st;
}

/* The memo entry of `text`, or NULL. */
static memo_entry *memo_find(tailor_op_kernel *k, const char *text)
{
    for (int i = 0; i < k->nmemo; i++)
        if (strcmp(k->memo[i].shape, text) == 0)
            return &k->memo[i];
    return NULL;
}

/* A free entry, or the least recently used one. */
static memo_entry *memo_claim(tailor_op_kernel *k)
{
    if (k->nmemo < MEMO_SIZE)
        return &k->memo[k->nmemo++];
    int slot = 0;
    for (int i = 1; i < k->nmemo; i++)
        if (k->memo[i].last_use < k->memo[slot].last_use)
            slot = i;
    return &k->memo[slot];
}

/* k's launch geometry at `actual`, evaluated once per shape: a shape the configuration cannot
 * run is remembered too (the runtime falls back to that shape's own winner), so no launch
 * evaluates the space twice. */
static tailor_status launch_for(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                const tailor_shape *actual, const tailor_launch **out)
{
    char text[256];
    tailor_shape completed = *actual; /* the op's defaults for keys the caller left out */
    tailor_status st = tailor_op_complete_shape(ctx, k->opdef, &completed);
    if (st)
        return st;
    tailor_shape_format(&completed, text, sizeof text);
    memo_entry *e = memo_find(k, text);
    if (!e) {
        tailor_launch l;
        const tailor_device_info *dev = target_device(set);
        st = tailor_space_evaluate(ctx, k->space, &k->cfg, &completed, k->dtype, dev,
                                   TAILOR_EVAL_LAUNCH, &l);
        if (st)
            return st;
        e = memo_claim(k);
        e->launch = l;
        snprintf(e->shape, sizeof e->shape, "%s", text);
    }
    e->last_use = ++k->clock;
    if (!e->launch.valid)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s cannot run shape %s: %s",
                                k->description, text, e->launch.invalid_reason);
    *out = &e->launch;
    return TAILOR_OK;
}

static tailor_status workspace_ptr(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                   const char *name, long long bytes, CUdeviceptr *out)
{
    int i = 0;
    while (i < k->nws && strcmp(k->ws_name[i], name) != 0)
        i++;
    if (i == k->nws) {
        if (k->nws == TAILOR_SPACE_MAX_WORKSPACE)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "too many workspace buffers");
        snprintf(k->ws_name[i], sizeof k->ws_name[i], "%s", name);
        k->nws++;
    }
    if (bytes > k->ws_bytes[i]) { /* grow; zeroed once */
        tailor_gpu_free(set->gpu, k->ws_ptr[i]);
        k->ws_ptr[i] = 0;
        k->ws_bytes[i] = 0;
        tailor_status st = tailor_gpu_alloc(ctx, set->gpu, (size_t)bytes, &k->ws_ptr[i]);
        if (st == TAILOR_OK)
            st = tailor_gpu_memset8(ctx, set->gpu, k->ws_ptr[i], 0, (size_t)bytes);
        if (st)
            return st;
        k->ws_bytes[i] = bytes;
    }
    *out = k->ws_ptr[i];
    return TAILOR_OK;
}

tailor_status tailor_op_kernel_launch(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                      const tailor_shape *shape, const tailor_binding *bindings,
                                      int nbindings)
{
    const tailor_launch *l = NULL;
    tailor_status st = launch_for(ctx, set, k, shape, &l);
    if (st)
        return st;
    void *ptrs[TAILOR_SPACE_MAX_ARGS];
    union {
        CUdeviceptr p;
        int32_t i32;
        int64_t i64;
        float f32;
    } values[TAILOR_SPACE_MAX_ARGS];
    for (int a = 0; a < l->nargs; a++) {
        const tailor_arg *arg = &l->args[a];
        switch (arg->kind) {
        case TAILOR_ARG_BUFFER: {
            int found = 0;
            for (int b = 0; b < nbindings && !found; b++) {
                if (strcmp(bindings[b].name, arg->name) == 0) {
                    values[a].p = bindings[b].ptr;
                    found = 1;
                }
            }
            for (int w = 0; w < l->nworkspace && !found; w++) {
                if (strcmp(l->workspace[w].name, arg->name) == 0) {
                    if ((st = workspace_ptr(ctx, set, k, arg->name, l->workspace[w].bytes,
                                            &values[a].p)))
                        return st;
                    found = 1;
                }
            }
            if (!found)
                return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                        "launching %s: no buffer bound to '%s'", k->description,
                                        arg->name);
            break;
        }
        case TAILOR_ARG_I32: values[a].i32 = (int32_t)arg->i; break;
        case TAILOR_ARG_I64: values[a].i64 = (int64_t)arg->i; break;
        case TAILOR_ARG_F32: values[a].f32 = (float)arg->f; break;
        }
        ptrs[a] = &values[a];
    }
    k->k.pdl = set->pdl && pdl_capable(set);
    return tailor_gpu_launch(ctx, set->gpu, &k->k, l->grid, l->block, (unsigned)l->smem_dynamic,
                             ptrs);
}
