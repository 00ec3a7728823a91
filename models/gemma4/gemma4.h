/* gemma4.h — Gemma 4 text models: config and layer plan, presets and their kernel shapes,
 * checkpoint binding (bf16/fp16/fp32 or compressed-tensors W4A16), and the plain-C fp32
 * reference forward with its KV cache. Numerics follow ../shared/GEMMA4.md §2. */
#ifndef TAILOR_GEMMA4_H
#define TAILOR_GEMMA4_H

#include <stddef.h>
#include <stdint.h>

#include "tailor.h"

#define TAILOR_GEMMA4_MAX_LAYERS 256

/* The plan of one decoder layer (GEMMA4.md §1.1 "derived per-layer values"). */
typedef struct tailor_gemma4_layer {
    int full;        /* 1: full attention (proportional RoPE, causal); 0: sliding window */
    int head_dim;    /* 256 sliding / 512 full on released models */
    int n_kv_heads;  /* KV heads of this layer (of its source when KV-shared) */
    int has_v_proj;  /* 0 on K=V full layers (31B, 26B): V is the raw K projection */
    int kv_shared;   /* 1: computes only q and reads the cache of kv_source */
    int kv_source;   /* layer whose cache it reads (itself when not shared) */
    int inter;       /* MLP width (double on shared layers with use_double_wide_mlp) */
} tailor_gemma4_layer;

/* Text-model configuration, after parsing and derivation. */
typedef struct tailor_gemma4_config {
    int vocab;             /* vocab_size (262144 released) */
    int hidden;            /* H */
    int n_layers;          /* L */
    int n_heads;           /* query heads, all layers */
    int n_kv_heads;        /* num_key_value_heads (sliding layers) */
    int n_global_kv_heads; /* num_global_key_value_heads, 0 when absent */
    int head_dim;          /* sliding layers */
    int global_head_dim;   /* full layers */
    int intermediate;      /* intermediate_size before doubling */
    int sliding_window;    /* W: a query sees itself and the W-1 previous positions */
    int ple_dim;           /* hidden_size_per_layer_input P, 0 = no PLE (-1 after parsing a
                              config that does not say: tailor_gemma4_open takes it from the
                              tensors) */
    int ple_vocab;         /* vocab_size_per_layer_input */
    int n_kv_shared;       /* num_kv_shared_layers */
    int double_wide_mlp;   /* use_double_wide_mlp */
    int k_eq_v;            /* attention_k_eq_v */
    int moe;               /* enable_moe_block (26B-A4B): recognised, the forward refuses it */
    int n_experts, top_k_experts, moe_inter; /* MoE only */
    int bos_id;            /* 2 */
    float rms_eps;         /* 1e-6 */
    float softcap;         /* final_logit_softcapping, 0 = none */
    float rope_theta_sliding;   /* 10000 */
    float rope_theta_full;      /* 1e6 */
    float partial_rotary_full;  /* 0.25: fraction of the full head_dim that rotates */
    float rope_factor_full;     /* 1.0 */
    int quant_group;       /* quantization_config's weights.group_size: int4 columns per scale;
                              0 when it gives none (or -1): taken from each scale's shape */
    tailor_gemma4_layer layer[TAILOR_GEMMA4_MAX_LAYERS];
} tailor_gemma4_config;

/* Parses a config.json text (flat Gemma4ForCausalLM / gemma4_text, or nested
 * Gemma4ForConditionalGeneration with text_config; global_head_dim or per_layer_config) and
 * derives the layer plan from the config alone. `file` names the source in messages. Fails
 * with TAILOR_ERR_PARSE (malformed, a field missing or wrong), TAILOR_ERR_UNSUPPORTED (unknown
 * model_type, another activation, bidirectional attention, a quantization_config other than
 * compressed-tensors pack-quantized int4), one sentence naming file and field.
 * A MoE config parses (cfg->moe = 1); tailor_gemma4_open refuses it. */
tailor_status tailor_gemma4_config_parse(tailor_ctx *ctx, const char *json, const char *file,
                                         tailor_gemma4_config *cfg);

/* Fills cfg with a released model's shapes: "gemma-4-e2b", "gemma-4-e4b", "gemma-4-31b",
 * "gemma-4-26b-a4b" (the "-it" names are accepted too). TAILOR_ERR_NOT_FOUND names the known
 * presets otherwise. */
tailor_status tailor_gemma4_preset(tailor_ctx *ctx, const char *name, tailor_gemma4_config *cfg);

/* Names of the presets, NULL-terminated. */
const char *const *tailor_gemma4_preset_names(void);

/* One kernel shape a model needs. Linear: y[n] = W[n, k] x[k] (per token). Attention: one
 * layer's attention geometry. Identical shapes are merged and counted. */
typedef enum tailor_gemma4_shape_kind {
    TAILOR_GEMMA4_SHAPE_LINEAR = 0,
    TAILOR_GEMMA4_SHAPE_ATTENTION
} tailor_gemma4_shape_kind;

typedef struct tailor_gemma4_shape {
    tailor_gemma4_shape_kind kind;
    const char *what;  /* static: "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                          "up_proj", "down_proj", "ple_gate", "ple_proj", "ple_model_proj",
                          "lm_head", "router", "expert_gate_up", "expert_down", "attention" */
    int n, k;          /* linear */
    int head_dim, n_heads, n_kv_heads, window; /* attention; window 0 = full causal */
    int count;         /* layers (or uses per token) with this shape */
} tailor_gemma4_shape;

/* Lists the distinct linear and attention shapes of cfg into out[0..cap), sets *n_out to how
 * many there are (may exceed cap: call with cap 0 to size). Never fails for a parsed config. */
tailor_status tailor_gemma4_shapes(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                   tailor_gemma4_shape *out, int cap, int *n_out);

/* ---- a loaded checkpoint ----------------------------------------------------------------- */

typedef struct tailor_gemma4 tailor_gemma4;

/* Opens DIR/config.json and the safetensors in DIR (index or single file, memory-mapped),
 * binds every text tensor under model. or model.language_model., takes per-layer geometry from
 * tensor shapes (q_norm length -> head dim, k_proj rows -> KV heads, v_proj presence) and
 * cross-checks the config; W4A16 compressed-tensors weights are recognised per tensor; vision,
 * audio and the K/V of KV-shared layers are ignored. Refuses the 26B MoE, unknown model types
 * and any disagreement with one sentence naming the file and the tensor or field. On success
 * *out owns the mapping (tailor_gemma4_close); on failure *out is NULL and nothing is kept.
 * Memory: the mapping plus a few small per-layer vectors (norms, scalars) in fp32. */
tailor_status tailor_gemma4_open(tailor_ctx *ctx, const char *dir, tailor_gemma4 **out);

/* How the chat template shipped in `dir` (chat_template.jinja, else tokenizer_config.json's
 * "chat_template": a string, or the list entry named "default") ends a generation prompt with
 * thinking off: *empty_thought = 1 when its generation prompt (the text after
 * "add_generation_prompt") closes an empty thought channel (<|channel>thought\n<channel|>: the
 * 26B and 31B templates), 0 when it has no such block (E2B, E4B) or no template ships (GEMMA4.md
 * §4). A template file that cannot be read, or a tokenizer_config.json that is not a JSON object
 * or whose chat_template is neither form, fails with one sentence naming the file and field. */
tailor_status tailor_gemma4_chat_empty_thought(tailor_ctx *ctx, const char *dir, int *empty_thought);

/* The sampling defaults a checkpoint ships in `dir`/generation_config.json (temperature, top_k,
 * top_p: Gemma 4's are 1.0, 64, 0.95); a field it lacks, and every field when there is no such
 * file, at transformers' GenerationConfig defaults (1.0, 50, 1.0), which generate() would use.
 * from_file: some field came from the file. A file that is not a JSON object, or a field of the
 * wrong type or range, fails with one sentence naming the file and field. */
typedef struct tailor_gemma4_sampling {
    float temperature, top_p;
    int top_k;
    int from_file;
} tailor_gemma4_sampling;

tailor_status tailor_gemma4_sampling_defaults(tailor_ctx *ctx, const char *dir,
                                              tailor_gemma4_sampling *out);

/* The ids that end a generation: `dir`/generation_config.json's eos_token_id (an integer or a
 * list of them, as generate() reads it), else Gemma 4's instruction-tuned stops 1 <eos>,
 * 106 <turn|>, 50 <|tool_response> (GEMMA4.md §4). from_file: the list came from the file. An
 * id that is not an integer from 0 to 2^31 - 1, an empty list or more than
 * TAILOR_GEMMA4_MAX_STOPS ids fails with one sentence naming the file and field. */
#define TAILOR_GEMMA4_MAX_STOPS 16
typedef struct tailor_gemma4_stops {
    int32_t ids[TAILOR_GEMMA4_MAX_STOPS];
    int n;
    int from_file;
} tailor_gemma4_stops;

tailor_status tailor_gemma4_stop_ids(tailor_ctx *ctx, const char *dir, tailor_gemma4_stops *out);

/* Frees everything; NULL is fine. */
void tailor_gemma4_close(tailor_gemma4 *m);

/* The model's configuration with the plan as bound from the tensors. Owned by m. */
const tailor_gemma4_config *tailor_gemma4_get_config(const tailor_gemma4 *m);

/* 1 when at least one linear is W4A16 (compressed-tensors pack-quantized). */
int tailor_gemma4_is_w4a16(const tailor_gemma4 *m);

/* ---- the fp32 reference forward ------------------------------------------------------------ */

/* Run state: activations and KV cache, allocated once; the per-token path allocates nothing. */
typedef struct tailor_gemma4_cpu tailor_gemma4_cpu;

/* Options of a run state. */
typedef struct tailor_gemma4_cpu_opts {
    int max_tokens;   /* positions the state can hold (prompt + generation) */
    int linear_cache; /* 0 (default): sliding layers keep a ring of W slots; 1: every layer
                         keeps all max_tokens positions (for tests: must give the same logits) */
    int layers;       /* 0 (default): every layer; n: only layers 0..n-1 run before the final
                         norm and the LM head (layer-by-layer debugging) */
    int quantize_head; /* 0 (default): the tied LM head as stored; TAILOR_DTYPE_F16 or
                          TAILOR_DTYPE_BF16: the int4 copy the GPU's quantize_head makes in that
                          compute dtype (tailor_w4a16_quantize_rows of the embedding, group
                          tailor_w4a16_group_for(hidden), scales in that dtype), dequantized to
                          fp32: the reference for --quantize-head */
    int quantize;      /* 0 (default): the linears as stored; TAILOR_DTYPE_F16 or
                          TAILOR_DTYPE_BF16: every 16-bit q/k/v/o/gate/up/down that the GPU's
                          --quantize w4a16 turns into int4 (group 128; the int4 ones and those
                          whose shape has no group-128 layout stay) as tailor_w4a16_quantize_rows
                          makes it with scales in that dtype, dequantized to fp32 (4 bytes a
                          weight more on the host): the reference for --quantize w4a16 */
} tailor_gemma4_cpu_opts;

/* Creates a run state for m (m must outlive it). TAILOR_ERR_UNSUPPORTED for a MoE model,
 * TAILOR_ERR_MISUSE for max_tokens < 1, TAILOR_ERR_NOMEM. Free with tailor_gemma4_cpu_destroy. */
tailor_status tailor_gemma4_cpu_create(tailor_ctx *ctx, const tailor_gemma4 *m,
                                       const tailor_gemma4_cpu_opts *opts,
                                       tailor_gemma4_cpu **out);

/* Frees the state; NULL is fine. */
void tailor_gemma4_cpu_destroy(tailor_gemma4_cpu *st);

/* Forgets every cached position (the next step is position 0). */
void tailor_gemma4_cpu_reset(tailor_gemma4_cpu *st);

/* Number of positions processed since the last reset. */
int tailor_gemma4_cpu_pos(const tailor_gemma4_cpu *st);

/* Runs one token at the next position and points *logits at the vocab soft-capped logits
 * (owned by st, valid until the next step). TAILOR_ERR_MISUSE for a token outside the
 * vocabulary or when max_tokens positions are used up; TAILOR_ERR_VERIFY when a logit is inf or
 * NaN (non-finite weights or activations), the position not counted. */
tailor_status tailor_gemma4_cpu_step(tailor_ctx *ctx, tailor_gemma4_cpu *st, int32_t token,
                                     const float **logits);

/* ---- pieces exposed for tests -------------------------------------------------------------- */

/* RoPE inverse frequencies of layer `layer` into inv_freq[head_dim/2] (zeros for the pairs
 * proportional RoPE leaves unrotated). */
void tailor_gemma4_rope_freqs(const tailor_gemma4_config *cfg, int layer, float *inv_freq);

/* Rotates one head vector x[d] in place at position pos (NeoX pairing j <-> j + d/2). */
void tailor_gemma4_rope_apply(const float *inv_freq, int d, int pos, float *x);

/* ---- the GPU forward (models/gemma4/gpu.c) ------------------------------------------------- */

struct tailor_gpu;
struct tailor_kernels;
struct tailor_op_kernel;

/* A model resident on one GPU with its KV cache, activations and decode graph. */
typedef struct tailor_gemma4_gpu tailor_gemma4_gpu;

/* tailor_gemma4_gpu_opts.seams */
enum {
    TAILOR_GEMMA4_SEAMS_DEFAULT = 0, /* PROLOGUE before a 16-bit GEMV, KERNEL before an int4 one
                                        (w4a16_pro measured no faster; docs/perf/model.md) */
    TAILOR_GEMMA4_SEAMS_KERNEL,   /* residual_norm kernels after the projections */
    TAILOR_GEMMA4_SEAMS_PROLOGUE, /* in the next GEMV, which every block begins with it
                                     (matmul_pro, w4a16_pro): 105 fewer launches per E2B token */
    TAILOR_GEMMA4_SEAMS_EPILOGUE, /* in the projection's last block (matmul_seam, w4a16_seam) */
    TAILOR_GEMMA4_SEAMS_MIXED     /* PROLOGUE before a 16-bit GEMV, EPILOGUE before an int4 one
                                     (no seam kernel in the decode step) */
};

typedef struct tailor_gemma4_gpu_opts {
    int max_tokens;   /* positions the KV cache holds (prompt + generation), >= 1 */
    int dtype;        /* compute dtype: TAILOR_DTYPE_F16 or TAILOR_DTYPE_BF16 (op.h); -1 (or 0):
                         follow the device (fp16 below sm_80, else bf16) */
    int quantize;     /* 1: dense q/k/v/o/gate/up/down become W4A16 on load (group 128,
                         symmetric round-to-nearest); embeddings, LM head and PLE stay 16-bit */
    int quantize_head; /* 1: the LM head reads an int4 copy of the tied embedding (symmetric
                          round-to-nearest as --quantize, group tailor_w4a16_group_for(hidden):
                          128 for Gemma 4; lookups keep the 16-bit rows): a quarter of the
                          head's bytes per token, its logits no longer those of the 16-bit
                          weights (tailor_gemma4_cpu_opts.quantize_head is its reference) */
    int all_logits;   /* 1: prefill returns the logits of every prompt position (--dump-logits,
                         tests); 0: only the last one's */
    int chunk;        /* prefill rows per chunk (0: min(sliding window, 512); never above W) */
    int no_graph;     /* 1: decode steps launch kernel by kernel (debugging) */
    int no_pdl;       /* 1: no programmatic dependent launch (sm_90+; for comparisons) */
    int separate_gating; /* 1: decode runs the MLP and PLE gating as gelu_gate kernels after
                            their GEMVs; 0 (default): in the 16-bit GEMV's epilogue (matmul_glu,
                            70 fewer launches per E2B token) */
    int separate_q_prep; /* 1: decode prepares q in a qk_norm_rope launch on every layer; 0
                            (default): on the layers that store K and V it is folded into that
                            launch (gemma4_kv_store q_heads, 15 fewer launches per E2B token) */
    int attention_q_prep; /* 1: decode attention normalises and rotates the raw q itself
                             (attention_decode prep=1, 35 fewer launches per E2B token); 0
                             (default): a qk_norm_rope kernel before it, which measured faster
                             (docs/perf/attention.md, session 5) */
    int seams;        /* where decode runs the layer seams (residual add and norms after o,
                         down and the PLE projection): a TAILOR_GEMMA4_SEAMS_* value, 0 = the
                         default (docs/perf/model.md has the same-run comparison) */
    int fused_mlp;    /* 1: decode runs an int4 MLP as one w4a16_mlp launch; 0 (default): two
                         GEMVs (w4a16_glu, then w4a16_matmul of h), which measured faster
                         (docs/perf/model.md, session 35) */
    int ple_host;     /* 1: the PLE table stays on the host (a row uploaded per token, decode
                         steps one at a time); 0: on the device when it fits (the log says) */
    int act_order;    /* random weights with quantize only (bench model --act-order): every
                         int4 linear is stored in an activation order (a pseudo-random order of
                         its k columns, one per k, so stacks stay whole) and its input gathered
                         before the product, as a checkpoint's weight_g_idx runs; ignored with
                         a checkpoint, whose g_idx decides */
    const char *knockout; /* timing experiments only (bench model --knockout): launches of these
                             ops are skipped, so every output is meaningless and the inf/NaN
                             check is off. Items "OP" or "OP:k=v,k=v" (only launches whose
                             shape has those values), separated by ';'; NULL: none. The string
                             is copied at create. */
} tailor_gemma4_gpu_opts;

/* What a created model holds (for logs and benchmarks). */
typedef struct tailor_gemma4_gpu_info {
    int dtype;                 /* tailor_dtype of the compute */
    int w4a16;                 /* linears are int4 (checkpoint or --quantize) */
    int lm_int4;               /* the LM head reads an int4 copy of the embedding (quantize_head) */
    size_t weight_bytes;       /* device bytes of weights */
    size_t weight_bytes_token; /* bytes a decode step reads (weights less the unread embedding
                                  rows: the embedding is read whole as the LM head) */
    size_t kv_bytes;           /* KV cache and positions */
    size_t act_bytes;          /* activations and scratch */
    size_t ple_bytes;          /* the PLE table on the device (0: on the host) */
    int greedy_queued;         /* tailor_gemma4_gpu_greedy queues steps ahead (else one at a time) */
    int kernels_cached, kernels_tuned; /* after the warm-up */
    int graph;                 /* 1: the decode step runs as a CUDA graph */
    int chunk;
} tailor_gemma4_gpu_info;

/* A GPU model whose max_tokens is at most this tunes its full layers' decode attention at this
 * cache length, a longer one at 4096: short runs get a kernel chosen for a few hundred keys. */
#define TAILOR_GEMMA4_SHORT_CONTEXT 1024

/* One kernel a GPU model runs: the op and the shape it is tuned at (the cache key's shape). */
typedef struct tailor_gemma4_kernel_use {
    char op[64];
    char shape[256];   /* "k=1536,m=1,n=2048" (tailor_shape_format) */
} tailor_gemma4_kernel_use;

/* Every (op, tuned shape) a model created with these opts launches, found without a GPU by a
 * dry pass of the same code (nothing allocated or launched): the decode step, a prefill chunk
 * without and with cached history, and, without a checkpoint, the random-weight fills. m (may
 * be NULL) decides which matrices are int4; without it opts->quantize does. Tuning this list
 * (tailor tune --model/--preset) is what makes a later start compile nothing. *out is malloc'd
 * (free()); the compute dtype is not part of the list. */
tailor_status tailor_gemma4_gpu_kernels(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                        const tailor_gemma4 *m,
                                        const tailor_gemma4_gpu_opts *opts,
                                        tailor_gemma4_kernel_use **out, int *n);

/* Device bytes a GPU model created with these opts takes, found without a GPU by the same dry
 * pass: weights, KV cache (at opts->max_tokens positions) and activations, each rounded as
 * allocated; and the PLE table, which goes on the device only where it fits beside the rest
 * (else it stays on the host: ple_table counts it either way, 0 without PLE). m and opts as for
 * tailor_gemma4_gpu_kernels; opts->dtype 0 means 16-bit. */
typedef struct tailor_gemma4_gpu_memory {
    size_t weights, kv, acts, ple_table;
} tailor_gemma4_gpu_memory;

tailor_status tailor_gemma4_gpu_memory_need(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                            const tailor_gemma4 *m,
                                            const tailor_gemma4_gpu_opts *opts,
                                            tailor_gemma4_gpu_memory *out);

/* Whether the model fits `free_bytes` of a device named `device`: weights, KV cache and
 * activations (the PLE table may stay on the host, so it is not required). OK, or
 * TAILOR_ERR_BUDGET with one sentence giving the sizes and what would fit: the W4A16 load with
 * the int4 head for a 16-bit model, fewer positions where the KV cache is the larger part.
 * tailor_gemma4_gpu_create checks this against the live free memory before uploading a byte. */
tailor_status tailor_gemma4_gpu_memory_check(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                             const tailor_gemma4 *m,
                                             const tailor_gemma4_gpu_opts *opts,
                                             size_t free_bytes, const char *device);

/* Uploads checkpoint m (it must outlive the result: when the PLE table stays on the host, rows
 * are read per token from its mapping; see opts.ple_host) to gpu, using tuned kernels from `ks` (tuned on demand if
 * the set allows), allocates the KV cache and activations, runs one warm-up decode step and
 * captures the decode step as a CUDA graph. Logs the device, capability, compute dtype and how
 * many kernels came from the cache. TAILOR_ERR_UNSUPPORTED for a MoE model or a W4A16 layout the
 * kernels cannot read (g_idx activation order); TAILOR_ERR_CUDA when memory runs out. Free with
 * tailor_gemma4_gpu_destroy. */
tailor_status tailor_gemma4_gpu_create(tailor_ctx *ctx, const tailor_gemma4 *m,
                                       struct tailor_gpu *gpu, struct tailor_kernels *ks,
                                       const tailor_gemma4_gpu_opts *opts,
                                       tailor_gemma4_gpu **out);

/* The same with pseudo-random weights of cfg's shapes generated on the GPU (benchmarks: no host
 * copy of the weights; a PLE table kept on the host is a pool of rows made at load). */
tailor_status tailor_gemma4_gpu_create_random(tailor_ctx *ctx, const tailor_gemma4_config *cfg,
                                              struct tailor_gpu *gpu, struct tailor_kernels *ks,
                                              const tailor_gemma4_gpu_opts *opts, uint64_t seed,
                                              tailor_gemma4_gpu **out);

/* Frees device memory, graph and host buffers; NULL is fine. */
void tailor_gemma4_gpu_destroy(tailor_gemma4_gpu *g);

/* Fills *info. */
void tailor_gemma4_gpu_get_info(const tailor_gemma4_gpu *g, tailor_gemma4_gpu_info *info);

/* Forgets every cached position (the next token is position 0). */
void tailor_gemma4_gpu_reset(tailor_gemma4_gpu *g);

/* Positions processed since the last reset. */
int tailor_gemma4_gpu_pos(const tailor_gemma4_gpu *g);

/* Runs n prompt tokens (in chunks) at the next positions. logits (may be NULL) receives the
 * soft-capped fp32 logits: [n, vocab] with all_logits, else [vocab] of the last position.
 * *next (may be NULL) receives the greedy next token. TAILOR_ERR_VERIFY when the activations
 * hold inf or NaN (the logits are then all NaN); TAILOR_ERR_MISUSE for a token outside the
 * vocabulary or more positions than max_tokens. */
tailor_status tailor_gemma4_gpu_prefill(tailor_ctx *ctx, tailor_gemma4_gpu *g, const int32_t *ids,
                                        int n, float *logits, int32_t *next);

/* One decode step for `token` at the next position (the captured graph). logits (may be NULL:
 * then only the argmax is read back) receives [vocab] soft-capped fp32 logits; *next the greedy
 * token. Errors as prefill. */
tailor_status tailor_gemma4_gpu_step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                     float *logits, int32_t *next);

/* The candidates a sampled decode step leaves on the device and downloads instead of the whole
 * row of logits: the row's best TAILOR_GEMMA4_TOP_K soft-capped logits (the op "topk"), enough
 * for tailor_sampler_next_top whenever top_k < this (tailor_sampler_top_covers) and the
 * top_k-th best's ties end inside the list (else tailor_gemma4_gpu_logits reads the row). Twice
 * Gemma's top_k of 64, so that its ties rarely run past the list. */
#define TAILOR_GEMMA4_TOP_K 128

/* The last processed position's candidates (after a prefill or a step): vals[i] the soft-capped
 * logit of ids[i], best first (larger value, lower id among equals, NaN never; id -1 ends the
 * list), TAILOR_GEMMA4_TOP_K of each. Consumes no position. TAILOR_ERR_MISUSE before any
 * position, and after tailor_gemma4_gpu_greedy stopped early (a step queued past the stop
 * replaced those logits). The op is loaded (or tuned) at its first use. */
tailor_status tailor_gemma4_gpu_top(tailor_ctx *ctx, tailor_gemma4_gpu *g, float *vals,
                                    int32_t *ids);

/* The last processed position's [vocab] soft-capped fp32 logits (after a prefill or a step),
 * downloaded into logits: what a sampled step reads when its candidates cannot decide
 * (TAILOR_SAMPLER_UNDECIDED). Consumes no position. Errors as tailor_gemma4_gpu_top. */
tailor_status tailor_gemma4_gpu_logits(tailor_ctx *ctx, tailor_gemma4_gpu *g, float *logits);

/* A sampled step's draw: from the last position's TAILOR_GEMMA4_TOP_K candidates vals/ids (as
 * tailor_gemma4_gpu_top or _step_top left them) by tailor_sampler_next_top, or, where they cannot
 * decide (TAILOR_SAMPLER_UNDECIDED), from the whole row read into row[vocab]
 * (tailor_gemma4_gpu_logits) by tailor_sampler_next. *read_row says which. The same id, seed for
 * seed, as tailor_sampler_next on the row. Errors as tailor_gemma4_gpu_logits. */
struct tailor_sampler;
tailor_status tailor_gemma4_gpu_draw(tailor_ctx *ctx, tailor_gemma4_gpu *g,
                                     struct tailor_sampler *smp, const float *vals,
                                     const int32_t *ids, float *row, int32_t *id, int *read_row);

/* tailor_gemma4_gpu_step that downloads the step's candidates (as tailor_gemma4_gpu_top) in the
 * same round trip instead of its logits: a sampled decode step. Errors as prefill. */
tailor_status tailor_gemma4_gpu_step_top(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                         float *vals, int32_t *ids, int32_t *next);

/* Called with each id a greedy decode chose, in order, as soon as the host has it; nonzero stops
 * the decode after that id. */
typedef int (*tailor_gemma4_id_fn)(void *arg, int32_t id);

/* Up to n greedy decode steps, the first for `token` at the next position, each next one for the
 * id the step before chose: out[i] (out may be NULL) is step i's argmax. With the PLE table on
 * the device each step's argmax feeds the next on the device (softcap_argmax feed=1), so steps
 * are queued ahead of the host reading their ids (two at once) and the GPU does not wait for
 * the host between tokens; otherwise (and under a knockout) the steps run one at a time
 * (tailor_gemma4_gpu_step; tailor_gemma4_gpu_info.greedy_queued says which). on_id
 * (may be NULL) sees each id as it is read; nonzero stops there. *kept: the steps kept (their
 * positions consumed); a step queued past a stop is finished and forgotten (its position is
 * rewritten by the next input). Errors as prefill; also TAILOR_ERR_MISUSE when n steps would
 * exceed max_tokens. */
tailor_status tailor_gemma4_gpu_greedy(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token, int n,
                                       int32_t *out, int *kept, tailor_gemma4_id_fn on_id,
                                       void *arg);

/* One kernel's share of a profiled decode step: op, the shape it ran, the kernel (of the set the
 * model was created with), launches and total time. */
typedef struct tailor_gemma4_gpu_prof {
    char op[32];
    char shape[160];
    struct tailor_op_kernel *kernel;
    int calls;
    double us;
} tailor_gemma4_gpu_prof;

/* Profiles one decode step for `token` at the next position, kernel by kernel (each launch
 * bracketed by events and waited for, so the sum exceeds a graph step by the launch gaps):
 * up to cap entries, one per (op, shape), in the order first launched; *n gets the count and
 * *total_us the sum. The position is consumed as by tailor_gemma4_gpu_step. */
tailor_status tailor_gemma4_gpu_profile_step(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                             tailor_gemma4_gpu_prof *out, int cap, int *n,
                                             double *total_us);

/* Captures the decode step again (after the kernel set changed what a kernel runs:
 * tailor_op_kernel_use_try), with one eager warm-up step first; forgets every cached position as
 * tailor_gemma4_gpu_reset. A model created without a graph runs the warm-up step only; one
 * created with a graph fails here if the capture does (so timings never compare a graph with
 * kernel-by-kernel steps). Until then, tailor_gemma4_gpu_step runs kernel by kernel whenever the
 * kernel set changed since the capture (tailor_kernels_generation), never a stale graph. */
tailor_status tailor_gemma4_gpu_recapture(tailor_ctx *ctx, tailor_gemma4_gpu *g);

/* Debugging aid (TAILOR_DEBUG_LAYERS=1 in `tailor run` and the GPU test): for every l, runs
 * `token` at position 0 through layers 0..l on the GPU and through the CPU reference truncated
 * the same way, and logs the largest logit difference per depth; *first_bad gets the first depth
 * whose difference exceeds tol (-1 if none). Resets g. Needs the checkpoint (not random). */
tailor_status tailor_gemma4_gpu_debug_layers(tailor_ctx *ctx, tailor_gemma4_gpu *g, int32_t token,
                                             double tol, int *first_bad);

#endif
