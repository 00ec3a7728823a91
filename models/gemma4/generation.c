/* generation.c — what the checkpoint's generation files say: its chat template about the
 * generation prompt, and generation_config.json about sampling and stop ids. tailor renders the one-turn
 * Gemma 4 prompt itself (tailor_tokenizer_chat_prompt); the one detail that differs between
 * sizes, the empty thought channel the 26B and 31B templates close when thinking is off, is read
 * from the template that ships with the weights rather than guessed. Sampling flags a run leaves
 * out take the checkpoint's defaults, and generation ends at its eos_token_id, as transformers'
 * generate() does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "gemma4_internal.h"

/* 1 when the template's generation prompt holds the empty thought block: after the first
 * "add_generation_prompt" (so that a literal among the past turns' formatting does not count),
 * "<|channel>thought", a newline (the two characters \n of a Jinja string literal, or a real
 * one), then "<channel|>". */
static int has_empty_thought(const char *t)
{
    static const char open[] = "<|channel>thought", close[] = "<channel|>";
    const char *gen = strstr(t, "add_generation_prompt");
    if (!gen)
        return 0;
    for (const char *p = strstr(gen, open); p; p = strstr(p + 1, open)) {
        const char *q = p + sizeof open - 1;
        if (q[0] == '\\' && q[1] == 'n')
            q += 2;
        else if (q[0] == '\n')
            q += 1;
        else
            continue;
        if (strncmp(q, close, sizeof close - 1) == 0)
            return 1;
    }
    return 0;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The template text of tokenizer_config.json's "chat_template": a string, or in a list of
 * named templates ({"name", "template"}) the one named "default"; NULL when there is none.
 * *bad: the field is there but none of those. */
static const char *template_text(const cJSON *tpl, int *bad)
{
    *bad = 0;
    if (!tpl)
        return NULL;
    if (cJSON_IsString(tpl))
        return tpl->valuestring;
    if (!cJSON_IsArray(tpl)) {
        *bad = 1;
        return NULL;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, tpl) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0) {
            if (cJSON_IsString(text))
                return text->valuestring;
            *bad = 1;
            return NULL;
        }
    }
    return NULL;
}

/* The JSON object in the file at `path` (cJSON_Delete it), or NULL with one sentence. */
static cJSON *read_object(tailor_ctx *ctx, const char *path, tailor_status *s)
{
    char *text;
    if ((*s = tailor_read_file(ctx, path, G4_MAX_TEXT, &text, NULL)))
        return NULL;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        *s = tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: not a JSON object", path);
        return NULL;
    }
    return root;
}

/* tokenizer_config.json's "chat_template" (absent: no template) checked as above. */
static tailor_status from_tokenizer_config(tailor_ctx *ctx, const char *path, int *out)
{
    tailor_status s;
    cJSON *root = read_object(ctx, path, &s);
    if (!root)
        return s;
    int bad = 0;
    const char *tpl = template_text(cJSON_GetObjectItemCaseSensitive(root, "chat_template"), &bad);
    s = TAILOR_OK;
    if (bad)
        s = tailor_set_error(ctx, TAILOR_ERR_PARSE,
                             "%s: field chat_template is neither a string nor a list of named "
                             "templates whose \"default\" has a string \"template\"", path);
    else
        *out = tpl ? has_empty_thought(tpl) : 0;
    cJSON_Delete(root);
    return s;
}

tailor_status tailor_gemma4_chat_empty_thought(tailor_ctx *ctx, const char *dir, int *empty_thought)
{
    char path[1024];
    *empty_thought = 0;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (exists(path)) {
        char *text;
        tailor_status s = tailor_read_file(ctx, path, G4_MAX_TEXT, &text, NULL);
        if (s)
            return s;
        *empty_thought = has_empty_thought(text);
        free(text);
        return TAILOR_OK;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    return exists(path) ? from_tokenizer_config(ctx, path, empty_thought) : TAILOR_OK;
}

/* ---- generation_config.json ---- */

/* A number field of the object at `path` in [lo, hi] (lo excluded when open_lo), or absent. */
static tailor_status number_field(tailor_ctx *ctx, const char *path, const cJSON *root,
                                  const char *key, double lo, int open_lo, double hi,
                                  const char *range, double *out, int *present)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *present = v != NULL && !cJSON_IsNull(v);
    if (!*present)
        return TAILOR_OK;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1.0;
    if (!cJSON_IsNumber(v) || d < lo || (open_lo && d == lo) || d > hi)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: field %s must be %s", path, key,
                                range);
    *out = d;
    return TAILOR_OK;
}

/* `dir`/generation_config.json as a JSON object into *root (cJSON_Delete it); *root NULL and OK
 * when there is no such file. path receives its name for messages. */
static tailor_status generation_config(tailor_ctx *ctx, const char *dir, char *path, size_t size,
                                       cJSON **root)
{
    *root = NULL;
    snprintf(path, size, "%s/generation_config.json", dir);
    if (!exists(path))
        return TAILOR_OK;
    tailor_status s = TAILOR_OK;
    *root = read_object(ctx, path, &s);
    return s;
}

tailor_status tailor_gemma4_sampling_defaults(tailor_ctx *ctx, const char *dir,
                                              tailor_gemma4_sampling *out)
{
    *out = (tailor_gemma4_sampling){.temperature = 1.0f, .top_k = 50, .top_p = 1.0f};
    char path[1024];
    cJSON *root;
    tailor_status s = generation_config(ctx, dir, path, sizeof path, &root);
    if (!root)
        return s;
    double t = 1.0, k = 50, p = 1.0;
    int has_t = 0, has_k = 0, has_p = 0;
    s = number_field(ctx, path, root, "temperature", 0, 1, 1e6, "a number above 0", &t, &has_t);
    if (s == TAILOR_OK)
        s = number_field(ctx, path, root, "top_k", 0, 0, 1 << 20, "an integer from 0 to 1048576",
                         &k, &has_k);
    if (s == TAILOR_OK && has_k && k != (double)(int)k)
        s = tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: field top_k must be an integer from 0 "
                             "to 1048576", path);
    if (s == TAILOR_OK)
        s = number_field(ctx, path, root, "top_p", 0, 1, 1, "a number in (0, 1]", &p, &has_p);
    cJSON_Delete(root);
    if (s)
        return s;
    out->temperature = (float)t;
    out->top_k = (int)k;
    out->top_p = (float)p;
    out->from_file = has_t || has_k || has_p;
    return TAILOR_OK;
}

/* One eos_token_id entry: an integer id from 0 to 2^31 - 1. */
static int stop_id_ok(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 2147483647.0 &&
           v->valuedouble == (double)(int32_t)v->valuedouble;
}

/* generation_config.json's eos_token_id (present and not null) into *out. */
static tailor_status stops_from(tailor_ctx *ctx, const char *path, const cJSON *v,
                                tailor_gemma4_stops *out)
{
    tailor_gemma4_stops got = {.n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1, .from_file = 1};
    int ok = got.n >= 1 && got.n <= TAILOR_GEMMA4_MAX_STOPS;
    const cJSON *e = cJSON_IsArray(v) ? v->child : v;
    for (int i = 0; ok && i < got.n; i++, e = e->next) {
        ok = stop_id_ok(e);
        if (ok)
            got.ids[i] = (int32_t)e->valuedouble;
    }
    if (!ok)
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: field eos_token_id must be a token "
                                "id or a list of 1 to %d token ids (integers from 0)", path,
                                TAILOR_GEMMA4_MAX_STOPS);
    *out = got;
    return TAILOR_OK;
}

tailor_status tailor_gemma4_stop_ids(tailor_ctx *ctx, const char *dir, tailor_gemma4_stops *out)
{
    *out = (tailor_gemma4_stops){.ids = {1, 106, 50}, .n = 3};
    char path[1024];
    cJSON *root;
    tailor_status s = generation_config(ctx, dir, path, sizeof path, &root);
    if (!root)
        return s;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    s = v && !cJSON_IsNull(v) ? stops_from(ctx, path, v, out) : TAILOR_OK;
    cJSON_Delete(root);
    return s;
}
