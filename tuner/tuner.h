/* tuner.h — the tuner: compile the plan's survivors in parallel, check each against the op's
 * reference on the live GPU, time the right ones, keep the winner (with its binary) in the cache.
 * Also the launcher of a cached winner, shared with the runtime. */
#ifndef TAILOR_TUNER_H
#define TAILOR_TUNER_H

#include "cache.h"
#include "cuda.h"
#include "device.h"
#include "op.h"
#include "plan.h"
#include "space.h"
#include "tailor.h"
#include "tune_targets.h"

typedef enum tailor_strategy {
    TAILOR_STRATEGY_EXHAUSTIVE = 0, /* every survivor */
    TAILOR_STRATEGY_RANDOM,         /* a random sample under --trials / --budget */
    TAILOR_STRATEGY_HALVING         /* successive halving: cheap timing for all, more for the best */
} tailor_strategy;

/* "exhaustive", "random", "halving" -> strategy; TAILOR_ERR_MISUSE otherwise. */
tailor_status tailor_strategy_parse(tailor_ctx *ctx, const char *text, tailor_strategy *out);

/* The strategy's name as tailor_strategy_parse reads it ("unknown" out of range). */
const char *tailor_strategy_name(tailor_strategy s);

typedef struct tailor_tune_progress {
    const char *phase;   /* "compile", "verify", "time" */
    int done, total;
    double best_us;      /* < 0 before the first timing */
    double eta_seconds;  /* < 0 when unknown */
} tailor_tune_progress;

/* Which survivors a tuning may try: a template by name (empty: any) and parameters at given
 * values (a template without one of them is left out). `tailor tune --where`. */
typedef struct tailor_tune_filter {
    char template_name[64];
    tailor_shape params; /* parameter name -> value */
} tailor_tune_filter;

/* Parses "template=NAME,K=V,..." (either part may be absent, not both) into *out; a malformed
 * entry fails with one sentence naming it. */
tailor_status tailor_tune_filter_parse(tailor_ctx *ctx, const char *text, tailor_tune_filter *out);

typedef struct tailor_compile_ahead tailor_compile_ahead;

typedef struct tailor_tune_options {
    tailor_strategy strategy;
    int trials;                          /* random: at most this many candidates (0: no cap) */
    double budget_seconds;               /* random: stop starting candidates after this (0: none) */
    int verify_all;                      /* check every survivor; any wrong result fails the call */
    int check_only;                      /* as verify_all, then time nothing and write nothing:
                                            no winner, no trial in the cache (cache may be NULL) */
    const tailor_tune_filter *where;     /* only these survivors (NULL: every one); a cached
                                            winner is tuned again, as with force */
    const tailor_device_info *rehearse;  /* a profile whose budget and arch apply (PTX is JIT-run
                                            on the live GPU); NULL: the live GPU's own */
    int force;                           /* re-tune even when the cache has a winner */
    int jobs;                            /* compile threads (0: number of CPUs) */
    tailor_compile_memo *memo;           /* instantiations compiled earlier in the run, shared
                                            across calls (NULL: compile every survivor) */
    tailor_compile_ahead *ahead;         /* the run's compiling ahead, whose plans tailor_tune
                                            takes instead of planning a target again (NULL:
                                            none) */
    uint64_t seed;                       /* inputs and sampling */
    void (*progress)(void *user, const tailor_tune_progress *p);
    void *progress_user;
} tailor_tune_options;

/* Where a tuning call's time goes (tailor_tune_result.phase_s; `tailor tune` logs them at debug
 * level): what a first boot's per-target seconds are made of. */
typedef enum tailor_tune_phase {
    TAILOR_TUNE_PHASE_PLAN,    /* the space, the budget, the cache key, earlier trials */
    TAILOR_TUNE_PHASE_INPUTS,  /* test inputs filled, the reference computed, uploaded */
    TAILOR_TUNE_PHASE_COMPILE, /* compiling, or waiting for compiles in flight (ahead) */
    TAILOR_TUNE_PHASE_LOAD,    /* loading each compiled candidate's module */
    TAILOR_TUNE_PHASE_CHECK,   /* checking each loaded candidate against the reference */
    TAILOR_TUNE_PHASE_ROTATE,  /* the rotated copies of the inputs */
    TAILOR_TUNE_PHASE_WARM,    /* timing: warm-up passes (host launches) */
    TAILOR_TUNE_PHASE_CAPTURE, /* timing: capturing and instantiating graphs */
    TAILOR_TUNE_PHASE_REPLAY,  /* timing: graph replays (the GPU's own time, mostly) */
    TAILOR_TUNE_PHASE_RECORD,  /* trials and the winner into the cache */
    TAILOR_TUNE_PHASE_FREE,    /* unloading modules, freeing workspaces and inputs */
    TAILOR_TUNE_NPHASES
} tailor_tune_phase;

/* "plan", "inputs", ... for logs. */
const char *tailor_tune_phase_name(tailor_tune_phase p);

typedef struct tailor_tune_result {
    int from_cache;           /* the winner was already cached: nothing compiled */
    int candidates, survivors;
    int compiled, compile_errors, refused_after_compile;
    int reused;               /* of the compiled: copies of the run's earlier compiles (memo) */
    int verified, wrong, launch_errors, timed;
    char template_name[64];
    char params[512];         /* "BM=64 BN=32" */
    char kernel_name[256];
    double median_us, spread_us;
    int blocks_per_sm;        /* the winner's resident blocks an SM (0: unknown) */
    double bytes, flops;      /* of one launch, from the op */
    char first_failure[1200]; /* the first wrong result or error, for --verify-all */
    double phase_s[TAILOR_TUNE_NPHASES]; /* wall seconds of each phase (tailor_tune_phase) */
} tailor_tune_result;

/* Tunes (op, shape, dtype) on the open GPU, recording every trial and the winner in cache.
 * With TAILOR_NO_COMPILE=1 in the environment any needed compile is TAILOR_ERR_NO_COMPILE.
 * With verify_all, a survivor with a wrong result makes the call fail with TAILOR_ERR_VERIFY
 * (after every survivor was checked). With check_only the same checks run and then nothing is
 * timed or written: out->verified counts the right survivors, out->template_name stays empty
 * (what a kernel developer and compute-sanitizer run over a space; cache may be NULL). */
tailor_status tailor_tune(tailor_ctx *ctx, tailor_gpu *gpu, tailor_cache *cache, const char *op,
                          const tailor_shape *shape, tailor_dtype dtype,
                          const tailor_tune_options *opts, tailor_tune_result *out);

/* Re-checks one cached winner against the reference on the live GPU. */
tailor_status tailor_tuner_verify_winner(tailor_ctx *ctx, tailor_gpu *gpu,
                                         const tailor_cache_key *key,
                                         const tailor_cache_winner *w);

/* Times a cached winner (checked when it was tuned; `tailor cache verify` re-checks) over
 * rotated inputs (more than twice the L2): median and spread in microseconds of `batches` timed
 * passes. */
tailor_status tailor_tuner_time_winner(tailor_ctx *ctx, tailor_gpu *gpu,
                                       const tailor_cache_key *key, const tailor_cache_winner *w,
                                       int batches, double *median_us, double *spread_us);

/* A tailor_cache_entry_check (cache.h) for imports: the entry's shape is canonical text of
 * key=value integers (as tailor_shape_format writes it), its dtype a name tailor_dtype_name
 * gives and its parameters a configuration as tailor_config_json writes it; NULL when so, else
 * what is wrong with *field. */
const char *tailor_tuner_check_entry(const tailor_cache_key *key, const char *params_json,
                                     const char **field);

/* The fingerprint a tune run keys the cache with, written into buf: the live GPU's
 * (tailor_device_fingerprint), or "rehearse:NAME@<live>", followed by the shared-memory carveout
 * kernels load with (tailor_carveout_read, runtime/cuda.h) when it is not TAILOR_DEFAULT_CARVEOUT:
 * "|carveout=driver" or "|carveout=P" (the carveout changes which configuration wins; under the
 * default the text is as before the carveout was keyed, so those caches stay valid). A malformed
 * TAILOR_CARVEOUT fails with TAILOR_ERR_MISUSE naming it, buf then "". */
tailor_status tailor_tuner_fingerprint(tailor_ctx *ctx, const tailor_device_info *live,
                                       const tailor_device_info *rehearse, char *buf, size_t size);

/* 1 when key_fp, a cache key's fingerprint, was tuned on the device of device_fp (a
 * tailor_device_fingerprint text): that fingerprint, or a rehearsal on it, under any carveout. */
int tailor_tuner_fingerprint_on(const char *key_fp, const char *device_fp);

/* The strings a winner's cache key points into (but the op's name). */
typedef struct tailor_winner_key_text {
    char fingerprint[600];
    char shape[256];
    char space_hash[65];
} tailor_winner_key_text;

/* The cache key of the winner of (op, completed shape, dtype) tuned on live, under the rehearsed
 * profile when rehearse is not NULL and the carveout of this process (tailor_tuner_fingerprint),
 * for the op's space hash, into *key: the key tailor_tune writes and every lookup (the kernel
 * set, the ahead planner, the bench) reads. op must outlive the key; the other strings are
 * copied into *text. Fails as tailor_tuner_fingerprint does. */
tailor_status tailor_winner_key(tailor_ctx *ctx, const tailor_device_info *live,
                                const tailor_device_info *rehearse, const char *op,
                                const tailor_shape *completed, tailor_dtype dtype,
                                const char *space_hash, tailor_winner_key_text *text,
                                tailor_cache_key *key);


/* The compile memo of a tuning run on gpu (TAILOR_COMPILE_MEMO_BYTES; NULL when out of memory).
 * Under a rehearsal (rehearse not NULL) its PTX is JIT-compiled for gpu in the compile threads
 * (tailor_compile_memo_set_jit), so that checking a candidate loads a cubin instead of running
 * the driver's JIT, one candidate after another, where the GPU waits. */
tailor_compile_memo *tailor_tune_memo_create(tailor_gpu *gpu, const tailor_device_info *rehearse);

/* Compiling ahead of a run that tunes targets one after another (tune --preset, a model's
 * on-demand tuning): a planner thread plans the targets in order, skips those whose winner the
 * cache at cache_path has (read through its own connection; NULL or a missing file: none), and
 * worker threads (opts->jobs, 0: one a CPU) compile the candidates tailor_tune will pick for the
 * rest (the same strategy, trials and seed) into opts->memo. tailor_tune with that memo then finds
 * them compiled, or waits for the compile in flight, instead of compiling each target's own
 * after the previous target's timing. Needs no GPU (live is the device tailor_tune will run on;
 * opts->rehearse as there). NULL (nothing started) without a memo, without targets, or with
 * TAILOR_NO_COMPILE=1. It never changes what is tuned, only when compiles happen: a compile that
 * fails here is made (and reported) again by tailor_tune. The ahead stops compiling when the
 * memo is three quarters full. */
typedef struct tailor_compile_ahead_stats {
    int targets;  /* targets planned without a cached winner */
    int queued;   /* candidates queued */
    int compiled; /* compiled here (the rest of queued: memo hits, failures, not reached) */
    int reused;   /* already in the memo */
    int failed;
    int full;     /* stopped at a full memo */
} tailor_compile_ahead_stats;

tailor_compile_ahead *tailor_compile_ahead_start(const tailor_device_info *live,
                                                 const char *cache_path,
                                                 const tailor_tune_target *targets, int n,
                                                 tailor_dtype dtype,
                                                 const tailor_tune_options *opts);

/* The planner's plan of (op, shape, dtype) moved into *out (free it with tailor_plan_free): 1,
 * or 0 when it holds none (not planned yet, cached, already taken, or past the ~40 MB of plans
 * it keeps): the caller then plans the target itself. a may be NULL. It is the plan tailor_tune
 * would build: the same survivors-only plan for the same device. */
int tailor_compile_ahead_take_plan(tailor_compile_ahead *a, const char *op,
                                   const tailor_shape *shape, tailor_dtype dtype,
                                   tailor_plan *out);

/* Waits until every queued candidate is compiled (tests; a tuning run calls stop). */
void tailor_compile_ahead_wait(tailor_compile_ahead *a);

/* Stops: compiles in progress finish, the rest are dropped; the threads are joined, a freed.
 * stats (may be NULL) gets the counts. NULL is fine. */
void tailor_compile_ahead_stop(tailor_compile_ahead *a, tailor_compile_ahead_stats *stats);

#endif
