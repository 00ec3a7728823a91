// w4a16_common.cuh — what every w4a16 template shares: the kernel layout of runtime/w4a16.h
// (int4 nibbles u = q + 8; in each 32-column chunk of a row, word t holds four pairs, pair p =
// columns 2t + 8p and 2t + 8p + 1 in nibbles p and p + 4) and its dequantization; the copy,
// ldmatrix and mma primitives are tc_common.cuh's.
#pragma once

#include "tc_common.cuh"

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

// Pair p (0..3) of a kernel-layout word as two T values u - z (exact small integers): the
// nibbles in the mantissa of MAGIC (one shift, one LOP3), minus bias = MAGIC + z.
__device__ __forceinline__ T2 w4_pair_unscaled(u32 word, int p, T2 bias)
{
    u32 v = ((word >> (4 * p)) & 0x000f000fu) | (W4_MAGIC * 0x10001u);
    return __hsub2(w4_as_t2(v), bias);
}

// Pair p (0..3) of a kernel-layout word as two T values round((u - z) * s): one rounding, as
// compressed-tensors dequantizes in the scale dtype.
__device__ __forceinline__ T2 w4_pair(u32 word, int p, T2 bias, T2 s)
{
    return __hmul2(w4_pair_unscaled(word, p, bias), s);
}

// Pair p as floats u - z (exact small integers), for the fp32 GEMV path: the nibble goes into
// the mantissa of 128.0f (bits 16..19 weigh 1), so no int-to-float conversion is needed.
__device__ __forceinline__ float w4_float(u32 word, int nibble)
{
    int sh = 4 * nibble - 16;
    u32 bits = sh >= 0 ? (word >> sh) : (word << -sh);
    return __uint_as_float((bits & 0x000f0000u) | 0x43000000u); // 128 + u
}

// ---- the weight side of a tensor-core GEMM's k tile (w4a16_mma.cu, w4a16_wgmma.cu) ----

// Issues the copies of k tile kt (columns kt·bk ...) of weight rows [n0, n0 + bn) into shared
// memory: packed words w[bn][ldw] (bk/8 of each row's), scales s[srows][bn] (one row per group
// the tile touches) and, with HAS_ZP, zero points z[srows][bn]; pieces past n, k or the groups
// are zeros. n_pad is the scales' row stride (a stack's part has more); their columns stay inside
// the part's own n rounded up to 16, which its row always holds. nt threads share the copies.
template <int bn, int bk, int ldw, int srows, int grp, int nt> // not BN, ...: the kernels' macros
__device__ __forceinline__ void w4_load_weight_tile(u32 *w, T *s, u8 *z, int kt,
                                                    const u32 *qw, const T *scales,
                                                    const u8 *zeros, int N, int K, int n_pad,
                                                    int n0)
{
    const int tid = threadIdx.x, k0 = kt * bk;
    for (int i = tid; i < bn * (bk / 32); i += nt) {
        const int r = i / (bk / 32), c = i % (bk / 32), gn = n0 + r, gc = k0 / 32 + c;
        const bool ok = gn < N && gc * 32 < K;
        tc_copy16(w + r * ldw + c * 4, ok ? qw + (size_t)gn * (K / 8) + gc * 4 : qw, ok);
    }
    const int groups = K / grp, ncols = (N + 15) / 16 * 16;
    for (int i = tid; i < srows * (bn / 8); i += nt) {
        const int r = i / (bn / 8), c = i % (bn / 8), g = k0 / grp + r, gn = n0 + c * 8;
        const bool ok = g < groups && gn < ncols;
        tc_copy16(s + r * bn + c * 8, ok ? scales + (size_t)g * n_pad + gn : scales, ok);
    }
#if HAS_ZP
    for (int i = tid; i < srows * (bn / 16); i += nt) {
        const int r = i / (bn / 16), c = i % (bn / 16), g = k0 / grp + r, gn = n0 + c * 16;
        const bool ok = g < groups && gn < ncols;
        tc_copy16(z + r * bn + c * 16, ok ? zeros + (size_t)g * n_pad + gn : zeros, ok);
    }
#else
    (void)z;
    (void)zeros;
#endif
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
