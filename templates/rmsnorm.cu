// rmsnorm.cu — Gemma 4 RMSNorm: y = x * (mean(x^2) + eps)^-1/2 * w, statistics in fp32,
// multiplied by w itself (not 1 + w), one rounding at the end. One block per row.
// Defines: THREADS (block size), VEC (elements per load), HAS_WEIGHT (0: weightless norm).
#include "tailor_common.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ x, const T *__restrict__ w, int cols,
              float eps)
{
    tailor_grid_begin();
    __shared__ float scratch[THREADS / 32 > 0 ? THREADS / 32 : 1];
    const size_t row = blockIdx.x;
    const TVec<VEC> *xr = reinterpret_cast<const TVec<VEC> *>(x + row * cols);
    TVec<VEC> *yr = reinterpret_cast<TVec<VEC> *>(out + row * cols);
    const TVec<VEC> *wr = reinterpret_cast<const TVec<VEC> *>(w);
    const int nvec = cols / VEC;

    float ss = 0.f;
    for (int i = threadIdx.x; i < nvec; i += THREADS) {
        TVec<VEC> a = xr[i];
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            float f = to_f32(a.v[j]);
            ss += f * f;
        }
    }
    ss = block_sum<THREADS>(ss, scratch);
    const float inv = rsqrtf(ss / (float)cols + eps);

    for (int i = threadIdx.x; i < nvec; i += THREADS) {
        TVec<VEC> a = xr[i];
        TVec<VEC> o;
#if HAS_WEIGHT
        TVec<VEC> g = wr[i];
#endif
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            float f = to_f32(a.v[j]) * inv;
#if HAS_WEIGHT
            f *= to_f32(g.v[j]);
#endif
            o.v[j] = from_f32(f);
        }
        yr[i] = o;
    }
    (void)wr;
}
