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
#include "gemma4.h"
#include "kernels.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
 * is malformed or the list is full. */
static int add_knockout(char *list, size_t cap, const char *item)
{
    const char *colon = strchr(item, ':');
    size_t name = colon ? (size_t)(colon - item) : strlen(item);
    tailor_shape sel;
    if (name == 0 || strchr(item, ';') ||
        (colon && tailor_shape_parse(NULL, colon + 1, &sel) != TAILOR_OK))
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
           "         [--attention-q-prep]\n"
           "         [--seams kernel|prologue|epilogue|mixed] [--knockout OP[:k=v,...]]... [--trace]\n"
           "         [--json]\n\n"
           "Gemma 4 end to end on the GPU: prefill and decode tok/s, time to first token, peak host\n"
           "memory of the load, GPU memory, decode against the bandwidth bound (weight bytes per\n"
           "token over the copy bandwidth measured in the same run). Without --model, random\n"
           "weights of the preset's shapes are made on the GPU. --profile: one decode step kernel\n"
           "by kernel; --quantize-head: the LM head as an int4 copy of the embedding (group 128);\n"
           "--no-pdl: no programmatic dependent launch; --separate-gating: the MLP and PLE\n"
           "gating as their own kernels instead of GEMV epilogues; --separate-q-prep: q's norm and\n"
           "RoPE in a kernel of their own on every layer (else folded into the K/V store where a\n"
           "layer has one); --attention-q-prep: q's norm and\n"
           "RoPE inside decode attention instead of a kernel before it; --seams: the layer seams as\n"
           "their own kernels, in the next GEMV (the default before 16-bit ones), in the\n"
           "projection's last block, or mixed: in the next GEMV before 16-bit ones, in the last\n"
           "block before int4 ones (all for comparisons). --knockout (repeatable): skip every\n"
           "launch of OP (only those whose shape has the given values), so that the decode figure\n"
           "shows what those kernels cost on the step's critical path; every output is then\n"
           "meaningless (timing experiments only). --trace: the winners are compiled again with\n"
           "TAILOR_TRACE and one more decode step prints when each launch was released from its\n"
           "grid wait, so the gap to the next release is what it costs on the critical path\n"
           "(docs/development.md).\n");
}

int bench_model(int argc, char **argv)
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
                                         {"quantize-head", no_argument, 0, 'H'},
                                         {"knockout", required_argument, 0, 'K'},
                                         {"trace", no_argument, 0, 'T'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL, *preset = NULL, *quant = NULL, *cache_file = NULL;
    int plen = 512, ndec = 128, json = 0, profile = 0, no_pdl = 0, seams = 0, sepgate = 0, qprep = 0, qhead = 0, sepq = 0, trace = 0, c;
    char knock[256] = "";
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': preset = optarg; break;
        case 'q': quant = optarg; break;
        case 'l':
            if (cli_parse_int("bench model", "--prompt-len", optarg, 1, 1 << 20, &plen))
                return 2;
            break;
        case 'd':
            if (cli_parse_int("bench model", "--decode", optarg, 1, 1 << 20, &ndec))
                return 2;
            break;
        case 'j': json = 1; break;
        case 'c': cache_file = optarg; break;
        case 'P': profile = 1; break;
        case 'N': no_pdl = 1; break;
        case 'U':
            seams = strcmp(optarg, "kernel") == 0     ? TAILOR_GEMMA4_SEAMS_KERNEL
                    : strcmp(optarg, "prologue") == 0 ? TAILOR_GEMMA4_SEAMS_PROLOGUE
                    : strcmp(optarg, "epilogue") == 0 ? TAILOR_GEMMA4_SEAMS_EPILOGUE
                    : strcmp(optarg, "mixed") == 0    ? TAILOR_GEMMA4_SEAMS_MIXED
                                                      : -1;
            break;
        case 'G': sepgate = 1; break;
        case 'Q': qprep = 1; break;
        case 'S': sepq = 1; break;
        case 'H': qhead = 1; break;
        case 'T': trace = 1; break;
        case 'K':
            if (add_knockout(knock, sizeof knock, optarg))
                return cli_usage_error("bench model", "--knockout takes OP or OP:key=value,..., "
                                       "at most 240 characters in all");
            break;
        case 'h': model_usage(); return 0;
        default: return cli_bad_flag("bench model", argc, argv);
        }
    }
    if (!model == !preset || plen < 1 || ndec < 1 || (quant && strcmp(quant, "w4a16") != 0))
        return cli_usage_error("bench model", "give --model DIR or --preset NAME, a positive "
                               "--prompt-len and --decode, and --quantize w4a16 or nothing");
    if (seams < 0)
        return cli_usage_error("bench model", "--seams takes kernel, prologue, epilogue or mixed");
    if (json && (trace || profile))
        return cli_usage_error("bench model", "--trace and --profile print tables; leave out "
                               "--json with them");
    tailor_ctx *ctx = cli_ctx();
    double base_rss = vm_hwm();
    tailor_gemma4 *m = NULL;
    tailor_gemma4_config cfg;
    tailor_gpu *gpu = NULL;
    tailor_cache *cache = NULL;
    tailor_kernels *ks = NULL;
    tailor_gemma4_gpu *g = NULL;
    char path[1024];
    double bw = 0;
    size_t free0 = 0, free1 = 0, total = 0;
    tailor_status s = model ? tailor_gemma4_open(ctx, model, &m) : tailor_gemma4_preset(ctx, preset, &cfg);
    if (s == TAILOR_OK && m)
        cfg = *tailor_gemma4_get_config(m);
    if (s == TAILOR_OK)
        s = tailor_gpu_open(ctx, 0, &gpu);
    if (s == TAILOR_OK)
        s = tailor_gpu_copy_bandwidth(ctx, gpu, &bw);
    if (s == TAILOR_OK)
        s = tailor_gpu_mem_info(ctx, gpu, &free0, &total);
    if (s == TAILOR_OK && cache_file)
        snprintf(path, sizeof path, "%s", cache_file);
    else if (s == TAILOR_OK)
        s = tailor_cache_default_path(ctx, path, sizeof path);
    if (s == TAILOR_OK)
        s = tailor_cache_open(ctx, path, &cache);
    if (s == TAILOR_OK)
        s = tailor_kernels_create(ctx, gpu, cache, NULL, 1, &ks);
    if (s == TAILOR_OK && trace)
        tailor_kernels_set_trace(ks, 1);
    tailor_gemma4_gpu_opts o = {.max_tokens = plen + ndec + 1 + trace + profile, .dtype = -1, .quantize = quant != NULL,
                                .no_pdl = no_pdl, .seams = seams,
                                .separate_gating = sepgate, .separate_q_prep = sepq,
                                .attention_q_prep = qprep,
                                .quantize_head = qhead, .knockout = knock};
    double tl0 = now_s();
    if (s == TAILOR_OK)
        s = create(ctx, m, &cfg, gpu, ks, &o, &g);
    double load_s = now_s() - tl0, tune_s = 0;
    int tuned = 0;
    if (s == TAILOR_OK) {
        tailor_gemma4_gpu_info info;
        tailor_gemma4_gpu_get_info(g, &info);
        tuned = info.kernels_tuned;
    }
    if (s == TAILOR_OK && tuned > 0) {
        /* kernels were tuned inside the load: load again from the now warm cache, so that the
         * load figures (time, peak host memory) are the load path's alone */
        tailor_gemma4_gpu_destroy(g);
        g = NULL;
        tune_s = load_s;
        base_rss = reset_hwm();
        tl0 = now_s();
        s = create(ctx, m, &cfg, gpu, ks, &o, &g);
        load_s = now_s() - tl0;
        tune_s -= load_s;
    }
    double rss = vm_hwm();
    if (s == TAILOR_OK)
        s = tailor_gpu_mem_info(ctx, gpu, &free1, &total);
    int32_t *ids = malloc((size_t)plen * sizeof *ids);
    int32_t next = 0;
    double pre_s = 0, dec_s = 0;
    for (int i = 0; ids && i < plen; i++)
        ids[i] = 2 + (int32_t)((i * 7919) % (cfg.vocab - 2));
    for (int rep = 0; rep < 2 && s == TAILOR_OK && ids; rep++) { /* the first run warms up */
        tailor_gemma4_gpu_reset(g);
        double t0 = now_s();
        s = tailor_gemma4_gpu_prefill(ctx, g, ids, plen, NULL, &next);
        double t1 = now_s();
        for (int i = 0; i < ndec && s == TAILOR_OK; i++)
            s = tailor_gemma4_gpu_step(ctx, g, next, NULL, &next);
        pre_s = t1 - t0;
        dec_s = now_s() - t1;
    }
    if (s == TAILOR_OK && profile)
        s = print_profile(ctx, g, next);
    if (s == TAILOR_OK && trace)
        s = trace_step(ctx, ks, g, next);
    if (s == TAILOR_OK) {
        tailor_gemma4_gpu_info info;
        tailor_gemma4_gpu_get_info(g, &info);
        double dec = ndec / dec_s, bound = bw / (double)info.weight_bytes_token;
        if (json)
            printf("{\"prefill_tok_s\":%.1f,\"decode_tok_s\":%.1f,\"ttft_ms\":%.2f,"
                   "\"peak_host_bytes\":%.0f,\"host_above_baseline_bytes\":%.0f,"
                   "\"gpu_bytes\":%zu,\"weight_bytes_token\":%zu,\"copy_bw\":%.4g,"
                   "\"bound_tok_s\":%.1f,\"fraction_of_bound\":%.3f,\"load_s\":%.2f,"
                   "\"graph\":%d,\"w4a16\":%d,\"kernels_tuned_in_load\":%d,\"tune_s\":%.1f}\n",
                   plen / pre_s, dec, pre_s * 1e3, rss, rss - base_rss, free0 - free1,
                   info.weight_bytes_token, bw, bound, dec / bound, load_s, info.graph, info.w4a16,
                   tuned, tune_s);
        else
            printf("prefill %d tokens: %.0f tok/s (time to first token %.1f ms)\n"
                   "decode %d tokens: %.1f tok/s; bound %.0f tok/s (%.2f GB per token at %.0f "
                   "GB/s copy): %.0f%%\n"
                   "memory: peak host during load %.2f GB (%.2f GB above baseline), GPU %.2f "
                   "GB; load %.1f s; graph %s; %s\n",
                   plen, plen / pre_s, pre_s * 1e3, ndec, dec, bound,
                   (double)info.weight_bytes_token / 1e9, bw / 1e9, 100 * dec / bound, rss / 1e9,
                   (rss - base_rss) / 1e9, (double)(free0 - free1) / 1e9, load_s,
                   info.graph ? "yes" : "no", info.w4a16 ? "W4A16" : "16-bit");
        if (!json && knock[0])
            printf("knockout: launches of %s skipped (timing only: every output is meaningless)\n",
                   knock);
        if (!json && tuned > 0)
            printf("tuning: %d kernel shapes were not cached and were tuned on demand (%.1f s); "
                   "the load figures are of a second load from the warm cache\n", tuned, tune_s);
    }
    int rc = s == TAILOR_OK ? 0 : cli_fail(ctx, s);
    free(ids);
    tailor_gemma4_gpu_destroy(g);
    tailor_kernels_destroy(ks);
    tailor_cache_close(cache);
    tailor_gpu_close(gpu);
    tailor_gemma4_close(m);
    tailor_ctx_destroy(ctx);
    return rc;
}
