// w4a16_mlp.cu — a layer's whole int4 MLP for one decode row in one launch (op w4a16_mlp):
// out[HID] = down · (gelu_tanh(gate · a) * (up · a)), gate|up a stacked int4 matrix of 2·INTER
// rows of HID columns, down an int4 matrix of HID rows of INTER columns (runtime/w4a16.h's
// layout, scales [groups][ld]). It replaces w4a16_glu then w4a16_matmul: the launch between them
// costs the down projection its ramp (its first weights requested only when the gate|up's last
// block has finished), and the gate|up its tail.
//
// One block per SM at most (the grid is the space's, never more blocks than SMs), because the
// two phases meet at a grid-wide barrier that every block waits at:
//   phase 1  warps take ROWS1 gate rows (and the matching up rows) at a time, round robin over
//            the whole grid; a lane reads one 32-column chunk of each row per 16-byte load as
//            w4a16_gemv.cu does, and lane 0 stores h = gelu_tanh(g) * u with transformers'
//            roundings (gemv_finish) to the op's buffer h (hmid here);
//   barrier  arrive/leave counters in the workspace cnt (the last block to leave puts them back
//            to 0, so the workspace stays ready for the next launch);
//   phase 2  the block copies hmid (INTER values, written by every block: through L2 only) into
//            shared memory; warps take R2 down rows at a time, lanes reading the rows' chunks,
//            and store each output once, rounded to the dtype (no atomics: the same sum on
//            every run).
// The first PF2 chunks of each lane's first down rows are requested before the grid wait (no
// kernel of a forward writes weights: tailor_grid_begin's exception), so that they are in
// registers by the time phase 2 starts.
// Measured slower than the two GEMVs it replaces (H100, session 35, −8 % of the E2B decode at
// best: phase 1 runs at the CUDA-core GEMV's rate, which the tensor-core w4a16_glu_t beats), so
// the runtime uses it only when asked
// (--fused-mlp); docs/perf/w4a16.md has the phases' times and what a faster one needs.
// Phase 2 comes in two forms (P2): 0, warps take R2 down rows at a time round robin, each over
// the whole of h; 1, block b takes down rows [b RB, (b + 1) RB) and its warps split their chunks,
// so that every warp of the grid has down bytes to read (0 leaves a quarter of them idle at
// E2B's 1536 rows).
// Defines: THREADS, ROWS1, DEPTH (phase 1's items of loads in flight), P2, R2 (P2 = 0), RB
// (P2 = 1), PF2, GROUP, HAS_ZP, HID (hidden size), INTER (intermediate size).
#define GLU 1 // gemv_finish gates (tailor_common.cuh)
#include "tailor_probe.cuh"
#include "w4a16_common.cuh"

#define MLP_WARPS (THREADS / 32)
#define MLP_CH1 (HID / 32)   // 32-column chunks of a gate|up row
#define MLP_CH2 (INTER / 32) // 32-column chunks of a down row
#define MLP_IT1 ((MLP_CH1 + 31) / 32) // rounds of 32 chunks over a gate|up row
#define MLP_IT2 ((MLP_CH2 + 31) / 32)
static_assert(HID % 32 == 0 && INTER % 32 == 0, "the layout needs whole 32-column chunks");
static_assert(INTER % ROWS1 == 0 && HID % R2 == 0, "row groups must tile the matrices");
static_assert(PF2 <= MLP_IT2, "PF2 counts a lane's chunks of one down row");
#ifndef RB
#define RB 1
#endif

namespace w4m {

// 16 weight bytes read once, as tc_load_stream but not volatile: in phase 2's unrolled loop the
// compiler may issue the loads of later chunks ahead of earlier chunks' math.
__device__ __forceinline__ uint4 ld_weights(const void *p)
{
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// Chunk c of NR rows: rows row(r) of a matrix with `words` u32 a row and scale stride ld.
// STREAM: tc_load_stream (volatile: issued where written), else ld_weights.
template <int NR, bool STREAM = true>
__device__ __forceinline__ void load_rows(uint4 (&w)[NR], float (&s)[NR], float (&zb)[NR],
                                          const u32 *qw, const T *sc, const u8 *zs, int ld,
                                          int words, const int (&row)[NR], int c)
{
    const int g = (c * 32) / GROUP;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        const uint4 *src = reinterpret_cast<const uint4 *>(qw + (size_t)row[r] * words) + c;
        w[r] = STREAM ? tc_load_stream(src) : ld_weights(src);
        s[r] = to_f32(sc[(size_t)g * ld + row[r]]);
        zb[r] = 136.f; // 128 + z, z = 8: symmetric
#if HAS_ZP
        zb[r] = 128.f + (float)zs[(size_t)g * ld + row[r]];
#endif
    }
    (void)zs;
}

// Phase 1's item `it` of this warp (task gw + (it / MLP_IT1) nw, round it % MLP_IT1: chunk
// lane + 32 round of the task's ROWS1 gate rows and their up rows, INTER further) into w, s, zb;
// nothing past the warp's n_items or the row's chunks.
template <int NR>
__device__ __forceinline__ void issue_item(uint4 (&w)[NR], float (&s)[NR], float (&zb)[NR],
                                           const u32 *qw, const T *sc, const u8 *zs, int ld,
                                           int it, int n_items, int gw, int nw, int lane)
{
    const int task = gw + (it / MLP_IT1) * nw, c = lane + 32 * (it % MLP_IT1);
    if (it >= n_items || c >= MLP_CH1)
        return;
    int row[NR];
#pragma unroll
    for (int r = 0; r < NR; r++)
        row[r] = (r < NR / 2 ? 0 : INTER) + task * (NR / 2) + r % (NR / 2);
    load_rows<NR>(w, s, zb, qw, sc, zs, ld, HID / 8, row, c);
}

// acc[r] += s * sum over the chunk's 32 columns of x * (q - zp) (x: the chunk's activations as
// 4 x 8 values in column order; the layout's word t, nibble nib is column 8 (nib % 4) + 2t +
// nib / 4), as w4a16_gemv.cu sums.
template <int NR>
__device__ __forceinline__ void dot_chunk(float (&acc)[NR], const uint4 (&w)[NR],
                                          const float (&s)[NR], const float (&zb)[NR],
                                          const TVec<8> (&x)[4])
{
    float p[NR], xs = 0.f;
#pragma unroll
    for (int r = 0; r < NR; r++)
        p[r] = 0.f;
#pragma unroll
    for (int t = 0; t < 4; t++) {
#pragma unroll
        for (int nib = 0; nib < 8; nib++) {
            const float xf = to_f32(x[nib % 4].v[2 * t + nib / 4]);
            xs += xf;
#pragma unroll
            for (int r = 0; r < NR; r++) {
                const u32 word = t == 0 ? w[r].x : t == 1 ? w[r].y : t == 2 ? w[r].z : w[r].w;
                p[r] = fmaf(xf, w4_float(word, nib), p[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++)
        acc[r] = fmaf(s[r], p[r] - zb[r] * xs, acc[r]);
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Every block of the grid has arrived: what each wrote before is visible to all (thread 0's
// release and acquiring poll, ordered for the other threads by the barriers around them). The
// last block past the wait puts both counters back to 0.
__device__ __forceinline__ void grid_barrier(unsigned *cnt)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;\n"
                     "red.relaxed.gpu.global.add.u32 [%0], 1;\n" ::"l"(cnt)
                     : "memory");
        while (ld_acquire(cnt) < gridDim.x)
            ;
        if (atomicAdd(cnt + 1, 1u) == gridDim.x - 1) {
            cnt[0] = 0u;
            cnt[1] = 0u;
        }
    }
    __syncthreads();
}

// hmid (INTER values, written by other blocks of this launch) into shared memory through L2.
__device__ __forceinline__ void stage_h(T *hs, const T *hmid)
{
    static_assert(INTER * sizeof(T) % 16 == 0, "h is staged in 16-byte pieces");
    for (int i = threadIdx.x; i < INTER * (int)sizeof(T) / 16; i += THREADS) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(tc_smem_addr(
                         reinterpret_cast<uint4 *>(hs) + i)),
                     "l"(reinterpret_cast<const uint4 *>(hmid) + i)
                     : "memory");
#else
        uint4 v;
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(reinterpret_cast<const uint4 *>(hmid) + i)
                     : "memory");
        reinterpret_cast<uint4 *>(hs)[i] = v;
#endif
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
    __syncthreads();
}

} // namespace w4m

extern "C" __global__ void __launch_bounds__(THREADS, 1)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const u32 *__restrict__ qweight,
              const T *__restrict__ scales,
#if HAS_ZP
              const u8 *__restrict__ zeros,
#endif
              const u32 *__restrict__ dqweight, const T *__restrict__ dscales,
#if HAS_ZP
              const u8 *__restrict__ dzeros,
#endif
              T *__restrict__ hmid, unsigned *__restrict__ cnt, int gu_ld, int d_ld)
{
#if !HAS_ZP
    const u8 *zeros = nullptr, *dzeros = nullptr;
#endif
    TAILOR_PROBE_INIT; // timeline marks (tailor_probe.cuh): 1 past the grid wait, 2 phase 1
                       // done, 3 past the barrier, 4 h staged; the exit ends phase 2
    extern __shared__ __align__(16) unsigned char mlp_smem[];
    T *hs = reinterpret_cast<T *>(mlp_smem);
    const int lane = threadIdx.x & 31;
    const int gw = blockIdx.x * MLP_WARPS + (threadIdx.x >> 5), nw = gridDim.x * MLP_WARPS;
    constexpr int NR1 = 2 * ROWS1; // the gate rows, then the matching up rows

    // Before the grid wait, weights only: phase 1's first DEPTH items, and the first PF2 chunks
    // of this lane in its first down rows.
    const int n_items = (gw < INTER / ROWS1 ? (INTER / ROWS1 - 1 - gw) / nw + 1 : 0) * MLP_IT1;
    uint4 w1[DEPTH][NR1];
    float s1[DEPTH][NR1], z1[DEPTH][NR1];
#pragma unroll
    for (int d = 0; d < DEPTH; d++)
        w4m::issue_item<NR1>(w1[d], s1[d], z1[d], qweight, scales, zeros, gu_ld, d, n_items, gw,
                             nw, lane);

#if P2 == 0
    int row2[R2];
#pragma unroll
    for (int r = 0; r < R2; r++)
        row2[r] = gw * R2 + r;
    uint4 wp[PF2 > 0 ? PF2 : 1][R2];
    float sp[PF2 > 0 ? PF2 : 1][R2], zp[PF2 > 0 ? PF2 : 1][R2];
#pragma unroll
    for (int j = 0; j < PF2; j++)
        if (gw < HID / R2 && lane + 32 * j < MLP_CH2)
            w4m::load_rows<R2>(wp[j], sp[j], zp[j], dqweight, dscales, dzeros, d_ld, INTER / 8,
                               row2, lane + 32 * j);
#else
    // P2 = 1: this block's RB down rows (clamped to the last row: a block past HID's rows
    // computes copies and stores nothing); this warp's first round of their chunks
    const int r0 = blockIdx.x * RB, nrows = min(RB, HID - r0), warp = threadIdx.x >> 5;
    int rowb[RB];
#pragma unroll
    for (int r = 0; r < RB; r++)
        rowb[r] = min(r0 + r, HID - 1);
    uint4 wp[RB];
    float sp[RB], zp[RB];
    if (PF2 > 0 && nrows > 0 && lane + 32 * warp < MLP_CH2)
        w4m::load_rows<RB>(wp, sp, zp, dqweight, dscales, dzeros, d_ld, INTER / 8, rowb,
                           lane + 32 * warp);
#endif

    tailor_grid_begin();
    TAILOR_PROBE_MARK(1);

    // Phase 1: h for ROWS1 gate rows a task. The warp walks its items (task, round) in one
    // flat loop, round r covering chunks 32 r + lane, with DEPTH items of loads in flight (a
    // ring of register buffers, unrolled so that every index is a constant): the next task's
    // first loads go out behind this one's math. A task's last round ends with its warp sums.
    {
        float acc[NR1];
#pragma unroll
        for (int r = 0; r < NR1; r++)
            acc[r] = 0.f;
        for (int it0 = 0; it0 < n_items; it0 += DEPTH) {
#pragma unroll
            for (int d = 0; d < DEPTH; d++) {
                const int it = it0 + d;
                if (it >= n_items) // the same for the whole warp
                    break;
                const int task = gw + (it / MLP_IT1) * nw, round = it % MLP_IT1;
                const int c = lane + 32 * round;
                if (c < MLP_CH1) {
                    TVec<8> x[4];
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        x[j] = reinterpret_cast<const TVec<8> *>(a)[4 * c + j];
                    w4m::dot_chunk<NR1>(acc, w1[d], s1[d], z1[d], x);
                }
                w4m::issue_item<NR1>(w1[d], s1[d], z1[d], qweight, scales, zeros, gu_ld,
                                     it + DEPTH, n_items, gw, nw, lane);
                if (round == MLP_IT1 - 1) {
#pragma unroll
                    for (int r = 0; r < NR1; r++)
                        acc[r] = warp_sum(acc[r]);
                    if (lane < ROWS1) {
                        float g = acc[0], u = acc[ROWS1];
#pragma unroll
                        for (int r = 1; r < ROWS1; r++)
                            if (lane == r) {
                                g = acc[r];
                                u = acc[ROWS1 + r];
                            }
                        hmid[task * ROWS1 + lane] = gemv_finish(g, u);
                    }
#pragma unroll
                    for (int r = 0; r < NR1; r++)
                        acc[r] = 0.f;
                }
            }
        }
    }

    TAILOR_PROBE_MARK(2);
    w4m::grid_barrier(cnt);
    TAILOR_PROBE_MARK(3);
    w4m::stage_h(hs, hmid);
    TAILOR_PROBE_MARK(4);

#if P2 == 0
    // Phase 2 (P2 = 0): R2 output rows a warp task, over the whole of h.
    for (int task = gw; task < HID / R2; task += nw) {
        if (task != gw) {
#pragma unroll
            for (int r = 0; r < R2; r++)
                row2[r] = task * R2 + r;
        }
        float acc[R2];
#pragma unroll
        for (int r = 0; r < R2; r++)
            acc[r] = 0.f;
#pragma unroll
        for (int j = 0; j < MLP_IT2; j++) {
            const int c = lane + 32 * j;
            if (c < MLP_CH2) {
                uint4 w[R2];
                float s[R2], zb[R2];
                if (j < PF2 && task == gw) {
#pragma unroll
                    for (int r = 0; r < R2; r++) {
                        w[r] = wp[j < PF2 ? j : 0][r];
                        s[r] = sp[j < PF2 ? j : 0][r];
                        zb[r] = zp[j < PF2 ? j : 0][r];
                    }
                } else {
                    w4m::load_rows<R2, false>(w, s, zb, dqweight, dscales, dzeros, d_ld,
                                              INTER / 8, row2, c);
                }
                TVec<8> x[4];
#pragma unroll
                for (int q = 0; q < 4; q++)
                    x[q] = reinterpret_cast<const TVec<8> *>(hs)[4 * c + q];
                w4m::dot_chunk<R2>(acc, w, s, zb, x);
            }
        }
#pragma unroll
        for (int r = 0; r < R2; r++)
            acc[r] = warp_sum(acc[r]);
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < R2; r++)
                out[task * R2 + r] = from_f32(acc[r]);
    }
#else
    // Phase 2 (P2 = 1): the block's RB rows, its warps splitting their chunk rounds (round
    // warp + MLP_WARPS i); the warps' sums meet in shared memory, added in warp order.
    {
        __shared__ float red[MLP_WARPS][RB];
        float acc[RB];
#pragma unroll
        for (int r = 0; r < RB; r++)
            acc[r] = 0.f;
        for (int round = warp; round < MLP_IT2; round += MLP_WARPS) {
            const int c = lane + 32 * round;
            if (c < MLP_CH2 && nrows > 0) {
                uint4 w[RB];
                float s[RB], zb[RB];
                if (PF2 > 0 && round == warp) {
#pragma unroll
                    for (int r = 0; r < RB; r++) {
                        w[r] = wp[r];
                        s[r] = sp[r];
                        zb[r] = zp[r];
                    }
                } else {
                    w4m::load_rows<RB, false>(w, s, zb, dqweight, dscales, dzeros, d_ld,
                                              INTER / 8, rowb, c);
                }
                TVec<8> x[4];
#pragma unroll
                for (int q = 0; q < 4; q++)
                    x[q] = reinterpret_cast<const TVec<8> *>(hs)[4 * c + q];
                w4m::dot_chunk<RB>(acc, w, s, zb, x);
            }
        }
#pragma unroll
        for (int r = 0; r < RB; r++)
            acc[r] = warp_sum(acc[r]);
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < RB; r++)
                red[warp][r] = acc[r];
        __syncthreads();
        if ((int)threadIdx.x < nrows) {
            float v = 0.f;
#pragma unroll
            for (int q = 0; q < MLP_WARPS; q++)
                v += red[q][threadIdx.x];
            out[r0 + threadIdx.x] = from_f32(v);
        }
    }
#endif
    TAILOR_PROBE_EMIT();
}
