/* test_safetensors.c — safetensors loading: a good file and a sharded index load and read back;
 * every malformed input fails with one sentence naming the file and the tensor or field. */
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "test_gemma4_writer.h"
#include "testlib.h"

static char dir[256];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* Writes raw bytes: 8-byte length, header text, then `data_len` bytes of data. */
static void write_raw(const char *name, const char *header, size_t data_len)
{
    char p[400];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    uint64_t hl = strlen(header);
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, hl, f);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), f);
    fclose(f);
}

/* Opening `name` must fail with `code` and a message containing every needle. */
static void expect_fail(tailor_ctx *ctx, const char *name, tailor_status code, const char *n1,
                        const char *n2)
{
    char p[400];
    path_of(p, sizeof p, name);
    tailor_st *st = (tailor_st *)0x1;
    tailor_status s = tailor_st_open(ctx, p, &st);
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(s == code, "%s: status %s, want %s (%s)", name, tailor_status_name(s),
           tailor_status_name(code), msg);
    CHECKF(st == NULL, "%s: *out not cleared on failure", name);
    CHECKF(strstr(msg, name) != NULL, "%s: message does not name the file: %s", name, msg);
    CHECKF(!n1 || strstr(msg, n1), "%s: message lacks '%s': %s", name, n1, msg);
    CHECKF(!n2 || strstr(msg, n2), "%s: message lacks '%s': %s", name, n2, msg);
    CHECKF(!strpbrk(msg, "\n\r\t"), "%s: message is not one line: %s", name, msg);
    printf("  %-22s -> %s\n", name, msg);
}

static void test_good(tailor_ctx *ctx)
{
    tw w = {0};
    float a[6] = {1, -2, 3.5f, 4, 5, 6.25f};
    int64_t s23[2] = {2, 3}, s1[1] = {1};
    tw_add_f(&w, "a.weight", "BF16", a, 2, s23);
    tw_add_f(&w, "b", "F32", a, 1, s1);
    int32_t iv[3] = {-7, 0, 123456};
    int64_t s3[1] = {3};
    tw_add_raw(&w, "c.ints", "I32", 1, s3, iv, sizeof iv);
    char p[400];
    path_of(p, sizeof p, "good.safetensors");
    CHECK(tw_write(&w, p) == 0);
    tw_free(&w);
    tailor_st *st = NULL;
    CHECK_OK(ctx, tailor_st_open(ctx, p, &st));
    if (!st)
        return;
    CHECK(tailor_st_count(st) == 3);
    const tailor_st_tensor *t = tailor_st_find(st, "a.weight");
    CHECK(t && t->dtype == TAILOR_ST_BF16 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
    CHECK(t && tailor_st_load_f32(t, 5) == 6.25f && tailor_st_load_f32(t, 2) == 3.5f);
    t = tailor_st_find(st, "c.ints");
    CHECK(t && tailor_st_load_i64(t, 0) == -7 && tailor_st_load_i64(t, 2) == 123456);
    CHECK(tailor_st_find(st, "nope") == NULL);
    const tailor_st_tensor *out = NULL;
    CHECK(tailor_st_get(ctx, st, "missing.weight", &out) == TAILOR_ERR_NOT_FOUND);
    CHECKF(strstr(tailor_ctx_message(ctx), "missing.weight") &&
           strstr(tailor_ctx_message(ctx), "good.safetensors"), "missing-tensor message: %s",
           tailor_ctx_message(ctx));
    CHECK(tailor_st_mapped_bytes(st) > 0);
    tailor_st_close(st);
    tailor_st_close(NULL);
}

static void test_sharded(tailor_ctx *ctx)
{
    tw w1 = {0}, w2 = {0};
    float a[4] = {1, 2, 3, 4};
    int64_t s4[1] = {4};
    tw_add_f(&w1, "x", "F32", a, 1, s4);
    tw_add_f(&w2, "y", "BF16", a, 1, s4);
    char p[400];
    path_of(p, sizeof p, "s-1.safetensors");
    tw_write(&w1, p);
    path_of(p, sizeof p, "s-2.safetensors");
    tw_write(&w2, p);
    tw_free(&w1);
    tw_free(&w2);
    path_of(p, sizeof p, "good.index.json");
    tw_write_text(p, "{\"metadata\":{},\"weight_map\":{\"x\":\"s-1.safetensors\",\"y\":\"s-2.safetensors\"}}");
    tailor_st *st = NULL;
    CHECK_OK(ctx, tailor_st_open(ctx, p, &st));
    CHECK(st && tailor_st_count(st) == 2);
    const tailor_st_tensor *y = st ? tailor_st_find(st, "y") : NULL;
    CHECK(y && tailor_st_load_f32(y, 3) == 4.0f && strstr(y->file, "s-2.safetensors"));
    tailor_st_close(st);

    /* the index names a tensor its shard does not hold */
    path_of(p, sizeof p, "bad.index.json");
    tw_write_text(p, "{\"weight_map\":{\"x\":\"s-1.safetensors\",\"z\":\"s-2.safetensors\"}}");
    expect_fail(ctx, "bad.index.json", TAILOR_ERR_NOT_FOUND, "'z'", "s-2.safetensors");
    /* the same tensor in two shards */
    path_of(p, sizeof p, "dup.index.json");
    path_of(p, sizeof p, "s-3.safetensors");
    tw w3 = {0};
    tw_add_f(&w3, "x", "F32", a, 1, s4);
    tw_write(&w3, p);
    tw_free(&w3);
    path_of(p, sizeof p, "dup.index.json");
    tw_write_text(p, "{\"weight_map\":{\"x\":\"s-1.safetensors\",\"y\":\"s-3.safetensors\"}}");
    expect_fail(ctx, "dup.index.json", TAILOR_ERR_PARSE, "'x'", "twice");
    path_of(p, sizeof p, "junk.index.json");
    tw_write_text(p, "{\"weight_map\": [1,2");
    expect_fail(ctx, "junk.index.json", TAILOR_ERR_PARSE, "weight_map", NULL);
}

static void test_bad(tailor_ctx *ctx)
{
    /* truncated: the data section is shorter than the offsets */
    write_raw("truncated.safetensors",
              "{\"w\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]}}", 40);
    expect_fail(ctx, "truncated.safetensors", TAILOR_ERR_PARSE, "'w'", "past the end");
    /* offsets past the end of the file */
    write_raw("offsets.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1000,1008]}}", 16);
    expect_fail(ctx, "offsets.safetensors", TAILOR_ERR_PARSE, "'b'", "past the end");
    /* shape x dtype size != byte length (BF16 [2,3] = 12 bytes, offsets span 24) */
    write_raw("dtsize.safetensors",
              "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24);
    expect_fail(ctx, "dtsize.safetensors", TAILOR_ERR_PARSE, "'w'", "12 bytes");
    /* a dtype and a tensor name holding control characters: the message stays one line, the
     * characters escaped (found by mutating headers: a raw newline split the sentence) */
    write_raw("ctrl.safetensors",
              "{\"w\\n\\u0001\":{\"dtype\":\"I\\n6\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    expect_fail(ctx, "ctrl.safetensors", TAILOR_ERR_PARSE, "'w\\n\\x01'", "'I\\n6'");
    /* unknown dtype */
    write_raw("dtype.safetensors",
              "{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    expect_fail(ctx, "dtype.safetensors", TAILOR_ERR_PARSE, "'w'", "Q4_K");
    /* overlapping tensors */
    write_raw("overlap.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
    expect_fail(ctx, "overlap.safetensors", TAILOR_ERR_PARSE, "overlaps", "'a'");
    /* a tensor listed twice (apart in the data or not): the second could never be found */
    write_raw("dup.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
    expect_fail(ctx, "dup.safetensors", TAILOR_ERR_PARSE, "tensor 'a' is listed twice", NULL);
    /* malformed JSON */
    write_raw("json.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],", 8);
    expect_fail(ctx, "json.safetensors", TAILOR_ERR_PARSE, "JSON", NULL);
    /* header length beyond the file */
    char p[400];
    path_of(p, sizeof p, "hlen.safetensors");
    FILE *f = fopen(p, "wb");
    uint64_t big = 1u << 20;
    fwrite(&big, 8, 1, f);
    fputs("{}", f);
    fclose(f);
    expect_fail(ctx, "hlen.safetensors", TAILOR_ERR_PARSE, "header", NULL);
    /* shorter than the length prefix */
    path_of(p, sizeof p, "tiny.safetensors");
    tw_write_text(p, "abc");
    expect_fail(ctx, "tiny.safetensors", TAILOR_ERR_PARSE, "truncated", NULL);
    /* negative / fractional shape */
    write_raw("shape.safetensors",
              "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    expect_fail(ctx, "shape.safetensors", TAILOR_ERR_PARSE, "'w'", "shape");
    /* absent file */
    expect_fail(ctx, "absent.safetensors", TAILOR_ERR_IO, "cannot open", NULL);
}

/* tailor_read_file (runtime/tailor.h), the reader of every whole file the project takes in: the
 * bytes and their count, NUL-terminated; an empty file; and one sentence naming the file for a
 * missing one, a directory and one past the size allowed, with *text NULL. */
static void test_whole_file(tailor_ctx *ctx)
{
    char p[400], *text = (char *)0x1;
    size_t n = 7;
    path_of(p, sizeof p, "five.txt");
    FILE *f = fopen(p, "wb");
    fwrite("a\0bcd", 1, 5, f);
    fclose(f);
    CHECK_OK(ctx, tailor_read_file(ctx, p, 5, &text, &n));
    CHECK(text && n == 5 && memcmp(text, "a\0bcd", 5) == 0 && text[5] == '\0');
    free(text);
    CHECK(tailor_read_file(ctx, p, 4, &text, &n) == TAILOR_ERR_IO && !text && n == 0);
    CHECKF(strstr(tailor_ctx_message(ctx), p) &&
               strstr(tailor_ctx_message(ctx), "5 bytes, more than the 4 it may hold"),
           "%s", tailor_ctx_message(ctx));
    path_of(p, sizeof p, "empty.txt");
    tw_write_text(p, "");
    CHECK_OK(ctx, tailor_read_file(ctx, p, 5, &text, NULL));
    CHECK(text && text[0] == '\0');
    free(text);
    CHECK(tailor_read_file(ctx, dir, 1 << 20, &text, &n) == TAILOR_ERR_IO && !text);
    CHECKF(strstr(tailor_ctx_message(ctx), dir) &&
               strstr(tailor_ctx_message(ctx), "not a regular file (a directory)"),
           "%s", tailor_ctx_message(ctx));
    path_of(p, sizeof p, "absent.txt");
    CHECK(tailor_read_file(ctx, p, 1 << 20, &text, &n) == TAILOR_ERR_IO && !text);
    CHECKF(strstr(tailor_ctx_message(ctx), p) &&
               strstr(tailor_ctx_message(ctx), "cannot open: No such file"),
           "%s", tailor_ctx_message(ctx));
}

/* tailor_read_stream and tailor_read_file on a pipe: a stream is read to its end past the first
 * buffer (64 KiB) and at its edge, refused one byte past the size allowed (its size unknown
 * until then), and a pipe given by path (/dev/fd/N) is read as a stream, not refused as "not a
 * regular file". */
static void test_stream(tailor_ctx *ctx)
{
    static const size_t sizes[] = {0, 3, 65535, 65536, 200000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t len = sizes[i], n = 7;
        FILE *f = tmpfile();
        CHECK(f != NULL);
        if (!f)
            return;
        for (size_t j = 0; j < len; j++)
            fputc('a' + (int)(j % 26), f);
        char *text = NULL;
        rewind(f);
        CHECK_OK(ctx, tailor_read_stream(ctx, f, "the stream", len, &text, &n));
        int same = text && n == len && text[len] == '\0';
        for (size_t j = 0; same && j < len; j++)
            same = text[j] == 'a' + (int)(j % 26);
        CHECKF(same, "a stream of %zu bytes reads back whole (got %zu)", len, n);
        free(text);
        if (len) {
            rewind(f);
            CHECK(tailor_read_stream(ctx, f, "the stream", len - 1, &text, &n) == TAILOR_ERR_IO &&
                  !text && n == 0);
            CHECKF(strstr(tailor_ctx_message(ctx), "the stream: more than the"),
                   "%s", tailor_ctx_message(ctx));
        }
        fclose(f);
    }
    int fd[2];
    CHECK(pipe(fd) == 0);
    CHECK(write(fd[1], "piped", 5) == 5);
    close(fd[1]);
    char p[64], *text = NULL;
    size_t n = 0;
    snprintf(p, sizeof p, "/dev/fd/%d", fd[0]);
    CHECK_OK(ctx, tailor_read_file(ctx, p, 100, &text, &n));
    CHECK(text && n == 5 && strcmp(text, "piped") == 0);
    free(text);
    close(fd[0]);
}

static void keep_line(void *user, tailor_log_level level, const char *line)
{
    (void)level;
    snprintf((char *)user, 256, "%s", line);
}

/* runtime/tailor.h's messages and log lines stay one line whatever a file puts into them:
 * control characters escaped; a detail (a compiler's log) kept on the lines after; a wrapped
 * message's prefix escaped too. */
static void test_one_line(void)
{
    tailor_ctx *c = tailor_ctx_create();
    CHECK(tailor_set_error(c, TAILOR_ERR_PARSE, "f: '%s'", "a\nb\tc\x01\x7f") == TAILOR_ERR_PARSE);
    CHECKF(strcmp(tailor_ctx_message(c), "f: 'a\\nb\\tc\\x01\\x7f'") == 0, "%s",
           tailor_ctx_message(c));
    tailor_wrap_error(c, "in %s", "x\ry");
    CHECKF(strcmp(tailor_ctx_message(c), "in x\\ry: f: 'a\\nb\\tc\\x01\\x7f'") == 0, "%s",
           tailor_ctx_message(c));
    tailor_set_error_detail(c, TAILOR_ERR_NVRTC, "line 1\nline 2", "k\n failed");
    CHECKF(strcmp(tailor_ctx_message(c), "k\\n failed\nline 1\nline 2") == 0, "%s",
           tailor_ctx_message(c));
    char line[256] = "";
    tailor_ctx_set_log(c, keep_line, line, TAILOR_LOG_INFO);
    tailor_log(c, TAILOR_LOG_INFO, "tokenizer '%s'", "t\n.json");
    CHECKF(strcmp(line, "tokenizer 't\\n.json'") == 0, "%s", line);
    tailor_ctx_destroy(c);
}

/* RssFile of this process in KiB (-1 when /proc is not there). */
static long rss_file_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "RssFile:", 8) == 0)
            v = strtol(line + 8, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* tailor_st_release: reading a 64 MiB tensor maps its pages; releasing it drops them from the
 * resident set, and the data reads back the same afterwards (the loader's streaming relies on
 * both). A range outside the mapping is ignored. */
static void test_release(tailor_ctx *ctx)
{
    if (rss_file_kib() < 0) {
        printf("release: no /proc/self/status here, not checked\n");
        return;
    }
    const size_t bytes = 64u << 20;
    char header[160];
    snprintf(header, sizeof header,
             "{\"t\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", bytes, bytes);
    write_raw("big.safetensors", header, bytes);
    char p[400];
    path_of(p, sizeof p, "big.safetensors");
    tailor_st *st = NULL;
    CHECK_OK(ctx, tailor_st_open(ctx, p, &st));
    const tailor_st_tensor *t = st ? tailor_st_find(st, "t") : NULL;
    CHECK(t != NULL);
    if (!t) {
        tailor_st_close(st);
        return;
    }
    const unsigned char *d = t->data;
    unsigned sum0 = 0, sum1 = 0;
    long before = rss_file_kib();
    for (size_t i = 0; i < bytes; i += 512)
        sum0 += d[i];
    long touched = rss_file_kib();
    unsigned char outside[64] = {0};
    tailor_st_release(st, outside, sizeof outside); /* not in the mapping: nothing happens */
    tailor_st_release(st, t->data, t->nbytes);
    long released = rss_file_kib();
    for (size_t i = 0; i < bytes; i += 512)
        sum1 += d[i];
    printf("release: RssFile %ld KiB, %ld after reading 64 MiB, %ld after release; data the same "
           "after: %s\n", before, touched, released, sum0 == sum1 ? "yes" : "NO");
    CHECKF(touched - before > 48 * 1024, "reading 64 MiB mapped only %ld KiB", touched - before);
    CHECKF(touched - released > 48 * 1024, "release dropped only %ld KiB of %ld", touched - released,
           touched - before);
    CHECK(sum0 == sum1);
    tailor_st_close(st);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    tw_tmpdir(dir, sizeof dir, "st");
    test_good(ctx);
    test_sharded(ctx);
    test_bad(ctx);
    test_whole_file(ctx);
    test_stream(ctx);
    test_one_line();
    test_release(ctx);
    tw_rmdir(dir);
    tailor_ctx_destroy(ctx);
    return test_finish("test_safetensors");
}
