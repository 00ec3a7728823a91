/* cache.c — the tuning cache in SQLite: opening (path, WAL, schema), winners, trials, listing,
 * clearing and the integrity check. Export and import live in cache_export.c. */
#include "cache_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sha256.h"

/* 'tlr1' in the database header marks a file as a tailor cache. */
#define TCACHE_APPLICATION_ID 0x746c7231
#define TCACHE_BUSY_TIMEOUT_MS 10000
#define TCACHE_MAX_ATTEMPTS 30

static const char *const trial_outcomes[] = {
    "refused-budget", "refused-shape", "compile-error", "launch-error",
    "wrong-result",   "timeout",       "timed",
};

/* Who chose a winner (schema 2): the tuner, or step tuning in a model's decode step. */
#define CHOSEN_COLUMN_SQL "chosen TEXT NOT NULL DEFAULT 'tuner' CHECK (chosen IN ('tuner', 'step'))"

static const char schema_sql[] =
    "CREATE TABLE winners ("
    " fingerprint TEXT NOT NULL, op TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,"
    " space_hash TEXT NOT NULL,"
    " template TEXT NOT NULL, kernel TEXT NOT NULL, params TEXT NOT NULL, launch TEXT NOT NULL,"
    " binary_kind TEXT NOT NULL CHECK (binary_kind IN ('cubin', 'ptx')),"
    " binary BLOB NOT NULL, binary_sha256 TEXT NOT NULL, arch TEXT NOT NULL,"
    " median_us REAL NOT NULL, spread_us REAL NOT NULL, tuned_at INTEGER NOT NULL,"
    " n_trials INTEGER NOT NULL,"
    " " CHOSEN_COLUMN_SQL ","
    " PRIMARY KEY (fingerprint, op, shape, dtype, space_hash));"
    "CREATE TABLE trials ("
    " fingerprint TEXT NOT NULL, op TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,"
    " space_hash TEXT NOT NULL, template TEXT NOT NULL, params TEXT NOT NULL,"
    " outcome TEXT NOT NULL CHECK (outcome IN ('refused-budget', 'refused-shape',"
    "  'compile-error', 'launch-error', 'wrong-result', 'timeout', 'timed')),"
    " median_us REAL, detail TEXT NOT NULL DEFAULT '', recorded_at INTEGER NOT NULL,"
    " PRIMARY KEY (fingerprint, op, shape, dtype, space_hash, template, params));"
    "PRAGMA application_id = 1953264177;" /* TCACHE_APPLICATION_ID */
    "PRAGMA user_version = 2;";           /* TAILOR_CACHE_SCHEMA_VERSION */

/* Version 1 to 2: winners record who chose them (the tuner, or step tuning in the decode step). */
static const char upgrade_1_to_2_sql[] =
    "ALTER TABLE winners ADD COLUMN " CHOSEN_COLUMN_SQL ";"
    "PRAGMA user_version = 2;";

/* A read-only connection to a version-1 file sees its winners through this view, so that every
 * query reads the same columns (unqualified names find the temp schema first). */
static const char v1_winners_view_sql[] =
    "CREATE TEMP VIEW winners AS SELECT *, 'tuner' AS chosen FROM main.winners;";

/* ---- small shared helpers ------------------------------------------------------------------ */

const char *tailor_cache_chosen_name(int chosen_in_step) { return chosen_in_step ? "step" : "tuner"; }

int tailor_cache_chosen_parse(const char *text, int *chosen_in_step)
{
    if (!text || (strcmp(text, "step") != 0 && strcmp(text, "tuner") != 0))
        return -1;
    *chosen_in_step = strcmp(text, "step") == 0;
    return 0;
}

int tcache_copy_field(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) {
        memcpy(dst, src, size - 1);
        dst[size - 1] = '\0';
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

static int is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

tailor_status tcache_sqlite_fail(tailor_ctx *ctx, tailor_cache *c, int rc, const char *what)
{
    c->last_rc = rc;
    const char *msg = c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT)
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "cache file '%s' is damaged or not a database (%s while %s)",
                                c->path, msg, what);
    if ((rc & 0xff) == SQLITE_CANTOPEN)
        return tailor_set_error(ctx, TAILOR_ERR_IO,
                                "cannot open cache file '%s' (does its folder exist, and is it "
                                "writable?): %s",
                                c->path, msg);
    return tailor_set_error(ctx, TAILOR_ERR_SQLITE, "cache file '%s': %s failed: %s", c->path,
                            what, msg);
}

tailor_status tcache_prepare(tailor_ctx *ctx, tailor_cache *c, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(c->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        *st = NULL;
        return tcache_sqlite_fail(ctx, c, rc, "preparing a statement");
    }
    return TAILOR_OK;
}

static void backoff(int attempt)
{
    struct timespec ts = {0, (long)(attempt < 20 ? attempt : 20) * 5000000L};
    nanosleep(&ts, NULL);
}

tailor_status tcache_write_txn(tailor_ctx *ctx, tailor_cache *c, const char *what,
                               tcache_body_fn body, void *user)
{
    for (int attempt = 1;; attempt++) {
        c->last_rc = SQLITE_OK;
        tailor_status st;
        int rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            st = tcache_sqlite_fail(ctx, c, rc, what);
        } else {
            st = body(ctx, c, user);
            if (st == TAILOR_OK) {
                rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
                if (rc == SQLITE_OK)
                    return TAILOR_OK;
                st = tcache_sqlite_fail(ctx, c, rc, what);
            }
            if (!sqlite3_get_autocommit(c->db))
                sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        }
        if (st != TAILOR_ERR_SQLITE || !is_busy(c->last_rc) || attempt >= TCACHE_MAX_ATTEMPTS)
            return st;
        backoff(attempt);
    }
}

tailor_status tcache_key_check(tailor_ctx *ctx, const tailor_cache_key *key)
{
    if (!key)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "cache: no key given");
    const char *names[] = {"fingerprint", "op", "shape", "dtype", "space_hash"};
    const char *vals[] = {key->fingerprint, key->op, key->shape, key->dtype, key->space_hash};
    for (int i = 0; i < 5; i++)
        if (!vals[i] || !vals[i][0])
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "cache key: field '%s' is empty",
                                    names[i]);
    return TAILOR_OK;
}

tailor_status tcache_winner_check(tailor_ctx *ctx, const tailor_cache_winner *w, const char *where)
{
    if (!w)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: no winner given", where);
    const char *names[] = {"template", "kernel", "params", "launch", "arch"};
    const char *vals[] = {w->template_name, w->kernel_name, w->params_json, w->launch_json,
                          w->arch};
    for (int i = 0; i < 5; i++)
        if (!vals[i] || !vals[i][0])
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: winner field '%s' is empty",
                                    where, names[i]);
    if (strcmp(w->binary_kind, "cubin") != 0 && strcmp(w->binary_kind, "ptx") != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "%s: winner field 'binary_kind' is '%.8s', not 'cubin' or 'ptx'",
                                where, w->binary_kind);
    if (!w->binary || w->binary_size == 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: winner field 'binary' is empty",
                                where);
    if (!isfinite(w->median_us) || w->median_us < 0 || !isfinite(w->spread_us) || w->spread_us < 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "%s: winner fields 'median_us'/'spread_us' must be finite and >= 0",
                                where);
    return TAILOR_OK;
}

static void bind_key(sqlite3_stmt *st, const tailor_cache_key *key)
{
    sqlite3_bind_text(st, 1, key->fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key->op, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, key->shape, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, key->dtype, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, key->space_hash, -1, SQLITE_STATIC);
}

/* Runs a statement that returns no rows, then finalizes it. */
static tailor_status step_done(tailor_ctx *ctx, tailor_cache *c, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    tailor_status s = rc == SQLITE_DONE ? TAILOR_OK : tcache_sqlite_fail(ctx, c, rc, what);
    sqlite3_finalize(st);
    return s;
}

/* ---- opening -------------------------------------------------------------------------------- */

/* $XDG_CACHE_HOME/tailor/cache.sqlite (an absolute XDG_CACHE_HOME only, as the spec says) or
 * $HOME/.cache/tailor/cache.sqlite. */
static tailor_status default_location(tailor_ctx *ctx, char *buf, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, size, "%s/tailor/cache.sqlite", xdg);
    else if (home && home[0])
        n = snprintf(buf, size, "%s/.cache/tailor/cache.sqlite", home);
    else
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "no cache location is known: set TAILOR_CACHE, XDG_CACHE_HOME or "
                                "HOME, or pass --cache FILE");
    if (n < 0 || (size_t)n >= size)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "the default cache path is too long");
    return TAILOR_OK;
}

tailor_status tailor_cache_default_path(tailor_ctx *ctx, char *buf, size_t size)
{
    const char *env = getenv("TAILOR_CACHE");
    if (env && env[0]) {
        if (tcache_copy_field(buf, size, env) != 0)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "TAILOR_CACHE is too long");
        return TAILOR_OK;
    }
    return default_location(ctx, buf, size);
}

/* mkdir -p of the folder that holds `file`. */
static tailor_status make_parent_dirs(tailor_ctx *ctx, const char *file)
{
    char dir[4096];
    if (tcache_copy_field(dir, sizeof dir, file) != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "cache path '%s' is too long", file);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return TAILOR_OK;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        char saved = *p;
        if (saved != '/' && saved != '\0')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return tailor_set_error(ctx, TAILOR_ERR_IO, "cannot create cache folder '%s': %s", dir,
                                    strerror(errno));
        *p = saved;
        if (saved == '\0')
            return TAILOR_OK;
    }
}

/* Reads the file's application_id, user_version and table count in one statement, so that the
 * three come from one snapshot (another process may be creating the schema meanwhile). */
static tailor_status read_identity(tailor_ctx *ctx, tailor_cache *c, int *app, int *version,
                                   int *tables)
{
    sqlite3_stmt *st;
    tailor_status s = tcache_prepare(ctx, c,
                                     "SELECT (SELECT application_id FROM pragma_application_id),"
                                     " (SELECT user_version FROM pragma_user_version),"
                                     " (SELECT count(*) FROM sqlite_master)",
                                     &st);
    if (s != TAILOR_OK)
        return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *app = sqlite3_column_int(st, 0);
        *version = sqlite3_column_int(st, 1);
        *tables = sqlite3_column_int(st, 2);
    } else {
        s = tcache_sqlite_fail(ctx, c, rc, "reading the schema version");
    }
    sqlite3_finalize(st);
    return s;
}

/* Refuses a file that is some other application's database or a newer schema. *version receives
 * the file's schema version (0: not set up yet). */
static tailor_status check_identity(tailor_ctx *ctx, tailor_cache *c, int *version)
{
    int app = 0, tables = 0;
    tailor_status s = read_identity(ctx, c, &app, version, &tables);
    if (s != TAILOR_OK)
        return s;
    if (app != 0 && app != TCACHE_APPLICATION_ID)
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "cache file '%s' is another application's database "
                                "(application_id %d), not a tailor cache",
                                c->path, app);
    if (*version > TAILOR_CACHE_SCHEMA_VERSION)
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "cache file '%s' has schema version %d but this tailor knows only "
                                "up to version %d: use a newer tailor or another cache file",
                                c->path, *version, TAILOR_CACHE_SCHEMA_VERSION);
    if (app == 0 && tables > 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "cache file '%s' is a SQLite database of another application "
                                "(it has tables but no tailor schema)",
                                c->path);
    return TAILOR_OK;
}

static tailor_status set_wal(tailor_ctx *ctx, tailor_cache *c)
{
    for (int attempt = 1;; attempt++) {
        sqlite3_stmt *st;
        tailor_status s = tcache_prepare(ctx, c, "PRAGMA journal_mode = WAL", &st);
        if (s != TAILOR_OK)
            return s;
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *)sqlite3_column_text(st, 0);
            if (!mode || strcmp(mode, "wal") != 0)
                tailor_log(ctx, TAILOR_LOG_WARN,
                           "cache file '%s' could not be put in WAL mode (it stays in '%s'); "
                           "concurrent writers will wait longer",
                           c->path, mode ? mode : "?");
            sqlite3_finalize(st);
            return TAILOR_OK;
        }
        sqlite3_finalize(st);
        if (!is_busy(rc) || attempt >= TCACHE_MAX_ATTEMPTS)
            return tcache_sqlite_fail(ctx, c, rc, "setting WAL mode");
        backoff(attempt);
    }
}

/* Creates the tables, or brings an older schema up to date, unless another process did so first
 * (checked inside the transaction). */
static tailor_status create_schema_body(tailor_ctx *ctx, tailor_cache *c, void *user)
{
    (void)user;
    int version = 0;
    tailor_status s = check_identity(ctx, c, &version);
    if (s != TAILOR_OK || version == TAILOR_CACHE_SCHEMA_VERSION)
        return s;
    const char *sql = version == 0 ? schema_sql : upgrade_1_to_2_sql;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? TAILOR_OK
                           : tcache_sqlite_fail(ctx, c, rc, version == 0 ? "creating the schema"
                                                                         : "upgrading the schema");
}

static tailor_status setup_connection(tailor_ctx *ctx, tailor_cache *c)
{
    sqlite3_busy_timeout(c->db, TCACHE_BUSY_TIMEOUT_MS);
    int version = 0;
    tailor_status s = check_identity(ctx, c, &version);
    if (s == TAILOR_OK)
        s = set_wal(ctx, c);
    if (s == TAILOR_OK && sqlite3_exec(c->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK)
        s = tcache_sqlite_fail(ctx, c, sqlite3_errcode(c->db), "setting synchronous mode");
    if (s == TAILOR_OK && version < TAILOR_CACHE_SCHEMA_VERSION)
        s = tcache_write_txn(ctx, c, version == 0 ? "creating the schema" : "upgrading the schema",
                             create_schema_body, NULL);
    return s;
}

/* The file to open: path, or $TAILOR_CACHE, or the default location (whose folders are created
 * when `make_dirs`); def holds the default. */
static tailor_status resolve_path(tailor_ctx *ctx, const char **path, char *def, size_t size,
                                  int make_dirs)
{
    if (*path && (*path)[0])
        return TAILOR_OK;
    const char *env = getenv("TAILOR_CACHE");
    if (env && env[0]) {
        *path = env;
        return TAILOR_OK;
    }
    tailor_status s = default_location(ctx, def, size);
    if (s == TAILOR_OK && make_dirs)
        s = make_parent_dirs(ctx, def);
    if (s == TAILOR_OK)
        *path = def;
    return s;
}

/* A read-only connection: SQL cannot write through it (query_only), no WAL switch (that
 * writes), no schema; a file without the schema is refused rather than read as empty. */
static tailor_status setup_readonly(tailor_ctx *ctx, tailor_cache *c)
{
    sqlite3_busy_timeout(c->db, TCACHE_BUSY_TIMEOUT_MS);
    int version = 0;
    tailor_status s = check_identity(ctx, c, &version);
    if (s == TAILOR_OK && version == 0)
        s = tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                             "cache file '%s' holds no tailor cache (no schema: an empty file?)",
                             c->path);
    if (s == TAILOR_OK && version == 1) { /* a temp view: before query_only, which refuses it */
        int rc = sqlite3_exec(c->db, v1_winners_view_sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            s = tcache_sqlite_fail(ctx, c, rc, "reading a version-1 schema");
    }
    if (s == TAILOR_OK) {
        int rc = sqlite3_exec(c->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            s = tcache_sqlite_fail(ctx, c, rc, "opening read-only");
    }
    return s;
}

/* Reopens c->path read-only as an immutable URI. A WAL file (every cache tailor writes is one)
 * is read through its -shm index, which SQLite cannot create in a folder we may not write; with
 * no -shm there, no connection is writing the file, and immutable reads need none. */
static int reopen_immutable(tailor_cache *c)
{
    char uri[3 * 4096 + 32] = "file:";
    size_t n = strlen(uri);
    for (const unsigned char *p = (const unsigned char *)c->path; *p && n + 4 < sizeof uri; p++) {
        if (isalnum(*p) || strchr("/._-~", *p))
            uri[n++] = (char)*p;
        else
            n += (size_t)snprintf(uri + n, sizeof uri - n, "%%%02X", *p);
    }
    snprintf(uri + n, sizeof uri - n, "?immutable=1");
    sqlite3_close_v2(c->db);
    c->db = NULL;
    return sqlite3_open_v2(uri, &c->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
}

static tailor_status open_connection(tailor_ctx *ctx, const char *path, int readonly,
                                     tailor_cache **out)
{
    tailor_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory opening cache '%s'", path);
    }
    /* A read-only open asks for a read-write handle all the same (query_only keeps SQL from
     * writing, setup_readonly): as the last connection to a WAL file it removes the -wal and
     * -shm files on close, which a SQLITE_OPEN_READONLY handle leaves beside the cache. SQLite
     * opens a write-protected file read-only by itself; a folder we may not write is read
     * through the immutable URI below. */
    int flags = readonly ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(path, &c->db, flags, NULL);
    tailor_status s = rc != SQLITE_OK ? tcache_sqlite_fail(ctx, c, rc, "opening")
                      : readonly      ? setup_readonly(ctx, c)
                                      : setup_connection(ctx, c);
    if (s == TAILOR_ERR_SQLITE && readonly && (c->last_rc & 0xff) == SQLITE_READONLY) {
        rc = reopen_immutable(c);
        s = rc == SQLITE_OK ? setup_readonly(ctx, c) : tcache_sqlite_fail(ctx, c, rc, "opening");
    }
    if (s != TAILOR_OK) {
        tailor_cache_close(c);
        return s;
    }
    tailor_log(ctx, TAILOR_LOG_DEBUG, "cache: opened '%s'%s", c->path, readonly ? " read-only" : "");
    *out = c;
    return TAILOR_OK;
}

tailor_status tailor_cache_open(tailor_ctx *ctx, const char *path, tailor_cache **out)
{
    if (!out)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_open: out is NULL");
    *out = NULL;
    char def[4096];
    tailor_status s = resolve_path(ctx, &path, def, sizeof def, 1);
    return s == TAILOR_OK ? open_connection(ctx, path, 0, out) : s;
}

tailor_status tailor_cache_open_readonly(tailor_ctx *ctx, const char *path, tailor_cache **out)
{
    if (!out)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_open_readonly: out is NULL");
    *out = NULL;
    char def[4096];
    tailor_status s = resolve_path(ctx, &path, def, sizeof def, 0);
    if (s != TAILOR_OK)
        return s;
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "cache file '%s' does not exist", path);
    return open_connection(ctx, path, 1, out);
}

void tailor_cache_close(tailor_cache *c)
{
    if (!c)
        return;
    sqlite3_close_v2(c->db);
    free(c->path);
    free(c);
}

const char *tailor_cache_path(const tailor_cache *c) { return c ? c->path : ""; }

/* ---- winners -------------------------------------------------------------------------------- */

/* Columns every winner query selects, in this order, after any key columns. */
#define WINNER_COLUMNS                                                                          \
    "template, kernel, params, launch, binary_kind, binary, binary_sha256, arch, median_us, "   \
    "spread_us, tuned_at, n_trials, chosen"

static const char *col_text(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? t : "";
}

/* Fills w from a row whose winner columns start at `col`: a view into the statement (copy = 0)
 * or owned copies (copy = 1). *sha receives the stored binary digest (a view). */
static tailor_status row_to_winner(tailor_ctx *ctx, tailor_cache *c, sqlite3_stmt *st, int col,
                                   int copy, tailor_cache_winner *w, const char **sha)
{
    memset(w, 0, sizeof *w);
    if (tcache_copy_field(w->template_name, sizeof w->template_name, col_text(st, col)) ||
        tcache_copy_field(w->kernel_name, sizeof w->kernel_name, col_text(st, col + 1)) ||
        tcache_copy_field(w->binary_kind, sizeof w->binary_kind, col_text(st, col + 4)) ||
        tcache_copy_field(w->arch, sizeof w->arch, col_text(st, col + 7)))
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "cache file '%s' holds a winner whose template, kernel, "
                                "binary_kind or arch is longer than its field",
                                c->path);
    const void *bin = sqlite3_column_blob(st, col + 5);
    size_t bin_size = (size_t)sqlite3_column_bytes(st, col + 5);
    const char *params = col_text(st, col + 2), *launch = col_text(st, col + 3);
    *sha = col_text(st, col + 6);
    snprintf(w->binary_sha256, sizeof w->binary_sha256, "%s", *sha);
    w->median_us = sqlite3_column_double(st, col + 8);
    w->spread_us = sqlite3_column_double(st, col + 9);
    w->tuned_at = sqlite3_column_int64(st, col + 10);
    w->n_trials = sqlite3_column_int(st, col + 11);
    if (tailor_cache_chosen_parse(col_text(st, col + 12), &w->chosen_in_step) != 0)
        w->chosen_in_step = 0; /* the table's CHECK allows no other value */
    w->binary_size = bin_size;
    if (!copy) {
        w->params_json = (char *)params;
        w->launch_json = (char *)launch;
        w->binary = (void *)bin;
        return TAILOR_OK;
    }
    w->params_json = strdup(params);
    w->launch_json = strdup(launch);
    w->binary = malloc(bin_size ? bin_size : 1);
    if (!w->params_json || !w->launch_json || !w->binary) {
        tailor_cache_winner_free(w);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory reading a cache winner");
    }
    if (bin_size)
        memcpy(w->binary, bin, bin_size);
    return TAILOR_OK;
}

/* *count = the integer `count_sql` (one row, key bound as ?1..?5) answers for key; `what` names
 * the query in an error. */
static tailor_status keyed_count(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                 const char *count_sql, const char *what, int *count)
{
    *count = 0;
    tailor_status s = tcache_key_check(ctx, key);
    sqlite3_stmt *st = NULL;
    if (s == TAILOR_OK)
        s = tcache_prepare(ctx, c, count_sql, &st);
    if (s != TAILOR_OK)
        return s;
    bind_key(st, key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *count = sqlite3_column_int(st, 0);
    else
        s = tcache_sqlite_fail(ctx, c, rc, what);
    sqlite3_finalize(st);
    return s;
}

tailor_status tailor_cache_get_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                      tailor_cache_winner *out, int *found)
{
    if (!c || !out || !found)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_get_winner: NULL argument");
    memset(out, 0, sizeof *out);
    *found = 0;
    tailor_status s = tcache_key_check(ctx, key);
    sqlite3_stmt *st = NULL;
    if (s == TAILOR_OK)
        s = tcache_prepare(ctx, c,
                           "SELECT " WINNER_COLUMNS " FROM winners WHERE fingerprint = ?1 AND "
                           "op = ?2 AND shape = ?3 AND dtype = ?4 AND space_hash = ?5",
                           &st);
    if (s != TAILOR_OK)
        return s;
    bind_key(st, key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *sha = NULL;
        s = row_to_winner(ctx, c, st, 0, 1, out, &sha);
        char hex[65];
        if (s == TAILOR_OK) {
            tailor_sha256_hex(out->binary, out->binary_size, hex);
            if (strcmp(hex, sha) != 0) {
                tailor_cache_winner_free(out);
                s = tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                     "cache file '%s': the binary of %s %s %s is damaged (its "
                                     "sha256 no longer matches): run tailor cache verify",
                                     c->path, key->op, key->shape, key->dtype);
            }
        }
        *found = s == TAILOR_OK;
    } else if (rc != SQLITE_DONE) {
        s = tcache_sqlite_fail(ctx, c, rc, "reading a winner");
    }
    sqlite3_finalize(st);
    return s;
}

tailor_status tailor_cache_has_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                      int *found)
{
    if (!c || !found)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_has_winner: NULL argument");
    int n = 0;
    tailor_status s = keyed_count(ctx, c, key,
                                  "SELECT count(*) FROM winners WHERE fingerprint = ?1 AND op = ?2 "
                                  "AND shape = ?3 AND dtype = ?4 AND space_hash = ?5",
                                  "looking up a winner", &n);
    *found = s == TAILOR_OK && n > 0;
    return s;
}

void tailor_cache_winner_free(tailor_cache_winner *w)
{
    if (!w)
        return;
    free(w->params_json);
    free(w->launch_json);
    free(w->binary);
    memset(w, 0, sizeof *w);
}

tailor_status tcache_store_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                  const tailor_cache_winner *w, const char *binary_sha256)
{
    char hex[65];
    if (!binary_sha256) {
        tailor_sha256_hex(w->binary, w->binary_size, hex);
        binary_sha256 = hex;
    }
    static const char *const sqls[] = {
        /* a new space supersedes the old one: its trials are stale */
        "DELETE FROM trials WHERE fingerprint = ?1 AND op = ?2 AND shape = ?3 AND dtype = ?4 "
        "AND space_hash <> ?5",
        "DELETE FROM winners WHERE fingerprint = ?1 AND op = ?2 AND shape = ?3 AND dtype = ?4",
        "INSERT INTO winners (fingerprint, op, shape, dtype, space_hash, " WINNER_COLUMNS
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    };
    for (int i = 0; i < 3; i++) {
        sqlite3_stmt *st;
        tailor_status s = tcache_prepare(ctx, c, sqls[i], &st);
        if (s != TAILOR_OK)
            return s;
        bind_key(st, key);
        if (i == 2) {
            sqlite3_bind_text(st, 6, w->template_name, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 7, w->kernel_name, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 8, w->params_json, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 9, w->launch_json, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 10, w->binary_kind, -1, SQLITE_STATIC);
            sqlite3_bind_blob64(st, 11, w->binary, (sqlite3_uint64)w->binary_size, SQLITE_STATIC);
            sqlite3_bind_text(st, 12, binary_sha256, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 13, w->arch, -1, SQLITE_STATIC);
            sqlite3_bind_double(st, 14, w->median_us);
            sqlite3_bind_double(st, 15, w->spread_us);
            sqlite3_bind_int64(st, 16, w->tuned_at);
            sqlite3_bind_int(st, 17, w->n_trials);
            sqlite3_bind_text(st, 18, tailor_cache_chosen_name(w->chosen_in_step), -1,
                              SQLITE_STATIC);
        }
        s = step_done(ctx, c, st, "storing a winner");
        if (s != TAILOR_OK)
            return s;
    }
    return TAILOR_OK;
}

typedef struct put_winner_args {
    const tailor_cache_key *key;
    const tailor_cache_winner *w;
} put_winner_args;

static tailor_status put_winner_body(tailor_ctx *ctx, tailor_cache *c, void *user)
{
    put_winner_args *a = user;
    return tcache_store_winner(ctx, c, a->key, a->w, NULL);
}

tailor_status tailor_cache_put_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                      const tailor_cache_winner *w)
{
    if (!c)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_put_winner: no cache");
    tailor_status s = tcache_key_check(ctx, key);
    if (s == TAILOR_OK)
        s = tcache_winner_check(ctx, w, "tailor_cache_put_winner");
    if (s != TAILOR_OK)
        return s;
    put_winner_args a = {key, w};
    return tcache_write_txn(ctx, c, "storing a winner", put_winner_body, &a);
}

/* ---- trials --------------------------------------------------------------------------------- */

typedef struct put_trial_args {
    const tailor_cache_key *key;
    const char *template_name, *params_json, *outcome, *detail;
    double median_us;
} put_trial_args;

static tailor_status put_trial_body(tailor_ctx *ctx, tailor_cache *c, void *user)
{
    put_trial_args *a = user;
    sqlite3_stmt *st;
    tailor_status s = tcache_prepare(
        ctx, c,
        "INSERT OR REPLACE INTO trials (fingerprint, op, shape, dtype, space_hash, template, "
        "params, outcome, median_us, detail, recorded_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        &st);
    if (s != TAILOR_OK)
        return s;
    bind_key(st, a->key);
    sqlite3_bind_text(st, 6, a->template_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, a->params_json, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, a->outcome, -1, SQLITE_STATIC);
    if (a->median_us >= 0)
        sqlite3_bind_double(st, 9, a->median_us);
    else
        sqlite3_bind_null(st, 9);
    sqlite3_bind_text(st, 10, a->detail ? a->detail : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 11, (sqlite3_int64)time(NULL));
    return step_done(ctx, c, st, "storing a trial");
}

static int known_outcome(const char *outcome)
{
    for (size_t i = 0; i < sizeof trial_outcomes / sizeof trial_outcomes[0]; i++)
        if (strcmp(outcome, trial_outcomes[i]) == 0)
            return 1;
    return 0;
}

tailor_status tailor_cache_put_trial(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                     const char *template_name, const char *params_json,
                                     const char *outcome, double median_us, const char *detail)
{
    if (!c)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_put_trial: no cache");
    tailor_status s = tcache_key_check(ctx, key);
    if (s != TAILOR_OK)
        return s;
    if (!template_name || !template_name[0] || !params_json || !params_json[0])
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "tailor_cache_put_trial: template or params is empty");
    if (!outcome || !known_outcome(outcome))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "tailor_cache_put_trial: outcome '%s' is not one of refused-budget, "
                                "refused-shape, compile-error, launch-error, wrong-result, "
                                "timeout, timed",
                                outcome ? outcome : "(null)");
    if (strcmp(outcome, "timed") == 0 && !(median_us >= 0 && isfinite(median_us)))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "tailor_cache_put_trial: a 'timed' trial needs a median_us >= 0");
    put_trial_args a = {key, template_name, params_json, outcome, detail,
                        isfinite(median_us) ? median_us : -1.0};
    return tcache_write_txn(ctx, c, "storing a trial", put_trial_body, &a);
}

tailor_status tailor_cache_get_trial(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                     const char *template_name, const char *params_json,
                                     char *outcome, size_t outcome_size, double *median_us,
                                     int *found)
{
    if (!c || !template_name || !params_json || !found)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_get_trial: NULL argument");
    *found = 0;
    if (outcome && outcome_size)
        outcome[0] = '\0';
    if (median_us)
        *median_us = -1.0;
    tailor_status s = tcache_key_check(ctx, key);
    sqlite3_stmt *st = NULL;
    if (s == TAILOR_OK)
        s = tcache_prepare(ctx, c,
                           "SELECT outcome, median_us FROM trials WHERE fingerprint = ?1 AND "
                           "op = ?2 AND shape = ?3 AND dtype = ?4 AND space_hash = ?5 AND "
                           "template = ?6 AND params = ?7",
                           &st);
    if (s != TAILOR_OK)
        return s;
    bind_key(st, key);
    sqlite3_bind_text(st, 6, template_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, params_json, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *found = 1;
        if (outcome && outcome_size)
            (void)tcache_copy_field(outcome, outcome_size, col_text(st, 0));
        if (median_us && sqlite3_column_type(st, 1) != SQLITE_NULL)
            *median_us = sqlite3_column_double(st, 1);
    } else if (rc != SQLITE_DONE) {
        s = tcache_sqlite_fail(ctx, c, rc, "reading a trial");
    }
    sqlite3_finalize(st);
    return s;
}

tailor_status tailor_cache_count_trials(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                        int *count)
{
    if (!c || !count)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_count_trials: NULL argument");
    return keyed_count(ctx, c, key,
                       "SELECT count(*) FROM trials WHERE fingerprint = ?1 AND op = ?2 AND "
                       "shape = ?3 AND dtype = ?4 AND space_hash = ?5",
                       "counting trials", count);
}

/* ---- listing, clearing, checking ------------------------------------------------------------ */

/* Runs `sql` with up to two optional text parameters (?1, ?2; NULL binds SQL NULL) and calls
 * row(..., st, user) on each row until it returns non-zero: 1 stops quietly, -1 stops with the
 * status it left in *status. `what` names the listing in a SQLite error. */
typedef int (*tcache_row_fn)(tailor_ctx *ctx, tailor_cache *c, sqlite3_stmt *st, void *user,
                             tailor_status *status);

static tailor_status tcache_foreach_row(tailor_ctx *ctx, tailor_cache *c, const char *sql,
                                        const char *p1, const char *p2, tcache_row_fn row,
                                        void *user, const char *what)
{
    sqlite3_stmt *st;
    tailor_status s = tcache_prepare(ctx, c, sql, &st);
    if (s != TAILOR_OK)
        return s;
    if (p1)
        sqlite3_bind_text(st, 1, p1, -1, SQLITE_STATIC);
    if (p2)
        sqlite3_bind_text(st, 2, p2, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (row(ctx, c, st, user, &s) != 0)
            break;
    if (s == TAILOR_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        s = tcache_sqlite_fail(ctx, c, rc, what);
    sqlite3_finalize(st);
    return s;
}

/* The key columns 0..4 of a winners or trials row. */
static tailor_cache_key row_key(sqlite3_stmt *st)
{
    return (tailor_cache_key){col_text(st, 0), col_text(st, 1), col_text(st, 2), col_text(st, 3),
                              col_text(st, 4)};
}

typedef struct {
    int (*fn)(void *user, const tailor_cache_key *key, const tailor_cache_winner *w);
    void *user;
} winner_visit;

static int visit_winner(tailor_ctx *ctx, tailor_cache *c, sqlite3_stmt *st, void *user,
                        tailor_status *status)
{
    winner_visit *v = user;
    tailor_cache_key key = row_key(st);
    tailor_cache_winner w;
    const char *sha;
    *status = row_to_winner(ctx, c, st, 5, 0, &w, &sha);
    if (*status != TAILOR_OK)
        return -1;
    return v->fn(v->user, &key, &w) != 0;
}

tailor_status tailor_cache_foreach_winner(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint,
                                          int (*fn)(void *user, const tailor_cache_key *key,
                                                    const tailor_cache_winner *w),
                                          void *user)
{
    if (!c || !fn)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_foreach_winner: NULL argument");
    winner_visit v = {fn, user};
    return tcache_foreach_row(ctx, c,
                              "SELECT fingerprint, op, shape, dtype, space_hash, " WINNER_COLUMNS
                              " FROM winners WHERE ?1 IS NULL OR fingerprint = ?1"
                              " ORDER BY fingerprint, op, shape, dtype",
                              fingerprint, NULL, visit_winner, &v, "listing winners");
}

typedef struct {
    int (*fn)(void *user, const tailor_cache_key *key, const tailor_cache_trial *t);
    void *user;
} trial_visit;

static int visit_trial(tailor_ctx *ctx, tailor_cache *c, sqlite3_stmt *st, void *user,
                       tailor_status *status)
{
    (void)ctx;
    (void)c;
    (void)status;
    trial_visit *v = user;
    tailor_cache_key key = row_key(st);
    tailor_cache_trial t = {col_text(st, 5), col_text(st, 6), col_text(st, 7), col_text(st, 9),
                            sqlite3_column_type(st, 8) == SQLITE_NULL ? -1.0
                                                                      : sqlite3_column_double(st, 8),
                            (long long)sqlite3_column_int64(st, 10)};
    return v->fn(v->user, &key, &t) != 0;
}

tailor_status tailor_cache_foreach_trial(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint,
                                         const char *op,
                                         int (*fn)(void *user, const tailor_cache_key *key,
                                                   const tailor_cache_trial *t),
                                         void *user)
{
    if (!c || !fn)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_foreach_trial: NULL argument");
    trial_visit v = {fn, user};
    return tcache_foreach_row(
        ctx, c,
        "SELECT fingerprint, op, shape, dtype, space_hash, template, params, outcome, median_us,"
        " detail, recorded_at FROM trials"
        " WHERE (?1 IS NULL OR fingerprint = ?1) AND (?2 IS NULL OR op = ?2)"
        " ORDER BY fingerprint, op, shape, dtype, space_hash, outcome <> 'timed', median_us,"
        " outcome, template, params",
        fingerprint, op, visit_trial, &v, "listing trials");
}

static tailor_status clear_body(tailor_ctx *ctx, tailor_cache *c, void *user)
{
    const char *fingerprint = user;
    static const char *const sqls[] = {
        "DELETE FROM winners WHERE ?1 IS NULL OR fingerprint = ?1",
        "DELETE FROM trials WHERE ?1 IS NULL OR fingerprint = ?1",
    };
    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *st;
        tailor_status s = tcache_prepare(ctx, c, sqls[i], &st);
        if (s != TAILOR_OK)
            return s;
        if (fingerprint)
            sqlite3_bind_text(st, 1, fingerprint, -1, SQLITE_STATIC);
        s = step_done(ctx, c, st, "clearing");
        if (s != TAILOR_OK)
            return s;
    }
    return TAILOR_OK;
}

tailor_status tailor_cache_clear(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint)
{
    if (!c)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_clear: no cache");
    return tcache_write_txn(ctx, c, "clearing", clear_body, (void *)fingerprint);
}

static tailor_status integrity_check(tailor_ctx *ctx, tailor_cache *c)
{
    sqlite3_stmt *st;
    tailor_status s = tcache_prepare(ctx, c, "PRAGMA integrity_check", &st);
    if (s != TAILOR_OK)
        return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && strcmp(col_text(st, 0), "ok") != 0)
        s = tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                             "cache file '%s' fails SQLite's integrity check: %s", c->path,
                             col_text(st, 0));
    else if (rc != SQLITE_ROW)
        s = tcache_sqlite_fail(ctx, c, rc, "the integrity check");
    sqlite3_finalize(st);
    return s;
}

typedef struct {
    int *n_ok, *n_bad;
} check_counts;

static int visit_check(tailor_ctx *ctx, tailor_cache *c, sqlite3_stmt *st, void *user,
                       tailor_status *status)
{
    (void)status;
    check_counts *n = user;
    char hex[65];
    tailor_sha256_hex(sqlite3_column_blob(st, 4), (size_t)sqlite3_column_bytes(st, 4), hex);
    if (strcmp(hex, col_text(st, 5)) == 0) {
        (*n->n_ok)++;
        return 0;
    }
    (*n->n_bad)++;
    tailor_log(ctx, TAILOR_LOG_WARN,
               "cache file '%s': the binary of %s %s %s on '%s' is damaged (sha256 %.12s..., "
               "stored %.12s...)",
               c->path, col_text(st, 1), col_text(st, 2), col_text(st, 3), col_text(st, 0), hex,
               col_text(st, 5));
    return 0;
}

tailor_status tailor_cache_check(tailor_ctx *ctx, tailor_cache *c, int *n_ok, int *n_bad)
{
    if (!c || !n_ok || !n_bad)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "tailor_cache_check: NULL argument");
    *n_ok = *n_bad = 0;
    tailor_status s = integrity_check(ctx, c);
    if (s != TAILOR_OK)
        return s;
    check_counts n = {n_ok, n_bad};
    return tcache_foreach_row(ctx, c,
                              "SELECT fingerprint, op, shape, dtype, binary, binary_sha256 FROM winners"
                              " ORDER BY fingerprint, op, shape, dtype",
                              NULL, NULL, visit_check, &n, "checking binaries");
}
