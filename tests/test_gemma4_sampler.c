/* test_gemma4_sampler.c — runtime/sampler: greedy ties, top-k / top-p restriction, seeded
 * reproducibility, sampled frequencies that follow the softmax, and every draw checked against a
 * slow reference (sort, prefix) over a full Gemma vocabulary and over inputs that defeat
 * quickselect pivots. */
#include <math.h>
#include <string.h>

#include "sampler.h"
#include "testlib.h"

/* ------------------------------------------------------------- the reference, by definition */

static const float *ref_logits; /* for ref_cmp: qsort passes no context */

static int ref_before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static int ref_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return ref_before(ref_logits, x, y) ? -1 : ref_before(ref_logits, y, x) ? 1 : 0;
}

/* The kept set of sampler.h, computed the slow way: the ids that are not NaN sorted in the order,
 * the first top_k (all for 0) and those tied with the top_k-th (transformers' TopKLogitsWarper
 * keeps every logit not below the top_k-th largest), weights expf((l - max) / T) over them into
 * w[id] (the largest exactly 1), then the shortest prefix whose weight reaches top_p of their
 * sum. Returns its worst id (the boundary), -1 when every id that is not NaN is kept. order[n]
 * is scratch. */
static int32_t ref_boundary(const float *l, int n, const tailor_sampler_params *p, int32_t *order,
                            float *w)
{
    int m = 0;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(l[i]))
            order[m++] = i;
    ref_logits = l;
    qsort(order, (size_t)m, sizeof *order, ref_cmp);
    int k = p->top_k > 0 && p->top_k < m ? p->top_k : m;
    while (k < m && l[order[k]] == l[order[k - 1]])
        k++;
    float mx = l[order[0]];
    double sum = 0;
    for (int i = 0; i < k; i++) {
        float x = l[order[i]];
        w[order[i]] = x == mx ? 1.0f : expf((x - mx) / p->temperature);
        sum += w[order[i]];
    }
    int keep = k;
    double acc = 0;
    for (int i = 0; i < k && p->top_p < 1; i++) {
        acc += w[order[i]];
        if (acc >= (double)p->top_p * sum) {
            keep = i + 1;
            break;
        }
    }
    return keep < m ? order[keep - 1] : -1;
}

static int ref_kept(const float *l, int32_t i, int32_t b)
{
    return !isnan(l[i]) && (b < 0 || i == b || ref_before(l, i, b));
}

/* The kept ids in ascending order into ids; returns their count and *total their weight summed
 * in that order. */
static int ref_kept_ids(const float *l, int n, int32_t b, const float *w, int32_t *ids,
                        double *total)
{
    int c = 0;
    *total = 0;
    for (int32_t i = 0; i < n; i++)
        if (ref_kept(l, i, b)) {
            ids[c++] = i;
            *total += w[i];
        }
    return c;
}

/* The canonical draw of sampler.h for the uniform u: r = u * the kept weight, then the kept id,
 * ascending, where subtracting the weights takes r below 0 (else the last kept id). */
static int32_t ref_draw(const int32_t *ids, int c, const float *w, double total, double u)
{
    double r = u * total;
    for (int i = 0; i < c; i++) {
        r -= w[ids[i]];
        if (r < 0)
            return ids[i];
    }
    return ids[c - 1];
}

/* The sampler's generator (sampler.c), so that the reference can predict each draw. */
static uint64_t ref_splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double ref_uniform(test_rng *r)
{
    return (double)(test_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* The reference's view of one logit vector: its kept ids ascending, their weights, the sum. */
typedef struct ref_set {
    const float *l;
    int32_t b, *ids; /* boundary; [n] kept ids, c of them */
    int c;
    float *w; /* [n] by id */
    double total;
} ref_set;

static int ref_set_make(ref_set *r, const float *l, int n, const tailor_sampler_params *p)
{
    int32_t *order = malloc((size_t)n * sizeof *order);
    r->l = l;
    r->ids = malloc((size_t)n * sizeof *r->ids);
    r->w = calloc((size_t)n, sizeof *r->w);
    if (order && r->ids && r->w) {
        r->b = ref_boundary(l, n, p, order, r->w);
        r->c = ref_kept_ids(l, n, r->b, r->w, r->ids, &r->total);
    }
    free(order);
    return order && r->ids && r->w;
}

static void ref_set_free(ref_set *r)
{
    free(r->ids);
    free(r->w);
}

/* `draws` ids from one sampler of p fed l[n] and, when l2 is given, l2[n] in turn (as a
 * generation feeds it new logits every token), each checked against the reference: in the kept
 * set, and the very id the canonical draw gives for the same seed (any other kept set, order of
 * the draw, weight or sum would change most of them). */
static void check_draws2(tailor_ctx *ctx, const char *what, const float *l, const float *l2,
                         int n, tailor_sampler_params p, int draws)
{
    ref_set r[2] = {{0}, {0}};
    tailor_sampler *s = NULL;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, n, &s));
    int ok = s && ref_set_make(&r[0], l, n, &p) && ref_set_make(&r[1], l2 ? l2 : l, n, &p);
    CHECKF(ok, "%s: out of memory", what);
    test_rng g;
    test_rng_seed(&g, ref_splitmix64(p.seed) | 1u);
    int outside = 0, differ = 0;
    int32_t first_bad = -1, want_bad = -1;
    for (int i = 0; i < draws && ok; i++) {
        const ref_set *q = &r[i % 2];
        int32_t got = tailor_sampler_next(s, q->l);
        int32_t want = ref_draw(q->ids, q->c, q->w, q->total, ref_uniform(&g));
        outside += got < 0 || got >= n || !ref_kept(q->l, got, q->b);
        if (got != want && differ++ == 0)
            first_bad = got, want_bad = want;
    }
    CHECKF(outside == 0, "%s: %d of %d draws outside the kept set", what, outside, draws);
    CHECKF(differ == 0, "%s: %d of %d draws differ from the reference (first: %d, want %d)", what,
           differ, draws, (int)first_bad, (int)want_bad);
    tailor_sampler_destroy(s);
    ref_set_free(&r[0]);
    ref_set_free(&r[1]);
}

static void check_draws(tailor_ctx *ctx, const char *what, const float *l, int n,
                        tailor_sampler_params p, int draws)
{
    check_draws2(ctx, what, l, NULL, n, p, draws);
}

/* Sampled frequencies over a small vocabulary (n <= 16) against the reference distribution
 * (top-k, then softmax with temperature, then top-p), within 5 sigma; ids outside the kept set
 * never. */
static void check_frequencies(tailor_ctx *ctx, const float *l, int n, tailor_sampler_params p,
                              int draws)
{
    int32_t order[16];
    float w[16] = {0};
    int cnt[17] = {0}; /* [16]: ids outside the vocabulary */
    int32_t b = ref_boundary(l, n, &p, order, w);
    double z = 0;
    for (int32_t i = 0; i < n; i++)
        z += ref_kept(l, i, b) ? w[i] : 0;
    tailor_sampler *s = NULL;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, n, &s));
    for (int i = 0; i < draws && s; i++) {
        int32_t t = tailor_sampler_next(s, l);
        cnt[t >= 0 && t < n ? t : 16]++;
    }
    tailor_sampler_destroy(s);
    CHECKF(cnt[16] == 0, "top-k %d top-p %g: %d draws outside the vocabulary", p.top_k,
           (double)p.top_p, cnt[16]);
    for (int i = 0; i < n; i++) {
        double q = ref_kept(l, i, b) ? w[i] / z : 0, f = (double)cnt[i] / draws;
        double sd = sqrt(q * (1 - q) / draws);
        CHECKF(q == 0 ? cnt[i] == 0 : fabs(f - q) <= 5 * sd,
               "top-k %d top-p %g T %g: token %d frequency %.4f, reference %.4f", p.top_k,
               (double)p.top_p, (double)p.temperature, i, f, q);
    }
}

/* Inputs that defeat naive pivots, n logits in [0, 8] (exact multiples of 8/n, so that equal
 * values stay equal): all equal, ascending, descending, organ-pipe (each value twice; it sends
 * median-of-three quickselect into its heapsort fallback), and spikes or dips at every
 * (n/1024)th id, where a strided sample of 1024 logits looks (so that a threshold taken from
 * one is far off: too few ids pass it, or nearly all). */
static void adversarial(float *l, int n, int pattern)
{
    int period = n / 1024;
    for (int i = 0; i < n; i++) {
        int v = pattern == 0   ? 0
                : pattern == 1 ? i
                : pattern == 2 ? n - 1 - i
                : pattern == 3 ? (i < n / 2 ? i : n - 1 - i)
                : pattern == 4 ? (i % period == 0 ? n - 1 : i % period)
                               : (i % period == 0 ? 0 : n - 1 - i % period);
        l[i] = (float)v * (8.0f / (float)n);
    }
}

static void test_adversarial(tailor_ctx *ctx, uint64_t seed)
{
    enum { N = 16384 };
    static float l[N];
    static const char *names[] = {"all equal", "ascending", "descending", "organ-pipe",
                                  "spikes at every 16th id", "dips at every 16th id"};
    static const struct {
        int k;
        float p;
    } cfg[] = {{10, 1.0f}, {1000, 1.0f}, {1000, 0.5f}, {N / 2 + 1, 0.9f}, {0, 0.5f}, {0, 1.0f}};
    for (int pat = 0; pat < 6; pat++) {
        adversarial(l, N, pat);
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            char what[128];
            snprintf(what, sizeof what, "%s, top-k %d, top-p %g", names[pat], cfg[c].k,
                     (double)cfg[c].p);
            tailor_sampler_params p = {.temperature = 1.0f, .top_k = cfg[c].k,
                                       .top_p = cfg[c].p, .seed = seed + c};
            check_draws(ctx, what, l, N, p, 40);
        }
    }
}

/* A full Gemma vocabulary (262,144) of random logits, N(0, 2), with and without ties and NaN. */
static void test_full_vocabulary(tailor_ctx *ctx, uint64_t seed)
{
    enum { V = 262144 };
    static float l[V], l2[V];
    test_rng r;
    test_rng_seed(&r, seed);
    for (int i = 0; i < V; i++)
        l[i] = 2.0f * test_rng_normal(&r);
    tailor_sampler_params p = {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .seed = seed};
    check_draws(ctx, "262144 logits, top-k 0, top-p 0.9", l, V, p, 200);
    p.top_k = 1000, p.top_p = 1.0f;
    check_draws(ctx, "262144 logits, top-k 1000", l, V, p, 200);
    p.top_k = 1000, p.top_p = 0.9f, p.temperature = 0.7f;
    check_draws(ctx, "262144 logits, top-k 1000, top-p 0.9, T 0.7", l, V, p, 50);
    p.top_k = 64, p.top_p = 0.95f, p.temperature = 1.0f; /* Gemma's generation defaults */
    check_draws(ctx, "262144 logits, top-k 64, top-p 0.95", l, V, p, 50);
    p.top_k = 0, p.top_p = 1.0f;
    check_draws(ctx, "262144 logits, top-k 0, top-p 1", l, V, p, 50);
    /* one sampler, the logits changing every draw (what it keeps of one call must not leak
     * into the next): l and l shifted by 1,000 ids with its tail negated */
    for (int i = 0; i < V; i++)
        l2[i] = i < V - 1000 ? l[i + 1000] : -l[i - (V - 1000)];
    p.top_k = 0, p.top_p = 0.9f;
    check_draws2(ctx, "two logit vectors in turn, top-k 0, top-p 0.9", l, l2, V, p, 50);
    p.top_k = 64, p.top_p = 0.95f;
    check_draws2(ctx, "two logit vectors in turn, top-k 64, top-p 0.95", l, l2, V, p, 50);

    /* the same seed, the same sequence, over the whole vocabulary */
    tailor_sampler *s1 = NULL, *s2 = NULL;
    p.top_k = 0, p.top_p = 0.9f;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, V, &s1));
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, V, &s2));
    int same = 0;
    for (int i = 0; i < 20 && s1 && s2; i++)
        same += tailor_sampler_next(s1, l) == tailor_sampler_next(s2, l);
    CHECKF(same == 20, "two samplers of one seed agreed on %d of 20 draws", same);
    tailor_sampler_destroy(s1);
    tailor_sampler_destroy(s2);

    /* ties (values on a grid of 1/4) and 1% NaN */
    for (int i = 0; i < V; i++)
        l[i] = test_rng_next(&r) % 100 == 0 ? NAN : roundf(4.0f * l[i]) / 4.0f;
    p.top_k = 0, p.top_p = 0.9f;
    check_draws(ctx, "ties and NaN, top-k 0, top-p 0.9", l, V, p, 50);
    p.top_k = 1000, p.top_p = 0.8f;
    check_draws(ctx, "ties and NaN, top-k 1000, top-p 0.8", l, V, p, 50);
    p.top_k = 64, p.top_p = 1.0f;
    check_draws(ctx, "ties and NaN, top-k 64", l, V, p, 50);
}

/* The row's best `cap` candidates the way the op "topk" leaves them: sorted in the order,
 * padded with id -1 (value 0) where fewer values are not NaN. order[n] is scratch. */
static void ref_top(const float *l, int n, int cap, int32_t *order, float *vals, int32_t *ids)
{
    int m = 0;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(l[i]))
            order[m++] = i;
    ref_logits = l;
    qsort(order, (size_t)m, sizeof *order, ref_cmp);
    for (int j = 0; j < cap; j++) {
        ids[j] = j < m ? order[j] : -1;
        vals[j] = j < m ? l[order[j]] : 0.0f;
    }
}

/* tailor_sampler_next_top over a row's 128 best candidates (TAILOR_GEMMA4_TOP_K) draws, seed for
 * seed, the very id tailor_sampler_next draws from the whole row, or says it cannot decide
 * (TAILOR_SAMPLER_UNDECIDED: the top_k-th best's ties run to the list's end) without advancing
 * its generator, and the caller's whole-row draw then equals it too: what a sampled GPU decode
 * step relies on (it downloads only the candidates, the row when they do not decide).
 * *undecided counts the draws that needed the row. */
static void check_top_matches(tailor_ctx *ctx, const char *what, const float *l, int n,
                              int32_t *order, int *undecided)
{
    enum { CAP = 128 };
    float vals[CAP];
    int32_t ids[CAP];
    ref_top(l, n, CAP, order, vals, ids);
    static const struct {
        int k;
        float p, t;
    } cfg[] = {{64, 0.95f, 1.0f}, {64, 1.0f, 1.0f}, {40, 0.9f, 0.7f}, {1, 1.0f, 1.0f},
               {2, 0.5f, 1.5f},   {17, 0.3f, 2.0f}, {64, 0.999f, 0.3f}, {127, 1.0f, 1.0f}};
    *undecided = 0;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        tailor_sampler_params p = {.temperature = cfg[c].t, .top_k = cfg[c].k, .top_p = cfg[c].p,
                                   .seed = 7 + c};
        tailor_sampler *full = NULL, *top = NULL;
        CHECK_OK(ctx, tailor_sampler_create(ctx, &p, n, &full));
        CHECK_OK(ctx, tailor_sampler_create(ctx, &p, n, &top));
        if (!full || !top) {
            tailor_sampler_destroy(full);
            tailor_sampler_destroy(top);
            return;
        }
        CHECKF(tailor_sampler_top_covers(top, CAP), "%s: top-k %d is covered by %d candidates",
               what, cfg[c].k, CAP);
        int differ = 0, distinct = 0;
        int32_t first = -1, got = -1, want = -1;
        for (int d = 0; d < 60; d++) {
            int32_t a = tailor_sampler_next(full, l), b = tailor_sampler_next_top(top, vals, ids, CAP);
            if (b == TAILOR_SAMPLER_UNDECIDED) { /* the caller's fallback: the whole row */
                ++*undecided;
                b = tailor_sampler_next(top, l);
            }
            if (a != b && differ++ == 0)
                got = b, want = a;
            distinct += d > 0 && a != first;
            if (d == 0)
                first = a;
        }
        CHECKF(differ == 0, "%s, top-k %d top-p %g T %g: %d of 60 draws differ (first: %d from "
               "the candidates, %d from the row)", what, cfg[c].k, (double)cfg[c].p,
               (double)cfg[c].t, differ, got, want);
        if (cfg[c].k >= 17 && cfg[c].p >= 0.9f && cfg[c].t >= 0.7f)
            CHECKF(distinct > 0, "%s, top-k %d: every draw was id %d (the check would not see "
                   "a draw that ignores the generator)", what, cfg[c].k, first);
        tailor_sampler_destroy(full);
        tailor_sampler_destroy(top);
    }
}

/* Ties at the top_k-th place stay, as transformers keeps them: logits 5, 4, 3, 3, 3, 0 at top-k
 * 3 keep ids 0-4 (the two tied with the third included) and never 5; and a list of candidates
 * whose ties run to its end cannot decide. */
static void test_top_k_ties(tailor_ctx *ctx)
{
    const float l[6] = {5.0f, 4.0f, 3.0f, 3.0f, 3.0f, 0.0f};
    tailor_sampler_params p = {.temperature = 100.0f, .top_k = 3, .top_p = 1.0f, .seed = 5};
    tailor_sampler *s = NULL, *t = NULL;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, 6, &s));
    int cnt[6] = {0};
    for (int i = 0; i < 2000 && s; i++) {
        int32_t id = tailor_sampler_next(s, l);
        cnt[id >= 0 && id < 6 ? id : 5]++;
    }
    CHECKF(cnt[3] > 0 && cnt[4] > 0 && cnt[5] == 0, "top-k 3 over 5, 4, 3, 3, 3, 0: ids 3 and 4 "
           "(tied with the third) drawn %d and %d times, id 5 %d times (want > 0, > 0, 0)",
           cnt[3], cnt[4], cnt[5]);
    tailor_sampler_destroy(s);

    /* the 3 best listed (3 is tied with the next): undecided, the generator untouched */
    const float v3[3] = {5.0f, 4.0f, 3.0f};
    const int32_t i3[3] = {0, 1, 2}, i3end[4] = {0, 1, 2, -1};
    const float v4[4] = {5.0f, 4.0f, 3.0f, 0.0f};
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, 6, &s));
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, 6, &t));
    if (s && t) {
        CHECK(!tailor_sampler_top_covers(s, 3) && tailor_sampler_top_covers(s, 4));
        CHECK(tailor_sampler_next_top(s, v3, i3, 3) == TAILOR_SAMPLER_UNDECIDED);
        /* four listed, the last tied with the third: still undecided */
        const float v4t[4] = {5.0f, 4.0f, 3.0f, 3.0f};
        const int32_t i4t[4] = {0, 1, 2, 3};
        CHECK(tailor_sampler_next_top(s, v4t, i4t, 4) == TAILOR_SAMPLER_UNDECIDED);
        /* a list that ends (-1) after the third decides: nothing else is left */
        int same = 1;
        for (int i = 0; i < 20; i++) {
            int32_t a = tailor_sampler_next_top(s, v4, i3end, 4);
            int32_t b = tailor_sampler_next(t, (const float[6]){5.0f, 4.0f, 3.0f, NAN, NAN, NAN});
            same &= a == b && a >= 0 && a <= 2;
        }
        CHECKF(same, "a list that ends after its third candidate draws as the row of those three "
               "(and the undecided calls before did not advance the generator)");
    }
    tailor_sampler_destroy(s);
    tailor_sampler_destroy(t);
}

static void test_top_candidates(tailor_ctx *ctx, uint64_t seed)
{
    enum { V = 262144 };
    static float l[V];
    static int32_t order[V];
    test_rng r;
    test_rng_seed(&r, seed ^ 0x70bull);
    /* logits of a peaked softmax: a few strong ones above a normal floor */
    for (int i = 0; i < V; i++)
        l[i] = 1.5f * test_rng_normal(&r);
    for (int i = 0; i < 24; i++)
        l[test_rng_next(&r) % V] = 9.0f + 0.25f * (float)(i % 5);
    int undecided = 0;
    check_top_matches(ctx, "262144 logits", l, V, order, &undecided);
    CHECKF(undecided == 0, "262144 distinct logits: %d draws undecided from 128 candidates",
           undecided);
    /* soft-capped (30 tanh(x / 30)), on a grid of 1/8 with 1% NaN: ties across the 64th place */
    for (int i = 0; i < V; i++)
        l[i] = test_rng_next(&r) % 100 == 0 ? NAN : roundf(8.0f * 30.0f * tanhf(l[i] / 30.0f)) / 8.0f;
    check_top_matches(ctx, "ties and NaN", l, V, order, &undecided);
    /* fewer values than candidates: 32 that are not NaN, so the list ends with ids of -1 */
    int values = 0;
    for (int i = 0; i < 4096; i++) {
        l[i] = i % 128 == 3 ? (float)(i % 7) * 0.5f : NAN;
        values += !isnan(l[i]);
    }
    CHECKF(values == 32, "%d values in the row of 4096 (want 32, fewer than top-k 40 and 64)",
           values);
    check_top_matches(ctx, "32 values in 4096", l, 4096, order, &undecided);
    CHECKF(undecided == 0, "a list that ends: %d draws undecided", undecided);
    /* every value tied: each top-k's ties run past any list, so every draw needs the row */
    for (int i = 0; i < 4096; i++)
        l[i] = 1.0f;
    check_top_matches(ctx, "4096 equal values", l, 4096, order, &undecided);
    CHECKF(undecided == 8 * 60, "4096 equal values: %d of %d draws undecided from 128 "
           "candidates (want all)", undecided, 8 * 60);

    tailor_sampler_params p = {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .seed = 1};
    tailor_sampler *s = NULL;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, 4096, &s));
    CHECK(s && !tailor_sampler_top_covers(s, 64)); /* top-k 0: the whole row is needed */
    if (s) { /* and a list of candidates cannot stand in for it */
        const float v3[3] = {5.0f, 4.0f, 3.0f};
        const int32_t i3[3] = {0, 1, 2};
        CHECK(tailor_sampler_next_top(s, v3, i3, 3) == TAILOR_SAMPLER_UNDECIDED);
    }
    tailor_sampler_destroy(s);
    p.top_k = 65;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, 4096, &s));
    CHECK(s && !tailor_sampler_top_covers(s, 65) && tailor_sampler_top_covers(s, 128));
    tailor_sampler_destroy(s);
    p.greedy = 1;
    CHECK_OK(ctx, tailor_sampler_create(ctx, &p, 4096, &s));
    float v2[2] = {3.0f, 3.0f};
    int32_t i2[2] = {9, 12}, none[2] = {-1, -1};
    CHECK(s && tailor_sampler_top_covers(s, 1) && tailor_sampler_next_top(s, v2, i2, 2) == 9 &&
          tailor_sampler_next_top(s, v2, none, 2) == 0);
    tailor_sampler_destroy(s);
}

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

    /* six tokens with ties and a NaN: frequencies follow the reference for several settings */
    float six[6] = {1.0f, 2.0f, NAN, 2.0f, 0.5f, 1.0f};
    static const struct {
        int k;
        float p, t;
    } fq[] = {{0, 1.0f, 1.0f}, {2, 1.0f, 1.0f}, {3, 0.8f, 1.5f}, {0, 0.6f, 1.0f},
              {4, 0.9f, 0.7f}, {1, 1.0f, 1.0f}, {5, 0.99f, 2.0f}, {0, 0.3f, 1.0f}};
    for (size_t i = 0; i < sizeof fq / sizeof fq[0]; i++) {
        tailor_sampler_params q = {.temperature = fq[i].t, .top_k = fq[i].k, .top_p = fq[i].p,
                                   .seed = seed + i};
        check_frequencies(ctx, six, 6, q, 20000);
        check_draws(ctx, "six tokens", six, 6, q, 200);
    }
    /* every logit NaN: id 0, as before */
    float nans[3] = {NAN, NAN, NAN};
    CHECK_OK(ctx, tailor_sampler_create(ctx, &fp, 3, &s));
    CHECK(s && tailor_sampler_next(s, nans) == 0);
    tailor_sampler_destroy(s);
    /* infinite logits, the limits of the softmax: the +inf ones share all the mass; where all
     * are -inf, they share it evenly */
    float pinf[5] = {INFINITY, 1.0f, INFINITY, NAN, -INFINITY}, ninf[3] = {-INFINITY, NAN,
                                                                          -INFINITY};
    check_frequencies(ctx, pinf, 5, fp, 4000);
    check_frequencies(ctx, ninf, 3, fp, 4000);

    test_full_vocabulary(ctx, seed);
    test_adversarial(ctx, seed);
    test_top_candidates(ctx, seed);
    test_top_k_ties(ctx);
    tailor_ctx_destroy(ctx);
    return test_finish("test_gemma4_sampler");
}
