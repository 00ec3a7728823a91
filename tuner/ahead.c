/* ahead.c — compiling ahead of a tuning run (tailor_compile_ahead, tuner.h).
 *
 * tailor_tune takes one target at a time: it compiles its candidates in parallel, then checks
 * and times them on the GPU while the CPU waits. With few candidates a target (a test's random
 * two, the runtime's on-demand tuning) the CPU's cores sit idle, and with many the GPU waits for
 * each target's compiles. Here a planner thread walks the same targets in the same order,
 * skips those with a cached winner, and queues the very candidates tailor_tune will pick
 * (tune_pick, same seed); worker threads compile them into the run's memo. tailor_tune then
 * finds each one compiled, or waits for the compile in flight (gen/memo.c), instead of
 * compiling it again. Nothing here touches the GPU or writes the cache. */
#include "tuner.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#endif

#include "gen.h"
#include "plan.h"
#include "tune_internal.h"

/* AHEAD_ENTRIES_HELD: the survivors' entries of the plans kept for tailor_tune to take
 * (tailor_compile_ahead_take_plan) at once, ~10 KB each: ~40 MB, every plan of an E2B or E4B
 * first boot (3,750 and 4,142 survivors on sm_90). A plan past it is freed, and tailor_tune
 * builds it again. */
enum { AHEAD_MAX_OPS = 64, AHEAD_NICE = 10, AHEAD_ENTRIES_HELD = 4096 };

/* One instantiation to compile: what tailor_plan_compile would take from the plan entry. */
typedef struct ahead_job {
    char template_name[64];
    tailor_launch launch;
    char kernel_name[256];
} ahead_job;

struct tailor_compile_ahead {
    /* what the planner reads; fixed at start */
    tailor_device_info live, rehearse;
    int has_rehearse;
    tailor_tune_target *targets;
    int ntargets;
    tailor_dtype dtype;
    tailor_tune_options opts;
    char cache_path[1024];
    int sm, ptx;

    pthread_mutex_t lock;
    pthread_cond_t work; /* a job queued, the planner done, or a stop */
    tailor_plan *plans;  /* [ntargets]: the planner's plan of target i, held for tailor_tune */
    unsigned char *held; /* [ntargets]: 1 while plans[i] waits to be taken */
    int held_entries;    /* entries of the plans held */
    ahead_job **jobs;    /* queued in target order; a worker takes the next */
    int njobs, cap, next;
    int planned_all;     /* the planner finished */
    int stop;
    tailor_compile_ahead_stats stats;

    pthread_t planner;
    pthread_t workers[64];
    int nworkers, planner_started;
};

/* Queues a job; 0 when out of memory (the rest then compiles in tailor_tune, as without). */
static int queue_job(tailor_compile_ahead *a, ahead_job *job)
{
    pthread_mutex_lock(&a->lock);
    int ok = 1;
    if (a->njobs == a->cap) {
        int cap = a->cap ? 2 * a->cap : 256;
        ahead_job **jobs = realloc(a->jobs, (size_t)cap * sizeof *jobs);
        ok = jobs != NULL;
        if (ok) {
            a->jobs = jobs;
            a->cap = cap;
        }
    }
    if (ok) {
        a->jobs[a->njobs++] = job;
        a->stats.queued++;
        pthread_cond_signal(&a->work);
    }
    pthread_mutex_unlock(&a->lock);
    return ok;
}

static int stopping(tailor_compile_ahead *a)
{
    pthread_mutex_lock(&a->lock);
    int s = a->stop;
    pthread_mutex_unlock(&a->lock);
    return s;
}

/* An op's space hash, computed once a run (it depends only on the template files). */
typedef struct op_hash {
    char op[64];
    char hex[65];
} op_hash;

static const char *space_hash_of(tailor_ctx *ctx, op_hash *memo, int *n, const char *op)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(memo[i].op, op) == 0)
            return memo[i].hex;
    if (*n == AHEAD_MAX_OPS)
        return NULL;
    op_hash *e = &memo[*n];
    if (tailor_plan_space_hash(ctx, op, e->hex) != TAILOR_OK)
        return NULL;
    snprintf(e->op, sizeof e->op, "%s", op);
    (*n)++;
    return e->hex;
}

/* 1 when the cache has the target's winner, found by its key alone (no configuration
 * enumerated: a warm start plans nothing here). Read through the planner's own connection; any
 * error reads as "not cached": compiling ahead what was cached costs time, never results. */
static int cached(tailor_ctx *ctx, tailor_compile_ahead *a, tailor_cache *cache, op_hash *memo,
                  int *nmemo, const tailor_tune_target *t)
{
    if (!cache || !tune_uses_cache(&a->opts))
        return 0;
    const tailor_op *op = tailor_op_find(t->op);
    tailor_shape shape = t->shape;
    const char *hash = space_hash_of(ctx, memo, nmemo, t->op);
    if (!op || !hash || tailor_op_complete_shape(ctx, op, &shape) != TAILOR_OK)
        return 0;
    tailor_winner_key_text text;
    tailor_cache_key key;
    if (tailor_winner_key(ctx, &a->live, a->has_rehearse ? &a->rehearse : NULL, t->op, &shape,
                          a->dtype, hash, &text, &key) != TAILOR_OK)
        return 0; /* a malformed TAILOR_CARVEOUT: tailor_tune names it */
    int found = 0;
    return tailor_cache_has_winner(ctx, cache, &key, &found) == TAILOR_OK && found;
}

/* Keeps target i's plan for tailor_tune to take while the plans held stay within
 * AHEAD_ENTRIES_HELD entries; 0 when not kept (the caller frees it). */
static int hold_plan(tailor_compile_ahead *a, int i, tailor_plan *plan)
{
    pthread_mutex_lock(&a->lock);
    int keep = a->held_entries + plan->nentries <= AHEAD_ENTRIES_HELD && !a->stop;
    if (keep) {
        a->plans[i] = *plan;
        a->held[i] = 1;
        a->held_entries += plan->nentries;
    }
    pthread_mutex_unlock(&a->lock);
    return keep;
}

/* Queues the candidates tailor_tune will try for one target without a cached winner, and holds
 * its plan for tailor_tune. */
static void plan_target(tailor_ctx *ctx, tailor_compile_ahead *a, tailor_cache *cache,
                        op_hash *memo, int *nmemo, int target)
{
    const tailor_tune_target *t = &a->targets[target];
    if (cached(ctx, a, cache, memo, nmemo, t))
        return;
    const tailor_device_info *dev = a->has_rehearse ? &a->rehearse : &a->live;
    tailor_plan plan;
    if (tailor_plan_build_survivors(ctx, dev, t->op, &t->shape, a->dtype, &plan) != TAILOR_OK)
        return; /* tailor_tune reports it */
    int survivors = tailor_plan_survivors(&plan);
    int *idx = survivors ? calloc((size_t)survivors, sizeof *idx) : NULL;
    if (idx) {
        pthread_mutex_lock(&a->lock);
        a->stats.targets++;
        pthread_mutex_unlock(&a->lock);
        int n = tune_pick(&plan, &a->opts, idx);
        for (int i = 0; i < n; i++) {
            const tailor_plan_entry *e = &plan.entries[idx[i]];
            ahead_job *job = malloc(sizeof *job);
            if (!job)
                break;
            snprintf(job->template_name, sizeof job->template_name, "%s", e->template_name);
            job->launch = e->launch;
            tailor_gen_kernel_name(t->op, e->template_name, a->sm, tailor_dtype_name(a->dtype),
                                   e->launch.defines, e->launch.ndefines, job->kernel_name,
                                   sizeof job->kernel_name);
            if (!queue_job(a, job)) {
                free(job);
                break;
            }
        }
    }
    free(idx);
    if (!hold_plan(a, target, &plan))
        tailor_plan_free(&plan);
}

/* The ahead threads yield to the tuning thread: what it does between compiles (a target's plan,
 * its C reference, the checks' compares, the launches) is the GPU's critical path, and beside
 * 16 compile threads at the same priority a first boot's plan and reference phases took 30-40 %
 * longer. Linux sets a nice value per thread; elsewhere nothing changes. */
static void yield_to_tuning(void)
{
#ifdef __linux__
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), AHEAD_NICE);
#endif
}

static void *planner_main(void *arg)
{
    tailor_compile_ahead *a = arg;
    yield_to_tuning();
    tailor_ctx *ctx = tailor_ctx_create();
    tailor_cache *cache = NULL;
    if (ctx && a->cache_path[0] &&
        tailor_cache_open_readonly(ctx, a->cache_path, &cache) != TAILOR_OK)
        cache = NULL; /* a cache not written yet: everything is missing */
    op_hash memo[AHEAD_MAX_OPS];
    int nmemo = 0;
    for (int i = 0; ctx && i < a->ntargets && !stopping(a); i++)
        plan_target(ctx, a, cache, memo, &nmemo, i);
    tailor_cache_close(cache);
    tailor_ctx_destroy(ctx);
    pthread_mutex_lock(&a->lock);
    a->planned_all = 1;
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* The next job, or NULL when there is none left and none will come (or a stop). A memo past
 * three quarters full stops the compiling ahead: what it would keep no longer fits, and the
 * tuner's own compiles need the room. */
static ahead_job *take_job(tailor_compile_ahead *a)
{
    pthread_mutex_lock(&a->lock);
    ahead_job *job = NULL;
    for (;;) {
        if (a->stop)
            break;
        if (a->next < a->njobs) {
            job = a->jobs[a->next];
            a->jobs[a->next++] = NULL;
            break;
        }
        if (a->planned_all)
            break;
        pthread_cond_wait(&a->work, &a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    if (job) {
        int hits, misses;
        size_t bytes;
        tailor_compile_memo_stats(a->opts.memo, &hits, &misses, &bytes);
        if (bytes > tailor_compile_memo_capacity(a->opts.memo) / 4 * 3) {
            free(job);
            pthread_mutex_lock(&a->lock);
            a->stop = 1;
            a->stats.full = 1;
            pthread_cond_broadcast(&a->work);
            pthread_mutex_unlock(&a->lock);
            job = NULL;
        }
    }
    return job;
}

static void *worker_main(void *arg)
{
    tailor_compile_ahead *a = arg;
    yield_to_tuning();
    ahead_job *job;
    while ((job = take_job(a)) != NULL) {
        tailor_ctx *ctx = tailor_ctx_create();
        tailor_compile_result r;
        memset(&r, 0, sizeof r);
        tailor_status st = ctx ? tailor_launch_compile(ctx, job->template_name, &job->launch,
                                                       a->dtype, a->sm, a->ptx, job->kernel_name,
                                                       NULL, 0, a->opts.memo, &r)
                               : TAILOR_ERR_NOMEM;
        pthread_mutex_lock(&a->lock);
        if (st == TAILOR_OK && r.reused)
            a->stats.reused++;
        else if (st == TAILOR_OK)
            a->stats.compiled++;
        else
            a->stats.failed++;
        pthread_mutex_unlock(&a->lock);
        tailor_compile_result_free(&r);
        tailor_ctx_destroy(ctx);
        free(job);
    }
    return NULL;
}

tailor_compile_ahead *tailor_compile_ahead_start(const tailor_device_info *live,
                                                 const char *cache_path,
                                                 const tailor_tune_target *targets, int n,
                                                 tailor_dtype dtype,
                                                 const tailor_tune_options *opts)
{
    if (!opts->memo || n < 1 || tune_no_compile())
        return NULL;
    tailor_compile_ahead *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->targets = malloc((size_t)n * sizeof *targets);
    a->plans = calloc((size_t)n, sizeof *a->plans);
    a->held = calloc((size_t)n, 1);
    int locked = 0;
    if (!a->targets || !a->plans || !a->held ||
        !(locked = pthread_mutex_init(&a->lock, NULL) == 0) ||
        pthread_cond_init(&a->work, NULL) != 0) {
        if (locked)
            pthread_mutex_destroy(&a->lock);
        free(a->targets);
        free(a->plans);
        free(a->held);
        free(a);
        return NULL;
    }
    memcpy(a->targets, targets, (size_t)n * sizeof *targets);
    a->ntargets = n;
    a->live = *live;
    a->has_rehearse = opts->rehearse != NULL;
    if (opts->rehearse)
        a->rehearse = *opts->rehearse;
    a->dtype = dtype;
    a->opts = *opts;
    a->opts.rehearse = NULL; /* the copy above is what the threads read */
    a->opts.progress = NULL;
    a->opts.ahead = NULL;
    snprintf(a->cache_path, sizeof a->cache_path, "%s", cache_path ? cache_path : "");
    tune_arch(live, opts->rehearse, &a->sm, &a->ptx);
    a->planner_started = pthread_create(&a->planner, NULL, planner_main, a) == 0;
    if (!a->planner_started) {
        tailor_compile_ahead_stop(a, NULL);
        return NULL;
    }
    int jobs = opts->jobs > 0 ? opts->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    jobs = jobs < 1 ? 1 : jobs > 64 ? 64 : jobs;
    for (int i = 0; i < jobs; i++)
        if (pthread_create(&a->workers[a->nworkers], NULL, worker_main, a) == 0)
            a->nworkers++;
    return a;
}

static int same_shape(const tailor_shape *x, const tailor_shape *y)
{
    if (x->count != y->count)
        return 0;
    for (int i = 0; i < x->count; i++)
        if (x->dims[i].value != y->dims[i].value || strcmp(x->dims[i].key, y->dims[i].key) != 0)
            return 0;
    return 1;
}

int tailor_compile_ahead_take_plan(tailor_compile_ahead *a, const char *op,
                                   const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_plan *out)
{
    if (!a || dtype != a->dtype)
        return 0;
    int taken = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < a->ntargets && !taken; i++)
        if (a->held[i] && strcmp(a->targets[i].op, op) == 0 &&
            same_shape(&a->targets[i].shape, shape)) {
            *out = a->plans[i];
            a->held[i] = 0;
            a->held_entries -= out->nentries;
            taken = 1;
        }
    pthread_mutex_unlock(&a->lock);
    return taken;
}

void tailor_compile_ahead_wait(tailor_compile_ahead *a)
{
    if (!a)
        return;
    if (a->planner_started)
        pthread_join(a->planner, NULL);
    a->planner_started = 0;
    for (int i = 0; i < a->nworkers; i++)
        pthread_join(a->workers[i], NULL);
    a->nworkers = 0;
}

void tailor_compile_ahead_stop(tailor_compile_ahead *a, tailor_compile_ahead_stats *stats)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
    tailor_compile_ahead_wait(a);
    if (stats)
        *stats = a->stats;
    for (int i = a->next; i < a->njobs; i++)
        free(a->jobs[i]);
    free(a->jobs);
    for (int i = 0; i < a->ntargets; i++)
        if (a->held[i])
            tailor_plan_free(&a->plans[i]);
    free(a->plans);
    free(a->held);
    pthread_cond_destroy(&a->work);
    pthread_mutex_destroy(&a->lock);
    free(a->targets);
    free(a);
}
