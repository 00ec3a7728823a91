// matmul_mma.cu — dense 16-bit matmul on tensor cores (prefill, and decode through split-k):
// out[m, n] = a[m, k] · w[n, k]^T. A block computes a BM x BN tile with WM x WN warps. Tiles of
// a (BM x BK) and of w (BN x BK), both k-contiguous as mma's row.col wants them, go through a
// STAGES-deep ring in dynamic shared memory (cp.async from sm_80; plain 16-byte copies on sm_75,
// where the same loop is simply synchronous), rows padded by 16 bytes so that ldmatrix reads
// are free of bank conflicts. Fragments of a and w both come from ldmatrix.x4; mma.m16n8k16 from
// sm_80, two m16n8k8 on sm_75 (fp16 only); fp32 accumulators, one rounding at the store.
// Tails: rows past M or N and 16-byte pieces past K (K is a multiple of 8) are zero-filled.
// SPLITK > 1: blockIdx.z takes a share of the k tiles and writes fp32 partials to `partial`
// [SPLITK, M, N]; the last block of a tile (counted in `counters`) adds them in z order, writes
// the output and resets its counter to 0, so the workspace is left as it was found.
// Defines: BM, BN, BK, WM, WN, STAGES, SPLITK.
#include "dense_common.cuh"

#define DN_THREADS (WM * WN * 32)

namespace dn {
constexpr int WTM = BM / WM, WTN = BN / WN; // warp tile
constexpr int MT = WTM / 16, NT = WTN / 8;  // mma tiles per warp
constexpr int LD = BK + 8;                  // T per shared row (+16 B: no ldmatrix conflicts)
constexpr int A_ELEMS = BM * LD, B_ELEMS = BN * LD;
constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
constexpr int PIECES = BK / 8; // 16-byte pieces per tile row
static_assert(BM % WM == 0 && BN % WN == 0, "warps must tile the block");
static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16 x 16");
static_assert(BK % 16 == 0 && STAGES >= 2, "BK a multiple of 16, at least 2 stages");

// Issues the copies of k tile kt (columns kt*BK ...) into one stage; what lies outside a, w is
// zero-filled (the source address is then the matrix's base, never read).
__device__ __forceinline__ void load_tile(T *sa, T *sb, int kt, const T *a, const T *w, int M,
                                          int N, int K, int m0, int n0)
{
    const int tid = threadIdx.x, k0 = kt * BK;
#pragma unroll
    for (int it = 0; it < (BM * PIECES + DN_THREADS - 1) / DN_THREADS; it++) {
        const int i = tid + it * DN_THREADS;
        if (BM * PIECES % DN_THREADS != 0 && i >= BM * PIECES)
            break;
        const int r = i / PIECES, c = i % PIECES, gm = m0 + r, gk = k0 + c * 8;
        const bool ok = gm < M && gk < K;
        tc_copy16(sa + r * LD + c * 8, ok ? a + (size_t)gm * K + gk : a, ok);
    }
#pragma unroll
    for (int it = 0; it < (BN * PIECES + DN_THREADS - 1) / DN_THREADS; it++) {
        const int i = tid + it * DN_THREADS;
        if (BN * PIECES % DN_THREADS != 0 && i >= BN * PIECES)
            break;
        const int r = i / PIECES, c = i % PIECES, gn = n0 + r, gk = k0 + c * 8;
        const bool ok = gn < N && gk < K;
        tc_copy16(sb + r * LD + c * 8, ok ? w + (size_t)gn * K + gk : w, ok);
    }
}

// acc += the stage's a tile x its w tile^T, for this warp's WTM x WTN sub-tile.
__device__ __forceinline__ void compute_tile(const T *sa, const T *sb, float (&acc)[MT][NT][4],
                                             int wm, int wn, int lane)
{
    // ldmatrix row addresses: a — rows lane%16, k half lane/16; w — rows lane%8 (+8 for lanes
    // 16..31), k half (lane/8)%2, so that registers 0..3 are b0, b1 of two n8 tiles.
    const int a_row = wm * WTM + (lane & 15), a_col = (lane >> 4) * 8;
    const int b_row = wn * WTN + (lane & 7) + ((lane >> 4) << 3), b_col = ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int ks = 0; ks < BK / 16; ks++) {
        tc_u32 af[MT][4], bf[NT][2];
#pragma unroll
        for (int i = 0; i < MT; i++)
            tc_ldmatrix_x4(af[i], sa + (a_row + i * 16) * LD + ks * 16 + a_col);
#pragma unroll
        for (int j = 0; j < NT / 2; j++) {
            tc_u32 r[4];
            tc_ldmatrix_x4(r, sb + (b_row + j * 16) * LD + ks * 16 + b_col);
            bf[2 * j][0] = r[0];
            bf[2 * j][1] = r[1];
            bf[2 * j + 1][0] = r[2];
            bf[2 * j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++)
                tc_mma_k16(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
}
} // namespace dn

extern "C" __global__ void __launch_bounds__(DN_THREADS, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ w,
#if SPLITK > 1
              float *__restrict__ partial, int *__restrict__ counters,
#endif
              int M, int N, int K)
{
    tailor_grid_begin();
    using namespace dn;
    extern __shared__ __align__(16) unsigned char dn_smem[];
    T *smem = reinterpret_cast<T *>(dn_smem);
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
            load_tile(smem + s * STAGE_ELEMS, smem + s * STAGE_ELEMS + A_ELEMS, kt_begin + s, a,
                      w, M, N, K, m0, n0);
        tc_copy_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        tc_copy_wait<STAGES - 2>();
        __syncthreads(); // tile kt landed; everyone is done with the stage refilled below
        const int nk = kt + STAGES - 1;
        if (nk < ktiles) {
            T *st = smem + (nk % STAGES) * STAGE_ELEMS;
            load_tile(st, st + A_ELEMS, kt_begin + nk, a, w, M, N, K, m0, n0);
        }
        tc_copy_commit();
        const T *cur = smem + (kt % STAGES) * STAGE_ELEMS;
        compute_tile(cur, cur + A_ELEMS, acc, wm, wn, lane);
    }
    tc_copy_wait<0>();

    const int g = lane >> 2, t = lane & 3;
    const int row0 = m0 + wm * WTM + g, col0 = n0 + wn * WTN + 2 * t;
#if SPLITK > 1
    float *mine = partial + (size_t)blockIdx.z * M * N;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = row0 + i * 16 + (e >> 1) * 8, col = col0 + j * 8 + (e & 1);
                if (row < M && col < N)
                    mine[(size_t)row * N + col] = acc[i][j][e];
            }
    __threadfence();
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    int last = 0;
    __syncthreads(); // every partial of this block is written and fenced
    if (threadIdx.x == 0)
        last = atomicAdd(&counters[tile], 1) == SPLITK - 1;
    if (!__syncthreads_or(last))
        return;
    __threadfence();
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = row0 + i * 16 + (e >> 1) * 8, col = col0 + j * 8 + (e & 1);
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
            tc_store2(out, M, N, row0 + i * 16, col0 + j * 8, acc[i][j][0], acc[i][j][1]);
            tc_store2(out, M, N, row0 + i * 16 + 8, col0 + j * 8, acc[i][j][2], acc[i][j][3]);
        }
}
