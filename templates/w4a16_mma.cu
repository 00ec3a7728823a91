// w4a16_mma.cu — W4A16 matmul on tensor cores (prefill, and decode through split-k):
// out[m, n] = a[m, k] · W[n, k]^T. A block computes a BM x BN tile with WM x WN warps; tiles of
// a (BM x BK, 16-bit) and of the packed weights (BN x BK/8 words) plus their scales (and zero
// points) go through a STAGES-deep ring in dynamic shared memory (cp.async from sm_80; plain
// 16-byte copies on sm_75, where the same loop is simply synchronous). Each thread reads one
// weight word per 32 columns and n8 tile: the kernel layout puts in it exactly the eight values
// its mma B fragments need for two k16 steps, dequantized in registers as round((u - z) * s)
// (the magic-number trick: no conversion instruction). mma.m16n8k16 from sm_80, two m16n8k8 on
// sm_75 (fp16 only); fp32 accumulators.
// SPLITK > 1: blockIdx.z takes a share of k and writes fp32 partials to `partial`
// [SPLITK, M, N]; the last block of a tile (counted in `counters`) adds them in z order, writes
// the output and resets its counter to 0, so the workspace is left as it was found.
// Defines: BM, BN, BK, WM, WN, STAGES, SPLITK, GROUP, HAS_ZP.
#include "w4a16_common.cuh"

#define W4_THREADS (WM * WN * 32)

namespace w4 {
constexpr int WTM = BM / WM, WTN = BN / WN; // warp tile
constexpr int MT = WTM / 16, NT = WTN / 8;  // mma tiles per warp
constexpr int A_LD = BK + 8;                // T per a row in shared memory (+16 B: no conflicts)
constexpr int B_LD = BK / 8 + ((BK / 8) % 8 == 4 ? 0 : 4); // words per weight row (== 4 mod 8)
constexpr int SROWS = BK >= GROUP ? BK / GROUP : 1;        // scale rows per stage
constexpr int A_BYTES = BM * A_LD * 2;
constexpr int B_BYTES = BN * B_LD * 4;
constexpr int S_BYTES = SROWS * BN * 2;
constexpr int Z_BYTES = HAS_ZP ? SROWS * BN : 0;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES + S_BYTES + Z_BYTES;
static_assert(WTM % 16 == 0 && WTN % 8 == 0, "warp tile must be a multiple of 16 x 8");
static_assert(BK % 32 == 0 && GROUP % 32 == 0, "BK and GROUP are multiples of 32");
static_assert(BK % GROUP == 0 || GROUP % BK == 0, "BK and GROUP must nest");
static_assert(BN % 16 == 0 && STAGES >= 2, "BN multiple of 16, at least 2 stages");

struct Stage {
    T *a;
    u32 *b;
    T *s;
    u8 *z;
};

__device__ __forceinline__ Stage stage_at(u8 *smem, int st)
{
    u8 *base = smem + st * STAGE_BYTES;
    Stage s;
    s.a = reinterpret_cast<T *>(base);
    s.b = reinterpret_cast<u32 *>(base + A_BYTES);
    s.s = reinterpret_cast<T *>(base + A_BYTES + B_BYTES);
    s.z = base + A_BYTES + B_BYTES + S_BYTES;
    return s;
}

// Issues the copies of k tile kt (columns kt*BK ...) into stage s; out-of-range pieces are
// zero-filled (rows past M or N, columns past K, groups past K/GROUP).
__device__ __forceinline__ void load_tile(const Stage &s, int kt, const T *a, const u32 *qw,
                                          const T *scales, const u8 *zeros, int M, int N, int K,
                                          int n_pad, int m0, int n0)
{
    const int tid = threadIdx.x, k0 = kt * BK;
    for (int i = tid; i < BM * (BK / 8); i += W4_THREADS) {
        const int r = i / (BK / 8), c = i % (BK / 8), gm = m0 + r, gk = k0 + c * 8;
        const bool ok = gm < M && gk < K;
        tc_copy16(s.a + r * A_LD + c * 8, ok ? a + (size_t)gm * K + gk : a, ok);
    }
    w4_load_weight_tile<BN, BK, B_LD, SROWS, GROUP, W4_THREADS>(s.b, s.s, s.z, kt, qw, scales,
                                                              zeros, N, K, n_pad, n0);
}

// acc += the stage's a tile x dequantized weight tile, for this warp's WTM x WTN sub-tile.
__device__ __forceinline__ void compute_tile(const Stage &s, float (&acc)[MT][NT][4], int wm,
                                             int wn, int lane)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kc = 0; kc < BK / 32; kc++) {
        const int sr = SROWS > 1 ? (kc * 32) / GROUP : 0;
        u32 bq[NT];
        T2 sc[NT], bias[NT];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int col = wn * WTN + j * 8 + g;
            bq[j] = s.b[col * B_LD + kc * 4 + t];
            sc[j] = w4_splat(s.s[sr * BN + col]);
#if HAS_ZP
            bias[j] = w4_bias(s.z[sr * BN + col]);
#else
            bias[j] = w4_bias(8u);
#endif
        }
#pragma unroll
        for (int step = 0; step < 2; step++) {
            u32 af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int row = wm * WTM + i * 16 + (lane & 15);
                const int col = kc * 32 + step * 16 + (lane >> 4) * 8;
                tc_ldmatrix_x4(af[i], s.a + row * A_LD + col);
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const u32 b0 = w4_as_u32(w4_pair(bq[j], 2 * step, bias[j], sc[j]));
                const u32 b1 = w4_as_u32(w4_pair(bq[j], 2 * step + 1, bias[j], sc[j]));
#pragma unroll
                for (int i = 0; i < MT; i++)
                    tc_mma_k16(acc[i][j], af[i], b0, b1);
            }
        }
    }
}

} // namespace w4

extern "C" __global__ void __launch_bounds__(W4_THREADS, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const u32 *__restrict__ qweight,
              const T *__restrict__ scales,
#if HAS_ZP
              const u8 *__restrict__ zeros,
#endif
#if SPLITK > 1
              float *__restrict__ partial, int *__restrict__ counters,
#endif
              int M, int N, int K, int n_pad)
{
    tailor_grid_begin();
    using namespace w4;
    extern __shared__ __align__(16) u8 smem[];
#if !HAS_ZP
    const u8 *zeros = nullptr;
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;

    // this block's share of the k tiles
    const TcKShare share = tc_k_share(K, BK, blockIdx.z, SPLITK);
    const int kt_begin = share.begin, ktiles = share.end - share.begin;

    float acc[MT][NT][4];
    tc_zero(acc);

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load_tile(stage_at(smem, s), kt_begin + s, a, qweight, scales, zeros, M, N, K, n_pad,
                      m0, n0);
        tc_copy_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        tc_copy_wait<STAGES - 2>();
        __syncthreads(); // tile kt landed; everyone is done with the stage refilled below
        const int nk = kt + STAGES - 1;
        if (nk < ktiles)
            load_tile(stage_at(smem, nk % STAGES), kt_begin + nk, a, qweight, scales, zeros, M, N,
                      K, n_pad, m0, n0);
        tc_copy_commit();
        compute_tile(stage_at(smem, kt % STAGES), acc, wm, wn, lane);
    }
    tc_copy_wait<0>();

    const int g = lane >> 2, t = lane & 3;
#if SPLITK > 1
    __shared__ int last_block[4]; // 16 bytes: what ptxas reserves for one int anyway
    float *mine = partial + (size_t)blockIdx.z * M * N;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = m0 + wm * WTM + i * 16 + g + (e >> 1) * 8;
                const int col = n0 + wn * WTN + j * 8 + 2 * t + (e & 1);
                if (row < M && col < N)
                    mine[(size_t)row * N + col] = acc[i][j][e];
            }
    __threadfence();
    __syncthreads();
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0)
        last_block[0] = atomicAdd(&counters[tile], 1) == SPLITK - 1;
    __syncthreads();
    if (!last_block[0])
        return;
    __threadfence();
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = m0 + wm * WTM + i * 16 + g + (e >> 1) * 8;
                const int col = n0 + wn * WTN + j * 8 + 2 * t + (e & 1);
                float v = 0.f;
                if (row < M && col < N)
                    for (int z = 0; z < SPLITK; z++) // z order: the same sum on every run
                        v += __ldcg(partial + ((size_t)z * M + row) * N + col);
                acc[i][j][e] = v;
            }
    if (threadIdx.x == 0)
        counters[tile] = 0; // leave the workspace zeroed for the next launch
#endif
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int row = m0 + wm * WTM + i * 16 + g;
            const int col = n0 + wn * WTN + j * 8 + 2 * t;
            tc_store2(out, M, N, row, col, acc[i][j][0], acc[i][j][1]);
            tc_store2(out, M, N, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}
