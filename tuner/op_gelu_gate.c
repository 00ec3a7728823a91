/* op_gelu_gate.c — the op "gelu_gate": Gemma 4's MLP (and PLE) gating h = gelu_tanh(g) * u
 * (GEMMA4.md §2.6, §2.4), and its C reference.
 *
 * Buffers (T = fp16 or bf16):
 *   g [rows, g_ld]  T  IN   gate projection output (g_ld = inter)
 *   u [rows, u_ld]  T  IN   up projection output (u_ld = inter), or a strided slice such as the
 *                           PLE input of one layer in [tokens, layers*256] (u_ld = layers*256,
 *                           the pointer offset to the layer's columns by the caller)
 *   One [rows, 2*inter] output of a fused gate|up matmul: g = its start, u = start + inter,
 *   g_ld = u_ld = 2*inter (read-only aliasing is fine).
 *   h [rows, inter] T  OUT  the down projection's input
 * Numerics as transformers: gelu_tanh(z) = 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))) in
 * fp32, rounded to T; times u in fp32, rounded to T. */
#include <math.h>

#include "op.h"

enum { GG_G = 0, GG_U, GG_H };

static const tailor_shape_key gelu_gate_keys[] = {
    {"rows", -1, "rows (tokens)"},
    {"inter", -1, "width of the gate and of the output (intermediate size, or 256 for PLE)"},
    {"g_ld", 0, "row stride of g in elements (0: inter)"},
    {"u_ld", 0, "row stride of u in elements (0: inter)"},
    {NULL, 0, NULL},
};

static tailor_status gelu_gate_describe(tailor_ctx *ctx, const tailor_shape *shape,
                                        tailor_dtype dtype, tailor_op_buffers *out)
{
    long long rows = tailor_shape_get(shape, "rows", 0);
    long long inter = tailor_shape_get(shape, "inter", 0);
    long long gld = tailor_shape_get(shape, "g_ld", 0), uld = tailor_shape_get(shape, "u_ld", 0);
    if (gld == 0)
        gld = inter;
    if (uld == 0)
        uld = inter;
    if (rows <= 0 || inter <= 0)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gelu_gate: rows and inter must be positive");
    if (gld < inter || uld < inter)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gelu_gate: g_ld=%lld and u_ld=%lld must be at least inter=%lld",
                                gld, uld, inter);
    if (rows > 65535)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                "gelu_gate: rows=%lld exceeds the grid's 65535 rows", rows);
    if (dtype != TAILOR_DTYPE_F16 && dtype != TAILOR_DTYPE_BF16)
        return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "gelu_gate: dtype must be fp16 or bf16");
    /* two roundings (gelu, product), either of which may land on the other side of a tie */
    double rtol = dtype == TAILOR_DTYPE_BF16 ? 1.0 / 64 : 1.0 / 512;
    *out = (tailor_op_buffers){
        .count = 3,
        .b = {
            [GG_G] = {"g", dtype, (size_t)((rows - 1) * gld + inter), TAILOR_BUF_IN, 0, 0},
            [GG_U] = {"u", dtype, (size_t)((rows - 1) * uld + inter), TAILOR_BUF_IN, 0, 0},
            [GG_H] = {"h", dtype, (size_t)(rows * inter), TAILOR_BUF_OUT, 1e-6, rtol},
        },
    };
    return TAILOR_OK;
}

static void gelu_gate_fill(const tailor_shape *shape, tailor_dtype dtype,
                           const tailor_op_buffers *bufs, void *const *host, uint64_t seed)
{
    (void)shape;
    uint64_t s = seed;
    for (size_t i = 0; i < bufs->b[GG_G].count; i++) /* the gelu's whole range, tails included */
        tailor_dtype_store(dtype, host[GG_G], i,
                           (tailor_fill_uniform01(&s) * 2 - 1) * (i % 53 == 0 ? 12.0f : 4.0f));
    for (size_t i = 0; i < bufs->b[GG_U].count; i++)
        tailor_dtype_store(dtype, host[GG_U], i, (tailor_fill_uniform01(&s) * 2 - 1) * 5.0f);
}

static tailor_status gelu_gate_reference(tailor_ctx *ctx, const tailor_shape *shape,
                                         tailor_dtype dtype, const tailor_op_buffers *bufs,
                                         void *const *host, float *const *ref)
{
    (void)ctx;
    (void)bufs;
    size_t rows = (size_t)tailor_shape_get(shape, "rows", 0);
    size_t inter = (size_t)tailor_shape_get(shape, "inter", 0);
    size_t gld = (size_t)tailor_shape_get(shape, "g_ld", 0);
    size_t uld = (size_t)tailor_shape_get(shape, "u_ld", 0);
    gld = gld ? gld : inter;
    uld = uld ? uld : inter;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < inter; c++)
            ref[GG_H][r * inter + c] =
                tailor_ref_gate(dtype, tailor_dtype_load(dtype, host[GG_G], r * gld + c),
                                tailor_dtype_load(dtype, host[GG_U], r * uld + c));
    return TAILOR_OK;
}

static double gelu_gate_bytes(const tailor_shape *shape, tailor_dtype dtype)
{
    return 3.0 * (double)tailor_shape_get(shape, "rows", 0) *
           (double)tailor_shape_get(shape, "inter", 0) * (double)tailor_dtype_size(dtype);
}

static double gelu_gate_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)dtype;
    return 10.0 * (double)tailor_shape_get(shape, "rows", 0) *
           (double)tailor_shape_get(shape, "inter", 0);
}

const tailor_op tailor_op_gelu_gate = {
    .name = "gelu_gate",
    .summary = "Gemma 4 MLP gating: gelu_tanh(g) * u with transformers' roundings",
    .keys = gelu_gate_keys,
    .describe = gelu_gate_describe,
    .fill = gelu_gate_fill,
    .reference = gelu_gate_reference,
    .bytes = gelu_gate_bytes,
    .flops = gelu_gate_flops,
};
