// cubin_time.cu — times one dumped w4a16_gemv_t cubin (tailor plan --dump) at m = 1 the way
// the tuner does (a CUDA graph of 200 launches over rotated buffer sets larger than the L2,
// best of 5), so that copies of the template with pieces knocked out (gemv_t_variants.py) can be
// timed although they compute nothing right. Not part of the build; run by scripts/probe/run.sh.
//   cubin_time CUBIN N K [SMEM]   (signature: out, a, qweight, scales, M, N, K, ld; SPLITK 1, no zp;
//                           grid N/16 x 1, 128 threads: the pinned configuration)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *m_ = "";                                                                   \
            cuGetErrorString(r_, &m_);                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, m_);                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: cubin_time CUBIN N K [DYNAMIC-SMEM-BYTES]\n");
        return 2;
    }
    const char *path = argv[1];
    const int N = atoi(argv[2]), K = atoi(argv[3]), M = 1, ld = (N + 15) / 16 * 16;
    const unsigned smem = argc == 5 ? (unsigned)atoi(argv[4]) : 0;
    std::string name = path;
    name = name.substr(name.find_last_of('/') + 1);
    name = name.substr(0, name.size() - strlen(".cubin"));
    cudaFree(0); // the runtime's primary context, current for the driver calls
    CUmodule mod;
    CUfunction fn;
    CK(cuModuleLoad(&mod, path));
    CK(cuModuleGetFunction(&fn, mod, name.c_str()));
    const size_t wb = (size_t)N * K / 2, sb = (size_t)(K / 128) * ld * 2, ab = (size_t)K * 2,
                 ob = (size_t)N * 2;
    const size_t per = (wb + sb + ab + ob + 4095) & ~(size_t)4095;
    const int sets = (int)(((size_t)256 << 20) / per) > 64 ? 64 : (int)(((size_t)256 << 20) / per);
    CUdeviceptr base;
    CK(cuMemAlloc(&base, per * sets));
    CK(cuMemsetD8(base, 0x11, per * sets));
    std::vector<std::vector<void *>> argv_sets(2 * sets);
    struct A {
        CUdeviceptr out, a, w, s;
        int M, N, K, ld;
    };
    std::vector<A> args(2 * sets);
    // sets .. 2 sets - 1: the same weights, every launch reading set 0's activations (in L2,
    // as a model's GEMV reads what the kernel before it wrote)
    for (int i = 0; i < 2 * sets; i++) {
        CUdeviceptr p = base + (size_t)(i % sets) * per, a0 = i < sets ? p : base;
        args[i] = {p + wb + sb + ab, a0 + wb + sb, p, p + wb, M, N, K, ld};
        argv_sets[i] = {&args[i].out, &args[i].a, &args[i].w, &args[i].s,
                        &args[i].M,   &args[i].N, &args[i].K, &args[i].ld};
    }
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    // pdl: each launch may start while its predecessor drains (the model's decode graph)
    auto launch = [&](int i, int pdl, int fixed) {
        CUlaunchAttribute at;
        at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig c = {};
        c.gridDimX = (N + 15) / 16;
        c.gridDimY = c.gridDimZ = 1;
        c.blockDimX = 128;
        c.blockDimY = c.blockDimZ = 1;
        c.sharedMemBytes = smem;
        c.hStream = s;
        c.attrs = &at;
        c.numAttrs = pdl ? 1 : 0;
        CK(cuLaunchKernelEx(&c, fn, argv_sets[i % sets + (fixed ? sets : 0)].data(), nullptr));
    };
    for (int i = 0; i < 2 * sets; i++)
        launch(i, 0, 0);
    CK(cuStreamSynchronize(s));
    const int L = 200;
    float us[4];
    for (int mode = 0; mode < 4; mode++) {
        const int pdl = mode & 1, fixed = mode >> 1;
        CUgraph g;
        CUgraphExec ge;
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < L; i++)
            launch(i, pdl, fixed);
        CK(cuStreamEndCapture(s, &g));
        CK(cuGraphInstantiate(&ge, g, 0));
        CUevent a, b;
        CK(cuEventCreate(&a, 0));
        CK(cuEventCreate(&b, 0));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        float best = 1e30f;
        for (int r = 0; r < 5; r++) {
            CK(cuEventRecord(a, s));
            CK(cuGraphLaunch(ge, s));
            CK(cuEventRecord(b, s));
            CK(cuEventSynchronize(b));
            float ms;
            CK(cuEventElapsedTime(&ms, a, b));
            best = ms < best ? ms : best;
        }
        us[mode] = best * 1000.f / L;
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
    }
    printf("n=%d k=%d %.2f us per launch, %.2f with PDL; activations in L2 %.2f, %.2f with PDL "
           "(%d sets, graph of %d)\n", N, K, us[0], us[1], us[2], us[3], sets, L);
    return 0;
}
