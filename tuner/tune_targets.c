/* tune_targets.c — kernel shapes of a model for `tailor tune --preset/--model`. */
#include "tune_targets.h"

#include <stdlib.h>
#include <string.h>

tailor_status tailor_tune_targets(tailor_ctx *ctx, const char *preset, const char *model_dir,
                                  tailor_tune_target **targets, int *count)
{
    (void)targets;
    (void)count;
    if (model_dir)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "tune --model %s: deriving shapes from a checkpoint is not built yet",
                                model_dir);
    return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                            "tune --preset %s: presets are not built yet", preset);
}
