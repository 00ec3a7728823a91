// attention_decode_wide.cu — decode attention (one new query per sequence) with wide blocks and a
// tree merge: KW groups of warps inside a block stream different key sub-tiles of one cp.async
// pipeline (KW x BN keys per stage, STAGES deep), each with its own online softmax; the block
// combines its KW partials in shared memory and writes ONE partial per split; the splits are then
// merged by a tree of fan-in F (the last block of each group of F merges it; F ~ sqrt(nsplit), so
// two levels), the root writing `out`. All GROUP query heads of a KV head are the rows of the mma
// tile, so one read of K and V serves the whole group.
//
// Buffers, layouts and mask: exactly those of the op (tuner/op_attention.c), as in
// attention_decode.cu:
//   q [batch, heads, HEAD_DIM]; k_cache, v_cache [batch, kv_heads, slots, HEAD_DIM];
//   positions [batch, slots] int32 (-1 = empty); qpos [batch] int32; out [batch, heads, HEAD_DIM].
//   PREP (shape key prep = 1): q is the raw projection, prepared in every block with q_w
//   [HEAD_DIM] and inv_freq [HEAD_DIM / 2] fp32 (attn_prep_q in attn_mma.cuh).
//   Slot s is visible when 0 <= positions[s] <= qpos and (window == 0 or positions[s] > qpos - window).
// Grid (nsplit, kv_heads, batch); block KW * WMQ * WN warps; `chunk` (a multiple of KW * BN)
// covers all slots in nsplit blocks. As in attention_decode.cu only the live min(slots, qpos + 1)
// slots are streamed (slot contract: position p lives in slot p mod slots), re-split over the
// blocks by attn_live_split; blocks past them leave at once and the tree is built over the nact
// live leaves (its levels and offsets never exceed those of nsplit leaves).
// Tree: level sizes n0 = nact (at most nsplit), n(l+1) = ceil(n(l) / F); nodes of every level
// with more than one node are stored (level l at node offset n0 + ... + n(l-1)); the single node
// of the last level is `out`. Workspace (zeroed once at allocation; counters put back to 0 by their last user):
//   ws  = node outputs [pairs][nnodes][GROUP][HEAD_DIM] fp32 (unnormalised), then node
//         (max, sum) [pairs][nnodes][GROUP][2] fp32;   cnt = [pairs][ncnt] u32, one per node of
//         levels >= 1 (the root included).
// Dynamic shared memory, in order: float sMax[WN * BMV]; int sPos[STAGES * KB];
//   T sQ[16 * WMQ * KSTR]; T sK[STAGES * KB * KSTR]; T sV[same]; T sP[BMV * (BN + 8)];
//   BMV = 16 * WM (WM = KW * WMQ virtual row groups), KB = KW * BN, KSTR = HEAD_DIM + 8.
//   After the stream the K/V area holds the combine slabs [KW][GROUP][HEAD_DIM] fp32 (then the
//   merge weights, GROUP * (2 fan + 2) floats) and sP the key groups' (max, sum) [KW][GROUP][2].
#define ATTN_KV_UNROLL _Pragma("unroll 4") // the K/V tile loader's row loop (attn_load_kv_tile)
#include "attn_mma.cuh"

#if STAGES > 1 && !ASYNC
#error "attention_decode_wide.cu: STAGES > 1 needs ASYNC (cp.async)"
#endif
#if WM != KW * WMQ || WMQ * 16 < GROUP
#error "attention_decode_wide.cu: WM must be KW * WMQ and 16 * WMQ must cover GROUP"
#endif
#if WM > 15
#error "attention_decode_wide.cu: named barriers 1..15 limit WM to 15"
#endif

#define WIDE_KB (KW * BN)                  // keys per pipeline stage
#define WIDE_SA (ATTN_NS == 8 ? 4 : ATTN_NS == 16 ? 2 : 1) // independent score accumulators

// attn_tile (attn_mma.cuh) with two changes: the warp's Q rows come from row group wq (the KW
// key groups share one Q tile; wm is the virtual row group: sP rows, sMax, named barrier), and
// the score sums are spread over WIDE_SA independent accumulators (shorter mma chains).
template <class Visible>
__device__ __forceinline__ void wide_tile(AttnAcc &acc, const T *sQ, const T *sK, const T *sV,
                                          T *sP, float *sMax, int wm, int wq, int wn, int lane,
                                          Visible visible)
{
    const int g = lane >> 2, t = lane & 3;
    float sa[WIDE_SA][ATTN_NS / 8][4];
#pragma unroll
    for (int u = 0; u < WIDE_SA; u++)
#pragma unroll
        for (int j = 0; j < ATTN_NS / 8; j++)
            sa[u][j][0] = sa[u][j][1] = sa[u][j][2] = sa[u][j][3] = 0.f;

    const T *kw = sK + (wn * ATTN_NS) * ATTN_KSTR;
    const T *qw = sQ + (wq * 16 + (lane & 15)) * ATTN_KSTR + (lane >> 4) * 8;
#pragma unroll 2
    for (int k0 = 0; k0 < HEAD_DIM / 16; k0 += WIDE_SA) {
#pragma unroll
        for (int u = 0; u < WIDE_SA; u++) {
            const int kk = k0 + u;
            unsigned a[4];
            attn_ldsm_x4(a, qw + kk * 16);
#if ATTN_NS == 8
            unsigned b[2];
            attn_ldsm_x2(b, kw + (lane & 7) * ATTN_KSTR + kk * 16 + ((lane >> 3) & 1) * 8);
            attn_mma(sa[u][0], a, b);
#else
#pragma unroll
            for (int j = 0; j < ATTN_NS / 8; j += 2) {
                unsigned b[4];
                attn_ldsm_x4(b, kw + (j * 8 + ((lane >> 4) << 3) + (lane & 7)) * ATTN_KSTR +
                                    kk * 16 + ((lane >> 3) & 1) * 8);
                attn_mma(sa[u][j], a, b);
                attn_mma(sa[u][j + 1], a, b + 2);
            }
#endif
        }
    }
    float s[ATTN_NS / 8][4];
#pragma unroll
    for (int j = 0; j < ATTN_NS / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float v = sa[0][j][e];
#pragma unroll
            for (int u = 1; u < WIDE_SA; u++)
                v += sa[u][j][e];
            s[j][e] = v;
        }

    // From here on: attn_tile's mask, online softmax and P·V, unchanged.
    float mx[2] = {-ATTN_INF, -ATTN_INF};
#pragma unroll
    for (int j = 0; j < ATTN_NS / 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = wm * 16 + g + (e >> 1) * 8;
            const int col = wn * ATTN_NS + j * 8 + 2 * t + (e & 1);
            if (!visible(row, col))
                s[j][e] = -ATTN_INF;
            mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    }
#if WN > 1
    if (t == 0) {
        sMax[wn * ATTN_BM + wm * 16 + g] = mx[0];
        sMax[wn * ATTN_BM + wm * 16 + g + 8] = mx[1];
    }
    attn_group_sync(wm);
#pragma unroll
    for (int w = 0; w < WN; w++) {
        mx[0] = fmaxf(mx[0], sMax[w * ATTN_BM + wm * 16 + g]);
        mx[1] = fmaxf(mx[1], sMax[w * ATTN_BM + wm * 16 + g + 8]);
    }
#else
    (void)sMax;
#endif

    float mu[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float mnew = fmaxf(acc.m[i], mx[i]);
        mu[i] = mnew == -ATTN_INF ? 0.f : mnew;
        const float alpha = __expf(acc.m[i] - mu[i]);
        acc.m[i] = mnew;
        acc.l[i] *= alpha;
#pragma unroll
        for (int n = 0; n < ATTN_DS / 8; n++) {
            acc.o[n][2 * i] *= alpha;
            acc.o[n][2 * i + 1] *= alpha;
        }
    }

    T *prow0 = sP + (wm * 16 + g) * ATTN_PSTR + wn * ATTN_NS + 2 * t;
    T *prow1 = prow0 + 8 * ATTN_PSTR;
#pragma unroll
    for (int j = 0; j < ATTN_NS / 8; j++) {
        const float e0 = __expf(s[j][0] - mu[0]), e1 = __expf(s[j][1] - mu[0]);
        const float e2 = __expf(s[j][2] - mu[1]), e3 = __expf(s[j][3] - mu[1]);
        acc.l[0] += e0 + e1;
        acc.l[1] += e2 + e3;
        *reinterpret_cast<T2 *>(prow0 + j * 8) = from_f32x2(make_float2(e0, e1));
        *reinterpret_cast<T2 *>(prow1 + j * 8) = from_f32x2(make_float2(e2, e3));
    }
    attn_group_sync(wm);

    const T *vw = sV + wn * ATTN_DS;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        unsigned a[4];
        attn_ldsm_x4(a, sP + (wm * 16 + (lane & 15)) * ATTN_PSTR + kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int n = 0; n < ATTN_DS / 8; n += 2) {
            unsigned b[4];
            attn_ldsm_x4_trans(b, vw + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * ATTN_KSTR +
                                      n * 8 + (lane >> 4) * 8);
            attn_mma(acc.o[n], a, b);
            attn_mma(acc.o[n + 1], a, b + 2);
        }
    }
}


extern "C" __global__ void __launch_bounds__(ATTN_NT, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ q, const T *__restrict__ k_cache,
              const T *__restrict__ v_cache, const int *__restrict__ positions,
              const int *__restrict__ qpos, float *__restrict__ ws, unsigned *__restrict__ cnt,
              int heads, int kv_heads, int slots, int window, int chunk, int fan, int nnodes,
              int ncnt ATTN_PREP_PARAMS)
{
#if PREP
    const AttnPrepWeights prep_w = attn_prep_weights(q_w, inv_freq); // weights: before the wait
#endif
    extern __shared__ __align__(16) unsigned char attn_smem[];
    float *sMax = reinterpret_cast<float *>(attn_smem);
    int *sPos = reinterpret_cast<int *>(sMax + WN * ATTN_BM);
    T *sQ = reinterpret_cast<T *>(sPos + STAGES * WIDE_KB);
    T *sK = sQ + 16 * WMQ * ATTN_KSTR;
    T *sV = sK + STAGES * WIDE_KB * ATTN_KSTR;
    T *sP = sV + STAGES * WIDE_KB * ATTN_KSTR;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN; // virtual row group: key group kg, Q rows wq
    const int kg = wm / WMQ, wq = wm % WMQ;
    const int split = blockIdx.x, nsplit = gridDim.x, kvh = blockIdx.y, b = blockIdx.z;
    const int pair = b * kv_heads + kvh, npairs = gridDim.y * gridDim.z;
    // Before the wait (attn_cur_slot, attn_mma.cuh): qpos, the live split, the first stages.
    const int t = qpos[b];
    const AttnLive live = attn_live_split(slots, t, split, nsplit, WIDE_KB, chunk);
    if (split >= live.nact)
        return; // past the filled part of the cache
    const int s0 = live.s0, s1 = live.s1, nact = live.nact;
    const int ntiles = (s1 - s0 + WIDE_KB - 1) / WIDE_KB;
    const T *qb = q + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    const size_t cache_off = (size_t)pair * slots * HEAD_DIM;
    const T *kh = k_cache + cache_off, *vh = v_cache + cache_off;
    const int *ph = positions + (size_t)b * slots;
    const int cur = attn_cur_slot(slots, t), own = cur >= s0 && cur < s1 ? cur : -1;

    // Requests stage `tile` of keys into `stage`; before the wait (early) without the own slot.
    auto load_tile = [&](int tile, int stage, bool early) {
        attn_load_kv_tile<WIDE_KB>(sK, sV, sPos, kh, vh, ph, s0, s1, own, tile, stage, early, tid);
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
    if (own >= 0 && own < s0 + (STAGES - 1) * WIDE_KB) { // left out above
        const int r = own - s0;
        attn_fix_cur(sK + r * ATTN_KSTR, sV + r * ATTN_KSTR, sPos + r, kh + (size_t)own * HEAD_DIM,
                     vh + (size_t)own * HEAD_DIM, ph + own, tid, ATTN_NT);
    }
#endif
#if PREP // the raw rows now; Q is prepared after the loop's first tiles are requested
    AttnPrepRows prep_q;
    attn_prep_load(prep_q, qb);
#else
    attn_load_q_tile(sQ, 16 * WMQ, qb, GROUP, tid, ATTN_NT);
#endif

    AttnAcc acc;
    attn_acc_init(acc);

#if STAGES > 1
#if PREP // after the first tiles are requested; the loop's first barrier publishes it
    attn_prep_q(sQ, 16 * WMQ, prep_q, prep_w, t, eps);
#endif
    for (int i = 0; i < ntiles; i++) {
        attn_wait<STAGES - 2>();
        __syncthreads();
        if (i + STAGES - 1 < ntiles)
            load_tile(i + STAGES - 1, (i + STAGES - 1) % STAGES, false);
        attn_commit();
        const int stage = i % STAGES;
#else
#if PREP
    attn_prep_q(sQ, 16 * WMQ, prep_q, prep_w, t, eps);
#endif
    for (int i = 0; i < ntiles; i++) {
        __syncthreads();
        load_tile(i, 0, false);
        attn_commit();
        attn_wait<0>();
        __syncthreads();
        const int stage = 0;
#endif
        // This key group's sub-tile: keys [kb, kb + BN) of the stage.
        const int kb = s0 + i * WIDE_KB + kg * BN;
        const int *pos = sPos + stage * WIDE_KB + kg * BN;
        auto visible = [&](int row, int col) {
            (void)row;
            const int p = pos[col];
            return kb + col < s1 && p >= 0 && p <= t && (window <= 0 || p > t - window);
        };
        const size_t sub = ((size_t)stage * WIDE_KB + kg * BN) * ATTN_KSTR;
        wide_tile(acc, sQ, sK + sub, sV + sub, sP, sMax, wm, wq, wn, lane, visible);
    }
    attn_wait<0>();
    attn_finish_sums(acc, sMax, wm, wn, lane); // ends with every thread past a __syncthreads()

    // ---- combine the KW key groups in shared memory (the K/V area is free now) ----
    const int g = lane >> 2, tq = lane & 3;
    float *slab = reinterpret_cast<float *>(sK);           // [KW][GROUP][HEAD_DIM]
    float *sML = reinterpret_cast<float *>(sP);            // [KW][GROUP][2]
    __syncthreads(); // the last tile's readers of sK/sV/sP are done
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = wq * 16 + g + 8 * i;
        if (r >= GROUP)
            continue;
        float *orow = slab + ((size_t)kg * GROUP + r) * HEAD_DIM + wn * ATTN_DS + 2 * tq;
#pragma unroll
        for (int n = 0; n < ATTN_DS / 8; n++)
            *reinterpret_cast<float2 *>(orow + n * 8) = make_float2(acc.o[n][2 * i], acc.o[n][2 * i + 1]);
        if (wn == 0 && tq == 0) {
            sML[(kg * GROUP + r) * 2] = acc.m[i];
            sML[(kg * GROUP + r) * 2 + 1] = acc.l[i];
        }
    }
    __syncthreads();

    T *ob = out + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    float4 *wso = reinterpret_cast<float4 *>(ws) + (size_t)pair * nnodes * ATTN_ME;
    float *wsml = ws + (size_t)npairs * nnodes * GROUP * HEAD_DIM + (size_t)pair * nnodes * GROUP * 2;
    for (int e = tid; e < ATTN_ME; e += ATTN_NT) {
        const int r = e / (HEAD_DIM / 4), c4 = e % (HEAD_DIM / 4);
        float M = -ATTN_INF;
#pragma unroll
        for (int k = 0; k < KW; k++)
            M = fmaxf(M, sML[(k * GROUP + r) * 2]);
        float L = 0.f;
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int k = 0; k < KW; k++) {
            const float m = sML[(k * GROUP + r) * 2];
            const float w = m == -ATTN_INF ? 0.f : __expf(m - M);
            L += w * sML[(k * GROUP + r) * 2 + 1];
            const float4 o = reinterpret_cast<const float4 *>(slab)[((size_t)k * GROUP + r) *
                                                                     (HEAD_DIM / 4) + c4];
            a.x += w * o.x;
            a.y += w * o.y;
            a.z += w * o.z;
            a.w += w * o.w;
        }
        if (nact == 1) { // nothing to merge: normalise straight into out
            const float inv = L > 0.f ? 1.f / L : 0.f;
            T *dst = ob + (size_t)r * HEAD_DIM + c4 * 4;
            *reinterpret_cast<T2 *>(dst) = from_f32x2(make_float2(a.x * inv, a.y * inv));
            *reinterpret_cast<T2 *>(dst + 2) = from_f32x2(make_float2(a.z * inv, a.w * inv));
        } else {
            wso[(size_t)split * ATTN_ME + e] = a;
            if (c4 == 0) {
                wsml[((size_t)split * GROUP + r) * 2] = M;
                wsml[((size_t)split * GROUP + r) * 2 + 1] = L;
            }
        }
    }
    if (nact == 1)
        return;

    // ---- the merge tree: the last of each group of `fan` children merges them ----
    // (sFlag in sPos; the weights at the start of the K/V area, the staged partials after them;
    // the slabs were read before the tree's first barrier)
    const int wfl = (GROUP * (2 * fan + 2) + 3) & ~3; // the weights' floats, 16-byte aligned
    const int area = 2 * STAGES * WIDE_KB * ATTN_KSTR * (int)sizeof(T);
    attn_merge_tree(wso, wsml, cnt + (size_t)pair * ncnt, nact, split, fan, slab, sPos, ob,
                    reinterpret_cast<float4 *>(slab + wfl), (area - 4 * wfl) / (ATTN_ME * 16));
}
