/* bench_cublas.c — cuBLAS dense matmul for benchmark comparisons (dlopen'd, never linked). */
#include "bench_cublas.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The few cuBLAS declarations needed, with the values of cublas_api.h / library_types.h. */
typedef void *cublas_handle;
typedef int (*cublas_create_fn)(cublas_handle *);
typedef int (*cublas_destroy_fn)(cublas_handle);
typedef int (*cublas_set_stream_fn)(cublas_handle, CUstream);
typedef int (*cublas_gemm_ex_fn)(cublas_handle, int, int, int, int, int, const void *, const void *,
                                 int, int, const void *, int, int, const void *, void *, int, int,
                                 int, int);
enum { CUBLAS_OP_N_ = 0, CUBLAS_OP_T_ = 1, CUDA_R_32F_ = 0, CUDA_R_16F_ = 2, CUDA_R_16BF_ = 14,
       CUBLAS_COMPUTE_32F_ = 68, CUBLAS_GEMM_DEFAULT_ = -1 };

tailor_status bench_cublas_matmul(tailor_ctx *ctx, tailor_gpu *gpu, int m, int n, int k,
                                  tailor_dtype dtype, double *median_us)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                        "/usr/local/cuda/lib64/libcublas.so", NULL};
    void *lib = NULL;
    for (int i = 0; names[i] && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED, "cuBLAS not found (libcublas.so.13)");
    cublas_create_fn create = (cublas_create_fn)dlsym(lib, "cublasCreate_v2");
    cublas_destroy_fn destroy = (cublas_destroy_fn)dlsym(lib, "cublasDestroy_v2");
    cublas_set_stream_fn set_stream = (cublas_set_stream_fn)dlsym(lib, "cublasSetStream_v2");
    cublas_gemm_ex_fn gemm = (cublas_gemm_ex_fn)dlsym(lib, "cublasGemmEx");
    if (!create || !destroy || !set_stream || !gemm) {
        dlclose(lib);
        return tailor_set_error(ctx, TAILOR_ERR_UNSUPPORTED, "cuBLAS lacks cublasGemmEx");
    }
    tailor_status st = tailor_gpu_bind(ctx, gpu);
    cublas_handle h = NULL;
    if (st == TAILOR_OK && create(&h) != 0)
        st = tailor_set_error(ctx, TAILOR_ERR_CUDA, "cublasCreate failed");
    if (st == TAILOR_OK)
        set_stream(h, tailor_gpu_stream(gpu));
    size_t es = 2, wbytes = (size_t)n * k * es, abytes = (size_t)m * k * es,
           obytes = (size_t)m * n * es;
    const tailor_device_info *d = tailor_gpu_info(gpu);
    int sets = (int)ceil(2.0 * (double)d->l2_bytes / (double)(wbytes + abytes + obytes)) + 1;
    if (sets > 64)
        sets = 64;
    CUdeviceptr w[64] = {0}, a[64] = {0}, o[64] = {0};
    for (int s = 0; s < sets && st == TAILOR_OK; s++) {
        st = tailor_gpu_alloc(ctx, gpu, wbytes, &w[s]);
        if (st == TAILOR_OK)
            st = tailor_gpu_alloc(ctx, gpu, abytes, &a[s]);
        if (st == TAILOR_OK)
            st = tailor_gpu_alloc(ctx, gpu, obytes, &o[s]);
        /* 0x3c00 / 0x3f80-ish bytes: small finite values, not zeros */
        if (st == TAILOR_OK)
            st = tailor_gpu_memset8(ctx, gpu, w[s], 0x2b, wbytes);
        if (st == TAILOR_OK)
            st = tailor_gpu_memset8(ctx, gpu, a[s], 0x3a, abytes);
    }
    int type = dtype == TAILOR_DTYPE_BF16 ? CUDA_R_16BF_ : CUDA_R_16F_;
    float alpha = 1.0f, beta = 0.0f;
    /* column-major: out^T[n,m] = w[n,k] . a^T[k,m] */
#define GEMM(s)                                                                                    \
    gemm(h, CUBLAS_OP_T_, CUBLAS_OP_N_, n, m, k, &alpha, (const void *)(uintptr_t)w[s], type, k,   \
         (const void *)(uintptr_t)a[s], type, k, &beta, (void *)(uintptr_t)o[s], type, n,          \
         CUBLAS_COMPUTE_32F_, CUBLAS_GEMM_DEFAULT_)
    enum { BATCHES = 21 };
    double samples[BATCHES];
    int per_batch = 2 * sets < 32 ? 32 : 2 * sets;
    for (int i = 0; i < per_batch && st == TAILOR_OK; i++)
        if (GEMM(i % sets) != 0)
            st = tailor_set_error(ctx, TAILOR_ERR_CUDA, "cublasGemmEx failed (m=%d n=%d k=%d)", m,
                                  n, k);
    /* the batch as a CUDA graph, timed as tailor_instance_time times a kernel, without PDL
     * (cuBLAS kernels do not wait on griddepcontrol) */
    tailor_gpu_graph g;
    memset(&g, 0, sizeof g);
    if (st == TAILOR_OK)
        st = tailor_gpu_capture_begin(ctx, gpu);
    int gemm_failed = 0;
    for (int i = 0; i < per_batch && st == TAILOR_OK; i++)
        gemm_failed |= GEMM(i % sets) != 0;
    if (st == TAILOR_OK)
        st = tailor_gpu_capture_end(ctx, gpu, !gemm_failed, &g);
    if (st == TAILOR_OK && gemm_failed)
        st = tailor_set_error(ctx, TAILOR_ERR_CUDA, "cublasGemmEx failed inside a graph capture");
    if (st == TAILOR_OK)
        st = tailor_gpu_graph_launch(ctx, gpu, &g); /* one untimed replay: caches warm */
    if (st == TAILOR_OK)
        st = tailor_gpu_graph_time(ctx, gpu, &g, per_batch, BATCHES, samples);
    tailor_gpu_graph_destroy(gpu, &g);
#undef GEMM
    for (int s = 0; s < sets; s++) {
        tailor_gpu_free(gpu, w[s]);
        tailor_gpu_free(gpu, a[s]);
        tailor_gpu_free(gpu, o[s]);
    }
    if (h)
        destroy(h);
    dlclose(lib);
    if (st)
        return st;
    qsort(samples, BATCHES, sizeof samples[0], cli_cmp_double);
    *median_us = samples[BATCHES / 2];
    return TAILOR_OK;
}
