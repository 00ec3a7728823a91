/* tokenizer_internal.h — the tokenizer's private state, shared by its loader and its encoder. */
#ifndef TAILOR_TOKENIZER_INTERNAL_H
#define TAILOR_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

#define TOK_MAX_STEPS 16 /* normalizer / pre-tokenizer / decoder steps after flattening Sequence */

/* A string in the tokenizer's pool. len == TOK_NO_STR marks an id with no token. */
typedef struct tok_str {
    uint32_t off, len;
} tok_str;
#define TOK_NO_STR UINT32_MAX

/* Open-addressing map from a pooled string to an int32 (the string's index in `keys`). */
typedef struct tok_strmap {
    int32_t *slots;      /* [mask + 1], -1 = empty, else an index into keys */
    uint32_t *hashes;    /* [mask + 1], the full hash of the slot's key */
    size_t mask;
} tok_strmap;

/* A merge-table slot: one cache line holds four, so a lookup costs one miss. */
typedef struct tok_merge {
    uint64_t key;        /* left << 32 | right, UINT64_MAX = empty */
    uint32_t rank;       /* index in model.merges */
    int32_t merged;      /* id of the merged token */
} tok_merge;

/* An added token (tokenizer.json "added_tokens"). */
typedef struct tok_added {
    tok_str content;     /* as written in the file */
    tok_str match;       /* what the trie matches: content, normalized when `normalized` */
    int32_t id;
    unsigned char special, normalized, lstrip, rstrip, single_word;
} tok_added;

/* A byte trie over added-token strings; siblings are a linked list, the root a direct table. */
typedef struct tok_trie_node {
    int32_t child;       /* first child, -1 if none */
    int32_t sibling;     /* next sibling, -1 if none */
    int32_t added;       /* index into tok->added when a token ends here, else -1 */
    unsigned char byte;
} tok_trie_node;

typedef struct tok_trie {
    int32_t root[256];   /* node index of each first byte, -1 if no token starts with it */
    tok_trie_node *nodes;
    size_t n, cap;
} tok_trie;

/* A Replace (normalizer or decoder) or a Split (pre-tokenizer) step. */
typedef enum tok_step_kind {
    TOK_STEP_REPLACE = 0,
    TOK_STEP_SPLIT,
    TOK_STEP_BYTE_FALLBACK,
    TOK_STEP_FUSE
} tok_step_kind;

typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED = 0,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

typedef struct tok_step {
    tok_step_kind kind;
    tok_str pattern;     /* Replace / Split: the literal pattern */
    tok_str content;     /* Replace: the replacement */
    tok_split_behavior behavior; /* Split */
} tok_step;

struct tailor_tokenizer {
    char *pool;                 /* every string, back to back */
    size_t pool_len, pool_cap;

    int32_t nids;               /* 1 + the largest id */
    tok_str *id_str;            /* [nids] text of each id (added token text wins) */
    unsigned char *id_special;  /* [nids] 1 for added tokens marked special */
    unsigned char *id_byte;     /* [nids] 1 + the byte for <0xNN> tokens, else 0 */

    int32_t nvocab;             /* model.vocab entries */
    tok_str *vocab_key;         /* [nvocab] the model's token strings */
    int32_t *vocab_id;          /* [nvocab] their ids */
    tok_strmap vocab_map;       /* string -> index into vocab_key */
    int32_t *bmp_id;            /* [65536] id of the one-codepoint token, -1 if none */
    int32_t byte_id[256];       /* id of <0xNN>, -1 if absent */

    tok_merge *merges;          /* [merge_mask + 1] open addressing on (left, right) */
    size_t merge_mask;
    size_t nmerges;

    int32_t unk_id;             /* -1 when the model has no unk_token */
    int fuse_unk, byte_fallback, ignore_merges;
    /* Junctions: (last code point of a, first code point of b) over all merges (a, b). BPE can
     * only join two neighbouring characters x y when (x, y) is a junction, so a piece is cut
     * wherever it is not (see bpe_piece). */
    uint64_t *junction_key;     /* [junction_mask + 1] x << 32 | y, UINT64_MAX = empty */
    size_t junction_mask;
    uint8_t *left_end;          /* [8192] bitmap over BMP code points: last of some merge's a */
    uint8_t *right_start;       /* [8192] bitmap over BMP code points: first of some merge's b */
    int chunking;               /* 1 when pieces may be cut at non-junctions */

    tok_added *added;
    size_t nadded;
    tok_strmap added_map;       /* content -> index into added (keys: added_content) */
    tok_str *added_content;     /* [nadded] the contents, for added_map */
    tok_trie trie_raw;          /* added tokens with normalized = false */
    tok_trie trie_norm;         /* added tokens with normalized = true */

    tok_step normalizer[TOK_MAX_STEPS];
    size_t nnormalizer;
    tok_step pretok[TOK_MAX_STEPS];
    size_t npretok;
    tok_step decoder[TOK_MAX_STEPS];
    size_t ndecoder;

    int32_t bos_id;             /* "<bos>", -1 if absent */
};

/* Looks `s` (len bytes) up in `map` whose keys live in `keys`/`pool`; the key index or -1. */
int32_t tok_strmap_get(const tok_strmap *map, const tok_str *keys, const char *pool, const char *s,
                       size_t len);

/* The id of the model-vocabulary token spelled by s[0..len), -1 if absent. */
int32_t tok_vocab_lookup(const tailor_tokenizer *tok, const char *s, size_t len);

/* 1 when the code points x y can be joined by some merge (x ends its left part, y starts the
 * right one). */
int tok_is_junction(const tailor_tokenizer *tok, uint32_t x, uint32_t y);

/* Length of the UTF-8 character at s (1..4), 1 for a byte that does not start a valid one. */
size_t tok_utf8_len(const unsigned char *s, size_t avail);

/* Bytes of s[0..len) with every (non-overlapping, left to right) occurrence of the step's
 * pattern replaced by its content (a normalizer's or decoder's Replace step). */
size_t tok_replace_size(const tailor_tokenizer *tok, const tok_step *step, const char *s,
                        size_t len);

/* Writes those tok_replace_size bytes to dst (no terminating NUL). */
void tok_replace_write(const tailor_tokenizer *tok, const tok_step *step, const char *s, size_t len,
                       char *dst);

#endif
