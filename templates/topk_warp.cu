// topk_warp.cu — the op topk (tuner/op_topk.c) for k <= 64 with warp shuffles: every warp keeps
// a sorted list of the 64 best keys so far, two a lane (element e is lane e % 32, register
// e / 32), and folds in tiles of 64 of its slice: a tile with no key above the list's 64th is
// skipped; another is sorted by a bitonic network over shuffles and merged (the 64 best of two
// sorted lists: max(X[e], Y[63 - e]) is bitonic, then a bitonic merge). The warps' lists merge in
// a tree through shared memory; with SPLIT > 1 each block leaves its 64 best in `part` and the
// last block to arrive at count[row] merges them (and resets count[row] to 0). Keys as in
// topk.cu: the value's bits in unsigned float order (-0 as +0, NaN as 0) above ~column.
// Defines: THREADS, SPLIT, K (<= 64).
#include "tailor_common.cuh"
#include "topk_common.cuh"


#define NWARP (THREADS / 32)
#define FULL 0xffffffffu

__device__ __forceinline__ Key kmax(Key a, Key b) { return a > b ? a : b; }
__device__ __forceinline__ Key kmin(Key a, Key b) { return a > b ? b : a; }

// one compare-exchange of the pair (e, e ^ s), s < 32, for this lane's element v: the lower
// element of the pair keeps the larger key where the pair sorts descending
__device__ __forceinline__ Key exchange(Key v, int s, bool desc)
{
    const Key o = __shfl_xor_sync(FULL, v, s);
    const bool lower = (threadIdx.x & s) == 0;
    return lower == desc ? kmax(v, o) : kmin(v, o);
}

// a bitonic sequence of 64 keys sorted descending: stride 32 within the lane, then shuffles
__device__ __forceinline__ void merge_bitonic64(Key &a, Key &b)
{
    const Key h = kmax(a, b), l = kmin(a, b);
    a = h;
    b = l;
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        a = exchange(a, s, true);
        b = exchange(b, s, true);
    }
}

// the warp's 64 keys (a: element lane, b: element lane + 32) sorted descending
__device__ __forceinline__ void sort64(Key &a, Key &b)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int size = 2; size <= 32; size <<= 1) {
#pragma unroll
        for (int s = size >> 1; s > 0; s >>= 1) {
            a = exchange(a, s, (lane & size) == 0);
            b = exchange(b, s, ((lane + 32) & size) == 0);
        }
    }
    merge_bitonic64(a, b); // size 64
}

// (a, b) := the 64 best of the sorted lists (a, b) and (ya, yb), sorted descending
__device__ __forceinline__ void merge64(Key &a, Key &b, Key ya, Key yb)
{
    const int lane = threadIdx.x & 31;
    a = kmax(a, __shfl_sync(FULL, yb, 31 - lane)); // Y[63 - lane]
    b = kmax(b, __shfl_sync(FULL, ya, 31 - lane)); // Y[31 - lane]
    merge_bitonic64(a, b);
}

// the block's warps' lists merged into warp 0's (a, b); every thread passes the barriers
__device__ __forceinline__ void block_merge(Key &a, Key &b, Key (*lists)[64])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    lists[warp][lane] = a;
    lists[warp][lane + 32] = b;
    __syncthreads();
#pragma unroll 1
    for (int w = 1; w < NWARP; w <<= 1) {
        if ((warp & (2 * w - 1)) == 0 && warp + w < NWARP) {
            merge64(a, b, lists[warp + w][lane], lists[warp + w][lane + 32]);
            lists[warp][lane] = a;
            lists[warp][lane + 32] = b;
        }
        __syncthreads();
    }
}

// warp 0: the row's K best from its sorted (a, b), values read again from the row
__device__ __forceinline__ void write_best(Key a, Key b, const float *xr, float *vals, int *ids)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int e = lane + 32 * j;
        const Key key = j ? b : a;
        const int col = (int)~(unsigned)key;
        if (e < K) {
            vals[e] = key ? xr[col] : 0.f;
            ids[e] = key ? col : -1;
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(float *__restrict__ vals, int *__restrict__ ids, const float *__restrict__ x, int n,
              Key *__restrict__ part, unsigned int *__restrict__ count)
{
    tailor_grid_begin();
    __shared__ Key lists[NWARP][64];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t row = blockIdx.y;
    const float *xr = x + row * (size_t)n;
    const int per = (n + SPLIT - 1) / SPLIT;
    const int begin = blockIdx.x * per, end = min(begin + per, n);
    Key a = 0ull, b = 0ull; // the warp's 64 best so far (keys of 0: none yet)
    for (int base = begin + warp * 64; base < end; base += NWARP * 64) {
        const int c0 = base + lane, c1 = base + 32 + lane;
        Key ya = c0 < end ? key_of(xr[c0], c0) : 0ull;
        Key yb = c1 < end ? key_of(xr[c1], c1) : 0ull;
        const Key least = __shfl_sync(FULL, b, 31); // the list's 64th
        if (!__any_sync(FULL, ya > least || yb > least))
            continue;
        sort64(ya, yb);
        merge64(a, b, ya, yb);
    }
    block_merge(a, b, lists);
#if SPLIT == 1
    (void)part;
    (void)count;
    if (warp == 0)
        write_best(a, b, xr, vals + row * K, ids + row * K);
#else
    if (warp == 0) {
        Key *mine = part + (row * SPLIT + blockIdx.x) * 64;
        mine[lane] = a;
        mine[lane + 32] = b;
    }
    if (!topk_last_to_arrive(&count[row], SPLIT, &lists[0][0]))
        return;
    const Key *all = part + row * SPLIT * 64;
    a = b = 0ull;
    for (int l = warp; l < SPLIT; l += NWARP)
        merge64(a, b, __ldcg(&all[l * 64 + lane]), __ldcg(&all[l * 64 + 32 + lane]));
    block_merge(a, b, lists);
    if (warp == 0)
        write_best(a, b, xr, vals + row * K, ids + row * K);
    if (threadIdx.x == 0)
        count[row] = 0;
#endif
}
