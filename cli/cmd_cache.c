/* cmd_cache.c — `tailor cache ls | show | trials | export FILE | import FILE | verify | clear`:
 * look into, carry and check the tuning cache. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cache.h"
#include "cli.h"
#include "device.h"
#include "sha256.h"
#include "tuner.h"

static void cache_usage(FILE *out)
{
    fprintf(out,
            "usage: tailor cache COMMAND [options]\n\n"
            "  ls                one line per cached winner (device, op, shape, dtype, template,\n"
            "                    params, median time)\n"
            "  show              every field of each winner\n"
            "  trials            every configuration tried per (op, shape, dtype), fastest first:\n"
            "                    its time or why it lost (refused, wrong, failed), the winner marked\n"
            "  export FILE       this device's winners, with their binaries, into one file\n"
            "  import FILE       a file exported on an identical host (all or nothing; refused\n"
            "                    when the device fingerprints differ or the file is damaged)\n"
            "  verify            SQLite's integrity check, every binary's sha256, and (with a\n"
            "                    GPU) every winner of this GPU re-run against its reference\n"
            "  clear [--all]     forget this device's winners and trials (--all: every device's)\n\n"
            "options:\n"
            "  --cache FILE        the cache file (default: $TAILOR_CACHE, else\n"
            "                      $XDG_CACHE_HOME/tailor/cache.sqlite or ~/.cache/tailor/...)\n"
            "  --device NAME       the device: gpu, cuda:N, N or a profile name (default: GPU 0);\n"
            "                      ls and show list every device unless it is given\n"
            "  --fingerprint TEXT  the device fingerprint itself, instead of asking the GPU\n"
            "  --op OP             ls, show, trials: only this op\n"
            "  --shape K=V,...     trials: only this shape\n"
            "  --json              ls, show, trials: a JSON list of objects\n"
            "  --all               clear: every device's entries\n");
}

typedef struct cache_opts {
    const char *cache_path;  /* --cache, NULL: env or default */
    const char *device;      /* --device, NULL: not given */
    const char *fingerprint; /* --fingerprint, NULL: not given */
    const char *op;          /* --op filter */
    char shape[256];         /* --shape filter (canonical text), "" = any */
    int json, all;
} cache_opts;

/* ---- the device fingerprint ------------------------------------------------------------------ */

/* Fills buf with the fingerprint named by --fingerprint (as given) or --device (default: live
 * GPU 0) as the tuner keys it, with this process's carveout (tailor_tuner_fingerprint: a
 * TAILOR_CARVEOUT other than the default names other winners). Prints the failure and returns 1
 * when it cannot be had. */
static int resolve_fingerprint(tailor_ctx *ctx, const cache_opts *o, char *buf, size_t size)
{
    if (o->fingerprint) {
        snprintf(buf, size, "%s", o->fingerprint);
        return 0;
    }
    tailor_device_info info;
    tailor_status s = tailor_device_resolve(ctx, o->device ? o->device : "", &info);
    if (s != TAILOR_OK) {
        fprintf(stderr, "tailor: %s (pass --fingerprint TEXT to name the device without a GPU)\n",
                tailor_ctx_message(ctx));
        return 1;
    }
    s = tailor_tuner_fingerprint(ctx, &info, NULL, buf, size);
    return s != TAILOR_OK ? cli_fail(ctx, s) : 0;
}

/* ---- ls and show ----------------------------------------------------------------------------- */

typedef struct list_state {
    const cache_opts *o;
    int show; /* 1: every field */
    int n;
    cJSON *json; /* the list being built with --json */
    int oom;
} list_state;

/* The device part of a fingerprint for a one-line listing: the GPU name, with any rehearsal
 * prefix kept ("rehearse:t4@NVIDIA H200") and any carveout the key holds after it
 * ("NVIDIA H200 carveout=driver"). */
static void device_label(const char *fp, char *buf, size_t size)
{
    const char *bar = strchr(fp, '|');
    const char *carveout = strstr(fp, TAILOR_FINGERPRINT_CARVEOUT);
    int n = (int)(bar ? (size_t)(bar - fp) : strlen(fp));
    if (carveout)
        snprintf(buf, size, "%.*s %s", n, fp, carveout + 1);
    else
        snprintf(buf, size, "%.*s", n, fp);
}

/* Adds text that should be JSON as parsed JSON, or as a string when it does not parse. */
static cJSON *json_text(const char *text)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
    return j ? j : cJSON_CreateString(text);
}

/* A JSON object holding the cache key's fields (NULL when out of memory). */
static cJSON *key_json(const tailor_cache_key *key)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "fingerprint", key->fingerprint);
    cJSON_AddStringToObject(o, "op", key->op);
    cJSON_AddStringToObject(o, "shape", key->shape);
    cJSON_AddStringToObject(o, "dtype", key->dtype);
    cJSON_AddStringToObject(o, "space_hash", key->space_hash);
    return o;
}

/* Prints a built JSON list; 1 when it cannot be printed (out of memory). */
static int print_json(const cJSON *list)
{
    char *text = cJSON_Print(list);
    if (!text)
        return 1;
    printf("%s\n", text);
    free(text);
    return 0;
}

/* The fingerprint filter of a listing: *filter = NULL (every device) unless --device or
 * --fingerprint names one (into fp). 1 when it cannot be had (printed). */
static int device_filter(tailor_ctx *ctx, const cache_opts *o, char *fp, size_t size,
                         const char **filter)
{
    *filter = NULL;
    if (!o->device && !o->fingerprint)
        return 0;
    if (resolve_fingerprint(ctx, o, fp, size))
        return 1;
    *filter = fp;
    return 0;
}

static cJSON *winner_json(const tailor_cache_key *key, const tailor_cache_winner *w, int show)
{
    cJSON *o = key_json(key);
    if (!o)
        return NULL;
    char sha[65];
    tailor_sha256_hex(w->binary, w->binary_size, sha);
    cJSON_AddStringToObject(o, "template", w->template_name);
    cJSON_AddStringToObject(o, "kernel", w->kernel_name);
    cJSON_AddItemToObject(o, "params", json_text(w->params_json));
    if (show)
        cJSON_AddItemToObject(o, "launch", json_text(w->launch_json));
    cJSON_AddStringToObject(o, "arch", w->arch);
    cJSON_AddStringToObject(o, "binary_kind", w->binary_kind);
    cJSON_AddNumberToObject(o, "binary_size", (double)w->binary_size);
    if (show) { /* the stored digest; a binary that no longer matches it is damaged */
        cJSON_AddStringToObject(o, "binary_sha256", w->binary_sha256);
        cJSON_AddBoolToObject(o, "binary_damaged", strcmp(sha, w->binary_sha256) != 0);
    }
    cJSON_AddNumberToObject(o, "median_us", w->median_us);
    cJSON_AddNumberToObject(o, "spread_us", w->spread_us);
    cJSON_AddNumberToObject(o, "tuned_at", (double)w->tuned_at);
    cJSON_AddNumberToObject(o, "n_trials", w->n_trials);
    cJSON_AddStringToObject(o, "chosen", tailor_cache_chosen_name(w->chosen_in_step));
    return o;
}

static void print_line(const tailor_cache_key *key, const tailor_cache_winner *w)
{
    char dev[128];
    device_label(key->fingerprint, dev, sizeof dev);
    printf("%-18s  %-14s  %-26s  %-4s  %-22s  %-28s  %10.2f us%s\n", dev, key->op, key->shape,
           key->dtype, w->template_name, w->params_json, w->median_us,
           w->chosen_in_step ? "  (step)" : "");
}

static void print_block(const tailor_cache_key *key, const tailor_cache_winner *w)
{
    char sha[65], size[32], when[64];
    tailor_sha256_hex(w->binary, w->binary_size, sha);
    time_t t = (time_t)w->tuned_at;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    else
        snprintf(when, sizeof when, "%lld", w->tuned_at);
    printf("%s %s %s on %s\n", key->op, key->shape, key->dtype, key->fingerprint);
    printf("  space     %s\n", key->space_hash);
    printf("  template  %s\n", w->template_name);
    printf("  kernel    %s\n", w->kernel_name);
    printf("  params    %s\n", w->params_json);
    printf("  launch    %s\n", w->launch_json);
    printf("  binary    %s for %s, %s B, sha256 %s\n", w->binary_kind, w->arch,
           tailor_fmt_int(size, sizeof size, (long long)w->binary_size), w->binary_sha256);
    if (strcmp(sha, w->binary_sha256) != 0)
        printf("  DAMAGED   the binary's own sha256 is %s: run tailor cache verify\n", sha);
    printf("  time      %.3f us median, spread %.3f us, %d trials, tuned %s\n", w->median_us,
           w->spread_us, w->n_trials, when);
    printf("  chosen    %s\n\n", w->chosen_in_step
                                     ? "in a model's decode step (step tuning), over the tuner's "
                                       "pick: not necessarily the fastest alone"
                                     : "by the tuner, timed alone");
}

static int list_one(void *user, const tailor_cache_key *key, const tailor_cache_winner *w)
{
    list_state *ls = user;
    if (ls->o->op && strcmp(ls->o->op, key->op) != 0)
        return 0;
    ls->n++;
    if (ls->json) {
        cJSON *o = winner_json(key, w, ls->show);
        if (!o || !cJSON_AddItemToArray(ls->json, o)) {
            ls->oom = 1;
            return 1;
        }
    } else if (ls->show) {
        print_block(key, w);
    } else {
        print_line(key, w);
    }
    return 0;
}

static int cache_list(tailor_ctx *ctx, tailor_cache *c, const cache_opts *o, int show)
{
    char fp[1024];
    const char *filter;
    if (device_filter(ctx, o, fp, sizeof fp, &filter))
        return 1;
    list_state ls = {o, show, 0, o->json ? cJSON_CreateArray() : NULL, 0};
    if (o->json && !ls.json)
        ls.oom = 1;
    tailor_status s = ls.oom ? TAILOR_OK : tailor_cache_foreach_winner(ctx, c, filter, list_one, &ls);
    int rc = 0;
    if (s != TAILOR_OK) {
        rc = cli_fail(ctx, s);
    } else if (ls.oom) {
        fprintf(stderr, "tailor: out of memory\n");
        rc = 1;
    } else if (ls.json) {
        rc = print_json(ls.json);
    } else if (ls.n == 0) {
        fprintf(stderr, "tailor: no cached winners%s%s in %s\n", o->op ? " of op " : "",
                o->op ? o->op : "", tailor_cache_path(c));
    }
    cJSON_Delete(ls.json);
    return rc;
}

/* ---- trials ---------------------------------------------------------------------------------- */

typedef struct trials_state {
    tailor_ctx *ctx;
    tailor_cache *c;
    const cache_opts *o;
    char last[1600];          /* the key of the group being listed */
    tailor_cache_winner win;  /* its winner (found) */
    int found, n, failed;
    cJSON *json;
} trials_state;

/* Whether key k is the one remembered in buf; remembers it. */
static int same_key(const tailor_cache_key *k, char *buf, size_t size)
{
    char now[1600];
    snprintf(now, sizeof now, "%s\n%s\n%s\n%s\n%s", k->fingerprint, k->op, k->shape, k->dtype,
             k->space_hash);
    int same = strcmp(now, buf) == 0;
    snprintf(buf, size, "%s", now);
    return same;
}

/* The first trial of a new key: look up its winner and (text) print the group's header. */
static int trials_group(trials_state *ts, const tailor_cache_key *key)
{
    tailor_cache_winner_free(&ts->win);
    if (tailor_cache_get_winner(ts->ctx, ts->c, key, &ts->win, &ts->found) != TAILOR_OK) {
        ts->failed = 1;
        return 1;
    }
    if (!ts->json) {
        char dev[128];
        device_label(key->fingerprint, dev, sizeof dev);
        printf("%s%s %s %s on %s (space %.12s)%s%s\n", ts->n ? "\n" : "", key->op, key->shape,
               key->dtype, dev, key->space_hash, ts->found ? ": winner " : ": no winner stored",
               ts->found ? ts->win.template_name : "");
    }
    return 0;
}

static int trials_one(void *user, const tailor_cache_key *key, const tailor_cache_trial *t)
{
    trials_state *ts = user;
    if (ts->o->shape[0] && strcmp(ts->o->shape, key->shape) != 0)
        return 0;
    if (!same_key(key, ts->last, sizeof ts->last) && trials_group(ts, key))
        return 1;
    ts->n++;
    int winner = ts->found && strcmp(ts->win.template_name, t->template_name) == 0 &&
                 strcmp(ts->win.params_json, t->params_json) == 0;
    if (!ts->json) {
        char us[32] = "-";
        if (t->median_us >= 0)
            snprintf(us, sizeof us, "%.2f us", t->median_us);
        printf("  %12s  %-14s  %-24s  %s%s%s%s\n", us, t->outcome, t->template_name,
               t->params_json, winner ? "  <- winner" : "", t->detail[0] ? "  " : "", t->detail);
        return 0;
    }
    cJSON *o = key_json(key);
    if (!o || !cJSON_AddItemToArray(ts->json, o)) {
        cJSON_Delete(o);
        ts->failed = 1;
        return 1;
    }
    cJSON_AddStringToObject(o, "template", t->template_name);
    cJSON_AddItemToObject(o, "params", json_text(t->params_json));
    cJSON_AddStringToObject(o, "outcome", t->outcome);
    if (t->median_us >= 0)
        cJSON_AddNumberToObject(o, "median_us", t->median_us);
    else
        cJSON_AddNullToObject(o, "median_us");
    cJSON_AddStringToObject(o, "detail", t->detail);
    cJSON_AddNumberToObject(o, "recorded_at", (double)t->recorded_at);
    cJSON_AddBoolToObject(o, "winner", winner);
    return 0;
}

static int cache_trials(tailor_ctx *ctx, tailor_cache *c, const cache_opts *o)
{
    char fp[1024];
    const char *filter;
    if (device_filter(ctx, o, fp, sizeof fp, &filter))
        return 1;
    trials_state ts;
    memset(&ts, 0, sizeof ts);
    ts.ctx = ctx;
    ts.c = c;
    ts.o = o;
    ts.json = o->json ? cJSON_CreateArray() : NULL;
    tailor_status s = o->json && !ts.json
                          ? tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory")
                          : tailor_cache_foreach_trial(ctx, c, filter, o->op, trials_one, &ts);
    tailor_cache_winner_free(&ts.win);
    if (s == TAILOR_OK && ts.failed)
        s = tailor_ctx_status(ctx) ? tailor_ctx_status(ctx)
                                   : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    int rc = 0;
    if (s != TAILOR_OK) {
        rc = cli_fail(ctx, s);
    } else if (ts.json) {
        rc = print_json(ts.json);
    } else if (ts.n == 0) {
        fprintf(stderr, "tailor: no recorded trials%s%s%s%s in %s\n", o->op ? " of op " : "",
                o->op ? o->op : "", o->shape[0] ? " at " : "", o->shape, tailor_cache_path(c));
    }
    cJSON_Delete(ts.json);
    return rc;
}

/* ---- export, import, verify, clear -------------------------------------------------------------- */

static int cache_export_cmd(tailor_ctx *ctx, tailor_cache *c, const cache_opts *o, const char *file)
{
    char fp[1024];
    if (resolve_fingerprint(ctx, o, fp, sizeof fp))
        return 1;
    int n = 0;
    tailor_status s = tailor_cache_export(ctx, c, fp, file, &n);
    if (s != TAILOR_OK)
        return cli_fail(ctx, s);
    printf("exported %d winner%s of '%s' to %s\n", n, n == 1 ? "" : "s", fp, file);
    return 0;
}

static int cache_import_cmd(tailor_ctx *ctx, tailor_cache *c, const cache_opts *o, const char *file)
{
    char fp[1024];
    if (resolve_fingerprint(ctx, o, fp, sizeof fp))
        return 1;
    int n = 0;
    tailor_status s = tailor_cache_import(ctx, c, file, fp, tailor_tuner_check_entry, &n);
    if (s != TAILOR_OK)
        return cli_fail(ctx, s);
    printf("imported %d winner%s from %s into %s\n", n, n == 1 ? "" : "s", file,
           tailor_cache_path(c));
    return 0;
}

typedef struct gpu_verify {
    tailor_gpu *gpu;
    char fingerprint[600];
    int ok, wrong, other_device;
} gpu_verify;

/* Re-runs one winner of this GPU (or of a rehearsal on it; under any carveout, which changes
 * speed, never results) against the op's reference. */
static int verify_one(void *user, const tailor_cache_key *key, const tailor_cache_winner *w)
{
    gpu_verify *v = user;
    if (!tailor_tuner_fingerprint_on(key->fingerprint, v->fingerprint)) {
        v->other_device++;
        return 0;
    }
    tailor_ctx *ctx = tailor_ctx_create();
    tailor_status st = tailor_tuner_verify_winner(ctx, v->gpu, key, w);
    printf("  %-6s %s %s %s %s%s%s\n", st == TAILOR_OK ? "ok" : "WRONG", key->op, key->shape,
           key->dtype, w->template_name, st ? ": " : "", st ? tailor_ctx_message(ctx) : "");
    if (st)
        v->wrong++;
    else
        v->ok++;
    tailor_ctx_destroy(ctx);
    return 0;
}

static int cache_verify_cmd(tailor_ctx *ctx, tailor_cache *c)
{
    int ok = 0, bad = 0;
    tailor_status s = tailor_cache_check(ctx, c, &ok, &bad);
    if (s != TAILOR_OK)
        return cli_fail(ctx, s);
    printf("%s: integrity ok; %d winner%s intact, %d damaged\n", tailor_cache_path(c), ok,
           ok == 1 ? "" : "s", bad);
    /* with a live GPU, every winner of this GPU is run again against its reference */
    gpu_verify v;
    memset(&v, 0, sizeof v);
    tailor_ctx *gctx = tailor_ctx_create();
    if (gctx && tailor_gpu_open(gctx, 0, &v.gpu) == TAILOR_OK) {
        tailor_device_fingerprint(tailor_gpu_info(v.gpu), v.fingerprint, sizeof v.fingerprint);
        printf("re-checking this GPU's winners against their references:\n");
        s = tailor_cache_foreach_winner(ctx, c, NULL, verify_one, &v);
        tailor_gpu_close(v.gpu);
        printf("%d right, %d wrong on this GPU; %d winner%s of other devices not run\n", v.ok,
               v.wrong, v.other_device, v.other_device == 1 ? "" : "s");
    } else {
        printf("no GPU here (%s): winners not re-run\n", gctx ? tailor_ctx_message(gctx) : "");
    }
    tailor_ctx_destroy(gctx);
    if (s != TAILOR_OK)
        return cli_fail(ctx, s);
    return bad || v.wrong ? 1 : 0;
}

static int count_one(void *user, const tailor_cache_key *key, const tailor_cache_winner *w)
{
    (void)key;
    (void)w;
    (*(int *)user)++;
    return 0;
}

static int cache_clear_cmd(tailor_ctx *ctx, tailor_cache *c, const cache_opts *o)
{
    char fp[1024];
    if (!o->all && resolve_fingerprint(ctx, o, fp, sizeof fp))
        return 1;
    const char *which = o->all ? NULL : fp;
    int n = 0;
    tailor_status s = tailor_cache_foreach_winner(ctx, c, which, count_one, &n);
    if (s == TAILOR_OK)
        s = tailor_cache_clear(ctx, c, which);
    if (s != TAILOR_OK)
        return cli_fail(ctx, s);
    printf("removed %d winner%s (and their trials) of %s%s%s from %s\n", n, n == 1 ? "" : "s",
           which ? "'" : "every device", which ? which : "", which ? "'" : "", tailor_cache_path(c));
    return 0;
}

/* ---- the command ---------------------------------------------------------------------------------- */

/* Parses the flags; returns -1 to go on, or the exit code. */
static int parse_flags(int argc, char **argv, cache_opts *o)
{
    static const struct option opts[] = {
        {"cache", required_argument, NULL, 'c'},  {"device", required_argument, NULL, 'd'},
        {"fingerprint", required_argument, NULL, 'f'}, {"op", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},         {"all", no_argument, NULL, 'a'},
        {"shape", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (cli_cache_flag("cache", optarg, &o->cache_path))
                return 2;
            break;
        case 'd': o->device = optarg; break;
        case 'f': o->fingerprint = optarg; break;
        case 'o': o->op = optarg; break;
        case 's': {
            tailor_shape sh;
            if (tailor_shape_parse(NULL, optarg, &sh) != TAILOR_OK)
                return cli_usage_error("cache", "--shape '%s' is not k=v,k=v with integer values",
                                       optarg);
            tailor_shape_format(&sh, o->shape, sizeof o->shape);
            break;
        }
        case 'j': o->json = 1; break;
        case 'a': o->all = 1; break;
        case 'h':
            cache_usage(stdout);
            return 0;
        default:
            return cli_bad_flag("cache", ch, argc, argv);
        }
    }
    if (o->fingerprint && o->device)
        return cli_usage_error("cache", "give --device or --fingerprint, not both");
    if (o->fingerprint && !o->fingerprint[0])
        return cli_usage_error("cache", "--fingerprint is empty");
    return -1;
}

/* Checks the positional arguments of a subcommand: `want` of them after its name. */
static int check_args(const char *sub, int nargs, int want, const char *what)
{
    if (nargs < want)
        return cli_usage_error("cache", "'%s' needs %s", sub, what);
    if (nargs > want)
        return cli_usage_error("cache", "'%s' takes %s", sub, want ? what : "no arguments");
    return -1;
}

/* Opens the cache for `sub`: read-only for the subcommands that only read (ls, show, trials,
 * export, verify), so that a write-protected file works and a mistyped --cache creates nothing
 * (it fails naming the file); without --cache, a default cache not made yet is created as the
 * writing subcommands do. */
static tailor_status open_for(tailor_ctx *ctx, const cache_opts *o, const char *sub,
                              tailor_cache **c)
{
    if (strcmp(sub, "import") == 0 || strcmp(sub, "clear") == 0)
        return tailor_cache_open(ctx, o->cache_path, c);
    if (o->cache_path)
        return tailor_cache_open_readonly(ctx, o->cache_path, c);
    char path[4096];
    tailor_status s = tailor_cache_default_path(ctx, path, sizeof path);
    if (s != TAILOR_OK)
        return s;
    return access(path, F_OK) == 0 ? tailor_cache_open_readonly(ctx, path, c)
                                   : tailor_cache_open(ctx, NULL, c);
}

/* 1 when the cache file `o` names exists already (or cannot be named: nothing to undo then). */
static int cache_file_exists(const cache_opts *o)
{
    char path[4096];
    const char *p = o->cache_path;
    if (!p) {
        if (tailor_cache_default_path(NULL, path, sizeof path) != TAILOR_OK)
            return 1;
        p = path;
    }
    return access(p, F_OK) == 0;
}

/* Closes c; after a failed import into a cache file that the import itself created, removes the
 * file again (unless another process stored winners in it meanwhile). */
static void close_after(tailor_cache *c, int remove_if_empty)
{
    int n = 0;
    if (!c || !remove_if_empty ||
        tailor_cache_foreach_winner(NULL, c, NULL, count_one, &n) != TAILOR_OK || n > 0) {
        tailor_cache_close(c);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s", tailor_cache_path(c));
    tailor_cache_close(c);
    remove(path);
    size_t len = strlen(path);
    snprintf(path + len, sizeof path - len, "-wal");
    remove(path);
    snprintf(path + len, sizeof path - len, "-shm");
    remove(path);
}

static int run_sub(tailor_ctx *ctx, tailor_cache *c, const cache_opts *o, const char *sub,
                   char **args)
{
    if (strcmp(sub, "ls") == 0)
        return cache_list(ctx, c, o, 0);
    if (strcmp(sub, "show") == 0)
        return cache_list(ctx, c, o, 1);
    if (strcmp(sub, "trials") == 0)
        return cache_trials(ctx, c, o);
    if (strcmp(sub, "export") == 0)
        return cache_export_cmd(ctx, c, o, args[0]);
    if (strcmp(sub, "import") == 0)
        return cache_import_cmd(ctx, c, o, args[0]);
    if (strcmp(sub, "verify") == 0)
        return cache_verify_cmd(ctx, c);
    return cache_clear_cmd(ctx, c, o);
}

int cmd_cache(int argc, char **argv)
{
    cache_opts o;
    int rc = parse_flags(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (optind >= argc)
        return cli_usage_error("cache", "a command is needed: ls, show, trials, export, import, "
                                        "verify or clear");
    const char *sub = argv[optind];
    int nargs = argc - optind - 1;
    static const char *const subs[] = {"ls", "show", "trials", "export", "import", "verify", "clear"};
    int want = -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(sub, subs[i]) == 0)
            want = (i == 3 || i == 4) ? 1 : 0;
    if (want < 0)
        return cli_usage_error("cache", "unknown command '%s' (ls, show, trials, export, import, "
                                        "verify, clear)",
                               sub);
    if ((rc = check_args(sub, nargs, want, "one FILE")) >= 0)
        return rc;
    if (want == 1 && !argv[optind + 1][0])
        return cli_usage_error("cache", "%s: FILE is empty", sub);
    if (o.all && strcmp(sub, "clear") != 0)
        return cli_usage_error("cache", "--all goes with 'clear' only");
    int listing = strcmp(sub, "ls") == 0 || strcmp(sub, "show") == 0 || strcmp(sub, "trials") == 0;
    if ((o.json || o.op) && !listing)
        return cli_usage_error("cache", "--json and --op go with 'ls', 'show' and 'trials' only");
    if (o.shape[0] && strcmp(sub, "trials") != 0)
        return cli_usage_error("cache", "--shape goes with 'trials' only");
    if (o.all && (o.device || o.fingerprint))
        return cli_usage_error("cache", "'clear --all' takes no --device or --fingerprint");

    tailor_ctx *ctx = cli_ctx();
    tailor_cache *c = NULL;
    int new_file = strcmp(sub, "import") == 0 && !cache_file_exists(&o);
    tailor_status s = open_for(ctx, &o, sub, &c);
    rc = s == TAILOR_OK ? run_sub(ctx, c, &o, sub, argv + optind + 1) : cli_fail(ctx, s);
    close_after(c, new_file && rc != 0);
    tailor_ctx_destroy(ctx);
    return rc;
}
