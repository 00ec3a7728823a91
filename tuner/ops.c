/* ops.c — the table of ops the tuner knows. Each op lives in its own tuner/op_NAME.c. */
#include "op.h"

#include <stdio.h>
#include <string.h>

extern const tailor_op tailor_op_rmsnorm;
extern const tailor_op tailor_op_w4a16_matmul;
extern const tailor_op tailor_op_w4a16_seam;
extern const tailor_op tailor_op_matmul;
extern const tailor_op tailor_op_matmul_glu;
extern const tailor_op tailor_op_matmul_seam;
extern const tailor_op tailor_op_matmul_pro;
extern const tailor_op tailor_op_w4a16_pro;
extern const tailor_op tailor_op_w4a16_glu;
extern const tailor_op tailor_op_w4a16_mlp;
extern const tailor_op tailor_op_attention_prefill;
extern const tailor_op tailor_op_attention_decode;
extern const tailor_op tailor_op_residual_norm;
extern const tailor_op tailor_op_qk_norm_rope;
extern const tailor_op tailor_op_gelu_gate;
extern const tailor_op tailor_op_gather_cols;
extern const tailor_op tailor_op_embed;
extern const tailor_op tailor_op_softcap_argmax;
extern const tailor_op tailor_op_gemma4_kv_store;
extern const tailor_op tailor_op_gemma4_kv_gather;
extern const tailor_op tailor_op_gemma4_ple;
extern const tailor_op tailor_op_gemma4_fill;
extern const tailor_op tailor_op_topk;
/* Add one extern line and one table entry per op. */

static const tailor_op *const all_ops[] = {
    &tailor_op_rmsnorm,
    &tailor_op_w4a16_matmul,
    &tailor_op_w4a16_seam,
    &tailor_op_matmul,
    &tailor_op_matmul_glu,
    &tailor_op_matmul_seam,
    &tailor_op_matmul_pro,
    &tailor_op_w4a16_pro,
    &tailor_op_w4a16_glu,
    &tailor_op_w4a16_mlp,
    &tailor_op_attention_prefill,
    &tailor_op_attention_decode,
    &tailor_op_residual_norm,
    &tailor_op_qk_norm_rope,
    &tailor_op_gelu_gate,
    &tailor_op_gather_cols,
    &tailor_op_embed,
    &tailor_op_softcap_argmax,
    &tailor_op_gemma4_kv_store,
    &tailor_op_gemma4_kv_gather,
    &tailor_op_gemma4_ple,
    &tailor_op_gemma4_fill,
    &tailor_op_topk,
    NULL,
};

const tailor_op *const *tailor_op_list(void) { return all_ops; }

const tailor_op *tailor_op_find(const char *name)
{
    for (int i = 0; all_ops[i]; i++)
        if (strcmp(all_ops[i]->name, name) == 0)
            return all_ops[i];
    return NULL;
}

tailor_status tailor_op_get(tailor_ctx *ctx, const char *name, const tailor_op **out)
{
    if ((*out = tailor_op_find(name)) != NULL)
        return TAILOR_OK;
    char list[512] = "";
    for (int i = 0; all_ops[i]; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", all_ops[i]->name);
    }
    return tailor_set_error(ctx, TAILOR_ERR_NOT_FOUND, "op '%s' is unknown (known ops: %s)", name,
                            list);
}
