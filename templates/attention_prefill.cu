// attention_prefill.cu — causal (optionally sliding-window) flash attention for a chunk of new
// queries after cached history, GQA/MQA, scaling 1.0, fp32 online softmax, tensor cores.
//
// Layouts (row-major, dtype T):
//   q   [q_len, heads, HEAD_DIM]     the new queries; query i sits at position kv_len - q_len + i
//   k,v [kv_len, kv_heads, HEAD_DIM] every key/value up to and including the new ones
//   out [q_len, heads, HEAD_DIM]
// Query at position t sees key u when u <= t and (window == 0 or u > t - window); head h reads
// KV head h / (heads / kv_heads).
// Grid: (ceil(q_len / BM), heads); block 32 * WM * WN threads; dynamic shared memory, in order:
//   float sMax[WN * BM]; T sQ[BM * (HEAD_DIM + 8)] (absent with Q_REGS);
//   T sK[STAGES * BN * (HEAD_DIM + 8)]; T sV[same]; T sP[BM * (BN + 8)] (only with WN > 1: one
//   warp per row group keeps P in registers).
#include "attn_mma.cuh"

#if STAGES > 1 && !ASYNC
#error "attention_prefill.cu: STAGES > 1 needs ASYNC (cp.async)"
#endif

extern "C" __global__ void __launch_bounds__(ATTN_NT, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ q, const T *__restrict__ k,
              const T *__restrict__ v, int q_len, int kv_len, int heads, int kv_heads, int window)
{
    tailor_grid_begin();
    extern __shared__ __align__(16) unsigned char attn_smem[];
    float *sMax = reinterpret_cast<float *>(attn_smem);
    T *sQ = reinterpret_cast<T *>(attn_smem + sizeof(float) * WN * ATTN_BM);
    T *sK = sQ + (Q_REGS ? 0 : ATTN_BM * ATTN_KSTR);
    T *sV = sK + STAGES * BN * ATTN_KSTR;
    T *sP = sV + STAGES * BN * ATTN_KSTR; // absent with ATTN_P_REGS (WN == 1)

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int row0 = (gridDim.x - 1 - blockIdx.x) * ATTN_BM; // longest rows start first
    const int head = blockIdx.y, kvh = head / (heads / kv_heads);
    const int past = kv_len - q_len;
    const size_t qstride = (size_t)heads * HEAD_DIM, kstride = (size_t)kv_heads * HEAD_DIM;
    const T *qb = q + (size_t)row0 * qstride + (size_t)head * HEAD_DIM;
    const T *kh = k + (size_t)kvh * HEAD_DIM;
    const T *vh = v + (size_t)kvh * HEAD_DIM;
    const int nrows = min(ATTN_BM, q_len - row0);

    // Keys any row of this block can see: [klo, khi).
    const int first_pos = past + row0, last_pos = past + row0 + nrows - 1;
    const int klo = window > 0 ? max(0, first_pos - window + 1) : 0;
    const int khi = last_pos + 1;
    const int kstart = (klo / BN) * BN;
    const int ntiles = (khi - kstart + BN - 1) / BN;

#if Q_REGS
    unsigned qf[HEAD_DIM / 16][4];
    attn_load_q_regs(qf, qb, qstride, wm * 16, nrows, lane);
#else
    const unsigned(*qf)[4] = nullptr;
    for (int c = tid; c < ATTN_BM * (HEAD_DIM / 8); c += ATTN_NT) {
        const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
        attn_copy16(sQ + r * ATTN_KSTR + col, qb + (size_t)(r < nrows ? r : 0) * qstride + col,
                    r < nrows);
    }
#endif

    // K and V of tile `tile` into stage `slot` (separately: STAGES == 1 overlaps each with the
    // other's use).
    auto load_rows = [&](T *dst, const T *src, int tile) {
        const int kb = kstart + tile * BN;
        for (int c = tid; c < BN * (HEAD_DIM / 8); c += ATTN_NT) {
            const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
            const int key = kb + r;
            const bool ok = key < kv_len;
            attn_copy16(dst + r * ATTN_KSTR + col, src + (size_t)(ok ? key : 0) * kstride + col, ok);
        }
    };
    auto load_k = [&](int tile, int slot) { load_rows(sK + slot * BN * ATTN_KSTR, kh, tile); };
    auto load_v = [&](int tile, int slot) { load_rows(sV + slot * BN * ATTN_KSTR, vh, tile); };

    // This warp's rows sit at positions [wlo, whi]; a tile at keys [kb, kb + BN) is wholly
    // visible to them when it ends at or before wlo, inside the keys, and after whi's window.
    const int wlo = past + row0 + wm * ATTN_WR, whi = wlo + ATTN_WR - 1;
    auto whole = [&](int kb) {
        return kb + BN - 1 <= wlo && kb + BN <= kv_len && (window <= 0 || kb > whi - window);
    };

    AttnAcc acc;
    attn_acc_init(acc);

#if STAGES > 1
    // The first group carries Q (when in smem) and tile 0; groups are committed even when empty
    // so that wait_group counts stay uniform.
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ntiles) {
            load_k(s, s);
            load_v(s, s);
        }
        attn_commit();
    }
    for (int i = 0; i < ntiles; i++) {
        attn_wait<STAGES - 2>();
        __syncthreads();
        if (i + STAGES - 1 < ntiles) {
            load_k(i + STAGES - 1, (i + STAGES - 1) % STAGES);
            load_v(i + STAGES - 1, (i + STAGES - 1) % STAGES);
        }
        attn_commit();
        const int slot = i % STAGES, kb = kstart + i * BN;
        const AttnNoMid mid;
#else
    // One stage, K and V in their own groups: V(i) lands while S(i) is computed, K(i + 1) while
    // P(i)·V(i) is. Groups in flight at the top of tile i: K(i) (with Q at i = 0), then V(i).
    load_k(0, 0);
    attn_commit();
    load_v(0, 0);
    attn_commit();
    for (int i = 0; i < ntiles; i++) {
        attn_wait<1>(); // K(i)
        __syncthreads();
        const int slot = 0, kb = kstart + i * BN;
        auto mid = [&]() {
            __syncthreads(); // every warp is past its last read of K(i)
            if (i + 1 < ntiles)
                load_k(i + 1, 0);
            attn_commit();
            attn_wait<1>(); // V(i)
            __syncthreads();
        };
#endif
        auto visible = [&](int row, int col) {
            const int pos = past + row0 + row, key = kb + col;
            return key <= pos && key < kv_len && (window <= 0 || key > pos - window);
        };
        attn_tile(acc, qf, sQ, sK + slot * BN * ATTN_KSTR, sV + slot * BN * ATTN_KSTR, sP, sMax,
                  wm, wn, lane, visible, whole(kb), mid);
#if STAGES == 1
        __syncthreads(); // every warp is past its last read of V(i)
        if (i + 1 < ntiles)
            load_v(i + 1, 0);
        attn_commit();
#endif
    }
    attn_wait<0>();

    attn_finish_sums(acc, sMax, wm, wn, lane);

    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int ti = 0; ti < RM; ti++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = wm * ATTN_WR + ti * 16 + g + 8 * i, h = 2 * ti + i;
            if (r >= nrows)
                continue;
            const float inv = acc.l[h] > 0.f ? 1.f / acc.l[h] : 0.f;
            T *orow = out + (size_t)(row0 + r) * qstride + (size_t)head * HEAD_DIM +
                      wn * ATTN_DS + 2 * t;
#pragma unroll
            for (int n = 0; n < ATTN_DS / 8; n++)
                *reinterpret_cast<T2 *>(orow + n * 8) = from_f32x2(
                    make_float2(acc.o[ti * (ATTN_DS / 8) + n][2 * i] * inv,
                                acc.o[ti * (ATTN_DS / 8) + n][2 * i + 1] * inv));
        }
}
