/* test_cache.c — the tuning cache without a GPU: winners and trials round trip, persistence,
 * space-hash misses, export/import (byte-exact, fingerprint refusal, carveout keys, tampered,
 * truncated and half-bad files), two processes writing at once, the integrity check, clear,
 * paths. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "sha256.h"
#include "testlib.h"
#include "tuner.h"

#define FP_H200 "NVIDIA H200|sm_90|132|232448|13000|13.0"
#define FP_A100 "NVIDIA A100-SXM4-80GB|sm_80|108|166912|13000|13.0"
#define HASH1 "1111111111111111111111111111111111111111111111111111111111111111"
#define HASH2 "2222222222222222222222222222222222222222222222222222222222222222"

static char tmpdir[256];
static test_rng rng;

/* ---- helpers ---------------------------------------------------------------------------------- */

static void path_in_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
}

static tailor_cache *open_cache(tailor_ctx *ctx, const char *name)
{
    char path[512];
    path_in_tmp(path, sizeof path, name);
    tailor_cache *c = NULL;
    CHECK_OK(ctx, tailor_cache_open(ctx, path, &c));
    if (!c) {
        fprintf(stderr, "cannot open %s, giving up\n", path);
        exit(1);
    }
    return c;
}

/* A winner with a random binary (sizes hit every base64 padding case, bytes include NULs). */
typedef struct owned_winner {
    tailor_cache_winner w;
    char params[64], launch[128];
    unsigned char bin[4096];
} owned_winner;

static void make_winner(owned_winner *o, int i)
{
    memset(o, 0, sizeof *o);
    snprintf(o->w.template_name, sizeof o->w.template_name, "rmsnorm_warp");
    snprintf(o->w.kernel_name, sizeof o->w.kernel_name, "rmsnorm_warp_sm90_B%d_V%d", 32 << (i % 4),
             i);
    snprintf(o->params, sizeof o->params, "{\"BLOCK\":%d,\"VEC\":%d,\"s\":\"q\\\"\"}", 32 << (i % 4),
             i);
    snprintf(o->launch, sizeof o->launch, "{\"grid\":[%d,1,1],\"block\":[256,1,1],\"smem\":0}", i + 1);
    o->w.params_json = o->params;
    o->w.launch_json = o->launch;
    snprintf(o->w.binary_kind, sizeof o->w.binary_kind, "%s", i % 2 ? "ptx" : "cubin");
    size_t n = 1 + (size_t)(test_rng_next(&rng) % (sizeof o->bin - 1));
    for (size_t k = 0; k < n; k++)
        o->bin[k] = (unsigned char)(test_rng_next(&rng) >> 56);
    o->bin[0] = 0;
    o->w.binary = o->bin;
    o->w.binary_size = n;
    snprintf(o->w.arch, sizeof o->w.arch, "sm_90");
    o->w.median_us = test_rng_uniform(&rng, 1.0f, 100.0f) / 3.0;
    o->w.spread_us = o->w.median_us * 0.01;
    o->w.tuned_at = 1700000000LL + i;
    o->w.n_trials = 10 + i;
    o->w.chosen_in_step = i % 3 == 1;
}

static void shape_of(char *buf, size_t size, int i) { snprintf(buf, size, "m=%d,n=1536", i + 1); }

static int winners_equal(const tailor_cache_winner *a, const tailor_cache_winner *b)
{
    return strcmp(a->template_name, b->template_name) == 0 &&
           strcmp(a->kernel_name, b->kernel_name) == 0 &&
           strcmp(a->params_json, b->params_json) == 0 &&
           strcmp(a->launch_json, b->launch_json) == 0 &&
           strcmp(a->binary_kind, b->binary_kind) == 0 && strcmp(a->arch, b->arch) == 0 &&
           a->binary_size == b->binary_size && memcmp(a->binary, b->binary, a->binary_size) == 0 &&
           a->median_us == b->median_us && a->spread_us == b->spread_us &&
           a->tuned_at == b->tuned_at && a->n_trials == b->n_trials &&
           a->chosen_in_step == b->chosen_in_step;
}

static int count_fn(void *user, const tailor_cache_key *key, const tailor_cache_winner *w)
{
    (void)key;
    (void)w;
    (*(int *)user)++;
    return 0;
}

static int count_winners(tailor_ctx *ctx, tailor_cache *c, const char *fp)
{
    int n = 0;
    CHECK_OK(ctx, tailor_cache_foreach_winner(ctx, c, fp, count_fn, &n));
    return n;
}

/* Puts winners 0..n-1 of fingerprint fp (shapes m=i+1) into c. */
static void put_winners(tailor_ctx *ctx, tailor_cache *c, const char *fp, int n, owned_winner *ws)
{
    for (int i = 0; i < n; i++) {
        char shape[32];
        shape_of(shape, sizeof shape, i);
        tailor_cache_key key = {fp, "rmsnorm", shape, "bf16", HASH1};
        make_winner(&ws[i], i);
        CHECK_OK(ctx, tailor_cache_put_winner(ctx, c, &key, &ws[i].w));
    }
}


static void write_all(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

/* Recomputes an export file's sha256 trailer after an edit (as a careful forger would). */
static void reseal(char *data, size_t *n)
{
    char *trailer = strstr(data, "\n  \"sha256\": \"");
    if (!trailer)
        return;
    char hex[65];
    tailor_sha256_hex(data, (size_t)(trailer - data) + 1, hex);
    *n = (size_t)(trailer - data) + 1;
    *n += (size_t)sprintf(data + *n, "  \"sha256\": \"%s\"\n}\n", hex);
}

static void sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    CHECKF(rc == SQLITE_OK, "%s on %s: %s", sql, path, db ? sqlite3_errmsg(db) : "?");
    sqlite3_close(db);
}

/* ---- the cases ---------------------------------------------------------------------------------- */

static void test_winner_round_trip(tailor_ctx *ctx)
{
    tailor_cache *c = open_cache(ctx, "rt.sqlite");
    owned_winner ws[6];
    put_winners(ctx, c, FP_H200, 6, ws);
    for (int i = 0; i < 6; i++) {
        char shape[32];
        shape_of(shape, sizeof shape, i);
        tailor_cache_key key = {FP_H200, "rmsnorm", shape, "bf16", HASH1};
        tailor_cache_winner got;
        int found = 0;
        CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &key, &got, &found));
        CHECKF(found && winners_equal(&got, &ws[i].w), "winner %d differs after a round trip", i);
        tailor_cache_winner_free(&got);
        CHECK(got.binary == NULL && got.params_json == NULL);
    }
    tailor_cache_key other_dtype = {FP_H200, "rmsnorm", "m=1,n=1536", "fp16", HASH1};
    tailor_cache_winner got;
    int found = 1;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &other_dtype, &got, &found));
    CHECK(found == 0 && got.binary == NULL);
    /* has_winner answers the same without the binary; another space hash is not a winner */
    tailor_cache_key present = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    CHECK_OK(ctx, tailor_cache_has_winner(ctx, c, &present, &found));
    CHECK(found == 1);
    CHECK_OK(ctx, tailor_cache_has_winner(ctx, c, &other_dtype, &found));
    CHECK(found == 0);
    tailor_cache_key stale = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH2};
    found = 1;
    CHECK_OK(ctx, tailor_cache_has_winner(ctx, c, &stale, &found));
    CHECK(found == 0);

    /* bad input is refused, and says which field */
    owned_winner bad;
    make_winner(&bad, 0);
    snprintf(bad.w.binary_kind, sizeof bad.w.binary_kind, "elf");
    tailor_cache_key k0 = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    CHECK(tailor_cache_put_winner(ctx, c, &k0, &bad.w) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "binary_kind") != NULL);
    tailor_cache_key nokey = {FP_H200, "", "m=1", "bf16", HASH1};
    CHECK(tailor_cache_put_winner(ctx, c, &nokey, &ws[0].w) == TAILOR_ERR_MISUSE);
    CHECK(strstr(tailor_ctx_message(ctx), "'op'") != NULL);
    CHECK(count_winners(ctx, c, NULL) == 6);

    /* re-putting a key replaces */
    owned_winner again;
    make_winner(&again, 40);
    CHECK_OK(ctx, tailor_cache_put_winner(ctx, c, &k0, &again.w));
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &k0, &got, &found));
    CHECK(found && winners_equal(&got, &again.w));
    tailor_cache_winner_free(&got);
    CHECK(count_winners(ctx, c, NULL) == 6);
    tailor_cache_close(c);
}

static void test_trials(tailor_ctx *ctx)
{
    tailor_cache *c = open_cache(ctx, "trials.sqlite");
    tailor_cache_key key = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":64}", "timed",
                                         12.5, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":2048}",
                                         "refused-budget", -1, "needs 2,048 threads; allows 1,024"));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "rmsnorm_block", "{\"BLOCK\":64}",
                                         "compile-error", -1, "error: ..."));
    char outcome[32];
    double us = 0;
    int found = 0;
    CHECK_OK(ctx, tailor_cache_get_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":64}", outcome,
                                         sizeof outcome, &us, &found));
    CHECK(found && strcmp(outcome, "timed") == 0 && us == 12.5);
    CHECK_OK(ctx, tailor_cache_get_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":2048}", outcome,
                                         sizeof outcome, &us, &found));
    CHECK(found && strcmp(outcome, "refused-budget") == 0 && us == -1);
    CHECK_OK(ctx, tailor_cache_get_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":128}", outcome,
                                         sizeof outcome, &us, &found));
    CHECK(!found && outcome[0] == '\0');
    /* unique per (key, template, params): a second record replaces the first */
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":64}",
                                         "wrong-result", -1, "max error 3.1 at 17"));
    CHECK_OK(ctx, tailor_cache_get_trial(ctx, c, &key, "rmsnorm_warp", "{\"BLOCK\":64}", outcome,
                                         sizeof outcome, &us, &found));
    CHECK(found && strcmp(outcome, "wrong-result") == 0 && us == -1);
    int n = 0;
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &key, &n));
    CHECK(n == 3);
    CHECK(tailor_cache_put_trial(ctx, c, &key, "t", "{}", "crashed", -1, NULL) == TAILOR_ERR_MISUSE);
    CHECK(tailor_cache_put_trial(ctx, c, &key, "t", "{}", "timed", -1, NULL) == TAILOR_ERR_MISUSE);
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &key, &n));
    CHECK(n == 3);
    tailor_cache_close(c);

    /* persistence: reopen and find everything */
    c = open_cache(ctx, "trials.sqlite");
    CHECK_OK(ctx, tailor_cache_get_trial(ctx, c, &key, "rmsnorm_block", "{\"BLOCK\":64}", outcome,
                                         sizeof outcome, &us, &found));
    CHECK(found && strcmp(outcome, "compile-error") == 0);
    tailor_cache_close(c);
}

static void test_reopen_and_wal(tailor_ctx *ctx)
{
    owned_winner ws[3];
    tailor_cache *c = open_cache(ctx, "reopen.sqlite");
    put_winners(ctx, c, FP_H200, 3, ws);
    tailor_cache_close(c);
    c = open_cache(ctx, "reopen.sqlite");
    for (int i = 0; i < 3; i++) {
        char shape[32];
        shape_of(shape, sizeof shape, i);
        tailor_cache_key key = {FP_H200, "rmsnorm", shape, "bf16", HASH1};
        tailor_cache_winner got;
        int found = 0;
        CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &key, &got, &found));
        CHECKF(found && winners_equal(&got, &ws[i].w), "winner %d lost on reopen", i);
        tailor_cache_winner_free(&got);
    }
    tailor_cache_close(c);

    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char path[512];
    path_in_tmp(path, sizeof path, "reopen.sqlite");
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
    sqlite3_finalize(st);
    CHECK(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == TAILOR_CACHE_SCHEMA_VERSION);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void test_space_hash(tailor_ctx *ctx)
{
    tailor_cache *c = open_cache(ctx, "space.sqlite");
    owned_winner ws[1], w2;
    put_winners(ctx, c, FP_H200, 1, ws);
    tailor_cache_key old_key = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    tailor_cache_key new_key = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH2};
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &old_key, "rmsnorm_warp", "{}", "timed", 3, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &new_key, "rmsnorm_warp", "{}", "timed", 2, NULL));
    tailor_cache_winner got;
    int found = 1, n = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &new_key, &got, &found));
    CHECK(found == 0); /* the space changed: a miss */
    make_winner(&w2, 7);
    CHECK_OK(ctx, tailor_cache_put_winner(ctx, c, &new_key, &w2.w));
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &old_key, &got, &found));
    CHECK(found == 0); /* superseded */
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &new_key, &got, &found));
    CHECK(found && winners_equal(&got, &w2.w));
    tailor_cache_winner_free(&got);
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &old_key, &n));
    CHECK(n == 0); /* stale trials dropped with the old winner */
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &new_key, &n));
    CHECK(n == 1);
    CHECK(count_winners(ctx, c, NULL) == 1);
    tailor_cache_close(c);
}

static void test_refused_files(tailor_ctx *ctx)
{
    char path[512];
    tailor_cache *c = NULL;
    path_in_tmp(path, sizeof path, "newer.sqlite");
    sql_exec(path, "PRAGMA application_id = 1953264177; PRAGMA user_version = 99;");
    CHECK(tailor_cache_open(ctx, path, &c) == TAILOR_ERR_MISMATCH && c == NULL);
    CHECKF(strstr(tailor_ctx_message(ctx), "schema version 99") != NULL, "%s", tailor_ctx_message(ctx));

    path_in_tmp(path, sizeof path, "other_app.sqlite");
    sql_exec(path, "CREATE TABLE notes (x TEXT);");
    CHECK(tailor_cache_open(ctx, path, &c) == TAILOR_ERR_MISMATCH && c == NULL);

    path_in_tmp(path, sizeof path, "text.sqlite");
    const char *text = "this is not a database, but it is long enough to have a header. ......"
                       "................................................................";
    write_all(path, text, strlen(text));
    CHECK(tailor_cache_open(ctx, path, &c) == TAILOR_ERR_MISMATCH && c == NULL);
    CHECKF(strstr(tailor_ctx_message(ctx), path) != NULL, "%s", tailor_ctx_message(ctx));

    path_in_tmp(path, sizeof path, "no/such/folder/c.sqlite");
    CHECK(tailor_cache_open(ctx, path, &c) == TAILOR_ERR_IO && c == NULL);
    CHECKF(strstr(tailor_ctx_message(ctx), path) != NULL, "%s", tailor_ctx_message(ctx));
}

typedef struct collected {
    int n;
    char shapes[16][32];
    owned_winner w[16];
} collected;

static int collect_fn(void *user, const tailor_cache_key *key, const tailor_cache_winner *w)
{
    collected *col = user;
    if (col->n >= 16)
        return 1;
    owned_winner *o = &col->w[col->n];
    snprintf(col->shapes[col->n], sizeof col->shapes[0], "%s", key->shape);
    o->w = *w;
    snprintf(o->params, sizeof o->params, "%s", w->params_json);
    snprintf(o->launch, sizeof o->launch, "%s", w->launch_json);
    memcpy(o->bin, w->binary, w->binary_size);
    o->w.params_json = o->params;
    o->w.launch_json = o->launch;
    o->w.binary = o->bin;
    col->n++;
    return 0;
}

/* The source cache for the export tests: 3 H200 winners, 2 A100 winners; exported to FILE. */
static void make_export(tailor_ctx *ctx, const char *name, const char *file)
{
    tailor_cache *c = open_cache(ctx, name);
    owned_winner ws[3];
    put_winners(ctx, c, FP_H200, 3, ws);
    put_winners(ctx, c, FP_A100, 2, ws);
    int n = -1;
    CHECK_OK(ctx, tailor_cache_export(ctx, c, FP_H200, file, &n));
    CHECK(n == 3);
    tailor_cache_close(c);
}

static void test_export_import(tailor_ctx *ctx)
{
    char file[512];
    path_in_tmp(file, sizeof file, "h200.tailor");
    make_export(ctx, "src.sqlite", file);

    tailor_cache *src = open_cache(ctx, "src.sqlite");
    tailor_cache *dst = open_cache(ctx, "dst.sqlite");
    int n = -1;
    CHECK_OK(ctx, tailor_cache_import(ctx, dst, file, FP_H200, tailor_tuner_check_entry, &n));
    CHECK(n == 3);
    collected *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CHECK_OK(ctx, tailor_cache_foreach_winner(ctx, src, FP_H200, collect_fn, a));
    CHECK_OK(ctx, tailor_cache_foreach_winner(ctx, dst, NULL, collect_fn, b));
    CHECK(a->n == 3 && b->n == 3);
    for (int i = 0; i < a->n && i < b->n; i++)
        CHECKF(strcmp(a->shapes[i], b->shapes[i]) == 0 && winners_equal(&a->w[i].w, &b->w[i].w),
               "entry %d differs after export/import", i);
    CHECK(count_winners(ctx, dst, FP_A100) == 0); /* only the exported device's winners */
    int ok = 0, bad = 0;
    CHECK_OK(ctx, tailor_cache_check(ctx, dst, &ok, &bad));
    CHECK(ok == 3 && bad == 0);
    /* importing again is idempotent */
    CHECK_OK(ctx, tailor_cache_import(ctx, dst, file, FP_H200, tailor_tuner_check_entry, &n));
    CHECK(n == 3 && count_winners(ctx, dst, NULL) == 3);
    free(a);
    free(b);

    /* a device without winners exports nothing: the call fails and writes no file (an empty
     * one would replace an export worth keeping) */
    char empty[512];
    path_in_tmp(empty, sizeof empty, "empty.tailor");
    n = -1;
    CHECK(tailor_cache_export(ctx, src, "NVIDIA T4|sm_75|40|65536|13000|13.0", empty, &n) ==
          TAILOR_ERR_NOT_FOUND);
    CHECKF(strstr(tailor_ctx_message(ctx), "holds no winners of 'NVIDIA T4|") != NULL, "%s",
           tailor_ctx_message(ctx));
    CHECK(n == 0 && access(empty, F_OK) != 0);
    /* the cache file itself is never an export's target */
    CHECK(tailor_cache_export(ctx, src, FP_H200, tailor_cache_path(src), &n) == TAILOR_ERR_MISUSE);
    CHECK(count_winners(ctx, src, NULL) == 5);
    tailor_cache_close(src);
    tailor_cache_close(dst);
}

static void test_fingerprint_refusal(tailor_ctx *ctx)
{
    char file[512];
    path_in_tmp(file, sizeof file, "h200.tailor"); /* written by test_export_import */
    tailor_cache *c = open_cache(ctx, "fp.sqlite");
    int n = -1;
    CHECK(tailor_cache_import(ctx, c, file, FP_A100, tailor_tuner_check_entry, &n) ==
          TAILOR_ERR_MISMATCH);
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(strstr(msg, "GPU name: 'NVIDIA H200' in the file, 'NVIDIA A100-SXM4-80GB' here") &&
               strstr(msg, "architecture: sm_90 in the file, sm_80 here") &&
               strstr(msg, "SMs: 132 in the file, 108 here") &&
               strstr(msg, "; opt-in shared memory per block (B): 232448 in the file, 166912 "
                           "here") && !strstr(msg, "driver") &&
               strstr(msg, file),
           "message: %s", msg);
    CHECK(n == 0 && count_winners(ctx, c, NULL) == 0);
    tailor_cache_close(c);

    char diff[512];
    tailor_cache_fingerprint_diff(FP_H200, FP_H200, diff, sizeof diff);
    CHECK(diff[0] == '\0');
    tailor_cache_fingerprint_diff("NVIDIA H200|sm_90|132|232448|12080|12.8", FP_H200, diff, sizeof diff);
    CHECKF(strcmp(diff, "driver: 12080 in the file, 13000 here; NVRTC: 12.8 in the file, 13.0 here") == 0,
           "%s", diff);
    tailor_cache_fingerprint_diff("rehearse:t4@" FP_H200, FP_H200, diff, sizeof diff);
    CHECKF(strcmp(diff, "rehearsal profile: 't4' in the file, (none) here") == 0, "%s", diff);
}

/* Winners keyed under a non-default carveout ("|carveout=driver", tailor_tuner_fingerprint) are
 * another key: kept apart from the default's, exported and imported as they are on a host with
 * that carveout, refused with the carveout named on one without. */
static void test_carveout_keys(tailor_ctx *ctx)
{
    const char *fp_driver = FP_H200 "|carveout=driver";
    tailor_cache *src = open_cache(ctx, "carveout.sqlite");
    owned_winner ws[3];
    put_winners(ctx, src, FP_H200, 3, ws);
    put_winners(ctx, src, fp_driver, 2, ws);
    CHECK(count_winners(ctx, src, FP_H200) == 3 && count_winners(ctx, src, fp_driver) == 2);
    char file[512], plain[512];
    path_in_tmp(file, sizeof file, "h200-driver.tailor");
    path_in_tmp(plain, sizeof plain, "h200-default.tailor");
    int n = -1;
    CHECK_OK(ctx, tailor_cache_export(ctx, src, fp_driver, file, &n));
    CHECK(n == 2);
    CHECK_OK(ctx, tailor_cache_export(ctx, src, FP_H200, plain, &n));
    CHECK(n == 3);
    tailor_cache_close(src);

    tailor_cache *dst = open_cache(ctx, "carveout-dst.sqlite");
    CHECK(tailor_cache_import(ctx, dst, file, FP_H200, tailor_tuner_check_entry, &n) ==
          TAILOR_ERR_MISMATCH);
    CHECKF(strstr(tailor_ctx_message(ctx), "(shared-memory carveout (TAILOR_CARVEOUT): driver in "
                                           "the file, the default here)") &&
               !strstr(tailor_ctx_message(ctx), "GPU name"),
           "message: %s", tailor_ctx_message(ctx));
    CHECK(tailor_cache_import(ctx, dst, plain, fp_driver, tailor_tuner_check_entry, &n) ==
          TAILOR_ERR_MISMATCH);
    CHECK(count_winners(ctx, dst, NULL) == 0);
    CHECK_OK(ctx, tailor_cache_import(ctx, dst, file, fp_driver, tailor_tuner_check_entry, &n));
    CHECK(n == 2 && count_winners(ctx, dst, fp_driver) == 2 &&
          count_winners(ctx, dst, FP_H200) == 0);
    tailor_cache_close(dst);

    char diff[512];
    tailor_cache_fingerprint_diff(FP_H200 "|carveout=100", fp_driver, diff, sizeof diff);
    CHECKF(strcmp(diff, "shared-memory carveout (TAILOR_CARVEOUT): 100 in the file, driver here") ==
               0, "%s", diff);
    tailor_cache_fingerprint_diff("rehearse:t4@" FP_H200 "|carveout=driver", FP_H200, diff,
                                  sizeof diff);
    CHECKF(strcmp(diff, "rehearsal profile: 't4' in the file, (none) here; shared-memory carveout "
                        "(TAILOR_CARVEOUT): driver in the file, the default here") == 0,
           "%s", diff);
    tailor_cache_fingerprint_diff("NVIDIA H200|sm_90|132|232448|12080|13.0|carveout=0", fp_driver,
                                  diff, sizeof diff);
    CHECKF(strcmp(diff, "driver: 12080 in the file, 13000 here; shared-memory carveout "
                        "(TAILOR_CARVEOUT): 0 in the file, driver here") == 0,
           "%s", diff);
}

/* Imports `data` (written to FILE) and expects a refusal that names `expect`, with c unchanged. */
static void expect_refused(tailor_ctx *ctx, tailor_cache *c, const char *name, const char *data,
                           size_t n, const char *expect)
{
    char file[512];
    path_in_tmp(file, sizeof file, name);
    write_all(file, data, n);
    int before = count_winners(ctx, c, NULL), got = -1;
    tailor_status s = tailor_cache_import(ctx, c, file, FP_H200, tailor_tuner_check_entry, &got);
    CHECKF(s != TAILOR_OK, "%s was imported", name);
    CHECKF(strstr(tailor_ctx_message(ctx), expect) && strstr(tailor_ctx_message(ctx), file),
           "%s: message '%s' lacks '%s'", name, tailor_ctx_message(ctx), expect);
    CHECK(got == 0 && count_winners(ctx, c, NULL) == before);
}

static void test_damaged_files(tailor_ctx *ctx)
{
    char file[512];
    path_in_tmp(file, sizeof file, "h200.tailor");
    size_t n = 0;
    char *orig = test_read_file(file, &n);
    CHECK(orig != NULL);
    if (!orig)
        return;
    char *buf = malloc(n + 256);
    tailor_cache *c = open_cache(ctx, "damaged.sqlite");

    /* one flipped byte inside the second entry's binary */
    memcpy(buf, orig, n + 1);
    char *bin = strstr(strstr(buf, "\"m=2,n=1536\""), "\"binary\":\"") + 20;
    *bin = *bin == 'A' ? 'B' : 'A';
    expect_refused(ctx, c, "flipped.tailor", buf, n, "sha256");
    /* the fingerprint is covered by the checksum too */
    memcpy(buf, orig, n + 1);
    char *h = strstr(buf, "H200");
    h[3] = '1';
    expect_refused(ctx, c, "fp_edited.tailor", buf, n, "altered");
    /* truncated: half the file, and only the last line gone */
    expect_refused(ctx, c, "half.tailor", orig, n / 2, "'sha256'");
    expect_refused(ctx, c, "nolast.tailor", orig, n - 2, "'sha256'");
    expect_refused(ctx, c, "nothing.tailor", orig, 0, "'sha256'");
    /* resealed, but not JSON any more */
    memcpy(buf, orig, n + 1);
    size_t m = n;
    strstr(buf, "\"version\"")[0] = '{';
    reseal(buf, &m);
    expect_refused(ctx, c, "notjson.tailor", buf, m, "JSON");
    /* resealed, a header field missing */
    memcpy(buf, orig, n + 1);
    m = n;
    memcpy(strstr(buf, "\"format\""), "\"formax\"", 8);
    reseal(buf, &m);
    expect_refused(ctx, c, "noformat.tailor", buf, m, "'format'");
    /* resealed, a newer format version */
    memcpy(buf, orig, n + 1);
    m = n;
    strstr(buf, "\"version\": 1")[11] = '2';
    reseal(buf, &m);
    expect_refused(ctx, c, "v2.tailor", buf, m, "'version' is 2");
    int ok = 0, bad = 0;
    CHECK_OK(ctx, tailor_cache_check(ctx, c, &ok, &bad));
    CHECK(ok == 0 && bad == 0);
    tailor_cache_close(c);
    free(buf);
    free(orig);
}

/* A file whose middle entry is bad: nothing of it lands, even the good first entry, and what the
 * cache held before (a winner the first entry would replace) stays. */
static void test_half_bad_import(tailor_ctx *ctx)
{
    char file[512];
    path_in_tmp(file, sizeof file, "h200.tailor");
    size_t n = 0;
    char *orig = test_read_file(file, &n);
    if (!orig) {
        CHECK(orig != NULL);
        return;
    }
    char *buf = malloc(n + 256);
    tailor_cache *c = open_cache(ctx, "halfbad.sqlite");
    owned_winner old;
    make_winner(&old, 9);
    tailor_cache_key k1 = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH2};
    CHECK_OK(ctx, tailor_cache_put_winner(ctx, c, &k1, &old.w));

    /* each: the entry (by its shape), the text replaced in it, by what, and what the refusal
     * names; entry 2 holds PTX, entry 3 a cubin (make_winner) */
    static const char *const cases[][4] = {
        {"\"m=2,n=1536\"", "\"kernel\":", "\"kernex\":", "entry 2, field 'kernel'"},
        {"\"m=2,n=1536\"", "\"binary_sha256\":\"", "\"binary_sha256\":\"",
         "entry 2, field 'binary_sha256'"},
        {"\"m=2,n=1536\"", "\"n_trials\":", "\"n_trials\":-", "entry 2, field 'n_trials'"},
        /* types right, values wrong: a shape, dtype, params, launch or arch no lookup can use */
        {"\"m=2,n=1536\"", "\"m=2,n=1536\"", "\"k=,,==\"", "entry 2, field 'shape' is not a list"},
        {"\"m=2,n=1536\"", "\"m=2,n=1536\"", "\"n=1536,m=2\"",
         "entry 2, field 'shape' is not in canonical form"},
        {"\"m=2,n=1536\"", "\"dtype\":\"bf16\"", "\"dtype\":\"int3\"",
         "entry 2, field 'dtype' is not fp16, bf16 or fp32"},
        {"\"m=2,n=1536\"", "\"params\":\"{", "\"params\":\"{BLOCK",
         "entry 2, field 'params' is not a JSON object"},
        {"\"m=2,n=1536\"", "\"launch\":\"{", "\"launch\":\"[{",
         "entry 2, field 'launch' is not a JSON object"},
        {"\"m=2,n=1536\"", "\"arch\":\"sm_90\"", "\"arch\":\"sm_100\"",
         "entry 2, field 'arch' is 'sm_100', but the fingerprint's architecture is sm_90"},
        {"\"m=3,n=1536\"", "\"arch\":\"sm_90\"", "\"arch\":\"sm_75\"",
         "entry 3, field 'arch' is 'sm_75', but the fingerprint's architecture is sm_90"},
        {"\"m=3,n=1536\"", "\"arch\":\"sm_90\"", "\"arch\":\"gfx90a\"",
         "entry 3, field 'arch' is not 'sm_NN' or 'compute_NN'"},
        {"\"m=2,n=1536\"", "\"chosen\":\"step\"", "\"chosen\":\"both\"",
         "entry 2, field 'chosen' is not \"tuner\" or \"step\""},
        {"\"m=3,n=1536\"", "\"chosen\":\"tuner\"", "\"chosen\":1",
         "entry 3, field 'chosen' is not \"tuner\" or \"step\""},
    };
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        memcpy(buf, orig, n + 1);
        char *entry = strstr(buf, cases[k][0]);
        char *at = strstr(entry, cases[k][1]);
        size_t from = strlen(cases[k][1]), to = strlen(cases[k][2]);
        memmove(at + to, at + from, strlen(at + from) + 1);
        memcpy(at, cases[k][2], to);
        if (k == 1) /* a wrong digest: change its first digit */
            at[to] = at[to] == '0' ? '1' : '0';
        size_t m = strlen(buf);
        reseal(buf, &m);
        char name[32];
        snprintf(name, sizeof name, "halfbad%d.tailor", k);
        expect_refused(ctx, c, name, buf, m, cases[k][3]);
        tailor_cache_winner got;
        int found = 0;
        CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &k1, &got, &found));
        CHECKF(found && winners_equal(&got, &old.w), "case %d: the old winner was replaced", k);
        tailor_cache_winner_free(&got);
        CHECK(count_winners(ctx, c, NULL) == 1);
    }
    tailor_cache_close(c);
    free(buf);
    free(orig);
}

#define PER_WRITER 200

static int writer(const char *path, int id, int start_fd)
{
    char go;
    if (read(start_fd, &go, 1) != 1)
        return 3;
    tailor_ctx *ctx = test_ctx();
    tailor_cache *c = NULL;
    if (tailor_cache_open(ctx, path, &c) != TAILOR_OK) {
        fprintf(stderr, "writer %d: %s\n", id, tailor_ctx_message(ctx));
        return 1;
    }
    for (int i = 0; i < PER_WRITER; i++) {
        char shape[48];
        snprintf(shape, sizeof shape, "m=%d,n=%d", i + 1, 1000 + id);
        tailor_cache_key key = {FP_H200, "rmsnorm", shape, "bf16", HASH1};
        owned_winner w;
        make_winner(&w, i);
        if (tailor_cache_put_trial(ctx, c, &key, "rmsnorm_warp", w.params, "timed", 1.0, NULL) ||
            tailor_cache_put_winner(ctx, c, &key, &w.w)) {
            fprintf(stderr, "writer %d, entry %d: %s\n", id, i, tailor_ctx_message(ctx));
            return 2;
        }
    }
    tailor_cache_close(c);
    tailor_ctx_destroy(ctx);
    return 0;
}

/* Two processes open path at once and write PER_WRITER winners each. */
static void race_two_writers(const char *path)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pids[2];
    for (int id = 0; id < 2; id++) {
        pids[id] = fork();
        if (pids[id] == 0) {
            close(fds[1]);
            test_rng_seed(&rng, (uint64_t)(100 + id));
            _exit(writer(path, id, fds[0]));
        }
    }
    close(fds[0]);
    CHECK(write(fds[1], "gg", 2) == 2); /* both start at once */
    close(fds[1]);
    for (int id = 0; id < 2; id++) {
        int status = 0;
        CHECK(waitpid(pids[id], &status, 0) == pids[id]);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d exited with %d", id,
               WEXITSTATUS(status));
    }
}

static void test_two_writers(tailor_ctx *ctx)
{
    char path[512];
    path_in_tmp(path, sizeof path, "two.sqlite"); /* not created yet: both race to create it */
    race_two_writers(path);
    tailor_cache *c = open_cache(ctx, "two.sqlite");
    CHECK(count_winners(ctx, c, NULL) == 2 * PER_WRITER);
    int ok = 0, bad = 0;
    CHECK_OK(ctx, tailor_cache_check(ctx, c, &ok, &bad));
    CHECKF(ok == 2 * PER_WRITER && bad == 0, "ok %d, bad %d", ok, bad);
    tailor_cache_key key = {FP_H200, "rmsnorm", "m=200,n=1001", "bf16", HASH1};
    int n = 0;
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &key, &n));
    CHECK(n == 1);
    tailor_cache_close(c);
}

static void test_check_detects_damage(tailor_ctx *ctx)
{
    tailor_cache *c = open_cache(ctx, "damage.sqlite");
    owned_winner ws[3];
    put_winners(ctx, c, FP_H200, 3, ws);
    tailor_cache_close(c);
    char path[512];
    path_in_tmp(path, sizeof path, "damage.sqlite");
    sql_exec(path, "UPDATE winners SET binary = X'00FF' WHERE shape = 'm=2,n=1536'");
    c = open_cache(ctx, "damage.sqlite");
    int ok = 0, bad = 0;
    CHECK_OK(ctx, tailor_cache_check(ctx, c, &ok, &bad));
    CHECK(ok == 2 && bad == 1);
    tailor_cache_key key = {FP_H200, "rmsnorm", "m=2,n=1536", "bf16", HASH1};
    tailor_cache_winner got;
    int found = 1;
    CHECK(tailor_cache_get_winner(ctx, c, &key, &got, &found) == TAILOR_ERR_MISMATCH);
    CHECK(found == 0 && got.binary == NULL);
    tailor_cache_close(c);
}

static void test_clear(tailor_ctx *ctx)
{
    tailor_cache *c = open_cache(ctx, "clear.sqlite");
    owned_winner ws[3];
    put_winners(ctx, c, FP_H200, 3, ws);
    put_winners(ctx, c, FP_A100, 2, ws);
    tailor_cache_key key = {FP_A100, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &key, "rmsnorm_warp", "{}", "timeout", -1, NULL));
    CHECK_OK(ctx, tailor_cache_clear(ctx, c, FP_H200));
    CHECK(count_winners(ctx, c, FP_H200) == 0 && count_winners(ctx, c, FP_A100) == 2);
    int n = 0;
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &key, &n));
    CHECK(n == 1);
    CHECK_OK(ctx, tailor_cache_clear(ctx, c, NULL));
    CHECK(count_winners(ctx, c, NULL) == 0);
    CHECK_OK(ctx, tailor_cache_count_trials(ctx, c, &key, &n));
    CHECK(n == 0);
    tailor_cache_close(c);
}

static void test_paths(tailor_ctx *ctx)
{
    char xdg[512], want[600], env_path[512], explicit_path[512], got[4096];
    path_in_tmp(xdg, sizeof xdg, "xdg");
    snprintf(want, sizeof want, "%s/tailor/cache.sqlite", xdg);
    path_in_tmp(env_path, sizeof env_path, "env.sqlite");
    path_in_tmp(explicit_path, sizeof explicit_path, "explicit.sqlite");
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("TAILOR_CACHE");
    tailor_cache *c = NULL;
    CHECK_OK(ctx, tailor_cache_open(ctx, NULL, &c)); /* creates xdg/tailor/ */
    CHECK(c && strcmp(tailor_cache_path(c), want) == 0);
    tailor_cache_close(c);
    struct stat st;
    CHECK(stat(want, &st) == 0);
    setenv("TAILOR_CACHE", env_path, 1);
    CHECK_OK(ctx, tailor_cache_default_path(ctx, got, sizeof got));
    CHECK(strcmp(got, env_path) == 0);
    CHECK_OK(ctx, tailor_cache_open(ctx, NULL, &c));
    CHECK(c && strcmp(tailor_cache_path(c), env_path) == 0);
    tailor_cache_close(c);
    CHECK_OK(ctx, tailor_cache_open(ctx, explicit_path, &c)); /* explicit beats env */
    CHECK(c && strcmp(tailor_cache_path(c), explicit_path) == 0);
    tailor_cache_close(c);
    unsetenv("TAILOR_CACHE");
    unsetenv("XDG_CACHE_HOME");
}

typedef struct trial_seen {
    int n;
    char line[8][160]; /* "op shape template params outcome median" */
} trial_seen;

static int see_trial(void *user, const tailor_cache_key *key, const tailor_cache_trial *t)
{
    trial_seen *s = user;
    if (s->n < 8)
        snprintf(s->line[s->n], sizeof s->line[0], "%s %s %s %s %s %g", key->op, key->shape,
                 t->template_name, t->params_json, t->outcome, t->median_us);
    s->n++;
    return 0;
}

/* tailor_cache_foreach_trial: grouped by key, timed ones fastest first, then the others; the
 * device and op filters; details and times as stored. */
static void test_trial_listing(tailor_ctx *ctx)
{
    tailor_cache *c = open_cache(ctx, "trial_list.sqlite");
    tailor_cache_key a = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    tailor_cache_key b = {FP_H200, "matmul", "k=64,m=1,n=64", "bf16", HASH1};
    tailor_cache_key other = {FP_A100, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &a, "rmsnorm_warp", "{\"BLOCK\":64}", "timed", 12.5,
                                         NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &a, "rmsnorm_block", "{\"BLOCK\":64}",
                                         "wrong-result", -1, "max error 3.1 at 17"));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &a, "rmsnorm_warp", "{\"BLOCK\":128}", "timed", 7.0,
                                         NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &a, "rmsnorm_block", "{\"BLOCK\":32}",
                                         "compile-error", -1, "error: x"));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &b, "matmul_gemv", "{}", "timed", 3.0, NULL));
    CHECK_OK(ctx, tailor_cache_put_trial(ctx, c, &other, "rmsnorm_warp", "{}", "timed", 1.0, NULL));
    trial_seen all = {0};
    CHECK_OK(ctx, tailor_cache_foreach_trial(ctx, c, FP_H200, NULL, see_trial, &all));
    CHECKF(all.n == 5, "trials of one device: %d, want 5", all.n);
    static const char *const want[] = {
        "matmul k=64,m=1,n=64 matmul_gemv {} timed 3",
        "rmsnorm m=1,n=1536 rmsnorm_warp {\"BLOCK\":128} timed 7",
        "rmsnorm m=1,n=1536 rmsnorm_warp {\"BLOCK\":64} timed 12.5",
        "rmsnorm m=1,n=1536 rmsnorm_block {\"BLOCK\":32} compile-error -1",
        "rmsnorm m=1,n=1536 rmsnorm_block {\"BLOCK\":64} wrong-result -1"};
    for (int i = 0; i < 5 && i < all.n; i++)
        CHECKF(strcmp(all.line[i], want[i]) == 0, "trial %d: '%s', want '%s'", i, all.line[i],
               want[i]);
    trial_seen one = {0};
    CHECK_OK(ctx, tailor_cache_foreach_trial(ctx, c, NULL, "rmsnorm", see_trial, &one));
    CHECKF(one.n == 5, "rmsnorm trials of every device: %d, want 5", one.n);
    trial_seen none = {0};
    CHECK_OK(ctx, tailor_cache_foreach_trial(ctx, c, FP_A100, "matmul", see_trial, &none));
    CHECK(none.n == 0);
    CHECK(tailor_cache_foreach_trial(ctx, c, NULL, NULL, NULL, NULL) == TAILOR_ERR_MISUSE);
    tailor_ctx_clear(ctx);
    tailor_cache_close(c);
}

/* A read-only open: a missing file is named and not created; an existing one reads, refuses
 * writes and is left byte for byte as it was (no WAL switch either). */
static void test_readonly(tailor_ctx *ctx)
{
    char missing[512], path[512];
    path_in_tmp(missing, sizeof missing, "no-such.sqlite");
    tailor_cache *c = NULL;
    CHECK(tailor_cache_open_readonly(ctx, missing, &c) == TAILOR_ERR_NOT_FOUND && !c);
    CHECKF(strstr(tailor_ctx_message(ctx), missing) &&
               strstr(tailor_ctx_message(ctx), "does not exist"),
           "%s", tailor_ctx_message(ctx));
    struct stat st;
    CHECK(stat(missing, &st) != 0);

    path_in_tmp(path, sizeof path, "ro.sqlite");
    c = open_cache(ctx, "ro.sqlite");
    owned_winner ws[2];
    put_winners(ctx, c, FP_H200, 2, ws);
    tailor_cache_close(c);
    sql_exec(path, "PRAGMA journal_mode = DELETE");
    size_t n0 = 0, n1 = 0;
    char *before = test_read_file(path, &n0);
    c = NULL;
    CHECK_OK(ctx, tailor_cache_open_readonly(ctx, path, &c));
    if (c) {
        CHECK(count_winners(ctx, c, FP_H200) == 2);
        tailor_cache_key key = {FP_H200, "rmsnorm", "m=9,n=1536", "bf16", HASH1};
        CHECK(tailor_cache_put_winner(ctx, c, &key, &ws[0].w) != TAILOR_OK);
        tailor_cache_close(c);
    }
    char *after = test_read_file(path, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);

    /* a WAL file (as tailor writes every cache) read and closed leaves no -wal or -shm beside it */
    sql_exec(path, "PRAGMA journal_mode = WAL");
    char wal[600], shm[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    CHECK(stat(wal, &st) != 0 && stat(shm, &st) != 0);
    c = NULL;
    CHECK_OK(ctx, tailor_cache_open_readonly(ctx, path, &c));
    if (c) {
        CHECK(count_winners(ctx, c, FP_H200) == 2);
        CHECKF(stat(wal, &st) == 0, "reading a WAL cache made no %s (the check below proves nothing)",
               wal);
        tailor_cache_close(c);
    }
    CHECKF(stat(wal, &st) != 0 && stat(shm, &st) != 0,
           "a read-only open of a WAL cache left %s or %s behind", wal, shm);
}

/* PRAGMA user_version of the file at path. */
static int file_schema_version(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* A version-1 cache (written before winners said who chose them) at path, with one winner of
 * (FP_H200, rmsnorm, m=1,n=1536, bf16, HASH1) chosen by the tuner in 12 trials. */
static const char v1_schema[] =
    "PRAGMA journal_mode = DELETE;"
    "CREATE TABLE winners ("
    " fingerprint TEXT NOT NULL, op TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,"
    " space_hash TEXT NOT NULL,"
    " template TEXT NOT NULL, kernel TEXT NOT NULL, params TEXT NOT NULL, launch TEXT NOT NULL,"
    " binary_kind TEXT NOT NULL CHECK (binary_kind IN ('cubin', 'ptx')),"
    " binary BLOB NOT NULL, binary_sha256 TEXT NOT NULL, arch TEXT NOT NULL,"
    " median_us REAL NOT NULL, spread_us REAL NOT NULL, tuned_at INTEGER NOT NULL,"
    " n_trials INTEGER NOT NULL,"
    " PRIMARY KEY (fingerprint, op, shape, dtype, space_hash));"
    "CREATE TABLE trials ("
    " fingerprint TEXT NOT NULL, op TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,"
    " space_hash TEXT NOT NULL, template TEXT NOT NULL, params TEXT NOT NULL,"
    " outcome TEXT NOT NULL, median_us REAL, detail TEXT NOT NULL DEFAULT '',"
    " recorded_at INTEGER NOT NULL,"
    " PRIMARY KEY (fingerprint, op, shape, dtype, space_hash, template, params));"
    "PRAGMA application_id = 1953264177;"
    "PRAGMA user_version = 1;";

static void write_v1_cache(const char *path)
{
    char sql[1024], sha[65];
    sql_exec(path, v1_schema);
    tailor_sha256_hex("\x7f" "ELF", 4, sha);
    snprintf(sql, sizeof sql,
             "INSERT INTO winners VALUES ('%s', 'rmsnorm', 'm=1,n=1536', 'bf16', '%s',"
             " 'rmsnorm_warp', 'rmsnorm_warp_k', '{\"BLOCK\":64}', '{\"grid\":[1,1,1]}', 'cubin',"
             " X'7f454c46', '%s', 'sm_90', 2.5, 0.1, 1700000000, 12)", FP_H200, HASH1, sha);
    sql_exec(path, sql);
}

/* A version-1 cache (written before winners said who chose them) is read as it is when opened
 * read-only (every winner the tuner's), and upgraded in place when opened for writing. */
static void test_schema_upgrade(tailor_ctx *ctx)
{
    char path[512];
    path_in_tmp(path, sizeof path, "v1.sqlite");
    write_v1_cache(path);
    tailor_cache_key key = {FP_H200, "rmsnorm", "m=1,n=1536", "bf16", HASH1};
    tailor_cache_winner got;
    int found = 0;

    tailor_cache *c = NULL;
    CHECK_OK(ctx, tailor_cache_open_readonly(ctx, path, &c));
    if (c) {
        CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &key, &got, &found));
        CHECK(found && got.n_trials == 12 && got.chosen_in_step == 0);
        if (found)
            tailor_cache_winner_free(&got);
        CHECK(count_winners(ctx, c, NULL) == 1);
        tailor_cache_close(c);
    }
    CHECKF(file_schema_version(path) == 1, "a read-only open changed the schema to %d",
           file_schema_version(path));

    c = open_cache(ctx, "v1.sqlite");
    CHECKF(file_schema_version(path) == TAILOR_CACHE_SCHEMA_VERSION, "schema %d after opening",
           file_schema_version(path));
    found = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &key, &got, &found));
    CHECK(found && got.n_trials == 12 && got.median_us == 2.5 && got.chosen_in_step == 0);
    if (found)
        tailor_cache_winner_free(&got);
    owned_winner stepped;
    make_winner(&stepped, 1);
    CHECK(stepped.w.chosen_in_step == 1);
    CHECK_OK(ctx, tailor_cache_put_winner(ctx, c, &key, &stepped.w));
    tailor_cache_close(c);
    c = open_cache(ctx, "v1.sqlite"); /* opening an upgraded file again changes nothing */
    found = 0;
    CHECK_OK(ctx, tailor_cache_get_winner(ctx, c, &key, &got, &found));
    CHECK(found && winners_equal(&got, &stepped.w));
    if (found)
        tailor_cache_winner_free(&got);
    tailor_cache_close(c);
}

/* Two writers opening the same version-1 file at once: one upgrades it, the other finds it
 * upgraded (the version is read again inside the upgrade's transaction); nothing is lost. */
static void test_upgrade_race(tailor_ctx *ctx)
{
    char path[512];
    path_in_tmp(path, sizeof path, "v1race.sqlite");
    write_v1_cache(path);
    race_two_writers(path);
    CHECK(file_schema_version(path) == TAILOR_CACHE_SCHEMA_VERSION);
    tailor_cache *c = open_cache(ctx, "v1race.sqlite");
    CHECK(count_winners(ctx, c, NULL) == 2 * PER_WRITER + 1);
    tailor_cache_close(c);
}

int main(void)
{
    uint64_t seed = 20240611;
    printf("test_cache: seed %llu\n", (unsigned long long)seed);
    test_rng_seed(&rng, seed);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tailor_test_cache_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    printf("test_cache: files in %s\n", tmpdir);
    tailor_ctx *ctx = test_ctx();
    test_winner_round_trip(ctx);
    test_trials(ctx);
    test_trial_listing(ctx);
    test_reopen_and_wal(ctx);
    test_space_hash(ctx);
    test_refused_files(ctx);
    test_export_import(ctx);
    test_fingerprint_refusal(ctx);
    test_carveout_keys(ctx);
    test_damaged_files(ctx);
    test_half_bad_import(ctx);
    test_two_writers(ctx);
    test_check_detects_damage(ctx);
    test_clear(ctx);
    test_paths(ctx);
    test_readonly(ctx);
    test_schema_upgrade(ctx);
    test_upgrade_race(ctx);
    tailor_ctx_destroy(ctx);
    int rc = test_finish("test_cache");
    if (rc == 0) { /* keep the files of a failing run for a look */
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return rc;
}
