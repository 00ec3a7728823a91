/* space.h — search spaces: templates/NAME.lua run in a sandboxed Lua state, enumerating the
 * configurations of a template for (shape, dtype, device) and giving each one's budget figures
 * and launch geometry. The format is docs/search-spaces.md. */
#ifndef TAILOR_SPACE_H
#define TAILOR_SPACE_H

#include "device.h"
#include "gen.h"
#include "op.h"
#include "tailor.h"

typedef struct tailor_space tailor_space;

#define TAILOR_SPACE_MAX_PARAMS 16
#define TAILOR_SPACE_MAX_ARGS 32
#define TAILOR_SPACE_MAX_WORKSPACE 4
#define TAILOR_SPACE_MAX_FEATURES 8

/* One point of the space. */
typedef struct tailor_config {
    int nparams;
    tailor_define params[TAILOR_SPACE_MAX_PARAMS]; /* in the space's (sorted) parameter order */
} tailor_config;

typedef enum tailor_arg_kind {
    TAILOR_ARG_BUFFER = 0, /* an op buffer or a workspace buffer, by name */
    TAILOR_ARG_I32,
    TAILOR_ARG_I64,
    TAILOR_ARG_F32
} tailor_arg_kind;

typedef struct tailor_arg {
    tailor_arg_kind kind;
    char name[32];   /* buffer name, or the shape key a scalar came from ("" for constants) */
    long long i;
    double f;
} tailor_arg;

/* Everything a space says about one configuration for one (shape, dtype, device). */
/* A scratch buffer a launch needs (a space's `workspace`: name -> bytes). */
typedef struct tailor_workspace_need {
    char name[32];
    long long bytes;
} tailor_workspace_need;

typedef struct tailor_launch {
    int valid;                    /* 0: refused by the space's `valid` */
    char invalid_reason[256];
    int threads;
    long long smem_static, smem_dynamic; /* bytes */
    unsigned grid[3], block[3];
    int nargs;
    tailor_arg args[TAILOR_SPACE_MAX_ARGS];
    int nworkspace;               /* sorted by name */
    tailor_workspace_need workspace[TAILOR_SPACE_MAX_WORKSPACE];
    int nfeatures;
    char features[TAILOR_SPACE_MAX_FEATURES][24];
    int ndefines;                 /* params, then the space's shape-derived defines by name */
    tailor_define defines[TAILOR_GEN_MAX_DEFINES];
} tailor_launch;

/* Loads templates/NAME.lua (NAME with or without ".lua"), from TAILOR_TEMPLATE_PATH or the
 * embedded set. A broken script fails with TAILOR_ERR_LUA naming the file and line; a missing
 * field (op, source, params, threads, smem_static, smem_dynamic, grid, args) names the field. */
tailor_status tailor_space_load(tailor_ctx *ctx, const char *name, tailor_space **out);
/* Testing: from the nth allocation any space's Lua state makes from now on, every allocation
 * fails as if the host were out of memory (0: off again); not thread-safe. Every entry point
 * then returns a status, never aborting (tests/test_space.c walks n over a space's whole life). */
void tailor_space_fail_allocations_from(long n);
void tailor_space_destroy(tailor_space *s);

const char *tailor_space_name(const tailor_space *s);   /* "rmsnorm" */
const char *tailor_space_op(const tailor_space *s);     /* the op it implements */
const char *tailor_space_source(const tailor_space *s); /* "rmsnorm.cu" */
const char *tailor_space_origin(const tailor_space *s); /* where the .lua came from */
int tailor_space_supports(const tailor_space *s, tailor_dtype dtype);
/* The space's `experimental` sentence (why its template is not yet trusted), or NULL. An
 * experimental template is planned only with TAILOR_EXPERIMENTAL=1 (tailor_experimental_on). */
const char *tailor_space_experimental(const tailor_space *s);
int tailor_experimental_on(void);

/* How the tuner measures (tailor_instance_time). Part of every space hash: a winner chosen by
 * another method is tuned again. Session 8: graph replays (host launches had timed the host).
 * Session 9: launches with PDL where the runtime uses it (sm_90+), which reorders winners: the
 * E2B int4 GEMV's session-8 pick took 5.08 µs without PDL and 5.64 with it, a three-quad batch
 * 4.56 and 4.17. */
#define TAILOR_TIMING_METHOD "cuda-graph-replay-pdl/2"
/* Session 16: each timed launch is followed by a spacer (a one-block kernel that waits for it and
 * spins TAILOR_SPACER_NS), so that a candidate's ramp and tail are not hidden under the next launch
 * of itself, which the decode step never runs it after: there it follows a short kernel or
 * another GEMV. The spacer's own chain is timed alone and subtracted. Measured on the H200 (E2B
 * decode, docs/perf/model.md): with every op so tuned, W4A16 + int4 head 719-723 tok/s against
 * 674-675, bf16 543-548 against 564-571; session 17, W4A16 + int4 head with the spacer on the
 * W4A16 ops only 718 against 686 (every op) and 684 (none). So the ops that say so
 * (tailor_op.spaced_timing: the W4A16 ones) use it by default and the others keep
 * TAILOR_TIMING_METHOD; TAILOR_TIMING_SPACER=1 (or 0) in the environment gives every op the
 * spacer (or none), and a comma-separated list of op names (attention_decode,rmsnorm) gives it to
 * those ops besides the W4A16 ones. */
#define TAILOR_TIMING_METHOD_SPACER "cuda-graph-replay-pdl-spacer/3"
#define TAILOR_SPACER_NS 1000

/* 1 when op's timed launches are followed by the spacer (TAILOR_TIMING_METHOD_SPACER). */
int tailor_timing_spacer(const char *op);

/* TAILOR_ERR_MISUSE, naming the item, when TAILOR_TIMING_SPACER is set to neither 0, 1 nor a list
 * of op names (tailor_space_hash checks it, so no winner is looked up or tuned under a misspelt one). */
tailor_status tailor_timing_spacer_check(tailor_ctx *ctx);

/* The timing method of op's tuning: TAILOR_TIMING_METHOD_SPACER or TAILOR_TIMING_METHOD. */
const char *tailor_timing_method(const char *op);

/* Hex SHA-256 over the timing method, the .lua text, the .cu text and every shared header: what
 * a cached winner of this template depends on. */
tailor_status tailor_space_hash(tailor_ctx *ctx, const tailor_space *s, char hex[65]);

/* Enumerates the cartesian product of the parameters for (shape, dtype, device). configs is
 * malloc'd (free()). */
tailor_status tailor_space_enumerate(tailor_ctx *ctx, tailor_space *s, const tailor_shape *shape,
                                     tailor_dtype dtype, const tailor_device_info *dev,
                                     tailor_config **configs, int *count);

/* tailor_space_evaluate's `how`, bits: */
enum {
    /* running a winner chosen at another shape of the same kernel (`valid` gets purpose
     * "launch": a space may then drop the rules that only prune, such as tile rows following
     * m, and keep those of correctness); without it, choosing configurations for this shape
     * (purpose "plan": every rule applies) */
    TAILOR_EVAL_LAUNCH = 1,
    /* a configuration `valid` refuses is left there: its defines and launch fields are not
     * read (a plan that keeps its survivors alone; without it a refused configuration's
     * defines are read too, for the plan's report) */
    TAILOR_EVAL_VALID_FIRST = 2
};

/* Evaluates every function of the space for one configuration; how: TAILOR_EVAL_* bits (0:
 * planning, every field read). */
tailor_status tailor_space_evaluate(tailor_ctx *ctx, tailor_space *s, const tailor_config *cfg,
                                    const tailor_shape *shape, tailor_dtype dtype,
                                    const tailor_device_info *dev, int how,
                                    tailor_launch *out);

/* A launch's geometry as the cache keeps it beside a winner ({"grid":[..],"block":[..],
 * "threads":..,"smem_static":..,"smem_dynamic":..}) into buf. */
void tailor_launch_json(const tailor_launch *l, char *buf, size_t size);

/* "BM=64 BN=32" into buf. */
void tailor_config_format(const tailor_config *cfg, char *buf, size_t size);
/* {"BM":64,"BN":32} into buf (numbers unquoted, strings quoted). */
void tailor_config_json(const tailor_config *cfg, char *buf, size_t size);
/* Parses the JSON above back. */
tailor_status tailor_config_parse_json(tailor_ctx *ctx, const char *json, tailor_config *cfg);

/* Names of every space (embedded + TAILOR_TEMPLATE_PATH) implementing `op`, sorted; a space
 * that fails to load fails the call with its message. TAILOR_ERR_NOT_FOUND when none does,
 * naming each file on TAILOR_TEMPLATE_PATH that hid a built-in template of `op` by declaring
 * another op. */
tailor_status tailor_space_find_for_op(tailor_ctx *ctx, const char *op, char ***names, int *count);

#endif
