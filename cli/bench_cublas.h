/* bench_cublas.h — a dense 16-bit matmul through cuBLAS, loaded with dlopen by the benchmarks
 * only (the runtime never needs cuBLAS), as the yardstick of `tailor bench w4a16`. */
#ifndef TAILOR_BENCH_CUBLAS_H
#define TAILOR_BENCH_CUBLAS_H

#include "cuda.h"
#include "op.h"

/* Times out[m,n] = a[m,k] . w[n,k]^T in `dtype` with fp32 accumulation (cublasGemmEx), over
 * weight copies rotated past twice the L2: median microseconds per product. */
tailor_status bench_cublas_matmul(tailor_ctx *ctx, tailor_gpu *gpu, int m, int n, int k,
                                  tailor_dtype dtype, double *median_us);

#endif
