/* test_gemma4_fixtures.c — the fp32 reference forward against transformers' float32 logits and
 * greedy continuations for every committed fixture in tests/fixtures/ (made by
 * tests/fixtures/make_fixtures.py). A fixture folder that exists but lacks a file fails; a
 * missing folder is reported and skipped (the whole test skips if none is present). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gemma4.h"
#include "op.h"
#include "sampler.h"
#include "test_gemma4_writer.h"
#include "testlib.h"

/* Tolerance. The fixtures are transformers' forward in float32 from the same bf16 weights the C
 * code reads (W4A16: from the dequantized bf16 values, which the C code reproduces bit for bit),
 * with the embedding scales set to the bf16 values both use. The two computations therefore
 * differ only in fp32 summation order and libm rounding (expf, tanhf, powf): ~1e-7 relative per
 * operation, grown through 5-6 layers, norms and the softcap. Measured on the committed fixtures
 * (transformers 5.17, eager attention): at most 1.3e-4 absolute on logits up to |22.5| (~6e-6
 * relative). We allow 1e-4 + 1e-4 * |ref| (3e-3 at |logit| 30): a comfortable margin over the
 * rounding noise, yet far below any semantic slip — bf16(sqrt(P)) vs sqrt(P) alone moves logits
 * by ~1e-3 on the golden test's model, and a wrong mask, RoPE pair, norm or source layer by
 * 1e-2 .. 1e1. */
#define ATOL 1e-4
#define RTOL 1e-4

static const char *const fixtures[] = {"e2b_flat", "keqv_flat", "e4b_nested", "e2b_w4a16",
                                       "e2b_w4a16_asym"};

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}


static int json_ids(const cJSON *arr, int32_t *out, int cap)
{
    int n = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e && n < cap; e = e->next)
        out[n++] = (int32_t)e->valuedouble;
    return n;
}

/* The fixture in folder dir, called name. Returns 1 when it ran (pass or fail), 0 when its
 * folder is absent. */
static int run_fixture_in(tailor_ctx *ctx, const char *name, const char *dir)
{
    char p[1200];
    if (!exists(dir)) {
        printf("%s: folder absent, not checked\n", name);
        return 0;
    }
    const char *need[] = {"config.json", "expected.json", "logits.bin"};
    int complete = 1;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, need[i]);
        CHECKF(exists(p), "%s: fixture folder exists but %s is missing (rerun make_fixtures.py)",
               name, need[i]);
        complete &= exists(p);
    }
    char st1[1200], st2[1200];
    snprintf(st1, sizeof st1, "%s/model.safetensors", dir);
    snprintf(st2, sizeof st2, "%s/model.safetensors.index.json", dir);
    CHECKF(exists(st1) || exists(st2), "%s: fixture folder has no safetensors", name);
    if (!complete || !(exists(st1) || exists(st2)))
        return 1;

    snprintf(p, sizeof p, "%s/expected.json", dir);
    char *ej = test_read_file(p, NULL);
    cJSON *e = ej ? cJSON_ParseWithOpts(ej, NULL, 0) : NULL;
    CHECKF(e != NULL, "%s: expected.json does not parse", name);
    if (!e) {
        free(ej);
        return 1;
    }
    int32_t prompt[4096], greedy[256];
    int T = json_ids(cJSON_GetObjectItemCaseSensitive(e, "prompt_ids"), prompt, 4096);
    int G = json_ids(cJSON_GetObjectItemCaseSensitive(e, "greedy_ids"), greedy, 256);
    const cJSON *gaps = cJSON_GetObjectItemCaseSensitive(e, "greedy_top2_gaps");

    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    size_t lbytes = 0;
    snprintf(p, sizeof p, "%s/logits.bin", dir);
    float *ref = (float *)test_read_file(p, &lbytes);
    if (m && ref) {
        int V = tailor_gemma4_get_config(m)->vocab;
        CHECKF(lbytes == (size_t)T * (size_t)V * 4, "%s: logits.bin holds %zu bytes, want %d x %d "
               "float32", name, lbytes, T, V);
        tailor_gemma4_cpu *st = NULL;
        tailor_gemma4_cpu_opts o = {.max_tokens = T + G};
        CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &o, &st));
        double max_d = 0, max_excess = 0, max_ref = 0;
        int bad_pos = -1;
        const float *lg = NULL;
        for (int t = 0; st && t < T && lbytes == (size_t)T * (size_t)V * 4; t++) {
            CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, st, prompt[t], &lg));
            if (!lg)
                break;
            for (int v = 0; v < V; v++) {
                double r = ref[(size_t)t * V + v], d = fabs((double)lg[v] - r);
                double excess = d - (ATOL + RTOL * fabs(r));
                if (d > max_d)
                    max_d = d;
                if (fabs(r) > max_ref)
                    max_ref = fabs(r);
                if (excess > max_excess) {
                    max_excess = excess;
                    bad_pos = t;
                }
            }
        }
        CHECKF(max_excess <= 0, "%s: prompt logits differ from transformers by up to %g (first "
               "bad position %d of %d)", name, max_d, bad_pos, T);
        /* greedy continuation: identical ids */
        int ng = 0, same = 1;
        for (int g = 0; lg && g < G; g++) {
            int32_t next = tailor_argmax(lg, V);
            ng++;
            if (next != greedy[g]) {
                double gap = gaps ? cJSON_GetArrayItem(gaps, g)->valuedouble : -1;
                CHECKF(0, "%s: greedy token %d is %d, transformers chose %d (its top-2 gap %g)",
                       name, g, next, greedy[g], gap);
                same = 0;
                break;
            }
            if (next == 1 || next == 106 || next == 50 || g + 1 == G)
                break;
            CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, st, next, &lg));
        }
        CHECKF(ng == G || !same, "%s: generated %d tokens, transformers %d", name, ng, G);
        printf("%s: %d prompt positions x %d vocab, max |logit - transformers| = %.3g (max |logit| "
               "%.3g); greedy %d ids %s%s\n", name, T, V, max_d, max_ref, G,
               same ? "identical" : "DIFFER",
               tailor_gemma4_is_w4a16(m) ? " (W4A16)" : "");
        tailor_gemma4_cpu_destroy(st);
    }
    free(ref);
    tailor_gemma4_close(m);
    cJSON_Delete(e);
    free(ej);
    return 1;
}

/* A committed fixture (tests/fixtures/name). */
static int run_fixture(tailor_ctx *ctx, const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", test_source_dir(), name);
    return run_fixture_in(ctx, name, dir);
}

/* e2b_w4a16_asym with three linears stored dense (tw_partly_dense: the dequantized values, so
 * transformers' logits still apply): the loader takes int4 and 16-bit linears side by side, and
 * the checkpoint it wrote has them where asked. */
static void check_partly_dense(tailor_ctx *ctx)
{
    char src[1024], dir[256], p[1300];
    snprintf(src, sizeof src, "%s/tests/fixtures/e2b_w4a16_asym", test_source_dir());
    if (!exists(src))
        return;
    const tw_rewrite *rw = tw_partly_dense();
    tw_tmpdir(dir, sizeof dir, "partly_dense");
    CHECKF(tw_write_asym_rewritten(ctx, dir, rw) == 0,
           "could not write e2b_w4a16_asym with dense linears into %s: %s", dir,
           tailor_ctx_message(ctx));
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    tailor_st *st = NULL;
    CHECK_OK(ctx, tailor_st_open(ctx, p, &st));
    for (int i = 0; st && rw[i].base; i++) {
        char dn[300], pn[300];
        snprintf(dn, sizeof dn, "%s.weight", rw[i].base);
        snprintf(pn, sizeof pn, "%s.weight_packed", rw[i].base);
        const tailor_st_tensor *d = tailor_st_find(st, dn);
        CHECKF(d && d->dtype == TAILOR_ST_BF16 && !tailor_st_find(st, pn),
               "partly dense: %s is not a BF16 %s alone", rw[i].base, dn);
    }
    CHECKF(st && tailor_st_find(st, "model.layers.0.self_attn.q_proj.weight_packed"),
           "partly dense: layer 0's q lost its int4 weights");
    tailor_st_close(st);
    run_fixture_in(ctx, "e2b_w4a16_asym (k, gate, o dense)", dir);
    tw_rmdir(dir);
}

/* e2b_w4a16_asym with weight_g_idx added (tw_regrouped: each group split in two that share its
 * scale, so the dequantized values and transformers' logits stay): the CPU reference reads the
 * orders, and the GPU model's dry pass (no GPU needed) keeps each int4 in its order where the
 * groups are even — a stack of three or two with one order, gathered inputs — and dequantizes
 * the uneven one. */
static void check_regrouped(tailor_ctx *ctx)
{
    char src[1024], dir[256], p[1300];
    snprintf(src, sizeof src, "%s/tests/fixtures/e2b_w4a16_asym", test_source_dir());
    if (!exists(src))
        return;
    tw_tmpdir(dir, sizeof dir, "regrouped");
    CHECKF(tw_write_asym_rewritten(ctx, dir, tw_regrouped()) == 0,
           "could not write e2b_w4a16_asym regrouped into %s: %s", dir, tailor_ctx_message(ctx));
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    tailor_st *st = NULL;
    CHECK_OK(ctx, tailor_st_open(ctx, p, &st));
    tw_int4 q = {0};
    if (st)
        q = tw_int4_of(st, "model.layers.0.self_attn.q_proj");
    const tailor_st_tensor *gi = q.g_idx, *sc = q.scale;
    CHECKF(gi && sc && gi->numel == 64 && sc->ndim == 2 && sc->shape[1] == 2,
           "regrouped: layer 0's q has no g_idx [64] beside a scale of 2 groups");
    int first = 0, moved = 0;
    for (int c = 0; gi && c < 64; c++) {
        first += tailor_st_load_i64(gi, c) == 0;
        moved += tailor_st_load_i64(gi, c) != (c >= 32);
    }
    CHECKF(first == 32 && moved > 0, "regrouped: q's g_idx puts %d of 64 columns in group 0 and "
           "%d outside the column order", first, moved);
    tailor_st_close(st);
    run_fixture_in(ctx, "e2b_w4a16_asym (regrouped)", dir);

    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    tailor_gemma4_kernel_use *u = NULL;
    int n = 0;
    tailor_gemma4_gpu_opts o = {.max_tokens = 64};
    if (m)
        CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, tailor_gemma4_get_config(m), m, &o, &u, &n));
    const struct { const char *op, *shape, *what; } want[] = {
        {"w4a16_matmul", "m=1,n=1024,k=64,group=32", "layer 0's q|k|v stacked in one order"},
        {"w4a16_glu", "m=1,n=128,k=64,group=32", "layer 2's gate|up stacked in one order"},
        {"w4a16_matmul", "m=1,n=64,k=128,group=32", "layer 3's down in its order"},
        {"w4a16_matmul", "m=1,n=64,k=512,group=64", "layer 1's o in the committed order"},
        {"w4a16_matmul", "m=1,n=32,k=64,group=32", "layer 4's PLE gate in its order"},
        {"matmul", "m=1,n=64,k=512", "layer 0's uneven o dequantized"},
        {"gather_cols", "rows=1,cols=64", "the gathered one-row input of k=64"},
        {"gather_cols", "rows=1,cols=512", "the gathered one-row input of k=512"},
        {"gather_cols", "cols=128", "the gathered input of k=128"},
    };
    for (size_t i = 0; m && i < sizeof want / sizeof want[0]; i++)
        CHECKF(test_kernel_uses(u, n, want[i].op, want[i].shape) > 0,
               "regrouped: the GPU model runs no %s at %s (%s)", want[i].op, want[i].shape,
               want[i].what);
    free(u);
    tailor_gemma4_close(m);
    tw_rmdir(dir);
}

/* The CPU reference's int4 options: opts.quantize_head (of the GPU's --quantize-head) and
 * opts.quantize (of --quantize w4a16). head 1: the former. */
static tailor_gemma4_cpu_opts quantized_opts(int head, int sd)
{
    tailor_gemma4_cpu_opts o = {.max_tokens = 4};
    if (head)
        o.quantize_head = sd;
    else
        o.quantize = sd;
    return o;
}

/* opts.quantize_head / opts.quantize: the logits move by the int4 rounding (of the embedding:
 * a few percent of their scale at hidden 64, group 64; of the linears whose k has a group-128
 * layout: o and down in these fixtures), never by nothing, or (want_same: every linear already
 * int4) not at all; a scale dtype that is not 16-bit (int32 here) is refused. */
static void check_quantized(tailor_ctx *ctx, const char *name, int head, int want_same)
{
    const char *what = head ? "quantize_head" : "quantize";
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", test_source_dir(), name);
    if (!exists(dir))
        return;
    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    if (!m)
        return;
    int V = tailor_gemma4_get_config(m)->vocab;
    tailor_gemma4_cpu *plain = NULL, *q[2] = {NULL, NULL}, *bad = NULL;
    tailor_gemma4_cpu_opts o = {.max_tokens = 4};
    CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &o, &plain));
    tailor_dtype sd[2] = {TAILOR_DTYPE_BF16, TAILOR_DTYPE_F16};
    for (int i = 0; i < 2; i++) {
        tailor_gemma4_cpu_opts oq = quantized_opts(head, (int)sd[i]);
        CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &oq, &q[i]));
    }
    tailor_gemma4_cpu_opts ob = quantized_opts(head, (int)TAILOR_DTYPE_I32);
    CHECKF(tailor_gemma4_cpu_create(ctx, m, &ob, &bad) == TAILOR_ERR_MISUSE && !bad,
           "%s: %s with int32 scales is refused", name, what);
    tailor_ctx_clear(ctx);
    const int32_t toks[3] = {2, 17, 101 % V};
    double worst = 0;
    for (int t = 0; plain && q[0] && q[1] && t < 3; t++) {
        const float *lp = NULL, *lq[2] = {NULL, NULL};
        CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, plain, toks[t], &lp));
        float *keep = lp ? malloc((size_t)V * sizeof *keep) : NULL;
        if (keep)
            memcpy(keep, lp, (size_t)V * sizeof *keep);
        for (int i = 0; i < 2; i++) {
            CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, q[i], toks[t], &lq[i]));
            double md = 0, mr = 0;
            for (int v = 0; keep && lq[i] && v < V; v++) {
                md = fmax(md, fabs((double)lq[i][v] - keep[v]));
                mr = fmax(mr, fabs((double)keep[v]));
            }
            worst = fmax(worst, md);
            if (want_same)
                CHECKF(keep && lq[i] && md == 0, "%s: %s (%s scales) at position %d moves logits "
                       "by %.3g: every linear is int4 already", name, what,
                       tailor_dtype_name(sd[i]), t, md);
            else
                CHECKF(md > 1e-4 && md < 0.1 * mr + 0.05, "%s: %s (%s scales) at position %d "
                       "moves logits by %.3g (max |logit| %.3g): want a visible, small change",
                       name, what, tailor_dtype_name(sd[i]), t, md, mr);
        }
        free(keep);
    }
    printf("%s: %s (bf16 and fp16 scales): logits move by up to %.3g\n", name, what, worst);
    for (int i = 0; i < 2; i++)
        tailor_gemma4_cpu_destroy(q[i]);
    tailor_gemma4_cpu_destroy(plain);
    tailor_gemma4_close(m);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    int ran = 0;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        ran += run_fixture(ctx, fixtures[i]);
    check_partly_dense(ctx);
    check_regrouped(ctx);
    check_quantized(ctx, "e2b_flat", 1, 0);
    check_quantized(ctx, "e2b_flat", 0, 0);
    check_quantized(ctx, "e2b_w4a16", 0, 1);
    tailor_ctx_destroy(ctx);
    if (!ran)
        test_skip("no transformers fixture in tests/fixtures/ (run tests/fixtures/make_fixtures.py "
                  "on a machine with transformers >= 5.17)");
    return test_finish("test_gemma4_fixtures");
}
