/* chat.c — what the checkpoint's own chat template says about the generation prompt. tailor
 * renders the one-turn Gemma 4 prompt itself (tailor_tokenizer_chat_prompt); the one detail that
 * differs between sizes, the empty thought channel the 26B and 31B templates close when thinking
 * is off, is read from the template that ships with the weights rather than guessed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "gemma4_internal.h"

/* 1 when the template text holds the empty thought block: "<|channel>thought", a newline (the
 * two characters \n of a Jinja string literal, or a real one), then "<channel|>". */
static int has_empty_thought(const char *t)
{
    static const char open[] = "<|channel>thought", close[] = "<channel|>";
    for (const char *p = strstr(t, open); p; p = strstr(p + 1, open)) {
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

/* tokenizer_config.json's "chat_template" (a string; absent: no template) checked as above. */
static tailor_status from_tokenizer_config(tailor_ctx *ctx, const char *path, int *out)
{
    tailor_status s;
    char *text = g4_read_text(ctx, path, &s);
    if (!text)
        return s;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tailor_set_error(ctx, TAILOR_ERR_PARSE, "%s: not a JSON object", path);
    }
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    s = TAILOR_OK;
    if (tpl && !cJSON_IsString(tpl))
        s = tailor_set_error(ctx, TAILOR_ERR_PARSE,
                             "%s: field chat_template is not a string (a list of named templates "
                             "is not supported)", path);
    else
        *out = tpl ? has_empty_thought(tpl->valuestring) : 0;
    cJSON_Delete(root);
    return s;
}

tailor_status tailor_gemma4_chat_empty_thought(tailor_ctx *ctx, const char *dir, int *empty_thought)
{
    char path[1024];
    *empty_thought = 0;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (exists(path)) {
        tailor_status s;
        char *text = g4_read_text(ctx, path, &s);
        if (!text)
            return s;
        *empty_thought = has_empty_thought(text);
        free(text);
        return TAILOR_OK;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    return exists(path) ? from_tokenizer_config(ctx, path, empty_thought) : TAILOR_OK;
}
