// gemma4_ple.cu — Gemma 4's per-layer inputs (op "gemma4_ple", tuner/op_gemma4.c):
// out = T((RMSNorm_w(c * hidden^-1/2) + e * bf16(sqrt(dim))) * 2^-1/2), in fp32, one rounding.
// One block per (token, layer) slice of `dim` values. GATHER: e is the whole table
// [vocab, layers * dim] and token t reads row ids[t] (the callers keep ids inside the table).
// Defines: THREADS, GATHER.
#include "tailor_common.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ c, const T *__restrict__ e,
              const T *__restrict__ w, int dim, int hidden
#if GATHER
              , const int *__restrict__ ids, int layers
#endif
              )
{
    tailor_grid_begin();
    __shared__ float scratch[THREADS / 32 > 0 ? THREADS / 32 : 1];
    const size_t o = (size_t)blockIdx.x * dim;
#if GATHER
    const unsigned t = blockIdx.x / layers, l = blockIdx.x % layers;
    const size_t eo = ((size_t)ids[t] * layers + l) * dim;
#else
    const size_t eo = o;
#endif
    const float hs = 1.0f / sqrtf((float)hidden);
    const float es = __bfloat162float(__float2bfloat16_rn(sqrtf((float)dim)));
    float ss = 0.f;
    for (int j = threadIdx.x; j < dim; j += THREADS) {
        const float v = to_f32(c[o + j]) * hs;
        ss += v * v;
    }
    ss = block_sum<THREADS>(ss, scratch);
    const float inv = rsqrtf(ss / (float)dim + 1e-6f);
    for (int j = threadIdx.x; j < dim; j += THREADS) {
        const float v = to_f32(c[o + j]) * hs * inv * to_f32(w[j]);
        out[o + j] = from_f32((v + to_f32(e[eo + j]) * es) * 0.70710678118654752f);
    }
}
