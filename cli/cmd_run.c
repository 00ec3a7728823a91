/* cmd_run.c — `tailor run`: generate with a Gemma 4 checkpoint, on the GPU with tuned kernels
 * (the default when a GPU is present) or with the CPU reference forward. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "cuda.h"
#include "gemma4.h"
#include "kernels.h"
#include "op.h"
#include "sampler.h"
#include "tokenizer.h"


static void usage(FILE *out)
{
    fprintf(out,
            "usage: tailor run --model DIR [--device cpu|gpu|gpu:N] (--ids 2,17,... | --prompt TEXT |\n"
            "                  --prompt-file F) [--chat] [--system TEXT] [--think]\n"
            "                  [--max-tokens N] [--greedy | --temperature T --top-p P --top-k K "
            "--seed S]\n"
            "                  [--print-ids] [--dump-logits FILE] [--dtype fp16|bf16]\n"
            "                  [--quantize w4a16] [--quantize-head] [--rehearse PROFILE]\n"
            "                  [--cache FILE]\n\n"
            "  --device D        gpu (GPU 0, the default when there is one), gpu:N or cuda:N (GPU\n"
            "                    N), or cpu: the plain-C fp32 reference forward; --dtype,\n"
            "                    --quantize, --quantize-head, --rehearse and --cache are for the\n"
            "                    GPU and refused on the CPU\n"
            "  --dtype D         GPU compute dtype (default: fp16 below sm_80, else bf16)\n"
            "  --quantize w4a16  quantize a 16-bit checkpoint's linears to int4 on load (group "
            "128)\n"
            "  --quantize-head   the LM head reads an int4 copy of the embedding (group 128): a "
            "quarter\n"
            "                    of its bytes per token; logits of the quantized head\n"
            "  --rehearse P      use the kernels chosen under profile P's budget (e.g. t4)\n"
            "  --cache FILE      the kernel cache (default: the user's cache)\n"
            "  --ids LIST        prompt token ids, comma-separated (no BOS added)\n"
            "  --prompt TEXT     prompt text, tokenized with DIR/tokenizer.json, <bos> prepended\n"
            "  --prompt-file F   the prompt text is F's whole content (- for standard input)\n"
            "  --chat            wrap the prompt text in the Gemma 4 chat turn format\n"
            "  --system TEXT     a system turn before it (implies --chat)\n"
            "  --think           thinking on: the system turn opens with <|think|> (implies\n"
            "                    --chat); the model thinks in <|channel>thought\\n...<channel|>\n"
            "                    before its answer, and the text shows it\n"
            "  --max-tokens N    tokens to generate (default 32); stops early on\n"
            "                    generation_config.json's eos_token_id (else 1, 106, 50)\n"
            "  --greedy          argmax decoding (the default)\n"
            "  --temperature T, --top-p P, --top-k K, --seed S   sampling (top-k 0 = all); those\n"
            "                    left out take DIR/generation_config.json's values (Gemma 4:\n"
            "                    1.0, 64, 0.95), else transformers' defaults (1.0, top-k 50, 1.0)\n"
            "  --print-ids       print the generated ids instead of text\n"
            "  --dump-logits F   write the logits of every prompt position to F: raw "
            "little-endian\n"
            "                    float32, one row of vocab values per position\n");
}

typedef struct run_args {
    const char *model, *device, *ids, *prompt, *dump, *dtype, *quantize, *rehearse, *cache;
    const char *system; /* --system: the chat's system turn */
    const char *prompt_file; /* --prompt-file: read into prompt (owned by cmd_run) */
    size_t prompt_len;       /* bytes of prompt */
    int chat, think, max_tokens, print_ids, sampling, quantize_head;
    int ordinal; /* the GPU (--device gpu, gpu:N, cuda:N), or -1 for the CPU */
    int given_temp, given_topp, given_topk; /* sampling flags given (the rest: the checkpoint's) */
    tailor_sampler_params sp;
} run_args;

static int parse_ids(const char *s, int32_t **out, size_t *n)
{
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    const char *p = s;
    while (v && *p) {
        char *end = NULL;
        errno = 0;
        long x = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1; /* no sign, no space */
        if (x < 0 || errno || x > 0x7fffffff || (*end && *end != ',') ||
            (*end == ',' && !end[1])) {
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    if (!v || k == 0) {
        free(v);
        return -1;
    }
    *out = v;
    *n = k;
    return 0;
}

/* The first flag given that only the GPU run uses (the CPU reference forward is fp32, loads
 * the checkpoint as it is and compiles no kernel), NULL when none is. */
static const char *gpu_only_flag(const run_args *a)
{
    return a->quantize        ? "--quantize"
           : a->quantize_head ? "--quantize-head"
           : a->dtype         ? "--dtype"
           : a->rehearse      ? "--rehearse"
           : a->cache         ? "--cache"
                              : NULL;
}

static int parse_args(int argc, char **argv, run_args *a)
{
    enum { O_MODEL = 1, O_DEVICE, O_IDS, O_PROMPT, O_CHAT, O_MAX, O_GREEDY, O_TEMP, O_TOPP,
           O_TOPK, O_SEED, O_PRINT, O_DUMP, O_HELP, O_DTYPE, O_QUANT, O_REHEARSE, O_CACHE,
           O_QHEAD, O_PROMPT_FILE, O_SYSTEM, O_THINK };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},     {"device", required_argument, 0, O_DEVICE},
        {"ids", required_argument, 0, O_IDS},         {"prompt", required_argument, 0, O_PROMPT},
        {"prompt-file", required_argument, 0, O_PROMPT_FILE},
        {"chat", no_argument, 0, O_CHAT},             {"max-tokens", required_argument, 0, O_MAX},
        {"greedy", no_argument, 0, O_GREEDY},         {"temperature", required_argument, 0, O_TEMP},
        {"top-p", required_argument, 0, O_TOPP},      {"top-k", required_argument, 0, O_TOPK},
        {"seed", required_argument, 0, O_SEED},       {"print-ids", no_argument, 0, O_PRINT},
        {"dump-logits", required_argument, 0, O_DUMP}, {"help", no_argument, 0, O_HELP},
        {"dtype", required_argument, 0, O_DTYPE},     {"quantize", required_argument, 0, O_QUANT},
        {"rehearse", required_argument, 0, O_REHEARSE}, {"cache", required_argument, 0, O_CACHE},
        {"quantize-head", no_argument, 0, O_QHEAD},   {"system", required_argument, 0, O_SYSTEM},
        {"think", no_argument, 0, O_THINK},           {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->device = NULL;
    a->max_tokens = 32;
    a->sp.greedy = 1;
    a->sp.temperature = 1.0f;
    a->sp.top_p = 1.0f;
    int c, greedy_flag = 0;
    char *end;
    double v;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: a->model = optarg; break;
        case O_DEVICE: a->device = optarg; break;
        case O_IDS: a->ids = optarg; break;
        case O_PROMPT: a->prompt = optarg; break;
        case O_PROMPT_FILE: a->prompt_file = optarg; break;
        case O_CHAT: a->chat = 1; break;
        case O_SYSTEM: a->system = optarg, a->chat = 1; break;
        case O_THINK: a->think = a->chat = 1; break;
        case O_MAX:
            if (cli_parse_int("run", "--max-tokens", optarg, 0, 1 << 20, &a->max_tokens))
                return 2;
            break;
        case O_GREEDY: greedy_flag = 1; break;
        case O_TEMP:
            if (cli_parse_number("run", "--temperature", optarg, 0, HUGE_VAL, "a number above 0",
                                 &v))
                return 2;
            a->sp.temperature = (float)v;
            a->sampling = a->given_temp = 1;
            break;
        case O_TOPP:
            if (cli_parse_number("run", "--top-p", optarg, 0, 1, "a number in (0, 1]", &v))
                return 2;
            a->sp.top_p = (float)v;
            a->sampling = a->given_topp = 1;
            break;
        case O_TOPK:
            if (cli_parse_int("run", "--top-k", optarg, 0, 1 << 20, &a->sp.top_k))
                return 2;
            a->sampling = a->given_topk = 1;
            break;
        case O_SEED:
            errno = 0;
            a->sp.seed = isdigit((unsigned char)optarg[0]) ? strtoull(optarg, &end, 10) : 0;
            if (!isdigit((unsigned char)optarg[0]) || *end || errno)
                return cli_usage_error("run", "--seed '%s' is not an integer from 0 to "
                                       "18446744073709551615", optarg);
            break;
        case O_PRINT: a->print_ids = 1; break;
        case O_DUMP: a->dump = optarg; break;
        case O_DTYPE: a->dtype = optarg; break;
        case O_QUANT: a->quantize = optarg; break;
        case O_REHEARSE: a->rehearse = optarg; break;
        case O_CACHE:
            if (cli_cache_flag("run", optarg, &a->cache))
                return 2;
            break;
        case O_QHEAD: a->quantize_head = 1; break;
        case O_HELP: usage(stdout); return -1;
        default: return cli_bad_flag("run", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
    if (greedy_flag && a->sampling)
        return cli_usage_error("run", "--greedy cannot be combined with --temperature, --top-p "
                                      "or --top-k");
    a->sp.greedy = !a->sampling;
    if (!a->model)
        return cli_usage_error("run", "--model DIR is required");
    if ((a->ids != NULL) + (a->prompt != NULL) + (a->prompt_file != NULL) != 1)
        return cli_usage_error("run", "give exactly one of --ids, --prompt and --prompt-file");
    const char *empty = a->model && !*a->model               ? "--model"
                        : a->prompt_file && !*a->prompt_file ? "--prompt-file"
                        : a->dump && !*a->dump               ? "--dump-logits"
                                                             : NULL;
    if (empty)
        return cli_usage_error("run", "%s is empty", empty);
    int32_t *ids = NULL;
    size_t nids = 0;
    if (a->ids && parse_ids(a->ids, &ids, &nids) != 0) /* checked before any file is read */
        return cli_usage_error("run", "--ids '%s' is not a comma-separated list of token ids "
                               "(integers from 0)", a->ids);
    free(ids);
    if (a->chat && a->ids)
        return cli_usage_error("run", "%s needs --prompt or --prompt-file",
                               a->system ? "--system" : a->think ? "--think" : "--chat");
    if (a->quantize && strcmp(a->quantize, "w4a16") != 0)
        return cli_usage_error("run", "--quantize '%s': only w4a16 is known", a->quantize);
    if (a->dtype && strcmp(a->dtype, "fp16") != 0 && strcmp(a->dtype, "bf16") != 0)
        return cli_usage_error("run", "--dtype '%s' is neither fp16 nor bf16", a->dtype);
    if (a->rehearse && !tailor_device_profile_find(a->rehearse))
        return cli_usage_error("run", "--rehearse '%s' is not a known profile", a->rehearse);
    int chosen = a->device == NULL;
    if (!a->device) {
        int n = 0;
        a->device = tailor_cuda_device_count(NULL, &n) == TAILOR_OK && n > 0 ? "gpu" : "cpu";
    }
    int cpu = strcasecmp(a->device, "cpu") == 0;
    a->ordinal = cpu || !*a->device ? -1 : tailor_device_live_ordinal(a->device);
    if (a->ordinal < 0 && !cpu)
        return cli_usage_error("run", "--device '%s' is none of cpu, gpu, cuda, gpu:N, cuda:N, N",
                               a->device);
    const char *gpu_only = gpu_only_flag(a);
    if (a->ordinal < 0 && gpu_only)
        return cli_usage_error("run", "%s applies to --device gpu only, and this run is on the "
                                      "CPU%s", gpu_only, chosen ? ", as no GPU was found" : "");
    return 0;
}

typedef struct run_io {
    tailor_tokenizer *tok;
    tailor_detok_stream stream;
    int print_ids;
    int first;
    tailor_gemma4_stops stops; /* the ids that end the generation */
    /* what the run chose from the checkpoint's files (sampling defaults, stop ids), logged once
     * the model is ready so that the GPU's line (device, dtype, cached kernels) comes first */
    char notes[2][384];
} run_io;

static void log_notes(tailor_ctx *ctx, const run_io *io)
{
    for (int i = 0; i < 2; i++)
        if (io->notes[i][0])
            tailor_log(ctx, TAILOR_LOG_INFO, "%s", io->notes[i]);
}

static int is_stop(const run_io *io, int32_t id)
{
    for (int i = 0; i < io->stops.n; i++)
        if (id == io->stops.ids[i])
            return 1;
    return 0;
}

/* Streams one token: its id (with --print-ids, or without a tokenizer) or the text it
 * completes. A token the streaming decoder cannot decode fails the run. */
static tailor_status emit(tailor_ctx *ctx, run_io *io, int32_t id)
{
    if (io->print_ids || !io->tok) {
        printf("%s%d", io->first ? "" : ",", (int)id);
        io->first = 0;
    } else {
        char buf[512];
        size_t n = 0;
        if (tailor_tokenizer_decode_step(ctx, io->tok, &io->stream, id, buf, sizeof buf, &n))
            return tailor_wrap_error(ctx, "decoding generated token %d", (int)id);
        fwrite(buf, 1, n, stdout);
    }
    fflush(stdout);
    return TAILOR_OK;
}

/* Streams one token; *stop = 1 when it is a stop token (printed only as an id). */
static tailor_status emit_or_stop(tailor_ctx *ctx, run_io *io, int32_t id, int *stop)
{
    *stop = is_stop(io, id);
    if (*stop && !io->print_ids && io->tok)
        return TAILOR_OK;
    return emit(ctx, io, id);
}

/* The end of the text: the run of byte-fallback bytes the decoder still holds (U+FFFD each
 * when generation stopped inside a character), then the newline. */
static tailor_status emit_end(tailor_ctx *ctx, run_io *io)
{
    if (!io->print_ids && io->tok) {
        char buf[3 * TAILOR_DETOK_MAX_RUN + 64];
        size_t n = 0;
        if (tailor_tokenizer_decode_flush(ctx, io->tok, &io->stream, buf, sizeof buf, &n))
            return tailor_wrap_error(ctx, "decoding the end of the generated text");
        fwrite(buf, 1, n, stdout);
    }
    printf("\n");
    fflush(stdout);
    return TAILOR_OK;
}

/* Decode speed: `generated` tokens took generated - 1 forward steps (the first comes from the
 * prompt's logits), timed together in `secs`; 0 without a step. */
static double decode_rate(int generated, double secs)
{
    return generated > 1 && secs > 0 ? (generated - 1) / secs : 0.0;
}

/* Every prompt id inside the model's vocabulary, checked before anything runs or is written. */
static tailor_status check_ids(tailor_ctx *ctx, const tailor_gemma4 *m, const int32_t *ids,
                               size_t n)
{
    int vocab = tailor_gemma4_get_config(m)->vocab;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "prompt id %d (position %zu) is outside the vocabulary "
                                    "(0..%d)", (int)ids[i], i, vocab - 1);
    return TAILOR_OK;
}

/* --dump-logits: written to a temporary file beside FILE and renamed over it only when the whole
 * prompt's logits were written, so that a failed run leaves FILE as it was. */
typedef struct logits_dump {
    const char *path; /* FILE, or NULL when no dump was asked for */
    char tmp[1100];   /* FILE.tmp.PID */
    FILE *f;
} logits_dump;

static tailor_status dump_open(tailor_ctx *ctx, logits_dump *d, const char *path)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    if (!path)
        return TAILOR_OK;
    snprintf(d->tmp, sizeof d->tmp, "%s.tmp.%ld", path, (long)getpid());
    d->f = fopen(d->tmp, "wb");
    if (!d->f)
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot write: %s", path,
                                strerror(errno));
    return TAILOR_OK;
}

static tailor_status dump_write(tailor_ctx *ctx, logits_dump *d, const float *logits, size_t count)
{
    if (d->f && fwrite(logits, sizeof(float), count, d->f) != count)
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: write failed: %s", d->path,
                                strerror(errno));
    return TAILOR_OK;
}

/* Closes the dump: renamed over FILE when s is TAILOR_OK and every byte reached the disk, else
 * removed. Returns s, or the error of the close or rename. */
static tailor_status dump_close(tailor_ctx *ctx, logits_dump *d, tailor_status s)
{
    if (!d->f)
        return s;
    if (fclose(d->f) != 0 && s == TAILOR_OK)
        s = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: write failed: %s", d->path,
                             strerror(errno));
    d->f = NULL;
    if (s == TAILOR_OK && rename(d->tmp, d->path) != 0)
        s = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot write: %s", d->path,
                             strerror(errno));
    if (s != TAILOR_OK)
        remove(d->tmp);
    return s;
}

static tailor_status prompt_ids(tailor_ctx *ctx, const run_args *a, tailor_tokenizer **tok,
                                int32_t **ids, size_t *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", a->model);
    struct stat sb;
    int have_tok = stat(path, &sb) == 0;
    if (have_tok) {
        tailor_status s = tailor_tokenizer_open(ctx, path, tok);
        if (s != TAILOR_OK && !(a->ids && a->print_ids))
            return s; /* the text output needs it */
        if (s != TAILOR_OK)
            *tok = NULL; /* --ids with --print-ids needs none */
    }
    if (a->ids) {
        if (parse_ids(a->ids, ids, n) != 0)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "--ids '%s' is not a comma-separated list of token ids",
                                    a->ids);
        return TAILOR_OK;
    }
    if (!*tok)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                                "%s: no tokenizer.json, which a text prompt needs (use --ids)",
                                a->model);
    if (a->chat)
        return cli_chat_prompt(ctx, *tok, a->model, a->system, a->prompt, a->think, ids, n);
    return tailor_tokenizer_encode(ctx, *tok, a->prompt, a->prompt_len, 1, ids, n);
}

static tailor_status generate(tailor_ctx *ctx, const run_args *a, tailor_gemma4 *m,
                              const int32_t *ids, size_t n, run_io *io)
{
    const tailor_gemma4_config *cfg = tailor_gemma4_get_config(m);
    tailor_gemma4_cpu *st = NULL;
    tailor_sampler *smp = NULL;
    logits_dump dump = {0};
    tailor_gemma4_cpu_opts o = {.max_tokens = (int)n + a->max_tokens};
    tailor_status s = tailor_gemma4_cpu_create(ctx, m, &o, &st);
    if (s == TAILOR_OK)
        log_notes(ctx, io);
    if (s == TAILOR_OK)
        s = tailor_sampler_create(ctx, &a->sp, cfg->vocab, &smp);
    if (s == TAILOR_OK)
        s = dump_open(ctx, &dump, a->dump);
    const float *logits = NULL;
    double t0 = cli_now_s();
    for (size_t i = 0; i < n && s == TAILOR_OK; i++) {
        s = tailor_gemma4_cpu_step(ctx, st, ids[i], &logits);
        if (s == TAILOR_OK)
            s = dump_write(ctx, &dump, logits, (size_t)cfg->vocab);
    }
    s = dump_close(ctx, &dump, s);
    double t1 = cli_now_s();
    int generated = 0, stop = 0;
    for (int g = 0; g < a->max_tokens && s == TAILOR_OK && !stop; g++) {
        int32_t next = tailor_sampler_next(smp, logits);
        generated++;
        s = emit_or_stop(ctx, io, next, &stop);
        if (s == TAILOR_OK && !stop && g + 1 < a->max_tokens)
            s = tailor_gemma4_cpu_step(ctx, st, next, &logits);
    }
    double t2 = cli_now_s();
    if (s == TAILOR_OK)
        s = emit_end(ctx, io);
    if (s == TAILOR_OK)
        tailor_log(ctx, TAILOR_LOG_INFO,
                   "cpu reference: %zu prompt tokens in %.2f s, %d generated in %.2f s "
                   "(%d decode steps, %.2f tok/s)", n, t1 - t0, generated, t2 - t1,
                   generated > 1 ? generated - 1 : 0, decode_rate(generated, t2 - t1));
    tailor_sampler_destroy(smp);
    tailor_gemma4_cpu_destroy(st);
    return s;
}

/* What greedy decoding's callback streams to, and the first failure or stop it saw. */
typedef struct greedy_emit {
    tailor_ctx *ctx;
    run_io *io;
    tailor_status st;
    int stop;
} greedy_emit;

static int greedy_on_id(void *arg, int32_t id)
{
    greedy_emit *e = arg;
    e->st = emit_or_stop(e->ctx, e->io, id, &e->stop);
    return e->st != TAILOR_OK || e->stop;
}

/* Greedy decoding on the GPU after the prompt's id `first` (already streamed): up to `steps`
 * more ids, streamed as the device's steps deliver them (queued ahead when the PLE table is on
 * the device); *generated grows by the ids streamed. */
static tailor_status greedy_gpu(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t first, int steps,
                                run_io *io, int *generated)
{
    greedy_emit e = {ctx, io, TAILOR_OK, 0};
    int kept = 0;
    tailor_status s = tailor_gemma4_gpu_greedy(ctx, g, first, steps, NULL, &kept, greedy_on_id, &e);
    *generated += kept;
    return s ? s : e.st;
}

static tailor_status generate_gpu(tailor_ctx *ctx, const run_args *a, tailor_gemma4 *m,
                                  const int32_t *ids, size_t n, run_io *io)
{
    const tailor_gemma4_config *cfg = tailor_gemma4_get_config(m);
    size_t V = (size_t)cfg->vocab;
    tailor_gpu *gpu = NULL;
    tailor_cache *cache = NULL;
    tailor_kernels *ks = NULL;
    tailor_gemma4_gpu *g = NULL;
    tailor_sampler *smp = NULL;
    float *logits = NULL, *prompt_rows = NULL; /* logits: pinned */
    char path[1024];
    const tailor_device_info *reh = a->rehearse ? tailor_device_profile_find(a->rehearse) : NULL;
    tailor_status s = tailor_gpu_open(ctx, a->ordinal, &gpu);
    if (s != TAILOR_OK)
        s = tailor_wrap_error(ctx, "--device %s: no usable GPU %d on this machine", a->device,
                              a->ordinal);
    if (s == TAILOR_OK && !a->cache)
        s = tailor_cache_default_path(ctx, path, sizeof path);
    if (s == TAILOR_OK)
        s = tailor_cache_open(ctx, a->cache ? a->cache : path, &cache);
    if (s == TAILOR_OK)
        s = tailor_kernels_create(ctx, gpu, cache, reh, 1, &ks);
    tailor_gemma4_gpu_opts o = {.max_tokens = (int)n + a->max_tokens + 1, .dtype = -1,
                                .quantize = a->quantize != NULL, .quantize_head = a->quantize_head,
                                .all_logits = a->dump != NULL};
    if (a->dtype)
        o.dtype = strcmp(a->dtype, "fp16") == 0 ? TAILOR_DTYPE_F16 : TAILOR_DTYPE_BF16;
    else if (reh)
        o.dtype = tailor_dtype_for_cc(reh->cc_major);
    if (s == TAILOR_OK)
        s = tailor_gemma4_gpu_create(ctx, m, gpu, ks, &o, &g);
    if (s == TAILOR_OK)
        log_notes(ctx, io);
    if (s == TAILOR_OK)
        s = tailor_sampler_create(ctx, &a->sp, cfg->vocab, &smp);
    /* one row a step, pinned (a pageable download is staged by the driver); the prompt's rows
     * for --dump-logits apart, freed once written */
    if (s == TAILOR_OK)
        s = tailor_gpu_host_alloc(ctx, gpu, V * sizeof *logits, (void **)&logits);
    if (s == TAILOR_OK && a->dump && !(prompt_rows = malloc(n * V * sizeof *prompt_rows)))
        s = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory for the prompt's logits");
    const char *dbg = getenv("TAILOR_DEBUG_LAYERS");
    if (s == TAILOR_OK && dbg && strcmp(dbg, "1") == 0) {
        int bad = -1;
        s = tailor_gemma4_gpu_debug_layers(ctx, g, ids[0], 0.05 * 30 + 0.02, &bad);
    }
    int32_t next = -1;
    double t0 = cli_now_s();
    if (s == TAILOR_OK)
        s = tailor_gemma4_gpu_prefill(ctx, g, ids, (int)n, a->dump ? prompt_rows : logits, &next);
    double t1 = cli_now_s(); /* the prompt's figure leaves the dump's writing out */
    if (s == TAILOR_OK && a->dump) {
        logits_dump dump;
        s = dump_open(ctx, &dump, a->dump);
        if (s == TAILOR_OK)
            s = dump_write(ctx, &dump, prompt_rows, n * V);
        s = dump_close(ctx, &dump, s);
        if (s == TAILOR_OK)
            memcpy(logits, prompt_rows + (n - 1) * V, V * sizeof *logits);
    }
    free(prompt_rows);
    prompt_rows = NULL;
    const float *last = logits;
    double t_dec = cli_now_s();
    int generated = 0, stop = 0;
    if (s == TAILOR_OK && a->sp.greedy && a->max_tokens > 0) { /* the prompt's id, then steps */
        generated++;
        s = emit_or_stop(ctx, io, next, &stop);
        if (s == TAILOR_OK && !stop)
            s = greedy_gpu(ctx, g, next, a->max_tokens - 1, io, &generated);
    }
    /* sampled: after the prompt's row, each step downloads only its best candidates when they
     * may decide the draw (top_k < TAILOR_GEMMA4_TOP_K: the same ids as from the whole row),
     * and the row where the top_k-th best's ties run past them */
    int from_top = smp && tailor_sampler_top_covers(smp, TAILOR_GEMMA4_TOP_K);
    float top_vals[TAILOR_GEMMA4_TOP_K];
    int32_t top_ids[TAILOR_GEMMA4_TOP_K];
    for (int i = 0; i < a->max_tokens && s == TAILOR_OK && !stop && !a->sp.greedy; i++) {
        int32_t id;
        int read_row = 0;
        if (i > 0 && from_top)
            s = tailor_gemma4_gpu_draw(ctx, g, smp, top_vals, top_ids, logits, &id, &read_row);
        else
            id = tailor_sampler_next(smp, last);
        if (s)
            break;
        generated++;
        s = emit_or_stop(ctx, io, id, &stop);
        if (s == TAILOR_OK && !stop && i + 1 < a->max_tokens)
            s = from_top ? tailor_gemma4_gpu_step_top(ctx, g, id, top_vals, top_ids, &next)
                         : tailor_gemma4_gpu_step(ctx, g, id, logits, &next);
        last = logits;
    }
    double t2 = cli_now_s();
    if (s == TAILOR_OK)
        s = emit_end(ctx, io);
    if (s == TAILOR_OK)
        tailor_log(ctx, TAILOR_LOG_INFO,
                   "gpu: %zu prompt tokens in %.3f s (%.0f tok/s), %d generated in %.3f s "
                   "(%d decode steps, %.1f tok/s)", n, t1 - t0,
                   t1 > t0 ? (double)n / (t1 - t0) : 0.0, generated, t2 - t_dec,
                   generated > 1 ? generated - 1 : 0, decode_rate(generated, t2 - t_dec));
    tailor_gpu_host_free(gpu, logits);
    tailor_sampler_destroy(smp);
    tailor_gemma4_gpu_destroy(g);
    tailor_kernels_destroy(ks);
    tailor_cache_close(cache);
    tailor_gpu_close(gpu);
    return s;
}

/* Sampling: the flags left out take the checkpoint's generation_config.json defaults (else
 * transformers'), as generate() would; the note (note_size bytes, for the log) says which came
 * from where. */
static tailor_status sampling_defaults(tailor_ctx *ctx, run_args *a, char *note, size_t note_size)
{
    if (!a->sampling)
        return TAILOR_OK;
    tailor_gemma4_sampling d;
    tailor_status s = tailor_gemma4_sampling_defaults(ctx, a->model, &d);
    if (s)
        return s;
    if (!a->given_temp)
        a->sp.temperature = d.temperature;
    if (!a->given_topk)
        a->sp.top_k = d.top_k;
    if (!a->given_topp)
        a->sp.top_p = d.top_p;
    const char *dflt = d.from_file ? "generation_config.json" : "transformers' default";
    snprintf(note, note_size, "sampling: temperature %g (%s), top-k %d (%s), top-p %g (%s)",
             (double)a->sp.temperature, a->given_temp ? "--temperature" : dflt, a->sp.top_k,
             a->given_topk ? "--top-k" : dflt, (double)a->sp.top_p,
             a->given_topp ? "--top-p" : dflt);
    return TAILOR_OK;
}

/* The stop ids: generation_config.json's eos_token_id, noted for the log, else Gemma 4's -it
 * stops (what --help says, so not noted). */
static tailor_status stop_ids(tailor_ctx *ctx, const char *dir, tailor_gemma4_stops *out,
                              char *note, size_t note_size)
{
    tailor_status s = tailor_gemma4_stop_ids(ctx, dir, out);
    if (s || !out->from_file)
        return s;
    char list[TAILOR_GEMMA4_MAX_STOPS * 13] = "";
    for (int i = 0, at = 0; i < out->n; i++)
        at += snprintf(list + at, sizeof list - (size_t)at, "%s%d", i ? ", " : "",
                       (int)out->ids[i]);
    snprintf(note, note_size, "stops at ids %s (generation_config.json's eos_token_id)", list);
    return TAILOR_OK;
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    tailor_ctx *ctx = cli_ctx();
    tailor_gemma4 *m = NULL;
    tailor_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    char *file_text = NULL;
    tailor_status s = TAILOR_OK;
    if (a.prompt_file && !(s = cli_read_text(ctx, a.prompt_file, &file_text, &a.prompt_len)))
        a.prompt = file_text;
    else if (a.prompt)
        a.prompt_len = strlen(a.prompt);
    if (s == TAILOR_OK)
        s = tailor_gemma4_open(ctx, a.model, &m);
    run_io io = {.print_ids = a.print_ids, .first = 1};
    if (s == TAILOR_OK)
        s = sampling_defaults(ctx, &a, io.notes[0], sizeof io.notes[0]);
    if (s == TAILOR_OK)
        s = stop_ids(ctx, a.model, &io.stops, io.notes[1], sizeof io.notes[1]);
    if (s == TAILOR_OK)
        s = prompt_ids(ctx, &a, &tok, &ids, &n);
    if (s == TAILOR_OK)
        s = check_ids(ctx, m, ids, n);
    if (s == TAILOR_OK) {
        io.tok = tok;
        s = a.ordinal >= 0 ? generate_gpu(ctx, &a, m, ids, n, &io)
                                         : generate(ctx, &a, m, ids, n, &io);
    }
    rc = s == TAILOR_OK ? 0 : cli_fail(ctx, s);
    free(file_text);
    free(ids);
    tailor_tokenizer_close(tok);
    tailor_gemma4_close(m);
    tailor_ctx_destroy(ctx);
    return rc;
}
