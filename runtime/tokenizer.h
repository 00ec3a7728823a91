/* tokenizer.h — a Hugging Face tokenizer.json BPE tokenizer (Gemma's): encode, decode, chat prompt. */
#ifndef TAILOR_TOKENIZER_H
#define TAILOR_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tailor.h"

/* Opaque and read-only once open: one tokenizer may serve several threads at once. */
typedef struct tailor_tokenizer tailor_tokenizer;

/* Loads `path` (a tokenizer.json: model BPE with merges, byte_fallback, fuse_unk, unk_token;
 * normalizer Replace/Sequence; pre_tokenizer Split/Sequence; decoder Replace/ByteFallback/Fuse/
 * Sequence; added_tokens). On success *out owns everything; free it with tailor_tokenizer_close.
 * Fails with TAILOR_ERR_IO (unreadable file), TAILOR_ERR_PARSE (malformed JSON or field, the
 * message names the file and the field) or TAILOR_ERR_UNSUPPORTED (a component type this build
 * does not implement, named in the message); *out is then NULL. */
tailor_status tailor_tokenizer_open(tailor_ctx *ctx, const char *path, tailor_tokenizer **out);

/* Frees the tokenizer; NULL is fine. */
void tailor_tokenizer_close(tailor_tokenizer *tok);

/* Encodes `len` bytes of UTF-8 `text` (need not be NUL-terminated; bytes that are not valid
 * UTF-8 are byte-fallback tokens) as Hugging Face `encode(text, add_special_tokens=False)` does:
 * added/special token strings in the text become their ids. add_bos != 0 prepends <bos>.
 * On success *ids is malloc'd (the caller frees it with free(); it may be NULL when *n is 0).
 * Fails with TAILOR_ERR_NOMEM, or TAILOR_ERR_NOT_FOUND when add_bos is asked and there is no
 * <bos>; *ids is then NULL and *n 0. */
tailor_status tailor_tokenizer_encode(tailor_ctx *ctx, const tailor_tokenizer *tok, const char *text,
                                      size_t len, int add_bos, int32_t **ids, size_t *n);

/* Decodes `n` ids through the tokenizer.json decoder (Gemma: "▁" -> " ", <0xNN> runs -> bytes,
 * U+FFFD per byte of a run that is not valid UTF-8). skip_special != 0 drops the text of added
 * tokens marked special. Ids outside the vocabulary are dropped, as Hugging Face does.
 * On success *text is malloc'd and NUL-terminated (the caller frees it) and *len its length in
 * bytes (len may be NULL). Fails only with TAILOR_ERR_NOMEM. */
tailor_status tailor_tokenizer_decode(tailor_ctx *ctx, const tailor_tokenizer *tok, const int32_t *ids,
                                      size_t n, int skip_special, char **text, size_t *len);

/* State of a streaming decode: the bytes of a run of byte-fallback tokens not yet released.
 * Zero it ({0}) before the first step. */
#define TAILOR_DETOK_MAX_RUN 64
typedef struct tailor_detok_stream {
    unsigned char pending[TAILOR_DETOK_MAX_RUN];
    int npending;
    int broken; /* the current run can no longer be valid UTF-8: its bytes come out as U+FFFD */
} tailor_detok_stream;

/* Feeds one id; writes to `out` the text it releases (NUL-terminated when room allows) and its
 * length to *out_len. The text streamed over a whole generation and its flush is what
 * tailor_tokenizer_decode gives for the same ids, as Hugging Face's ByteFallback decides a run of
 * byte tokens as a whole (its bytes when the run is valid UTF-8, else U+FFFD per byte): a run is
 * held until the next other token ends it, and once it can no longer be valid every byte of it
 * so far and after comes out as U+FFFD at once. (A valid run longer than TAILOR_DETOK_MAX_RUN
 * bytes releases its whole characters early, so the one case that can differ is such a run
 * followed by a byte that breaks it.) Special tokens come out as their text (callers stop on
 * them first). An `out` of 3 x TAILOR_DETOK_MAX_RUN bytes more than the longest token always
 * suffices (320 bytes for Gemma). Fails with TAILOR_ERR_MISUSE when out_size is too small
 * (nothing is consumed then). Ids outside the vocabulary produce no text. */
tailor_status tailor_tokenizer_decode_step(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                           tailor_detok_stream *st, int32_t id, char *out,
                                           size_t out_size, size_t *out_len);

/* Ends a streaming decode: the run of byte-fallback bytes still held in `st` comes out as
 * tailor_tokenizer_decode writes a run at the end of its ids (its bytes when valid UTF-8, else
 * U+FFFD per byte: a character cut short, as when generation stops inside one); nothing
 * (*out_len 0) when none is held. Then st is empty again, ready for another stream. Output as for
 * decode_step (3 x TAILOR_DETOK_MAX_RUN bytes always suffice); TAILOR_ERR_MISUSE when out_size
 * is too small (st kept). */
tailor_status tailor_tokenizer_decode_flush(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                            tailor_detok_stream *st, char *out, size_t out_size,
                                            size_t *out_len);

/* tailor_tokenizer_chat_prompt's flags. */
enum {
    /* thinking off, the checkpoint's template closing an empty thought channel after the model
     * turn (tailor_gemma4_chat_empty_thought says whether it does) */
    TAILOR_CHAT_EMPTY_THOUGHT = 1,
    /* thinking on (the template's enable_thinking): the system turn opens with <|think|>\n */
    TAILOR_CHAT_THINK = 2,
};

/* The Gemma 4 chat prompt for one user turn, as ids, as the checkpoints' chat templates render
 * it (GEMMA4.md §4): <bos>[<|turn>system\n[<|think|>\n]{system}<turn|>\n]<|turn>user\n{text}
 * <turn|>\n<|turn>model\n — the system turn when system_text is not NULL or with
 * TAILOR_CHAT_THINK — then with TAILOR_CHAT_EMPTY_THOUGHT, unless thinking is on, an empty
 * thought channel, <|channel>thought\n<channel|> (what the 26B and 31B templates append with
 * thinking off). Both texts are trimmed of leading and trailing ASCII whitespace, as the template
 * does; each stretch of text between two special tokens is encoded as one, as Hugging Face
 * encodes the rendered prompt. With a Gemma 3 tokenizer.json (no <|turn>),
 * <start_of_turn>/<end_of_turn> stand in. *ids is malloc'd, the caller frees it. Fails with
 * TAILOR_ERR_NOT_FOUND when the tokenizer lacks <bos>, the turn tokens or a token a flag needs
 * (<|think|>; <|channel>, <channel|>). */
tailor_status tailor_tokenizer_chat_prompt(tailor_ctx *ctx, const tailor_tokenizer *tok,
                                           const char *system_text, const char *user_text,
                                           unsigned flags, int32_t **ids, size_t *n);

/* 1 + the largest id of the vocabulary and the added tokens (Hugging Face's
 * get_vocab_size(with_added_tokens=True)). */
int tailor_tokenizer_vocab_size(const tailor_tokenizer *tok);

/* The id of the token spelled `token` exactly (vocabulary or added token); -1 if absent. */
int32_t tailor_tokenizer_token_id(const tailor_tokenizer *tok, const char *token);

#endif
