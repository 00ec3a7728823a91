// topk.cu — each row's K best values with their columns (op "topk", tuner/op_topk.c): larger
// value first, lower column first among equals, NaN never; a row with fewer than K values that
// are not NaN ends with (0, -1). The order is that of one 64-bit key per value: the value's bits
// mapped so that unsigned order is float order (-0 ranked as +0, NaN as key 0, below all), and
// ~column below them, so that a lower column is a larger key. Keys are distinct, so any correct
// sort gives the one answer.
// Grid (SPLIT, rows): each block sorts its slice of the row (CHUNK_P keys, padded with 0) in
// shared memory with a bitonic network and leaves its K best in `part`; the block that arrives
// last at count[row] sorts the SPLIT x K survivors (MERGE_P keys) and writes the row's K best,
// then resets count[row] to 0 (zero the workspace once). SPLIT = 1: one block sorts the row.
// Defines: THREADS, SPLIT, K, CHUNK_P, MERGE_P (powers of two: CHUNK_P >= the slice,
// MERGE_P >= SPLIT x K, 1 when SPLIT = 1).
#include "tailor_common.cuh"
#include "topk_common.cuh"


// sorts s[0..P) largest first: a bitonic network, P / 2 compare-exchanges a pass
template <int P>
__device__ __forceinline__ void sort_desc(Key *s)
{
#pragma unroll 1
    for (int size = 2; size <= P; size <<= 1) {
#pragma unroll 1
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < P / 2; t += THREADS) {
                const int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;
                const Key a = s[lo], b = s[hi];
                if ((a < b) == ((lo & size) == 0)) { // descending where lo & size is 0
                    s[lo] = b;
                    s[hi] = a;
                }
            }
            __syncthreads();
        }
    }
}

// the row's K best from sorted keys s[0..P): the values read again from the row itself
__device__ __forceinline__ void write_best(const Key *s, int P, const float *xr, float *vals,
                                           int *ids)
{
    for (int i = threadIdx.x; i < K; i += THREADS) {
        const Key key = i < P ? s[i] : 0ull;
        const int col = (int)~(unsigned)key;
        vals[i] = key ? xr[col] : 0.f;
        ids[i] = key ? col : -1;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(float *__restrict__ vals, int *__restrict__ ids, const float *__restrict__ x, int n,
              Key *__restrict__ part, unsigned int *__restrict__ count)
{
    tailor_grid_begin();
    extern __shared__ Key keys[];
    const size_t row = blockIdx.y;
    const float *xr = x + row * (size_t)n;
    const int per = (n + SPLIT - 1) / SPLIT;
    const int begin = blockIdx.x * per, end = min(begin + per, n);
    for (int i = threadIdx.x; i < CHUNK_P; i += THREADS) {
        const int c = begin + i;
        keys[i] = c < end ? key_of(xr[c], c) : 0ull;
    }
    __syncthreads();
    sort_desc<CHUNK_P>(keys);
#if SPLIT == 1
    (void)part;
    (void)count;
    write_best(keys, CHUNK_P, xr, vals + row * K, ids + row * K);
#else
    Key *mine = part + (row * SPLIT + blockIdx.x) * K;
    for (int i = threadIdx.x; i < K; i += THREADS)
        mine[i] = i < CHUNK_P ? keys[i] : 0ull;
    if (!topk_last_to_arrive(&count[row], SPLIT, &keys[0])) // keys[] read out: reusable
        return;
    const Key *all = part + row * SPLIT * K;
    for (int i = threadIdx.x; i < MERGE_P; i += THREADS)
        keys[i] = i < SPLIT * K ? __ldcg(&all[i]) : 0ull;
    __syncthreads();
    sort_desc<MERGE_P>(keys);
    write_best(keys, MERGE_P, xr, vals + row * K, ids + row * K);
    if (threadIdx.x == 0)
        count[row] = 0;
#endif
}
