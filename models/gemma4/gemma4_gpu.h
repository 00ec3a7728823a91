/* gemma4_gpu.h — private to models/gemma4: the GPU run state shared by gpu.c (the passes) and
 * gpu_weights.c (creation, weights, buffers). */
#ifndef TAILOR_GEMMA4_GPU_H
#define TAILOR_GEMMA4_GPU_H

#include "cuda.h"
#include "gemma4.h"
#include "gemma4_internal.h"
#include "kernels.h"
#include "op.h"

/* A [n, k] weight on the device: dense (w) or W4A16 in the kernel layout (qw, sc, zs). */
typedef struct g4g_mat {
    int n, k;
    int int4, group, zp;
    int s_ld; /* int4 part of a stack: its scales' row stride (the stack's n); 0: its own */
    CUdeviceptr w, qw, sc, zs;
    /* int4 stored in activation order (a checkpoint's weight_g_idx; runtime/w4a16.h,
     * tailor_w4a16_order_from_groups): int32 [k], column j is stored column order[j], and the
     * product reads its input gathered by it (op gather_cols, into g->ob); 0 otherwise */
    CUdeviceptr order;
} g4g_mat;

/* 1 when m holds a matrix (dense or int4). */
static inline int g4g_mat_present(const g4g_mat *m) { return m->w != 0 || m->qw != 0; }

typedef struct g4g_layer {
    CUdeviceptr input_ln, post_attn_ln, pre_ff_ln, post_ff_ln, post_ple_ln; /* [H] dtype */
    CUdeviceptr q_norm, k_norm; /* [head_dim] dtype (k_norm 0 on KV-shared layers) */
    CUdeviceptr scalar;         /* [1] fp32 layer_scalar */
    CUdeviceptr inv_freq;       /* [head_dim / 2] fp32 */
    g4g_mat q, k, v, o, gate, up, down, ple_gate, ple_proj;
    /* q|k|v and gate|up stacked along n (q, k, v, gate, up are views into it; int4 parts read
     * their scales with the stack's row stride): decode runs each stack as one matrix; absent
     * (g4g_mat_present 0) when the parts land in different forms */
    g4g_mat qkv, gu;
    /* KV cache, owning layers only: [kv_heads, slots, head_dim] dtype, positions [slots] i32 */
    CUdeviceptr kc, vc, positions;
    int slots;
    /* prefill: history + chunk rows [rows, kv_heads, head_dim] (own, or a shared scratch) */
    CUdeviceptr klin, vlin;
} g4g_layer;

#define G4G_MAX_ALLOCS 4096
#define G4G_PLE_POOL 256 /* random weights: distinct synthetic PLE rows (ple_pool) */
/* Greedy decode (tailor_gemma4_gpu_greedy): steps queued at once. Two keep the GPU busy (the
 * host reads step k while k + 1 runs) and are the most that is safe: a step queued past a stop
 * writes the K/V of the position the next input rewrites anyway; a second one would overwrite a
 * ring slot that position's query still sees. */
#define G4G_QUEUE 2
#define G4G_PLE_RESERVE ((size_t)512 << 20) /* device memory left free beside the PLE table,
                                                besides the tuning room (gpu_weights.c) */

/* The cache length full layers' kernels are tuned at, whatever max_tokens is (the split count
 * follows the actual length at launch). Their decode attention is tuned at G4G_DECODE_KV_SHORT
 * when max_tokens fits it (a latency-bound launch of a few hundred keys, where the cluster merge
 * of few blocks wins; tailor run's default and most chats), else at G4G_DECODE_KV. */
#define G4G_DECODE_KV 4096
#define G4G_DECODE_KV_SHORT TAILOR_GEMMA4_SHORT_CONTEXT

struct tailor_gemma4_gpu {
    tailor_gpu *gpu;
    tailor_kernels *ks;
    const tailor_gemma4 *model; /* NULL: random weights */
    tailor_gemma4_config cfg;
    tailor_dtype dt;
    size_t es;                  /* bytes per dtype element */
    int max_tokens, chunk, all_logits, logit_rows, quantize;
    int quantize_head;          /* opts.quantize_head: the LM head is `lm`, int4 */
    g4g_mat lm;                 /* the int4 LM head (an int4 copy of the embedding), or empty */
    int glu_epilogue;           /* !opts.separate_gating: decode gating in the GEMV epilogue */
    int q_prep_in_attention;    /* opts.attention_q_prep: decode attention prepares raw q */
    int mlp_fused;              /* opts.fused_mlp: decode runs an int4 MLP as one w4a16_mlp */
    int act_order;              /* opts.act_order: random int4 linears in activation order */
    int q_prep_in_kv_store;     /* !opts.separate_q_prep: decode folds q's prep into K/V's store */
    char knockout[256];         /* opts.knockout ("" = none): ops whose launches are skipped */
    int seams;                  /* opts.seams: where decode seams go (gpu.c seam_at) */
    struct {                    /* a decode seam owed to the next GEMV's prologue (matmul_pro) */
        int mode;
        CUdeviceptr t, w_post, w_next, scalar;
    } owed;
    int owing;
    int tchunk;                 /* the width prefill kernels are tuned at: chunk before the
                                   max_tokens cap, so that every run shares the tuned shapes */
    int pos;                    /* positions processed */
    uint32_t seed;              /* random weights: next fill stream */
    g4g_layer *layers;
    CUdeviceptr embed;          /* [vocab, H] dtype, also the LM head */
    CUdeviceptr final_norm, ple_norm;
    g4g_mat ple_model_proj;     /* [L*P, H] */
    /* activations, chunk rows each */
    CUdeviceptr x;              /* [C, H] fp32 residual stream: x_main, or during a decode
                                   pass with seam prologues x_main and x_spare by turns */
    CUdeviceptr x_main, x_spare, x_next; /* x_spare [1, H]; x_next the other of the pair */
    CUdeviceptr y, h0, tb;      /* [C, H] dtype: normed input, scaled embedding, sublayer output */
    CUdeviceptr qb, att;        /* [C, heads * max head_dim] */
    CUdeviceptr kb, vb;         /* [C, max kv_heads * head_dim] raw K, V */
    CUdeviceptr gb, ub, hb;     /* [C, max inter] */
    CUdeviceptr dec;            /* [max(q|k|v, 2 inter)] decode: a stack's one-row output */
    CUdeviceptr ob;             /* [C, order_k] the input of a matrix in activation order,
                                   gathered (0 when no matrix has an order) */
    int order_k;                /* the widest k of a matrix in activation order, or 0 */
    int ordered;                /* matrices in activation order (the load's log line) */
    struct {                    /* what g->ob holds: src's rows gathered by order (src 0:
                                   nothing reusable; gpu.c ordered_input, g4g_run) */
        CUdeviceptr src, order;
        int rows;
    } gathered;
    CUdeviceptr pg, ph;         /* [C, P] PLE gate, gated */
    CUdeviceptr pc, pe, pli;    /* [C, L*P] context projection, table rows, per-layer inputs */
    CUdeviceptr logits;         /* [logit_rows, vocab] dtype */
    CUdeviceptr capped;         /* [logit_rows, vocab] fp32 */
    CUdeviceptr ids, tok, posb; /* [C] int32 */
    CUdeviceptr top_vals, top_ids; /* [TAILOR_GEMMA4_TOP_K] fp32, int32: the op topk's output */
    int top_row;                /* the row of capped that holds the last position's logits */
    /* pinned host inputs and outputs */
    int32_t *h_tok, *h_pos, *h_ids;
    int32_t *h_queue;           /* [G4G_QUEUE] greedy decode: each queued step's argmax */
    float *h_top_vals;          /* [TAILOR_GEMMA4_TOP_K] the candidates' logits and ids */
    int32_t *h_top_ids;
    tailor_gpu_mark marks[G4G_QUEUE]; /* greedy decode: each queued step's download done */
    unsigned char *h_pe;        /* [C, L*P] dtype */
    /* the PLE table [vocab, L*P] dtype on the device (gpu_weights.c place_ple), or 0: on the
     * host, a row staged per token from the checkpoint's mapping or from ple_pool */
    CUdeviceptr ple_table;
    uint16_t *ple_pool;         /* random weights: G4G_PLE_POOL synthetic PLE rows [., L*P] dtype */
    tailor_gpu_graph graph;
    unsigned graph_generation; /* the kernel set's generation it was captured at */
    int want_graph;            /* not --no-graph: recapture must give a graph again */
    CUdeviceptr allocs[G4G_MAX_ALLOCS];
    int nallocs;
    size_t weight_bytes, kv_bytes, act_bytes, ple_bytes;
    int kernels_cached, kernels_tuned;
    /* tailor_gemma4_gpu_kernels: a dry model. Nothing is allocated (dalloc hands out fake
     * addresses), uploaded or launched: g4g_run records (op, tuned shape) into rec instead */
    int dry;
    const tailor_gemma4 *like;  /* dry: the checkpoint whose matrices it mirrors, or NULL */
    CUdeviceptr dry_next;
    tailor_gemma4_kernel_use *rec;
    int rec_n, rec_cap;
    /* tailor_gemma4_gpu_profile_step: per-launch timing while prof is set */
    tailor_gemma4_gpu_prof *prof;
    int prof_cap, prof_n;
    tailor_gpu_timer prof_timer;
};

/* gpu.c */
void g4g_put(tailor_shape *s, const char *key, long long v);
tailor_status g4g_run(tailor_ctx *ctx, tailor_gemma4_gpu *g, const char *op,
                      const tailor_shape *tuned, const tailor_shape *actual,
                      const tailor_binding *b, int nb);
tailor_status g4g_pass(tailor_ctx *ctx, tailor_gemma4_gpu *g, int T, int p0, int decode,
                       int n_layers, int all_rows);
tailor_status g4g_warm_up(tailor_ctx *ctx, tailor_gemma4_gpu *g);
/* 1 when tailor_gemma4_gpu_greedy queues steps ahead: the PLE table (if any) on the device and no
 * knockout (a knocked-out softcap_argmax would not feed the next step). */
int g4g_greedy_queues(const tailor_gemma4_gpu *g);
/* Queues the op topk over row `row` of capped into top_vals / top_ids (sampled decoding). */
tailor_status g4g_top(tailor_ctx *ctx, tailor_gemma4_gpu *g, int row);

/* gpu_weights.c: the PLE row of token id in the compute dtype into dst (L*P values), from the
 * checkpoint's table or, for random weights, from ple_pool; g4g_ple_pool_make makes that pool:
 * G4G_PLE_POOL synthetic rows made once, so that a token's row costs a copy, as a checkpoint's
 * does, not ~20 us of hashing per token on the step's critical path. */
void g4g_ple_row(const tailor_gemma4_gpu *g, int32_t id, unsigned char *dst);
tailor_status g4g_ple_pool_make(tailor_ctx *ctx, tailor_gemma4_gpu *g);

#endif
