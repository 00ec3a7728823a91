/* instance.c — op instances on the GPU: check against the reference, and timing. */
#include "instance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

tailor_status tailor_instance_create(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_op *op,
                                     const tailor_shape *shape, tailor_dtype dtype, uint64_t seed,
                                     int with_reference, tailor_instance **out)
{
    *out = NULL;
    tailor_instance *inst = calloc(1, sizeof *inst);
    if (!inst)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    inst->op = op;
    inst->shape = *shape;
    inst->dtype = dtype;
    tailor_status st = op->describe(ctx, shape, dtype, &inst->bufs);
    if (st) {
        free(inst);
        return st;
    }
    for (int i = 0; i < inst->bufs.count; i++) {
        const tailor_buffer_spec *b = &inst->bufs.b[i];
        size_t bytes = b->count * tailor_dtype_size(b->dtype);
        inst->set_bytes += bytes;
        inst->host[i] = calloc(bytes ? bytes : 1, 1);
        if (b->role != TAILOR_BUF_IN)
            inst->ref[i] = calloc(b->count ? b->count : 1, sizeof(float));
        if (!inst->host[i] || (b->role != TAILOR_BUF_IN && !inst->ref[i])) {
            /* the error names the buffer before the instance (and b with it) is freed */
            tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory for buffer %s", b->name);
            tailor_instance_destroy(gpu, inst);
            return TAILOR_ERR_NOMEM;
        }
    }
    op->fill(&inst->shape, dtype, &inst->bufs, inst->host, seed);
    if (with_reference)
        st = op->reference(ctx, &inst->shape, dtype, &inst->bufs, inst->host, inst->ref);
    inst->nsets = 1;
    for (int i = 0; i < inst->bufs.count && st == TAILOR_OK; i++) {
        size_t bytes = inst->bufs.b[i].count * tailor_dtype_size(inst->bufs.b[i].dtype);
        st = tailor_gpu_alloc(ctx, gpu, bytes ? bytes : 1, &inst->dev[0][i]);
        if (st == TAILOR_OK && inst->bufs.b[i].role != TAILOR_BUF_OUT && bytes)
            st = tailor_gpu_upload(ctx, gpu, inst->dev[0][i], inst->host[i], bytes);
    }
    if (st) {
        tailor_instance_destroy(gpu, inst);
        return st;
    }
    *out = inst;
    return TAILOR_OK;
}

void tailor_instance_destroy(tailor_gpu *gpu, tailor_instance *inst)
{
    if (!inst)
        return;
    for (int s = 0; s < inst->nsets; s++)
        for (int i = 0; i < inst->bufs.count; i++)
            tailor_gpu_free(gpu, inst->dev[s][i]);
    for (int i = 0; i < inst->bufs.count; i++) {
        free(inst->host[i]);
        free(inst->ref[i]);
    }
    tailor_gpu_unload_kernel(gpu, &inst->spacer);
    free(inst);
}

tailor_status tailor_instance_rotate(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst)
{
    const tailor_device_info *d = tailor_gpu_info(gpu);
    double want = 2.0 * (double)d->l2_bytes + 1.0;
    int sets = (int)ceil(want / (double)(inst->set_bytes ? inst->set_bytes : 1));
    if (sets > TAILOR_MAX_ROTATION)
        sets = TAILOR_MAX_ROTATION;
    if (sets < 2)
        sets = 2;
    tailor_status st = TAILOR_OK;
    for (int s = inst->nsets; s < sets && st == TAILOR_OK; s++) {
        for (int i = 0; i < inst->bufs.count && st == TAILOR_OK; i++) {
            size_t bytes = inst->bufs.b[i].count * tailor_dtype_size(inst->bufs.b[i].dtype);
            st = tailor_gpu_alloc(ctx, gpu, bytes ? bytes : 1, &inst->dev[s][i]);
            if (st == TAILOR_OK && bytes)
                st = tailor_gpu_copy(ctx, gpu, inst->dev[s][i], inst->dev[0][i], bytes);
            else if (st) {
                inst->nsets = s + 1; /* free what exists */
                return st;
            }
        }
        inst->nsets = s + 1;
    }
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, gpu);
    return st;
}

tailor_status tailor_workspace_create(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_launch *l,
                                      tailor_workspace *ws)
{
    memset(ws, 0, sizeof *ws);
    for (int i = 0; i < l->nworkspace; i++) {
        size_t bytes = (size_t)(l->workspace[i].bytes > 0 ? l->workspace[i].bytes : 1);
        memcpy(ws->names[i], l->workspace[i].name, sizeof ws->names[i]);
        tailor_status st = tailor_gpu_alloc(ctx, gpu, bytes, &ws->ptr[i]);
        if (st == TAILOR_OK)
            st = tailor_gpu_memset8(ctx, gpu, ws->ptr[i], 0, bytes);
        ws->count = i + 1;
        if (st) {
            tailor_workspace_destroy(gpu, ws);
            return st;
        }
    }
    return ws->count ? tailor_gpu_sync(ctx, gpu) : TAILOR_OK;
}

void tailor_workspace_destroy(tailor_gpu *gpu, tailor_workspace *ws)
{
    for (int i = 0; i < ws->count; i++)
        tailor_gpu_free(gpu, ws->ptr[i]);
    ws->count = 0;
}

tailor_status tailor_bind_args(tailor_ctx *ctx, const tailor_launch *l, const tailor_instance *inst,
                               int set, const tailor_workspace *ws, tailor_bound_args *out)
{
    for (int a = 0; a < l->nargs; a++) {
        const tailor_arg *arg = &l->args[a];
        switch (arg->kind) {
        case TAILOR_ARG_BUFFER: {
            int found = 0;
            for (int i = 0; i < inst->bufs.count && !found; i++) {
                if (strcmp(inst->bufs.b[i].name, arg->name) == 0) {
                    out->values[a].p = inst->dev[set][i];
                    found = 1;
                }
            }
            for (int i = 0; i < ws->count && !found; i++) {
                if (strcmp(ws->names[i], arg->name) == 0) {
                    out->values[a].p = ws->ptr[i];
                    found = 1;
                }
            }
            if (!found)
                return tailor_set_error(ctx, TAILOR_ERR_LUA,
                                        "argument %d names buffer '%s', which op %s does not "
                                        "have and no workspace declares",
                                        a + 1, arg->name, inst->op->name);
            break;
        }
        case TAILOR_ARG_I32: out->values[a].i32 = (int32_t)arg->i; break;
        case TAILOR_ARG_I64: out->values[a].i64 = (int64_t)arg->i; break;
        case TAILOR_ARG_F32: out->values[a].f32 = (float)arg->f; break;
        }
        out->ptrs[a] = &out->values[a];
    }
    return TAILOR_OK;
}

static tailor_status launch_set(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                tailor_kernel *k, const tailor_launch *l,
                                const tailor_workspace *ws, int set)
{
    tailor_bound_args args;
    tailor_status st = tailor_bind_args(ctx, l, inst, set, ws, &args);
    if (st)
        return st;
    return tailor_gpu_launch(ctx, gpu, k, l->grid, l->block, (unsigned)l->smem_dynamic, args.ptrs);
}

tailor_status tailor_instance_check(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                    tailor_kernel *k, const tailor_launch *l,
                                    const tailor_workspace *ws)
{
    tailor_status st = TAILOR_OK;
    for (int i = 0; i < inst->bufs.count && st == TAILOR_OK; i++) {
        const tailor_buffer_spec *b = &inst->bufs.b[i];
        size_t bytes = b->count * tailor_dtype_size(b->dtype);
        if (b->role == TAILOR_BUF_OUT)
            st = tailor_gpu_memset8(ctx, gpu, inst->dev[0][i], 0xff, bytes); /* NaN in fp16/bf16/fp32 */
        else if (b->role == TAILOR_BUF_INOUT)
            st = tailor_gpu_upload(ctx, gpu, inst->dev[0][i], inst->host[i], bytes);
    }
    if (st == TAILOR_OK)
        st = launch_set(ctx, gpu, inst, k, l, ws, 0);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, gpu);
    if (st)
        return st;
    for (int i = 0; i < inst->bufs.count; i++) {
        const tailor_buffer_spec *b = &inst->bufs.b[i];
        if (b->role == TAILOR_BUF_IN)
            continue;
        size_t bytes = b->count * tailor_dtype_size(b->dtype);
        void *got = malloc(bytes ? bytes : 1);
        if (!got)
            return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
        st = tailor_gpu_download(ctx, gpu, got, inst->dev[0][i], bytes);
        if (st == TAILOR_OK)
            st = tailor_op_compare(ctx, b, got, inst->ref[i]);
        free(got);
        if (st)
            return st;
    }
    return TAILOR_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- the spacer (TAILOR_TIMING_METHOD_SPACER, space.h) ---------------------------------------- */

static const char spacer_source[] =
    "extern \"C\" __global__ void tailor_timing_spacer(long long ns)\n"
    "{\n"
    "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "    unsigned long long t0, t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "    do\n"
    "        asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    while ((long long)(t - t0) < ns);\n"
    "}\n";

static tailor_status spacer_launch(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst)
{
    static const unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    long long ns = TAILOR_SPACER_NS;
    void *args[] = {&ns};
    return tailor_gpu_launch(ctx, gpu, &inst->spacer, grid, block, 0, args);
}

static tailor_status capture_batch(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                   tailor_kernel *k, const tailor_launch *l,
                                   const tailor_workspace *ws, int per_batch, int spaced,
                                   tailor_gpu_graph *g);

/* Compiles and loads the spacer for the live card once per instance, and times its own chain. */
static tailor_status spacer_ready(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                  int per_batch)
{
    if (inst->spacer.fn)
        return TAILOR_OK;
    const tailor_device_info *live = tailor_gpu_info(gpu);
    tailor_compile_request req = {.source_name = "tailor_timing_spacer.cu",
                                  .source = spacer_source,
                                  .kernel_name = "tailor_timing_spacer",
                                  .sm = live->cc_major * 10 + live->cc_minor};
    tailor_compile_result r;
    tailor_status st = tailor_gen_compile(ctx, &req, &r);
    if (st == TAILOR_OK)
        st = tailor_gpu_load_kernel(ctx, gpu, r.image, "tailor_timing_spacer", &inst->spacer);
    tailor_compile_result_free(&r);
    if (st)
        return tailor_wrap_error(ctx, "the timing spacer");
    inst->spacer.pdl = 1;
    tailor_gpu_graph g = {0};
    double samples[9];
    st = capture_batch(ctx, gpu, inst, NULL, NULL, NULL, per_batch, 1, &g);
    if (st == TAILOR_OK)
        st = tailor_gpu_graph_launch(ctx, gpu, &g);
    if (st == TAILOR_OK)
        st = tailor_gpu_graph_time(ctx, gpu, &g, per_batch, 9, samples);
    tailor_gpu_graph_destroy(gpu, &g);
    if (st)
        return st;
    qsort(samples, 9, sizeof samples[0], cmp_double);
    inst->spacer_us = samples[4];
    return TAILOR_OK;
}

/* The launches of one timed batch, captured as a CUDA graph: replayed, they run back to back on
 * the GPU as the model's decode step does, where launching them one by one from the host would
 * time the host (~4 µs per driver launch on the H200's host, more than many kernels take). */
/* spaced: each launch followed by the spacer; k NULL: the spacers alone (their own chain). */
static tailor_status capture_batch(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                   tailor_kernel *k, const tailor_launch *l,
                                   const tailor_workspace *ws, int per_batch, int spaced,
                                   tailor_gpu_graph *g)
{
    tailor_status st = tailor_gpu_capture_begin(ctx, gpu);
    if (st)
        return st;
    for (int s = 0; s < per_batch && st == TAILOR_OK; s++) {
        if (k)
            st = launch_set(ctx, gpu, inst, k, l, ws, s % inst->nsets);
        if (st == TAILOR_OK && spaced)
            st = spacer_launch(ctx, gpu, inst);
    }
    if (st) {
        tailor_gpu_graph dropped;
        (void)tailor_gpu_capture_end(ctx, gpu, 0, &dropped); /* keeps the launch's message */
        return st;
    }
    return tailor_gpu_capture_end(ctx, gpu, 1, g);
}

/* One launch on each rotated set; *pass_us: the mean microseconds a launch from the second on
 * (host-launched: at least the driver's launch cost; the first may load the module). */
static tailor_status warm_up(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                             tailor_kernel *k, const tailor_launch *l, const tailor_workspace *ws,
                             double *pass_us)
{
    tailor_gpu_timer timer = {0};
    tailor_status st = launch_set(ctx, gpu, inst, k, l, ws, 0);
    if (st == TAILOR_OK)
        st = tailor_gpu_timer_create(ctx, gpu, &timer);
    if (st == TAILOR_OK)
        st = tailor_gpu_timer_start(ctx, gpu, &timer);
    for (int s = 1; s < inst->nsets && st == TAILOR_OK; s++)
        st = launch_set(ctx, gpu, inst, k, l, ws, s);
    float ms = 0;
    if (st == TAILOR_OK)
        st = tailor_gpu_timer_stop(ctx, gpu, &timer);
    if (st == TAILOR_OK)
        st = tailor_gpu_timer_elapsed_ms(ctx, &timer, &ms);
    *pass_us = 1000.0 * ms / (inst->nsets > 1 ? inst->nsets - 1 : 1);
    tailor_gpu_timer_destroy(gpu, &timer);
    return st;
}

/* The launches of one timed replay: one pass over the rotated sets, so that every launch finds
 * its data cold in L2 as the model's does (the sets span 2x L2, or TAILOR_MAX_ROTATION of them),
 * and enough launches for TIMED_REPLAY_US of work (pass_us, the warm-up's per-launch time: an
 * upper bound), so that the graph's own launch and the events are small beside it; at least
 * MIN_REPLAY_LAUNCHES, and no more than MAX_REPLAY_LAUNCHES beyond the pass. A first boot
 * spent most of its time replaying: 512 launches of a 1 µs kernel, 32 of a 250 µs one. */
#define TIMED_REPLAY_US 1000.0
#define MIN_REPLAY_LAUNCHES 4
#define MAX_REPLAY_LAUNCHES 32
static int replay_launches(const tailor_instance *inst, double pass_us)
{
    double want = pass_us > 0 ? ceil(TIMED_REPLAY_US / pass_us) : MAX_REPLAY_LAUNCHES;
    int n = want > MAX_REPLAY_LAUNCHES ? MAX_REPLAY_LAUNCHES : (int)want;
    if (n < MIN_REPLAY_LAUNCHES)
        n = MIN_REPLAY_LAUNCHES;
    return n > inst->nsets ? n : inst->nsets;
}

tailor_status tailor_instance_time(tailor_ctx *ctx, tailor_gpu *gpu, tailor_instance *inst,
                                   tailor_kernel *k, const tailor_launch *l,
                                   const tailor_workspace *ws, int batches, double give_up_us,
                                   double *median_us, double *spread_us, int *gave_up)
{
    enum { MAX_BATCHES = 64 };
    if (batches > MAX_BATCHES)
        batches = MAX_BATCHES;
    if (batches < 1)
        batches = 1;
    if (gave_up)
        *gave_up = 0;
    double pass_us = 0, t0 = tailor_now_seconds();
    tailor_status st = warm_up(ctx, gpu, inst, k, l, ws, &pass_us);
    inst->warm_s += tailor_now_seconds() - t0;
    int per_batch = replay_launches(inst, pass_us);
    if (st == TAILOR_OK && give_up_us > 0 && pass_us > give_up_us) {
        *median_us = pass_us;
        *spread_us = 0;
        if (gave_up)
            *gave_up = 1;
        return TAILOR_OK;
    }
    int spaced = k->pdl && tailor_timing_spacer(inst->op->name);
    if (st == TAILOR_OK && spaced)
        st = spacer_ready(ctx, gpu, inst, MAX_REPLAY_LAUNCHES);
    tailor_gpu_graph g = {0};
    t0 = tailor_now_seconds();
    if (st == TAILOR_OK)
        st = capture_batch(ctx, gpu, inst, k, l, ws, per_batch, spaced, &g);
    double t1 = tailor_now_seconds();
    inst->capture_s += t1 - t0;
    double samples[MAX_BATCHES];
    if (st == TAILOR_OK)
        st = tailor_gpu_graph_launch(ctx, gpu, &g); /* one untimed replay: caches warm */
    if (st == TAILOR_OK)
        st = tailor_gpu_graph_time(ctx, gpu, &g, per_batch, batches, samples);
    tailor_gpu_graph_destroy(gpu, &g);
    inst->replay_s += tailor_now_seconds() - t1;
    if (st)
        return st;
    for (int b = 0; b < batches && spaced; b++) /* the spacer's share, never below zero */
        samples[b] = samples[b] > inst->spacer_us ? samples[b] - inst->spacer_us : 0;
    qsort(samples, (size_t)batches, sizeof samples[0], cmp_double);
    double med = batches % 2 ? samples[batches / 2]
                             : 0.5 * (samples[batches / 2 - 1] + samples[batches / 2]);
    double dev[MAX_BATCHES];
    for (int b = 0; b < batches; b++)
        dev[b] = fabs(samples[b] - med);
    qsort(dev, (size_t)batches, sizeof dev[0], cmp_double);
    *median_us = med;
    *spread_us = 1.4826 * dev[batches / 2];
    return TAILOR_OK;
}
