// tc_common.cuh — the memory and tensor-core primitives the dense matmul and W4A16 templates
// share, with their per-arch forms (TAILOR_SM): streaming 16-byte loads, 16-byte global ->
// shared copies (cp.async from sm_80, a plain load and store below), ldmatrix and the m16n8k16
// step (two m16n8k8 on sm_75), the bounds-checked store of an accumulator pair. Every space hash
// covers every shared header, so one copy serves both families.
#pragma once

#include "tailor_common.cuh"

typedef unsigned int tc_u32;

__device__ __forceinline__ tc_u32 tc_smem_addr(const void *p)
{
    return (tc_u32)__cvta_generic_to_shared(p);
}

// 16 bytes that are read once (weights during decode): no L1 allocation.
__device__ __forceinline__ uint4 tc_load_stream(const void *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Copies 16 bytes from src to dst, or writes 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void tc_copy16(void *dst, const void *src, bool valid)
{
#if TAILOR_SM >= 80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tc_smem_addr(dst)),
                 "l"(src), "r"(valid ? 16 : 0));
#else
    uint4 v = make_uint4(0, 0, 0, 0);
    if (valid)
        v = *reinterpret_cast<const uint4 *>(src);
    *reinterpret_cast<uint4 *>(dst) = v;
#endif
}

__device__ __forceinline__ void tc_copy_commit()
{
#if TAILOR_SM >= 80
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N groups of copies are still in flight.
template <int N>
__device__ __forceinline__ void tc_copy_wait()
{
#if TAILOR_SM >= 80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Four 8x8 16-bit matrices from shared memory (lanes 8i..8i+7 give the row addresses of
// matrix i), one register each.
__device__ __forceinline__ void tc_ldmatrix_x4(tc_u32 r[4], const void *row_addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(tc_smem_addr(row_addr)));
}

// c += a (16x16: a0 rows 0-7 k 0-7, a1 rows 8-15 k 0-7, a2 rows 0-7 k 8-15, a3 rows 8-15
// k 8-15, as ldmatrix gives them) * b (16x8: b0 = k 2t..2t+1, b1 = k 2t+8..2t+9, column
// lane/4), fp32 accumulators. One m16n8k16 from sm_80; two m16n8k8 (fp16 only) on sm_75.
__device__ __forceinline__ void tc_mma_k16(float c[4], const tc_u32 a[4], tc_u32 b0, tc_u32 b1)
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
#error "tc_mma_k16: bf16 tensor-core math needs sm_80 (the space requires it)"
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

// ---- the block tile GEMMs (matmul_mma.cu, w4a16_mma.cu) ----

// The k tiles [begin, end) of `bk` columns that block z of `splits` takes (split-k: as even as
// integer division makes the shares). z is unsigned, as blockIdx.z is.
struct TcKShare {
    int begin, end;
};
__device__ __forceinline__ TcKShare tc_k_share(int K, int bk, unsigned z, int splits)
{
    const int total = (K + bk - 1) / bk;
    return {(int)((long long)z * total / splits), (int)((long long)(z + 1) * total / splits)};
}

// Zeroes the accumulators of a warp's TM x TN mma tiles (TM: row tiles, TN: column tiles).
template <int TM, int TN>
__device__ __forceinline__ void tc_zero(float (&acc)[TM][TN][4])
{
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.f;
}

// Stores two adjacent outputs of row `row`, columns col and col + 1 (an mma fragment's pair; col
// even), skipping what is outside [M, N]; one 4-byte store when N is even.
__device__ __forceinline__ void tc_store2(T *out, int M, int N, int row, int col, float v0,
                                          float v1)
{
    if (row >= M)
        return;
    T *p = out + (size_t)row * N + col;
    if ((N & 1) == 0 && col + 1 < N) {
        *reinterpret_cast<T2 *>(p) = from_f32x2(make_float2(v0, v1));
    } else {
        if (col < N)
            p[0] = from_f32(v0);
        if (col + 1 < N)
            p[1] = from_f32(v1);
    }
}

