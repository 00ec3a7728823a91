// w4a16_common.cuh — what every w4a16 template shares: the kernel layout of runtime/w4a16.h
// (int4 nibbles u = q + 8; in each 32-column chunk of a row, word t holds four pairs, pair p =
// columns 2t + 8p and 2t + 8p + 1 in nibbles p and p + 4), its dequantization, and the
// copy/mma/ldmatrix primitives with their per-arch forms (TAILOR_SM).
#pragma once

#include "tailor_common.cuh"

// NVRTC has no <stdint.h> by default; the kernel layout is made of these.
typedef unsigned int u32;
typedef unsigned char u8;

#ifndef HAS_ZP
#define HAS_ZP 0
#endif

// Bits of the 16-bit value (MAGIC + u) whose low mantissa bits take a nibble: fp16 1024 + u,
// bf16 128 + u. Both are exact integers, so (MAGIC + u) - (MAGIC + z) = q - zp exactly.
#if defined(TAILOR_DTYPE_BF16)
#define W4_MAGIC 0x4300u
#else
#define W4_MAGIC 0x6400u
#endif

__device__ __forceinline__ u32 w4_as_u32(T2 v) { return *reinterpret_cast<u32 *>(&v); }
__device__ __forceinline__ T2 w4_as_t2(u32 v) { return *reinterpret_cast<T2 *>(&v); }

// (MAGIC + z) in both halves: what to subtract for zero point z (stored as u, 0..15; 8 = none).
__device__ __forceinline__ T2 w4_bias(u32 z) { return w4_as_t2((W4_MAGIC | z) * 0x10001u); }

// The scale s in both halves.
__device__ __forceinline__ T2 w4_splat(T s) { return T2(s, s); }

// Pair p (0..3) of a kernel-layout word as two T values round((u - z) * s): one rounding, as
// compressed-tensors dequantizes in the scale dtype.
__device__ __forceinline__ T2 w4_pair(u32 word, int p, T2 bias, T2 s)
{
    u32 v = ((word >> (4 * p)) & 0x000f000fu) | (W4_MAGIC * 0x10001u);
    return __hmul2(__hsub2(w4_as_t2(v), bias), s);
}

// Pair p as floats u - z (exact small integers), for the fp32 GEMV path: the nibble goes into
// the mantissa of 128.0f (bits 16..19 weigh 1), so no int-to-float conversion is needed.
__device__ __forceinline__ float w4_float(u32 word, int nibble)
{
    int sh = 4 * nibble - 16;
    u32 bits = sh >= 0 ? (word >> sh) : (word << -sh);
    return __uint_as_float((bits & 0x000f0000u) | 0x43000000u); // 128 + u
}

// ---- 16-byte global -> shared copies: cp.async from sm_80, a plain load and store below ----

__device__ __forceinline__ u32 w4_smem_addr(const void *p)
{
    return (u32)__cvta_generic_to_shared(p);
}

// Copies 16 bytes from src to dst, or writes 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void w4_copy16(void *dst, const void *src, bool valid)
{
#if TAILOR_SM >= 80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(w4_smem_addr(dst)),
                 "l"(src), "r"(valid ? 16 : 0));
#else
    uint4 v = make_uint4(0, 0, 0, 0);
    if (valid)
        v = *reinterpret_cast<const uint4 *>(src);
    *reinterpret_cast<uint4 *>(dst) = v;
#endif
}

__device__ __forceinline__ void w4_copy_commit()
{
#if TAILOR_SM >= 80
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N groups of copies are still in flight.
template <int N>
__device__ __forceinline__ void w4_copy_wait()
{
#if TAILOR_SM >= 80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ---- tensor cores ----

// Four 8x8 16-bit matrices from shared memory (lanes 8i..8i+7 give the row addresses of
// matrix i), one register each.
__device__ __forceinline__ void w4_ldmatrix_x4(u32 r[4], const void *row_addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(w4_smem_addr(row_addr)));
}

// c += a (16x16, ldmatrix order) * b (16x8: b0 = k 2t..2t+1, b1 = k 2t+8..2t+9, column lane/4),
// fp32 accumulators. One m16n8k16 from sm_80; two m16n8k8 (fp16 only) on sm_75.
__device__ __forceinline__ void w4_mma_k16(float c[4], const u32 a[4], u32 b0,
                                           u32 b1)
{
#if TAILOR_SM >= 80
#if defined(TAILOR_DTYPE_BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
#else
#if defined(TAILOR_DTYPE_BF16)
#error "w4a16: bf16 tensor-core math needs sm_80 (the space requires it)"
#endif
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

// 16 bytes of weights that are read once: no L1 allocation.
__device__ __forceinline__ uint4 w4_load_stream(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// ---- split-k across blocks (the decode templates: grid (column tiles, SPLITK)) ----

// After every thread of the block wrote its fp32 partials to slice blockIdx.y of `partial`
// [nsplit, M, N]: the last block of column tile blockIdx.x (counted in `counters`) adds the
// slices in z order (the same sum on every run) for columns [n0, n0 + bn), writes `out` and
// resets its counter, so the workspace is left ready for the next launch. `flag` is one int of
// shared memory the caller no longer reads.
__device__ __forceinline__ void w4_splitk_finish(T *__restrict__ out,
                                                 const float *__restrict__ partial,
                                                 int *__restrict__ counters, int nsplit, int M,
                                                 int N, int n0, int bn, int *flag)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        *flag = atomicAdd(&counters[blockIdx.x], 1) == nsplit - 1;
    __syncthreads();
    if (!*flag)
        return;
    __threadfence();
    for (int i = threadIdx.x; i < M * bn; i += blockDim.x) {
        const int row = i / bn, col = n0 + i % bn;
        if (col < N) {
            float v = 0.f;
            for (int z = 0; z < nsplit; z++)
                v += __ldcg(partial + ((size_t)z * M + row) * N + col);
            out[(size_t)row * N + col] = from_f32(v);
        }
    }
    if (threadIdx.x == 0)
        counters[blockIdx.x] = 0;
}
