/* cmd_tokenize.c — `tailor tokenize`: text to token ids with a tokenizer.json. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tokenizer.h"

static const char usage_text[] =
    "usage: tailor tokenize (--model DIR | --tokenizer FILE) (--text TEXT | --file F) [--json]\n"
    "                       [--add-bos | --chat [--system TEXT] [--think]]\n"
    "  --model DIR       use DIR/tokenizer.json\n"
    "  --tokenizer FILE  use FILE (a Hugging Face tokenizer.json)\n"
    "  --text TEXT       the text to encode\n"
    "  --file F          encode the whole content of F (- for standard input)\n"
    "  --json            print a JSON array instead of space-separated ids\n"
    "  --add-bos         prepend <bos> (off by default, as the chat template adds it itself)\n"
    "  --chat            the ids of the Gemma 4 chat prompt of the text, as tailor run --chat\n"
    "                    gives them (with --model, the empty thought block where DIR's\n"
    "                    template has one)\n"
    "  --system TEXT     a system turn first (implies --chat)\n"
    "  --think           thinking on: the system turn opens with <|think|> (implies --chat)\n";

typedef struct tokenize_opts {
    const char *model_dir, *tokenizer, *text, *file, *system;
    int json, add_bos, chat, think;
} tokenize_opts;

static int parse_args(int argc, char **argv, tokenize_opts *o)
{
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'}, {"tokenizer", required_argument, NULL, 't'},
        {"text", required_argument, NULL, 'x'},  {"file", required_argument, NULL, 'f'},
        {"json", no_argument, NULL, 'j'},        {"add-bos", no_argument, NULL, 'b'},
        {"chat", no_argument, NULL, 'c'},        {"system", required_argument, NULL, 's'},
        {"think", no_argument, NULL, 'k'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o->model_dir = optarg; break;
        case 't': o->tokenizer = optarg; break;
        case 'x': o->text = optarg; break;
        case 'f': o->file = optarg; break;
        case 'j': o->json = 1; break;
        case 'b': o->add_bos = 1; break;
        case 'c': o->chat = 1; break;
        case 's': o->system = optarg, o->chat = 1; break;
        case 'k': o->think = o->chat = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return cli_bad_flag("tokenize", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("tokenize", "unexpected argument '%s'", argv[optind]);
    if (!o->model_dir == !o->tokenizer)
        return cli_usage_error("tokenize", "give exactly one of --model DIR and --tokenizer FILE");
    if (!o->text == !o->file)
        return cli_usage_error("tokenize", "give exactly one of --text TEXT and --file F");
    if (o->chat && o->add_bos)
        return cli_usage_error("tokenize", "--add-bos and %s do not go together (the chat prompt "
                               "begins with <bos>)",
                               o->system ? "--system" : o->think ? "--think" : "--chat");
    return -1;
}

static void print_ids(const int32_t *ids, size_t n, int json)
{
    fputs(json ? "[" : "", stdout);
    for (size_t i = 0; i < n; i++)
        printf("%s%d", i ? (json ? "," : " ") : "", (int)ids[i]);
    fputs(json ? "]\n" : "\n", stdout);
}

int cmd_tokenize(int argc, char **argv)
{
    tokenize_opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char *text = NULL;
    size_t len = 0;
    char path[4096];
    if (o.model_dir)
        snprintf(path, sizeof path, "%s/tokenizer.json", o.model_dir);
    else
        snprintf(path, sizeof path, "%s", o.tokenizer);
    tailor_ctx *ctx = cli_ctx();
    tailor_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    tailor_status st = o.file ? cli_read_text(ctx, o.file, &text, &len) : TAILOR_OK;
    if (st == TAILOR_OK)
        st = tailor_tokenizer_open(ctx, path, &tok);
    if (st == TAILOR_OK && o.chat)
        st = cli_chat_prompt(ctx, tok, o.model_dir, o.system, o.file ? text : o.text, o.think, &ids,
                             &n);
    else if (st == TAILOR_OK)
        st = tailor_tokenizer_encode(ctx, tok, o.file ? text : o.text, o.file ? len : strlen(o.text),
                                     o.add_bos, &ids, &n);
    rc = st == TAILOR_OK ? 0 : cli_fail(ctx, st);
    if (st == TAILOR_OK)
        print_ids(ids, n, o.json);
    free(ids);
    free(text);
    tailor_tokenizer_close(tok);
    tailor_ctx_destroy(ctx);
    return rc;
}
