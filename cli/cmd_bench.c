/* cmd_bench.c — `tailor bench`: kernel benchmarks against the card's own measured copy
 * bandwidth (and cuBLAS for W4A16), the tuning strategies, the tokenizer, the sampler. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_cublas.h"
#include "cli.h"
#include "tuner.h"

static void usage(void)
{
    printf("usage: tailor bench SUBCOMMAND [options]\n\n"
           "  copy                                   device-to-device copy bandwidth\n"
           "  kernel --op OP --shape k=v,...         the cached (or freshly tuned) winner of a shape\n"
           "  w4a16 --shape m=..,n=..,k=..,group=..  W4A16 matmul, with cuBLAS dense for the ratio\n"
           "  attention --op attention_prefill|attention_decode --shape ...\n"
           "  strategies --op OP --shape ...         exhaustive vs halving vs random: tuning time\n"
           "                                         and the winner each finds\n"
           "  tokenizer --tokenizer FILE [--file F]  encoding speed on one core\n"
           "  sampler [--vocab N] [--top-k K] [--top-p P] [--temperature T]\n"
           "                                         microseconds per sampled token on one core\n"
           "  model (--model DIR | --preset NAME)    Gemma 4 end to end (see bench model --help)\n\n"
           "kernel/w4a16/attention/strategies options: [--dtype fp16|bf16] [--cache FILE]\n"
           "  [--rehearse PROFILE] [--json]\n");
}

typedef struct bench_args {
    const char *op, *shape, *dtype, *cache, *rehearse;
    int json;
} bench_args;

/* The flags of `bench sub` into a; returns -1 to go on, else the exit code (0 after --help, 2 on
 * bad usage, said on stderr). */
static int parse_args(const char *sub, int argc, char **argv, bench_args *a)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'o'},    {"shape", required_argument, NULL, 's'},
        {"dtype", required_argument, NULL, 't'}, {"cache", required_argument, NULL, 'c'},
        {"rehearse", required_argument, NULL, 'r'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'o': a->op = optarg; break;
        case 's': a->shape = optarg; break;
        case 't': a->dtype = optarg; break;
        case 'c':
            if (cli_cache_flag("bench", optarg, &a->cache))
                return 2;
            break;
        case 'r': a->rehearse = optarg; break;
        case 'j': a->json = 1; break;
        case 'h': usage(); return 0;
        default: return cli_bad_flag("bench", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench", "unexpected argument '%s' for bench %s", argv[optind], sub);
    return -1;
}

/* Everything a kernel benchmark needs open. */
typedef struct bench_env {
    tailor_ctx *ctx;
    tailor_gpu *gpu;
    tailor_cache *cache;
    tailor_dtype dtype;
    const tailor_device_info *rehearse;
    double copy_bw; /* bytes/s, measured in this run */
} bench_env;

static void env_close(bench_env *e)
{
    tailor_cache_close(e->cache);
    tailor_gpu_close(e->gpu);
    tailor_ctx_destroy(e->ctx);
}

static tailor_status env_open(bench_env *e, const bench_args *a)
{
    memset(e, 0, sizeof *e);
    e->ctx = cli_ctx();
    tailor_status st = tailor_gpu_open(e->ctx, 0, &e->gpu);
    if (st)
        return st;
    if (a->rehearse) {
        e->rehearse = tailor_device_profile_find(a->rehearse);
        if (!e->rehearse)
            return tailor_set_error(e->ctx, TAILOR_ERR_MISUSE, "--rehearse '%s' is not a profile",
                                    a->rehearse);
    }
    const tailor_device_info *d = e->rehearse ? e->rehearse : tailor_gpu_info(e->gpu);
    e->dtype = d->cc_major < 8 ? TAILOR_DTYPE_F16 : TAILOR_DTYPE_BF16;
    if (a->dtype && (st = tailor_dtype_parse(e->ctx, a->dtype, &e->dtype)))
        return st;
    if ((st = tailor_cache_open(e->ctx, a->cache, &e->cache)))
        return st;
    return tailor_gpu_copy_bandwidth(e->ctx, e->gpu, &e->copy_bw);
}

typedef struct kernel_figures {
    char winner[768];
    double us, spread_us, bytes, flops;
} kernel_figures;

/* Tunes if needed, then times the winner afresh. */
static tailor_status time_op(bench_env *e, const char *op, const tailor_shape *shape,
                             kernel_figures *f)
{
    tailor_tune_options o;
    memset(&o, 0, sizeof o);
    o.seed = (uint64_t)time(NULL);
    o.rehearse = e->rehearse;
    tailor_tune_result r;
    tailor_status st = tailor_tune(e->ctx, e->gpu, e->cache, op, shape, e->dtype, &o, &r);
    if (st)
        return st;
    f->bytes = r.bytes;
    f->flops = r.flops;
    /* the key tailor_tune wrote, found without enumerating the space again */
    tailor_shape completed;
    char hash[65] = "";
    if ((st = tailor_plan_key(e->ctx, op, shape, e->dtype, &completed, hash)))
        return st;
    tailor_winner_key_text text;
    tailor_cache_key key;
    if ((st = tailor_winner_key(e->ctx, tailor_gpu_info(e->gpu), e->rehearse, op, &completed,
                                e->dtype, hash, &text, &key)))
        return st;
    tailor_cache_winner w;
    int found = 0;
    st = tailor_cache_get_winner(e->ctx, e->cache, &key, &w, &found);
    if (st == TAILOR_OK && !found)
        st = tailor_set_error(e->ctx, TAILOR_ERR_NOT_FOUND, "no winner cached for %s %s", op,
                              text.shape);
    if (st)
        return st;
    snprintf(f->winner, sizeof f->winner, "%s %s", r.template_name, r.params);
    st = tailor_tuner_time_winner(e->ctx, e->gpu, &key, &w, 31, &f->us, &f->spread_us);
    tailor_cache_winner_free(&w);
    return st;
}

static void print_kernel(const bench_env *e, const char *op, const char *shape,
                         const kernel_figures *f, double cublas_us, int json)
{
    double gbs = f->bytes / (f->us * 1e-6) / 1e9;
    double frac = e->copy_bw > 0 ? f->bytes / (f->us * 1e-6) / e->copy_bw : 0;
    double tflops = f->flops / (f->us * 1e-6) / 1e12;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "device", tailor_gpu_info(e->gpu)->name);
        cJSON_AddStringToObject(o, "op", op);
        cJSON_AddStringToObject(o, "shape", shape);
        cJSON_AddStringToObject(o, "dtype", tailor_dtype_name(e->dtype));
        cJSON_AddStringToObject(o, "winner", f->winner);
        cJSON_AddNumberToObject(o, "us", f->us);
        cJSON_AddNumberToObject(o, "spread_us", f->spread_us);
        cJSON_AddNumberToObject(o, "gb_per_s", gbs);
        cJSON_AddNumberToObject(o, "copy_gb_per_s", e->copy_bw / 1e9);
        cJSON_AddNumberToObject(o, "fraction_of_copy", frac);
        cJSON_AddNumberToObject(o, "tflops", tflops);
        if (cublas_us > 0) {
            cJSON_AddNumberToObject(o, "cublas_dense_us", cublas_us);
            cJSON_AddNumberToObject(o, "speedup_vs_cublas", cublas_us / f->us);
        }
        char *t = cJSON_PrintUnformatted(o);
        printf("%s\n", t);
        free(t);
        cJSON_Delete(o);
        return;
    }
    printf("%-18s %-44s %s  %9.2f us (+-%.2f)  %7.0f GB/s  %5.1f%% of copy (%.0f GB/s)  %7.2f "
           "TFLOP/s",
           op, shape, tailor_dtype_name(e->dtype), f->us, f->spread_us, gbs, 100 * frac,
           e->copy_bw / 1e9, tflops);
    if (cublas_us > 0)
        printf("  cuBLAS dense %.2f us (%.2fx)", cublas_us, cublas_us / f->us);
    printf("  [%s]\n", f->winner);
}

/* The op and shape of a kernel benchmark, checked before any GPU work: 0 with *out parsed and
 * completed with the op's defaults; an unknown op fails (1) listing the known ones, as in plan
 * and tune; a shape that is malformed or does not fit the op's keys is a usage error (2). */
static int bench_shape(const char *op, const char *text, tailor_shape *out)
{
    tailor_ctx *ctx = cli_ctx();
    if (!ctx)
        return cli_usage_error("bench", "out of memory");
    const tailor_op *o = NULL;
    if (tailor_op_get(ctx, op, &o) != TAILOR_OK) {
        int rc = cli_fail(ctx, TAILOR_ERR_NOT_FOUND);
        tailor_ctx_destroy(ctx);
        return rc;
    }
    int rc = 0;
    if (tailor_shape_parse(ctx, text, out) || tailor_op_complete_shape(ctx, o, out))
        rc = cli_usage_error("bench", "%s", tailor_ctx_message(ctx));
    tailor_ctx_destroy(ctx);
    return rc;
}

static int bench_op(const char *sub, int argc, char **argv, const char *fixed_op)
{
    bench_args a;
    int rc = parse_args(sub, argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *op = fixed_op ? fixed_op : a.op;
    if (!op || !a.shape)
        return cli_usage_error("bench", "bench %s needs %s--shape", sub, fixed_op ? "" : "--op and ");
    tailor_shape shape;
    if ((rc = bench_shape(op, a.shape, &shape)))
        return rc;
    bench_env e;
    tailor_status st = env_open(&e, &a);
    kernel_figures f;
    double cublas_us = 0;
    if (st == TAILOR_OK)
        st = time_op(&e, op, &shape, &f);
    if (st == TAILOR_OK && strcmp(op, "w4a16_matmul") == 0) {
        tailor_status cs = bench_cublas_matmul(
            e.ctx, e.gpu, (int)tailor_shape_get(&shape, "m", 1), (int)tailor_shape_get(&shape, "n", 1),
            (int)tailor_shape_get(&shape, "k", 1), TAILOR_DTYPE_BF16, &cublas_us);
        if (cs) {
            fprintf(stderr, "tailor: cuBLAS comparison skipped: %s\n", tailor_ctx_message(e.ctx));
            cublas_us = 0;
        }
    }
    if (st) {
        rc = cli_fail(e.ctx, st);
        env_close(&e);
        return rc;
    }
    char shape_text[256];
    tailor_shape_format(&shape, shape_text, sizeof shape_text);
    print_kernel(&e, op, shape_text, &f, cublas_us, a.json);
    env_close(&e);
    return 0;
}

static int bench_copy(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args("copy", argc, argv, &a);
    if (rc >= 0)
        return rc;
    bench_env e;
    tailor_status st = env_open(&e, &a);
    if (st) {
        rc = cli_fail(e.ctx, st);
        env_close(&e);
        return rc;
    }
    printf("%s: device-to-device copy %.0f GB/s (bytes read + written); peak from clock and bus "
           "%.0f GB/s\n",
           tailor_gpu_info(e.gpu)->name, e.copy_bw / 1e9,
           tailor_device_peak_bandwidth(tailor_gpu_info(e.gpu)) / 1e9);
    env_close(&e);
    return 0;
}

/* Tunes one shape with each strategy into a throwaway cache and reports the cost of tuning
 * and the winner each found. */
static int bench_strategies(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args("strategies", argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (!a.op || !a.shape)
        return cli_usage_error("bench", "bench strategies needs --op and --shape");
    tailor_shape shape;
    if ((rc = bench_shape(a.op, a.shape, &shape)))
        return rc;
    char path[] = "/tmp/tailor-bench-strategies-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return cli_usage_error("bench", "cannot create a temporary cache");
    close(fd);
    a.cache = path;
    bench_env e;
    tailor_status st = env_open(&e, &a);
    static const struct {
        const char *name;
        tailor_strategy s;
        int trials;
    } runs[] = {{"exhaustive", TAILOR_STRATEGY_EXHAUSTIVE, 0},
                {"halving", TAILOR_STRATEGY_HALVING, 0},
                {"random(8)", TAILOR_STRATEGY_RANDOM, 8}};
    printf("%-12s %10s %10s %12s  %s\n", "strategy", "tune s", "timed", "winner us", "winner");
    for (size_t i = 0; i < 3 && st == TAILOR_OK; i++) {
        tailor_tune_options o;
        memset(&o, 0, sizeof o);
        o.strategy = runs[i].s;
        o.trials = runs[i].trials;
        o.force = 1;
        o.seed = 7;
        tailor_tune_result r;
        double t0 = cli_now_s();
        st = tailor_tune(e.ctx, e.gpu, e.cache, a.op, &shape, e.dtype, &o, &r);
        double t1 = cli_now_s();
        if (st == TAILOR_OK)
            printf("%-12s %10.2f %10d %12.2f  %s %s\n", runs[i].name, t1 - t0, r.timed,
                   r.median_us, r.template_name, r.params);
    }
    if (st)
        rc = cli_fail(e.ctx, st);
    env_close(&e);
    unlink(path);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("bench", "give a subcommand: copy, kernel, w4a16, attention, strategies, "
                               "model, sampler or tokenizer");
    if (strcmp(argv[1], "--help") == 0) {
        usage();
        return 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "model") == 0)
        return bench_model(argc - 1, argv + 1);
    if (strcmp(sub, "copy") == 0)
        return bench_copy(argc - 1, argv + 1);
    if (strcmp(sub, "kernel") == 0)
        return bench_op(sub, argc - 1, argv + 1, NULL);
    if (strcmp(sub, "w4a16") == 0)
        return bench_op(sub, argc - 1, argv + 1, "w4a16_matmul");
    if (strcmp(sub, "attention") == 0)
        return bench_op(sub, argc - 1, argv + 1, NULL);
    if (strcmp(sub, "strategies") == 0)
        return bench_strategies(argc - 1, argv + 1);
    if (strcmp(sub, "tokenizer") == 0)
        return bench_tokenizer(argc - 1, argv + 1);
    if (strcmp(sub, "sampler") == 0)
        return bench_sampler(argc - 1, argv + 1);
    return cli_usage_error("bench", "unknown benchmark '%s'", sub);
}
