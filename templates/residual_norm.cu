// residual_norm.cu — one decoder-layer seam of Gemma 4 (GEMMA4.md §2.4), one block per row, the
// row held in registers: x (fp32 residual, in place) += RMSNorm_{w_post}(a); optionally
// x *= scalar[0] (the layer scalar); y = RMSNorm_{w_next}(x) rounded once to T.
// All arithmetic in fp32 (statistics, weights multiplied as w itself, eps passed in).
// Defines: COLS (row width), MODE (0 add+norm, 1 add+scale+norm, 2 add then y = T(x),
// 3 norm only: y = RMSNorm_{w_next}(x), x untouched), THREADS, VEC (elements per load).
#include "tailor_common.cuh"

#define NVEC (COLS / VEC)
#define NIT ((NVEC + THREADS - 1) / THREADS)

template <int N>
struct alignas(4 * N > 16 ? 16 : 4 * N) FVec {
    float v[N];
};

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ y, float *__restrict__ x, const T *__restrict__ a,
              const T *__restrict__ w_post, const T *__restrict__ w_next,
              const float *__restrict__ scalar, float eps)
{
    tailor_grid_begin();
    __shared__ float scratch[THREADS / 32 > 0 ? THREADS / 32 : 1];
    const size_t row = blockIdx.x;
    FVec<VEC> *xr = reinterpret_cast<FVec<VEC> *>(x + row * COLS);
    float xv[NIT][VEC];

#if MODE == 3
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int i = it * THREADS + threadIdx.x;
        if (i < NVEC) {
            FVec<VEC> f = xr[i];
#pragma unroll
            for (int j = 0; j < VEC; j++)
                xv[it][j] = f.v[j];
        } else {
#pragma unroll
            for (int j = 0; j < VEC; j++)
                xv[it][j] = 0.f;
        }
    }
    (void)a;
    (void)w_post;
    (void)scalar;
#else
    // the sublayer output a, normalised with w_post and added to the residual
    const TVec<VEC> *ar = reinterpret_cast<const TVec<VEC> *>(a + row * COLS);
    const TVec<VEC> *wp = reinterpret_cast<const TVec<VEC> *>(w_post);
    float av[NIT][VEC];
    float ss = 0.f;
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int i = it * THREADS + threadIdx.x;
        if (i < NVEC) {
            TVec<VEC> t = ar[i];
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                av[it][j] = to_f32(t.v[j]);
                ss += av[it][j] * av[it][j];
            }
        } else {
#pragma unroll
            for (int j = 0; j < VEC; j++)
                av[it][j] = 0.f;
        }
    }
    ss = block_sum<THREADS>(ss, scratch);
    const float inv_a = rsqrtf(ss / (float)COLS + eps);
#if MODE == 1
    const float s = scalar[0];
#else
    (void)scalar;
#endif
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int i = it * THREADS + threadIdx.x;
        if (i < NVEC) {
            TVec<VEC> g = wp[i];
            FVec<VEC> f = xr[i];
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                float v = f.v[j] + av[it][j] * inv_a * to_f32(g.v[j]);
#if MODE == 1
                v *= s;
#endif
                xv[it][j] = v;
                f.v[j] = v;
            }
            xr[i] = f;
        } else {
#pragma unroll
            for (int j = 0; j < VEC; j++)
                xv[it][j] = 0.f;
        }
    }
#endif

    TVec<VEC> *yr = reinterpret_cast<TVec<VEC> *>(y + row * COLS);
#if MODE == 2
    (void)w_next;
    (void)eps;
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int i = it * THREADS + threadIdx.x;
        if (i < NVEC) {
            TVec<VEC> o;
#pragma unroll
            for (int j = 0; j < VEC; j++)
                o.v[j] = from_f32(xv[it][j]);
            yr[i] = o;
        }
    }
#else
    // the next sublayer's input: RMSNorm_{w_next}(x)
    const TVec<VEC> *wn = reinterpret_cast<const TVec<VEC> *>(w_next);
    float sx = 0.f;
#pragma unroll
    for (int it = 0; it < NIT; it++)
#pragma unroll
        for (int j = 0; j < VEC; j++)
            sx += xv[it][j] * xv[it][j];
    sx = block_sum<THREADS>(sx, scratch);
    const float inv_x = rsqrtf(sx / (float)COLS + eps);
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int i = it * THREADS + threadIdx.x;
        if (i < NVEC) {
            TVec<VEC> g = wn[i];
            TVec<VEC> o;
#pragma unroll
            for (int j = 0; j < VEC; j++)
                o.v[j] = from_f32(xv[it][j] * inv_x * to_f32(g.v[j]));
            yr[i] = o;
        }
    }
#endif
}
