// w4a16_wgmma.cu — W4A16 matmul for prefill on sm_90a warpgroup MMAs: out[m, n] = a[m, k] · W[n, k]^T
// computed as its transpose, D[n, m] = W · a^T, so that the dequantized weights are wgmma's A
// operand in registers and the activations its B operand in shared memory.
//
// A block holds WG warpgroups; warpgroup wg owns weight rows n0 + 64 wg .. + 63 and all BM tokens
// of the block (one m64nBMk16 per 16 columns of k). Per k tile of BK columns, a STAGES-deep
// cp.async ring carries:
//   the activation tile, BM tokens x BK columns, K-major in the 128-byte swizzle (wgmma.cuh):
//     BK / 64 atoms-wide slabs of BM x 128 B, each 1024-byte aligned;
//   the packed weights, BN = 64 WG rows x BK / 8 words (the kernel layout of runtime/w4a16.h,
//     rows padded to 4 mod 8 words: conflict-free reads);
//   scales (one row of BN per group the tile touches) and zero points.
// A thread dequantizes its A fragments from two weight rows (g and g + 8 of its warp's 16) as
// round((u - z) · s), like every other w4a16 template, so the products are the same; each
// fragment then feeds BM tokens (no dequantization per token tile, unlike mma.sync).
// After the last tile, the fp32 accumulators are rounded once and staged through shared memory
// as [BM tokens][BN + 8] so that the stores to out are 16-byte rows of n.
// Decode (BM = 8, 16, 32: a handful of tokens, one token tile): SPLITK > 1 splits the k tiles
// over blockIdx.z; each split writes fp32 partials [SPLITK, M, N] and the last block of a column
// tile sums them in z order (w4_splitk_finish), so that narrow n still fills the SMs.
// The copies: a thread copies the same 16-byte column chunk of the same token rows in every
// tile (fixed destinations, sources moving BK columns a tile: no division or swizzle arithmetic
// in the k loop), and reads its weight words and scales of a stage into registers before the
// tile's first MMA (session 36: m = 2048 0.53x -> 0.65x cuBLAS on the H100).
// Defines: BM (8, 16, 32, 64, 128, 192, 256), BK (64, 128), WG (1-3), STAGES, INFLIGHT (0, 1:
// k_loop_inflight), SPLITK (1: none; > 1 needs M <= BM), EARLY_W (1: the first stages' weights
// requested before the grid wait), WS (1: a copy warpgroup and mbarriers, ws_main; experimental),
// GROUP, HAS_ZP. Needs n % 8 == 0.
// Dynamic shared memory: 1024 (alignment slack) + STAGES · stage bytes (the epilogue's staging
// reuses the ring; the space checks it fits) + with WS 16 bytes a stage (the mbarriers).
#include "w4a16_common.cuh"
#include "wgmma.cuh"

#ifndef WS
#define WS 0
#endif
#define W4G_THREADS (WG * 128)              // the warpgroups that multiply
#define W4G_BLOCK (W4G_THREADS + 128 * WS)  // + the copy warpgroup (WS = 1)
#define W4G_COPY_THREADS (WS ? 128 : W4G_THREADS) // the threads that issue the ring's copies
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef EARLY_W
#define EARLY_W 0
#endif

namespace w4g {
constexpr int BN = 64 * WG;                                  // weight rows per block
constexpr int B_LD = BK / 8 + ((BK / 8) % 8 == 4 ? 0 : 4);   // words per weight row
constexpr int SROWS = BK >= GROUP ? BK / GROUP : 1;          // scale rows per stage
constexpr int A_BYTES = BM * BK * 2;                         // activations (multiple of 1024)
constexpr int W_BYTES = BN * B_LD * 4;
constexpr int S_BYTES = SROWS * BN * 2;
constexpr int Z_BYTES = HAS_ZP ? SROWS * BN : 0;
constexpr int STAGE_BYTES = (A_BYTES + W_BYTES + S_BYTES + Z_BYTES + 1023) / 1024 * 1024;
constexpr int O_LD = BN + 8;                                 // epilogue staging row (T)
static_assert(BM == 8 || BM == 16 || BM == 32 || BM == 64 || BM == 128 || BM == 192 || BM == 256,
              "BM is a wgmma N: 8, 16, 32, 64, 128, 192 or 256");
static_assert(BK % 64 == 0 && GROUP % 32 == 0, "BK is whole swizzle atoms; GROUP a multiple of 32");
static_assert(BK % GROUP == 0 || GROUP % BK == 0, "BK and GROUP must nest");
static_assert(STAGES >= 2 + INFLIGHT, "at least 2 stages (3 with a tile in flight)");
static_assert(BM * O_LD * 2 <= STAGES * STAGE_BYTES, "the epilogue staging must fit the ring");
static_assert(!WS || (SPLITK == 1 && !EARLY_W && INFLIGHT),
              "the copy warpgroup (WS) serves the prefill loop: no split k, no early weights, a tile in flight");

struct Stage {
    u8 *a;  // activations, swizzled
    u32 *w; // packed weights
    T *s;   // scales
    u8 *z;  // zero points
};

__device__ __forceinline__ Stage stage_at(u8 *ring, int st)
{
    u8 *base = ring + st * STAGE_BYTES;
    Stage s;
    s.a = base;
    s.w = reinterpret_cast<u32 *>(base + A_BYTES);
    s.s = reinterpret_cast<T *>(base + A_BYTES + W_BYTES);
    s.z = base + A_BYTES + W_BYTES + S_BYTES;
    return s;
}

// Byte offset of 16-byte chunk c (0 .. BK/8) of token row r in the swizzled activation tile.
__device__ __forceinline__ int a_offset(int r, int c)
{
    return (c >> 3) * (BM * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// A thread's share of every activation tile: the same 16-byte column chunk c of token rows
// rb, rb + A_RSTEP, ... in each k tile. A_RSTEP is a multiple of 8, so the swizzle (r & 7) is
// the same for all of them: the destinations are fixed and the sources move BK columns a tile,
// with no division or swizzle arithmetic in the k loop.
constexpr int A_CHUNKS = BK / 8;                                // 16-byte chunks of a token row
constexpr int A_RSTEP = W4G_COPY_THREADS / A_CHUNKS;            // rows between a thread's copies
constexpr int A_COPIES = (BM + A_RSTEP - 1) / A_RSTEP;          // copies a thread makes a tile
static_assert(W4G_COPY_THREADS % A_CHUNKS == 0 && A_RSTEP % 8 == 0, "copies keep the swizzle row");

// What a block's copies read: the operands, their sizes and the block's corner.
struct Operands {
    const T *a;
    const u32 *qweight;
    const T *scales;
    const u8 *zeros;
    int M, N, K, n_pad, m0, n0;
    // this thread's activation copies: chunk col / 8 of tile rows rb + A_RSTEP j, j < a_slots
    // (the rows the tile has: a copy past them would zero-fill another row's bytes), of which
    // j < a_rows exist in a (the others are zero-filled)
    const T *a_src; // row rb, column 0 of the chunk (a itself when the thread has no row)
    int a_dst;      // byte offset of row rb, chunk col / 8 in a stage
    int a_slots;
    int a_rows;
    int a_col;
};

__device__ __forceinline__ Operands operands_of(const T *a, const u32 *qweight, const T *scales,
                                                const u8 *zeros, int M, int N, int K, int n_pad,
                                                int m0, int n0)
{
    Operands op{a, qweight, scales, zeros, M, N, K, n_pad, m0, n0};
    const int c = threadIdx.x % A_CHUNKS, rb = threadIdx.x / A_CHUNKS;
    const int left = min(M - m0, BM) - rb; // rows of this token tile in a from rb on
    op.a_slots = (BM - rb + A_RSTEP - 1) / A_RSTEP; // 0 <= rb < A_RSTEP: never negative
    op.a_rows = left > 0 ? (left + A_RSTEP - 1) / A_RSTEP : 0;
    op.a_src = op.a_rows > 0 ? a + (size_t)(m0 + rb) * K + c * 8 : a;
    op.a_dst = a_offset(rb, c);
    op.a_col = c * 8;
    return op;
}

// Issues the copies of k tile kt's activations into stage s (rows past m, columns past k: zeros).
__device__ __forceinline__ void load_acts(const Stage &s, int kt, const Operands &op)
{
    const int k0 = kt * BK;
    const bool col_ok = k0 + op.a_col < op.K;
#pragma unroll
    for (int j = 0; j < A_COPIES; j++) {
        if (BM % A_RSTEP != 0 && j >= op.a_slots)
            break;
        const bool ok = col_ok && j < op.a_rows;
        tc_copy16(s.a + op.a_dst + j * (A_RSTEP * 128),
                  ok ? op.a_src + (size_t)j * A_RSTEP * op.K + k0 : op.a, ok);
    }
}

// Issues the copies of k tile kt's weights, scales and zero points into stage s.
__device__ __forceinline__ void load_weights(const Stage &s, int kt, const Operands &op)
{
    w4_load_weight_tile<BN, BK, B_LD, SROWS, GROUP, W4G_COPY_THREADS>(
        s.w, s.s, s.z, kt, op.qweight, op.scales, op.zeros, op.N, op.K, op.n_pad, op.n0);
}

// Issues the copies of k tile kt into stage s; pieces outside m, n, k or the groups are zeros.
__device__ __forceinline__ void load_tile(const Stage &s, int kt, const Operands &op)
{
    load_acts(s, kt, op);
    load_weights(s, kt, op);
}

// A prologue stage: the whole tile, or with EARLY_W its activations only (its weights were
// requested before the grid wait).
__device__ __forceinline__ void load_first(const Stage &s, int kt, const Operands &op)
{
#if EARLY_W
    load_acts(s, kt, op);
#else
    load_tile(s, kt, op);
#endif
}

// A thread's part of a stage's weight side, read into registers before the tile's first MMA
// (the wgmma fences between words keep the compiler from moving shared loads across them, so
// loads made word by word would each wait out their latency in the issue path): the words of
// weight rows r0 and r0 + 8 for every 32 columns, and the scales (zero points) of each group.
struct TileWords {
    u32 w0[BK / 32], w1[BK / 32];
    T s0[SROWS], s1[SROWS];
#if HAS_ZP
    u8 z0[SROWS], z1[SROWS];
#endif
};

__device__ __forceinline__ void read_words(TileWords &tw, const Stage &s, int r0, int t)
{
#pragma unroll
    for (int kc = 0; kc < BK / 32; kc++) {
        tw.w0[kc] = s.w[r0 * B_LD + kc * 4 + t];
        tw.w1[kc] = s.w[(r0 + 8) * B_LD + kc * 4 + t];
    }
#pragma unroll
    for (int sr = 0; sr < SROWS; sr++) {
        tw.s0[sr] = s.s[sr * BN + r0];
        tw.s1[sr] = s.s[sr * BN + r0 + 8];
#if HAS_ZP
        tw.z0[sr] = s.z[sr * BN + r0];
        tw.z1[sr] = s.z[sr * BN + r0 + 8];
#endif
    }
}

// The A fragments of k16 steps 2 kc and 2 kc + 1 for this thread: weight rows r0 and r0 + 8
// (block rows), pairs 2h and 2h + 1 of the 32-column word kc (h = the step's parity).
__device__ __forceinline__ void dequant_word(const TileWords &tw, int kc, u32 (&af)[2][4])
{
    const int sr = SROWS > 1 ? (kc * 32) / GROUP : 0;
    const u32 w0 = tw.w0[kc], w1 = tw.w1[kc];
    const T2 s0 = w4_splat(tw.s0[sr]), s1 = w4_splat(tw.s1[sr]);
#if HAS_ZP
    const T2 z0 = w4_bias(tw.z0[sr]), z1 = w4_bias(tw.z1[sr]);
#else
    const T2 z0 = w4_bias(8u), z1 = z0;
#endif
#pragma unroll
    for (int h = 0; h < 2; h++) {
        af[h][0] = w4_as_u32(w4_pair(w0, 2 * h, z0, s0));
        af[h][1] = w4_as_u32(w4_pair(w1, 2 * h, z1, s1));
        af[h][2] = w4_as_u32(w4_pair(w0, 2 * h + 1, z0, s0));
        af[h][3] = w4_as_u32(w4_pair(w1, 2 * h + 1, z1, s1));
    }
}

// A tile's MMAs issued into fragments `af` and left in flight (committed as one group): each
// word's two fragments are dequantized while the previous word's MMAs run (the wgmma.fence
// between them orders register writes; it does not wait for the MMAs in flight). Dequantizing
// the whole tile first was 5-10 % slower at m = 2048 (docs/perf/w4a16.md).
__device__ __forceinline__ void mma_issue(float (&acc)[BM / 2], const Stage &st, int r0, int t,
                                          u32 (&af)[BK / 32][2][4])
{
    const wg_u32 abase = tc_smem_addr(st.a);
    TileWords tw;
    read_words(tw, st, r0, t);
#pragma unroll
    for (int kc = 0; kc < BK / 32; kc++) {
        dequant_word(tw, kc, af[kc]);
        wg_fence();
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int step = 2 * kc + h;
            wg_mma_rs<BM>(acc, af[kc][h], wg_desc_sw128(abase + (step >> 2) * (BM * 128) +
                                                         (step & 3) * 32));
        }
    }
    wg_commit();
}

// The MMAs of one k tile, retired before it returns (INFLIGHT = 0).
__device__ __forceinline__ void mma_tile(float (&acc)[BM / 2], const Stage &st, int r0, int t)
{
    u32 af[BK / 32][2][4];
    wg_fence_acc(acc);
    mma_issue(acc, st, r0, t, af);
    wg_wait<0>(); // the stage and af are free once this tile's MMAs are done
    wg_fence_acc(acc);
}

// The tiles' MMAs with one tile in flight while the next is dequantized: before(kk) makes tile
// kk's stage ready, mma_issue leaves its MMAs in flight, wait_group 1 retires tile kk - 1's, and
// after(kk) may then hand that stage back. The fragments alternate between two register sets
// (unrolled by two), so tile kk never overwrites those of tile kk - 1 while its MMAs read them.
template <typename Before, typename After>
__device__ __forceinline__ void tiles_in_flight(float (&acc)[BM / 2], u8 *ring, int r0, int t,
                                                int ktiles, Before before, After after)
{
    u32 af0[BK / 32][2][4], af1[BK / 32][2][4];
    wg_fence_acc(acc);
    for (int kt = 0; kt < ktiles; kt += 2) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int kk = kt + half;
            if (kk < ktiles) {
                before(kk);
                if (half == 0)
                    mma_issue(acc, stage_at(ring, kk % STAGES), r0, t, af0);
                else
                    mma_issue(acc, stage_at(ring, kk % STAGES), r0, t, af1);
                wg_wait<1>(); // tile kk - 1 retired: its stage and fragments are free
                after(kk);
            }
        }
    }
    wg_wait<0>();
    wg_fence_acc(acc);
}

// The k loop with one tile's MMAs in flight (INFLIGHT = 1): the prefetch distance is STAGES - 2,
// so the stage refilled at tile kt held tile kt - 2, which the wait_group 1 after tile kt - 1
// retired in every warpgroup before the barrier.
__device__ __forceinline__ void k_loop_inflight(float (&acc)[BM / 2], u8 *ring, const Operands &op,
                                                int r0, int t, int kb, int ktiles)
{
#pragma unroll
    for (int s = 0; s < STAGES - 2; s++) {
        if (s < ktiles)
            load_first(stage_at(ring, s), kb + s, op);
        tc_copy_commit();
    }
    tiles_in_flight(
        acc, ring, r0, t, ktiles,
        [&](int kk) {
            tc_copy_wait<STAGES - 3>();
            wg_fence_proxy_async(); // tile kk's copies, visible to the wgmma operand reads
            __syncthreads();
            const int nk = kk + STAGES - 2;
            if (nk < ktiles)
                load_tile(stage_at(ring, nk % STAGES), kb + nk, op);
            tc_copy_commit();
        },
        [](int) {});
}

// The output tile: the accumulators rounded once and staged through the ring (free by now) as
// [BM tokens][O_LD], then stored as 16-byte rows of n by the NT threads that multiplied (tid
// 0 .. NT - 1), which sync() joins in between.
template <int NT, typename Sync>
__device__ __forceinline__ void store_out(T *out, const float (&acc)[BM / 2], u8 *ring, int r0,
                                          int t, int tid, int m0, int n0, int M, int N, Sync sync)
{
    // acc[4j + e]: weight row r0 + 8 (e >> 1), token 8j + 2t + (e & 1)
    T *stage_o = reinterpret_cast<T *>(ring);
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            stage_o[(8 * j + 2 * t + (e & 1)) * O_LD + r0 + 8 * (e >> 1)] = from_f32(acc[4 * j + e]);
    sync();
    for (int i = tid; i < BM * (BN / 8); i += NT) {
        const int r = i / (BN / 8), c = (i % (BN / 8)) * 8, gm = m0 + r, gn = n0 + c;
        if (gm < M && gn < N)
            *reinterpret_cast<uint4 *>(out + (size_t)gm * N + gn) =
                *reinterpret_cast<const uint4 *>(stage_o + r * O_LD + c);
    }
}

struct BlockSync {
    __device__ void operator()() const { __syncthreads(); }
};

#if WS
// ---- WS = 1: a copy warpgroup feeds the warpgroups that multiply, through mbarriers ----
// Warpgroup 0 issues every copy of the ring (load_tile with 128 threads); warpgroups 1 .. WG
// only wait for a stage, dequantize and multiply. Per stage s, full[s] completes when the copy
// warpgroup's copies of its tile have landed (each thread's cp.async.mbarrier.arrive.noinc: 128
// arrivals) and empty[s] when every multiplying thread has retired the MMAs that read it (one
// arrival a thread, so that no branch splits a warp between the wgmma issue and its wait). No
// block-wide barrier is left in the k loop: the warpgroups drift apart (one dequantizes while
// another's MMAs run), and none of their threads issues a copy. With WG = 2, setmaxnreg moves
// registers from the copy warpgroup (56) to the others (224): ptxas allots registers by
// warpgroup in wgmma code, so a lone copy warp (288 threads, the first version) cost a whole
// warpgroup's share and left the MMAs 158 registers, which ptxas serialized (C7511).
// The barriers lie after the ring (16 bytes a stage, w4a16_wgmma_ws.lua). These helpers stay
// here until a second template needs them: a new header changes every op's space hash
// (docs/cache-format.md).
typedef unsigned long long u64;

__device__ __forceinline__ void mbar_init(u64 *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(tc_smem_addr(bar)), "r"(count)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(u64 *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(tc_smem_addr(bar)) : "memory");
}

// Arrives on bar once every cp.async this thread issued before has landed (counted at init).
__device__ __forceinline__ void mbar_arrive_copies(u64 *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(tc_smem_addr(bar))
                 : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(u64 *bar, int parity)
{
    unsigned done;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(tc_smem_addr(bar)), "r"(parity)
                 : "memory");
    return done != 0;
}

// Waits for the phase of bar with this parity to complete.
__device__ __forceinline__ void mbar_wait(u64 *bar, int parity)
{
    while (!mbar_try_wait(bar, parity)) {
    }
}

// The multiplying threads' own barrier (id 1; 0 is __syncthreads').
struct MmaSync {
    __device__ void operator()() const
    {
        asm volatile("bar.sync 1, %0;\n" ::"n"(W4G_THREADS) : "memory");
    }
};

// The copy warpgroup: tile kt into stage kt % STAGES once the warpgroups have released it.
__device__ __forceinline__ void ws_produce(u8 *ring, u64 *full, u64 *empty, const Operands &op,
                                           int kb, int ktiles)
{
    for (int kt = 0; kt < ktiles; kt++) {
        const int st = kt % STAGES;
        if (kt >= STAGES)
            mbar_wait(&empty[st], (kt / STAGES - 1) & 1);
        load_tile(stage_at(ring, st), kb + kt, op);
        mbar_arrive_copies(&full[st]);
    }
    // no thread leaves with its copies in flight (they have landed by the time the last tile
    // is multiplied anyway: this wait costs the idle copy warpgroup only)
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// A multiplying warpgroup: each tile's MMAs issued once its stage is full, one tile left in
// flight, the stage of the tile before released once those MMAs have retired.
__device__ __forceinline__ void ws_consume(float (&acc)[BM / 2], u8 *ring, u64 *full, u64 *empty,
                                           int r0, int t, int ktiles)
{
    tiles_in_flight(
        acc, ring, r0, t, ktiles,
        [&](int kk) {
            mbar_wait(&full[kk % STAGES], (kk / STAGES) & 1);
            wg_fence_proxy_async(); // the copies of tile kk, visible to the wgmma operand reads
        },
        [&](int kk) {
            if (kk > 0)
                mbar_arrive(&empty[(kk - 1) % STAGES]);
        });
}

// A block of WS = 1 from the k loop on: barriers set up, then warpgroup 0 copies and the others
// multiply and store.
__device__ __forceinline__ void ws_main(T *out, u8 *ring, const Operands &op, int kb, int ktiles)
{
    u64 *full = reinterpret_cast<u64 *>(ring + STAGES * STAGE_BYTES), *empty = full + STAGES;
    if (threadIdx.x == 0)
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], W4G_COPY_THREADS);
            mbar_init(&empty[s], W4G_THREADS);
        }
    __syncthreads();
    if (threadIdx.x < W4G_COPY_THREADS) {
#if WG > 1
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
#endif
        ws_produce(ring, full, empty, op, kb, ktiles);
        return;
    }
#if WG > 1
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
#endif
    const int tid = threadIdx.x - W4G_COPY_THREADS, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g;
    float acc[BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        acc[i] = 0.f;
    ws_consume(acc, ring, full, empty, r0, t, ktiles);
    MmaSync()(); // every multiplying warpgroup is done with the ring: it becomes the staging tile
    store_out<W4G_THREADS>(out, acc, ring, r0, t, tid, op.m0, op.n0, op.M, op.N, MmaSync());
}
#endif
} // namespace w4g

extern "C" __global__ void __launch_bounds__(W4G_BLOCK, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const u32 *__restrict__ qweight,
              const T *__restrict__ scales,
#if HAS_ZP
              const u8 *__restrict__ zeros,
#endif
#if SPLITK > 1
              float *__restrict__ partial, int *__restrict__ counters,
#endif
              int M, int N, int K, int n_pad)
{
#if !EARLY_W
    tailor_grid_begin();
#endif
    using namespace w4g;
    extern __shared__ __align__(16) u8 smem_raw[];
    // the swizzled tiles need 1024-byte alignment of the shared address
    const wg_u32 raw = tc_smem_addr(smem_raw);
    u8 *ring = smem_raw + (((raw + 1023u) & ~1023u) - raw);
#if !HAS_ZP
    const u8 *zeros = nullptr;
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = warp * 16 + g; // this thread's first weight row in the block (warpgroup wg =
                                  // warp / 4 owns rows 64 wg ..)
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
    const Operands op = operands_of(a, qweight, scales, zeros, M, N, K, n_pad, m0, n0);

    // this block's k tiles: [kb, kb + ktiles)
#if SPLITK > 1
    const int kper = ((K + BK - 1) / BK + SPLITK - 1) / SPLITK, kb = blockIdx.z * kper;
    const int ktiles = max(0, min((K + BK - 1) / BK - kb, kper));
#else
    const int kb = 0, ktiles = (K + BK - 1) / BK;
#endif
#if WS
    (void)r0;
    ws_main(out, ring, op, kb, ktiles);
#else
    float acc[BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        acc[i] = 0.f;
#if EARLY_W
    // the prologue stages' weights, scales and zero points before the grid wait (no kernel of a
    // forward writes them: tailor_common.cuh), their activations after it; they join the first
    // stage's copy group, so the ring's group counts are unchanged
#pragma unroll
    for (int s = 0; s < STAGES - 1 - INFLIGHT; s++)
        if (s < ktiles)
            load_weights(stage_at(ring, s), kb + s, op);
    tailor_grid_begin();
#endif
#if INFLIGHT
    k_loop_inflight(acc, ring, op, r0, t, kb, ktiles);
#else
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load_first(stage_at(ring, s), kb + s, op);
        tc_copy_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        tc_copy_wait<STAGES - 2>();
        wg_fence_proxy_async(); // the copies of tile kt, visible to the wgmma operand reads
        __syncthreads(); // tile kt landed; every warpgroup finished the tile of the stage refilled
        const int nk = kt + STAGES - 1;
        if (nk < ktiles)
            load_tile(stage_at(ring, nk % STAGES), kb + nk, op);
        tc_copy_commit();

        mma_tile(acc, stage_at(ring, kt % STAGES), r0, t);
    }
#endif
    tc_copy_wait<0>();
#if SPLITK > 1
    // this split's fp32 partials (acc[4j + e]: token 8j + 2t + (e & 1), row r0 + 8 (e >> 1)),
    // then the column tile's last block sums the splits (M <= BM: one token tile)
    float *mine = partial + (size_t)blockIdx.z * M * N;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int gm = 8 * j + 2 * t + (e & 1), gn = n0 + r0 + 8 * (e >> 1);
            if (gm < M && gn < N)
                mine[(size_t)gm * N + gn] = acc[4 * j + e];
        }
    __shared__ int w4g_last;
    w4_splitk_finish(out, partial, counters, SPLITK, M, N, n0, BN, &w4g_last);
#else
    __syncthreads(); // every warpgroup is done with the ring: it becomes the staging tile
    store_out<W4G_THREADS>(out, acc, ring, r0, t, threadIdx.x, m0, n0, M, N, BlockSync());
#endif
#endif
}
