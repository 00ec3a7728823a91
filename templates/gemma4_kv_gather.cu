// gemma4_kv_gather.cu — rows of a KV cache into attention_prefill's linear layout (op
// "gemma4_kv_gather", tuner/op_gemma4.c): k_lin[r, h, :] = k_cache[h, (first + r) mod slots, :],
// the same for v. One block per (row, KV head), 16-byte copies.
// Defines: HEAD_DIM (a multiple of 8), THREADS.
#include "tailor_common.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ k_lin, T *__restrict__ v_lin, const T *__restrict__ k_cache,
              const T *__restrict__ v_cache, int kv_heads, int slots, int first)
{
    tailor_grid_begin();
    const int r = blockIdx.x, h = blockIdx.y;
    const int slot = (int)(((long long)first + r) % slots);
    const size_t from = ((size_t)h * slots + slot) * HEAD_DIM;
    const size_t to = ((size_t)r * kv_heads + h) * HEAD_DIM;
    const uint4 *ks = reinterpret_cast<const uint4 *>(k_cache + from);
    const uint4 *vs = reinterpret_cast<const uint4 *>(v_cache + from);
    uint4 *kd = reinterpret_cast<uint4 *>(k_lin + to);
    uint4 *vd = reinterpret_cast<uint4 *>(v_lin + to);
    for (int i = threadIdx.x; i < HEAD_DIM / 8; i += THREADS) {
        kd[i] = ks[i];
        vd[i] = vs[i];
    }
}
