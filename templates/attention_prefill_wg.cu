// attention_prefill_wg.cu — attention_prefill (same op, buffers and mask as attention_prefill.cu)
// on sm_90a warpgroup MMAs, head_dim 256: causal (optionally sliding-window) flash attention for
// a chunk of new queries after cached history, GQA/MQA, scaling 1.0, fp32 online softmax.
//
// Layouts (row-major, dtype T), as attention_prefill.cu:
//   q   [q_len, heads, HEAD_DIM]     the new queries; query i sits at position kv_len - q_len + i
//   k,v [kv_len, kv_heads, HEAD_DIM] every key/value up to and including the new ones
//   out [q_len, heads, HEAD_DIM]
// Query at position t sees key u when u <= t and (window == 0 or u > t - window).
//
// A block is NWG warpgroups of 64 rows each. Its rows are HP heads of one KV group at BM / HP
// consecutive positions, interleaved (row x: position x / HP, head x % HP of the block's heads),
// so that HP query heads share each K/V tile they read (grid (ceil(q_len HP / 64 NWG),
// heads / HP)); HP = 1 is one head.
// Per key tile of BN keys:
//   S = Q·Kᵀ   wgmma m64nBNk16, both operands from shared memory (Q and K are K-major as they
//              come: rows of HEAD_DIM), in the 128-byte swizzle;
//   softmax    in registers, rows g and g + 8 of each warp's 16 (the m16n8 accumulator layout),
//              the mask only on tiles that need it, P rounded to the dtype, the sum in fp32
//              (what HF's eager path does, as attention_prefill.cu);
//   O += P·V   wgmma m64n256k16 with P from registers (the S accumulators are its A fragments)
//              and V from shared memory. wgmma's B must be K-major (keys contiguous), so each V
//              tile, copied in as it comes (keys x HEAD_DIM), is transposed once into Vᵀ
//              (HEAD_DIM rows of BN keys, swizzled), double-buffered so that the transpose of
//              tile i overlaps tile i - 1's P·V.
// The loads run STAGES deep through cp.async (K swizzled on the way in, V as rows); P·V of tile i
// stays in flight while tile i + 1's loads, transpose and S are issued.
// Dynamic shared memory (1024-aligned): sQ [64 NWG x HEAD_DIM], STAGES x (sK [BN x HEAD_DIM],
// sV [BN x HEAD_DIM]), 2 x sVt [HEAD_DIM x max(BN, 64)] (a swizzled row is 128 bytes); sizes in
// attention_prefill_wg.lua.
// Defines: HEAD_DIM (256), NWG (1, 2), BN (32, 64), STAGES (>= 2), HP (heads a block, dividing
// heads / kv_heads).
#include "tc_common.cuh"
#include "wgmma.cuh"

#define AW_THREADS (NWG * 128)
#define AW_BM (NWG * 64)
#define AW_INF __int_as_float(0x7f800000)

namespace aw {
typedef unsigned char u8;
constexpr int QBYTES = AW_BM * HEAD_DIM * 2;
constexpr int KBYTES = BN * HEAD_DIM * 2; // one K tile (and one V tile)
// one Vᵀ tile: HEAD_DIM rows of BN keys, but a swizzled row is 128 bytes (64 keys) even at BN = 32
constexpr int VTBYTES = HEAD_DIM * (BN > 64 ? BN : 64) * 2;
static_assert(HEAD_DIM == 256, "the P·V accumulators are one m64n256 (head_dim 256)");
static_assert(BN == 32 || BN == 64, "BN is a wgmma N of the score step: 32 or 64");
static_assert(STAGES >= 2, "at least 2 stages");

// Byte offset of 16-byte chunk c of row r in a K-major swizzled tile of `rows` rows: 64-element
// slabs of rows x 128 B, chunk c of a row stored at chunk c ^ (r % 8) of its slab.
__device__ __forceinline__ int swz(int r, int c, int rows)
{
    return (c >> 3) * (rows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

__device__ __forceinline__ unsigned pack(float lo, float hi)
{
    const T2 v = from_f32x2(make_float2(lo, hi));
    return *reinterpret_cast<const unsigned *>(&v);
}

// Packed rows [row0, row0 + BM) of q (zeros past q_len) into sQ, swizzled; qh is the block's
// first head's row 0.
__device__ __forceinline__ void load_q(u8 *sQ, const T *qh, size_t qstride, int row0, int q_len)
{
    for (int i = threadIdx.x; i < AW_BM * (HEAD_DIM / 8); i += AW_THREADS) {
        const int r = i / (HEAD_DIM / 8), c = i % (HEAD_DIM / 8);
        const int pos = (row0 + r) / HP, h = (row0 + r) % HP;
        const bool ok = pos < q_len;
        tc_copy16(sQ + swz(r, c, AW_BM),
                  qh + (size_t)(ok ? pos : 0) * qstride + (size_t)h * HEAD_DIM + c * 8, ok);
    }
}

// Keys [kb, kb + BN) of K (swizzled) and V (as rows) into a stage; zeros past kv_len (a masked
// key still multiplies its V row by P = 0, so it must be finite).
__device__ __forceinline__ void load_kv(u8 *sK, T *sV, const T *kh, const T *vh, size_t kstride,
                                        int kb, int kv_len)
{
    for (int i = threadIdx.x; i < BN * (HEAD_DIM / 8); i += AW_THREADS) {
        const int r = i / (HEAD_DIM / 8), c = i % (HEAD_DIM / 8), key = kb + r;
        const bool ok = key < kv_len;
        const size_t src = (size_t)(ok ? key : 0) * kstride + c * 8;
        tc_copy16(sK + swz(r, c, BN), kh + src, ok);
        tc_copy16(sV + r * HEAD_DIM + c * 8, vh + src, ok);
    }
}

// Vᵀ of a landed V tile: chunk (d, c) of sVt holds keys 8c .. 8c + 7 of column d. Lanes take
// consecutive d, so the 2-byte reads of a key row are conflict-free and the 16-byte writes of
// 8 lanes cover the 8 swizzled chunk positions of their rows.
__device__ __forceinline__ void transpose_v(u8 *sVt, const T *sV)
{
    const unsigned short *v = reinterpret_cast<const unsigned short *>(sV);
    for (int i = threadIdx.x; i < HEAD_DIM * (BN / 8); i += AW_THREADS) {
        const int d = i % HEAD_DIM, c = i / HEAD_DIM;
        unsigned w[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            w[u] = (unsigned)v[(8 * c + 2 * u) * HEAD_DIM + d] |
                   ((unsigned)v[(8 * c + 2 * u + 1) * HEAD_DIM + d] << 16);
        *reinterpret_cast<uint4 *>(sVt + swz(d, c, HEAD_DIM)) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
} // namespace aw

extern "C" __global__ void __launch_bounds__(AW_THREADS, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ q, const T *__restrict__ k,
              const T *__restrict__ v, int q_len, int kv_len, int heads, int kv_heads, int window)
{
    tailor_grid_begin();
    using namespace aw;
    extern __shared__ __align__(16) u8 smem_raw[];
    const wg_u32 raw = tc_smem_addr(smem_raw);
    u8 *sQ = smem_raw + (((raw + 1023u) & ~1023u) - raw); // swizzled tiles: 1024-byte aligned
    u8 *sK = sQ + QBYTES;                                  // STAGES x (K tile, V tile)
    u8 *sVt = sK + STAGES * 2 * KBYTES;                    // 2 x Vᵀ tile
    auto stage_k = [&](int s) { return sK + s * 2 * KBYTES; };
    auto stage_v = [&](int s) { return reinterpret_cast<T *>(sK + s * 2 * KBYTES + KBYTES); };

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wg = warp >> 2, g = lane >> 2, t = lane & 3;
    const int row0 = (gridDim.x - 1 - blockIdx.x) * AW_BM; // longest rows start first
    const int head0 = blockIdx.y * HP, kvh = head0 / (heads / kv_heads);
    const int past = kv_len - q_len;
    const size_t qstride = (size_t)heads * HEAD_DIM, kstride = (size_t)kv_heads * HEAD_DIM;
    const T *qh = q + (size_t)head0 * HEAD_DIM;
    const T *kh = k + (size_t)kvh * HEAD_DIM;
    const T *vh = v + (size_t)kvh * HEAD_DIM;
    const int nrows = min(AW_BM, q_len * HP - row0); // packed rows of real queries

    // Keys any row of this block can see: [klo, khi), in tiles from kstart.
    const int first_pos = past + row0 / HP, last_pos = past + (row0 + nrows - 1) / HP;
    const int klo = window > 0 ? max(0, first_pos - window + 1) : 0;
    const int khi = last_pos + 1;
    const int kstart = (klo / BN) * BN;
    const int ntiles = (khi - kstart + BN - 1) / BN;

    // This warp's 16 rows sit at positions [wlo, whi]: a tile is wholly visible to them when it
    // ends at or before wlo, inside the keys, and after the last row's window.
    const int wrow = wg * 64 + (warp & 3) * 16; // the warp's first row in the block
    const int wlo = past + (row0 + wrow) / HP, whi = past + (row0 + wrow + 15) / HP;
    auto whole = [&](int kb) {
        return kb + BN - 1 <= wlo && kb + BN <= kv_len && (window <= 0 || kb > whi - window);
    };

    load_q(sQ, qh, qstride, row0, q_len); // in the first group, with tile 0
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ntiles)
            load_kv(stage_k(s), stage_v(s), kh, vh, kstride, kstart + s * BN, kv_len);
        tc_copy_commit();
    }

    float o[HEAD_DIM / 2], sc[BN / 2];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; i++)
        o[i] = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        sc[i] = 0.f;
    float m[2] = {-AW_INF, -AW_INF}, l[2] = {0.f, 0.f};
    unsigned pa[BN / 16][4];
    const wg_u32 qaddr = tc_smem_addr(sQ) + wg * 64 * 128; // this warpgroup's 64 rows

    for (int i = 0; i < ntiles; i++) {
        tc_copy_wait<STAGES - 2>();
        __syncthreads(); // tile i landed for every thread; stage (i - 1) % STAGES is free: its
                         // S finished and its V was transposed at tile i - 1
        const int nk = i + STAGES - 1;
        if (nk < ntiles)
            load_kv(stage_k(nk % STAGES), stage_v(nk % STAGES), kh, vh, kstride,
                    kstart + nk * BN, kv_len);
        tc_copy_commit();
        // Vt[i % 2] was last read by tile i - 2's P·V, retired by the wait of tile i - 1
        u8 *vt = sVt + (i & 1) * VTBYTES;
        transpose_v(vt, stage_v(i % STAGES));
        wg_fence_proxy_async(); // this thread's copies and stores, visible to the async proxy
        __syncthreads();

        // S = Q·Kᵀ (overwrites sc; queued behind tile i - 1's P·V)
        const wg_u32 kaddr = tc_smem_addr(stage_k(i % STAGES));
        wg_fence_acc(sc);
        wg_fence();
#pragma unroll
        for (int s = 0; s < HEAD_DIM / 16; s++)
            wg_mma_ss<BN>(sc, wg_desc_sw128(qaddr + (s >> 2) * (AW_BM * 128) + (s & 3) * 32),
                          wg_desc_sw128(kaddr + (s >> 2) * (BN * 128) + (s & 3) * 32), s);
        wg_commit();
        wg_wait<0>(); // S of tile i, and P·V of tile i - 1: o and pa are free
        wg_fence_acc(sc);
        wg_fence_acc(o);

        // mask (sc[4j + e]: row g + 8 (e >> 1), key 8j + 2t + (e & 1) of the tile)
        const int kb = kstart + i * BN;
        if (!whole(kb)) {
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int pos = past + (row0 + wrow + g + 8 * (e >> 1)) / HP;
                    const int key = kb + 8 * j + 2 * t + (e & 1);
                    if (!(key <= pos && key < kv_len && (window <= 0 || key > pos - window)))
                        sc[4 * j + e] = -AW_INF;
                }
        }
        // online softmax: row maxima over the 4 lanes of a row, rescale where they moved
        float mx[2] = {-AW_INF, -AW_INF};
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[4 * j + e]);
        float mu[2], alpha[2];
        bool moved = false;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float mnew = fmaxf(m[h], mx[h]);
            mu[h] = mnew == -AW_INF ? 0.f : mnew; // no key seen yet: avoid -inf - -inf
            alpha[h] = __expf(m[h] - mu[h]);
            moved |= mnew != m[h];
            m[h] = mnew;
            l[h] *= alpha[h];
        }
        if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
            for (int j = 0; j < HEAD_DIM / 8; j++) {
                o[4 * j] *= alpha[0];
                o[4 * j + 1] *= alpha[0];
                o[4 * j + 2] *= alpha[1];
                o[4 * j + 3] *= alpha[1];
            }
        }
        // P = exp(S - m): summed unrounded, rounded to the dtype as P·V's A fragments
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const float e0 = __expf(sc[4 * j] - mu[0]), e1 = __expf(sc[4 * j + 1] - mu[0]);
            const float e2 = __expf(sc[4 * j + 2] - mu[1]), e3 = __expf(sc[4 * j + 3] - mu[1]);
            l[0] += e0 + e1;
            l[1] += e2 + e3;
            pa[j / 2][2 * (j & 1)] = pack(e0, e1);
            pa[j / 2][2 * (j & 1) + 1] = pack(e2, e3);
        }

        // O += P·V (left in flight: the next tile's wait retires it)
        const wg_u32 vaddr = tc_smem_addr(vt);
        wg_fence_acc(o);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wg_mma_rs<HEAD_DIM>(o, pa[kk], wg_desc_sw128(vaddr + (kk >> 2) * (HEAD_DIM * 128) +
                                                         (kk & 3) * 32));
        wg_commit();
    }
    wg_wait<0>();
    wg_fence_acc(o);
    tc_copy_wait<0>();

    // the row sums over the 4 lanes of a row, then the normalised rows
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = wrow + g + 8 * h;
        if (r >= nrows)
            continue;
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
        T *orow = out + (size_t)((row0 + r) / HP) * qstride +
                  (size_t)(head0 + (row0 + r) % HP) * HEAD_DIM + 2 * t;
#pragma unroll
        for (int j = 0; j < HEAD_DIM / 8; j++)
            *reinterpret_cast<T2 *>(orow + 8 * j) =
                from_f32x2(make_float2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv));
    }
}
