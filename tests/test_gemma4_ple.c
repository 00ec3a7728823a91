/* test_gemma4_ple.c — the per-layer-embedding row the GPU runtime copies to the device for each
 * token (g4g_ple_row, host side: no GPU needed): a checkpoint's row in the compute dtype is its
 * elements rounded once to that dtype, whatever the checkpoint stores (bf16 copied, bf16 to fp16
 * for cards without bf16, fp32), an id past the PLE vocabulary reads row 0, and random weights
 * give the same row of their pool for the same id. */
#include "gemma4_gpu.h"
#include "gemma4_internal.h"
#include "half.h"
#include "test_gemma4_writer.h"

/* Checks g4g_ple_row against the element-wise conversion for a few ids in dtype dt. */
static void check_rows(const tailor_gemma4 *m, tailor_dtype dt, const char *what)
{
    tailor_gemma4_gpu g;
    memset(&g, 0, sizeof g);
    g.cfg = *tailor_gemma4_get_config(m);
    g.model = m;
    g.dt = dt;
    const tailor_st_tensor *t = m->ple_embed;
    size_t n = (size_t)g.cfg.n_layers * (size_t)g.cfg.ple_dim;
    uint16_t *got = malloc(n * sizeof *got);
    CHECK(t != NULL && got != NULL && n > 0);
    if (!t || !got) {
        free(got);
        return;
    }
    const int32_t ids[] = {0, 5, g.cfg.ple_vocab - 1, g.cfg.ple_vocab + 3};
    int bad = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        size_t row = ids[i] < g.cfg.ple_vocab ? (size_t)ids[i] : 0;
        g4g_ple_row(&g, ids[i], (unsigned char *)got);
        for (size_t j = 0; j < n; j++) {
            float v = tailor_st_load_f32(t, (int64_t)(row * n + j));
            uint16_t want = dt == TAILOR_DTYPE_BF16 ? tailor_f32_to_bf16(v) : tailor_f32_to_f16(v);
            bad += got[j] != want;
        }
    }
    CHECKF(bad == 0, "%s: %d elements differ from their rounding to %s", what, bad,
           tailor_dtype_name(dt));
    free(got);
}

static void check_checkpoint(const char *dtype)
{
    char dir[256];
    tw_tmpdir(dir, sizeof dir, "ple");
    tw_spec s = {.H = 64, .L = 2, .nq = 2, .nkv = 1, .hd = 32, .ghd = 64, .inter = 128, .W = 8,
                 .P = 16, .shared = 0, .double_wide = 0, .vocab = 300, .types = "sf",
                 .dtype = dtype, .seed = 20261205};
    CHECK(tw_write_model(&s, dir) == 0);
    tailor_ctx *ctx = test_ctx();
    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    if (m) {
        char what[64];
        snprintf(what, sizeof what, "%s checkpoint, fp16", dtype);
        check_rows(m, TAILOR_DTYPE_F16, what);
        snprintf(what, sizeof what, "%s checkpoint, bf16", dtype);
        check_rows(m, TAILOR_DTYPE_BF16, what);
    }
    tailor_gemma4_close(m);
    tailor_ctx_destroy(ctx);
    tw_rmdir(dir);
}

/* Random weights: a token's row is one of the pool's, the same for the same id, and the pool's
 * rows are distinct and small. */
static void check_random(void)
{
    tailor_ctx *ctx = test_ctx();
    tailor_gemma4_gpu g;
    memset(&g, 0, sizeof g);
    g.cfg.n_layers = 3;
    g.cfg.ple_dim = 40;
    g.dt = TAILOR_DTYPE_BF16;
    enum { N = 120 };
    CHECK_OK(ctx, g4g_ple_pool_make(ctx, &g));
    if (!g.ple_pool) {
        tailor_ctx_destroy(ctx);
        return;
    }
    CHECK(memcmp(g.ple_pool, g.ple_pool + N, N * 2) != 0);
    int in_range = 1;
    for (size_t j = 0; j < (size_t)G4G_PLE_POOL * N; j++)
        in_range &= fabsf(tailor_bf16_to_f32(g.ple_pool[j])) <= 0.0301f;
    CHECK(in_range);
    uint16_t a[N], b[N];
    int from_pool = 1, distinct = 0;
    for (int32_t id = 0; id < 64; id++) {
        g4g_ple_row(&g, id, (unsigned char *)a);
        g4g_ple_row(&g, id, (unsigned char *)b);
        CHECK(memcmp(a, b, sizeof a) == 0);
        int found = 0;
        for (int r = 0; r < G4G_PLE_POOL && !found; r++)
            found = memcmp(a, g.ple_pool + (size_t)r * N, sizeof a) == 0;
        from_pool &= found;
        if (id > 0) {
            uint16_t c[N];
            g4g_ple_row(&g, id - 1, (unsigned char *)c);
            distinct += memcmp(a, c, sizeof a) != 0;
        }
    }
    CHECK(from_pool);
    CHECKF(distinct >= 60, "only %d of 63 neighbouring ids got different rows", distinct);
    free(g.ple_pool);
    tailor_ctx_destroy(ctx);
}

int main(void)
{
    check_checkpoint("BF16");
    check_checkpoint("F32");
    check_random();
    return test_finish("test_gemma4_ple");
}
