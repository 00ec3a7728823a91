// probe_check.h — the CUDA runtime error check of the standalone probes (stream_floor.cu,
// l2_prefetch.cu): a failed call prints where and why, and the probe exits.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
