/* test_step_tune.c — step tuning's choices without a GPU: which recorded trials are a kernel's
 * alternatives (tailor_step_alternatives) and when an alternative replaces the winner
 * (tailor_step_keeps). The GPU part (a configuration swapped in place, kept or dropped) is
 * test_gpu_step_tune.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "step_tune.h"
#include "testlib.h"

static void test_keeps(void)
{
    const double from[3] = {1000, 1000, 1000};
    const double win[3] = {990, 985, 996};
    const double one_lost[3] = {990, 1001, 985};
    const double in_noise[3] = {999, 999, 999};
    int wins = -1;
    CHECK(tailor_step_keeps(from, win, 3, 0.002, &wins) == 1 && wins == 3);
    CHECK(tailor_step_keeps(from, one_lost, 3, 0.002, &wins) == 0 && wins == 2);
    /* 0.1 % faster in every pair is inside a 0.2 % margin */
    CHECK(tailor_step_keeps(from, in_noise, 3, 0.002, &wins) == 0 && wins == 0);
    CHECK(tailor_step_keeps(from, in_noise, 3, 0.0005, &wins) == 1 && wins == 3);
    CHECK(tailor_step_keeps(from, win, 0, 0.002, &wins) == 0 && wins == 0);
}

static void test_noise(void)
{
    const double steady[4] = {1000, 1001, 999, 1000};
    const double jumpy[4] = {1000, 1020, 990, 990};
    CHECK(fabs(tailor_step_noise(steady, 4) - 0.002) < 1e-12);
    CHECK(fabs(tailor_step_noise(jumpy, 4) - 30.0 / 1000.0) < 1e-12);
    CHECK(tailor_step_noise(steady, 1) == 0);
}

typedef struct alts {
    char *tmpl[8], *params[8];
    double alone[8], own;
    int n;
} alts;

static void alts_free(alts *a)
{
    for (int i = 0; i < a->n; i++) {
        free(a->tmpl[i]);
        free(a->params[i]);
    }
    a->n = 0;
}

static tailor_status find(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                          double within, int max, alts *a)
{
    return tailor_step_alternatives(ctx, c, key, "w4a16_gemv_t", "{\"UNROLL\":3,\"WK\":4}",
                                    within, max, a->tmpl, a->params, a->alone, &a->n, &a->own);
}

static void test_alternatives(tailor_ctx *ctx, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/trials.sqlite", dir);
    tailor_cache *c = NULL;
    CHECK_OK(ctx, tailor_cache_open(ctx, path, &c));
    if (!c)
        return;
    tailor_cache_key key = {"Test GPU|sm_90", "w4a16_matmul", "group=128,k=1536,m=1,n=6144",
                            "bf16", "abc"};
    tailor_cache_key other_shape = key, other_hash = key, other_dtype = key;
    other_shape.shape = "group=128,k=1536,m=1,n=2048";
    other_hash.space_hash = "def";
    other_dtype.dtype = "fp16";
    const char *own = "{\"UNROLL\":3,\"WK\":4}";
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "w4a16_gemv_t", own, "timed", 5.0, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "w4a16_gemv", "{\"ROWS\":2}", "timed", 4.9,
                                         NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "w4a16_gemv_t", "{\"UNROLL\":2,\"WK\":4}",
                                         "timed", 5.5, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "w4a16_gemv_t", "{\"UNROLL\":1,\"WK\":4}",
                                         "timed", 7.0, NULL)); /* beyond 1.3 x 4.9 */
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "w4a16_gemv", "{\"ROWS\":1}",
                                         "wrong-result", -1, "row 3 off"));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "w4a16_gemv", "{\"ROWS\":4}",
                                         "compile-error", -1, "spills"));
    /* faster trials of other keys are not this kernel's */
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &other_shape, "w4a16_gemv", "{\"ROWS\":8}",
                                         "timed", 1.0, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &other_hash, "w4a16_gemv", "{\"ROWS\":8}",
                                         "timed", 1.0, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &other_dtype, "w4a16_gemv", "{\"ROWS\":8}",
                                         "timed", 1.0, NULL));

    alts a = {.n = 0};
    CHECK_OK(ctx, find(ctx, c, &key, 1.3, 3, &a));
    CHECKF(a.n == 2, "%d alternatives", a.n);
    if (a.n == 2) {
        CHECK(strcmp(a.tmpl[0], "w4a16_gemv") == 0 && strcmp(a.params[0], "{\"ROWS\":2}") == 0);
        CHECK(a.alone[0] == 4.9);
        CHECK(strcmp(a.tmpl[1], "w4a16_gemv_t") == 0 &&
              strcmp(a.params[1], "{\"UNROLL\":2,\"WK\":4}") == 0);
        CHECK(a.alone[1] == 5.5);
    }
    CHECK(a.own == 5.0);
    alts_free(&a);

    /* max 1: the fastest other one, and the own time still found after it */
    CHECK_OK(ctx, find(ctx, c, &key, 1.3, 1, &a));
    CHECK(a.n == 1 && strcmp(a.params[0], "{\"ROWS\":2}") == 0 && a.own == 5.0);
    alts_free(&a);

    /* a wider window reaches the 7.0 one */
    CHECK_OK(ctx, find(ctx, c, &key, 1.5, 8, &a));
    CHECK(a.n == 3 && a.alone[2] == 7.0);
    alts_free(&a);

    /* a key with no trials: nothing, and no own time */
    tailor_cache_key none = key;
    none.shape = "group=128,k=1536,m=1,n=999";
    CHECK_OK(ctx, find(ctx, c, &none, 1.3, 3, &a));
    CHECK(a.n == 0 && a.own == -1);
    tailor_cache_close(c);
}

int main(void)
{
    char dir[] = "/tmp/tailor_test_step_tune_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    tailor_ctx *ctx = test_ctx();
    test_keeps();
    test_noise();
    test_alternatives(ctx, dir);
    tailor_ctx_destroy(ctx);
    int rc = test_finish("test_step_tune");
    char path[600];
    snprintf(path, sizeof path, "%s/trials.sqlite", dir);
    if (rc == 0) { /* keep the files of a failing run for a look */
        remove(path);
        rmdir(dir);
    }
    return rc;
}
