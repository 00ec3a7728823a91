// embed.cu — Gemma 4's scaled embedding lookup (GEMMA4.md §2.2, §2.3): out[t, :] =
// T(table[ids[t], :] * T(sqrt(SCALE_DIM))), the scale rounded to T before the multiply and the
// product rounded to T, as transformers does. Ids outside [0, vocab) read row 0 (the pad row).
// Grid: x over chunks of a row, y over tokens.
// Defines: COLS (row width), SCALE_DIM (sqrt of it is the scale: H, or 256 for PLE), OUT_F32
// (1: write the fp32 residual stream), THREADS, VEC (elements per load).
#include "tailor_common.cuh"

#define NVEC (COLS / VEC)

#if OUT_F32
typedef float OutT;
#else
typedef T OutT;
#endif

template <int N>
struct alignas(sizeof(OutT) * N > 16 ? 16 : sizeof(OutT) * N) OVec {
    OutT v[N];
};

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(OutT *__restrict__ out, const T *__restrict__ table, const int *__restrict__ ids,
              int vocab)
{
    tailor_grid_begin();
    const size_t t = blockIdx.y;
    const int i = blockIdx.x * THREADS + threadIdx.x;
    if (i >= NVEC)
        return;
    int id = ids[t];
    if (id < 0 || id >= vocab)
        id = 0;
    const float scale = to_f32(from_f32(sqrtf((float)SCALE_DIM)));
    const TVec<VEC> e = reinterpret_cast<const TVec<VEC> *>(table + (size_t)id * COLS)[i];
    OVec<VEC> o;
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        const T p = from_f32(to_f32(e.v[j]) * scale);
#if OUT_F32
        o.v[j] = to_f32(p);
#else
        o.v[j] = p;
#endif
    }
    reinterpret_cast<OVec<VEC> *>(out + t * COLS)[i] = o;
}
