// qk_norm_rope.cu — Gemma 4's per-head q/k/v preparation (GEMMA4.md §2.5): RMSNorm over each
// head vector (fp32 statistics, times w itself, or weightless for v), then NeoX RoPE (pair j
// with j + HD/2) at the token's position, one rounding to T at the end. TPR threads per head
// row, RPB rows per block; each thread owns the same slots of both halves, so the rotation is
// local and the kernel is safe in place (out == x): every element is read before any is written.
// Defines: HD (head dim), HAS_WEIGHT, ROT (pairs that rotate: HD/2 default, 64 of 256
// proportional, 0 none), VEC, TPR (8, 16 or 32: a row reduces with shuffles), RPB.
#include "tailor_common.cuh"

#define HALF (HD / 2)
#define NIT (HALF / (TPR * VEC))

extern "C" __global__ void __launch_bounds__(TPR * RPB)
TAILOR_KERNEL(T *out, const T *x, const T *__restrict__ w, const int *__restrict__ pos,
              const float *__restrict__ inv_freq, int rows, int heads, float eps)
{
    tailor_grid_begin();
    const int lane = threadIdx.x % TPR;
    const int r = blockIdx.x * RPB + threadIdx.x / TPR;
    const bool live = r < rows;
    // rows past the end compute on the last row and store nothing (every lane shuffles)
    const size_t row = (size_t)(live ? r : rows - 1);
    const TVec<VEC> *xr = reinterpret_cast<const TVec<VEC> *>(x + row * HD);
    float lo[NIT][VEC], hi[NIT][VEC];
    float ss = 0.f;
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int v = it * TPR + lane;
        TVec<VEC> a = xr[v], b = xr[v + HALF / VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            lo[it][j] = to_f32(a.v[j]);
            hi[it][j] = to_f32(b.v[j]);
            ss += lo[it][j] * lo[it][j] + hi[it][j] * hi[it][j];
        }
    }
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(ss / (float)HD + eps);
#if ROT > 0
    const float p = (float)pos[row / heads];
#else
    (void)pos;
    (void)inv_freq;
    (void)heads;
#endif
    const TVec<VEC> *wr = reinterpret_cast<const TVec<VEC> *>(w);
    TVec<VEC> *yr = reinterpret_cast<TVec<VEC> *>(out + row * HD);
#pragma unroll
    for (int it = 0; it < NIT; it++) {
        const int v = it * TPR + lane;
        TVec<VEC> oa, ob;
#if HAS_WEIGHT
        const TVec<VEC> ga = wr[v], gb = wr[v + HALF / VEC];
#else
        (void)wr;
#endif
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            float a = lo[it][j] * inv, b = hi[it][j] * inv;
#if HAS_WEIGHT
            a *= to_f32(ga.v[j]);
            b *= to_f32(gb.v[j]);
#endif
#if ROT > 0
            const int k = v * VEC + j;
            if (k < ROT) {
                float s, c;
                sincosf(p * inv_freq[k], &s, &c);
                const float ra = a * c - b * s, rb = b * c + a * s;
                a = ra;
                b = rb;
            }
#endif
            oa.v[j] = from_f32(a);
            ob.v[j] = from_f32(b);
        }
        if (live) {
            yr[v] = oa;
            yr[v + HALF / VEC] = ob;
        }
    }
}
