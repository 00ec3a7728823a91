/* sampler.h — picks the next token from logits: greedy, or temperature / top-k / top-p with a
 * seeded generator (same seed, same logits: same tokens), in expected O(vocab) time a token. */
#ifndef TAILOR_SAMPLER_H
#define TAILOR_SAMPLER_H

#include <stdint.h>

#include "tailor.h"

typedef struct tailor_sampler_params {
    int greedy;        /* 1: argmax (lowest id on ties); the rest is ignored */
    float temperature; /* > 0; logits are divided by it */
    int top_k;         /* keep the k first tokens in the order (tailor_sampler_next) and every
                        * token tied with the k-th, as transformers does; 0 = all */
    float top_p;       /* then the shortest prefix of those, in the order, whose probability
                        * (softmax over the top-k set) reaches top_p; 1 = all */
    uint64_t seed;     /* generator seed */
} tailor_sampler_params;

typedef struct tailor_sampler tailor_sampler;

/* Creates a sampler for `vocab` logits. TAILOR_ERR_MISUSE names a bad parameter (temperature
 * <= 0, top_p outside (0, 1], negative top_k, vocab < 1). All scratch (about 8 bytes per
 * vocabulary entry) is allocated here, once; free with tailor_sampler_destroy. */
tailor_status tailor_sampler_create(tailor_ctx *ctx, const tailor_sampler_params *p, int vocab,
                                    tailor_sampler **out);

/* Frees the sampler; NULL is fine. */
void tailor_sampler_destroy(tailor_sampler *s);

/* The next token for logits[vocab] (not modified). Candidates are ordered larger logit first,
 * lower id first among equals; a NaN logit is never one (all NaN: 0). The distribution is
 * transformers' warpers in turn: the top_k first candidates and those whose logit equals the
 * top_k-th's (transformers keeps every logit not below the top_k-th largest); weights
 * exp((logit - max) / temperature) over them (+inf logits share all the mass, and where all are
 * -inf, evenly); the shortest prefix of those whose weight reaches top_p of their sum (all of
 * them where rounding leaves it unreached); renormalized. The draw is canonical: r = uniform *
 * the kept weight, then the kept ids in ascending id order subtract their weights, and the id
 * where r goes below 0 comes out (the last kept id where rounding leaves r >= 0), so that the id
 * drawn from a kept set does not depend on the order the selections left it in. Expected
 * O(vocab) time (selections in place; a heapsort fallback bounds inputs that defeat the pivots
 * to O(vocab log vocab)). Allocates nothing. One sampler serves one thread at a time. */
int32_t tailor_sampler_next(tailor_sampler *s, const float *logits);

/* Whether tailor_sampler_next_top may stand in for tailor_sampler_next given a row's n best
 * candidates: greedy, or 1 <= top_k < n (and top_k < 1024). It decides unless the top_k-th
 * best's ties run to the end of the list (TAILOR_SAMPLER_UNDECIDED). */
int tailor_sampler_top_covers(const tailor_sampler *s, int n);

/* What tailor_sampler_next_top returns when its candidates cannot decide: the top_k-th best's
 * ties run to the list's end (more may follow), or they make more than 1024 candidates, or no
 * top_k bounds the candidates. The generator has not advanced; call tailor_sampler_next with the whole row. */
#define TAILOR_SAMPLER_UNDECIDED (-1)

/* The id tailor_sampler_next would draw from the whole row (same seed, same state: the very
 * same id, and the generator advances alike), given only the row's n best candidates in the
 * order above — vals[i] the logit of ids[i], best first, as the op "topk" leaves them; an id of
 * -1 (fewer values than n that are not NaN) ends the list — or TAILOR_SAMPLER_UNDECIDED. Both
 * entry points hand the same candidates, sorted in the order, to the same later stages. A list
 * that starts with -1 gives 0 (a row of NaN). Allocates nothing. */
int32_t tailor_sampler_next_top(tailor_sampler *s, const float *vals, const int32_t *ids, int n);

/* Index of the largest of logits[0..n) (the lowest index among equals; NaN never wins). */
int32_t tailor_argmax(const float *logits, int n);

#endif
