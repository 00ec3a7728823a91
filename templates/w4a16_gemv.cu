// w4a16_gemv.cu — W4A16 matmul for decode (m up to ~8): out[m, n] = a[m, k] · W[n, k]^T with
// CUDA cores. Each warp owns ROWS weight rows and a share of k: every lane reads one 32-column
// chunk of each row with a 16-byte load per iteration (a warp reads 512 contiguous bytes of a
// row), turns the nibbles into floats with no conversion instruction (w4_float), and
// accumulates per chunk sum(a * (128 + u)) and sum(a) so that the scale and zero point are
// applied once per chunk: s * (sum(a * (128 + u)) - (128 + z) * sum(a)) = s * sum(a * (q - zp)).
// fp32 throughout; one rounding to the dtype at the end.
// SEAM (op w4a16_seam, decode): the product (N = the hidden size) is a sublayer's output and the
// layer seam follows in the same launch, run by the last block to finish (include/seam.cuh).
// PRO (op w4a16_pro, decode, one row): the layer seam before the product runs first in every
// block, into shared memory, as in matmul_gemv.cu (block 0 stores x to x_out and the row to y).
// GLU (op w4a16_glu, or w4a16_pro with glu = 1; decode): the weight is a layer's gate|up stack
// of 2N rows; a warp computes its ROWS gate rows n0.. and the ROWS matching up rows N + n0..,
// and stores gelu_tanh(gate) * up with transformers' roundings (gemv_finish, tailor_common.cuh).
// Defines: THREADS (block size), KWARPS (warps splitting k for the same rows), ROWS (rows per
// warp), MT (activation rows per block), GROUP (columns per scale), HAS_ZP; SEAM (0/1) with
// SEAM_COLS (= N), SEAM_MODE and SEAM_VEC; PRO (0/1) with PRO_COLS (= K), PRO_MODE, PRO_VEC;
// GLU (0/1).
#include "seam.cuh"
#include "w4a16_common.cuh"


#ifndef GLU
#define GLU 0
#endif
#if GLU && SEAM
#error "w4a16_gemv: GLU does not go with SEAM (the seam needs the hidden-size product)"
#endif

#define W4_WARPS (THREADS / 32)
#define W4_RGROUPS (W4_WARPS / KWARPS) // row groups per block
#define W4_NR (GLU ? 2 * ROWS : ROWS)  // weight rows per warp: the gate rows, then the up rows
// The next chunk's weights requested before the current one is used (a second set of weight
// registers); four rows already keep four loads in flight per lane and would spill with it.
#define W4_PREFETCH (W4_NR < 4)

namespace w4g {
// The packed words, scales and (128 + zero point) of chunk c of the warp's W4_NR rows: rows
// n0 .. n0 + ROWS - 1 and (GLU) the matching up rows N + n0 ..; rows past N give zeros.
__device__ __forceinline__ void load_chunk(uint4 (&w)[W4_NR], float (&s)[W4_NR],
                                           float (&zb)[W4_NR], const u32 *qweight,
                                           const T *scales, const u8 *zeros, int n0, int N, int K,
                                           int n_pad, int c)
{
    const int g = (c * 32) / GROUP;
    const size_t row_words = (size_t)(K / 8);
#pragma unroll
    for (int r = 0; r < W4_NR; r++) {
        const int rr = r < ROWS ? r : r - ROWS; // the output row n0 + rr
        const int n = (r < ROWS ? 0 : N) + n0 + rr;
        w[r] = make_uint4(0, 0, 0, 0);
        s[r] = 0.f;
        zb[r] = 136.f; // 128 + z with z = 8: symmetric
        if (n0 + rr < N) {
            w[r] = tc_load_stream(reinterpret_cast<const uint4 *>(qweight + n * row_words) + c);
            s[r] = to_f32(scales[(size_t)g * n_pad + n]);
#if HAS_ZP
            zb[r] = 128.f + (float)zeros[(size_t)g * n_pad + n];
#endif
        }
    }
    (void)zeros;
}
} // namespace w4g

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const u32 *__restrict__ qweight,
              const T *__restrict__ scales,
#if HAS_ZP
              const u8 *__restrict__ zeros,
#endif
#if SEAM
              SEAM_AFTER_PARAMS
#endif
#if PRO
              SEAM_BEFORE_PARAMS
#endif
              int M, int N, int K, int n_pad)
{
#if PRO
    __shared__ __align__(16) T pro_a[PRO_COLS];
    __shared__ float pro_scratch[W4_WARPS];
    const T *act = pro_a; // the kernel's a is not read: the row comes from the prologue
    (void)a;
#else
    const T *act = a;
#endif
#if KWARPS > 1
    __shared__ float red[W4_WARPS * MT * W4_NR];
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kw = warp % KWARPS, rg = warp / KWARPS;
    const int n0 = (blockIdx.x * W4_RGROUPS + rg) * ROWS;
    const int m0 = blockIdx.y * MT;
    const int chunks = K / 32;
#if HAS_ZP
    const u8 *zp = zeros;
#else
    const u8 *zp = nullptr;
#endif

    // The first chunk's weights, scales and zero points are requested before waiting for the
    // previous kernel (no kernel of a forward writes them): under PDL their DRAM latency
    // overlaps the predecessor's tail. Activations are read only after the wait.
    int c = kw * 32 + lane;
    uint4 w[W4_NR];
    float s[W4_NR], zb[W4_NR];
    if (c < chunks)
        w4g::load_chunk(w, s, zb, qweight, scales, zp, n0, N, K, n_pad, c);

    tailor_grid_begin();
#if PRO
    seam_prologue<THREADS, PRO_COLS, PRO_VEC, PRO_MODE>(pro_a, x_in, x_out, y, t, w_post, w_next,
                                                        scalar, eps, pro_scratch);
#endif

    float acc[MT][W4_NR];
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int r = 0; r < W4_NR; r++)
            acc[mi][r] = 0.f;

    const int c0 = c;
    (void)c0;
    for (; c < chunks; c += 32 * KWARPS) {
        // the next chunk's weights are requested before this one is used: one DRAM round trip
        // in flight behind the math instead of one per chunk in turn
#if W4_PREFETCH
        uint4 w_next[W4_NR];
        float s_next[W4_NR], zb_next[W4_NR];
        if (c + 32 * KWARPS < chunks)
            w4g::load_chunk(w_next, s_next, zb_next, qweight, scales, zp, n0, N, K, n_pad,
                            c + 32 * KWARPS);
#else
        if (c != c0)
            w4g::load_chunk(w, s, zb, qweight, scales, zp, n0, N, K, n_pad, c);
#endif
        // The activations of this chunk, as 4 x 8 values per row of a.
        TVec<8> x[MT][4];
        float xs[MT], p[MT][W4_NR];
#pragma unroll
        for (int mi = 0; mi < MT; mi++) {
            xs[mi] = 0.f;
#pragma unroll
            for (int r = 0; r < W4_NR; r++)
                p[mi][r] = 0.f;
            const int m = m0 + mi < M ? m0 + mi : M - 1; // rows past M compute garbage, unstored
            const TVec<8> *ar = reinterpret_cast<const TVec<8> *>(act + (size_t)m * K) + 4 * c;
#pragma unroll
            for (int j = 0; j < 4; j++)
                x[mi][j] = ar[j];
        }
#pragma unroll
        for (int t = 0; t < 4; t++) {
#pragma unroll
            for (int nib = 0; nib < 8; nib++) {
                // nibble nib of word t: pair nib % 4, half nib / 4 -> column 8 (nib%4) + 2t + nib/4
                float wf[W4_NR];
#pragma unroll
                for (int r = 0; r < W4_NR; r++) {
                    const u32 word = t == 0 ? w[r].x : t == 1 ? w[r].y : t == 2 ? w[r].z : w[r].w;
                    wf[r] = w4_float(word, nib);
                }
#pragma unroll
                for (int mi = 0; mi < MT; mi++) {
                    const float xf = to_f32(x[mi][nib % 4].v[2 * t + nib / 4]);
                    xs[mi] += xf;
#pragma unroll
                    for (int r = 0; r < W4_NR; r++)
                        p[mi][r] = fmaf(xf, wf[r], p[mi][r]);
                }
            }
        }
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int r = 0; r < W4_NR; r++)
                acc[mi][r] = fmaf(s[r], p[mi][r] - zb[r] * xs[mi], acc[mi][r]);
#if W4_PREFETCH
#pragma unroll
        for (int r = 0; r < W4_NR; r++) {
            w[r] = w_next[r];
            s[r] = s_next[r];
            zb[r] = zb_next[r];
        }
#endif
    }

    gemv_warp_sums(acc);

#if KWARPS > 1
    gemv_park_sums(acc, red, warp, lane);
    __syncthreads();
    if (kw == 0 && lane < MT * ROWS) {
        float v = 0.f, vu = 0.f;
#pragma unroll
        for (int q = 0; q < KWARPS; q++) {
#if GLU // the lane's gate row and its up row, ROWS further
            const int w0 = ((rg * KWARPS + q) * MT + lane / ROWS) * W4_NR + lane % ROWS;
            v += red[w0];
            vu += red[w0 + ROWS];
#else
            v += red[(rg * KWARPS + q) * MT * ROWS + lane];
#endif
        }
        const int mi = lane / ROWS, r = lane % ROWS;
        if (m0 + mi < M && n0 + r < N)
            out[(size_t)(m0 + mi) * N + n0 + r] = gemv_finish(v, vu);
    }
#else
    if (lane == 0)
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int r = 0; r < ROWS; r++)
                if (m0 + mi < M && n0 + r < N)
                    out[(size_t)(m0 + mi) * N + n0 + r] =
                        gemv_finish(acc[mi][r], acc[mi][W4_NR - ROWS + r]);
#endif
#if SEAM
    seam_after_gemv<THREADS, SEAM_COLS, SEAM_VEC, SEAM_MODE>(counters, m0, MT, M, y, x, out, w_post,
                                                             w_next, scalar, eps);
#endif
}
