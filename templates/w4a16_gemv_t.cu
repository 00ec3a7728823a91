// w4a16_gemv_t.cu — W4A16 matmul for decode (m <= 16) on tensor cores in the transposed form:
// out^T[n, m] = W[n, k] · a^T[k, m], the weights as the mma's A operand (16 weight rows x 16 k)
// and the activations as B (their m rows on the n8 side). An m16n8k16 then takes 8 weights per
// lane (w4a16_gemv_wide, weights as B, takes 4), and a weight costs ~7/8 of an ALU op:
//
//   GROUP % 128 == 0 (PRESCALE 0): the nibbles become the 16-bit values MAGIC + u (bf16 128 + u,
//   fp16 1024 + u, exact) with one shift and one LOP3 per pair, and one 16-bit subtraction of
//   MAGIC + z per pair makes them u - z, still exact; a quad (128 columns) lies inside one
//   group, so the mma sums the quad unscaled in fp32 and the scale multiplies that sum (one FFMA
//   per value and quad), as the CUDA-core GEMV (w4a16_gemv.cu) does.
//   (Until session 9 the subtraction was folded into a per-quad fix-up against sum_k a, taken by
//   a second mma against an all-ones A: half the mmas and a cancellation in fp32; the
//   subtraction measured 0.1-0.6 µs faster, docs/perf/w4a16.md.)
//   GROUP 32 or 64 (PRESCALE 1): the lanes of one mma hold other groups, so the weights are
//   dequantized before it, round((u - z) s) in the dtype as the reference (w4_pair).
//
// Work: a warp owns RT tiles of 16 weight rows and a run of quads of the block's k slice; a
// block is WR x WK warps (WR along rows, WK along k, reduced through shared memory); grid =
// (n / BN, SPLITK) with BN = WR·RT·16. Lane (g, t) = (lane / 4, lane % 4) reads, per row tile
// and quad, chunk 4q + t of rows g and g + 8 (16 bytes each: a warp reads 16 rows x 64
// contiguous bytes). The mma sums over k in any order as long as A and B agree: the kernel
// layout's word t' of that chunk holds pairs p = 0..3 = columns 32c + 2t' + 8p (+1), so lane
// (g, t) uses word t' as its A fragment of virtual step (t', s): a0/a2 = pairs 2s / 2s + 1 of
// row g, a1/a3 those of row g + 8. The B fragment of the same step is then columns 32c + 2t' +
// 16s (+1) (b0) and + 8 (b1) of activation row g: words t' + 8s and t' + 8s + 4 of the chunk's
// 64 bytes, which the lane reads straight from global memory (L1; every warp reads them).
// Rows past m read row m - 1 (their columns are not stored), so for m = 1 every column of the
// accumulator is the result.
//
// Activations: ASMEM 1 stages the block's slice of them, [M][quads x 128 + 16], in shared memory
// right after the wait (one L2 round trip, while the first weights are in flight) and the lanes
// read their B fragments there, each row's 16-byte pieces swizzled so that no 128-bit read phase
// has a bank conflict (w4t::swz); ASMEM 0 reads them from global memory (L1) one quad
// ahead of the math, which costs an L2 round trip per quad whenever the quad's columns are not
// in the SM's L1 yet (each warp's first touch of them): measured ~1.5 µs of a 5 µs launch at
// n=6144 k=1536 (docs/perf/w4a16.md, session 8).
// PDL: the first batch of weights, scales and zero points is requested before
// griddepcontrol.wait (no kernel of a forward writes them); activations after it.
// Each lane issues UNROLL quads x RT tiles x 2 rows of 16-byte loads per batch, and the next
// batch before computing the current one. TRIM 1 (where a warp's quads are not a whole number of
// batches): a partial last batch computes only its quads; TRIM 0 computes all UNROLL slots, the
// empty ones as zeros (neither loads past the warp's quads). Session 43: 4-11 % faster
// configuration for configuration where it applies; splitting a whole last batch into single
// quads measured no gain.
// SPLITK > 1: fp32 partials [SPLITK, M, N] and the last block's z-order sum (w4_splitk_finish);
// or, CSPLIT 1 (sm_90, SPLITK 2..8), the SPLITK blocks of a column tile are one thread block
// cluster: each leaves its sums in its shared memory and, after a cluster barrier, stores a
// 1/SPLITK share of the tile's outputs summed over the blocks' shared memory in rank order (the
// sum w4_splitk_finish makes, bit for bit) — no workspace, fence, ticket or L2 round trip.
// GLU (op w4a16_glu, decode; RT = 2, SPLITK = 1): the weight is a layer's gate|up stack of 2N
// rows; a warp's row tile 0 holds 16 gate rows o.. and tile 1 the matching up rows N + o.., and
// the block stores gelu_tanh(gate) * up for its WR·16 outputs (gemv_finish, tailor_common.cuh).
// RING >= 2 (sm_80+, PRESCALE 0, no TRIM): each warp streams its batches through a ring of RING
// slots of its own in shared memory with cp.async (weights, scales and zero points), RING - 1
// batches ahead of the math, and reads a slot into registers just before computing it: the
// bytes in flight are not held in registers (one Batch live instead of two), so more of them
// fit beside more warps. A lane reads back only the weights it copied; the scales and zero
// points (copied by a few lanes) are made visible to the warp by __syncwarp after the wait. No
// block barrier. RING 0: the register double buffer above.
// FOLD 1 (ASMEM 1, PRESCALE 0, no RING): the pairs go into the mma as MAGIC + u, without the
// per-pair subtraction (32 of a quad's 256 SASS instructions; session 50 measured it 18-57 %
// slower on the H200, the block's sums costing more than the pairs save), and the bias comes
// off the quad's fp32 sum instead: sum (MAGIC + u) a - (MAGIC + z) sum a, with sum a of every
// staged quad and row computed once a block from the staged activations (sQ, [qps][8·MT]
// floats after sA). The cancellation costs ~5 (bf16) to 8 (fp16) of fp32's 24 bits on 128 products.
// L2PF 1 (sm_80, no RING): the weight loads ask L2 for 256-byte segments on a miss.
// CLAMP 1 (no FOLD, no RING): the weight loads take no test each: rows past N, quads past the
// warp's and chunks past the row's are clamped into the weight (their activations are zeros, or
// their outputs never stored), and a batch past the warp's quads is one uniform branch.
// MAGREG 1: a pair's mask and MAGIC in one LOP3, (x & 0x000f000f) | m, with m = MAGIC in both
// halves moved into a register inside the same asm block (with both as immediates ptxas emits
// an AND and an OR: session 50's SASS, 4 instructions a pair with the shift and the bias; this
// form is 3, at the cost of a register that holds MAGIC). The magreg spaces set it where
// the pairs are unscaled (PRESCALE 0), with MINB 1 but at MT = 2 on sm_90 (session 51: 3-8 %
// faster on the H100).
// MINB n > 0: __launch_bounds__(threads, n), ptxas's register target set by the space.
// Defines: WR, WK, RT, UNROLL, SPLITK, MT (n8 tiles of activation rows: m <= 8·MT), ASMEM, GROUP,
// HAS_ZP, PRESCALE, GLU, TRIM, CSPLIT, RING, FOLD, L2PF, MAGREG, MINB, CLAMP. Dynamic shared
// memory: (ASMEM 1) T sA[M][qps·128 + 16], qps = the block's quads; then (FOLD) float
// sQ[qps][8·MT]; then (RING) each warp's ring, w4t::RING_BYTES.
#include "w4a16_common.cuh"

#define W4T_THREADS (WR * WK * 32)
#define W4T_BO (GLU ? WR * 16 : WR * RT * 16) // outputs per block

#ifndef GLU
#define GLU 0
#endif
#ifndef TRIM
#define TRIM 0
#endif
#ifndef CSPLIT
#define CSPLIT 0
#endif
#ifndef RING
#define RING 0
#endif
#ifndef FOLD
#define FOLD 0
#endif
#ifndef L2PF
#define L2PF 0
#endif
#ifndef MAGREG
#define MAGREG 0
#endif
#ifndef CLAMP
#define CLAMP 0
#endif
#if CLAMP && (FOLD || RING)
#error "w4a16_gemv_t: CLAMP is the register path's loads; FOLD needs a slot past qe to have scale 0"
#endif
#if FOLD && (!ASMEM || PRESCALE || RING)
#error "w4a16_gemv_t: FOLD takes the staged activations (ASMEM 1), whole quads per group, no RING"
#endif
#if L2PF && (RING || TAILOR_SM < 80)
#error "w4a16_gemv_t: L2PF is the register path's weight loads, written for sm_80 and later"
#endif
#if RING && (RING < 2 || TRIM || PRESCALE || TAILOR_SM < 80)
#error "w4a16_gemv_t: RING takes 2 or more slots, cp.async (sm_80), whole quads per group and no TRIM"
#endif
#if CSPLIT && (GLU || SPLITK < 2 || SPLITK > 8)
#error "w4a16_gemv_t: CSPLIT takes SPLITK 2..8 (a portable cluster) and no GLU"
#endif
#ifndef MINB
#define MINB 0
#endif
#if MAGREG && (MT == 1 || TAILOR_SM < 90) && MINB < 1
#error "w4a16_gemv_t: MAGREG takes MINB 1 or more but at MT 2 on sm_90 (without it MAGIC spilled)"
#endif
// (MINB moves ptxas's own register target: at the default one MAGREG's MAGIC register spilled
// in some MT = 1 kernels and at MT = 2 on the T4; sm_90's MT = 2 ones need no bounds)
#if MINB > 0
#define W4T_BOUNDS __launch_bounds__(W4T_THREADS, MINB)
#else
#define W4T_BOUNDS __launch_bounds__(W4T_THREADS)
#endif
#if CSPLIT
#define W4T_CLUSTER_DIMS __cluster_dims__(1, SPLITK, 1)
#else
#define W4T_CLUSTER_DIMS
#endif
#if GLU && (RT != 2 || SPLITK != 1)
#error "w4a16_gemv_t: GLU takes RT = 2 (a gate tile, an up tile) and SPLITK = 1"
#endif

namespace w4t {
constexpr int BN = WR * RT * 16; // weight rows per block
constexpr int MC = MT * 8;       // activation rows the mma's n side holds
static_assert(GROUP % 32 == 0, "GROUP is a multiple of 32");
static_assert(PRESCALE || GROUP % 128 == 0, "unscaled weights need whole quads per group");

// The registers of UNROLL quads x RT row tiles x rows (g, g + 8) of one lane.
struct Batch {
    uint4 w[UNROLL][RT][2];
    T s[UNROLL][RT][2];
    u32 z[UNROLL][RT][2];
};

// 16 bytes of weights, read once: no L1 allocation; L2PF 1: a miss fetches the 256-byte L2
// segment around them (the row's next quads: more of the stream in flight at no register cost).
__device__ __forceinline__ uint4 load_w16(const uint4 *p)
{
#if L2PF
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
#else
    return tc_load_stream(p);
#endif
}

// Weight row n and chunk c of the 16 bytes lane (g, t) takes of quad q + u, row tile rt and
// half h (rows g, g + 8) of the warp's rows; false past the weight's rows (their n is not read).
__device__ __forceinline__ bool piece_of(int row0, int q, int u, int rt, int h, int N, int lane,
                                         int &n, int &c)
{
    const int g = lane >> 2, t = lane & 3;
#if GLU // row0: the warp's first output; tile rt = 1 its up rows, N further
    const int o = row0 + h * 8 + g;
    n = rt * N + o;
    c = 4 * (q + u) + t;
    return o < N;
#else
    n = row0 + rt * 16 + h * 8 + g;
    c = 4 * (q + u) + t;
    return n < N;
#endif
}

// Piece (u, rt, h) of b as nothing: a zero weight with scale 0 (and zero point 8).
__device__ __forceinline__ void clear_piece(Batch &b, int u, int rt, int h)
{
    b.w[u][rt][h] = make_uint4(0, 0, 0, 0);
    b.s[u][rt][h] = from_f32(0.f);
    b.z[u][rt][h] = 8u;
}

#if CLAMP
// The weight row of lane (g, t)'s half h of row tile rt, clamped into the weight: a row past N
// reads row N - 1 (GLU: gate or up row N - 1 of its part), whose output is never stored.
__device__ __forceinline__ int clamped_row(int row0, int rt, int h, int N, int lane)
{
    const int g = lane >> 2;
#if GLU // row0: the warp's first output; tile rt = 1 its up rows, N further
    return rt * N + min(row0 + h * 8 + g, N - 1);
#else
    return min(row0 + rt * 16 + h * 8 + g, N - 1);
#endif
}

// Loads quads q .. q + UNROLL - 1 of the warp's rows with no test a load: rows past N clamped
// (clamped_row), a quad past qe or a chunk past C read as the warp's last quad or the row's last
// chunk, whose activations load_a gives as zeros (0 times a finite value). A batch starting at
// or past qe (the loop's last prefetch) loads nothing: one warp-uniform branch.
__device__ __forceinline__ void load_batch(Batch &b, const u32 *__restrict__ qw,
                                           const T *__restrict__ scales,
                                           const u8 *__restrict__ zeros, int row0, int q, int qe,
                                           int N, int C, int ld, int lane)
{
    if (q >= qe) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int rt = 0; rt < RT; rt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    clear_piece(b, u, rt, h);
        return;
    }
    const int t = lane & 3;
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int c = min(4 * min(q + u, qe - 1) + t, C - 1);
        const size_t grow = (size_t)((c * 32) / GROUP) * ld; // the scales' row of chunk c
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int n = clamped_row(row0, rt, h, N, lane);
                b.w[u][rt][h] = load_w16(
                    reinterpret_cast<const uint4 *>(qw + (size_t)n * (size_t)(4 * C) + 4 * c));
                b.s[u][rt][h] = scales[grow + n];
#if HAS_ZP
                b.z[u][rt][h] = zeros[grow + n];
#else
                b.z[u][rt][h] = 8u;
#endif
            }
    }
#if !HAS_ZP
    (void)zeros;
#endif
}
#else
// Loads quads q .. q + UNROLL - 1 of the warp's rows; what lies past the rows, the warp's quads
// (qe) or the row's chunks is a zero weight with scale 0.
__device__ __forceinline__ void load_batch(Batch &b, const u32 *__restrict__ qw,
                                           const T *__restrict__ scales,
                                           const u8 *__restrict__ zeros, int row0, int q, int qe,
                                           int N, int C, int ld, int lane)
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int n, c;
                const bool live = piece_of(row0, q, u, rt, h, N, lane, n, c);
                clear_piece(b, u, rt, h);
                if (live && q + u < qe && c < C) {
                    b.w[u][rt][h] = load_w16(
                        reinterpret_cast<const uint4 *>(qw + (size_t)n * (size_t)(4 * C) + 4 * c));
                    const size_t gi = (size_t)((c * 32) / GROUP) * ld + n;
                    b.s[u][rt][h] = scales[gi];
#if HAS_ZP
                    b.z[u][rt][h] = zeros[gi];
#endif
                }
            }
#if !HAS_ZP
    (void)zeros;
#endif
}
#endif // CLAMP

#if RING
// A warp's ring: RING slots, each the weights of one batch [UNROLL][RT][2 rows][32 lanes] (16
// bytes a lane: the lane's own, read back by it alone), then RING slots of scales
// [UNROLL][RT][16 rows] and (HAS_ZP) of zero points; a slot's scales and zero points are two and
// one 16-byte pieces a (quad, row tile), whole and aligned: a tile's 16 rows start at a multiple
// of 16 (GLU: its up rows at N + a multiple of 16, N % 8 == 0 by the space) of a row stride
// that is a multiple of 16, and GROUP % 128 == 0 puts a quad in one group.
constexpr int RING_W = UNROLL * RT * 2 * 32;                     // uint4 per slot
constexpr int RING_S = UNROLL * RT * 16;                         // scales (and zeros) per slot
constexpr int RING_BYTES = RING * (RING_W * 16 + RING_S * 2 + (HAS_ZP ? RING_S : 0));

struct Ring {
    uint4 *w; // [RING][RING_W]
    T *s;     // [RING][RING_S]
    u8 *z;    // [RING][RING_S] (HAS_ZP)
};

__device__ __forceinline__ Ring ring_of(unsigned char *base)
{
    Ring r;
    r.w = reinterpret_cast<uint4 *>(base);
    r.s = reinterpret_cast<T *>(base + RING * RING_W * 16);
    r.z = base + RING * (RING_W * 16 + RING_S * 2);
    return r;
}

// Requests quads q .. q + UNROLL - 1 of the warp's rows into slot `slot` (not a commit): what
// lies past the rows, the warp's quads (qe) or the row's chunks is written as zeros.
__device__ __forceinline__ void ring_issue(const Ring &r, int slot, const u32 *__restrict__ qw,
                                           const T *__restrict__ scales,
                                           const u8 *__restrict__ zeros, int row0, int q, int qe,
                                           int N, int C, int ld, int lane)
{
    if (q >= qe)
        return;
    uint4 *w = r.w + slot * RING_W;
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int n, c;
                const bool live = piece_of(row0, q, u, rt, h, N, lane, n, c);
                const bool ok = live && q + u < qe && c < C;
                tc_copy16(w + ((u * RT + rt) * 2 + h) * 32 + lane,
                          ok ? qw + (size_t)n * (size_t)(4 * C) + 4 * c : qw, ok);
            }
    // pieces: 2 of scales a (quad, tile), then (HAS_ZP) 1 of zero points
    constexpr int SP = UNROLL * RT * 2, ZP = HAS_ZP ? UNROLL * RT : 0;
    static_assert(SP + ZP <= 32, "a lane a piece");
    if (lane < SP + ZP) {
        const bool sc = lane < SP;
        const int i = sc ? lane : lane - SP, ut = sc ? i >> 1 : i, u = ut / RT, rt = ut % RT;
        const int half = sc ? i & 1 : 0;
#if GLU
        const int n0 = rt * N + row0 + 8 * half;
        const bool live = row0 < N;
#else
        const int n0 = row0 + rt * 16 + 8 * half;
        const bool live = row0 + rt * 16 < N;
#endif
        const bool ok = live && q + u < qe;
        const size_t gi = (size_t)((q + u) * 128 / GROUP) * ld + n0;
        if (sc)
            tc_copy16(r.s + slot * RING_S + ut * 16 + 8 * half, ok ? scales + gi : scales, ok);
#if HAS_ZP
        else
            tc_copy16(r.z + slot * RING_S + ut * 16, ok ? zeros + gi : zeros, ok);
#endif
    }
#if !HAS_ZP
    (void)zeros;
#endif
}

// Slot `slot` of the ring into b's registers (the lane's weights; rows g and g + 8's scales
// and zero points).
__device__ __forceinline__ void ring_fetch(Batch &b, const Ring &r, int slot, int lane)
{
    const int g = lane >> 2;
    const uint4 *w = r.w + slot * RING_W;
    const T *s = r.s + slot * RING_S;
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int rt = 0; rt < RT; rt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                b.w[u][rt][h] = w[((u * RT + rt) * 2 + h) * 32 + lane];
                b.s[u][rt][h] = s[(u * RT + rt) * 16 + h * 8 + g];
#if HAS_ZP
                b.z[u][rt][h] = r.z[slot * RING_S + (u * RT + rt) * 16 + h * 8 + g];
#else
                b.z[u][rt][h] = 8u;
#endif
            }
}
#endif // RING

#if TRIM
// Where the batch starting at quad q ends: UNROLL quads while more than UNROLL remain before qe,
// then one quad a batch (the space keeps TRIM to warps whose quads are not whole batches, so
// only a partial last batch is shortened: 2 + 2 + 1 at UNROLL = 2; 3 + 1 + 1 for two quads past
// whole batches of 3).
__device__ __forceinline__ int batch_end(int q, int qe)
{
    return qe - q > UNROLL ? q + UNROLL : min(q + 1, qe);
}
#endif

__device__ __forceinline__ u32 word_of(const uint4 &w, int i)
{
    return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w;
}

// 16 bytes of activations (L1-cached: every warp reads them). Volatile, like the weight loads
// and the mma, so that the compiler keeps them where they are written: one quad ahead, not
// every quad of a batch hoisted into registers at once.
#if ASMEM
__device__ __forceinline__ uint4 load_a16(u32 s) // s: a shared-memory address
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(s));
    return v;
}
#else
__device__ __forceinline__ uint4 load_a16(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
#endif

// Where load_a reads the activations: `base` row r at column c is base[r * stride + c - col0]
// (global memory: a, K, 0; ASMEM: the block's slice in shared memory).
struct ASrc {
    const T *base;
    int stride, col0;
    const float *sq; // FOLD: the staged quads' sums, [quad - col0 / 128][MC]; else null
};

// ASMEM: where 16-byte piece u of a row lies in its row of sA: u with bit 0 flipped by bit 3.
// A lane (g, t) reads pieces 4t .. 4t + 3 of its quad's 256 bytes (16 pieces) of row 8j + g, and
// a 128-bit shared read is served eight lanes a phase, g in {2p, 2p + 1} and t = 0..3. With the
// pieces in order and rows 16 bytes longer (until session 32) t and t + 2 fell 128 bytes apart,
// in one bank group: two wavefronts a phase, at m = 1 too. With the flip they fall in
// neighbouring groups, and rows 32 bytes longer than their pieces (two groups) put rows 2p and
// 2p + 1 in the other four: the eight lanes fill the eight groups. The flip stays inside a
// 64-byte chunk, so a lane's four pieces stay its own, only in another order. (H100, session
// 32: 2 % faster at m = 1, 8 % at m = 16, configuration for configuration.)
__device__ __forceinline__ int swz(int u) { return (u >> 3) & 1; }
enum { ROW_PAD = 16 }; // elements past each row's pieces (32 bytes: two bank groups); an enum: a
                       // namespace-scope constexpr would be emitted as a global

#if FOLD
#define W4T_MAGIC_F (W4_MAGIC == 0x4300u ? 128.f : 1024.f) // MAGIC as a float (bf16, fp16)

// The two values of a T pair, summed in fp32.
__device__ __forceinline__ float pair_sum(u32 x)
{
    const T2 v = w4_as_t2(x);
    return to_f32(v.x) + to_f32(v.y);
}
#endif

// Pair p (0..3) of a kernel-layout word as two T values MAGIC + u (exact): one shift, then the
// mask and MAGIC in one LOP3 (MAGREG) or two.
__device__ __forceinline__ u32 magic_pair(u32 word, int p)
{
#if MAGREG
    u32 v;
    asm("{\n\t.reg .b32 m;\n\tmov.b32 m, %2;\n\tlop3.b32 %0, %1, 0x000f000f, m, 0xea;\n\t}"
        : "=r"(v) : "r"(word >> (4 * p)), "n"(W4_MAGIC * 0x10001u));
    return v;
#else
    return ((word >> (4 * p)) & 0x000f000fu) | (W4_MAGIC * 0x10001u);
#endif
}

// Pair p as two T values u - z (exact small integers): magic_pair less bias = MAGIC + z
// (w4_pair_unscaled's arithmetic, with magic_pair's LOP3 under MAGREG).
__device__ __forceinline__ u32 pair_unscaled(u32 word, int p, T2 bias)
{
    return w4_as_u32(__hsub2(w4_as_t2(magic_pair(word, p)), bias));
}

// ASMEM: copies the valid columns [128 q0, min(K, 128 q1)) of the M activation rows into sA
// (row stride `stride`: the pieces and ROW_PAD; pieces swizzled) and makes them visible to the
// block; FOLD: then each staged quad's column sum of each row into sQ[quad - q0][row] (rows M ..
// 8·MT - 1: zero), a warp a sum of rows below M (four values a lane, then the lanes' tree).
// Every thread calls it.
__device__ __forceinline__ void stage_a(T *sA, float *sQ, const T *__restrict__ a, int q0, int q1,
                                       int M, int K, int stride)
{
    const int c0 = 128 * q0, pieces = (min(K, 128 * q1) - c0) / 8; // 16-byte pieces per row
    for (int i = threadIdx.x; i < M * pieces; i += W4T_THREADS) {
        const int r = i / pieces, u = i % pieces;
        tc_copy16(sA + r * stride + 8 * (u ^ swz(u)), a + (size_t)r * K + c0 + 8 * u, true);
    }
    tc_copy_commit();
    tc_copy_wait<0>();
    __syncthreads();
#if FOLD
    const int lane = threadIdx.x & 31, nq = (pieces + 15) / 16;
    for (int i = threadIdx.x; i < nq * (MC - M); i += W4T_THREADS) // the rows past M: zeros
        sQ[i / (MC - M) * MC + M + i % (MC - M)] = 0.f;
    for (int i = threadIdx.x >> 5; i < nq * M; i += W4T_THREADS / 32) {
        const int qi = i / M, r = i % M, u = 16 * qi + (lane >> 1); // the lane's piece
        float v = 0.f;
        if (u < pieces) {
            const uint2 x = *reinterpret_cast<const uint2 *>(sA + r * stride + 8 * (u ^ swz(u)) +
                                                             4 * (lane & 1));
            v = pair_sum(x.x) + pair_sum(x.y);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0)
            sQ[qi * MC + r] = v;
    }
    __syncthreads();
#else
    (void)sQ;
#endif
}

// The 64 bytes of activation row min(8j + g, M - 1) that quad q's chunk 4q + t covers, for each
// n8 tile j; zeros past the warp's quads or the row's chunks.
__device__ __forceinline__ void load_a(uint4 (&av)[MT][4], const ASrc &src, int q, int qe, int M,
                                       int C, int lane)
{
    const int g = lane >> 2, t = lane & 3, c = 4 * q + t;
#pragma unroll
    for (int j = 0; j < MT; j++) {
        const int r = min(8 * j + g, M - 1);
        const uint4 *p = reinterpret_cast<const uint4 *>(src.base + (size_t)r * src.stride +
                                                         (32 * c - src.col0));
#if ASMEM // piece i of the chunk lies at i ^ x, x = swz(4 (c - 4 q0)) = t / 2: even pieces
          // from se, odd ones from so, each at fixed offsets
        const u32 s = tc_smem_addr(p), se = s + 16 * (t >> 1), so = s + 16 - 16 * (t >> 1);
#endif
#pragma unroll
        for (int i = 0; i < 4; i++)
            av[j][i] = make_uint4(0, 0, 0, 0);
        if (q < qe && c < C) {
#pragma unroll
            for (int i = 0; i < 4; i++)
#if ASMEM
                av[j][i] = load_a16((i & 1 ? so : se) + 16 * (i & 2));
#else
                av[j][i] = load_a16(p + i);
#endif
        }
    }
}

// tot += this quad (u of the batch) for every row tile; av holds its activations, sq (FOLD)
// its column sums by activation row.
__device__ __forceinline__ void compute_quad(const Batch &b, int u, const uint4 (&av)[MT][4],
                                             const float *sq, float (&tot)[RT][MT][4])
{
#if FOLD
    // the sums of this lane's accumulator columns 8j + 2t and + 1
    float2 sa[MT];
#pragma unroll
    for (int j = 0; j < MT; j++)
        sa[j] = *reinterpret_cast<const float2 *>(sq + 8 * j + 2 * (threadIdx.x & 3));
#else
    (void)sq;
#endif
    // B fragments: step (t', s) = words t' + 8s (b0) and t' + 8s + 4 (b1) of the 64 bytes
    u32 bf[MT][4][2][2];
#pragma unroll
    for (int j = 0; j < MT; j++)
#pragma unroll
        for (int tp = 0; tp < 4; tp++)
#pragma unroll
            for (int s = 0; s < 2; s++) {
                bf[j][tp][s][0] = word_of(av[j][2 * s], tp);
                bf[j][tp][s][1] = word_of(av[j][2 * s + 1], tp);
            }
#pragma unroll
    for (int rt = 0; rt < RT; rt++) {
#if !FOLD
        const T2 bias[2] = {w4_bias(b.z[u][rt][0]), w4_bias(b.z[u][rt][1])};
#endif
#if PRESCALE
        const T2 sc[2] = {w4_splat(b.s[u][rt][0]), w4_splat(b.s[u][rt][1])};
        float(&acc)[MT][4] = tot[rt];
#else
        float acc[MT][4];
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[j][e] = 0.f;
#endif
#pragma unroll
        for (int tp = 0; tp < 4; tp++) {
            const u32 w0 = word_of(b.w[u][rt][0], tp), w1 = word_of(b.w[u][rt][1], tp);
#pragma unroll
            for (int s = 0; s < 2; s++) {
                u32 af[4];
#if PRESCALE
                af[0] = w4_as_u32(w4_pair(w0, 2 * s, bias[0], sc[0]));
                af[1] = w4_as_u32(w4_pair(w1, 2 * s, bias[1], sc[1]));
                af[2] = w4_as_u32(w4_pair(w0, 2 * s + 1, bias[0], sc[0]));
                af[3] = w4_as_u32(w4_pair(w1, 2 * s + 1, bias[1], sc[1]));
#elif FOLD
                af[0] = magic_pair(w0, 2 * s);
                af[1] = magic_pair(w1, 2 * s);
                af[2] = magic_pair(w0, 2 * s + 1);
                af[3] = magic_pair(w1, 2 * s + 1);
#else
                af[0] = pair_unscaled(w0, 2 * s, bias[0]);
                af[1] = pair_unscaled(w1, 2 * s, bias[1]);
                af[2] = pair_unscaled(w0, 2 * s + 1, bias[0]);
                af[3] = pair_unscaled(w1, 2 * s + 1, bias[1]);
#endif
#pragma unroll
                for (int j = 0; j < MT; j++)
                    tc_mma_k16(acc[j], af, bf[j][tp][s][0], bf[j][tp][s][1]);
            }
        }
#if !PRESCALE
        // acc (row g: e = 0, 1; row g + 8: e = 2, 3) times the row's scale
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float sc = to_f32(b.s[u][rt][h]);
#if FOLD // the bias MAGIC + z of row h off the quad's sum
            const float bz = W4T_MAGIC_F + (float)b.z[u][rt][h];
#endif
#pragma unroll
            for (int j = 0; j < MT; j++)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; e++)
#if FOLD
                    tot[rt][j][e] = fmaf(sc, fmaf(-bz, e & 1 ? sa[j].y : sa[j].x, acc[j][e]),
                                         tot[rt][j][e]);
#else
                    tot[rt][j][e] = fmaf(sc, acc[j][e], tot[rt][j][e]);
#endif
        }
#endif
    }
}

// Quad u of batch b into tot, with av its activations; av then moves on to quad qn (requested
// before the math, one quad ahead).
__device__ __forceinline__ void step_quad(const Batch &b, int u, const ASrc &src, int qn, int qe,
                                         int M, int C, int lane, uint4 (&av)[MT][4],
                                         float (&tot)[RT][MT][4])
{
    uint4 an[MT][4];
    load_a(an, src, qn, qe, M, C, lane);
    // (FOLD: an empty slot past qe, TRIM 0, reads the last quad's sums: its scale is 0)
    compute_quad(b, u, av, src.sq + (FOLD ? (min(qn, qe) - 1 - src.col0 / 128) * MC : 0), tot);
#pragma unroll
    for (int j = 0; j < MT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            av[j][i] = an[j][i];
}
} // namespace w4t

extern "C" __global__ void W4T_BOUNDS W4T_CLUSTER_DIMS
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const u32 *__restrict__ qweight,
              const T *__restrict__ scales,
#if HAS_ZP
              const u8 *__restrict__ zeros,
#endif
#if SPLITK > 1 && !CSPLIT
              float *__restrict__ partial, int *__restrict__ counters,
#endif
              int M, int N, int K, int ld)
{
    using namespace w4t;
#if !HAS_ZP
    const u8 *zeros = nullptr;
#endif
    // [WK][MC][BN] fp32 sums of the k warps, then (split-k) the last-block flag
    __shared__ float red[WK * MC * BN];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wr = warp % WR, wk = warp / WR;
    const int C = K / 32, QT = (C + 3) / 4;                 // chunks, quads per row
    const int qps = (QT + SPLITK - 1) / SPLITK;             // quads per block slice
    const int qpw = (qps + WK - 1) / WK;                    // quads per warp
    const int qb = min(QT, blockIdx.y * qps + wk * qpw);    // this warp's quads [qb, qe)
    const int qe = min(min(QT, (int)(blockIdx.y + 1) * qps), qb + qpw);
#if GLU
    const int row0 = blockIdx.x * W4T_BO + wr * 16; // the warp's first output (gate row)
#else
    const int row0 = blockIdx.x * BN + wr * RT * 16;
#endif

#if ASMEM || RING
    extern __shared__ __align__(16) unsigned char w4t_smem[];
#endif
#if RING
    // the warp's ring lies past the activations (ASMEM: M rows of qps quads, a multiple of 32
    // bytes); the first RING - 1 batches are requested before the wait, one commit group each
    const Ring ring = ring_of(w4t_smem + (ASMEM ? M * (128 * qps + ROW_PAD) * (int)sizeof(T) : 0) +
                              warp * RING_BYTES);
#pragma unroll
    for (int i = 0; i < RING - 1; i++) {
        ring_issue(ring, i, qweight, scales, zeros, row0, qb + i * UNROLL, qe, N, C, ld, lane);
        tc_copy_commit();
    }
#elif TRIM
    Batch cur;
    int bq = batch_end(qb, qe); // the end of the batch in cur
    load_batch(cur, qweight, scales, zeros, row0, qb, bq, N, C, ld, lane);
#else
    Batch cur;
    load_batch(cur, qweight, scales, zeros, row0, qb, qe, N, C, ld, lane); // weights: before
#endif
    tailor_grid_begin();                                                   // the wait

    float tot[RT][MT][4];
    tc_zero(tot);

#if ASMEM
    const int q0 = min(QT, (int)blockIdx.y * qps), stride = 128 * qps + ROW_PAD;
    T *sA = reinterpret_cast<T *>(w4t_smem);
    float *sQ = reinterpret_cast<float *>(sA + M * stride); // FOLD: after sA (32-byte rows)
    stage_a(sA, sQ, a, q0, min(QT, q0 + qps), M, K, stride);
    const ASrc src = {sA, stride, 128 * q0, sQ};
#else
    const ASrc src = {a, K, 0, nullptr};
#endif
    // activations one quad ahead of the math, across batches
    uint4 av[MT][4];
    load_a(av, src, qb, qe, M, C, lane);
#if RING
    // Batch i lies in slot i % RING; the slot refilled at step i is the one step i - 1
    // read (its registers were consumed by that step's math, and __syncwarp orders every lane's
    // reads of its scales before the refill). Steps past qe commit empty groups, so that a
    // wait for RING - 2 pending groups is always the wait for batch i. (ASMEM's staging
    // waited for every group once, before the loop: harmless.)
    for (int q = qb, slot = 0; q < qe; q += UNROLL) {
        tc_copy_wait<RING - 2>();
        __syncwarp();
        Batch cur;
        ring_fetch(cur, ring, slot, lane);
        const int refill = slot == 0 ? RING - 1 : slot - 1; // (slot + RING - 1) % RING
        ring_issue(ring, refill, qweight, scales, zeros, row0, q + (RING - 1) * UNROLL, qe, N, C,
                   ld, lane);
        tc_copy_commit();
        slot = slot == RING - 1 ? 0 : slot + 1;
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            step_quad(cur, u, src, q + u + 1, qe, M, C, lane, av, tot);
    }
#elif TRIM
    for (int q = qb; q < qe;) {
        const int nq = bq < qe ? batch_end(bq, qe) : bq; // the end of the next batch
        Batch nxt;
        load_batch(nxt, qweight, scales, zeros, row0, bq, nq, N, C, ld, lane);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (q + u >= bq) // a shortened batch: its other slots hold no quad
                break;
            step_quad(cur, u, src, q + u + 1, qe, M, C, lane, av, tot);
        }
        cur = nxt;
        q = bq;
        bq = nq;
    }
#else
    for (int q = qb; q < qe; q += UNROLL) {
        Batch nxt; // past qe: zeros, no load
        load_batch(nxt, qweight, scales, zeros, row0, q + UNROLL, qe, N, C, ld, lane);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            step_quad(cur, u, src, q + u + 1, qe, M, C, lane, av, tot);
        }
        cur = nxt;
    }
#endif

    // The k warps' sums through shared memory: column m = 8j + 2t + (e & 1), block row
    // wr·RT·16 + 16rt + g + 8(e >> 1).
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int m = 8 * j + 2 * t + (e & 1);
                const int r = wr * RT * 16 + rt * 16 + g + 8 * (e >> 1);
                if (m < M)
                    red[(wk * MC + m) * BN + r] = tot[rt][j][e];
            }
    __syncthreads();
#if GLU
    // output o of the block: warp o / 16's gate row o % 16 (block row 32 (o / 16) + o % 16) and
    // its up row, 16 further
    const int o0 = blockIdx.x * W4T_BO;
    for (int i = threadIdx.x; i < M * W4T_BO; i += W4T_THREADS) {
        const int m = i / W4T_BO, o = i % W4T_BO, r = 32 * (o / 16) + o % 16;
        if (o0 + o >= N)
            continue;
        float vg = 0.f, vu = 0.f;
#pragma unroll
        for (int w = 0; w < WK; w++) {
            vg += red[(w * MC + m) * BN + r];
            vu += red[(w * MC + m) * BN + r + 16];
        }
        out[(size_t)m * N + o0 + o] = gemv_finish(vg, vu);
    }
#elif CSPLIT
    // The block's sums over its k warps, in place in red's first M x BN floats (each thread its
    // own entries; the k warps' slots lie past them), published to the cluster; then this
    // block's share of the tile's outputs, summed over the SPLITK blocks in rank (= split) order.
    const int n0 = blockIdx.x * BN;
    for (int i = threadIdx.x; i < M * BN; i += W4T_THREADS) {
        const int m = i / BN, r = i % BN;
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < WK; w++)
            v += red[(w * MC + m) * BN + r];
        red[i] = v;
    }
    tailor_cluster_arrive();
    tailor_cluster_wait();
    const int per = (M * BN + SPLITK - 1) / SPLITK, i0 = blockIdx.y * per;
    for (int i = i0 + threadIdx.x; i < min(M * BN, i0 + per); i += W4T_THREADS) {
        const int m = i / BN, r = i % BN;
        if (n0 + r >= N)
            continue;
        const unsigned addr = tc_smem_addr(red + i);
        float v = 0.f;
#pragma unroll
        for (int c = 0; c < SPLITK; c++)
            v += tailor_ld_cluster_f32(tailor_cluster_map(addr, c));
        out[(size_t)m * N + n0 + r] = from_f32(v);
    }
    tailor_cluster_arrive(); // no block leaves while another still reads its sums
    tailor_cluster_wait();
#else
    const int n0 = blockIdx.x * BN;
#if SPLITK > 1
    float *mine = partial + (size_t)blockIdx.y * M * N;
#endif
    for (int i = threadIdx.x; i < M * BN; i += W4T_THREADS) {
        const int m = i / BN, r = i % BN;
        if (n0 + r >= N)
            continue;
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < WK; w++)
            v += red[(w * MC + m) * BN + r];
#if SPLITK > 1
        mine[(size_t)m * N + n0 + r] = v;
#else
        out[(size_t)m * N + n0 + r] = from_f32(v);
#endif
    }
#if SPLITK > 1
    w4_splitk_finish(out, partial, counters, SPLITK, M, N, n0, BN,
                     reinterpret_cast<int *>(red));
#endif
#endif // GLU
}
