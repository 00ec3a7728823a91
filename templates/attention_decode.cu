// attention_decode.cu — one new query per sequence against its KV cache, split-KV (flash
// decoding): the cache slots are split over gridDim.x blocks, all GROUP query heads of a KV head
// are served by one read of K and V (they are the 16-row tile of the mma), and the last block of
// each (sequence, KV head) to finish merges the partial results and resets its counter (FLAT and
// CLUSTER, below: every block merges a slice instead).
//
// Layouts (row-major):
//   q         [batch, heads, HEAD_DIM]            T
//   k_cache   [batch, kv_heads, slots, HEAD_DIM]  T (v_cache the same)
//   positions [batch, slots]                      int32: position held by each slot, -1 = empty
//   qpos      [batch]                             int32: position of the new query (its own K/V
//                                                 are already in the cache)
//   out       [batch, heads, HEAD_DIM]            T
//   PREP (shape key prep = 1): q is the raw projection, prepared in every block (RMSNorm with
//   q_w [HEAD_DIM], RoPE at qpos with inv_freq [HEAD_DIM / 2] fp32: attn_prep_q, attn_mma.cuh).
// A sliding layer's ring buffer has slots = window (slot = position mod window), a full layer's
// linear cache slots = its capacity (slot = position). Key slot s is visible when
// 0 <= positions[s] <= qpos and (window == 0 or positions[s] > qpos - window). Empty slots must
// still hold finite values (P = 0 multiplies them).
// Workspace (zeroed once when allocated; left zeroed): ws = partial outputs
// [pairs, nsplit, GROUP, HEAD_DIM] then (max, sum) [pairs, nsplit, GROUP, 2] fp32; cnt [pairs] u32
// ([pairs][2] with FLAT).
// Grid: (nsplit, kv_heads, batch); `chunk` (a multiple of BN) covers all slots in nsplit blocks.
// Slot contract: the slot of position p is p mod slots, so while qpos + 1 < slots nothing at or
// past qpos + 1 is visible; only the live min(slots, qpos + 1) slots are streamed, re-split over
// the blocks (attn_live_split: block i covers [i * c, min(live, (i + 1) * c)), c <= chunk), and
// blocks past them leave at once; the nact live blocks' partials are merged.
// Dynamic shared memory, in order: float sMax[WN * BM]; int sPos[STAGES * BN];
//   T sQ[BM * (HEAD_DIM + 8)] (absent with Q_REGS); T sK[STAGES * BN * (HEAD_DIM + 8)]; T sV[same];
//   T sP[BM * (BN + 8)].
// CLUSTER (sm_90): the gridDim.x = CLUSTER_X blocks of a (sequence, KV head) are one thread block
// cluster. Each live block keeps its partial in its own K/V tile area (attn_put_partial), and
// after one cluster barrier every block of the cluster, idle ones included, merges a slice of
// the outputs from the others' shared memory (attn_cluster_merge): no workspace, fence, ticket
// or L2 round trip; ws and cnt are passed but unused.
// FLAT (any arch; the space allows it only when the grid is one wave of at most one block per
// SM): every live block writes its partial to ws, arrives at the pair's counter, waits for the
// others and merges a slice of the output over all of them (attn_merge_flat, attn_mma.cuh: the
// slices staged in the K/V tile area, the merge weights in Q's tile); cnt [pairs][2] (arrivals,
// leavers). The cluster merge's one-level shape without clusters, for cards below sm_90.
#include "attn_mma.cuh"

#ifndef CLUSTER
#define CLUSTER 0
#endif
#ifndef FLAT
#define FLAT 0
#endif
#if CLUSTER && FLAT
#error "attention_decode.cu: CLUSTER and FLAT are two merges; a kernel has one"
#endif

#if STAGES > 1 && !ASYNC
#error "attention_decode.cu: STAGES > 1 needs ASYNC (cp.async)"
#endif
#if WM * 16 < GROUP
#error "attention_decode.cu: WM * 16 must cover GROUP query heads"
#endif

#if CLUSTER
#ifndef CLUSTER_X
#error "attention_decode.cu: CLUSTER needs CLUSTER_X, the blocks of a cluster (= gridDim.x)"
#endif
#define ATTN_CSTR (HEAD_DIM + 8) // floats per partial row: +32 B puts the 8 rows a warp stores
                                 // together on different banks
#define ATTN_CJ ((ATTN_ME + CLUSTER_X * ATTN_NT - 1) / (CLUSTER_X * ATTN_NT)) // float4 per thread
#define ATTN_CLUSTER_DIMS __cluster_dims__(CLUSTER_X, 1, 1)

// This block's partial into its own shared memory (the K/V tile area: drained, no longer read):
// sO [GROUP][ATTN_CSTR] fp32 unnormalised output, sML [GROUP] (running max, row sum).
__device__ __forceinline__ void attn_put_partial(float *sO, float2 *sML, const AttnAcc &acc, int wm,
                                                 int wn, int lane)
{
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = wm * 16 + g + 8 * i;
        if (r >= GROUP)
            continue;
        float *orow = sO + r * ATTN_CSTR + wn * ATTN_DS + 2 * tq;
#pragma unroll
        for (int n = 0; n < ATTN_DS / 8; n++)
            *reinterpret_cast<float2 *>(orow + n * 8) = make_float2(acc.o[n][2 * i], acc.o[n][2 * i + 1]);
        if (wn == 0 && tq == 0)
            sML[r] = make_float2(acc.m[i], acc.l[i]);
    }
}

// The merge of the cluster's nact partials (blocks 0..nact-1, written by attn_put_partial at the
// same offsets sO / sML of their shared memory) into out (the GROUP rows of this KV head). Block
// `rank` takes float4 e = (j CLUSTER_X + rank) ATTN_NT + tid of the GROUP x HEAD_DIM outputs; for
// each it requests the nact partials' (max, sum) of its row and their values at once, then weighs
// them as attn_merge_nodes does (fp32, __expf; a split that saw no visible key, max -inf, weighs
// 0; a row with no weight at all is 0) and stores the normalised row rounded to T. Every thread
// of every block of the cluster calls it, idle blocks too: it holds both cluster barriers (the
// first publishes the partials, the second keeps each block's shared memory alive until no
// other block reads it).
__device__ __forceinline__ void attn_cluster_merge(const float *sO, const float2 *sML, int nact,
                                                   int rank, T *out)
{
    tailor_cluster_arrive();
    tailor_cluster_wait();
#pragma unroll
    for (int j = 0; j < ATTN_CJ; j++) {
        const int e = (j * CLUSTER_X + rank) * ATTN_NT + (int)threadIdx.x;
        if (e >= ATTN_ME)
            continue;
        const int r = e / (HEAD_DIM / 4), c4 = e % (HEAD_DIM / 4);
        const unsigned ao = attn_smem_addr(sO + r * ATTN_CSTR + c4 * 4), aml = attn_smem_addr(sML + r);
        float2 ml[CLUSTER_X];
        float4 v[CLUSTER_X];
#pragma unroll
        for (int c = 0; c < CLUSTER_X; c++) {
            ml[c] = make_float2(-ATTN_INF, 0.f);
            v[c] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (c < nact) {
                ml[c] = tailor_ld_cluster_f2(tailor_cluster_map(aml, c));
                v[c] = tailor_ld_cluster_f4(tailor_cluster_map(ao, c));
            }
        }
        float M = -ATTN_INF;
#pragma unroll
        for (int c = 0; c < CLUSTER_X; c++)
            M = fmaxf(M, ml[c].x);
        float L = 0.f;
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int c = 0; c < CLUSTER_X; c++) {
            const float w = ml[c].x == -ATTN_INF ? 0.f : __expf(ml[c].x - M);
            L += w * ml[c].y;
            a.x += w * v[c].x;
            a.y += w * v[c].y;
            a.z += w * v[c].z;
            a.w += w * v[c].w;
        }
        const float inv = L > 0.f ? 1.f / L : 0.f;
        T *dst = out + (size_t)r * HEAD_DIM + c4 * 4;
        *reinterpret_cast<T2 *>(dst) = from_f32x2(make_float2(a.x * inv, a.y * inv));
        *reinterpret_cast<T2 *>(dst + 2) = from_f32x2(make_float2(a.z * inv, a.w * inv));
    }
    tailor_cluster_arrive();
    tailor_cluster_wait();
}
#else
#define ATTN_CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(ATTN_NT, 1) ATTN_CLUSTER_DIMS
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ q, const T *__restrict__ k_cache,
              const T *__restrict__ v_cache, const int *__restrict__ positions,
              const int *__restrict__ qpos, float *__restrict__ ws, unsigned *__restrict__ cnt,
              int heads, int kv_heads, int slots, int window, int chunk ATTN_PREP_PARAMS)
{
#if PREP
    const AttnPrepWeights prep_w = attn_prep_weights(q_w, inv_freq); // weights: before the wait
#endif
    extern __shared__ __align__(16) unsigned char attn_smem[];
    float *sMax = reinterpret_cast<float *>(attn_smem);
    int *sPos = reinterpret_cast<int *>(sMax + WN * ATTN_BM);
    T *sQ = reinterpret_cast<T *>(sPos + STAGES * BN);
    T *sK = sQ + (Q_REGS ? 0 : ATTN_BM * ATTN_KSTR);
    T *sV = sK + STAGES * BN * ATTN_KSTR;
    T *sP = sV + STAGES * BN * ATTN_KSTR;
#if CLUSTER // this block's partial, over the K/V tiles once they are done (attn_put_partial)
    float *sO = reinterpret_cast<float *>(sK);
    float2 *sML = reinterpret_cast<float2 *>(sO + GROUP * ATTN_CSTR);
#endif

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int split = blockIdx.x, nsplit = gridDim.x, kvh = blockIdx.y, b = blockIdx.z;
    const int pair = b * kv_heads + kvh, npairs = gridDim.y * gridDim.z;
    T *ob = out + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    // Before the wait (attn_cur_slot, attn_mma.cuh): qpos, the live split, the first stages.
    const int t = qpos[b];
    const AttnLive live = attn_live_split(slots, t, split, nsplit, BN, chunk);
#if CLUSTER
    if (split >= live.nact && live.nact > 1) { // no keys, but a slice of the merge and its barriers
        tailor_grid_begin();
        attn_cluster_merge(sO, sML, live.nact, split, ob);
        return;
    }
#endif
    if (split >= live.nact)
        return; // past the filled part of the cache (nothing to merge with CLUSTER: nact == 1)
    const int s0 = live.s0, s1 = live.s1, nact = live.nact;
    const int ntiles = (s1 - s0 + BN - 1) / BN;
    const T *qb = q + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    const size_t cache_off = (size_t)pair * slots * HEAD_DIM;
    const T *kh = k_cache + cache_off, *vh = v_cache + cache_off;
    const int *ph = positions + (size_t)b * slots;
    const int cur = attn_cur_slot(slots, t), own = cur >= s0 && cur < s1 ? cur : -1;

    // Requests tile `tile` into stage `slot`; before the wait (early) without the own slot.
    auto load_tile = [&](int tile, int slot, bool early) {
        attn_load_kv_tile<BN>(sK, sV, sPos, kh, vh, ph, s0, s1, own, tile, slot, early, tid);
    };

#if STAGES > 1
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ntiles)
            load_tile(s, s, true);
        attn_commit();
    }
#endif
    tailor_grid_begin();
#if STAGES > 1
    if (own >= 0 && own < s0 + (STAGES - 1) * BN) { // the own slot, left out above
        const int r = own - s0; // stage r / BN, row r % BN
        attn_fix_cur(sK + r * ATTN_KSTR, sV + r * ATTN_KSTR, sPos + r, kh + (size_t)own * HEAD_DIM,
                     vh + (size_t)own * HEAD_DIM, ph + own, tid, ATTN_NT);
    }
#endif

#if Q_REGS && PREP
#error "attention_decode.cu: PREP prepares Q in shared memory (Q_REGS 0)"
#elif Q_REGS
    unsigned qf[HEAD_DIM / 16][4];
    attn_load_q_regs(qf, qb, HEAD_DIM, wm * 16, GROUP, lane);
#elif PREP
    const unsigned(*qf)[4] = nullptr; // prepared below
    AttnPrepRows prep_q;
    attn_prep_load(prep_q, qb);
#else
    const unsigned(*qf)[4] = nullptr;
    attn_load_q_tile(sQ, ATTN_BM, qb, GROUP, tid, ATTN_NT);
#endif

    AttnAcc acc;
    attn_acc_init(acc);

#if STAGES > 1
#if PREP // after the first tiles are requested; the loop's first barrier publishes it
    attn_prep_q(sQ, ATTN_BM, prep_q, prep_w, t, eps);
#endif
    for (int i = 0; i < ntiles; i++) {
        attn_wait<STAGES - 2>();
        __syncthreads();
        if (i + STAGES - 1 < ntiles)
            load_tile(i + STAGES - 1, (i + STAGES - 1) % STAGES, false);
        attn_commit();
        const int slot = i % STAGES, kb = s0 + i * BN;
#else
#if PREP
    attn_prep_q(sQ, ATTN_BM, prep_q, prep_w, t, eps);
#endif
    for (int i = 0; i < ntiles; i++) {
        __syncthreads();
        load_tile(i, 0, false);
        attn_commit();
        attn_wait<0>();
        __syncthreads();
        const int slot = 0, kb = s0 + i * BN;
#endif
        const int *pos = sPos + slot * BN;
        auto visible = [&](int row, int col) {
            (void)row;
            const int p = pos[col];
            return kb + col < s1 && p >= 0 && p <= t && (window <= 0 || p > t - window);
        };
        attn_tile(acc, qf, sQ, sK + slot * BN * ATTN_KSTR, sV + slot * BN * ATTN_KSTR, sP, sMax,
                  wm, wn, lane, visible, false, AttnNoMid());
    }
    attn_wait<0>();
    attn_finish_sums(acc, sMax, wm, wn, lane);

    const int g = lane >> 2, tq = lane & 3;
    if (nact == 1) { // nothing to merge
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = wm * 16 + g + 8 * i;
            if (r >= GROUP)
                continue;
            const float inv = acc.l[i] > 0.f ? 1.f / acc.l[i] : 0.f;
            T *orow = ob + (size_t)r * HEAD_DIM + wn * ATTN_DS + 2 * tq;
#pragma unroll
            for (int n = 0; n < ATTN_DS / 8; n++)
                *reinterpret_cast<T2 *>(orow + n * 8) =
                    from_f32x2(make_float2(acc.o[n][2 * i] * inv, acc.o[n][2 * i + 1] * inv));
        }
        return;
    }

#if CLUSTER
    // This split's partial into its own shared memory, then the cluster's merge (block rank =
    // split: the cluster spans the grid's x).
    __syncthreads(); // every warp is done with the K/V tiles (cp.async drained above)
    attn_put_partial(sO, sML, acc, wm, wn, lane);
    attn_cluster_merge(sO, sML, nact, split, ob);
    (void)ws;
    (void)cnt;
    (void)npairs;
#else
    // Partial (unnormalised output, running max, row sum) of this split.
    float *wso = ws + (size_t)pair * nsplit * GROUP * HEAD_DIM;
    float *wsml = ws + (size_t)npairs * nsplit * GROUP * HEAD_DIM + (size_t)pair * nsplit * GROUP * 2;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = wm * 16 + g + 8 * i;
        if (r >= GROUP)
            continue;
        float *orow = wso + ((size_t)split * GROUP + r) * HEAD_DIM + wn * ATTN_DS + 2 * tq;
#pragma unroll
        for (int n = 0; n < ATTN_DS / 8; n++)
            *reinterpret_cast<float2 *>(orow + n * 8) = make_float2(acc.o[n][2 * i], acc.o[n][2 * i + 1]);
        if (wn == 0 && tq == 0) {
            wsml[((size_t)split * GROUP + r) * 2] = acc.m[i];
            wsml[((size_t)split * GROUP + r) * 2 + 1] = acc.l[i];
        }
    }

#if FLAT
    // Every live block merges a slice (the last to leave puts the pair's two counters back).
    attn_merge_flat(reinterpret_cast<const float4 *>(wso), wsml, cnt + 2 * (size_t)pair, nact, split,
                    reinterpret_cast<float *>(sQ), ob, reinterpret_cast<float4 *>(sK));
#else
    // The last block to arrive merges; it also puts the counter back to zero for the next launch.
    if (!attn_last_arrival(cnt + pair, (unsigned)nact, reinterpret_cast<int *>(sP)))
        return;
    attn_merge_nodes(reinterpret_cast<const float4 *>(wso), wsml, nact, nact,
                     reinterpret_cast<float *>(sK), true, ob, nullptr, nullptr);
#endif
#endif
}
