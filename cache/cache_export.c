/* cache_export.c — one device's winners as one checksummed JSON file, and the all-or-nothing
 * import of such a file; fingerprint comparison field by field. Format: docs/cache-format.md. */
#include "cache_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

#define EXPORT_FORMAT "tailor-cache-export"
#define EXPORT_VERSION 1
/* The last two lines of an export file are this member and "}". The checksum covers every byte
 * before the line: `head -n -2 FILE | sha256sum`. */
#define EXPORT_TRAILER "\n  \"sha256\": \""
#define EXPORT_MAX_BYTES (4LL << 30)

/* ---- a growable byte buffer ---------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *data, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* Appends s as a JSON string literal (quoted and escaped by cJSON). */
static void sb_json_string(sbuf *b, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    if (t)
        sb_str(b, t);
    else
        b->oom = 1;
    free(t);
    cJSON_Delete(j);
}

/* ---- base64 (RFC 4648, with padding) --------------------------------------------------------- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Returns a NUL-terminated encoding (caller frees), NULL when out of memory. */
static char *base64_encode(const unsigned char *data, size_t n)
{
    size_t out_len = (n + 2) / 3 * 4;
    char *out = malloc(out_len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)data[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)data[i + 1] << 8;
        if (i + 2 < n)
            v |= data[i + 2];
        out[o++] = b64_alphabet[(v >> 18) & 63];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_value(char ch)
{
    const char *p = ch ? strchr(b64_alphabet, ch) : NULL;
    return p ? (int)(p - b64_alphabet) : -1;
}

/* Strict decoding: length a multiple of 4, padding only at the end. Returns a malloc'd buffer
 * (caller frees) and its size, or NULL (*bad = 1 for malformed text, 0 for out of memory). */
static unsigned char *base64_decode(const char *text, size_t *size, int *bad)
{
    size_t n = strlen(text);
    *bad = 1;
    if (n == 0 || n % 4 != 0)
        return NULL;
    size_t pad = text[n - 1] == '=' ? (text[n - 2] == '=' ? 2 : 1) : 0;
    unsigned char *out = malloc(n / 4 * 3);
    if (!out) {
        *bad = 0;
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int v[4];
        for (int k = 0; k < 4; k++) {
            int is_pad = last && (size_t)k >= 4 - pad;
            v[k] = is_pad ? 0 : b64_value(text[i + (size_t)k]);
            if (v[k] < 0) {
                free(out);
                return NULL;
            }
        }
        unsigned word = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
                        (unsigned)v[3];
        out[o++] = (unsigned char)(word >> 16);
        if (!last || pad < 2)
            out[o++] = (unsigned char)(word >> 8);
        if (!last || pad < 1)
            out[o++] = (unsigned char)word;
    }
    *size = o;
    *bad = 0;
    return out;
}

/* ---- fingerprints ----------------------------------------------------------------------------- */

#define FP_MAX_FIELDS 12

typedef struct fp_parts {
    char rehearse[64]; /* the profile of a "rehearse:PROFILE@..." fingerprint, "" otherwise */
    char carveout[32]; /* the value of a "|carveout=..." field, "" when none (the default) */
    char field[FP_MAX_FIELDS][160];
    int n;
} fp_parts;

/* Copies the n bytes at p into dst (of size size) as a string, cut to fit. */
static void fp_copy(char *dst, size_t size, const char *p, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, p, n);
    dst[n] = '\0';
}

/* A fingerprint's parts: the rehearsal profile, the device's fields split at '|' and the
 * carveout field apart (a diff names it rather than numbering it). */
static void fp_split(const char *fp, fp_parts *out)
{
    memset(out, 0, sizeof *out);
    if (strncmp(fp, "rehearse:", 9) == 0) {
        const char *at = strchr(fp, '@');
        if (at) {
            fp_copy(out->rehearse, sizeof out->rehearse, fp + 9, (size_t)(at - (fp + 9)));
            fp = at + 1;
        }
    }
    const char *carveout = strstr(fp, TAILOR_FINGERPRINT_CARVEOUT);
    if (carveout) {
        const char *v = carveout + strlen(TAILOR_FINGERPRINT_CARVEOUT);
        fp_copy(out->carveout, sizeof out->carveout, v, strlen(v));
    }
    size_t len = carveout ? (size_t)(carveout - fp) : strlen(fp);
    for (const char *p = fp; out->n < FP_MAX_FIELDS; out->n++) {
        const char *bar = memchr(p, '|', len - (size_t)(p - fp));
        size_t n = bar ? (size_t)(bar - p) : len - (size_t)(p - fp);
        fp_copy(out->field[out->n], sizeof out->field[0], p, n);
        if (!bar) {
            out->n++;
            break;
        }
        p = bar + 1;
    }
}

static void diff_append(char *buf, size_t size, const char *name, const char *a, const char *b,
                        int quote)
{
    size_t used = strlen(buf);
    if (used + 1 >= size)
        return;
    const char *qa = quote && a[0] ? "'" : "", *qb = quote && b[0] ? "'" : "";
    snprintf(buf + used, size - used, "%s%s: %s%s%s in the file, %s%s%s here", used ? "; " : "",
             name, qa, a[0] ? a : "(none)", qa, qb, b[0] ? b : "(none)", qb);
}

void tailor_cache_fingerprint_diff(const char *a_file, const char *b_here, char *buf, size_t size)
{
    static const char *const names[] = {"GPU name", "architecture", "SMs",
                                        "opt-in shared memory per block (B)", "driver", "NVRTC"};
    if (!buf || size == 0)
        return;
    buf[0] = '\0';
    if (!a_file || !b_here || strcmp(a_file, b_here) == 0)
        return;
    fp_parts a, b;
    fp_split(a_file, &a);
    fp_split(b_here, &b);
    if (strcmp(a.rehearse, b.rehearse) != 0)
        diff_append(buf, size, "rehearsal profile", a.rehearse, b.rehearse, 1);
    int n = a.n > b.n ? a.n : b.n;
    for (int i = 0; i < n; i++) {
        if (strcmp(a.field[i], b.field[i]) == 0)
            continue;
        char field_n[24]; /* the names are used whole: a 32-byte copy cut "(B)" off */
        snprintf(field_n, sizeof field_n, "field %d", i + 1);
        diff_append(buf, size, i < 6 ? names[i] : field_n, a.field[i], b.field[i],
                    i == 0 || i >= 6);
    }
    if (strcmp(a.carveout, b.carveout) != 0)
        diff_append(buf, size, "shared-memory carveout (TAILOR_CARVEOUT)",
                    a.carveout[0] ? a.carveout : "the default",
                    b.carveout[0] ? b.carveout : "the default", 0);
    if (!buf[0]) /* differences beyond what could be split (over-long fields) */
        snprintf(buf, size, "fingerprint '%s' in the file, '%s' here", a_file, b_here);
}

/* ---- export ------------------------------------------------------------------------------------ */

typedef struct export_state {
    tailor_ctx *ctx;
    sbuf body;
    int n;
    tailor_status status;
} export_state;

/* One entry as one line of JSON. */
static int export_entry(void *user, const tailor_cache_key *key, const tailor_cache_winner *w)
{
    export_state *e = user;
    char sha[65];
    tailor_sha256_hex(w->binary, w->binary_size, sha);
    if (strcmp(sha, w->binary_sha256) != 0) { /* exported, it would look intact on import */
        e->status = tailor_set_error(e->ctx, TAILOR_ERR_MISMATCH,
                                     "the binary of %s %s %s is damaged (its sha256 no longer "
                                     "matches): run tailor cache verify; nothing was exported",
                                     key->op, key->shape, key->dtype);
        return 1;
    }
    char *b64 = base64_encode(w->binary, w->binary_size);
    cJSON *o = cJSON_CreateObject();
    int ok = b64 && o && cJSON_AddStringToObject(o, "op", key->op) &&
             cJSON_AddStringToObject(o, "shape", key->shape) &&
             cJSON_AddStringToObject(o, "dtype", key->dtype) &&
             cJSON_AddStringToObject(o, "space_hash", key->space_hash) &&
             cJSON_AddStringToObject(o, "template", w->template_name) &&
             cJSON_AddStringToObject(o, "kernel", w->kernel_name) &&
             cJSON_AddStringToObject(o, "params", w->params_json) &&
             cJSON_AddStringToObject(o, "launch", w->launch_json) &&
             cJSON_AddStringToObject(o, "arch", w->arch) &&
             cJSON_AddNumberToObject(o, "median_us", w->median_us) &&
             cJSON_AddNumberToObject(o, "spread_us", w->spread_us) &&
             cJSON_AddNumberToObject(o, "tuned_at", (double)w->tuned_at) &&
             cJSON_AddNumberToObject(o, "n_trials", w->n_trials) &&
             cJSON_AddStringToObject(o, "chosen", tailor_cache_chosen_name(w->chosen_in_step)) &&
             cJSON_AddStringToObject(o, "binary_kind", w->binary_kind) &&
             cJSON_AddNumberToObject(o, "binary_size", (double)w->binary_size) &&
             cJSON_AddStringToObject(o, "binary_sha256", sha) &&
             cJSON_AddStringToObject(o, "binary", b64);
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    if (line) {
        sb_str(&e->body, e->n ? ",\n    " : "\n    ");
        sb_str(&e->body, line);
        e->n++;
    } else {
        e->status = tailor_set_error(e->ctx, TAILOR_ERR_NOMEM, "out of memory exporting the cache");
    }
    free(line);
    cJSON_Delete(o);
    free(b64);
    return e->status != TAILOR_OK;
}

/* Writes data to `file` through a temporary file in the same folder and a rename. */
static tailor_status write_file_atomic(tailor_ctx *ctx, const char *file, const char *data, size_t n)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", file, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) /* named as the user gave it: the temporary file is ours */
        return tailor_set_error(ctx, TAILOR_ERR_IO, "cannot write export file '%s': %s", file,
                                strerror(errno));
    int ok = fwrite(data, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, file) == 0)
        return TAILOR_OK;
    err = err ? err : errno;
    remove(tmp);
    return tailor_set_error(ctx, TAILOR_ERR_IO, "cannot write export file '%s': %s", file,
                            strerror(err));
}

tailor_status tailor_cache_export(tailor_ctx *ctx, tailor_cache *c, const char *fingerprint,
                                  const char *file, int *n_entries)
{
    if (!c || !fingerprint || !fingerprint[0] || !file || !file[0])
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "tailor_cache_export: cache, fingerprint and file are required");
    if (n_entries)
        *n_entries = 0;
    struct stat fs, cs;
    if (stat(file, &fs) == 0 && stat(tailor_cache_path(c), &cs) == 0 && fs.st_dev == cs.st_dev &&
        fs.st_ino == cs.st_ino)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "export file '%s' is the cache itself; "
                                "nothing was exported", file);
    export_state e = {ctx, {0}, 0, TAILOR_OK};
    char head[128];
    snprintf(head, sizeof head, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"fingerprint\": ",
             EXPORT_FORMAT, EXPORT_VERSION);
    sb_str(&e.body, head);
    sb_json_string(&e.body, fingerprint);
    snprintf(head, sizeof head, ",\n  \"exported_at\": %lld,\n  \"entries\": [",
             (long long)time(NULL));
    sb_str(&e.body, head);
    tailor_status s = tailor_cache_foreach_winner(ctx, c, fingerprint, export_entry, &e);
    if (s == TAILOR_OK)
        s = e.status;
    sb_str(&e.body, e.n ? "\n  ],\n" : "],\n");
    if (s == TAILOR_OK && e.n == 0) /* an empty file would replace one worth keeping */
        s = tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "cache file '%s' holds no winners of "
                             "'%s'; '%s' was not written", tailor_cache_path(c), fingerprint, file);
    if (s == TAILOR_OK && e.body.oom)
        s = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory exporting the cache");
    if (s == TAILOR_OK) {
        char sha[65];
        tailor_sha256_hex(e.body.p, e.body.len, sha);
        sb_str(&e.body, "  \"sha256\": \"");
        sb_str(&e.body, sha);
        sb_str(&e.body, "\"\n}\n");
        s = e.body.oom ? tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory exporting")
                       : write_file_atomic(ctx, file, e.body.p, e.body.len);
    }
    free(e.body.p);
    if (s == TAILOR_OK && n_entries)
        *n_entries = e.n;
    return s;
}

/* ---- import ------------------------------------------------------------------------------------ */

static int is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* Checks the trailer and the checksum over the bytes before it. */
static tailor_status check_checksum(tailor_ctx *ctx, const char *file, const char *data, size_t n)
{
    static const char tail[] = "\"\n}\n";
    size_t tlen = strlen(EXPORT_TRAILER), need = tlen + 64 + strlen(tail);
    const char *trailer = NULL;
    if (n >= need) {
        trailer = data + n - need;
        if (memcmp(trailer, EXPORT_TRAILER, tlen) != 0 || !is_hex64(trailer + tlen) ||
            memcmp(trailer + tlen + 64, tail, strlen(tail)) != 0)
            trailer = NULL;
    }
    if (!trailer)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "import file '%s' is damaged: its last member, field 'sha256', is "
                                "missing or malformed (a truncated or edited file)",
                                file);
    char want[65], got[65];
    memcpy(want, trailer + tlen, 64);
    want[64] = '\0';
    tailor_sha256_hex(data, (size_t)(trailer - data) + 1, got);
    if (strcmp(want, got) != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "import file '%s' is damaged or was altered: field 'sha256' says "
                                "%.12s... but the content hashes to %.12s...; nothing was imported",
                                file, want, got);
    return TAILOR_OK;
}

static const char *json_string(const cJSON *o, const char *name)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static int json_number(const cJSON *o, const char *name, double *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return 0;
    *out = j->valuedouble;
    return 1;
}

typedef struct import_state {
    const char *file, *fingerprint;
    tailor_cache_entry_check check; /* may be NULL */
    const cJSON *entries;
    int n;
} import_state;

static tailor_status entry_fail(tailor_ctx *ctx, const import_state *im, int i, const char *field,
                                const char *problem)
{
    return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                            "import file '%s': entry %d, field '%s' %s; nothing was imported",
                            im->file, i + 1, field, problem);
}

/* Text fields of an entry: the key's four and the winner's strings. */
static tailor_status entry_strings(tailor_ctx *ctx, const import_state *im, int i, const cJSON *o,
                                   tailor_cache_key *key, tailor_cache_winner *w)
{
    static const char *const names[] = {"op",     "shape",  "dtype", "space_hash",
                                        "template", "kernel", "params", "launch",
                                        "arch",   "binary_kind"};
    const char *v[10];
    for (int k = 0; k < 10; k++) {
        v[k] = json_string(o, names[k]);
        if (!v[k] || !v[k][0])
            return entry_fail(ctx, im, i, names[k], "is missing or not a non-empty string");
    }
    *key = (tailor_cache_key){im->fingerprint, v[0], v[1], v[2], v[3]};
    if (tcache_copy_field(w->template_name, sizeof w->template_name, v[4]))
        return entry_fail(ctx, im, i, "template", "is too long");
    if (tcache_copy_field(w->kernel_name, sizeof w->kernel_name, v[5]))
        return entry_fail(ctx, im, i, "kernel", "is too long");
    w->params_json = (char *)v[6];
    w->launch_json = (char *)v[7];
    if (tcache_copy_field(w->arch, sizeof w->arch, v[8]))
        return entry_fail(ctx, im, i, "arch", "is too long");
    if (tcache_copy_field(w->binary_kind, sizeof w->binary_kind, v[9]))
        return entry_fail(ctx, im, i, "binary_kind", "is not 'cubin' or 'ptx'");
    return TAILOR_OK;
}

/* The number of "sm_90" / "compute_90" after `prefix`, or -1 when text is not prefix + digits. */
static int arch_number(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(text, prefix, n) != 0 || !text[n] || strlen(text + n) > 4)
        return -1;
    int v = 0;
    for (const char *p = text + n; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* The entry's arch against the fingerprint's architecture (when it names one): a cubin for
 * exactly that architecture, PTX for it or an older one. */
static tailor_status entry_arch(tailor_ctx *ctx, const import_state *im, int i,
                                const tailor_cache_winner *w)
{
    int sm = arch_number(w->arch, "sm_");
    if (sm < 0)
        sm = arch_number(w->arch, "compute_");
    if (sm < 0)
        return entry_fail(ctx, im, i, "arch", "is not 'sm_NN' or 'compute_NN'");
    fp_parts fp;
    fp_split(im->fingerprint, &fp);
    int here = fp.n > 1 ? arch_number(fp.field[1], "sm_") : -1;
    int is_ptx = strcmp(w->binary_kind, "ptx") == 0;
    if (here < 0 || (is_ptx ? sm <= here : sm == here))
        return TAILOR_OK;
    char why[256];
    snprintf(why, sizeof why, "is '%s', but the fingerprint's architecture is %s (%s)", w->arch,
             fp.field[1], is_ptx ? "PTX for a newer one cannot run" : "a cubin runs only there");
    return entry_fail(ctx, im, i, "arch", why);
}

/* What the fields hold, beyond their types: the importer's check of the shape, dtype and
 * parameters, a launch that is a JSON object, an arch the device can run. */
static tailor_status entry_values(tailor_ctx *ctx, const import_state *im, int i,
                                  const tailor_cache_key *key, const tailor_cache_winner *w)
{
    const char *field = NULL, *problem = im->check ? im->check(key, w->params_json, &field) : NULL;
    if (problem)
        return entry_fail(ctx, im, i, field ? field : "entries", problem);
    cJSON *launch = cJSON_ParseWithOpts(w->launch_json, NULL, 1);
    int launch_ok = cJSON_IsObject(launch);
    cJSON_Delete(launch);
    if (!launch_ok)
        return entry_fail(ctx, im, i, "launch", "is not a JSON object");
    return entry_arch(ctx, im, i, w);
}

/* "chosen": "tuner" or "step"; absent (files written before it existed) means the tuner. */
static tailor_status entry_chosen(tailor_ctx *ctx, const import_state *im, int i, const cJSON *o,
                                  tailor_cache_winner *w)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "chosen");
    if (!v)
        return TAILOR_OK;
    if (tailor_cache_chosen_parse(cJSON_IsString(v) ? v->valuestring : NULL, &w->chosen_in_step))
        return entry_fail(ctx, im, i, "chosen", "is not \"tuner\" or \"step\"");
    return TAILOR_OK;
}

static tailor_status entry_numbers(tailor_ctx *ctx, const import_state *im, int i, const cJSON *o,
                                   tailor_cache_winner *w, double *binary_size)
{
    static const char *const names[] = {"median_us", "spread_us", "tuned_at", "n_trials",
                                        "binary_size"};
    double v[5];
    for (int k = 0; k < 5; k++)
        if (!json_number(o, names[k], &v[k]) || v[k] < 0)
            return entry_fail(ctx, im, i, names[k], "is missing or not a number >= 0");
    if (v[3] > INT_MAX || v[3] != floor(v[3]))
        return entry_fail(ctx, im, i, "n_trials", "is not a whole number");
    w->median_us = v[0];
    w->spread_us = v[1];
    w->tuned_at = (long long)v[2];
    w->n_trials = (int)v[3];
    *binary_size = v[4];
    return TAILOR_OK;
}

/* Decodes and checks the binary of entry i; w->binary is malloc'd on success. */
static tailor_status entry_binary(tailor_ctx *ctx, const import_state *im, int i, const cJSON *o,
                                  tailor_cache_winner *w, double binary_size, char sha[65])
{
    const char *b64 = json_string(o, "binary");
    const char *want = json_string(o, "binary_sha256");
    if (!want || strlen(want) != 64 || !is_hex64(want))
        return entry_fail(ctx, im, i, "binary_sha256", "is missing or not 64 hex digits");
    if (!b64)
        return entry_fail(ctx, im, i, "binary", "is missing or not a string");
    int bad = 0;
    size_t size = 0;
    w->binary = base64_decode(b64, &size, &bad);
    if (!w->binary)
        return bad ? entry_fail(ctx, im, i, "binary", "is not valid base64")
                   : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory importing");
    w->binary_size = size;
    if ((double)size != binary_size)
        return entry_fail(ctx, im, i, "binary_size", "does not match the decoded binary");
    tailor_sha256_hex(w->binary, size, sha);
    if (strcmp(sha, want) != 0)
        return entry_fail(ctx, im, i, "binary_sha256", "does not match the decoded binary");
    return TAILOR_OK;
}

static tailor_status import_entry(tailor_ctx *ctx, tailor_cache *c, const import_state *im, int i,
                                  const cJSON *o)
{
    if (!cJSON_IsObject(o))
        return entry_fail(ctx, im, i, "entries", "is not an object");
    tailor_cache_key key;
    tailor_cache_winner w;
    memset(&w, 0, sizeof w);
    double binary_size = 0;
    char sha[65], where[64];
    tailor_status s = entry_strings(ctx, im, i, o, &key, &w);
    if (s == TAILOR_OK)
        s = entry_numbers(ctx, im, i, o, &w, &binary_size);
    if (s == TAILOR_OK)
        s = entry_chosen(ctx, im, i, o, &w);
    if (s == TAILOR_OK)
        s = entry_binary(ctx, im, i, o, &w, binary_size, sha);
    snprintf(where, sizeof where, "import entry %d", i + 1);
    if (s == TAILOR_OK && (s = tcache_winner_check(ctx, &w, where)) != TAILOR_OK)
        s = tailor_wrap_error(ctx, "import file '%s'", im->file);
    if (s == TAILOR_OK)
        s = entry_values(ctx, im, i, &key, &w);
    if (s == TAILOR_OK)
        s = tcache_store_winner(ctx, c, &key, &w, sha);
    free(w.binary);
    return s;
}

/* 1 when entries a and b name the same key (op, shape, dtype, space hash): one would silently
 * replace the other. */
static int same_key(const cJSON *a, const cJSON *b)
{
    static const char *const names[] = {"op", "shape", "dtype", "space_hash"};
    for (int k = 0; k < 4; k++) {
        const char *x = json_string(a, names[k]), *y = json_string(b, names[k]);
        if (!x || !y || strcmp(x, y) != 0)
            return 0;
    }
    return 1;
}

static tailor_status import_body(tailor_ctx *ctx, tailor_cache *c, void *user)
{
    import_state *im = user;
    im->n = 0;
    int i = 0;
    for (const cJSON *a = im->entries->child; a; a = a->next, i++) {
        int j = i + 1;
        for (const cJSON *b = a->next; b; b = b->next, j++)
            if (same_key(a, b))
                return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                        "import file '%s': entries %d and %d have the same key "
                                        "(op, shape, dtype, space_hash); nothing was imported",
                                        im->file, i + 1, j + 1);
    }
    i = 0;
    for (const cJSON *o = im->entries->child; o; o = o->next, i++) {
        tailor_status s = import_entry(ctx, c, im, i, o);
        if (s != TAILOR_OK)
            return s;
        im->n++;
    }
    return TAILOR_OK;
}

/* The document's header members: format, version, fingerprint, entries. */
static tailor_status check_header(tailor_ctx *ctx, const char *file, const cJSON *doc,
                                  const char *live_fingerprint, import_state *im)
{
    const char *format = json_string(doc, "format");
    double version = 0;
    if (!format || strcmp(format, EXPORT_FORMAT) != 0)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "import file '%s': field 'format' is not '" EXPORT_FORMAT "'", file);
    if (!json_number(doc, "version", &version))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "import file '%s': field 'version' is missing",
                                file);
    if (version != EXPORT_VERSION)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "import file '%s': field 'version' is %g, but this tailor reads "
                                "version %d only",
                                file, version, EXPORT_VERSION);
    const char *fp = json_string(doc, "fingerprint");
    if (!fp || !fp[0])
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "import file '%s': field 'fingerprint' is missing", file);
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(doc, "entries");
    if (!cJSON_IsArray(entries))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "import file '%s': field 'entries' is missing or not a list", file);
    if (strcmp(fp, live_fingerprint) != 0) {
        char diff[2048];
        tailor_cache_fingerprint_diff(fp, live_fingerprint, diff, sizeof diff);
        return tailor_set_error(ctx, TAILOR_ERR_MISMATCH,
                                "import file '%s' was exported on another device (%s); nothing "
                                "was imported",
                                file, diff);
    }
    im->file = file;
    im->fingerprint = live_fingerprint;
    im->entries = entries;
    return TAILOR_OK;
}

tailor_status tailor_cache_import(tailor_ctx *ctx, tailor_cache *c, const char *file,
                                  const char *live_fingerprint, tailor_cache_entry_check check,
                                  int *n_entries)
{
    if (!c || !file || !live_fingerprint || !live_fingerprint[0])
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "tailor_cache_import: cache, file and live fingerprint are required");
    if (n_entries)
        *n_entries = 0;
    char *data = NULL;
    size_t size = 0;
    tailor_status s = tailor_read_file(ctx, file, EXPORT_MAX_BYTES, &data, &size);
    if (s == TAILOR_OK)
        s = check_checksum(ctx, file, data, size);
    cJSON *doc = NULL;
    if (s == TAILOR_OK) {
        const char *end = NULL;
        doc = cJSON_ParseWithOpts(data, &end, 1);
        if (!doc || !cJSON_IsObject(doc))
            s = tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                 "import file '%s' is not a valid JSON object (near byte %ld)",
                                 file, end ? (long)(end - data) : 0L);
    }
    import_state im = {.check = check};
    if (s == TAILOR_OK)
        s = check_header(ctx, file, doc, live_fingerprint, &im);
    if (s == TAILOR_OK)
        s = tcache_write_txn(ctx, c, "importing", import_body, &im);
    if (s == TAILOR_OK && n_entries)
        *n_entries = im.n;
    cJSON_Delete(doc);
    free(data);
    return s;
}
