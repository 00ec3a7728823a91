// residual_norm.cu — one decoder-layer seam of Gemma 4 (GEMMA4.md §2.4), one block per row, the
// row held in registers (include/seam.cuh): x (fp32 residual, in place) += RMSNorm_{w_post}(a);
// optionally x *= scalar[0] (the layer scalar); y = RMSNorm_{w_next}(x) rounded once to T.
// Defines: COLS (row width), MODE (0 add+norm, 1 add+scale+norm, 2 add then y = T(x),
// 3 norm only: y = RMSNorm_{w_next}(x), x untouched), THREADS, VEC (elements per load).
#include "seam.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ y, float *__restrict__ x, const T *__restrict__ a,
              const T *__restrict__ w_post, const T *__restrict__ w_next,
              const float *__restrict__ scalar, float eps)
{
    tailor_grid_begin();
    __shared__ float scratch[THREADS / 32 > 0 ? THREADS / 32 : 1];
    const size_t row = blockIdx.x;
    seam_row<THREADS, COLS, VEC, MODE, false>(y + row * COLS, x + row * COLS, x + row * COLS,
                                              a + row * COLS, w_post, w_next, scalar, eps, scratch);
}
