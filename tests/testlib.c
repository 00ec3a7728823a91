/* testlib.c — the test helper. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cuda.h"

int test_failures;
int test_checks;

void test_skip(const char *why)
{
    printf("skipped: %s\n", why);
    fflush(stdout);
    exit(TEST_SKIP_CODE);
}

struct tailor_gpu *test_gpu_or_skip(tailor_ctx *ctx, const char *name)
{
    tailor_gpu *gpu = NULL;
    tailor_status st = tailor_gpu_open(ctx, 0, &gpu);
    if (st == TAILOR_OK)
        return gpu;
    char why[600];
    snprintf(why, sizeof why, "no GPU: %s", tailor_ctx_message(ctx));
    if (st == TAILOR_ERR_NO_DRIVER || st == TAILOR_ERR_NO_DEVICE) {
        tailor_ctx_destroy(ctx);
        test_skip(why);
    }
    CHECKF(0, "%s: the GPU does not open (%s)", name, why);
    exit(test_finish(name));
}

int test_finish(const char *name)
{
    if (test_checks == 0) {
        fprintf(stderr, "%s: no check ran\n", name);
        return 1;
    }
    printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

static void log_to_stderr(void *user, tailor_log_level level, const char *line)
{
    (void)user;
    (void)level;
    fprintf(stderr, "  log: %s\n", line);
}

int test_op_inst_make(tailor_ctx *ctx, const tailor_op *op, const char *text, tailor_dtype dtype,
                      test_op_inst *in)
{
    memset(in, 0, sizeof *in);
    if (tailor_shape_parse(ctx, text, &in->shape) != TAILOR_OK ||
        tailor_op_complete_shape(ctx, op, &in->shape) != TAILOR_OK ||
        op->describe(ctx, &in->shape, dtype, &in->bufs) != TAILOR_OK)
        return 0;
    for (int i = 0; i < in->bufs.count; i++) {
        const tailor_buffer_spec *b = &in->bufs.b[i];
        in->host[i] = calloc(b->count ? b->count : 1, tailor_dtype_size(b->dtype));
        if (b->role != TAILOR_BUF_IN)
            in->ref[i] = calloc(b->count ? b->count : 1, sizeof(float));
        if (!in->host[i] || (b->role != TAILOR_BUF_IN && !in->ref[i]))
            return 0;
    }
    return 1;
}

void test_op_inst_free(test_op_inst *in)
{
    for (int i = 0; i < TAILOR_OP_MAX_BUFFERS; i++) {
        free(in->host[i]);
        free(in->ref[i]);
        in->host[i] = NULL;
        in->ref[i] = NULL;
    }
}

int test_op_inst_buffer(const test_op_inst *in, const char *name)
{
    for (int i = 0; i < in->bufs.count; i++)
        if (strcmp(in->bufs.b[i].name, name) == 0)
            return i;
    return -1;
}

tailor_ctx *test_ctx(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines survive a test killed by its timeout */
    tailor_ctx *ctx = tailor_ctx_create();
    if (!ctx) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    tailor_ctx_set_log(ctx, log_to_stderr, NULL, TAILOR_LOG_INFO);
    return ctx;
}

void test_rng_seed(test_rng *r, uint64_t seed) { r->s = seed ? seed : 0x9E3779B97F4A7C15ull; }

uint64_t test_rng_next(test_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

float test_rng_uniform(test_rng *r, float lo, float hi)
{
    double u = (double)(test_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

float test_rng_normal(test_rng *r)
{
    double u1 = (double)((test_rng_next(r) >> 11) + 1) * (1.0 / 9007199254740993.0);
    double u2 = (double)(test_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

const char *test_source_dir(void)
{
    const char *d = getenv("TAILOR_SOURCE_DIR");
    return d ? d : ".";
}

const char *test_shared_dir(void)
{
    const char *d = getenv("TAILOR_SHARED_DIR");
    struct stat st;
    if (!d || stat(d, &st) != 0 || !S_ISDIR(st.st_mode))
        return NULL;
    return d;
}

const char *test_tailor_bin(void)
{
    const char *b = getenv("TAILOR_BIN");
    return b ? b : "tailor";
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

double test_proc_status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    double v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = 1024.0 * strtod(line + n + 1, NULL);
    fclose(f);
    return v;
}

void test_emulate_seam_row(const test_op_inst *in, tailor_dtype dt, int mode, int k, double pert,
                           float *a)
{
    const void *t = in->host[test_op_inst_buffer(in, "t")];
    const float *x = in->host[test_op_inst_buffer(in, "x_in")];
    const void *wp = in->host[test_op_inst_buffer(in, "w_post")];
    const void *wn = in->host[test_op_inst_buffer(in, "w_next")];
    float scalar = ((const float *)in->host[test_op_inst_buffer(in, "scalar")])[0];
    float ss = 0;
    for (int i = k - 1; i >= 0; i--) { /* fp32, reversed */
        float v = tailor_dtype_load(dt, t, (size_t)i);
        ss += v * v;
    }
    float inv = (float)((1.0 + pert) / sqrt((double)ss / k + 1e-6));
    for (int i = 0; i < k; i++) {
        float v = x[i] + tailor_dtype_load(dt, t, (size_t)i) * inv * tailor_dtype_load(dt, wp, (size_t)i);
        a[i] = mode == 1 ? v * scalar : v;
    }
    if (mode != 2) {
        float sx = 0;
        for (int i = k - 1; i >= 0; i--)
            sx += a[i] * a[i];
        float invx = (float)((1.0 + pert) / sqrt((double)sx / k + 1e-6));
        for (int i = 0; i < k; i++)
            a[i] = a[i] * invx * tailor_dtype_load(dt, wn, (size_t)i);
    }
    for (int i = 0; i < k; i++) {
        uint16_t r;
        tailor_dtype_store(dt, &r, 0, a[i]);
        a[i] = tailor_dtype_load(dt, &r, 0);
    }
}

double test_tol_ratio(const tailor_buffer_spec *b, double got, double ref)
{
    return fabs(got - ref) / (b->atol + b->rtol * fabs(ref));
}

double test_pro_tolerance(tailor_ctx *ctx, const char *op_name, const char *text,
                          tailor_dtype dt, test_pro_product product)
{
    const tailor_op *op = tailor_op_find(op_name);
    CHECKF(op != NULL, "test_pro_tolerance: no op named %s", op_name);
    double worst = 0;
    for (uint64_t seed = 1; op && seed <= 12; seed++) {
        test_op_inst in;
        CHECK(test_op_inst_make(ctx, op, text, dt, &in));
        op->fill(&in.shape, dt, &in.bufs, in.host, seed);
        CHECK_OK(ctx, op->reference(ctx, &in.shape, dt, &in.bufs, in.host, in.ref));
        int n = (int)tailor_shape_get(&in.shape, "n", 0), k = (int)tailor_shape_get(&in.shape, "k", 0);
        int mode = (int)tailor_shape_get(&in.shape, "mode", 0), io = test_op_inst_buffer(&in, "out");
        float *a = malloc((size_t)k * sizeof *a), *out = malloc((size_t)n * sizeof *out);
        uint16_t *got = malloc((size_t)n * sizeof *got);
        CHECK(a && out && got);
        for (int p = -1; a && out && got && p <= 1; p += 2) {
            test_emulate_seam_row(&in, dt, mode, k, p * 2e-6, a);
            product(&in, dt, a, out);
            for (int j = 0; j < n; j++) {
                tailor_dtype_store(dt, got, (size_t)j, out[j]);
                double e = test_tol_ratio(&in.bufs.b[io], out[j], in.ref[io][j]);
                worst = e > worst ? e : worst;
            }
            CHECKF(tailor_op_compare(ctx, &in.bufs.b[io], got, in.ref[io]) == TAILOR_OK,
                   "%s %s %s seed %llu: %s", op_name, text, tailor_dtype_name(dt),
                   (unsigned long long)seed, tailor_ctx_message(ctx));
        }
        free(a);
        free(out);
        free(got);
        test_op_inst_free(&in);
    }
    printf("%s %s %s: worst |diff|/tol %.3f\n", op_name, text, tailor_dtype_name(dt), worst);
    return worst;
}

int test_shape_has(const char *shape, const char *kvs)
{
    char want[256];
    snprintf(want, sizeof want, "%s", kvs);
    for (char *save = NULL, *kv = strtok_r(want, ",", &save); kv; kv = strtok_r(NULL, ",", &save))
        if (!tailor_list_has(shape, kv))
            return 0;
    return 1;
}

int test_kernel_uses(const tailor_gemma4_kernel_use *u, int n, const char *op, const char *kvs)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += strcmp(u[i].op, op) == 0 && test_shape_has(u[i].shape, kvs);
    return c;
}
