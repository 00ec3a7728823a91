/* sampler.h — picks the next token from logits: greedy, or temperature / top-k / top-p with a
 * seeded generator (same seed, same logits: same tokens). */
#ifndef TAILOR_SAMPLER_H
#define TAILOR_SAMPLER_H

#include <stdint.h>

#include "tailor.h"

typedef struct tailor_sampler_params {
    int greedy;        /* 1: argmax (lowest id on ties); the rest is ignored */
    float temperature; /* > 0; logits are divided by it */
    int top_k;         /* keep the k most likely tokens; 0 = all */
    float top_p;       /* keep the smallest set whose probability reaches top_p; 1 = all */
    uint64_t seed;     /* generator seed */
} tailor_sampler_params;

typedef struct tailor_sampler tailor_sampler;

/* Creates a sampler for `vocab` logits. TAILOR_ERR_MISUSE names a bad parameter (temperature
 * <= 0, top_p outside (0, 1], negative top_k, vocab < 1). Scratch is allocated here once; free
 * with tailor_sampler_destroy. */
tailor_status tailor_sampler_create(tailor_ctx *ctx, const tailor_sampler_params *p, int vocab,
                                    tailor_sampler **out);

/* Frees the sampler; NULL is fine. */
void tailor_sampler_destroy(tailor_sampler *s);

/* The next token for logits[vocab] (not modified). Allocates nothing. */
int32_t tailor_sampler_next(tailor_sampler *s, const float *logits);

/* Index of the largest of logits[0..n) (the lowest index among equals; NaN never wins). */
int32_t tailor_argmax(const float *logits, int n);

#endif
