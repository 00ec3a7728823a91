/* cmd_tune.c — `tailor tune`: find and cache the fastest right kernel for each shape. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gemma4.h"
#include "kernels.h"
#include "tune_targets.h"
#include "tuner.h"

static void usage(void)
{
    printf("usage: tailor tune (--op OP --shape k=v,... | --preset NAME | --model DIR)\n"
           "                   [--dtype fp16|bf16] [--strategy exhaustive|random|halving]\n"
           "                   [--budget SECONDS] [--trials N] [--rehearse PROFILE]\n"
           "                   [--verify-all | --check-only] [--where template=T,K=V,...] [--force]\n"
           "                   [--cache FILE] [--seed N] [--jobs N] [--device N] [--list]\n"
           "                   [--step-tune [--quantize w4a16] [--quantize-head]]\n\n"
           "Compiles the survivors of `tailor plan` for the live GPU (or, with --rehearse, for a\n"
           "profile's architecture and budget, run as PTX on this GPU), checks each against the\n"
           "op's C reference, times the right ones and caches the winner (a --preset or --model\n"
           "boot halves the field in rounds by default, one --op times every survivor fully;\n"
           "--strategy chooses). Cached shapes are\n"
           "skipped; with TAILOR_NO_COMPILE=1 any compile is an error. --list prints the\n"
           "(op, shape) list of a preset or model and stops (no GPU needed). --step-tune (with\n"
           "--preset or --model): then the model runs on the GPU (random weights for a preset;\n"
           "--quantize w4a16 and --quantize-head as in tailor run) and the costliest kernels of its\n"
           "decode step try their next-best checked configurations inside the step; a faster one\n"
           "replaces the winner in the cache (docs/cli.md). --check-only checks every survivor\n"
           "and stops there: nothing timed, no cache opened or written (for kernel developers\n"
           "and for running under compute-sanitizer). --where tries only the survivors of one\n"
           "template and/or with the given parameter values (with --check-only, or into a\n"
           "--cache of its own: the best of a subset is no winner for your cache).\n");
}

typedef struct progress_state {
    int tty;
    double t0;
} progress_state;

static void on_progress(void *user, const tailor_tune_progress *p)
{
    progress_state *s = user;
    if (!s->tty)
        return;
    char best[32] = "", eta[32] = "";
    if (p->best_us >= 0)
        snprintf(best, sizeof best, ", best %.2f us", p->best_us);
    if (p->eta_seconds >= 0)
        snprintf(eta, sizeof eta, ", ~%.0f s left", p->eta_seconds);
    fprintf(stderr, "\r  %-8s %d/%d%s%s        ", p->phase, p->done, p->total, best, eta);
    fflush(stderr);
}

static void clear_progress(const progress_state *s)
{
    if (s->tty)
        fprintf(stderr, "\r%70s\r", "");
}

/* One target's line; `seconds` is the wall time it took (what a first boot's time goes to). */
static void print_result(const char *op, const char *shape, tailor_dtype dtype,
                         const tailor_tune_result *r, int check_only, double seconds)
{
    if (check_only) {
        printf("%-14s %-40s %s  %d candidates, %d survive, %d compiled, %d right, %d wrong; "
               "checked only, nothing timed or cached  [%.1f s]\n",
               op, shape, tailor_dtype_name(dtype), r->candidates, r->survivors, r->compiled,
               r->verified, r->wrong, seconds);
        return;
    }
    if (r->from_cache) {
        printf("%-14s %-40s %s  cached: %s %s  %.2f us\n", op, shape, tailor_dtype_name(dtype),
               r->template_name, r->params, r->median_us);
        return;
    }
    double gbs = r->median_us > 0 ? r->bytes / (r->median_us * 1e-6) / 1e9 : 0;
    char reused[48] = "";
    if (r->reused)
        snprintf(reused, sizeof reused, " (%d of them earlier in this run)", r->reused);
    char occ[32] = "";
    if (r->blocks_per_sm > 0)
        snprintf(occ, sizeof occ, "  %d block%s/SM", r->blocks_per_sm,
                 r->blocks_per_sm == 1 ? "" : "s");
    printf("%-14s %-40s %s  %d candidates, %d survive, %d compiled%s, %d right, %d wrong; "
           "winner %s %s  %.2f us (+-%.2f)  %.0f GB/s%s  [%.1f s]\n",
           op, shape, tailor_dtype_name(dtype), r->candidates, r->survivors, r->compiled, reused,
           r->verified, r->wrong, r->template_name, r->params, r->median_us, r->spread_us, gbs,
           occ, seconds);
}

/* Where a target's seconds went (TAILOR_LOG=debug): "phases: plan 0.01 s, inputs 0.20, ...". */
static void log_phases(tailor_ctx *ctx, const tailor_tune_result *r)
{
    if (r->from_cache)
        return;
    char line[512];
    int len = snprintf(line, sizeof line, "phases:");
    for (int p = 0; p < TAILOR_TUNE_NPHASES && len < (int)sizeof line; p++)
        len += snprintf(line + len, sizeof line - (size_t)len, "%s %s %.2f%s", p ? "," : "",
                        tailor_tune_phase_name((tailor_tune_phase)p), r->phase_s[p],
                        p ? "" : " s");
    tailor_log(ctx, TAILOR_LOG_DEBUG, "%s", line);
}

/* What the command line asked for. */
typedef struct tune_args {
    const char *op, *shape_text, *preset, *model, *dtype_text, *cache_path;
    int ordinal, list_only;
    int step_tune, quantize, quantize_head; /* --step-tune and the run it tunes */
    int strategy_given;                     /* --strategy, --budget or --trials */
    tailor_tune_filter where;               /* --where, when o.where points at it */
    tailor_tune_options o;
} tune_args;

/* The flags into a; returns -1 to go on, else the exit code (0 after --help, 2 on bad usage,
 * said on stderr). */
static int parse_tune_args(tailor_ctx *ctx, int argc, char **argv, tune_args *a)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'o'},       {"shape", required_argument, NULL, 's'},
        {"preset", required_argument, NULL, 'p'},   {"model", required_argument, NULL, 'm'},
        {"dtype", required_argument, NULL, 't'},    {"strategy", required_argument, NULL, 'S'},
        {"budget", required_argument, NULL, 'b'},   {"trials", required_argument, NULL, 'n'},
        {"rehearse", required_argument, NULL, 'r'}, {"verify-all", no_argument, NULL, 'V'},
        {"check-only", no_argument, NULL, 'C'},     {"where", required_argument, NULL, 'w'},
        {"force", no_argument, NULL, 'f'},          {"cache", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 'e'},     {"jobs", required_argument, NULL, 'j'},
        {"device", required_argument, NULL, 'd'},   {"help", no_argument, NULL, 'h'},
        {"list", no_argument, NULL, 'l'},           {"step-tune", no_argument, NULL, 'X'},
        {"quantize", required_argument, NULL, 'q'}, {"quantize-head", no_argument, NULL, 'H'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    tailor_tune_options *o = &a->o;
    o->seed = (uint64_t)time(NULL);
    const char *rehearse = NULL;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'o': a->op = optarg; break;
        case 's': a->shape_text = optarg; break;
        case 'p': a->preset = optarg; break;
        case 'm': a->model = optarg; break;
        case 't': a->dtype_text = optarg; break;
        case 'S':
            if (tailor_strategy_parse(ctx, optarg, &o->strategy))
                return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
            a->strategy_given = 1;
            break;
        case 'b':
            if (cli_parse_number("tune", "--budget", optarg, 0, HUGE_VAL,
                                 "a number of seconds above 0", &o->budget_seconds))
                return 2;
            o->strategy = TAILOR_STRATEGY_RANDOM;
            a->strategy_given = 1;
            break;
        case 'n':
            if (cli_parse_int("tune", "--trials", optarg, 1, 1000000, &o->trials))
                return 2;
            o->strategy = TAILOR_STRATEGY_RANDOM;
            a->strategy_given = 1;
            break;
        case 'r': rehearse = optarg; break;
        case 'V': o->verify_all = 1; break;
        case 'C': o->check_only = 1; break;
        case 'w':
            if (tailor_tune_filter_parse(ctx, optarg, &a->where))
                return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
            o->where = &a->where;
            break;
        case 'f': o->force = 1; break;
        case 'c':
            if (cli_cache_flag("tune", optarg, &a->cache_path))
                return 2;
            break;
        case 'e':
            errno = 0;
            o->seed = isdigit((unsigned char)optarg[0]) ? strtoull(optarg, &end, 10) : 0;
            if (!isdigit((unsigned char)optarg[0]) || *end || errno)
                return cli_usage_error("tune", "--seed takes an integer from 0 to "
                                       "18446744073709551615, not '%s'", optarg);
            break;
        case 'j':
            if (cli_parse_int("tune", "--jobs", optarg, 0, 1024, &o->jobs))
                return 2;
            break;
        case 'd':
            if (cli_parse_int("tune", "--device", optarg, 0, 63, &a->ordinal))
                return 2;
            break;
        case 'l': a->list_only = 1; break;
        case 'X': a->step_tune = 1; break;
        case 'q':
            if (strcmp(optarg, "w4a16") != 0)
                return cli_usage_error("tune", "--quantize takes w4a16, not '%s'", optarg);
            a->quantize = 1;
            break;
        case 'H': a->quantize_head = 1; break;
        case 'h': usage(); return 0;
        default: return cli_bad_flag("tune", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("tune", "unexpected argument '%s'", argv[optind]);
    if ((a->op != NULL) + (a->preset != NULL) + (a->model != NULL) != 1)
        return cli_usage_error("tune", "give exactly one of --op (with --shape), --preset, --model");
    if (a->op && !a->shape_text)
        return cli_usage_error("tune", "--op needs --shape");
    if (a->step_tune && a->op)
        return cli_usage_error("tune", "--step-tune tunes a model's decode step: give --preset or "
                               "--model, not --op");
    if ((a->quantize || a->quantize_head) && !a->step_tune)
        return cli_usage_error("tune", "--quantize and --quantize-head choose the run --step-tune "
                               "tunes (every shape of both runs is tuned without them)");
    if (o->where && !o->check_only && !a->cache_path)
        return cli_usage_error("tune", "--where tunes a subset of the survivors: give --cache FILE "
                               "(the best of a subset is no winner for your cache) or --check-only");
    if (o->where && a->step_tune)
        return cli_usage_error("tune", "--where and --step-tune do not go together");
    if (o->check_only && (a->step_tune || a->cache_path || o->force))
        return cli_usage_error("tune", "--check-only times nothing and opens no cache: %s has no "
                               "use with it", a->step_tune ? "--step-tune"
                                          : a->cache_path ? "--cache" : "--force");
    /* A model's boot tunes ~95 targets, most with a hundred survivors of which a handful come
     * near the best: halving rules the rest out after three samples (docs/perf/model.md,
     * session 47). One --op shape times every survivor fully, for kernel developers. */
    if (!a->strategy_given && !a->op)
        o->strategy = TAILOR_STRATEGY_HALVING;
    if (rehearse && !(o->rehearse = tailor_device_profile_find(rehearse)))
        return cli_usage_error("tune", "--rehearse '%s' is not a device profile (see tailor "
                               "devices)", rehearse);
    tailor_dtype dt;
    if (a->dtype_text && tailor_dtype_parse(ctx, a->dtype_text, &dt) != TAILOR_OK)
        return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
    return -1;
}

/* The (op, shape) list: the one --op/--shape, or the preset's or model's. Returns -1 with
 * *targets set, else the exit code (a bad --shape is a usage error). */
static int make_targets(tailor_ctx *ctx, const tune_args *a, tailor_tune_target **targets, int *n)
{
    if (!a->op) {
        tailor_status st = tailor_tune_targets(ctx, a->preset, a->model, targets, n);
        return st ? cli_fail(ctx, st) : -1;
    }
    tailor_tune_target *t = calloc(1, sizeof *t);
    if (!t)
        return cli_fail(ctx, tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory"));
    snprintf(t->op, sizeof t->op, "%s", a->op);
    if (tailor_shape_parse(ctx, a->shape_text, &t->shape)) {
        free(t);
        return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
    }
    /* the op and its shape keys, checked before the GPU is opened (as plan does) */
    const tailor_op *op = NULL;
    tailor_shape completed = t->shape;
    tailor_status st = tailor_op_get(ctx, a->op, &op);
    if (st) {
        free(t);
        return cli_fail(ctx, st);
    }
    if (tailor_op_complete_shape(ctx, op, &completed)) { /* a key it lacks or does not have */
        free(t);
        return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
    }
    *targets = t;
    *n = 1;
    return -1;
}

static void print_targets(const tailor_tune_target *targets, int n)
{
    for (int i = 0; i < n; i++) {
        char shape[256];
        tailor_shape_format(&targets[i].shape, shape, sizeof shape);
        printf("%-18s %s\n", targets[i].op, shape);
    }
}

/* --dtype, else the device's (or the rehearsed profile's): fp16 below sm_80, bf16 from it. */
static tailor_status pick_dtype(tailor_ctx *ctx, const tune_args *a, tailor_gpu *gpu,
                                tailor_dtype *dtype)
{
    if (a->dtype_text)
        return tailor_dtype_parse(ctx, a->dtype_text, dtype);
    const tailor_device_info *d = a->o.rehearse ? a->o.rehearse : tailor_gpu_info(gpu);
    *dtype = d->cc_major < 8 ? TAILOR_DTYPE_F16 : TAILOR_DTYPE_BF16;
    return TAILOR_OK;
}

/* Tunes each target (cached ones are reported as such), one compile memo for the run; stops at
 * the first error that would repeat for every target. Returns the number that failed. */
static int tune_targets(tailor_ctx *ctx, tailor_gpu *gpu, tailor_cache *cache,
                        const tailor_tune_target *targets, int n, tailor_dtype dtype,
                        tailor_tune_options *o)
{
    progress_state ps = {isatty(2), 0};
    o->progress = on_progress;
    o->progress_user = &ps;
    tailor_log(ctx, TAILOR_LOG_INFO, "cache %s; strategy %s; seed %llu",
               cache ? tailor_cache_path(cache) : "none (--check-only)",
               tailor_strategy_name(o->strategy), (unsigned long long)o->seed);
    /* one memo for the run: a configuration planned for many shapes compiles once */
    o->memo = tailor_tune_memo_create(gpu, o->rehearse);
    /* the targets' compiles run ahead on every CPU while each target is checked and timed */
    tailor_compile_ahead *ahead =
        n > 1 ? tailor_compile_ahead_start(tailor_gpu_info(gpu), tailor_cache_path(cache),
                                           targets, n, dtype, o)
              : NULL;
    o->ahead = ahead; /* its plans, taken target by target */
    int failures = 0, cached = 0;
    double run_t0 = cli_now_s();
    for (int i = 0; i < n; i++) {
        tailor_tune_result r;
        char shape[256];
        tailor_shape_format(&targets[i].shape, shape, sizeof shape);
        if (n > 1)
            tailor_log(ctx, TAILOR_LOG_INFO, "[%d/%d] %s %s", i + 1, n, targets[i].op, shape);
        double t0 = cli_now_s();
        tailor_status st = tailor_tune(ctx, gpu, cache, targets[i].op, &targets[i].shape, dtype,
                                       o, &r);
        clear_progress(&ps);
        if (st) {
            failures++;
            fprintf(stderr, "tailor: %s %s: %s\n", targets[i].op, shape, tailor_ctx_message(ctx));
            if (st == TAILOR_ERR_NO_COMPILE || st == TAILOR_ERR_MISUSE)
                break;
            continue;
        }
        print_result(targets[i].op, shape, dtype, &r, o->check_only, cli_now_s() - t0);
        log_phases(ctx, &r);
        cached += r.from_cache;
    }
    tailor_compile_ahead_stats as;
    o->ahead = NULL;
    tailor_compile_ahead_stop(ahead, &as);
    if (o->memo && n > 1) {
        int hits, misses;
        size_t bytes;
        tailor_compile_memo_stats(o->memo, &hits, &misses, &bytes);
        tailor_log(ctx, TAILOR_LOG_INFO, "compiled %d instantiations, reused %d (%.0f MB kept)",
                   misses, hits, (double)bytes / 1e6);
    }
    if (n > 1)
        tailor_log(ctx, TAILOR_LOG_INFO, "%d targets in %.1f s: %d cached, %d failed", n,
                   cli_now_s() - run_t0, cached, failures);
    if (ahead)
        tailor_log(ctx, TAILOR_LOG_INFO, "compiled ahead: %d instantiations for %d targets "
                   "(%d candidates queued, %d failed)%s", as.compiled, as.targets, as.queued,
                   as.failed,
                   as.full ? "; stopped at a full memo" : "");
    tailor_compile_memo_destroy(o->memo);
    o->memo = NULL;
    o->progress = NULL; /* ps ends here */
    o->progress_user = NULL;
    return failures;
}

/* --step-tune: the model on the GPU with kernels from the (now tuned) cache, then its decode
 * step's costliest kernels re-ranked inside the step (cli/step_tune_model.c). */
enum { STEP_PROMPT = 512, STEP_STEPS = 48 };
static tailor_status step_tune(tailor_ctx *ctx, const tune_args *a, tailor_gpu *gpu,
                               tailor_cache *cache, tailor_dtype dtype)
{
    tailor_gemma4 *m = NULL;
    tailor_gemma4_config cfg;
    tailor_kernels *ks = NULL;
    tailor_gemma4_gpu *g = NULL;
    tailor_gemma4_gpu_opts o = {.max_tokens = STEP_PROMPT + STEP_STEPS + 1, .dtype = (int)dtype,
                                .quantize = a->quantize, .quantize_head = a->quantize_head};
    tailor_status st = a->model ? tailor_gemma4_open(ctx, a->model, &m)
                                : tailor_gemma4_preset(ctx, a->preset, &cfg);
    if (st == TAILOR_OK && m)
        cfg = *tailor_gemma4_get_config(m);
    if (st == TAILOR_OK)
        st = tailor_kernels_create(ctx, gpu, cache, a->o.rehearse, 1, &ks);
    if (st == TAILOR_OK)
        st = m ? tailor_gemma4_gpu_create(ctx, m, gpu, ks, &o, &g)
               : tailor_gemma4_gpu_create_random(ctx, &cfg, gpu, ks, &o, 1234, &g);
    if (st == TAILOR_OK)
        st = step_tune_model(ctx, g, ks, cache, cfg.vocab, STEP_PROMPT, STEP_STEPS);
    tailor_gemma4_gpu_destroy(g);
    tailor_kernels_destroy(ks);
    tailor_gemma4_close(m);
    return st;
}

static int tune_main(tailor_ctx *ctx, int argc, char **argv)
{
    tune_args a;
    int rc = parse_tune_args(ctx, argc, argv, &a);
    if (rc >= 0)
        return rc;
    tailor_tune_target *targets = NULL;
    int ntargets = 0;
    if ((rc = make_targets(ctx, &a, &targets, &ntargets)) >= 0)
        return rc;
    if (a.list_only) {
        print_targets(targets, ntargets);
        free(targets);
        return 0;
    }
    tailor_gpu *gpu = NULL;
    tailor_cache *cache = NULL;
    tailor_dtype dtype = TAILOR_DTYPE_BF16;
    tailor_status st = tailor_gpu_open(ctx, a.ordinal, &gpu);
    if (st == TAILOR_OK && !a.o.check_only)
        st = tailor_cache_open(ctx, a.cache_path, &cache);
    if (st == TAILOR_OK)
        st = pick_dtype(ctx, &a, gpu, &dtype);
    if (st)
        rc = cli_fail(ctx, st);
    else
        rc = tune_targets(ctx, gpu, cache, targets, ntargets, dtype, &a.o) ? 1 : 0;
    if (rc == 0 && a.step_tune && (st = step_tune(ctx, &a, gpu, cache, dtype)))
        rc = cli_fail(ctx, st);
    tailor_cache_close(cache);
    tailor_gpu_close(gpu);
    free(targets);
    return rc;
}

int cmd_tune(int argc, char **argv)
{
    tailor_ctx *ctx = cli_ctx();
    int rc = tune_main(ctx, argc, argv);
    tailor_ctx_destroy(ctx);
    return rc;
}
