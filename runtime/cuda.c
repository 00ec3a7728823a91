/* cuda.c — the CUDA driver API through dlopen("libcuda.so.1"): the entry-point table, error
 * translation, device facts, and the tailor_gpu handle (primary context + stream). */
#include "cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the entry-point table ---------------------------------------------------------------- */

/* cuda.h maps the plain names to the versioned ones (cuMemAlloc -> cuMemAlloc_v2, ...), so
 * __typeof__ of the plain name is the type of the versioned entry point resolved below. */
typedef struct cuda_api {
    __typeof__(cuInit) *init;
    __typeof__(cuDriverGetVersion) *driver_get_version;
    __typeof__(cuGetErrorName) *get_error_name;
    __typeof__(cuGetErrorString) *get_error_string;
    __typeof__(cuDeviceGetCount) *device_get_count;
    __typeof__(cuDeviceGet) *device_get;
    __typeof__(cuDeviceGetName) *device_get_name;
    __typeof__(cuDeviceGetAttribute) *device_get_attribute;
    __typeof__(cuDeviceTotalMem) *device_total_mem;
    __typeof__(cuDeviceGetUuid) *device_get_uuid;
    __typeof__(cuDevicePrimaryCtxRetain) *primary_ctx_retain;
    __typeof__(cuDevicePrimaryCtxRelease) *primary_ctx_release;
    __typeof__(cuCtxSetCurrent) *ctx_set_current;
    __typeof__(cuCtxGetCurrent) *ctx_get_current;
    __typeof__(cuStreamCreate) *stream_create;
    __typeof__(cuStreamDestroy) *stream_destroy;
    __typeof__(cuStreamSynchronize) *stream_synchronize;
    __typeof__(cuMemAlloc) *mem_alloc;
    __typeof__(cuMemFree) *mem_free;
    __typeof__(cuMemGetInfo) *mem_get_info;
    __typeof__(cuMemcpyHtoDAsync) *memcpy_htod_async;
    __typeof__(cuMemcpyDtoHAsync) *memcpy_dtoh_async;
    __typeof__(cuMemcpyDtoDAsync) *memcpy_dtod_async;
    __typeof__(cuMemsetD8Async) *memset_d8_async;
    __typeof__(cuModuleLoadDataEx) *module_load_data_ex;
    __typeof__(cuModuleUnload) *module_unload;
    __typeof__(cuLinkCreate) *link_create;
    __typeof__(cuLinkAddData) *link_add_data;
    __typeof__(cuLinkComplete) *link_complete;
    __typeof__(cuLinkDestroy) *link_destroy;
    __typeof__(cuModuleGetFunction) *module_get_function;
    __typeof__(cuModuleGetGlobal) *module_get_global;
    __typeof__(cuFuncGetAttribute) *func_get_attribute;
    __typeof__(cuFuncSetAttribute) *func_set_attribute;
    __typeof__(cuLaunchKernel) *launch_kernel;
    __typeof__(cuLaunchKernelEx) *launch_kernel_ex; /* optional (CUDA 12 drivers) */
    __typeof__(cuOccupancyMaxActiveBlocksPerMultiprocessor) *occupancy_max_active_blocks;
    __typeof__(cuEventCreate) *event_create;
    __typeof__(cuEventRecord) *event_record;
    __typeof__(cuEventSynchronize) *event_synchronize;
    __typeof__(cuEventElapsedTime) *event_elapsed_time;
    __typeof__(cuEventDestroy) *event_destroy;
    __typeof__(cuMemAllocHost) *mem_alloc_host;
    __typeof__(cuMemFreeHost) *mem_free_host;
    __typeof__(cuStreamBeginCapture) *stream_begin_capture;
    __typeof__(cuStreamEndCapture) *stream_end_capture;
    __typeof__(cuGraphInstantiateWithFlags) *graph_instantiate;
    __typeof__(cuGraphLaunch) *graph_launch;
    __typeof__(cuGraphUpload) *graph_upload; /* optional (CUDA 11.1 drivers) */
    __typeof__(cuGraphExecDestroy) *graph_exec_destroy;
    __typeof__(cuGraphDestroy) *graph_destroy;
} cuda_api;

static cuda_api api;

/* One entry point: where it goes, its (versioned) name, and an older name with the same
 * signature for drivers that predate the versioned one (NULL if none). */
typedef struct cuda_symbol {
    void **slot;
    const char *name;
    const char *fallback;
    int optional; /* 1: a missing symbol leaves the slot NULL (the feature is off) */
} cuda_symbol;

#define SLOT(field) ((void **)(void *)&api.field)

static const cuda_symbol cuda_symbols[] = {
    {SLOT(init), "cuInit", NULL, 0},
    {SLOT(driver_get_version), "cuDriverGetVersion", NULL, 0},
    {SLOT(get_error_name), "cuGetErrorName", NULL, 0},
    {SLOT(get_error_string), "cuGetErrorString", NULL, 0},
    {SLOT(device_get_count), "cuDeviceGetCount", NULL, 0},
    {SLOT(device_get), "cuDeviceGet", NULL, 0},
    {SLOT(device_get_name), "cuDeviceGetName", NULL, 0},
    {SLOT(device_get_attribute), "cuDeviceGetAttribute", NULL, 0},
    {SLOT(device_total_mem), "cuDeviceTotalMem_v2", NULL, 0},
    {SLOT(device_get_uuid), "cuDeviceGetUuid_v2", "cuDeviceGetUuid", 0},
    {SLOT(primary_ctx_retain), "cuDevicePrimaryCtxRetain", NULL, 0},
    {SLOT(primary_ctx_release), "cuDevicePrimaryCtxRelease_v2", NULL, 0},
    {SLOT(ctx_set_current), "cuCtxSetCurrent", NULL, 0},
    {SLOT(ctx_get_current), "cuCtxGetCurrent", NULL, 0},
    {SLOT(stream_create), "cuStreamCreate", NULL, 0},
    {SLOT(stream_destroy), "cuStreamDestroy_v2", NULL, 0},
    {SLOT(stream_synchronize), "cuStreamSynchronize", NULL, 0},
    {SLOT(mem_alloc), "cuMemAlloc_v2", NULL, 0},
    {SLOT(mem_free), "cuMemFree_v2", NULL, 0},
    {SLOT(mem_get_info), "cuMemGetInfo_v2", NULL, 0},
    {SLOT(memcpy_htod_async), "cuMemcpyHtoDAsync_v2", NULL, 0},
    {SLOT(memcpy_dtoh_async), "cuMemcpyDtoHAsync_v2", NULL, 0},
    {SLOT(memcpy_dtod_async), "cuMemcpyDtoDAsync_v2", NULL, 0},
    {SLOT(memset_d8_async), "cuMemsetD8Async", NULL, 0},
    {SLOT(module_load_data_ex), "cuModuleLoadDataEx", NULL, 0},
    {SLOT(module_unload), "cuModuleUnload", NULL, 0},
    {SLOT(link_create), "cuLinkCreate_v2", NULL, 0},
    {SLOT(link_add_data), "cuLinkAddData_v2", NULL, 0},
    {SLOT(link_complete), "cuLinkComplete", NULL, 0},
    {SLOT(link_destroy), "cuLinkDestroy", NULL, 0},
    {SLOT(module_get_function), "cuModuleGetFunction", NULL, 0},
    {SLOT(module_get_global), "cuModuleGetGlobal_v2", NULL, 0},
    {SLOT(func_get_attribute), "cuFuncGetAttribute", NULL, 0},
    {SLOT(func_set_attribute), "cuFuncSetAttribute", NULL, 0},
    {SLOT(launch_kernel), "cuLaunchKernel", NULL, 0},
    {SLOT(launch_kernel_ex), "cuLaunchKernelEx", NULL, 1},
    {SLOT(occupancy_max_active_blocks), "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL, 0},
    {SLOT(event_create), "cuEventCreate", NULL, 0},
    {SLOT(event_record), "cuEventRecord", NULL, 0},
    {SLOT(event_synchronize), "cuEventSynchronize", NULL, 0},
    {SLOT(event_elapsed_time), "cuEventElapsedTime_v2", "cuEventElapsedTime", 0},
    {SLOT(event_destroy), "cuEventDestroy_v2", NULL, 0},
    {SLOT(mem_alloc_host), "cuMemAllocHost_v2", NULL, 0},
    {SLOT(mem_free_host), "cuMemFreeHost", NULL, 0},
    {SLOT(stream_begin_capture), "cuStreamBeginCapture_v2", NULL, 0},
    {SLOT(stream_end_capture), "cuStreamEndCapture", NULL, 0},
    {SLOT(graph_instantiate), "cuGraphInstantiateWithFlags", NULL, 0},
    {SLOT(graph_launch), "cuGraphLaunch", NULL, 0},
    {SLOT(graph_upload), "cuGraphUpload", NULL, 1},
    {SLOT(graph_exec_destroy), "cuGraphExecDestroy", NULL, 0},
    {SLOT(graph_destroy), "cuGraphDestroy", NULL, 0},
};

#undef SLOT

/* The outcome of the one load, shared by every caller. */
static struct {
    pthread_once_t once;
    tailor_status status;
    char message[768];
} cuda_state = {PTHREAD_ONCE_INIT, TAILOR_OK, ""};

/* The driver's name and text for r, or a numeric stand-in when the driver cannot say. */
static void cuda_error_strings(CUresult r, const char **name, const char **text)
{
    static _Thread_local char unknown[32];
    *name = NULL;
    *text = NULL;
    if (api.get_error_name && api.get_error_name(r, name) != CUDA_SUCCESS)
        *name = NULL;
    if (api.get_error_string && api.get_error_string(r, text) != CUDA_SUCCESS)
        *text = NULL;
    if (!*name) {
        snprintf(unknown, sizeof unknown, "CUDA error %d", (int)r);
        *name = unknown;
    }
    if (!*text)
        *text = "no description from the driver";
}

static int cuda_resolve_symbols(void *lib)
{
    for (size_t i = 0; i < sizeof cuda_symbols / sizeof cuda_symbols[0]; i++) {
        const cuda_symbol *s = &cuda_symbols[i];
        *s->slot = dlsym(lib, s->name);
        if (!*s->slot && s->fallback)
            *s->slot = dlsym(lib, s->fallback);
        if (!*s->slot && !s->optional) {
            snprintf(cuda_state.message, sizeof cuda_state.message,
                     "no CUDA driver: libcuda.so.1 lacks %s (the driver is too old for this build)",
                     s->name);
            return 0;
        }
    }
    return 1;
}

static void cuda_load_once(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(cuda_state.message, sizeof cuda_state.message,
                 "no CUDA driver: libcuda.so.1 not found (%s)", why ? why : "no reason given");
        cuda_state.status = TAILOR_ERR_NO_DRIVER;
        return;
    }
    if (!cuda_resolve_symbols(lib)) {
        memset(&api, 0, sizeof api);
        dlclose(lib);
        cuda_state.status = TAILOR_ERR_NO_DRIVER;
        return;
    }
    CUresult r = api.init(0);
    if (r == CUDA_SUCCESS)
        return; /* the library stays loaded for the life of the process */
    const char *name, *text;
    cuda_error_strings(r, &name, &text);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        /* the toolkit's link stub (lib64/stubs) was found first: it cannot even name the error */
        snprintf(cuda_state.message, sizeof cuda_state.message,
                 "no CUDA driver: the libcuda.so.1 found is the toolkit's stub library, not a "
                 "driver (cuInit: CUDA_ERROR_STUB_LIBRARY)");
        cuda_state.status = TAILOR_ERR_NO_DRIVER;
    } else if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(cuda_state.message, sizeof cuda_state.message,
                 "no CUDA device: cuInit: %s (%s)", name, text);
        cuda_state.status = TAILOR_ERR_NO_DEVICE;
    } else {
        snprintf(cuda_state.message, sizeof cuda_state.message,
                 "the CUDA driver failed to start: cuInit: %s (%s)", name, text);
        cuda_state.status = TAILOR_ERR_CUDA;
    }
}

tailor_status tailor_cuda_load(tailor_ctx *ctx)
{
    pthread_once(&cuda_state.once, cuda_load_once);
    if (cuda_state.status != TAILOR_OK)
        return tailor_set_error(ctx, cuda_state.status, "%s", cuda_state.message);
    return TAILOR_OK;
}

tailor_status tailor_cuda_check(tailor_ctx *ctx, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return TAILOR_OK;
    const char *name, *text;
    cuda_error_strings(r, &name, &text);
    return tailor_set_error(ctx, TAILOR_ERR_CUDA, "%s: %s (%s)", what, name, text);
}

/* ---- device facts -------------------------------------------------------------------------- */

tailor_status tailor_cuda_device_count(tailor_ctx *ctx, int *count)
{
    *count = 0;
    tailor_status st = tailor_cuda_load(ctx);
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.device_get_count(count), "cuDeviceGetCount");
}

tailor_status tailor_cuda_driver_version(tailor_ctx *ctx, int *version)
{
    *version = 0;
    tailor_status st = tailor_cuda_load(ctx);
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.driver_get_version(version), "cuDriverGetVersion");
}

static tailor_status cuda_get_device(tailor_ctx *ctx, int ordinal, CUdevice *dev)
{
    int count = 0;
    tailor_status st = tailor_cuda_device_count(ctx, &count);
    if (st != TAILOR_OK)
        return st;
    if (ordinal < 0 || ordinal >= count)
        return tailor_set_error(ctx, TAILOR_ERR_NO_DEVICE,
                                "CUDA device %d does not exist: the driver sees %d GPU%s", ordinal,
                                count, count == 1 ? "" : "s");
    return tailor_cuda_check(ctx, api.device_get(dev, ordinal), "cuDeviceGet");
}

static void cuda_format_uuid(const CUuuid *u, char *buf, size_t size)
{
    static const int dash_after[] = {3, 5, 7, 9}; /* 8-4-4-4-12 hex digits */
    size_t o = 0;
    int d = 0;
    for (int i = 0; i < 16 && o + 3 < size; i++) {
        o += (size_t)snprintf(buf + o, size - o, "%02x", (unsigned char)u->bytes[i]);
        if (d < 4 && i == dash_after[d] && o + 1 < size) {
            buf[o++] = '-';
            d++;
        }
    }
    buf[o < size ? o : size - 1] = '\0';
}

/* The integer attributes, each with the field it fills. */
static tailor_status cuda_read_attributes(tailor_ctx *ctx, CUdevice dev, tailor_device_info *info)
{
    int l2 = 0;
    const struct {
        CUdevice_attribute attr;
        int *field;
        const char *what;
        int optional; /* 1: a driver that cannot tell leaves 0 (memory clock and bus width) */
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info->cc_major, "compute capability", 0},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info->cc_minor, "compute capability", 0},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info->sm_count, "SM count", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &info->smem_per_block,
         "shared memory per block", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info->smem_per_block_optin,
         "opt-in shared memory per block", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &info->smem_per_sm,
         "shared memory per SM", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &info->regs_per_block, "registers per block", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &info->regs_per_sm,
         "registers per SM", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &info->max_threads_per_block,
         "threads per block", 0},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &info->max_threads_per_sm,
         "threads per SM", 0},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &info->warp_size, "warp size", 0},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2, "L2 size", 0},
        {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &info->mem_clock_khz, "memory clock", 1},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &info->mem_bus_bits, "memory bus width", 1},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "cuDeviceGetAttribute (%s)", attrs[i].what);
        CUresult r = api.device_get_attribute(attrs[i].field, attrs[i].attr, dev);
        if (r != CUDA_SUCCESS && attrs[i].optional) {
            *attrs[i].field = 0;
            continue;
        }
        tailor_status st = tailor_cuda_check(ctx, r, what);
        if (st != TAILOR_OK)
            return st;
    }
    info->l2_bytes = l2;
    return TAILOR_OK;
}

tailor_status tailor_cuda_device_facts(tailor_ctx *ctx, int ordinal, tailor_device_info *info)
{
    CUdevice dev = 0;
    tailor_status st = cuda_get_device(ctx, ordinal, &dev);
    if (st != TAILOR_OK)
        return st;
    memset(info, 0, sizeof *info);
    info->kind = TAILOR_DEVICE_GPU;
    info->is_live = 1;
    info->ordinal = ordinal;
    st = tailor_cuda_check(ctx, api.device_get_name(info->name, (int)sizeof info->name, dev),
                           "cuDeviceGetName");
    if (st != TAILOR_OK)
        return st;
    st = cuda_read_attributes(ctx, dev, info);
    if (st != TAILOR_OK)
        return st;
    size_t total = 0;
    st = tailor_cuda_check(ctx, api.device_total_mem(&total, dev), "cuDeviceTotalMem");
    if (st != TAILOR_OK)
        return st;
    info->mem_bytes = (long long)total;
    st = tailor_cuda_check(ctx, api.driver_get_version(&info->driver_version),
                           "cuDriverGetVersion");
    if (st != TAILOR_OK)
        return st;
    CUuuid uuid;
    st = tailor_cuda_check(ctx, api.device_get_uuid(&uuid, dev), "cuDeviceGetUuid");
    if (st != TAILOR_OK)
        return st;
    cuda_format_uuid(&uuid, info->uuid, sizeof info->uuid);
    return TAILOR_OK;
}

/* ---- the gpu handle ------------------------------------------------------------------------ */

/* The dynamic shared memory a kernel has been allowed through cuFuncSetAttribute. */
typedef struct smem_grant {
    CUfunction fn;
    unsigned bytes;
} smem_grant;

struct tailor_gpu {
    CUdevice device;
    CUcontext context; /* the device's primary context, retained */
    CUstream stream;
    tailor_device_info info;
    smem_grant *grants; /* grows; one entry per kernel launched above the default limit */
    size_t grant_count, grant_cap;
};

/* Makes the gpu's context current on this thread if it is not already. */
static CUresult gpu_make_current(const tailor_gpu *gpu)
{
    CUcontext cur = NULL;
    if (api.ctx_get_current(&cur) == CUDA_SUCCESS && cur == gpu->context)
        return CUDA_SUCCESS;
    return api.ctx_set_current(gpu->context);
}

/* The common entry of every call taking a gpu: checks it and binds its context. */
static tailor_status gpu_enter(tailor_ctx *ctx, tailor_gpu *gpu, const char *what)
{
    if (!gpu)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "%s: no GPU handle (gpu is NULL)", what);
    return tailor_cuda_check(ctx, gpu_make_current(gpu), "cuCtxSetCurrent");
}

tailor_status tailor_gpu_open(tailor_ctx *ctx, int ordinal, tailor_gpu **out)
{
    *out = NULL;
    tailor_gpu *gpu = calloc(1, sizeof *gpu);
    if (!gpu)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "opening CUDA device %d: out of memory",
                                ordinal);
    tailor_status st = tailor_device_query(ctx, ordinal, &gpu->info);
    if (st == TAILOR_OK)
        st = cuda_get_device(ctx, ordinal, &gpu->device);
    if (st != TAILOR_OK) {
        free(gpu);
        return st;
    }
    st = tailor_cuda_check(ctx, api.primary_ctx_retain(&gpu->context, gpu->device),
                           "cuDevicePrimaryCtxRetain");
    if (st != TAILOR_OK) {
        free(gpu);
        return st;
    }
    st = tailor_cuda_check(ctx, api.ctx_set_current(gpu->context), "cuCtxSetCurrent");
    if (st == TAILOR_OK)
        st = tailor_cuda_check(ctx, api.stream_create(&gpu->stream, CU_STREAM_NON_BLOCKING),
                               "cuStreamCreate");
    if (st != TAILOR_OK) {
        api.primary_ctx_release(gpu->device);
        free(gpu);
        return st;
    }
    *out = gpu;
    return TAILOR_OK;
}

void tailor_gpu_close(tailor_gpu *gpu)
{
    if (!gpu)
        return;
    if (gpu_make_current(gpu) == CUDA_SUCCESS) {
        api.stream_synchronize(gpu->stream);
        api.stream_destroy(gpu->stream);
    }
    api.primary_ctx_release(gpu->device);
    free(gpu->grants);
    free(gpu);
}

const tailor_device_info *tailor_gpu_info(const tailor_gpu *gpu) { return &gpu->info; }

CUstream tailor_gpu_stream(const tailor_gpu *gpu) { return gpu->stream; }

tailor_status tailor_gpu_bind(tailor_ctx *ctx, tailor_gpu *gpu)
{
    return gpu_enter(ctx, gpu, "binding a GPU");
}

/* ---- memory -------------------------------------------------------------------------------- */

tailor_status tailor_gpu_alloc(tailor_ctx *ctx, tailor_gpu *gpu, size_t bytes, CUdeviceptr *out)
{
    *out = 0;
    tailor_status st = gpu_enter(ctx, gpu, "allocating device memory");
    if (st != TAILOR_OK)
        return st;
    if (bytes == 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "allocating device memory: the size is 0 bytes");
    CUresult r = api.mem_alloc(out, bytes);
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
        *out = 0;
        return tailor_cuda_check(ctx, r, what);
    }
    return TAILOR_OK;
}

void tailor_gpu_free(tailor_gpu *gpu, CUdeviceptr p)
{
    if (!gpu || !p)
        return;
    if (gpu_make_current(gpu) == CUDA_SUCCESS)
        api.mem_free(p);
}

tailor_status tailor_gpu_upload(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst, const void *src,
                                size_t bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "uploading to the GPU");
    if (st != TAILOR_OK || bytes == 0)
        return st;
    st = tailor_cuda_check(ctx, api.memcpy_htod_async(dst, src, bytes, gpu->stream),
                           "cuMemcpyHtoDAsync");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.stream_synchronize(gpu->stream),
                             "cuStreamSynchronize after an upload");
}

tailor_status tailor_gpu_download(tailor_ctx *ctx, tailor_gpu *gpu, void *dst, CUdeviceptr src,
                                  size_t bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "downloading from the GPU");
    if (st != TAILOR_OK || bytes == 0)
        return st;
    st = tailor_cuda_check(ctx, api.memcpy_dtoh_async(dst, src, bytes, gpu->stream),
                           "cuMemcpyDtoHAsync");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.stream_synchronize(gpu->stream),
                             "cuStreamSynchronize after a download");
}

tailor_status tailor_gpu_memset8(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr p, unsigned char v,
                                 size_t bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "setting device memory");
    if (st != TAILOR_OK || bytes == 0)
        return st;
    return tailor_cuda_check(ctx, api.memset_d8_async(p, v, bytes, gpu->stream),
                             "cuMemsetD8Async");
}

tailor_status tailor_gpu_copy(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst, CUdeviceptr src,
                              size_t bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "copying device memory");
    if (st != TAILOR_OK || bytes == 0)
        return st;
    return tailor_cuda_check(ctx, api.memcpy_dtod_async(dst, src, bytes, gpu->stream),
                             "cuMemcpyDtoDAsync");
}

tailor_status tailor_gpu_sync(tailor_ctx *ctx, tailor_gpu *gpu)
{
    tailor_status st = gpu_enter(ctx, gpu, "synchronizing the GPU");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.stream_synchronize(gpu->stream), "cuStreamSynchronize");
}

tailor_status tailor_gpu_mem_info(tailor_ctx *ctx, tailor_gpu *gpu, size_t *free_bytes,
                                  size_t *total_bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "reading GPU memory use");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.mem_get_info(free_bytes, total_bytes), "cuMemGetInfo");
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* TAILOR_CARVEOUT read: 0 with *pct set (-1 for "driver"), -1 for a malformed value. */
static int read_carveout(int *pct)
{
    const char *v = getenv("TAILOR_CARVEOUT");
    *pct = TAILOR_DEFAULT_CARVEOUT;
    if (!v || !*v)
        return 0;
    if (strcmp(v, "driver") == 0) {
        *pct = -1;
        return 0;
    }
    char *end = NULL;
    long p = strtol(v, &end, 10);
    if (*end || p < 0 || p > 100)
        return -1;
    *pct = (int)p;
    return 0;
}

int tailor_carveout_preference(void)
{
    int pct;
    return read_carveout(&pct) == 0 ? pct : TAILOR_DEFAULT_CARVEOUT;
}

tailor_status tailor_carveout_read(tailor_ctx *ctx, int *pct)
{
    if (read_carveout(pct) == 0)
        return TAILOR_OK;
    *pct = TAILOR_DEFAULT_CARVEOUT;
    return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                            "TAILOR_CARVEOUT='%s' is neither a percentage from 0 to 100 nor "
                            "'driver'", getenv("TAILOR_CARVEOUT"));
}

static tailor_status kernel_set_carveout(tailor_ctx *ctx, CUfunction fn)
{
    int p;
    tailor_status st = tailor_carveout_read(ctx, &p);
    if (st != TAILOR_OK)
        return st;
    if (p < 0)
        return TAILOR_OK;
    return tailor_cuda_check(
        ctx, api.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, (int)p),
        "cuFuncSetAttribute (shared memory carveout)");
}

static tailor_status kernel_read_attributes(tailor_ctx *ctx, tailor_kernel *k)
{
    const struct {
        CUfunction_attribute attr;
        int *field;
        const char *what;
    } attrs[] = {
        {CU_FUNC_ATTRIBUTE_NUM_REGS, &k->regs, "cuFuncGetAttribute (registers)"},
        {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &k->static_smem,
         "cuFuncGetAttribute (static shared memory)"},
        {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &k->local_bytes,
         "cuFuncGetAttribute (local memory)"},
        {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &k->max_threads,
         "cuFuncGetAttribute (max threads per block)"},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        tailor_status st =
            tailor_cuda_check(ctx, api.func_get_attribute(attrs[i].field, attrs[i].attr, k->fn),
                              attrs[i].what);
        if (st != TAILOR_OK)
            return st;
    }
    return TAILOR_OK;
}

tailor_status tailor_gpu_load_kernel(tailor_ctx *ctx, tailor_gpu *gpu, const void *image,
                                     const char *name, tailor_kernel *out)
{
    memset(out, 0, sizeof *out);
    tailor_status st = gpu_enter(ctx, gpu, "loading a kernel");
    if (st != TAILOR_OK)
        return st;
    if (!image || !name || !*name)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "loading a kernel: the image or the kernel name is missing");
    char jit_log[8192];
    jit_log[0] = '\0';
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {jit_log, (void *)(uintptr_t)sizeof jit_log};
    CUresult r = api.module_load_data_ex(&out->module, image, 2, opts, vals);
    if (r != CUDA_SUCCESS) {
        const char *ename, *etext;
        cuda_error_strings(r, &ename, &etext);
        jit_log[sizeof jit_log - 1] = '\0';
        out->module = NULL;
        return tailor_set_error(ctx, TAILOR_ERR_CUDA, "loading the module of kernel '%s': %s (%s)%s%s",
                                name, ename, etext, jit_log[0] ? "; JIT log:\n" : "", jit_log);
    }
    r = api.module_get_function(&out->fn, out->module, name);
    if (r != CUDA_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "kernel '%s' is not in its module (cuModuleGetFunction)", name);
        st = tailor_cuda_check(ctx, r, what);
    } else {
        st = kernel_read_attributes(ctx, out);
    }
    if (st == TAILOR_OK)
        st = kernel_set_carveout(ctx, out->fn);
    if (st != TAILOR_OK) {
        api.module_unload(out->module);
        memset(out, 0, sizeof *out);
    }
    return st;
}

tailor_status tailor_gpu_jit_ptx(tailor_ctx *ctx, tailor_gpu *gpu, const char *ptx, void **cubin,
                                 size_t *size)
{
    *cubin = NULL;
    *size = 0;
    tailor_status st = gpu_enter(ctx, gpu, "compiling PTX for the GPU");
    if (st != TAILOR_OK)
        return st;
    if (!ptx || !*ptx)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "compiling PTX for the GPU: no PTX");
    char jit_log[4096];
    jit_log[0] = '\0';
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {jit_log, (void *)(uintptr_t)sizeof jit_log};
    CUlinkState link = NULL;
    CUresult r = api.link_create(2, opts, vals, &link);
    if (r == CUDA_SUCCESS)
        r = api.link_add_data(link, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1, "tailor.ptx",
                              0, NULL, NULL);
    void *image = NULL;
    size_t image_size = 0;
    if (r == CUDA_SUCCESS)
        r = api.link_complete(link, &image, &image_size);
    if (r == CUDA_SUCCESS) { /* the image belongs to the link state: keep a copy */
        *cubin = malloc(image_size ? image_size : 1);
        if (*cubin) {
            memcpy(*cubin, image, image_size);
            *size = image_size;
        }
    }
    if (link)
        api.link_destroy(link);
    if (r != CUDA_SUCCESS) {
        const char *ename, *etext;
        cuda_error_strings(r, &ename, &etext);
        jit_log[sizeof jit_log - 1] = '\0';
        return tailor_set_error(ctx, TAILOR_ERR_CUDA, "compiling PTX for the GPU (cuLink): %s (%s)%s%s",
                                ename, etext, jit_log[0] ? "; JIT log:\n" : "", jit_log);
    }
    if (!*cubin)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "compiling PTX for the GPU: out of memory");
    return TAILOR_OK;
}

tailor_status tailor_gpu_kernel_global(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_kernel *k,
                                       const char *name, CUdeviceptr *ptr, size_t *bytes)
{
    *ptr = 0;
    *bytes = 0;
    tailor_status st = gpu_enter(ctx, gpu, "looking up a kernel's global");
    if (st != TAILOR_OK)
        return st;
    CUresult r = api.module_get_global(ptr, bytes, k->module, name);
    if (r == CUDA_ERROR_NOT_FOUND)
        return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "the module has no global '%s'", name);
    char what[160];
    snprintf(what, sizeof what, "looking up the global '%s' (cuModuleGetGlobal)", name);
    return tailor_cuda_check(ctx, r, what);
}

static void gpu_forget_grant(tailor_gpu *gpu, CUfunction fn)
{
    for (size_t i = 0; i < gpu->grant_count; i++) {
        if (gpu->grants[i].fn == fn) {
            gpu->grants[i] = gpu->grants[--gpu->grant_count];
            return;
        }
    }
}

void tailor_gpu_unload_kernel(tailor_gpu *gpu, tailor_kernel *k)
{
    if (!k)
        return;
    if (gpu && k->module) {
        gpu_forget_grant(gpu, k->fn);
        if (gpu_make_current(gpu) == CUDA_SUCCESS)
            api.module_unload(k->module);
    }
    memset(k, 0, sizeof *k);
}

/* Raises the kernel's dynamic shared-memory limit to `bytes` unless already that high. */
static tailor_status gpu_grant_smem(tailor_ctx *ctx, tailor_gpu *gpu, CUfunction fn, unsigned bytes)
{
    smem_grant *g = NULL;
    for (size_t i = 0; i < gpu->grant_count; i++)
        if (gpu->grants[i].fn == fn)
            g = &gpu->grants[i];
    if (g && g->bytes >= bytes)
        return TAILOR_OK;
    if (!g) {
        if (gpu->grant_count == gpu->grant_cap) {
            size_t cap = gpu->grant_cap ? gpu->grant_cap * 2 : 16;
            smem_grant *grown = realloc(gpu->grants, cap * sizeof *grown);
            if (!grown)
                return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                        "launching a kernel: out of memory");
            gpu->grants = grown;
            gpu->grant_cap = cap;
        }
        g = &gpu->grants[gpu->grant_count++];
        g->fn = fn;
        g->bytes = 0;
    }
    tailor_status st = tailor_cuda_check(
        ctx, api.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes),
        "cuFuncSetAttribute (max dynamic shared memory)");
    if (st == TAILOR_OK)
        g->bytes = bytes;
    return st;
}

tailor_status tailor_gpu_launch(tailor_ctx *ctx, tailor_gpu *gpu, tailor_kernel *k,
                                const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                                void **args)
{
    tailor_status st = gpu_enter(ctx, gpu, "launching a kernel");
    if (st != TAILOR_OK)
        return st;
    if (!k || !k->fn)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "launching a kernel: it is not loaded");
    unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    if (k->max_threads > 0 && threads > (unsigned long long)k->max_threads)
        return tailor_set_error(ctx, TAILOR_ERR_BUDGET,
                                "launching a kernel: a block of %llu threads exceeds its limit of %d "
                                "(%d registers per thread)",
                                threads, k->max_threads, k->regs);
    unsigned long long total = (unsigned long long)k->static_smem + dyn_smem;
    if (total > (unsigned long long)gpu->info.smem_per_block_optin)
        return tailor_set_error(ctx, TAILOR_ERR_BUDGET,
                                "launching a kernel: %d static + %u dynamic bytes of shared memory "
                                "exceed the opt-in limit of %d bytes per block on %s",
                                k->static_smem, dyn_smem, gpu->info.smem_per_block_optin,
                                gpu->info.name);
    if (total > (unsigned long long)gpu->info.smem_per_block) {
        st = gpu_grant_smem(ctx, gpu, k->fn, dyn_smem);
        if (st != TAILOR_OK)
            return st;
    }
    if (k->pdl && api.launch_kernel_ex) {
        /* programmatic dependent launch: may start while the previous kernel drains; the
         * kernel itself waits (griddepcontrol.wait) before touching memory */
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {grid[0], grid[1], grid[2], block[0], block[1], block[2],
                              dyn_smem, gpu->stream, &attr, 1};
        return tailor_cuda_check(ctx, api.launch_kernel_ex(&cfg, k->fn, args, NULL),
                                 "cuLaunchKernelEx");
    }
    return tailor_cuda_check(ctx,
                             api.launch_kernel(k->fn, grid[0], grid[1], grid[2], block[0], block[1],
                                               block[2], dyn_smem, gpu->stream, args, NULL),
                             "cuLaunchKernel");
}

int tailor_pdl_capable(const tailor_device_info *live, const tailor_device_info *target)
{
    return live->cc_major >= 9 && target->cc_major >= 9;
}

tailor_status tailor_gpu_occupancy(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_kernel *k,
                                   int block_threads, size_t dyn_smem, int *blocks_per_sm)
{
    *blocks_per_sm = 0;
    tailor_status st = gpu_enter(ctx, gpu, "computing occupancy");
    if (st != TAILOR_OK)
        return st;
    if (!k || !k->fn)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "computing occupancy: the kernel is not loaded");
    return tailor_cuda_check(
        ctx, api.occupancy_max_active_blocks(blocks_per_sm, k->fn, block_threads, dyn_smem),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor");
}

/* ---- marks ---------------------------------------------------------------------------------- */

/* Records ev at the end of the gpu's stream (a mark, or a timer's start or stop). */
static tailor_status record_event(tailor_ctx *ctx, tailor_gpu *gpu, CUevent ev, const char *what)
{
    tailor_status st = gpu_enter(ctx, gpu, what);
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.event_record(ev, gpu->stream), "cuEventRecord");
}

tailor_status tailor_gpu_mark_create(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_mark *m)
{
    m->ev = NULL;
    tailor_status st = gpu_enter(ctx, gpu, "creating a mark");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.event_create(&m->ev, CU_EVENT_DISABLE_TIMING),
                             "cuEventCreate (mark)");
}

tailor_status tailor_gpu_mark_record(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_mark *m)
{
    return record_event(ctx, gpu, m->ev, "recording a mark");
}

tailor_status tailor_gpu_mark_wait(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_mark *m)
{
    tailor_status st = gpu_enter(ctx, gpu, "waiting for a mark");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.event_synchronize(m->ev), "cuEventSynchronize (mark)");
}

void tailor_gpu_mark_destroy(tailor_gpu *gpu, tailor_gpu_mark *m)
{
    if (!m)
        return;
    if (m->ev && gpu && gpu_make_current(gpu) == CUDA_SUCCESS)
        api.event_destroy(m->ev);
    m->ev = NULL;
}

/* ---- timing -------------------------------------------------------------------------------- */

tailor_status tailor_gpu_timer_create(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_timer *t)
{
    memset(t, 0, sizeof *t);
    tailor_status st = gpu_enter(ctx, gpu, "creating a timer");
    if (st != TAILOR_OK)
        return st;
    st = tailor_cuda_check(ctx, api.event_create(&t->start, CU_EVENT_DEFAULT), "cuEventCreate");
    if (st == TAILOR_OK)
        st = tailor_cuda_check(ctx, api.event_create(&t->stop, CU_EVENT_DEFAULT), "cuEventCreate");
    if (st != TAILOR_OK)
        tailor_gpu_timer_destroy(gpu, t);
    return st;
}

tailor_status tailor_gpu_timer_start(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_timer *t)
{
    return record_event(ctx, gpu, t->start, "starting a timer");
}

tailor_status tailor_gpu_timer_stop(tailor_ctx *ctx, tailor_gpu *gpu, tailor_gpu_timer *t)
{
    return record_event(ctx, gpu, t->stop, "stopping a timer");
}

tailor_status tailor_gpu_timer_elapsed_ms(tailor_ctx *ctx, tailor_gpu_timer *t, float *ms)
{
    *ms = 0.0f;
    tailor_status st = tailor_cuda_check(ctx, api.event_synchronize(t->stop), "cuEventSynchronize");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx, api.event_elapsed_time(ms, t->start, t->stop),
                             "cuEventElapsedTime");
}

void tailor_gpu_timer_destroy(tailor_gpu *gpu, tailor_gpu_timer *t)
{
    if (!t)
        return;
    if (gpu && gpu_make_current(gpu) == CUDA_SUCCESS) {
        if (t->start)
            api.event_destroy(t->start);
        if (t->stop)
            api.event_destroy(t->stop);
    }
    memset(t, 0, sizeof *t);
}

/* ---- copy bandwidth ------------------------------------------------------------------------ */

#define BW_MIN_BYTES ((size_t)256 << 20)
#define BW_RESERVE_BYTES ((size_t)64 << 20) /* left free for the context and others */
#define BW_REPS 20
#define BW_WARMUP 3

static int compare_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Buffer size: above 2x L2 and at least 256 MiB, shrunk to what is free (never below 2x L2). */
static tailor_status bw_buffer_size(tailor_ctx *ctx, tailor_gpu *gpu, size_t *bytes)
{
    size_t above_l2 = 2 * (size_t)gpu->info.l2_bytes + ((size_t)1 << 20);
    size_t want = above_l2 > BW_MIN_BYTES ? above_l2 : BW_MIN_BYTES;
    size_t free_b = 0, total_b = 0;
    tailor_status st = tailor_gpu_mem_info(ctx, gpu, &free_b, &total_b);
    if (st != TAILOR_OK)
        return st;
    size_t usable = free_b > BW_RESERVE_BYTES ? (free_b - BW_RESERVE_BYTES) / 2 : 0;
    if (want > usable)
        want = usable & ~(((size_t)1 << 20) - 1);
    if (want < above_l2)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM,
                                "measuring copy bandwidth: %zu bytes free on %s, two buffers of "
                                "%zu bytes (2x L2) are needed",
                                free_b, gpu->info.name, above_l2);
    *bytes = want;
    return TAILOR_OK;
}

/* Times BW_REPS copies src -> dst one by one into ms[]. */
static tailor_status bw_time_copies(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst,
                                    CUdeviceptr src, size_t bytes, float *ms)
{
    tailor_gpu_timer t;
    tailor_status st = tailor_gpu_timer_create(ctx, gpu, &t);
    for (int i = 0; i < BW_WARMUP && st == TAILOR_OK; i++)
        st = tailor_gpu_copy(ctx, gpu, dst, src, bytes);
    if (st == TAILOR_OK)
        st = tailor_gpu_sync(ctx, gpu);
    for (int i = 0; i < BW_REPS && st == TAILOR_OK; i++) {
        st = tailor_gpu_timer_start(ctx, gpu, &t);
        if (st == TAILOR_OK)
            st = tailor_gpu_copy(ctx, gpu, dst, src, bytes);
        if (st == TAILOR_OK)
            st = tailor_gpu_timer_stop(ctx, gpu, &t);
        if (st == TAILOR_OK)
            st = tailor_gpu_timer_elapsed_ms(ctx, &t, &ms[i]);
    }
    tailor_gpu_timer_destroy(gpu, &t);
    return st;
}

tailor_status tailor_gpu_copy_bandwidth(tailor_ctx *ctx, tailor_gpu *gpu, double *bytes_per_s)
{
    *bytes_per_s = 0.0;
    tailor_status st = gpu_enter(ctx, gpu, "measuring copy bandwidth");
    size_t bytes = 0;
    if (st == TAILOR_OK)
        st = bw_buffer_size(ctx, gpu, &bytes);
    if (st != TAILOR_OK)
        return st;
    CUdeviceptr a = 0, b = 0;
    float ms[BW_REPS];
    st = tailor_gpu_alloc(ctx, gpu, bytes, &a);
    if (st == TAILOR_OK)
        st = tailor_gpu_alloc(ctx, gpu, bytes, &b);
    if (st == TAILOR_OK) /* not zeros: some memory systems compress them */
        st = tailor_gpu_memset8(ctx, gpu, a, 0x5a, bytes);
    if (st == TAILOR_OK)
        st = tailor_gpu_memset8(ctx, gpu, b, 0xa5, bytes);
    if (st == TAILOR_OK)
        st = bw_time_copies(ctx, gpu, b, a, bytes, ms);
    tailor_gpu_free(gpu, a);
    tailor_gpu_free(gpu, b);
    if (st != TAILOR_OK)
        return st;
    qsort(ms, BW_REPS, sizeof ms[0], compare_float);
    double median_ms = 0.5 * ((double)ms[BW_REPS / 2 - 1] + (double)ms[BW_REPS / 2]);
    if (median_ms <= 0.0)
        return tailor_set_error(ctx, TAILOR_ERR_CUDA,
                                "measuring copy bandwidth: the events measured %.6f ms", median_ms);
    *bytes_per_s = 2.0 * (double)bytes / (median_ms * 1e-3);
    return TAILOR_OK;
}

/* ---- pinned host memory, asynchronous copies, CUDA graphs (added for the Gemma 4 runtime) -- */

tailor_status tailor_gpu_host_alloc(tailor_ctx *ctx, tailor_gpu *gpu, size_t bytes, void **out)
{
    *out = NULL;
    tailor_status st = gpu_enter(ctx, gpu, "allocating pinned host memory");
    if (st != TAILOR_OK)
        return st;
    if (bytes == 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "allocating pinned host memory: the size is 0 bytes");
    char what[96];
    snprintf(what, sizeof what, "cuMemAllocHost of %zu bytes", bytes);
    st = tailor_cuda_check(ctx, api.mem_alloc_host(out, bytes), what);
    if (st != TAILOR_OK)
        *out = NULL;
    return st;
}

void tailor_gpu_host_free(tailor_gpu *gpu, void *p)
{
    if (!gpu || !p)
        return;
    if (gpu_make_current(gpu) == CUDA_SUCCESS)
        api.mem_free_host(p);
}

tailor_status tailor_gpu_upload_async(tailor_ctx *ctx, tailor_gpu *gpu, CUdeviceptr dst,
                                      const void *src, size_t bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "uploading to the GPU");
    if (st != TAILOR_OK || bytes == 0)
        return st;
    return tailor_cuda_check(ctx, api.memcpy_htod_async(dst, src, bytes, gpu->stream),
                             "cuMemcpyHtoDAsync");
}

tailor_status tailor_gpu_download_async(tailor_ctx *ctx, tailor_gpu *gpu, void *dst,
                                        CUdeviceptr src, size_t bytes)
{
    tailor_status st = gpu_enter(ctx, gpu, "downloading from the GPU");
    if (st != TAILOR_OK || bytes == 0)
        return st;
    return tailor_cuda_check(ctx, api.memcpy_dtoh_async(dst, src, bytes, gpu->stream),
                             "cuMemcpyDtoHAsync");
}

tailor_status tailor_gpu_capture_begin(tailor_ctx *ctx, tailor_gpu *gpu)
{
    tailor_status st = gpu_enter(ctx, gpu, "starting a stream capture");
    if (st != TAILOR_OK)
        return st;
    return tailor_cuda_check(ctx,
                             api.stream_begin_capture(gpu->stream,
                                                      CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                             "cuStreamBeginCapture");
}

tailor_status tailor_gpu_capture_end(tailor_ctx *ctx, tailor_gpu *gpu, int keep,
                                     tailor_gpu_graph *out)
{
    memset(out, 0, sizeof *out);
    tailor_status st = gpu_enter(ctx, gpu, "ending a stream capture");
    if (st != TAILOR_OK)
        return st;
    CUgraph g = NULL;
    st = tailor_cuda_check(ctx, api.stream_end_capture(gpu->stream, &g), "cuStreamEndCapture");
    if (st != TAILOR_OK || !keep) {
        if (g)
            api.graph_destroy(g);
        return st;
    }
    CUgraphExec e = NULL;
    st = tailor_cuda_check(ctx, api.graph_instantiate(&e, g, 0), "cuGraphInstantiateWithFlags");
    /* uploaded now, on the stream, so that its first launch costs what the others do */
    if (st == TAILOR_OK && api.graph_upload)
        st = tailor_cuda_check(ctx, api.graph_upload(e, gpu->stream), "cuGraphUpload");
    if (st != TAILOR_OK) {
        if (e)
            api.graph_exec_destroy(e);
        api.graph_destroy(g);
        return st;
    }
    out->graph = g;
    out->exec = e;
    return TAILOR_OK;
}

tailor_status tailor_gpu_graph_launch(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_gpu_graph *g)
{
    tailor_status st = gpu_enter(ctx, gpu, "launching a CUDA graph");
    if (st != TAILOR_OK)
        return st;
    if (!g || !g->exec)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "launching a CUDA graph: it was not instantiated");
    return tailor_cuda_check(ctx, api.graph_launch(g->exec, gpu->stream), "cuGraphLaunch");
}

tailor_status tailor_gpu_graph_time(tailor_ctx *ctx, tailor_gpu *gpu, const tailor_gpu_graph *g,
                                    int per_replay, int replays, double *samples)
{
    tailor_gpu_timer t;
    tailor_status st = tailor_gpu_timer_create(ctx, gpu, &t);
    if (st)
        return st;
    for (int b = 0; b < replays && st == TAILOR_OK; b++) {
        float ms = 0;
        st = tailor_gpu_timer_start(ctx, gpu, &t);
        if (st == TAILOR_OK)
            st = tailor_gpu_graph_launch(ctx, gpu, g);
        if (st == TAILOR_OK)
            st = tailor_gpu_timer_stop(ctx, gpu, &t);
        if (st == TAILOR_OK)
            st = tailor_gpu_timer_elapsed_ms(ctx, &t, &ms);
        samples[b] = 1000.0 * (double)ms / per_replay;
    }
    tailor_gpu_timer_destroy(gpu, &t);
    return st;
}

void tailor_gpu_graph_destroy(tailor_gpu *gpu, tailor_gpu_graph *g)
{
    if (!gpu || !g)
        return;
    if (gpu_make_current(gpu) == CUDA_SUCCESS) {
        if (g->exec)
            api.graph_exec_destroy(g->exec);
        if (g->graph)
            api.graph_destroy(g->graph);
    }
    memset(g, 0, sizeof *g);
}
