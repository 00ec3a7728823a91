/* test_tokenizer.c — the tokenizer.json BPE tokenizer: unit cases on a tiny synthetic tokenizer,
 * bad input, and the real Gemma tokenizer of ../shared against Hugging Face's ids. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"
#include "testlib.h"
#include "tokenizer.h"

/* ---------------------------------------------------------------- helpers */

static char tmp_dir[256];


static const char *write_tmp(const char *name, const char *content)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    fputs(content, f);
    fclose(f);
    return path;
}

/* Encodes text (NUL-terminated) and compares with want[0..nwant). */
static int encodes_to(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *text, const int32_t *want,
                      size_t nwant)
{
    int32_t *ids = NULL;
    size_t n = 0;
    tailor_status st = tailor_tokenizer_encode(ctx, tok, text, strlen(text), 0, &ids, &n);
    int ok = st == TAILOR_OK && n == nwant && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "  encode(\"%s\") gave", text);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %d", (int)ids[i]);
        fprintf(stderr, " (status %s)\n", tailor_status_name(st));
    }
    free(ids);
    return ok;
}

#define ENCODES(tok, text, ...)                                                                    \
    do {                                                                                           \
        static const int32_t want_[] = {__VA_ARGS__};                                              \
        CHECKF(encodes_to(ctx, tok, text, want_, sizeof want_ / sizeof want_[0]), "%s", text);     \
    } while (0)

static char *decoded(tailor_ctx *ctx, const tailor_tokenizer *tok, const int32_t *ids, size_t n, int skip)
{
    char *text = NULL;
    size_t len = 0;
    if (tailor_tokenizer_decode(ctx, tok, ids, n, skip, &text, &len) != TAILOR_OK)
        return NULL;
    if (strlen(text) != len) { /* the corpus has no NUL: lengths must agree */
        free(text);
        return NULL;
    }
    return text;
}

/* Decodes ids one at a time through the streaming decoder, then flushes it; malloc'd result. */
static char *stream_decoded(tailor_ctx *ctx, const tailor_tokenizer *tok, const int32_t *ids, size_t n)
{
    tailor_detok_stream st = {{0}, 0, 0};
    size_t cap = 64, len = 0;
    char *text = malloc(cap);
    for (size_t i = 0; i <= n && text; i++) {
        char buf[512];
        size_t m = 0;
        tailor_status rc = i < n ? tailor_tokenizer_decode_step(ctx, tok, &st, ids[i], buf, sizeof buf, &m)
                                 : tailor_tokenizer_decode_flush(ctx, tok, &st, buf, sizeof buf, &m);
        if (rc != TAILOR_OK) {
            free(text);
            return NULL;
        }
        if (len + m + 1 > cap) {
            cap = (len + m + 1) * 2;
            char *p = realloc(text, cap);
            if (!p) {
                free(text);
                return NULL;
            }
            text = p;
        }
        memcpy(text + len, buf, m);
        len += m;
    }
    if (text)
        text[len] = '\0';
    return text;
}

/* ---------------------------------------------------------------- a tiny synthetic tokenizer */

/* Its vocabulary: <unk>0 <bos>1 a2 b3 c4 ab5 bc6 abc7 ▁8 ▁a9 <0x41>10 <0xC3>11 <0xA9>12 x13 xx14
 * xxx15 <sw>16 (single_word) <ls>17 (lstrip) <rs>18 (rstrip) " "19 " b"20 ▁b21; merges in rank
 * order: b+c, a+b, a+bc, ▁+a, x+x, xx+x, " "+b, ▁+b. The two %s are the normalizer and the
 * pre-tokenizer. Expected ids below were checked with Hugging Face tokenizers 0.23.2. */
static const char synth_template[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":0,\"cont"
    "ent\":\"<unk>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false"
    ",\"special\":true},{\"id\":1,\"content\":\"<bos>\",\"single_word\":false,\"lstrip\":false,\""
    "rstrip\":false,\"normalized\":false,\"special\":true},{\"id\":16,\"content\":\"<sw>\",\"sing"
    "le_word\":true,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false},{\""
    "id\":17,\"content\":\"<ls>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":false,\"normal"
    "ized\":false,\"special\":false},{\"id\":18,\"content\":\"<rs>\",\"single_word\":false,\"lstr"
    "ip\":false,\"rstrip\":true,\"normalized\":false,\"special\":false}],\"normalizer\":%s,\"pre_"
    "tokenizer\":%s,\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"t"
    "ype\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"},{\"type\":\"ByteFa"
    "llback\"},{\"type\":\"Fuse\"}]},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":"
    "\"<unk>\",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":true,"
    "\"byte_fallback\":true,\"ignore_merges\":false,\"vocab\":{\"<unk>\":0,\"<bos>\":1,\"a\":2,\""
    "b\":3,\"c\":4,\"ab\":5,\"bc\":6,\"abc\":7,\"\\u2581\":8,\"\\u2581a\":9,\"<0x41>\":10,\"<0xC3"
    ">\":11,\"<0xA9>\":12,\"x\":13,\"xx\":14,\"xxx\":15,\"<sw>\":16,\"<ls>\":17,\"<rs>\":18,\" \""
    ":19,\" b\":20,\"\\u2581b\":21},\"merges\":[[\"b\",\"c\"],[\"a\",\"b\"],[\"a\",\"bc\"],[\"\\u"
    "2581\",\"a\"],[\"x\",\"x\"],[\"xx\",\"x\"],[\" \",\"b\"],[\"\\u2581\",\"b\"]]}}";

static tailor_tokenizer *open_synth(tailor_ctx *ctx, const char *name, const char *normalizer,
                                    const char *pretok)
{
    char json[8192];
    snprintf(json, sizeof json, synth_template, normalizer, pretok);
    const char *path = write_tmp(name, json);
    tailor_tokenizer *tok = NULL;
    CHECK(path != NULL);
    if (path)
        CHECK_OK(ctx, tailor_tokenizer_open(ctx, path, &tok));
    return tok;
}

static const char gemma_normalizer[] = "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}";

static void test_synthetic_encode(tailor_ctx *ctx)
{
    tailor_tokenizer *tok = open_synth(ctx, "synth.json", gemma_normalizer, "null");
    if (!tok)
        return;
    ENCODES(tok, "abc", 7);        /* b+c (rank 0) before a+b (rank 1), then a+bc */
    ENCODES(tok, "abab", 5, 5);
    ENCODES(tok, "xxxx", 14, 14);  /* leftmost first among equal ranks */
    ENCODES(tok, "xxxxx", 14, 15);
    ENCODES(tok, " a", 9);         /* the normalizer turns the space into ▁ */
    ENCODES(tok, "\xC3\xA9", 11, 12);         /* é: not in the vocabulary, bytes are */
    ENCODES(tok, "\xC3\xB1", 0);              /* ñ: byte 0xB1 has no token -> <unk> */
    ENCODES(tok, "\xC3\xB1\xC3\xB1", 0);      /* fuse_unk */
    ENCODES(tok, "\xC3\xB1" "a" "\xC3\xB1" "a", 0, 2, 0, 2);
    ENCODES(tok, "<bos>a", 1, 2);
    ENCODES(tok, "a<sw>b", 2, 0, 3);          /* single_word: not a word here */
    ENCODES(tok, "a <sw> b", 2, 8, 16, 21);
    ENCODES(tok, "a  <ls>", 2, 17);           /* lstrip eats the spaces before */
    ENCODES(tok, "<rs>  b", 18, 3);           /* rstrip eats the spaces after */
    ENCODES(tok, "b<ls>", 3, 17);
    ENCODES(tok, "Aa", 10, 2);
    ENCODES(tok, "a\xCC\x81", 2, 0);
    CHECK(encodes_to(ctx, tok, "", NULL, 0));
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(ctx, tailor_tokenizer_encode(ctx, tok, "abc", 3, 1, &ids, &n));
    CHECK(n == 2 && ids[0] == 1 && ids[1] == 7);
    free(ids);
    CHECK(tailor_tokenizer_vocab_size(tok) == 22);
    CHECK(tailor_tokenizer_token_id(tok, "abc") == 7);
    CHECK(tailor_tokenizer_token_id(tok, "<rs>") == 18);
    CHECK(tailor_tokenizer_token_id(tok, "abcd") == -1);
    tailor_tokenizer_close(tok);
}

static void check_decode(tailor_ctx *ctx, const tailor_tokenizer *tok, const int32_t *ids, size_t n,
                         int skip, const char *want)
{
    char *s = decoded(ctx, tok, ids, n, skip);
    CHECKF(s && strcmp(s, want) == 0, "decode gave \"%s\", want \"%s\"", s ? s : "(error)", want);
    free(s);
}

static void test_synthetic_decode(tailor_ctx *ctx)
{
    tailor_tokenizer *tok = open_synth(ctx, "synth.json", gemma_normalizer, "null");
    if (!tok)
        return;
    check_decode(ctx, tok, (const int32_t[]){11, 12}, 2, 0, "\xC3\xA9");
    check_decode(ctx, tok, (const int32_t[]){9}, 1, 0, " a");
    check_decode(ctx, tok, (const int32_t[]){10}, 1, 0, "A");
    check_decode(ctx, tok, (const int32_t[]){11}, 1, 0, "\xEF\xBF\xBD");
    check_decode(ctx, tok, (const int32_t[]){11, 2}, 2, 0, "\xEF\xBF\xBD" "a");
    check_decode(ctx, tok, (const int32_t[]){1, 2}, 2, 0, "<bos>a");
    check_decode(ctx, tok, (const int32_t[]){1, 2}, 2, 1, "a");
    check_decode(ctx, tok, (const int32_t[]){10, 11, 12, 21}, 4, 0, "A\xC3\xA9 b");
    check_decode(ctx, tok, (const int32_t[]){2, 999, -5, 3}, 4, 0, "ab"); /* unknown ids dropped */

    /* streaming: a run of byte tokens is held until another token ends it, then decided as a
     * whole as the whole decode (and Hugging Face's ByteFallback) does: its bytes when the run is
     * valid UTF-8, else U+FFFD per byte; once it cannot be valid, U+FFFD at once */
    tailor_detok_stream st = {{0}, 0, 0};
    char buf[16];
    size_t m = 99;
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 11, buf, sizeof buf, &m));
    CHECK(m == 0 && st.npending == 1);
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 12, buf, sizeof buf, &m));
    CHECK(m == 0 && st.npending == 2); /* é held: a byte after it could still break the run */
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 9, buf, sizeof buf, &m));
    CHECK(m == 4 && memcmp(buf, "\xC3\xA9 a", 4) == 0 && st.npending == 0);
    static const int32_t cut[] = {11, 12, 11};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, cut[i], buf, sizeof buf, &m));
        CHECK(m == 0);
    }
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 9, buf, sizeof buf, &m));
    CHECK(m == 11 && memcmp(buf, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD a", 11) == 0); /* é too */
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 11, buf, sizeof buf, &m));
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 10, buf, sizeof buf, &m)); /* C3 41 */
    CHECK(m == 6 && memcmp(buf, "\xEF\xBF\xBD\xEF\xBF\xBD", 6) == 0 && st.npending == 0);
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 11, buf, sizeof buf, &m));
    CHECK(m == 3 && memcmp(buf, "\xEF\xBF\xBD", 3) == 0); /* the broken run goes on: at once */
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 9, buf, sizeof buf, &m));
    CHECK(m == 2 && memcmp(buf, " a", 2) == 0 && st.npending == 0 && st.broken == 0);
    /* too small a buffer: refused, nothing consumed */
    CHECK_OK(ctx, tailor_tokenizer_decode_step(ctx, tok, &st, 11, buf, sizeof buf, &m));
    CHECK(tailor_tokenizer_decode_step(ctx, tok, &st, 9, buf, 2, &m) == TAILOR_ERR_MISUSE);
    CHECK(st.npending == 1);

    /* the end of a stream: a held run comes out as the whole decode writes it at the end */
    CHECK(tailor_tokenizer_decode_flush(ctx, tok, &st, buf, 2, &m) == TAILOR_ERR_MISUSE);
    CHECK(st.npending == 1); /* too small a buffer: nothing consumed */
    CHECK_OK(ctx, tailor_tokenizer_decode_flush(ctx, tok, &st, buf, sizeof buf, &m));
    CHECK(m == 3 && strcmp(buf, "\xEF\xBF\xBD") == 0 && st.npending == 0);
    m = 99;
    CHECK_OK(ctx, tailor_tokenizer_decode_flush(ctx, tok, &st, buf, sizeof buf, &m));
    CHECK(m == 0 && buf[0] == '\0'); /* nothing held, nothing out */
    static const int32_t ends[][3] = {{11, -1, -1}, {9, 11, -1}, {11, 12, -1}, {11, 11, -1},
                                      {11, 2, 11}, {9, 2, 3}, {10, 11, -1}, {11, 12, 11},
                                      {12, 11, 12}, {11, 12, 10}};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        size_t n = ends[i][1] < 0 ? 1 : ends[i][2] < 0 ? 2 : 3;
        char *whole = decoded(ctx, tok, ends[i], n, 0), *streamed = stream_decoded(ctx, tok, ends[i], n);
        CHECKF(whole && streamed && strcmp(whole, streamed) == 0,
               "ids %zu: streamed and flushed \"%s\", decoded \"%s\"", i, streamed ? streamed : "(error)",
               whole ? whole : "(error)");
        free(whole);
        free(streamed);
    }
    /* the same over many random sequences of byte tokens, text, a special token and ids outside
     * the vocabulary (found by fuzzing: the stream released a character of a run that a later
     * byte broke, where the whole decode makes the whole run U+FFFD) */
    static const int32_t pool[] = {10, 11, 12, 11, 12, 9, 2, 1, 999};
    uint32_t seed = 12345;
    int differ = 0;
    for (int t = 0; t < 4000; t++) {
        int32_t ids[12];
        size_t n = 1 + (seed >> 16) % 12;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            ids[i] = pool[(seed >> 16) % (sizeof pool / sizeof *pool)];
        }
        seed = seed * 1103515245u + 12345u;
        char *whole = decoded(ctx, tok, ids, n, 0), *streamed = stream_decoded(ctx, tok, ids, n);
        if (!whole || !streamed || strcmp(whole, streamed) != 0)
            differ++;
        free(whole);
        free(streamed);
    }
    CHECKF(differ == 0, "%d of 4000 random id sequences stream differently from the whole decode",
           differ);
    /* a valid run longer than the stream holds: its whole characters go out early, and the run
     * still reads back whole */
    int32_t longrun[2 * TAILOR_DETOK_MAX_RUN + 1];
    for (int i = 0; i < 2 * TAILOR_DETOK_MAX_RUN; i++)
        longrun[i] = i % 2 ? 12 : 11; /* é x 64 as bytes */
    longrun[2 * TAILOR_DETOK_MAX_RUN] = 9;
    char *whole = decoded(ctx, tok, longrun, 2 * TAILOR_DETOK_MAX_RUN + 1, 0);
    char *streamed = stream_decoded(ctx, tok, longrun, 2 * TAILOR_DETOK_MAX_RUN + 1);
    CHECK(whole && streamed && strcmp(whole, streamed) == 0 &&
          strlen(whole) == 2 * TAILOR_DETOK_MAX_RUN + 2);
    free(whole);
    free(streamed);
    tailor_tokenizer_close(tok);
}

/* The chat prompt with Gemma 4's turn, channel and think tokens (a character vocabulary, no
 * merges): the one-turn prompt, then with the empty thought channel the 26B/31B templates
 * append, then with a system turn before the user's, then with thinking on (the template's
 * enable_thinking: <|think|>\n opens the system turn, and no empty thought channel follows). */
static void test_chat_prompt(tailor_ctx *ctx)
{
    static const char json[] =
        "{\"added_tokens\":["
        "{\"id\":2,\"content\":\"<bos>\",\"special\":true},"
        "{\"id\":30,\"content\":\"<|turn>\",\"special\":true},"
        "{\"id\":31,\"content\":\"<turn|>\",\"special\":true},"
        "{\"id\":32,\"content\":\"<|channel>\",\"special\":true},"
        "{\"id\":33,\"content\":\"<channel|>\",\"special\":true},"
        "{\"id\":34,\"content\":\"<|think|>\",\"special\":true}],"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"<bos>\":2,\"\\n\":3,\"u\":4,\"s\":5,"
        "\"e\":6,\"r\":7,\"m\":8,\"o\":9,\"d\":10,\"l\":11,\"t\":12,\"h\":13,\"g\":14,"
        "\"H\":15,\"i\":16,\"y\":17,\"<|turn>\":30,\"<turn|>\":31,\"<|channel>\":32,"
        "\"<channel|>\":33,\"<|think|>\":34},\"merges\":[]}}";
    const char *path = write_tmp("chat4.json", json);
    tailor_tokenizer *tok = NULL;
    CHECK(path != NULL);
    if (!path || tailor_tokenizer_open(ctx, path, &tok) != TAILOR_OK) {
        CHECKF(0, "chat tokenizer: %s", tailor_ctx_message(ctx));
        return;
    }
    /* <bos><|turn>user\nHi<turn|>\n<|turn>model\n */
    static const int32_t plain[] = {2, 30, 4, 5, 6, 7, 3, 15, 16, 31, 3, 30, 8, 9, 10, 6, 11, 3};
    /* ... then <|channel>thought\n<channel|> */
    static const int32_t thought[] = {32, 12, 13, 9, 4, 14, 13, 12, 3, 33};
    int32_t *ids = NULL;
    size_t n = 0;
    const size_t np = sizeof plain / sizeof *plain, nt = sizeof thought / sizeof *thought;
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, NULL, " Hi\n", 0, &ids, &n));
    CHECKF(n == np && ids && memcmp(ids, plain, sizeof plain) == 0, "plain chat prompt: %zu ids", n);
    free(ids);
    ids = NULL;
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, NULL, " Hi\n", TAILOR_CHAT_EMPTY_THOUGHT,
                                               &ids, &n));
    CHECKF(n == np + nt && ids && memcmp(ids, plain, sizeof plain) == 0 &&
               memcmp(ids + np, thought, sizeof thought) == 0,
           "chat prompt with the empty thought channel: %zu ids", n);
    free(ids);
    /* a system turn first: <bos><|turn>system\nHi<turn|>\n, then the user turn as above */
    static const int32_t sys[] = {2, 30, 5, 17, 5, 12, 6, 8, 3, 15, 16, 31, 3};
    const size_t ns = sizeof sys / sizeof *sys;
    ids = NULL;
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, " Hi ", " Hi\n", 0, &ids, &n));
    CHECKF(n == ns + np - 1 && ids && memcmp(ids, sys, sizeof sys) == 0 &&
               memcmp(ids + ns, plain + 1, sizeof plain - sizeof *plain) == 0,
           "chat prompt with a system turn: %zu ids", n);
    free(ids);
    /* thinking on: <bos><|turn>system\n<|think|>\n[Hi]<turn|>\n, then the user turn; the empty
     * thought channel is for thinking off only */
    static const int32_t think[] = {2, 30, 5, 17, 5, 12, 6, 8, 3, 34, 3, 31, 3};
    static const int32_t think_sys[] = {2, 30, 5, 17, 5, 12, 6, 8, 3, 34, 3, 15, 16, 31, 3};
    const size_t nk = sizeof think / sizeof *think, nks = sizeof think_sys / sizeof *think_sys;
    for (int et = 0; et < 2; et++) {
        unsigned flags = TAILOR_CHAT_THINK | (et ? TAILOR_CHAT_EMPTY_THOUGHT : 0);
        ids = NULL;
        CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, NULL, " Hi\n", flags, &ids, &n));
        CHECKF(n == nk + np - 1 && ids && memcmp(ids, think, sizeof think) == 0 &&
                   memcmp(ids + nk, plain + 1, sizeof plain - sizeof *plain) == 0,
               "chat prompt with thinking on%s: %zu ids", et ? " (empty thought asked)" : "", n);
        free(ids);
    }
    ids = NULL;
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, "\tHi ", "Hi", TAILOR_CHAT_THINK, &ids,
                                               &n));
    CHECKF(n == nks + np - 1 && ids && memcmp(ids, think_sys, sizeof think_sys) == 0 &&
               memcmp(ids + nks, plain + 1, sizeof plain - sizeof *plain) == 0,
           "chat prompt with thinking on and a system turn: %zu ids", n);
    free(ids);
    tailor_tokenizer_close(tok);

    /* a tokenizer without the channel tokens: refused, naming the token */
    static const char old_json[] =
        "{\"added_tokens\":[{\"id\":2,\"content\":\"<bos>\",\"special\":true},"
        "{\"id\":30,\"content\":\"<|turn>\",\"special\":true},"
        "{\"id\":31,\"content\":\"<turn|>\",\"special\":true}],"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"<bos>\":2,\"\\n\":3,\"u\":4,\"s\":5,"
        "\"e\":6,\"r\":7,\"m\":8,\"o\":9,\"d\":10,\"l\":11,\"t\":12,\"h\":13,\"g\":14,"
        "\"H\":15,\"i\":16,\"<|turn>\":30,\"<turn|>\":31},\"merges\":[]}}";
    path = write_tmp("chat4-nochannel.json", old_json);
    tok = NULL;
    if (!path || tailor_tokenizer_open(ctx, path, &tok) != TAILOR_OK) {
        CHECKF(0, "chat tokenizer without channels: %s", tailor_ctx_message(ctx));
        return;
    }
    ids = NULL;
    tailor_status st =
        tailor_tokenizer_chat_prompt(ctx, tok, NULL, "Hi", TAILOR_CHAT_EMPTY_THOUGHT, &ids, &n);
    CHECKF(st == TAILOR_ERR_NOT_FOUND && ids == NULL &&
               strstr(tailor_ctx_message(ctx), "lacks <|channel>") != NULL,
           "no <|channel>: %s", tailor_ctx_message(ctx));
    st = tailor_tokenizer_chat_prompt(ctx, tok, NULL, "Hi", TAILOR_CHAT_THINK, &ids, &n);
    CHECKF(st == TAILOR_ERR_NOT_FOUND && ids == NULL &&
               strstr(tailor_ctx_message(ctx), "lacks <|think|>") != NULL,
           "no <|think|>: %s", tailor_ctx_message(ctx));
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, NULL, "Hi", 0, &ids, &n));
    free(ids);
    tailor_tokenizer_close(tok);
}

static void test_synthetic_split(tailor_ctx *ctx)
{
    static const struct {
        const char *behavior;
        int32_t one[3], n1, two[4], n2;
    } cases[] = {
        {"Isolated", {2, 19, 3}, 3, {2, 19, 19, 3}, 4},
        {"MergedWithPrevious", {2, 19, 3}, 3, {2, 19, 19, 3}, 4},
        {"MergedWithNext", {2, 20}, 2, {2, 19, 20}, 3},
        {"Removed", {2, 3}, 2, {2, 3}, 2},
        {"Contiguous", {2, 19, 3}, 3, {2, 19, 19, 3}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pre[256];
        snprintf(pre, sizeof pre, "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"%s\","
                 "\"invert\":false}", cases[i].behavior);
        tailor_tokenizer *tok = open_synth(ctx, "split.json", "null", pre);
        if (!tok)
            continue;
        CHECKF(encodes_to(ctx, tok, "a b", cases[i].one, (size_t)cases[i].n1), "%s", cases[i].behavior);
        CHECKF(encodes_to(ctx, tok, "a  b", cases[i].two, (size_t)cases[i].n2), "%s", cases[i].behavior);
        tailor_tokenizer_close(tok);
    }
    tailor_tokenizer *tok = open_synth(ctx, "split.json", "null", "null");
    if (tok) {
        ENCODES(tok, "a b", 2, 20);
        ENCODES(tok, "a  b", 2, 19, 20);
        tailor_tokenizer_close(tok);
    }
}

/* ---------------------------------------------------------------- bad input */

/* Opening must fail with `code`, leave *out NULL, and name `field` in the message. */
static void expect_bad(tailor_ctx *ctx, const char *name, const char *json, tailor_status code,
                       const char *field)
{
    const char *path = json ? write_tmp(name, json) : name;
    tailor_tokenizer *tok = (tailor_tokenizer *)&tmp_dir; /* must be reset to NULL */
    tailor_status st = tailor_tokenizer_open(ctx, path, &tok);
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(st == code, "%s: status %s, want %s", name, tailor_status_name(st), tailor_status_name(code));
    CHECKF(tok == NULL, "%s: the output was not cleared", name);
    CHECKF(strstr(msg, path) != NULL, "%s: message does not name the file: %s", name, msg);
    CHECKF(strstr(msg, field) != NULL, "%s: message does not name '%s': %s", name, field, msg);
    CHECKF(strchr(msg, '\n') == NULL, "%s: message is more than one line: %s", name, msg);
}

static void test_bad_input(tailor_ctx *ctx)
{
    char json[8192];
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-tokenizer.json", tmp_dir);
    expect_bad(ctx, missing, NULL, TAILOR_ERR_IO, "cannot open");
    snprintf(json, sizeof json, synth_template, "null", "null");
    json[strlen(json) / 2] = '\0'; /* truncated */
    expect_bad(ctx, "truncated.json", json, TAILOR_ERR_PARSE, "malformed JSON");
    expect_bad(ctx, "empty.json", "", TAILOR_ERR_PARSE, "malformed JSON");
    expect_bad(ctx, "array.json", "[1,2]", TAILOR_ERR_PARSE, "top level");
    expect_bad(ctx, "nomodel.json", "{\"added_tokens\":[]}", TAILOR_ERR_PARSE, "'model'");
    expect_bad(ctx, "novocab.json", "{\"model\":{\"type\":\"BPE\",\"merges\":[]}}", TAILOR_ERR_PARSE,
               "model.vocab");
    expect_bad(ctx, "badid.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}",
               TAILOR_ERR_PARSE, "model.vocab");
    expect_bad(ctx, "nomerges.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", TAILOR_ERR_PARSE,
               "model.merges");
    expect_bad(ctx, "badmerge.json",
               "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"],[\"a\",\"q\"]]}}",
               TAILOR_ERR_PARSE, "model.merges[1]");
    expect_bad(ctx, "mergeresult.json",
               "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
               TAILOR_ERR_PARSE, "model.merges[0]");
    expect_bad(ctx, "wordpiece.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}",
               TAILOR_ERR_UNSUPPORTED, "model.type");
    expect_bad(ctx, "unk.json",
               "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"a\":0},\"merges\":[]}}",
               TAILOR_ERR_PARSE, "model.unk_token");
    expect_bad(ctx, "bool.json",
               "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":1,\"vocab\":{\"a\":0},\"merges\":[]}}",
               TAILOR_ERR_PARSE, "model.byte_fallback");
    snprintf(json, sizeof json, synth_template, "{\"type\":\"NFKC\"}", "null");
    expect_bad(ctx, "nfkc.json", json, TAILOR_ERR_UNSUPPORTED, "normalizer.type");
    snprintf(json, sizeof json, synth_template,
             "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"x\"}]}",
             "null");
    expect_bad(ctx, "regex.json", json, TAILOR_ERR_UNSUPPORTED, "normalizer.normalizers[0].pattern");
    snprintf(json, sizeof json, synth_template, "null", "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"}}");
    expect_bad(ctx, "split.json", json, TAILOR_ERR_PARSE, "pre_tokenizer.behavior");
    expect_bad(ctx, "added.json",
               "{\"added_tokens\":[{\"id\":-1,\"content\":\"<x>\"}],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
               TAILOR_ERR_PARSE, "added_tokens[0].id");
}

/* ---------------------------------------------------------------- the real Gemma tokenizer */

static void test_gemma_ids(tailor_ctx *ctx, const tailor_tokenizer *tok)
{
    static const struct {
        const char *s;
        int32_t id;
    } specials[] = {{"<pad>", 0}, {"<eos>", 1}, {"<bos>", 2}, {"<unk>", 3}, {"<mask>", 4},
                    {"<start_of_turn>", 105}, {"<end_of_turn>", 106}, {"\n", 107}, {"\n\n", 108},
                    {"<start_of_image>", 255999}, {"<image_soft_token>", 262144}, {"<0x00>", 238},
                    {"<0xFF>", 493}, {"\xE2\x96\x81", 236743}, {"Hello", 9259}, {"user", 2364},
                    {"model", 4368}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        CHECKF(tailor_tokenizer_token_id(tok, specials[i].s) == specials[i].id, "token_id(%s)", specials[i].s);
    CHECK(tailor_tokenizer_token_id(tok, "<|turn>") == -1); /* a Gemma 4 name, absent in Gemma 3's file */
    CHECK(tailor_tokenizer_vocab_size(tok) == 262145);
    ENCODES(tok, "<bos>", 2);
    ENCODES(tok, "<bos>Hello<eos>", 2, 9259, 1);
    ENCODES(tok, "Hello world", 9259, 1902);
    ENCODES(tok, "<start_of_turn>user\n", 105, 2364, 107);
    ENCODES(tok, "\xEE\x80\x80", 245863);                              /* U+E000 is a vocabulary piece */
    ENCODES(tok, "\xF3\xB0\x80\x80", 238 + 0xF3, 238 + 0xB0, 238 + 0x80, 238 + 0x80); /* U+F0000: bytes */
    ENCODES(tok, "\xF0\xA0\x80\x80", 238 + 0xF0, 238 + 0xA0, 238 + 0x80, 238 + 0x80); /* U+20000: bytes */
    ENCODES(tok, "\xFF", 238 + 0xFF);                                  /* not UTF-8 at all: a byte */
    ENCODES(tok, "\n\n\n", 109);
    ENCODES(tok, "\t\t", 255969);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(ctx, tailor_tokenizer_encode(ctx, tok, "Hello", 5, 1, &ids, &n));
    CHECK(n == 2 && ids[0] == 2 && ids[1] == 9259);
    free(ids);
    /* chat prompt: <bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n, text trimmed */
    static const int32_t want_chat[] = {2, 105, 2364, 107, 10979, 106, 107, 105, 4368, 107};
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, NULL, "  Hi \n", 0, &ids, &n));
    CHECKF(n == 10 && memcmp(ids, want_chat, sizeof want_chat) == 0, "chat prompt of %zu ids", n);
    free(ids);
    /* with a system turn, trimmed: Hugging Face tokenizers 0.23.2 on the rendered
     * "<bos><start_of_turn>system\nBe brief.<end_of_turn>\n<start_of_turn>user\nHi..." */
    static const int32_t want_sys[] = {2,   105,   9731, 107, 3912, 8652, 236761, 106, 107,
                                       105, 2364,  107,  10979, 106, 107, 105,   4368, 107};
    CHECK_OK(ctx, tailor_tokenizer_chat_prompt(ctx, tok, "\tBe brief. ", "Hi", 0, &ids, &n));
    CHECKF(n == 18 && memcmp(ids, want_sys, sizeof want_sys) == 0, "chat prompt with a system turn "
           "of %zu ids", n);
    free(ids);
    check_decode(ctx, tok, (const int32_t[]){2, 9259, 1902, 1}, 4, 0, "<bos>Hello world<eos>");
    check_decode(ctx, tok, (const int32_t[]){2, 9259, 1902, 1}, 4, 1, "Hello world");
}

/* Every corpus line, and the corpus as one text, decodes back to itself ("▁" comes back as " "). */
static void test_gemma_round_trip(tailor_ctx *ctx, const tailor_tokenizer *tok, char *corpus, size_t len)
{
    int32_t *ids = NULL;
    size_t n = 0;
    int lines = 0, bad = 0;
    for (char *line = corpus, *end; line < corpus + len; line = end + 1) {
        end = memchr(line, '\n', (size_t)(corpus + len - line));
        if (!end)
            end = corpus + len;
        *end = '\0';
        if (strstr(line, "\xE2\x96\x81") == NULL) {
            CHECK_OK(ctx, tailor_tokenizer_encode(ctx, tok, line, (size_t)(end - line), 0, &ids, &n));
            char *back = decoded(ctx, tok, ids, n, 0);
            char *streamed = stream_decoded(ctx, tok, ids, n);
            lines++;
            if (!back || strcmp(back, line) != 0 || !streamed || strcmp(streamed, line) != 0) {
                bad++;
                fprintf(stderr, "  round trip differs: %s\n", line);
            }
            free(back);
            free(streamed);
            free(ids);
        }
        *end = '\n';
    }
    CHECKF(bad == 0 && lines > 90, "%d of %d lines fail the round trip", bad, lines);
}

static size_t json_ids(const cJSON *arr, int32_t **out)
{
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    *out = malloc((n + 1) * sizeof **out);
    for (const cJSON *e = arr ? arr->child : NULL; e && *out; e = e->next)
        (*out)[i++] = (int32_t)e->valuedouble;
    return i;
}

/* Encodes `text` and compares ids and decode with one expected.json entry; 1 when all agree. */
static int matches_entry(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *text, size_t len,
                         const cJSON *entry)
{
    int32_t *want = NULL, *got = NULL;
    size_t nwant = json_ids(cJSON_GetObjectItemCaseSensitive(entry, "ids"), &want), ngot = 0;
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(entry, "decoded");
    int ok = tailor_tokenizer_encode(ctx, tok, text, len, 0, &got, &ngot) == TAILOR_OK && ngot == nwant &&
             (ngot == 0 || memcmp(got, want, ngot * sizeof *got) == 0);
    size_t first = 0;
    while (first < ngot && first < nwant && got[first] == want[first])
        first++;
    if (!ok)
        fprintf(stderr, "  ids differ from Hugging Face at %zu (got %zu ids, want %zu): %.80s\n", first,
                ngot, nwant, text);
    char *back = decoded(ctx, tok, want, nwant, 0);
    if (!back || !cJSON_IsString(dec) || strcmp(back, dec->valuestring) != 0) {
        fprintf(stderr, "  decode differs from Hugging Face: %.80s\n", text);
        ok = 0;
    }
    free(back);
    free(want);
    free(got);
    return ok;
}

static void test_gemma_expected(tailor_ctx *ctx, const tailor_tokenizer *tok, char *corpus, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/tokenizer/expected.json", test_source_dir());
    size_t jlen;
    char *js = test_read_file(path, &jlen);
    if (!js) {
        fprintf(stderr, "note: %s is absent; the comparison with Hugging Face was not run\n", path);
        return;
    }
    cJSON *root = cJSON_ParseWithOpts(js, NULL, 0);
    CHECKF(root != NULL, "%s is not JSON", path);
    const cJSON *lines = cJSON_GetObjectItemCaseSensitive(root, "lines");
    const cJSON *whole = cJSON_GetObjectItemCaseSensitive(root, "whole");
    const cJSON *e = lines ? lines->child : NULL;
    int nlines = 0, bad = 0, stale = 0;
    for (char *line = corpus, *end; line < corpus + len && e; line = end + 1, e = e->next, nlines++) {
        end = memchr(line, '\n', (size_t)(corpus + len - line));
        if (!end)
            end = corpus + len;
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(e, "text");
        if (!cJSON_IsString(text) || strlen(text->valuestring) != (size_t)(end - line) ||
            memcmp(text->valuestring, line, (size_t)(end - line)) != 0) {
            stale++;
            continue;
        }
        bad += !matches_entry(ctx, tok, line, (size_t)(end - line), e);
    }
    CHECKF(stale == 0 && e == NULL && nlines == cJSON_GetArraySize(lines),
           "expected.json does not belong to this corpus.txt (%d stale lines): rerun make_expected.py", stale);
    CHECKF(bad == 0 && nlines > 90, "%d of %d corpus lines differ from Hugging Face", bad, nlines);
    CHECKF(whole && matches_entry(ctx, tok, corpus, len, whole), "the whole corpus differs from Hugging Face");
    int32_t *ids = NULL;
    size_t n = whole ? json_ids(cJSON_GetObjectItemCaseSensitive(whole, "ids"), &ids) : 0;
    const cJSON *skip = cJSON_GetObjectItemCaseSensitive(whole, "decoded_skip_special");
    char *text = decoded(ctx, tok, ids, n, 1);
    CHECKF(text && cJSON_IsString(skip) && strcmp(text, skip->valuestring) == 0,
           "decode with skip_special differs from Hugging Face");
    free(text);
    text = stream_decoded(ctx, tok, ids, n);
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(whole, "decoded");
    CHECKF(text && cJSON_IsString(dec) && strcmp(text, dec->valuestring) == 0,
           "streaming decode differs from Hugging Face's decode");
    free(text);
    free(ids);
    printf("compared %d lines and the whole corpus (%zu ids) with Hugging Face\n", nlines, n);
    cJSON_Delete(root);
    free(js);
}

/* Random strings (seeded) of valid code points round-trip; random bytes encode without error. */
static void test_gemma_random(tailor_ctx *ctx, const tailor_tokenizer *tok)
{
    const uint64_t seed = 20240611;
    test_rng r;
    test_rng_seed(&r, seed);
    printf("random strings: seed %llu\n", (unsigned long long)seed);
    char buf[512];
    int bad = 0;
    for (int iter = 0; iter < 300; iter++) {
        size_t len = 0;
        while (len < sizeof buf - 8) {
            uint32_t pick = (uint32_t)(test_rng_next(&r) % 100), cp;
            if (pick < 50)
                cp = 0x20 + (uint32_t)(test_rng_next(&r) % 0x5F);
            else if (pick < 60)
                cp = 1 + (uint32_t)(test_rng_next(&r) % 0x1F);
            else if (pick < 90)
                cp = 0x80 + (uint32_t)(test_rng_next(&r) % 0xFF80);
            else
                cp = 0x10000 + (uint32_t)(test_rng_next(&r) % 0x100000);
            if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581)
                continue;
            if (cp < 0x80)
                buf[len++] = (char)cp;
            else if (cp < 0x800) {
                buf[len++] = (char)(0xC0 | cp >> 6);
                buf[len++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[len++] = (char)(0xE0 | cp >> 12);
                buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[len++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[len++] = (char)(0xF0 | cp >> 18);
                buf[len++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[len++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        buf[len] = '\0';
        int32_t *ids = NULL;
        size_t n = 0;
        if (tailor_tokenizer_encode(ctx, tok, buf, len, 0, &ids, &n) != TAILOR_OK) {
            bad++;
            continue;
        }
        char *back = decoded(ctx, tok, ids, n, 0);
        bad += !back || strcmp(back, buf) != 0;
        free(back);
        free(ids);
        for (size_t i = 0; i < len; i++) /* now raw bytes, mostly invalid UTF-8 */
            buf[i] = (char)(1 + test_rng_next(&r) % 255);
        CHECK_OK(ctx, tailor_tokenizer_encode(ctx, tok, buf, len, 0, &ids, &n));
        free(ids);
    }
    CHECKF(bad == 0, "%d random strings failed the round trip (seed %llu)", bad, (unsigned long long)seed);
}

/* `unit` repeated to about `bytes` with no newline: one piece for BPE, which must stay
 * near-linear (a quadratic merge loop would take minutes here), and still round-trip. */
static void long_line(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *what, const char *unit,
                      size_t bytes)
{
    size_t ulen = strlen(unit), reps = bytes / ulen, len = reps * ulen;
    char *text = malloc(len + 1);
    CHECK(text != NULL);
    if (!text)
        return;
    for (size_t i = 0; i < reps; i++)
        memcpy(text + i * ulen, unit, ulen);
    text[len] = '\0';
    int32_t *ids = NULL;
    size_t n = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_OK(ctx, tailor_tokenizer_encode(ctx, tok, text, len, 0, &ids, &n));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    printf("%s: %zu bytes -> %zu ids in %.3f s (%.1f MB/s)\n", what, len, n, s, (double)len / 1e6 / s);
    CHECKF(s < 30.0, "%s took %.2f s: not near-linear", what, s);
    CHECKF(n > len / 16, "%s: only %zu ids", what, n);
    char *back = decoded(ctx, tok, ids, n, 0);
    CHECKF(back && strcmp(back, text) == 0, "%s does not round-trip", what);
    free(back);
    free(ids);
    free(text);
}

static void test_gemma_long_lines(tailor_ctx *ctx, const tailor_tokenizer *tok)
{
    long_line(ctx, tok, "1 MB line of prose", "Lorem ipsum dolor sit amet, \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E consectetur 42. ",
              1u << 20);
    /* CJK without spaces: cut only where no merge joins two neighbouring characters */
    long_line(ctx, tok, "256 KB line of Japanese",
              "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE9\x95\xB7\xE3\x81\x84\xE8\xA1\x8C\xE3\x80\x82",
              1u << 18);
}

/* One line of random_cases.jsonl against tailor: an {"text", "ids"} line encodes to its ids; a
 * {"dec_ids", "skip", "text"} line decodes to its text, and streams to it when skip is 0. Returns
 * 1 when all agree (0 with a line on stderr); -1 for a line that is neither. */
static int random_case_agrees(tailor_ctx *ctx, const tailor_tokenizer *tok, const cJSON *c, int line)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(c, "dec_ids");
    const cJSON *skip = cJSON_GetObjectItemCaseSensitive(c, "skip");
    if (!cJSON_IsString(text) || (!cJSON_IsArray(ids) && (!cJSON_IsArray(dec) || !cJSON_IsNumber(skip))))
        return -1;
    int32_t *want = NULL, *got = NULL;
    int ok = 1;
    if (cJSON_IsArray(ids)) {
        size_t nwant = json_ids(ids, &want), ngot = 0;
        ok = tailor_tokenizer_encode(ctx, tok, text->valuestring, strlen(text->valuestring), 0, &got,
                                     &ngot) == TAILOR_OK &&
             ngot == nwant && (ngot == 0 || memcmp(got, want, ngot * sizeof *got) == 0);
        if (!ok)
            fprintf(stderr, "  line %d: encode differs from Hugging Face (%zu ids, want %zu)\n", line,
                    ngot, nwant);
    } else {
        size_t n = json_ids(dec, &want);
        char *whole = decoded(ctx, tok, want, n, skip->valueint);
        char *streamed = skip->valueint ? NULL : stream_decoded(ctx, tok, want, n);
        if (!whole || strcmp(whole, text->valuestring) != 0) {
            fprintf(stderr, "  line %d: decode differs from Hugging Face\n", line);
            ok = 0;
        }
        if (!skip->valueint && (!streamed || strcmp(streamed, text->valuestring) != 0)) {
            fprintf(stderr, "  line %d: streaming decode differs from Hugging Face\n", line);
            ok = 0;
        }
        free(whole);
        free(streamed);
    }
    free(want);
    free(got);
    return ok;
}

/* tests/tokenizer/random_cases.jsonl (make_random_cases.mjs: Hugging Face tokenizers over random
 * texts and random id sequences, half of them byte-fallback tokens): every encoding, decoding and
 * stream agrees, for the very tokenizer file the cases were made with. */
static void test_gemma_random_cases(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *tok_path)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/tokenizer/random_cases.jsonl", test_source_dir());
    size_t len = 0, tlen = 0;
    char *all = test_read_file(path, &len), *tjs = test_read_file(tok_path, &tlen);
    CHECKF(all && tjs, "cannot read %s or %s", path, tok_path);
    char sha[65] = "";
    if (tjs)
        tailor_sha256_hex(tjs, tlen, sha);
    free(tjs);
    int line = 0, bad = 0, malformed = 0, ncases = 0, header_ok = 0;
    for (char *p = all, *end; all && p < all + len; p = end + 1) {
        end = memchr(p, '\n', (size_t)(all + len - p));
        if (!end)
            end = all + len;
        *end = '\0';
        cJSON *c = cJSON_Parse(p);
        line++;
        if (line == 1) {
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(c, "tokenizer_sha256");
            header_ok = cJSON_IsString(h) && strcmp(h->valuestring, sha) == 0;
        } else {
            int r = c ? random_case_agrees(ctx, tok, c, line) : -1;
            malformed += r < 0;
            bad += r == 0;
            ncases += r >= 0;
        }
        cJSON_Delete(c);
    }
    CHECKF(header_ok, "%s was made from another tokenizer.json than %s: rerun make_random_cases.mjs",
           path, tok_path);
    CHECKF(malformed == 0 && ncases >= 800, "%s: %d malformed lines, %d cases", path, malformed,
           ncases);
    CHECKF(bad == 0, "%d of %d random cases differ from Hugging Face", bad, ncases);
    printf("compared %d random encodings and decodings with Hugging Face\n", ncases);
    free(all);
}

static void test_gemma(tailor_ctx *ctx)
{
    const char *shared = test_shared_dir();
    if (!shared) {
        printf("note: ../shared is absent: the real-tokenizer checks were skipped\n");
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/data/gemma3-tokenizer/tokenizer.json", shared);
    tailor_tokenizer *tok = NULL;
    CHECK_OK(ctx, tailor_tokenizer_open(ctx, path, &tok));
    if (!tok)
        return;
    char cpath[1024];
    snprintf(cpath, sizeof cpath, "%s/tests/tokenizer/corpus.txt", test_source_dir());
    size_t len = 0;
    char *corpus = test_read_file(cpath, &len);
    CHECKF(corpus != NULL, "cannot read %s", cpath);
    test_gemma_ids(ctx, tok);
    if (corpus) {
        test_gemma_round_trip(ctx, tok, corpus, len);
        test_gemma_expected(ctx, tok, corpus, len);
    }
    test_gemma_random(ctx, tok);
    test_gemma_random_cases(ctx, tok, path);
    test_gemma_long_lines(ctx, tok);
    free(corpus);
    tailor_tokenizer_close(tok);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/tailor-test-tokenizer-%ld", (long)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmp_dir);
    if (system(cmd) != 0)
        test_skip("cannot make a temporary directory");
    test_synthetic_encode(ctx);
    test_synthetic_decode(ctx);
    test_synthetic_split(ctx);
    test_chat_prompt(ctx);
    test_bad_input(ctx);
    test_gemma(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", tmp_dir);
    tailor_ctx_destroy(ctx);
    return test_finish("test_tokenizer");
}
