/* sampler.c — greedy and temperature / top-k / top-p sampling with a seeded xorshift64*. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

struct tailor_sampler {
    tailor_sampler_params p;
    int vocab;
    uint64_t state;
    int32_t *idx; /* [vocab] candidate ids, sorted by logit */
    float *prob;  /* [vocab] */
};

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static double next_uniform(tailor_sampler *s) /* [0, 1) */
{
    s->state ^= s->state >> 12;
    s->state ^= s->state << 25;
    s->state ^= s->state >> 27;
    uint64_t r = s->state * 0x2545F4914F6CDD1Dull;
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

int32_t tailor_argmax(const float *logits, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best] || (logits[best] != logits[best] && logits[i] == logits[i]))
            best = i;
    return best;
}

tailor_status tailor_sampler_create(tailor_ctx *ctx, const tailor_sampler_params *p, int vocab,
                                    tailor_sampler **out)
{
    *out = NULL;
    if (!p || vocab < 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "sampler: vocabulary size %d is not "
                                                        "positive", vocab);
    if (!p->greedy) {
        if (!(p->temperature > 0))
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "sampler: temperature %g must be above 0 (use greedy for 0)",
                                    (double)p->temperature);
        if (!(p->top_p > 0 && p->top_p <= 1))
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "sampler: top_p %g must lie in (0, 1]", (double)p->top_p);
        if (p->top_k < 0)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "sampler: top_k %d is negative",
                                    p->top_k);
    }
    tailor_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->idx = malloc((size_t)vocab * sizeof *s->idx);
        s->prob = malloc((size_t)vocab * sizeof *s->prob);
    }
    if (!s || !s->idx || !s->prob) {
        tailor_sampler_destroy(s);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "sampler: out of memory");
    }
    s->p = *p;
    s->vocab = vocab;
    s->state = splitmix64(p->seed) | 1u;
    *out = s;
    return TAILOR_OK;
}

void tailor_sampler_destroy(tailor_sampler *s)
{
    if (!s)
        return;
    free(s->idx);
    free(s->prob);
    free(s);
}

/* Order of candidates: larger logit first, lower id first among equals (so the result does not
 * depend on the algorithm). */
static int before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static int cmp_desc(const void *a, const void *b, void *logits)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const float *l = logits;
    return before(l, x, y) ? -1 : before(l, y, x) ? 1 : 0;
}

/* Leaves the k best of idx[0..m) in idx[0..k), best first. */
static void select_top_k(const float *l, int32_t *idx, int m, int k)
{
    if (k > 256) {
        qsort_r(idx, (size_t)m, sizeof *idx, cmp_desc, (void *)l);
        return;
    }
    int have = 0; /* idx[0..have) sorted best first: insertion keeps the best k seen */
    for (int i = 0; i < m; i++) {
        int32_t c = idx[i];
        if (have == k && !before(l, c, idx[k - 1]))
            continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && before(l, c, idx[j - 1])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = c;
    }
}

int32_t tailor_sampler_next(tailor_sampler *s, const float *logits)
{
    int n = s->vocab;
    if (s->p.greedy)
        return tailor_argmax(logits, n);
    int k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (logits[i] == logits[i]) /* NaN never sampled */
            s->idx[m++] = i;
    if (m == 0)
        return 0;
    if (k > m)
        k = m;
    select_top_k(logits, s->idx, m, k);
    float inv_t = 1.0f / s->p.temperature;
    float mx = logits[s->idx[0]];
    double sum = 0;
    for (int i = 0; i < k; i++) {
        s->prob[i] = expf((logits[s->idx[i]] - mx) * inv_t);
        sum += s->prob[i];
    }
    /* top-p: smallest prefix whose mass reaches top_p */
    int keep = k;
    if (s->p.top_p < 1) {
        double acc = 0;
        for (int i = 0; i < k; i++) {
            acc += s->prob[i] / sum;
            if (acc >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double kept = 0;
    for (int i = 0; i < keep; i++)
        kept += s->prob[i];
    double r = next_uniform(s) * kept;
    for (int i = 0; i < keep; i++) {
        r -= s->prob[i];
        if (r < 0)
            return s->idx[i];
    }
    return s->idx[keep - 1];
}
