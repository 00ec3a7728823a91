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
// A block is NWG row groups of 64 rows, each served by DW = HEAD_DIM / 256 warpgroups (one per 256
// output columns). Its rows are HP heads of one KV group at BM / HP consecutive positions,
// interleaved (row x: position x / HP, head x % HP of the block's heads), so that HP query heads
// share each K/V tile they read (grid (ceil(q_len HP / 64 NWG), heads / HP)); HP = 1 is one head.
// Per key tile of BN keys:
//   S = Q·Kᵀ   wgmma m64nBNk16, both operands from shared memory (Q and K are K-major as they
//              come: rows of HEAD_DIM), in the 128-byte swizzle. At head_dim 512 each warpgroup
//              of a row group sums its own 256 columns of d, and the two partial scores are
//              exchanged through shared memory (both add them in either order: the same bits);
//   softmax    in registers, rows g and g + 8 of each warp's 16 (the m16n8 accumulator layout),
//              the mask only on tiles that need it, P rounded to the dtype, the sum in fp32
//              (what HF's eager path does, as attention_prefill.cu);
//   O += P·V   wgmma m64n256k16 per warpgroup (its 256 output columns) with P from registers (the
//              S accumulators are its A fragments) and V from shared memory as it comes (keys x
//              HEAD_DIM, swizzled like K), read N-major by the wgmma itself (imm-trans-b: no
//              transposed copy; session 12 measured one at 1.6x the time).
// The loads run STAGES deep through cp.async; P·V of tile i stays in flight while tile i + 1's
// wait and S are issued, so the stage it reads is refilled only after every warpgroup's wait has
// retired it.
// Dynamic shared memory (1024-aligned): sQ [64 NWG x HEAD_DIM], STAGES x (sK [BN x HEAD_DIM],
// sV [BN x HEAD_DIM]), and with DW = 2 sX [NWG x 2 x 64 x BN] fp32 partial scores; sizes in
// attention_prefill_wg.lua.
// Defines: HEAD_DIM (256, 512), NWG (1, 2), BN (32, 64), STAGES (>= 2), HP (heads a block, dividing
// heads / kv_heads), RETIRE (1: each tile's P·V retired at its end, which keeps ptxas from
// serializing the wgmmas; 0: left in flight across the next tile's wait and S).
#include "tc_common.cuh"
#include "wgmma.cuh"

#define AW_DW (HEAD_DIM / 256) // warpgroups per row group, one per 256 output columns
#define AW_THREADS (NWG * AW_DW * 128)
#define AW_BM (NWG * 64)
#define AW_INF __int_as_float(0x7f800000)

namespace aw {
typedef unsigned char u8;
constexpr int QBYTES = AW_BM * HEAD_DIM * 2;
constexpr int KBYTES = BN * HEAD_DIM * 2; // one K tile (and one V tile)
constexpr int NDS = 256 / 16; // k16 steps of one warpgroup's share of d
static_assert(HEAD_DIM == 256 || HEAD_DIM == 512, "head_dim 256 or 512");
static_assert(BN == 32 || BN == 64, "BN is a wgmma N of the score step: 32 or 64");
static_assert(STAGES >= 2, "at least 2 stages");

// Byte offset of 16-byte chunk c of row r in a swizzled tile of `rows` rows: 64-element slabs of
// rows x 128 B, chunk c of a row stored at chunk c ^ (r % 8) of its slab. Read K-major (Q, K) or
// N-major (V) by the wgmma descriptors.
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

// Keys [kb, kb + BN) of K and V (both swizzled) into a stage; zeros past kv_len (a masked key still multiplies its V row by P = 0, so
// it must be finite).
__device__ __forceinline__ void load_kv(u8 *sK, u8 *sV, const T *kh, const T *vh, size_t kstride,
                                        int kb, int kv_len)
{
    for (int i = threadIdx.x; i < BN * (HEAD_DIM / 8); i += AW_THREADS) {
        const int r = i / (HEAD_DIM / 8), c = i % (HEAD_DIM / 8), key = kb + r;
        const bool ok = key < kv_len;
        const size_t src = (size_t)(ok ? key : 0) * kstride + c * 8;
        tc_copy16(sK + swz(r, c, BN), kh + src, ok);
        tc_copy16(sV + swz(r, c, BN), vh + src, ok);
    }
}

// DW = 2: this warpgroup's partial scores out to sX, the other's in once `sync` has run: float4
// j of thread x of warpgroup w at sX[(w * BN / 8 + j) * 128 + x] (consecutive lanes, consecutive
// 16 bytes).
__device__ __forceinline__ void put_scores(float4 *sX, int w, int x, const float (&sc)[BN / 2])
{
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
        sX[(w * (BN / 8) + j) * 128 + x] =
            make_float4(sc[4 * j], sc[4 * j + 1], sc[4 * j + 2], sc[4 * j + 3]);
}
__device__ __forceinline__ void add_scores(const float4 *sX, int w, int x, float (&sc)[BN / 2])
{
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const float4 y = sX[(w * (BN / 8) + j) * 128 + x];
        sc[4 * j] += y.x;
        sc[4 * j + 1] += y.y;
        sc[4 * j + 2] += y.z;
        sc[4 * j + 3] += y.w;
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
    float4 *sX = reinterpret_cast<float4 *>(sK + STAGES * 2 * KBYTES); // DW = 2: partial scores
    auto stage_k = [&](int s) { return sK + s * 2 * KBYTES; };
    auto stage_v = [&](int s) { return sK + s * 2 * KBYTES + KBYTES; };

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wgi = warp >> 2, rg = wgi / AW_DW, dw = wgi % AW_DW; // row group, share of d
    const int g = lane >> 2, t = lane & 3;
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
    auto refill = [&](int nk) { // tile nk into its stage, one commit group either way
        if (nk < ntiles)
            load_kv(stage_k(nk % STAGES), stage_v(nk % STAGES), kh, vh, kstride,
                    kstart + nk * BN, kv_len);
        tc_copy_commit();
    };

    // This warp's 16 rows sit at positions [wlo, whi]: a tile is wholly visible to them when it
    // ends at or before wlo, inside the keys, and after the last row's window.
    const int wrow = rg * 64 + (warp & 3) * 16; // the warp's first row in the block
    const int wlo = past + (row0 + wrow) / HP, whi = past + (row0 + wrow + 15) / HP;
    auto whole = [&](int kb) {
        return kb + BN - 1 <= wlo && kb + BN <= kv_len && (window <= 0 || kb > whi - window);
    };

    load_q(sQ, qh, qstride, row0, q_len); // in the first group, with tile 0
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++)
        refill(s);

    float o[128], sc[BN / 2];
#pragma unroll
    for (int i = 0; i < 128; i++)
        o[i] = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        sc[i] = 0.f;
    float m[2] = {-AW_INF, -AW_INF}, l[2] = {0.f, 0.f};
    unsigned pa[BN / 16][4];
    const wg_u32 qaddr = tc_smem_addr(sQ) + rg * 64 * 128; // this row group's 64 rows

    for (int i = 0; i < ntiles; i++) {
        tc_copy_wait<STAGES - 2>(); // tile i landed (this thread's copies)
        wg_fence_proxy_async();      // ... visible to the async proxy
        __syncthreads();             // ... and every thread's

        // S = Q·Kᵀ over this warpgroup's 256 columns of d (overwrites sc; queued behind tile
        // i - 1's P·V)
        const wg_u32 kaddr = tc_smem_addr(stage_k(i % STAGES));
        wg_fence_acc(sc);
        wg_fence();
#pragma unroll
        for (int s = 0; s < NDS; s++) {
            const int sg = dw * NDS + s;
            wg_mma_ss<BN>(sc, wg_desc_sw128(qaddr + (sg >> 2) * (AW_BM * 128) + (sg & 3) * 32),
                          wg_desc_sw128(kaddr + (sg >> 2) * (BN * 128) + (sg & 3) * 32), s);
        }
        wg_commit();
        wg_wait<0>(); // S of tile i, and P·V of tile i - 1: o and pa are free
        wg_fence_acc(sc);
        wg_fence_acc(o);
        if (AW_DW == 2)
            put_scores(sX, wgi, tid & 127, sc);
        __syncthreads(); // every warpgroup's P·V of tile i - 1 retired: its stage is free; the
                         // partial scores are in
        refill(i + STAGES - 1);
        if (AW_DW == 2)
            add_scores(sX, wgi ^ 1, tid & 127, sc);

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
            for (int j = 0; j < 32; j++) {
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

        // O[:, this warpgroup's 256 columns] += P·V (left in flight: the next tile's wait
        // retires it); V N-major: the slabs of this warpgroup's columns BN x 128 B apart, 16 keys
        // 2048 B apart
        const wg_u32 vaddr = tc_smem_addr(stage_v(i % STAGES)) + dw * 4 * (BN * 128);
        wg_fence_acc(o);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wg_mma_rs_n256<1>(o, pa[kk], wg_desc_sw128_mn(vaddr + kk * 2048, BN * 128));
        wg_commit();
        if (RETIRE)
            wg_wait<0>(); // P·V retired here, not at the next tile's wait
    }
    wg_wait<0>();
    wg_fence_acc(o);
    tc_copy_wait<0>();

    // the row sums over the 4 lanes of a row, then the normalised rows (this warpgroup's
    // 256 columns)
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
                  (size_t)(head0 + (row0 + r) % HP) * HEAD_DIM + dw * 256 + 2 * t;
#pragma unroll
        for (int j = 0; j < 32; j++)
            *reinterpret_cast<T2 *>(orow + 8 * j) =
                from_f32x2(make_float2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv));
    }
}
