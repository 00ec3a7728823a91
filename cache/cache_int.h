/* cache_int.h — private to cache/: the connection struct and the helpers cache.c and
 * cache_export.c share (transactions with retry, SQLite error translation, storing a winner). */
#ifndef TAILOR_CACHE_INT_H
#define TAILOR_CACHE_INT_H

#include <sqlite3.h>

#include "cache.h"

struct tailor_cache {
    sqlite3 *db;
    char *path;  /* the file opened (owned) */
    int last_rc; /* the SQLite result code behind the last TAILOR_ERR_SQLITE, to spot SQLITE_BUSY */
};

/* The body of a write transaction: runs between BEGIN IMMEDIATE and COMMIT. */
typedef tailor_status (*tcache_body_fn)(tailor_ctx *ctx, tailor_cache *c, void *user);

/* Runs body inside BEGIN IMMEDIATE ... COMMIT; rolls back when it fails. A transaction that
 * fails only because another process holds the lock (SQLITE_BUSY past the busy timeout, or
 * during commit) is retried from the start, a bounded number of times. `what` names the
 * operation for messages ("storing a winner"). */
tailor_status tcache_write_txn(tailor_ctx *ctx, tailor_cache *c, const char *what,
                               tcache_body_fn body, void *user);

/* Records a SQLite failure (rc and sqlite3_errmsg) on ctx as one sentence naming the cache
 * file and `what`; returns TAILOR_ERR_SQLITE. */
tailor_status tcache_sqlite_fail(tailor_ctx *ctx, tailor_cache *c, int rc, const char *what);

/* Prepares sql or fails through tcache_sqlite_fail. */
tailor_status tcache_prepare(tailor_ctx *ctx, tailor_cache *c, const char *sql, sqlite3_stmt **st);

/* Checks that every part of key is non-empty text; TAILOR_ERR_MISUSE naming the part if not. */
tailor_status tcache_key_check(tailor_ctx *ctx, const tailor_cache_key *key);

/* Checks a winner's fields (non-empty names, kind "cubin"/"ptx", a binary, finite times).
 * `where` prefixes the message (the function or file being handled). */
tailor_status tcache_winner_check(tailor_ctx *ctx, const tailor_cache_winner *w, const char *where);

/* Inside a write transaction: stores w under key (replacing what put_winner replaces) with the
 * given binary digest (hex; computed when NULL). */
tailor_status tcache_store_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                  const tailor_cache_winner *w, const char *binary_sha256);

/* Copies src into a fixed field; 0 when it fits, -1 when it would be truncated. */
int tcache_copy_field(char *dst, size_t size, const char *src);

#endif
