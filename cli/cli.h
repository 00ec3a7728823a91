/* cli.h — the `tailor` command's subcommands and the little they share. The CLI is thin: it
 * parses flags, calls the library, prints. Each subcommand lives in its own cmd_NAME.c. */
#ifndef TAILOR_CLI_H
#define TAILOR_CLI_H

#include "tailor.h"

/* Each returns the process exit code (0 ok, 1 failure, 2 bad usage). */
int cmd_devices(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* `tailor bench tokenizer ...` (cli/bench_tokenizer.c); argv[0] is "tokenizer". */
int bench_tokenizer(int argc, char **argv);

/* `tailor bench sampler ...` (cli/bench_sampler.c); argv[0] is "sampler". */
int bench_sampler(int argc, char **argv);

/* `tailor bench model ...` (cli/bench_model.c); argv[0] is "model". */
int bench_model(int argc, char **argv);

struct tailor_gemma4_gpu;
struct tailor_kernels;
struct tailor_cache;
/* `bench model --step-tune` and `tune --step-tune` (cli/step_tune_model.c): the decode step's
 * costliest kernels re-ranked by the step's own time (tuner/step_tune.h), each timing a prompt of
 * plen tokens (cli_prompt_ids) and ndec decode steps; better choices replace the winners in the
 * cache. Prints a line per alternative tried and a summary. g must hold plen + ndec + 1
 * positions. */
tailor_status step_tune_model(tailor_ctx *ctx, struct tailor_gemma4_gpu *g,
                              struct tailor_kernels *ks, struct tailor_cache *cache, int vocab,
                              int plen, int ndec);
/* The benchmarks' prompt: n fixed ids spread over a vocabulary of `vocab` (malloc'd; NULL when
 * out of memory). */
int32_t *cli_prompt_ids(int vocab, int n);

/* A context that logs INFO and above to stderr ("tailor: ..."); TAILOR_LOG=debug lowers it. */
tailor_ctx *cli_ctx(void);

/* Prints "tailor: <message>" for a failed status to stderr and returns the exit code 1. */
int cli_fail(tailor_ctx *ctx, tailor_status status);

/* Prints "tailor CMD: <formatted sentence> (see tailor CMD --help)" and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A flag's integer value: all of text a decimal integer in [lo, hi] into *out, 0; else a usage
 * error naming the flag and the text ("tailor CMD: FLAG takes an integer in [lo, hi], not
 * 'text'") and 2. */
int cli_parse_int(const char *cmd, const char *flag, const char *text, long lo, long hi, int *out);

/* A flag's number: all of text a finite number in (lo, hi] into *out, 0; else a usage error
 * ("tailor CMD: FLAG takes WHAT, not 'text'", WHAT e.g. "a number in (0, 1]") and 2. */
int cli_parse_number(const char *cmd, const char *flag, const char *text, double lo, double hi,
                     const char *what, double *out);

/* Seconds on a monotonic clock (for the commands' own timings). */
double cli_now_s(void);

/* The most a text file given on the command line may hold (--prompt-file, --file). */
#define CLI_MAX_TEXT_BYTES ((size_t)1 << 30)

/* All of `path` ("-" = standard input) in *text, NUL-terminated beyond *len bytes (malloc'd):
 * tailor_read_file's rules and messages, with "standard input" naming "-". */
tailor_status cli_read_text(tailor_ctx *ctx, const char *path, char **text, size_t *len);

/* The ids of the Gemma 4 chat prompt `tailor run --chat` runs (tailor_tokenizer_chat_prompt):
 * thinking on with `think`, and with model_dir (may be NULL) the empty thought channel where
 * that checkpoint's template closes one. *ids is malloc'd. */
struct tailor_tokenizer;
tailor_status cli_chat_prompt(tailor_ctx *ctx, const struct tailor_tokenizer *tok,
                              const char *model_dir, const char *system_text, const char *text,
                              int think, int32_t **ids, size_t *n);

/* qsort's comparison of doubles, ascending. */
int cli_cmp_double(const void *a, const void *b);

/* --cache FILE's value into *out, 0; an empty FILE (which would silently mean the default
 * cache) is a usage error, 2. */
int cli_cache_flag(const char *cmd, const char *text, const char **out);

/* Reports a bad flag in one sentence naming it as typed: call from getopt_long's default case
 * with what it returned (c), its optstring starting with ':' so that a flag missing its value
 * returns ':' ("flag '--top-k' needs a value") rather than '?' (an unknown flag, or a value
 * given to a flag that takes none). Returns 2. */
int cli_bad_flag(const char *cmd, int c, int argc, char **argv);

#endif
