/* cmd_plan.c — `tailor plan`: which configurations of an op fit a device, and why the rest
 * do not. Needs no GPU. */
#include <getopt.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cuda.h"
#include "device.h"
#include "gemma4.h"
#include "gen.h"
#include "parallel.h"
#include "plan.h"
#include "tune_targets.h"

static void usage(void)
{
    printf("usage: tailor plan --device NAME|PROFILE --op OP --shape k=v,... [--dtype fp16|bf16] "
           "[--json] [--quiet] [--compile] [--dump DIR [--ptx]]\n"
           "       tailor plan --device NAME|PROFILE (--preset NAME | --model DIR) [--dtype D] "
           "[--json] [--quiet]\n\n"
           "--preset NAME, --model DIR  every kernel shape the model needs (tailor tune --list's\n"
           "           list: 16-bit and W4A16 passes), each planned on the device: a line a shape\n"
           "           with its survivors; a shape with none is named with the refusals' classes\n"
           "           and one of them. Exits 1 if any shape has no survivor (--quiet: only those).\n"
           "--compile  also compiles every survivor with NVRTC for the device's architecture (no\n"
           "           GPU needed) and reports registers, spills and shared memory from ptxas;\n"
           "           survivors the compiler report refuses are listed with the arithmetic.\n"
           "           Exits 1 if any survivor fails to compile.\n"
           "--dump DIR  --compile, and each survivor's cubin written to DIR/<kernel name>.cubin\n"
           "           (DIR must exist): two dumps compared tell whether a template edit changed\n"
           "           any machine code (scripts/same-binaries.sh).\n"
           "--ptx      with --dump, each survivor's PTX for compute_<sm> beside its cubin\n"
           "           (DIR/<kernel name>.ptx): where two cubins differ, a diff of the PTX shows\n"
           "           what changed (no disassembler needed).\n\n"
           "Ops and their shape keys:\n");
    for (const tailor_op *const *op = tailor_op_list(); *op; op++) {
        printf("  %-20s %s\n", (*op)->name, (*op)->summary);
        for (const tailor_shape_key *k = (*op)->keys; k->name; k++) {
            if (k->fallback < 0)
                printf("      %-10s %s\n", k->name, k->doc);
            else
                printf("      %-10s %s (default %lld)\n", k->name, k->doc, k->fallback);
        }
    }
}

/* What --compile found for one plan entry. */
typedef struct compiled_entry {
    int done;          /* compiled (or tried) */
    int failed;        /* NVRTC error: message in text */
    int regs, smem_static, spill_stores, spill_loads;
    int wgmma_serialized;
    double seconds;
    char text[512];    /* the error, or the compiled verdict's reason */
} compiled_entry;

/* Entry i's resident blocks an SM on the plan's device under the carveout every kernel will
 * prefer (tailor_device_blocks_per_sm), from its compiled registers; *limit says what binds. */
static int entry_blocks(const tailor_plan *plan, const tailor_plan_entry *e,
                        const compiled_entry *c, tailor_occupancy_limit *limit)
{
    return tailor_device_blocks_per_sm(&plan->dev, e->launch.threads, c->regs,
                                       e->launch.smem_static + e->launch.smem_dynamic,
                                       tailor_carveout_preference(), limit);
}

/* " at 25 %" (the preferred carveout) after "shared memory", "" after the other limits. */
static const char *carveout_words(tailor_occupancy_limit limit, char *buf, size_t size)
{
    int pct = tailor_carveout_preference();
    buf[0] = 0;
    if (limit == TAILOR_OCC_SHARED && pct >= 0)
        snprintf(buf, size, " at %d %%", pct);
    return buf;
}

typedef struct compile_all_job {
    tailor_plan *plan;
    compiled_entry *out;
    int sm;
    const char *dump_dir; /* --dump: where the cubins go, or NULL */
    int dump_ptx;         /* --ptx: the PTX beside them */
} compile_all_job;

/* --dump: a compiled image as DIR/<kernel name>.EXT; an error becomes the entry's failure. */
static void dump_image(const char *dir, const char *name, const char *ext,
                       const tailor_compile_result *r, compiled_entry *c)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    size_t n = r->is_ptx ? strlen(r->image) : r->image_size; /* PTX: the text, not its NUL */
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(r->image, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        c->failed = 1;
        snprintf(c->text, sizeof c->text, "--dump: cannot write %.400s", path);
    }
}

/* --ptx: survivor i compiled again, its PTX (the text a compute_<sm> compile gives) into
 * DIR/<kernel name>.ptx. */
static void dump_ptx(tailor_ctx *ctx, const compile_all_job *job, int i, const char *name,
                     compiled_entry *c)
{
    tailor_compile_result r;
    if (tailor_plan_compile(ctx, job->plan, i, job->sm, 1, name, NULL, &r) == TAILOR_OK) {
        dump_image(job->dump_dir, name, "ptx", &r, c);
    } else {
        c->failed = 1;
        snprintf(c->text, sizeof c->text, "--ptx: %s", tailor_ctx_message(ctx));
    }
    tailor_compile_result_free(&r);
}

/* Compiles survivor i; refuses it in the plan if the compiler's report does not fit. */
static void compile_entry(void *user, int i)
{
    compile_all_job *job = user;
    tailor_plan_entry *e = &job->plan->entries[i];
    compiled_entry *c = &job->out[i];
    if (e->verdict != TAILOR_FITS)
        return;
    tailor_ctx *ctx = tailor_ctx_create();
    if (!ctx) {
        c->done = c->failed = 1;
        snprintf(c->text, sizeof c->text, "out of memory");
        return;
    }
    char name[256];
    tailor_gen_kernel_name(job->plan->op->name, e->template_name, job->sm,
                           tailor_dtype_name(job->plan->dtype), e->launch.defines,
                           e->launch.ndefines, name, sizeof name);
    tailor_compile_result r;
    tailor_status st = tailor_plan_compile(ctx, job->plan, i, job->sm, 0, name, NULL, &r);
    c->done = 1;
    if (st) {
        c->failed = 1;
        snprintf(c->text, sizeof c->text, "%s", tailor_ctx_message(ctx));
    } else {
        c->regs = r.regs;
        c->smem_static = r.smem_static;
        c->spill_stores = r.spill_stores;
        c->spill_loads = r.spill_loads;
        c->wgmma_serialized = r.wgmma_serialized;
        c->seconds = r.seconds;
        tailor_verdict v = tailor_budget_check_compiled(
            &job->plan->dev, job->plan->op->name, e->template_name, &e->cfg, job->plan->dtype,
            &e->launch, r.regs, r.smem_static, c->text, sizeof c->text);
        if (v != TAILOR_FITS) {
            e->verdict = v;
            snprintf(e->reason, sizeof e->reason, "%s", c->text);
        }
        if (job->dump_dir)
            dump_image(job->dump_dir, name, "cubin", &r, c);
    }
    tailor_compile_result_free(&r);
    if (st == TAILOR_OK && job->dump_ptx)
        dump_ptx(ctx, job, i, name, c);
    tailor_ctx_destroy(ctx);
}

/* --compile: every survivor through NVRTC for the device's architecture. Returns the number
 * that failed to compile; *out (plan->nentries entries) says what each gave. */
static int compile_survivors(tailor_ctx *ctx, tailor_plan *plan, const char *dump_dir,
                             int dump_ptx, compiled_entry **out)
{
    *out = calloc((size_t)plan->nentries, sizeof **out);
    int sm = plan->dev.cc_major * 10 + plan->dev.cc_minor;
    if (!*out) {
        tailor_set_error(ctx, TAILOR_ERR_NOMEM, "plan --compile: out of memory");
        return -1;
    }
    int carveout; /* the occupancy column reads it: a malformed TAILOR_CARVEOUT is refused */
    if (tailor_gen_check_arch(ctx, sm) != TAILOR_OK || tailor_carveout_read(ctx, &carveout))
        return -1;
    compile_all_job job = {plan, *out, sm, dump_dir, dump_ptx};
    tailor_parallel_for(plan->nentries, compile_entry, &job);
    /* the compiler's report may have refused survivors: the counts follow the verdicts */
    int failed = 0;
    memset(plan->by_verdict, 0, sizeof plan->by_verdict);
    for (int i = 0; i < plan->nentries; i++) {
        failed += (*out)[i].failed;
        if ((unsigned)plan->entries[i].verdict < TAILOR_VERDICTS)
            plan->by_verdict[plan->entries[i].verdict]++;
    }
    return failed;
}

static cJSON *params_json(const tailor_config *cfg)
{
    char buf[1024];
    tailor_config_json(cfg, buf, sizeof buf);
    const char *end = NULL;
    return cJSON_ParseWithOpts(buf, &end, 1);
}

static void print_json(const tailor_plan *plan, const compiled_entry *comp)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "device", plan->dev.short_name[0] ? plan->dev.short_name
                                                                 : plan->dev.name);
    cJSON_AddStringToObject(o, "device_name", plan->dev.name);
    cJSON_AddStringToObject(o, "op", plan->op->name);
    char shape[256];
    tailor_shape_format(&plan->shape, shape, sizeof shape);
    cJSON_AddStringToObject(o, "shape", shape);
    cJSON_AddStringToObject(o, "dtype", tailor_dtype_name(plan->dtype));
    cJSON_AddNumberToObject(o, "candidates", plan->count);
    cJSON *surv = cJSON_AddArrayToObject(o, "survivors");
    cJSON *ref = cJSON_AddArrayToObject(o, "refused");
    for (int i = 0; i < plan->nentries; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "template", e->template_name);
        cJSON_AddItemToObject(item, "params", params_json(&e->cfg));
        if (e->verdict == TAILOR_FITS) {
            char name[256]; /* the instantiation: equal names, equal binaries */
            tailor_gen_kernel_name(plan->op->name, e->template_name,
                                   plan->dev.cc_major * 10 + plan->dev.cc_minor,
                                   tailor_dtype_name(plan->dtype), e->launch.defines,
                                   e->launch.ndefines, name, sizeof name);
            cJSON_AddStringToObject(item, "kernel", name);
            cJSON_AddNumberToObject(item, "smem_bytes",
                                    (double)(e->launch.smem_static + e->launch.smem_dynamic));
            cJSON_AddNumberToObject(item, "threads", e->launch.threads);
            if (comp && comp[i].failed) {
                cJSON_AddStringToObject(item, "compile_error", comp[i].text);
            } else if (comp && comp[i].done) {
                cJSON_AddNumberToObject(item, "regs", comp[i].regs);
                cJSON_AddBoolToObject(item, "wgmma_serialized", comp[i].wgmma_serialized != 0);
                cJSON_AddNumberToObject(item, "spill_stores", comp[i].spill_stores);
                cJSON_AddNumberToObject(item, "spill_loads", comp[i].spill_loads);
                cJSON_AddNumberToObject(item, "compile_seconds", comp[i].seconds);
                tailor_occupancy_limit limit;
                cJSON_AddNumberToObject(item, "blocks_per_sm",
                                        entry_blocks(plan, e, &comp[i], &limit));
                cJSON_AddStringToObject(item, "blocks_per_sm_limit",
                                        tailor_occupancy_limit_name(limit));
            }
            cJSON_AddItemToArray(surv, item);
        } else {
            cJSON_AddStringToObject(item, "class", tailor_verdict_name(e->verdict));
            cJSON_AddStringToObject(item, "reason", e->reason);
            cJSON_AddItemToArray(ref, item);
        }
    }
    char *text = cJSON_Print(o);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

/* Width of the survivors' template column: 22, or the longest survivor's template name. */
static int template_column(const tailor_plan *plan)
{
    int width = 22;
    for (int i = 0; i < plan->nentries; i++) {
        int n = (int)strlen(plan->entries[i].template_name);
        if (plan->entries[i].verdict == TAILOR_FITS && n > width)
            width = n;
    }
    return width;
}

static void print_text(const tailor_plan *plan, const compiled_entry *comp, int quiet)
{
    char shape[256], a[32];
    tailor_shape_format(&plan->shape, shape, sizeof shape);
    printf("%s %s %s on %s: %d candidates, %d survive\n", plan->op->name, shape,
           tailor_dtype_name(plan->dtype), plan->dev.name, plan->count,
           tailor_plan_survivors(plan));
    printf("\nsurvivors:\n");
    int width = template_column(plan);
    for (int i = 0; i < plan->nentries; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        if (e->verdict != TAILOR_FITS)
            continue;
        char params[384];
        tailor_config_format(&e->cfg, params, sizeof params);
        printf("  %-*s %-48s %10s B smem %5d threads", width, e->template_name, params,
               tailor_fmt_int(a, sizeof a, e->launch.smem_static + e->launch.smem_dynamic),
               e->launch.threads);
        if (comp && comp[i].failed)
            printf("  COMPILE ERROR: %s", comp[i].text);
        else if (comp && comp[i].done) {
            tailor_occupancy_limit limit;
            char at[32];
            int blocks = entry_blocks(plan, e, &comp[i], &limit);
            char ser[64] = "";
            if (comp[i].wgmma_serialized)
                snprintf(ser, sizeof ser, ", wgmma serialized (ptxas C%d)",
                         comp[i].wgmma_serialized);
            printf("  %3d regs, spills %d/%d B, %.1f s, %d block%s/SM (%s%s)%s", comp[i].regs,
                   comp[i].spill_stores, comp[i].spill_loads, comp[i].seconds, blocks,
                   blocks == 1 ? "" : "s", tailor_occupancy_limit_name(limit),
                   carveout_words(limit, at, sizeof at), ser);
        }
        printf("\n");
    }
    if (quiet)
        return;
    printf("\nrefused:\n");
    for (int i = 0; i < plan->nentries; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        if (e->verdict != TAILOR_FITS)
            printf("  [%s] %s\n", tailor_verdict_name(e->verdict), e->reason);
    }
}

/* ---- --preset / --model: every kernel shape of a model planned on one device ---- */

#define PLAN_CLASSES TAILOR_VERDICTS

/* What planning one shape of a model found. */
typedef struct shape_plan {
    int candidates, survivors;
    int refused[PLAN_CLASSES]; /* per verdict */
    char example[512];         /* a shape without survivors: its nearest refusal */
} shape_plan;

/* The refusal to show for a shape without survivors: the shared-memory refusal that asked for
 * the least (the nearest miss on a budget), else the first of the most frequent class. */
static void pick_example(const tailor_plan *plan, const int refused[PLAN_CLASSES], char *out,
                         size_t size)
{
    const tailor_plan_entry *best = NULL;
    int most = 0;
    for (int v = 1; v < PLAN_CLASSES; v++)
        if (refused[v] > refused[most])
            most = v;
    for (int i = 0; i < plan->nentries; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        long long bytes = e->launch.smem_static + e->launch.smem_dynamic;
        if (e->verdict == TAILOR_REFUSED_SMEM &&
            (!best || best->verdict != TAILOR_REFUSED_SMEM ||
             bytes < best->launch.smem_static + best->launch.smem_dynamic))
            best = e;
        else if (!best && (int)e->verdict == most)
            best = e;
    }
    snprintf(out, size, "%s", best ? best->reason : "no configuration");
}

/* The distinct instantiations (kernel names) of a model's survivors: what a first boot
 * compiles, since the compile memo builds each once (tailor_compile_memo). */
typedef struct name_set {
    char **names;
    int n, cap;
} name_set;

static int name_set_add(name_set *set, const char *name)
{
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->names[i], name) == 0)
            return 0;
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 256;
        char **grown = realloc(set->names, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        set->names = grown;
        set->cap = cap;
    }
    if (!(set->names[set->n] = strdup(name)))
        return -1;
    set->n++;
    return 0;
}

static void name_set_free(name_set *set)
{
    for (int i = 0; i < set->n; i++)
        free(set->names[i]);
    free(set->names);
}

static tailor_status plan_one_shape(tailor_ctx *ctx, const tailor_device_info *dev,
                                    const tailor_tune_target *t, tailor_dtype dtype,
                                    shape_plan *out, name_set *kernels)
{
    tailor_plan plan;
    memset(out, 0, sizeof *out);
    /* the survivors' entries only (a model's shapes refuse hundreds of thousands of candidates);
     * the refusals as counts, and all of them again only for a shape where none survives */
    tailor_status st = tailor_plan_build_survivors(ctx, dev, t->op, &t->shape, dtype, &plan);
    if (st == TAILOR_OK && tailor_plan_survivors(&plan) == 0) {
        tailor_plan_free(&plan);
        st = tailor_plan_build(ctx, dev, t->op, &t->shape, dtype, &plan);
    }
    if (st)
        return st;
    out->candidates = plan.count;
    out->survivors = tailor_plan_survivors(&plan);
    for (int v = 1; v < PLAN_CLASSES; v++)
        out->refused[v] = plan.by_verdict[v];
    int sm = plan.dev.cc_major * 10 + plan.dev.cc_minor;
    for (int i = 0; i < plan.nentries && st == TAILOR_OK; i++) {
        const tailor_plan_entry *e = &plan.entries[i];
        if (e->verdict != TAILOR_FITS)
            continue;
        char name[256];
        tailor_gen_kernel_name(plan.op->name, e->template_name, sm, tailor_dtype_name(dtype),
                               e->launch.defines, e->launch.ndefines, name, sizeof name);
        if (name_set_add(kernels, name))
            st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "plan: out of memory");
    }
    if (tailor_plan_survivors(&plan) == 0)
        pick_example(&plan, out->refused, out->example, sizeof out->example);
    tailor_plan_free(&plan);
    return st;
}

static void print_shape_text(const tailor_tune_target *t, const shape_plan *sp)
{
    char shape[256];
    tailor_shape_format(&t->shape, shape, sizeof shape);
    printf("%-18s %-64s %4d of %4d survive", t->op, shape, sp->survivors, sp->candidates);
    if (sp->survivors == 0) {
        const char *sep = " (";
        for (int v = 1; v < PLAN_CLASSES; v++)
            if (sp->refused[v]) {
                printf("%s%s %d", sep, tailor_verdict_name((tailor_verdict)v), sp->refused[v]);
                sep = ", ";
            }
        printf("%s\n    nearest: %s", *sep == ',' ? ")" : "", sp->example);
    }
    printf("\n");
}

static cJSON *shape_json(const tailor_tune_target *t, const shape_plan *sp)
{
    char shape[256];
    tailor_shape_format(&t->shape, shape, sizeof shape);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", t->op);
    cJSON_AddStringToObject(o, "shape", shape);
    cJSON_AddNumberToObject(o, "candidates", sp->candidates);
    cJSON_AddNumberToObject(o, "survivors", sp->survivors);
    cJSON *r = cJSON_AddObjectToObject(o, "refused");
    for (int v = 1; v < PLAN_CLASSES; v++)
        if (sp->refused[v])
            cJSON_AddNumberToObject(r, tailor_verdict_name((tailor_verdict)v), sp->refused[v]);
    if (sp->survivors == 0)
        cJSON_AddStringToObject(o, "nearest", sp->example);
    return o;
}

/* ---- the model's GPU memory, from the loader's dry pass ---- */

#define PLAN_POSITIONS 4096
/* What the driver, a CUDA context and the kernels' workspaces keep of a card's memory (a 24 GB
 * L4 reports ~22.5 GB free to a fresh process): the plan's "fits" is against the rest. */
#define PLAN_CONTEXT_GB 2.0

/* One load's memory: as the weights are (16-bit, or the checkpoint's own W4A16), or the smallest
 * (--quantize w4a16 and --quantize-head). */
typedef struct memory_plan {
    tailor_gemma4_gpu_memory as_is, smallest;
    const char *smallest_flags;
} memory_plan;

static tailor_status plan_memory(tailor_ctx *ctx, const char *preset, const char *model,
                                 memory_plan *out)
{
    tailor_gemma4_config *cfg = calloc(1, sizeof *cfg);
    tailor_gemma4 *m = NULL;
    if (!cfg)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    tailor_status st = preset ? tailor_gemma4_preset(ctx, preset, cfg)
                              : tailor_gemma4_open(ctx, model, &m);
    if (st == TAILOR_OK && m)
        *cfg = *tailor_gemma4_get_config(m);
    int int4 = m && tailor_gemma4_is_w4a16(m);
    tailor_gemma4_gpu_opts o = {.max_tokens = PLAN_POSITIONS};
    if (st == TAILOR_OK)
        st = tailor_gemma4_gpu_memory_need(ctx, cfg, m, &o, &out->as_is);
    o.quantize = !int4;
    o.quantize_head = 1;
    if (st == TAILOR_OK)
        st = tailor_gemma4_gpu_memory_need(ctx, cfg, m, &o, &out->smallest);
    out->smallest_flags = int4 ? "--quantize-head" : "--quantize w4a16 --quantize-head";
    tailor_gemma4_close(m);
    free(cfg);
    return st;
}

static double gpu_gb(const tailor_gemma4_gpu_memory *n)
{
    return (double)(n->weights + n->kv + n->acts) / 1e9;
}

static void print_memory_text(const tailor_device_info *dev, const memory_plan *mp)
{
    const tailor_gemma4_gpu_memory *a = &mp->as_is, *b = &mp->smallest;
    printf("memory at %d positions: as loaded %.2f GB (weights %.2f, KV cache %.2f, activations "
           "%.2f)", PLAN_POSITIONS, gpu_gb(a), (double)a->weights / 1e9, (double)a->kv / 1e9,
           (double)a->acts / 1e9);
    if (a->ple_table)
        printf(" + the PLE table %.2f GB (on the device where it fits beside the rest, else on "
               "the host)", (double)a->ple_table / 1e9);
    printf("; %s %.2f GB (weights %.2f)", mp->smallest_flags, gpu_gb(b),
           (double)b->weights / 1e9);
    if (dev->mem_bytes > 0) { /* the driver and a CUDA context keep some of it */
        double have = (double)dev->mem_bytes / 1e9, room = have - PLAN_CONTEXT_GB;
        printf("; %s has %.1f GB in all, ~%.1f GB for a model%s", dev->name, have, room,
               gpu_gb(a) > room ? (gpu_gb(b) > room ? ": neither fits" : ": as loaded does not fit")
                                : "");
    }
    printf("\n");
}

static cJSON *memory_json(const tailor_gemma4_gpu_memory *n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "weights", (double)n->weights);
    cJSON_AddNumberToObject(o, "kv_cache", (double)n->kv);
    cJSON_AddNumberToObject(o, "activations", (double)n->acts);
    cJSON_AddNumberToObject(o, "ple_table", (double)n->ple_table);
    return o;
}

static void add_memory_json(cJSON *root, const tailor_device_info *dev, const memory_plan *mp)
{
    cJSON *o = cJSON_AddObjectToObject(root, "memory");
    cJSON_AddNumberToObject(o, "positions", PLAN_POSITIONS);
    cJSON_AddItemToObject(o, "as_loaded", memory_json(&mp->as_is));
    cJSON_AddItemToObject(o, "smallest", memory_json(&mp->smallest));
    cJSON_AddStringToObject(o, "smallest_flags", mp->smallest_flags);
    cJSON_AddNumberToObject(o, "device_bytes", (double)dev->mem_bytes);
}

/* Plans every shape of the model's list; prints them (text or JSON) and returns the number of
 * shapes without a survivor, or -1 with the error in ctx. */
static int plan_model(tailor_ctx *ctx, const tailor_device_info *dev, const char *preset,
                      const char *model, tailor_dtype dtype, int json, int quiet)
{
    tailor_tune_target *targets = NULL;
    int n = 0, empty = 0, survivors = 0;
    name_set kernels = {0};
    if (tailor_tune_targets(ctx, preset, model, &targets, &n))
        return -1;
    cJSON *root = json ? cJSON_CreateObject() : NULL, *arr = NULL;
    if (root) {
        cJSON_AddStringToObject(root, "device", dev->short_name[0] ? dev->short_name : dev->name);
        cJSON_AddStringToObject(root, "device_name", dev->name);
        cJSON_AddStringToObject(root, "model", preset ? preset : model);
        cJSON_AddStringToObject(root, "dtype", tailor_dtype_name(dtype));
        arr = cJSON_AddArrayToObject(root, "shapes");
    }
    for (int i = 0; i < n; i++) {
        shape_plan sp;
        if (plan_one_shape(ctx, dev, &targets[i], dtype, &sp, &kernels)) {
            empty = -1;
            break;
        }
        empty += sp.survivors == 0;
        survivors += sp.survivors;
        if (arr)
            cJSON_AddItemToArray(arr, shape_json(&targets[i], &sp));
        else if (!quiet || sp.survivors == 0)
            print_shape_text(&targets[i], &sp);
    }
    memory_plan mp;
    if (empty >= 0 && plan_memory(ctx, preset, model, &mp))
        empty = -1;
    if (root && empty >= 0) {
        cJSON_AddNumberToObject(root, "shapes_without_survivors", empty);
        cJSON_AddNumberToObject(root, "survivors", survivors);
        cJSON_AddNumberToObject(root, "kernels", kernels.n);
        add_memory_json(root, dev, &mp);
        char *text = cJSON_Print(root);
        if (text) {
            printf("%s\n", text);
            free(text);
        } else {
            tailor_set_error(ctx, TAILOR_ERR_NOMEM, "plan: out of memory");
            empty = -1;
        }
    } else if (empty >= 0) {
        print_memory_text(dev, &mp);
        printf("%s on %s (%s): %d kernel shapes, %d without a survivor; %d survivors, %d "
               "distinct kernels (a first boot compiles each once)\n", preset ? preset : model,
               dev->name, tailor_dtype_name(dtype), n, empty, survivors, kernels.n);
    }
    name_set_free(&kernels);
    cJSON_Delete(root);
    free(targets);
    return empty;
}

/* The device (profile or live) and the dtype: --dtype, else the device's (no bf16 datapath
 * below sm_80). */
static tailor_status resolve_device(tailor_ctx *ctx, const char *device, const char *dtype_text,
                                    tailor_device_info *dev, tailor_dtype *dtype)
{
    tailor_status st = tailor_device_resolve(ctx, device, dev);
    if (st == TAILOR_OK && dtype_text)
        st = tailor_dtype_parse(ctx, dtype_text, dtype);
    else if (st == TAILOR_OK)
        *dtype = dev->kind == TAILOR_DEVICE_GPU && dev->cc_major < 8 ? TAILOR_DTYPE_F16
                                                                     : TAILOR_DTYPE_BF16;
    return st;
}

static int plan_model_main(const char *device, const char *preset, const char *model,
                           const char *dtype_text, int json, int quiet)
{
    tailor_ctx *ctx = cli_ctx();
    tailor_device_info dev;
    tailor_dtype dtype;
    tailor_status st = resolve_device(ctx, device, dtype_text, &dev, &dtype);
    int empty = st ? -1 : plan_model(ctx, &dev, preset, model, dtype, json, quiet);
    int rc = empty < 0 ? cli_fail(ctx, tailor_ctx_status(ctx)) : empty > 0;
    if (empty < 0 && tailor_ctx_status(ctx) == TAILOR_ERR_MISUSE)
        rc = 2;
    tailor_ctx_destroy(ctx);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'}, {"op", required_argument, NULL, 'o'},
        {"shape", required_argument, NULL, 's'},  {"dtype", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},         {"quiet", no_argument, NULL, 'q'},
        {"compile", no_argument, NULL, 'c'},      {"help", no_argument, NULL, 'h'},
        {"dump", required_argument, NULL, 'D'},   {"ptx", no_argument, NULL, 'P'},
        {"preset", required_argument, NULL, 'p'}, {"model", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *op = NULL, *shape_text = NULL, *dtype_text = NULL, *dump = NULL;
    const char *preset = NULL, *model = NULL;
    int json = 0, quiet = 0, compile = 0, ptx = 0, c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'o': op = optarg; break;
        case 's': shape_text = optarg; break;
        case 't': dtype_text = optarg; break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        case 'c': compile = 1; break;
        case 'D': dump = optarg; compile = 1; break;
        case 'P': ptx = 1; break;
        case 'p': preset = optarg; break;
        case 'm': model = optarg; break;
        case 'h': usage(); return 0;
        default: return cli_bad_flag("plan", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("plan", "unexpected argument '%s'", argv[optind]);
    if ((preset != NULL) + (model != NULL) + (op != NULL || shape_text != NULL) > 1)
        return cli_usage_error("plan", "give --op with --shape, or --preset, or --model");
    if (preset || model) {
        if (!device)
            return cli_usage_error("plan", "--device is required");
        if (compile || ptx)
            return cli_usage_error("plan", "--compile, --dump and --ptx take one --op and --shape");
        return plan_model_main(device, preset, model, dtype_text, json, quiet);
    }
    if (!device || !op || !shape_text)
        return cli_usage_error("plan", "--device, --op and --shape are required");
    if (ptx && !dump)
        return cli_usage_error("plan", "--ptx writes beside --dump's cubins: give --dump DIR");
    struct stat dir_st;
    if (dump && (stat(dump, &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)))
        return cli_usage_error("plan", "--dump %s: not an existing directory", dump);
    tailor_ctx *ctx = cli_ctx();
    tailor_device_info dev;
    tailor_shape shape;
    tailor_dtype dtype;
    tailor_status st = resolve_device(ctx, device, dtype_text, &dev, &dtype);
    if (st == TAILOR_OK)
        st = tailor_shape_parse(ctx, shape_text, &shape);
    tailor_plan plan;
    if (st == TAILOR_OK)
        st = tailor_plan_build(ctx, &dev, op, &shape, dtype, &plan);
    if (st) {
        int rc = cli_fail(ctx, st);
        tailor_ctx_destroy(ctx);
        return st == TAILOR_ERR_MISUSE ? 2 : rc;
    }
    compiled_entry *comp = NULL;
    int failed = 0;
    if (compile && (failed = compile_survivors(ctx, &plan, dump, ptx, &comp)) < 0) {
        int rc = cli_fail(ctx, tailor_ctx_status(ctx));
        free(comp);
        tailor_plan_free(&plan);
        tailor_ctx_destroy(ctx);
        return rc;
    }
    if (json)
        print_json(&plan, comp);
    else
        print_text(&plan, comp, quiet);
    if (failed > 0)
        fprintf(stderr, "tailor plan: %d survivor(s) of %s failed to compile for sm_%d%d\n",
                failed, plan.op->name, plan.dev.cc_major, plan.dev.cc_minor);
    free(comp);
    tailor_plan_free(&plan);
    tailor_ctx_destroy(ctx);
    return failed > 0 ? 1 : 0;
}
