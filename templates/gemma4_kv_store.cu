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

#define KV_NP ((HEAD_DIM / 2 + THREADS - 1) / THREADS) // rotation pairs a thread owns

// A thread's pairs j = threadIdx.x + i THREADS: their weights (w[j], w[j + HEAD_DIM / 2]) and
// angles at position p. Loaded before the grid wait (tailor_grid_begin's exception: weights, and
// the step's positions, written before it began), so that after it only the rows' loads stand
// before the math.
struct KvRot {
    float w0[KV_NP], w1[KV_NP], sn[KV_NP], cs[KV_NP];
};
__device__ __forceinline__ void kv_rot_prepare(KvRot &r, const T *__restrict__ w,
                                               const float *__restrict__ inv_freq, int p)
{
#pragma unroll
    for (int i = 0; i < KV_NP; i++) {
        const int j = threadIdx.x + i * THREADS;
        r.w0[i] = r.w1[i] = r.sn[i] = r.cs[i] = 0.f;
        if (j < HEAD_DIM / 2) {
            r.w0[i] = to_f32(w[j]);
            r.w1[i] = to_f32(w[j + HEAD_DIM / 2]);
            sincosf((float)p * inv_freq[j], &r.sn[i], &r.cs[i]);
        }
    }
}

// Row x [HEAD_DIM] normed with r's weights and rotated at r's angles into y (y may be x).
__device__ __forceinline__ void kv_norm_rope_row(T *y, const T *x, const KvRot &r, float *scratch)
{
    float ss = 0.f;
    for (int j = threadIdx.x; j < HEAD_DIM; j += THREADS) {
        const float a = to_f32(x[j]);
        ss += a * a;
    }
    ss = block_sum<THREADS>(ss, scratch);
    const float inv = rsqrtf(ss / (float)HEAD_DIM + 1e-6f);
#pragma unroll
    for (int i = 0; i < KV_NP; i++) {
        const int j = threadIdx.x + i * THREADS;
        if (j < HEAD_DIM / 2) {
            const float a = to_f32(x[j]) * inv * r.w0[i];
            const float b = to_f32(x[j + HEAD_DIM / 2]) * inv * r.w1[i];
            y[j] = from_f32(a * r.cs[i] - b * r.sn[i]);
            y[j + HEAD_DIM / 2] = from_f32(b * r.cs[i] + a * r.sn[i]);
        }
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
    __shared__ float scratch[THREADS / 32 > 0 ? THREADS / 32 : 1];
    const int t = blockIdx.x, h = blockIdx.y;
    const int p = pos[t], slot = p % slots;
    KvRot rot;
#if QH > 0
    kv_rot_prepare(rot, h >= kv_heads ? wq : w, inv_freq, p);
    tailor_grid_begin();
    if (h >= kv_heads) { // a q head
        const size_t at = ((size_t)t * QH + (h - kv_heads)) * HEAD_DIM;
        kv_norm_rope_row(q_out + at, q + at, rot, scratch);
        return;
    }
#else
    kv_rot_prepare(rot, w, inv_freq, p);
    tailor_grid_begin();
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
#pragma unroll
    for (int i = 0; i < KV_NP; i++) {
        const int j = threadIdx.x + i * THREADS;
        if (j >= HEAD_DIM / 2)
            continue;
        const float a = to_f32(kr[j]) * ik * rot.w0[i];
        const float b = to_f32(kr[j + HEAD_DIM / 2]) * ik * rot.w1[i];
        const T k0 = from_f32(a * rot.cs[i] - b * rot.sn[i]);
        const T k1 = from_f32(b * rot.cs[i] + a * rot.sn[i]);
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
