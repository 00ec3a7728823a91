/* cuda.h — the CUDA driver API, loaded with dlopen("libcuda.so.1") on first use (never linked):
 * one GPU's primary context and stream, memory, modules, launches, events. */
#ifndef TAILOR_CUDA_H
#define TAILOR_CUDA_H

#include <stddef.h>

/* The toolkit's cuda.h, for types only: every driver call goes through the dlopen'd table in
 * cuda.c. Project headers are found with -iquote, so <cuda.h> is always the toolkit's. */
#include <cuda.h>

#include "device.h"
#include "tailor.h"

/* Loads libcuda.so.1, resolves the driver entry points and calls cuInit(0), once per process
 * (thread-safe, idempotent: later calls return the first result). Failure: TAILOR_ERR_NO_DRIVER
 * "no CUDA driver: libcuda.so.1 not found (<dlerror text>)" or naming the missing symbol;
 * TAILOR_ERR_NO_DEVICE when cuInit reports no device; TAILOR_ERR_CUDA when cuInit fails
 * otherwise. */
tailor_status tailor_cuda_load(tailor_ctx *ctx);

/* Translates a driver result: TAILOR_OK for CUDA_SUCCESS, else TAILOR_ERR_CUDA with the message
 * "what: CUDA_ERROR_X (the driver's text)". */
tailor_status tailor_cuda_check(tailor_ctx *ctx, CUresult r, const char *what);

/* Number of GPUs the driver sees (loads the driver first; failures as tailor_cuda_load). */
tailor_status tailor_cuda_device_count(tailor_ctx *ctx, int *count);

/* The driver's CUDA version (cuDriverGetVersion: 13000 = 13.0); loads the driver first. */
tailor_status tailor_cuda_driver_version(tailor_ctx *ctx, int *version);

/* Fills the facts the driver knows about device `ordinal` (name, capability, SMs, shared memory,
 * registers, threads, warp, L2, memory, clock, bus, driver version, UUID, ordinal, is_live=1,
 * kind=GPU); leaves NVRTC version and source for tailor_device_query. TAILOR_ERR_NO_DEVICE when
 * the ordinal does not exist. */
tailor_status tailor_cuda_device_facts(tailor_ctx *ctx, int ordinal, tailor_device_info *info);

/* One device: its primary context and one stream. A handle is used by one thread at a time
 * (launches keep a small per-kernel table); any thread may use it, every call binds the context. */
typedef struct tailor_gpu tailor_gpu;

/* Opens device `ordinal`: retains its primary context, makes it current on this thread, creates
 * a non-blocking stream and reads its facts. *out is freed with tailor_gpu_close. */
tailor_status tailor_gpu_open(tailor_ctx *ctx, int ordinal, tailor_gpu **out);

/* Waits for the stream, destroys it and releases the primary context. NULL is fine. Memory and
 * modules still held are freed with the context when this was its last user. */
void tailor_gpu_close(tailor_gpu *gpu);

/* The device's facts (owned by gpu, valid until close). */
const tailor_device_info *tailor_gpu_info(const tailor_gpu *gpu);

/* The gpu's stream: every async call below is queued on it. */
CUstream tailor_gpu_stream(const tailor_gpu *gpu);

/* Makes the gpu's context current on the calling thread. */
tailor_status tailor_gpu_bind(tailor_ctx *ctx, tailor_gpu *gpu);

/* Allocates `bytes` (> 0) of device memory into *out; free with tailor_gpu_free. */
tailor_status tailor_gpu_alloc(tailor_ctx *ctx, tailor_gpu *gpu, size_t bytes, CUdeviceptr *out);

/* Frees device memory from tailor_gpu_alloc; 0 is fine. Errors are ignored (nothing to do). */
void tailor_gpu_free(tailor_gpu *gpu, CUdeviceptr p);

/* Copies host -> device, ordered after the work on the stream; returns when done. */
tailor_status tailor_gpu_upload(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst, const void *src,
                                size_t bytes);

/* Copies device -> host, ordered after the work on the stream; returns when done. */
tailor_status tailor_gpu_download(tailor_ctx *ctx, tailor_gpu *gpu, void *dst, CUdeviceptr src,
                                  size_t bytes);

/* Sets `bytes` bytes at p to v, asynchronously on the stream. */
tailor_status tailor_gpu_memset8(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr p, unsigned char v,
                                 size_t bytes);

/* Copies device -> device, asynchronously on the stream. */
tailor_status tailor_gpu_copy(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst, CUdeviceptr src,
                              size_t bytes);

/* Waits for everything queued on the stream; an asynchronous kernel fault surfaces here. */
tailor_status tailor_gpu_sync(tailor_ctx *ctx, tailor_gpu *gpu);

/* Free and total device memory in bytes (cuMemGetInfo). */
tailor_status tailor_gpu_mem_info(tailor_ctx *ctx, tailor_gpu *gpu, size_t *free_bytes,
                                  size_t *total_bytes);

/* A loaded kernel and what the compiler gave it. */
typedef struct tailor_kernel {
    CUmodule module;
    CUfunction fn;
    int regs;        /* registers per thread */
    int static_smem; /* static shared memory per block, bytes */
    int local_bytes; /* local (spill/stack) memory per thread, bytes */
    int max_threads; /* largest block this kernel can be launched with */
    int pdl;         /* 1: launch with programmatic dependent launch (sm_90+ images whose code
                        waits for its predecessor with griddepcontrol.wait before touching
                        memory; see templates/include/tailor_common.cuh). Set by the caller;
                        ignored when the driver lacks cuLaunchKernelEx. */
} tailor_kernel;

/* Whether code compiled for `target` may be launched with PDL on `live`: both sm_90 or later
 * (templates wait for their predecessor with griddepcontrol only when compiled for sm_90+, so
 * rehearsal PTX for an older profile never may). The runtime launches such code with PDL, and
 * the tuner times it so. */
int tailor_pdl_capable(const tailor_device_info *live, const tailor_device_info *target);

/* Loads a cubin or a NUL-terminated PTX image (PTX is JIT-compiled by the driver; its JIT error
 * log goes into the message) and looks up `name`; reads the function attributes into *out. The
 * image may be freed on return. Release with tailor_gpu_unload_kernel. */
tailor_status tailor_gpu_load_kernel(tailor_ctx *ctx, tailor_gpu *gpu, const void *image,
                                     const char *name, tailor_kernel *out);

/* The live GPU's cubin of a NUL-terminated PTX image: the driver's JIT, as tailor_gpu_load_kernel
 * would run it, without loading anything (cuLinkCreate / AddData / Complete). Thread-safe: it
 * makes gpu's context current on the calling thread, so compile threads can JIT in parallel.
 * *cubin is malloc'd (free it); on failure NULL, with the JIT log in the message. */
tailor_status tailor_gpu_jit_ptx(tailor_ctx *ctx, tailor_gpu *gpu, const char *ptx, void **cubin,
                                 size_t *size);

/* The address and size of the __device__ variable `name` in k's module; TAILOR_ERR_NOT_FOUND
 * when the module has none of that name. */
tailor_status tailor_gpu_kernel_global(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_kernel *k,
                                       const char *name, CUdeviceptr *ptr, size_t *bytes);

/* Unloads the kernel's module and clears *k; a zeroed kernel is fine. */
void tailor_gpu_unload_kernel(tailor_gpu *gpu, tailor_kernel *k);

/* Launches on the gpu's stream. When static_smem + dyn_smem exceeds the default per-block limit,
 * raises CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first (once per kernel and size).
 * TAILOR_ERR_BUDGET, before launching, when the total exceeds the opt-in limit. */
tailor_status tailor_gpu_launch(tailor_ctx *ctx, tailor_gpu *gpu, tailor_kernel *k,
                                const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                                void **args);

/* Every kernel loaded prefers TAILOR_DEFAULT_CARVEOUT % of the SM's unified L1 / shared-memory
 * array as shared memory (CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT; a kernel that needs
 * more still gets it). Left to the driver, kernels wanting different splits follow each other in
 * a forward and an SM changes its split only when idle, which costs programmatic dependent
 * launch its overlap: one split for all made the E2B prefill of 512 tokens 19 % faster with
 * W4A16 weights and 4 % in bf16 on an H200, decode flat to +1 % (docs/perf/model.md, sessions
 * 30-31). TAILOR_CARVEOUT=P (0-100) prefers P % instead; TAILOR_CARVEOUT=driver leaves each
 * kernel to the driver. Winners tuned under another value than this default are cached under a
 * key of their own (tailor_tuner_fingerprint, tuner/tuner.h). */
#define TAILOR_DEFAULT_CARVEOUT 25

/* The shared-memory carveout every loaded kernel prefers, in percent of the SM's capacity:
 * TAILOR_CARVEOUT when it is 0-100, -1 when it is "driver" (no preference), else
 * TAILOR_DEFAULT_CARVEOUT (a malformed value reads as the default here; tailor_carveout_read
 * refuses it, and so do the kernel load and the tuner's cache key). */
int tailor_carveout_preference(void);

/* TAILOR_CARVEOUT read into *pct as tailor_carveout_preference says; a malformed value (neither
 * 0-100 nor "driver") fails with TAILOR_ERR_MISUSE naming the variable and its value, *pct then
 * TAILOR_DEFAULT_CARVEOUT. ctx may be NULL. */
tailor_status tailor_carveout_read(tailor_ctx *ctx, int *pct);

/* Resident blocks per SM for `k` at `block_threads` threads and `dyn_smem` dynamic shared bytes
 * (cuOccupancyMaxActiveBlocksPerMultiprocessor); 0 means it cannot run. */
tailor_status tailor_gpu_occupancy(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_kernel *k,
                                   int block_threads, size_t dyn_smem, int *blocks_per_sm);

/* Two events that time work on the gpu's stream. */
typedef struct tailor_gpu_timer {
    CUevent start, stop;
} tailor_gpu_timer;

/* Creates both events; destroy with tailor_gpu_timer_destroy. */
tailor_status tailor_gpu_timer_create(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_timer *t);

/* Records the start event on the stream. */
tailor_status tailor_gpu_timer_start(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_timer *t);

/* Records the stop event on the stream. */
tailor_status tailor_gpu_timer_stop(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_timer *t);

/* Waits for the stop event, then gives the milliseconds between start and stop. */
tailor_status tailor_gpu_timer_elapsed_ms(tailor_ctx *ctx, tailor_gpu_timer *t, float *ms);

/* Destroys both events and clears *t; a zeroed timer is fine. */
void tailor_gpu_timer_destroy(tailor_gpu *gpu, tailor_gpu_timer *t);

/* Measures device-to-device copy bandwidth (bytes read + written per second) on two buffers larger
 * than 2x L2 (at least 256 MiB each, less only when free memory is short): warm-up, then the
 * median of 20 copies timed with events. */
tailor_status tailor_gpu_copy_bandwidth(tailor_ctx *ctx, tailor_gpu *gpu, double *bytes_per_s);

/* ---- pinned host memory, asynchronous copies and CUDA graphs --------------------------- */

/* Allocates `bytes` of page-locked host memory (cuMemAllocHost) into *out; free with
 * tailor_gpu_host_free. */
tailor_status tailor_gpu_host_alloc(tailor_ctx *ctx, tailor_gpu *gpu, size_t bytes, void **out);

/* Frees memory from tailor_gpu_host_alloc; NULL is fine. */
void tailor_gpu_host_free(tailor_gpu *gpu, void *p);

/* Queues a host -> device copy on the stream and returns at once; src must stay unchanged until
 * the stream reaches the copy (pinned memory makes it truly asynchronous). */
tailor_status tailor_gpu_upload_async(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst,
                                      const void *src, size_t bytes);

/* Queues a device -> host copy on the stream and returns at once (dst valid after a sync). */
tailor_status tailor_gpu_download_async(tailor_ctx *ctx, tailor_gpu *gpu, void *dst,
                                        CUdeviceptr src, size_t bytes);

/* A point in the gpu's stream (a CUDA event without timing): the host waits for the work queued
 * before it while later work stays queued. */
typedef struct tailor_gpu_mark {
    CUevent ev;
} tailor_gpu_mark;

/* Creates the mark; destroy with tailor_gpu_mark_destroy. */
tailor_status tailor_gpu_mark_create(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_mark *m);

/* Records the mark at the stream's current end (again, when it was recorded before). */
tailor_status tailor_gpu_mark_record(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_mark *m);

/* Waits until the stream has passed the mark's last recording. */
tailor_status tailor_gpu_mark_wait(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_mark *m);

/* Destroys the mark and clears *m; a zeroed mark is fine. */
void tailor_gpu_mark_destroy(tailor_gpu *gpu, tailor_gpu_mark *m);

/* An instantiated CUDA graph (captured from the gpu's stream). */
typedef struct tailor_gpu_graph {
    CUgraph graph;
    CUgraphExec exec;
} tailor_gpu_graph;

/* Starts capturing the gpu's stream (thread-local mode): the work queued until
 * tailor_gpu_capture_end is recorded, not run. Nothing may synchronize the stream meanwhile. */
tailor_status tailor_gpu_capture_begin(tailor_ctx *ctx, tailor_gpu *gpu);

/* Ends the capture. keep = 1: instantiates the graph into *out and uploads it on the stream
 * (cuGraphUpload, where the driver has it: its first launch then costs what the others do);
 * destroy with tailor_gpu_graph_destroy. keep = 0: discards it (the way out of a failed
 * capture). */
tailor_status tailor_gpu_capture_end(tailor_ctx *ctx, tailor_gpu *gpu, int keep,
                                     tailor_gpu_graph *out);

/* Launches an instantiated graph on the gpu's stream. */
tailor_status tailor_gpu_graph_launch(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_gpu_graph *g);

/* Destroys the graph and clears *g; a zeroed graph is fine. */
void tailor_gpu_graph_destroy(tailor_gpu *gpu, tailor_gpu_graph *g);

/* Times `replays` launches of the graph one by one with events: samples[i] is replay i's
 * microseconds divided by `per_replay` (the launches it holds), i.e. µs per launch. How the
 * tuner (tailor_instance_time) and the benchmarks' comparisons time a batch. */
tailor_status tailor_gpu_graph_time(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_gpu_graph *g,
                                    int per_replay, int replays, double *samples);

#endif
