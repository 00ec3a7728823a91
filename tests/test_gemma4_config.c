/* test_gemma4_config.c — config.json parsing (flat, nested, per_layer_config), refusals (unknown
 * model_type, MoE, other quantization), config-vs-tensor disagreements, presets and their shapes,
 * and the GPU model's memory from the loader's dry pass (and the refusal of one that won't fit). */
#include <string.h>

#include "gemma4.h"
#include "test_gemma4_writer.h"
#include "testlib.h"

#define LT5 "\"sliding_attention\",\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\""

static void expect_msg(tailor_ctx *ctx, tailor_status got, tailor_status want, const char *what,
                       const char *n1, const char *n2)
{
    const char *msg = tailor_ctx_message(ctx);
    CHECKF(got == want, "%s: status %s, want %s (%s)", what, tailor_status_name(got),
           tailor_status_name(want), msg);
    CHECKF(!n1 || strstr(msg, n1), "%s: message lacks '%s': %s", what, n1, msg);
    CHECKF(!n2 || strstr(msg, n2), "%s: message lacks '%s': %s", what, n2, msg);
    printf("  %-28s -> %s\n", what, msg);
}

static void test_parse(tailor_ctx *ctx)
{
    tailor_gemma4_config c;
    /* flat, as transformers 5.17 saves it: per_layer_config, no global_head_dim */
    const char *flat =
        "{\"architectures\":[\"Gemma4ForCausalLM\"],\"model_type\":\"gemma4_text\","
        "\"vocab_size\":512,\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":6,"
        "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":256,"
        "\"layer_types\":[\"sliding_attention\",\"sliding_attention\",\"full_attention\","
        "\"sliding_attention\",\"sliding_attention\",\"full_attention\"],\"sliding_window\":8,"
        "\"per_layer_config\":{\"2\":{\"head_dim\":512},\"5\":{\"head_dim\":512}},"
        "\"hidden_size_per_layer_input\":32,\"num_kv_shared_layers\":2,"
        "\"use_double_wide_mlp\":true,\"final_logit_softcapping\":30.0}";
    CHECK_OK(ctx, tailor_gemma4_config_parse(ctx, flat, "flat.json", &c));
    CHECK(c.n_layers == 6 && c.layer[2].full && c.layer[2].head_dim == 512);
    CHECK(c.layer[0].head_dim == 256 && !c.layer[0].full);
    CHECKF(c.layer[4].kv_shared && c.layer[4].kv_source == 3, "layer 4 reads %d",
           c.layer[4].kv_source);
    CHECKF(c.layer[5].kv_shared && c.layer[5].kv_source == 2, "layer 5 reads %d (by type: 2)",
           c.layer[5].kv_source);
    CHECK(c.layer[3].inter == 128 && c.layer[4].inter == 256 && c.layer[5].inter == 256);
    CHECK(c.softcap == 30.0f && c.ple_dim == 32 && c.sliding_window == 8);
    CHECK(c.rope_theta_full == 1000000.0f && c.partial_rotary_full == 0.25f);

    /* nested, released style: text_config + global_head_dim + K=V with global KV heads */
    const char *nested =
        "{\"architectures\":[\"Gemma4ForConditionalGeneration\"],\"model_type\":\"gemma4\","
        "\"text_config\":{\"model_type\":\"gemma4_text\",\"vocab_size\":512,\"hidden_size\":64,"
        "\"intermediate_size\":128,\"num_hidden_layers\":5,\"num_attention_heads\":4,"
        "\"num_key_value_heads\":2,\"num_global_key_value_heads\":1,\"head_dim\":256,"
        "\"global_head_dim\":512,\"attention_k_eq_v\":true,\"layer_types\":[" LT5 "],"
        "\"sliding_window\":12,\"hidden_size_per_layer_input\":0},\"vision_config\":{}}";
    CHECK_OK(ctx, tailor_gemma4_config_parse(ctx, nested, "nested.json", &c));
    CHECK(c.layer[2].full && c.layer[2].n_kv_heads == 1 && !c.layer[2].has_v_proj &&
          c.layer[2].head_dim == 512);
    CHECK(c.layer[1].n_kv_heads == 2 && c.layer[1].has_v_proj && c.layer[1].head_dim == 256);
    CHECK(c.ple_dim == 0 && c.k_eq_v == 1);

    /* refusals */
    tailor_status s = tailor_gemma4_config_parse(
        ctx, "{\"model_type\":\"llama\",\"hidden_size\":8}", "llama.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_UNSUPPORTED, "unknown model_type", "llama.json", "'llama'");
    s = tailor_gemma4_config_parse(ctx, "{\"model_type\":\"gemma4\"}", "notext.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_PARSE, "nested without text_config", "notext.json",
               "text_config");
    s = tailor_gemma4_config_parse(ctx, "{\"model_type\": \"gemma4_text\", ", "broken.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_PARSE, "malformed JSON", "broken.json", "JSON");
    s = tailor_gemma4_config_parse(ctx, "{\"model_type\":\"gemma4_text\",\"vocab_size\":8}",
                                   "short.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_PARSE, "missing field", "short.json", "hidden_size");
    s = tailor_gemma4_config_parse(ctx, "{\"model_type\":\"gemma4_text\",\"vocab_size\":1e12}",
                                   "huge.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_PARSE, "a field too large", "huge.json: field vocab_size is "
               "1000000000000, too large (at most 1000000000)", NULL);
    s = tailor_gemma4_config_parse(ctx, "{\"model_type\":\"gemma4_text\",\"vocab_size\":-3}",
                                   "negative.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_PARSE, "a negative field", "negative.json: field vocab_size is "
               "not a non-negative integer", NULL);
    s = tailor_gemma4_config_parse(ctx,
                                   "{\"model_type\":\"gemma4_text\",\"vocab_size\":8,"
                                   "\"hidden_size\":8,\"intermediate_size\":8,"
                                   "\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                                   "\"num_key_value_heads\":1,\"head_dim\":4,"
                                   "\"sliding_window\":4,\"layer_types\":[\"sliding_attention\","
                                   "\"chunked_attention\"]}", "types.json", &c);
    expect_msg(ctx, s, TAILOR_ERR_PARSE, "bad layer type", "types.json", "layer_types[1]");
}

static void write_cfg_of(const tw_spec *s, const char *dir)
{
    char cfg[16384], p[400];
    tw_config_json(s, cfg, sizeof cfg);
    snprintf(p, sizeof p, "%s/config.json", dir);
    tw_write_text(p, cfg);
}

static tailor_status open_dir(tailor_ctx *ctx, const char *dir)
{
    tailor_gemma4 *m = (tailor_gemma4 *)0x1;
    tailor_status s = tailor_gemma4_open(ctx, dir, &m);
    CHECKF(s == TAILOR_OK || m == NULL, "%s: *out not cleared on failure", dir);
    tailor_gemma4_close(s == TAILOR_OK ? m : NULL);
    return s;
}

static void test_disagreements(tailor_ctx *ctx)
{
    tw_spec base = {.H = 16, .L = 5, .nq = 2, .nkv = 1, .hd = 8, .ghd = 16, .inter = 24, .W = 3,
                    .P = 4, .shared = 2, .double_wide = 1, .vocab = 32, .types = "ssfsf",
                    .dtype = "BF16", .seed = 99};
    char dir[256];
    tw_tmpdir(dir, sizeof dir, "cfg");
    CHECK(tw_write_model(&base, dir) == 0);
    CHECK_OK(ctx, open_dir(ctx, dir));

    tw_spec t = base;
    t.nkv = 2; /* config says 2 KV heads, k_proj rows say 1 */
    write_cfg_of(&t, dir);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_PARSE, "KV heads disagree", "KV heads",
               "config.json");
    t = base;
    t.ghd = 32; /* config says full head_dim 32, q_norm has 16 */
    write_cfg_of(&t, dir);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_PARSE, "head_dim disagrees", "q_norm",
               "layer 2");
    t = base;
    t.k_eq_v = 1; /* config says K=V, but the full layer has a v_proj */
    write_cfg_of(&t, dir);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_PARSE, "k_eq_v vs v_proj", "v_proj",
               "attention_k_eq_v");
    t = base;
    t.double_wide = 0; /* MLP width of shared layers */
    write_cfg_of(&t, dir);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_PARSE, "MLP width disagrees", "gate_proj",
               "layer 3");
    t = base;
    t.P = 8; /* PLE width */
    write_cfg_of(&t, dir);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_PARSE, "PLE width disagrees",
               "embed_tokens_per_layer", "hidden_size_per_layer_input");

    /* a missing tensor */
    write_cfg_of(&base, dir);
    tw *w = calloc(1, sizeof *w);
    tw_model_tensors(&base, w);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, "model.layers.1.mlp.down_proj.weight") == 0) {
            free(w->t[i].data);
            w->t[i] = w->t[--w->n];
            break;
        }
    char p[400];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    tw_write(w, p);
    tw_free(w);
    free(w);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_NOT_FOUND, "missing tensor",
               "model.layers.1.mlp.down_proj.weight", "model.safetensors");

    /* MoE: recognised and refused */
    snprintf(p, sizeof p, "%s/config.json", dir);
    tw_write_text(p, "{\"architectures\":[\"Gemma4ForConditionalGeneration\"],\"model_type\":"
                     "\"gemma4\",\"text_config\":{\"vocab_size\":32,\"hidden_size\":16,"
                     "\"intermediate_size\":24,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                     "\"num_key_value_heads\":1,\"head_dim\":8,\"sliding_window\":3,"
                     "\"enable_moe_block\":true,\"num_experts\":4,\"top_k_experts\":2,"
                     "\"moe_intermediate_size\":8}}");
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_UNSUPPORTED, "MoE refused",
               "mixture-of-experts", "config.json");
    /* another quantization method */
    char cfg[16384];
    tw_config_json(&base, cfg, sizeof cfg);
    size_t n = strlen(cfg);
    snprintf(cfg + n - 1, sizeof cfg - n + 1, ",\"quantization_config\":{\"quant_method\":\"gptq\"}}");
    tw_write_text(p, cfg);
    expect_msg(ctx, open_dir(ctx, dir), TAILOR_ERR_UNSUPPORTED, "gptq refused", "gptq",
               "quant_method");
    tw_rmdir(dir);
}

static const tailor_gemma4_shape *find_shape(const tailor_gemma4_shape *s, int n, const char *what,
                                             int rows, int k)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].what, what) == 0 && s[i].n == rows && s[i].k == k)
            return &s[i];
    return NULL;
}

static void test_presets(tailor_ctx *ctx)
{
    tailor_gemma4_config c;
    tailor_gemma4_shape sh[64];
    int n = 0;
    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-e2b", &c));
    for (int i = 0; i < 35; i++)
        CHECKF(c.layer[i].full == (i % 5 == 4), "E2B layer %d type", i);
    CHECK(c.layer[15].kv_shared && c.layer[15].kv_source == 13);
    CHECK(c.layer[19].kv_shared && c.layer[19].kv_source == 14);
    CHECK(!c.layer[14].kv_shared && c.layer[14].inter == 6144 && c.layer[15].inter == 12288);
    CHECK_OK(ctx, tailor_gemma4_shapes(ctx, &c, sh, 64, &n));
    CHECK(find_shape(sh, n, "q_proj", 2048, 1536) && find_shape(sh, n, "q_proj", 4096, 1536));
    CHECK(find_shape(sh, n, "k_proj", 256, 1536) && find_shape(sh, n, "k_proj", 512, 1536));
    const tailor_gemma4_shape *g = find_shape(sh, n, "gate_proj", 12288, 1536);
    CHECKF(g && g->count == 20, "E2B double-wide gate count %d", g ? g->count : -1);
    CHECK(find_shape(sh, n, "ple_model_proj", 8960, 1536) && find_shape(sh, n, "lm_head", 262144, 1536));
    int attn = 0;
    for (int i = 0; i < n; i++)
        if (sh[i].kind == TAILOR_GEMMA4_SHAPE_ATTENTION)
            attn += sh[i].count;
    CHECKF(attn == 35, "attention shapes cover %d layers", attn);

    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-E4B-it", &c));
    CHECK(c.layer[24].kv_source == 22 && c.layer[29].kv_source == 23 && c.layer[5].n_kv_heads == 2);

    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-31b", &c));
    CHECK(c.layer[5].full && c.layer[5].n_kv_heads == 4 && !c.layer[5].has_v_proj);
    CHECK(c.layer[0].n_kv_heads == 16 && c.layer[0].has_v_proj && !c.layer[59].kv_shared);
    CHECK_OK(ctx, tailor_gemma4_shapes(ctx, &c, sh, 64, &n));
    CHECK(find_shape(sh, n, "k_proj", 4096, 5376) && find_shape(sh, n, "k_proj", 2048, 5376));
    const tailor_gemma4_shape *v = find_shape(sh, n, "v_proj", 4096, 5376);
    CHECKF(v && v->count == 50 && !find_shape(sh, n, "v_proj", 2048, 5376), "31B v_proj only on "
           "the 50 sliding layers");
    CHECK(find_shape(sh, n, "o_proj", 5376, 16384) && !find_shape(sh, n, "ple_gate", 256, 5376));

    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-26b-a4b", &c));
    CHECK(c.moe && c.n_experts == 128);
    CHECK_OK(ctx, tailor_gemma4_shapes(ctx, &c, sh, 64, &n));
    CHECK(find_shape(sh, n, "expert_gate_up", 1408, 2816) && find_shape(sh, n, "router", 128, 2816));
    expect_msg(ctx, tailor_gemma4_preset(ctx, "gemma-5", &c), TAILOR_ERR_NOT_FOUND,
               "unknown preset", "gemma-5", "gemma-4-e2b");
}

/* The one-row residual_norm modes a kernel list holds, as a bit set (1 << mode). */
static int seam_kernel_modes(const tailor_gemma4_kernel_use *u, int n)
{
    int modes = 0;
    for (int m = 0; m < 4; m++) {
        char kv[32];
        snprintf(kv, sizeof kv, "rows=1,mode=%d", m);
        if (test_kernel_uses(u, n, "residual_norm", kv))
            modes |= 1 << m;
    }
    return modes;
}

/* Where the E2B decode runs its layer seams, from the runtime's own dry pass (no GPU): by
 * default the kernel before int4 GEMVs; with seams MIXED the int4 projection's epilogue
 * (w4a16_seam) or the 16-bit one's (matmul_seam) instead, the prologue kept before 16-bit
 * GEMVs; PROLOGUE, KERNEL and EPILOGUE everywhere; a 16-bit model's list is the same under
 * the default and MIXED. */
static void test_seam_placement(tailor_ctx *ctx)
{
    tailor_gemma4_config c;
    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-e2b", &c));
    tailor_gemma4_kernel_use *u = NULL;
    int n = 0;
    tailor_gemma4_gpu_opts o = {.max_tokens = 1024, .quantize = 1, .quantize_head = 1};
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) == (1 << 0 | 1 << 1 | 1 << 3),
           "W4A16 default: seam kernels of modes 0, 1, 3 (bits %#x)", seam_kernel_modes(u, n));
    CHECK(test_kernel_uses(u, n, "w4a16_seam", "m=1") == 0 &&
          test_kernel_uses(u, n, "matmul_seam", "m=1") == 0);
    CHECK(test_kernel_uses(u, n, "matmul_pro", "glu=2,m=1,mode=2,n=256") == 1);
    /* the int4 MLP as two GEMVs at both widths (the default) */
    CHECK(test_kernel_uses(u, n, "w4a16_mlp", "m=1") == 0);
    CHECK(test_kernel_uses(u, n, "w4a16_glu", "k=1536,m=1") == 2);
    CHECK(test_kernel_uses(u, n, "w4a16_matmul", "k=12288,m=1,n=1536") == 1);
    free(u);

    /* every int4 linear in an activation order (bench model --act-order): one-row gathers at
     * the five input widths (q|k|v and gate|up 1536, o 2048 and 4096, down 6144 and 12288), the
     * stacks still whole, the same seam kernels (no int4 prologue by default anyway) */
    o.act_order = 1;
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(test_kernel_uses(u, n, "gather_cols", "rows=1") == 5, "act-order: %d one-row gathers",
           test_kernel_uses(u, n, "gather_cols", "rows=1"));
    CHECK(test_kernel_uses(u, n, "gather_cols", "cols=2048,rows=1") == 1);
    CHECK(test_kernel_uses(u, n, "w4a16_glu", "k=1536,m=1") == 2);
    /* q|k|v of a full layer */
    CHECK(test_kernel_uses(u, n, "w4a16_matmul", "k=1536,m=1,n=2560") == 1);
    CHECK(seam_kernel_modes(u, n) == (1 << 0 | 1 << 1 | 1 << 3));
    free(u);
    o.act_order = 0;

    o.fused_mlp = 1; /* in one launch at both widths, with the same seams: the down's seam owed
                        to the PLE gate as before */
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) == (1 << 0 | 1 << 1 | 1 << 3),
           "W4A16 fused MLP: seam kernels of modes 0, 1, 3 (bits %#x)", seam_kernel_modes(u, n));
    CHECK(test_kernel_uses(u, n, "w4a16_mlp", "k=1536,m=1,n=6144") == 1);
    CHECK(test_kernel_uses(u, n, "w4a16_mlp", "k=1536,m=1,n=12288") == 1);
    CHECK(test_kernel_uses(u, n, "w4a16_glu", "m=1") == 0);
    CHECK(test_kernel_uses(u, n, "w4a16_matmul", "k=6144,m=1") == 0);
    CHECK(test_kernel_uses(u, n, "matmul_pro", "glu=2,m=1,mode=2,n=256") == 1);
    /* under PROLOGUE the o seam owed to the fused MLP (no prologue) runs as a kernel (mode 0);
     * under EPILOGUE its own seam (no epilogue) as well (mode 2) */
    o.seams = TAILOR_GEMMA4_SEAMS_PROLOGUE;
    free(u);
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) & 1, "W4A16 fused MLP, prologue: the o seam as a kernel "
           "(bits %#x)", seam_kernel_modes(u, n));
    o.seams = TAILOR_GEMMA4_SEAMS_EPILOGUE;
    free(u);
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) & 4, "W4A16 fused MLP, epilogue: the MLP's seam as a kernel "
           "(bits %#x)", seam_kernel_modes(u, n));
    free(u);
    o.fused_mlp = 0;
    o.seams = 0;

    o.seams = TAILOR_GEMMA4_SEAMS_MIXED;
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) == 1 << 3, "W4A16 mixed: only the first input norm is a seam "
           "kernel (bits %#x)", seam_kernel_modes(u, n));
    /* o, before gate|up */
    CHECK(test_kernel_uses(u, n, "w4a16_seam", "k=2048,m=1,mode=0,n=1536") == 1);
    /* full layers' o */
    CHECK(test_kernel_uses(u, n, "w4a16_seam", "k=4096,m=1,mode=0,n=1536") == 1);
    /* PLE projection */
    CHECK(test_kernel_uses(u, n, "matmul_seam", "k=256,m=1,mode=1,n=1536") == 1);
    /* the PLE gate pays */
    CHECK(test_kernel_uses(u, n, "matmul_pro", "glu=2,m=1,mode=2,n=256") == 1);
    CHECK(test_kernel_uses(u, n, "w4a16_pro", "m=1") == 0);
    free(u);

    o.seams = TAILOR_GEMMA4_SEAMS_PROLOGUE; /* in the next GEMV, int4 ones too */
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) == (1 << 1 | 1 << 3), "W4A16 prologue: seam kernels only "
           "for the first input norm and before the LM head (bits %#x)", seam_kernel_modes(u, n));
    /* gate|up after o, both widths */
    CHECK(test_kernel_uses(u, n, "w4a16_pro", "glu=1,m=1,mode=0") == 2);
    CHECK(test_kernel_uses(u, n, "w4a16_pro", "glu=0,m=1,mode=1") > 0);  /* q|k|v after the PLE */
    CHECK(test_kernel_uses(u, n, "w4a16_seam", "m=1") == 0 &&
          test_kernel_uses(u, n, "matmul_seam", "m=1") == 0);
    free(u);

    o.seams = TAILOR_GEMMA4_SEAMS_KERNEL; /* every decode seam a residual_norm launch */
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) == 0xf, "W4A16 kernel: seam kernels of modes 0-3 (bits %#x)",
           seam_kernel_modes(u, n));
    CHECK(test_kernel_uses(u, n, "matmul_pro", "m=1") == 0 &&
          test_kernel_uses(u, n, "w4a16_pro", "m=1") == 0);
    free(u);

    o.seams = TAILOR_GEMMA4_SEAMS_EPILOGUE; /* in every projection's last block */
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &o, &u, &n));
    CHECKF(seam_kernel_modes(u, n) == 1 << 3, "W4A16 epilogue: only the first input norm is a "
           "seam kernel (bits %#x)", seam_kernel_modes(u, n));
    /* down (both widths), before PLE */
    CHECK(test_kernel_uses(u, n, "w4a16_seam", "m=1,mode=2") == 2);
    CHECK(test_kernel_uses(u, n, "matmul_pro", "m=1") == 0);
    free(u);

    tailor_gemma4_kernel_use *d = NULL;
    int nd = 0;
    tailor_gemma4_gpu_opts b = {.max_tokens = 1024};
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &b, &d, &nd));
    b.seams = TAILOR_GEMMA4_SEAMS_MIXED;
    CHECK_OK(ctx, tailor_gemma4_gpu_kernels(ctx, &c, NULL, &b, &u, &n));
    int same = n == nd;
    for (int i = 0; same && i < n; i++)
        same = strcmp(u[i].op, d[i].op) == 0 && strcmp(u[i].shape, d[i].shape) == 0;
    CHECKF(same, "bf16: mixed seams list the default's kernels (%d against %d)", n, nd);
    free(u);
    free(d);
}

/* The GPU model's memory from the dry pass: sizes where the parameter counts put them, and the
 * one-sentence refusal of a model that cannot fit, with what would. */
static void test_memory(tailor_ctx *ctx)
{
    tailor_gemma4_config c31, c2;
    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-31b", &c31));
    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-e2b", &c2));
    tailor_gemma4_gpu_opts o = {.max_tokens = 4096};
    tailor_gemma4_gpu_memory dense, small, e2b, e2b_long;
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_need(ctx, &c31, NULL, &o, &dense));
    /* 30.7 B parameters in 16 bits (the embedding stored once: the head is tied) */
    CHECKF(dense.weights > 60e9 && dense.weights < 63e9, "31B 16-bit weights %.2f GB",
           (double)dense.weights / 1e9);
    CHECK(dense.ple_table == 0 && dense.kv > 0 && dense.acts > 0);
    tailor_gemma4_gpu_opts q = o;
    q.quantize = q.quantize_head = 1;
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_need(ctx, &c31, NULL, &q, &small));
    /* int4 linears with group-128 scales, the 16-bit embedding plus its int4 copy */
    CHECKF(small.weights > 16e9 && small.weights < 22e9, "31B W4A16 weights %.2f GB",
           (double)small.weights / 1e9);
    CHECK(small.kv == dense.kv);
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_need(ctx, &c2, NULL, &o, &e2b));
    /* E2B: 35 layers x 256 PLE dims x 262,144 rows, 16-bit, beside ~4.6 GB of weights */
    CHECKF(e2b.ple_table == (size_t)262144 * 35 * 256 * 2, "E2B PLE table %zu", e2b.ple_table);
    CHECKF(e2b.weights > 4e9 && e2b.weights < 5.5e9, "E2B weights %.2f GB", (double)e2b.weights / 1e9);
    tailor_gemma4_gpu_opts lo = o;
    lo.max_tokens = 8192;
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_need(ctx, &c2, NULL, &lo, &e2b_long));
    CHECK(e2b_long.kv > e2b.kv && e2b_long.weights == e2b.weights);

    /* the check: 31B in 16 bits on a 24 GB card is refused naming sizes and the W4A16 load */
    size_t l4 = (size_t)22500 * 1000 * 1000;
    tailor_status st = tailor_gemma4_gpu_memory_check(ctx, &c31, NULL, &o, l4, "NVIDIA L4");
    expect_msg(ctx, st, TAILOR_ERR_BUDGET, "31B bf16 on 22.5 GB", "and NVIDIA L4 has 22.50 GB free",
               "--quantize w4a16 --quantize-head would need");
    CHECK(strstr(tailor_ctx_message(ctx), "for 4096 positions") != NULL);
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_check(ctx, &c31, NULL, &q, l4, "NVIDIA L4"));
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_check(ctx, &c2, NULL, &o, (size_t)15e9, "Tesla T4"));
    /* fits exactly / one byte short */
    size_t exact = e2b.weights + e2b.kv + e2b.acts;
    CHECK_OK(ctx, tailor_gemma4_gpu_memory_check(ctx, &c2, NULL, &o, exact, "x"));
    st = tailor_gemma4_gpu_memory_check(ctx, &c2, NULL, &o, exact - 1, "x");
    CHECK(st == TAILOR_ERR_BUDGET);
    /* a KV cache larger than the weights: the sentence says fewer positions would help */
    tailor_gemma4_gpu_opts huge = q;
    huge.max_tokens = 1000000;
    st = tailor_gemma4_gpu_memory_check(ctx, &c31, NULL, &huge, l4, "NVIDIA L4");
    expect_msg(ctx, st, TAILOR_ERR_BUDGET, "31B W4A16 at 1M positions", "for 1000000 positions",
               "the KV cache shrinks with fewer positions");
    CHECK(strstr(tailor_ctx_message(ctx), "--quantize w4a16") == NULL);
}

/* Writes `text` to `path` (a template file of `dir`) and checks what
 * tailor_gemma4_chat_empty_thought then says of `dir`. */
static void expect_thought(tailor_ctx *ctx, const char *dir, const char *path, const char *text,
                           int want, const char *what)
{
    int et = -1;
    CHECK(tw_write_text(path, text) == 0);
    CHECK_OK(ctx, tailor_gemma4_chat_empty_thought(ctx, dir, &et));
    CHECKF(et == want, "%s: %d", what, et);
}

/* The chat template's empty thought channel, read from the checkpoint's own template. */
static void test_chat_template(tailor_ctx *ctx)
{
    char dir[256], path[512];
    int et = -1;
    tw_tmpdir(dir, sizeof dir, "chat");
    CHECK_OK(ctx, tailor_gemma4_chat_empty_thought(ctx, dir, &et));
    CHECKF(et == 0, "no template: %d", et);
    /* tokenizer_config.json: the 31B kind (the block in a Jinja literal, \n as two characters) */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    expect_thought(ctx, dir, path, "{\"chat_template\": \"{%- if add_generation_prompt -%}{{- "
                   "'<|turn>model\\\\n' -}}{%- if not enable_thinking -%}{{- "
                   "'<|channel>thought\\\\n<channel|>' -}}{%- endif -%}{%- endif "
                   "-%}\"}",
                   1, "31B-style tokenizer_config.json");
    /* the E2B kind: a thought channel only when thinking is on, never closed empty */
    expect_thought(ctx, dir, path, "{\"chat_template\": \"{%- if add_generation_prompt -%}{{- "
                   "'<|turn>model\\\\n' -}}{%- if enable_thinking -%}{{- "
                   "'<|channel>thought\\\\n' -}}{%- endif -%}{%- endif -%}\"}",
                   0, "E2B-style tokenizer_config.json");
    expect_thought(ctx, dir, path, "{\"bos_token\": \"<bos>\"}",
                   0, "tokenizer_config.json without a template");
    /* a list of named templates: the one named "default" */
    expect_thought(ctx, dir, path, "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"\"}, "
                   "{\"name\": \"default\", \"template\": \"add_generation_prompt "
                   "'<|channel>thought\\\\n<channel|>'\"}]}",
                   1, "a list of named templates");
    /* chat_template.jinja wins over tokenizer_config.json (which still has the block); a real
     * newline counts too */
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    expect_thought(ctx, dir, path, "{{- '<|turn>model\\n' -}}\n",
                   0, "chat_template.jinja without the block");
    expect_thought(ctx, dir, path, "{%- if add_generation_prompt -%}\n<|turn>model\n"
                   "<|channel>thought\n<channel|>\n{%- endif -%}",
                   1, "chat_template.jinja with the block on real lines");
    /* the block among the past turns' formatting, not in the generation prompt: not counted */
    expect_thought(ctx, dir, path, "{%- for m in messages -%}'<|channel>thought\\n<channel|>'{%- "
                   "endfor -%}{%- if add_generation_prompt -%}'<|turn>model\\n'{%- "
                   "endif -%}",
                   0, "the block only before the generation prompt");
    CHECK(remove(path) == 0);
    /* bad input: one sentence naming the file and field */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    CHECK(tw_write_text(path, "{\"chat_template\": [{\"name\": \"default\"}]}") == 0);
    expect_msg(ctx, tailor_gemma4_chat_empty_thought(ctx, dir, &et), TAILOR_ERR_PARSE,
               "default without a template", "tokenizer_config.json", "field chat_template is");
    CHECK(tw_write_text(path, "{\"chat_template\": 7}") == 0);
    expect_msg(ctx, tailor_gemma4_chat_empty_thought(ctx, dir, &et), TAILOR_ERR_PARSE,
               "chat_template a number", "tokenizer_config.json", "neither a string nor a list");
    CHECK(tw_write_text(path, "{\"chat_template\": ") == 0);
    expect_msg(ctx, tailor_gemma4_chat_empty_thought(ctx, dir, &et), TAILOR_ERR_PARSE,
               "truncated tokenizer_config", "tokenizer_config.json", "not a JSON object");
}

/* Sampling defaults from generation_config.json, transformers' where it says nothing. */
static void test_sampling_defaults(tailor_ctx *ctx)
{
    char dir[256], path[512];
    tw_tmpdir(dir, sizeof dir, "gen");
    tailor_gemma4_sampling d;
    CHECK_OK(ctx, tailor_gemma4_sampling_defaults(ctx, dir, &d));
    CHECKF(d.temperature == 1.0f && d.top_k == 50 && d.top_p == 1.0f && !d.from_file,
           "no file: %g %d %g %d", (double)d.temperature, d.top_k, (double)d.top_p, d.from_file);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    CHECK(tw_write_text(path, "{\"do_sample\": true, \"temperature\": 1.0, \"top_k\": 64, "
                              "\"top_p\": 0.95, \"eos_token_id\": [1, 106, 50]}") == 0);
    CHECK_OK(ctx, tailor_gemma4_sampling_defaults(ctx, dir, &d));
    CHECKF(d.temperature == 1.0f && d.top_k == 64 && d.top_p == 0.95f && d.from_file,
           "Gemma 4's: %g %d %g", (double)d.temperature, d.top_k, (double)d.top_p);
    CHECK(tw_write_text(path, "{\"top_p\": 0.9, \"top_k\": null}") == 0);
    CHECK_OK(ctx, tailor_gemma4_sampling_defaults(ctx, dir, &d));
    CHECKF(d.temperature == 1.0f && d.top_k == 50 && d.top_p == 0.9f && d.from_file,
           "top_p only: %g %d %g", (double)d.temperature, d.top_k, (double)d.top_p);
    static const struct {
        const char *json, *field;
    } bad[] = {{"{\"temperature\": 0}", "field temperature must be a number above 0"},
               {"{\"temperature\": \"hot\"}", "field temperature must be"},
               {"{\"top_k\": 6.5}", "field top_k must be an integer"},
               {"{\"top_k\": -1}", "field top_k must be an integer"},
               {"{\"top_p\": 1.5}", "field top_p must be a number in (0, 1]"},
               {"[1, 2]", "not a JSON object"},
               {"{\"top_p\": ", "not a JSON object"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(tw_write_text(path, bad[i].json) == 0);
        expect_msg(ctx, tailor_gemma4_sampling_defaults(ctx, dir, &d), TAILOR_ERR_PARSE,
                   bad[i].json, "generation_config.json", bad[i].field);
    }
}

/* Stop ids: generation_config.json's eos_token_id (an id or a list), else Gemma 4's -it stops;
 * a bad field fails naming it and leaves the caller's list as the defaults would be. */
static void test_stop_ids(tailor_ctx *ctx)
{
    char dir[256], path[512];
    tw_tmpdir(dir, sizeof dir, "stops");
    tailor_gemma4_stops st;
    CHECK_OK(ctx, tailor_gemma4_stop_ids(ctx, dir, &st));
    CHECKF(st.n == 3 && st.ids[0] == 1 && st.ids[1] == 106 && st.ids[2] == 50 && !st.from_file,
           "no file: %d ids, from_file %d", st.n, st.from_file);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    CHECK(tw_write_text(path, "{\"top_k\": 64}") == 0);
    CHECK_OK(ctx, tailor_gemma4_stop_ids(ctx, dir, &st));
    CHECKF(st.n == 3 && st.ids[1] == 106 && !st.from_file, "no field: %d ids", st.n);
    CHECK(tw_write_text(path, "{\"eos_token_id\": 1}") == 0); /* a base checkpoint */
    CHECK_OK(ctx, tailor_gemma4_stop_ids(ctx, dir, &st));
    CHECKF(st.n == 1 && st.ids[0] == 1 && st.from_file, "one id: %d ids, first %d", st.n,
           (int)st.ids[0]);
    CHECK(tw_write_text(path, "{\"eos_token_id\": [106, 7, 262143]}") == 0);
    CHECK_OK(ctx, tailor_gemma4_stop_ids(ctx, dir, &st));
    CHECKF(st.n == 3 && st.ids[0] == 106 && st.ids[1] == 7 && st.ids[2] == 262143,
           "list: %d ids", st.n);
    static const char *bad[] = {"{\"eos_token_id\": []}", "{\"eos_token_id\": -1}",
                                "{\"eos_token_id\": 1.5}", "{\"eos_token_id\": \"<eos>\"}",
                                "{\"eos_token_id\": [1, null]}",
                                "{\"eos_token_id\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}",
                                "{\"eos_token_id\": 3e9}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(tw_write_text(path, bad[i]) == 0);
        st = (tailor_gemma4_stops){.n = -1};
        expect_msg(ctx, tailor_gemma4_stop_ids(ctx, dir, &st), TAILOR_ERR_PARSE, bad[i],
                   "generation_config.json", "field eos_token_id must be a token id or a list "
                   "of 1 to 16 token ids");
        CHECKF(st.n == 3 && st.ids[0] == 1 && !st.from_file, "%s: the list changed (%d ids)",
               bad[i], st.n);
    }
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    test_parse(ctx);
    test_disagreements(ctx);
    test_presets(ctx);
    test_seam_placement(ctx);
    test_memory(ctx);
    test_chat_template(ctx);
    test_sampling_defaults(ctx);
    test_stop_ids(ctx);
    tailor_ctx_destroy(ctx);
    return test_finish("test_gemma4_config");
}
