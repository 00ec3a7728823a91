/* gen.h — instantiation and compilation of kernel templates with NVRTC: a configuration
 * becomes -D defines, the kernel name encodes every choice, the compiler's resource report is
 * read back. */
#ifndef TAILOR_GEN_H
#define TAILOR_GEN_H

#include <stddef.h>

#include "tailor.h"

#define TAILOR_GEN_MAX_DEFINES 48

typedef struct tailor_define {
    char name[48];
    char value[64];
} tailor_define;

typedef struct tailor_compile_request {
    const char *source_name;   /* "rmsnorm.cu", for messages and NVRTC's program name */
    const char *source;        /* the template text */
    const char *kernel_name;   /* becomes -DTAILOR_KERNEL=... */
    int sm;                    /* target architecture, e.g. 75, 80, 90 */
    int ptx;                   /* 1: the PTX of the sm_<sm> compile, the text a compute_<sm>
                                  compile gives (rehearsal: the driver JITs it on the live GPU);
                                  0: the cubin for sm_<sm> */
    int arch_specific;         /* 1: sm_<sm>a / compute_<sm>a (wgmma): code that runs on that
                                  architecture only, not on later ones */
    int ndefines;
    const tailor_define *defines;
} tailor_compile_request;

typedef struct tailor_compile_result {
    void *image;               /* cubin, or NUL-terminated PTX; malloc'd */
    size_t image_size;
    int is_ptx;
    int regs;                  /* from ptxas -v: registers per thread */
    int smem_static;           /* bytes of __shared__ memory */
    int stack_bytes;           /* stack frame */
    int spill_stores, spill_loads;
    int wgmma_serialized;      /* ptxas serialized this kernel's wgmma instructions: the notice's
                                  code (7511, 7515, ...; 1 if it had none), else 0 */
    double seconds;            /* compile wall time */
    char *log;                 /* the whole NVRTC log; malloc'd */
    int reused;                /* 1: a copy of an identical earlier compile (tailor_compile_memo) */
    void *native;              /* PTX only: the live GPU's cubin of it, JIT-compiled where it was
                                  compiled (tailor_compile_memo_set_jit); NULL: none; malloc'd */
    size_t native_size;
} tailor_compile_result;

/* Compiles one instantiation, for sm_<sm>: the resource report comes from ptxas either way;
 * ptx=1 keeps the PTX instead of the cubin (one NVRTC pass). On failure: TAILOR_ERR_NVRTC with
 * the program log in the message. Free the result with tailor_compile_result_free (also after
 * failure). Thread-safe. */
tailor_status tailor_gen_compile(tailor_ctx *ctx, const tailor_compile_request *req,
                                 tailor_compile_result *out);
void tailor_compile_result_free(tailor_compile_result *r);

/* Compile results kept for the rest of a run, so that an instantiation planned for many shapes
 * (the same configuration and defines) is compiled once. The key is every input of the compiler:
 * the template text, the headers it may include, kernel name, target and defines. At most
 * max_bytes of images and logs are kept; past that, new results are not. Thread-safe: a request
 * for an instantiation another thread is compiling waits for that compile and copies it. */
typedef struct tailor_compile_memo tailor_compile_memo;

/* What a tuning run keeps by default: the E2B preset's first boot compiles a few thousand
 * instantiations of 20-200 KB each. */
#define TAILOR_COMPILE_MEMO_BYTES ((size_t)512 << 20)

/* NULL only when out of memory. */
tailor_compile_memo *tailor_compile_memo_create(size_t max_bytes);
void tailor_compile_memo_destroy(tailor_compile_memo *m);

/* tailor_gen_compile through the memo (m may be NULL: a plain compile). A hit is a copy of the
 * earlier result with reused = 1 and seconds = 0; failures are not kept. */
tailor_status tailor_gen_compile_memo(tailor_ctx *ctx, tailor_compile_memo *m,
                                      const tailor_compile_request *req, tailor_compile_result *out);

/* Turns PTX into the live GPU's binary (the driver's JIT; thread-safe): *native malloc'd. */
typedef tailor_status (*tailor_jit_fn)(tailor_ctx *ctx, void *user, const char *ptx, void **native,
                                       size_t *native_size);

/* From now on each PTX image the memo compiles is JIT-compiled by fn at once, in the thread that
 * compiled it, and kept with it as the result's `native` (a rehearsal: the driver's JIT runs in
 * the compile threads, not one after another where the tuner loads). A JIT that fails leaves
 * native NULL: the loader then JITs the PTX itself and reports what the driver says. Call it
 * before the memo is shared between threads. */
void tailor_compile_memo_set_jit(tailor_compile_memo *m, tailor_jit_fn fn, void *user);

/* Lookups answered from the memo, compiles it made, bytes it holds. */
void tailor_compile_memo_stats(tailor_compile_memo *m, int *hits, int *misses, size_t *bytes);

/* The most bytes it keeps (max_bytes of tailor_compile_memo_create). */
size_t tailor_compile_memo_capacity(const tailor_compile_memo *m);

/* The architectures this NVRTC can compile for (nvrtcGetSupportedArchs), e.g. 75 80 ... 120.
 * archs must hold 64 entries. */
tailor_status tailor_gen_supported_archs(tailor_ctx *ctx, int *archs, int *count);

/* TAILOR_OK when NVRTC supports sm; otherwise TAILOR_ERR_UNSUPPORTED listing what it does. */
tailor_status tailor_gen_check_arch(tailor_ctx *ctx, int sm);

/* Parses "sm_90", "sm90", "90", "compute_75" into 90/75. TAILOR_ERR_MISUSE if malformed. */
tailor_status tailor_gen_parse_arch(tailor_ctx *ctx, const char *text, int *sm);

/* The NVRTC version, e.g. 13.0. */
void tailor_gen_nvrtc_version(int *major, int *minor);

/* Builds the kernel name "op__template__sm90__bf16__A1_B2" (defines sorted by name, values
 * made identifier-safe) into buf. */
void tailor_gen_kernel_name(const char *op, const char *template_name, int sm, const char *dtype,
                            const tailor_define *defines, int ndefines, char *buf, size_t size);

/* Parses a ptxas -v log for the entry `kernel`; fields left at -1 when not found
 * (wgmma_serialized: the code of ptxas's "wgmma.mma_async instructions are serialized" notice for
 * that function, C7511 or C7515 say, else 0). */
void tailor_gen_parse_report(const char *log, const char *kernel, tailor_compile_result *r);

#endif
