/* instance.h — one op instance on the GPU: host inputs, the C reference's expected outputs,
 * device buffers (rotated copies for timing), and the binding of a space's `args` to them.
 * Private to tuner/. */
#ifndef TAILOR_INSTANCE_H
#define TAILOR_INSTANCE_H

#include "cuda.h"
#include "op.h"
#include "space.h"

#define TAILOR_MAX_ROTATION 256

typedef struct tailor_instance {
    const tailor_op *op;
    tailor_shape shape;
    tailor_dtype dtype;
    tailor_op_buffers bufs;
    void *host[TAILOR_OP_MAX_BUFFERS];  /* inputs as filled; outputs as downloaded */
    float *ref[TAILOR_OP_MAX_BUFFERS];  /* expected values of OUT/INOUT buffers */
    int nsets;                          /* rotated copies on the device (set 0 is checked) */
    CUdeviceptr dev[TAILOR_MAX_ROTATION][TAILOR_OP_MAX_BUFFERS];
    size_t set_bytes;                   /* bytes of one set */
    tailor_kernel spacer;               /* tailor_instance_time's spacer (with PDL), or zeroed */
    double warm_s, capture_s, replay_s; /* tailor_instance_time's wall seconds so far: warm-up
                                           passes, graph captures + instantiations, replays */
    double spacer_us;                   /* its own chain, per launch */
} tailor_instance;

/* Describes, fills (seed), computes the reference (unless with_reference is 0: timing only)
 * and uploads set 0. */
tailor_status tailor_instance_create(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_op *op,
                                     const tailor_shape *shape, tailor_dtype dtype, uint64_t seed,
                                     int with_reference, tailor_instance **out);
void tailor_instance_destroy(tailor_gpu *gpu, tailor_instance *inst);

/* Makes enough device copies of set 0 that one pass over them covers more than twice the L2. */
tailor_status tailor_instance_rotate(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst);

/* Workspace buffers of one launch configuration, zeroed once. */
typedef struct tailor_workspace {
    int count;
    char names[TAILOR_SPACE_MAX_WORKSPACE][32];
    CUdeviceptr ptr[TAILOR_SPACE_MAX_WORKSPACE];
} tailor_workspace;

tailor_status tailor_workspace_create(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_launch *l,
                                      tailor_workspace *ws);
void tailor_workspace_destroy(tailor_gpu *gpu, tailor_workspace *ws);

/* Argument storage for one launch. */
typedef struct tailor_bound_args {
    void *ptrs[TAILOR_SPACE_MAX_ARGS];
    union {
        CUdeviceptr p;
        int32_t i32;
        int64_t i64;
        float f32;
    } values[TAILOR_SPACE_MAX_ARGS];
} tailor_bound_args;

/* Binds a space's args to buffer set `set` of the instance and the workspace. Fails naming an
 * argument that is neither an op buffer nor a workspace buffer. */
tailor_status tailor_bind_args(tailor_ctx *ctx, const tailor_launch *l, const tailor_instance *inst,
                               int set, const tailor_workspace *ws, tailor_bound_args *out);

/* Poisons the outputs of set 0 (NaN bytes), restores INOUT buffers, launches once, waits, and
 * compares every output with the reference. TAILOR_ERR_VERIFY with the first bad element. */
tailor_status tailor_instance_check(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                    tailor_kernel *k, const tailor_launch *l,
                                    const tailor_workspace *ws);

/* Times the kernel: one warm-up pass over the rotated sets, then `batches` replays of a CUDA graph
 * of one pass over the sets and about a millisecond of launches, 4 to 32 beyond the pass
 * (back to back on the GPU, as in the model, with PDL where k->pdl says
 * so: the runtime launches sm_90 code that way, each kernel overlapping its predecessor's tail);
 * with PDL and tailor_timing_spacer(op), a spacer follows each launch (space.h) and its own
 * per-launch time is subtracted. Gives the median microseconds per launch and a robust spread
 * (1.4826 x median absolute deviation).
 * give_up_us > 0: the warm-up pass is timed (from its second launch: the first may load the
 * module), and a kernel slower than that a launch stops there: *median_us is the pass's mean,
 * *spread_us 0 and *gave_up 1 (a candidate far behind the best costs one pass, not hundreds of
 * launches). Else *gave_up 0 (gave_up may be NULL). */
tailor_status tailor_instance_time(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                   tailor_kernel *k, const tailor_launch *l,
                                   const tailor_workspace *ws, int batches, double give_up_us,
                                   double *median_us, double *spread_us, int *gave_up);

#endif
