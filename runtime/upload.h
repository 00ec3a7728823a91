/* upload.h — weights from host memory (usually a mapped checkpoint) to the GPU in bounded chunks:
 * through a small pinned staging buffer, converted to the compute dtype on the way (bf16 -> fp16
 * below sm_80), and compressed-tensors W4A16 weights repacked (or dense weights quantized) one
 * row block at a time. Host memory stays at the staging size plus one weight's scales, whatever
 * the model size. */
#ifndef TAILOR_UPLOAD_H
#define TAILOR_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "cuda.h"
#include "op.h"
#include "tailor.h"
#include "w4a16.h"

typedef struct tailor_upload tailor_upload;

/* Creates an uploader for gpu with `staging_bytes` (>= 64 KiB; 8 MiB is a good size) of pinned
 * staging, split in two halves that alternate (filling one while the other is copied). Falls back
 * to ordinary memory when pinned memory is refused. Free with tailor_upload_destroy. */
tailor_status tailor_upload_create(tailor_ctx *ctx, tailor_gpu *gpu, size_t staging_bytes,
                                   tailor_upload **out);

/* Waits for the copies in flight and frees the staging; NULL is fine. */
void tailor_upload_destroy(tailor_upload *u);

/* From now on, once a piece of a dense source (tailor_upload_convert) has been read into the
 * staging, release(arg, piece, bytes) is called: a loader streaming a mapped checkpoint drops
 * the pages it has read (tailor_st_release), so the resident set stays bounded whatever the
 * size of one tensor. NULL turns it off. */
void tailor_upload_set_release(tailor_upload *u, void (*release)(void *arg, const void *src,
                                                                 size_t bytes),
                               void *arg);

/* Waits for every copy queued so far (the source memory may then change). */
tailor_status tailor_upload_finish(tailor_ctx *ctx, tailor_upload *u);

/* Bytes written to the device so far. */
size_t tailor_upload_total(const tailor_upload *u);

/* Converts `count` elements of src (F32, F16 or BF16) to dst_dtype (F32, F16 or BF16) into
 * device memory at dst. Rounds to nearest even. TAILOR_ERR_MISUSE for another dtype. */
tailor_status tailor_upload_convert(tailor_ctx *ctx, tailor_upload *u, CUdeviceptr dst,
                                    const void *src, tailor_dtype src_dtype,
                                    tailor_dtype dst_dtype, size_t count);

/* Device buffers of one W4A16 weight in the kernel layout (runtime/w4a16.h). With lay->ld >
 * lay->n_pad the weight is one part of a stack: scales and zeros point at its first column of
 * the stack's [G, ld] rows, and only its own columns are written. */
typedef struct tailor_upload_w4a16_dst {
    CUdeviceptr qweight; /* lay->qweight_words uint32 */
    CUdeviceptr scales;  /* lay->scale_count of the scale dtype */
    CUdeviceptr zeros;   /* lay->zero_count bytes, 0 when symmetric */
} tailor_upload_w4a16_dst;

/* Repacks a compressed-tensors weight (packed [n, k/8] int32, scales [n, groups] of scale_dtype,
 * zeros [ceil(n/8), groups] int32 or NULL) into the kernel layout on the device, rows at a time.
 * Scales become out_dtype (F16/BF16). order (NULL: the columns as stored) is an activation
 * order (tailor_w4a16_order_from_groups): column j of the uploaded weight is stored column
 * order[j]. */
tailor_status tailor_upload_w4a16(tailor_ctx *ctx, tailor_upload *u, const tailor_w4a16_layout *lay,
                                  const int32_t *packed, const void *scales,
                                  tailor_dtype scale_dtype, const int32_t *zeros,
                                  const int32_t *order, tailor_dtype out_dtype,
                                  const tailor_upload_w4a16_dst *dst);

/* Quantizes a dense weight w [lay->n, lay->k] (F32, F16 or BF16) to symmetric int4 with
 * round-to-nearest, one scale per lay->group columns (scale = max|w| / 7 rounded to out_dtype,
 * q = clamp(round(w / scale), -8, 7)), and uploads it in the kernel layout. lay->has_zp must be
 * 0. Dequantized value: q * scale. */
tailor_status tailor_upload_quantize(tailor_ctx *ctx, tailor_upload *u,
                                     const tailor_w4a16_layout *lay, const void *w,
                                     tailor_dtype w_dtype, tailor_dtype out_dtype,
                                     const tailor_upload_w4a16_dst *dst);

#endif
