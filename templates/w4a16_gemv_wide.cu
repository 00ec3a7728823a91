// w4a16_gemv_wide.cu — W4A16 matmul for decode (m <= 16) on tensor cores, weights streamed
// straight from global memory into registers: out[m, n] = a[m, k] · W[n, k]^T.
//
// Work: a warp owns RT tiles of 8 weight rows; a block of WARPS warps owns BN = WARPS·RT·8 rows
// and one k slice (blockIdx.y of SPLITK). A "quad" is 4 chunks = 128 columns. Lane (g, t) =
// (lane / 4, lane % 4) reads, per row tile and quad, ONE 16-byte piece: chunk 4q + t of row
// n0 + g (a warp reads 8 rows x 64 contiguous bytes). It issues UNROLL quads x RT tiles of such
// loads at once, and the next batch before computing the current one (UNROLL·RT·2 in flight).
//
// The kernel layout gives lane t's 16 bytes as words t' = 0..3, each holding the B fragments of
// two k16 steps for "thread t'" of its chunk. The mma sums over k in any order as long as A and
// B agree, so lane t uses word t' of ITS chunk (4q + t) as its own fragment of virtual step
// (t', s): virtual k 2t + e (b0) and 2t + 8 + e (b1) are real columns 32(4q + t) + 2t' + 16s + e
// (+ 8). The activations are staged once per block in shared memory in exactly that order:
// piece (Q, t', h) of row r holds, for t = 0..3, e = 0..1, a[r][128Q + 32t + 2t' + 8h + e]
// (8 values, 16 bytes); pieces are [Q][t'][h][row], so an ldmatrix.x4 over 512 contiguous bytes
// gives a0..a3 of step s (MP = 16) or a0, a2 of both steps (MP <= 8, rows >= MP read a zero row).
// Dequantization is w4_pair (round((u - z)·s) in the dtype, as the reference); fp32 accumulators.
//
// SPLITK > 1: each block writes fp32 partials [SPLITK, M, N]; the last block of a column tile
// (counted in `counters`) adds them in z order, writes the output and resets its counter, so
// the workspace is left zeroed.
// Defines: WARPS, RT (row tiles per warp), UNROLL (quads per batch), SPLITK, MP (m rounded up
// to a power of two, <= 16), GROUP, HAS_ZP.
#include "w4a16_common.cuh"

#define W4W_THREADS (WARPS * 32)

namespace w4w {
constexpr int BN = WARPS * RT * 8; // weight rows per block
constexpr int PIECE = MP * 16;     // bytes of one piece for all staged rows
static_assert(MP == 1 || MP == 2 || MP == 4 || MP == 8 || MP == 16, "MP is a power of two <= 16");
static_assert(GROUP % 32 == 0, "GROUP is a multiple of 32");

// 16 bytes of weights read once (no L1 allocation); not volatile, so the compiler may hoist it.
__device__ __forceinline__ uint4 load_w(const u32 *p)
{
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// The registers of UNROLL quads x RT row tiles of one lane: weights, scale, zero point (8: none).
struct Batch {
    uint4 w[RT][UNROLL];
    T s[RT][UNROLL];
    u32 z[RT][UNROLL];
};

// Loads quads q .. q + UNROLL - 1 (those < qe) of the warp's rows; the rest are zero weights
// with scale 0, which the zero activations staged past the slice multiply to 0.
__device__ __forceinline__ void load_batch(Batch &b, const u32 *__restrict__ qw,
                                           const T *__restrict__ scales,
                                           const u8 *__restrict__ zeros, int row0, int q, int qe,
                                           int N, int C, int n_pad, int lane)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int n = row0 + rt * 8 + g, c = 4 * (q + u) + t;
            b.w[rt][u] = make_uint4(0, 0, 0, 0);
            b.s[rt][u] = from_f32(0.f);
            b.z[rt][u] = 8u;
            if (n < N && q + u < qe && c < C) {
                b.w[rt][u] = load_w(qw + (size_t)n * (size_t)(4 * C) + 4 * c);
                const size_t gi = (size_t)((c * 32) / GROUP) * n_pad + n;
                b.s[rt][u] = scales[gi];
#if HAS_ZP
                b.z[rt][u] = zeros[gi];
#endif
            }
        }
#if !HAS_ZP
    (void)zeros;
#endif
}

__device__ __forceinline__ u32 word_of(const uint4 &w, int i)
{
    return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w;
}

// Stages rows 0..MP-1 of the block's slice (quads qb .. qb + qalloc - 1) in piece order; rows
// >= M, quads >= qe and chunks >= C are zeros.
__device__ __forceinline__ void stage_a(u8 *smem, const T *__restrict__ a, int M, int K, int C,
                                        int qb, int qe, int qalloc)
{
    const int per_row = qalloc * 16; // 16-byte reads per row
    for (int i = threadIdx.x; i < MP * per_row; i += W4W_THREADS) {
        const int r = i / per_row, j = i % per_row;
        const int Q = j >> 4, t = (j >> 2) & 3, h = j & 3, c = 4 * (qb + Q) + t;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < M && qb + Q < qe && c < C)
            v = *reinterpret_cast<const uint4 *>(a + (size_t)r * K + c * 32 + 8 * h);
        // word x of v = columns 32c + 8h + 2x + e: piece (Q, t' = x, h), slot t
        u32 *dst = reinterpret_cast<u32 *>(smem + (Q * 16 + h) * PIECE + r * 16) + t;
        dst[0 * 4 * PIECE / 4] = v.x;
        dst[1 * 4 * PIECE / 4] = v.y;
        dst[2 * 4 * PIECE / 4] = v.z;
        dst[3 * 4 * PIECE / 4] = v.w;
    }
    if (MP <= 8 && threadIdx.x == 0) // the zero row that lanes of rows >= MP point at
        *reinterpret_cast<uint4 *>(smem + qalloc * 16 * PIECE) = make_uint4(0, 0, 0, 0);
}

// acc += staged a x this batch's weights. Ql = the batch's first quad within the slice.
__device__ __forceinline__ void compute_batch(const Batch &b, const u8 *smem, int Ql, int qalloc,
                                              float (&acc)[RT][4], int lane)
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int Q = Ql + u;
        T2 sc[RT], bias[RT];
#pragma unroll
        for (int rt = 0; rt < RT; rt++) {
            sc[rt] = w4_splat(b.s[rt][u]);
            bias[rt] = w4_bias(b.z[rt][u]);
        }
#pragma unroll
        for (int tp = 0; tp < 4; tp++) {
            u32 r4[4] = {0, 0, 0, 0};
            if (MP <= 8) {
                // lane i: piece h = i / 8, row i % 8 (the zero row when >= MP)
                const int h = lane >> 3, row = lane & 7;
                const u8 *p = row < MP ? smem + ((Q * 16 + tp * 4 + h) * PIECE + row * 16)
                                       : smem + qalloc * 16 * PIECE;
                tc_ldmatrix_x4(r4, p);
            }
#pragma unroll
            for (int s = 0; s < 2; s++) {
                u32 af[4];
                if (MP > 8) {
                    // lane i: piece 2s + i / 16, row i % 16 -> 512 contiguous bytes
                    tc_ldmatrix_x4(af, smem + (Q * 16 + tp * 4 + 2 * s) * PIECE + lane * 16);
                } else {
                    af[0] = r4[2 * s];
                    af[1] = 0u;
                    af[2] = r4[2 * s + 1];
                    af[3] = 0u;
                }
#pragma unroll
                for (int rt = 0; rt < RT; rt++) {
                    const u32 word = word_of(b.w[rt][u], tp);
                    const u32 b0 = w4_as_u32(w4_pair(word, 2 * s, bias[rt], sc[rt]));
                    const u32 b1 = w4_as_u32(w4_pair(word, 2 * s + 1, bias[rt], sc[rt]));
                    tc_mma_k16(acc[rt], af, b0, b1);
                }
            }
        }
    }
}

} // namespace w4w

extern "C" __global__ void __launch_bounds__(W4W_THREADS)
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
    using namespace w4w;
    extern __shared__ __align__(16) u8 smem[];
#if !HAS_ZP
    const u8 *zeros = nullptr;
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int C = K / 32, QT = (C + 3) / 4;                    // chunks, quads per row
    const int qps = (QT + SPLITK - 1) / SPLITK;                // quads per slice
    const int qalloc = (qps + UNROLL - 1) / UNROLL * UNROLL;   // staged: whole batches
    const int qb = blockIdx.y * qps, qe = min(QT, qb + qps);    // this block's slice
    const int row0 = blockIdx.x * BN + warp * RT * 8;

    Batch cur;
    load_batch(cur, qweight, scales, zeros, row0, qb, qe, N, C, n_pad, lane); // in flight ...
    stage_a(smem, a, M, K, C, qb, qe, qalloc);                                // ... meanwhile
    __syncthreads();

    float acc[RT][4];
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[rt][e] = 0.f;

    for (int q = qb; q < qe; q += UNROLL) {
        Batch nxt;
        load_batch(nxt, qweight, scales, zeros, row0, q + UNROLL, qe, N, C, n_pad, lane);
        compute_batch(cur, smem, q - qb, qalloc, acc, lane);
        cur = nxt;
    }

    const int g = lane >> 2, t = lane & 3;
#if SPLITK > 1
    __shared__ int last_block[4]; // 16 bytes: what ptxas reserves for one int anyway
    float *mine = partial + (size_t)blockIdx.y * M * N;
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = g + (e >> 1) * 8, col = row0 + rt * 8 + 2 * t + (e & 1);
            if (row < M && col < N)
                mine[(size_t)row * N + col] = acc[rt][e];
        }
    w4_splitk_finish(out, partial, counters, SPLITK, M, N, blockIdx.x * BN, BN,
                     last_block);
#else
#pragma unroll
    for (int rt = 0; rt < RT; rt++) {
        const int col = row0 + rt * 8 + 2 * t;
        tc_store2(out, M, N, g, col, acc[rt][0], acc[rt][1]);
        tc_store2(out, M, N, g + 8, col, acc[rt][2], acc[rt][3]);
    }
#endif
}
