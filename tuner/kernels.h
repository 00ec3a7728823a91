/* kernels.h — tuned kernels for a program that runs them (the runtime): the winner of each
 * (op, shape, dtype) comes from the cache (or is tuned on demand), is loaded once, and is
 * launched with named device buffers for any actual shape. */
#ifndef TAILOR_KERNELS_H
#define TAILOR_KERNELS_H

#include "cache.h"
#include "cuda.h"
#include "device.h"
#include "op.h"
#include "tailor.h"
#include "tune_targets.h"
#include "tuner.h"

typedef struct tailor_kernels tailor_kernels;
typedef struct tailor_op_kernel tailor_op_kernel;

/* A set of kernels on one GPU, backed by one cache. `rehearse` (a GPU profile or NULL) selects
 * the rehearsal winners (PTX under that profile's budget). allow_tune: a missing winner is
 * tuned on demand (with a log line) unless TAILOR_NO_COMPILE=1; otherwise it is an error. The
 * gpu and cache must outlive the set. */
tailor_status tailor_kernels_create(tailor_ctx *ctx, tailor_gpu *gpu, tailor_cache *cache,
                                    const tailor_device_info *rehearse, int allow_tune,
                                    tailor_kernels **out);
void tailor_kernels_destroy(tailor_kernels *set);

/* The winner of (op, shape, dtype) — `shape` is the shape it was (or will be) tuned at —
 * loaded and ready. The kernel belongs to the set. */
tailor_status tailor_kernels_get(tailor_ctx *ctx, tailor_kernels *set, const char *op,
                                 const tailor_shape *shape, tailor_dtype dtype,
                                 tailor_op_kernel **out);

/* The (op, tuned shape) targets a program is about to ask for, in dtype (a model's list:
 * tailor_gemma4_gpu_kernels): when the set may tune, their missing winners' candidates start
 * compiling ahead on every CPU (tailor_compile_ahead, tuner.h), so that on-demand tuning finds
 * them compiled. Changes no result. Replaces an earlier call's list; returns 1 when compiling
 * ahead started. Call tailor_kernels_set_strategy first. */
int tailor_kernels_expect(tailor_kernels *set, const tailor_tune_target *targets, int n,
                          tailor_dtype dtype);

/* How many of the n targets (op, tuned shape) have a winner in the set's cache for dtype on
 * this device (what a program's first log line can say before it loads anything): *cached of
 * *known, where known leaves out the targets whose op or shape the set cannot key (those fail
 * later, at tailor_kernels_get, with their own message). Loads and tunes nothing. */
void tailor_kernels_count_cached(tailor_kernels *set, const tailor_tune_target *targets, int n,
                                 tailor_dtype dtype, int *cached, int *known);

/* On-demand tuning from now on uses `strategy` (a tailor_strategy value from tuner.h; halving
 * until this is called, as a model's first boot tunes) with at most `trials` candidates (0: no
 * cap; random only). Tests use random with a few trials so that many tiny shapes tune fast. */
void tailor_kernels_set_strategy(tailor_kernels *set, int strategy, int trials);

/* on = 1: launches from now on use programmatic dependent launch where the GPU and the
 * compiled code allow it (sm_90+, not a rehearsal of an older profile): a kernel may start
 * while its predecessor drains, saving the launch gap between dependent kernels. For a chain of
 * kernels (a model's forward); tuning and benchmarks of single kernels leave it off. */
void tailor_kernels_set_pdl(tailor_kernels *set, int on);

/* on = 1 (before the set loads its first kernel): every winner is compiled again with
 * TAILOR_TRACE defined instead of loaded from its cached binary, so that each launch records
 * when its blocks arrived and when they were released from the grid wait (the step trace,
 * templates/include/tailor_common.cuh). Slower to load (one compile per kernel), the same
 * configurations, and a few instructions more per block. */
void tailor_kernels_set_trace(tailor_kernels *set, int on);
/* Changes whenever a launch through the set would differ from before (a configuration tried or
 * settled, PDL switched): a CUDA graph captured at another generation is stale. */
unsigned tailor_kernels_generation(const tailor_kernels *set);

/* One launch seen by the trace: %globaltimer ns (one clock for every SM). */
typedef struct tailor_trace_launch {
    const tailor_op_kernel *kernel;
    const char *op, *shape, *description; /* owned by the kernel */
    unsigned long long arrive;        /* the first block at its grid wait */
    unsigned long long release_first; /* the first block past it (the predecessor had ended) */
    unsigned long long release_last;  /* the last block past it */
    long long blocks;                 /* blocks that passed it */
    int shared_slot;                  /* 1: two launches' records merged (the figures are off) */
} tailor_trace_launch;

/* Microseconds from launch i's first release to launch i + 1's (what launch i costs on the
 * critical path, hand-off included); 0 for the last launch or an out-of-order pair. */
double tailor_trace_gap_us(const tailor_trace_launch *t, int n, int i);

/* A trace's launches of one kernel: how many, and their gaps summed. */
typedef struct tailor_trace_sum {
    const tailor_op_kernel *kernel;
    const char *op, *shape, *description;
    int launches;
    double gap_us;
} tailor_trace_sum;

/* Groups the n launches (in release order) by kernel into sums (room for n), the largest
 * summed gap first; *nsums kernels. */
void tailor_trace_summarize(const tailor_trace_launch *t, int n, tailor_trace_sum *sums,
                            int *nsums);

/* Clears every loaded kernel's trace records (the set must trace); then run the work. */
tailor_status tailor_kernels_trace_arm(tailor_ctx *ctx, tailor_kernels *set);

/* Waits for the stream and gives every launch recorded since the arm, in the order the launches
 * were released (malloc'd; free()). */
tailor_status tailor_kernels_trace_read(tailor_ctx *ctx, tailor_kernels *set,
                                        tailor_trace_launch **out, int *count);

/* How many winners came from the cache and how many were tuned by this set. */
void tailor_kernels_stats(const tailor_kernels *set, int *from_cache, int *tuned);

/* The profile whose budget and features the set's kernels are chosen and compiled under (a
 * rehearsal: tailor_kernels_create's `rehearse`), or NULL when they are the live GPU's own. */
const tailor_device_info *tailor_kernels_rehearsal(const tailor_kernels *set);

typedef struct tailor_binding {
    const char *name;  /* an op buffer name ("x", "out", ...) */
    CUdeviceptr ptr;
} tailor_binding;

/* Launches k on the set's GPU stream for `shape` (which may differ from the tuned shape in keys
 * the template does not compile in, e.g. rows or kv_len), binding each of the op's buffers by
 * name. Launch geometry is evaluated by the template's space once per distinct shape and
 * remembered; workspace buffers are allocated (zeroed) on first need. */
tailor_status tailor_op_kernel_launch(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                      const tailor_shape *shape, const tailor_binding *bindings,
                                      int nbindings);

/* The template and parameters of a loaded winner ("rmsnorm THREADS=256 VEC=8"). */
const char *tailor_op_kernel_describe(const tailor_op_kernel *k);

/* ---- another configuration in place of a winner (step tuning, tuner/step_tune.h) ----------- */

/* A loaded kernel's cache key, with the storage its strings point into (op points into the
 * kernel). */
typedef struct tailor_op_kernel_keybuf {
    tailor_winner_key_text text;
    tailor_cache_key key;
} tailor_op_kernel_keybuf;
tailor_status tailor_op_kernel_key(tailor_ctx *ctx, tailor_kernels *set, const tailor_op_kernel *k,
                                   tailor_op_kernel_keybuf *out);
/* The op, the tuned shape ("k=1536,m=1,n=2048"), the template ("w4a16_gemv_t") and the parameters as the
 * cache's trials record them ({"UNROLL":3,...}) of what k runs now. */
const char *tailor_op_kernel_op(const tailor_op_kernel *k);
const char *tailor_op_kernel_shape(const tailor_op_kernel *k);
const char *tailor_op_kernel_template(const tailor_op_kernel *k);
void tailor_op_kernel_config_json(const tailor_op_kernel *k, char *buf, size_t size);
/* Compiles (template_name, params_json) — another configuration of k's op, at k's tuned shape,
 * for the set's target — checks it against the op's reference on the GPU and loads it beside
 * k's own; nothing changes until tailor_op_kernel_use_try. It must also run every shape k
 * launches now (those its launch memo holds: up to 32 since its configuration last changed),
 * checked before the compile. One at a time per kernel; not in a traced set. On failure nothing
 * is kept. */
tailor_status tailor_op_kernel_try(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                   const char *template_name, const char *params_json);
/* on = 1: k's launches from now on run the configuration being tried; 0: its own. Launches
 * already captured in a CUDA graph keep the function they captured: capture again (the set's
 * generation changes). */
void tailor_op_kernel_use_try(tailor_kernels *set, tailor_op_kernel *k, int on);
/* Ends a try. keep = 1: the configuration tried becomes k's and the cache's winner for k's key
 * (median_us: its own time as the tuner measured it; the trial count stays the old winner's;
 * marked chosen_in_step);
 * keep = 0: it is dropped. Either way k then runs its (possibly new) own configuration. On a
 * cache error k keeps its old configuration. */
tailor_status tailor_op_kernel_settle(tailor_ctx *ctx, tailor_kernels *set, tailor_op_kernel *k,
                                      int keep, double median_us);

#endif
