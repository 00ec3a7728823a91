/* cmd_tune.c — `tailor tune`: find and cache the fastest right kernel for each shape. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tune_targets.h"
#include "tuner.h"

static void usage(void)
{
    printf("usage: tailor tune (--op OP --shape k=v,... | --preset NAME | --model DIR)\n"
           "                   [--dtype fp16|bf16] [--strategy exhaustive|random|halving]\n"
           "                   [--budget SECONDS] [--trials N] [--rehearse PROFILE] [--verify-all]\n"
           "                   [--force] [--cache FILE] [--seed N] [--jobs N] [--device N] [--list]\n\n"
           "Compiles the survivors of `tailor plan` for the live GPU (or, with --rehearse, for a\n"
           "profile's architecture and budget, run as PTX on this GPU), checks each against the\n"
           "op's C reference, times the right ones and caches the winner. Cached shapes are\n"
           "skipped; with TAILOR_NO_COMPILE=1 any compile is an error. --list prints the\n"
           "(op, shape) list of a preset or model and stops (no GPU needed).\n");
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

static void print_result(const char *op, const char *shape, tailor_dtype dtype,
                         const tailor_tune_result *r)
{
    if (r->from_cache) {
        printf("%-14s %-40s %s  cached: %s %s  %.2f us\n", op, shape, tailor_dtype_name(dtype),
               r->template_name, r->params, r->median_us);
        return;
    }
    double gbs = r->median_us > 0 ? r->bytes / (r->median_us * 1e-6) / 1e9 : 0;
    char reused[48] = "";
    if (r->reused)
        snprintf(reused, sizeof reused, " (%d of them earlier in this run)", r->reused);
    printf("%-14s %-40s %s  %d candidates, %d survive, %d compiled%s, %d right, %d wrong; "
           "winner %s %s  %.2f us (+-%.2f)  %.0f GB/s\n",
           op, shape, tailor_dtype_name(dtype), r->candidates, r->survivors, r->compiled, reused,
           r->verified, r->wrong, r->template_name, r->params, r->median_us, r->spread_us, gbs);
}

static int tune_main(tailor_ctx *ctx, int argc, char **argv)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'o'},       {"shape", required_argument, NULL, 's'},
        {"preset", required_argument, NULL, 'p'},   {"model", required_argument, NULL, 'm'},
        {"dtype", required_argument, NULL, 't'},    {"strategy", required_argument, NULL, 'S'},
        {"budget", required_argument, NULL, 'b'},   {"trials", required_argument, NULL, 'n'},
        {"rehearse", required_argument, NULL, 'r'}, {"verify-all", no_argument, NULL, 'V'},
        {"force", no_argument, NULL, 'f'},          {"cache", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 'e'},     {"jobs", required_argument, NULL, 'j'},
        {"device", required_argument, NULL, 'd'},   {"help", no_argument, NULL, 'h'},
        {"list", no_argument, NULL, 'l'},
        {NULL, 0, NULL, 0},
    };
    const char *op = NULL, *shape_text = NULL, *preset = NULL, *model = NULL, *dtype_text = NULL;
    const char *cache_path = NULL, *rehearse = NULL;
    int ordinal = 0, list_only = 0, c;
    tailor_tune_options o;
    memset(&o, 0, sizeof o);
    o.seed = (uint64_t)time(NULL);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'o': op = optarg; break;
        case 's': shape_text = optarg; break;
        case 'p': preset = optarg; break;
        case 'm': model = optarg; break;
        case 't': dtype_text = optarg; break;
        case 'S':
            if (tailor_strategy_parse(ctx, optarg, &o.strategy))
                return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
            break;
        case 'b':
            o.budget_seconds = strtod(optarg, &end);
            if (*end || o.budget_seconds <= 0)
                return cli_usage_error("tune", "--budget needs a positive number of seconds");
            o.strategy = TAILOR_STRATEGY_RANDOM;
            break;
        case 'n':
            if (cli_parse_int("tune", "--trials", optarg, 1, 1000000, &o.trials))
                return 2;
            o.strategy = TAILOR_STRATEGY_RANDOM;
            break;
        case 'r': rehearse = optarg; break;
        case 'V': o.verify_all = 1; break;
        case 'f': o.force = 1; break;
        case 'c': cache_path = optarg; break;
        case 'e':
            o.seed = strtoull(optarg, &end, 10);
            if (end == optarg || *end)
                return cli_usage_error("tune", "--seed takes an unsigned integer, not '%s'", optarg);
            break;
        case 'j':
            if (cli_parse_int("tune", "--jobs", optarg, 0, 1024, &o.jobs))
                return 2;
            break;
        case 'd':
            if (cli_parse_int("tune", "--device", optarg, 0, 63, &ordinal))
                return 2;
            break;
        case 'l': list_only = 1; break;
        case 'h': usage(); return 0;
        default: return cli_bad_flag("tune", argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("tune", "unexpected argument '%s'", argv[optind]);
    int sources = (op != NULL) + (preset != NULL) + (model != NULL);
    if (sources != 1)
        return cli_usage_error("tune", "give exactly one of --op (with --shape), --preset, --model");
    if (op && !shape_text)
        return cli_usage_error("tune", "--op needs --shape");
    if (rehearse) {
        o.rehearse = tailor_device_profile_find(rehearse);
        if (!o.rehearse)
            return cli_usage_error("tune", "--rehearse '%s' is not a device profile (see tailor "
                                   "devices)", rehearse);
    }
    tailor_tune_target *targets = NULL;
    int ntargets = 0;
    tailor_status st = TAILOR_OK;
    if (op) {
        targets = calloc(1, sizeof *targets);
        if (!targets)
            return cli_fail(ctx, tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory"));
        snprintf(targets[0].op, sizeof targets[0].op, "%s", op);
        st = tailor_shape_parse(ctx, shape_text, &targets[0].shape);
        ntargets = 1;
        if (st) {
            free(targets);
            return cli_usage_error("tune", "%s", tailor_ctx_message(ctx));
        }
    } else {
        st = tailor_tune_targets(ctx, preset, model, &targets, &ntargets);
        if (st)
            return cli_fail(ctx, st);
    }
    if (list_only) {
        for (int i = 0; i < ntargets; i++) {
            char shape[256];
            tailor_shape_format(&targets[i].shape, shape, sizeof shape);
            printf("%-18s %s\n", targets[i].op, shape);
        }
        free(targets);
        return 0;
    }
    tailor_gpu *gpu = NULL;
    tailor_cache *cache = NULL;
    st = tailor_gpu_open(ctx, ordinal, &gpu);
    if (st == TAILOR_OK)
        st = tailor_cache_open(ctx, cache_path, &cache);
    tailor_dtype dtype = TAILOR_DTYPE_BF16;
    if (st == TAILOR_OK) {
        const tailor_device_info *d = o.rehearse ? o.rehearse : tailor_gpu_info(gpu);
        if (dtype_text)
            st = tailor_dtype_parse(ctx, dtype_text, &dtype);
        else
            dtype = d->cc_major < 8 ? TAILOR_DTYPE_F16 : TAILOR_DTYPE_BF16;
    }
    if (st) {
        int rc = cli_fail(ctx, st);
        tailor_cache_close(cache);
        tailor_gpu_close(gpu);
        free(targets);
        return rc;
    }
    progress_state ps = {isatty(2), 0};
    o.progress = on_progress;
    o.progress_user = &ps;
    tailor_log(ctx, TAILOR_LOG_INFO, "cache %s; seed %llu", tailor_cache_path(cache),
               (unsigned long long)o.seed);
    /* one memo for the run: a configuration planned for many shapes compiles once */
    o.memo = tailor_compile_memo_create(TAILOR_COMPILE_MEMO_BYTES);
    int failures = 0;
    for (int i = 0; i < ntargets; i++) {
        tailor_tune_result r;
        char shape[256];
        tailor_shape_format(&targets[i].shape, shape, sizeof shape);
        if (ntargets > 1)
            tailor_log(ctx, TAILOR_LOG_INFO, "[%d/%d] %s %s", i + 1, ntargets, targets[i].op,
                       shape);
        st = tailor_tune(ctx, gpu, cache, targets[i].op, &targets[i].shape, dtype, &o, &r);
        clear_progress(&ps);
        if (st) {
            failures++;
            fprintf(stderr, "tailor: %s %s: %s\n", targets[i].op, shape, tailor_ctx_message(ctx));
            if (st == TAILOR_ERR_NO_COMPILE || st == TAILOR_ERR_MISUSE)
                break;
            continue;
        }
        tailor_shape_format(&targets[i].shape, shape, sizeof shape);
        print_result(targets[i].op, shape, dtype, &r);
    }
    if (o.memo && ntargets > 1) {
        int hits, misses;
        size_t bytes;
        tailor_compile_memo_stats(o.memo, &hits, &misses, &bytes);
        tailor_log(ctx, TAILOR_LOG_INFO, "compiled %d instantiations, reused %d (%.0f MB kept)",
                   misses, hits, (double)bytes / 1e6);
    }
    tailor_compile_memo_destroy(o.memo);
    tailor_cache_close(cache);
    tailor_gpu_close(gpu);
    free(targets);
    return failures ? 1 : 0;
}

int cmd_tune(int argc, char **argv)
{
    tailor_ctx *ctx = cli_ctx();
    int rc = tune_main(ctx, argc, argv);
    tailor_ctx_destroy(ctx);
    return rc;
}
