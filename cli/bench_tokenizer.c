/* bench_tokenizer.c — `tailor bench tokenizer`: encoding speed on one core, checked by round trip. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tokenizer.h"

static const char bench_usage[] =
    "usage: tailor bench tokenizer --tokenizer FILE [--file F] [--mb N] [--runs N] [--json]\n"
    "  --tokenizer FILE  a Hugging Face tokenizer.json\n"
    "  --file F          text to repeat up to the size (default: a built-in multilingual sample)\n"
    "  --mb N            size of the text encoded per run, in MB (default 8)\n"
    "  --runs N          timed runs; the median is reported (default 5)\n"
    "  --json            one JSON object instead of a line of text\n";

/* A little of everything the tokenizer meets: prose in several scripts, code, numbers, spaces. */
static const char builtin_sample[] =
    "The quick brown fox jumps over the lazy dog. In 2024, 1,234,567 people visited the museum.\n"
    "Le cœur a ses raisons que la raison ne connaît point. Où est la bibliothèque ?\n"
    "Größere Straßen führen über die Brücke nach Süden; Übermäßige Geschwindigkeit ist verboten.\n"
    "Съешь же ещё этих мягких французских булок, да выпей чаю.\n"
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε!\n"
    "مرحبا بالعالم، هذه جملة عربية للاختبار.  שלום עולם, זה משפט בעברית.\n"
    "नमस्ते दुनिया, यह एक परीक्षण वाक्य है।  你好，世界！这是一个用于测试的中文句子。\n"
    "こんにちは世界、これはテスト用の日本語の文です。  안녕하세요 세계, 이것은 테스트 문장입니다.\n"
    "สวัสดีชาวโลก นี่คือประโยคทดสอบภาษาไทย\n"
    "int main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++)\n"
    "        printf(\"%d: %s\\n\", i, argv[i]);\n    return 0;\n}\n"
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🇫🇷 🇯🇵 ❤️‍🔥 and tabs\t\tand    many     spaces.\r\n"
    "Pi is 3.14159265358979323846264338327950288419716939937510582097494459.\n\n";

typedef struct bench_opts {
    const char *tokenizer, *file;
    double mb;
    int runs, json;
} bench_opts;

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_bench_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longopts[] = {
        {"tokenizer", required_argument, NULL, 't'}, {"file", required_argument, NULL, 'f'},
        {"mb", required_argument, NULL, 'm'},        {"runs", required_argument, NULL, 'r'},
        {"json", no_argument, NULL, 'j'},            {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 0; /* `tailor bench` may have run getopt already: start afresh at argv[1] */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': o->tokenizer = optarg; break;
        case 'f': o->file = optarg; break;
        case 'j': o->json = 1; break;
        case 'h': fputs(bench_usage, stdout); return 0;
        case 'm':
            if (cli_parse_number("bench tokenizer", "--mb", optarg, 0, 4096,
                                 "a size in MB in (0, 4096]", &o->mb))
                return 2;
            break;
        case 'r':
            if (cli_parse_int("bench tokenizer", "--runs", optarg, 1, 1000, &o->runs))
                return 2;
            break;
        default: return cli_bad_flag("bench tokenizer", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench tokenizer", "unexpected argument '%s'", argv[optind]);
    if (!o->tokenizer)
        return cli_usage_error("bench tokenizer", "--tokenizer FILE is required");
    return -1;
}

/* The sample (file or built-in) repeated to `bytes`; malloc'd. NULL with a message on failure. */
static char *make_text(const bench_opts *o, size_t bytes, size_t *len)
{
    const char *sample = builtin_sample;
    size_t slen = sizeof builtin_sample - 1;
    char *filebuf = NULL;
    if (o->file) {
        tailor_ctx *ctx = cli_ctx();
        tailor_status st = cli_read_text(ctx, o->file, &filebuf, &slen);
        if (st != TAILOR_OK)
            cli_fail(ctx, st);
        tailor_ctx_destroy(ctx);
        if (st != TAILOR_OK)
            return NULL;
        if (slen == 0) {
            fprintf(stderr, "tailor bench tokenizer: '%s' is empty\n", o->file);
            free(filebuf);
            return NULL;
        }
        sample = filebuf;
    }
    size_t reps = (bytes + slen - 1) / slen;
    char *text = malloc(reps * slen + 1);
    if (text) {
        for (size_t i = 0; i < reps; i++)
            memcpy(text + i * slen, sample, slen);
        text[reps * slen] = '\0';
        *len = reps * slen;
    } else
        fprintf(stderr, "tailor bench tokenizer: out of memory for %zu bytes of text\n", reps * slen);
    free(filebuf);
    return text;
}

/* Encodes once more and checks that decoding gives the text back (when no "▁" is in it). */
static int check_round_trip(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *text, size_t len)
{
    if (memmem(text, len, "\xE2\x96\x81", 3))
        return 0; /* a literal ▁ decodes to a space: no exact round trip to check */
    int32_t *ids = NULL;
    size_t n = 0, dlen = 0;
    char *back = NULL;
    tailor_status st = tailor_tokenizer_encode(ctx, tok, text, len, 0, &ids, &n);
    if (st == TAILOR_OK)
        st = tailor_tokenizer_decode(ctx, tok, ids, n, 0, &back, &dlen);
    int ok = st == TAILOR_OK && dlen == len && memcmp(back, text, len) == 0;
    free(ids);
    free(back);
    if (st != TAILOR_OK)
        return cli_fail(ctx, st);
    if (!ok)
        fprintf(stderr, "tailor bench tokenizer: decode(encode(text)) differs from the text\n");
    return ok ? 0 : 1;
}

int bench_tokenizer(int argc, char **argv)
{
    bench_opts o = {.mb = 8, .runs = 5};
    int rc = parse_bench_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    size_t len = 0;
    char *text = make_text(&o, (size_t)(o.mb * 1e6), &len);
    if (!text)
        return 1;
    tailor_ctx *ctx = cli_ctx();
    tailor_tokenizer *tok = NULL;
    double t0 = cli_now_s();
    tailor_status st = tailor_tokenizer_open(ctx, o.tokenizer, &tok);
    double load_s = cli_now_s() - t0;
    double *secs = calloc((size_t)o.runs * 2, sizeof *secs), *cpus = secs ? secs + o.runs : NULL;
    size_t ntok = 0;
    for (int r = 0; st == TAILOR_OK && r < o.runs && secs; r++) {
        int32_t *ids = NULL;
        double c0 = cpu_s();
        t0 = cli_now_s();
        st = tailor_tokenizer_encode(ctx, tok, text, len, 0, &ids, &ntok);
        secs[r] = cli_now_s() - t0;
        cpus[r] = cpu_s() - c0;
        free(ids);
    }
    if (st != TAILOR_OK || !secs)
        rc = st != TAILOR_OK ? cli_fail(ctx, st) : 1;
    else
        rc = check_round_trip(ctx, tok, text, len);
    if (rc == 0) {
        qsort(secs, (size_t)o.runs, sizeof *secs, cli_cmp_double);
        qsort(cpus, (size_t)o.runs, sizeof *cpus, cli_cmp_double);
        double med = secs[o.runs / 2], mbs = (double)len / 1e6 / med, toks = (double)ntok / med;
        double cpu = cpus[o.runs / 2], cpu_mbs = (double)len / 1e6 / cpu;
        if (o.json)
            printf("{\"bench\":\"tokenizer\",\"bytes\":%zu,\"tokens\":%zu,\"runs\":%d,\"median_s\":%.6f,"
                   "\"best_s\":%.6f,\"median_cpu_s\":%.6f,\"mb_per_s\":%.2f,\"mb_per_cpu_s\":%.2f,"
                   "\"tokens_per_s\":%.0f,\"load_s\":%.3f,\"threads\":1,\"round_trip\":true}\n",
                   len, ntok, o.runs, med, secs[0], cpu, mbs, cpu_mbs, toks, load_s);
        else
            printf("tokenizer encode, 1 thread: %.2f MB/s, %.0f tokens/s (%zu bytes -> %zu tokens; median "
                   "of %d runs %.3f s wall, %.3f s CPU = %.2f MB/s per CPU second; best %.3f s; load "
                   "%.2f s; round trip ok)\n",
                   mbs, toks, len, ntok, o.runs, med, cpu, cpu_mbs, secs[0], load_s);
    }
    free(secs);
    free(text);
    tailor_tokenizer_close(tok);
    tailor_ctx_destroy(ctx);
    return rc;
}
