/* test_trace.c — the step trace's host side without a GPU (tuner/kernels.h): the gap of each
 * launch to the next release, the sums per kernel in order of cost, and a trace asked of a
 * kernel set that was not loaded for one. */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "testlib.h"

static int kernel_a, kernel_b; /* stand-ins: a trace only compares kernels by address */
#define KA ((const tailor_op_kernel *)(const void *)&kernel_a)
#define KB ((const tailor_op_kernel *)(const void *)&kernel_b)

static tailor_trace_launch launch(const tailor_op_kernel *k, const char *op,
                                  unsigned long long release)
{
    tailor_trace_launch t;
    memset(&t, 0, sizeof t);
    t.kernel = k;
    t.op = op;
    t.shape = "n=1";
    t.description = op;
    t.arrive = release - 500;
    t.release_first = release;
    t.release_last = release + 40;
    t.blocks = 8;
    return t;
}

static void test_gaps_and_sums(void)
{
    /* A at 1.0 us, B at 3.5, A at 4.0, B at 9.0: A costs 2.5 + 5.0, B 0.5 and nothing after it */
    tailor_trace_launch t[4] = {launch(KA, "a", 1000), launch(KB, "b", 3500),
                                launch(KA, "a", 4000), launch(KB, "b", 9000)};
    CHECK(fabs(tailor_trace_gap_us(t, 4, 0) - 2.5) < 1e-9);
    CHECK(fabs(tailor_trace_gap_us(t, 4, 2) - 5.0) < 1e-9);
    CHECK(tailor_trace_gap_us(t, 4, 3) == 0 && tailor_trace_gap_us(t, 4, -1) == 0);
    tailor_trace_sum s[4];
    int ns = -1;
    tailor_trace_summarize(t, 4, s, &ns);
    CHECKF(ns == 2, "%d kernels", ns);
    if (ns == 2) {
        CHECK(s[0].kernel == KA && s[0].launches == 2 && fabs(s[0].gap_us - 7.5) < 1e-9);
        CHECK(s[1].kernel == KB && s[1].launches == 2 && fabs(s[1].gap_us - 0.5) < 1e-9);
        CHECK(strcmp(s[0].op, "a") == 0 && strcmp(s[1].shape, "n=1") == 0);
    }
    /* out of release order (never from trace_read, which sorts): no negative gap */
    tailor_trace_launch r[2] = {launch(KA, "a", 5000), launch(KB, "b", 2000)};
    CHECK(tailor_trace_gap_us(r, 2, 0) == 0);
    tailor_trace_summarize(t, 0, s, &ns);
    CHECK(ns == 0);
}

static void test_not_tracing(tailor_ctx *ctx)
{
    tailor_kernels *set = NULL;
    CHECK_OK(ctx, tailor_kernels_create(ctx, NULL, NULL, NULL, 0, &set));
    if (!set)
        return;
    CHECK(tailor_kernels_trace_arm(ctx, set) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "tailor_kernels_set_trace") != NULL);
    tailor_kernels_destroy(set);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    test_gaps_and_sums();
    test_not_tracing(ctx);
    tailor_ctx_destroy(ctx);
    return test_finish("test_trace");
}
