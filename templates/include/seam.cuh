// seam.cuh — one decoder-layer seam of Gemma 4 (GEMMA4.md §2.4) for one row, by one block, the
// row held in registers: x (fp32 residual; read from xin, written to xout: the same row in place,
// another buffer, or nowhere when xout is null) += RMSNorm_{w_post}(a); optionally
// x *= scalar[0] (the layer scalar); y = RMSNorm_{w_next}(x) rounded once to T. All arithmetic
// in fp32 (statistics, weights multiplied as w itself, eps passed in). Shared by the
// residual_norm kernel (a block per row), the GEMVs that end in a seam (matmul_seam: the last
// block to finish runs it on the rows the kernel just produced, so `a` is read through L2) and
// those that begin with one (matmul_pro: every block computes y into its shared memory, one
// block writes x to the other residual buffer).
// Template arguments (named apart from the host's -D defines): SN_NT (threads of the block),
// SN_COLS (row width), SN_VEC (elements per load), SN_MODE (0 add+norm, 1 add+scale+norm,
// 2 add then y = T(x), 3 norm only: x untouched), SN_CG (a is read through L2 only: written by
// other blocks of the same launch; ld.cg costs registers, hence not for residual_norm).
#pragma once

#include "tailor_common.cuh"

// The GEMV templates that end in a seam (SEAM) or begin with one (PRO) build without them by
// default; a prologue serves one row.
#ifndef SEAM
#define SEAM 0
#endif
#ifndef PRO
#define PRO 0
#endif
#if PRO
static_assert(MT == 1, "the seam prologue serves one row (decode)");
#endif

// The kernel parameters of a seam after the GEMV (SEAM) and of one before it (PRO), each list
// ending in a comma, in the order spacelib's seam_args and pro_args pass them.
#define SEAM_AFTER_PARAMS                                                                          \
    T *__restrict__ y, float *__restrict__ x, const T *__restrict__ w_post,                        \
        const T *__restrict__ w_next, const float *__restrict__ scalar,                            \
        int *__restrict__ counters, float eps,
#define SEAM_BEFORE_PARAMS                                                                         \
    const T *__restrict__ t, const float *__restrict__ x_in, float *__restrict__ x_out,            \
        T *__restrict__ y, const T *__restrict__ w_post, const T *__restrict__ w_next,             \
        const float *__restrict__ scalar, float eps,

template <int N>
struct alignas(4 * N > 16 ? 16 : 4 * N) FVec {
    float v[N];
};

// SN_VEC values of T from global memory through L2 only (rows other blocks wrote this launch);
// the bits move through a union, which keeps them in registers.
template <int SN_VEC> union SeamBits;
template <> union SeamBits<8> { uint4 u; TVec<8> t; };
template <> union SeamBits<4> { uint2 u; TVec<4> t; };
template <> union SeamBits<2> { unsigned u; TVec<2> t; };
template <> union SeamBits<1> { unsigned short u; TVec<1> t; };

// ld.global.cg in our own asm: the "memory" clobber keeps it after the fence before it.
__device__ __forceinline__ void seam_ld_cg(uint4 &v, const void *p)
{
    asm("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
        : "memory");
}
__device__ __forceinline__ void seam_ld_cg(uint2 &v, const void *p)
{
    asm("ld.global.cg.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p) : "memory");
}
__device__ __forceinline__ void seam_ld_cg(unsigned &v, const void *p)
{
    asm("ld.global.cg.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
}
__device__ __forceinline__ void seam_ld_cg(unsigned short &v, const void *p)
{
    asm("ld.global.cg.u16 %0, [%1];\n" : "=h"(v) : "l"(p) : "memory");
}

// SN_CG: through L2 only (the rows were written by other blocks of this launch), else a plain
// load (residual_norm: written by an earlier kernel).
template <int SN_VEC, bool SN_CG>
__device__ __forceinline__ TVec<SN_VEC> seam_load(const T *p)
{
    if (!SN_CG)
        return *reinterpret_cast<const TVec<SN_VEC> *>(p);
    SeamBits<SN_VEC> b;
    seam_ld_cg(b.u, p);
    return b.t;
}

// The norms' weights a seam reads, requested into shared memory before the grid wait (no kernel
// of a forward writes them: tailor_grid_begin's exception) with cp.async, which lets the
// threads go on to the wait while the bytes are in flight; seam_row<..., SN_STAGED> waits for
// them after the row's first reads. sw_post and sw_next: SN_COLS values each, 16-byte aligned
// (w_post unless SN_MODE 3, w_next unless SN_MODE 2); sscalar: the layer scalar (SN_MODE 1).
// The global weights must be 16-byte aligned (every tensor allocation is). sm_80+.
__device__ __forceinline__ void seam_stage_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

template <int SN_NT, int SN_COLS, int SN_MODE>
__device__ __forceinline__ void seam_stage_weights(T *sw_post, T *sw_next, float *sscalar,
                                                   const T *w_post, const T *w_next,
                                                   const float *scalar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    static_assert(SN_COLS * sizeof(T) % 16 == 0, "the weights are staged in 16-byte pieces");
    constexpr int PIECES = SN_COLS * (int)sizeof(T) / 16;
    for (int i = threadIdx.x; i < PIECES; i += SN_NT) {
        if (SN_MODE != 3)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                             (unsigned)__cvta_generic_to_shared(reinterpret_cast<uint4 *>(sw_post) + i)),
                         "l"(reinterpret_cast<const uint4 *>(w_post) + i));
        if (SN_MODE != 2)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                             (unsigned)__cvta_generic_to_shared(reinterpret_cast<uint4 *>(sw_next) + i)),
                         "l"(reinterpret_cast<const uint4 *>(w_next) + i));
    }
    if (SN_MODE == 1 && threadIdx.x == 0)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(
                         (unsigned)__cvta_generic_to_shared(sscalar)),
                     "l"(scalar));
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
    static_assert(SN_COLS < 0, "staged seam weights need cp.async (sm_80+)");
#endif
}

// `scratch` holds SN_NT/32 floats; every thread of the block must call it. SN_STAGED: w_post,
// w_next and scalar point to shared memory that seam_stage_weights is filling (cp.async): each
// thread waits for its own copies before the first barrier that precedes their first use.
template <int SN_NT, int SN_COLS, int SN_VEC, int SN_MODE, bool SN_CG, bool SN_STAGED = false>
__device__ __forceinline__ void seam_row(T *__restrict__ yrow, const float *xin, float *xout,
                                         const T *__restrict__ arow,
                                         const T *__restrict__ w_post,
                                         const T *__restrict__ w_next,
                                         const float *__restrict__ scalar, float eps,
                                         float *scratch)
{
    constexpr int SN_NVEC = SN_COLS / SN_VEC, SN_NIT = (SN_NVEC + SN_NT - 1) / SN_NT;
    static_assert(SN_COLS % SN_VEC == 0, "SN_VEC must divide SN_COLS");
    const FVec<SN_VEC> *xr = reinterpret_cast<const FVec<SN_VEC> *>(xin);
    FVec<SN_VEC> *xw = reinterpret_cast<FVec<SN_VEC> *>(xout);
    float xv[SN_NIT][SN_VEC];
    static_assert(!SN_STAGED || SN_NT > 32, "staged weights are published by block_sum's barrier");
    if (SN_MODE == 3) {
#pragma unroll
        for (int it = 0; it < SN_NIT; it++) {
            const int i = it * SN_NT + threadIdx.x;
            const FVec<SN_VEC> f = i < SN_NVEC ? xr[i] : FVec<SN_VEC>{};
#pragma unroll
            for (int j = 0; j < SN_VEC; j++)
                xv[it][j] = i < SN_NVEC ? f.v[j] : 0.f;
        }
    } else {
        // the sublayer output a, normalised with w_post and added to the residual; the
        // residual is read with a, so that its round trip overlaps a's and the reduction's
        const TVec<SN_VEC> *wp = reinterpret_cast<const TVec<SN_VEC> *>(w_post);
        float av[SN_NIT][SN_VEC];
        float ss = 0.f;
#pragma unroll
        for (int it = 0; it < SN_NIT; it++) {
            const int i = it * SN_NT + threadIdx.x;
            if (i < SN_NVEC) {
                const TVec<SN_VEC> t = seam_load<SN_VEC, SN_CG>(arow + (size_t)i * SN_VEC);
                const FVec<SN_VEC> f = xr[i];
#pragma unroll
                for (int j = 0; j < SN_VEC; j++) {
                    av[it][j] = to_f32(t.v[j]);
                    xv[it][j] = f.v[j];
                    ss += av[it][j] * av[it][j];
                }
            } else {
#pragma unroll
                for (int j = 0; j < SN_VEC; j++)
                    av[it][j] = xv[it][j] = 0.f;
            }
        }
        if (SN_STAGED) // the row is in; the weights were requested before the grid wait
            seam_stage_wait();
        ss = block_sum<SN_NT>(ss, scratch);
        const float inv_a = rsqrtf(ss / (float)SN_COLS + eps);
        const float s = SN_MODE == 1 ? scalar[0] : 1.f;
#pragma unroll
        for (int it = 0; it < SN_NIT; it++) {
            const int i = it * SN_NT + threadIdx.x;
            if (i < SN_NVEC) {
                const TVec<SN_VEC> g = wp[i];
                FVec<SN_VEC> f;
#pragma unroll
                for (int j = 0; j < SN_VEC; j++) {
                    float v = xv[it][j] + av[it][j] * inv_a * to_f32(g.v[j]);
                    if (SN_MODE == 1)
                        v *= s;
                    xv[it][j] = v;
                    f.v[j] = v;
                }
                if (xw)
                    xw[i] = f;
            }
        }
    }

    TVec<SN_VEC> *yr = reinterpret_cast<TVec<SN_VEC> *>(yrow);
    if (SN_MODE == 2) {
#pragma unroll
        for (int it = 0; it < SN_NIT; it++) {
            const int i = it * SN_NT + threadIdx.x;
            if (i < SN_NVEC) {
                TVec<SN_VEC> o;
#pragma unroll
                for (int j = 0; j < SN_VEC; j++)
                    o.v[j] = from_f32(xv[it][j]);
                yr[i] = o;
            }
        }
        return;
    }
    // the next sublayer's input: RMSNorm_{w_next}(x)
    const TVec<SN_VEC> *wn = reinterpret_cast<const TVec<SN_VEC> *>(w_next);
    float sx = 0.f;
#pragma unroll
    for (int it = 0; it < SN_NIT; it++)
#pragma unroll
        for (int j = 0; j < SN_VEC; j++)
            sx += xv[it][j] * xv[it][j];
    if (SN_STAGED && SN_MODE == 3) // no reduction before this one: w_next is published by it
        seam_stage_wait();
    sx = block_sum<SN_NT>(sx, scratch);
    const float inv_x = rsqrtf(sx / (float)SN_COLS + eps);
#pragma unroll
    for (int it = 0; it < SN_NIT; it++) {
        const int i = it * SN_NT + threadIdx.x;
        if (i < SN_NVEC) {
            const TVec<SN_VEC> g = wn[i];
            TVec<SN_VEC> o;
#pragma unroll
            for (int j = 0; j < SN_VEC; j++)
                o.v[j] = from_f32(xv[it][j] * inv_x * to_f32(g.v[j]));
            yr[i] = o;
        }
    }
}

// The seam after a GEMV whose gridDim.x blocks each wrote part of rows [m0, m0 + mt) of t
// (SN_COLS wide, row-major): the last block of this row group to finish (atomic ticket on
// counters[blockIdx.y], put back to 0 by it, so the workspace stays zeroed) runs seam_row on
// those rows; every other block just returns. Called by every thread of every block, after its
// own stores of t.
template <int SN_NT, int SN_COLS, int SN_VEC, int SN_MODE>
__device__ __forceinline__ void seam_after_gemv(int *__restrict__ counters, int m0, int mt, int M,
                                                T *__restrict__ y, float *__restrict__ x,
                                                const T *__restrict__ t,
                                                const T *__restrict__ w_post,
                                                const T *__restrict__ w_next,
                                                const float *__restrict__ scalar, float eps)
{
    __shared__ int last_block;
    __shared__ float scratch[SN_NT / 32 > 0 ? SN_NT / 32 : 1];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last_block = atomicAdd(&counters[blockIdx.y], 1) == (int)gridDim.x - 1;
    __syncthreads();
    if (!last_block)
        return;
    __threadfence();
    for (int mi = 0; mi < mt && m0 + mi < M; mi++) {
        const size_t row = (size_t)(m0 + mi) * SN_COLS;
        seam_row<SN_NT, SN_COLS, SN_VEC, SN_MODE, true>(y + row, x + row, x + row, t + row, w_post,
                                                        w_next, scalar, eps, scratch);
    }
    if (threadIdx.x == 0)
        counters[blockIdx.y] = 0;
}

// The seam before a one-row GEMV (PRO: matmul_pro, w4a16_pro), run by every block: the row a
// into shared memory `row` (SN_COLS values, 16-byte aligned), x_in + RMSNorm(t) to x_out and a
// to y by block 0 only (the other blocks must still read the old x, hence another buffer).
// SN_STAGED: the weights and scalar are in shared memory, requested by seam_stage_weights.
// `scratch` holds SN_NT/32 floats; every thread of the block calls it; `row` is ready after it.
template <int SN_NT, int SN_COLS, int SN_VEC, int SN_MODE, bool SN_STAGED = false>
__device__ __forceinline__ void seam_prologue(T *row, const float *x_in, float *x_out, T *y,
                                              const T *t, const T *w_post, const T *w_next,
                                              const float *scalar, float eps, float *scratch)
{
    static_assert(SN_COLS % 8 == 0, "the row is copied to y in 16-byte pieces");
    const bool first = blockIdx.x == 0; // one row: gridDim.y is 1
    seam_row<SN_NT, SN_COLS, SN_VEC, SN_MODE, false, SN_STAGED>(row, x_in, first ? x_out : nullptr,
                                                                t, w_post, w_next, scalar, eps,
                                                                scratch);
    __syncthreads();
    if (first)
        for (int i = threadIdx.x; i < SN_COLS / 8; i += SN_NT)
            reinterpret_cast<uint4 *>(y)[i] = reinterpret_cast<const uint4 *>(row)[i];
}
