/* main.c — `tailor`: dispatches to the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <getopt.h>

#include "cli.h"
#include "gemma4.h"
#include "tokenizer.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"devices", cmd_devices, "live GPUs and the built-in device profiles"},
    {"plan", cmd_plan, "which configurations of an op fit a device, and why the rest do not"},
    {"tune", cmd_tune, "compile, verify and time the survivors; keep the winner in the cache"},
    {"cache", cmd_cache, "ls | show | trials | export FILE | import FILE | verify | clear"},
    {"run", cmd_run, "generate text with a Gemma 4 checkpoint"},
    {"tokenize", cmd_tokenize, "turn text into token ids with a tokenizer.json"},
    {"bench", cmd_bench, "kernel and end-to-end benchmarks"},
};

static void print_usage(FILE *out)
{
    fprintf(out, "usage: tailor COMMAND [options]   (tailor COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
}

static void log_to_stderr(void *user, tailor_log_level level, const char *line)
{
    (void)user;
    static const char *const tags[] = {"debug: ", "", "warning: ", "error: "};
    fprintf(stderr, "tailor: %s%s\n", tags[level], line);
}

tailor_ctx *cli_ctx(void)
{
    tailor_ctx *ctx = tailor_ctx_create();
    if (!ctx) {
        fprintf(stderr, "tailor: out of memory\n");
        exit(1);
    }
    const char *lv = getenv("TAILOR_LOG");
    tailor_log_level min = TAILOR_LOG_INFO;
    if (lv && strcmp(lv, "debug") == 0)
        min = TAILOR_LOG_DEBUG;
    else if (lv && strcmp(lv, "warn") == 0)
        min = TAILOR_LOG_WARN;
    tailor_ctx_set_log(ctx, log_to_stderr, NULL, min);
    return ctx;
}

int cli_fail(tailor_ctx *ctx, tailor_status status)
{
    const char *msg = tailor_ctx_message(ctx);
    fprintf(stderr, "tailor: %s\n", msg && *msg ? msg : tailor_status_name(status));
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tailor %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see tailor %s --help)\n", cmd);
    va_end(ap);
    return 2;
}

int cli_parse_int(const char *cmd, const char *flag, const char *text, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno == ERANGE || v < lo || v > hi)
        return cli_usage_error(cmd, "%s takes an integer in [%ld, %ld], not '%s'", flag, lo, hi,
                               text);
    *out = (int)v;
    return 0;
}

int cli_parse_number(const char *cmd, const char *flag, const char *text, double lo, double hi,
                     const char *what, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || !(v > lo && v <= hi))
        return cli_usage_error(cmd, "%s takes %s, not '%s'", flag, what, text);
    *out = v;
    return 0;
}

double cli_now_s(void)
{
    return tailor_now_seconds();
}

int cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cli_cache_flag(const char *cmd, const char *text, const char **out)
{
    if (!text[0])
        return cli_usage_error(cmd, "--cache is empty (leave it out for the default cache)");
    *out = text;
    return 0;
}

int cli_bad_flag(const char *cmd, int c, int argc, char **argv)
{
    /* getopt_long has stepped past the flag it reports (short flags only come alone here) */
    const char *arg = (optind - 1 >= 1 && optind - 1 < argc) ? argv[optind - 1] : "";
    int is_long = strncmp(arg, "--", 2) == 0;
    if (c == ':')
        return cli_usage_error(cmd, "flag '%s' needs a value", arg);
    if (is_long && optopt && strchr(arg, '=')) /* a long flag without a value given one */
        return cli_usage_error(cmd, "flag '%.*s' takes no value", (int)strcspn(arg, "="), arg);
    if (!is_long && optopt > ' ' && optopt < 127)
        return cli_usage_error(cmd, "flag '-%c' is unknown", optopt);
    return cli_usage_error(cmd, "flag '%s' is unknown", arg);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        print_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("tailor 0.1.0\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            opterr = 0; /* subcommands report bad flags themselves, in one sentence */
            return commands[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "tailor: unknown command '%s' (see tailor --help)\n", argv[1]);
    return 2;
}

tailor_status cli_chat_prompt(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *model_dir,
                              const char *system_text, const char *text, int think,
                              int32_t **ids, size_t *n)
{
    int empty_thought = 0; /* the one size-dependent detail, from the checkpoint's own template */
    tailor_status st =
        model_dir ? tailor_gemma4_chat_empty_thought(ctx, model_dir, &empty_thought) : TAILOR_OK;
    unsigned flags = (empty_thought ? TAILOR_CHAT_EMPTY_THOUGHT : 0) |
                     (think ? TAILOR_CHAT_THINK : 0);
    return st ? st : tailor_tokenizer_chat_prompt(ctx, tok, system_text, text, flags, ids, n);
}

tailor_status cli_read_text(tailor_ctx *ctx, const char *path, char **text, size_t *len)
{
    if (strcmp(path, "-") == 0)
        return tailor_read_stream(ctx, stdin, "standard input", CLI_MAX_TEXT_BYTES, text, len);
    return tailor_read_file(ctx, path, CLI_MAX_TEXT_BYTES, text, len);
}
