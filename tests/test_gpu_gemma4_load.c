/* test_gpu_gemma4_load.c — a real-size checkpoint streams to the GPU in bounded host memory
 * (issue 7: "peak host memory during load stays under 1 GiB above the process's baseline
 * whatever the model size, measured on E2B shapes"). Writes a random bf16 checkpoint of the
 * exact E2B layout (~10 GB: 35 layers, KV sharing, the double-wide MLP, PLE, the 262144-row
 * embedding), opens it, loads it once (kernels tuned on demand into the cache), then loads it
 * again with the peak resident set reset (Linux clear_refs) and checks the peak against the
 * baseline; then one decode step. TAILOR_TEST_CACHE reuses a cache; TAILOR_TEST_TMP picks where
 * the checkpoint goes (default /tmp; it needs ~10 GB). */
#include <sys/wait.h>

#include "cache.h"
#include "cuda.h"
#include "gemma4.h"
#include "kernels.h"
#include "test_gemma4_writer.h"

/* Resets VmHWM to the current resident set; 0 when the kernel does not allow it. */
static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* The writer's spec of a config's layout. */
static void spec_of(const tailor_gemma4_config *c, tw_spec *s, char *types)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < c->n_layers; i++)
        types[i] = c->layer[i].full ? 'f' : 's';
    types[c->n_layers] = '\0';
    *s = (tw_spec){.H = c->hidden, .L = c->n_layers, .nq = c->n_heads, .nkv = c->n_kv_heads,
                   .hd = c->head_dim, .ghd = c->global_head_dim, .inter = c->intermediate,
                   .W = c->sliding_window, .P = c->ple_dim, .shared = c->n_kv_shared,
                   .double_wide = c->double_wide_mlp, .vocab = c->vocab, .types = types,
                   .dtype = "BF16", .seed = 20261203};
}

int main(void)
{
    tailor_ctx *ctx = test_ctx();
    if (test_proc_status_bytes("VmHWM") < 0 || !reset_peak())
        test_skip("no /proc/self/status or clear_refs here: the peak cannot be measured");
    tailor_gpu *gpu = test_gpu_or_skip(ctx, "test_gpu_gemma4_load");
    tailor_gemma4_config want;
    CHECK_OK(ctx, tailor_gemma4_preset(ctx, "gemma-4-e2b", &want));
    char types[TAILOR_GEMMA4_MAX_LAYERS + 1];
    tw_spec spec;
    spec_of(&want, &spec, types);
    const char *tmp = getenv("TAILOR_TEST_TMP") ? getenv("TAILOR_TEST_TMP") : "/tmp";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tailor_e2b_load_%d", tmp, (int)getpid());
    CHECK(mkdir(dir, 0755) == 0);
    /* written by a child: the writer holds the whole file in memory, never this process */
    pid_t pid = fork();
    if (pid == 0)
        _exit(tw_write_model(&spec, dir) == 0 ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writing the E2B checkpoint into %s",
           dir);

    tailor_gemma4 *m = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    if (m) { /* the writer made the E2B layout: the same plan as the preset */
        const tailor_gemma4_config *c = tailor_gemma4_get_config(m);
        CHECK(c->vocab == want.vocab && c->hidden == want.hidden && c->n_layers == want.n_layers);
        for (int i = 0; i < c->n_layers && i < want.n_layers; i++)
            CHECKF(c->layer[i].full == want.layer[i].full && c->layer[i].inter == want.layer[i].inter &&
                       c->layer[i].kv_shared == want.layer[i].kv_shared &&
                       c->layer[i].head_dim == want.layer[i].head_dim,
                   "layer %d differs from the E2B preset", i);
    }
    char cache_path[600];
    snprintf(cache_path, sizeof cache_path, "%s/kernels.db", dir);
    if (getenv("TAILOR_TEST_CACHE"))
        snprintf(cache_path, sizeof cache_path, "%s", getenv("TAILOR_TEST_CACHE"));
    tailor_cache *cache = NULL;
    tailor_kernels *ks = NULL;
    CHECK_OK(ctx, tailor_cache_open(ctx, cache_path, &cache));
    if (cache)
        CHECK_OK(ctx, tailor_kernels_create(ctx, gpu, cache, NULL, 1, &ks));
    tailor_gemma4_gpu_opts o = {.max_tokens = 64, .dtype = -1};
    tailor_gemma4_gpu *g = NULL;
    if (m && ks) {
        /* first load: tunes what the cache lacks (host memory of its references) */
        CHECK_OK(ctx, tailor_gemma4_gpu_create(ctx, m, gpu, ks, &o, &g));
        tailor_gemma4_gpu_destroy(g);
        g = NULL;
        /* the measured load */
        CHECK(reset_peak());
        double base = test_proc_status_bytes("VmRSS");
        CHECK_OK(ctx, tailor_gemma4_gpu_create(ctx, m, gpu, ks, &o, &g));
        double peak = test_proc_status_bytes("VmHWM");
        tailor_gemma4_gpu_info info;
        if (g) {
            tailor_gemma4_gpu_get_info(g, &info);
            printf("E2B bf16 checkpoint: %.2f GB of weights on the GPU; host peak %.3f GB, "
                   "baseline %.3f GB: %.3f GB above (limit 1 GiB); %d kernels tuned on the "
                   "measured load\n",
                   (double)info.weight_bytes / 1e9, peak / 1e9, base / 1e9, (peak - base) / 1e9,
                   info.kernels_tuned);
            CHECKF(info.weight_bytes > (size_t)4e9, "only %.2f GB of weights reached the GPU",
                   (double)info.weight_bytes / 1e9);
            CHECKF(peak - base < 1024.0 * 1024 * 1024,
                   "the load peaked %.3f GB above the baseline (limit 1 GiB)", (peak - base) / 1e9);
            int32_t next = -1;
            CHECK_OK(ctx, tailor_gemma4_gpu_step(ctx, g, 2, NULL, &next));
            CHECKF(next >= 0 && next < want.vocab, "decode step gave id %d", (int)next);
        }
    }
    tailor_gemma4_gpu_destroy(g);
    tailor_kernels_destroy(ks);
    tailor_cache_close(cache);
    tailor_gemma4_close(m);
    tw_rmdir(dir);
    tailor_gpu_close(gpu);
    tailor_ctx_destroy(ctx);
    return test_finish("test_gpu_gemma4_load");
}
