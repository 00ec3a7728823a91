/* step_tune.h — choosing among a kernel's verified configurations by the time of the whole step
 * it runs in, not by its own time alone.
 *
 * The tuner times each candidate by itself (tune.c). In a model's decode step a kernel follows
 * other kernels, overlaps their tails under programmatic dependent launch and shares the L2 with
 * them, so the configuration that wins alone is not always the one that makes the step fastest
 * (docs/perf/model.md: the same templates tuned twice gave steps 4 % apart). Step tuning takes
 * the costliest kernels of a step, and for each tries the next-best timed configurations the
 * cache recorded for its key (every one was checked against the reference when it was tuned, and
 * is checked again here), timing the step with the winner and with the alternative in
 * alternating pairs; an alternative that wins every pair by more than the noise margin replaces
 * the winner, in the kernel set and in the cache. */
#ifndef TAILOR_STEP_TUNE_H
#define TAILOR_STEP_TUNE_H
#include "cache.h"
#include "kernels.h"
#include "tailor.h"

/* One kernel of the step and what it costs there (microseconds per step; only the order of the
 * list matters). */
typedef struct tailor_step_kernel {
    tailor_op_kernel *kernel;
    double us;
} tailor_step_kernel;

/* Runs the step as the program does and gives its time in microseconds. It must first rebuild
 * whatever holds launches (a captured CUDA graph: tailor_op_kernel_use_try does not reach
 * launches already captured). */
typedef tailor_status (*tailor_step_timer)(tailor_ctx *ctx, void *user, double *us);

/* What happened to one alternative (for the caller's progress lines). */
typedef struct tailor_step_try {
    const char *op, *shape;     /* the kernel's op and tuned shape */
    char from[512], to[512];    /* "template PARAM=v ..." of the winner and of the alternative */
    double alone_from, alone_to; /* their own times, microseconds, as the tuner measured them
                                    (alone_from -1: the cache holds no trial of the winner) */
    double step_from, step_to;  /* median step times of the pairs, microseconds */
    int wins, pairs;            /* pairs the alternative won by more than the margin */
    int kept;
    const char *failed;         /* NULL, or why it could not be tried (compile, check) */
} tailor_step_try;

typedef struct tailor_step_tune_options {
    int max_kernels;   /* the costliest kernels of the list looked at (0: 12) */
    int alternatives;  /* timed configurations tried per kernel besides its own (0: 3) */
    double within;     /* only those whose own time is within this factor of the fastest (0: 1.3) */
    int pairs;         /* alternating (winner, alternative) step timings per try (0: 3) */
    double margin;     /* the fraction of the step an alternative must save in every pair
                          (0: 0.002); raised to the step's own spread over four timings
                          (tailor_step_noise) when that is larger */
    void (*progress)(void *user, const tailor_step_try *t);
    void *progress_user;
} tailor_step_tune_options;

/* Timings of the unchanged step taken before the first try (its spread sets the margin's floor)
 * and after the last. */
#define TAILOR_STEP_NOISE_SAMPLES 4

typedef struct tailor_step_tune_result {
    int kernels, tried, kept, failed;
    double first_us, last_us; /* the step before the first try and after the last (medians of
                                 TAILOR_STEP_NOISE_SAMPLES timings) */
    double noise, margin;     /* the four timings' spread (tailor_step_noise), the margin used */
} tailor_step_tune_result;

/* The timed trials the cache holds for `key`, fastest first, other than the own configuration
 * (own_template with own_params, as tailor_config_json writes them) and within `within` x the
 * fastest: up to max of them into template_names / params_json (malloc'd strings, the caller
 * frees each) and their own times into alone_us; *n the count. *own_us: the own configuration's
 * recorded time (-1 when the cache has no trial of it). */
tailor_status tailor_step_alternatives(tailor_ctx *ctx, tailor_cache *cache,
                                       const tailor_cache_key *key, const char *own_template,
                                       const char *own_params, double within, int max,
                                       char **template_names, char **params_json,
                                       double *alone_us, int *n, double *own_us);

/* Step-tunes the kernels of `list` (n entries, any order: the costliest max_kernels are taken),
 * timing with timer(user). Alternatives that cannot be loaded (compile, check, shapes) are
 * reported and skipped; a timer or cache error, or a CUDA or out-of-memory error while loading
 * one, stops the run (the kernel being tried goes back to its own configuration). */
tailor_status tailor_step_tune(tailor_ctx *ctx, tailor_kernels *set, tailor_cache *cache,
                               tailor_step_kernel *list, int n, tailor_step_timer timer, void *user,
                               const tailor_step_tune_options *opts,
                               tailor_step_tune_result *out);

/* The spread of n timings of one step as a fraction of their mean: (max - min) / mean (0 for
 * fewer than two). */
double tailor_step_noise(const double *us, int n);

/* Whether an alternative timed against its winner in `pairs` alternating pairs should replace
 * it: every pair won by more than margin x the winner's time (step_from[i] the winner's time in
 * pair i, step_to[i] the alternative's); *wins the pairs won. */
int tailor_step_keeps(const double *step_from, const double *step_to, int pairs, double margin,
                      int *wins);

#endif
