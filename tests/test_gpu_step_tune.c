/* test_gpu_step_tune.c — another configuration run in place of a kernel's winner on a real GPU
 * (tailor_op_kernel_try / use_try / settle, tuner/kernels.h): an rmsnorm shape is tuned into a
 * fresh cache, its second-best timed configuration is loaded beside the winner, both are
 * launched on the same inputs (outputs poisoned first) and checked against the C reference,
 * dropping it leaves the cache alone, keeping it makes it the cache's winner (checked again from
 * the cache); tailor_step_tune with a stand-in step timer keeps the configuration the step
 * favours and only that, running each configuration it times. Skips (77) without a driver or a
 * device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda.h"
#include "half.h"
#include "kernels.h"
#include "step_tune.h"
#include "testlib.h"
#include "tuner.h"

#define SHAPE "rows=3,cols=1536"

/* The op's buffers on the device, filled once; outputs compared with the reference. */
typedef struct dev_inst {
    test_op_inst in;
    CUdeviceptr d[TAILOR_OP_MAX_BUFFERS];
    tailor_binding bind[TAILOR_OP_MAX_BUFFERS];
} dev_inst;

static int dev_inst_make(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_op *op, tailor_dtype dt,
                         dev_inst *di)
{
    memset(di, 0, sizeof *di);
    if (!test_op_inst_make(ctx, op, SHAPE, dt, &di->in))
        return 0;
    op->fill(&di->in.shape, dt, &di->in.bufs, di->in.host, 7);
    if (op->reference(ctx, &di->in.shape, dt, &di->in.bufs, di->in.host, di->in.ref))
        return 0;
    for (int i = 0; i < di->in.bufs.count; i++) {
        const tailor_buffer_spec *b = &di->in.bufs.b[i];
        size_t bytes = b->count * tailor_dtype_size(b->dtype);
        if (tailor_gpu_alloc(ctx, gpu, bytes, &di->d[i]) ||
            tailor_gpu_upload(ctx, gpu, di->d[i], di->in.host[i], bytes))
            return 0;
        di->bind[i] = (tailor_binding){b->name, di->d[i]};
    }
    return 1;
}

static void dev_inst_free(tailor_gpu *gpu, dev_inst *di)
{
    for (int i = 0; i < di->in.bufs.count; i++)
        tailor_gpu_free(gpu, di->d[i]);
    test_op_inst_free(&di->in);
}

static float as_float(tailor_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case TAILOR_DTYPE_F16: return tailor_f16_to_f32(((const uint16_t *)p)[i]);
    case TAILOR_DTYPE_BF16: return tailor_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* Launches k on di, its outputs first filled with NaN (so a launch that writes nothing fails),
 * and returns the worst |diff| / tolerance over them (inf on error). */
static double launch_and_compare(tailor_ctx *ctx, tailor_gpu *gpu, tailor_kernels *ks,
                                 tailor_op_kernel *k, dev_inst *di)
{
    for (int i = 0; i < di->in.bufs.count; i++) {
        const tailor_buffer_spec *b = &di->in.bufs.b[i];
        if (b->role != TAILOR_BUF_IN &&
            tailor_gpu_memset8(ctx, gpu, di->d[i], 0xff, b->count * tailor_dtype_size(b->dtype)))
            return INFINITY;
    }
    if (tailor_op_kernel_launch(ctx, ks, k, &di->in.shape, di->bind, di->in.bufs.count) ||
        tailor_gpu_sync(ctx, gpu))
        return INFINITY;
    double worst = 0;
    for (int i = 0; i < di->in.bufs.count; i++) {
        const tailor_buffer_spec *b = &di->in.bufs.b[i];
        if (b->role == TAILOR_BUF_IN)
            continue;
        size_t bytes = b->count * tailor_dtype_size(b->dtype);
        void *got = malloc(bytes);
        if (!got || tailor_gpu_download(ctx, gpu, got, di->d[i], bytes)) {
            free(got);
            return INFINITY;
        }
        for (size_t e = 0; e < b->count; e++) {
            double r = test_tol_ratio(b, as_float(b->dtype, got, e), di->in.ref[i][e]);
            if (!(r <= worst)) /* NaN counts as worst */
                worst = isnan(r) ? INFINITY : r;
        }
        free(got);
    }
    return worst;
}

/* A tailor_step_timer standing in for a model's step: it launches k (checked against the
 * reference) and reports 1,000 us when k runs the favoured configuration, else 1,100. */
typedef struct fake_step {
    tailor_gpu *gpu;
    tailor_kernels *ks;
    tailor_op_kernel *k;
    dev_inst *di;
    char favour[512];
    int calls, favoured;
    double worst;
} fake_step;

static tailor_status fake_timer(tailor_ctx *ctx, void *user, double *us)
{
    fake_step *f = user;
    double r = launch_and_compare(ctx, f->gpu, f->ks, f->k, f->di);
    f->worst = r > f->worst || isnan(r) ? r : f->worst;
    int fav = strcmp(tailor_op_kernel_describe(f->k), f->favour) == 0;
    f->favoured += fav;
    f->calls++;
    *us = fav ? 1000.0 : 1100.0;
    return TAILOR_OK;
}

/* tailor_step_tune over the one kernel k with its one alternative, the step favouring `favour`;
 * returns the result. */
static tailor_step_tune_result step_tune_favouring(tailor_ctx *ctx, fake_step *f,
                                                   tailor_cache *cache, const char *favour)
{
    tailor_step_kernel list[1] = {{f->k, 5.0}};
    tailor_step_tune_options o = {.alternatives = 1, .within = 100.0, .pairs = 3};
    tailor_step_tune_result r;
    snprintf(f->favour, sizeof f->favour, "%s", favour);
    f->calls = f->favoured = 0;
    f->worst = 0;
    CHECK_OK(ctx, tailor_step_tune(ctx, f->ks, cache, list, 1, fake_timer, f, &o, &r));
    CHECKF(f->calls == 4 + 2 * 3 + 4, "%d step timings (4 before, 3 pairs, 4 after)", f->calls);
    CHECKF(f->worst <= 1, "a configuration launched while step tuning: worst |diff|/tol %g",
           f->worst);
    CHECK(r.kernels == 1 && r.tried == 1 && r.failed == 0);
    return r;
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    tailor_gpu *gpu = test_gpu_or_skip(ctx, "test_gpu_step_tune");
    char dir[] = "/tmp/tailor_test_gpu_step_tune_XXXXXX", path[600];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/cache.sqlite", dir);
    const tailor_device_info *info = tailor_gpu_info(gpu);
    tailor_dtype dt = tailor_dtype_for_cc(info->cc_major);
    const tailor_op *op = tailor_op_find("rmsnorm");
    tailor_cache *cache = NULL;
    tailor_kernels *ks = NULL;
    tailor_op_kernel *k = NULL;
    tailor_shape shape;
    tailor_tune_options o = {.seed = 11};
    tailor_tune_result tr;
    CHECK_OK(ctx, tailor_cache_open(ctx, path, &cache));
    CHECK_OK(ctx, tailor_shape_parse(ctx, SHAPE, &shape));
    CHECK_OK(ctx, tailor_tune(ctx, gpu, cache, "rmsnorm", &shape, dt, &o, &tr));
    CHECKF(tr.timed >= 2, "%d configurations timed", tr.timed);
    CHECK_OK(ctx, tailor_kernels_create(ctx, gpu, cache, NULL, 0, &ks));
    CHECK_OK(ctx, tailor_kernels_get(ctx, ks, "rmsnorm", &shape, dt, &k));
    if (!k || tr.timed < 2)
        return test_finish("test_gpu_step_tune");

    /* the second-best configuration, from the trials the tuning recorded */
    tailor_op_kernel_keybuf kb;
    char own[1024], *tmpl[1] = {0}, *params[1] = {0};
    double alone[1], own_us = -1;
    int na = 0;
    tailor_op_kernel_config_json(k, own, sizeof own);
    CHECK_OK(ctx, tailor_op_kernel_key(ctx, ks, k, &kb));
    CHECK_OK(ctx, tailor_step_alternatives(ctx, cache, &kb.key, tailor_op_kernel_template(k), own,
                                           100.0, 1, tmpl, params, alone, &na, &own_us));
    CHECK(na == 1 && own_us > 0);
    if (na != 1)
        return test_finish("test_gpu_step_tune");
    char winner[512];
    snprintf(winner, sizeof winner, "%s", tailor_op_kernel_describe(k));

    dev_inst di;
    CHECK(dev_inst_make(ctx, gpu, op, dt, &di));
    double r_own = launch_and_compare(ctx, gpu, ks, k, &di);
    CHECKF(r_own <= 1, "the winner: worst |diff|/tol %g", r_own);

    /* dropped: the kernel and the cache as before */
    CHECK_OK(ctx, tailor_op_kernel_try(ctx, ks, k, tmpl[0], params[0]));
    CHECK(tailor_op_kernel_try(ctx, ks, k, tmpl[0], params[0]) == TAILOR_ERR_MISUSE);
    tailor_ctx_clear(ctx);
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) == 0); /* not used until asked */
    tailor_op_kernel_use_try(ks, k, 1);
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) != 0);
    double r_alt = launch_and_compare(ctx, gpu, ks, k, &di);
    CHECKF(r_alt <= 1, "the alternative %s: worst |diff|/tol %g", tailor_op_kernel_describe(k),
           r_alt);
    tailor_op_kernel_use_try(ks, k, 0);
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) == 0);
    CHECK_OK(ctx, tailor_op_kernel_settle(ctx, ks, k, 0, alone[0]));
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) == 0);
    tailor_cache_winner w;
    int found = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, cache, &kb.key, &w, &found));
    CHECK(found && strcmp(w.kernel_name, tr.kernel_name) == 0);
    if (found)
        tailor_cache_winner_free(&w);
    double r_again = launch_and_compare(ctx, gpu, ks, k, &di);
    CHECKF(r_again <= 1, "the winner after the drop: worst |diff|/tol %g", r_again);

    /* step tuning, the step favouring the winner: the alternative is timed in three pairs (in
     * three of the six timings it runs) and dropped */
    fake_step f = {gpu, ks, k, &di, "", 0, 0, 0};
    tailor_step_tune_result sr = step_tune_favouring(ctx, &f, cache, winner);
    CHECKF(sr.kept == 0 && f.favoured == 4 + 3 + 4, "kept %d, favoured timings %d", sr.kept,
           f.favoured);
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) == 0);
    found = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, cache, &kb.key, &w, &found));
    CHECK(found && strcmp(w.kernel_name, tr.kernel_name) == 0);
    if (found)
        tailor_cache_winner_free(&w);

    /* kept: the kernel runs it, the cache holds it, and it checks out from there */
    CHECK_OK(ctx, tailor_op_kernel_try(ctx, ks, k, tmpl[0], params[0]));
    CHECK_OK(ctx, tailor_op_kernel_settle(ctx, ks, k, 1, alone[0]));
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) != 0);
    char now[1024];
    tailor_op_kernel_config_json(k, now, sizeof now);
    CHECK(strcmp(now, params[0]) == 0);
    r_alt = launch_and_compare(ctx, gpu, ks, k, &di);
    CHECKF(r_alt <= 1, "kept: worst |diff|/tol %g", r_alt);
    found = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, cache, &kb.key, &w, &found));
    CHECK(found && strcmp(w.params_json, params[0]) == 0 && w.median_us == alone[0]);
    if (found) {
        CHECK_OK(ctx, tailor_tuner_verify_winner(ctx, gpu, &kb.key, &w));
        tailor_cache_winner_free(&w);
    }

    /* step tuning, the step favouring the first winner (now the alternative): it comes back,
     * in the kernel and in the cache */
    sr = step_tune_favouring(ctx, &f, cache, winner);
    CHECKF(sr.kept == 1 && f.favoured == 3 + 4, "kept %d, favoured timings %d", sr.kept,
           f.favoured);
    CHECK(strcmp(tailor_op_kernel_describe(k), winner) == 0);
    tailor_op_kernel_config_json(k, now, sizeof now);
    CHECK(strcmp(now, own) == 0);
    found = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, cache, &kb.key, &w, &found));
    CHECK(found && strcmp(w.params_json, own) == 0);
    if (found)
        tailor_cache_winner_free(&w);

    /* a configuration the space refuses at this shape: an error, and nothing changes */
    CHECK(tailor_op_kernel_try(ctx, ks, k, tailor_op_kernel_template(k), "{\"THREADS\":7}") != 0);
    tailor_ctx_clear(ctx);
    tailor_op_kernel_config_json(k, now, sizeof now);
    CHECK(strcmp(now, own) == 0);
    /* and the next try works (nothing of the refused one was left behind) */
    CHECK_OK(ctx, tailor_op_kernel_try(ctx, ks, k, tmpl[0], params[0]));
    CHECK_OK(ctx, tailor_op_kernel_settle(ctx, ks, k, 0, alone[0]));
    r_again = launch_and_compare(ctx, gpu, ks, k, &di);
    CHECKF(r_again <= 1, "after a refused try: worst |diff|/tol %g", r_again);

    dev_inst_free(gpu, &di);
    free(tmpl[0]);
    free(params[0]);
    tailor_kernels_destroy(ks);
    tailor_cache_close(cache);
    tailor_gpu_close(gpu);
    tailor_ctx_destroy(ctx);
    int rc = test_finish("test_gpu_step_tune");
    if (rc == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return rc;
}
