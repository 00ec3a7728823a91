/* device.h — what a GPU is and what it allows: live devices through the driver, and a built-in
 * table of profiles (T4 ... H200, TPU v5e/v6e) from vendor data, so budgets apply anywhere. */
#ifndef TAILOR_DEVICE_H
#define TAILOR_DEVICE_H

#include <stdint.h>

#include "tailor.h"

typedef enum tailor_device_kind {
    TAILOR_DEVICE_GPU = 0, /* an NVIDIA GPU: kernels can be compiled for it */
    TAILOR_DEVICE_TPU      /* a TPU profile: only `plan` arithmetic (VMEM as the scratch budget) */
} tailor_device_kind;

/* The facts budgets and fingerprints are made of. Sizes in bytes, clocks in kHz. */
typedef struct tailor_device_info {
    char name[128];              /* "NVIDIA H200", "Tesla T4" */
    char short_name[32];         /* profile key ("h200", "t4"); "" for a live device */
    tailor_device_kind kind;
    int is_live;                 /* 1: read from the driver; 0: a profile */
    int ordinal;                 /* CUDA device ordinal for live devices, -1 for profiles */
    int cc_major, cc_minor;      /* compute capability (0.0 for TPUs) */
    int sm_count;                /* SMs (TPU: cores) */
    int smem_per_block;          /* default shared memory per block (48 KiB on NVIDIA) */
    int smem_per_block_optin;    /* opt-in maximum per block: THE shared-memory budget (TPU: VMEM) */
    int smem_per_sm;             /* shared memory per SM */
    int regs_per_block;          /* 32-bit registers per block */
    int regs_per_sm;
    int max_threads_per_block;
    int max_threads_per_sm;
    int warp_size;
    long long l2_bytes;
    long long mem_bytes;
    int mem_clock_khz;           /* memory clock (peak) */
    int mem_bus_bits;            /* memory bus width */
    int driver_version;          /* cuDriverGetVersion, e.g. 13000; 0 for profiles */
    int nvrtc_major, nvrtc_minor;/* NVRTC version of this build; 0 for profiles */
    char uuid[40];               /* live only: GPU UUID, hex */
    char source[160];            /* where the facts came from: "driver" or the vendor document */
} tailor_device_info;

/* Built-in profiles, in table order. count receives the number. Never fails. */
const tailor_device_info *tailor_device_profiles(int *count);

/* Finds a profile by short name ("t4", "a100-80gb", ...), case-insensitive. NULL if none. */
const tailor_device_info *tailor_device_profile_find(const char *short_name);

/* Number of live GPUs. TAILOR_ERR_NO_DRIVER when libcuda.so.1 cannot be loaded (message says
 * why; also when the one found is the toolkit's stub), TAILOR_ERR_NO_DEVICE when cuInit finds no
 * GPU, TAILOR_ERR_CUDA when cuInit fails otherwise. */
tailor_status tailor_device_count(tailor_ctx *ctx, int *count);

/* The live GPU a spec names: 0 for "", gpu, cuda, live; N for cuda:N, gpu:N or N (0-1024);
 * -1 when it names no live device (a profile name, cpu, anything else). */
int tailor_device_live_ordinal(const char *spec);

/* Reads every fact of live device `ordinal` into *info (including driver and NVRTC versions). */
tailor_status tailor_device_query(tailor_ctx *ctx, int ordinal, tailor_device_info *info);

/* Resolves a --device argument: a profile short name, "gpu"/"live"/"cuda" or "cuda:N" or a bare
 * N for a live device, or "" (= live device 0). */
tailor_status tailor_device_resolve(tailor_ctx *ctx, const char *spec, tailor_device_info *info);

/* The fingerprint that keys caches: name, compute capability, SM count, opt-in shared memory,
 * driver version and NVRTC version, as a canonical text ("NVIDIA H200|sm_90|132|232448|13000|13.0")
 * written into buf. Identical hosts have identical fingerprints. */
void tailor_device_fingerprint(const tailor_device_info *info, char *buf, size_t size);

/* "sm_90" for compute capability 9.0 into buf; "tpu" for a TPU profile. */
void tailor_device_arch(const tailor_device_info *info, char *buf, size_t size);

/* Architecture number (major*10+minor): 75, 80, 90, ...; 0 for a TPU profile. */
int tailor_device_sm(const tailor_device_info *info);

/* What holds a block's residency (tailor_device_blocks_per_sm). */
typedef enum tailor_occupancy_limit {
    TAILOR_OCC_THREADS = 0,  /* threads (warps) an SM */
    TAILOR_OCC_REGISTERS,    /* registers, allocated per warp in each of the SM's 4 partitions */
    TAILOR_OCC_SHARED,       /* shared memory under the preferred carveout */
    TAILOR_OCC_BLOCKS        /* the architecture's blocks an SM */
} tailor_occupancy_limit;

/* "threads", "registers", "shared memory", "blocks". */
const char *tailor_occupancy_limit_name(tailor_occupancy_limit limit);

/* Resident blocks an SM of a block of `threads` threads, `regs` registers a thread and `smem`
 * bytes of shared memory (static and dynamic), as the CUDA occupancy rules of the device's
 * architecture give them, with every kernel preferring `carveout_pct` percent of the SM's
 * shared-memory capacity (rounded up to the architecture's next split; a block that needs more
 * gets the smallest split that holds it; -1: no preference, the largest split). Each block also
 * holds 1 KB of system shared memory from sm_80, with no shared memory of its own too (at a 0 %
 * carveout that alone allows 8 blocks an SM). *limit (may be NULL) says which rule binds
 * (the first of threads, registers, shared memory, blocks at the minimum). 0 for a block that
 * cannot run at all or a device that is not a GPU. For a live device it is the driver's
 * cuOccupancyMaxActiveBlocksPerMultiprocessor that counts (the tuner records it); this is the
 * planner's estimate for any profile. */
int tailor_device_blocks_per_sm(const tailor_device_info *d, int threads, int regs, long long smem,
                                int carveout_pct, tailor_occupancy_limit *limit);

/* Copy bandwidth upper bound from the memory clock and bus width, bytes/s (0 if unknown). */
double tailor_device_peak_bandwidth(const tailor_device_info *info);

#endif
