/* tailor.c — the context: last error message and log sink. */
#include "tailor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TAILOR_MSG_MAX 16384

struct tailor_ctx {
    tailor_status status;
    char message[TAILOR_MSG_MAX];
    tailor_log_fn log_fn;
    void *log_user;
    tailor_log_level log_min;
};

tailor_ctx *tailor_ctx_create(void)
{
    tailor_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx)
        ctx->log_min = TAILOR_LOG_INFO;
    return ctx;
}

void tailor_ctx_destroy(tailor_ctx *ctx) { free(ctx); }

void tailor_ctx_set_log(tailor_ctx *ctx, tailor_log_fn fn, void *user, tailor_log_level min_level)
{
    ctx->log_fn = fn;
    ctx->log_user = user;
    ctx->log_min = min_level;
}

const char *tailor_ctx_message(const tailor_ctx *ctx) { return ctx ? ctx->message : ""; }

tailor_status tailor_ctx_status(const tailor_ctx *ctx) { return ctx ? ctx->status : TAILOR_OK; }

void tailor_ctx_clear(tailor_ctx *ctx)
{
    if (!ctx)
        return;
    ctx->status = TAILOR_OK;
    ctx->message[0] = '\0';
}

const char *tailor_status_name(tailor_status status)
{
    static const char *const names[TAILOR_STATUS_COUNT] = {
        "ok",     "no memory", "misuse", "io",  "parse",  "not found", "unsupported",
        "no driver", "no device", "cuda", "nvrtc",  "lua",       "sqlite",
        "verify", "budget",    "mismatch", "no compile", "timeout",
    };
    if ((unsigned)status >= TAILOR_STATUS_COUNT)
        return "unknown";
    return names[status];
}

tailor_status tailor_set_error(tailor_ctx *ctx, tailor_status code, const char *fmt, ...)
{
    if (!ctx)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
    va_end(ap);
    ctx->status = code;
    return code;
}

tailor_status tailor_wrap_error(tailor_ctx *ctx, const char *fmt, ...)
{
    if (!ctx)
        return TAILOR_ERR_MISUSE;
    char prefix[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char *old = strdup(ctx->message);
    if (old) {
        snprintf(ctx->message, sizeof ctx->message, "%s: %s", prefix, old);
        free(old);
    }
    return ctx->status;
}

void tailor_log(tailor_ctx *ctx, tailor_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log_fn || level < ctx->log_min)
        return;
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ctx->log_fn(ctx->log_user, level, line);
}

char *tailor_fmt_int(char *buf, size_t size, long long n)
{
    char digits[32];
    unsigned long long u = n < 0 ? (unsigned long long)(-(n + 1)) + 1u : (unsigned long long)n;
    int len = snprintf(digits, sizeof digits, "%llu", u);
    size_t o = 0;
    if (n < 0 && o + 1 < size)
        buf[o++] = '-';
    for (int i = 0; i < len && o + 1 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 1 < size)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

tailor_status tailor_read_file(tailor_ctx *ctx, const char *path, size_t max_bytes, char **text,
                               size_t *size)
{
    *text = NULL;
    if (size)
        *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    tailor_status st = TAILOR_OK;
    char have[32], most[32];
    if (fstat(fileno(f), &sb) != 0)
        st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: not a regular file%s", path,
                              S_ISDIR(sb.st_mode) ? " (a directory)" : "");
    else if ((unsigned long long)sb.st_size > max_bytes)
        st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: %s bytes, more than the %s it may hold",
                              path, tailor_fmt_int(have, sizeof have, (long long)sb.st_size),
                              tailor_fmt_int(most, sizeof most, (long long)max_bytes));
    size_t n = st ? 0 : (size_t)sb.st_size;
    char *buf = st ? NULL : malloc(n + 1);
    if (!st && !buf)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory for its %zu bytes", path,
                              n);
    if (!st && fread(buf, 1, n, f) != n)
        st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot read: %s", path,
                              ferror(f) ? strerror(errno) : "shorter than its size");
    fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *text = buf;
    if (size)
        *size = n;
    return TAILOR_OK;
}
