/* gemma4_internal.h — private to models/gemma4: the bound weights shared by the loader and the
 * reference forward. */
#ifndef TAILOR_GEMMA4_INTERNAL_H
#define TAILOR_GEMMA4_INTERNAL_H

#include "gemma4.h"
#include "op.h"
#include "safetensors.h"
#include "w4a16.h"

/* The largest count or size a config field, or a product of them (heads x head_dim, layers x
 * PLE width), may be: every such value is an int, and this keeps their sums and products of two
 * inside one. */
#define G4_DIM_MAX 1000000000

/* The most a checkpoint's text file (config.json, generation_config.json, the chat template)
 * may hold: read whole with tailor_read_file. */
#define G4_MAX_TEXT ((size_t)64 << 20)

/* --quantize w4a16's form of a 16-bit [n, k] linear (q/k/v/o/gate/up/down): symmetric int4 in
 * groups of 128. 1 with *lay set when the shape has that layout (the linear is quantized: the GPU
 * loader and the CPU reference's opts.quantize decide by this alone), else 0 (it stays 16-bit). */
static inline int g4_quantize_layout(int n, int k, tailor_w4a16_layout *lay)
{
    return tailor_w4a16_layout_init(NULL, n, k, 128, 0, lay) == TAILOR_OK;
}

/* A [n, k] matrix left in the mapped file: dense (F32/F16/BF16) or compressed-tensors int4. */
typedef struct g4_mat {
    int n, k;
    int int4;                         /* 0: dense `w`; 1: packed/scale(/zp/g_idx) */
    const tailor_st_tensor *w;        /* dense [n, k] */
    const tailor_st_tensor *packed;   /* int32 [n, ceil(k/8)] */
    const tailor_st_tensor *scale;    /* F32/F16/BF16 [n, groups] */
    const tailor_st_tensor *zp;       /* int32 [ceil(n/8), groups] or NULL (symmetric) */
    const tailor_st_tensor *g_idx;    /* int32/int64 [k] or NULL */
    int group, groups;                /* columns per group (without g_idx), groups per row */
} g4_mat;

/* One layer's weights. Vectors are fp32 copies (small); matrices stay mapped. */
typedef struct g4_layer_w {
    const float *input_ln, *post_attn_ln, *pre_ff_ln, *post_ff_ln; /* [H] */
    const float *q_norm;     /* [head_dim] */
    const float *k_norm;     /* [head_dim], NULL on KV-shared layers */
    const float *post_ple_ln; /* [H], NULL without PLE */
    float layer_scalar;
    g4_mat q, k, v, o;       /* k, v unused on shared layers; v unused when !has_v_proj */
    g4_mat gate, up, down;
    g4_mat ple_gate, ple_proj; /* [P, H], [H, P] */
} g4_layer_w;

struct tailor_gemma4 {
    tailor_gemma4_config cfg;
    tailor_st *st;
    char dir[512];
    const tailor_st_tensor *embed;     /* [vocab, H], also the tied LM head */
    const tailor_st_tensor *ple_embed; /* [ple_vocab, L*P] or NULL */
    g4_mat ple_model_proj;             /* [L*P, H] */
    const float *final_norm;           /* [H] */
    const float *ple_proj_norm;        /* [P] */
    g4_layer_w *layers;                /* [L] */
    float *arena;                      /* every fp32 vector above */
    size_t arena_used, arena_cap;
    int w4a16;
    int max_k;                         /* widest k of any int4 matrix (dequant scratch) */
};

/* The tailor_dtype of a safetensors float dtype (F32, F16, BF16); 0 for any other. */
static inline int g4_st_dtype(tailor_st_dtype d, tailor_dtype *out)
{
    switch (d) {
    case TAILOR_ST_F32: *out = TAILOR_DTYPE_F32; return 1;
    case TAILOR_ST_F16: *out = TAILOR_DTYPE_F16; return 1;
    case TAILOR_ST_BF16: *out = TAILOR_DTYPE_BF16; return 1;
    default: return 0;
    }
}

/* Derives the per-layer plan from cfg scalars, cfg->layer[i].full and optional per-layer
 * overrides (0 = none) of head_dim and KV heads (config.c). Failures name `file` and the config
 * key a value came from, `prefix` ("" or "text_config.") before it. */
tailor_status g4_derive_plan(tailor_ctx *ctx, const char *file, const char *prefix,
                             tailor_gemma4_config *cfg, const int *hd_override,
                             const int *kv_override);

/* y[n] = W x[k] in fp32; scratch holds k floats (used for int4 rows). (forward.c) */
void g4_matvec(const g4_mat *m, const float *x, float *y, float *scratch);

/* Row r of W as fp32 into out[k]. (forward.c) */
void g4_mat_row(const g4_mat *m, int r, float *out);

#endif
