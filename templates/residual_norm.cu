// residual_norm.cu — one decoder-layer seam of Gemma 4 (GEMMA4.md §2.4), one block per row, the
// row held in registers (include/seam.cuh): x (fp32 residual, in place) += RMSNorm_{w_post}(a);
// optionally x *= scalar[0] (the layer scalar); y = RMSNorm_{w_next}(x) rounded once to T.
// Defines: COLS (row width), MODE (0 add+norm, 1 add+scale+norm, 2 add then y = T(x),
// 3 norm only: y = RMSNorm_{w_next}(x), x untouched), THREADS, VEC (elements per load), RN_ASYNC
// (0/1; 1 from sm_80 with THREADS > 32, spacelib's seam_async; below, plain loads): the
// weights requested with cp.async (seam_stage_weights), so that the threads reach the grid wait
// without waiting for them (with plain loads they wait there for DRAM: after a ~1 µs kernel the
// hand-off then waits for the staging; docs/perf/small-ops.md, session 17).
#include "seam.cuh"

// The norms' weights the mode reads (w_post unless MODE 3, w_next unless MODE 2), staged in
// shared memory before the grid wait, then block_sum's scratch, then the layer scalar.
#define RN_NW ((MODE != 3) + (MODE != 2))
#define RN_WFLOATS ((RN_NW * COLS * (int)sizeof(T) + 3) / 4)
#define RN_SCRATCH (THREADS / 32 > 0 ? THREADS / 32 : 1)
#ifndef RN_ASYNC
#define RN_ASYNC 0
#endif

// src's COLS values into dst, VEC at a time.
__device__ __forceinline__ void rn_stage(T *dst, const T *__restrict__ src)
{
    for (int i = threadIdx.x; i < COLS / VEC; i += THREADS)
        reinterpret_cast<TVec<VEC> *>(dst)[i] = reinterpret_cast<const TVec<VEC> *>(src)[i];
}

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ y, float *__restrict__ x, const T *__restrict__ a,
              const T *__restrict__ w_post, const T *__restrict__ w_next,
              const float *__restrict__ scalar, float eps)
{
    __shared__ __align__(16) float smem[RN_WFLOATS + RN_SCRATCH + 1];
    T *sw = reinterpret_cast<T *>(smem);
    T *sw_post = sw, *sw_next = MODE == 3 ? sw : sw + (MODE == 2 ? 0 : COLS);
    float *scratch = smem + RN_WFLOATS, *sscalar = scratch + RN_SCRATCH;
    // No kernel of a forward writes the weights or the scalar: they are read before the wait,
    // so their DRAM latency (otherwise two dependent round trips after the row's reductions)
    // overlaps the predecessor's tail (tailor_grid_begin's one exception).
#if RN_ASYNC
    seam_stage_weights<THREADS, COLS, MODE>(sw_post, sw_next, sscalar, w_post, w_next, scalar);
    tailor_grid_begin();
    const size_t row = blockIdx.x;
    seam_row<THREADS, COLS, VEC, MODE, false, true>(y + row * COLS, x + row * COLS, x + row * COLS,
                                                    a + row * COLS, sw_post, sw_next, sscalar,
                                                    eps, scratch);
#else
    if (MODE != 3)
        rn_stage(sw_post, w_post);
    if (MODE != 2)
        rn_stage(sw_next, w_next);
    if (MODE == 1 && threadIdx.x == 0)
        *sscalar = scalar[0];
    __syncthreads();
    tailor_grid_begin();
    const size_t row = blockIdx.x;
    seam_row<THREADS, COLS, VEC, MODE, false>(y + row * COLS, x + row * COLS, x + row * COLS,
                                              a + row * COLS, sw_post, sw_next, sscalar, eps,
                                              scratch);
#endif
}
