// matmul_gemv.cu — dense 16-bit matmul for decode (m up to ~16): out[m, n] = a[m, k] · w[n, k]^T
// with CUDA cores. Bound by reading w once: each warp owns ROWS weight rows and a 1/KWARPS share
// of k; every lane streams 16-byte pieces (8 values) of each row, UNROLL pieces per row in flight
// before any math, so a warp reads 512 contiguous bytes of a row per load instruction; the
// pieces left after the last full step are requested together. Where one step covers a lane's
// whole share of k (e.g. k = 1536, KWARPS = 2, UNROLL = 3) every weight byte of the warp is
// requested before the grid wait. MT
// activation rows share each weight load (they come from L1/L2, 16 bytes per row and piece).
// fp32 products and sums; a warp reduction, then (KWARPS > 1) a shared-memory one; one rounding.
// Rows of w past N read row N - 1 again and rows of a past M read as zeros: computed, never
// stored. Addresses are a base pointer plus row offsets (arrays of row pointers make ptxas spill).
// GLU (op matmul_glu, Gemma 4's gating fused into the epilogue): out = gelu_tanh(g) * u with
// g = a . w[n] and, GLU=1, u = a . w[N + n] (gate|up stacked in one [2N, k] weight: a warp
// computes its ROWS gate rows and the ROWS matching up rows), or, GLU=2, u read from a buffer
// (the PLE input of the layer, row stride u_ld). Roundings as transformers: g and u to T, the
// gelu to T, the product to T.
// SEAM (op matmul_seam, decode): the product t (N = the hidden size) is a sublayer's output and
// the layer seam follows it: every block stores its part of t, the last block of a row group
// to finish (atomic ticket on counters[blockIdx.y], put back to 0 by it) runs the seam of
// include/seam.cuh on those rows: x += RMSNorm_{w_post}(t) [* scalar], y = RMSNorm_{w_next}(x)
// (or y = T(x)). One launch instead of two.
// PRO (op matmul_pro, decode, one row): the layer seam that precedes the product runs first, in
// every block: x_new = x_in + RMSNorm_{w_post}(t) [* scalar], a = RMSNorm_{w_next}(x_new) (or
// T(x_new)) into shared memory (include/seam.cuh); block 0 stores x_new to x_out (the other
// residual buffer: every block must read the old x) and a to y, so that later kernels see what
// the seam kernel would have left. The seam then costs no launch of its own,
// and its L2 round trips overlap the weights requested before griddepcontrol.wait. The GEMV
// (plain or GLU) reads its activations from that shared row; PRO_COLS (= K), PRO_MODE, PRO_VEC.
// PRO_STAGE (0/1; 1 from sm_80, spacelib's seam_async): the seam's
// norm weights and scalar are requested into shared memory with cp.async before the grid wait
// (seam_stage_weights), off the critical path where the prologue read them from DRAM after its
// reductions (session 17's residual_norm: 3.44 -> 1.77 us).
// Defines: THREADS (block size), KWARPS (warps splitting k for the same rows), ROWS (rows per
// warp), MT (activation rows per block), UNROLL (16-byte pieces per row in flight per lane),
// GLU (0 plain, 1 stacked gate|up, 2 gate with u from a buffer), SEAM (0/1) with SEAM_COLS (= N),
// SEAM_MODE (0, 1, 2 as residual_norm) and SEAM_VEC (elements per load of the seam).
#include "dense_common.cuh"
#include "seam.cuh"

#ifndef GLU
#define GLU 0
#endif
#ifndef PRO_STAGE
#define PRO_STAGE 0
#endif

#define DN_WARPS (THREADS / 32)
#define DN_RGROUPS (DN_WARPS / KWARPS)        // row groups per block
#define DN_NR (GLU == 1 ? 2 * ROWS : ROWS)    // weight rows per warp: gate rows, then up rows

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
#if PRO // the row the prologue left in shared memory
        if (mi <= mlast)
            xv = *reinterpret_cast<const uint4 *>(abase + (size_t)piece * 8);
#else
        if (mi <= mlast)
            xv = dn_load_shared_by_block(abase + (size_t)mi * K + (size_t)piece * 8);
#endif
        dn_unpack8(xv, xf);
#pragma unroll
        for (int r = 0; r < NROWS; r++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[mi][r] = fmaf(xf[j], wf[r][j], acc[mi][r]);
    }
}

// Row r (0 .. DN_NR - 1) of the warp: gate rows n0 + r, then (GLU=1) up rows N + n0 + r - ROWS;
// rows past N read row N - 1 again (computed, never stored).
__device__ __forceinline__ const T *row_of(const T *w, int n0, int nlast, int N, int K, int r)
{
    const int rr = r < ROWS ? r : r - ROWS;
    const int base = r < ROWS ? n0 : N + n0;
    return w + (size_t)(base + (rr < nlast ? rr : nlast)) * K;
}

// The weight pieces of one step: UNROLL pieces (STRIDE apart from c) of each of the warp's rows.
template <int STRIDE>
__device__ __forceinline__ void load_step(uint4 (&wv)[UNROLL][DN_NR], const T *w, int n0, int nlast,
                                          int N, int K, int c)
{
#pragma unroll
    for (int uu = 0; uu < UNROLL; uu++)
#pragma unroll
        for (int r = 0; r < DN_NR; r++)
            wv[uu][r] = tc_load_stream(row_of(w, n0, nlast, N, K, r) + (size_t)(c + uu * STRIDE) * 8);
}
} // namespace dn

extern "C" __global__ void __launch_bounds__(THREADS, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ w,
#if GLU == 2
              const T *__restrict__ u, int u_ld,
#endif
#if SEAM
              SEAM_AFTER_PARAMS
#endif
#if PRO
              SEAM_BEFORE_PARAMS
#endif
              int M, int N, int K)
{
#if PRO
    __shared__ __align__(16) T pro_a[PRO_COLS];
    __shared__ float pro_scratch[DN_WARPS];
#if PRO_STAGE // w_post's and w_next's values, then the scalar (16 bytes kept for it)
    __shared__ __align__(16) T pro_w[2 * PRO_COLS + 8];
    float *pro_sc = reinterpret_cast<float *>(pro_w + 2 * PRO_COLS);
#endif
#endif
#if KWARPS > 1
    __shared__ float red[DN_WARPS * MT * DN_NR];
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kw = warp % KWARPS, rg = warp / KWARPS;
    const int n0 = (blockIdx.x * DN_RGROUPS + rg) * ROWS;
    const int m0 = blockIdx.y * MT;
    const int pieces = K / 8;
    constexpr int STRIDE = 32 * KWARPS; // pieces between one lane's consecutive pieces
    const int nlast = N - 1 - n0;
#if PRO
    const T *abase = pro_a;
    (void)a;
#else
    const T *abase = a + (size_t)m0 * K;
#endif
    const int mlast = M - 1 - m0;

    // The first step's weights are requested before waiting for the previous kernel: no kernel
    // of a forward writes weights, and under PDL their DRAM latency then overlaps the
    // predecessor's tail. Activations (its output) are read only after the wait.
    int c = kw * 32 + lane;
    uint4 wv[UNROLL][DN_NR];
    bool step = c + (UNROLL - 1) * STRIDE < pieces;
    if (step)
        dn::load_step<STRIDE>(wv, w, n0, nlast, N, K, c);
#if PRO && PRO_STAGE
    seam_stage_weights<THREADS, PRO_COLS, PRO_MODE>(pro_w, pro_w + PRO_COLS, pro_sc, w_post,
                                                    w_next, scalar);
#endif

    tailor_grid_begin();
#if PRO && PRO_STAGE
    seam_prologue<THREADS, PRO_COLS, PRO_VEC, PRO_MODE, true>(pro_a, x_in, x_out, y, t, pro_w,
                                                              pro_w + PRO_COLS, pro_sc, eps,
                                                              pro_scratch);
#elif PRO
    seam_prologue<THREADS, PRO_COLS, PRO_VEC, PRO_MODE>(pro_a, x_in, x_out, y, t, w_post, w_next,
                                                        scalar, eps, pro_scratch);
#endif

    float acc[MT][DN_NR];
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int r = 0; r < DN_NR; r++)
            acc[mi][r] = 0.f;

    // UNROLL pieces of every row in flight, then their math
    while (step) {
#pragma unroll
        for (int uu = 0; uu < UNROLL; uu++)
            dn::dot_piece<MT, DN_NR>(acc, wv[uu], abase, mlast, K, c + uu * STRIDE);
        c += UNROLL * STRIDE;
        step = c + (UNROLL - 1) * STRIDE < pieces;
        if (step)
            dn::load_step<STRIDE>(wv, w, n0, nlast, N, K, c);
    }
    // what is left: fewer than UNROLL pieces per lane, all requested before any of their math
    // (one DRAM round trip, not one per piece)
#if UNROLL > 1
#pragma unroll
    for (int uu = 0; uu < UNROLL - 1; uu++)
        if (c + uu * STRIDE < pieces)
#pragma unroll
            for (int r = 0; r < DN_NR; r++)
                wv[uu][r] = tc_load_stream(dn::row_of(w, n0, nlast, N, K, r) +
                                           (size_t)(c + uu * STRIDE) * 8);
#pragma unroll
    for (int uu = 0; uu < UNROLL - 1; uu++)
        if (c + uu * STRIDE < pieces)
            dn::dot_piece<MT, DN_NR>(acc, wv[uu], abase, mlast, K, c + uu * STRIDE);
#endif

    gemv_warp_sums(acc);

#if KWARPS > 1
    gemv_park_sums(acc, red, warp, lane);
    __syncthreads();
    if (kw == 0 && lane < MT * ROWS) {
        const int mi = lane / ROWS, r = lane % ROWS;
        float v = 0.f, vu = 0.f;
#pragma unroll
        for (int q = 0; q < KWARPS; q++) {
            v += red[((rg * KWARPS + q) * MT + mi) * DN_NR + r];
#if GLU == 1
            vu += red[((rg * KWARPS + q) * MT + mi) * DN_NR + ROWS + r];
#endif
        }
        if (m0 + mi < M && n0 + r < N) {
#if GLU == 2
            vu = to_f32(u[(size_t)(m0 + mi) * u_ld + n0 + r]);
#endif
            out[(size_t)(m0 + mi) * N + n0 + r] = gemv_finish(v, vu);
        }
    }
#else
    // (a lane-indexed store instead makes ptxas spill on some configurations)
    if (lane == 0)
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                if (m0 + mi < M && n0 + r < N) {
#if GLU == 1
                    const float vu = acc[mi][ROWS + r];
#elif GLU == 2
                    const float vu = to_f32(u[(size_t)(m0 + mi) * u_ld + n0 + r]);
#else
                    const float vu = 0.f;
#endif
                    out[(size_t)(m0 + mi) * N + n0 + r] = gemv_finish(acc[mi][r], vu);
                }
#endif
#if SEAM
    seam_after_gemv<THREADS, SEAM_COLS, SEAM_VEC, SEAM_MODE>(counters, m0, MT, M, y, x, out, w_post,
                                                             w_next, scalar, eps);
#endif
}
