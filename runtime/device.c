/* device.c — device facts: live GPUs through the driver (runtime/cuda.c), the built-in profile
 * table from vendor data, --device resolution and the cache fingerprint. */
#include "device.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nvrtc.h>

#include "cuda.h"

/* ---- the profile table --------------------------------------------------------------------- */

#define MIB (1024LL * 1024LL)
#define GIB (1024LL * MIB)

/* Per compute capability (CUDA C Programming Guide, "Technical Specifications per Compute
 * Capability"): major, minor, opt-in shared memory per block, shared memory per SM, resident
 * threads per SM. Registers (65,536 per block and per SM), 1,024 threads per block, 48 KiB
 * default shared memory per block and warps of 32 are the same on all of them. */
#define ARCH_SM75 7, 5, 65536, 65536, 1024
#define ARCH_SM80 8, 0, 166912, 167936, 2048
#define ARCH_SM86 8, 6, 101376, 102400, 1536
#define ARCH_SM89 8, 9, 101376, 102400, 1536
#define ARCH_SM90 9, 0, 232448, 233472, 2048

/* One NVIDIA card. Memory clock in kHz as the driver reports it (bandwidth = 2 x clock x bus/8),
 * here derived from the datasheet bandwidth; memory size is the datasheet's GB taken as GiB. */
#define GPU_PROFILE(...) GPU_PROFILE_(__VA_ARGS__)
#define GPU_PROFILE_(NAME, SHORT, MAJ, MIN, OPTIN, PER_SM, THR_SM, SMS, L2, MEM, CLK, BUS, SRC)     \
    {                                                                                              \
        .name = NAME, .short_name = SHORT, .kind = TAILOR_DEVICE_GPU, .is_live = 0, .ordinal = -1, \
        .cc_major = MAJ, .cc_minor = MIN, .sm_count = SMS, .smem_per_block = 49152,                \
        .smem_per_block_optin = OPTIN, .smem_per_sm = PER_SM, .regs_per_block = 65536,             \
        .regs_per_sm = 65536, .max_threads_per_block = 1024, .max_threads_per_sm = THR_SM,         \
        .warp_size = 32, .l2_bytes = L2, .mem_bytes = MEM, .mem_clock_khz = CLK,                   \
        .mem_bus_bits = BUS, .source = SRC                                                         \
    }

/* One TPU: one TensorCore per chip; its VMEM is the scratch budget in every shared-memory field;
 * no registers, threads, warps or L2 in the GPU sense (0). */
#define TPU_PROFILE(NAME, SHORT, VMEM, MEM, SRC)                                                    \
    {                                                                                              \
        .name = NAME, .short_name = SHORT, .kind = TAILOR_DEVICE_TPU, .is_live = 0, .ordinal = -1, \
        .sm_count = 1, .smem_per_block = VMEM, .smem_per_block_optin = VMEM, .smem_per_sm = VMEM,  \
        .mem_bytes = MEM, .source = SRC                                                            \
    }

static const tailor_device_info profiles[] = {
    GPU_PROFILE("Tesla T4", "t4", ARCH_SM75, 40, 4 * MIB, 16 * GIB, 5000000, 256,
                "NVIDIA Tesla T4 datasheet (16 GB GDDR6, 320 GB/s); Turing TU104 whitepaper; CUDA C "
                "Programming Guide, compute capability 7.5 table"),
    GPU_PROFILE("NVIDIA L4", "l4", ARCH_SM89, 58, 48 * MIB, 24 * GIB, 6250000, 192,
                "NVIDIA L4 datasheet (24 GB GDDR6, 300 GB/s); Ada AD104 whitepaper; CUDA C "
                "Programming Guide, compute capability 8.9 table"),
    GPU_PROFILE("NVIDIA A10G", "a10g", ARCH_SM86, 80, 6 * MIB, 24 * GIB, 6250000, 384,
                "AWS EC2 G5 (A10G) specifications (24 GB GDDR6, 600 GB/s); Ampere GA102 "
                "whitepaper; CUDA C Programming Guide, 8.6 table"),
    GPU_PROFILE("NVIDIA A100-SXM4-40GB", "a100-40gb", ARCH_SM80, 108, 40 * MIB, 40 * GIB, 1215000,
                5120,
                "NVIDIA A100 datasheet, SXM4 40GB (HBM2, 1,555 GB/s); Ampere GA100 whitepaper; CUDA "
                "C Programming Guide, 8.0 table"),
    GPU_PROFILE("NVIDIA A100-SXM4-80GB", "a100-80gb", ARCH_SM80, 108, 40 * MIB, 80 * GIB, 1593000,
                5120,
                "NVIDIA A100 datasheet, SXM4 80GB (HBM2e, 2,039 GB/s); Ampere GA100 whitepaper; "
                "CUDA C Programming Guide, 8.0 table"),
    GPU_PROFILE("NVIDIA H100 80GB HBM3", "h100", ARCH_SM90, 132, 50 * MIB, 80 * GIB, 2617000, 5120,
                "NVIDIA H100 datasheet, SXM5 80GB (HBM3, 3.35 TB/s); Hopper H100 whitepaper; CUDA C "
                "Programming Guide, 9.0 table"),
    GPU_PROFILE("NVIDIA H200", "h200", ARCH_SM90, 132, 60 * MIB, 141 * GIB, 3201000, 6016,
                "NVIDIA H200 datasheet, SXM 141GB (HBM3e, 4.8 TB/s); CUDA C Programming Guide, 9.0 "
                "table; L2, memory clock and bus width as read from a live H200"),
    GPU_PROFILE("NVIDIA GeForce RTX 3090", "rtx3090", ARCH_SM86, 82, 6 * MIB, 24 * GIB, 9750000, 384,
                "NVIDIA GeForce RTX 3090 specifications (24 GB GDDR6X, 936 GB/s); Ampere GA102 "
                "whitepaper; CUDA C Programming Guide, 8.6 table"),
    GPU_PROFILE("NVIDIA GeForce RTX 4090", "rtx4090", ARCH_SM89, 128, 72 * MIB, 24 * GIB, 10500000,
                384,
                "NVIDIA GeForce RTX 4090 specifications (24 GB GDDR6X, 1,008 GB/s); Ada AD102 "
                "whitepaper; CUDA C Programming Guide, 8.9 table"),
    TPU_PROFILE("Google TPU v5e", "tpu-v5e", 128 * MIB, 16 * GIB,
                "Google Cloud TPU v5e docs (1 TensorCore, 16 GB HBM2, 819 GB/s); JAX Pallas TPU "
                "hardware reference (128 MiB VMEM per core)"),
    TPU_PROFILE("Google TPU v6e", "tpu-v6e", 128 * MIB, 32 * GIB,
                "Google Cloud TPU v6e docs (1 TensorCore, 32 GB HBM, 1,640 GB/s); JAX Pallas TPU "
                "hardware reference (128 MiB VMEM per core)"),
};

#define PROFILE_COUNT ((int)(sizeof profiles / sizeof profiles[0]))

const tailor_device_info *tailor_device_profiles(int *count)
{
    *count = PROFILE_COUNT;
    return profiles;
}

const tailor_device_info *tailor_device_profile_find(const char *short_name)
{
    if (!short_name)
        return NULL;
    for (int i = 0; i < PROFILE_COUNT; i++)
        if (strcasecmp(profiles[i].short_name, short_name) == 0)
            return &profiles[i];
    return NULL;
}

/* ---- live devices -------------------------------------------------------------------------- */

tailor_status tailor_device_count(tailor_ctx *ctx, int *count)
{
    return tailor_cuda_device_count(ctx, count);
}

tailor_status tailor_device_query(tailor_ctx *ctx, int ordinal, tailor_device_info *info)
{
    tailor_status st = tailor_cuda_device_facts(ctx, ordinal, info);
    if (st != TAILOR_OK)
        return st;
    if (nvrtcVersion(&info->nvrtc_major, &info->nvrtc_minor) != NVRTC_SUCCESS)
        return tailor_set_error(ctx, TAILOR_ERR_NVRTC, "nvrtcVersion failed: NVRTC is unusable");
    snprintf(info->source, sizeof info->source, "driver");
    return TAILOR_OK;
}

/* ---- --device resolution ------------------------------------------------------------------- */

/* A non-negative decimal ordinal filling all of s, or -1. */
static int parse_ordinal(const char *s)
{
    if (!*s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1024)
        return -1;
    return (int)v;
}

int tailor_device_live_ordinal(const char *spec)
{
    if (!spec || !*spec || strcasecmp(spec, "gpu") == 0 || strcasecmp(spec, "cuda") == 0 ||
        strcasecmp(spec, "live") == 0)
        return 0;
    if (strncasecmp(spec, "cuda:", 5) == 0 || strncasecmp(spec, "gpu:", 4) == 0)
        return parse_ordinal(strchr(spec, ':') + 1);
    return parse_ordinal(spec);
}

tailor_status tailor_device_resolve(tailor_ctx *ctx, const char *spec, tailor_device_info *info)
{
    if (!spec)
        spec = "";
    const tailor_device_info *p = tailor_device_profile_find(spec);
    if (p) {
        *info = *p;
        return TAILOR_OK;
    }
    int ordinal = tailor_device_live_ordinal(spec);
    if (ordinal >= 0)
        return tailor_device_query(ctx, ordinal, info);
    char names[512];
    size_t o = 0;
    names[0] = '\0';
    for (int i = 0; i < PROFILE_COUNT && o < sizeof names; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "",
                              profiles[i].short_name);
    return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND,
                            "unknown device '%s': use gpu, cuda:N, gpu:N, N or a profile (%s)", spec, names);
}

/* ---- derived facts ------------------------------------------------------------------------- */

void tailor_device_arch(const tailor_device_info *info, char *buf, size_t size)
{
    if (info->kind == TAILOR_DEVICE_TPU)
        snprintf(buf, size, "tpu");
    else
        snprintf(buf, size, "sm_%d%d", info->cc_major, info->cc_minor);
}

int tailor_device_sm(const tailor_device_info *info)
{
    if (info->kind == TAILOR_DEVICE_TPU)
        return 0;
    return info->cc_major * 10 + info->cc_minor;
}

/* ---- occupancy ------------------------------------------------------------------------------ */

/* The architecture's residency facts the device info does not carry (CUDA C Programming Guide,
 * "Compute Capabilities"; shared-memory splits in KB, ascending, 0-terminated after the first). */
typedef struct arch_occupancy {
    int sm;                /* major*10+minor */
    int max_blocks;        /* blocks an SM */
    int reserved_smem;     /* system shared memory a block, bytes */
    int splits_kb[12];     /* the shared-memory capacities an SM can be configured to */
} arch_occupancy;

static const arch_occupancy arch_table[] = {
    {75, 16, 0, {32, 64}},
    {80, 32, 1024, {0, 8, 16, 32, 64, 100, 132, 164}},
    {86, 16, 1024, {0, 8, 16, 32, 64, 100}},
    {87, 16, 1024, {0, 8, 16, 32, 64, 100, 132, 164}},
    {89, 24, 1024, {0, 8, 16, 32, 64, 100}},
    {90, 32, 1024, {0, 8, 16, 32, 64, 100, 132, 164, 196, 228}},
};

/* The facts of d's architecture, or the nearest older one in the table (NULL below sm_75). */
static const arch_occupancy *arch_facts(const tailor_device_info *d)
{
    const arch_occupancy *best = NULL;
    int sm = tailor_device_sm(d);
    for (size_t i = 0; i < sizeof arch_table / sizeof *arch_table; i++)
        if (arch_table[i].sm <= sm)
            best = &arch_table[i];
    return best;
}

/* The shared-memory capacity an SM is configured to for a kernel preferring `pct` % of the
 * largest split (-1: the largest) whose block needs `need` bytes: the smallest split at or above
 * the preference, or above the need when that is larger; capped at the device's capacity. */
static long long smem_split(const arch_occupancy *a, long long capacity, int pct, long long need)
{
    long long want = pct < 0 ? capacity : (capacity * pct + 99) / 100;
    if (need > want)
        want = need;
    for (int i = 0; i < 12; i++) {
        long long split = (long long)a->splits_kb[i] * 1024;
        if ((i > 0 && a->splits_kb[i] == 0) || split > capacity)
            break;
        if (split >= want)
            return split;
    }
    return capacity;
}

const char *tailor_occupancy_limit_name(tailor_occupancy_limit limit)
{
    switch (limit) {
    case TAILOR_OCC_THREADS: return "threads";
    case TAILOR_OCC_REGISTERS: return "registers";
    case TAILOR_OCC_SHARED: return "shared memory";
    case TAILOR_OCC_BLOCKS: return "blocks";
    }
    return "?";
}

int tailor_device_blocks_per_sm(const tailor_device_info *d, int threads, int regs, long long smem,
                                int carveout_pct, tailor_occupancy_limit *limit)
{
    const arch_occupancy *a = d->kind == TAILOR_DEVICE_GPU ? arch_facts(d) : NULL;
    if (limit)
        *limit = regs > 255 ? TAILOR_OCC_REGISTERS : TAILOR_OCC_THREADS;
    if (!a || threads <= 0 || threads > d->max_threads_per_block || regs > 255 || smem < 0)
        return 0;
    const int warp = d->warp_size > 0 ? d->warp_size : 32;
    const int warps = (threads + warp - 1) / warp;
    int best = d->max_threads_per_sm / (warps * warp);
    tailor_occupancy_limit why = TAILOR_OCC_THREADS;
    if (regs > 0) { /* per warp in units of 256, each of the 4 partitions holding whole warps */
        int per_warp = (regs * warp + 255) / 256 * 256;
        int by_regs = (d->regs_per_sm / 4 / per_warp) * 4 / warps;
        if (by_regs < best)
            best = by_regs, why = TAILOR_OCC_REGISTERS;
    }
    long long need = smem + a->reserved_smem; /* the reserved KB counts without any smem too */
    if (need > 0) {
        long long split = smem_split(a, d->smem_per_sm, carveout_pct, need);
        int by_smem = need > split ? 0 : (int)(split / need);
        if (by_smem < best)
            best = by_smem, why = TAILOR_OCC_SHARED;
    }
    if (a->max_blocks < best)
        best = a->max_blocks, why = TAILOR_OCC_BLOCKS;
    if (limit)
        *limit = why;
    return best > 0 ? best : 0;
}

void tailor_device_fingerprint(const tailor_device_info *info, char *buf, size_t size)
{
    char arch[16];
    tailor_device_arch(info, arch, sizeof arch);
    snprintf(buf, size, "%s|%s|%d|%d|%d|%d.%d", info->name, arch, info->sm_count,
             info->smem_per_block_optin, info->driver_version, info->nvrtc_major,
             info->nvrtc_minor);
}

double tailor_device_peak_bandwidth(const tailor_device_info *info)
{
    if (info->mem_clock_khz <= 0 || info->mem_bus_bits <= 0)
        return 0.0;
    return (double)info->mem_clock_khz * 1e3 * 2.0 * (double)info->mem_bus_bits / 8.0;
}
