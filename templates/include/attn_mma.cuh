// attn_mma.cuh — the tensor-core flash-attention step shared by attention_prefill.cu and
// attention_decode.cu: ldmatrix, mma.sync (m16n8k16; two m16n8k8 on sm_75), cp.async, and one
// key tile of a warp's work (scores, mask, online softmax in fp32, P rounded to the dtype, P·V).
//
// Defines the host passes (see the .lua spaces): HEAD_DIM (256|512), BN (keys per tile), WM (warps
// along rows; 16 rows each), WN (warps sharing a row group), STAGES, Q_REGS (1: Q fragments live in
// registers, 0: in shared memory), MMA_K (16: m16n8k16, sm_80+; 8: m16n8k8 pairs, sm_75 fp16),
// ASYNC (1: cp.async loads, sm_80+).
//
// Work split inside a block: warp (wm, wn) owns rows [16 wm, 16 wm + 16). In the score phase it
// computes S for keys [wn NS, wn NS + NS) of the tile over the whole head dim; the WN warps of a
// row group agree on the row maxima through shared memory, write their part of P (rounded to the
// dtype, exactly what HF's eager path feeds to P·V; a lone warp, WN = 1, keeps it in registers),
// and in the P·V phase warp wn accumulates output columns [wn DS, wn DS + DS) over all BN keys.
#pragma once

#include "tailor_common.cuh"

#define ATTN_INF __int_as_float(0x7f800000) // NVRTC has no <math.h> INFINITY

#ifndef RM
#define RM 1                       // m16 row tiles per warp (prefill may take 2: each K/V
#endif                             // fragment read from shared memory then serves 32 rows)
#define ATTN_WR (16 * RM)          // rows per warp
#define ATTN_BM (ATTN_WR * WM)     // rows per block
#define ATTN_NT (32 * WM * WN)     // threads per block
#define ATTN_NS (BN / WN)          // keys per warp in the score phase
#define ATTN_DS (HEAD_DIM / WN)    // output columns per warp in the P·V phase
#define ATTN_KSTR (HEAD_DIM + 8)   // smem row stride of Q/K/V tiles (elements): +16 B per row
                                   // spreads ldmatrix rows over all 32 banks
#define ATTN_PSTR (BN + 8)         // smem row stride of the P tile

#if ATTN_NS != 8 && ATTN_NS % 16 != 0
#error "attn_mma.cuh: BN / WN must be 8 or a multiple of 16"
#endif
#if ATTN_DS % 16 != 0 || BN % 16 != 0
#error "attn_mma.cuh: HEAD_DIM / WN and BN must be multiples of 16"
#endif
#if RM > 1 && (Q_REGS || defined(GROUP))
#error "attn_mma.cuh: RM > 1 is for the prefill with Q in shared memory"
#endif
#if MMA_K == 8 && !defined(TAILOR_DTYPE_FP16)
#error "attn_mma.cuh: m16n8k8 is used for fp16 only"
#endif

// Decode's live split. Under the op's slot contract (the slot of position p is p mod slots: a
// ring of W slots, or a linear cache of at least qpos + 1) no slot at or past qpos + 1 holds a
// visible position while the cache is not full, so only live = min(slots, qpos + 1) slots are
// streamed, re-split over the same nsplit blocks: chunk = ceil(live / nsplit) rounded up to the
// stream's granularity `gran` (never more than the launch's chunk, which covers all slots).
// Blocks past the live part (split >= nact) have nothing to do and leave at once; the merge
// counts only the nact live ones.
struct AttnLive {
    int chunk, nact, s0, s1;
};
__device__ __forceinline__ AttnLive attn_live_split(int slots, int qpos, int split, int nsplit,
                                                    int gran, int chunk)
{
    const int live = max(1, min(slots, qpos + 1));
    const int per = (live + nsplit - 1) / nsplit;
    AttnLive l;
    l.chunk = min(chunk, (per + gran - 1) / gran * gran);
    l.nact = (live + l.chunk - 1) / l.chunk;
    l.s0 = split * l.chunk;
    l.s1 = min(live, l.s0 + l.chunk);
    return l;
}

// Decode before the grid dependency wait (sm_90 with PDL). Everything a decode block reads was
// written before its predecessor kernel started, except q and the query's own slot: earlier
// steps wrote every other slot (K, V, position), qpos was written before the step began (by
// the host, or by the previous step's softcap_argmax feed=1: steps are ordered on the stream,
// a graph launch or a staged upload between them, never PDL), and a step's kernels write only
// slot qpos mod slots of each cache (the slot contract). So a block
// reads qpos, splits the live slots and requests its first STAGES - 1 stages of K/V before
// tailor_grid_begin(), leaving out its own slot (attn_cur_slot), and after it loads q
// (attn_load_q_tile) and that one row (attn_fix_cur) with L2 loads (.cg: never an L1 line that
// was filled before the wait). The bytes requested early are a few stages per block, not
// whole slices (tailor_common.cuh).
__device__ __forceinline__ int attn_cur_slot(int slots, int qpos) { return qpos % slots; }

// Rows [0, nq) of qb (row stride HEAD_DIM) into a Q tile of `rows` rows (row stride
// HEAD_DIM + 8), rows nq.. zero; L2 loads and shared stores (after the wait).
__device__ __forceinline__ void attn_load_q_tile(T *sQ, int rows, const T *qb, int nq, int tid,
                                                 int nt)
{
    for (int c = tid; c < rows * (HEAD_DIM / 8); c += nt) {
        const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
        const uint4 v = r < nq ? __ldcg(reinterpret_cast<const uint4 *>(qb + (size_t)r * HEAD_DIM + col))
                                  : make_uint4(0u, 0u, 0u, 0u);
        *reinterpret_cast<uint4 *>(sQ + r * (HEAD_DIM + 8) + col) = v;
    }
}

// The own slot's K and V rows and position (written by the predecessor) into the stage row
// dk / dv / dpos (dpos may be NULL) that the early requests left out; after the wait.
__device__ __forceinline__ void attn_fix_cur(T *dk, T *dv, int *dpos, const T *krow, const T *vrow,
                                             const int *prow, int tid, int nt)
{
    for (int c = tid; c < HEAD_DIM / 8; c += nt) {
        *reinterpret_cast<uint4 *>(dk + c * 8) = __ldcg(reinterpret_cast<const uint4 *>(krow + c * 8));
        *reinterpret_cast<uint4 *>(dv + c * 8) = __ldcg(reinterpret_cast<const uint4 *>(vrow + c * 8));
    }
    if (dpos && tid == 0) // NULL: the kernel reads positions from L2 itself
        *dpos = __ldcg(prow);
}

#ifndef PREP
#define PREP 0
#endif
#if PREP
// Decode with prep = 1: q arrives as the raw projection and every block prepares its rows the
// way qk_norm_rope.cu does (GEMMA4.md §2.5): RMSNorm of each head row (fp32 statistics, times w),
// NeoX RoPE at position pos (pair j with j + HEAD_DIM/2, angle pos * inv_freq[j]; a frequency of
// 0 leaves its pair exactly as it is), one rounding to T, into the Q tile (row stride ATTN_KSTR;
// rows GROUP..rows-1 are zero). Lane l of a warp owns pairs l + 32 i of every row. The weights
// and frequencies are loaded before the grid dependency wait (attn_prep_weights: data no kernel
// writes); right after it each warp requests all of its rows at once (attn_prep_load: one L2
// round trip, overlapping the qpos load and the first K/V tiles), then reduces and rotates.
#define ATTN_PREP_PARAMS , const T *__restrict__ q_w, const float *__restrict__ inv_freq, float eps
#define ATTN_PREP_PER (HEAD_DIM / 64)                          // pairs per lane
#define ATTN_PREP_RPW ((GROUP + ATTN_NT / 32 - 1) / (ATTN_NT / 32)) // rows per warp
struct AttnPrepWeights {
    float wl[ATTN_PREP_PER], wh[ATTN_PREP_PER], f[ATTN_PREP_PER];
};
__device__ __forceinline__ AttnPrepWeights attn_prep_weights(const T *__restrict__ w,
                                                             const float *__restrict__ inv_freq)
{
    AttnPrepWeights pw;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < ATTN_PREP_PER; i++) {
        const int j = lane + 32 * i;
        pw.wl[i] = to_f32(w[j]);
        pw.wh[i] = to_f32(w[j + HEAD_DIM / 2]);
        pw.f[i] = inv_freq[j];
    }
    return pw;
}
// This warp's raw q rows (r = warp + NW k), requested right after the wait: they do not depend
// on qpos, so their L2 round trip overlaps the qpos load and the first K/V tiles.
struct AttnPrepRows {
    float lo[ATTN_PREP_RPW][ATTN_PREP_PER], hi[ATTN_PREP_RPW][ATTN_PREP_PER];
};
__device__ __forceinline__ void attn_prep_load(AttnPrepRows &q, const T *qb)
{
    constexpr int NW = ATTN_NT / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int k = 0; k < ATTN_PREP_RPW; k++) {
        const int r = warp + NW * k;
        if (r < GROUP) {
            const T *src = qb + (size_t)r * HEAD_DIM;
#pragma unroll
            for (int i = 0; i < ATTN_PREP_PER; i++) {
                q.lo[k][i] = to_f32(src[lane + 32 * i]);
                q.hi[k][i] = to_f32(src[lane + 32 * i + HEAD_DIM / 2]);
            }
        }
    }
}
__device__ __forceinline__ void attn_prep_q(T *sQ, int rows, const AttnPrepRows &q,
                                            const AttnPrepWeights &pw, int pos, float eps)
{
    constexpr int HALF = HEAD_DIM / 2, PER = ATTN_PREP_PER, NW = ATTN_NT / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float cs[PER], sn[PER];
#pragma unroll
    for (int i = 0; i < PER; i++)
        sincosf((float)pos * pw.f[i], &sn[i], &cs[i]);
#pragma unroll
    for (int k = 0; k < ATTN_PREP_RPW; k++) {
        const int r = warp + NW * k;
        if (r >= GROUP)
            continue;
        float ss = 0.f;
#pragma unroll
        for (int i = 0; i < PER; i++)
            ss += q.lo[k][i] * q.lo[k][i] + q.hi[k][i] * q.hi[k][i];
        const float inv = rsqrtf(warp_sum(ss) / (float)HEAD_DIM + eps);
        T *dst = sQ + r * ATTN_KSTR;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const float a = q.lo[k][i] * inv * pw.wl[i], b = q.hi[k][i] * inv * pw.wh[i];
            dst[lane + 32 * i] = from_f32(a * cs[i] - b * sn[i]);
            dst[lane + 32 * i + HALF] = from_f32(b * cs[i] + a * sn[i]);
        }
    }
    for (int c = threadIdx.x; c < (rows - GROUP) * HEAD_DIM; c += ATTN_NT)
        sQ[(GROUP + c / HEAD_DIM) * ATTN_KSTR + c % HEAD_DIM] = from_f32(0.f);
}
#else
#define ATTN_PREP_PARAMS
#endif

__device__ __forceinline__ unsigned attn_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void attn_ldsm_x4(unsigned r[4], const T *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(attn_smem_addr(p)));
}

__device__ __forceinline__ void attn_ldsm_x2(unsigned r[2], const T *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(attn_smem_addr(p)));
}

__device__ __forceinline__ void attn_ldsm_x4_trans(unsigned r[4], const T *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(attn_smem_addr(p)));
}

// c[16x8, fp32] += a[16x16] * b[16x8]; fragments in the m16n8k16 layout.
__device__ __forceinline__ void attn_mma(float c[4], const unsigned a[4], const unsigned b[2])
{
#if MMA_K == 16
#if defined(TAILOR_DTYPE_BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
#elif MMA_K == 8
    // The k16 fragment is two k8 fragments: {a0, a1} x b0 covers k 0-7, {a2, a3} x b1 k 8-15.
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#else
#error "attn_mma.cuh: MMA_K must be 16 or 8"
#endif
}

// 16 bytes global -> shared; ok == false writes zeros (tile rows past the end must be finite:
// a masked key still multiplies its V row by P = 0).
__device__ __forceinline__ void attn_copy16(T *dst, const T *src, bool ok)
{
#if ASYNC
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(attn_smem_addr(dst)),
                 "l"(src), "r"(ok ? 16 : 0));
#else
    *reinterpret_cast<uint4 *>(dst) =
        ok ? __ldg(reinterpret_cast<const uint4 *>(src)) : make_uint4(0u, 0u, 0u, 0u);
#endif
}

__device__ __forceinline__ void attn_commit(void)
{
#if ASYNC
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void attn_wait(void)
{
#if ASYNC
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// One cache position global -> shared; ok == false reads nothing and stores -1 (plain loads) or 0
// (cp.async's zero fill): the callers mask rows at s1 and past by their index.
__device__ __forceinline__ void attn_copy_pos(int *dst, const int *src, bool ok)
{
#if ASYNC
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(attn_smem_addr(dst)),
                 "l"(src), "r"(ok ? 4 : 0));
#else
    *dst = ok ? __ldg(src) : -1;
#endif
}

// A decode kernel's K/V tile `tile` (ROWS cache slots from s0 + tile * ROWS; rows at s1 and past
// zero-filled) and its positions into stage `slot` of sK, sV (row stride ATTN_KSTR) and sPos.
// early (before the grid wait) leaves out the own slot, which the predecessor writes (attn_fix_cur
// fetches it after the wait); after the wait the own slot's position comes from L2. A kernel may
// define ATTN_KV_UNROLL as a _Pragma("unroll N") for the row loop before including this header.
// (The tile and slot offsets are computed here, not passed as pointers: the same machine code as
// the loaders the two decode templates had, scripts/same-binaries.sh.)
#ifndef ATTN_KV_UNROLL
#define ATTN_KV_UNROLL
#endif
template <int ROWS>
__device__ __forceinline__ void attn_load_kv_tile(T *sK, T *sV, int *sPos, const T *kh,
                                                  const T *vh, const int *ph, int s0, int s1,
                                                  int own, int tile, int slot, bool early, int tid)
{
    const int kb = s0 + tile * ROWS;
    T *dk = sK + slot * ROWS * ATTN_KSTR, *dv = sV + slot * ROWS * ATTN_KSTR;
    ATTN_KV_UNROLL
    for (int c = tid; c < ROWS * (HEAD_DIM / 8); c += ATTN_NT) {
        const int r = c / (HEAD_DIM / 8), col = (c % (HEAD_DIM / 8)) * 8;
        if (early && kb + r == own)
            continue;
        const bool ok = kb + r < s1;
        const size_t off = (size_t)(ok ? kb + r : 0) * HEAD_DIM + col;
        attn_copy16(dk + r * ATTN_KSTR + col, kh + off, ok);
        attn_copy16(dv + r * ATTN_KSTR + col, vh + off, ok);
    }
    for (int c = tid; c < ROWS; c += ATTN_NT) {
        if (kb + c != own)
            attn_copy_pos(sPos + slot * ROWS + c, ph + (kb + c < s1 ? kb + c : 0), kb + c < s1);
        else if (!early) // its L1 line may predate the wait
            sPos[slot * ROWS + c] = __ldcg(ph + own);
    }
}

// Barrier among the WN warps of row group wm (named barrier 1 + wm; 0 is __syncthreads).
__device__ __forceinline__ void attn_group_sync(int wm)
{
#if WN > 1
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + wm), "r"(WN * 32) : "memory");
#else
    (void)wm;
    __syncwarp();
#endif
}

// Running state of one warp: its output columns for rows g and g + 8 of each of its RM row
// tiles (o[i * DS/8 + n]: tile i, n8 column block n), the running maxima (m[2i + h]: row
// 16i + g + 8h; the same in all WN warps of the group) and its partial row sums (summed at the
// end).
struct AttnAcc {
    float o[RM * ATTN_DS / 8][4];
    float m[2 * RM];
    float l[2 * RM];
};

__device__ __forceinline__ void attn_acc_init(AttnAcc &acc)
{
#pragma unroll
    for (int n = 0; n < RM * ATTN_DS / 8; n++)
        acc.o[n][0] = acc.o[n][1] = acc.o[n][2] = acc.o[n][3] = 0.f;
#pragma unroll
    for (int h = 0; h < 2 * RM; h++) {
        acc.m[h] = -ATTN_INF;
        acc.l[h] = 0.f;
    }
}

// Q fragments of this warp's 16 rows straight from global memory (rows >= nrows are zero).
// q points at row 0 of the block, rows are `stride` elements apart.
__device__ __forceinline__ void attn_load_q_regs(unsigned qf[HEAD_DIM / 16][4], const T *q,
                                                 size_t stride, int row0, int nrows, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    const int r0 = row0 + g, r1 = row0 + g + 8;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
        const int c = kk * 16 + 2 * t;
        qf[kk][0] = r0 < nrows ? *reinterpret_cast<const unsigned *>(q + r0 * stride + c) : 0u;
        qf[kk][1] = r1 < nrows ? *reinterpret_cast<const unsigned *>(q + r1 * stride + c) : 0u;
        qf[kk][2] = r0 < nrows ? *reinterpret_cast<const unsigned *>(q + r0 * stride + c + 8) : 0u;
        qf[kk][3] = r1 < nrows ? *reinterpret_cast<const unsigned *>(q + r1 * stride + c + 8) : 0u;
    }
}

// P of one row pair packed as m16n8k16 A fragments: the score fragments of n8 tiles 2kk and
// 2kk + 1 (rows g, g + 8; columns 2t, 2t + 1) are exactly the A fragment of key chunk kk, so with
// WN == 1 the probabilities never leave the registers (ATTN_P_REGS).
#define ATTN_P_REGS (WN == 1)

__device__ __forceinline__ unsigned attn_pack(float lo, float hi)
{
    const T2 v = from_f32x2(make_float2(lo, hi));
    return *reinterpret_cast<const unsigned *>(&v);
}

// Nothing to do between the softmax and P·V (attn_tile's `mid` for callers that load nothing).
struct AttnNoMid {
    __device__ __forceinline__ void operator()() const {}
};

// One key tile for warp (wm, wn). sQ: the block's Q tile (ATTN_BM x KSTR; unused with Q_REGS),
// sK/sV: this tile's BN x KSTR keys and values, sP: ATTN_BM x PSTR (unused with ATTN_P_REGS),
// sMax: WN x ATTN_BM floats. visible(row, col) says whether block row `row` sees tile key `col`;
// full (warp-uniform) says the caller knows every key of the tile is visible to every row of
// this warp, and then the mask is not evaluated. mid() is called by every thread after the last
// read of sK and before the first read of sV (a caller may wait for V there and reuse sK). The
// caller puts a __syncthreads() between two calls (sP and sMax are reused).
// The output is rescaled only when a row maximum moved (x * 1 == x: the same bits).
template <class Visible, class Mid>
__device__ __forceinline__ void attn_tile(AttnAcc &acc, const unsigned (*qf)[4], const T *sQ,
                                          const T *sK, const T *sV, T *sP, float *sMax, int wm,
                                          int wn, int lane, Visible visible, bool full, Mid mid)
{
    const int g = lane >> 2, t = lane & 3;
    const int wr0 = wm * ATTN_WR; // the warp's first row in the block
    float s[RM][ATTN_NS / 8][4];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < ATTN_NS / 8; j++)
            s[i][j][0] = s[i][j][1] = s[i][j][2] = s[i][j][3] = 0.f;

    // S = Q K^T for this warp's rows and NS keys.
    const T *kw = sK + (wn * ATTN_NS) * ATTN_KSTR;
#if Q_REGS
#pragma unroll // qf must be indexed by constants to stay in registers
#else
#pragma unroll 4
#endif
    for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
        unsigned a[RM][4];
#if Q_REGS
        a[0][0] = qf[kk][0];
        a[0][1] = qf[kk][1];
        a[0][2] = qf[kk][2];
        a[0][3] = qf[kk][3];
#else
        (void)qf;
#pragma unroll
        for (int i = 0; i < RM; i++)
            attn_ldsm_x4(a[i], sQ + (wr0 + i * 16 + (lane & 15)) * ATTN_KSTR + kk * 16 +
                                   (lane >> 4) * 8);
#endif
#if ATTN_NS == 8
        unsigned b[2];
        attn_ldsm_x2(b, kw + (lane & 7) * ATTN_KSTR + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int i = 0; i < RM; i++)
            attn_mma(s[i][0], a[i], b);
#else
#pragma unroll
        for (int j = 0; j < ATTN_NS / 8; j += 2) {
            unsigned b[4];
            attn_ldsm_x4(b, kw + (j * 8 + ((lane >> 4) << 3) + (lane & 7)) * ATTN_KSTR + kk * 16 +
                                ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int i = 0; i < RM; i++) {
                attn_mma(s[i][j], a[i], b);
                attn_mma(s[i][j + 1], a[i], b + 2);
            }
        }
#endif
    }

    // Mask (unless the whole tile is visible), then this warp's row maxima (statistic 2i + h:
    // row 16i + g + 8h of the warp's), reduced over the quad.
    if (!full) {
#pragma unroll
        for (int i = 0; i < RM; i++)
#pragma unroll
            for (int j = 0; j < ATTN_NS / 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = wr0 + i * 16 + g + (e >> 1) * 8;
                    const int col = wn * ATTN_NS + j * 8 + 2 * t + (e & 1);
                    if (!visible(row, col))
                        s[i][j][e] = -ATTN_INF;
                }
    }
    float mx[2 * RM];
#pragma unroll
    for (int h = 0; h < 2 * RM; h++)
        mx[h] = -ATTN_INF;
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < ATTN_NS / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                mx[2 * i + (e >> 1)] = fmaxf(mx[2 * i + (e >> 1)], s[i][j][e]);
#pragma unroll
    for (int h = 0; h < 2 * RM; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    }
#if WN > 1
    if (t == 0) {
#pragma unroll
        for (int i = 0; i < RM; i++) {
            sMax[wn * ATTN_BM + wm * ATTN_WR + i * 16 + g] = mx[2 * i];
            sMax[wn * ATTN_BM + wm * ATTN_WR + i * 16 + g + 8] = mx[2 * i + 1];
        }
    }
    attn_group_sync(wm);
#pragma unroll
    for (int w = 0; w < WN; w++) {
#pragma unroll
        for (int i = 0; i < RM; i++) {
            mx[2 * i] = fmaxf(mx[2 * i], sMax[w * ATTN_BM + wm * ATTN_WR + i * 16 + g]);
            mx[2 * i + 1] = fmaxf(mx[2 * i + 1], sMax[w * ATTN_BM + wm * ATTN_WR + i * 16 + g + 8]);
        }
    }
#else
    (void)sMax;
#endif

    // Online softmax: new maximum, rescale what was accumulated where it moved.
    float mu[2 * RM], alpha[2 * RM];
    bool moved = false;
#pragma unroll
    for (int h = 0; h < 2 * RM; h++) {
        const float mnew = fmaxf(acc.m[h], mx[h]);
        mu[h] = mnew == -ATTN_INF ? 0.f : mnew; // no key seen yet: avoid -inf - -inf
        alpha[h] = __expf(acc.m[h] - mu[h]);
        moved |= mnew != acc.m[h];
        acc.m[h] = mnew;
        acc.l[h] *= alpha[h];
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
        for (int i = 0; i < RM; i++)
#pragma unroll
            for (int n = 0; n < ATTN_DS / 8; n++) {
                acc.o[i * (ATTN_DS / 8) + n][0] *= alpha[2 * i];
                acc.o[i * (ATTN_DS / 8) + n][1] *= alpha[2 * i];
                acc.o[i * (ATTN_DS / 8) + n][2] *= alpha[2 * i + 1];
                acc.o[i * (ATTN_DS / 8) + n][3] *= alpha[2 * i + 1];
            }
    }

    // P = exp(S - m): summed unrounded (fp32), rounded to the dtype for P·V (in registers with
    // ATTN_P_REGS, else through sP).
#if ATTN_P_REGS
    unsigned pa[RM][BN / 16][4];
    (void)sP;
#endif
#pragma unroll
    for (int i = 0; i < RM; i++) {
#if !ATTN_P_REGS
        T *prow0 = sP + (wr0 + i * 16 + g) * ATTN_PSTR + wn * ATTN_NS + 2 * t;
        T *prow1 = prow0 + 8 * ATTN_PSTR;
#endif
#pragma unroll
        for (int j = 0; j < ATTN_NS / 8; j++) {
            const float e0 = __expf(s[i][j][0] - mu[2 * i]), e1 = __expf(s[i][j][1] - mu[2 * i]);
            const float e2 = __expf(s[i][j][2] - mu[2 * i + 1]);
            const float e3 = __expf(s[i][j][3] - mu[2 * i + 1]);
            acc.l[2 * i] += e0 + e1;
            acc.l[2 * i + 1] += e2 + e3;
#if ATTN_P_REGS
            pa[i][j / 2][2 * (j & 1)] = attn_pack(e0, e1);
            pa[i][j / 2][2 * (j & 1) + 1] = attn_pack(e2, e3);
#else
            *reinterpret_cast<T2 *>(prow0 + j * 8) = from_f32x2(make_float2(e0, e1));
            *reinterpret_cast<T2 *>(prow1 + j * 8) = from_f32x2(make_float2(e2, e3));
#endif
        }
    }
#if !ATTN_P_REGS
    attn_group_sync(wm);
#endif
    mid();

    // O[:, wn DS .. +DS) += P V.
    const T *vw = sV + wn * ATTN_DS;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
#if ATTN_P_REGS
#define ATTN_PV_A(i) (pa[i][kk]) // rows of tile i
#else
        unsigned a[RM][4];
#if RM == 1 // the loop below by hand: looped, two WN = 2 kernels compiled differently from
            // their pre-RM selves (scripts/same-binaries.sh)
        attn_ldsm_x4(a[0], sP + (wm * 16 + (lane & 15)) * ATTN_PSTR + kk * 16 + (lane >> 4) * 8);
#else
#pragma unroll
        for (int i = 0; i < RM; i++)
            attn_ldsm_x4(a[i], sP + (wr0 + i * 16 + (lane & 15)) * ATTN_PSTR + kk * 16 +
                                   (lane >> 4) * 8);
#endif
#define ATTN_PV_A(i) (a[i])
#endif
#pragma unroll
        for (int n = 0; n < ATTN_DS / 8; n += 2) {
            unsigned b[4];
            attn_ldsm_x4_trans(b, vw + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * ATTN_KSTR +
                                      n * 8 + (lane >> 4) * 8);
#pragma unroll
            for (int i = 0; i < RM; i++) {
                attn_mma(acc.o[i * (ATTN_DS / 8) + n], ATTN_PV_A(i), b);
                attn_mma(acc.o[i * (ATTN_DS / 8) + n + 1], ATTN_PV_A(i), b + 2);
            }
        }
#undef ATTN_PV_A
    }
}

#ifdef GROUP // decode only
#define ATTN_ME (GROUP * HEAD_DIM / 4)                   // float4 per partial output
#define ATTN_MJ ((ATTN_ME + ATTN_NT - 1) / ATTN_NT)       // of them per thread
#define ATTN_MU (ATTN_MJ >= 16 ? 1 : 16 / ATTN_MJ)        // partials loaded together

// A merge's result, this thread's ATTN_MJ float4 of it (element tid + j ATTN_NT): at the root
// normalised by the weighed sums into out, else into the parent node with its (max, sum).
__device__ __forceinline__ void attn_merge_store(const float4 (&a)[ATTN_MJ], const float *sM,
                                                 const float *sL, bool root, T *out,
                                                 float4 *dst_o, float *dst_ml)
{
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < ATTN_MJ; j++) {
        const int e = tid + j * ATTN_NT;
        if (e >= ATTN_ME)
            continue;
        const int r = e / (HEAD_DIM / 4), c4 = e % (HEAD_DIM / 4);
        if (root) {
            const float inv = sL[r] > 0.f ? 1.f / sL[r] : 0.f;
            T *dst = out + (size_t)r * HEAD_DIM + c4 * 4;
            *reinterpret_cast<T2 *>(dst) = from_f32x2(make_float2(a[j].x * inv, a[j].y * inv));
            *reinterpret_cast<T2 *>(dst + 2) = from_f32x2(make_float2(a[j].z * inv, a[j].w * inv));
        } else {
            dst_o[e] = a[j];
            if (c4 == 0) {
                dst_ml[r * 2] = sM[r];
                dst_ml[r * 2 + 1] = sL[r];
            }
        }
    }
}

// The merge weights of nc partials for rows r0 .. r0 + nrows - 1 of GROUP: per row rr, the
// largest max M of the partials' (max, sum) pairs src_ml [nc][GROUP][2], each partial's weight
// exp(m - M) (0 for a partial that saw no key) in w[rr * stride + c], its sum parked in
// sum[rr * stride + c], and the weighed sum in L[rr] (and M in rowM[rr] when rowM is given).
// One warp a row; the caller's barrier publishes them.
__device__ __forceinline__ void attn_row_weights(const float *src_ml, int nc, int r0, int nrows,
                                                 int stride, float *w, float *sum, float *rowM,
                                                 float *L)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int rr = warp; rr < nrows; rr += ATTN_NT / 32) {
        const int r = r0 + rr;
        float M = -ATTN_INF;
        for (int c = lane; c < nc; c += 32) {
            const float2 ml = __ldcg(reinterpret_cast<const float2 *>(src_ml) + (size_t)c * GROUP + r);
            w[rr * stride + c] = ml.x;
            sum[rr * stride + c] = ml.y;
            M = fmaxf(M, ml.x);
        }
        M = warp_max(M);
        float l = 0.f;
        for (int c = lane; c < nc; c += 32) {
            const float m = w[rr * stride + c];
            const float wc = m == -ATTN_INF ? 0.f : __expf(m - M);
            l += wc * sum[rr * stride + c];
            w[rr * stride + c] = wc;
        }
        l = warp_sum(l);
        if (lane == 0) {
            if (rowM)
                rowM[rr] = M;
            L[rr] = l;
        }
    }
}

// attn_row_weights for every row of GROUP, in one area sW: GROUP * fan weights, GROUP * fan
// sums, GROUP M, GROUP L.
__device__ __forceinline__ void attn_merge_weights(const float *src_ml, int nc, int fan, float *sW)
{
    float *sSum = sW + GROUP * fan, *sM = sSum + GROUP * fan, *sL = sM + GROUP;
    attn_row_weights(src_ml, nc, 0, GROUP, fan, sW, sSum, sM, sL);
}

// The block's arrival at a merge: after what every thread wrote is fenced, thread 0 takes a
// ticket from counter; the block that takes the last of `count` puts the counter back to 0 for
// the next launch and returns true, past a second fence (the others' writes visible to it);
// every other block returns false. sFlag: one int of shared memory. Every thread calls it.
__device__ __forceinline__ bool attn_last_arrival(unsigned *counter, unsigned count, int *sFlag)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned ticket = atomicAdd(counter, 1u);
        const int last = ticket == count - 1u;
        if (last)
            *counter = 0u;
        *sFlag = last;
    }
    __syncthreads();
    if (!*sFlag)
        return false;
    __threadfence();
    return true;
}

// Merges nc consecutive partial results of one (sequence, KV head) — unnormalised outputs src_o
// [nc][ATTN_ME] float4 and (max, sum) src_ml [nc][GROUP][2], written by other blocks before a
// fence and a ticket — into one: a node (dst_o, dst_ml) of a merge tree, or, when root, the
// normalised rows of out. The statistics and the first ATTN_MU outputs take one L2 round trip
// (each row's (max, sum) pairs parked in shared memory, then weighed there); further outputs
// are loaded ATTN_MU partials at a time (ATTN_MJ float4 each per thread). sW: GROUP * (2 * fan + 2) floats of shared memory,
// fan >= nc. Every thread of the block calls it.
__device__ __forceinline__ void attn_merge_nodes(const float4 *src_o, const float *src_ml, int nc,
                                                 int fan, float *sW, bool root, T *out,
                                                 float4 *dst_o, float *dst_ml)
{
    const int tid = threadIdx.x;
    const float *sM = sW + 2 * GROUP * fan, *sL = sM + GROUP;
    // The first ATTN_MU outputs are requested with the statistics: both in one L2 round trip.
    auto load = [&](float4 (&v)[ATTN_MU][ATTN_MJ], int c) {
#pragma unroll
        for (int u = 0; u < ATTN_MU; u++)
#pragma unroll
            for (int j = 0; j < ATTN_MJ; j++) {
                const int e = tid + j * ATTN_NT;
                v[u][j] = (c + u < nc && e < ATTN_ME) ? __ldcg(src_o + (size_t)(c + u) * ATTN_ME + e)
                                                      : make_float4(0.f, 0.f, 0.f, 0.f);
            }
    };
    float4 v[ATTN_MU][ATTN_MJ];
    load(v, 0);
    attn_merge_weights(src_ml, nc, fan, sW);
    __syncthreads();

        float4 a[ATTN_MJ];
#pragma unroll
    for (int j = 0; j < ATTN_MJ; j++)
        a[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int c = 0; c < nc; c += ATTN_MU) {
        if (c > 0)
            load(v, c);
#pragma unroll
        for (int u = 0; u < ATTN_MU; u++)
#pragma unroll
            for (int j = 0; j < ATTN_MJ; j++) {
                const int e = tid + j * ATTN_NT;
                const int r = e < ATTN_ME ? e / (HEAD_DIM / 4) : 0;
                const float w = c + u < nc ? sW[r * fan + c + u] : 0.f;
                a[j].x += w * v[u][j].x;
                a[j].y += w * v[u][j].y;
                a[j].z += w * v[u][j].z;
                a[j].w += w * v[u][j].w;
            }
    }
    attn_merge_store(a, sM, sL, root, out, dst_o, dst_ml);
}

#if ASYNC
// attn_merge_nodes with the partials staged in shared memory (cp.async, sm_80+): every 16-byte
// piece of up to `cap` partials (a node's children are consecutive, so one contiguous run) is
// requested at once, before the statistics are read and weighed, so a merge costs one L2 round
// trip plus the bytes at the SM's rate instead of a round trip per ATTN_MU partials (which made
// each level of the tree ~6 us at head_dim 512 on the H200: docs/perf/attention.md, session 14).
// stage: cap x ATTN_ME float4 of shared memory (16-byte aligned), disjoint from sW; cap >= 1.
// Every thread of the block calls it.
__device__ __forceinline__ void attn_merge_nodes_staged(const float4 *src_o, const float *src_ml,
                                                        int nc, int fan, float *sW, bool root,
                                                        T *out, float4 *dst_o, float *dst_ml,
                                                        float4 *stage, int cap)
{
    const int tid = threadIdx.x;
    const float *sM = sW + 2 * GROUP * fan, *sL = sM + GROUP;
    auto request = [&](int c0) { // partials c0 .. c0 + cap - 1 into the stage; one commit group
        const int n = min(cap, nc - c0) * ATTN_ME;
        const float4 *src = src_o + (size_t)c0 * ATTN_ME;
        for (int i = tid; i < n; i += ATTN_NT)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(attn_smem_addr(stage + i)),
                         "l"(src + i));
        attn_commit();
    };
    request(0);
    attn_merge_weights(src_ml, nc, fan, sW);
    float4 a[ATTN_MJ];
#pragma unroll
    for (int j = 0; j < ATTN_MJ; j++)
        a[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int c0 = 0; c0 < nc; c0 += cap) {
        if (c0 > 0) { // the stage is free once every thread has summed the run before
            __syncthreads();
            request(c0);
        }
        attn_wait<0>();
        __syncthreads(); // the run landed (every thread's pieces); the weights are in
        const int n = min(cap, nc - c0);
        for (int u = 0; u < n; u++)
#pragma unroll
            for (int j = 0; j < ATTN_MJ; j++) {
                const int e = tid + j * ATTN_NT;
                if (ATTN_ME % ATTN_NT != 0 && e >= ATTN_ME)
                    continue;
                const float w = sW[(e / (HEAD_DIM / 4)) * fan + c0 + u];
                const float4 v = stage[(size_t)u * ATTN_ME + e];
                a[j].x += w * v.x;
                a[j].y += w * v.y;
                a[j].z += w * v.z;
                a[j].w += w * v.w;
            }
    }
    attn_merge_store(a, sM, sL, root, out, dst_o, dst_ml);
}
#endif

// Decode's merge tree over the nact live split partials of one (sequence, KV head): node
// outputs wso [nodes][ATTN_ME] float4 and (max, sum) wsml [nodes][GROUP][2], the leaves first
// (this block's partial is leaf `split`, written before the call), then each level with more
// than one node; pc the pair's arrival counters (one per node of levels >= 1). The last block of
// each group of `fan` children merges them into their parent (attn_merge_nodes) and climbs; the
// root writes out. sW: the merge weights (GROUP * (2 fan + 2) floats); sFlag: one int of shared
// memory; stage: room for `cap` partials (ATTN_ME float4 each) apart from both, where the
// partials are staged with cp.async (attn_merge_nodes_staged; without ASYNC, or with cap = 0,
// they are loaded into registers by attn_merge_nodes). Every thread of the block calls it;
// counters are put back to 0 by their last user.
__device__ __forceinline__ void attn_merge_tree(float4 *wso, float *wsml, unsigned *pc, int nact,
                                                int split, int fan, float *sW, int *sFlag, T *out,
                                                float4 *stage, int cap)
{
    int n = nact, off = 0, coff = 0, idx = split;
    for (;;) {
        const int pn = (n + fan - 1) / fan, parent = idx / fan;
        const int c0 = parent * fan, nc = min(fan, n - c0);
        if (!attn_last_arrival(pc + coff + parent, (unsigned)nc, sFlag))
            return;
        const bool root = pn == 1;
        const size_t dst = (size_t)off + n + parent; // unused at the root
#if ASYNC
        if (cap > 0)
            attn_merge_nodes_staged(wso + (size_t)(off + c0) * ATTN_ME,
                                    wsml + (size_t)(off + c0) * GROUP * 2, nc, fan, sW, root, out,
                                    wso + (root ? 0 : dst * ATTN_ME),
                                    wsml + (root ? 0 : dst * GROUP * 2), stage, cap);
        else
#endif
            attn_merge_nodes(wso + (size_t)(off + c0) * ATTN_ME,
                             wsml + (size_t)(off + c0) * GROUP * 2, nc, fan, sW, root, out,
                             wso + (root ? 0 : dst * ATTN_ME), wsml + (root ? 0 : dst * GROUP * 2));
        if (root)
            return;
        off += n;
        coff += pn;
        n = pn;
        idx = parent;
    }
}

// A 32-bit load from global memory with acquire semantics at GPU scope (the spin of
// attn_arrive_wait: what the releasing block wrote before its fence and atomic is visible after;
// sm_70+).
__device__ __forceinline__ unsigned attn_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The block's arrival at a counter and its wait until `count` blocks have arrived, with what
// every thread of each of them wrote before visible to every thread of this one: a barrier,
// thread 0's release (fence.acq_rel, then a relaxed add: the barrier orders the other threads'
// writes before it), its acquiring poll, a barrier. Every thread of the block calls it.
__device__ __forceinline__ void attn_arrive_wait(unsigned *counter, unsigned count)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;\n"
                     "red.relaxed.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter)
                     : "memory");
        while (attn_ld_acquire(counter) < count)
            ;
    }
    __syncthreads();
}

// The pieces [e0, e1) of n partial outputs src [n][ATTN_ME] float4 into stage[c * slen + e - e0]
// with cp.async (one commit group; the caller waits). Without ASYNC (sm_75) the pieces go
// through registers from L2, ATTN_SLICE_BATCH loads in flight per thread before their stores, so
// the staging costs a few round trips rather than one per piece.
#define ATTN_SLICE_BATCH 8
__device__ __forceinline__ void attn_stage_slices(const float4 *src, int n, int slen, int e0,
                                                  int e1, float4 *stage)
{
#if ASYNC
    for (int i = threadIdx.x; i < n * slen; i += ATTN_NT) {
        const int c = i / slen, e = e0 + i % slen;
        if (e < e1)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(attn_smem_addr(stage + i)),
                         "l"(src + (size_t)c * ATTN_ME + e));
    }
    attn_commit();
#else
    for (int i0 = threadIdx.x; i0 < n * slen; i0 += ATTN_SLICE_BATCH * ATTN_NT) {
        float4 v[ATTN_SLICE_BATCH];
#pragma unroll
        for (int u = 0; u < ATTN_SLICE_BATCH; u++) {
            const int i = i0 + u * ATTN_NT, c = i / slen, e = e0 + i % slen;
            if (i < n * slen && e < e1)
                v[u] = __ldcg(src + (size_t)c * ATTN_ME + e);
        }
#pragma unroll
        for (int u = 0; u < ATTN_SLICE_BATCH; u++) {
            const int i = i0 + u * ATTN_NT, e = e0 + i % slen;
            if (i < n * slen && e < e1)
                stage[i] = v[u];
        }
    }
#endif
}

// Outputs [e0, e1) of a merge over n partials staged by attn_stage_slices: each weighed by
// w[(row - r0) * wstride + c], normalised by L[row - r0] and stored to out (rows of HEAD_DIM).
__device__ __forceinline__ void attn_store_slice(const float4 *stage, int n, int slen, int e0,
                                                 int e1, const float *w, int wstride,
                                                 const float *L, int r0, T *out)
{
    for (int e = e0 + (int)threadIdx.x; e < e1; e += ATTN_NT) {
        const int rr = e / (HEAD_DIM / 4) - r0, c4 = e % (HEAD_DIM / 4);
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int c = 0; c < n; c++) {
            const float wc = w[rr * wstride + c];
            const float4 v = stage[c * slen + (e - e0)];
            a.x += wc * v.x;
            a.y += wc * v.y;
            a.z += wc * v.z;
            a.w += wc * v.w;
        }
        const float inv = L[rr] > 0.f ? 1.f / L[rr] : 0.f;
        T *dst = out + (size_t)(r0 + rr) * HEAD_DIM + c4 * 4;
        *reinterpret_cast<T2 *>(dst) = from_f32x2(make_float2(a.x * inv, a.y * inv));
        *reinterpret_cast<T2 *>(dst + 2) = from_f32x2(make_float2(a.z * inv, a.w * inv));
    }
}

#if ASYNC
// Decode's merge with the root spread over the level-1 mergers (two levels; sm_80+). The nact
// leaves (this block's partial is leaf `split`, written before the call) are merged by groups of
// `fan` into pn = ceil(nact / fan) level-1 nodes (wso/wsml [nact + j], by the last child of group
// j to arrive, as attn_merge_tree does); then, instead of a last-arriver merging all pn nodes on
// one SM while the others idle, each level-1 merger arrives at the pair's root counter, waits
// until all pn nodes are in, and merges slice j of the GROUP x HEAD_DIM outputs over the pn
// nodes (every node's piece of the slice staged with cp.async at once) into out. Counters pc:
// [0, pn) the groups', pc[ncnt - 2] the root arrivals, pc[ncnt - 1] the leavers (the last one
// puts both back to 0). At most pn - 1 blocks of a pair wait, each of them running and done with
// its keys; the space keeps pairs * pn to half the SMs, so blocks not yet resident always find
// an SM (the next kernel's blocks launch only once every block of this grid has run). sW: the
// merge weights, GROUP * (2 * wstride + 2) floats with wstride = max(fan, ncnt - 2) >= pn;
// stage: room for `cap` >= 2 partials (a slice of pn nodes is at most ATTN_ME + pn float4).
// With one level-1 node (pn == 1) it is the root: attn_merge_tree's plain merge. Every thread of
// the block calls it.
__device__ __forceinline__ void attn_merge_spread(float4 *wso, float *wsml, unsigned *pc, int ncnt,
                                                  int nact, int split, int fan, float *sW,
                                                  int *sFlag, T *out, float4 *stage, int cap)
{
    const int tid = threadIdx.x, wstride = max(fan, ncnt - 2);
    const int pn = (nact + fan - 1) / fan, j = split / fan;
    if (pn == 1) {
        attn_merge_tree(wso, wsml, pc, nact, split, wstride, sW, sFlag, out, stage, cap);
        return;
    }
    const int c0 = j * fan, nc = min(fan, nact - c0);
    if (!attn_last_arrival(pc + j, (unsigned)nc, sFlag))
        return;
    attn_merge_nodes_staged(wso + (size_t)c0 * ATTN_ME, wsml + (size_t)c0 * GROUP * 2, nc, wstride,
                            sW, false, out, wso + (size_t)(nact + j) * ATTN_ME,
                            wsml + (size_t)(nact + j) * GROUP * 2, stage, cap);

    // Node j is in: arrive, and wait for the other level-1 nodes.
    unsigned *arrive = pc + ncnt - 2, *leave = pc + ncnt - 1;
    attn_arrive_wait(arrive, (unsigned)pn);

    // Slice j of the root: outputs [e0, e1) of every node, staged together, weighed, normalised.
    const int slen = (ATTN_ME + pn - 1) / pn, e0 = j * slen, e1 = min(ATTN_ME, e0 + slen);
    attn_stage_slices(wso + (size_t)nact * ATTN_ME, pn, slen, e0, e1, stage);
    attn_merge_weights(wsml + (size_t)nact * GROUP * 2, pn, wstride, sW);
    attn_wait<0>();
    __syncthreads();
    attn_store_slice(stage, pn, slen, e0, e1, sW, wstride, sW + 2 * GROUP * wstride + GROUP, 0, out);

    // The last to leave puts the root's counters back (every block is past its wait by then).
    if (tid == 0 && atomicAdd(leave, 1u) == (unsigned)pn - 1u) {
        *arrive = 0u;
        *leave = 0u;
    }
}
#endif

// Decode's merge in one level, spread over every live block (a grid of one wave only; sm_80+
// stages the slices with cp.async, sm_75 through registers: attn_stage_slices).
// Each of the nact live blocks, after writing its partial (leaf `split`), arrives at the pair's
// counter pc[0] and waits until all nact partials are in, then merges slice `split` of the GROUP
// x HEAD_DIM outputs over all nact partials: the slice's pieces of every partial staged at once
// (attn_stage_slices), the weights of the rows it touches computed from the nact (max, sum) pairs
// (one warp a row), normalised, stored to out. After the last partial lands, the merge is one
// fence and atomic, the wait's poll, and one L2 round trip on every SM at once, where a tree
// chains a round trip of tickets and reads per level on one SM. Every live block waits, so the
// space allows it only where the whole grid is resident at once (at most one block per SM over
// all pairs): the next kernel's blocks launch only once every block of this grid has run.
// pc[1] counts the leavers; the last one puts both back to 0. sW: (rows a slice touches) x
// (2 nact + 1) floats, the rows at most min(GROUP, GROUP / nact + 2); stage: ATTN_ME + nact float4.
// Every thread of the block calls it.
__device__ __forceinline__ void attn_merge_flat(const float4 *wso, const float *wsml, unsigned *pc,
                                                int nact, int split, float *sW, T *out,
                                                float4 *stage)
{
    unsigned *arrive = pc, *leave = pc + 1;
    attn_arrive_wait(arrive, (unsigned)nact);

    constexpr int ROW4 = HEAD_DIM / 4; // float4 per output row
    const int slen = (ATTN_ME + nact - 1) / nact, e0 = split * slen, e1 = min(ATTN_ME, e0 + slen);
    if (e0 < e1) {
        const int r0 = e0 / ROW4, nrows = (e1 - 1) / ROW4 - r0 + 1;
        attn_stage_slices(wso, nact, slen, e0, e1, stage);
        // sW: per touched row rr, nact weights, then each row's weighed sum L, then the nact
        // sums of every row (the (max, sum) pairs come in one round trip)
        float *sML = sW + nrows * nact, *sSum = sML + nrows;
        attn_row_weights(wsml, nact, r0, nrows, nact, sW, sSum, nullptr, sML);
        attn_wait<0>();
        __syncthreads();
        attn_store_slice(stage, nact, slen, e0, e1, sW, nact, sML, r0, out);
    }
    if (threadIdx.x == 0 && atomicAdd(leave, 1u) == (unsigned)nact - 1u) {
        *arrive = 0u;
        *leave = 0u;
    }
}
#endif

// After the last tile: full row sums (quad, then across the WN warps through sMax). Every thread
// of the block must call it (it holds two __syncthreads()).
__device__ __forceinline__ void attn_finish_sums(AttnAcc &acc, float *sMax, int wm, int wn,
                                                 int lane)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2 * RM; h++) {
        acc.l[h] += __shfl_xor_sync(0xffffffffu, acc.l[h], 1);
        acc.l[h] += __shfl_xor_sync(0xffffffffu, acc.l[h], 2);
    }
#if WN > 1
    __syncthreads();
    if (t == 0) {
#pragma unroll
        for (int i = 0; i < RM; i++) {
            sMax[wn * ATTN_BM + wm * ATTN_WR + i * 16 + g] = acc.l[2 * i];
            sMax[wn * ATTN_BM + wm * ATTN_WR + i * 16 + g + 8] = acc.l[2 * i + 1];
        }
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2 * RM; h++)
        acc.l[h] = 0.f;
#pragma unroll
    for (int w = 0; w < WN; w++) {
#pragma unroll
        for (int i = 0; i < RM; i++) {
            acc.l[2 * i] += sMax[w * ATTN_BM + wm * ATTN_WR + i * 16 + g];
            acc.l[2 * i + 1] += sMax[w * ATTN_BM + wm * ATTN_WR + i * 16 + g + 8];
        }
    }
#else
    (void)sMax;
    (void)wm;
    (void)wn;
    (void)g;
    (void)t;
#endif
}
