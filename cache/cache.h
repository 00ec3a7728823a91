/* cache.h — the tuning cache: one SQLite file holding, per (device, op, shape, dtype, space),
 * the winning kernel with its compiled binary, and the outcome of every trial; export/import of a
 * device's winners as one checksummed file. The format is described in docs/cache-format.md. */
#ifndef TAILOR_CACHE_H
#define TAILOR_CACHE_H

#include <stddef.h>

#include "tailor.h"

/* Opaque: one open connection to a cache file. Not shared between threads or across fork(). */
typedef struct tailor_cache tailor_cache;

/* The schema version this build writes (PRAGMA user_version). A newer file is refused; an older
 * one is upgraded when opened for writing and read as it is when opened read-only. */
#define TAILOR_CACHE_SCHEMA_VERSION 2

/* The five parts of an entry's key. All must be non-empty text.
 *   fingerprint: tailor_device_fingerprint() text ("NVIDIA H200|sm_90|132|232448|13000|13.0"), or
 *                "rehearse:PROFILE@<live fingerprint>" for rehearsal runs; the tuner appends
 *                TAILOR_FINGERPRINT_CARVEOUT and the carveout ("|carveout=driver") when kernels
 *                did not load with the default one (tailor_tuner_fingerprint, tuner/tuner.h);
 *   op:          the op name ("rmsnorm");
 *   shape:       canonical shape text from tailor_shape_format ("k=1536,m=1");
 *   dtype:       "fp16" or "bf16" (any dtype name is stored as given);
 *   space_hash:  hex sha256 over every template of the op (text, Lua space, shared headers). */
typedef struct tailor_cache_key {
    const char *fingerprint, *op, *shape, *dtype, *space_hash;
} tailor_cache_key;

/* The last field of a fingerprint keyed under a non-default shared-memory carveout, before its
 * value ("driver" or a percentage). */
#define TAILOR_FINGERPRINT_CARVEOUT "|carveout="

/* A winner. From tailor_cache_get_winner the three pointers are owned by the caller
 * (tailor_cache_winner_free); inside a tailor_cache_foreach_winner callback they are a read-only
 * view valid only during the call. */
typedef struct tailor_cache_winner {
    char template_name[64];  /* the template that won ("rmsnorm_warp") */
    char kernel_name[256];   /* the instantiated kernel's name (encodes every parameter) */
    char *params_json;       /* the configuration, JSON text ("{\"BLOCK\":256}") */
    char *launch_json;       /* launch geometry as the tuner wrote it (grid/block/smem/args); opaque */
    char binary_kind[8];     /* "cubin" or "ptx" */
    void *binary;            /* the compiled code, binary_size bytes */
    size_t binary_size;
    char arch[16];           /* "sm_90" */
    double median_us;        /* median time of one launch, microseconds */
    double spread_us;        /* its spread (the tuner's measure of noise), microseconds */
    long long tuned_at;      /* unix seconds */
    int n_trials;            /* configurations tried when this winner was chosen */
    int chosen_in_step;      /* 1: step tuning chose it in a model's decode step over the tuner's
                                pick (then it need not be its key's fastest alone) */
    char binary_sha256[65];  /* as read: the digest stored with the binary when it was written
                                (a binary whose own digest differs is damaged); writes ignore it
                                and store the binary's own */
} tailor_cache_winner;

/* A winner's chosen_in_step as the cache and its exports spell it ("step" or "tuner"), and
 * back: 0 and *chosen_in_step set for those two words, -1 for anything else. */
const char *tailor_cache_chosen_name(int chosen_in_step);
int tailor_cache_chosen_parse(const char *text, int *chosen_in_step);

/* Opens (creating if needed) the cache at `path`; NULL means $TAILOR_CACHE when set and
 * non-empty, else $XDG_CACHE_HOME/tailor/cache.sqlite, else ~/.cache/tailor/cache.sqlite (the
 * default's folder is created). Sets WAL mode, a 10 s busy timeout and the schema. Fails with
 * TAILOR_ERR_MISMATCH for a file of a newer schema or another application, TAILOR_ERR_SQLITE or
 * TAILOR_ERR_IO otherwise, the message naming the file. *out is freed with tailor_cache_close. */
tailor_status tailor_cache_open(tailor_ctx *ctx, const char *path, tailor_cache **out);

/* Opens an existing cache at `path` (NULL: as in tailor_cache_open) for reading only: nothing
 * is created or written (no WAL switch, no schema), so a write-protected file can be listed and
 * exported. TAILOR_ERR_NOT_FOUND naming the file when it does not exist; TAILOR_ERR_MISMATCH for
 * a file without a tailor schema (or of a newer one, or another application's); the rest as
 * tailor_cache_open. Writing through the connection fails with TAILOR_ERR_SQLITE. */
tailor_status tailor_cache_open_readonly(tailor_ctx *ctx, const char *path, tailor_cache **out);

/* Closes the connection and frees c; NULL is fine. */
void tailor_cache_close(tailor_cache *c);

/* The file the cache was opened on. Owned by c. */
const char *tailor_cache_path(const tailor_cache *c);

/* Writes the default cache path (env or XDG or home, as in tailor_cache_open with NULL) into buf.
 * TAILOR_ERR_MISUSE when no home folder is known or buf is too small. Creates nothing. */
tailor_status tailor_cache_default_path(tailor_ctx *ctx, char *buf, size_t size);

/* Looks up the winner of `key`. *found = 1 and *out filled (caller frees with
 * tailor_cache_winner_free) when present; *found = 0 and *out zeroed when not. A stored binary
 * whose sha256 no longer matches is TAILOR_ERR_MISMATCH (never handed out). */
tailor_status tailor_cache_get_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                      tailor_cache_winner *out, int *found);

/* *found = 1 when `key` has a winner, without reading its binary (nor checking its sha256:
 * a damaged one is found here and refused by tailor_cache_get_winner). For counting what a run
 * will find at start, where reading every binary twice would cost the load. */
tailor_status tailor_cache_has_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                      int *found);

/* Frees the pointers inside w and zeroes it; NULL is fine. Does not free w itself. */
void tailor_cache_winner_free(tailor_cache_winner *w);

/* Stores w as the winner of `key`, in one transaction. It replaces the winner of the same key
 * and any winner of the same (fingerprint, op, shape, dtype) under another space hash, whose
 * trials are dropped with it (the space changed, so they are stale). TAILOR_ERR_MISUSE for an
 * empty field, a binary_kind other than "cubin"/"ptx" or a missing binary. */
tailor_status tailor_cache_put_winner(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                      const tailor_cache_winner *w);

/* Records (or replaces) the outcome of one trial: `outcome` is one of "refused-budget",
 * "refused-shape", "compile-error", "launch-error", "wrong-result", "timeout", "timed";
 * median_us < 0 means none; detail may be NULL. Unique per (key, template_name, params_json). */
tailor_status tailor_cache_put_trial(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                     const char *template_name, const char *params_json,
                                     const char *outcome, double median_us, const char *detail);

/* Looks up a recorded trial. *found = 1 and outcome (NUL-terminated, truncated to outcome_size)
 * and *median_us (-1 when none) filled when present; *found = 0 when not. */
tailor_status tailor_cache_get_trial(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                     const char *template_name, const char *params_json,
                                     char *outcome, size_t outcome_size, double *median_us,
                                     int *found);

/* Number of trials recorded under `key` (all outcomes). */
tailor_status tailor_cache_count_trials(tailor_ctx *ctx, tailor_cache *c, const tailor_cache_key *key,
                                        int *count);

/* One recorded trial, as tailor_cache_foreach_trial hands it out (read-only views valid during
 * the call). median_us < 0: no time (every outcome but "timed"); detail "" when none. */
typedef struct tailor_cache_trial {
    const char *template_name, *params_json, *outcome, *detail;
    double median_us;
    long long recorded_at; /* unix seconds */
} tailor_cache_trial;

/* Calls fn for each recorded trial (of `fingerprint` and of `op`; NULL: any), grouped by key
 * (fingerprint, op, shape, dtype, space hash, in that order) and, within a key, the timed ones
 * fastest first, then the rest by outcome, template and params. fn returns 0 to go on, nonzero to
 * stop (not an error). The cache must not be written from inside fn. */
tailor_status tailor_cache_foreach_trial(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint,
                                         const char *op,
                                         int (*fn)(void *user, const tailor_cache_key *key,
                                                   const tailor_cache_trial *t),
                                         void *user);

/* Calls fn for each winner (of `fingerprint`, or all when NULL), ordered by fingerprint, op,
 * shape, dtype. key and w are read-only views valid during the call. fn returns 0 to go on,
 * nonzero to stop (not an error). The cache must not be written from inside fn. */
tailor_status tailor_cache_foreach_winner(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint,
                                          int (*fn)(void *user, const tailor_cache_key *key,
                                                    const tailor_cache_winner *w),
                                          void *user);

/* Writes the winners of `fingerprint` into one export file (replaced atomically through a
 * temporary file). *n_entries receives their count (0 is allowed: an empty export). */
tailor_status tailor_cache_export(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint,
                                  const char *file, int *n_entries);

/* What the cache cannot judge of an imported entry by itself: whether its shape, dtype and
 * parameters are ones the program writes (the tuner's rules: tailor_op_check_cache_entry,
 * tuner/op.h). NULL when they are, else the end of the sentence ("is not in canonical form ...")
 * with *field set to the field it is about. */
typedef const char *(*tailor_cache_entry_check)(const tailor_cache_key *key,
                                                const char *params_json, const char **field);

/* Imports an export file in one transaction: all entries or none. Refuses with
 * TAILOR_ERR_MISMATCH, listing every differing field, when the file's fingerprint is not
 * `live_fingerprint`; with TAILOR_ERR_PARSE or TAILOR_ERR_MISMATCH, naming the file, the entry
 * and the field, when it is damaged or tampered with (bad JSON, checksum, missing field, binary
 * digest, an arch the fingerprint's device cannot run, a launch that is no JSON object, or what
 * `check` refuses; NULL: no such check); TAILOR_ERR_UNSUPPORTED for a newer export format
 * version. *n_entries receives the count imported (0 on failure). */
tailor_status tailor_cache_import(tailor_ctx *ctx, tailor_cache *c, const char *file,
                                  const char *live_fingerprint, tailor_cache_entry_check check,
                                  int *n_entries);

/* Deletes the winners and trials of `fingerprint`, or of every device when NULL, in one
 * transaction. */
tailor_status tailor_cache_clear(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint);

/* Integrity: PRAGMA integrity_check (a failure is TAILOR_ERR_MISMATCH with SQLite's first
 * complaint), then each winner's binary against its stored sha256. *n_ok and *n_bad count the
 * winners; each bad one is logged at WARN with its key. */
tailor_status tailor_cache_check(tailor_ctx *ctx, tailor_cache *c, int *n_ok, int *n_bad);

/* Writes into buf the fields in which two fingerprints differ, e.g. "GPU name: 'NVIDIA
 * A100-SXM4-80GB' in the file, 'NVIDIA H200' here; SMs: 108 in the file, 132 here". "" when they
 * are equal. Never fails (truncates to size). */
void tailor_cache_fingerprint_diff(const char *a_file, const char *b_here, char *buf, size_t size);

#endif
