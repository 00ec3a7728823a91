/* test_gemma4_sampler.c — runtime/sampler: greedy ties, top-k / top-p restriction, seeded
 * reproducibility, and sampled frequencies that follow the softmax. */
#include <math.h>
#include <string.h>

#include "sampler.h"
#include "testlib.h"

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    float l[8] = {0.5f, 2.0f, 2.0f, -1.0f, 1.0f, NAN, 0.0f, 1.5f};
    CHECK(tailor_argmax(l, 8) == 1); /* first of the tied maxima, NaN never wins */
    float nanfirst[3] = {NAN, -5.0f, -6.0f};
    CHECK(tailor_argmax(nanfirst, 3) == 1);

    tailor_sampler *s = NULL;
    tailor_sampler_params gp = {.greedy = 1};
    CHECK_OK(ctx, tailor_sampler_create(ctx, &gp, 8, &s));
    CHECK(s && tailor_sampler_next(s, l) == 1);
    tailor_sampler_destroy(s);

    tailor_sampler_params bad = {.temperature = 0.0f, .top_p = 1.0f};
    CHECK(tailor_sampler_create(ctx, &bad, 8, &s) == TAILOR_ERR_MISUSE && s == NULL);
    CHECK(strstr(tailor_ctx_message(ctx), "temperature") != NULL);
    bad.temperature = 1.0f;
    bad.top_p = 1.5f;
    CHECK(tailor_sampler_create(ctx, &bad, 8, &s) == TAILOR_ERR_MISUSE);

    uint64_t seed = 1234;
    printf("seed %llu\n", (unsigned long long)seed);
    /* top-k 2: only ids 1 and 2 (the two largest, equal) may come out */
    tailor_sampler_params kp = {.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .seed = seed};
    CHECK_OK(ctx, tailor_sampler_create(ctx, &kp, 8, &s));
    int c1 = 0, c2 = 0, other = 0;
    for (int i = 0; i < 2000 && s; i++) {
        int32_t t = tailor_sampler_next(s, l);
        c1 += t == 1, c2 += t == 2, other += t != 1 && t != 2;
    }
    CHECKF(other == 0 && c1 > 800 && c2 > 800, "top-k 2 gave %d/%d/%d", c1, c2, other);
    tailor_sampler_destroy(s);

    /* top-p 0.5 over {2, 2, 1.5, ...}: p(1)=p(2)~0.30 each -> {1, 2} reach 0.5 */
    tailor_sampler_params pp = {.temperature = 1.0f, .top_k = 0, .top_p = 0.5f, .seed = seed};
    CHECK_OK(ctx, tailor_sampler_create(ctx, &pp, 8, &s));
    other = 0;
    for (int i = 0; i < 2000 && s; i++) {
        int32_t t = tailor_sampler_next(s, l);
        other += t != 1 && t != 2;
    }
    CHECKF(other == 0, "top-p 0.5 let %d other tokens through", other);
    tailor_sampler_destroy(s);

    /* full distribution: frequencies follow softmax(l / T) within sampling noise */
    float u[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    tailor_sampler_params fp = {.temperature = 2.0f, .top_k = 0, .top_p = 1.0f, .seed = seed};
    CHECK_OK(ctx, tailor_sampler_create(ctx, &fp, 4, &s));
    int cnt[4] = {0};
    const int N = 40000;
    for (int i = 0; i < N && s; i++)
        cnt[tailor_sampler_next(s, u)]++;
    double z = 0;
    for (int i = 0; i < 4; i++)
        z += exp(u[i] / 2.0);
    for (int i = 0; i < 4; i++) {
        double p = exp(u[i] / 2.0) / z, f = (double)cnt[i] / N, sd = sqrt(p * (1 - p) / N);
        CHECKF(fabs(f - p) < 5 * sd, "token %d: frequency %.4f, softmax %.4f", i, f, p);
    }
    tailor_sampler_destroy(s);

    /* same seed, same sequence; another seed, another sequence */
    int32_t a[32], b[32], c[32];
    tailor_sampler *s1 = NULL, *s2 = NULL, *s3 = NULL;
    tailor_sampler_params p1 = fp, p3 = fp;
    p3.seed = seed + 1;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p1, 4, &s1));
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p1, 4, &s2));
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p3, 4, &s3));
    for (int i = 0; i < 32 && s1 && s2 && s3; i++) {
        a[i] = tailor_sampler_next(s1, u);
        b[i] = tailor_sampler_next(s2, u);
        c[i] = tailor_sampler_next(s3, u);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    tailor_sampler_destroy(s1);
    tailor_sampler_destroy(s2);
    tailor_sampler_destroy(s3);
    tailor_ctx_destroy(ctx);
    return test_finish("test_gemma4_sampler");
}
