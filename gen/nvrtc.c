/* nvrtc.c — NVRTC compilation of template instantiations, with the resource report. */
#include "gen.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

#ifndef TAILOR_CUDA_INCLUDE_DIR
#define TAILOR_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

void tailor_gen_nvrtc_version(int *major, int *minor)
{
    if (nvrtcVersion(major, minor) != NVRTC_SUCCESS) {
        *major = 0;
        *minor = 0;
    }
}

tailor_status tailor_gen_supported_archs(tailor_ctx *ctx, int *archs, int *count)
{
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 64)
        return tailor_set_error(ctx, TAILOR_ERR_NVRTC, "NVRTC could not list its architectures");
    if (nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS)
        return tailor_set_error(ctx, TAILOR_ERR_NVRTC, "NVRTC could not list its architectures");
    *count = n;
    return TAILOR_OK;
}

tailor_status tailor_gen_check_arch(tailor_ctx *ctx, int sm)
{
    int archs[64], n = 0;
    tailor_status st = tailor_gen_supported_archs(ctx, archs, &n);
    if (st)
        return st;
    char list[512] = "";
    for (int i = 0; i < n; i++) {
        if (archs[i] == sm)
            return TAILOR_OK;
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%ssm_%d", i ? ", " : "", archs[i]);
    }
    int maj, min;
    tailor_gen_nvrtc_version(&maj, &min);
    return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED,
                            "architecture sm_%d is not supported by NVRTC %d.%d (it supports %s)",
                            sm, maj, min, list);
}

tailor_status tailor_gen_parse_arch(tailor_ctx *ctx, const char *text, int *sm)
{
    const char *p = text;
    if (strncmp(p, "sm_", 3) == 0)
        p += 3;
    else if (strncmp(p, "sm", 2) == 0)
        p += 2;
    else if (strncmp(p, "compute_", 8) == 0)
        p += 8;
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p || *end != '\0' || v < 10 || v > 1000)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "'%s' is not an architecture (write it like sm_90)", text);
    *sm = (int)v;
    return TAILOR_OK;
}

static int cmp_defines(const void *a, const void *b)
{
    return strcmp(((const tailor_define *)a)->name, ((const tailor_define *)b)->name);
}

void tailor_gen_kernel_name(const char *op, const char *template_name, int sm, const char *dtype,
                            const tailor_define *defines, int ndefines, char *buf, size_t size)
{
    tailor_define sorted[TAILOR_GEN_MAX_DEFINES];
    int n = ndefines < TAILOR_GEN_MAX_DEFINES ? ndefines : TAILOR_GEN_MAX_DEFINES;
    memcpy(sorted, defines, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_defines);
    int len = snprintf(buf, size, "%s__%s__sm%d__%s__", op, template_name, sm, dtype);
    for (int i = 0; i < n && len >= 0 && (size_t)len < size; i++) {
        len += snprintf(buf + len, size - (size_t)len, "%s%s", i ? "_" : "", sorted[i].name);
        for (const char *v = sorted[i].value; *v && (size_t)len + 1 < size; v++) {
            char c = *v;
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            buf[len++] = ok ? c : (c == '-' ? 'm' : 'x');
            buf[len] = '\0';
        }
    }
}

/* Finds the line block ptxas writes for `kernel` and reads its figures. */
void tailor_gen_parse_report(const char *log, const char *kernel, tailor_compile_result *r)
{
    r->regs = r->smem_static = r->stack_bytes = r->spill_stores = r->spill_loads = -1;
    r->wgmma_serialized = 0;
    if (!log)
        return;
    char needle[512];
    /* "ptxas info : (C7515) Potential Performance Loss: wgmma.mma_async instructions are
     * serialized due to <why> in the function 'kernel'"; the code names the why (C7511: too few
     * registers for the wgmma pipeline, C7515: non-wgmma instructions defining accumulators) */
    static const char serialized[] = "wgmma.mma_async instructions are serialized";
    snprintf(needle, sizeof needle, "function '%s'", kernel);
    for (const char *c = strstr(log, serialized); c; c = strstr(c + 1, serialized)) {
        const char *bol = c, *eol = strchr(c, '\n');
        while (bol > log && bol[-1] != '\n')
            bol--;
        const char *f = strstr(c, needle), *code = strstr(bol, "(C");
        if (f && (!eol || f < eol))
            r->wgmma_serialized = code && code < c ? atoi(code + 2) : 1;
    }
    snprintf(needle, sizeof needle, "Function properties for %s", kernel);
    const char *p = strstr(log, needle);
    if (!p) {
        snprintf(needle, sizeof needle, "Compiling entry function '%s'", kernel);
        p = strstr(log, needle);
    }
    if (!p)
        return;
    const char *q = strstr(p, "bytes stack frame");
    if (q) {
        const char *s = q;
        while (s > p && s[-1] != '.' && s[-1] != '\n')
            s--;
        sscanf(s, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
               &r->stack_bytes, &r->spill_stores, &r->spill_loads);
    }
    const char *u = strstr(p, "Used ");
    if (u) {
        sscanf(u, "Used %d registers", &r->regs);
        const char *sm = strstr(u, "bytes smem");
        const char *eol = strchr(u, '\n');
        if (sm && (!eol || sm < eol)) {
            const char *s = sm;
            while (s > u && s[-1] == ' ')
                s--;
            while (s > u && s[-1] >= '0' && s[-1] <= '9')
                s--;
            r->smem_static = atoi(s);
        } else {
            r->smem_static = 0;
        }
    }
}

static char *program_log(nvrtcProgram prog)
{
    size_t n = 0;
    if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS)
        return NULL;
    char *log = malloc(n + 1);
    if (!log)
        return NULL;
    if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = '\0';
    log[n] = '\0';
    return log;
}

typedef struct headers {
    char **names, **texts;
    int count;
} headers;

static const char *cuda_include_dir(char *buf, size_t size)
{
    const char *home = getenv("CUDA_HOME");
    if (home && *home) {
        snprintf(buf, size, "%s/include", home);
        return buf;
    }
    snprintf(buf, size, "%s", TAILOR_CUDA_INCLUDE_DIR);
    return buf;
}

/* Reads the compiled program's PTX (NUL-terminated) or cubin into a malloc'd image. */
static int program_image(nvrtcProgram prog, int ptx, void **image, size_t *size)
{
    size_t sz = 0;
    nvrtcResult r = ptx ? nvrtcGetPTXSize(prog, &sz) : nvrtcGetCUBINSize(prog, &sz);
    void *img = r == NVRTC_SUCCESS ? malloc(sz + 1) : NULL;
    if (img)
        r = ptx ? nvrtcGetPTX(prog, img) : nvrtcGetCUBIN(prog, img);
    if (!img || r != NVRTC_SUCCESS) {
        free(img);
        return 0;
    }
    ((char *)img)[sz] = '\0';
    *image = img;
    *size = ptx ? sz + 1 : sz;
    return 1;
}

/* One NVRTC pass for sm_XX (sm_XXa for arch-specific code): the cubin and ptxas's report in the
 * log and, with `ptx`, the PTX the cubin was made from (the same text a compute_XX pass gives:
 * `.target sm_XX`, for the driver to JIT) instead of the cubin. */
static tailor_status compile_once(tailor_ctx *ctx, const tailor_compile_request *req,
                                  const headers *h, int want_ptx, void **image, size_t *size,
                                  char **log_out)
{
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, req->source, req->source_name, h->count,
                                       (const char *const *)h->texts,
                                       (const char *const *)h->names);
    if (r != NVRTC_SUCCESS)
        return tailor_set_error(ctx, TAILOR_ERR_NVRTC, "%s: nvrtcCreateProgram: %s",
                                req->source_name, nvrtcGetErrorString(r));
    enum { FIXED = 8 };
    char opt_store[TAILOR_GEN_MAX_DEFINES + FIXED][600];
    const char *opts[TAILOR_GEN_MAX_DEFINES + FIXED];
    int n = 0;
    char inc[512];
    snprintf(opt_store[n], sizeof opt_store[n], "-arch=sm_%d%s", req->sm,
             req->arch_specific ? "a" : "");
    opts[n] = opt_store[n];
    n++;
    opts[n++] = "-std=c++17";
    snprintf(opt_store[n], sizeof opt_store[n], "-I%s", cuda_include_dir(inc, sizeof inc));
    opts[n] = opt_store[n];
    n++;
    snprintf(opt_store[n], sizeof opt_store[n], "-DTAILOR_KERNEL=%s", req->kernel_name);
    opts[n] = opt_store[n];
    n++;
    snprintf(opt_store[n], sizeof opt_store[n], "-DTAILOR_SM=%d", req->sm);
    opts[n] = opt_store[n];
    n++;
    opts[n++] = "-Xptxas";
    opts[n++] = "-v";
    int nd = req->ndefines < TAILOR_GEN_MAX_DEFINES ? req->ndefines : TAILOR_GEN_MAX_DEFINES;
    for (int i = 0; i < nd; i++) {
        if (req->defines[i].value[0])
            snprintf(opt_store[n], sizeof opt_store[n], "-D%s=%s", req->defines[i].name,
                     req->defines[i].value);
        else
            snprintf(opt_store[n], sizeof opt_store[n], "-D%s", req->defines[i].name);
        opts[n] = opt_store[n];
        n++;
    }
    r = nvrtcCompileProgram(prog, n, opts);
    char *log = program_log(prog);
    if (r != NVRTC_SUCCESS) {
        tailor_set_error_detail(ctx, TAILOR_ERR_NVRTC, log ? log : "(no log)",
                                "%s (kernel %s) failed to compile for sm_%d: %s",
                                req->source_name, req->kernel_name, req->sm,
                                nvrtcGetErrorString(r));
        free(log);
        nvrtcDestroyProgram(&prog);
        return TAILOR_ERR_NVRTC;
    }
    int ok = program_image(prog, want_ptx, image, size);
    nvrtcDestroyProgram(&prog);
    if (!ok) {
        free(log);
        return tailor_set_error(ctx, TAILOR_ERR_NVRTC, "%s: could not read the compiled image",
                                req->source_name);
    }
    *log_out = log;
    return TAILOR_OK;
}

tailor_status tailor_gen_compile(tailor_ctx *ctx, const tailor_compile_request *req,
                                 tailor_compile_result *out)
{
    memset(out, 0, sizeof *out);
    out->regs = out->smem_static = out->stack_bytes = out->spill_stores = out->spill_loads = -1;
    double t0 = tailor_now_seconds();
    headers h = {0};
    tailor_status st = tailor_template_headers(ctx, &h.names, &h.texts, &h.count);
    if (st)
        return st;
    char *log = NULL;
    st = compile_once(ctx, req, &h, req->ptx, &out->image, &out->image_size, &log);
    if (st == TAILOR_OK) {
        tailor_gen_parse_report(log, req->kernel_name, out);
        out->log = log;
        out->is_ptx = req->ptx != 0;
    }
    tailor_template_headers_free(h.names, h.texts, h.count);
    out->seconds = tailor_now_seconds() - t0;
    return st;
}

void tailor_compile_result_free(tailor_compile_result *r)
{
    if (!r)
        return;
    free(r->image);
    free(r->log);
    free(r->native);
    r->image = NULL;
    r->log = NULL;
    r->native = NULL;
    r->native_size = 0;
}
