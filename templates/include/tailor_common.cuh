// tailor_common.cuh — what every template shares: the element type chosen by the host
// (TAILOR_DTYPE_FP16 / TAILOR_DTYPE_BF16), conversions, and warp reductions.
// The host decides every variant and passes it as -D defines; templates only consume them.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if defined(TAILOR_DTYPE_BF16)
typedef __nv_bfloat16 T;
typedef __nv_bfloat162 T2;
__device__ __forceinline__ float to_f32(T v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_f32(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float2 to_f32x2(T2 v) { return __bfloat1622float2(v); }
__device__ __forceinline__ T2 from_f32x2(float2 v) { return __float22bfloat162_rn(v); }
#elif defined(TAILOR_DTYPE_FP16)
typedef __half T;
typedef __half2 T2;
__device__ __forceinline__ float to_f32(T v) { return __half2float(v); }
__device__ __forceinline__ T from_f32(float v) { return __float2half_rn(v); }
__device__ __forceinline__ float2 to_f32x2(T2 v) { return __half22float2(v); }
__device__ __forceinline__ T2 from_f32x2(float2 v) { return __float22half2_rn(v); }
#else
#error "tailor: the host must define TAILOR_DTYPE_FP16 or TAILOR_DTYPE_BF16"
#endif

#ifndef TAILOR_KERNEL
#error "tailor: the host must define TAILOR_KERNEL (the instantiated kernel's name)"
#endif

#if defined(TAILOR_TRACE)
// The step trace (`tailor bench model --trace`, docs/development.md). Only when the runtime
// recompiles its winners with TAILOR_TRACE defined; no cached kernel has it. Thread 0 of every
// block adds to its launch's record, in slot %gridid mod TAILOR_TRACE_SLOTS of this module
// (%gridid: the launch's own identifier): [0] the first block's arrival at tailor_grid_begin,
// [1] the first release from the grid wait, [2] ~(the last release), all %globaltimer ns;
// [3] the grid id, [4] ~(the grid id): two launches in one slot show as [3] != ~[4]; [5] the
// blocks counted, minus one. The host fills the records with all-ones first, so every field is
// an atomicMin whose result is not used: reductions that cost the block no round trip.
#define TAILOR_TRACE_SLOTS 4093
__device__ unsigned long long tailor_trace_rec[TAILOR_TRACE_SLOTS * 6];

__device__ __forceinline__ unsigned long long tailor_trace_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void tailor_trace_block(unsigned long long arrive, unsigned long long release)
{
    if (threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0)
        return;
    unsigned long long id;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(id));
    unsigned long long *r = &tailor_trace_rec[6 * (id % TAILOR_TRACE_SLOTS)];
    atomicMin(&r[0], arrive);
    atomicMin(&r[1], release);
    atomicMin(&r[2], ~release);
    atomicMin(&r[3], id);
    atomicMin(&r[4], ~id);
    atomicAdd(&r[5], 1ull);
}
#endif

// Programmatic dependent launch (sm_90+). The host may launch a kernel while its predecessor
// is still draining (tailor_kernels_set_pdl); every template therefore calls tailor_grid_begin()
// before it reads or writes global memory: it waits until the predecessor has finished and its
// writes are visible, then lets the next kernel start launching into free SMs. On older
// architectures (and without PDL) it costs nothing. One exception: a kernel may load into
// registers or shared memory, before it, data that no kernel of a forward writes (weights,
// scales; a step's token and position are written only by the step before it, whose end is
// ordered before this step's start), so that their DRAM latency overlaps the predecessor's tail (the GEMVs' first step,
// residual_norm's norm weights). Never prefetch more than
// that: an L2 prefetch of whole weight slices there cost 12 % of decode (docs/perf/model.md).
// Decode attention also requests its first K/V stages there: every slot but the query's own was
// written by earlier steps (the rule and its one exception in attn_mma.cuh, attn_cur_slot).

__device__ __forceinline__ void tailor_grid_begin()
{
#if defined(TAILOR_TRACE)
    const unsigned long long arrive = tailor_trace_now();
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#if defined(TAILOR_TRACE)
    tailor_trace_block(arrive, tailor_trace_now());
#endif
}

// Thread block clusters (sm_90): a barrier of every thread of the cluster, split in two (the
// arrive releases this thread's earlier memory operations, the wait acquires what every other
// thread released; called by all threads of all blocks, in uniform control flow), the
// shared::cluster address in block `rank` of this block's shared address a, and loads from it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void tailor_cluster_arrive(void)
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void tailor_cluster_wait(void)
{
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned tailor_cluster_map(unsigned a, int rank)
{
    unsigned r;
    asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ float tailor_ld_cluster_f32(unsigned a)
{
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ float2 tailor_ld_cluster_f2(unsigned a)
{
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n"
                 : "=f"(v.x), "=f"(v.y)
                 : "r"(a)
                 : "memory");
    return v;
}
__device__ __forceinline__ float4 tailor_ld_cluster_f4(unsigned a)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(a)
                 : "memory");
    return v;
}
#endif

// transformers' gelu_pytorch_tanh in fp32: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))).
__device__ __forceinline__ float tailor_gelu_tanh(float z)
{
    const float k = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * z * (1.f + tanhf(k * (z + 0.044715f * z * z * z)));
}

// One GEMV output from its fp32 sum g: the product rounded, or, where the kernel is built with
// GLU (matmul_gemv.cu, w4a16_gemv.cu: a nonzero -DGLU from the host), Gemma 4's gating with u
// the up product (or input) as transformers rounds it: both to the dtype, gelu_tanh in fp32
// rounded, their product rounded.
__device__ __forceinline__ T gemv_finish(float g, float u)
{
#if defined(GLU) && GLU
    const float ga = to_f32(from_f32(tailor_gelu_tanh(to_f32(from_f32(g)))));
    return from_f32(ga * to_f32(from_f32(u)));
#else
    (void)u;
    return from_f32(g);
#endif
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The decode GEMVs' epilogue, first half: every partial dot product acc[mi][r] summed over the
// warp (all lanes get the sums). (Template parameters are not named MT or ROWS: those are the
// kernels' defines.)
template <int ACC_M, int ACC_N>
__device__ __forceinline__ void gemv_warp_sums(float (&acc)[ACC_M][ACC_N])
{
#pragma unroll
    for (int mi = 0; mi < ACC_M; mi++)
#pragma unroll
        for (int r = 0; r < ACC_N; r++)
            acc[mi][r] = warp_sum(acc[mi][r]);
}

// With k split over warps: lane 0 parks the warp's sums in red[(warp * ACC_M + mi) * ACC_N + r]
// for the block's reduction (the caller's __syncthreads() follows).
template <int ACC_M, int ACC_N>
__device__ __forceinline__ void gemv_park_sums(const float (&acc)[ACC_M][ACC_N], float *red,
                                               int warp, int lane)
{
    if (lane == 0)
#pragma unroll
        for (int mi = 0; mi < ACC_M; mi++)
#pragma unroll
            for (int r = 0; r < ACC_N; r++)
                red[(warp * ACC_M + mi) * ACC_N + r] = acc[mi][r];
}

// Sum over a block of NTHREADS threads; `scratch` holds NTHREADS/32 floats. All threads get it.
template <int NTHREADS>
__device__ __forceinline__ float block_sum(float v, float *scratch)
{
    v = warp_sum(v);
    if (NTHREADS <= 32)
        return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < NTHREADS / 32 ? scratch[lane] : 0.f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

// Vector of N elements of T moved as one load/store.
template <int N>
struct alignas(sizeof(T) * N) TVec {
    T v[N];
};
