/* w4a16.c — repacks compressed-tensors int4 weights into tailor's kernel layout (w4a16.h). */
#include "w4a16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "parallel.h"

tailor_status tailor_w4a16_layout_init(tailor_ctx *ctx, int n, int k, int group, int has_zp,
                                       tailor_w4a16_layout *out)
{
    if (n <= 0 || k <= 0 || group <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16: n=%d, k=%d and group=%d must be positive", n, k, group);
    if (k % 32 != 0)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "w4a16: k=%d is not a multiple of 32 (the kernel layout packs "
                                "32-column chunks)", k);
    if (group % 32 != 0 || k % group != 0)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                                "w4a16: group=%d must be a multiple of 32 that divides k=%d",
                                group, k);
    memset(out, 0, sizeof *out);
    out->n = n;
    out->k = k;
    out->group = group;
    out->has_zp = has_zp != 0;
    out->groups = k / group;
    out->n_pad = (n + 15) / 16 * 16;
    out->ld = out->n_pad;
    out->ct_words = (size_t)n * (size_t)((k + 7) / 8);
    out->ct_zero_words = has_zp ? (size_t)((n + 7) / 8) * (size_t)out->groups : 0;
    out->qweight_words = (size_t)n * (size_t)(k / 8);
    out->scale_count = (size_t)out->groups * (size_t)out->n_pad;
    out->zero_count = has_zp ? out->scale_count : 0;
    return TAILOR_OK;
}

tailor_status tailor_w4a16_layout_set_ld(tailor_ctx *ctx, tailor_w4a16_layout *lay, int ld)
{
    if (ld < lay->n_pad || ld % 16 != 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16: a scale row stride of %d is not a multiple of 16 of at "
                                "least n_pad=%d", ld, lay->n_pad);
    lay->ld = ld;
    lay->scale_count = (size_t)lay->groups * (size_t)ld;
    lay->zero_count = lay->has_zp ? lay->scale_count : 0;
    return TAILOR_OK;
}

size_t tailor_w4a16_kernel_pos(const tailor_w4a16_layout *lay, int n, int k, int *nibble)
{
    int chunk = k / 32, r = k % 32;
    int p = r / 8, t = (r % 8) / 2, h = r % 2;
    *nibble = p + 4 * h;
    return (size_t)n * (size_t)(lay->k / 8) + (size_t)(4 * chunk + t);
}

/* Unsigned nibble (q + 8) of column k of row n in the checkpoint layout. */
static uint32_t ct_nibble(const int32_t *packed, int words_per_row, int n, int k)
{
    uint32_t w = (uint32_t)packed[(size_t)n * (size_t)words_per_row + (size_t)(k / 8)];
    return (w >> (4 * (k % 8))) & 0xfu;
}

static int is_half_dtype(tailor_dtype d) { return d == TAILOR_DTYPE_F16 || d == TAILOR_DTYPE_BF16; }

static float load_float(tailor_dtype d, const void *buf, size_t i)
{
    if (d == TAILOR_DTYPE_F32)
        return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return d == TAILOR_DTYPE_BF16 ? tailor_bf16_to_f32(h) : tailor_f16_to_f32(h);
}

static void store_half(tailor_dtype d, void *buf, size_t i, float v)
{
    ((uint16_t *)buf)[i] = d == TAILOR_DTYPE_BF16 ? tailor_f32_to_bf16(v) : tailor_f32_to_f16(v);
}

/* Moves the nibbles of checkpoint rows [row0, row0 + rows) into their kernel positions. */
static void repack_weight_rows(const tailor_w4a16_layout *lay, int row0, int rows,
                               const int32_t *packed, uint32_t *qw)
{
    int wpr = (lay->k + 7) / 8;
    size_t row_words = (size_t)(lay->k / 8);
    memset(qw + (size_t)row0 * row_words, 0, (size_t)rows * row_words * sizeof *qw);
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < lay->k; k++) {
            int nib;
            size_t pos = tailor_w4a16_kernel_pos(lay, row0 + r, k, &nib);
            qw[pos] |= ct_nibble(packed, wpr, r, k) << (4 * nib);
        }
}

/* Transposes scales (and unpacks zero points) of rows [row0, end) into [groups, ld];
 * `end` may run past n into the padding, which gets scale 0 and zero point 0 (u = 8). */
static void repack_scale_rows(const tailor_w4a16_layout *lay, int row0, int end,
                              const void *scales, tailor_dtype scale_dtype, const int32_t *zeros,
                              tailor_dtype out_dtype, void *scales_out, uint8_t *zeros_out)
{
    int g_count = lay->groups;
    for (int n = row0; n < end; n++) {
        int r = n - row0; /* row inside the block */
        for (int g = 0; g < g_count; g++) {
            size_t dst = (size_t)g * (size_t)lay->ld + (size_t)n;
            float s = 0.0f;
            uint32_t z = 8;
            if (n < lay->n) {
                s = load_float(scale_dtype, scales, (size_t)r * (size_t)g_count + (size_t)g);
                if (lay->has_zp) {
                    uint32_t w = (uint32_t)zeros[(size_t)(r / 8) * (size_t)g_count + (size_t)g];
                    z = (w >> (4 * (r % 8))) & 0xfu;
                }
            }
            store_half(out_dtype, scales_out, dst, s);
            if (lay->has_zp)
                zeros_out[dst] = (uint8_t)z;
        }
    }
}

tailor_status tailor_w4a16_repack_rows(tailor_ctx *ctx, const tailor_w4a16_layout *lay, int row0,
                                       int rows, const int32_t *packed, const void *scales,
                                       tailor_dtype scale_dtype, const int32_t *zeros,
                                       tailor_dtype out_dtype, uint32_t *qweight,
                                       void *scales_out, uint8_t *zeros_out)
{
    if (!is_half_dtype(out_dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 repack: the kernel's scales must be fp16 or bf16, not %s",
                                tailor_dtype_name(out_dtype));
    if (!is_half_dtype(scale_dtype) && scale_dtype != TAILOR_DTYPE_F32)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 repack: checkpoint scales must be fp32, fp16 or bf16, not %s",
                                tailor_dtype_name(scale_dtype));
    if (lay->has_zp && (!zeros || !zeros_out))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 repack: an asymmetric weight needs its zero points");
    if (row0 < 0 || row0 % 8 != 0 || rows <= 0 || row0 + rows > lay->n)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 repack: rows [%d, %d) are not a block of the %d rows "
                                "starting at a multiple of 8", row0, row0 + rows, lay->n);
    repack_weight_rows(lay, row0, rows, packed, qweight);
    int end = row0 + rows == lay->n ? lay->n_pad : row0 + rows;
    repack_scale_rows(lay, row0, end, scales, scale_dtype, zeros, out_dtype, scales_out,
                      zeros_out);
    return TAILOR_OK;
}

tailor_status tailor_w4a16_repack(tailor_ctx *ctx, const tailor_w4a16_layout *lay,
                                  const int32_t *packed, const void *scales,
                                  tailor_dtype scale_dtype, const int32_t *zeros,
                                  tailor_dtype out_dtype, uint32_t *qweight, void *scales_out,
                                  uint8_t *zeros_out)
{
    return tailor_w4a16_repack_rows(ctx, lay, 0, lay->n, packed, scales, scale_dtype, zeros,
                                    out_dtype, qweight, scales_out, zeros_out);
}

tailor_status tailor_w4a16_dequantize(tailor_ctx *ctx, const tailor_w4a16_layout *lay, int row0,
                                      int rows, const uint32_t *qweight, const void *scales,
                                      tailor_dtype dtype, const uint8_t *zeros, float *w)
{
    if (!is_half_dtype(dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 dequantize: scales must be fp16 or bf16, not %s",
                                tailor_dtype_name(dtype));
    if (lay->has_zp && !zeros)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 dequantize: an asymmetric weight needs its zero points");
    if (row0 < 0 || rows < 0 || row0 + rows > lay->n)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "w4a16 dequantize: rows [%d, %d) are outside the %d rows", row0,
                                row0 + rows, lay->n);
    for (int r = 0; r < rows; r++) {
        int n = row0 + r;
        for (int k = 0; k < lay->k; k++) {
            int nib;
            size_t pos = tailor_w4a16_kernel_pos(lay, n, k, &nib);
            int u = (int)((qweight[pos] >> (4 * nib)) & 0xfu);
            size_t si = (size_t)(k / lay->group) * (size_t)lay->ld + (size_t)n;
            int z = lay->has_zp ? zeros[si] : 8;
            float v = (float)(u - z) * load_float(dtype, scales, si);
            w[(size_t)r * (size_t)lay->k + (size_t)k] =
                dtype == TAILOR_DTYPE_BF16 ? tailor_round_bf16(v) : tailor_round_f16(v);
        }
    }
    return TAILOR_OK;
}

void tailor_w4a16_ct_pack(int n, int k, const int8_t *q, int32_t *packed)
{
    int wpr = (k + 7) / 8;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < wpr; c++) {
            uint32_t word = 0;
            for (int j = 0; j < 8 && 8 * c + j < k; j++) {
                uint32_t u = (uint32_t)(q[(size_t)r * (size_t)k + (size_t)(8 * c + j)] + 8) & 0xfu;
                word |= u << (4 * j);
            }
            packed[(size_t)r * (size_t)wpr + (size_t)c] = (int32_t)word;
        }
}

void tailor_w4a16_ct_pack_zeros(int n, int groups, const int8_t *zp, int32_t *zeros)
{
    int rows = (n + 7) / 8;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < groups; g++) {
            uint32_t word = 0;
            for (int j = 0; j < 8 && 8 * r + j < n; j++) {
                uint32_t u = (uint32_t)(zp[(size_t)(8 * r + j) * (size_t)groups + (size_t)g] + 8) & 0xfu;
                word |= u << (4 * j);
            }
            zeros[(size_t)r * (size_t)groups + (size_t)g] = (int32_t)word;
        }
}

int tailor_w4a16_order_from_groups(int k, int group, const int32_t *g_idx, int32_t *order)
{
    if (k <= 0 || group <= 0 || k % group != 0)
        return 0;
    int groups = k / group;
    int *next = calloc((size_t)groups, sizeof *next); /* per group: its next place in order */
    if (!next)
        return -1;
    int ok = 1;
    for (int c = 0; c < k && ok; c++) {
        if (g_idx[c] < 0 || g_idx[c] >= groups || next[g_idx[c]] == group)
            ok = 0;
        else
            next[g_idx[c]]++;
    }
    for (int g = 0; g < groups && ok; g++) /* every count is `group` now: k columns in all */
        next[g] = g * group;
    for (int c = 0; c < k && ok; c++)
        order[next[g_idx[c]]++] = c;
    free(next);
    return ok;
}

/* tailor_w4a16_order_rows over rows [r0, r1): each row's nibbles unpacked into bytes (k fits
 * ORDER_ROW_BYTES), then every output word packed from the bytes its columns name. */
enum { ORDER_ROW_BYTES = 1 << 15, ORDER_TASK_ROWS = 64 };

typedef struct order_job {
    int rows, k;
    const int32_t *order, *src;
    int32_t *dst;
} order_job;

static void order_rows_range(const order_job *j, int r0, int r1)
{
    uint8_t u[ORDER_ROW_BYTES];
    int wpr = j->k / 8;
    for (int r = r0; r < r1; r++) {
        const int32_t *s = j->src + (size_t)r * (size_t)wpr;
        int32_t *d = j->dst + (size_t)r * (size_t)wpr;
        for (int c = 0; c < wpr; c++) {
            uint32_t w = (uint32_t)s[c];
            for (int b = 0; b < 8; b++)
                u[8 * c + b] = (uint8_t)((w >> (4 * b)) & 0xfu);
        }
        for (int c = 0; c < wpr; c++) {
            const int32_t *o = j->order + 8 * c;
            uint32_t w = 0;
            for (int b = 0; b < 8; b++)
                w |= (uint32_t)u[o[b]] << (4 * b);
            d[c] = (int32_t)w;
        }
    }
}

static void order_task(void *user, int t)
{
    const order_job *j = user;
    int r0 = t * ORDER_TASK_ROWS, r1 = r0 + ORDER_TASK_ROWS < j->rows ? r0 + ORDER_TASK_ROWS : j->rows;
    order_rows_range(j, r0, r1);
}

void tailor_w4a16_order_rows(int rows, int k, const int32_t *order, const int32_t *src,
                             int32_t *dst)
{
    order_job j = {rows, k, order, src, dst};
    if (k <= ORDER_ROW_BYTES) {
        tailor_parallel_for((rows + ORDER_TASK_ROWS - 1) / ORDER_TASK_ROWS, order_task, &j);
        return;
    }
    int wpr = k / 8; /* wider than any Gemma 4 linear: nibble by nibble */
    for (int r = 0; r < rows; r++) {
        const int32_t *s = src + (size_t)r * (size_t)wpr;
        for (int c = 0; c < wpr; c++) {
            uint32_t word = 0;
            for (int b = 0; b < 8; b++)
                word |= ct_nibble(s, wpr, 0, order[8 * c + b]) << (4 * b);
            dst[(size_t)r * (size_t)wpr + (size_t)c] = (int32_t)word;
        }
    }
}

int tailor_w4a16_group_for(int k)
{
    static const int groups[] = {128, 64, 32};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (k > 0 && k % groups[i] == 0)
            return groups[i];
    return 0;
}

void tailor_w4a16_quantize_rows(const tailor_w4a16_layout *lay, const void *w, tailor_dtype wd,
                                tailor_dtype out_dtype, int row0, int rows, int32_t *packed,
                                uint16_t *scales)
{
    size_t wpr = (size_t)lay->k / 8;
    int bf = out_dtype == TAILOR_DTYPE_BF16;
    memset(packed, 0, (size_t)rows * wpr * 4);
    for (int r = 0; r < rows; r++) {
        size_t base = (size_t)(row0 + r) * (size_t)lay->k;
        for (int g = 0; g < lay->groups; g++) {
            float amax = 0;
            for (int c = g * lay->group; c < (g + 1) * lay->group; c++)
                amax = fmaxf(amax, fabsf(load_float(wd, w, base + (size_t)c)));
            uint16_t sh = bf ? tailor_f32_to_bf16(amax / 7.0f) : tailor_f32_to_f16(amax / 7.0f);
            float s = bf ? tailor_bf16_to_f32(sh) : tailor_f16_to_f32(sh);
            scales[(size_t)r * (size_t)lay->groups + (size_t)g] = sh;
            for (int c = g * lay->group; c < (g + 1) * lay->group; c++) {
                float q = s > 0 ? rintf(load_float(wd, w, base + (size_t)c) / s) : 0.0f;
                int qi = q < -8 ? -8 : q > 7 ? 7 : (int)q;
                uint32_t *word = (uint32_t *)&packed[(size_t)r * wpr + (size_t)(c / 8)];
                *word |= ((uint32_t)(qi + 8) & 0xfu) << (4 * (c % 8));
            }
        }
    }
}
