/* registry.c — finds template files: TAILOR_TEMPLATE_PATH directories first, then embedded. */
#include "registry.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A template or space file larger than this is refused unread. */
#define TEMPLATE_MAX_BYTES ((size_t)64 << 20)

/* Calls fn(dir) for each non-empty entry of TAILOR_TEMPLATE_PATH until it returns non-zero. */
static int foreach_path_dir(int (*fn)(void *user, const char *dir), void *user)
{
    const char *env = getenv("TAILOR_TEMPLATE_PATH");
    if (!env || !*env)
        return 0;
    char *copy = strdup(env);
    if (!copy)
        return 0;
    int r = 0;
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir && !r; dir = strtok_r(NULL, ":", &save))
        if (*dir)
            r = fn(user, dir);
    free(copy);
    return r;
}

/* Fails naming the first TAILOR_TEMPLATE_PATH entry that is not a directory: a typo there
 * would otherwise run the built-in templates in silence. */
static int bad_entry(void *user, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    snprintf(user, 1024, "%s", dir);
    return 1;
}

static tailor_status check_path(tailor_ctx *ctx)
{
    char bad[1024];
    if (!foreach_path_dir(bad_entry, bad))
        return TAILOR_OK;
    return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                            "TAILOR_TEMPLATE_PATH: '%s' is not a directory", bad);
}

typedef struct find_state {
    const char *name;
    char found[1024];
    char searched[2048];
} find_state;

static int try_dir(void *user, const char *dir)
{
    find_state *s = user;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, s->name);
    size_t used = strlen(s->searched);
    snprintf(s->searched + used, sizeof s->searched - used, "%s, ", dir);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(s->found, sizeof s->found, "%s", path);
        return 1;
    }
    return 0;
}

tailor_status tailor_template_read(tailor_ctx *ctx, const char *name, tailor_template_file *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", name);
    tailor_status st = check_path(ctx);
    if (st)
        return st;
    find_state s = {.name = name};
    if (foreach_path_dir(try_dir, &s)) {
        snprintf(out->origin, sizeof out->origin, "%s", s.found);
        return tailor_read_file(ctx, s.found, TEMPLATE_MAX_BYTES, &out->text, &out->size);
    }
    for (size_t i = 0; i < tailor_embedded_count; i++) {
        if (strcmp(tailor_embedded_files[i].path, name) == 0) {
            out->text = malloc(tailor_embedded_files[i].size + 1);
            if (!out->text)
                return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
            memcpy(out->text, tailor_embedded_files[i].data, tailor_embedded_files[i].size + 1);
            out->size = tailor_embedded_files[i].size;
            snprintf(out->origin, sizeof out->origin, "embedded:%s", name);
            return TAILOR_OK;
        }
    }
    return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                            "template file '%s' not found (searched TAILOR_TEMPLATE_PATH: %s"
                            "then the templates built into tailor)",
                            name, s.searched[0] ? s.searched : "unset, ");
}

void tailor_template_file_free(tailor_template_file *f)
{
    if (!f)
        return;
    free(f->text);
    f->text = NULL;
}

/* ---- listing ------------------------------------------------------------------------ */

typedef struct name_list {
    char **names;
    int count, cap;
    int failed;
} name_list;

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void list_add(name_list *l, const char *name)
{
    for (int i = 0; i < l->count; i++)
        if (strcmp(l->names[i], name) == 0)
            return;
    if (l->count == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **n = realloc(l->names, (size_t)cap * sizeof *n);
        if (!n) {
            l->failed = 1;
            return;
        }
        l->names = n;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) {
        l->failed = 1;
        return;
    }
    l->names[l->count++] = copy;
}

typedef struct list_state {
    name_list *list;
    const char *subdir; /* "" or "include" */
    const char *suffix;
} list_state;

static int list_dir(void *user, const char *dir)
{
    list_state *s = user;
    char path[1024];
    snprintf(path, sizeof path, "%s%s%s", dir, *s->subdir ? "/" : "", s->subdir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, s->suffix))
            continue;
        char rel[512];
        snprintf(rel, sizeof rel, "%s%s%s", s->subdir, *s->subdir ? "/" : "", e->d_name);
        list_add(s->list, rel);
    }
    closedir(d);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static tailor_status list_files(tailor_ctx *ctx, const char *subdir, const char *suffix,
                                char ***names, int *count)
{
    tailor_status st = check_path(ctx);
    if (st)
        return st;
    name_list l = {0};
    list_state s = {&l, subdir, suffix};
    foreach_path_dir(list_dir, &s);
    size_t plen = strlen(subdir);
    for (size_t i = 0; i < tailor_embedded_count; i++) {
        const char *p = tailor_embedded_files[i].path;
        int in_sub = plen ? (strncmp(p, subdir, plen) == 0 && p[plen] == '/')
                          : strchr(p, '/') == NULL;
        if (in_sub && has_suffix(p, suffix))
            list_add(&l, p);
    }
    if (l.failed) {
        tailor_template_names_free(l.names, l.count);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory listing templates");
    }
    if (l.count > 1)
        qsort(l.names, (size_t)l.count, sizeof *l.names, cmp_names);
    *names = l.names;
    *count = l.count;
    return TAILOR_OK;
}

tailor_status tailor_template_list_spaces(tailor_ctx *ctx, char ***names, int *count)
{
    return list_files(ctx, "", ".lua", names, count);
}

void tailor_template_names_free(char **names, int count)
{
    for (int i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

tailor_status tailor_template_headers(tailor_ctx *ctx, char ***names, char ***texts, int *count)
{
    char **list = NULL;
    int n = 0;
    tailor_status st = list_files(ctx, "include", ".cuh", &list, &n);
    if (st)
        return st;
    char **t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) {
        tailor_template_names_free(list, n);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        tailor_template_file f;
        st = tailor_template_read(ctx, list[i], &f);
        if (st) {
            tailor_template_headers_free(list, t, n);
            return st;
        }
        t[i] = f.text;
        /* NVRTC resolves #include "x.cuh" by the bare name */
        char *slash = strrchr(list[i], '/');
        if (slash)
            memmove(list[i], slash + 1, strlen(slash + 1) + 1);
    }
    *names = list;
    *texts = t;
    *count = n;
    return TAILOR_OK;
}

void tailor_template_headers_free(char **names, char **texts, int count)
{
    if (texts)
        for (int i = 0; i < count; i++)
            free(texts[i]);
    free(texts);
    tailor_template_names_free(names, count);
}
