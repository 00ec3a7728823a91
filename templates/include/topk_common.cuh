// topk_common.cuh — what the op topk's templates (topk.cu, topk_warp.cu) share: the sort key of
// a value and its column, and the hand-off to the last block of a row.
#pragma once

typedef unsigned long long Key;

// One 64-bit key per value: the value's bits mapped so that unsigned order is float order (-0
// ranked as +0; NaN as key 0, below every other), and ~column below them, so that a lower column
// is a larger key. Keys are distinct, so any correct selection gives the one answer.
__device__ __forceinline__ Key key_of(float v, int col)
{
    if (v != v)
        return 0ull;
    unsigned u = __float_as_uint(v) & (v == 0.f ? 0u : 0xffffffffu); // -0 ranks as +0
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((Key)u << 32) | (unsigned)~col;
}

// After this block's list is written to the workspace: whether it is the last of the row's
// `split` blocks to arrive at *count (every thread gets the answer). *slot is a word of shared
// memory the block may overwrite once this returns; the last block then reads the other
// blocks' lists (with __ldcg) and resets *count to 0.
__device__ __forceinline__ bool topk_last_to_arrive(unsigned int *count, int split, Key *slot)
{
    __threadfence();
    __syncthreads(); // every list written (and every earlier read of *slot done)
    if (threadIdx.x == 0)
        *slot = atomicAdd(count, 1u) == (unsigned)split - 1;
    __syncthreads();
    const bool last = *slot != 0ull;
    __syncthreads(); // every thread has the answer before *slot is written again
    if (last)
        __threadfence();
    return last;
}
