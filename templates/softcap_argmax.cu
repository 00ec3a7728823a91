// softcap_argmax.cu — Gemma 4's final logit softcap (GEMMA4.md §2.7) and greedy choice:
// capped = 30 tanh(x / 30) in fp32 (written when WRITE), ids[row] = the index of the largest
// logit (ties: the lowest index; NaN never wins; a row of NaN gives -1). tanh is monotonic, so
// the argmax of the raw logits is an argmax of the capped ones, and it is exact.
// Grid (SPLIT, rows): SPLIT blocks share a row; each leaves its (value, index) in part_val /
// part_idx, and the block that arrives last at count[row] reduces them, writes ids[row] and
// resets count[row] to 0, so the workspace stays ready for the next launch (zero it once).
// FEED: the block that writes the last row's id also writes next_tok (the id, 0 for a row of
// NaN) and next_pos (that row's position + 1): a decode step feeding the next on the device.
// Defines: IN_F32 (logits are fp32, else T), WRITE, FEED, THREADS, VEC, SPLIT.
#include "tailor_common.cuh"

#if IN_F32
typedef float InT;
#else
typedef T InT;
#endif

#define NWARP (THREADS / 32)
#define NO_INDEX 0x7fffffff
#define NEG_INF (-__int_as_float(0x7f800000))

template <typename E, int N>
struct alignas(sizeof(E) * N > 16 ? 16 : sizeof(E) * N) Vec {
    E v[N];
};

__device__ __forceinline__ float in_f32(InT v)
{
#if IN_F32
    return v;
#else
    return to_f32(v);
#endif
}

// keeps (v, i) the better of the two: larger value, or equal value and lower index
__device__ __forceinline__ void merge(float &v, int &i, float ov, int oi)
{
    if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}

// the block's best pair, valid in thread 0
__device__ __forceinline__ void block_argmax(float &v, int &i, float *sv, int *si)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        merge(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = v;
        si[warp] = i;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < NWARP ? sv[lane] : NEG_INF;
        i = lane < NWARP ? si[lane] : NO_INDEX;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            merge(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    }
}

#if FEED
// the last row's token (0 for a row of NaN) and position + 1, for the next step; pos is read
// before next_pos is written (they may be one word)
__device__ __forceinline__ void feed_next(const int *pos, int *next_tok, int *next_pos, int row,
                                          int bi)
{
    const int p = pos[row];
    *next_tok = bi == NO_INDEX ? 0 : bi;
    *next_pos = p + 1;
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(float *__restrict__ capped, int *__restrict__ ids, const InT *__restrict__ logits,
              int vocab, float *__restrict__ part_val, int *__restrict__ part_idx,
              unsigned int *__restrict__ count
#if FEED
              , const int *pos, int *next_tok, int *next_pos
#endif
              )
{
    tailor_grid_begin();
    __shared__ float sv[NWARP];
    __shared__ int si[NWARP];
    const size_t row = blockIdx.y;
    const int nvec = vocab / VEC;
    const int per = (nvec + SPLIT - 1) / SPLIT;
    const int begin = blockIdx.x * per;
    const int end = min(begin + per, nvec);
    const Vec<InT, VEC> *xr = reinterpret_cast<const Vec<InT, VEC> *>(logits + row * vocab);
    Vec<float, VEC> *cr = reinterpret_cast<Vec<float, VEC> *>(capped + row * vocab);
    float best = NEG_INF;
    int bi = NO_INDEX;
    for (int i = begin + threadIdx.x; i < end; i += THREADS) {
        const Vec<InT, VEC> a = xr[i];
        Vec<float, VEC> c;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            const float x = in_f32(a.v[j]);
            merge(best, bi, x, i * VEC + j);
            c.v[j] = 30.f * tanhf(x / 30.f);
        }
#if WRITE
        cr[i] = c;
#endif
    }
#if !WRITE
    (void)cr;
#endif
    block_argmax(best, bi, sv, si);
#if SPLIT == 1
    (void)part_val;
    (void)part_idx;
    (void)count;
    if (threadIdx.x == 0) {
        ids[row] = bi == NO_INDEX ? -1 : bi;
#if FEED
        if (row == gridDim.y - 1)
            feed_next(pos, next_tok, next_pos, (int)row, bi);
#endif
    }
#else
    __shared__ int last;
    if (threadIdx.x == 0) {
        part_val[row * SPLIT + blockIdx.x] = best;
        part_idx[row * SPLIT + blockIdx.x] = bi;
        __threadfence();
        last = atomicAdd(&count[row], 1u) == SPLIT - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    best = NEG_INF;
    bi = NO_INDEX;
    for (int b = threadIdx.x; b < SPLIT; b += THREADS)
        merge(best, bi, __ldcg(&part_val[row * SPLIT + b]), __ldcg(&part_idx[row * SPLIT + b]));
    block_argmax(best, bi, sv, si);
    if (threadIdx.x == 0) {
        ids[row] = bi == NO_INDEX ? -1 : bi;
#if FEED
        if (row == gridDim.y - 1)
            feed_next(pos, next_tok, next_pos, (int)row, bi);
#endif
        count[row] = 0;
    }
#endif
}
