/* safetensors.c — maps safetensors files, validates their headers, looks tensors up by name. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "half.h"

/* A header larger than this is refused as corrupt (the 31B index of ~1,200 tensors has headers
 * well under 1 MB). */
#define ST_MAX_HEADER (100u * 1024u * 1024u)

typedef struct st_file {
    char *path;
    void *map;     /* whole file, PROT_READ */
    size_t size;   /* file size */
    const uint8_t *data; /* start of the data section */
    size_t data_size;
} st_file;

struct tailor_st {
    char *path;
    st_file *files;
    size_t n_files;
    tailor_st_tensor *tensors; /* sorted by name */
    size_t n_tensors;
    size_t cap_tensors;
};

static const struct {
    const char *name;
    size_t size;
} dtype_info[TAILOR_ST_DTYPE_COUNT] = {
    [TAILOR_ST_BOOL] = {"BOOL", 1},    [TAILOR_ST_U8] = {"U8", 1},
    [TAILOR_ST_I8] = {"I8", 1},        [TAILOR_ST_F8_E4M3] = {"F8_E4M3", 1},
    [TAILOR_ST_F8_E5M2] = {"F8_E5M2", 1}, [TAILOR_ST_U16] = {"U16", 2},
    [TAILOR_ST_I16] = {"I16", 2},      [TAILOR_ST_F16] = {"F16", 2},
    [TAILOR_ST_BF16] = {"BF16", 2},    [TAILOR_ST_U32] = {"U32", 4},
    [TAILOR_ST_I32] = {"I32", 4},      [TAILOR_ST_F32] = {"F32", 4},
    [TAILOR_ST_U64] = {"U64", 8},      [TAILOR_ST_I64] = {"I64", 8},
    [TAILOR_ST_F64] = {"F64", 8},
};

const char *tailor_st_dtype_name(tailor_st_dtype dtype)
{
    return (unsigned)dtype < TAILOR_ST_DTYPE_COUNT ? dtype_info[dtype].name : "?";
}

size_t tailor_st_dtype_size(tailor_st_dtype dtype)
{
    return (unsigned)dtype < TAILOR_ST_DTYPE_COUNT ? dtype_info[dtype].size : 0;
}

static int dtype_parse(const char *s, tailor_st_dtype *out)
{
    for (int i = 0; i < TAILOR_ST_DTYPE_COUNT; i++) {
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (tailor_st_dtype)i;
            return 1;
        }
    }
    return 0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- mapping --------------------------------------------------------------------------- */

static tailor_status map_file(tailor_ctx *ctx, const char *path, st_file *f)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: not a regular file", path);
    }
    f->path = dup_str(path);
    if (!f->path) {
        close(fd);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", path);
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: truncated: %zu bytes, shorter than the 8-byte header length",
                                path, f->size);
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return tailor_set_error(ctx, TAILOR_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    }
    return TAILOR_OK;
}

void tailor_st_release(const tailor_st *st, const void *p, size_t n)
{
    if (!st || !p || n == 0)
        return;
    uintptr_t a = (uintptr_t)p, e = a + n;
    for (size_t i = 0; i < st->n_files; i++) {
        uintptr_t m0 = (uintptr_t)st->files[i].map, m1 = m0 + st->files[i].size;
        if (!st->files[i].map || a < m0 || e > m1)
            continue;
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = (a + page - 1) & ~(page - 1), hi = e & ~(page - 1);
        if (hi > lo) /* advisory: a failure only leaves the pages resident */
            (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}

static void unmap_file(st_file *f)
{
    if (f->map)
        munmap(f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* ---- header parsing ------------------------------------------------------------------------ */

static tailor_status push_tensor(tailor_ctx *ctx, tailor_st *st, const tailor_st_tensor *t)
{
    if (st->n_tensors == st->cap_tensors) {
        size_t cap = st->cap_tensors ? st->cap_tensors * 2 : 256;
        tailor_st_tensor *n = realloc(st->tensors, cap * sizeof *n);
        if (!n)
            return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", t->file);
        st->tensors = n;
        st->cap_tensors = cap;
    }
    st->tensors[st->n_tensors++] = *t;
    return TAILOR_OK;
}

/* Reads one tensor entry of a header; fills t (name and file set by the caller). */
static tailor_status parse_entry(tailor_ctx *ctx, const st_file *f, const cJSON *e,
                                 tailor_st_tensor *t, uint64_t *begin, uint64_t *end)
{
    const char *fn = f->path, *nm = t->name;
    if (!cJSON_IsObject(e))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: tensor '%s': entry is not an object",
                                fn, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: tensor '%s': dtype missing or not a string", fn, nm);
    if (!dtype_parse(dt->valuestring, &t->dtype))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: tensor '%s': unknown dtype '%s'", fn,
                                nm, dt->valuestring);
    if (!cJSON_IsArray(sh))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: tensor '%s': shape missing or not a list", fn, nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > TAILOR_ST_MAX_DIMS)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: tensor '%s': %d dimensions (at most %d)",
                                fn, nm, nd, TAILOR_ST_MAX_DIMS);
    t->ndim = nd;
    uint64_t numel = 1;
    for (int i = 0; i < nd; i++) {
        const cJSON *d = cJSON_GetArrayItem(sh, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 9.0e15 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                    "%s: tensor '%s': shape entry %d is not a size", fn, nm, i);
        t->shape[i] = (int64_t)d->valuedouble;
        if (t->shape[i] && numel > UINT64_MAX / 16 / (uint64_t)t->shape[i])
            return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: tensor '%s': shape overflows", fn,
                                    nm);
        numel *= (uint64_t)t->shape[i];
    }
    t->numel = (int64_t)numel;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        !cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: tensor '%s': data_offsets is not a pair of numbers", fn, nm);
    double b = cJSON_GetArrayItem(off, 0)->valuedouble, en = cJSON_GetArrayItem(off, 1)->valuedouble;
    if (b < 0 || en < b || en > 1.8e19 || b != (double)(uint64_t)b || en != (double)(uint64_t)en)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: tensor '%s': data_offsets [%.0f, %.0f] are not an ordered pair "
                                "of byte offsets", fn, nm, b, en);
    *begin = (uint64_t)b;
    *end = (uint64_t)en;
    if (*end > f->data_size)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: tensor '%s': data_offsets end %llu lies past the end of the "
                                "data section (%zu bytes; file truncated?)",
                                fn, nm, (unsigned long long)*end, f->data_size);
    uint64_t want = numel * tailor_st_dtype_size(t->dtype);
    if (*end - *begin != want)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: tensor '%s': shape x %s size is %llu bytes but data_offsets "
                                "span %llu", fn, nm, dtype_info[t->dtype].name,
                                (unsigned long long)want, (unsigned long long)(*end - *begin));
    t->data = f->data + *begin;
    t->nbytes = (size_t)want;
    return TAILOR_OK;
}

typedef struct span {
    uint64_t begin, end;
    const char *name;
} span;

static int span_name_cmp(const void *a, const void *b)
{
    return strcmp(((const span *)a)->name, ((const span *)b)->name);
}

/* Fails naming a tensor the header lists twice (spans sorted by name here). */
static tailor_status check_unique_names(tailor_ctx *ctx, const char *path, span *spans, size_t n)
{
    qsort(spans, n, sizeof *spans, span_name_cmp);
    for (size_t i = 1; i < n; i++)
        if (strcmp(spans[i].name, spans[i - 1].name) == 0)
            return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                    "%s: tensor '%s' is listed twice in the header", path,
                                    spans[i].name);
    return TAILOR_OK;
}

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* __metadata__ is what safetensors writers make it: an object of string values. */
static tailor_status check_metadata(tailor_ctx *ctx, const st_file *f, const cJSON *meta)
{
    if (!cJSON_IsObject(meta))
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: __metadata__ is not an object of strings", f->path);
    for (const cJSON *e = meta->child; e; e = e->next)
        if (!cJSON_IsString(e))
            return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                    "%s: __metadata__ key '%s' is not a string", f->path,
                                    e->string);
    return TAILOR_OK;
}

/* After the header's JSON object only padding may follow (JSON whitespace; writers use spaces):
 * anything else means the length or the text is wrong. */
static tailor_status check_header_end(tailor_ctx *ctx, const st_file *f, const char *text,
                                      const char *endp, size_t hlen)
{
    for (const char *p = endp; p < text + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                    "%s: header has bytes after its JSON object (at byte %zu of "
                                    "%zu; only JSON whitespace may pad it)", f->path,
                                    (size_t)(p - text), hlen);
    return TAILOR_OK;
}

/* Parses the header of file f, appends its tensors to st. */
static tailor_status parse_header(tailor_ctx *ctx, tailor_st *st, st_file *f)
{
    uint64_t hlen = 0;
    memcpy(&hlen, f->map, 8); /* little-endian hosts only (x86-64, aarch64) */
    if (hlen == 0 || hlen > ST_MAX_HEADER)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: header length %llu is not sane (1 .. %u bytes)", f->path,
                                (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: truncated: header says %llu bytes but the file has %zu after "
                                "the length", f->path, (unsigned long long)hlen, f->size - 8);
    f->data = (const uint8_t *)f->map + 8 + hlen;
    f->data_size = f->size - 8 - (size_t)hlen;

    char *text = malloc((size_t)hlen + 1);
    if (!text)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", f->path);
    memcpy(text, (const char *)f->map + 8, (size_t)hlen);
    text[hlen] = 0;
    const char *endp = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &endp, 0);
    if (!root || !cJSON_IsObject(root)) {
        size_t at = endp ? (size_t)(endp - text) : 0;
        free(text);
        cJSON_Delete(root);
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: header is not a JSON object (malformed near byte %zu)",
                                f->path, at);
    }
    int n = cJSON_GetArraySize(root);
    span *spans = calloc((size_t)(n > 0 ? n : 1), sizeof *spans);
    tailor_status s = spans ? check_header_end(ctx, f, text, endp, (size_t)hlen)
                            : tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", f->path);
    size_t ns = 0;
    for (const cJSON *e = root->child; e && s == TAILOR_OK; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            s = check_metadata(ctx, f, e);
            continue;
        }
        tailor_st_tensor t;
        memset(&t, 0, sizeof t);
        t.file = f->path;
        t.name = dup_str(e->string);
        if (!t.name) {
            s = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", f->path);
            break;
        }
        uint64_t b = 0, en = 0;
        s = parse_entry(ctx, f, e, &t, &b, &en);
        if (s == TAILOR_OK)
            s = push_tensor(ctx, st, &t);
        if (s != TAILOR_OK) {
            free((char *)t.name);
            break;
        }
        spans[ns++] = (span){b, en, st->tensors[st->n_tensors - 1].name};
    }
    if (s == TAILOR_OK) /* a JSON key given twice: the second would never be found */
        s = check_unique_names(ctx, f->path, spans, ns);
    if (s == TAILOR_OK) {
        qsort(spans, ns, sizeof *spans, span_cmp);
        size_t last = 0; /* the span reaching furthest so far */
        for (size_t i = 1; i < ns; i++) {
            if (spans[i].end > spans[i].begin && spans[i].begin < spans[last].end) {
                s = tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                     "%s: tensor '%s' overlaps tensor '%s' (bytes %llu..%llu)",
                                     f->path, spans[i].name, spans[last].name,
                                     (unsigned long long)spans[i].begin,
                                     (unsigned long long)spans[last].end);
                break;
            }
            if (spans[i].end > spans[last].end)
                last = i;
        }
    }
    free(spans);
    cJSON_Delete(root);
    free(text);
    return s;
}

/* ---- index and lookup ------------------------------------------------------------------------ */

static int tensor_cmp(const void *a, const void *b)
{
    return strcmp(((const tailor_st_tensor *)a)->name, ((const tailor_st_tensor *)b)->name);
}

static tailor_status sort_and_check(tailor_ctx *ctx, tailor_st *st)
{
    qsort(st->tensors, st->n_tensors, sizeof *st->tensors, tensor_cmp);
    for (size_t i = 1; i < st->n_tensors; i++) {
        if (strcmp(st->tensors[i].name, st->tensors[i - 1].name) == 0)
            return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: tensor '%s' is given twice (%s, %s)",
                                    st->path, st->tensors[i].name, st->tensors[i - 1].file,
                                    st->tensors[i].file);
    }
    return TAILOR_OK;
}

static tailor_status add_file(tailor_ctx *ctx, tailor_st *st, const char *path)
{
    st_file *nf = realloc(st->files, (st->n_files + 1) * sizeof *nf);
    if (!nf)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", path);
    st->files = nf;
    st_file *f = &st->files[st->n_files];
    tailor_status s = map_file(ctx, path, f);
    st->n_files++; /* counted even on failure so that close unmaps what was mapped */
    if (s != TAILOR_OK)
        return s;
    return parse_header(ctx, st, f);
}

/* Opens every shard an index names and checks that each listed tensor is where it says. */
static tailor_status open_index(tailor_ctx *ctx, tailor_st *st, const char *index_path)
{
    char *text;
    tailor_status s = tailor_read_file(ctx, index_path, ST_MAX_HEADER, &text, NULL);
    if (s)
        return s;
    const char *endp = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &endp, 0);
    free(text);
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                "%s: not a safetensors index (malformed JSON or no weight_map "
                                "object)", index_path);
    }
    size_t dirlen = (size_t)(base_name(index_path) - index_path);
    s = TAILOR_OK;
    for (const cJSON *e = map->child; e && s == TAILOR_OK; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/')) {
            s = tailor_set_error(ctx, TAILOR_ERR_PARSE,
                                 "%s: weight_map entry '%s' is not a file name in this folder",
                                 index_path, e->string);
            break;
        }
        size_t plen = dirlen + strlen(e->valuestring) + 1;
        char *p = malloc(plen);
        if (!p) {
            s = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", index_path);
            break;
        }
        memcpy(p, index_path, dirlen);
        strcpy(p + dirlen, e->valuestring);
        int seen = 0;
        for (size_t i = 0; i < st->n_files && !seen; i++)
            seen = strcmp(st->files[i].path, p) == 0;
        if (!seen && (s = add_file(ctx, st, p)) == TAILOR_ERR_IO)
            tailor_wrap_error(ctx, "%s: weight_map puts tensor '%s' in %s, which cannot be read",
                              index_path, e->string, e->valuestring);
        free(p);
    }
    if (s == TAILOR_OK)
        s = sort_and_check(ctx, st);
    for (const cJSON *e = map->child; e && s == TAILOR_OK; e = e->next) {
        const tailor_st_tensor *t = tailor_st_find(st, e->string);
        if (!t || strcmp(base_name(t->file), e->valuestring) != 0)
            s = tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                                 "%s: the index puts tensor '%s' in %s, but that file does not "
                                 "hold it", index_path, e->string, e->valuestring);
    }
    cJSON_Delete(root);
    return s;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

tailor_status tailor_st_open(tailor_ctx *ctx, const char *path, tailor_st **out)
{
    *out = NULL;
    if (!path || !*path)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "safetensors: no path given");
    tailor_st *st = calloc(1, sizeof *st);
    if (!st)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", path);
    tailor_status s = TAILOR_OK;
    char *target = NULL;
    if (is_dir(path)) {
        size_t n = strlen(path) + 64;
        target = malloc(n);
        if (!target) {
            free(st);
            return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", path);
        }
        snprintf(target, n, "%s/model.safetensors.index.json", path);
        if (!exists(target))
            snprintf(target, n, "%s/model.safetensors", path);
        if (!exists(target))
            s = tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                                 "%s: holds neither model.safetensors.index.json nor "
                                 "model.safetensors", path);
    } else {
        target = dup_str(path);
    }
    if (s == TAILOR_OK && !target)
        s = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "%s: out of memory", path);
    if (s == TAILOR_OK) {
        st->path = target;
        target = NULL;
        if (ends_with(st->path, ".json")) {
            s = open_index(ctx, st, st->path);
        } else {
            s = add_file(ctx, st, st->path);
            if (s == TAILOR_OK)
                s = sort_and_check(ctx, st);
        }
    }
    free(target);
    if (s != TAILOR_OK) {
        tailor_st_close(st);
        return s;
    }
    *out = st;
    return TAILOR_OK;
}

void tailor_st_close(tailor_st *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_tensors; i++)
        free((char *)st->tensors[i].name);
    free(st->tensors);
    for (size_t i = 0; i < st->n_files; i++)
        unmap_file(&st->files[i]);
    free(st->files);
    free(st->path);
    free(st);
}

static int key_cmp(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const tailor_st_tensor *)elem)->name);
}

const tailor_st_tensor *tailor_st_find(const tailor_st *st, const char *name)
{
    if (!st || !name || !st->n_tensors)
        return NULL;
    return bsearch(name, st->tensors, st->n_tensors, sizeof *st->tensors, key_cmp);
}

tailor_status tailor_st_get(tailor_ctx *ctx, const tailor_st *st, const char *name,
                            const tailor_st_tensor **out)
{
    *out = tailor_st_find(st, name);
    if (!*out)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "%s: has no tensor '%s'",
                                st ? st->path : "safetensors", name);
    return TAILOR_OK;
}

size_t tailor_st_count(const tailor_st *st) { return st ? st->n_tensors : 0; }

const tailor_st_tensor *tailor_st_at(const tailor_st *st, size_t i)
{
    return st && i < st->n_tensors ? &st->tensors[i] : NULL;
}

size_t tailor_st_mapped_bytes(const tailor_st *st)
{
    size_t n = 0;
    for (size_t i = 0; st && i < st->n_files; i++)
        n += st->files[i].size;
    return n;
}

const char *tailor_st_path(const tailor_st *st) { return st ? st->path : ""; }

float tailor_st_load_f32(const tailor_st_tensor *t, int64_t i)
{
    const uint8_t *p = (const uint8_t *)t->data + (size_t)i * tailor_st_dtype_size(t->dtype);
    switch (t->dtype) {
    case TAILOR_ST_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case TAILOR_ST_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return tailor_bf16_to_f32(h);
    }
    case TAILOR_ST_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return tailor_f16_to_f32(h);
    }
    case TAILOR_ST_F64: {
        double v;
        memcpy(&v, p, 8);
        return (float)v;
    }
    case TAILOR_ST_F8_E4M3:
    case TAILOR_ST_F8_E5M2:
        return 0.0f; /* not decoded: no Gemma 4 tensor uses them */
    default:
        return (float)tailor_st_load_i64(t, i);
    }
}

int64_t tailor_st_load_i64(const tailor_st_tensor *t, int64_t i)
{
    const uint8_t *p = (const uint8_t *)t->data + (size_t)i * tailor_st_dtype_size(t->dtype);
    switch (t->dtype) {
    case TAILOR_ST_BOOL:
    case TAILOR_ST_U8: return p[0];
    case TAILOR_ST_I8: return (int8_t)p[0];
    case TAILOR_ST_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case TAILOR_ST_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TAILOR_ST_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case TAILOR_ST_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TAILOR_ST_U64: { uint64_t v; memcpy(&v, p, 8); return (int64_t)v; }
    case TAILOR_ST_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case TAILOR_ST_F16:
    case TAILOR_ST_BF16:
    case TAILOR_ST_F32:
    case TAILOR_ST_F64: return (int64_t)tailor_st_load_f32(t, i);
    default: return 0;
    }
}
