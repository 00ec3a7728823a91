/* plan.c — the budget check and the plan of an op on a device. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "registry.h"
#include "sha256.h"

const char *tailor_verdict_name(tailor_verdict v)
{
    static const char *const names[] = {"fits",         "refused-shape",   "refused-dtype",
                                        "refused-feature", "refused-threads", "refused-smem",
                                        "refused-registers", "space-defect",
                                        "refused-experimental"};
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}

int tailor_feature_min_sm(const char *feature)
{
    static const struct {
        const char *name;
        int sm;
    } table[] = {
        {"bf16", 80},         {"cp.async", 80}, {"ldmatrix", 75}, {"mma.m16n8k8", 75},
        {"mma.m16n8k16", 80}, {"wgmma", 90},    {"tma", 90},      {"fp16", 53},
        {"movmatrix", 75},    {"cluster", 90}, /* thread block clusters, distributed smem */
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, feature) == 0)
            return table[i].sm;
    return -1;
}

int tailor_feature_arch_specific(const char *feature)
{
    return strcmp(feature, "wgmma") == 0;
}

static int features_arch_specific(const tailor_launch *launch)
{
    for (int i = 0; i < launch->nfeatures; i++)
        if (tailor_feature_arch_specific(launch->features[i]))
            return 1;
    return 0;
}

/* "op params dtype", or "op/template params dtype" where the template is not named after the op
 * (an op with several templates: the reader learns which one refused) */
static void describe_config(const char *op, const char *tmpl, const tailor_config *cfg,
                            tailor_dtype dtype, char *buf, size_t size)
{
    char params[384];
    tailor_config_format(cfg, params, sizeof params);
    if (tmpl && strcmp(tmpl, op) != 0)
        snprintf(buf, size, "%s/%s %s %s", op, tmpl, params, tailor_dtype_name(dtype));
    else
        snprintf(buf, size, "%s %s %s", op, params, tailor_dtype_name(dtype));
}

static void device_label(const tailor_device_info *dev, char *buf, size_t size)
{
    if (dev->kind == TAILOR_DEVICE_TPU)
        snprintf(buf, size, "%s", dev->name);
    else
        snprintf(buf, size, "%s (sm_%d%d)", dev->name, dev->cc_major, dev->cc_minor);
}

/* Why a feature refused a configuration. */
typedef enum feature_gap {
    FEATURE_UNKNOWN,       /* a feature tailor does not know */
    FEATURE_OTHER_ARCH,    /* architecture-specific code for another sm */
    FEATURE_TOO_OLD        /* the device's sm is below the feature's */
} feature_gap;

/* What refused a configuration before compiling: the verdict, and for a feature refusal the
 * feature at fault, why, and the architecture it needs. */
typedef struct budget_refusal {
    tailor_verdict verdict;
    const char *feature;
    feature_gap gap;
    int need_sm;
} budget_refusal;

static budget_refusal budget_decide(const tailor_device_info *dev, const tailor_space *space,
                                    tailor_dtype dtype, const tailor_launch *launch)
{
    budget_refusal r = {TAILOR_FITS, NULL, FEATURE_UNKNOWN, 0};
    if (!launch->valid) {
        r.verdict = TAILOR_REFUSED_SHAPE;
        return r;
    }
    if (!tailor_space_supports(space, dtype)) {
        r.verdict = TAILOR_REFUSED_DTYPE;
        return r;
    }
    int sm = dev->cc_major * 10 + dev->cc_minor;
    if (dev->kind == TAILOR_DEVICE_GPU) {
        for (int i = 0; i < launch->nfeatures; i++) {
            int need = tailor_feature_min_sm(launch->features[i]);
            if (need < 0)
                r.gap = FEATURE_UNKNOWN;
            else if (tailor_feature_arch_specific(launch->features[i]) && sm != need)
                r.gap = FEATURE_OTHER_ARCH;
            else if (sm < need)
                r.gap = FEATURE_TOO_OLD;
            else
                continue;
            r.verdict = TAILOR_REFUSED_FEATURE;
            r.feature = launch->features[i];
            r.need_sm = need;
            return r;
        }
        if (launch->threads > dev->max_threads_per_block) {
            r.verdict = TAILOR_REFUSED_THREADS;
            return r;
        }
    }
    if (launch->smem_static + launch->smem_dynamic > dev->smem_per_block_optin) {
        r.verdict = TAILOR_REFUSED_SMEM;
        return r;
    }
    if (tailor_space_experimental(space) && !tailor_experimental_on())
        r.verdict = TAILOR_REFUSED_EXPERIMENTAL;
    return r;
}

/* The one sentence that says why r refused the configuration, into reason. */
static void budget_reason(const tailor_device_info *dev, const char *op, const tailor_space *space,
                          const tailor_config *cfg, tailor_dtype dtype,
                          const tailor_launch *launch, const budget_refusal *r, char *reason,
                          size_t size)
{
    char what[512], where[192], a[32], b[32];
    describe_config(op, tailor_space_name(space), cfg, dtype, what, sizeof what);
    device_label(dev, where, sizeof where);
    long long smem = launch->smem_static + launch->smem_dynamic;
    switch (r->verdict) {
    case TAILOR_REFUSED_SHAPE:
        snprintf(reason, size, "%s: %s", what, launch->invalid_reason);
        break;
    case TAILOR_REFUSED_DTYPE:
        snprintf(reason, size, "%s: template %s does not support %s", what,
                 tailor_space_name(space), tailor_dtype_name(dtype));
        break;
    case TAILOR_REFUSED_FEATURE:
        if (r->gap == FEATURE_UNKNOWN)
            snprintf(reason, size, "%s: requires unknown feature '%s'", what, r->feature);
        else if (r->gap == FEATURE_OTHER_ARCH)
            snprintf(reason, size, "%s: needs %s, which only sm_%d has (code for sm_%da); "
                     "%s lacks it", what, r->feature, r->need_sm, r->need_sm, where);
        else
            snprintf(reason, size, "%s: needs %s (sm_%d or newer); %s lacks it", what,
                     r->feature, r->need_sm, where);
        break;
    case TAILOR_REFUSED_THREADS:
        snprintf(reason, size, "%s: needs %d threads per block; %s allows %d", what,
                 launch->threads, where, dev->max_threads_per_block);
        break;
    case TAILOR_REFUSED_SMEM: {
        const char *unit = dev->kind == TAILOR_DEVICE_TPU ? "VMEM per core"
                                                          : "shared memory per block";
        double over = (double)smem / (double)dev->smem_per_block_optin;
        snprintf(reason, size, "%s: needs %s B %s; %s allows %s B (%.*fx over)", what,
                 tailor_fmt_int(a, sizeof a, smem), unit, where,
                 tailor_fmt_int(b, sizeof b, dev->smem_per_block_optin), over < 1.095 ? 2 : 1,
                 over);
        break;
    }
    case TAILOR_REFUSED_EXPERIMENTAL:
        snprintf(reason, size, "%s: template %s is experimental (%s); TAILOR_EXPERIMENTAL=1 "
                 "includes it", what, tailor_space_name(space), tailor_space_experimental(space));
        break;
    default: reason[0] = '\0'; break;
    }
}

tailor_verdict tailor_budget_check(const tailor_device_info *dev, const char *op,
                                   const tailor_space *space, const tailor_config *cfg,
                                   tailor_dtype dtype, const tailor_launch *launch, char *reason,
                                   size_t size)
{
    budget_refusal r = budget_decide(dev, space, dtype, launch);
    if (reason && size) {
        if (r.verdict == TAILOR_FITS)
            reason[0] = '\0';
        else
            budget_reason(dev, op, space, cfg, dtype, launch, &r, reason, size);
    }
    return r.verdict;
}

tailor_verdict tailor_budget_check_compiled(const tailor_device_info *dev, const char *op,
                                            const char *template_name, const tailor_config *cfg,
                                            tailor_dtype dtype, const tailor_launch *launch,
                                            int regs, int smem_static_reported, char *reason,
                                            size_t size)
{
    char what[512], where[192], a[32], b[32];
    describe_config(op, template_name, cfg, dtype, what, sizeof what);
    device_label(dev, where, sizeof where);
    if (regs > 0 && (long long)regs * launch->threads > dev->regs_per_block) {
        snprintf(reason, size, "%s: %d registers x %d threads = %s registers per block; %s "
                 "allows %s",
                 what, regs, launch->threads,
                 tailor_fmt_int(a, sizeof a, (long long)regs * launch->threads), where,
                 tailor_fmt_int(b, sizeof b, dev->regs_per_block));
        return TAILOR_REFUSED_REGS;
    }
    if (smem_static_reported >= 0 && smem_static_reported != launch->smem_static) {
        snprintf(reason, size, "%s: the space says %lld B static shared memory, the compiler "
                 "reports %d B (a defect of the search space)",
                 what, launch->smem_static, smem_static_reported);
        return TAILOR_SPACE_DEFECT;
    }
    reason[0] = '\0';
    return TAILOR_FITS;
}

/* ---- the plan ------------------------------------------------------------------------------ */

/* Every buffer a launch passes names one of the op's buffers or one of the space's workspace
 * buffers: a misspelt name is a defect of the space, refused here rather than at launch. */
static tailor_status check_buffer_args(tailor_ctx *ctx, const tailor_plan *plan,
                                       const tailor_space *space, const tailor_op_buffers *bufs,
                                       const tailor_launch *l)
{
    for (int a = 0; a < l->nargs; a++) {
        if (l->args[a].kind != TAILOR_ARG_BUFFER)
            continue;
        int known = 0;
        for (int b = 0; b < bufs->count && !known; b++)
            known = strcmp(bufs->b[b].name, l->args[a].name) == 0;
        for (int w = 0; w < l->nworkspace && !known; w++)
            known = strcmp(l->workspace[w].name, l->args[a].name) == 0;
        if (known)
            continue;
        char names[512] = "";
        for (int b = 0; b < bufs->count; b++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", b ? ", " : "", bufs->b[b].name);
        }
        return tailor_set_error(ctx, TAILOR_ERR_LUA, "search space %s: args[%d] names buffer "
                                "'%s', which is neither a buffer of op %s (%s) nor one of its "
                                "workspace", tailor_space_origin(space), a + 1, l->args[a].name,
                                plan->op->name, names);
    }
    return TAILOR_OK;
}

/* Appends *e to plan->entries, growing them (doubling) as needed. */
static tailor_status keep_entry(tailor_ctx *ctx, tailor_plan *plan, const tailor_plan_entry *e,
                                int *cap)
{
    if (plan->nentries == *cap) {
        int newcap = *cap ? 2 * *cap : 64;
        tailor_plan_entry *grown = realloc(plan->entries, (size_t)newcap * sizeof *grown);
        if (!grown)
            return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory planning");
        plan->entries = grown;
        *cap = newcap;
    }
    plan->entries[plan->nentries++] = *e;
    return TAILOR_OK;
}

/* Evaluates every configuration of one space into `scratch` and keeps it as an entry when it
 * fits or keep_refused is set. */
static tailor_status add_entries(tailor_ctx *ctx, tailor_plan *plan, tailor_space *space,
                                 const tailor_op_buffers *bufs, int *cap, int keep_refused,
                                 tailor_plan_entry *scratch)
{
    tailor_config *configs = NULL;
    int n = 0;
    tailor_status st = tailor_space_enumerate(ctx, space, &plan->shape, plan->dtype, &plan->dev,
                                              &configs, &n);
    if (st)
        return st;
    for (int i = 0; i < n && st == TAILOR_OK; i++) {
        tailor_plan_entry *e = scratch;
        memset(e, 0, sizeof *e);
        snprintf(e->template_name, sizeof e->template_name, "%s", tailor_space_name(space));
        e->cfg = configs[i];
        st = tailor_space_evaluate(ctx, space, &e->cfg, &plan->shape, plan->dtype, &plan->dev,
                                   keep_refused ? 0 : TAILOR_EVAL_VALID_FIRST, &e->launch);
        if (st == TAILOR_OK && e->launch.valid)
            st = check_buffer_args(ctx, plan, space, bufs, &e->launch);
        if (st)
            break;
        /* a refusal's sentence is written only where the plan keeps it */
        e->verdict = tailor_budget_check(&plan->dev, plan->op->name, space, &e->cfg, plan->dtype,
                                         &e->launch, keep_refused ? e->reason : NULL,
                                         keep_refused ? sizeof e->reason : 0);
        plan->count++;
        if ((unsigned)e->verdict < TAILOR_VERDICTS)
            plan->by_verdict[e->verdict]++;
        if (e->verdict == TAILOR_FITS || keep_refused)
            st = keep_entry(ctx, plan, e, cap);
    }
    free(configs);
    return st;
}

/* One template's part of an op's space hash: its name and its own hash. An experimental template
 * that TAILOR_EXPERIMENTAL leaves out takes no part, so that adding one changes no cached
 * winner's key (its survivors are not among the candidates then), and winners tuned with it in
 * are kept apart from those tuned without. */
static tailor_status hash_space_into(tailor_ctx *ctx, tailor_sha256 *h, const char *name,
                                     tailor_space *space)
{
    if (tailor_space_experimental(space) && !tailor_experimental_on())
        return TAILOR_OK;
    char one[65];
    tailor_status st = tailor_space_hash(ctx, space, one);
    if (st == TAILOR_OK) {
        tailor_sha256_update(h, name, strlen(name) + 1);
        tailor_sha256_update(h, one, 64);
    }
    return st;
}

tailor_status tailor_plan_space_hash(tailor_ctx *ctx, const char *op_name, char hex[65])
{
    char **names = NULL;
    int n = 0;
    tailor_status st = tailor_space_find_for_op(ctx, op_name, &names, &n);
    if (st)
        return st;
    tailor_sha256 h; /* as tailor_plan_build: each template's name and hash, in list order */
    tailor_sha256_init(&h);
    for (int i = 0; i < n && st == TAILOR_OK; i++) {
        tailor_space *space = NULL;
        if ((st = tailor_space_load(ctx, names[i], &space)) == TAILOR_OK)
            st = hash_space_into(ctx, &h, names[i], space);
        tailor_space_destroy(space);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (st)
        return st;
    uint8_t d[32];
    tailor_sha256_final(&h, d);
    tailor_sha256_to_hex(d, hex);
    return TAILOR_OK;
}

tailor_status tailor_plan_key(tailor_ctx *ctx, const char *op_name, const tailor_shape *shape,
                              tailor_dtype dtype, tailor_shape *completed, char hex[65])
{
    const tailor_op *op = NULL;
    tailor_op_buffers bufs;
    *completed = *shape;
    tailor_status st = tailor_op_get(ctx, op_name, &op);
    if (st == TAILOR_OK)
        st = tailor_op_complete_shape(ctx, op, completed);
    if (st == TAILOR_OK)
        st = op->describe(ctx, completed, dtype, &bufs);
    if (st == TAILOR_OK && !hex[0])
        st = tailor_plan_space_hash(ctx, op_name, hex);
    return st;
}

static tailor_status build(tailor_ctx *ctx, const tailor_device_info *dev, const char *op_name,
                           const tailor_shape *shape, tailor_dtype dtype, int keep_refused,
                           tailor_plan *out)
{
    memset(out, 0, sizeof *out);
    out->dev = *dev;
    out->dtype = dtype;
    out->shape = *shape;
    tailor_status st = tailor_op_get(ctx, op_name, &out->op);
    if (st)
        return st;
    st = tailor_op_complete_shape(ctx, out->op, &out->shape);
    if (st)
        return st;
    tailor_op_buffers bufs;
    if ((st = out->op->describe(ctx, &out->shape, dtype, &bufs)))
        return st;
    char **names = NULL;
    int n = 0;
    if ((st = tailor_space_find_for_op(ctx, op_name, &names, &n)))
        return st; /* none implements it: the message says so, naming overrides that hid one */
    tailor_sha256 h;
    tailor_sha256_init(&h);
    int cap = 0;
    tailor_plan_entry *scratch = malloc(sizeof *scratch); /* one candidate at a time */
    if (!scratch)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory planning");
    for (int i = 0; i < n && st == TAILOR_OK; i++) {
        tailor_space *space = NULL;
        if ((st = tailor_space_load(ctx, names[i], &space)))
            break;
        if ((st = hash_space_into(ctx, &h, names[i], space)) == TAILOR_OK) {
            if (out->ntemplates < 16)
                snprintf(out->templates[out->ntemplates++], 64, "%s", names[i]);
            st = add_entries(ctx, out, space, &bufs, &cap, keep_refused, scratch);
        }
        tailor_space_destroy(space);
    }
    free(scratch);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (st) {
        tailor_plan_free(out);
        return st;
    }
    uint8_t d[32];
    tailor_sha256_final(&h, d);
    tailor_sha256_to_hex(d, out->space_hash);
    return TAILOR_OK;
}

tailor_status tailor_plan_build(tailor_ctx *ctx, const tailor_device_info *dev, const char *op_name,
                                const tailor_shape *shape, tailor_dtype dtype, tailor_plan *out)
{
    return build(ctx, dev, op_name, shape, dtype, 1, out);
}

tailor_status tailor_plan_build_survivors(tailor_ctx *ctx, const tailor_device_info *dev,
                                          const char *op_name, const tailor_shape *shape,
                                          tailor_dtype dtype, tailor_plan *out)
{
    return build(ctx, dev, op_name, shape, dtype, 0, out);
}

void tailor_plan_free(tailor_plan *plan)
{
    if (!plan)
        return;
    free(plan->entries);
    plan->entries = NULL;
    plan->count = plan->nentries = 0;
}

tailor_status tailor_launch_compile(tailor_ctx *ctx, const char *template_name,
                                   const tailor_launch *launch, tailor_dtype dtype, int sm, int ptx,
                                   const char *kernel_name, const tailor_define *extra, int nextra,
                                   tailor_compile_memo *memo, tailor_compile_result *out)
{
    memset(out, 0, sizeof *out);
    if (launch->ndefines + 1 + nextra > TAILOR_GEN_MAX_DEFINES + 4)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: too many defines to compile (%d)",
                                template_name, launch->ndefines + 1 + nextra);
    /* the .cu named by the template's space */
    char source_name[80];
    tailor_space *space = NULL;
    tailor_status st = tailor_space_load(ctx, template_name, &space);
    if (st)
        return st;
    snprintf(source_name, sizeof source_name, "%s", tailor_space_source(space));
    tailor_space_destroy(space);
    tailor_template_file src;
    if ((st = tailor_template_read(ctx, source_name, &src)))
        return st;
    tailor_define defs[TAILOR_GEN_MAX_DEFINES + 4];
    int n = launch->ndefines;
    memcpy(defs, launch->defines, (size_t)n * sizeof defs[0]);
    snprintf(defs[n].name, sizeof defs[n].name, "TAILOR_DTYPE_%s",
             dtype == TAILOR_DTYPE_BF16 ? "BF16" : "FP16");
    snprintf(defs[n].value, sizeof defs[n].value, "1");
    n++;
    for (int j = 0; j < nextra; j++)
        defs[n++] = extra[j];
    tailor_compile_request req = {
        .source_name = source_name,
        .source = src.text,
        .kernel_name = kernel_name,
        .sm = sm,
        .ptx = ptx,
        .arch_specific = features_arch_specific(launch),
        .ndefines = n,
        .defines = defs,
    };
    st = tailor_gen_compile_memo(ctx, memo, &req, out);
    tailor_template_file_free(&src);
    return st;
}

tailor_status tailor_plan_compile(tailor_ctx *ctx, const tailor_plan *plan, int i, int sm, int ptx,
                                  const char *kernel_name, tailor_compile_memo *memo,
                                  tailor_compile_result *out)
{
    const tailor_plan_entry *e = &plan->entries[i];
    return tailor_launch_compile(ctx, e->template_name, &e->launch, plan->dtype, sm, ptx,
                                 kernel_name, NULL, 0, memo, out);
}
