/* tailor.h — status codes, the error/log context every tailor call takes. */
#ifndef TAILOR_H
#define TAILOR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Every public call returns a status. 0 is success; the rest come in families. */
typedef enum tailor_status {
    TAILOR_OK = 0,
    TAILOR_ERR_NOMEM,       /* an allocation failed */
    TAILOR_ERR_MISUSE,      /* a bad argument or flag from the caller */
    TAILOR_ERR_IO,          /* a file could not be read or written */
    TAILOR_ERR_PARSE,       /* malformed input: JSON, safetensors header, shape string, ... */
    TAILOR_ERR_NOT_FOUND,   /* a named thing (template, profile, tensor, cache entry) is absent */
    TAILOR_ERR_UNSUPPORTED, /* valid input this build cannot handle (yet) */
    TAILOR_ERR_NO_DRIVER,   /* libcuda.so.1 could not be loaded */
    TAILOR_ERR_NO_DEVICE,   /* the driver loaded but has no usable GPU */
    TAILOR_ERR_CUDA,        /* a driver API call failed */
    TAILOR_ERR_NVRTC,       /* a runtime compile failed (the message carries the log) */
    TAILOR_ERR_LUA,         /* a search-space script failed (file and line in the message) */
    TAILOR_ERR_SQLITE,      /* the cache database failed */
    TAILOR_ERR_VERIFY,      /* a kernel's result disagrees with its reference */
    TAILOR_ERR_BUDGET,      /* a configuration exceeds the device's budget */
    TAILOR_ERR_MISMATCH,    /* an import or cache entry belongs to another device or is damaged */
    TAILOR_ERR_NO_COMPILE,  /* a compile was needed while TAILOR_NO_COMPILE=1 */
    TAILOR_ERR_TIMEOUT,     /* a kernel ran past its time limit */
    TAILOR_STATUS_COUNT
} tailor_status;

typedef enum tailor_log_level {
    TAILOR_LOG_DEBUG = 0,
    TAILOR_LOG_INFO,
    TAILOR_LOG_WARN,
    TAILOR_LOG_ERROR
} tailor_log_level;

/* Receives each log line (no trailing newline). Called on the thread that logged. */
typedef void (*tailor_log_fn)(void *user, tailor_log_level level, const char *line);

/* Opaque: the last error message and the log sink. One per thread of work. */
typedef struct tailor_ctx tailor_ctx;

/* Creates a context with no log sink. Returns NULL only when out of memory. Free with
 * tailor_ctx_destroy. */
tailor_ctx *tailor_ctx_create(void);

/* Frees the context; NULL is fine. */
void tailor_ctx_destroy(tailor_ctx *ctx);

/* Sends log lines at `min_level` and above to `fn` (NULL silences). */
void tailor_ctx_set_log(tailor_ctx *ctx, tailor_log_fn fn, void *user, tailor_log_level min_level);

/* The message of the last failed call on this context ("" if none). Owned by the context,
 * valid until the next call that fails on it. */
const char *tailor_ctx_message(const tailor_ctx *ctx);

/* The last status set through tailor_set_error (TAILOR_OK after tailor_ctx_clear). */
tailor_status tailor_ctx_status(const tailor_ctx *ctx);

/* Forgets the last error. */
void tailor_ctx_clear(tailor_ctx *ctx);

/* A short stable name such as "nvrtc" or "budget" for a status. */
const char *tailor_status_name(tailor_status status);

/* ---- for use inside the library ---- */

/* Records `code` and a formatted message on ctx; returns `code` so that
 * `return tailor_set_error(ctx, ...)` is one line. ctx may be NULL (then only the code). The
 * message stays one line whatever a file put into it: a control character is written as an
 * escape (a newline as \n, others as \xNN). */
tailor_status tailor_set_error(tailor_ctx *ctx, tailor_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As tailor_set_error, with `detail` (e.g. a compiler's log, many lines) kept as it is on the
 * lines after the sentence; NULL: none. */
tailor_status tailor_set_error_detail(tailor_ctx *ctx, tailor_status code, const char *detail,
                                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Prefixes the current message with a formatted context ("loading x.safetensors: ...");
 * returns the current status. */
tailor_status tailor_wrap_error(tailor_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Logs a formatted line through the context's sink, if any; control characters escaped as in
 * tailor_set_error, so a line is one line. */
void tailor_log(tailor_ctx *ctx, tailor_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The whole of the file at path in *text, NUL-terminated after its *size bytes (size may be
 * NULL); the caller frees *text. A pipe or other stream (a FIFO, /dev/stdin) is read to its end.
 * Fails naming the file when it cannot be opened or read, is a directory, or holds more than
 * max_bytes; *text is NULL then. */
tailor_status tailor_read_file(tailor_ctx *ctx, const char *path, size_t max_bytes, char **text,
                               size_t *size);

/* As tailor_read_file, from an open stream f (read to its end; not closed), named `name` in
 * messages (e.g. "standard input"). */
tailor_status tailor_read_stream(tailor_ctx *ctx, FILE *f, const char *name, size_t max_bytes,
                                 char **text, size_t *size);

/* Formats n with thousands separators ("98,304") into buf (at least 32 bytes); returns buf. */
char *tailor_fmt_int(char *buf, size_t size, long long n);

/* Seconds on the monotonic clock (for durations). */
double tailor_now_seconds(void);

/* 1 when the comma-separated list has item as one of its entries, whole ("a,bc" has "bc", not
 * "b"); an environment variable's list of names, for example. */
int tailor_list_has(const char *list, const char *item);

#endif
