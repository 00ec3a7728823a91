/* test_gpu_cuda.c — the driver layer on a real GPU: facts, memory round trips, a hand-written PTX
 * kernel, timers, launches above 48 KiB of dynamic shared memory, copy bandwidth. Skips (77)
 * without a driver or a device. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda.h"
#include "device.h"
#include "testlib.h"

#define SEED 20261202u

/* y[i] = a * x[i] + b for i < n; and a kernel that fills `words` 32-bit words of dynamic shared
 * memory with i*3+1, then writes them out reversed (out[i] = smem[words-1-i]). */
static const char kernels_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".extern .shared .align 16 .b8 dsmem[];\n"
    "\n"
    ".visible .entry saxpb(.param .u64 p_y, .param .u64 p_x, .param .f32 p_a, .param .f32 p_b,\n"
    "                      .param .u32 p_n)\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .f32 %f<5>;\n"
    "    .reg .b64 %rd<8>;\n"
    "    ld.param.u64 %rd1, [p_y];\n"
    "    ld.param.u64 %rd2, [p_x];\n"
    "    ld.param.f32 %f1, [p_a];\n"
    "    ld.param.f32 %f2, [p_b];\n"
    "    ld.param.u32 %r1, [p_n];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    setp.ge.u32 %p1, %r5, %r1;\n"
    "    @%p1 bra SAXPB_DONE;\n"
    "    cvta.to.global.u64 %rd3, %rd2;\n"
    "    cvta.to.global.u64 %rd4, %rd1;\n"
    "    mul.wide.u32 %rd5, %r5, 4;\n"
    "    add.s64 %rd6, %rd3, %rd5;\n"
    "    ld.global.f32 %f3, [%rd6];\n"
    "    fma.rn.f32 %f4, %f1, %f3, %f2;\n"
    "    add.s64 %rd7, %rd4, %rd5;\n"
    "    st.global.f32 [%rd7], %f4;\n"
    "SAXPB_DONE:\n"
    "    ret;\n"
    "}\n"
    "\n"
    ".visible .entry smem_reverse(.param .u64 p_out, .param .u32 p_words)\n"
    "{\n"
    "    .reg .pred %p<3>;\n"
    "    .reg .b32 %r<12>;\n"
    "    .reg .b64 %rd<4>;\n"
    "    ld.param.u64 %rd1, [p_out];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    ld.param.u32 %r1, [p_words];\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r9, dsmem;\n"
    "    mov.u32 %r4, %r2;\n"
    "FILL:\n"
    "    setp.ge.u32 %p1, %r4, %r1;\n"
    "    @%p1 bra FILLED;\n"
    "    mul.lo.u32 %r5, %r4, 3;\n"
    "    add.u32 %r5, %r5, 1;\n"
    "    shl.b32 %r6, %r4, 2;\n"
    "    add.u32 %r7, %r9, %r6;\n"
    "    st.shared.u32 [%r7], %r5;\n"
    "    add.u32 %r4, %r4, %r3;\n"
    "    bra FILL;\n"
    "FILLED:\n"
    "    bar.sync 0;\n"
    "    mov.u32 %r4, %r2;\n"
    "READ:\n"
    "    setp.ge.u32 %p2, %r4, %r1;\n"
    "    @%p2 bra REVERSE_DONE;\n"
    "    sub.u32 %r8, %r1, 1;\n"
    "    sub.u32 %r8, %r8, %r4;\n"
    "    shl.b32 %r6, %r8, 2;\n"
    "    add.u32 %r7, %r9, %r6;\n"
    "    ld.shared.u32 %r10, [%r7];\n"
    "    mul.wide.u32 %rd2, %r4, 4;\n"
    "    add.s64 %rd3, %rd1, %rd2;\n"
    "    st.global.u32 [%rd3], %r10;\n"
    "    add.u32 %r4, %r4, %r3;\n"
    "    bra READ;\n"
    "REVERSE_DONE:\n"
    "    ret;\n"
    "}\n";

static void check_facts(const tailor_device_info *d)
{
    char fp[256];
    tailor_device_fingerprint(d, fp, sizeof fp);
    printf("device 0: %s, sm_%d%d, %d SMs, opt-in %d B, per SM %d B, L2 %lld B, %lld B memory, "
           "clock %d kHz, bus %d, driver %d, NVRTC %d.%d, UUID %s\nfingerprint: %s\n",
           d->name, d->cc_major, d->cc_minor, d->sm_count, d->smem_per_block_optin, d->smem_per_sm,
           d->l2_bytes, d->mem_bytes, d->mem_clock_khz, d->mem_bus_bits, d->driver_version,
           d->nvrtc_major, d->nvrtc_minor, d->uuid, fp);
    CHECK(d->is_live && d->ordinal == 0 && d->kind == TAILOR_DEVICE_GPU);
    CHECK(d->cc_major >= 7 && d->sm_count > 0 && d->warp_size == 32);
    CHECK(d->smem_per_block == 49152 && d->smem_per_block_optin >= d->smem_per_block);
    CHECK(d->smem_per_sm >= d->smem_per_block_optin);
    CHECK(d->regs_per_block > 0 && d->max_threads_per_block == 1024);
    CHECK(d->l2_bytes > 0 && d->mem_bytes > (1LL << 30));
    CHECK(d->driver_version >= 12000 && d->nvrtc_major >= 12);
    CHECK(strlen(d->uuid) == 36 && strcmp(d->source, "driver") == 0);
    CHECK(strncmp(fp, d->name, strlen(d->name)) == 0);

    /* A card with a profile must read as its profile says (the table is checked against it). */
    int n = 0;
    const tailor_device_info *p = tailor_device_profiles(&n);
    for (int i = 0; i < n; i++) {
        if (strcmp(p[i].name, d->name) != 0)
            continue;
        printf("matches profile '%s': comparing\n", p[i].short_name);
        CHECK(p[i].cc_major == d->cc_major && p[i].cc_minor == d->cc_minor);
        CHECKF(p[i].sm_count == d->sm_count, "SMs %d vs profile %d", d->sm_count, p[i].sm_count);
        CHECK(p[i].smem_per_block_optin == d->smem_per_block_optin);
        CHECK(p[i].smem_per_sm == d->smem_per_sm);
        CHECK(p[i].regs_per_block == d->regs_per_block && p[i].regs_per_sm == d->regs_per_sm);
        CHECK(p[i].max_threads_per_sm == d->max_threads_per_sm);
        CHECKF(p[i].l2_bytes == d->l2_bytes, "L2 %lld vs profile %lld", d->l2_bytes, p[i].l2_bytes);
        CHECK(d->mem_bus_bits == 0 || p[i].mem_bus_bits == d->mem_bus_bits); /* 0: not reported */
    }
}

static void test_memory(tailor_ctx *ctx, tailor_gpu *gpu, test_rng *rng)
{
    enum { N = 1 << 20 };
    float *host = malloc(N * sizeof *host), *back = malloc(N * sizeof *back);
    CHECK(host && back);
    if (!host || !back) {
        free(host);
        free(back);
        return;
    }
    for (int i = 0; i < N; i++)
        host[i] = test_rng_uniform(rng, -4.0f, 4.0f);
    CUdeviceptr a = 0, b = 0;
    CHECK_OK(ctx, tailor_gpu_alloc(ctx, gpu, N * sizeof(float), &a));
    CHECK_OK(ctx, tailor_gpu_alloc(ctx, gpu, N * sizeof(float), &b));
    CHECK(a != 0 && b != 0 && a != b);
    CHECK_OK(ctx, tailor_gpu_upload(ctx, gpu, a, host, N * sizeof(float)));
    memset(back, 0, N * sizeof(float));
    CHECK_OK(ctx, tailor_gpu_download(ctx, gpu, back, a, N * sizeof(float)));
    CHECK(memcmp(host, back, N * sizeof(float)) == 0);

    CHECK_OK(ctx, tailor_gpu_memset8(ctx, gpu, b, 0x3c, N * sizeof(float)));
    CHECK_OK(ctx, tailor_gpu_copy(ctx, gpu, b, a, (N / 2) * sizeof(float)));
    CHECK_OK(ctx, tailor_gpu_download(ctx, gpu, back, b, N * sizeof(float)));
    CHECK(memcmp(host, back, (N / 2) * sizeof(float)) == 0);
    const unsigned char *tail = (const unsigned char *)(back + N / 2);
    int tail_ok = 1;
    for (size_t i = 0; i < (N / 2) * sizeof(float); i++)
        tail_ok &= tail[i] == 0x3c;
    CHECK(tail_ok);

    size_t free_b = 0, total_b = 0;
    CHECK_OK(ctx, tailor_gpu_mem_info(ctx, gpu, &free_b, &total_b));
    long long mem = tailor_gpu_info(gpu)->mem_bytes;
    CHECKF(free_b > 0 && free_b <= total_b && (long long)total_b <= mem &&
               (double)total_b > 0.9 * (double)mem,
           "free %zu, total %zu, device memory %lld", free_b, total_b, mem);

    CUdeviceptr none = 1;
    CHECK(tailor_gpu_alloc(ctx, gpu, 0, &none) == TAILOR_ERR_MISUSE && none == 0);
    CHECK(tailor_gpu_alloc(ctx, gpu, (size_t)1 << 62, &none) == TAILOR_ERR_CUDA);
    printf("4 EiB alloc: %s\n", tailor_ctx_message(ctx));
    tailor_gpu_free(gpu, a);
    tailor_gpu_free(gpu, b);
    free(host);
    free(back);
}

static void test_saxpb(tailor_ctx *ctx, tailor_gpu *gpu, test_rng *rng)
{
    tailor_kernel k;
    CHECK_OK(ctx, tailor_gpu_load_kernel(ctx, gpu, kernels_ptx, "saxpb", &k));
    if (!k.fn)
        return;
    printf("saxpb: %d regs, %d static smem, %d local, max %d threads\n", k.regs, k.static_smem,
           k.local_bytes, k.max_threads);
    CHECK(k.regs > 0 && k.static_smem == 0 && k.local_bytes == 0 && k.max_threads >= 256);
    int blocks = 0;
    CHECK_OK(ctx, tailor_gpu_occupancy(ctx, gpu, &k, 256, 0, &blocks));
    CHECK(blocks >= 1);

    unsigned n = 1u << 24;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    CHECK(x && y);
    if (!x || !y) {
        free(x);
        free(y);
        return;
    }
    CUdeviceptr dx = 0, dy = 0;
    CHECK_OK(ctx, tailor_gpu_alloc(ctx, gpu, n * sizeof(float), &dx));
    CHECK_OK(ctx, tailor_gpu_alloc(ctx, gpu, n * sizeof(float), &dy));
    for (unsigned i = 0; i < n; i++)
        x[i] = test_rng_uniform(rng, -1.0f, 1.0f);
    CHECK_OK(ctx, tailor_gpu_upload(ctx, gpu, dx, x, n * sizeof(float)));
    CHECK_OK(ctx, tailor_gpu_memset8(ctx, gpu, dy, 0xff, n * sizeof(float))); /* NaN poison */

    float a = 1.5f, b = -0.25f;
    void *args[] = {&dy, &dx, &a, &b, &n};
    unsigned grid[3] = {(n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    tailor_gpu_timer t;
    CHECK_OK(ctx, tailor_gpu_timer_create(ctx, gpu, &t));
    CHECK_OK(ctx, tailor_gpu_timer_start(ctx, gpu, &t));
    CHECK_OK(ctx, tailor_gpu_launch(ctx, gpu, &k, grid, block, 0, args));
    CHECK_OK(ctx, tailor_gpu_timer_stop(ctx, gpu, &t));
    float ms = -1.0f;
    CHECK_OK(ctx, tailor_gpu_timer_elapsed_ms(ctx, &t, &ms));
    printf("saxpb over %u floats: %.4f ms\n", n, (double)ms);
    CHECK(ms > 0.0f && ms < 1000.0f);
    tailor_gpu_timer_destroy(gpu, &t);
    CHECK(t.start == NULL && t.stop == NULL);

    CHECK_OK(ctx, tailor_gpu_download(ctx, gpu, y, dy, n * sizeof(float)));
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += !(y[i] == fmaf(a, x[i], b));
    CHECKF(bad == 0, "%u of %u results wrong (y[0]=%g want %g)", bad, n, (double)y[0],
           (double)fmaf(a, x[0], b));

    unsigned big[3] = {2048, 1, 1};
    CHECK(tailor_gpu_launch(ctx, gpu, &k, grid, big, 0, args) == TAILOR_ERR_BUDGET);
    tailor_gpu_free(gpu, dx);
    tailor_gpu_free(gpu, dy);
    free(x);
    free(y);
    tailor_gpu_unload_kernel(gpu, &k);
    CHECK(k.fn == NULL && k.module == NULL);
}

/* Runs smem_reverse with `bytes` of dynamic shared memory and checks every word. */
static void run_smem_reverse(tailor_ctx *ctx, tailor_gpu *gpu, tailor_kernel *k, unsigned bytes)
{
    unsigned words = bytes / 4;
    CUdeviceptr out = 0;
    CHECK_OK(ctx, tailor_gpu_alloc(ctx, gpu, bytes, &out));
    CHECK_OK(ctx, tailor_gpu_memset8(ctx, gpu, out, 0, bytes));
    void *args[] = {&out, &words};
    unsigned grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
    CHECK_OK(ctx, tailor_gpu_launch(ctx, gpu, k, grid, block, bytes, args));
    CHECK_OK(ctx, tailor_gpu_sync(ctx, gpu));
    uint32_t *host = calloc(words, sizeof *host);
    CHECK(host != NULL);
    if (!host) {
        tailor_gpu_free(gpu, out);
        return;
    }
    CHECK_OK(ctx, tailor_gpu_download(ctx, gpu, host, out, bytes));
    unsigned bad = 0;
    for (unsigned i = 0; i < words; i++)
        bad += host[i] != (words - 1 - i) * 3u + 1u;
    CHECKF(bad == 0, "%u of %u shared-memory words wrong at %u dynamic bytes", bad, words, bytes);
    printf("smem_reverse with %u dynamic bytes: %u words ok\n", bytes, words - bad);
    free(host);
    tailor_gpu_free(gpu, out);
}

static void test_dynamic_smem(tailor_ctx *ctx, tailor_gpu *gpu)
{
    const tailor_device_info *d = tailor_gpu_info(gpu);
    tailor_kernel k;
    CHECK_OK(ctx, tailor_gpu_load_kernel(ctx, gpu, kernels_ptx, "smem_reverse", &k));
    if (!k.fn)
        return;
    run_smem_reverse(ctx, gpu, &k, 16384);
    if (d->smem_per_block_optin > d->smem_per_block) {
        unsigned optin = (unsigned)(d->smem_per_block_optin - k.static_smem);
        run_smem_reverse(ctx, gpu, &k, optin);
        run_smem_reverse(ctx, gpu, &k, 64 * 1024 < optin ? 64 * 1024 : optin); /* already granted */
    } else {
        printf("opt-in equals the default here: no launch above 48 KiB\n");
    }
    unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    unsigned words = 1;
    CUdeviceptr out = 0;
    void *args[] = {&out, &words};
    tailor_status st = tailor_gpu_launch(ctx, gpu, &k, grid, block,
                                         (unsigned)d->smem_per_block_optin + 4, args);
    CHECKF(st == TAILOR_ERR_BUDGET && strstr(tailor_ctx_message(ctx), "opt-in"), "%s: %s",
           tailor_status_name(st), tailor_ctx_message(ctx));
    tailor_gpu_unload_kernel(gpu, &k);
}

static void test_bad_kernels(tailor_ctx *ctx, tailor_gpu *gpu)
{
    tailor_kernel k;
    tailor_status st = tailor_gpu_load_kernel(ctx, gpu, kernels_ptx, "no_such_kernel", &k);
    CHECKF(st == TAILOR_ERR_CUDA && strstr(tailor_ctx_message(ctx), "no_such_kernel"), "%s",
           tailor_ctx_message(ctx));
    CHECK(k.module == NULL && k.fn == NULL);
    static const char broken[] = ".version 7.0\n.target sm_75\n.address_size 64\n"
                                 ".visible .entry broken()\n{\n    frobnicate.u32 %r1;\n    ret;\n}\n";
    st = tailor_gpu_load_kernel(ctx, gpu, broken, "broken", &k);
    printf("broken PTX: %s\n", tailor_ctx_message(ctx));
    CHECK(st == TAILOR_ERR_CUDA);
    CHECK(strstr(tailor_ctx_message(ctx), "JIT log") != NULL);
}

/* The shared-memory carveout every kernel prefers (runtime/cuda.c: 25 % unless TAILOR_CARVEOUT
 * says otherwise): a percentage or "driver" loads, anything else is refused naming the value. */
static void test_carveout(tailor_ctx *ctx, tailor_gpu *gpu)
{
    static const char *const good[] = {"0", "50", "100", "driver"};
    tailor_kernel k;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("TAILOR_CARVEOUT", good[i], 1);
        tailor_status st = tailor_gpu_load_kernel(ctx, gpu, kernels_ptx, "saxpb", &k);
        CHECKF(st == TAILOR_OK, "TAILOR_CARVEOUT=%s: %s", good[i], tailor_ctx_message(ctx));
        if (st == TAILOR_OK)
            tailor_gpu_unload_kernel(gpu, &k);
    }
    setenv("TAILOR_CARVEOUT", "half", 1);
    tailor_status st = tailor_gpu_load_kernel(ctx, gpu, kernels_ptx, "saxpb", &k);
    CHECKF(st == TAILOR_ERR_MISUSE && strstr(tailor_ctx_message(ctx), "TAILOR_CARVEOUT='half'"),
           "TAILOR_CARVEOUT=half: %s", tailor_ctx_message(ctx));
    CHECK(k.module == NULL && k.fn == NULL);
    unsetenv("TAILOR_CARVEOUT");
}

static void test_bandwidth(tailor_ctx *ctx, tailor_gpu *gpu)
{
    double bw = 0.0;
    CHECK_OK(ctx, tailor_gpu_copy_bandwidth(ctx, gpu, &bw));
    double peak = tailor_device_peak_bandwidth(tailor_gpu_info(gpu));
    printf("copy bandwidth: %.1f GB/s (peak from clock and bus: %.1f GB/s)\n", bw / 1e9, peak / 1e9);
    CHECK(bw > 50e9);
    if (peak > 0) /* loose: the driver's memory clock is not exact, a factor-2 slip is not */
        CHECK(bw < 1.5 * peak);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    int count = 0;
    if (tailor_cuda_load(ctx) != TAILOR_OK)
        test_skip(tailor_ctx_message(ctx));
    if (tailor_device_count(ctx, &count) != TAILOR_OK || count == 0)
        test_skip("the driver sees no GPU");
    printf("seed %u\n", SEED);
    test_rng rng;
    test_rng_seed(&rng, SEED);

    tailor_gpu *gpu = NULL;
    CHECK(tailor_gpu_open(ctx, count, &gpu) == TAILOR_ERR_NO_DEVICE && gpu == NULL);
    CHECK_OK(ctx, tailor_gpu_open(ctx, 0, &gpu));
    if (!gpu)
        return test_finish("test_gpu_cuda");
    CHECK(tailor_gpu_stream(gpu) != NULL);
    CHECK_OK(ctx, tailor_gpu_bind(ctx, gpu));
    check_facts(tailor_gpu_info(gpu));
    test_memory(ctx, gpu, &rng);
    test_saxpb(ctx, gpu, &rng);
    test_dynamic_smem(ctx, gpu);
    test_bad_kernels(ctx, gpu);
    test_carveout(ctx, gpu);
    test_bandwidth(ctx, gpu);
    CHECK_OK(ctx, tailor_gpu_sync(ctx, gpu));
    tailor_gpu_close(gpu);
    tailor_gpu_close(NULL);
    tailor_ctx_destroy(ctx);
    return test_finish("test_gpu_cuda");
}
