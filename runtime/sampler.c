/* sampler.c — greedy and temperature / top-k / top-p sampling with a seeded xorshift64*, in
 * expected O(vocab) time per token: selections in place (quickselect, heapsort as the fallback)
 * instead of a sort, and every buffer allocated at creation. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

enum {
    SAMPLE = 1024,    /* logits sampled to pick a small top-k's threshold */
    SORTED_TOP = 1024, /* a top-k set of at most this many is sorted in the order (see next) */
    SMALL_DRAW = 64    /* draw() sorts this many kept ids or fewer instead of a bitmap walk */
};

struct tailor_sampler {
    tailor_sampler_params p;
    int vocab;
    uint64_t state;
    int32_t *idx;    /* [vocab] candidate ids (logits that are not NaN), partitioned in place */
    float *w;        /* [vocab] weight exp((logit - max) / temperature) by token id: this call's
                      * for the top-k set, stale elsewhere (zeroed at creation) */
    uint64_t *kept;  /* [vocab / 64 + 1] a bit per id: the kept set while drawing, else zero */
    int32_t *sample; /* [SAMPLE] ids of a strided sample of the logits (small top-k) */
    float *top;      /* [vocab] the candidates' logits by id (tailor_sampler_next_top): this
                      * call's for its candidates, stale elsewhere (zeroed at creation) */
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
        s->w = calloc((size_t)vocab, sizeof *s->w);
        s->kept = calloc((size_t)vocab / 64 + 1, sizeof *s->kept);
        s->sample = malloc(SAMPLE * sizeof *s->sample);
        s->top = calloc((size_t)vocab, sizeof *s->top);
    }
    if (!s || !s->idx || !s->w || !s->kept || !s->sample || !s->top) {
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
    free(s->w);
    free(s->kept);
    free(s->sample);
    free(s->top);
    free(s);
}

/* Order of candidates: larger logit first, lower id first among equals, a strict total order
 * (so the result does not depend on the algorithm, and partitions cannot degenerate on equal
 * logits). Neither id may have a NaN logit. */
static int before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void swap_ids(int32_t *idx, int a, int b)
{
    int32_t t = idx[a];
    idx[a] = idx[b];
    idx[b] = t;
}

/* Partition rounds allowed over n candidates before the rest is heapsorted: 2 log2(n) + 8, far
 * above what median-of-three pivots need on any input but a crafted one. */
static int depth_limit(int n)
{
    int rounds = 8;
    for (; n > 1; n >>= 1)
        rounds += 2;
    return rounds;
}

/* Sorts idx[a], idx[b], idx[c] in the order, then moves the median to idx[c] (the pivot slot). */
static void median_to_last(const float *l, int32_t *idx, int a, int b, int c)
{
    if (before(l, idx[b], idx[a]))
        swap_ids(idx, a, b);
    if (before(l, idx[c], idx[b]))
        swap_ids(idx, b, c);
    if (before(l, idx[b], idx[a]))
        swap_ids(idx, a, b);
    swap_ids(idx, b, c);
}

/* Lomuto partition of idx[lo..hi) (hi - lo >= 1) around the median of its first, middle and
 * last ids; returns p with idx[lo..p) before idx[p] and idx[p+1..hi) after it. The inner loop
 * has no branch to mispredict (half the comparisons go each way): the swap is unconditional,
 * which only permutes the ids not before the pivot, and the order is tested with bitwise ops. */
static int partition(const float *l, int32_t *idx, int lo, int hi)
{
    median_to_last(l, idx, lo, lo + (hi - lo) / 2, hi - 1);
    int32_t pivot = idx[hi - 1];
    float pl = l[pivot];
    int p = lo;
    for (int i = lo; i < hi - 1; i++) {
        int32_t x = idx[i];
        float lx = l[x];
        int better = (lx > pl) | ((lx == pl) & (x < pivot)); /* before(l, x, pivot) */
        idx[i] = idx[p];
        idx[p] = x;
        p += better;
    }
    swap_ids(idx, p, hi - 1);
    return p;
}

/* Restores the heap below `root` in idx[0..n): each parent after (worse than) its children. */
static void sift_down(const float *l, int32_t *idx, int root, int n)
{
    for (;;) {
        int c = 2 * root + 1;
        if (c >= n)
            return;
        if (c + 1 < n && before(l, idx[c], idx[c + 1]))
            c++;
        if (!before(l, idx[root], idx[c]))
            return;
        swap_ids(idx, root, c);
        root = c;
    }
}

/* Sorts idx[0..n) best first, in place: the fallback when partitions keep coming out lopsided
 * (O(n log n) whatever the input, and no memory). */
static void heap_sort(const float *l, int32_t *idx, int n)
{
    for (int i = n / 2 - 1; i >= 0; i--)
        sift_down(l, idx, i, n);
    for (int end = n - 1; end > 0; end--) {
        swap_ids(idx, 0, end);
        sift_down(l, idx, 0, end);
    }
}

/* Reorders idx[0..m) so that idx[0..k) are the k first in the order (in no particular order):
 * quickselect, expected O(m). */
static void select_top_k(const float *l, int32_t *idx, int m, int k)
{
    int lo = 0, hi = m, rounds = depth_limit(m); /* the cut at k lies in [lo, hi] */
    while (lo < k && k < hi) {
        if (rounds-- == 0) {
            heap_sort(l, idx + lo, hi - lo);
            return;
        }
        int p = partition(l, idx, lo, hi);
        if (p < k)
            lo = p + 1;
        else
            hi = p;
    }
}

/* The last of idx[0..n) (n >= 1) in the order. */
static int32_t worst_of(const float *l, const int32_t *idx, int n)
{
    int32_t b = idx[0];
    for (int i = 1; i < n; i++)
        if (before(l, b, idx[i]))
            b = idx[i];
    return b;
}

/* Gathers the ids whose logit is not NaN into idx; returns their count and *mx their largest
 * logit. */
static int gather(const float *l, int n, int32_t *idx, float *mx)
{
    int m = 0;
    float best = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (l[i] == l[i]) {
            idx[m++] = i;
            best = l[i] > best ? l[i] : best;
        }
    *mx = best;
    return m;
}

/* A small top-k's candidates without the whole vocabulary: the ids whose logit is at least a
 * threshold t's, t the r-th best of a strided sample of SAMPLE logits with r = 2 k SAMPLE /
 * vocab + 8 (so about 2k + 8 vocab / SAMPLE ids are expected to pass, and fewer than k only
 * where the sample misrepresents the logits). Every id tied with the k-th best passes with it
 * (its logit is at least t's when k ids are). Returns their count (>= k) with *mx their largest
 * logit, or 0 where this does not apply (small vocabulary, large k) or fewer than k passed: then
 * gather them all. Correct on any input; the sample only decides how much the quickselect sees. */
static int gather_small_k(tailor_sampler *s, const float *l, int k, float *mx)
{
    int n = s->vocab, step = n / SAMPLE, ns = 0;
    if (step < 16)
        return 0;
    for (int j = 0; j < SAMPLE; j++)
        if (l[j * step] == l[j * step])
            s->sample[ns++] = j * step;
    long r = 2L * k * SAMPLE / n + 8;
    if (r * 4 > ns)
        return 0;
    select_top_k(l, s->sample, ns, (int)r);
    int32_t t = worst_of(l, s->sample, (int)r);
    float lt = l[t], best = lt;
    int m = 0;
    for (int32_t i = 0; i < n; i++)
        if (l[i] >= lt) { /* NaN fails */
            s->idx[m++] = i;
            best = l[i] > best ? l[i] : best;
        }
    *mx = best;
    return m >= k ? m : 0;
}

/* After select_top_k(l, idx, m, k): moves the ids of idx[k..m) whose logit equals the k-th
 * best's next to idx[0..k) and returns the new count, so that idx[0..count) is the top-k set as
 * transformers keeps it (every logit not below the k-th largest: ties at the cut stay). */
static int take_ties(const float *l, int32_t *idx, int m, int k)
{
    float lt = l[worst_of(l, idx, k)];
    for (int i = k; i < m; i++)
        if (l[idx[i]] == lt)
            swap_ids(idx, i, k++);
    return k;
}

/* The weight of idx[lo..hi) (four sums, so that the additions do not wait on each other). */
static double mass_of(const float *w, const int32_t *idx, int lo, int hi)
{
    double m[4] = {0, 0, 0, 0};
    int i = lo;
    for (; i + 4 <= hi; i += 4)
        for (int j = 0; j < 4; j++)
            m[j] += w[idx[i + j]];
    for (; i < hi; i++)
        m[0] += w[idx[i]];
    return (m[0] + m[1]) + (m[2] + m[3]);
}

/* Top-p over the candidates idx[0..k) (weights w by id): reorders them so that idx[0..K) is the
 * smallest prefix of the order whose weight reaches target, and returns K; k when rounding
 * leaves the target unreached. A quickselect on mass, expected O(k). */
static int select_mass(const float *l, const float *w, int32_t *idx, int k, double target)
{
    int lo = 0, hi = k, rounds = depth_limit(k);
    double acc = 0; /* weight of idx[0..lo), below target; the boundary lies in [lo, hi) */
    while (lo < hi) {
        if (rounds-- == 0) {
            heap_sort(l, idx + lo, hi - lo);
            for (int i = lo; i < hi; i++) {
                acc += w[idx[i]];
                if (acc >= target)
                    return i + 1;
            }
            break;
        }
        int p = partition(l, idx, lo, hi);
        double better = mass_of(w, idx, lo, p), with_pivot = acc + better + w[idx[p]];
        if (acc + better >= target)
            hi = p;
        else if (with_pivot >= target)
            return p + 1;
        else {
            acc = with_pivot;
            lo = p + 1;
        }
    }
    /* not reached: either never (keep all k), or the sums inside [lo, hi) fell an ulp short of
     * the one that bounded it at idx[hi]: keep through idx[hi] */
    return hi < k ? hi + 1 : k;
}

/* Sets w[id] for the k ids of idx and returns their sum. The largest logit weighs exactly 1
 * (which also keeps infinite logits from making NaN weights). */
static double weigh(const float *l, const int32_t *idx, int k, float mx, float temperature,
                    float *w)
{
    double sum = 0;
    for (int i = 0; i < k; i++) {
        int32_t id = idx[i];
        float x = l[id] == mx ? 1.0f : expf((l[id] - mx) / temperature);
        w[id] = x;
        sum += x;
    }
    return sum;
}

/* The kept id (a bit of `kept`) at which subtracting their weights in ascending id order takes
 * r below 0; the last kept id when rounding leaves r >= 0. */
static int32_t pick(const uint64_t *kept, int words, const float *w, double r)
{
    int32_t id = 0;
    for (int j = 0; j < words; j++)
        for (uint64_t b = kept[j]; b; b &= b - 1) {
            id = j * 64 + __builtin_ctzll(b);
            r -= w[id];
            if (r < 0)
                return id;
        }
    return id;
}

/* draw() for keep <= SMALL_DRAW ids: the same sums in the same ascending id order, from the
 * ids sorted in place of a walk over the whole bitmap (O(keep^2) instead of O(vocab / 64)). */
static int32_t draw_few(tailor_sampler *s, int keep)
{
    int32_t ids[SMALL_DRAW];
    for (int i = 0; i < keep; i++) { /* insertion sort, ascending */
        int32_t id = s->idx[i];
        int j = i;
        for (; j > 0 && ids[j - 1] > id; j--)
            ids[j] = ids[j - 1];
        ids[j] = id;
    }
    double total = 0;
    for (int i = 0; i < keep; i++)
        total += s->w[ids[i]];
    double r = next_uniform(s) * total;
    for (int i = 0; i < keep; i++) {
        r -= s->w[ids[i]];
        if (r < 0)
            return ids[i];
    }
    return ids[keep - 1];
}

/* Draws from the kept ids idx[0..keep) in ascending id order, which makes the id for a given
 * seed canonical (whatever order the selections left them in): r = uniform * their weight
 * summed in id order, then pick(). The bitmap makes that O(keep + vocab / 64). */
static int32_t draw(tailor_sampler *s, int keep)
{
    if (keep <= SMALL_DRAW)
        return draw_few(s, keep);
    int words = s->vocab / 64 + 1;
    for (int i = 0; i < keep; i++)
        s->kept[s->idx[i] >> 6] |= 1ull << (s->idx[i] & 63);
    double total = 0;
    for (int j = 0; j < words; j++)
        for (uint64_t b = s->kept[j]; b; b &= b - 1)
            total += s->w[j * 64 + __builtin_ctzll(b)];
    int32_t id = pick(s->kept, words, s->w, next_uniform(s) * total);
    for (int i = 0; i < keep; i++)
        s->kept[s->idx[i] >> 6] = 0;
    return id;
}

/* The stages after the top-k selection, over the k candidates idx[0..k) (k >= 1; l by id, mx
 * the largest of them): weights, top-p, the draw. Both entry points end here with the same
 * candidates in the same order, so they draw the same id. */
static int32_t draw_from_top(tailor_sampler *s, const float *l, int k, float mx)
{
    double sum = weigh(l, s->idx, k, mx, s->p.temperature, s->w);
    int keep = k;
    if (s->p.top_p < 1)
        keep = select_mass(l, s->w, s->idx, k, (double)s->p.top_p * sum);
    return draw(s, keep);
}

int32_t tailor_sampler_next(tailor_sampler *s, const float *logits)
{
    if (s->p.greedy)
        return tailor_argmax(logits, s->vocab);
    float mx = 0;
    int k = s->p.top_k, m = k > 0 ? gather_small_k(s, logits, k, &mx) : 0;
    if (m == 0)
        m = gather(logits, s->vocab, s->idx, &mx);
    if (m == 0)
        return 0; /* every logit NaN */
    if (k <= 0 || k > m)
        k = m;
    if (k < m) {
        select_top_k(logits, s->idx, m, k);
        k = take_ties(logits, s->idx, m, k);
    }
    /* a small top-k set in the order, as tailor_sampler_next_top receives it: top-p's partial
     * sums (in double, of float weights: exact nearly always, but not by construction) then add
     * the same weights in the same order on both paths (O(k log k), k <= SORTED_TOP) */
    if (s->p.top_k > 0 && k <= SORTED_TOP)
        heap_sort(logits, s->idx, k);
    return draw_from_top(s, logits, k, mx);
}

int tailor_sampler_top_covers(const tailor_sampler *s, int n)
{
    return s->p.greedy || (s->p.top_k >= 1 && s->p.top_k < n && s->p.top_k < SORTED_TOP);
}

/* Whether candidate i of a top list is one: a valid id (-1 ends the list). */
static int listed(const tailor_sampler *s, const int32_t *ids, int i)
{
    return ids[i] >= 0 && ids[i] < s->vocab;
}

int32_t tailor_sampler_next_top(tailor_sampler *s, const float *vals, const int32_t *ids, int n)
{
    if (s->p.greedy)
        return n > 0 && listed(s, ids, 0) ? ids[0] : 0;
    /* the first top_k, then the k-th best's ties (take_ties): the list is sorted, so they
     * follow it */
    int top_k = s->p.top_k, k = 0;
    if (top_k < 1)
        return TAILOR_SAMPLER_UNDECIDED; /* the whole vocabulary: no list of the best decides */
    for (; k < n && listed(s, ids, k) && (k < top_k || vals[k] == vals[top_k - 1]); k++) {
        s->idx[k] = ids[k];
        s->top[ids[k]] = vals[k];
    }
    if (k == 0)
        return 0; /* every logit NaN */
    if (k >= top_k && (k == n || k > SORTED_TOP))
        return TAILOR_SAMPLER_UNDECIDED; /* ties may run past the list */
    return draw_from_top(s, s->top, k, vals[0]);
}
