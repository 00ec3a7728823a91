/* tailor.c — the context: last error message and log sink. */
#include "tailor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* src into dst (size bytes, NUL-terminated, cut short where it does not fit) with every control
 * character escaped: \n, \r, \t by name, the rest as \xNN. Returns the bytes written. */
static size_t copy_one_line(char *dst, size_t size, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 1 < size; p++) {
        char esc[5] = {0};
        if (*p == '\n' || *p == '\r' || *p == '\t')
            esc[0] = '\\', esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
        else if (*p < 0x20 || *p == 0x7f)
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[*p >> 4], esc[3] = hex[*p & 15];
        else
            esc[0] = (char)*p;
        size_t len = strlen(esc);
        if (o + len >= size)
            break;
        memcpy(dst + o, esc, len);
        o += len;
    }
    dst[o] = '\0';
    return o;
}

static tailor_status set_error_v(tailor_ctx *ctx, tailor_status code, const char *detail,
                                 const char *fmt, va_list ap)
{
    char sentence[TAILOR_MSG_MAX];
    vsnprintf(sentence, sizeof sentence, fmt, ap);
    size_t n = copy_one_line(ctx->message, sizeof ctx->message, sentence);
    if (detail)
        snprintf(ctx->message + n, sizeof ctx->message - n, "\n%s", detail);
    ctx->status = code;
    return code;
}

tailor_status tailor_set_error(tailor_ctx *ctx, tailor_status code, const char *fmt, ...)
{
    if (!ctx)
        return code;
    va_list ap;
    va_start(ap, fmt);
    set_error_v(ctx, code, NULL, fmt, ap);
    va_end(ap);
    return code;
}

tailor_status tailor_set_error_detail(tailor_ctx *ctx, tailor_status code, const char *detail,
                                      const char *fmt, ...)
{
    if (!ctx)
        return code;
    va_list ap;
    va_start(ap, fmt);
    set_error_v(ctx, code, detail, fmt, ap);
    va_end(ap);
    return code;
}

tailor_status tailor_wrap_error(tailor_ctx *ctx, const char *fmt, ...)
{
    if (!ctx)
        return TAILOR_ERR_MISUSE;
    char prefix[1024], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    copy_one_line(line, sizeof line, prefix);
    char *old = strdup(ctx->message);
    if (old) {
        snprintf(ctx->message, sizeof ctx->message, "%s: %s", line, old);
        free(old);
    }
    return ctx->status;
}

void tailor_log(tailor_ctx *ctx, tailor_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log_fn || level < ctx->log_min)
        return;
    char text[4096], line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    copy_one_line(line, sizeof line, text);
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

/* "NAME: N bytes, more than the M it may hold"; have = 0: the size of a stream is unknown. */
static tailor_status too_big(tailor_ctx *ctx, const char *name, unsigned long long have,
                             size_t max_bytes)
{
    char h[32], m[32];
    tailor_fmt_int(m, sizeof m, (long long)max_bytes);
    if (!have)
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: more than the %s bytes it may hold",
                                name, m);
    return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: %s bytes, more than the %s it may hold",
                            name, tailor_fmt_int(h, sizeof h, (long long)have), m);
}

/* All of f from where it stands to its end, at most max_bytes; `expect` (0: unknown) sizes the
 * first buffer, so a regular file of that size is read with no reallocation. */
static tailor_status read_to_end(tailor_ctx *ctx, FILE *f, const char *name, size_t max_bytes,
                                 size_t expect, char **text, size_t *size)
{
    size_t cap = expect ? expect + 2 : (size_t)1 << 16, n = 0;
    char *buf = malloc(cap);
    tailor_status st = buf ? TAILOR_OK
                           : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory for "
                                              "%zu bytes", name, cap);
    while (!st) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (ferror(f))
            st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot read: %s", name, strerror(errno));
        else if (n > max_bytes)
            st = too_big(ctx, name, 0, max_bytes);
        if (st || n < cap - 1)
            break;
        char *p = realloc(buf, cap * 2);
        if (!p)
            st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory past %zu bytes", name,
                                  n);
        else {
            buf = p;
            cap *= 2;
        }
    }
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

tailor_status tailor_read_stream(tailor_ctx *ctx, FILE *f, const char *name, size_t max_bytes,
                                 char **text, size_t *size)
{
    *text = NULL;
    if (size)
        *size = 0;
    return read_to_end(ctx, f, name, max_bytes, 0, text, size);
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
    tailor_status st;
    if (fstat(fileno(f), &sb) != 0)
        st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        st = tailor_set_error(ctx, TAILOR_ERR_IO, "%s: not a regular file (a directory)", path);
    else if (S_ISREG(sb.st_mode) && (unsigned long long)sb.st_size > max_bytes)
        st = too_big(ctx, path, (unsigned long long)sb.st_size, max_bytes);
    else /* a pipe or a device has no size to go by: read to its end */
        st = read_to_end(ctx, f, path, max_bytes, S_ISREG(sb.st_mode) ? (size_t)sb.st_size : 0,
                         text, size);
    fclose(f);
    return st;
}

int tailor_list_has(const char *list, const char *item)
{
    const size_t n = strlen(item);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, item, n) == 0)
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

double tailor_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
