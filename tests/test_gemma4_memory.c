/* test_gemma4_memory.c — loading maps the checkpoint instead of copying it: the peak resident
 * memory of opening a ~100 MB bf16 model and running the reference forward over it is the
 * mapped file plus activations, not a second (fp32) copy of the weights. */
#include <sys/wait.h>

#include "gemma4.h"
#include "test_gemma4_writer.h"

int main(void)
{
    if (test_proc_status_bytes("VmHWM") < 0)
        test_skip("no /proc/self/status here");
    char dir[256];
    tw_tmpdir(dir, sizeof dir, "memory");
    /* E2B-like layout at a size where a copy would show: 32k vocab, 512 wide, PLE */
    tw_spec s = {.H = 512, .L = 4, .nq = 4, .nkv = 1, .hd = 128, .ghd = 256, .inter = 2048,
                 .W = 16, .P = 64, .shared = 1, .double_wide = 1, .vocab = 32768,
                 .types = "sfsf", .dtype = "BF16", .seed = 20261202};
    /* written by a child, so that the writer's buffers never count in this process's peak */
    pid_t pid = fork();
    if (pid == 0)
        _exit(tw_write_model(&s, dir) == 0 ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    double file_mib = (double)st.st_size / 1048576.0;

    tailor_ctx *ctx = test_ctx();
    double base = test_proc_status_bytes("VmRSS");
    tailor_gemma4 *m = NULL;
    tailor_gemma4_cpu *run = NULL;
    CHECK_OK(ctx, tailor_gemma4_open(ctx, dir, &m));
    tailor_gemma4_cpu_opts opts = {.max_tokens = 8};
    if (m)
        CHECK_OK(ctx, tailor_gemma4_cpu_create(ctx, m, &opts, &run));
    for (int t = 0; run && t < 3; t++) { /* every weight is read at least once */
        const float *logits = NULL;
        CHECK_OK(ctx, tailor_gemma4_cpu_step(ctx, run, 2 + 7 * t, &logits));
        CHECK(logits && logits[0] == logits[0]);
    }
    double peak_mib = (test_proc_status_bytes("VmHWM") - base) / (1024.0 * 1024.0);
    /* activations and KV of 8 positions are well under a MiB per layer; the logits row is
     * 128 KiB; 24 MiB of slack covers allocator arenas. A converted copy of the weights would
     * add at least the file again (bf16) or twice it (fp32). */
    double limit = file_mib + 24.0;
    printf("model %.1f MiB; peak resident growth %.1f MiB (limit %.1f)\n", file_mib, peak_mib,
           limit);
    CHECK(file_mib > 60);
    CHECKF(peak_mib <= limit, "loading grew the process by %.1f MiB for a %.1f MiB file",
           peak_mib, file_mib);
    tailor_gemma4_cpu_destroy(run);
    tailor_gemma4_close(m);
    tailor_ctx_destroy(ctx);
    tw_rmdir(dir);
    return test_finish("test_gemma4_memory");
}
