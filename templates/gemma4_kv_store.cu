// gemma4_kv_store.cu — a Gemma 4 layer's new K and V into its KV cache (op "gemma4_kv_store",
// tuner/op_gemma4.c): k = RoPE(RMSNorm_w(k_raw)), v = RMSNorm(v_raw) (no weight), statistics,
// angle and rotation in fp32, one rounding; row t goes to slot pos[t] mod slots, and with LIN
// also to row t of k_lin / v_lin. One block per (token, KV head).
// QH > 0 (decode): QH more blocks per token prepare the layer's q as k is (RMSNorm with its own
// weight wq, the same RoPE) into q_out: the qk_norm_rope launch folded into this one.
// Defines: HEAD_DIM, LIN (0/1), THREADS, QH.
#include "tailor_common.cuh"

#ifndef QH
#define QH 0
#endif

// Row x [HEAD_DIM] normed with weight w and rotated at position p into y (y may be x).
__device__ __forceinline__ void kv_norm_rope_row(T *y, const T *x, const T *__restrict__ w,
                                                 const float *__restrict__ inv_freq, int p,
                                                 float *scratch)
{
    float ss = 0.f;
    for (int j = threadIdx.x; j < HEAD_DIM; j += THREADS) {
        const float a = to_f32(x[j]);
        ss += a * a;
    }
    ss = block_sum<THREADS>(ss, scratch);
    const float inv = rsqrtf(ss / (float)HEAD_DIM + 1e-6f);
    for (int j = threadIdx.x; j < HEAD_DIM / 2; j += THREADS) {
        const float a = to_f32(x[j]) * inv * to_f32(w[j]);
        const float b = to_f32(x[j + HEAD_DIM / 2]) * inv * to_f32(w[j + HEAD_DIM / 2]);
        float sn, cs;
        sincosf((float)p * inv_freq[j], &sn, &cs);
        y[j] = from_f32(a * cs - b * sn);
        y[j + HEAD_DIM / 2] = from_f32(b * cs + a * sn);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
TAILOR_KERNEL(T *__restrict__ k_cache, T *__restrict__ v_cache, int *__restrict__ positions,
              T *k_lin, T *v_lin, const T *k, const T *v, const T *__restrict__ w,
              const float *__restrict__ inv_freq, const int *__restrict__ pos, int kv_heads,
              int slots
#if QH > 0
              , const T *__restrict__ q, const T *__restrict__ wq, T *__restrict__ q_out
#endif
)
{
    tailor_grid_begin();
    __shared__ float scratch[THREADS / 32 > 0 ? THREADS / 32 : 1];
    const int t = blockIdx.x, h = blockIdx.y;
    const int p = pos[t], slot = p % slots;
#if QH > 0
    if (h >= kv_heads) { // a q head
        const size_t at = ((size_t)t * QH + (h - kv_heads)) * HEAD_DIM;
        kv_norm_rope_row(q_out + at, q + at, wq, inv_freq, p, scratch);
        return;
    }
#endif
    const size_t in = ((size_t)t * kv_heads + h) * HEAD_DIM;
    const size_t at = ((size_t)h * slots + slot) * HEAD_DIM;
    const T *kr = k + in, *vr = v + in;
    float sk = 0.f, sv = 0.f;
    for (int j = threadIdx.x; j < HEAD_DIM; j += THREADS) {
        const float a = to_f32(kr[j]), b = to_f32(vr[j]);
        sk += a * a;
        sv += b * b;
    }
    sk = block_sum<THREADS>(sk, scratch);
    sv = block_sum<THREADS>(sv, scratch);
    const float ik = rsqrtf(sk / (float)HEAD_DIM + 1e-6f), iv = rsqrtf(sv / (float)HEAD_DIM + 1e-6f);
    for (int j = threadIdx.x; j < HEAD_DIM / 2; j += THREADS) {
        const float a = to_f32(kr[j]) * ik * to_f32(w[j]);
        const float b = to_f32(kr[j + HEAD_DIM / 2]) * ik * to_f32(w[j + HEAD_DIM / 2]);
        float sn, cs;
        sincosf((float)p * inv_freq[j], &sn, &cs);
        const T k0 = from_f32(a * cs - b * sn), k1 = from_f32(b * cs + a * sn);
        const T v0 = from_f32(to_f32(vr[j]) * iv), v1 = from_f32(to_f32(vr[j + HEAD_DIM / 2]) * iv);
        k_cache[at + j] = k0;
        k_cache[at + j + HEAD_DIM / 2] = k1;
        v_cache[at + j] = v0;
        v_cache[at + j + HEAD_DIM / 2] = v1;
#if LIN
        k_lin[in + j] = k0;
        k_lin[in + j + HEAD_DIM / 2] = k1;
        v_lin[in + j] = v0;
        v_lin[in + j + HEAD_DIM / 2] = v1;
#endif
    }
    if (h == 0 && threadIdx.x == 0)
        positions[slot] = p;
    (void)k_lin;
    (void)v_lin;
}
