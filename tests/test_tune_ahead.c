/* test_tune_ahead.c — compiling ahead of a tuning run, without a GPU (the H200's profile stands
 * for the live card): it compiles exactly the candidates tailor_tune picks for each target (each
 * one then answered by the memo), skips a target whose winner the cache has (found by the key
 * alone: tailor_plan_space_hash equals the plan's, under the carveout of the process: the
 * fingerprint holds one that is not the default), and starts nothing under TAILOR_NO_COMPILE=1
 * or without a memo. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "device.h"
#include "gen.h"
#include "plan.h"
#include "testlib.h"
#include "tune_internal.h"
#include "tune_targets.h"
#include "tuner.h"

#define NTARGETS 3

static void make_targets(tailor_ctx *ctx, tailor_tune_target *t)
{
    static const char *const ops[NTARGETS] = {"rmsnorm", "rmsnorm", "w4a16_matmul"};
    static const char *const shapes[NTARGETS] = {"rows=1,cols=1536", "rows=8,cols=256,weight=0",
                                                 "m=1,n=256,k=512,group=128"};
    for (int i = 0; i < NTARGETS; i++) {
        snprintf(t[i].op, sizeof t[i].op, "%s", ops[i]);
        CHECK_OK(ctx, tailor_shape_parse(ctx, shapes[i], &t[i].shape));
    }
}

/* Every candidate tailor_tune would pick for target t, compiled through the memo: each must be a
 * copy (the ahead made it). Returns how many. */
static int picks_answered(tailor_ctx *ctx, const tailor_device_info *dev,
                          const tailor_tune_target *t, const tailor_tune_options *o)
{
    tailor_plan plan;
    CHECK_OK(ctx, tailor_plan_build(ctx, dev, t->op, &t->shape, TAILOR_DTYPE_BF16, &plan));
    int *idx = calloc((size_t)tailor_plan_survivors(&plan) + 1, sizeof *idx);
    int n = tune_pick(&plan, o, idx);
    for (int i = 0; i < n; i++) {
        const tailor_plan_entry *e = &plan.entries[idx[i]];
        char name[256];
        tailor_gen_kernel_name(t->op, e->template_name, 90, "bf16", e->launch.defines,
                               e->launch.ndefines, name, sizeof name);
        tailor_compile_result r;
        CHECK_OK(ctx, tailor_plan_compile(ctx, &plan, idx[i], 90, 0, name, o->memo, &r));
        CHECKF(r.reused, "%s %s: candidate %s was not compiled ahead", t->op, e->template_name,
               name);
        tailor_compile_result_free(&r);
    }
    free(idx);
    tailor_plan_free(&plan);
    return n;
}

/* tailor_plan_build_survivors (what tailor_tune and the ahead planner build) holds exactly the
 * survivors of tailor_plan_build, in its order, entry for entry, with the same counts. */
/* The ahead's plans: tailor_tune takes each target's plan from the planner instead of planning
 * it again. Each taken plan is the one tailor_tune would build (the same survivors, in the same
 * order), is handed out once, and only for the run's dtype; plans never taken are freed by stop
 * (ASan's leak check). */
static void check_plans_taken(tailor_ctx *ctx, const tailor_device_info *dev,
                              const tailor_tune_target *t, int n, const tailor_tune_options *o)
{
    tailor_tune_options mine = *o; /* its own memo: the caller's counts its compiles */
    mine.memo = tailor_compile_memo_create(TAILOR_COMPILE_MEMO_BYTES);
    tailor_compile_ahead *a = tailor_compile_ahead_start(dev, "/nonexistent/cache.sqlite", t, n,
                                                         TAILOR_DTYPE_BF16, &mine);
    CHECK(a != NULL);
    tailor_compile_ahead_wait(a);
    tailor_plan p;
    CHECK(!tailor_compile_ahead_take_plan(a, t[0].op, &t[0].shape, TAILOR_DTYPE_F16, &p));
    for (int i = 0; i < n - 1; i++) { /* the last one stays for stop to free */
        CHECKF(tailor_compile_ahead_take_plan(a, t[i].op, &t[i].shape, TAILOR_DTYPE_BF16, &p),
               "%s: no plan held", t[i].op);
        tailor_plan own;
        CHECK_OK(ctx, tailor_plan_build_survivors(ctx, dev, t[i].op, &t[i].shape,
                                                  TAILOR_DTYPE_BF16, &own));
        int same = own.nentries == p.nentries && own.count == p.count &&
                   strcmp(own.space_hash, p.space_hash) == 0;
        for (int e = 0; same && e < own.nentries; e++)
            same = strcmp(own.entries[e].template_name, p.entries[e].template_name) == 0 &&
                   memcmp(&own.entries[e].cfg, &p.entries[e].cfg, sizeof p.entries[e].cfg) == 0;
        CHECKF(same, "%s: the ahead's plan (%d survivors) is not tailor_tune's (%d)", t[i].op,
               p.nentries, own.nentries);
        tailor_plan_free(&own);
        tailor_plan_free(&p);
        CHECK(!tailor_compile_ahead_take_plan(a, t[i].op, &t[i].shape, TAILOR_DTYPE_BF16, &p));
    }
    CHECK(!tailor_compile_ahead_take_plan(NULL, t[0].op, &t[0].shape, TAILOR_DTYPE_BF16, &p));
    tailor_compile_ahead_stop(a, NULL);
    tailor_compile_memo_destroy(mine.memo);
}

static void check_survivors_only(tailor_ctx *ctx, const tailor_device_info *dev, const char *op,
                                 const char *shape_text, tailor_dtype dtype)
{
    tailor_shape shape;
    CHECK_OK(ctx, tailor_shape_parse(ctx, shape_text, &shape));
    tailor_plan all, fit;
    CHECK_OK(ctx, tailor_plan_build(ctx, dev, op, &shape, dtype, &all));
    CHECK_OK(ctx, tailor_plan_build_survivors(ctx, dev, op, &shape, dtype, &fit));
    int fits = tailor_plan_survivors(&fit), all_fit = tailor_plan_survivors(&all);
    CHECKF(all.nentries == all.count && fit.count == all.count && fits == all_fit &&
               fit.nentries == fits && fits > 0 && fits < fit.count,
           "%s %s: all %d entries of %d (%d fit), survivors-only %d entries of %d (%d fit)", op,
           shape_text, all.nentries, all.count, all_fit, fit.nentries, fit.count, fits);
    CHECKF(strcmp(all.space_hash, fit.space_hash) == 0, "%s %s: space hashes differ", op,
           shape_text);
    /* the defines compared through the kernel name (sorted there) and the workspace by count:
     * a space's `defines` and `workspace` tables come out of Lua in no fixed order */
    int j = 0, same = 1;
    for (int i = 0; i < all.nentries && j < fit.nentries; i++) {
        const tailor_plan_entry *a = &all.entries[i], *f = &fit.entries[j];
        if (a->verdict != TAILOR_FITS)
            continue;
        char na[256], nf[256];
        tailor_gen_kernel_name(op, a->template_name, 90, "bf16", a->launch.defines,
                               a->launch.ndefines, na, sizeof na);
        tailor_gen_kernel_name(op, f->template_name, 90, "bf16", f->launch.defines,
                               f->launch.ndefines, nf, sizeof nf);
        same &= f->verdict == TAILOR_FITS && strcmp(na, nf) == 0 &&
                memcmp(&a->cfg, &f->cfg, sizeof a->cfg) == 0 &&
                memcmp(&a->launch, &f->launch, offsetof(tailor_launch, nworkspace)) == 0 &&
                a->launch.nworkspace == f->launch.nworkspace &&
                memcmp(&a->launch.nfeatures, &f->launch.nfeatures,
                       offsetof(tailor_launch, ndefines) - offsetof(tailor_launch, nfeatures)) == 0;
        j++;
    }
    CHECKF(same && j == fit.nentries, "%s %s: the survivors-only entries differ from the full "
           "plan's survivors (%d of %d compared)", op, shape_text, j, fit.nentries);
    tailor_plan_free(&all);
    tailor_plan_free(&fit);
}

/* --where: tune_pick keeps exactly the survivors of the named template with the given values
 * (counted against the plan), none for a parameter no template has; malformed filters refused. */
static void check_where(tailor_ctx *ctx, const tailor_device_info *dev)
{
    tailor_shape shape;
    CHECK_OK(ctx, tailor_shape_parse(ctx, "m=16,n=12288,k=1536,group=128", &shape));
    tailor_plan plan;
    CHECK_OK(ctx, tailor_plan_build(ctx, dev, "w4a16_matmul", &shape, TAILOR_DTYPE_BF16, &plan));
    int expect = 0, survivors = tailor_plan_survivors(&plan);
    for (int i = 0; i < plan.nentries; i++) {
        const tailor_plan_entry *e = &plan.entries[i];
        int asmem = -1, rt = -1;
        for (int j = 0; j < e->cfg.nparams; j++) {
            if (strcmp(e->cfg.params[j].name, "ASMEM") == 0)
                asmem = atoi(e->cfg.params[j].value);
            if (strcmp(e->cfg.params[j].name, "RT") == 0)
                rt = atoi(e->cfg.params[j].value);
        }
        expect += e->verdict == TAILOR_FITS && strcmp(e->template_name, "w4a16_gemv_t") == 0 &&
                  asmem == 1 && rt == 1;
    }
    tailor_tune_filter f;
    CHECK_OK(ctx, tailor_tune_filter_parse(ctx, "template=w4a16_gemv_t,ASMEM=1,RT=1", &f));
    tailor_tune_options o = {.where = &f};
    int *idx = calloc((size_t)survivors + 1, sizeof *idx);
    int n = tune_pick(&plan, &o, idx);
    CHECKF(n == expect && n > 0 && n < survivors, "--where picked %d, %d expected of %d", n,
           expect, survivors);
    for (int i = 0; i < n; i++)
        CHECK(strcmp(plan.entries[idx[i]].template_name, "w4a16_gemv_t") == 0);
    CHECK_OK(ctx, tailor_tune_filter_parse(ctx, "NO_SUCH_PARAM=3", &f));
    CHECK(tune_pick(&plan, &o, idx) == 0);
    o.where = NULL;
    CHECK(tune_pick(&plan, &o, idx) == survivors);
    /* check_only alone checks every survivor, as verify_all: no random sample, no cached answer */
    tailor_tune_options sample = {.strategy = TAILOR_STRATEGY_RANDOM, .trials = 2, .seed = 3};
    CHECK(tune_pick(&plan, &sample, idx) == 2 && tune_uses_cache(&sample));
    sample.check_only = 1;
    CHECK(tune_pick(&plan, &sample, idx) == survivors && !tune_uses_cache(&sample));
    sample.check_only = 0;
    sample.where = &f;
    CHECK(!tune_uses_cache(&sample));
    free(idx);
    tailor_plan_free(&plan);
    static const char *const bad[] = {"", "template=", "template=a,template=b", "ASMEM=x", "ASMEM"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(tailor_tune_filter_parse(ctx, bad[i], &f) == TAILOR_ERR_MISUSE,
               "--where '%s' was accepted", bad[i]);
}

/* The carveout in the winner key: the default (unset, empty or "25") keys as before it was
 * part of the key, any other value adds "|carveout=V", a malformed one fails naming the
 * variable; winners under one carveout are not found under another. */
static void check_carveout_key(tailor_ctx *ctx, const tailor_device_info *h200)
{
    char dev[512], want[700], fp[600];
    tailor_device_fingerprint(h200, dev, sizeof dev);
    static const struct {
        const char *env, *suffix;
    } cases[] = {{NULL, ""}, {"", ""}, {"25", ""}, {"driver", "|carveout=driver"},
                 {"100", "|carveout=100"}, {"0", "|carveout=0"}, {"50", "|carveout=50"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *env = cases[i].env ? cases[i].env : "(unset)";
        if (cases[i].env)
            setenv("TAILOR_CARVEOUT", cases[i].env, 1);
        else
            unsetenv("TAILOR_CARVEOUT");
        CHECK_OK(ctx, tailor_tuner_fingerprint(ctx, h200, NULL, fp, sizeof fp));
        snprintf(want, sizeof want, "%s%s", dev, cases[i].suffix);
        CHECKF(strcmp(fp, want) == 0, "TAILOR_CARVEOUT=%s: fingerprint '%s', expected '%s'", env,
               fp, want);
        CHECKF(tailor_tuner_fingerprint_on(fp, dev), "TAILOR_CARVEOUT=%s: '%s' is not on '%s'",
               env, fp, dev);
        CHECK_OK(ctx, tailor_tuner_fingerprint(ctx, h200, tailor_device_profile_find("t4"), fp,
                                               sizeof fp));
        snprintf(want, sizeof want, "rehearse:t4@%s%s", dev, cases[i].suffix);
        CHECKF(strcmp(fp, want) == 0, "TAILOR_CARVEOUT=%s: rehearsal fingerprint '%s', expected "
               "'%s'", env, fp, want);
        CHECK(tailor_tuner_fingerprint_on(fp, dev));
    }
    /* a malformed value is refused by the key as by the kernel load, never read as the default */
    static const char *const bad[] = {"half", "101", "-1", "25x", "Driver"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("TAILOR_CARVEOUT", bad[i], 1);
        snprintf(fp, sizeof fp, "untouched");
        tailor_status s = tailor_tuner_fingerprint(ctx, h200, NULL, fp, sizeof fp);
        CHECKF(s == TAILOR_ERR_MISUSE && fp[0] == '\0' &&
                   strstr(tailor_ctx_message(ctx), "TAILOR_CARVEOUT='") &&
                   strstr(tailor_ctx_message(ctx), bad[i]),
               "TAILOR_CARVEOUT=%s: %s, fingerprint '%s', message '%s'", bad[i],
               tailor_status_name(s), fp, tailor_ctx_message(ctx));
        tailor_shape shape;
        CHECK_OK(ctx, tailor_shape_parse(ctx, "cols=1536,rows=1,weight=1", &shape));
        tailor_winner_key_text kt;
        tailor_cache_key key;
        CHECK(tailor_winner_key(ctx, h200, NULL, "rmsnorm", &shape, TAILOR_DTYPE_BF16, "00", &kt,
                                &key) == TAILOR_ERR_MISUSE);
    }
    unsetenv("TAILOR_CARVEOUT");
    /* which keys are this device's: any carveout, a rehearsal on it; not a longer field */
    snprintf(want, sizeof want, "%s|carveout=driver", dev);
    CHECK(tailor_tuner_fingerprint_on(want, dev));
    snprintf(want, sizeof want, "%s1", dev);
    CHECK(!tailor_tuner_fingerprint_on(want, dev));
    snprintf(want, sizeof want, "%s|7", dev);
    CHECK(!tailor_tuner_fingerprint_on(want, dev));
    CHECK(!tailor_tuner_fingerprint_on("NVIDIA A100-SXM4-80GB|sm_80|108|166912|13000|13.0", dev));
    CHECK(!tailor_tuner_fingerprint_on("rehearse:t4", dev));
}

/* Each strategy's name reads back as itself (the name `tune` logs); an unknown one is refused. */
static void check_strategy_names(tailor_ctx *ctx)
{
    for (int i = TAILOR_STRATEGY_EXHAUSTIVE; i <= TAILOR_STRATEGY_HALVING; i++) {
        tailor_strategy s = (tailor_strategy)-1;
        CHECK_OK(ctx, tailor_strategy_parse(ctx, tailor_strategy_name((tailor_strategy)i), &s));
        CHECKF(s == (tailor_strategy)i, "strategy %d read back as %d", i, (int)s);
    }
    CHECK(strcmp(tailor_strategy_name(TAILOR_STRATEGY_HALVING), "halving") == 0);
    CHECK(strcmp(tailor_strategy_name((tailor_strategy)7), "unknown") == 0);
    tailor_strategy s;
    CHECK(tailor_strategy_parse(ctx, "halve", &s) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "'halve'") != NULL);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    check_strategy_names(ctx);
    const tailor_device_info *h200 = tailor_device_profile_find("h200");
    check_survivors_only(ctx, h200, "w4a16_matmul", "m=16,n=12288,k=1536,group=128",
                         TAILOR_DTYPE_BF16);
    check_survivors_only(ctx, tailor_device_profile_find("t4"), "attention_decode",
                         "kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1",
                         TAILOR_DTYPE_F16);
    /* the ring's cluster sizes are defines of the space; the GEMV's launch depends on n */
    check_survivors_only(ctx, h200, "attention_decode",
                         "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1",
                         TAILOR_DTYPE_BF16);
    check_survivors_only(ctx, tailor_device_profile_find("a10g"), "matmul", "m=1,n=2560,k=1536",
                         TAILOR_DTYPE_BF16);
    CHECK(h200 != NULL);
    check_carveout_key(ctx, h200);
    check_where(ctx, h200);
    tailor_tune_target t[NTARGETS];
    make_targets(ctx, t);
    tailor_tune_options o = {.strategy = TAILOR_STRATEGY_RANDOM, .trials = 2, .seed = 7,
                             .jobs = 2};
    o.memo = tailor_compile_memo_create(TAILOR_COMPILE_MEMO_BYTES);

    check_plans_taken(ctx, h200, t, NTARGETS, &o);

    /* no cache file yet: every target is planned, its two picks compiled */
    tailor_compile_ahead *a = tailor_compile_ahead_start(h200, "/nonexistent/cache.sqlite", t,
                                                         NTARGETS, TAILOR_DTYPE_BF16, &o);
    CHECK(a != NULL);
    tailor_compile_ahead_wait(a);
    tailor_compile_ahead_stats st;
    tailor_compile_ahead_stop(a, &st);
    printf("ahead: %d targets, %d queued, %d compiled, %d reused, %d failed\n", st.targets,
           st.queued, st.compiled, st.reused, st.failed);
    CHECKF(st.targets == NTARGETS && st.failed == 0 && !st.full, "targets %d failed %d",
           st.targets, st.failed);
    int picked = 0;
    for (int i = 0; i < NTARGETS; i++)
        picked += picks_answered(ctx, h200, &t[i], &o);
    CHECKF(st.queued == picked && st.compiled + st.reused == picked && picked >= NTARGETS,
           "queued %d, compiled %d + reused %d, tailor_tune picks %d", st.queued, st.compiled,
           st.reused, picked);
    int hits, misses;
    size_t bytes;
    tailor_compile_memo_stats(o.memo, &hits, &misses, &bytes);
    CHECKF(misses == st.compiled, "the memo compiled %d, the ahead %d", misses, st.compiled);

    /* the key the ahead looks a target up by, without enumerating: the plan's space hash */
    for (int i = 0; i < NTARGETS; i++) {
        tailor_plan pl;
        char hex[65];
        CHECK_OK(ctx, tailor_plan_build(ctx, h200, t[i].op, &t[i].shape, TAILOR_DTYPE_BF16, &pl));
        CHECK_OK(ctx, tailor_plan_space_hash(ctx, t[i].op, hex));
        CHECKF(strcmp(hex, pl.space_hash) == 0, "%s: space hash %s, the plan's %s", t[i].op, hex,
               pl.space_hash);
        tailor_plan_free(&pl);
    }

    /* the same for every op the E2B preset tunes (the kernel set's warm-start lookups and the
     * ahead both find winners by this key): one target of each */
    tailor_tune_target *all = NULL;
    int nall = 0, ops = 0;
    CHECK_OK(ctx, tailor_tune_targets(ctx, "gemma-4-e2b", NULL, &all, &nall));
    for (int i = 0; i < nall; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(all[j].op, all[i].op) == 0;
        if (seen)
            continue;
        tailor_plan pl;
        tailor_shape completed;
        char hex[65] = "", mine[256], plans[256];
        CHECK_OK(ctx, tailor_plan_build(ctx, h200, all[i].op, &all[i].shape, TAILOR_DTYPE_BF16, &pl));
        CHECK_OK(ctx, tailor_plan_key(ctx, all[i].op, &all[i].shape, TAILOR_DTYPE_BF16, &completed,
                                      hex));
        tailor_shape_format(&completed, mine, sizeof mine);
        tailor_shape_format(&pl.shape, plans, sizeof plans);
        CHECKF(strcmp(hex, pl.space_hash) == 0 && strcmp(mine, plans) == 0,
               "%s: key %s %s, the plan's %s %s", all[i].op, mine, hex, plans, pl.space_hash);
        /* a loaded kernel keeps its shape as text; its key (tailor_op_kernel_key) parses and
         * formats it again, which must give the text the tuner stored */
        tailor_shape back;
        char again[256] = "";
        CHECK_OK(ctx, tailor_shape_parse(ctx, mine, &back));
        tailor_shape_format(&back, again, sizeof again);
        CHECKF(strcmp(again, mine) == 0, "%s: shape %s reads back as %s", all[i].op, mine, again);
        tailor_plan_free(&pl);
        ops++;
    }
    CHECKF(ops >= 16, "the E2B preset tunes %d ops", ops);
    free(all);
    /* a shape the op refuses is refused by the key as by a plan */
    tailor_shape bad, completed;
    char hex[65] = "";
    CHECK_OK(ctx, tailor_shape_parse(ctx, "m=1,n=64,k=100,group=128", &bad));
    CHECK(tailor_plan_key(ctx, "w4a16_matmul", &bad, TAILOR_DTYPE_BF16, &completed, hex) != TAILOR_OK);

    /* a cached winner: its target is skipped */
    char dir[] = "/tmp/tailor_ahead_XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cache.sqlite", dir);
    tailor_cache *cache = NULL;
    CHECK_OK(ctx, tailor_cache_open(ctx, path, &cache));
    tailor_plan plan;
    CHECK_OK(ctx, tailor_plan_build(ctx, h200, t[0].op, &t[0].shape, TAILOR_DTYPE_BF16, &plan));
    /* the one key tailor_tune writes and every lookup reads: its fields as the cache stores them */
    char fp[600], shape_text[256];
    CHECK_OK(ctx, tailor_tuner_fingerprint(ctx, h200, NULL, fp, sizeof fp));
    tailor_shape_format(&plan.shape, shape_text, sizeof shape_text);
    tailor_winner_key_text kt;
    tailor_cache_key key;
    CHECK_OK(ctx, tailor_winner_key(ctx, h200, NULL, t[0].op, &plan.shape, TAILOR_DTYPE_BF16,
                                    plan.space_hash, &kt, &key));
    CHECKF(strcmp(key.fingerprint, fp) == 0 && strcmp(key.op, t[0].op) == 0 &&
           strcmp(key.shape, shape_text) == 0 && strcmp(key.dtype, "bf16") == 0 &&
           strcmp(key.space_hash, plan.space_hash) == 0,
           "winner key %s | %s | %s | %s | %s", key.fingerprint, key.op, key.shape, key.dtype,
           key.space_hash);
    const tailor_device_info *t4 = tailor_device_profile_find("t4");
    tailor_winner_key_text rt;
    tailor_cache_key rkey;
    CHECK_OK(ctx, tailor_winner_key(ctx, h200, t4, t[0].op, &plan.shape, TAILOR_DTYPE_F16,
                                    plan.space_hash, &rt, &rkey));
    char rfp[700];
    snprintf(rfp, sizeof rfp, "rehearse:%s@%s", t4->short_name, fp);
    CHECKF(strcmp(rkey.fingerprint, rfp) == 0 && strcmp(rkey.dtype, "fp16") == 0,
           "rehearsed winner key %s %s", rkey.fingerprint, rkey.dtype);
    static unsigned char bin[16] = {1};
    tailor_cache_winner w = {.template_name = "rmsnorm", .kernel_name = "k",
                             .params_json = "{}", .launch_json = "{}", .binary_kind = "cubin",
                             .binary = bin, .binary_size = sizeof bin, .arch = "sm_90"};
    CHECK_OK(ctx, tailor_cache_put_winner(ctx, cache, &key, &w));
    tailor_plan_free(&plan);
    a = tailor_compile_ahead_start(h200, path, t, NTARGETS, TAILOR_DTYPE_BF16, &o);
    tailor_compile_ahead_wait(a);
    tailor_compile_ahead_stop(a, &st);
    CHECKF(st.targets == NTARGETS - 1 && st.compiled == 0 && st.reused == st.queued,
           "with target 0 cached: %d targets, %d compiled, %d reused of %d", st.targets,
           st.compiled, st.reused, st.queued);
    /* under another carveout the winner tuned under the default is not this process's */
    setenv("TAILOR_CARVEOUT", "driver", 1);
    a = tailor_compile_ahead_start(h200, path, t, NTARGETS, TAILOR_DTYPE_BF16, &o);
    tailor_compile_ahead_wait(a);
    tailor_compile_ahead_stop(a, &st);
    unsetenv("TAILOR_CARVEOUT");
    CHECKF(st.targets == NTARGETS && st.compiled == 0 && st.reused == st.queued,
           "target 0 cached under the default carveout, run under 'driver': %d targets, "
           "%d compiled, %d reused of %d", st.targets, st.compiled, st.reused, st.queued);
    tailor_cache_close(cache);
    unlink(path);
    rmdir(dir);

    /* nothing starts under TAILOR_NO_COMPILE=1, without a memo or without targets */
    setenv("TAILOR_NO_COMPILE", "1", 1);
    CHECK(tailor_compile_ahead_start(h200, NULL, t, NTARGETS, TAILOR_DTYPE_BF16, &o) == NULL);
    unsetenv("TAILOR_NO_COMPILE");
    CHECK(tailor_compile_ahead_start(h200, NULL, t, 0, TAILOR_DTYPE_BF16, &o) == NULL);
    tailor_compile_memo_destroy(o.memo);
    o.memo = NULL;
    CHECK(tailor_compile_ahead_start(h200, NULL, t, NTARGETS, TAILOR_DTYPE_BF16, &o) == NULL);
    tailor_compile_ahead_stop(NULL, NULL);
    tailor_ctx_destroy(ctx);
    return test_finish("test_tune_ahead");
}
