/* op_softcap_argmax.c — the op "softcap_argmax": Gemma 4's final logit softcap and the greedy
 * token (GEMMA4.md §2.7), and its C reference.
 *
 * Buffers (T = fp16 or bf16):
 *   logits [rows, vocab] T or fp32  IN   LM head output (fp32 when in_f32=1)
 *   capped [rows, vocab] fp32       OUT  30 * tanh(logits / 30) in fp32 (for --dump-logits and
 *                                        sampling); with write=0 the kernel leaves it alone
 *                                        (then it is an unused IN buffer)
 *   ids    [rows]        i32        OUT  argmax of the row; ties go to the lowest index; NaN
 *                                        never wins; a row of NaN gives -1
 * With feed=1 (a decode step feeding the next one on the device):
 *   pos      [rows]        i32        IN   the rows' positions
 *   next_tok [1]           i32        OUT  the last row's argmax (0 for a row of NaN, so that the
 *                                          next step's lookups stay in the table; the caller
 *                                          reads -1 from ids and reports it)
 *   next_pos [1]           i32        OUT  the last row's position + 1
 * next_tok and next_pos may alias the step's own token and position buffers (pos[rows - 1] is
 * read before next_pos is written, by the same thread).
 * Workspace of the template (by name, bytes from the space): part_val, part_idx (rows * SPLIT
 * entries each) and count (rows unsigned counters) — zero it once when allocating; the kernel
 * leaves the counters at zero after every launch.
 * The argmax is taken over the raw logits: tanh is monotonic, so it is an argmax of the capped
 * values, and it does not depend on the last bit of a tanh. */
#include <math.h>

#include "op.h"

enum { SA_LOGITS = 0, SA_CAPPED, SA_IDS, SA_POS, SA_NEXT_TOK, SA_NEXT_POS };

static const tailor_shape_key softcap_argmax_keys[] = {
    {"rows", -1, "rows of logits (1 for a decode step)"},
    {"vocab", 262144, "logits per row"},
    {"in_f32", 0, "1: the logits are fp32; 0: the dtype"},
    {"write", 1, "1: write the capped fp32 logits; 0: only the argmax"},
    {"feed", 0, "1: also write the last row's token and position + 1 for the next step"},
    {NULL, 0, NULL},
};

static tailor_status softcap_argmax_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                             tailor_dtype dtype, tailor_op_buffers *out)
{
    long long rows = tailor_shape_get(shape, "rows", 0);
    long long vocab = tailor_shape_get(shape, "vocab", 262144);
    long long in_f32 = tailor_shape_get(shape, "in_f32", 0), write = tailor_shape_get(shape, "write", 1);
    long long feed = tailor_shape_get(shape, "feed", 0);
    if (rows <= 0 || vocab <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "softcap_argmax: rows and vocab must be positive");
    if (rows > 65535 || vocab > 2147483647LL)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "softcap_argmax: rows must be at most 65535 and vocab fit in 31 bits");
    if (in_f32 < 0 || in_f32 > 1 || write < 0 || write > 1 || feed < 0 || feed > 1)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "softcap_argmax: in_f32, write and feed must be 0 or 1");
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "softcap_argmax: dtype must be fp16 or bf16");
    size_t n = (size_t)(rows * vocab);
    *out = (tailor_op_buffers){
        .count = feed ? 6 : 3,
        .b = {
            [SA_LOGITS] = {"logits", in_f32 ? TAILOR_DTYPE_F32 : dtype, n, TAILOR_BUF_IN, 0, 0},
            [SA_CAPPED] = {"capped", TAILOR_DTYPE_F32, n, write ? TAILOR_BUF_OUT : TAILOR_BUF_IN,
                           1e-5, 1e-6},
            [SA_IDS] = {"ids", TAILOR_DTYPE_I32, (size_t)rows, TAILOR_BUF_OUT, 0, 0},
            [SA_POS] = {"pos", TAILOR_DTYPE_I32, (size_t)rows, TAILOR_BUF_IN, 0, 0},
            [SA_NEXT_TOK] = {"next_tok", TAILOR_DTYPE_I32, 1, TAILOR_BUF_OUT, 0, 0},
            [SA_NEXT_POS] = {"next_pos", TAILOR_DTYPE_I32, 1, TAILOR_BUF_OUT, 0, 0},
        },
    };
    return TAILOR_OK;
}

static void softcap_argmax_fill(const tailor_shape *shape, tailor_dtype dtype,
                                const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t vocab = (size_t)tailor_shape_get(shape, "vocab", 262144);
    tailor_dtype ldt = bufs->b[SA_LOGITS].dtype;
    uint64_t s = seed;
    /* even rows: plain noise, whose maximum is tied many times in 16-bit types (the lowest
     * index must win); odd rows: one clear winner at a random place */
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < vocab; c++)
            tailor_dtype_store(ldt, host[SA_LOGITS], r * vocab + c, (tailor_fill_uniform01(&s) * 2 - 1) * 25.0f);
        if (r % 2)
            tailor_dtype_store(ldt, host[SA_LOGITS], r * vocab + (size_t)(tailor_fill_uniform01(&s) * (float)vocab) % vocab,
                               40.0f);
    }
    for (size_t i = 0; i < bufs->b[SA_CAPPED].count && bufs->b[SA_CAPPED].role == TAILOR_BUF_IN; i++)
        ((float *)host[SA_CAPPED])[i] = 1.0f;
    for (size_t r = 0; r < rows && bufs->count > SA_POS; r++) /* positions far from 0 */
        ((int32_t *)host[SA_POS])[r] = 1000 + 3 * (int32_t)r + (int32_t)(seed % 97);
    (void)dtype;
}

static tailor_status softcap_argmax_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                              tailor_dtype dtype, const tailor_op_buffers *bufs,
                                              void *const *host, float *const *ref)
{
    (void)ctx;
    (void)dtype;
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t vocab = (size_t)tailor_shape_get(shape, "vocab", 262144);
    int write = bufs->b[SA_CAPPED].role == TAILOR_BUF_OUT;
    tailor_dtype ldt = bufs->b[SA_LOGITS].dtype;
    for (size_t r = 0; r < rows; r++) {
        float best = -INFINITY;
        long long bi = -1;
        for (size_t c = 0; c < vocab; c++) {
            float x = tailor_dtype_load(ldt, host[SA_LOGITS], r * vocab + c);
            if (x > best || (x == best && bi < 0)) {
                best = x;
                bi = (long long)c;
            }
            if (write)
                ref[SA_CAPPED][r * vocab + c] = 30.0f * tanhf(x / 30.0f);
        }
        ref[SA_IDS][r] = (float)bi;
    }
    if (bufs->count > SA_POS && rows > 0) {
        ref[SA_NEXT_TOK][0] = ref[SA_IDS][rows - 1] < 0 ? 0.0f : ref[SA_IDS][rows - 1];
        ref[SA_NEXT_POS][0] = (float)((const int32_t *)host[SA_POS])[rows - 1] + 1.0f;
    }
    return TAILOR_OK;
}

static double softcap_argmax_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    double rows = (double)tailor_shape_get(shape, "rows", 0);
    double vocab = (double)tailor_shape_get(shape, "vocab", 262144);
    double in = tailor_shape_get(shape, "in_f32", 0) ? 4.0 : (double)tailor_dtype_size(dtype);
    return rows * vocab * (in + (tailor_shape_get(shape, "write", 1) ? 4.0 : 0.0)) + 4.0 * rows +
           (tailor_shape_get(shape, "feed", 0) ? 12.0 : 0.0);
}

static double softcap_argmax_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 4.0 * (double)tailor_shape_get(shape, "rows", 0) *
           (double)tailor_shape_get(shape, "vocab", 262144);
}

const tailor_op tailor_op_softcap_argmax = {
    .name = "softcap_argmax",
    .summary = "Gemma 4 final logit softcap 30*tanh(x/30) in fp32 and the greedy token per row",
    .keys = softcap_argmax_keys,
    .describe = softcap_argmax_describe,
    .fill = softcap_argmax_fill,
    .reference = softcap_argmax_reference,
    .bytes = softcap_argmax_bytes,
    .flops = softcap_argmax_flops,
};
