/* bench_sampler.c — `tailor bench sampler`: microseconds per temperature / top-k / top-p draw on
 * one core, the draws checked against a sorted reference first. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "sampler.h"

static const char bench_usage[] =
    "usage: tailor bench sampler [--vocab N] [--top-k K] [--top-p P] [--temperature T] [--json]\n"
    "  --vocab N          logits per draw (default 262144, Gemma 4's vocabulary)\n"
    "  --top-k K          keep the K most likely tokens; 0 = all (default 0)\n"
    "  --top-p P          then the smallest set reaching probability P, in (0, 1] (default 1)\n"
    "  --temperature T    above 0 (default 1)\n"
    "  --json             one JSON object instead of a line of text\n"
    "Logits are N(0, 2), seeded, in sets of 64 MiB in all that the draws take in turn, so that\n"
    "they come from memory as after a forward step; the median of 7 timed runs is reported.\n"
    "With --top-k from 1 to 127, draws from each row's 128 best alone (what a sampled GPU step\n"
    "downloads) are timed too.\n";

enum { RUNS = 7, CHECKED = 100 };

typedef struct bench_opts {
    int vocab, top_k, json;
    float top_p, temperature;
} bench_opts;

static int parse_bench_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longopts[] = {
        {"vocab", required_argument, NULL, 'v'},       {"top-k", required_argument, NULL, 'k'},
        {"top-p", required_argument, NULL, 'p'},       {"temperature", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},              {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    double v;
    optind = 0; /* `tailor bench` may have run getopt already: start afresh at argv[1] */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            if (cli_parse_int("bench sampler", "--vocab", optarg, 1, 1 << 24, &o->vocab))
                return 2;
            break;
        case 'k':
            if (cli_parse_int("bench sampler", "--top-k", optarg, 0, 1 << 24, &o->top_k))
                return 2;
            break;
        case 'p':
            if (cli_parse_number("bench sampler", "--top-p", optarg, 0, 1, "a number in (0, 1]",
                                 &v))
                return 2;
            o->top_p = (float)v;
            break;
        case 't':
            if (cli_parse_number("bench sampler", "--temperature", optarg, 0, HUGE_VAL,
                                 "a number above 0", &v))
                return 2;
            o->temperature = (float)v;
            break;
        case 'j': o->json = 1; break;
        case 'h': fputs(bench_usage, stdout); return 0;
        default: return cli_bad_flag("bench sampler", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench sampler", "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* Larger logit first, lower id first among equals: the sampler's order (sampler.h). */
static int before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static int cmp_order(const void *a, const void *b, void *logits)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return before(logits, x, y) ? -1 : before(logits, y, x) ? 1 : 0;
}

/* The ids of l[n] (no NaN here) sorted in the sampler's order (malloc'd), or NULL. */
static int32_t *sorted_ids(const float *l, int n)
{
    int32_t *order = malloc((size_t)n * sizeof *order);
    if (!order)
        return NULL;
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, cmp_order, (void *)l);
    return order;
}

/* The kept set of sampler.h for l[n] (no NaN here), the slow way: sort, the first top_k and
 * those tied with the top_k-th, the shortest prefix whose softmax weight reaches top_p. Returns
 * its worst id, -1 for all ids; -2 when out of memory. */
static int32_t reference_boundary(const float *l, int n, const tailor_sampler_params *p)
{
    int32_t *order = sorted_ids(l, n);
    if (!order)
        return -2;
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    while (k < n && l[order[k]] == l[order[k - 1]])
        k++;
    int keep = k;
    double sum = 0, acc = 0;
    for (int i = 0; i < k; i++)
        sum += expf((l[order[i]] - l[order[0]]) / p->temperature);
    for (int i = 0; i < k && p->top_p < 1; i++) {
        acc += expf((l[order[i]] - l[order[0]]) / p->temperature);
        if (acc >= (double)p->top_p * sum) {
            keep = i + 1;
            break;
        }
    }
    int32_t b = keep < n ? order[keep - 1] : -1;
    free(order);
    return b;
}

/* CHECKED draws from the first logit set, each in the reference's kept set (or that the
 * reference ran out of memory: -1). Returns the number outside. */
static int check_draws(tailor_sampler *s, const float *l, int n, const tailor_sampler_params *p)
{
    int32_t b = reference_boundary(l, n, p);
    if (b == -2)
        return -1;
    int outside = 0;
    for (int i = 0; i < CHECKED; i++) {
        int32_t id = tailor_sampler_next(s, l);
        outside += id < 0 || id >= n || (b >= 0 && id != b && !before(l, id, b));
    }
    return outside;
}

/* Seeded N(0, 2) logits (Box-Muller on an xorshift64*). */
static void fill_logits(float *l, size_t n)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        double u[2];
        for (int j = 0; j < 2; j++) {
            x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
            u[j] = (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
        }
        l[i] = (float)(2.0 * sqrt(-2.0 * log(1.0 - u[0])) * cos(6.283185307179586 * u[1]));
    }
}

/* Candidates a sampled GPU step downloads (the op topk): each set's TOP best, in the order. */
enum { TOP = 128 }; /* TAILOR_GEMMA4_TOP_K */
typedef struct top_sets {
    float *vals;  /* [sets][TOP] */
    int32_t *ids; /* [sets][TOP] */
} top_sets;

/* Times RUNS runs of `draws` draws over the sets in turn into us[RUNS] (per draw): from the
 * whole rows, or (top not NULL) from their candidates with tailor_sampler_next_top. */
static void time_draws(tailor_sampler *s, const float *logits, const top_sets *top, size_t vocab,
                       int sets, int draws, double *us)
{
    int next = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = cli_now_s();
        for (int d = 0; d < draws; d++, next = (next + 1) % sets)
            (void)(top ? tailor_sampler_next_top(s, top->vals + (size_t)next * TOP,
                                                 top->ids + (size_t)next * TOP, TOP)
                       : tailor_sampler_next(s, logits + (size_t)next * vocab));
        us[r] = (cli_now_s() - t0) / draws * 1e6;
    }
}

/* Each set's candidates, from a sort of the set (0, or -1 when out of memory). */
static int make_top_sets(const float *logits, size_t vocab, int sets, top_sets *t)
{
    t->vals = malloc((size_t)sets * TOP * sizeof *t->vals);
    t->ids = malloc((size_t)sets * TOP * sizeof *t->ids);
    for (int k = 0; k < sets && t->vals && t->ids; k++) {
        const float *l = logits + (size_t)k * vocab;
        int32_t *order = sorted_ids(l, (int)vocab);
        if (!order)
            return -1;
        for (int j = 0; j < TOP; j++) {
            t->ids[(size_t)k * TOP + j] = j < (int)vocab ? order[j] : -1;
            t->vals[(size_t)k * TOP + j] = j < (int)vocab ? l[order[j]] : 0.0f;
        }
        free(order);
    }
    return t->vals && t->ids ? 0 : -1;
}

/* Calibrates the draws of a run (about 0.1 s), times RUNS runs and prints the median. */
static void time_and_print(tailor_sampler *s, const float *logits, int sets, const bench_opts *o)
{
    size_t vocab = (size_t)o->vocab;
    double t0 = cli_now_s();
    for (int i = 0; i < 3; i++)
        (void)tailor_sampler_next(s, logits + (size_t)(i % sets) * vocab);
    double per = (cli_now_s() - t0) / 3;
    int draws = per > 0 ? (int)fmin(fmax(0.1 / per, 5), 1e6) : 1000;
    double us[RUNS], top_us[RUNS] = {0};
    time_draws(s, logits, NULL, vocab, sets, draws, us);
    qsort(us, RUNS, sizeof *us, cli_cmp_double);
    top_sets top = {0};
    int with_top = tailor_sampler_top_covers(s, TOP) && make_top_sets(logits, vocab, sets, &top) == 0;
    if (with_top) {
        time_draws(s, logits, &top, vocab, sets, draws, top_us);
        qsort(top_us, RUNS, sizeof *top_us, cli_cmp_double);
    }
    free(top.vals);
    free(top.ids);
    if (o->json)
        printf("{\"bench\":\"sampler\",\"vocab\":%d,\"top_k\":%d,\"top_p\":%g,\"temperature\":%g,"
               "\"us_per_draw\":%.2f,\"best_us\":%.2f,\"runs\":%d,\"draws_per_run\":%d,"
               "\"logit_sets\":%d,\"checked\":%d,\"top_us_per_draw\":%.2f}\n",
               o->vocab, o->top_k, (double)o->top_p, (double)o->temperature, us[RUNS / 2], us[0],
               RUNS, draws, sets, CHECKED, with_top ? top_us[RUNS / 2] : -1.0);
    else
        printf("sampler, vocab %d, top-k %d, top-p %g, temperature %g: %.1f us per draw (median "
               "of %d runs of %d draws; best %.1f us; logits from %d sets of %.2f MiB; %d draws "
               "checked against a sorted reference)\n",
               o->vocab, o->top_k, (double)o->top_p, (double)o->temperature, us[RUNS / 2], RUNS,
               draws, us[0], sets, (double)(vocab * sizeof(float)) / (1 << 20), CHECKED);
    if (with_top && !o->json)
        printf("  from each row's %d best (tailor_sampler_next_top, as a sampled GPU step): %.2f us "
               "per draw (median)\n", TOP, top_us[RUNS / 2]);
}

int bench_sampler(int argc, char **argv)
{
    bench_opts o = {.vocab = 262144, .top_k = 0, .top_p = 1.0f, .temperature = 1.0f};
    int rc = parse_bench_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t vocab = (size_t)o.vocab;
    int sets = (int)((64u << 20) / (vocab * sizeof(float)));
    sets = sets < 2 ? 2 : sets;
    tailor_sampler_params p = {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p,
                               .seed = 1};
    tailor_ctx *ctx = cli_ctx();
    tailor_sampler *s = NULL;
    float *logits = malloc((size_t)sets * vocab * sizeof *logits);
    tailor_status st = logits ? tailor_sampler_create(ctx, &p, o.vocab, &s)
                              : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "bench sampler: out of "
                                                 "memory for %d sets of logits", sets);
    if (st == TAILOR_OK) {
        fill_logits(logits, (size_t)sets * vocab);
        int outside = check_draws(s, logits, o.vocab, &p);
        if (outside < 0)
            st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "bench sampler: out of memory for the "
                                  "reference");
        else if (outside > 0)
            st = tailor_set_error(ctx, TAILOR_ERR_VERIFY, "bench sampler: %d of %d draws fell "
                                  "outside the kept set of a sorted reference", outside, CHECKED);
    }
    rc = st == TAILOR_OK ? 0 : cli_fail(ctx, st);
    if (st == TAILOR_OK)
        time_and_print(s, logits, sets, &o);
    tailor_sampler_destroy(s);
    free(logits);
    tailor_ctx_destroy(ctx);
    return rc;
}
