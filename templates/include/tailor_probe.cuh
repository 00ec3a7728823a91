// tailor_probe.cuh — a timeline probe for one kernel's blocks (scripts/probe/timeline.sh).
// Compiled in only when the build defines PROBE = L, which no space in templates/ does: the
// probe script copies a space and adds the define. Then thread 0 of every block stamps
// %globaltimer (ns, one clock for every SM) at the marks a template places, and the blocks of
// launches L .. L + 2 of the module (counted by block exits, which PDL cannot interleave across
// launches: a launch's blocks pass their grid wait only after every block of the one before has
// exited) print one line each:
//   PROBE <module> <exit ticket> <blocks> <sm> <block x y z> <t0 .. t5 ns> <exit ns>
// (<module>: the ticket's address, which tells the loaded modules apart; the printf buffer
// interleaves the lines of one module's launches)
// Marks left unset print 0. Without PROBE every macro is empty and the kernel is unchanged.
// The printf is a call, and ptxas serializes wgmma across calls (C7510): in a warpgroup kernel
// the probe build's MMA phases run slower than the real kernel's (decode_wg at 32k head_dim 512:
// 38.5 against 32.7 us); the phases without MMAs (waits, loads, merges) time as they are.
#pragma once

#if defined(PROBE)
__device__ unsigned tailor_probe_ticket;

struct TailorProbe {
    unsigned long long t[6];
};

__device__ __forceinline__ unsigned long long tailor_probe_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void tailor_probe_emit(const TailorProbe &p)
{
    const unsigned long long end = tailor_probe_now();
    if (threadIdx.x != 0)
        return;
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const unsigned nb = gridDim.x * gridDim.y * gridDim.z;
    const unsigned tk = atomicAdd(&tailor_probe_ticket, 1u);
    if (tk / nb < (unsigned)PROBE || tk / nb >= (unsigned)PROBE + 3u)
        return;
    printf("PROBE %p %u %u %u %u %u %u %llu %llu %llu %llu %llu %llu %llu\n", &tailor_probe_ticket, tk, nb, sm, blockIdx.x,
           blockIdx.y, blockIdx.z, p.t[0], p.t[1], p.t[2], p.t[3], p.t[4], p.t[5], end);
}

#define TAILOR_PROBE_INIT                                                                          \
    TailorProbe tailor_probe_ = {};                                                                \
    tailor_probe_.t[0] = tailor_probe_now()
#define TAILOR_PROBE_MARK(i) (tailor_probe_.t[(i)] = tailor_probe_now())
#define TAILOR_PROBE_EMIT() tailor_probe_emit(tailor_probe_)
#else
#define TAILOR_PROBE_INIT ((void)0)
#define TAILOR_PROBE_MARK(i) ((void)0)
#define TAILOR_PROBE_EMIT() ((void)0)
#endif
