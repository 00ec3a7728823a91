// attention_decode_t.cu — decode attention (one new query per sequence) in the transposed form:
// the GROUP (<= 8) query heads of a KV head are the n8 side of every mma, so no row of an m16
// tile is wasted, and each warp streams its own keys with its own online softmax — no barrier
// inside the key loop.
//   scores  S^T[16 keys, 8 heads]   = K[16 keys, hd] · Q^T          (A = K from ldmatrix, B = Q)
//   output  O^T[hd, 8 heads]       += V^T[hd, 16 keys] · P^T         (A = V^T from ldmatrix.trans,
//                                                                      B = P^T by movmatrix)
// The S^T accumulator of a lane holds keys g and g + 8 of heads 2t and 2t + 1; rounded to the
// dtype and packed, that is the 8x8 fragment of P (keys x heads) that movmatrix.trans turns into
// the B fragment of P^T. Softmax statistics per head are reduced over the 8 lanes of equal t.
//
// Buffers, layouts and mask: exactly those of the op (tuner/op_attention.c), as attention_decode.cu:
//   q [batch, heads, HEAD_DIM] (prepared: prep = 0 only); k_cache, v_cache [batch, kv_heads,
//   slots, HEAD_DIM]; positions [batch, slots] int32 (-1 = empty); qpos [batch] int32;
//   out [batch, heads, HEAD_DIM]. Slot s is visible when 0 <= positions[s] <= qpos and
//   (window == 0 or positions[s] > qpos - window).
// Grid (nsplit, kv_heads, batch), WM warps (32 * WM threads). A block covers a chunk of the live
// slots (attn_live_split, granularity 16 * WM); warp w takes its 16-key tiles w, w + WM, ... into
// its own STAGES-deep cp.async ring. As in the other decode templates, qpos, the live split and
// each warp's first STAGES - 1 tiles are requested before the grid dependency wait, without the
// query's own slot, which is loaded after it (attn_cur_slot in attn_mma.cuh); positions are read
// after the wait with L2 loads. At the end the WM warps are combined in shared memory into one
// partial per block; the last block of a (sequence, KV head) merges the nact partials
// (attn_merge), as attention_decode.cu does.
// Workspace (zeroed once; left zeroed): ws = partials [pairs, nsplit, GROUP, HEAD_DIM] then
// (max, sum) [pairs, nsplit, GROUP, 2] fp32; cnt [pairs] u32.
// Dynamic shared memory, in order: T sQ[8 * KSTR] (heads past GROUP zero); T sK[WM * STAGES * 16 *
// KSTR]; T sV[same] (warp w's stage s at rows (w * STAGES + s) * 16). After the loop sK holds the
// warps' outputs [WM][8][HEAD_DIM] fp32 (then the merge weights) and sV their (max, sum)
// [WM][8][2], then the last-block flag.
#include "attn_mma.cuh"

#if GROUP > 8
#error "attention_decode_t.cu: at most 8 query heads per KV head (the n8 side of the mma)"
#endif
#if BN != 16 || WN != 1
#error "attention_decode_t.cu: 16-key tiles, one warp per tile (BN 16, WN 1)"
#endif
#if STAGES > 1 && !ASYNC
#error "attention_decode_t.cu: STAGES > 1 needs ASYNC (cp.async)"
#endif
#if PREP
#error "attention_decode_t.cu: q must arrive prepared (prep = 0)"
#endif

#define TD_MT (HEAD_DIM / 16) // 16-row tiles of O^T

// B fragment of P^T from an 8x8 fragment of P (keys x heads): transpose in registers.
__device__ __forceinline__ unsigned td_trans(unsigned x)
{
    unsigned y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

__device__ __forceinline__ unsigned td_pack(float lo, float hi)
{
    const T2 v = from_f32x2(make_float2(lo, hi));
    return *reinterpret_cast<const unsigned *>(&v);
}

// The online-softmax state of one warp: O^T rows mt*16 + g (+8) for heads 2t, 2t+1; the running
// maximum (equal in the 8 lanes of a t) and this lane's share of the row sum.
struct TdAcc {
    float o[TD_MT][4];
    float m[2], l[2];
};

// One 16-key tile: keys kb.. (kb + 16 <= s1 or masked) in sK/sV rows (16 x KSTR).
__device__ __forceinline__ void td_tile(TdAcc &acc, const T *sQ, const T *sK, const T *sV,
                                        int lane, bool vis0, bool vis1)
{
    float sa[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    const T *ka = sK + (lane & 15) * ATTN_KSTR + (lane >> 4) * 8;
    const T *qa = sQ + (lane & 7) * ATTN_KSTR + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
        unsigned a[4], b[2];
        attn_ldsm_x4(a, ka + kk * 16);
        attn_ldsm_x2(b, qa + kk * 16);
        attn_mma(sa[kk & 1], a, b);
    }
    // s[0], s[1]: key g, heads 2t, 2t+1; s[2], s[3]: key g + 8
    float s[4];
#pragma unroll
    for (int e = 0; e < 4; e++)
        s[e] = sa[0][e] + sa[1][e];
    if (!vis0)
        s[0] = s[1] = -ATTN_INF;
    if (!vis1)
        s[2] = s[3] = -ATTN_INF;
    float mx[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 4));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 8));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 16));
    }
    float mu[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const float mnew = fmaxf(acc.m[h], mx[h]);
        mu[h] = mnew == -ATTN_INF ? 0.f : mnew; // no key seen yet: avoid -inf - -inf
        const float alpha = __expf(acc.m[h] - mu[h]);
        acc.m[h] = mnew;
        acc.l[h] *= alpha;
#pragma unroll
        for (int mt = 0; mt < TD_MT; mt++) {
            acc.o[mt][h] *= alpha;
            acc.o[mt][h + 2] *= alpha;
        }
    }
    // P = exp(S - m): summed unrounded, rounded to the dtype for P·V (as attn_tile).
    const float p0 = __expf(s[0] - mu[0]), p1 = __expf(s[1] - mu[1]);
    const float p2 = __expf(s[2] - mu[0]), p3 = __expf(s[3] - mu[1]);
    acc.l[0] += p0 + p2;
    acc.l[1] += p1 + p3;
    const unsigned b[2] = {td_trans(td_pack(p0, p1)), td_trans(td_pack(p2, p3))};
    // O^T += V^T P^T: A rows are head dims, k the 16 keys (ldmatrix.trans of V[key][hd]).
    const T *va = sV + ((lane & 7) + ((lane >> 4) << 3)) * ATTN_KSTR + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int mt = 0; mt < TD_MT; mt++) {
        unsigned a[4];
        attn_ldsm_x4_trans(a, va + mt * 16);
        attn_mma(acc.o[mt], a, b);
    }
}

extern "C" __global__ void __launch_bounds__(ATTN_NT, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ q, const T *__restrict__ k_cache,
              const T *__restrict__ v_cache, const int *__restrict__ positions,
              const int *__restrict__ qpos, float *__restrict__ ws, unsigned *__restrict__ cnt,
              int heads, int kv_heads, int slots, int window, int chunk)
{
    extern __shared__ __align__(16) unsigned char attn_smem[];
    T *sQ = reinterpret_cast<T *>(attn_smem);
    T *sK = sQ + 8 * ATTN_KSTR;
    T *sV = sK + WM * STAGES * 16 * ATTN_KSTR;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int split = blockIdx.x, nsplit = gridDim.x, kvh = blockIdx.y, b = blockIdx.z;
    const int pair = b * kv_heads + kvh, npairs = gridDim.y * gridDim.z;
    // Before the wait (attn_cur_slot, attn_mma.cuh): qpos, the live split, the first tiles.
    const int tq = qpos[b];
    const AttnLive live = attn_live_split(slots, tq, split, nsplit, 16 * WM, chunk);
    if (split >= live.nact)
        return; // past the filled part of the cache
    const int s0 = live.s0, s1 = live.s1, nact = live.nact;
    const int ntiles = (s1 - s0 + 15) / 16;                    // 16-key tiles of the block
    const int mine = warp < ntiles ? (ntiles - warp + WM - 1) / WM : 0; // this warp's tiles
    const T *qb = q + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    const size_t cache_off = (size_t)pair * slots * HEAD_DIM;
    const T *kh = k_cache + cache_off, *vh = v_cache + cache_off;
    const int *ph = positions + (size_t)b * slots;
    const int cur = attn_cur_slot(slots, tq), own = cur >= s0 && cur < s1 ? cur : -1;
    T *wk = sK + warp * STAGES * 16 * ATTN_KSTR, *wv = sV + warp * STAGES * 16 * ATTN_KSTR;

    // The warp's i-th tile (keys s0 + 16 (warp + i WM) ..) into its stage; early: before the wait,
    // without the own slot.
    auto load_tile = [&](int i, int stage, bool early) {
        const int kb = s0 + 16 * (warp + i * WM);
        T *dk = wk + stage * 16 * ATTN_KSTR, *dv = wv + stage * 16 * ATTN_KSTR;
#pragma unroll 4
        for (int c = lane; c < 16 * (HEAD_DIM / 8); c += 32) {
            const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
            if (early && kb + r == own)
                continue;
            const bool ok = kb + r < s1;
            const size_t off = (size_t)(ok ? kb + r : 0) * HEAD_DIM + col;
            attn_copy16(dk + r * ATTN_KSTR + col, kh + off, ok);
            attn_copy16(dv + r * ATTN_KSTR + col, vh + off, ok);
        }
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < mine)
            load_tile(s, s, true);
        attn_commit();
    }
    tailor_grid_begin();
    if (own >= 0) { // the own slot, if a tile requested above holds it
        const int r = own - s0, w = (r / 16) % WM, i = (r / 16) / WM;
        if (i < STAGES - 1)
            attn_fix_cur(sK + ((w * STAGES + i) * 16 + r % 16) * ATTN_KSTR,
                         sV + ((w * STAGES + i) * 16 + r % 16) * ATTN_KSTR, nullptr,
                         kh + (size_t)own * HEAD_DIM, vh + (size_t)own * HEAD_DIM, nullptr, tid,
                         ATTN_NT);
    }
    attn_load_q_tile(sQ, 8, qb, GROUP, tid, ATTN_NT);
    __syncthreads(); // Q and the own row are visible to every warp

    TdAcc acc;
#pragma unroll
    for (int mt = 0; mt < TD_MT; mt++)
        acc.o[mt][0] = acc.o[mt][1] = acc.o[mt][2] = acc.o[mt][3] = 0.f;
    acc.m[0] = acc.m[1] = -ATTN_INF;
    acc.l[0] = acc.l[1] = 0.f;

    const int g = lane >> 2;
    auto visible = [&](int key) {
        if (key >= s1)
            return false;
        const int p = __ldcg(ph + key);
        return p >= 0 && p <= tq && (window <= 0 || p > tq - window);
    };
    for (int i = 0; i < mine; i++) {
        if (i + STAGES - 1 < mine)
            load_tile(i + STAGES - 1, (i + STAGES - 1) % STAGES, false);
        attn_commit();
        const int kb = s0 + 16 * (warp + i * WM);
        const bool vis0 = visible(kb + g), vis1 = visible(kb + g + 8);
        attn_wait<STAGES - 1>();
        __syncwarp();
        const int stage = i % STAGES;
        td_tile(acc, sQ, wk + stage * 16 * ATTN_KSTR, wv + stage * 16 * ATTN_KSTR, lane, vis0,
                vis1);
        __syncwarp(); // the stage is refilled next iteration
    }
    attn_wait<0>();
#pragma unroll
    for (int h = 0; h < 2; h++) {
        acc.l[h] += __shfl_xor_sync(0xffffffffu, acc.l[h], 4);
        acc.l[h] += __shfl_xor_sync(0xffffffffu, acc.l[h], 8);
        acc.l[h] += __shfl_xor_sync(0xffffffffu, acc.l[h], 16);
    }

    // ---- the WM warps into one partial: slabs [WM][8][HEAD_DIM] and (max, sum) [WM][8][2] ----
    __syncthreads(); // every warp is done with its K/V stages
    float *slab = reinterpret_cast<float *>(sK);
    float *sML = reinterpret_cast<float *>(sV);
    const int t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < TD_MT; mt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int head = 2 * t + (e & 1), d = mt * 16 + g + (e >> 1) * 8;
            slab[((size_t)warp * 8 + head) * HEAD_DIM + d] = acc.o[mt][e];
        }
    if (g == 0)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            sML[(warp * 8 + 2 * t + h) * 2] = acc.m[h];
            sML[(warp * 8 + 2 * t + h) * 2 + 1] = acc.l[h];
        }
    __syncthreads();

    T *ob = out + ((size_t)b * heads + (size_t)kvh * GROUP) * HEAD_DIM;
    float *wso = ws + (size_t)pair * nsplit * GROUP * HEAD_DIM;
    float *wsml = ws + (size_t)npairs * nsplit * GROUP * HEAD_DIM + (size_t)pair * nsplit * GROUP * 2;
    for (int e = tid; e < GROUP * (HEAD_DIM / 4); e += ATTN_NT) {
        const int r = e / (HEAD_DIM / 4), c4 = e % (HEAD_DIM / 4);
        float M = -ATTN_INF;
#pragma unroll
        for (int w = 0; w < WM; w++)
            M = fmaxf(M, sML[(w * 8 + r) * 2]);
        float L = 0.f;
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < WM; w++) {
            const float m = sML[(w * 8 + r) * 2];
            const float wt = m == -ATTN_INF ? 0.f : __expf(m - M);
            L += wt * sML[(w * 8 + r) * 2 + 1];
            const float4 o = reinterpret_cast<const float4 *>(slab)[((size_t)w * 8 + r) *
                                                                     (HEAD_DIM / 4) + c4];
            a.x += wt * o.x;
            a.y += wt * o.y;
            a.z += wt * o.z;
            a.w += wt * o.w;
        }
        if (nact == 1) { // nothing to merge: normalise straight into out
            const float inv = L > 0.f ? 1.f / L : 0.f;
            T *dst = ob + (size_t)r * HEAD_DIM + c4 * 4;
            *reinterpret_cast<T2 *>(dst) = from_f32x2(make_float2(a.x * inv, a.y * inv));
            *reinterpret_cast<T2 *>(dst + 2) = from_f32x2(make_float2(a.z * inv, a.w * inv));
        } else {
            reinterpret_cast<float4 *>(wso)[((size_t)split * GROUP + r) * (HEAD_DIM / 4) + c4] = a;
            if (c4 == 0) {
                wsml[((size_t)split * GROUP + r) * 2] = M;
                wsml[((size_t)split * GROUP + r) * 2 + 1] = L;
            }
        }
    }
    if (nact == 1)
        return;

    // The last block to arrive merges; it also puts the counter back to zero for the next launch.
    int *sFlag = reinterpret_cast<int *>(sML + WM * 16);
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned ticket = atomicAdd(cnt + pair, 1u);
        const int last = ticket == (unsigned)nact - 1u;
        if (last)
            cnt[pair] = 0u;
        *sFlag = last;
    }
    __syncthreads();
    if (!*sFlag)
        return;
    __threadfence();
    attn_merge(ob, wso, wsml, slab, nact); // the slabs were read before the barrier above
}
