/* plan.h — the budget check and the plan: every configuration of every template of an op,
 * checked against one device's limits (live or profile), with the arithmetic of each refusal. */
#ifndef TAILOR_PLAN_H
#define TAILOR_PLAN_H

#include "device.h"
#include "gen.h"
#include "op.h"
#include "space.h"
#include "tailor.h"

typedef enum tailor_verdict {
    TAILOR_FITS = 0,
    TAILOR_REFUSED_SHAPE,   /* the space's `valid` said no */
    TAILOR_REFUSED_DTYPE,   /* the template does not support the dtype */
    TAILOR_REFUSED_FEATURE, /* needs an instruction or dtype the architecture lacks */
    TAILOR_REFUSED_THREADS, /* threads per block above the device's maximum */
    TAILOR_REFUSED_SMEM,    /* static + dynamic shared memory above the opt-in limit */
    TAILOR_REFUSED_REGS,    /* after compiling: registers x threads above registers per block */
    TAILOR_SPACE_DEFECT,    /* after compiling: the space's smem_static disagrees with ptxas */
    TAILOR_REFUSED_EXPERIMENTAL /* the template is experimental and TAILOR_EXPERIMENTAL is unset */
} tailor_verdict;

#define TAILOR_VERDICTS (TAILOR_REFUSED_EXPERIMENTAL + 1)

/* "fits", "refused-shape", "refused-dtype", "refused-feature", "refused-threads",
 * "refused-smem", "refused-registers", "space-defect". */
const char *tailor_verdict_name(tailor_verdict v);

/* Minimum architecture of a feature ("bf16" -> 80), or -1 for an unknown feature. */
int tailor_feature_min_sm(const char *feature);

/* 1 when a feature exists on its minimum architecture only (wgmma: sm_90a, not sm_100), so
 * code using it compiles for sm_XXa and runs on exactly that architecture. */
int tailor_feature_arch_specific(const char *feature);

/* Checks a configuration against the device before compiling. reason gets one sentence such
 * as "attention_prefill BM=64 BN=32 D=512 fp16: needs 98,304 B shared memory per block; Tesla
 * T4 (sm_75) allows 65,536 B (1.5x over)"; reason NULL (or size 0): the verdict alone, nothing
 * formatted (a plan of survivors). */
tailor_verdict tailor_budget_check(const tailor_device_info *dev, const char *op,
                                   const tailor_space *space, const tailor_config *cfg,
                                   tailor_dtype dtype, const tailor_launch *launch, char *reason,
                                   size_t size);

/* Checks what the compiler reported: registers x threads, and smem_static against the space.
 * Reasons (of both checks) name the template after the op when it is named otherwise:
 * "w4a16_matmul/w4a16_wgmma BK=64 ...". */
tailor_verdict tailor_budget_check_compiled(const tailor_device_info *dev, const char *op,
                                            const char *template_name, const tailor_config *cfg,
                                            tailor_dtype dtype, const tailor_launch *launch,
                                            int regs, int smem_static_reported, char *reason,
                                            size_t size);

typedef struct tailor_plan_entry {
    char template_name[64];
    tailor_config cfg;
    tailor_launch launch;
    tailor_verdict verdict;
    char reason[512];
} tailor_plan_entry;

typedef struct tailor_plan {
    tailor_device_info dev;
    const tailor_op *op;
    tailor_shape shape;     /* completed with the op's defaults */
    tailor_dtype dtype;
    char space_hash[65];    /* over every template of the op: what cached winners depend on */
    int ntemplates;
    char templates[16][64];
    int count;              /* candidates evaluated */
    int by_verdict[TAILOR_VERDICTS]; /* the candidates of each verdict (FITS: the survivors,
                                      * tailor_plan_survivors) */
    int nentries;           /* entries held: all count, or (tailor_plan_build_survivors) the
                             * survivors alone, in the same order */
    tailor_plan_entry *entries;
} tailor_plan;

/* The plan's survivors: the candidates that fit. */
static inline int tailor_plan_survivors(const tailor_plan *plan)
{
    return plan->by_verdict[TAILOR_FITS];
}

/* Builds the plan of `op_name` for (shape, dtype) on dev: an entry for every candidate, with its
 * verdict and reason. Fails for an unknown op (listing the known ones), a bad shape, or a broken
 * space (file and line). Free with tailor_plan_free. */
tailor_status tailor_plan_build(tailor_ctx *ctx, const tailor_device_info *dev, const char *op_name,
                                const tailor_shape *shape, tailor_dtype dtype, tailor_plan *out);

/* tailor_plan_build keeping entries for the survivors only (count and survivors as there): what
 * tuning needs, without an entry of ~10 KB for each of the thousands of refused candidates an op
 * like w4a16_matmul enumerates. */
tailor_status tailor_plan_build_survivors(tailor_ctx *ctx, const tailor_device_info *dev,
                                          const char *op_name, const tailor_shape *shape,
                                          tailor_dtype dtype, tailor_plan *out);
void tailor_plan_free(tailor_plan *plan);

/* The space hash tailor_plan_build gives every plan of op_name (over each of its templates but
 * the experimental ones TAILOR_EXPERIMENTAL leaves out),
 * without enumerating a configuration: with the completed shape, what a cache lookup needs.
 * It depends on the template files, not on device, shape or dtype. */
tailor_status tailor_plan_space_hash(tailor_ctx *ctx, const char *op_name, char hex[65]);

/* What a cache lookup of (op_name, shape, dtype) needs, without enumerating a configuration:
 * *completed, the shape completed and checked by the op as tailor_plan_build does it (the same
 * refusals); and, where hex is "" on entry, the op's space hash (else hex is taken as given:
 * callers that keep an op's hash). */
tailor_status tailor_plan_key(tailor_ctx *ctx, const char *op_name, const tailor_shape *shape,
                              tailor_dtype dtype, tailor_shape *completed, char hex[65]);

/* Compiles entry i of the plan with NVRTC for sm (ptx = 1: PTX for compute_<sm>, as a rehearsal
 * runs it) under kernel_name; needs no GPU. memo (may be NULL) answers an instantiation compiled
 * earlier in the run. Free *out with tailor_compile_result_free, also after a failure
 * (TAILOR_ERR_NVRTC with the compiler's log). Thread-safe. */
tailor_status tailor_plan_compile(tailor_ctx *ctx, const tailor_plan *plan, int i, int sm, int ptx,
                                  const char *kernel_name, tailor_compile_memo *memo,
                                  tailor_compile_result *out);

/* The same for one configuration of template_name evaluated by its space (`launch`: its defines
 * and features), with `extra` defines added after the dtype's (e.g. TAILOR_TRACE for the step
 * trace's recompiled winners). */
tailor_status tailor_launch_compile(tailor_ctx *ctx, const char *template_name,
                                   const tailor_launch *launch, tailor_dtype dtype, int sm, int ptx,
                                   const char *kernel_name, const tailor_define *extra, int nextra,
                                   tailor_compile_memo *memo, tailor_compile_result *out);

#endif
