// gemma4_fill.cu — deterministic pseudo-random device data (op "gemma4_fill",
// tuner/op_gemma4.c): benchmark weights made on the GPU. Word i is hash(seed, i) (mode 0), or two
// dtype values offset + (hash % 2001 - 1000) * scale (mode 1), multiply and add rounded
// separately (no fused multiply-add) so that the C reference agrees bit for bit.
// Defines: THREADS.
#include "tailor_common.cuh"

__device__ __forceinline__ unsigned fill_hash(unsigned seed, unsigned i)
{
    unsigned x = i * 0x9e3779b1u + seed * 0x85ebca6bu + 0x27d4eb2fu;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned fill_half(unsigned h, float off, float scale)
{
    float v = __fmul_rn((float)((int)(h % 2001u) - 1000), scale);
    v = __fadd_rn(v, off);
    T x = from_f32(v);
    return (unsigned)*reinterpret_cast<unsigned short *>(&x);
}

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(unsigned *__restrict__ out, int words, int mode, int seed, float scale, float off)
{
    tailor_grid_begin();
    const unsigned s = (unsigned)seed;
    for (unsigned i = blockIdx.x * THREADS + threadIdx.x; i < (unsigned)words;
         i += gridDim.x * THREADS) {
        unsigned w = fill_hash(s, i);
        if (mode == 1)
            w = fill_half(fill_hash(s ^ 0x5bd1e995u, 2u * i), off, scale) |
                (fill_half(fill_hash(s ^ 0x5bd1e995u, 2u * i + 1u), off, scale) << 16);
        out[i] = w;
    }
}
