/* test_device.c — the profile table (complete, sane, the vendor numbers), lookup, --device
 * resolution, fingerprints and the no-driver message; runs with or without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "device.h"
#include "testlib.h"

/* Independent expectations per profile: compute capability, opt-in and per-SM shared memory,
 * threads per SM, SMs, bus width, memory in GiB and datasheet bandwidth (bytes/s). */
typedef struct expected {
    const char *short_name;
    int cc;
    int optin, per_sm, threads_sm, sms, bus, mem_gib;
    double bandwidth;
} expected;

static const expected gpus[] = {
    {"t4", 75, 65536, 65536, 1024, 40, 256, 16, 320e9},
    {"l4", 89, 101376, 102400, 1536, 58, 192, 24, 300e9},
    {"a10g", 86, 101376, 102400, 1536, 80, 384, 24, 600e9},
    {"a100-40gb", 80, 166912, 167936, 2048, 108, 5120, 40, 1555e9},
    {"a100-80gb", 80, 166912, 167936, 2048, 108, 5120, 80, 2039e9},
    {"h100", 90, 232448, 233472, 2048, 132, 5120, 80, 3.35e12},
    {"h200", 90, 232448, 233472, 2048, 132, 6016, 141, 4.8e12}, /* bus as the live card reports it (6 stacks, 6016 bits) */
    {"rtx3090", 86, 101376, 102400, 1536, 82, 384, 24, 936e9},
    {"rtx4090", 89, 101376, 102400, 1536, 128, 384, 24, 1008e9},
};

static int is_lower_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
            return 0;
    return 1;
}

static void test_profiles_complete(void)
{
    int n = 0;
    const tailor_device_info *p = tailor_device_profiles(&n);
    CHECKF(n == 11, "%d profiles, expected 9 GPUs + 2 TPUs", n);
    for (int i = 0; i < n; i++) {
        const tailor_device_info *d = &p[i];
        CHECKF(d->name[0] != '\0', "profile %d has no name", i);
        CHECKF(is_lower_name(d->short_name), "profile '%s': short name not lowercase", d->short_name);
        CHECKF(strlen(d->source) > 20 && strcmp(d->source, "driver") != 0,
               "profile '%s': no vendor source", d->short_name);
        CHECKF(!d->is_live && d->ordinal == -1, "profile '%s' claims to be live", d->short_name);
        CHECKF(d->driver_version == 0 && d->nvrtc_major == 0, "profile '%s' has versions",
               d->short_name);
        CHECK(d->mem_bytes >= 16LL << 30);
        CHECK(d->sm_count > 0);
        CHECK(d->smem_per_block_optin >= d->smem_per_block);
        CHECK(d->smem_per_sm >= d->smem_per_block_optin);
        for (int j = 0; j < i; j++)
            CHECKF(strcmp(p[j].short_name, d->short_name) != 0, "duplicate '%s'", d->short_name);
        if (d->kind == TAILOR_DEVICE_TPU) {
            CHECKF(d->smem_per_block_optin == 128 << 20, "%s VMEM %d", d->short_name,
                   d->smem_per_block_optin);
            CHECK(d->regs_per_block == 0 && d->regs_per_sm == 0);
            CHECK(d->max_threads_per_block == 0 && d->max_threads_per_sm == 0);
            continue;
        }
        CHECKF(d->smem_per_block == 49152, "%s default smem %d", d->short_name, d->smem_per_block);
        CHECK(d->regs_per_block == 65536 && d->regs_per_sm == 65536);
        CHECK(d->max_threads_per_block == 1024 && d->warp_size == 32);
        CHECKF(d->l2_bytes >= 4LL << 20 && d->l2_bytes % (1 << 20) == 0, "%s L2 %lld",
               d->short_name, d->l2_bytes);
        CHECK(d->mem_clock_khz > 1000000 && d->mem_bus_bits > 0);
    }
}

static void test_vendor_numbers(void)
{
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        const expected *e = &gpus[i];
        const tailor_device_info *d = tailor_device_profile_find(e->short_name);
        CHECKF(d != NULL, "profile '%s' missing", e->short_name);
        if (!d)
            continue;
        CHECK(d->kind == TAILOR_DEVICE_GPU);
        CHECKF(tailor_device_sm(d) == e->cc, "%s: sm %d", e->short_name, tailor_device_sm(d));
        CHECKF(d->smem_per_block_optin == e->optin, "%s: opt-in %d, expected %d", e->short_name,
               d->smem_per_block_optin, e->optin);
        CHECKF(d->smem_per_sm == e->per_sm, "%s: per SM %d", e->short_name, d->smem_per_sm);
        CHECKF(d->max_threads_per_sm == e->threads_sm, "%s: threads/SM %d", e->short_name,
               d->max_threads_per_sm);
        CHECKF(d->sm_count == e->sms, "%s: SMs %d", e->short_name, d->sm_count);
        CHECKF(d->mem_bus_bits == e->bus, "%s: bus %d", e->short_name, d->mem_bus_bits);
        CHECKF(d->mem_bytes == (long long)e->mem_gib << 30, "%s: memory %lld", e->short_name,
               d->mem_bytes);
        double bw = tailor_device_peak_bandwidth(d);
        CHECKF(fabs(bw - e->bandwidth) / e->bandwidth < 0.005,
               "%s: peak bandwidth %.4g B/s vs datasheet %.4g", e->short_name, bw, e->bandwidth);
    }
    const tailor_device_info *v5e = tailor_device_profile_find("tpu-v5e");
    const tailor_device_info *v6e = tailor_device_profile_find("tpu-v6e");
    CHECK(v5e && v5e->kind == TAILOR_DEVICE_TPU && v5e->mem_bytes == 16LL << 30);
    CHECK(v6e && v6e->kind == TAILOR_DEVICE_TPU && v6e->mem_bytes == 32LL << 30);
}

static void test_find(void)
{
    const tailor_device_info *h = tailor_device_profile_find("H200");
    CHECK(h && strcmp(h->short_name, "h200") == 0);
    h = tailor_device_profile_find("A100-80GB");
    CHECK(h && strcmp(h->short_name, "a100-80gb") == 0);
    h = tailor_device_profile_find("Tpu-V5E");
    CHECK(h && h->kind == TAILOR_DEVICE_TPU);
    CHECK(tailor_device_profile_find("h300") == NULL);
    CHECK(tailor_device_profile_find("") == NULL);
    CHECK(tailor_device_profile_find(NULL) == NULL);
    CHECK(tailor_device_profile_find("h20") == NULL); /* no prefix matching */
}

static void test_resolve(tailor_ctx *ctx)
{
    tailor_device_info info;
    memset(&info, 0xab, sizeof info);
    CHECK_OK(ctx, tailor_device_resolve(ctx, "RTX4090", &info));
    CHECK(strcmp(info.short_name, "rtx4090") == 0 && info.sm_count == 128);

    const char *bad[] = {"nope", "cuda:x", "cuda:-1", "-3", "h200x", "cuda:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tailor_status st = tailor_device_resolve(ctx, bad[i], &info);
        CHECKF(st == TAILOR_ERR_NOT_FOUND, "'%s' gave %s", bad[i], tailor_status_name(st));
    }
    tailor_device_resolve(ctx, "nope", &info);
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(strncmp(msg, "unknown device 'nope': ", 23) == 0, "message: %s", msg);
    CHECKF(strchr(msg, '\n') == NULL, "message has a newline: %s", msg);
    int n = 0;
    const tailor_device_info *p = tailor_device_profiles(&n);
    for (int i = 0; i < n; i++)
        CHECKF(strstr(msg, p[i].short_name) != NULL, "message lacks '%s': %s", p[i].short_name, msg);

    /* "" and "gpu" mean live device 0: they succeed exactly when a device can be counted. */
    int count = 0;
    tailor_status counted = tailor_device_count(ctx, &count);
    const char *live[] = {"", "gpu", "cuda", "live", "cuda:0", "0"};
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
        tailor_status st = tailor_device_resolve(ctx, live[i], &info);
        if (counted == TAILOR_OK && count > 0)
            CHECKF(st == TAILOR_OK && info.is_live && info.ordinal == 0, "'%s': %s", live[i],
                   tailor_ctx_message(ctx));
        else
            CHECKF(st != TAILOR_OK, "'%s' resolved without a device", live[i]);
    }
    tailor_status st = tailor_device_resolve(ctx, NULL, &info);
    CHECK((st == TAILOR_OK) == (counted == TAILOR_OK && count > 0));
    st = tailor_device_resolve(ctx, "cuda:999", &info);
    CHECKF(st != TAILOR_OK && st != TAILOR_ERR_NOT_FOUND, "cuda:999 gave %s",
           tailor_status_name(st));
}

static void test_fingerprint(void)
{
    tailor_device_info d;
    memset(&d, 0, sizeof d);
    strcpy(d.name, "NVIDIA H200");
    d.cc_major = 9;
    d.sm_count = 132;
    d.smem_per_block_optin = 232448;
    d.driver_version = 13000;
    d.nvrtc_major = 13;
    char fp[256];
    tailor_device_fingerprint(&d, fp, sizeof fp);
    CHECKF(strcmp(fp, "NVIDIA H200|sm_90|132|232448|13000|13.0") == 0, "got %s", fp);
    d.nvrtc_minor = 1;
    tailor_device_fingerprint(&d, fp, sizeof fp);
    CHECKF(strcmp(fp, "NVIDIA H200|sm_90|132|232448|13000|13.1") == 0, "got %s", fp);
    char small[8];
    tailor_device_fingerprint(&d, small, sizeof small);
    CHECK(strcmp(small, "NVIDIA ") == 0); /* truncated, terminated */

    tailor_device_fingerprint(tailor_device_profile_find("t4"), fp, sizeof fp);
    CHECKF(strcmp(fp, "Tesla T4|sm_75|40|65536|0|0.0") == 0, "got %s", fp);
    tailor_device_fingerprint(tailor_device_profile_find("tpu-v6e"), fp, sizeof fp);
    CHECKF(strcmp(fp, "Google TPU v6e|tpu|1|134217728|0|0.0") == 0, "got %s", fp);

    char arch[16];
    tailor_device_arch(tailor_device_profile_find("a10g"), arch, sizeof arch);
    CHECK(strcmp(arch, "sm_86") == 0);
    CHECK(tailor_device_sm(tailor_device_profile_find("tpu-v5e")) == 0);
    CHECK(tailor_device_peak_bandwidth(tailor_device_profile_find("tpu-v5e")) == 0.0);
}

static void test_driver_messages(tailor_ctx *ctx)
{
    tailor_ctx_clear(ctx);
    CHECK(tailor_cuda_check(ctx, CUDA_SUCCESS, "cuNothing") == TAILOR_OK);
    CHECK(tailor_ctx_message(ctx)[0] == '\0');
    CHECK(tailor_cuda_check(ctx, CUDA_ERROR_INVALID_VALUE, "cuFoo") == TAILOR_ERR_CUDA);
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(strncmp(msg, "cuFoo: ", 7) == 0 && strchr(msg, '(') && msg[strlen(msg) - 1] == ')',
           "message: %s", msg);

    tailor_status first = tailor_cuda_load(ctx);
    char first_msg[1024];
    snprintf(first_msg, sizeof first_msg, "%s", tailor_ctx_message(ctx));
    tailor_ctx_clear(ctx); /* the second call must say it again, not leave the first's words */
    tailor_status again = tailor_cuda_load(ctx);
    CHECK(first == again);
    if (first == TAILOR_OK) {
        printf("driver loaded: checking CUDA error names\n");
        tailor_cuda_check(ctx, CUDA_ERROR_INVALID_VALUE, "cuFoo");
        CHECKF(strncmp(tailor_ctx_message(ctx), "cuFoo: CUDA_ERROR_INVALID_VALUE (", 33) == 0,
               "message: %s", tailor_ctx_message(ctx));
        return;
    }
    printf("no usable driver here: %s\n", first_msg);
    CHECK(strcmp(first_msg, tailor_ctx_message(ctx)) == 0);
    CHECK(strchr(first_msg, '\n') == NULL);
    if (first == TAILOR_ERR_NO_DRIVER && strstr(first_msg, "not found")) {
        CHECKF(strncmp(first_msg, "no CUDA driver: libcuda.so.1 not found (", 40) == 0 &&
                   first_msg[strlen(first_msg) - 1] == ')',
               "message: %s", first_msg);
    }
    int count = -1;
    CHECK(tailor_device_count(ctx, &count) == first && count == 0);
    tailor_device_info info;
    CHECK(tailor_device_query(ctx, 0, &info) == first);
}

/* The planner's occupancy against cases worked by hand from the CUDA occupancy rules (and, for
 * the first, ncu's 3 blocks of the m = 16 int4 GEMV on an H100, docs/perf/w4a16.md session 28). */
static void test_blocks_per_sm(void)
{
    tailor_occupancy_limit why;
    const struct {
        const char *what;
        const char *dev;
        int threads, regs;
        long long smem;
        int pct, blocks;
        tailor_occupancy_limit limit;
    } cases[] = {
        /* 142 regs -> 4,608 a warp: 3 warps in each 16,384-register partition, 12 warps */
        {"h100 int4 GEMV m=16 from L1", "h100", 128, 142, 4096, 25, 3, TAILOR_OCC_REGISTERS},
        /* 25 % of 228 KB -> the 64 KB split: one block of 53,760 + 1,024 B */
        {"h100 int4 GEMV m=16 staged, 25 %", "h100", 128, 142, 53760, 25, 1, TAILOR_OCC_SHARED},
        {"h100 int4 GEMV m=16 staged, 100 %", "h100", 128, 142, 53760, 100, 3,
         TAILOR_OCC_REGISTERS},
        {"h100 the same, no preference", "h100", 128, 142, 53760, -1, 3, TAILOR_OCC_REGISTERS},
        /* a block needing more than its preference gets the smallest split holding it: 132 KB */
        {"h100 a 120 KB block at 25 %", "h100", 256, 64, 120 * 1024, 25, 1, TAILOR_OCC_SHARED},
        /* 96 regs -> 3,072 a warp: 5 a partition, 20 warps, 5 blocks of 4 */
        {"a100 96 registers", "a100-80gb", 128, 96, 0, 25, 5, TAILOR_OCC_REGISTERS},
        /* 25 % of 164 KB = 41 KB -> the 64 KB split: one 41,024 B block; at 100 %: 4 */
        {"a100 40,000 B at 25 %", "a100-80gb", 128, 96, 40000, 25, 1, TAILOR_OCC_SHARED},
        {"a100 40,000 B at 100 %", "a100-80gb", 128, 96, 40000, 100, 4, TAILOR_OCC_SHARED},
        /* the T4: 1,024 threads an SM, no reserved shared memory, splits of 32 and 64 KB */
        {"t4 256 threads", "t4", 256, 32, 0, 25, 4, TAILOR_OCC_THREADS},
        {"t4 16 KB at 25 %: the 32 KB split", "t4", 64, 32, 16384, 25, 2, TAILOR_OCC_SHARED},
        {"t4 32 threads: 16 blocks at most", "t4", 32, 16, 0, 25, 16, TAILOR_OCC_BLOCKS},
        /* sm_86: 1,536 threads, 16 blocks */
        {"a10g 64 threads", "a10g", 64, 32, 0, 25, 16, TAILOR_OCC_BLOCKS},
        {"a10g 512 threads", "a10g", 512, 32, 0, 25, 3, TAILOR_OCC_THREADS},
        /* cannot run: more shared memory than an SM has, too many registers, a TPU */
        {"h100 240 KB", "h100", 128, 32, 240 * 1024, 100, 0, TAILOR_OCC_SHARED},
        {"h100 256 registers", "h100", 128, 256, 0, 25, 0, TAILOR_OCC_REGISTERS},
        /* the reserved KB a block holds even without shared memory: the 8 KB split at 0 % */
        {"h100 no shared memory at 0 %", "h100", 32, 32, 0, 0, 8, TAILOR_OCC_SHARED},
        {"t4 no shared memory at 0 % (nothing reserved)", "t4", 32, 16, 0, 0, 16,
         TAILOR_OCC_BLOCKS},
        {"tpu", "tpu-v5e", 128, 32, 0, 25, 0, TAILOR_OCC_THREADS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const tailor_device_info *d = tailor_device_profile_find(cases[i].dev);
        CHECKF(d != NULL, "%s: no profile %s", cases[i].what, cases[i].dev);
        if (!d)
            continue;
        int b = tailor_device_blocks_per_sm(d, cases[i].threads, cases[i].regs,
                                            cases[i].smem, cases[i].pct, &why);
        CHECKF(b == cases[i].blocks && why == cases[i].limit,
               "%s: %d blocks (%s), expected %d (%s)", cases[i].what, b,
               tailor_occupancy_limit_name(why), cases[i].blocks,
               tailor_occupancy_limit_name(cases[i].limit));
    }
}

/* The carveout the planner assumes is the one kernel loads set (runtime/cuda.c). */
static void test_carveout_preference(void)
{
    static const struct {
        const char *env;
        int pct;
    } cases[] = {{NULL, 25}, {"", 25}, {"0", 0}, {"50", 50}, {"100", 100}, {"driver", -1},
                 {"101", 25}, {"-1", 25}, {"half", 25}, {"25x", 25}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].env)
            setenv("TAILOR_CARVEOUT", cases[i].env, 1);
        else
            unsetenv("TAILOR_CARVEOUT");
        int got = tailor_carveout_preference();
        CHECKF(got == cases[i].pct, "TAILOR_CARVEOUT=%s: %d, expected %d",
               cases[i].env ? cases[i].env : "(unset)", got, cases[i].pct);
    }
    unsetenv("TAILOR_CARVEOUT");
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    test_profiles_complete();
    test_vendor_numbers();
    test_find();
    test_resolve(ctx);
    test_fingerprint();
    test_driver_messages(ctx);
    test_blocks_per_sm();
    test_carveout_preference();
    tailor_ctx_destroy(ctx);
    return test_finish("test_device");
}
