/* op.h — an op is what a kernel computes, independent of how: its shape keys, its buffers, how
 * to fill them with test data, and its C reference. Templates (templates/NAME.cu + NAME.lua)
 * implement ops; the tuner checks every candidate against the op's reference. */
#ifndef TAILOR_OP_H
#define TAILOR_OP_H

#include <stddef.h>
#include <stdint.h>

#include "tailor.h"

typedef enum tailor_dtype {
    TAILOR_DTYPE_F32 = 0,
    TAILOR_DTYPE_F16,
    TAILOR_DTYPE_BF16,
    TAILOR_DTYPE_I32,
    TAILOR_DTYPE_I64,
    TAILOR_DTYPE_U8,
    TAILOR_DTYPE_COUNT
} tailor_dtype;

/* Bytes per element. */
size_t tailor_dtype_size(tailor_dtype dtype);
/* "fp32", "fp16", "bf16", "i32", "i64", "u8". */
const char *tailor_dtype_name(tailor_dtype dtype);
/* The 16-bit compute dtype a card of compute capability major cc_major runs by default: fp16
 * below sm_80 (no bf16 arithmetic), bf16 from sm_80. */
tailor_dtype tailor_dtype_for_cc(int cc_major);
/* Parses the names above (and "float16"/"bfloat16"/"float32"); TAILOR_ERR_MISUSE otherwise. */
tailor_status tailor_dtype_parse(tailor_ctx *ctx, const char *text, tailor_dtype *out);
/* Converts element i of a buffer of `dtype` to float (integers converted as values). */
float tailor_dtype_load(tailor_dtype dtype, const void *buf, size_t i);
/* Stores v at element i of a buffer of `dtype` (rounded to nearest even for 16-bit floats). */
void tailor_dtype_store(tailor_dtype dtype, void *buf, size_t i, float v);

/* ---- shapes: "m=1,n=6144,k=1536,group=128" ---- */

#define TAILOR_SHAPE_MAX 12

typedef struct tailor_shape {
    int count;
    struct {
        char key[24];
        long long value;
    } dims[TAILOR_SHAPE_MAX];
} tailor_shape;

/* Parses "k=v,k=v". Values are integers from 0 to INT32_MAX (kernels take them as i32).
 * Duplicate or malformed keys, and values out of that range, fail with one sentence. */
tailor_status tailor_shape_parse(tailor_ctx *ctx, const char *text, tailor_shape *out);
/* Sets (or adds) key = value. */
tailor_status tailor_shape_set(tailor_shape *shape, const char *key, long long value);
/* Value of key, or `fallback` when absent. */
long long tailor_shape_get(const tailor_shape *shape, const char *key, long long fallback);
/* 1 when key is present. */
int tailor_shape_has(const tailor_shape *shape, const char *key);
/* Canonical text: keys sorted, "k=1536,m=1,n=6144". */
void tailor_shape_format(const tailor_shape *shape, char *buf, size_t size);

/* ---- buffers of one op instance ---- */

typedef enum tailor_buffer_role {
    TAILOR_BUF_IN = 0, /* filled by op->fill, read by the kernel */
    TAILOR_BUF_OUT,    /* written by the kernel; poisoned before each check; compared */
    TAILOR_BUF_INOUT   /* filled, then updated in place by the kernel; compared */
} tailor_buffer_role;

#define TAILOR_OP_MAX_BUFFERS 16

typedef struct tailor_buffer_spec {
    char name[32];      /* the name a Lua space's `args` uses ("x", "w", "out") */
    tailor_dtype dtype; /* element type */
    size_t count;       /* elements */
    tailor_buffer_role role;
    double atol, rtol;  /* outputs: |got - ref| <= atol + rtol * |ref|; NaN always fails */
} tailor_buffer_spec;

typedef struct tailor_op_buffers {
    int count;
    tailor_buffer_spec b[TAILOR_OP_MAX_BUFFERS];
} tailor_op_buffers;

typedef struct tailor_shape_key {
    const char *name;      /* "m" */
    long long fallback;    /* used when the shape omits it; -1: required */
    const char *doc;       /* "rows of the activation (tokens)" */
} tailor_shape_key;

typedef struct tailor_op {
    const char *name;                 /* "rmsnorm", "w4a16_matmul", ... */
    const char *summary;              /* one line for `tailor plan --help` */
    const tailor_shape_key *keys;     /* terminated by {NULL} */

    /* Checks the shape and dtype (one clear sentence on failure) and describes the buffers. */
    tailor_status (*describe)(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                              tailor_op_buffers *out);

    /* Fills every IN/INOUT buffer host[i] (laid out as out->b[i]) with seeded random data that
     * exercises the op (never zeros). OUT buffers are left alone. */
    void (*fill)(const tailor_shape *shape, tailor_dtype dtype, const tailor_op_buffers *bufs,
                 void *const *host, uint64_t seed);

    /* Computes the expected value of every OUT/INOUT buffer i into ref[i] (float, count
     * elements; NULL for IN buffers) from the filled inputs. */
    tailor_status (*reference)(tailor_ctx *ctx, const tailor_shape *shape, tailor_dtype dtype,
                               const tailor_op_buffers *bufs, void *const *host, float *const *ref);

    /* Bytes a kernel must move at least (for GB/s) and useful FLOPs (for TFLOP/s). */
    double (*bytes)(const tailor_shape *shape, tailor_dtype dtype);
    double (*flops)(const tailor_shape *shape, tailor_dtype dtype);

    /* 1: tuned with a spacer after each timed launch (TAILOR_TIMING_METHOD_SPACER, space.h) */
    int spaced_timing;
} tailor_op;

/* The op named `name`, or NULL. */
const tailor_op *tailor_op_find(const char *name);
/* tailor_op_find that fails naming the known ops. */
tailor_status tailor_op_get(tailor_ctx *ctx, const char *name, const tailor_op **out);
/* All ops, NULL-terminated. */
const tailor_op *const *tailor_op_list(void);

/* Fills in missing optional keys with their fallbacks and fails, naming the key, when a
 * required key is missing or an unknown key is given. */
tailor_status tailor_op_complete_shape(tailor_ctx *ctx, const tailor_op *op, tailor_shape *shape);

/* ---- random streams of the fills (the same values for the same seed, on every machine) ---- */

/* A 64-bit LCG step; uniform in [0, 1) from its top 24 bits. */
float tailor_fill_uniform01(uint64_t *state);

/* splitmix64: the next 64 random bits. Counter-based: n calls advance the state by
 * n * TAILOR_FILL_U64_STEP, so a stream can start at any element. */
uint64_t tailor_fill_u64(uint64_t *state);
#define TAILOR_FILL_U64_STEP 0x9e3779b97f4a7c15ull

/* A random permutation of 0..n-1 into out (Fisher-Yates over tailor_fill_u64's stream). */
void tailor_fill_permutation(int32_t *out, size_t n, uint64_t *state);
/* tailor_op.flops of an op that only moves data (a gather, a fill): 0. */
double tailor_op_no_flops(const tailor_shape *shape, tailor_dtype dtype);

/* The state of tailor_fill_uniform01's stream n steps after `state` (O(log n)). */
uint64_t tailor_fill_uniform01_skip(uint64_t state, uint64_t n);

/* Calls range(user, i0, i1) over [0, count) in chunks, on every CPU: for fills of large
 * buffers, where element i's value depends on i alone (a stream started at i0 with the skips
 * above), so the values do not depend on the number of threads. */
void tailor_fill_parallel(size_t count, void (*range)(void *user, size_t i0, size_t i1),
                          void *user);

/* ---- pieces of C references shared by ops (an op with an epilogue reuses its parts') ---- */

/* The seam of op residual_norm (tuner/op_residual_norm.c) on `rows` rows of `cols`: a (the
 * sublayer output as floats of dtype values), x_in (fp32), the norm weights w_post and w_next
 * (dtype), the layer scalar; mode 0..3 as the op. Writes x_out and y_out (floats, unrounded). */
tailor_status tailor_ref_seam(tailor_ctx *ctx, tailor_dtype dtype, int mode, size_t rows,
                              size_t cols, const float *a, const float *x_in, const void *w_post,
                              const void *w_next, float scalar, float *x_out, float *y_out);

/* residual_norm's fill of x (fp32, n values), the norm weights (dtype, cols each) and the
 * scalar: a residual stream with outliers and weights around 1, some negative. */
void tailor_fill_seam(tailor_dtype dtype, float *x, size_t n, void *w_post, void *w_next,
                      size_t cols, float *scalar, uint64_t seed);

/* The specs of a fused seam's outputs (matmul_seam, w4a16_seam, matmul_pro, w4a16_pro): the
 * residual x (fp32, `count` values, role INOUT in place or OUT into another buffer) and the
 * next input y (dtype). The product before the seam (or the seam's own fp32 statistics) may
 * differ from the reference by a rounding step in a few elements (summation order); through
 * norm(t) * w_post that moves x by up to ~ulp * |w_post| * |t| / rms(t) (< 0.05 in bf16 for
 * the fills) and y by about as much relative to its scale. Dropping the add, the scalar or a
 * row moves x by O(1) against values of ~20. */
tailor_buffer_spec tailor_seam_x_spec(const char *name, tailor_dtype dtype, size_t count,
                                      tailor_buffer_role role);
tailor_buffer_spec tailor_seam_y_spec(tailor_dtype dtype, size_t count);

/* The seam's norm weights and scalar, in this order at b[0], b[1], b[2]: w_post and w_next
 * [count] (dtype) and scalar [1] fp32, all inputs (every fused seam lists them together). */
void tailor_seam_weight_specs(tailor_buffer_spec b[3], tailor_dtype dtype, size_t count);

/* Checks the shape's `mode` of a seam fused after or before a product (op names the op in the
 * message): 0, 1 or 2 (residual_norm's mode 3, the norm alone, has no product). */
tailor_status tailor_seam_mode_check(tailor_ctx *ctx, const char *op, const tailor_shape *shape);

/* The inputs of one seam whose output row feeds a product (matmul_pro, w4a16_pro): the
 * sublayer output t (dtype) and the residual x at unit scale (uniform in +-sqrt(3), no
 * outliers), the norm weights and scalar as tailor_fill_seam. The row a then stays within
 * TAILOR_PRO_A_MAX in every mode (|norm(t) * w_post| <= 3.5, |x| <= 5.3, norm(x) * w_next
 * <= 7), which the products' tolerances count on: an outlier of the residual would make one
 * rounding step of a (two correct kernels may round a differently) larger than the check. */
#define TAILOR_PRO_A_MAX 8.0
void tailor_fill_seam_row(tailor_dtype dtype, void *t, float *x, size_t cols, void *w_post,
                          void *w_next, float *scalar, uint64_t seed);

/* One head row of Gemma 4's q/k preparation on the host (GEMMA4.md §2.5), in place on the fp32
 * row x[hd]: RMSNorm with fp64 statistics and eps 1e-6, times w (hd values of `dtype`) unless w
 * is NULL, then NeoX RoPE of the first `rot` pairs (j with j + hd/2) at position pos, angle
 * pos * inv_freq[j] in fp32; no rounding. The references of qk_norm_rope and of
 * attention_decode with prep = 1. */
void tailor_ref_norm_rope(float *x, size_t hd, tailor_dtype dtype, const void *w, float pos,
                          const float *inv_freq, size_t rot);

/* Dot product of x and y (k floats) with eight partial sums in fp32, as the kernels sum: the
 * matmul references' inner loop (the compiler vectorises it). */
float tailor_ref_dot(const float *x, const float *y, size_t k);

/* v rounded to the 16-bit dtype and back (what a kernel storing T keeps). */
float tailor_ref_round(tailor_dtype dtype, float v);

/* Gemma 4's gating of one output, g and u already in the dtype: gelu_pytorch_tanh(g) in fp32
 * rounded to the dtype, times u (transformers' act_fn(gate) * up; gelu_gate, matmul_glu and
 * w4a16_glu). */
float tailor_ref_gate(tailor_dtype dtype, float g, float u);

/* Compares `count` elements of `got` (dtype) against `ref`; on the first element out of
 * tolerance (or NaN) returns TAILOR_ERR_VERIFY with index, values and the tolerance. */
tailor_status tailor_op_compare(tailor_ctx *ctx, const tailor_buffer_spec *spec, const void *got,
                                const float *ref);

#endif
