// attention_decode_wg.cu — decode attention (one new query per sequence, split over the cache) on
// sm_90a warpgroup MMAs with the scores transposed: a block is one warpgroup streaming its chunk
// of slots in tiles of BN keys, and the GROUP (<= 8) query heads of its KV head are the wgmma's
// N = 8 side, so no MMA row is spent on padding heads.
//
// Buffers, layouts, mask, slot contract, live split and the merge tree: those of
// attention_decode_wide.cu (q [batch, heads, HEAD_DIM]; k_cache, v_cache [batch, kv_heads, slots,
// HEAD_DIM]; positions [batch, slots] int32, -1 = empty; qpos [batch]; out [batch, heads,
// HEAD_DIM]; slot s visible when 0 <= positions[s] <= qpos and (window == 0 or positions[s] >
// qpos - window); ws = tree node outputs [pairs][nnodes][GROUP][HEAD_DIM] fp32 then (max, sum)
// [pairs][nnodes][GROUP][2]; cnt [pairs][ncnt]). prep = 0 only.
// Per tile of BN keys (K, V and positions landed by cp.async, STAGES deep):
//   Sᵀ = K·Qᵀ   wgmma m64n8k16 over HEAD_DIM / 16 steps: A = the K tile as it comes (64 key
//               rows, K-major, 128-byte swizzle; with BN = 32 rows 32..63 are the next bytes of
//               shared memory, finite, and masked), B = Q (8 head rows, loaded once);
//   softmax     per head over the tile's keys: each thread holds keys g, g + 8 of its warp's 16
//               for heads 2t, 2t + 1; the tile maximum of a head crosses the 4 warps through
//               shared memory (one barrier, which also frees the stage and Pᵀ of the last
//               tile); P rounded to the dtype into Pᵀ [8 heads][64 keys] (swizzled rows of 128
//               B), the sums in fp32 from the unrounded values;
//   Oᵀ += Vᵀ·Pᵀ wgmma m64n8k16 per 64 columns of head_dim and 16 keys: A = the V tile read
//               M-major in place (imm-trans-a), B = Pᵀ; left in flight until the next tile's
//               score wait. Oᵀ is HEAD_DIM / 64 x 4 fp32 a thread.
// Then the block's partial (unnormalised Oᵀ, the running max and the summed P per head) goes to
// its tree leaf, or straight to `out` when one block covers the live slots.
// EARLY = 1 (PDL, as attention_decode.cu, attn_cur_slot): qpos, the live split and the first
// STAGES - 1 tiles but the own slot are requested before the grid wait; q and the own slot after
// it (its position read into a register and stored at its tile's turn: no thread stalls on it).
// EARLY = 0: everything after the wait (wins at 32k on the H100: the next launch's early tiles
// compete with a stream still running; session 39).
// Dynamic shared memory (1024-aligned): sQ [8 x HEAD_DIM], STAGES x (sK, sV [BN x HEAD_DIM]),
// sPt [8 x 64], then int sPos [STAGES x BN], float sMax [4 x 8], float sSum [4 x 8], int sFlag;
// the merge weights reuse sPt and sPos (with SPREAD, sQ), the staged partials of the merge the K/V area. Sizes in attention_decode_wg.lua.
// SPREAD = 1: the merge is attn_merge_spread (level-1 groups of `fan` leaves, the root spread
// over their mergers; cnt's last two per pair are the root's arrival and leaving counters);
// SPREAD = 2: attn_merge_flat (one level, a slice of the output on every live block; cnt: the
// arrivals and the leavers per pair); else attn_merge_tree.
// Defines: HEAD_DIM (256, 512), GROUP (<= 8), BN (32, 64), STAGES (>= 2), SPREAD, EARLY, and for attn_mma.cuh's
// helpers WM = 1, WN = 4 (128 threads), MMA_K = 16, Q_REGS = 0, ASYNC = 1, PREP = 0.
#include "attn_mma.cuh"
#include "wgmma.cuh"
#include "tailor_probe.cuh"

#ifndef SPREAD
#define SPREAD 0
#endif

#if ATTN_NT != 128 || PREP || !ASYNC
#error "attention_decode_wg.cu: one warpgroup (WM = 1, WN = 4), prep = 0, cp.async"
#endif
#ifndef EARLY
#define EARLY 1
#endif
#if GROUP > 8 || (BN != 32 && BN != 64) || STAGES < 2
#error "attention_decode_wg.cu: GROUP <= 8, BN 32 or 64, STAGES >= 2"
#endif

namespace adw {
typedef unsigned char u8;
constexpr int QBYTES = 8 * HEAD_DIM * 2;
constexpr int KBYTES = BN * HEAD_DIM * 2; // one K tile (and one V tile)
constexpr int NMT = HEAD_DIM / 64;        // 64-column tiles of the output

// Byte offset of 16-byte chunk c of row r in a swizzled tile of `rows` rows (64-element slabs of
// rows x 128 B, chunk c of a row at chunk c ^ (r % 8) of its slab), as attention_prefill_wg.cu.
__device__ __forceinline__ int swz(int r, int c, int rows)
{
    return (c >> 3) * (rows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

__device__ __forceinline__ void copy_pos(int *dst, const int *src, bool ok)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(attn_smem_addr(dst)),
                 "l"(src), "r"(ok ? 4 : 0));
}

// The P value of key `key` (0..63) for head h into Pᵀ (8 rows of 64 keys, swizzled).
__device__ __forceinline__ void put_p(u8 *sPt, int h, int key, float p)
{
    const T v = from_f32(p);
    *reinterpret_cast<T *>(sPt + h * 128 + ((((key >> 3) ^ h) & 7) << 4) + (key & 7) * 2) = v;
}
} // namespace adw

extern "C" __global__ void __launch_bounds__(128, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ q, const T *__restrict__ k_cache,
              const T *__restrict__ v_cache, const int *__restrict__ positions,
              const int *__restrict__ qpos, float *__restrict__ ws, unsigned *__restrict__ cnt,
              int heads, int kv_heads, int slots, int window, int chunk, int fan, int nnodes,
              int ncnt)
{
    using namespace adw;
    extern __shared__ __align__(16) u8 smem_raw[];
    const wg_u32 raw = attn_smem_addr(smem_raw);
    u8 *sQ = smem_raw + (((raw + 1023u) & ~1023u) - raw); // swizzled tiles: 1024-byte aligned
    u8 *sK = sQ + QBYTES;                                  // STAGES x (K tile, V tile)
    u8 *sPt = sK + STAGES * 2 * KBYTES;
    int *sPos = reinterpret_cast<int *>(sPt + 1024);
    float *sMax = reinterpret_cast<float *>(sPos + STAGES * BN);
    float *sSum = sMax + 32;
    int *sFlag = reinterpret_cast<int *>(sSum + 32);
    auto stage_k = [&](int s) { return sK + s * 2 * KBYTES; };
    auto stage_v = [&](int s) { return sK + s * 2 * KBYTES + KBYTES; };

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int split = blockIdx.x, nsplit = gridDim.x, kvh = blockIdx.y, b = blockIdx.z;
    const int pair = b * kv_heads + kvh, npairs = gridDim.y * gridDim.z;
    (void)nsplit;
    TAILOR_PROBE_INIT; // timeline marks (tailor_probe.cuh): 0 entry, 1 after the grid wait,
                       // 2 first tile landed, 3 stream done, 4 partial written, then the exit
#if !EARLY
    tailor_grid_begin();
    TAILOR_PROBE_MARK(1);
#endif
    // EARLY: before the wait (attn_cur_slot, attn_mma.cuh) qpos, the live split, the first
    // stages without the own slot; after it q and that slot.
    const int qp = qpos[b];
    const AttnLive live = attn_live_split(slots, qp, split, gridDim.x, BN, chunk);
    if (split >= live.nact) {
        TAILOR_PROBE_EMIT();
        return; // past the filled part of the cache
    }
    const int s0 = live.s0, s1 = live.s1, nact = live.nact;
    const int ntiles = (s1 - s0 + BN - 1) / BN;
    const T *qb = q + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    const size_t cache_off = (size_t)pair * slots * HEAD_DIM;
    const T *kh = k_cache + cache_off, *vh = v_cache + cache_off;
    const int *ph = positions + (size_t)b * slots;
    const int cur = attn_cur_slot(slots, qp), own = cur >= s0 && cur < s1 ? cur : -1;
    // EARLY: the own slot's position, read from L2 into a register by thread own_r when its tile
    // is requested (its L1 line may predate the wait) and stored to sPos when that tile's turn
    // comes, so no thread waits on the load while the stream runs
    const int own_tile = own >= 0 ? (own - s0) / BN : -1, own_r = own >= 0 ? (own - s0) % BN : -1;
    int own_p = -1;

    // Tile `tile` into its stage; one commit group either way. With EARLY, early (before the
    // wait) leaves out the own slot (fetched after the wait, below).
    auto refill = [&](int tile, bool early) {
        if (tile < ntiles) {
            const int kb = s0 + tile * BN, st = tile % STAGES;
            u8 *dk = stage_k(st), *dv = stage_v(st);
            for (int i = tid; i < BN * (HEAD_DIM / 8); i += 128) {
                const int r = i / (HEAD_DIM / 8), c = i % (HEAD_DIM / 8);
                if (EARLY && early && kb + r == own)
                    continue;
                const bool ok = kb + r < s1;
                const size_t off = (size_t)(ok ? kb + r : 0) * HEAD_DIM + c * 8;
                attn_copy16(reinterpret_cast<T *>(dk + swz(r, c, BN)), kh + off, ok);
                attn_copy16(reinterpret_cast<T *>(dv + swz(r, c, BN)), vh + off, ok);
            }
            for (int r = tid; r < BN; r += 128) {
                if (!EARLY || kb + r != own) // EARLY = 0: no line of L1 predates the wait
                    copy_pos(sPos + st * BN + r, ph + (kb + r < s1 ? kb + r : 0), kb + r < s1);
                else if (!early)
                    own_p = __ldcg(ph + own);
            }
        }
        attn_commit();
    };
    // Q: 8 head rows (zeros past GROUP), swizzled: EARLY in its own commit group after the wait
    // (the first tile then waits for every group), else in the first one
    auto load_q = [&]() {
        for (int i = tid; i < 8 * (HEAD_DIM / 8); i += 128) {
            const int r = i / (HEAD_DIM / 8), c = i % (HEAD_DIM / 8);
            attn_copy16(reinterpret_cast<T *>(sQ + swz(r, c, 8)),
                        qb + (size_t)(r < GROUP ? r : 0) * HEAD_DIM + c * 8, r < GROUP);
        }
    };
#if !EARLY
    load_q();
#endif
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++)
        refill(s, EARLY);
#if EARLY
    tailor_grid_begin();
    TAILOR_PROBE_MARK(1);
    // The own slot, left out above: its K and V rows (swizzled; cp.async.cg reads L2) in q's
    // commit group, its position into own_p
    if (own_tile >= 0 && own_tile < STAGES - 1) {
        for (int c = tid; c < HEAD_DIM / 8; c += 128) {
            const size_t off = (size_t)own * HEAD_DIM + c * 8;
            attn_copy16(reinterpret_cast<T *>(stage_k(own_tile) + swz(own_r, c, BN)), kh + off, true);
            attn_copy16(reinterpret_cast<T *>(stage_v(own_tile) + swz(own_r, c, BN)), vh + off, true);
        }
        if (tid == own_r)
            own_p = __ldcg(ph + own);
    }
    load_q();
    attn_commit();
#endif

    float o[NMT][4], sc[4];
#pragma unroll
    for (int mt = 0; mt < NMT; mt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            o[mt][e] = 0.f;
#pragma unroll
    for (int e = 0; e < 4; e++)
        sc[e] = 0.f;
    float m[2] = {-ATTN_INF, -ATTN_INF}, lsum[2] = {0.f, 0.f}; // heads 2t, 2t + 1
    const wg_u32 qaddr = attn_smem_addr(sQ), ptaddr = attn_smem_addr(sPt);

    for (int i = 0; i < ntiles; i++) {
        if (EARLY && i == 0) // q and the early stages
            attn_wait<0>();
        else
            attn_wait<STAGES - 2>(); // tile i landed (this thread's copies)
        if (EARLY && i == own_tile && tid == own_r)
            sPos[(i % STAGES) * BN + own_r] = own_p; // published by the barrier below
        wg_fence_proxy_async();
        __syncthreads();
        if (i == 0)
            TAILOR_PROBE_MARK(2);

        // Sᵀ = K·Qᵀ (queued behind tile i - 1's Oᵀ)
        const wg_u32 kaddr = attn_smem_addr(stage_k(i % STAGES));
        wg_fence_acc(sc);
        wg_fence();
#pragma unroll
        for (int s = 0; s < HEAD_DIM / 16; s++)
            wg_mma_ss_n8<0>(sc, wg_desc_sw128(kaddr + (s >> 2) * (BN * 128) + (s & 3) * 32),
                            wg_desc_sw128(qaddr + (s >> 2) * 1024 + (s & 3) * 32), s);
        wg_commit();
        wg_wait<0>(); // Sᵀ of tile i and Oᵀ of tile i - 1
        wg_fence_acc(sc);
#pragma unroll
        for (int mt = 0; mt < NMT; mt++)
            wg_fence_acc(o[mt]);

        // mask (sc[e]: key 16 warp + g + 8 (e >> 1) of the tile, head 2t + (e & 1)), then the
        // warp's maximum per head over its 16 keys
        const int kb = s0 + i * BN;
        const int *pos = sPos + (i % STAGES) * BN;
        float mx[2] = {-ATTN_INF, -ATTN_INF};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = 16 * warp + g + 8 * (e >> 1);
            bool vis = key < BN && kb + key < s1;
            if (vis) {
                const int p = pos[key];
                vis = p >= 0 && p <= qp && (window <= 0 || p > qp - window);
            }
            if (!vis)
                sc[e] = -ATTN_INF;
            mx[e & 1] = fmaxf(mx[e & 1], sc[e]);
        }
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int x = 4; x < 32; x <<= 1)
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], x));
        if (g == 0) {
            sMax[warp * 8 + 2 * t] = mx[0];
            sMax[warp * 8 + 2 * t + 1] = mx[1];
        }
        __syncthreads(); // the warps' maxima are in; Oᵀ of tile i - 1 is retired everywhere, so
                         // its stage and Pᵀ are free
        refill(i + STAGES - 1, false);
        float mu[2], alpha[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float tmax = -ATTN_INF;
#pragma unroll
            for (int w = 0; w < 4; w++)
                tmax = fmaxf(tmax, sMax[w * 8 + 2 * t + h]);
            const float mnew = fmaxf(m[h], tmax);
            mu[h] = mnew == -ATTN_INF ? 0.f : mnew; // no key seen yet: avoid -inf - -inf
            alpha[h] = __expf(m[h] - mu[h]);
            m[h] = mnew;
            lsum[h] *= alpha[h];
        }
        // P = exp(S - m): summed unrounded, rounded to the dtype into Pᵀ
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float p = __expf(sc[e] - mu[e & 1]);
            lsum[e & 1] += p;
            adw::put_p(sPt, 2 * t + (e & 1), 16 * warp + g + 8 * (e >> 1), p);
        }
#pragma unroll
        for (int mt = 0; mt < NMT; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[mt][e] *= alpha[e & 1];
        wg_fence_proxy_async(); // Pᵀ, visible to the async proxy
        __syncthreads();

        // Oᵀ += Vᵀ·Pᵀ: Vᵀ read M-major from the V tile (the slab of columns 64 mt, 16 keys
        // 2048 B apart), Pᵀ K-major (16 keys = 32 B of its rows); left in flight
        const wg_u32 vaddr = attn_smem_addr(stage_v(i % STAGES));
        wg_fence();
#pragma unroll
        for (int mt = 0; mt < NMT; mt++)
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                wg_mma_ss_n8<1>(o[mt], wg_desc_sw128_mn(vaddr + mt * (BN * 128) + kk * 2048,
                                                        BN * 128),
                                wg_desc_sw128(ptaddr + kk * 32), 1);
        wg_commit();
    }
    wg_wait<0>();
#pragma unroll
    for (int mt = 0; mt < NMT; mt++)
        wg_fence_acc(o[mt]);
    attn_wait<0>();
    TAILOR_PROBE_MARK(3);

    // the sums per head: over the lanes of a warp with the same t, then over the 4 warps
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int x = 4; x < 32; x <<= 1)
            lsum[h] += __shfl_xor_sync(0xffffffffu, lsum[h], x);
    if (g == 0) {
        sSum[warp * 8 + 2 * t] = lsum[0];
        sSum[warp * 8 + 2 * t + 1] = lsum[1];
    }
    __syncthreads();
    float l[2];
#pragma unroll
    for (int h = 0; h < 2; h++)
        l[h] = sSum[2 * t + h] + sSum[8 + 2 * t + h] + sSum[16 + 2 * t + h] +
               sSum[24 + 2 * t + h];

    // Oᵀ[d][h]: o[mt][e] is column d = 64 mt + 16 warp + g + 8 (e >> 1) of head 2t + (e & 1)
    T *ob = out + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    float *wso = ws + (size_t)pair * nnodes * GROUP * HEAD_DIM;
    float *wsml = ws + (size_t)npairs * nnodes * GROUP * HEAD_DIM + (size_t)pair * nnodes * GROUP * 2;
#pragma unroll
    for (int mt = 0; mt < NMT; mt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int h = 2 * t + (e & 1), d = 64 * mt + 16 * warp + g + 8 * (e >> 1);
            if (h >= GROUP)
                continue;
            if (nact == 1) // nothing to merge: normalise straight into out
                ob[(size_t)h * HEAD_DIM + d] = from_f32(l[e & 1] > 0.f ? o[mt][e] / l[e & 1] : 0.f);
            else
                wso[((size_t)split * GROUP + h) * HEAD_DIM + d] = o[mt][e];
        }
    TAILOR_PROBE_MARK(4);
    if (nact == 1) {
        TAILOR_PROBE_EMIT();
        return;
    }
    if (warp == 0 && g == 0)
#pragma unroll
        for (int h = 0; h < 2; h++)
            if (2 * t + h < GROUP) {
                wsml[((size_t)split * GROUP + 2 * t + h) * 2] = m[h];
                wsml[((size_t)split * GROUP + 2 * t + h) * 2 + 1] = l[h];
            }

    // the merge tree (attn_mma.cuh): its weights in Pᵀ and the positions (contiguous, no longer
    // read; the tree's first barrier comes before any write), the children's partials staged in
    // the K/V area
#if SPREAD == 2 // one level over every live block; its weights in Q's tile
    attn_merge_flat(reinterpret_cast<const float4 *>(wso), wsml, cnt + (size_t)pair * ncnt, nact,
                    split, reinterpret_cast<float *>(sQ), ob, reinterpret_cast<float4 *>(sK));
    (void)fan;
#elif SPREAD // the root spread over the level-1 mergers; its weights (up to 32 a row) in Q's tile
    attn_merge_spread(reinterpret_cast<float4 *>(wso), wsml, cnt + (size_t)pair * ncnt, ncnt, nact,
                      split, fan, reinterpret_cast<float *>(sQ), sFlag, ob,
                      reinterpret_cast<float4 *>(sK), STAGES * 2 * KBYTES / (ATTN_ME * 16));
#else
    attn_merge_tree(reinterpret_cast<float4 *>(wso), wsml, cnt + (size_t)pair * ncnt, nact, split,
                    fan, reinterpret_cast<float *>(sPt), sFlag, ob, reinterpret_cast<float4 *>(sK),
                    STAGES * 2 * KBYTES / (ATTN_ME * 16));
#endif
    TAILOR_PROBE_EMIT();
}
