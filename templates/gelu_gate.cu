// gelu_gate.cu — Gemma 4's MLP gating (GEMMA4.md §2.6): h = gelu_tanh(g) * u, elementwise, with
// transformers' roundings: gelu_tanh(z) = 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))) in
// fp32 rounded to T, then the product in fp32 rounded to T. Grid: x over chunks of a row,
// y over rows; g and u may have row strides (one [rows, 2*inter] gate|up matmul output, or
// the PLE slice of [tokens, layers*256]).
// Defines: THREADS, VEC (elements per load), ITEMS (vectors per thread).
#include "tailor_common.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ h, const T *__restrict__ g, const T *__restrict__ u, int inter,
              int g_ld, int u_ld)
{
    tailor_grid_begin();
    const size_t row = blockIdx.y;
    const int nvec = inter / VEC;
    const TVec<VEC> *gr = reinterpret_cast<const TVec<VEC> *>(g + row * g_ld);
    const TVec<VEC> *ur = reinterpret_cast<const TVec<VEC> *>(u + row * u_ld);
    TVec<VEC> *hr = reinterpret_cast<TVec<VEC> *>(h + row * inter);
    const int base = blockIdx.x * (THREADS * ITEMS) + threadIdx.x;
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int i = base + it * THREADS;
        if (i < nvec) {
            const TVec<VEC> a = gr[i], b = ur[i];
            TVec<VEC> o;
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                const float ga = to_f32(from_f32(tailor_gelu_tanh(to_f32(a.v[j]))));
                o.v[j] = from_f32(ga * to_f32(b.v[j]));
            }
            hr[i] = o;
        }
    }
}
