// l2_prefetch.cu — does an L2 prefetch issued ahead of a GEMV-like read make that read faster on
// this card? (docs/perf/model.md, session 16: decode attention's extra blocks prefetching the next
// GEMVs' weights did not move the model.) Not part of the build; compiled on the GPU machine by
// scripts/probe/run.sh l2 with nvcc.
//
// A reader (every thread four 16-byte loads in flight, summed) streams S bytes; it is timed with
// events after the L2 was flushed (a 256 MiB read), then after the same S bytes were requested
// ahead by one of:
//   bulk:     cp.async.bulk.prefetch.L2 in 16 KiB pieces, one per lane of each block's first warp
//             (what the reverted commit did);
//   bulk-el:  the same with an evict_last cache policy;
//   thread:   prefetch.global.L2 of every 128-byte line, from every thread;
//   touch:    ld.global.cg of one word per 128-byte line (real loads, summed);
// and with the reader run twice (the second read all L2 hits: "warm"). Between the prefetch and
// the read, a kernel spins for `gap` µs (the latency-bound kernel the prefetch hides under).
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>

#include "probe_check.h"

__global__ void reader(const uint4 *__restrict__ src, size_t n16, unsigned *__restrict__ out)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = i + u * stride < n16 ? __ldcs(src + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++)
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x9e3779b9u)
        out[0] = acc;
}

__global__ void bulk_prefetch(const unsigned char *p, size_t bytes, int evict_last)
{
    if (threadIdx.x >= 32)
        return;
    const size_t piece = 16384, n = (bytes + piece - 1) / piece;
    const size_t stride = 32ull * gridDim.x;
    unsigned long long policy = 0;
    if (evict_last)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    for (size_t i = 32ull * blockIdx.x + threadIdx.x; i < n; i += stride) {
        const size_t off = i * piece, left = bytes - off;
        const unsigned len = (unsigned)(left < piece ? left : piece);
        if (evict_last)
            asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + off),
                         "r"(len), "l"(policy)
                         : "memory");
        else
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(len)
                         : "memory");
    }
}

__global__ void thread_prefetch(const unsigned char *p, size_t bytes)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x * 128;
    for (size_t off = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 128; off < bytes; off += stride)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

__global__ void touch(const unsigned char *p, size_t bytes, unsigned *out)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x * 128;
    unsigned acc = 0;
    for (size_t off = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 128; off < bytes; off += stride)
        acc += __ldcg(reinterpret_cast<const unsigned *>(p + off));
    if (acc == 0x9e3779b9u)
        out[0] = acc;
}

__global__ void spin(long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while ((long long)(t - t0) < ns);
}

int main()
{
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t flush_bytes = (size_t)256 << 20;
    unsigned char *w = nullptr, *flush = nullptr;
    unsigned *out = nullptr;
    const size_t max_bytes = (size_t)48 << 20;
    CHECK(cudaMalloc(&w, max_bytes));
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaMalloc(&out, 64));
    CHECK(cudaMemset(w, 1, max_bytes));
    CHECK(cudaMemset(flush, 2, flush_bytes));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    const char *names[] = {"cold", "warm", "bulk", "bulk-el", "thread", "touch"};
    for (size_t mb : {6, 24}) {
        const size_t bytes = mb << 20;
        for (long long gap_ns : {0LL, 8000LL}) {
            printf("S = %zu MiB, %lld us between the prefetch and the read:\n", mb, gap_ns / 1000);
            for (int c = 0; c < 6; c++) {
                std::vector<float> t;
                for (int rep = 0; rep < 15; rep++) {
                    reader<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(flush), flush_bytes / 16, out);
                    CHECK(cudaDeviceSynchronize());
                    switch (c) {
                    case 1: reader<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w), bytes / 16, out); break;
                    case 2: bulk_prefetch<<<sms - 12, 128>>>(w, bytes, 0); break;
                    case 3: bulk_prefetch<<<sms - 12, 128>>>(w, bytes, 1); break;
                    case 4: thread_prefetch<<<sms * 4, 256>>>(w, bytes); break;
                    case 5: touch<<<sms * 4, 256>>>(w, bytes, out); break;
                    default: break;
                    }
                    spin<<<1, 32>>>(gap_ns);
                    CHECK(cudaEventRecord(a));
                    reader<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w), bytes / 16, out);
                    CHECK(cudaEventRecord(b));
                    CHECK(cudaEventSynchronize(b));
                    float ms = 0;
                    CHECK(cudaEventElapsedTime(&ms, a, b));
                    t.push_back(ms * 1000);
                }
                std::sort(t.begin(), t.end());
                printf("  %-8s read %8.2f us (median of 15; min %.2f) = %6.0f GB/s\n", names[c],
                       t[t.size() / 2], t[0], (double)bytes / (t[t.size() / 2] * 1e3));
            }
        }
    }
    return 0;
}
