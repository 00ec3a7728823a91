// dense_common.cuh — what the dense 16-bit matmul templates share beyond the memory and
// tensor-core primitives of tc_common.cuh: loads of the activations and the conversion of a
// 16-byte chunk to floats.
#pragma once

#include "tc_common.cuh"

// 16 bytes read many times by the block (activations): through the read-only cache.
__device__ __forceinline__ uint4 dn_load_shared_by_block(const void *p)
{
    return __ldg(reinterpret_cast<const uint4 *>(p));
}

// The four T2 pairs of 16 bytes as floats, into f[0..7] in memory order.
__device__ __forceinline__ void dn_unpack8(uint4 v, float f[8])
{
    const tc_u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
#if defined(TAILOR_DTYPE_BF16)
        // bf16 is the upper half of an fp32: a shift and a mask, no conversion instruction
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
#else
        T2 h = *reinterpret_cast<const T2 *>(&w[i]);
        float2 p = to_f32x2(h);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
#endif
    }
}

