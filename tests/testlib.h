/* testlib.h — a tiny assert helper, seeded randomness and skips for tailor's tests. */
#ifndef TAILOR_TESTLIB_H
#define TAILOR_TESTLIB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemma4.h"
#include "op.h"
#include "tailor.h"

#define TEST_SKIP_CODE 77

extern int test_failures;
extern int test_checks;

/* Records a failure with file and line, and goes on. */
#define CHECK(cond)                                                                            \
    do {                                                                                       \
        test_checks++;                                                                         \
        if (!(cond)) {                                                                         \
            test_failures++;                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);          \
        }                                                                                      \
    } while (0)

/* Like CHECK, with a printf-style explanation. */
#define CHECKF(cond, ...)                                                                      \
    do {                                                                                       \
        test_checks++;                                                                         \
        if (!(cond)) {                                                                         \
            test_failures++;                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

/* Checks that a tailor call returned TAILOR_OK; prints the context's message if not. */
#define CHECK_OK(ctx, call)                                                                    \
    do {                                                                                       \
        test_checks++;                                                                         \
        tailor_status st_ = (call);                                                            \
        if (st_ != TAILOR_OK) {                                                                \
            test_failures++;                                                                   \
            fprintf(stderr, "%s:%d: %s failed (%s): %s\n", __FILE__, __LINE__, #call,         \
                    tailor_status_name(st_), tailor_ctx_message(ctx));                         \
        }                                                                                      \
    } while (0)

/* A field of /proc/self/status ("VmRSS", "VmHWM") in bytes; -1 when unreadable. */
double test_proc_status_bytes(const char *field);

/* Prints "skipped: why" and exits with the skip code ctest understands. */
void test_skip(const char *why) __attribute__((noreturn));

struct tailor_gpu;
/* GPU 0 for test `name`; a skip where this machine has none (no driver, no device); any other
 * failure to open it fails the test (a broken driver on a GPU machine is not a skip). */
struct tailor_gpu *test_gpu_or_skip(tailor_ctx *ctx, const char *name);

/* Prints the summary line and returns the process exit code (0 when nothing failed, 1 when a
 * check failed, and 1 also when no check ran: a test that asserts nothing is a defect). */
int test_finish(const char *name);

/* A context whose log goes to stderr. */
tailor_ctx *test_ctx(void);

/* xorshift64* generator, seeded explicitly; tests print their seed. */
typedef struct test_rng {
    uint64_t s;
} test_rng;
void test_rng_seed(test_rng *r, uint64_t seed);
uint64_t test_rng_next(test_rng *r);
float test_rng_uniform(test_rng *r, float lo, float hi); /* in [lo, hi) */
float test_rng_normal(test_rng *r);

/* Reads a whole file into a malloc'd NUL-terminated buffer (caller frees); *len (may be NULL)
 * receives its size. NULL when it cannot be read. */
char *test_read_file(const char *path, size_t *len);

/* Source dir (TAILOR_SOURCE_DIR), shared dir (TAILOR_SHARED_DIR) and tailor binary (TAILOR_BIN). */
const char *test_source_dir(void);
const char *test_shared_dir(void); /* NULL when absent */
const char *test_tailor_bin(void);

/* One op instance on the host: its shape, the buffers the op describes for it (host, zeroed)
 * and fp32 reference outputs for every buffer that is not a pure input. */
typedef struct test_op_inst {
    tailor_shape shape;
    tailor_op_buffers bufs;
    void *host[TAILOR_OP_MAX_BUFFERS];
    float *ref[TAILOR_OP_MAX_BUFFERS];
} test_op_inst;

/* Parses `text`, completes it with op's defaults, describes it in dtype and allocates the
 * buffers. 0 on failure (the context says why; *in can still be freed). */
int test_op_inst_make(tailor_ctx *ctx, const tailor_op *op, const char *text, tailor_dtype dtype,
                      test_op_inst *in);
void test_op_inst_free(test_op_inst *in);

/* Index of the buffer called `name`, -1 when the op has none. */
int test_op_inst_buffer(const test_op_inst *in, const char *name);

/* The product of a prologue op (out [n] as floats, rounded to the dtype) on the row a [k], as a
 * correct kernel other than the reference may compute it. */
typedef void (*test_pro_product)(const test_op_inst *in, tailor_dtype dt, const float *a,
                                 float *out);

/* A prologue op's tolerance (matmul_pro, w4a16_pro) holds what such a kernel may compute: over
 * 12 seeds, the seam's row with other fp32 statistics (test_emulate_seam_row, 1/rms off by
 * +-2e-6) and `product` on it pass the op's check. Returns the worst |diff| / tolerance. */
double test_pro_tolerance(tailor_ctx *ctx, const char *op_name, const char *text,
                          tailor_dtype dt, test_pro_product product);

/* |got - ref| in units of b's tolerance (atol + rtol |ref|): 1 is the edge of passing. */
double test_tol_ratio(const tailor_buffer_spec *b, double got, double ref);

/* The row a of a seam prologue (matmul_pro, w4a16_pro: buffers t, x_in, w_post, w_next,
 * scalar) as another correct kernel may compute it: fp32 sums in another order and both
 * 1/rms scaled by (1 + pert), the way a GPU's rsqrtf and block reduction differ from the C
 * reference; a [k] as floats, rounded to the dtype. */
void test_emulate_seam_row(const test_op_inst *in, tailor_dtype dt, int mode, int k, double pert,
                           float *a);

/* Whether a formatted shape ("k=1536,m=1,n=2048") holds every comma-separated k=v of `kvs`. */
int test_shape_has(const char *shape, const char *kvs);

/* How many of a GPU model's kernel uses (tailor_gemma4_gpu_kernels, its dry pass) are of op
 * with the given k=v values. */
int test_kernel_uses(const tailor_gemma4_kernel_use *u, int n, const char *op, const char *kvs);

#endif
