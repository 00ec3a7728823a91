/* tune_targets.h — the list of (op, shape) a first-boot tuning pass covers: from a preset
 * (gemma-4-e2b, ...) or a checkpoint's config. */
#ifndef TAILOR_TUNE_TARGETS_H
#define TAILOR_TUNE_TARGETS_H

#include "op.h"
#include "tailor.h"

typedef struct tailor_tune_target {
    char op[64];
    tailor_shape shape;
} tailor_tune_target;

/* Every kernel shape a model needs, from `preset` (a name) or `model_dir` (exactly one
 * non-NULL). *targets is malloc'd (free()). Unknown preset: one sentence listing the known. */
tailor_status tailor_tune_targets(tailor_ctx *ctx, const char *preset, const char *model_dir,
                                  tailor_tune_target **targets, int *count);

#endif
