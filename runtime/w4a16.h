/* w4a16.h — int4 weights with 16-bit group scales: the compressed-tensors `pack-quantized`
 * layout as stored in checkpoints, and the one kernel layout every w4a16 template reads.
 *
 * Checkpoint layout (GEMMA4.md §6), for a weight W[N, K] quantized in groups of `group` along K:
 *   packed  int32 [N, ceil(K/8)]   column 8c+j of row n in bits [4j, 4j+3] of word c, as q + 8
 *   scales  [N, K/group]           float (bf16, fp16 or fp32 in the file)
 *   zeros   int32 [ceil(N/8), K/group]  (asymmetric only) row 8r+j of group g in bits [4j, 4j+3]
 *                                  of word (r, g), as zp + 8
 *   W[n, k] = (q[n, k] - zp[n, k/group]) * scale[n, k/group]
 *
 * Kernel layout (what tailor_w4a16_repack writes; templates/include/w4a16_common.cuh reads):
 *   qweight uint32 [N, K/8]: row n, 32-column chunk c = words 4c..4c+3. Word t (0..3) of a chunk
 *       holds the 8 columns a tensor-core thread with t = lane%4 needs for two k16 steps, as four
 *       pairs; pair p (0..3) covers columns 32c + 2t + 8p and 32c + 2t + 8p + 1, the first in
 *       nibble p, the second in nibble p+4. Nibbles store u = q + 8 (0..15) as in the checkpoint.
 *       So (word >> 4p) & 0x000f000f isolates pair p as two 16-bit lanes (the magic-number trick).
 *   scales  T [G, Np]  (T = the activation dtype, G = K/group, Np = N rounded up to 16, padding 0)
 *   zeros   uint8 [G, Np] = zp + 8 (0..15) (asymmetric only; padding 8)
 *   (row stride Np, or a larger `ld` for one part of a stack: its columns of the stack's [G, ld])
 * Restrictions: K % 32 == 0, group % 32 == 0 and K % group == 0 (every Gemma 4 linear qualifies;
 * partial last groups, as 26B's K=2112 with group 128 would need, are refused). */
#ifndef TAILOR_W4A16_H
#define TAILOR_W4A16_H

#include <stddef.h>
#include <stdint.h>

#include "op.h" /* tailor_dtype */
#include "tailor.h"

/* Sizes of one weight in both layouts. */
typedef struct tailor_w4a16_layout {
    int n, k, group;      /* W is [n, k]; group columns share a scale */
    int has_zp;           /* 1: asymmetric (zero points stored) */
    int groups;           /* k / group */
    int n_pad;            /* n rounded up to 16 */
    int ld;               /* row stride of scales and zeros: n_pad, or more for one part of
                             several matrices stacked along n (tailor_w4a16_layout_set_ld) */
    size_t ct_words;      /* checkpoint: int32 words of `packed` (n * ceil(k/8)) */
    size_t ct_zero_words; /* checkpoint: int32 words of `zeros` (ceil(n/8) * groups), 0 if none */
    size_t qweight_words; /* kernel: uint32 words of qweight (n * k / 8) */
    size_t scale_count;   /* kernel: elements of scales (groups * n_pad) */
    size_t zero_count;    /* kernel: bytes of zeros (groups * n_pad), 0 if symmetric */
} tailor_w4a16_layout;

/* Checks n, k, group against the restrictions above and fills *out. TAILOR_ERR_UNSUPPORTED
 * (one sentence naming the value) when they are not met, TAILOR_ERR_MISUSE for non-positive
 * sizes. */
tailor_status tailor_w4a16_layout_init(tailor_ctx *ctx, int n, int k, int group, int has_zp,
                                       tailor_w4a16_layout *out);

/* Makes the row stride of scales and zeros ld (a multiple of 16, at least n_pad), as one part
 * of matrices stacked along n sees them: its scales are columns [c, c + n_pad) of the stack's
 * [G, ld]. scale_count and zero_count then cover [G, ld]. TAILOR_ERR_MISUSE (one sentence)
 * otherwise; *lay unchanged then. */
tailor_status tailor_w4a16_layout_set_ld(tailor_ctx *ctx, tailor_w4a16_layout *lay, int ld);

/* Repacks one checkpoint weight into the kernel layout. packed: [n, ceil(k/8)] int32;
 * scales: [n, groups] of scale_dtype (F32, F16 or BF16); zeros: [ceil(n/8), groups] int32, or
 * NULL when !has_zp. Scales are rounded to out_dtype (F16 or BF16). Writes qweight
 * (qweight_words), scales_out (scale_count of out_dtype) and, if has_zp, zeros_out (zero_count).
 * The caller owns every buffer. Fails with TAILOR_ERR_MISUSE on a bad dtype; never allocates. */
tailor_status tailor_w4a16_repack(tailor_ctx *ctx, const tailor_w4a16_layout *lay,
                                  const int32_t *packed, const void *scales,
                                  tailor_dtype scale_dtype, const int32_t *zeros,
                                  tailor_dtype out_dtype, uint32_t *qweight, void *scales_out,
                                  uint8_t *zeros_out);

/* The same for rows [row0, row0 + rows) only, so that a loader (or a test filler) can stream a
 * large weight through a small buffer: packed, scales and zeros point at the block's first row
 * (zeros at its first 8-row word row), laid out as in the checkpoint with `rows` rows; the
 * outputs are the whole kernel-layout buffers. row0 must be a multiple of 8. The block that
 * ends at row n also writes the padding columns of scales and zeros. */
tailor_status tailor_w4a16_repack_rows(tailor_ctx *ctx, const tailor_w4a16_layout *lay, int row0,
                                       int rows, const int32_t *packed, const void *scales,
                                       tailor_dtype scale_dtype, const int32_t *zeros,
                                       tailor_dtype out_dtype, uint32_t *qweight,
                                       void *scales_out, uint8_t *zeros_out);

/* Dequantizes rows [row0, row0 + rows) of a kernel-layout weight into w[rows, k] (float,
 * caller-owned): w = round_dtype((q - zp) * scale), the value compressed-tensors/HF computes in
 * the scale dtype (dtype = the scales' element type, F16 or BF16). zeros is NULL when !has_zp.
 * TAILOR_ERR_MISUSE on a bad dtype or row range. */
tailor_status tailor_w4a16_dequantize(tailor_ctx *ctx, const tailor_w4a16_layout *lay, int row0,
                                      int rows, const uint32_t *qweight, const void *scales,
                                      tailor_dtype dtype, const uint8_t *zeros, float *w);

/* Packs signed int4 values q[n, k] (-8..7) into the checkpoint layout packed[n, ceil(k/8)]
 * (for tests and synthetic weights). Missing columns of the last word are zero bits. */
void tailor_w4a16_ct_pack(int n, int k, const int8_t *q, int32_t *packed);

/* Packs zero points zp[n, groups] (-8..7) into the checkpoint layout [ceil(n/8), groups]. */
void tailor_w4a16_ct_pack_zeros(int n, int groups, const int8_t *zp, int32_t *zeros);

/* Round-to-nearest symmetric int4 (what --quantize and --quantize-head do) of rows
 * [row0, row0 + rows) of a dense weight w [lay->n, lay->k] (F32, F16 or BF16): per group,
 * scale = max|w| / 7 rounded to out_dtype (F16 or BF16), q = clamp(rint(w / scale), -8, 7)
 * (0 where the scale is 0), into the checkpoint layout of those rows: packed [rows, k/8] and
 * scales [rows, groups] as 16-bit words of out_dtype. Dequantized value: q * scale. */
void tailor_w4a16_quantize_rows(const tailor_w4a16_layout *lay, const void *w, tailor_dtype wd,
                                tailor_dtype out_dtype, int row0, int rows, int32_t *packed,
                                uint16_t *scales);

/* The group size an int4 copy of a weight with k columns gets (--quantize-head): 128, or the
 * largest of 64 and 32 that divides k (small test models); 0 when none does (the weight stays
 * 16-bit). */
int tailor_w4a16_group_for(int k);

/* Activation order (GPTQ's act-order; compressed-tensors `actorder: "group"` stores g_idx[k],
 * the group of every column). When each of the k / group groups holds exactly `group` columns,
 * sorting the columns by group, stably, gives an order in which column j belongs to group
 * j / group, the grouping the kernel layout reads: order[j] is the stored column placed at j.
 * The weight is then stored in that order (tailor_w4a16_order_rows, or tailor_upload_w4a16's
 * `order`) and its activations gathered by it before the product (op gather_cols); the product
 * is unchanged. Returns 1 and fills order[k]; 0 (order unspecified) when a g_idx value is out
 * of range or a group holds another number of columns; -1 when out of memory. */
int tailor_w4a16_order_from_groups(int k, int group, const int32_t *g_idx, int32_t *order);

/* Rows of a checkpoint's packed [rows, k/8] (k % 8 == 0) with their columns reordered: column j
 * of dst is column order[j] of src. Runs on every CPU (tailor_parallel_for) in blocks of rows:
 * ~1.7 ns a column on one core of a 2-core CI machine. */
void tailor_w4a16_order_rows(int rows, int k, const int32_t *order, const int32_t *src,
                             int32_t *dst);

/* Word index and nibble of column k of row n in the kernel's qweight (used by the repacker and
 * by tests): the value sits in bits [4*nibble, 4*nibble+3] of qweight[word]. */
size_t tailor_w4a16_kernel_pos(const tailor_w4a16_layout *lay, int n, int k, int *nibble);

#endif
