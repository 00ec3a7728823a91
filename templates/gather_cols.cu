// gather_cols.cu — out[r, j] = a[r, idx[j]] (op gather_cols): the activations of an int4 matrix
// stored in activation order, gathered into that order before its product. Grid: x over chunks
// of THREADS * VEC columns, y over runs of ROWS rows. A thread loads its VEC indices before the
// grid wait (no kernel of a forward writes them: tailor_grid_begin's exception), then gathers
// and writes VEC consecutive elements of each of its rows as one vector store.
// Defines: THREADS, VEC (columns per thread, cols % VEC == 0), ROWS (rows per thread).
#include "tailor_common.cuh"

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ out, const T *__restrict__ a, const int *__restrict__ idx, int rows,
              int cols)
{
    const int j = (blockIdx.x * THREADS + threadIdx.x) * VEC;
    int col[VEC];
    if (j < cols) {
#pragma unroll
        for (int v = 0; v < VEC; v++)
            col[v] = __ldg(idx + j + v);
    }
    tailor_grid_begin();
    if (j >= cols)
        return;
    const int r0 = blockIdx.y * ROWS;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        if (r0 + r >= rows)
            break;
        const T *src = a + (size_t)(r0 + r) * cols;
        TVec<VEC> o;
#pragma unroll
        for (int v = 0; v < VEC; v++)
            o.v[v] = src[col[v]];
        *reinterpret_cast<TVec<VEC> *>(out + (size_t)(r0 + r) * cols + j) = o;
    }
}
