// topk_warp.cu — the op topk (tuner/op_topk.c) for k <= 128 with warp shuffles: every warp keeps
// a sorted list of the LIST_LEN best keys so far (64 for k <= 64, else 128), PER_LANE a lane
// (element e is lane e % 32, register e / 32), and folds in tiles of LIST_LEN of its slice: a
// tile with no key above the list's last is skipped; another is sorted by a bitonic network
// (strides of 32 and more inside a lane's registers, the rest over shuffles) and merged (the
// LIST_LEN best of two sorted lists: max(X[e], Y[LIST_LEN - 1 - e]) is bitonic, then a bitonic
// merge). The warps' lists merge in a tree through shared memory; with SPLIT > 1 each block
// leaves its list in `part` and the last block to arrive at count[row] merges them (and resets
// count[row] to 0). Keys as in topk.cu: the value's bits in unsigned float order (-0 as +0, NaN
// as 0) above ~column.
// Defines: THREADS, SPLIT, K (<= 128).
#include "tailor_common.cuh"
#include "topk_common.cuh"

#define NWARP (THREADS / 32)
#define FULL 0xffffffffu

constexpr int LIST_LEN = K <= 64 ? 64 : 128; // the list's length
constexpr int PER_LANE = LIST_LEN / 32;      // keys a lane
static_assert(K >= 1 && K <= 128, "topk_warp keeps lists of at most 128 keys");

__device__ __forceinline__ Key kmax(Key a, Key b) { return a > b ? a : b; }
__device__ __forceinline__ Key kmin(Key a, Key b) { return a > b ? b : a; }

// One step of a bitonic network over the warp's LIST_LEN keys v (element lane + 32 j in v[j]):
// every pair (e, e ^ s) put in order, descending where e & size is 0 (the lower element keeps
// the larger key), else ascending; size is the bitonic run the step belongs to (LIST_LEN: all
// descending).
__device__ __forceinline__ void bitonic_step(Key (&v)[PER_LANE], int size, int s)
{
    const int lane = threadIdx.x & 31;
    if (s >= 32) { // partners in this lane's registers j and j ^ (s / 32)
#pragma unroll
        for (int j = 0; j < PER_LANE; j++) {
            const int jp = j ^ (s / 32);
            if (jp > j) {
                const bool desc = ((lane + 32 * j) & size) == 0;
                const Key h = kmax(v[j], v[jp]), l = kmin(v[j], v[jp]);
                v[j] = desc ? h : l;
                v[jp] = desc ? l : h;
            }
        }
        return;
    }
    const bool lower = (lane & s) == 0;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++) {
        const bool desc = ((lane + 32 * j) & size) == 0;
        const Key o = __shfl_xor_sync(FULL, v[j], s);
        v[j] = lower == desc ? kmax(v[j], o) : kmin(v[j], o);
    }
}

// a bitonic sequence of LIST_LEN keys sorted descending
__device__ __forceinline__ void merge_bitonic(Key (&v)[PER_LANE])
{
#pragma unroll
    for (int s = LIST_LEN / 2; s > 0; s >>= 1)
        bitonic_step(v, LIST_LEN, s);
}

// the warp's LIST_LEN keys sorted descending
__device__ __forceinline__ void sort_list(Key (&v)[PER_LANE])
{
#pragma unroll
    for (int size = 2; size < LIST_LEN; size <<= 1)
#pragma unroll
        for (int s = size >> 1; s > 0; s >>= 1)
            bitonic_step(v, size, s);
    merge_bitonic(v);
}

// v := the LIST_LEN best of the sorted lists v and y, sorted descending
__device__ __forceinline__ void merge_lists(Key (&v)[PER_LANE], const Key (&y)[PER_LANE])
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++) // Y[LIST_LEN - 1 - e]: lane 31 - lane, register
                                        // PER_LANE - 1 - j
        v[j] = kmax(v[j], __shfl_sync(FULL, y[PER_LANE - 1 - j], 31 - lane));
    merge_bitonic(v);
}

// the sorted list of LIST_LEN keys at p (element e at p[e]) merged into v
__device__ __forceinline__ void merge_from(Key (&v)[PER_LANE], const Key *p, bool global)
{
    const int lane = threadIdx.x & 31;
    Key y[PER_LANE];
#pragma unroll
    for (int j = 0; j < PER_LANE; j++)
        y[j] = global ? __ldcg(&p[lane + 32 * j]) : p[lane + 32 * j];
    merge_lists(v, y);
}

__device__ __forceinline__ void store_list(Key *p, const Key (&v)[PER_LANE])
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++)
        p[lane + 32 * j] = v[j];
}

// the block's warps' lists merged into warp 0's v; every thread passes the barriers
__device__ __forceinline__ void block_merge(Key (&v)[PER_LANE], Key (*lists)[LIST_LEN])
{
    const int warp = threadIdx.x >> 5;
    store_list(lists[warp], v);
    __syncthreads();
#pragma unroll 1
    for (int w = 1; w < NWARP; w <<= 1) {
        if ((warp & (2 * w - 1)) == 0 && warp + w < NWARP) {
            merge_from(v, lists[warp + w], false);
            store_list(lists[warp], v);
        }
        __syncthreads();
    }
}

// warp 0: the row's K best from its sorted v, values read again from the row
__device__ __forceinline__ void write_best(const Key (&v)[PER_LANE], const float *xr, float *vals,
                                           int *ids)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++) {
        const int e = lane + 32 * j, col = (int)~(unsigned)v[j];
        if (e < K) {
            vals[e] = v[j] ? xr[col] : 0.f;
            ids[e] = v[j] ? col : -1;
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(float *__restrict__ vals, int *__restrict__ ids, const float *__restrict__ x, int n,
              Key *__restrict__ part, unsigned int *__restrict__ count)
{
    tailor_grid_begin();
    __shared__ Key lists[NWARP][LIST_LEN];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const size_t row = blockIdx.y;
    const float *xr = x + row * (size_t)n;
    const int per = (n + SPLIT - 1) / SPLIT;
    const int begin = blockIdx.x * per, end = min(begin + per, n);
    Key v[PER_LANE]; // the warp's LIST_LEN best so far (keys of 0: none yet)
#pragma unroll
    for (int j = 0; j < PER_LANE; j++)
        v[j] = 0ull;
    for (int base = begin + warp * LIST_LEN; base < end; base += NWARP * LIST_LEN) {
        Key y[PER_LANE];
        bool above = false;
        const Key least = __shfl_sync(FULL, v[PER_LANE - 1], 31); // the list's LIST_LEN-th
#pragma unroll
        for (int j = 0; j < PER_LANE; j++) {
            const int c = base + 32 * j + lane;
            y[j] = c < end ? key_of(xr[c], c) : 0ull;
            above |= y[j] > least;
        }
        if (!__any_sync(FULL, above))
            continue;
        sort_list(y);
        merge_lists(v, y);
    }
    block_merge(v, lists);
#if SPLIT == 1
    (void)part;
    (void)count;
    if (warp == 0)
        write_best(v, xr, vals + row * K, ids + row * K);
#else
    if (warp == 0)
        store_list(part + (row * SPLIT + blockIdx.x) * LIST_LEN, v);
    if (!topk_last_to_arrive(&count[row], SPLIT, &lists[0][0]))
        return;
    const Key *all = part + row * SPLIT * LIST_LEN;
#pragma unroll
    for (int j = 0; j < PER_LANE; j++)
        v[j] = 0ull;
    for (int l = warp; l < SPLIT; l += NWARP)
        merge_from(v, all + l * LIST_LEN, true);
    block_merge(v, lists);
    if (warp == 0)
        write_best(v, xr, vals + row * K, ids + row * K);
    if (threadIdx.x == 0)
        count[row] = 0;
#endif
}
