/* test_gen.c — NVRTC instantiation without a GPU: the RMSNorm template compiles for sm_75, sm_80
 * and sm_90 with the resource report read back; the compile memo; kernel names; bad arch;
 * compile errors. */
#include <pthread.h>
#include <string.h>

#include "gen.h"
#include "registry.h"
#include "testlib.h"

/* A request for rmsnorm.cu (its text read by the caller) with its four defines. */
static tailor_compile_request rmsnorm_request(const tailor_template_file *src,
                                              const tailor_define *defs, const char *name, int sm,
                                              int ptx)
{
    return (tailor_compile_request){.source_name = "rmsnorm.cu", .source = src->text,
                                    .kernel_name = name, .sm = sm, .ptx = ptx, .ndefines = 4,
                                    .defines = defs};
}

static void compile_rmsnorm(tailor_ctx *ctx, int sm, const char *dtype_define, int threads)
{
    tailor_template_file src;
    CHECK_OK(ctx, tailor_template_read(ctx, "rmsnorm.cu", &src));
    if (!src.text)
        return;
    tailor_define defs[4] = {{"THREADS", ""}, {"VEC", "8"}, {"HAS_WEIGHT", "1"}, {"", "1"}};
    snprintf(defs[0].value, sizeof defs[0].value, "%d", threads);
    snprintf(defs[3].name, sizeof defs[3].name, "%s", dtype_define);
    char name[256];
    tailor_gen_kernel_name("rmsnorm", "rmsnorm", sm, "fp16", defs, 3, name, sizeof name);
    tailor_compile_request req = rmsnorm_request(&src, defs, name, sm, 0);
    tailor_compile_result r;
    tailor_status st = tailor_gen_compile(ctx, &req, &r);
    CHECKF(st == TAILOR_OK, "sm_%d %s: %s", sm, dtype_define, tailor_ctx_message(ctx));
    if (st == TAILOR_OK) {
        printf("sm_%d %s THREADS=%d: %d registers, %d B static smem, %d B stack, spills %d/%d, "
               "%zu B cubin, %.2f s\n",
               sm, dtype_define, threads, r.regs, r.smem_static, r.stack_bytes, r.spill_stores,
               r.spill_loads, r.image_size, r.seconds);
        CHECK(r.image_size > 100);
        CHECK(memcmp(r.image, "\177ELF", 4) == 0); /* a cubin is an ELF file */
        CHECK(r.regs > 0 && r.regs <= 255);
        CHECK(r.smem_static == 4 * threads / 32); /* block_sum's scratch, as rmsnorm.lua says */
        CHECK(r.spill_stores == 0 && r.spill_loads == 0);
        CHECK(strstr(r.log, name) != NULL);
    }
    tailor_compile_result_free(&r);
    tailor_template_file_free(&src);
}

static void test_ptx_rehearsal(tailor_ctx *ctx)
{
    tailor_template_file src;
    CHECK_OK(ctx, tailor_template_read(ctx, "rmsnorm.cu", &src));
    tailor_define defs[4] = {{"THREADS", "128"}, {"VEC", "4"}, {"HAS_WEIGHT", "1"},
                             {"TAILOR_DTYPE_FP16", "1"}};
    tailor_compile_request req = rmsnorm_request(&src, defs, "k_ptx", 75, 1);
    tailor_compile_result r;
    CHECK_OK(ctx, tailor_gen_compile(ctx, &req, &r));
    CHECK(r.is_ptx);
    CHECK(r.image && strstr(r.image, ".target sm_75") != NULL);
    CHECK(r.image && strstr(r.image, ".entry k_ptx(") != NULL); /* the text, not the cubin */
    CHECK(r.image_size > strlen(r.image)); /* NUL-terminated within its size */
    CHECK(r.regs > 0); /* the report comes from ptxas in the same pass */
    tailor_compile_result_free(&r);
    tailor_template_file_free(&src);
}

/* wgmma exists on sm_90a only: the same source compiles with arch_specific and fails without */
static void test_arch_specific(tailor_ctx *ctx)
{
    const char *src = "extern \"C\" __global__ void TAILOR_KERNEL(float *x)\n"
                      "{ asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); x[0] = 1.f; }";
    tailor_compile_request req = {.source_name = "fence.cu", .source = src,
                                  .kernel_name = "k_fence", .sm = 90, .arch_specific = 1};
    tailor_compile_result r;
    CHECK_OK(ctx, tailor_gen_compile(ctx, &req, &r));
    CHECK(r.image_size > 100 && strstr(r.log, "sm_90a") != NULL);
    tailor_compile_result_free(&r);
    req.arch_specific = 0;
    CHECK(tailor_gen_compile(ctx, &req, &r) == TAILOR_ERR_NVRTC);
    CHECK(strstr(tailor_ctx_message(ctx), "wgmma") != NULL);
    tailor_compile_result_free(&r);
}

/* The compile memo: an identical request is a copy (reused, no compile time), a different define
 * or target is not, failures are not kept, and a full memo keeps nothing new. */
static void test_memo(tailor_ctx *ctx)
{
    tailor_template_file src;
    CHECK_OK(ctx, tailor_template_read(ctx, "rmsnorm.cu", &src));
    tailor_define defs[4] = {{"THREADS", "128"}, {"VEC", "4"}, {"HAS_WEIGHT", "1"},
                             {"TAILOR_DTYPE_FP16", "1"}};
    tailor_compile_request req = rmsnorm_request(&src, defs, "k_memo", 80, 0);
    tailor_compile_memo *m = tailor_compile_memo_create(64 << 20);
    CHECK(m != NULL);
    tailor_compile_result a, b, c;
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &a));
    CHECK(!a.reused && a.seconds > 0);
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &b));
    CHECK(b.reused && b.seconds == 0.0);
    CHECK(b.image != a.image && b.image_size == a.image_size &&
          memcmp(a.image, b.image, a.image_size) == 0);
    CHECK(b.regs == a.regs && b.smem_static == a.smem_static && strcmp(a.log, b.log) == 0);
    /* the same defines in another order (Lua hands a space's defines out in hash order, which
     * differs between states): the same instantiation, a hit */
    tailor_define swapped[4] = {defs[2], defs[0], defs[3], defs[1]};
    req.defines = swapped;
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    CHECKF(c.reused, "defines in another order compiled again");
    tailor_compile_result_free(&c);
    req.defines = defs;
    snprintf(defs[1].value, sizeof defs[1].value, "8"); /* another define: another binary */
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    CHECK(!c.reused);
    tailor_compile_result_free(&c);
    req.sm = 90; /* another target */
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    CHECK(!c.reused);
    tailor_compile_result_free(&c);
    int hits, misses;
    size_t bytes;
    tailor_compile_memo_stats(m, &hits, &misses, &bytes);
    CHECKF(hits == 2 && misses == 3, "hits %d misses %d", hits, misses);
    CHECK(bytes > a.image_size + strlen(a.log)); /* the first and two more */
    const char *broken = "extern \"C\" __global__ void TAILOR_KERNEL(float *x) { x[0] = y; }";
    tailor_compile_request bad = {.source_name = "broken.cu", .source = broken,
                                  .kernel_name = "k_broken", .sm = 80};
    for (int i = 0; i < 2; i++) {
        CHECK(tailor_gen_compile_memo(ctx, m, &bad, &c) == TAILOR_ERR_NVRTC);
        tailor_compile_result_free(&c);
    }
    tailor_compile_memo_stats(m, &hits, &misses, &bytes);
    CHECKF(hits == 2 && misses == 5, "failures are compiled again: hits %d misses %d", hits,
           misses);
    tailor_compile_memo_destroy(m);
    /* a memo with no room answers nothing */
    m = tailor_compile_memo_create(16);
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    tailor_compile_result_free(&c);
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    CHECK(!c.reused);
    tailor_compile_result_free(&c);
    tailor_compile_memo_destroy(m);
    /* no memo: a plain compile */
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, NULL, &req, &c));
    CHECK(!c.reused && c.image_size > 100);
    tailor_compile_result_free(&c);
    tailor_compile_result_free(&a);
    tailor_compile_result_free(&b);
    tailor_template_file_free(&src);
}

/* A stand-in for the driver's JIT: counts its calls, checks it got PTX, and answers with the
 * PTX's first 16 bytes as the "cubin" (or fails, when told to). */
typedef struct fake_jit {
    int calls, fail;
} fake_jit;

static tailor_status fake_jit_fn(tailor_ctx *ctx, void *user, const char *ptx, void **native,
                                 size_t *native_size)
{
    fake_jit *f = user;
    f->calls++;
    if (f->fail || strstr(ptx, ".entry") == NULL)
        return tailor_set_error(ctx, TAILOR_ERR_CUDA, "fake JIT refused");
    *native = malloc(16);
    memcpy(*native, ptx, 16);
    *native_size = 16;
    return TAILOR_OK;
}

/* A memo with a JIT: each PTX it compiles is JIT-compiled once, where it compiled, and its hits
 * carry the native image; cubins are not JIT-compiled; a failing JIT leaves the compile as it
 * was, without a native image. */
static void test_memo_jit(tailor_ctx *ctx)
{
    tailor_template_file src;
    CHECK_OK(ctx, tailor_template_read(ctx, "rmsnorm.cu", &src));
    tailor_define defs[4] = {{"THREADS", "128"}, {"VEC", "4"}, {"HAS_WEIGHT", "1"},
                             {"TAILOR_DTYPE_FP16", "1"}};
    tailor_compile_request req = rmsnorm_request(&src, defs, "k_jit", 75, 1);
    fake_jit f = {0, 0};
    tailor_compile_memo *m = tailor_compile_memo_create(64 << 20);
    CHECK(m != NULL);
    tailor_compile_memo_set_jit(m, fake_jit_fn, &f);
    tailor_compile_result a, b, c;
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &a));
    CHECKF(f.calls == 1 && a.is_ptx && a.native && a.native_size == 16 &&
           memcmp(a.native, a.image, 16) == 0, "calls %d native %p", f.calls, a.native);
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &b));
    CHECKF(b.reused && f.calls == 1, "a hit JIT-compiled again (%d calls)", f.calls);
    CHECK(b.native && b.native != a.native && b.native_size == 16 &&
          memcmp(b.native, a.native, 16) == 0);
    req.ptx = 0; /* a cubin is the GPU's own already */
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    CHECK(!c.is_ptx && c.native == NULL && f.calls == 1);
    tailor_compile_result_free(&c);
    req.ptx = 1;
    snprintf(defs[1].value, sizeof defs[1].value, "8");
    f.fail = 1; /* the JIT fails: the compile stands, without a native image */
    CHECK_OK(ctx, tailor_gen_compile_memo(ctx, m, &req, &c));
    CHECK(f.calls == 2 && c.is_ptx && c.image_size > 100 && c.native == NULL &&
          c.native_size == 0);
    tailor_compile_result_free(&c);
    tailor_compile_memo_destroy(m);
    tailor_compile_result_free(&a);
    tailor_compile_result_free(&b);
    tailor_template_file_free(&src);
}

static void test_kernel_name(void)
{
    tailor_define defs[2] = {{"VEC", "8"}, {"BM", "-1"}};
    char name[256];
    tailor_gen_kernel_name("w4a16_matmul", "w4a16_gemv", 90, "bf16", defs, 2, name, sizeof name);
    CHECKF(strcmp(name, "w4a16_matmul__w4a16_gemv__sm90__bf16__BMm1_VEC8") == 0, "%s", name);
}

static void test_errors(tailor_ctx *ctx)
{
    CHECK(tailor_gen_check_arch(ctx, 90) == TAILOR_OK);
    CHECK(tailor_gen_check_arch(ctx, 61) == TAILOR_ERR_UNSUPPORTED);
    CHECK(strstr(tailor_ctx_message(ctx), "sm_61 is not supported by NVRTC") != NULL);
    CHECK(strstr(tailor_ctx_message(ctx), "sm_75") != NULL); /* lists what it supports */
    int sm = 0;
    CHECK(tailor_gen_parse_arch(ctx, "sm_86", &sm) == TAILOR_OK && sm == 86);
    CHECK(tailor_gen_parse_arch(ctx, "compute_75", &sm) == TAILOR_OK && sm == 75);
    CHECK(tailor_gen_parse_arch(ctx, "turing", &sm) == TAILOR_ERR_MISUSE);

    const char *broken = "extern \"C\" __global__ void TAILOR_KERNEL(float *x) { x[0] = y; }";
    tailor_compile_request req = {.source_name = "broken.cu", .source = broken,
                                  .kernel_name = "k_broken", .sm = 80};
    tailor_compile_result r;
    tailor_status st = tailor_gen_compile(ctx, &req, &r);
    CHECK(st == TAILOR_ERR_NVRTC);
    CHECK(strstr(tailor_ctx_message(ctx), "broken.cu") != NULL);
    CHECK(strstr(tailor_ctx_message(ctx), "identifier \"y\" is undefined") != NULL); /* the log */
    /* the sentence is one line; the compiler's log follows it as it is, on lines of its own */
    const char *nl = strchr(tailor_ctx_message(ctx), '\n');
    CHECK(nl && memmem(tailor_ctx_message(ctx), (size_t)(nl - tailor_ctx_message(ctx)),
                       "failed to compile", 17) && strstr(nl, "identifier \"y\""));
    tailor_compile_result_free(&r);

    tailor_template_file f;
    CHECK(tailor_template_read(ctx, "no_such.cu", &f) == TAILOR_ERR_NOT_FOUND);
    CHECK(strstr(tailor_ctx_message(ctx), "no_such.cu") != NULL);
}

static void test_report_parser(void)
{
    const char *log = "ptxas info    : Compiling entry function 'kk' for 'sm_90'\n"
                      "ptxas info    : Function properties for kk\n"
                      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes "
                      "spill loads\n"
                      "ptxas info    : Used 168 registers, used 1 barriers, 98304 bytes smem, 400 "
                      "bytes cmem[0]\n";
    tailor_compile_result r;
    tailor_gen_parse_report(log, "kk", &r);
    CHECK(r.regs == 168);
    CHECK(r.smem_static == 98304);
    CHECK(r.stack_bytes == 8 && r.spill_stores == 4 && r.spill_loads == 12);
    CHECK(r.wgmma_serialized == 0);
    /* ptxas's wgmma serialization notice, for this kernel and for another one */
    const char *c7515 = "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async "
                        "instructions are serialized due to non wgmma instructions defining "
                        "accumulator registers of a wgmma between start and end of the pipeline "
                        "stage in the function 'kk'\n";
    tailor_gen_parse_report(c7515, "kk", &r);
    CHECK(r.wgmma_serialized == 7515);
    tailor_gen_parse_report(c7515, "k", &r);
    CHECK(r.wgmma_serialized == 0);
    /* the same notice for too few registers (a 288-thread wgmma block, session 36), among other
     * lines */
    const char *c7511 = "ptxas info    : Compiling entry function 'kk' for 'sm_90a'\n"
                        "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async "
                        "instructions are serialized due to insufficient register resources for "
                        "the wgmma pipeline in the function 'kk'\n"
                        "ptxas info    : Used 158 registers, used 1 barriers\n";
    tailor_gen_parse_report(c7511, "kk", &r);
    CHECK(r.wgmma_serialized == 7511);
    CHECK(r.regs == 158);
}

/* Four threads ask the memo for one instantiation at once: one compiles, the others wait for
 * it and copy it (a tuner's compile threads meeting a compile-ahead's). */
typedef struct memo_race {
    tailor_compile_memo *m;
    const tailor_compile_request *req;
    tailor_compile_result r;
    tailor_status st;
} memo_race;

static void *memo_race_main(void *arg)
{
    memo_race *r = arg;
    tailor_ctx *ctx = tailor_ctx_create();
    r->st = tailor_gen_compile_memo(ctx, r->m, r->req, &r->r);
    tailor_ctx_destroy(ctx);
    return NULL;
}

static void test_memo_inflight(tailor_ctx *ctx)
{
    tailor_template_file src;
    CHECK_OK(ctx, tailor_template_read(ctx, "rmsnorm.cu", &src));
    tailor_define defs[4] = {{"THREADS", "64"}, {"VEC", "2"}, {"HAS_WEIGHT", "0"},
                             {"TAILOR_DTYPE_FP16", "1"}};
    tailor_compile_request req = rmsnorm_request(&src, defs, "k_race", 75, 0);
    tailor_compile_memo *m = tailor_compile_memo_create(64 << 20);
    memo_race r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (memo_race){.m = m, .req = &req};
        CHECK(pthread_create(&th[i], NULL, memo_race_main, &r[i]) == 0);
    }
    int reused = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(r[i].st == TAILOR_OK);
        reused += r[i].r.reused;
        CHECK(r[i].r.image_size == r[0].r.image_size &&
              memcmp(r[i].r.image, r[0].r.image, r[0].r.image_size) == 0);
    }
    int hits, misses;
    size_t bytes;
    tailor_compile_memo_stats(m, &hits, &misses, &bytes);
    CHECKF(misses == 1 && hits == 3 && reused == 3,
           "four threads at once: %d compiles, %d copies (want 1 and 3)", misses, hits);
    for (int i = 0; i < 4; i++)
        tailor_compile_result_free(&r[i].r);
    tailor_compile_memo_destroy(m);
    tailor_template_file_free(&src);
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    int archs[64], n = 0;
    CHECK_OK(ctx, tailor_gen_supported_archs(ctx, archs, &n));
    printf("NVRTC supports %d architectures\n", n);
    static const int sms[] = {75, 80, 90};
    for (int i = 0; i < 3; i++) {
        compile_rmsnorm(ctx, sms[i], "TAILOR_DTYPE_FP16", 256);
        if (sms[i] >= 80)
            compile_rmsnorm(ctx, sms[i], "TAILOR_DTYPE_BF16", 128);
    }
    test_ptx_rehearsal(ctx);
    test_memo(ctx);
    test_memo_jit(ctx);
    test_memo_inflight(ctx);
    test_kernel_name();
    test_arch_specific(ctx);
    test_errors(ctx);
    test_report_parser();
    tailor_ctx_destroy(ctx);
    return test_finish("test_gen");
}
