/* tune.c — the tuning loop: plan, compile in parallel, check, time, choose, cache. */
#include "tuner.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gen.h"
#include "instance.h"
#include "registry.h"
#include "tune_internal.h"

static const char *const strategy_names[] = {"exhaustive", "random", "halving"};
#define NSTRATEGIES ((int)(sizeof strategy_names / sizeof strategy_names[0]))

tailor_status tailor_strategy_parse(tailor_ctx *ctx, const char *text, tailor_strategy *out)
{
    for (int i = 0; i < NSTRATEGIES; i++) {
        if (strcmp(text, strategy_names[i]) == 0) {
            *out = (tailor_strategy)i;
            return TAILOR_OK;
        }
    }
    return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                            "strategy '%s' is unknown (use exhaustive, random or halving)", text);
}

const char *tailor_strategy_name(tailor_strategy s)
{
    return (int)s >= 0 && (int)s < NSTRATEGIES ? strategy_names[s] : "unknown";
}

/* The carveout part of a key's fingerprint into buf: "" under TAILOR_DEFAULT_CARVEOUT (so that
 * winners tuned before the carveout was part of the key keep matching), else
 * "|carveout=driver" or "|carveout=P". A malformed TAILOR_CARVEOUT fails naming it. */
static tailor_status carveout_suffix(tailor_ctx *ctx, char *buf, size_t size)
{
    int pct;
    buf[0] = '\0';
    tailor_status st = tailor_carveout_read(ctx, &pct);
    if (st != TAILOR_OK || pct == TAILOR_DEFAULT_CARVEOUT)
        return st;
    if (pct < 0)
        snprintf(buf, size, "%sdriver", TAILOR_FINGERPRINT_CARVEOUT);
    else
        snprintf(buf, size, "%s%d", TAILOR_FINGERPRINT_CARVEOUT, pct);
    return TAILOR_OK;
}

tailor_status tailor_tuner_fingerprint(tailor_ctx *ctx, const tailor_device_info *live,
                                       const tailor_device_info *rehearse, char *buf, size_t size)
{
    char fp[512], carveout[32];
    if (size)
        buf[0] = '\0';
    tailor_status st = carveout_suffix(ctx, carveout, sizeof carveout);
    if (st != TAILOR_OK)
        return st;
    tailor_device_fingerprint(live, fp, sizeof fp);
    if (rehearse)
        snprintf(buf, size, "rehearse:%s@%s%s", rehearse->short_name, fp, carveout);
    else
        snprintf(buf, size, "%s%s", fp, carveout);
    return TAILOR_OK;
}

int tailor_tuner_fingerprint_on(const char *key_fp, const char *device_fp)
{
    if (strncmp(key_fp, "rehearse:", 9) == 0) {
        const char *at = strchr(key_fp, '@');
        if (!at)
            return 0;
        key_fp = at + 1;
    }
    size_t n = strlen(device_fp);
    return strncmp(key_fp, device_fp, n) == 0 &&
           (key_fp[n] == '\0' || strncmp(key_fp + n, TAILOR_FINGERPRINT_CARVEOUT,
                                          strlen(TAILOR_FINGERPRINT_CARVEOUT)) == 0);
}

tailor_status tailor_winner_key(tailor_ctx *ctx, const tailor_device_info *live,
                                const tailor_device_info *rehearse, const char *op,
                                const tailor_shape *completed, tailor_dtype dtype,
                                const char *space_hash, tailor_winner_key_text *text,
                                tailor_cache_key *key)
{
    tailor_status st =
        tailor_tuner_fingerprint(ctx, live, rehearse, text->fingerprint, sizeof text->fingerprint);
    tailor_shape_format(completed, text->shape, sizeof text->shape);
    snprintf(text->space_hash, sizeof text->space_hash, "%s", space_hash);
    *key = (tailor_cache_key){text->fingerprint, op, text->shape, tailor_dtype_name(dtype),
                              text->space_hash};
    return st;
}

/* ---- one candidate ---------------------------------------------------------------------- */

typedef enum cand_state {
    CAND_PENDING = 0,
    CAND_COMPILED,
    CAND_COMPILE_ERROR,
    CAND_REFUSED,      /* after compiling: registers or a space defect */
    CAND_LAUNCH_ERROR,
    CAND_WRONG,
    CAND_TIMED,
    CAND_SKIPPED       /* a failure recorded by an earlier run (resume) */
} cand_state;

typedef struct candidate {
    const tailor_plan_entry *entry;
    char kernel_name[256];
    tailor_compile_result compiled;
    cand_state state;
    char detail[1024];
    double median_us, spread_us;
    char params_json[512];
    int recorded;          /* its trial is in the cache already */
    int blocks_per_sm;     /* resident blocks an SM as loaded (its carveout too); 0: unknown */
} candidate;

typedef struct compile_job {
    candidate *cands;
    int count;
    int next;                 /* guarded by lock: the next candidate to hand out */
    int done;                 /* guarded by lock: candidates finished (compiled, failed, skipped) */
    pthread_mutex_t lock;
    pthread_cond_t finished;  /* signalled as each candidate finishes */
    int sm;
    int ptx;
    const tailor_plan *plan;
    double deadline;          /* 0: none */
    tailor_compile_memo *memo; /* the run's compiled instantiations (may be NULL) */
} compile_job;

static void compile_one(compile_job *job, candidate *c)
{
    tailor_ctx *ctx = tailor_ctx_create();
    if (!ctx) {
        c->state = CAND_COMPILE_ERROR;
        snprintf(c->detail, sizeof c->detail, "out of memory");
        return;
    }
    tailor_status st = tailor_plan_compile(ctx, job->plan, (int)(c->entry - job->plan->entries),
                                           job->sm, job->ptx, c->kernel_name, job->memo,
                                           &c->compiled);
    if (st) {
        c->state = CAND_COMPILE_ERROR;
        snprintf(c->detail, sizeof c->detail, "%s", tailor_ctx_message(ctx));
    } else {
        c->state = CAND_COMPILED;
    }
    tailor_ctx_destroy(ctx);
}

static void *compile_worker(void *arg)
{
    compile_job *job = arg;
    for (;;) {
        pthread_mutex_lock(&job->lock);
        int i = job->next < job->count ? job->next++ : -1;
        pthread_mutex_unlock(&job->lock);
        if (i < 0)
            break;
        candidate *c = &job->cands[i];
        if (c->state != CAND_PENDING) {
            /* an earlier run's failure (resume): nothing to compile */
        } else if (job->deadline > 0 && tailor_now_seconds() > job->deadline) {
            c->state = CAND_SKIPPED;
            snprintf(c->detail, sizeof c->detail, "not tried: the time budget ran out");
        } else {
            compile_one(job, c);
        }
        pthread_mutex_lock(&job->lock);
        job->done++;
        pthread_cond_signal(&job->finished);
        pthread_mutex_unlock(&job->lock);
    }
    return NULL;
}

static void report(const tailor_tune_options *o, const char *phase, int done, int total,
                   double best, double eta)
{
    if (!o->progress)
        return;
    tailor_tune_progress p = {phase, done, total, best, eta};
    o->progress(o->progress_user, &p);
}

static tailor_status compile_all(tailor_ctx *ctx, const tailor_plan *plan, candidate *cands, int n,
                                 int sm, int ptx, const tailor_tune_options *o)
{
    (void)ctx;
    compile_job job = {.cands = cands, .count = n, .sm = sm, .ptx = ptx, .plan = plan,
                       .memo = o->memo};
    if (o->strategy == TAILOR_STRATEGY_RANDOM && o->budget_seconds > 0)
        job.deadline = tailor_now_seconds() + o->budget_seconds;
    pthread_mutex_init(&job.lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&job.finished, &attr);
    pthread_condattr_destroy(&attr);
    int jobs = o->jobs > 0 ? o->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs < 1)
        jobs = 1;
    if (jobs > 64)
        jobs = 64;
    pthread_t threads[64];
    int started = 0;
    for (int i = 0; i < jobs; i++)
        if (pthread_create(&threads[i], NULL, compile_worker, &job) == 0)
            started++;
    if (started == 0)
        compile_worker(&job);
    /* Progress every 100 ms while the workers run; woken as each candidate finishes, so that a
     * target whose candidates were all compiled ahead waits for none (a fixed 100 ms sleep here
     * cost a first boot 95 x 0.1 s). */
    double t0 = tailor_now_seconds();
    pthread_mutex_lock(&job.lock);
    for (double next_report = t0; job.done < n;) {
        if (tailor_now_seconds() >= next_report) {
            int done = job.done;
            pthread_mutex_unlock(&job.lock);
            double el = tailor_now_seconds() - t0;
            report(o, "compile", done, n, -1, done ? el / done * (n - done) : -1);
            next_report += 0.1;
            pthread_mutex_lock(&job.lock);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&job.finished, &job.lock, &until);
    }
    pthread_mutex_unlock(&job.lock);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_cond_destroy(&job.finished);
    pthread_mutex_destroy(&job.lock);
    return TAILOR_OK;
}

/* ---- selection -------------------------------------------------------------------------- */

static void shuffle(int *idx, int n, uint64_t seed)
{
    uint64_t s = seed ? seed : 0x1234567;
    for (int i = n - 1; i > 0; i--) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((s >> 33) % (uint64_t)(i + 1));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

tailor_status tailor_tune_filter_parse(tailor_ctx *ctx, const char *text, tailor_tune_filter *out)
{
    memset(out, 0, sizeof *out);
    char params[512] = "", entry[128];
    size_t used = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        if (len >= sizeof entry)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "--where: entry '%.40s...' is too long",
                                    p);
        memcpy(entry, p, len);
        entry[len] = 0;
        p += len + (p[len] == ',');
        if (strncmp(entry, "template=", 9) == 0) {
            if (!entry[9] || strlen(entry + 9) >= sizeof out->template_name || out->template_name[0])
                return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                        "--where: '%s' must name one template", entry);
            snprintf(out->template_name, sizeof out->template_name, "%s", entry + 9);
            continue;
        }
        int n = snprintf(params + used, sizeof params - used, "%s%s", used ? "," : "", entry);
        if (n < 0 || (size_t)n >= sizeof params - used)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "--where: too many parameters");
        used += (size_t)n;
    }
    if (!used && !out->template_name[0])
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "--where takes template=NAME and/or PARAM=VALUE pairs, not '%s'",
                                text);
    if (used && tailor_shape_parse(ctx, params, &out->params) != TAILOR_OK)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "--where: %s", tailor_ctx_message(ctx));
    return TAILOR_OK;
}

/* 1 when entry e is of the filter's template (if named) and has each of its parameters at its
 * value. */
static int filter_accepts(const tailor_tune_filter *f, const tailor_plan_entry *e)
{
    if (!f)
        return 1;
    if (f->template_name[0] && strcmp(f->template_name, e->template_name) != 0)
        return 0;
    for (int i = 0; i < f->params.count; i++) {
        int found = 0;
        for (int j = 0; j < e->cfg.nparams && !found; j++) {
            const tailor_define *d = &e->cfg.params[j];
            char *end = NULL;
            long long v = strtoll(d->value, &end, 10);
            found = strcmp(d->name, f->params.dims[i].key) == 0 && end != d->value && !*end &&
                    v == f->params.dims[i].value;
        }
        if (!found)
            return 0;
    }
    return 1;
}

int tune_checks_all(const tailor_tune_options *o) { return o->verify_all || o->check_only; }

int tune_uses_cache(const tailor_tune_options *o)
{
    return !o->force && !o->where && !tune_checks_all(o);
}

int tune_pick(const tailor_plan *plan, const tailor_tune_options *o, int *idx)
{
    int ns = 0;
    for (int i = 0; i < plan->nentries; i++)
        if (plan->entries[i].verdict == TAILOR_FITS && filter_accepts(o->where, &plan->entries[i]))
            idx[ns++] = i;
    int random = o->strategy == TAILOR_STRATEGY_RANDOM && !tune_checks_all(o);
    if (random)
        shuffle(idx, ns, o->seed);
    return random && o->trials > 0 && o->trials < ns ? o->trials : ns;
}

const char *tailor_tune_phase_name(tailor_tune_phase p)
{
    static const char *const names[TAILOR_TUNE_NPHASES] = {
        "plan",    "inputs",  "compile", "load",   "check", "rotate",
        "warm-up", "capture", "replay",  "record", "free"};
    return p >= 0 && p < TAILOR_TUNE_NPHASES ? names[p] : "?";
}

static tailor_status jit_on_gpu(tailor_ctx *ctx, void *gpu, const char *ptx, void **native,
                                size_t *native_size)
{
    return tailor_gpu_jit_ptx(ctx, gpu, ptx, native, native_size);
}

tailor_compile_memo *tailor_tune_memo_create(tailor_gpu *gpu, const tailor_device_info *rehearse)
{
    tailor_compile_memo *m = tailor_compile_memo_create(TAILOR_COMPILE_MEMO_BYTES);
    if (m && gpu && rehearse)
        tailor_compile_memo_set_jit(m, jit_on_gpu, gpu);
    return m;
}

void tune_arch(const tailor_device_info *live, const tailor_device_info *rehearse, int *sm,
               int *ptx)
{
    const tailor_device_info *d = rehearse ? rehearse : live;
    *sm = d->cc_major * 10 + d->cc_minor;
    *ptx = rehearse != NULL;
}

static const char *outcome_name(cand_state s)
{
    switch (s) {
    case CAND_COMPILE_ERROR: return "compile-error";
    case CAND_REFUSED: return "refused-budget";
    case CAND_LAUNCH_ERROR: return "launch-error";
    case CAND_WRONG: return "wrong-result";
    case CAND_TIMED: return "timed";
    default: return NULL;
    }
}

static int is_failure_outcome(const char *o)
{
    return strcmp(o, "compile-error") == 0 || strcmp(o, "wrong-result") == 0 ||
           strcmp(o, "launch-error") == 0 || strcmp(o, "refused-budget") == 0 ||
           strcmp(o, "timeout") == 0;
}

typedef struct tune_state {
    tailor_ctx *ctx;
    tailor_gpu *gpu;
    tailor_cache *cache;
    const tailor_plan *plan;
    const tailor_device_info *budget_dev;
    tailor_cache_key key;
    tailor_instance *inst;
    candidate *cands;
    int n;
    tailor_kernel *kernels;
    tailor_workspace *ws;
    const tailor_tune_options *opts;
    tailor_tune_result *out;
} tune_state;

/* Records a candidate's outcome as soon as it is known, so that an interrupted run keeps what
 * it learnt (each trial is its own transaction). */
static void record_trial(tune_state *t, candidate *c)
{
    const char *outcome = outcome_name(c->state);
    if (!outcome || c->recorded || t->opts->check_only)
        return;
    c->recorded = 1;
    tailor_ctx *ctx = tailor_ctx_create();
    tailor_cache_put_trial(ctx, t->cache, &t->key, c->entry->template_name, c->params_json,
                           outcome, c->state == CAND_TIMED ? c->median_us : -1.0,
                           c->detail[0] ? c->detail : NULL);
    tailor_ctx_destroy(ctx);
}

/* Candidate i's resident blocks an SM as the driver reckons them for its launch (registers,
 * shared memory under the kernel's carveout, threads), kept in its trial's detail ("3 blocks an
 * SM"): what tells a configuration starved by its shared memory from a slow one. A failing
 * query leaves it unknown. */
static void note_occupancy(tune_state *t, int i)
{
    candidate *c = &t->cands[i];
    tailor_ctx *scratch = tailor_ctx_create();
    int blocks = 0;
    if (scratch && tailor_gpu_occupancy(scratch, t->gpu, &t->kernels[i], c->entry->launch.threads,
                                        (size_t)c->entry->launch.smem_dynamic,
                                        &blocks) == TAILOR_OK && blocks > 0) {
        c->blocks_per_sm = blocks;
        snprintf(c->detail, sizeof c->detail, "%d block%s an SM", blocks, blocks == 1 ? "" : "s");
    }
    tailor_ctx_destroy(scratch);
}

/* Loads, checks and (unless check_only) prepares a compiled candidate for timing. */
static void check_candidate(tune_state *t, int i)
{
    candidate *c = &t->cands[i];
    tailor_ctx *ctx = t->ctx;
    char reason[512];
    tailor_verdict v = tailor_budget_check_compiled(
        t->budget_dev, t->plan->op->name, c->entry->template_name, &c->entry->cfg,
        t->plan->dtype, &c->entry->launch, c->compiled.regs, c->compiled.smem_static, reason,
        sizeof reason);
    if (v != TAILOR_FITS) {
        c->state = CAND_REFUSED;
        snprintf(c->detail, sizeof c->detail, "%s", reason);
        if (v == TAILOR_SPACE_DEFECT)
            tailor_log(ctx, TAILOR_LOG_WARN, "%s", reason);
        return;
    }
    /* a rehearsal's PTX comes with its cubin when the compile thread JIT-compiled it */
    const void *image = c->compiled.native ? c->compiled.native : c->compiled.image;
    double t0 = tailor_now_seconds();
    tailor_status st = tailor_gpu_load_kernel(ctx, t->gpu, image, c->kernel_name, &t->kernels[i]);
    t->out->phase_s[TAILOR_TUNE_PHASE_LOAD] += tailor_now_seconds() - t0;
    /* timed as the runtime will launch it (TAILOR_TIMING_METHOD) */
    t->kernels[i].pdl = tailor_pdl_capable(tailor_gpu_info(t->gpu), t->budget_dev);
    if (st == TAILOR_OK)
        st = tailor_workspace_create(ctx, t->gpu, &c->entry->launch, &t->ws[i]);
    if (st == TAILOR_OK)
        st = tailor_instance_check(ctx, t->gpu, t->inst, &t->kernels[i], &c->entry->launch,
                                   &t->ws[i]);
    if (st == TAILOR_ERR_VERIFY) {
        c->state = CAND_WRONG;
        t->out->wrong++;
    } else if (st) {
        c->state = CAND_LAUNCH_ERROR;
        t->out->launch_errors++;
    } else {
        t->out->verified++;
        note_occupancy(t, i);
        return;
    }
    snprintf(c->detail, sizeof c->detail, "%s", tailor_ctx_message(ctx));
    if (!t->out->first_failure[0]) {
        char params[384];
        tailor_config_format(&c->entry->cfg, params, sizeof params);
        snprintf(t->out->first_failure, sizeof t->out->first_failure, "%s %.200s: %.600s",
                 c->entry->template_name, params, c->detail);
    }
    tailor_ctx_clear(ctx);
    tailor_gpu_unload_kernel(t->gpu, &t->kernels[i]);
    tailor_workspace_destroy(t->gpu, &t->ws[i]);
}

/* A candidate whose warm-up pass is slower than GIVE_UP_FACTOR x the best time so far is not
 * timed further (tailor_instance_time's give_up_us): it has lost, and hundreds of launches of a
 * kernel that takes hundreds of microseconds (topk's few-block configurations at the
 * vocabulary) cost a first boot seconds each. Never below GIVE_UP_FLOOR_US: a host-launched pass
 * costs the driver's few microseconds a launch whatever the kernel (and has no PDL overlap), so
 * the pass of a kernel that long is within 10 % of its graph-timed median, and small kernels
 * are timed in full. */
#define GIVE_UP_FACTOR 2.0
#define GIVE_UP_FLOOR_US 50.0

/* Times candidate i; best_us > 0: the best median so far (give up past GIVE_UP_FACTOR x it). */
static tailor_status time_candidate(tune_state *t, int i, int batches, double best_us)
{
    candidate *c = &t->cands[i];
    double give_up = best_us > 0 ? fmax(GIVE_UP_FACTOR * best_us, GIVE_UP_FLOOR_US) : 0;
    int gave_up = 0;
    tailor_status st = tailor_instance_time(t->ctx, t->gpu, t->inst, &t->kernels[i],
                                            &c->entry->launch, &t->ws[i], batches, give_up,
                                            &c->median_us, &c->spread_us, &gave_up);
    if (st) {
        c->state = CAND_LAUNCH_ERROR;
        snprintf(c->detail, sizeof c->detail, "%s", tailor_ctx_message(t->ctx));
        tailor_ctx_clear(t->ctx);
        return TAILOR_OK; /* a failing candidate is recorded, never fatal */
    }
    if (gave_up) {
        size_t n = strlen(c->detail);
        snprintf(c->detail + n, sizeof c->detail - n, "%stimed by its warm-up pass alone (over "
                 "%.0fx the best, %.2f us)", n ? "; " : "", GIVE_UP_FACTOR, best_us);
    }
    c->state = CAND_TIMED;
    return TAILOR_OK;
}

static int cmp_by_time(const void *a, const void *b, void *arg)
{
    const candidate *cands = arg;
    double x = cands[*(const int *)a].median_us, y = cands[*(const int *)b].median_us;
    return x < y ? -1 : x > y;
}

/* Halving keeps the better half of a round, and of it only those within HALVING_KEEP of the
 * round's best: a round's median of three or more batches of at least 32 launches each is
 * good to a few percent, so a candidate 25 % behind has lost, and timing it again, longer, is
 * what made a first boot's targets with a hundred small survivors cost seconds each. */
#define HALVING_KEEP 1.25

/* A round's batches double up to HALVING_MAX_BATCHES: past a dozen, a median moves by less than
 * the gaps halving decides on, and the few left within the noise of the best are timed again at
 * the end with 31. Doubling to 64 made each of a hundred-survivor target's seven rounds cost as
 * much as the first. */
#define HALVING_MAX_BATCHES 12

/* Times the verified candidates per the strategy and returns the winner's index (-1: none). */
static int choose(tune_state *t, int *verified, int nv)
{
    const tailor_tune_options *o = t->opts;
    int batches = o->strategy == TAILOR_STRATEGY_HALVING ? 3 : 10;
    int alive = nv;
    double best = -1;
    for (int round = 0; alive > 0; round++) {
        for (int j = 0; j < alive; j++) {
            time_candidate(t, verified[j], batches, best);
            candidate *c = &t->cands[verified[j]];
            if (c->state == CAND_TIMED && (best < 0 || c->median_us < best))
                best = c->median_us;
            report(o, "time", j + 1, alive, best, -1);
        }
        int k = 0; /* drop those that failed while timing */
        for (int j = 0; j < alive; j++)
            if (t->cands[verified[j]].state == CAND_TIMED)
                verified[k++] = verified[j];
        alive = k;
        qsort_r(verified, (size_t)alive, sizeof *verified, cmp_by_time, t->cands);
        if (o->strategy != TAILOR_STRATEGY_HALVING || alive <= 2)
            break;
        alive = (alive + 1) / 2;
        const double lead = t->cands[verified[0]].median_us;
        while (alive > 2 && t->cands[verified[alive - 1]].median_us > HALVING_KEEP * lead)
            alive--;
        batches = 2 * batches < HALVING_MAX_BATCHES ? 2 * batches : HALVING_MAX_BATCHES;
    }
    if (alive == 0)
        return -1;
    /* The best few within the noise of the best: measure again, longer, so that the same card
     * picks the same winner run after run. */
    const candidate *w = &t->cands[verified[0]];
    int close = 1;
    while (close < alive && close < 4) {
        const candidate *c = &t->cands[verified[close]];
        double noise = 2.0 * fmax(w->spread_us, c->spread_us) + 0.01 * w->median_us;
        if (c->median_us - w->median_us > noise)
            break;
        close++;
    }
    if (close > 1) {
        for (int j = 0; j < close; j++)
            time_candidate(t, verified[j], 31, 0);
        qsort_r(verified, (size_t)close, sizeof *verified, cmp_by_time, t->cands);
    }
    return t->cands[verified[0]].state == CAND_TIMED ? verified[0] : -1;
}

static tailor_status store_winner(tune_state *t, candidate *c, int sm, int ptx, int n_trials)
{
    tailor_cache_winner w;
    memset(&w, 0, sizeof w);
    snprintf(w.template_name, sizeof w.template_name, "%s", c->entry->template_name);
    snprintf(w.kernel_name, sizeof w.kernel_name, "%s", c->kernel_name);
    char lj[512];
    tailor_launch_json(&c->entry->launch, lj, sizeof lj);
    w.params_json = c->params_json;
    w.launch_json = lj;
    snprintf(w.binary_kind, sizeof w.binary_kind, "%s", ptx ? "ptx" : "cubin");
    w.binary = c->compiled.image;
    w.binary_size = c->compiled.image_size;
    snprintf(w.arch, sizeof w.arch, "%s_%d", ptx ? "compute" : "sm", sm);
    w.median_us = c->median_us;
    w.spread_us = c->spread_us;
    w.tuned_at = (long long)time(NULL);
    w.n_trials = n_trials;
    return tailor_cache_put_winner(t->ctx, t->cache, &t->key, &w);
}

const char *tailor_tuner_check_entry(const tailor_cache_key *key, const char *params_json,
                                     const char **field)
{
    *field = "op";
    if (!tailor_op_find(key->op))
        return "is not an op this tailor knows";
    tailor_shape shape;
    char canon[512];
    *field = "shape";
    if (tailor_shape_parse(NULL, key->shape, &shape) != TAILOR_OK)
        return "is not a list of key=value (a non-negative integer)";
    tailor_shape_format(&shape, canon, sizeof canon);
    if (strcmp(canon, key->shape) != 0)
        return "is not in canonical form (keys sorted, as in 'k=1536,m=1')";
    tailor_dtype dtype;
    *field = "dtype";
    if (tailor_dtype_parse(NULL, key->dtype, &dtype) != TAILOR_OK ||
        strcmp(tailor_dtype_name(dtype), key->dtype) != 0)
        return "is not fp16, bf16 or fp32";
    tailor_config cfg;
    *field = "params";
    if (tailor_config_parse_json(NULL, params_json, &cfg) != TAILOR_OK)
        return "is not a JSON object";
    *field = NULL;
    return NULL;
}

static void fill_result_from_winner(tailor_tune_result *out, const tailor_cache_winner *w)
{
    snprintf(out->template_name, sizeof out->template_name, "%s", w->template_name);
    snprintf(out->kernel_name, sizeof out->kernel_name, "%s", w->kernel_name);
    tailor_config cfg;
    if (tailor_config_parse_json(NULL, w->params_json ? w->params_json : "{}", &cfg) == TAILOR_OK)
        tailor_config_format(&cfg, out->params, sizeof out->params);
    out->median_us = w->median_us;
    out->spread_us = w->spread_us;
}

/* The cached winner of (op, shape, dtype), found by its key alone (the completed shape, checked
 * by the op as a plan would, and the op's space hash): a cached target enumerates no
 * configuration. *found 0 when there is none. */
static tailor_status cached_result(tailor_ctx *ctx, tailor_cache *cache,
                                   const tailor_device_info *live,
                                   const tailor_device_info *rehearse, const char *op,
                                   const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_tune_result *out, int *found)
{
    *found = 0;
    tailor_shape completed;
    char hex[65] = "";
    tailor_status st = tailor_plan_key(ctx, op, shape, dtype, &completed, hex);
    if (st)
        return st;
    tailor_winner_key_text text;
    tailor_cache_key key;
    st = tailor_winner_key(ctx, live, rehearse, op, &completed, dtype, hex, &text, &key);
    if (st)
        return st;
    tailor_cache_winner w;
    st = tailor_cache_get_winner(ctx, cache, &key, &w, found);
    if (st || !*found)
        return st;
    const tailor_op *o = tailor_op_find(op);
    out->from_cache = 1;
    out->bytes = o->bytes(&completed, dtype);
    out->flops = o->flops(&completed, dtype);
    fill_result_from_winner(out, &w);
    tailor_cache_winner_free(&w);
    return TAILOR_OK;
}

/* ---- the loop --------------------------------------------------------------------------- */

int tune_no_compile(void)
{
    const char *v = getenv("TAILOR_NO_COMPILE");
    return v && *v && strcmp(v, "0") != 0;
}

/* verify_all's verdict: TAILOR_ERR_VERIFY naming the first failure when any of the n checked
 * survivors was wrong or failed to compile or launch. */
static tailor_status survivors_failed(tune_state *t, int n)
{
    const tailor_tune_result *r = t->out;
    if (!r->wrong && !r->launch_errors && !r->compile_errors)
        return TAILOR_OK;
    return tailor_set_error(t->ctx, TAILOR_ERR_VERIFY,
                            "%d of %d survivors failed (%d wrong, %d launch errors, %d compile "
                            "errors); first: %s",
                            r->wrong + r->launch_errors + r->compile_errors, n, r->wrong,
                            r->launch_errors, r->compile_errors, r->first_failure);
}

static tailor_status run_candidates(tune_state *t, int sm, int ptx)
{
    tailor_ctx *ctx = t->ctx;
    const tailor_tune_options *o = t->opts;
    int n = t->n;
    double *phase = t->out->phase_s, t0 = tailor_now_seconds();
    /* resume: failures recorded by an earlier run of the same key are not retried */
    for (int i = 0; i < n && !tune_checks_all(o); i++) {
        char outcome[32];
        double med;
        int found = 0;
        tailor_cache_get_trial(ctx, t->cache, &t->key, t->cands[i].entry->template_name,
                               t->cands[i].params_json, outcome, sizeof outcome, &med, &found);
        if (found && is_failure_outcome(outcome)) {
            t->cands[i].state = CAND_SKIPPED;
            snprintf(t->cands[i].detail, sizeof t->cands[i].detail, "%s in an earlier run",
                     outcome);
        }
    }
    phase[TAILOR_TUNE_PHASE_PLAN] += tailor_now_seconds() - t0;
    t0 = tailor_now_seconds();
    compile_all(ctx, t->plan, t->cands, n, sm, ptx, o);
    phase[TAILOR_TUNE_PHASE_COMPILE] += tailor_now_seconds() - t0;
    t0 = tailor_now_seconds();
    double loading = phase[TAILOR_TUNE_PHASE_LOAD];
    int *verified = calloc((size_t)(n ? n : 1), sizeof *verified);
    if (!verified)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    int nv = 0;
    for (int i = 0; i < n; i++) {
        candidate *c = &t->cands[i];
        if (c->state == CAND_COMPILE_ERROR) {
            record_trial(t, c);
            t->out->compile_errors++;
            if (!t->out->first_failure[0])
                snprintf(t->out->first_failure, sizeof t->out->first_failure, "%s", c->detail);
            tailor_log(ctx, TAILOR_LOG_DEBUG, "%s", c->detail);
        }
        if (c->state != CAND_COMPILED)
            continue;
        t->out->compiled++;
        t->out->reused += c->compiled.reused;
        check_candidate(t, i);
        if (c->state == CAND_REFUSED)
            t->out->refused_after_compile++;
        if (c->state != CAND_COMPILED)
            record_trial(t, c); /* refused, wrong or failed to launch */
        if (c->state == CAND_COMPILED)
            verified[nv++] = i;
        report(o, "verify", i + 1, n, -1, -1);
    }
    phase[TAILOR_TUNE_PHASE_CHECK] +=
        tailor_now_seconds() - t0 - (phase[TAILOR_TUNE_PHASE_LOAD] - loading);
    if (o->check_only) { /* checked: nothing to time, nothing to record */
        free(verified);
        return survivors_failed(t, n);
    }
    t0 = tailor_now_seconds();
    tailor_status st = tailor_instance_rotate(ctx, t->gpu, t->inst);
    phase[TAILOR_TUNE_PHASE_ROTATE] += tailor_now_seconds() - t0;
    int win = -1;
    if (st == TAILOR_OK && nv > 0)
        win = choose(t, verified, nv);
    phase[TAILOR_TUNE_PHASE_WARM] += t->inst->warm_s;
    phase[TAILOR_TUNE_PHASE_CAPTURE] += t->inst->capture_s;
    phase[TAILOR_TUNE_PHASE_REPLAY] += t->inst->replay_s;
    t0 = tailor_now_seconds();
    for (int i = 0; i < n; i++) {
        if (t->cands[i].state == CAND_TIMED)
            t->out->timed++;
        record_trial(t, &t->cands[i]);
    }
    if (st == TAILOR_OK && win >= 0) {
        candidate *c = &t->cands[win];
        st = store_winner(t, c, sm, ptx, n);
        snprintf(t->out->template_name, sizeof t->out->template_name, "%s",
                 c->entry->template_name);
        tailor_config_format(&c->entry->cfg, t->out->params, sizeof t->out->params);
        snprintf(t->out->kernel_name, sizeof t->out->kernel_name, "%s", c->kernel_name);
        t->out->median_us = c->median_us;
        t->out->spread_us = c->spread_us;
        t->out->blocks_per_sm = c->blocks_per_sm;
    }
    phase[TAILOR_TUNE_PHASE_RECORD] += tailor_now_seconds() - t0;
    free(verified);
    if (st)
        return st;
    if (tune_checks_all(o) && (st = survivors_failed(t, n)))
        return st;
    if (win < 0)
        return tailor_set_error(ctx, TAILOR_ERR_VERIFY,
                                "no candidate of %s passed (%d compiled, %d wrong, %d launch "
                                "errors); first failure: %s",
                                t->plan->op->name, t->out->compiled, t->out->wrong,
                                t->out->launch_errors,
                                t->out->first_failure[0] ? t->out->first_failure : "none");
    return TAILOR_OK;
}

/* A rehearsal the live GPU can run: a GPU profile whose code (PTX for its arch) JITs here. */
static tailor_status check_rehearsal(tailor_ctx *ctx, const tailor_device_info *live,
                                     const tailor_device_info *rehearse, int sm, int ptx)
{
    if (rehearse && rehearse->kind != TAILOR_DEVICE_GPU)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "cannot rehearse %s: it is not a GPU profile", rehearse->name);
    if (ptx && sm > live->cc_major * 10 + live->cc_minor)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "cannot rehearse %s (sm_%d) on %s (sm_%d%d): its code would not run "
                                "here",
                                rehearse->name, sm, live->name, live->cc_major, live->cc_minor);
    return TAILOR_OK;
}

/* Frees what pick_candidates allocated and run_candidates loaded. */
static void tune_state_free(tune_state *t)
{
    for (int i = 0; i < t->n; i++) {
        tailor_gpu_unload_kernel(t->gpu, &t->kernels[i]);
        tailor_workspace_destroy(t->gpu, &t->ws[i]);
        tailor_compile_result_free(&t->cands[i].compiled);
    }
    tailor_instance_destroy(t->gpu, t->inst);
    free(t->cands);
    free(t->kernels);
    free(t->ws);
}

/* t's candidates: the survivors tune_pick keeps (sampled for the random strategy, filtered by
 * --where), named for target sm. None kept is TAILOR_ERR_BUDGET naming the filter. */
static tailor_status pick_candidates(tune_state *t, const char *op, const char *shape_text,
                                     tailor_dtype dtype, int sm)
{
    const tailor_plan *plan = t->plan;
    const int ns = tailor_plan_survivors(plan);
    int *idx = calloc((size_t)ns, sizeof *idx);
    t->cands = calloc((size_t)ns, sizeof *t->cands);
    t->kernels = calloc((size_t)ns, sizeof *t->kernels);
    t->ws = calloc((size_t)ns, sizeof *t->ws);
    if (!idx || !t->cands || !t->kernels || !t->ws) {
        free(idx);
        return tailor_set_error(t->ctx, TAILOR_ERR_NOMEM, "out of memory");
    }
    int n = tune_pick(plan, t->opts, idx);
    for (int i = 0; i < n; i++) {
        candidate *c = &t->cands[i];
        c->entry = &plan->entries[idx[i]];
        tailor_gen_kernel_name(op, c->entry->template_name, sm, tailor_dtype_name(dtype),
                               c->entry->launch.defines, c->entry->launch.ndefines,
                               c->kernel_name, sizeof c->kernel_name);
        tailor_config_json(&c->entry->cfg, c->params_json, sizeof c->params_json);
    }
    t->n = n;
    free(idx);
    if (n == 0) /* survivors, but none the filter (--where) accepts */
        return tailor_set_error(t->ctx, TAILOR_ERR_BUDGET,
                                "none of the %d survivors of %s %s %s matches --where (see tailor "
                                "plan)",
                                ns, op, shape_text, tailor_dtype_name(dtype));
    return TAILOR_OK;
}

tailor_status tailor_tune(tailor_ctx *ctx, tailor_gpu *gpu, tailor_cache *cache, const char *op,
                          const tailor_shape *shape, tailor_dtype dtype,
                          const tailor_tune_options *opts, tailor_tune_result *out)
{
    memset(out, 0, sizeof *out);
    double t0 = tailor_now_seconds();
    const tailor_device_info *live = tailor_gpu_info(gpu);
    const tailor_device_info *budget_dev = opts->rehearse ? opts->rehearse : live;
    int sm, ptx;
    tune_arch(live, opts->rehearse, &sm, &ptx);
    tailor_status st = check_rehearsal(ctx, live, opts->rehearse, sm, ptx);
    if (st)
        return st;
    int cached = 0;
    if (tune_uses_cache(opts))
        st = cached_result(ctx, cache, live, opts->rehearse, op, shape, dtype, out, &cached);
    if (st || cached)
        return st;
    tailor_plan plan;
    if (!tailor_compile_ahead_take_plan(opts->ahead, op, shape, dtype, &plan)) {
        st = tailor_plan_build_survivors(ctx, budget_dev, op, shape, dtype, &plan);
        if (st)
            return st;
    }
    tailor_winner_key_text key_text;
    tune_state t = {.ctx = ctx, .gpu = gpu, .cache = cache, .plan = &plan,
                    .budget_dev = budget_dev, .opts = opts, .out = out};
    st = tailor_winner_key(ctx, live, opts->rehearse, op, &plan.shape, dtype, plan.space_hash,
                           &key_text, &t.key);
    if (st) {
        tailor_plan_free(&plan);
        return st;
    }
    out->candidates = plan.count;
    out->survivors = tailor_plan_survivors(&plan);
    out->bytes = plan.op->bytes(&plan.shape, dtype);
    out->flops = plan.op->flops(&plan.shape, dtype);
    if (tune_no_compile())
        st = tailor_set_error(ctx, TAILOR_ERR_NO_COMPILE,
                              "%s %s %s is not in the cache and TAILOR_NO_COMPILE=1 forbids "
                              "compiling its %d survivors",
                              op, key_text.shape, tailor_dtype_name(dtype),
                              tailor_plan_survivors(&plan));
    else if (tailor_plan_survivors(&plan) == 0)
        st = tailor_set_error(ctx, TAILOR_ERR_BUDGET,
                              "no configuration of %s %s %s fits %s (%d refused; see tailor plan)",
                              op, key_text.shape, tailor_dtype_name(dtype), budget_dev->name,
                              plan.count);
    else
        st = pick_candidates(&t, op, key_text.shape, dtype, sm);
    if (st == TAILOR_OK) {
        tailor_log(ctx, TAILOR_LOG_INFO,
                   "tuning %s %s %s on %s%s%s: %d candidates, %d survive, %d to try", op,
                   key_text.shape, tailor_dtype_name(dtype), live->name,
                   opts->rehearse ? " rehearsing " : "", opts->rehearse ? opts->rehearse->name : "",
                   plan.count, tailor_plan_survivors(&plan), t.n);
        out->phase_s[TAILOR_TUNE_PHASE_PLAN] += tailor_now_seconds() - t0;
        t0 = tailor_now_seconds();
        st = tailor_instance_create(ctx, gpu, plan.op, &plan.shape, dtype, opts->seed, 1,
                                    &t.inst);
        out->phase_s[TAILOR_TUNE_PHASE_INPUTS] += tailor_now_seconds() - t0;
    }
    if (st == TAILOR_OK)
        st = run_candidates(&t, sm, ptx);
    t0 = tailor_now_seconds();
    tune_state_free(&t);
    tailor_plan_free(&plan);
    out->phase_s[TAILOR_TUNE_PHASE_FREE] += tailor_now_seconds() - t0;
    return st;
}

/* A cached winner made ready to run: its launch for the key's shape, an instance, the loaded
 * kernel and its workspace. */
typedef struct loaded_winner {
    tailor_launch launch;
    tailor_instance *inst;
    tailor_kernel k;
    tailor_workspace ws;
} loaded_winner;

static void winner_unload(tailor_gpu *gpu, loaded_winner *lw)
{
    tailor_workspace_destroy(gpu, &lw->ws);
    tailor_gpu_unload_kernel(gpu, &lw->k);
    tailor_instance_destroy(gpu, lw->inst);
    lw->inst = NULL;
}

static tailor_status winner_load(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_cache_key *key,
                                 const tailor_cache_winner *w, int with_reference,
                                 loaded_winner *lw)
{
    memset(lw, 0, sizeof *lw);
    const tailor_op *op = tailor_op_find(key->op);
    if (!op)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "op '%s' of a cached winner is unknown",
                                key->op);
    const tailor_device_info *dev = tailor_gpu_info(gpu);
    if (strncmp(key->fingerprint, "rehearse:", 9) == 0) {
        char name[64];
        const char *at = strchr(key->fingerprint, '@');
        size_t len = at ? (size_t)(at - key->fingerprint - 9) : 0;
        snprintf(name, sizeof name, "%.*s", (int)len, key->fingerprint + 9);
        dev = tailor_device_profile_find(name);
        if (!dev)
            return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "rehearsal profile '%s' unknown",
                                    name);
    }
    tailor_shape shape;
    tailor_dtype dtype;
    tailor_config cfg;
    tailor_space *space = NULL;
    tailor_status st = tailor_shape_parse(ctx, key->shape, &shape);
    if (st == TAILOR_OK)
        st = tailor_dtype_parse(ctx, key->dtype, &dtype);
    if (st == TAILOR_OK)
        st = tailor_config_parse_json(ctx, w->params_json, &cfg);
    if (st == TAILOR_OK)
        st = tailor_space_load(ctx, w->template_name, &space);
    if (st == TAILOR_OK)
        st = tailor_space_evaluate(ctx, space, &cfg, &shape, dtype, dev, 0, &lw->launch);
    tailor_space_destroy(space);
    if (st == TAILOR_OK)
        st = tailor_instance_create(ctx, gpu, op, &shape, dtype, (uint64_t)time(NULL),
                                    with_reference, &lw->inst);
    if (st == TAILOR_OK)
        st = tailor_gpu_load_kernel(ctx, gpu, w->binary, w->kernel_name, &lw->k);
    lw->k.pdl = tailor_pdl_capable(tailor_gpu_info(gpu), dev);
    if (st == TAILOR_OK)
        st = tailor_workspace_create(ctx, gpu, &lw->launch, &lw->ws);
    if (st)
        winner_unload(gpu, lw);
    return st;
}

tailor_status tailor_tuner_verify_winner(tailor_ctx *ctx, tailor_gpu *gpu,
                                         const tailor_cache_key *key,
                                         const tailor_cache_winner *w)
{
    loaded_winner lw;
    tailor_status st = winner_load(ctx, gpu, key, w, 1, &lw);
    if (st)
        return st;
    st = tailor_instance_check(ctx, gpu, lw.inst, &lw.k, &lw.launch, &lw.ws);
    winner_unload(gpu, &lw);
    return st;
}

tailor_status tailor_tuner_time_winner(tailor_ctx *ctx, tailor_gpu *gpu,
                                       const tailor_cache_key *key, const tailor_cache_winner *w,
                                       int batches, double *median_us, double *spread_us)
{
    loaded_winner lw;
    tailor_status st = winner_load(ctx, gpu, key, w, 0, &lw);
    if (st)
        return st;
    st = tailor_instance_rotate(ctx, gpu, lw.inst);
    if (st == TAILOR_OK)
        st = tailor_instance_time(ctx, gpu, lw.inst, &lw.k, &lw.launch, &lw.ws, batches, 0,
                                  median_us, spread_us, NULL);
    winner_unload(gpu, &lw);
    return st;
}
