// matmul_gemv.cu — dense 16-bit matmul for decode (m up to ~16): out[m, n] = a[m, k] · w[n, k]^T
// with CUDA cores. Bound by reading w once: each warp owns ROWS weight rows and a 1/KWARPS share
// of k; every lane streams 16-byte pieces (8 values) of each row, UNROLL pieces per row in flight
// before any math, so a warp reads 512 contiguous bytes of a row per load instruction. MT
// activation rows share each weight load (they come from L1/L2, 16 bytes per row and piece).
// fp32 products and sums; a warp reduction, then (KWARPS > 1) a shared-memory one; one rounding.
// Rows of w past N read row N - 1 again and rows of a past M read as zeros: computed, never
// stored. Addresses are a base pointer plus row offsets (arrays of row pointers make ptxas spill).
// Defines: THREADS (block size), KWARPS (warps splitting k for the same rows), ROWS (rows per
// warp), MT (activation rows per block), UNROLL (16-byte pieces per row in flight per lane).
#include "dense_common.cuh"

#define DN_WARPS (THREADS / 32)
#define DN_RGROUPS (DN_WARPS / KWARPS) // row groups per block

static_assert(DN_WARPS % KWARPS == 0, "KWARPS must divide the warps of a block");
static_assert(MT * ROWS <= 32, "one lane stores each output of a warp");

namespace dn {
// acc[mi][r] += a piece (8 values of each activation row) . the same 8 columns of each w row;
// activation rows start at abase, K apart; rows past mlast are zeros.
template <int NMT, int NROWS>
__device__ __forceinline__ void dot_piece(float (&acc)[NMT][NROWS], const uint4 (&wv)[NROWS],
                                          const T *abase, int mlast, int K, int piece)
{
    float wf[NROWS][8];
#pragma unroll
    for (int r = 0; r < NROWS; r++)
        dn_unpack8(wv[r], wf[r]);
#pragma unroll
    for (int mi = 0; mi < NMT; mi++) {
        float xf[8];
        uint4 xv = make_uint4(0, 0, 0, 0); // rows past M: zeros, never stored
        if (mi <= mlast)
            xv = dn_load_shared_by_block(abase + (size_t)mi * K + (size_t)piece * 8);
        dn_unpack8(xv, xf);
#pragma unroll
        for (int r = 0; r < NROWS; r++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[mi][r] = fmaf(xf[j], wf[r][j], acc[mi][r]);
    }
}
} // namespace dn

extern "C" __global__ void __launch_bounds__(THREADS, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ w, int M, int N,
              int K)
{
#if KWARPS > 1
    __shared__ float red[DN_WARPS * MT * ROWS];
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kw = warp % KWARPS, rg = warp / KWARPS;
    const int n0 = (blockIdx.x * DN_RGROUPS + rg) * ROWS;
    const int m0 = blockIdx.y * MT;
    const int pieces = K / 8;
    constexpr int STRIDE = 32 * KWARPS; // pieces between one lane's consecutive pieces

    // rows past N read row N - 1 again (computed, never stored)
    const T *wbase = w + (size_t)n0 * K;
    const int nlast = N - 1 - n0;

    // the weights do not depend on the previous kernel: warm L2 with this warp's share first
    if (blockIdx.y == 0 && tailor_prefetch_block(blockIdx.x, (size_t)DN_RGROUPS * ROWS * K * sizeof(T)))
#pragma unroll
        for (int r = 0; r < ROWS; r++)
            for (int c = kw * 32 + lane; c < pieces; c += STRIDE)
                tailor_prefetch_l2(wbase + (size_t)(r < nlast ? r : nlast) * K + (size_t)c * 8);
    tailor_grid_begin();
    const T *abase = a + (size_t)m0 * K;
    const int mlast = M - 1 - m0;

    float acc[MT][ROWS];
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int r = 0; r < ROWS; r++)
            acc[mi][r] = 0.f;

    int c = kw * 32 + lane;
    // UNROLL pieces of every row in flight, then their math
    for (; c + (UNROLL - 1) * STRIDE < pieces; c += UNROLL * STRIDE) {
        uint4 wv[UNROLL][ROWS];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                wv[u][r] = dn_load_stream(wbase + (size_t)(r < nlast ? r : nlast) * K +
                                          (size_t)(c + u * STRIDE) * 8);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            dn::dot_piece<MT, ROWS>(acc, wv[u], abase, mlast, K, c + u * STRIDE);
    }
    // what is left: fewer than UNROLL pieces per lane
#if UNROLL > 1
    for (; c < pieces; c += STRIDE) {
        uint4 wv[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; r++)
            wv[r] = dn_load_stream(wbase + (size_t)(r < nlast ? r : nlast) * K + (size_t)c * 8);
        dn::dot_piece<MT, ROWS>(acc, wv, abase, mlast, K, c);
    }
#endif

#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int r = 0; r < ROWS; r++)
            acc[mi][r] = warp_sum(acc[mi][r]);

#if KWARPS > 1
    if (lane == 0)
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                red[(warp * MT + mi) * ROWS + r] = acc[mi][r];
    __syncthreads();
    if (kw == 0 && lane < MT * ROWS) {
        float v = 0.f;
#pragma unroll
        for (int q = 0; q < KWARPS; q++)
            v += red[(rg * KWARPS + q) * MT * ROWS + lane];
        const int mi = lane / ROWS, r = lane % ROWS;
        if (m0 + mi < M && n0 + r < N)
            out[(size_t)(m0 + mi) * N + n0 + r] = from_f32(v);
    }
#else
    // (a lane-indexed store instead makes ptxas spill on some configurations)
    if (lane == 0)
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                if (m0 + mi < M && n0 + r < N)
                    out[(size_t)(m0 + mi) * N + n0 + r] = from_f32(acc[mi][r]);
#endif
}
