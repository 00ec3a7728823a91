/* upload.c — weights to the GPU through a small pinned staging buffer (two alternating halves),
 * converted or repacked on the way, a bounded piece at a time. */
#include "upload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"

struct tailor_upload {
    tailor_gpu *gpu;
    unsigned char *staging; /* two halves of `half` bytes */
    size_t half;
    int pinned;             /* 0: ordinary memory, copies are synchronous */
    int cur;                /* the half filled next */
    size_t total;
    void (*release)(void *arg, const void *src, size_t bytes); /* tailor_upload_set_release */
    void *release_arg;
};

void tailor_upload_set_release(tailor_upload *u, void (*release)(void *arg, const void *src,
                                                                 size_t bytes),
                               void *arg)
{
    u->release = release;
    u->release_arg = arg;
}

/* The source bytes [src, src + bytes) have been copied into the staging. */
static void consumed(tailor_upload *u, const void *src, size_t bytes)
{
    if (u->release)
        u->release(u->release_arg, src, bytes);
}

tailor_status tailor_upload_create(tailor_ctx *ctx, tailor_gpu *gpu, size_t staging_bytes,
                                   tailor_upload **out)
{
    *out = NULL;
    if (staging_bytes < 65536)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "upload: staging of %zu bytes is below the 64 KiB minimum",
                                staging_bytes);
    tailor_upload *u = calloc(1, sizeof *u);
    if (!u)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "upload: out of memory");
    u->gpu = gpu;
    u->half = (staging_bytes / 2) & ~(size_t)255;
    void *p = NULL;
    if (tailor_gpu_host_alloc(ctx, gpu, 2 * u->half, &p) == TAILOR_OK) {
        u->pinned = 1;
    } else {
        tailor_ctx_clear(ctx);
        p = malloc(2 * u->half);
    }
    if (!p) {
        free(u);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "upload: no memory for %zu bytes of staging",
                                staging_bytes);
    }
    u->staging = p;
    *out = u;
    return TAILOR_OK;
}

void tailor_upload_destroy(tailor_upload *u)
{
    if (!u)
        return;
    if (u->pinned) {
        tailor_upload_finish(NULL, u);
        tailor_gpu_host_free(u->gpu, u->staging);
    } else {
        free(u->staging);
    }
    free(u);
}

tailor_status tailor_upload_finish(tailor_ctx *ctx, tailor_upload *u)
{
    return u->pinned ? tailor_gpu_sync(ctx, u->gpu) : TAILOR_OK;
}

size_t tailor_upload_total(const tailor_upload *u) { return u->total; }

/* The half to fill next (its previous copy is known to be finished, see stage_send). */
static unsigned char *stage_ptr(tailor_upload *u) { return u->staging + (size_t)u->cur * u->half; }

/* Sends `bytes` of the current half to dst and switches halves. The sync first waits for the
 * copy of the other half (queued last time), so the half filled next is free. */
static tailor_status stage_send(tailor_ctx *ctx, tailor_upload *u, CUdeviceptr dst, size_t bytes)
{
    tailor_status st;
    if (!u->pinned) {
        st = tailor_gpu_upload(ctx, u->gpu, dst, stage_ptr(u), bytes);
    } else {
        st = tailor_gpu_sync(ctx, u->gpu);
        if (st == TAILOR_OK)
            st = tailor_gpu_upload_async(ctx, u->gpu, dst, stage_ptr(u), bytes);
    }
    u->cur ^= 1;
    u->total += bytes;
    return st;
}

static int is_float_dtype(tailor_dtype d)
{
    return d == TAILOR_DTYPE_F32 || d == TAILOR_DTYPE_F16 || d == TAILOR_DTYPE_BF16;
}

static float load_elem(const void *src, tailor_dtype d, size_t i)
{
    if (d == TAILOR_DTYPE_F32) {
        float f;
        memcpy(&f, (const unsigned char *)src + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const unsigned char *)src + 2 * i, 2);
    return d == TAILOR_DTYPE_BF16 ? tailor_bf16_to_f32(h) : tailor_f16_to_f32(h);
}

static void store_elem(void *dst, tailor_dtype d, size_t i, float v)
{
    if (d == TAILOR_DTYPE_F32) {
        memcpy((unsigned char *)dst + 4 * i, &v, 4);
        return;
    }
    uint16_t h = d == TAILOR_DTYPE_BF16 ? tailor_f32_to_bf16(v) : tailor_f32_to_f16(v);
    memcpy((unsigned char *)dst + 2 * i, &h, 2);
}

/* Raw bytes through the staging. */
static tailor_status upload_raw(tailor_ctx *ctx, tailor_upload *u, CUdeviceptr dst,
                                const void *src, size_t bytes)
{
    for (size_t off = 0; off < bytes;) {
        size_t n = bytes - off < u->half ? bytes - off : u->half;
        memcpy(stage_ptr(u), (const unsigned char *)src + off, n);
        consumed(u, (const unsigned char *)src + off, n);
        tailor_status st = stage_send(ctx, u, dst + off, n);
        if (st)
            return st;
        off += n;
    }
    return TAILOR_OK;
}

tailor_status tailor_upload_convert(tailor_ctx *ctx, tailor_upload *u, CUdeviceptr dst,
                                    const void *src, tailor_dtype src_dtype,
                                    tailor_dtype dst_dtype, size_t count)
{
    if (!is_float_dtype(src_dtype) || !is_float_dtype(dst_dtype))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "upload: cannot convert %s to %s (float types only)",
                                tailor_dtype_name(src_dtype), tailor_dtype_name(dst_dtype));
    size_t ds = tailor_dtype_size(dst_dtype);
    if (src_dtype == dst_dtype)
        return upload_raw(ctx, u, dst, src, count * ds);
    size_t per = u->half / ds;
    for (size_t i = 0; i < count;) {
        size_t n = count - i < per ? count - i : per;
        unsigned char *s = stage_ptr(u);
        for (size_t j = 0; j < n; j++)
            store_elem(s, dst_dtype, j, load_elem(src, src_dtype, i + j));
        consumed(u, (const unsigned char *)src + i * tailor_dtype_size(src_dtype),
                 n * tailor_dtype_size(src_dtype));
        tailor_status st = stage_send(ctx, u, dst + i * ds, n * ds);
        if (st)
            return st;
        i += n;
    }
    return TAILOR_OK;
}

/* ---- W4A16 ------------------------------------------------------------------------------------- */

/* Host side of one weight's repacking: the whole (small) scale and zero arrays, and one row
 * block's worth of kernel-layout scales. */
typedef struct w4_work {
    const tailor_w4a16_layout *lay;
    tailor_dtype out_dtype;
    int block_rows;         /* rows per block (a multiple of 16) */
    unsigned char *full_sc; /* [groups, ld] out_dtype */
    uint8_t *full_z;        /* [groups, ld] or NULL */
    unsigned char *blk_sc;  /* [groups, block_rows] out_dtype */
    uint8_t *blk_z;
} w4_work;

static void w4_work_free(w4_work *w)
{
    free(w->full_sc);
    free(w->full_z);
    free(w->blk_sc);
    free(w->blk_z);
}

static tailor_status w4_work_init(tailor_ctx *ctx, tailor_upload *u, const tailor_w4a16_layout *lay,
                                  tailor_dtype out_dtype, w4_work *w)
{
    memset(w, 0, sizeof *w);
    w->lay = lay;
    w->out_dtype = out_dtype;
    size_t row_bytes = (size_t)lay->k / 2;
    size_t rows = u->half / row_bytes;
    rows -= rows % 16;
    if (rows < 16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "upload: staging of %zu bytes cannot hold 16 rows of k=%d", u->half,
                                lay->k);
    w->block_rows = rows > (size_t)lay->n ? ((lay->n + 15) / 16) * 16 : (int)rows;
    size_t g = (size_t)lay->groups;
    w->full_sc = calloc(lay->scale_count, 2); /* scale 0 in the padding (both dtypes) */
    w->blk_sc = malloc(g * (size_t)w->block_rows * 2);
    if (lay->has_zp) {
        w->full_z = malloc(lay->zero_count);
        w->blk_z = malloc(g * (size_t)w->block_rows);
        if (w->full_z)
            memset(w->full_z, 8, lay->zero_count); /* zp 0 in the padding */
    }
    if (!w->full_sc || !w->blk_sc || (lay->has_zp && (!w->full_z || !w->blk_z))) {
        w4_work_free(w);
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "upload: out of memory for W4A16 scales");
    }
    return TAILOR_OK;
}

/* Repacks checkpoint rows [row0, row0 + rows) (pointers at the block's first row) into the
 * staging and sends the block's qweight; keeps its scales for the end. */
static tailor_status w4_block(tailor_ctx *ctx, tailor_upload *u, w4_work *w, int row0, int rows,
                              const int32_t *packed, const void *scales, tailor_dtype sdtype,
                              const int32_t *zeros, CUdeviceptr qweight)
{
    const tailor_w4a16_layout *lay = w->lay;
    tailor_w4a16_layout sub;
    tailor_status st = tailor_w4a16_layout_init(ctx, rows, lay->k, lay->group, lay->has_zp, &sub);
    if (st == TAILOR_OK)
        st = tailor_w4a16_repack_rows(ctx, &sub, 0, rows, packed, scales, sdtype, zeros,
                                      w->out_dtype, (uint32_t *)(void *)stage_ptr(u), w->blk_sc,
                                      w->blk_z);
    if (st)
        return st;
    for (int g = 0; g < lay->groups; g++) {
        memcpy(w->full_sc + 2 * ((size_t)g * lay->ld + (size_t)row0),
               w->blk_sc + 2 * ((size_t)g * sub.n_pad), 2 * (size_t)rows);
        if (lay->has_zp)
            memcpy(w->full_z + (size_t)g * lay->ld + (size_t)row0,
                   w->blk_z + (size_t)g * sub.n_pad, (size_t)rows);
    }
    size_t row_words = (size_t)lay->k / 8;
    return stage_send(ctx, u, qweight + (size_t)row0 * row_words * 4, (size_t)rows * row_words * 4);
}

static tailor_status w4_finish(tailor_ctx *ctx, tailor_upload *u, w4_work *w,
                               const tailor_upload_w4a16_dst *dst)
{
    const tailor_w4a16_layout *lay = w->lay;
    tailor_status st = TAILOR_OK;
    if (lay->ld == lay->n_pad) {
        st = upload_raw(ctx, u, dst->scales, w->full_sc, lay->scale_count * 2);
        if (st == TAILOR_OK && lay->has_zp)
            st = upload_raw(ctx, u, dst->zeros, w->full_z, lay->zero_count);
    }
    /* one part of a stack: only its own n_pad columns of each row; the others are its
     * neighbours' */
    size_t ld = (size_t)lay->ld, np = (size_t)lay->n_pad;
    for (int g = 0; lay->ld != lay->n_pad && g < lay->groups && st == TAILOR_OK; g++) {
        st = upload_raw(ctx, u, dst->scales + (CUdeviceptr)(g * ld * 2), w->full_sc + g * ld * 2,
                        np * 2);
        if (st == TAILOR_OK && lay->has_zp)
            st = upload_raw(ctx, u, dst->zeros + (CUdeviceptr)(g * ld), w->full_z + g * ld, np);
    }
    if (st == TAILOR_OK) /* the host arrays are freed next: wait for their copies */
        st = tailor_upload_finish(ctx, u);
    return st;
}

tailor_status tailor_upload_w4a16(tailor_ctx *ctx, tailor_upload *u, const tailor_w4a16_layout *lay,
                                  const int32_t *packed, const void *scales,
                                  tailor_dtype scale_dtype, const int32_t *zeros,
                                  const int32_t *order, tailor_dtype out_dtype,
                                  const tailor_upload_w4a16_dst *dst)
{
    w4_work w;
    tailor_status st = w4_work_init(ctx, u, lay, out_dtype, &w);
    if (st)
        return st;
    size_t wpr = ((size_t)lay->k + 7) / 8, ss = tailor_dtype_size(scale_dtype);
    int32_t *ordered = NULL; /* one block's rows in the activation order */
    if (order && !(ordered = malloc((size_t)w.block_rows * wpr * sizeof *ordered)))
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "upload: out of memory for W4A16 rows");
    for (int row0 = 0; row0 < lay->n && st == TAILOR_OK; row0 += w.block_rows) {
        int rows = lay->n - row0 < w.block_rows ? lay->n - row0 : w.block_rows;
        const int32_t *rows_packed = packed + (size_t)row0 * wpr;
        if (ordered) {
            tailor_w4a16_order_rows(rows, lay->k, order, rows_packed, ordered);
            rows_packed = ordered;
        }
        st = w4_block(ctx, u, &w, row0, rows, rows_packed,
                      (const unsigned char *)scales + (size_t)row0 * (size_t)lay->groups * ss,
                      scale_dtype, zeros ? zeros + (size_t)(row0 / 8) * (size_t)lay->groups : NULL,
                      dst->qweight);
    }
    if (st == TAILOR_OK)
        st = w4_finish(ctx, u, &w, dst);
    free(ordered);
    w4_work_free(&w);
    return st;
}

tailor_status tailor_upload_quantize(tailor_ctx *ctx, tailor_upload *u,
                                     const tailor_w4a16_layout *lay, const void *w,
                                     tailor_dtype w_dtype, tailor_dtype out_dtype,
                                     const tailor_upload_w4a16_dst *dst)
{
    if (lay->has_zp || !is_float_dtype(w_dtype) ||
        (out_dtype != TAILOR_DTYPE_F16 && out_dtype != TAILOR_DTYPE_BF16))
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "upload: quantizing needs a float weight, 16-bit scales and no "
                                "zero points");
    w4_work wk;
    tailor_status st = w4_work_init(ctx, u, lay, out_dtype, &wk);
    if (st)
        return st;
    int32_t *packed = malloc((size_t)wk.block_rows * (size_t)lay->k / 2);
    uint16_t *scales = malloc((size_t)wk.block_rows * (size_t)lay->groups * 2);
    if (!packed || !scales)
        st = tailor_set_error(ctx, TAILOR_ERR_NOMEM, "upload: out of memory for quantizing");
    for (int row0 = 0; row0 < lay->n && st == TAILOR_OK; row0 += wk.block_rows) {
        int rows = lay->n - row0 < wk.block_rows ? lay->n - row0 : wk.block_rows;
        tailor_w4a16_quantize_rows(lay, w, w_dtype, out_dtype, row0, rows, packed, scales);
        st = w4_block(ctx, u, &wk, row0, rows, packed, scales, out_dtype, NULL, dst->qweight);
    }
    if (st == TAILOR_OK)
        st = w4_finish(ctx, u, &wk, dst);
    free(packed);
    free(scales);
    w4_work_free(&wk);
    return st;
}
