/* bench_model.c — `tailor bench model`: end-to-end Gemma 4 on the GPU (prefill and decode speed,
 * time to first token, memory, decode as a fraction of the bandwidth bound), with a checkpoint
 * or with random weights of a preset's shapes made on the GPU. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "cli.h"
#include "cuda.h"
#include "device.h"
#include "gemma4.h"
#include "sampler.h"
#include "kernels.h"
#include "op.h"

/* Peak resident set (VmHWM) in bytes, 0 when unknown. */
static double vm_hwm(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atof(line + 6);
    if (f)
        fclose(f);
    return kb * 1024;
}

/* Resets the peak resident set to the current one (Linux clear_refs 5) and returns it. */
static double reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    return vm_hwm();
}

static tailor_status create(tailor_ctx *ctx, const tailor_gemma4 *m, const tailor_gemma4_config *cfg,
                            tailor_gpu *gpu, tailor_kernels *ks, const tailor_gemma4_gpu_opts *o,
                            tailor_gemma4_gpu **g)
{
    return m ? tailor_gemma4_gpu_create(ctx, m, gpu, ks, o, g)
             : tailor_gemma4_gpu_create_random(ctx, cfg, gpu, ks, o, 1234, g);
}

/* Prints the kernels of one decode step, the costliest first. */
static tailor_status print_profile(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token)
{
    enum { CAP = 256 };
    tailor_gemma4_gpu_prof *p = calloc(CAP, sizeof *p);
    if (!p)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "bench model: out of memory");
    int n = 0, launches = 0;
    double total = 0;
    tailor_status s = tailor_gemma4_gpu_profile_step(ctx, g, token, p, CAP, &n, &total);
    for (int i = 0; i < n; i++) /* insertion sort by time, descending */
        for (int j = i; j > 0 && p[j].us > p[j - 1].us; j--) {
            tailor_gemma4_gpu_prof t = p[j];
            p[j] = p[j - 1];
            p[j - 1] = t;
        }
    for (int i = 0; i < n; i++)
        launches += p[i].calls;
    if (s == TAILOR_OK) {
        printf("profile of one decode step, kernel by kernel: %d launches, %.1f us in kernels\n",
               launches, total);
        printf("  %9s %6s %5s  %-18s %s\n", "us", "share", "calls", "op", "shape");
        for (int i = 0; i < n; i++)
            printf("  %9.1f %5.1f%% %5d  %-18s %s\n", p[i].us, 100 * p[i].us / total, p[i].calls,
                   p[i].op, p[i].shape);
    }
    free(p);
    return s;
}

/* Microseconds from `from` to `to` (%globaltimer ns); 0 when `to` is earlier. */
static double us_between(unsigned long long from, unsigned long long to)
{
    return to > from ? (double)(to - from) / 1e3 : 0;
}

/* Prints a step trace: each launch in release order (start, the gap to the next release, how
 * long its first block waited for the predecessor, how much later its last block was
 * released), then the gaps summed per (op, shape). */
static tailor_status trace_print(tailor_ctx *ctx, const tailor_trace_launch *t, int n)
{
    if (n < 2)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "bench model --trace: %d launches were "
                                "recorded; the step's kernels were not traced", n);
    tailor_trace_sum *sum = calloc((size_t)n, sizeof *sum);
    if (!sum)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "bench model: out of memory");
    int ns = 0, merged = 0;
    unsigned long long t0 = t[0].release_first;
    printf("trace of one decode step (winners recompiled with TAILOR_TRACE): %d launches, %.1f us "
           "from the first release to the last\n", n, us_between(t0, t[n - 1].release_first));
    printf("  %8s %7s %7s %7s %6s  %-18s %s\n", "start_us", "gap_us", "early", "late", "blocks",
           "op", "shape [kernel]");
    for (int i = 0; i < n; i++) {
        merged += t[i].shared_slot;
        printf("  %8.2f %7.2f %7.2f %7.2f %6lld  %-18s %s [%s]%s\n",
               us_between(t0, t[i].release_first), tailor_trace_gap_us(t, n, i),
               us_between(t[i].arrive, t[i].release_first),
               us_between(t[i].release_first, t[i].release_last), t[i].blocks, t[i].op,
               t[i].shape, t[i].description, t[i].shared_slot ? " (two launches merged)" : "");
    }
    tailor_trace_summarize(t, n, sum, &ns);
    printf("gaps summed per kernel (the step's critical path, launch by launch):\n"
           "  %9s %6s %8s  %-18s %s\n", "us", "calls", "us/call", "op", "shape [kernel]");
    for (int j = 0; j < ns; j++)
        printf("  %9.1f %6d %8.2f  %-18s %s [%s]\n", sum[j].gap_us, sum[j].launches,
               sum[j].gap_us / sum[j].launches, sum[j].op, sum[j].shape, sum[j].description);
    if (merged)
        printf("%d records held two launches of one kernel (their slot of %%gridid collided)\n",
               merged);
    free(sum);
    return TAILOR_OK;
}

/* One decode step traced (the kernel set loaded with tailor_kernels_set_trace). */
static tailor_status trace_step(tailor_ctx *ctx, tailor_kernels *ks, tailor_gemma4_gpu *g,
                                int32_t token)
{
    tailor_trace_launch *t = NULL;
    int n = 0, next = 0;
    tailor_status s = tailor_kernels_trace_arm(ctx, ks);
    if (s == TAILOR_OK)
        s = tailor_gemma4_gpu_step(ctx, g, token, NULL, &next);
    if (s == TAILOR_OK)
        s = tailor_kernels_trace_read(ctx, ks, &t, &n);
    if (s == TAILOR_OK)
        s = trace_print(ctx, t, n);
    free(t);
    return s;
}

/* Appends one --knockout item ("OP" or "OP:k=v,...") to list (';'-separated); 1 when the item
 * is malformed, names no known op or the list is full. */
static int add_knockout(char *list, size_t cap, const char *item)
{
    const char *colon = strchr(item, ':');
    size_t name = colon ? (size_t)(colon - item) : strlen(item);
    char op[64];
    tailor_shape sel;
    if (name == 0 || name >= sizeof op || strchr(item, ';') ||
        (colon && tailor_shape_parse(NULL, colon + 1, &sel) != TAILOR_OK))
        return 1;
    memcpy(op, item, name);
    op[name] = '\0';
    if (!tailor_op_find(op))
        return 1;
    size_t used = strlen(list);
    if (used + strlen(item) + 2 > cap - 16)
        return 1;
    snprintf(list + used, cap - used, "%s%s", used ? ";" : "", item);
    return 0;
}

static void model_usage(void)
{
    printf("usage: tailor bench model (--model DIR | --preset NAME) [--quantize w4a16]\n"
           "         [--quantize-head] [--prompt-len N] [--decode N] [--cache FILE]\n"
           "         [--profile] [--no-pdl] [--separate-gating] [--separate-q-prep]\n"
           "         [--attention-q-prep] [--fused-mlp] [--act-order]\n"
           "         [--seams kernel|prologue|epilogue|mixed] [--knockout OP[:k=v,...]]... [--trace]\n"
           "         [--step-tune] [--ple-host] [--one-by-one] [--sample rows|top] [--device gpu:N]\n"
           "         [--rehearse PROFILE] [--json]\n\n"
           "Gemma 4 end to end on the GPU: prefill and decode tok/s, time to first token, peak host\n"
           "memory of the load, GPU memory, decode against the bandwidth bound (weight bytes per\n"
           "token over the copy bandwidth measured in the same run). Without --model, random\n"
           "weights of the preset's shapes are made on the GPU. --profile: one decode step kernel\n"
           "by kernel; --quantize-head: the LM head as an int4 copy of the embedding (group 128);\n"
           "--no-pdl: no programmatic dependent launch; --separate-gating: the MLP and PLE\n"
           "gating as their own kernels instead of GEMV epilogues; --separate-q-prep: q's norm and\n"
           "RoPE in a kernel of their own on every layer (else folded into the K/V store where a\n"
           "layer has one); --fused-mlp: an int4 MLP as one w4a16_mlp launch instead of two\n"
           "GEMVs (gate|up gated, then down); --act-order (random weights with --quantize\n"
           "w4a16): every int4 linear in an activation order, its input gathered first, as a\n"
           "checkpoint's weight_g_idx runs; --attention-q-prep: q's norm and\n"
           "RoPE inside decode attention instead of a kernel before it; --seams: the layer seams as\n"
           "their own kernels, in the next GEMV (the default before 16-bit ones), in the\n"
           "projection's last block, or mixed: in the next GEMV before 16-bit ones, in the last\n"
           "block before int4 ones (all for comparisons). --knockout (repeatable): skip every\n"
           "launch of OP (only those whose shape has the given values), so that the decode figure\n"
           "shows what those kernels cost on the step's critical path; every output is then\n"
           "meaningless (timing experiments only). --trace: the winners are compiled again with\n"
           "TAILOR_TRACE and one more decode step prints when each launch was released from its\n"
           "grid wait, so the gap to the next release is what it costs on the critical path\n"
           "(docs/development.md). --step-tune: after the first timing, the costliest kernels of the\n"
           "decode step try their next-best verified configurations inside the step itself;\n"
           "one that makes the step faster in every alternating pair replaces the winner in the\n"
           "cache; the figures printed are those after (docs/cli.md). Decode steps are queued\n"
           "ahead of the host reading their ids (each step's argmax feeds the next on the GPU)\n"
           "when the PLE table is on the GPU; --ple-host keeps it on the host (a row uploaded per\n"
           "token), --one-by-one waits for each step before queuing the next (both for\n"
           "comparisons). --sample: decode sampled with Gemma's defaults (top-k 64, top-p 0.95,\n"
           "temperature 1), one step at a time, each step downloading its whole row of logits\n"
           "for the host sampler (rows) or only the row's 128 best (top: the op topk; the same\n"
           "ids, as tailor run draws them; the row where the 64th best's ties run past them).\n"
           "--rehearse P: the kernels chosen and compiled under profile P's budget and features\n"
           "(e.g. t4, a10g; its dtype unless --quantize says otherwise: fp16 below sm_80), run on\n"
           "this GPU with this GPU's bandwidth, as tailor run --rehearse runs them.\n");
}

/* What the command line asked for. */
typedef struct model_args {
    const char *model, *preset, *quant, *cache_file;
    int plen, ndec, json, profile, trace, step_tune;
    int ordinal;    /* --device N: the GPU */
    int one_by_one; /* --one-by-one: decode steps waited for one at a time */
    int sample;     /* --sample: 0 greedy, SAMPLE_ROWS, SAMPLE_TOP */
    const tailor_device_info *rehearse; /* --rehearse: the profile whose kernels run */
    tailor_gemma4_gpu_opts o; /* o.knockout points to knock */
    char knock[256];
} model_args;

enum { SAMPLE_ROWS = 1, SAMPLE_TOP = 2 };

/* The open pieces of one benchmark, closed by close_run. */
typedef struct model_run {
    tailor_gemma4 *m; /* the checkpoint, or NULL with a preset */
    tailor_gemma4_config cfg;
    tailor_gpu *gpu;
    tailor_cache *cache;
    tailor_kernels *ks;
    tailor_gemma4_gpu *g;
    double bw; /* copy bandwidth, bytes/s, measured in this run */
    size_t free0, total;
} model_run;

/* What was measured. */
typedef struct model_figures {
    double base_rss, rss, load_s, tune_s, pre_s, dec_s;
    size_t gpu_bytes;
    int tuned; /* kernel shapes tuned on demand during the first load */
} model_figures;

/* Seams name to TAILOR_GEMMA4_SEAMS_*, -1 when unknown. */
static int parse_seams(const char *name)
{
    return strcmp(name, "kernel") == 0     ? TAILOR_GEMMA4_SEAMS_KERNEL
           : strcmp(name, "prologue") == 0 ? TAILOR_GEMMA4_SEAMS_PROLOGUE
           : strcmp(name, "epilogue") == 0 ? TAILOR_GEMMA4_SEAMS_EPILOGUE
           : strcmp(name, "mixed") == 0    ? TAILOR_GEMMA4_SEAMS_MIXED
                                           : -1;
}

/* The flags into a; returns -1 to go on, else the exit code (0 after --help, 2 on bad usage,
 * said on stderr). */
static int parse_model_args(int argc, char **argv, model_args *a)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"preset", required_argument, 0, 'p'},
                                         {"quantize", required_argument, 0, 'q'},
                                         {"prompt-len", required_argument, 0, 'l'},
                                         {"decode", required_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},
                                         {"cache", required_argument, 0, 'c'},
                                         {"profile", no_argument, 0, 'P'},
                                         {"no-pdl", no_argument, 0, 'N'},
                                         {"seams", required_argument, 0, 'U'},
                                         {"separate-gating", no_argument, 0, 'G'},
                                         {"attention-q-prep", no_argument, 0, 'Q'},
                                         {"separate-q-prep", no_argument, 0, 'S'},
                                         {"fused-mlp", no_argument, 0, 'M'},
                                         {"act-order", no_argument, 0, 'R'},
                                         {"quantize-head", no_argument, 0, 'H'},
                                         {"knockout", required_argument, 0, 'K'},
                                         {"trace", no_argument, 0, 'T'},
                                         {"step-tune", no_argument, 0, 'X'},
                                         {"ple-host", no_argument, 0, 'E'},
                                         {"one-by-one", no_argument, 0, 'O'},
                                         {"sample", required_argument, 0, 'A'},
                                         {"device", required_argument, 0, 'D'},
                                         {"rehearse", required_argument, 0, 'r'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->plen = 512;
    a->ndec = 128;
    tailor_gemma4_gpu_opts *o = &a->o;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a->model = optarg; break;
        case 'p': a->preset = optarg; break;
        case 'q': a->quant = optarg; break;
        case 'l':
            if (cli_parse_int("bench model", "--prompt-len", optarg, 1, 1 << 20, &a->plen))
                return 2;
            break;
        case 'd':
            if (cli_parse_int("bench model", "--decode", optarg, 1, 1 << 20, &a->ndec))
                return 2;
            break;
        case 'j': a->json = 1; break;
        case 'D': /* a live GPU: N, gpu:N or cuda:N (as tailor run takes it) */
            if (!*optarg || (a->ordinal = tailor_device_live_ordinal(optarg)) < 0)
                return cli_usage_error("bench model", "--device '%s' is none of gpu, cuda, gpu:N, "
                                       "cuda:N, N", optarg);
            break;
        case 'c':
            if (cli_cache_flag("bench model", optarg, &a->cache_file))
                return 2;
            break;
        case 'P': a->profile = 1; break;
        case 'N': o->no_pdl = 1; break;
        case 'U': o->seams = parse_seams(optarg); break;
        case 'G': o->separate_gating = 1; break;
        case 'Q': o->attention_q_prep = 1; break;
        case 'S': o->separate_q_prep = 1; break;
        case 'M': o->fused_mlp = 1; break;
        case 'R': o->act_order = 1; break;
        case 'H': o->quantize_head = 1; break;
        case 'T': a->trace = 1; break;
        case 'X': a->step_tune = 1; break;
        case 'E': o->ple_host = 1; break;
        case 'O': a->one_by_one = 1; break;
        case 'A':
            a->sample = strcmp(optarg, "rows") == 0  ? SAMPLE_ROWS
                        : strcmp(optarg, "top") == 0 ? SAMPLE_TOP
                                                     : -1;
            if (a->sample < 0)
                return cli_usage_error("bench model", "--sample takes rows or top, not '%s'",
                                       optarg);
            break;
        case 'K':
            if (add_knockout(a->knock, sizeof a->knock, optarg))
                return cli_usage_error("bench model", "--knockout takes OP or OP:key=value,..., "
                                       "OP an op the model launches, at most 240 "
                                       "characters in all; not '%s'", optarg);
            break;
        case 'r':
            if (!(a->rehearse = tailor_device_profile_find(optarg)))
                return cli_usage_error("bench model", "--rehearse '%s' is not a device profile "
                                       "(see tailor devices)", optarg);
            break;
        case 'h': model_usage(); return 0;
        default: return cli_bad_flag("bench model", c, argc, argv);
        }
    }
    if (!a->model == !a->preset || (a->quant && strcmp(a->quant, "w4a16") != 0))
        return cli_usage_error("bench model", "give --model DIR or --preset NAME, a positive "
                               "--prompt-len and --decode, and --quantize w4a16 or nothing");
    if (o->seams < 0)
        return cli_usage_error("bench model", "--seams takes kernel, prologue, epilogue or mixed");
    if (o->act_order && (a->model || !a->quant))
        return cli_usage_error("bench model", "--act-order orders random int4 weights: give it "
                               "with --preset and --quantize w4a16 (a checkpoint's weight_g_idx "
                               "decides its own)");
    if (a->json && (a->trace || a->profile || a->step_tune))
        return cli_usage_error("bench model", "--trace, --profile and --step-tune print tables; "
                               "leave out --json with them");
    if (a->step_tune && (a->trace || a->knock[0]))
        return cli_usage_error("bench model", "--step-tune times real steps: leave out --trace "
                               "and --knockout");
    /* positions: the prompt, the decode, the token after it, and the traced or profiled step */
    o->max_tokens = a->plen + a->ndec + 1 + a->trace + a->profile;
    o->dtype = a->rehearse ? (int)tailor_dtype_for_cc(a->rehearse->cc_major) : -1;
    o->quantize = a->quant != NULL;
    o->knockout = a->knock;
    return -1;
}

/* The model's configuration, the GPU and its copy bandwidth, the kernel cache and the kernel set. */
static tailor_status open_run(tailor_ctx *ctx, const model_args *a, model_run *r)
{
    char path[1024];
    tailor_status s = a->model ? tailor_gemma4_open(ctx, a->model, &r->m)
                               : tailor_gemma4_preset(ctx, a->preset, &r->cfg);
    if (s == TAILOR_OK && r->m)
        r->cfg = *tailor_gemma4_get_config(r->m);
    if (s == TAILOR_OK)
        s = tailor_gpu_open(ctx, a->ordinal, &r->gpu);
    if (s == TAILOR_OK)
        s = tailor_gpu_copy_bandwidth(ctx, r->gpu, &r->bw);
    if (s == TAILOR_OK)
        s = tailor_gpu_mem_info(ctx, r->gpu, &r->free0, &r->total);
    if (s == TAILOR_OK && a->cache_file)
        snprintf(path, sizeof path, "%s", a->cache_file);
    else if (s == TAILOR_OK)
        s = tailor_cache_default_path(ctx, path, sizeof path);
    if (s == TAILOR_OK)
        s = tailor_cache_open(ctx, path, &r->cache);
    if (s == TAILOR_OK)
        s = tailor_kernels_create(ctx, r->gpu, r->cache, a->rehearse, 1, &r->ks);
    if (s == TAILOR_OK && a->trace)
        tailor_kernels_set_trace(r->ks, 1);
    return s;
}

static void close_run(model_run *r)
{
    tailor_gemma4_gpu_destroy(r->g);
    tailor_kernels_destroy(r->ks);
    tailor_cache_close(r->cache);
    tailor_gpu_close(r->gpu);
    tailor_gemma4_close(r->m);
}

/* The model onto the GPU (f->base_rss: the peak resident set before anything was opened). When
 * kernels were tuned inside the load, it is loaded again from the now warm cache, so that the
 * load figures (time, peak host memory) are the load path's alone. */
static tailor_status load_model(tailor_ctx *ctx, const model_args *a, model_run *r,
                                model_figures *f)
{
    double t0 = cli_now_s();
    tailor_status s = create(ctx, r->m, &r->cfg, r->gpu, r->ks, &a->o, &r->g);
    f->load_s = cli_now_s() - t0;
    if (s == TAILOR_OK) {
        tailor_gemma4_gpu_info info;
        tailor_gemma4_gpu_get_info(r->g, &info);
        f->tuned = info.kernels_tuned;
    }
    if (s == TAILOR_OK && f->tuned > 0) {
        tailor_gemma4_gpu_destroy(r->g);
        r->g = NULL;
        f->tune_s = f->load_s;
        f->base_rss = reset_hwm();
        t0 = cli_now_s();
        s = create(ctx, r->m, &r->cfg, r->gpu, r->ks, &a->o, &r->g);
        f->load_s = cli_now_s() - t0;
        f->tune_s -= f->load_s;
    }
    f->rss = vm_hwm();
    size_t free1 = 0;
    if (s == TAILOR_OK)
        s = tailor_gpu_mem_info(ctx, r->gpu, &free1, &r->total);
    f->gpu_bytes = r->free0 - free1;
    return s;
}

/* --sample: ndec sampled steps after *next, one at a time, each downloading its row of logits
 * (SAMPLE_ROWS) or its candidates (SAMPLE_TOP) for the host sampler; *next: the last id. */
static tailor_status decode_sampled(tailor_ctx *ctx, const model_args *a, model_run *r,
                                    int32_t *next)
{
    static const tailor_sampler_params gemma = {.temperature = 1.0f, .top_k = 64, .top_p = 0.95f,
                                                .seed = 1};
    tailor_sampler *smp = NULL;
    float *row = NULL, vals[TAILOR_GEMMA4_TOP_K]; /* row: pinned */
    int32_t ids[TAILOR_GEMMA4_TOP_K], argmax;
    size_t V = (size_t)r->cfg.vocab;
    int undecided = 0;
    tailor_status s = tailor_sampler_create(ctx, &gemma, r->cfg.vocab, &smp);
    if (s == TAILOR_OK) /* the rows, or the row the candidates could not decide */
        s = tailor_gpu_host_alloc(ctx, r->gpu, V * sizeof *row, (void **)&row);
    for (int i = 0; i < a->ndec && s == TAILOR_OK; i++) {
        if (a->sample == SAMPLE_TOP) {
            int read_row = 0;
            s = tailor_gemma4_gpu_step_top(ctx, r->g, *next, vals, ids, &argmax);
            if (s == TAILOR_OK)
                s = tailor_gemma4_gpu_draw(ctx, r->g, smp, vals, ids, row, next, &read_row);
            undecided += read_row;
        } else {
            s = tailor_gemma4_gpu_step(ctx, r->g, *next, row, &argmax);
            if (s == TAILOR_OK)
                *next = tailor_sampler_next(smp, row);
        }
    }
    if (s == TAILOR_OK && a->sample == SAMPLE_TOP)
        tailor_log(ctx, TAILOR_LOG_INFO, "sampled: %d of %d steps read their row (the 64th "
                   "best's ties ran past the %d candidates)", undecided, a->ndec,
                   TAILOR_GEMMA4_TOP_K);
    tailor_gpu_host_free(r->gpu, row);
    tailor_sampler_destroy(smp);
    return s;
}

/* ndec decode steps after *next: greedy (queued ahead, or one at a time with --one-by-one) or
 * sampled (--sample); *next: the last id. */
static tailor_status decode(tailor_ctx *ctx, const model_args *a, model_run *r, int32_t *next)
{
    tailor_status s = TAILOR_OK;
    if (a->sample)
        return decode_sampled(ctx, a, r, next);
    if (a->one_by_one) {
        for (int i = 0; i < a->ndec && s == TAILOR_OK; i++)
            s = tailor_gemma4_gpu_step(ctx, r->g, *next, NULL, next);
        return s;
    }
    int32_t *out = malloc((size_t)a->ndec * sizeof *out);
    int kept = 0;
    if (!out)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "bench model: out of memory");
    s = tailor_gemma4_gpu_greedy(ctx, r->g, *next, a->ndec, out, &kept, NULL, NULL);
    if (s == TAILOR_OK)
        *next = out[kept - 1];
    free(out);
    return s;
}

/* A prompt of plen tokens and ndec greedy decode steps, twice (the first run warms up); the
 * second's times. *next: the last token, for a profiled or traced step after it. */
static tailor_status time_prefill_decode(tailor_ctx *ctx, const model_args *a, model_run *r,
                                         model_figures *f, int32_t *next)
{
    int32_t *ids = cli_prompt_ids(r->cfg.vocab, a->plen);
    if (!ids)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "bench model: out of memory");
    tailor_status s = TAILOR_OK;
    for (int rep = 0; rep < 2 && s == TAILOR_OK; rep++) {
        tailor_gemma4_gpu_reset(r->g);
        double t0 = cli_now_s();
        s = tailor_gemma4_gpu_prefill(ctx, r->g, ids, a->plen, NULL, next);
        double t1 = cli_now_s();
        if (s == TAILOR_OK)
            s = decode(ctx, a, r, next);
        f->pre_s = t1 - t0;
        f->dec_s = cli_now_s() - t1;
    }
    free(ids);
    return s;
}

/* --step-tune: the decode figure so far, the step tuning (at most STEP_TUNE_STEPS decode steps a
 * timing), then the prompt and decode timed again. */
enum { STEP_TUNE_STEPS = 48 };
static tailor_status step_tune_and_retime(tailor_ctx *ctx, const model_args *a, model_run *r,
                                          model_figures *f, int32_t *next)
{
    printf("before step tuning: decode %d tokens: %.1f tok/s\n", a->ndec, a->ndec / f->dec_s);
    tailor_status s = step_tune_model(ctx, r->g, r->ks, r->cache, r->cfg.vocab, a->plen,
                                      a->ndec < STEP_TUNE_STEPS ? a->ndec : STEP_TUNE_STEPS);
    return s ? s : time_prefill_decode(ctx, a, r, f, next);
}

static void print_figures(const model_args *a, const model_run *r, const model_figures *f)
{
    tailor_gemma4_gpu_info info;
    tailor_gemma4_gpu_get_info(r->g, &info);
    double dec = a->ndec / f->dec_s, bound = r->bw / (double)info.weight_bytes_token;
    int ple = r->cfg.ple_dim > 0, queued = !a->one_by_one && !a->sample && info.greedy_queued;
    const char *sampled = a->sample == SAMPLE_TOP ? "top" : a->sample == SAMPLE_ROWS ? "rows" : "";
    if (a->json) {
        printf("{\"prefill_tok_s\":%.1f,\"decode_tok_s\":%.1f,\"ttft_ms\":%.2f,"
               "\"peak_host_bytes\":%.0f,\"host_above_baseline_bytes\":%.0f,"
               "\"gpu_bytes\":%zu,\"weight_bytes_token\":%zu,\"copy_bw\":%.4g,"
               "\"bound_tok_s\":%.1f,\"fraction_of_bound\":%.3f,\"load_s\":%.2f,"
               "\"graph\":%d,\"w4a16\":%d,\"kernels_tuned_in_load\":%d,\"tune_s\":%.1f,"
               "\"ple_on_device\":%d,\"queued\":%d,\"sampled\":\"%s\"}\n",
               a->plen / f->pre_s, dec, f->pre_s * 1e3, f->rss, f->rss - f->base_rss,
               f->gpu_bytes, info.weight_bytes_token, r->bw, bound, dec / bound, f->load_s,
               info.graph, info.w4a16, f->tuned, f->tune_s, info.ple_bytes > 0, queued, sampled);
        return;
    }
    printf("prefill %d tokens: %.0f tok/s (time to first token %.1f ms)\n"
           "decode %d tokens: %.1f tok/s; bound %.0f tok/s (%.2f GB per token at %.0f "
           "GB/s copy): %.0f%%\n"
           "memory: peak host during load %.2f GB (%.2f GB above baseline), GPU %.2f "
           "GB; load %.1f s; graph %s; %s\n"
           "decode steps %s%s%s\n",
           a->plen, a->plen / f->pre_s, f->pre_s * 1e3, a->ndec, dec, bound,
           (double)info.weight_bytes_token / 1e9, r->bw / 1e9, 100 * dec / bound, f->rss / 1e9,
           (f->rss - f->base_rss) / 1e9, (double)f->gpu_bytes / 1e9, f->load_s,
           info.graph ? "yes" : "no", info.w4a16 ? "W4A16" : "16-bit",
           queued ? "queued ahead (the argmax feeds the next step on the GPU)" : "one at a time",
           a->sample == SAMPLE_TOP    ? ", sampled from each row's 128 best (downloaded)"
           : a->sample == SAMPLE_ROWS ? ", sampled from each whole row (downloaded)"
                                      : "",
           !ple ? "" : info.ple_bytes ? "; PLE table on the GPU" : "; PLE table on the host");
    if (a->knock[0])
        printf("knockout: launches of %s skipped (timing only: every output is meaningless)\n",
               a->knock);
    if (f->tuned > 0)
        printf("tuning: %d kernel shapes were not cached and were tuned on demand (%.1f s); "
               "the load figures are of a second load from the warm cache\n", f->tuned, f->tune_s);
}

int bench_model(int argc, char **argv)
{
    model_args a;
    int rc = parse_model_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    tailor_ctx *ctx = cli_ctx();
    model_run r = {0};
    model_figures f = {.base_rss = vm_hwm()};
    int32_t next = 0;
    tailor_status s = open_run(ctx, &a, &r);
    if (s == TAILOR_OK)
        s = load_model(ctx, &a, &r, &f);
    if (s == TAILOR_OK)
        s = time_prefill_decode(ctx, &a, &r, &f, &next);
    if (s == TAILOR_OK && a.step_tune)
        s = step_tune_and_retime(ctx, &a, &r, &f, &next);
    if (s == TAILOR_OK && a.profile)
        s = print_profile(ctx, r.g, next);
    if (s == TAILOR_OK && a.trace)
        s = trace_step(ctx, r.ks, r.g, next);
    if (s == TAILOR_OK)
        print_figures(&a, &r, &f);
    rc = s == TAILOR_OK ? 0 : cli_fail(ctx, s);
    close_run(&r);
    tailor_ctx_destroy(ctx);
    return rc;
}
