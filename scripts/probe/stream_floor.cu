// stream_floor.cu — what one kernel needs to read S bytes of weights from DRAM on this card: the
// floor the decode GEMVs are measured against (docs/perf/w4a16.md, session 8). Not part of the
// build; compiled on the GPU machine by scripts/probe/run.sh with nvcc.
//
// Each configuration reads S bytes spread over a rotation of buffers larger than twice the L2
// (so every launch reads DRAM, as a decode step does), each thread issuing U 16-byte loads before
// using any, in one of two access patterns:
//   flat: a warp's load covers 512 contiguous bytes;
//   rows: a warp's load covers 64 contiguous bytes of each of 8 rows of R bytes (the int4 GEMV's
//         pattern, w4a16_gemv_t.cu: lane (g, t) reads 16 bytes at row g, offset 64 q + 16 t).
// Times: events around L launches back to back on a stream, and the same L launches replayed as
// one CUDA graph (what the model's decode step is), per launch. An empty kernel gives the launch
// floor of each. Last, the ladder from that floor to a GEMV (gemv_step, below).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "probe_check.h"

__global__ void empty_kernel(unsigned *out) { (void)out; }

// U loads of 16 bytes per thread, all issued before the first is used.
template <int U, bool ROWS>
__global__ void stream_kernel(const uint4 *__restrict__ src, unsigned *__restrict__ out,
                              size_t row_bytes)
{
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        size_t idx; // in 16-byte units
        if (!ROWS) {
            idx = tid + (size_t)u * gridDim.x * blockDim.x;
        } else {
            // unit (w U + u) = (8-row group, 64-byte quad): a warp reads U consecutive quads
            // of its 8 rows, as a gemv_t warp reads its quads of k
            const size_t per_row = row_bytes / 16, quads = per_row / 4;
            const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
            const size_t unit = (tid / 32) * U + u;
            const size_t row = (unit / quads) * 8 + g;
            idx = row * per_row + (unit % quads) * 4 + t;
        }
        v[u] = __ldcs(src + idx);
    }
    unsigned x = 0;
#pragma unroll
    for (int u = 0; u < U; u++)
        x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    if (x == 0x9e3779b9u) // never in practice: keeps the loads
        out[0] = x;
}

// The ladder from the floor to a GEMV (session 8: the E2B int4 GEMVs take ~5.1 µs where reading
// their bytes takes ~2.6). gemv_step<STEP> has the w4a16_gemv (v1) winner's shape at n=6144
// k=1536: 128 threads, two warps along k (KW = 2), 4 weight rows per warp, lane = one 32-column
// chunk (16 bytes) of each row, all of a lane's loads issued before any is used. Each step adds
// one piece of the real kernel:
//   0: the weight loads only (XOR, conditional store: the floor in the GEMV's pattern);
//   1: + scales (one 16-bit value per row and chunk) and activations (64 bytes per chunk) and
//      the arithmetic (32 nibbles x 4 rows, converted and multiplied in fp32);
//   2: + a warp sum per row, lane 0 stores (one k warp's result: what KW = 1 stores);
//   3: + the two k warps reduced through shared memory and one store per row (the whole v1).
constexpr int LG_ROWS = 4, LG_KW = 2, LG_THREADS = 128;

template <int STEP>
__global__ void __launch_bounds__(LG_THREADS)
gemv_step(const uint4 *__restrict__ w, const unsigned short *__restrict__ scales,
          const uint4 *__restrict__ act, float *__restrict__ out, int N, int K)
{
    __shared__ float red[LG_THREADS / 32][LG_ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp % LG_KW;
    const int n0 = (blockIdx.x * (LG_THREADS / 32 / LG_KW) + warp / LG_KW) * LG_ROWS;
    const int chunks = K / 32, c = kw * 32 + lane;
    const bool live = c < chunks;
    uint4 v[LG_ROWS];
    unsigned short sc[LG_ROWS];
#pragma unroll
    for (int r = 0; r < LG_ROWS; r++) {
        v[r] = live ? __ldcs(w + (size_t)(n0 + r) * chunks + c) : make_uint4(0, 0, 0, 0);
        sc[r] = (STEP >= 1 && live) ? scales[(size_t)(c / 4) * N + n0 + r] : 0;
    }
    if (STEP == 0) {
        unsigned x = 0;
#pragma unroll
        for (int r = 0; r < LG_ROWS; r++)
            x ^= v[r].x ^ v[r].y ^ v[r].z ^ v[r].w;
        if (x == 0x9e3779b9u)
            out[0] = (float)x;
        return;
    }
    uint4 a[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        a[j] = live ? act[4 * c + j] : make_uint4(0, 0, 0, 0);
    float acc[LG_ROWS];
#pragma unroll
    for (int r = 0; r < LG_ROWS; r++) {
        const unsigned words[4] = {v[r].x, v[r].y, v[r].z, v[r].w};
        const unsigned av[16] = {a[0].x, a[0].y, a[0].z, a[0].w, a[1].x, a[1].y, a[1].z, a[1].w,
                                 a[2].x, a[2].y, a[2].z, a[2].w, a[3].x, a[3].y, a[3].z, a[3].w};
        float p = 0.f;
#pragma unroll
        for (int t = 0; t < 4; t++)
#pragma unroll
            for (int nib = 0; nib < 8; nib++) {
                const float wf = (float)((words[t] >> (4 * nib)) & 15u) - 8.f;
                const unsigned h = av[(8 * t + nib) / 2];
                const float xf = __uint_as_float(((8 * t + nib) & 1 ? h & 0xffff0000u : h << 16));
                p = fmaf(wf, xf, p);
            }
        acc[r] = p * __uint_as_float((unsigned)sc[r] << 16);
    }
    if (STEP == 1) {
        float x = 0.f;
#pragma unroll
        for (int r = 0; r < LG_ROWS; r++)
            x += acc[r];
        if (x == 1234.5f)
            out[0] = x;
        return;
    }
#pragma unroll
    for (int r = 0; r < LG_ROWS; r++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    if (STEP == 2) {
        if (lane == 0 && kw == 0)
#pragma unroll
            for (int r = 0; r < LG_ROWS; r++)
                out[n0 + r] = acc[r];
        return;
    }
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < LG_ROWS; r++)
            red[warp][r] = acc[r];
    __syncthreads();
    if (kw == 0 && lane < LG_ROWS) {
        float x = 0.f;
#pragma unroll
        for (int q = 0; q < LG_KW; q++)
            x += red[warp + q][lane];
        out[n0 + lane] = x;
    }
}

struct Timing {
    float stream_us, graph_us;
};

template <typename Launch>
static Timing time_launches(Launch launch, int n_rot, int L)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 2 * n_rot; i++) // warm-up
        launch(s, i % n_rot);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < L; i++)
        launch(s, i % n_rot);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    Timing t;
    CHECK(cudaEventElapsedTime(&t.stream_us, a, b));
    t.stream_us *= 1000.f / L;

    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < L; i++)
        launch(s, i % n_rot);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    CHECK(cudaGraphLaunch(ge, s)); // warm-up
    CHECK(cudaStreamSynchronize(s));
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (ms < best)
            best = ms;
    }
    t.graph_us = best * 1000.f / L;
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    CHECK(cudaStreamDestroy(s));
    return t;
}

static unsigned char *g_buf;
static size_t g_buf_bytes;
static unsigned *g_out;

template <int U, bool ROWS>
static void run_config(size_t bytes, int threads, size_t row_bytes)
{
    const size_t loads = bytes / 16;
    const size_t per_block = (size_t)threads * U;
    if (loads % per_block)
        return;
    const int blocks = (int)(loads / per_block);
    int n_rot = (int)(g_buf_bytes / bytes);
    if (n_rot < 1)
        return;
    auto launch = [&](cudaStream_t s, int i) {
        const uint4 *src = reinterpret_cast<const uint4 *>(g_buf + (size_t)i * bytes);
        stream_kernel<U, ROWS><<<blocks, threads, 0, s>>>(src, g_out, row_bytes);
    };
    Timing t = time_launches(launch, n_rot, 200);
    printf("%-4s bytes=%9zu threads=%3d U=%d blocks=%6d  stream %7.2f us (%6.0f GB/s)  graph %7.2f us "
           "(%6.0f GB/s)\n",
           ROWS ? "rows" : "flat", bytes, threads, U, blocks, t.stream_us, bytes / t.stream_us / 1e3,
           t.graph_us, bytes / t.graph_us / 1e3);
}

template <bool ROWS>
static void sweep(size_t bytes, size_t row_bytes)
{
    const int threads_list[] = {128, 256, 512};
    for (int threads : threads_list) {
        run_config<1, ROWS>(bytes, threads, row_bytes);
        run_config<2, ROWS>(bytes, threads, row_bytes);
        run_config<4, ROWS>(bytes, threads, row_bytes);
        run_config<8, ROWS>(bytes, threads, row_bytes);
        run_config<16, ROWS>(bytes, threads, row_bytes);
    }
}

// One set of a GEMV's buffers: weights, scales [K/128, N], activations [K], outputs [N].
struct GemvSet {
    const uint4 *w;
    const unsigned short *s;
    const uint4 *a;
    float *o;
};

// sets[i] for i < n: carved from the one big region (separate = false) or each buffer its own
// cudaMalloc, as the tuner's rotated sets and the model's weights are (separate = true).
static int make_sets(GemvSet *sets, int max_sets, int N, int K, bool separate)
{
    const size_t wb = (size_t)N * K / 2, sb = (size_t)(K / 128) * N * 2, ab = (size_t)K * 2,
                 ob = (size_t)N * 4;
    const size_t per = (wb + sb + ab + ob + 4095) & ~(size_t)4095;
    int n = (int)(g_buf_bytes / per);
    if (n > max_sets)
        n = max_sets;
    for (int i = 0; i < n; i++) {
        unsigned char *p;
        if (separate) {
            void *w, *sc, *a, *o;
            CHECK(cudaMalloc(&w, wb));
            CHECK(cudaMalloc(&sc, sb));
            CHECK(cudaMalloc(&a, ab));
            CHECK(cudaMalloc(&o, ob));
            CHECK(cudaMemset(w, 0x11, wb));
            CHECK(cudaMemset(sc, 0x3c, sb));
            CHECK(cudaMemset(a, 0x3c, ab));
            sets[i] = {(const uint4 *)w, (const unsigned short *)sc, (const uint4 *)a, (float *)o};
            continue;
        }
        p = g_buf + (size_t)i * per;
        sets[i] = {(const uint4 *)p, (const unsigned short *)(p + wb), (const uint4 *)(p + wb + sb),
                   (float *)(p + wb + sb + ab)};
    }
    return n;
}

static void free_sets(GemvSet *sets, int n)
{
    for (int i = 0; i < n; i++) {
        CHECK(cudaFree((void *)sets[i].w));
        CHECK(cudaFree((void *)sets[i].s));
        CHECK(cudaFree((void *)sets[i].a));
        CHECK(cudaFree(sets[i].o));
    }
}

template <int STEP>
static void run_step(const GemvSet *sets, int n_sets, int N, int K, const char *where)
{
    const int blocks = N / (LG_ROWS * (LG_THREADS / 32 / LG_KW));
    auto launch = [&](cudaStream_t s, int i) {
        const GemvSet &x = sets[i];
        gemv_step<STEP><<<blocks, LG_THREADS, 0, s>>>(x.w, x.s, x.a, x.o, N, K);
    };
    Timing t = time_launches(launch, n_sets, 200);
    printf("gemv ladder step %d (%s, %d sets) n=%d k=%d: stream %7.2f us  graph %7.2f us\n", STEP,
           where, n_sets, N, K, t.stream_us, t.graph_us);
}

static void ladder(int N, int K)
{
    static GemvSet sets[64];
    for (int separate = 0; separate < 2; separate++) {
        const int n = make_sets(sets, 64, N, K, separate != 0);
        const char *where = separate ? "own cudaMalloc per buffer" : "one region";
        run_step<0>(sets, n, N, K, where);
        run_step<1>(sets, n, N, K, where);
        run_step<2>(sets, n, N, K, where);
        run_step<3>(sets, n, N, K, where);
        if (separate)
            free_sets(sets, n);
    }
}

int main()
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs, L2 %d B\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize);
    g_buf_bytes = (size_t)1 << 28; // 256 MiB: > 2x the L2 for every size below
    CHECK(cudaMalloc(&g_buf, g_buf_bytes));
    CHECK(cudaMemset(g_buf, 1, g_buf_bytes));
    CHECK(cudaMalloc(&g_out, 16));
    {
        auto launch = [&](cudaStream_t s, int) { empty_kernel<<<132, 128, 0, s>>>(g_out); };
        Timing t = time_launches(launch, 1, 200);
        printf("empty kernel 132x128: stream %.2f us, graph %.2f us\n", t.stream_us, t.graph_us);
    }
    // E2B int4 n=6144 k=1536 (4.72 MB, rows of 768 B); the same in bf16 (18.9 MB); the 31B
    // int4 n=21504 k=5376 (57.8 MB, rows of 2688 B)
    const size_t e2b = (size_t)6144 * 1536 / 2;
    sweep<false>(e2b, 768);
    sweep<true>(e2b, 768);
    sweep<false>(4 * e2b, 3072);
    sweep<false>((size_t)21504 * 5376 / 2, 2688);
    sweep<true>((size_t)21504 * 5376 / 2, 2688);
    ladder(6144, 1536);
    return 0;
}
