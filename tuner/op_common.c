/* op_common.c — dtypes, shapes and the output comparison shared by every op. */
#include "op.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "parallel.h"

size_t tailor_dtype_size(tailor_dtype dtype)
{
    static const size_t sizes[TAILOR_DTYPE_COUNT] = {4, 2, 2, 4, 8, 1};
    return (unsigned)dtype < TAILOR_DTYPE_COUNT ? sizes[dtype] : 0;
}

tailor_dtype tailor_dtype_for_cc(int cc_major)
{
    return cc_major >= 8 ? TAILOR_DTYPE_BF16 : TAILOR_DTYPE_F16;
}

const char *tailor_dtype_name(tailor_dtype dtype)
{
    static const char *const names[TAILOR_DTYPE_COUNT] = {"fp32", "fp16", "bf16",
                                                          "i32",  "i64",  "u8"};
    return (unsigned)dtype < TAILOR_DTYPE_COUNT ? names[dtype] : "?";
}

tailor_status tailor_dtype_parse(tailor_ctx *ctx, const char *text, tailor_dtype *out)
{
    static const struct {
        const char *name;
        tailor_dtype dtype;
    } names[] = {
        {"fp16", TAILOR_DTYPE_F16},  {"float16", TAILOR_DTYPE_F16},  {"f16", TAILOR_DTYPE_F16},
        {"bf16", TAILOR_DTYPE_BF16}, {"bfloat16", TAILOR_DTYPE_BF16}, {"fp32", TAILOR_DTYPE_F32},
        {"float32", TAILOR_DTYPE_F32}, {"f32", TAILOR_DTYPE_F32},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(text, names[i].name) == 0) {
            *out = names[i].dtype;
            return TAILOR_OK;
        }
    }
    return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "dtype '%s' is unknown (use fp16 or bf16)",
                            text);
}

float tailor_dtype_load(tailor_dtype dtype, const void *buf, size_t i)
{
    switch (dtype) {
    case TAILOR_DTYPE_F32: return ((const float *)buf)[i];
    case TAILOR_DTYPE_F16: return tailor_f16_to_f32(((const uint16_t *)buf)[i]);
    case TAILOR_DTYPE_BF16: return tailor_bf16_to_f32(((const uint16_t *)buf)[i]);
    case TAILOR_DTYPE_I32: return (float)((const int32_t *)buf)[i];
    case TAILOR_DTYPE_I64: return (float)((const int64_t *)buf)[i];
    case TAILOR_DTYPE_U8: return (float)((const uint8_t *)buf)[i];
    default: return NAN;
    }
}

void tailor_dtype_store(tailor_dtype dtype, void *buf, size_t i, float v)
{
    switch (dtype) {
    case TAILOR_DTYPE_F32: ((float *)buf)[i] = v; break;
    case TAILOR_DTYPE_F16: ((uint16_t *)buf)[i] = tailor_f32_to_f16(v); break;
    case TAILOR_DTYPE_BF16: ((uint16_t *)buf)[i] = tailor_f32_to_bf16(v); break;
    case TAILOR_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case TAILOR_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case TAILOR_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    default: break;
    }
}

/* ---- shapes ---- */

tailor_status tailor_shape_set(tailor_shape *shape, const char *key, long long value)
{
    for (int i = 0; i < shape->count; i++) {
        if (strcmp(shape->dims[i].key, key) == 0) {
            shape->dims[i].value = value;
            return TAILOR_OK;
        }
    }
    if (shape->count >= TAILOR_SHAPE_MAX || strlen(key) >= sizeof shape->dims[0].key)
        return TAILOR_ERR_MISUSE;
    snprintf(shape->dims[shape->count].key, sizeof shape->dims[0].key, "%s", key);
    shape->dims[shape->count].value = value;
    shape->count++;
    return TAILOR_OK;
}

long long tailor_shape_get(const tailor_shape *shape, const char *key, long long fallback)
{
    for (int i = 0; i < shape->count; i++)
        if (strcmp(shape->dims[i].key, key) == 0)
            return shape->dims[i].value;
    return fallback;
}

int tailor_shape_has(const tailor_shape *shape, const char *key)
{
    for (int i = 0; i < shape->count; i++)
        if (strcmp(shape->dims[i].key, key) == 0)
            return 1;
    return 0;
}

tailor_status tailor_shape_parse(tailor_ctx *ctx, const char *text, tailor_shape *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (*p) {
        const char *eq = strchr(p, '=');
        const char *comma = strchr(p, ',');
        if (!comma)
            comma = p + strlen(p);
        if (!eq || eq > comma || eq == p)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "shape '%s': expected key=value pairs separated by commas",
                                    text);
        char key[24];
        size_t klen = (size_t)(eq - p);
        if (klen >= sizeof key)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "shape '%s': key too long", text);
        memcpy(key, p, klen);
        key[klen] = '\0';
        for (size_t i = 0; i < klen; i++)
            if (!(isalnum((unsigned char)key[i]) || key[i] == '_'))
                return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "shape '%s': bad key '%s'", text,
                                        key);
        char *end = NULL;
        errno = 0;
        long long v = strtoll(eq + 1, &end, 10);
        if (end == eq + 1 || end != comma || v < 0)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "shape '%s': value of '%s' is not a non-negative integer",
                                    text, key);
        /* Kernels take shape values as i32 arguments; a larger one would be cut silently. */
        if (errno == ERANGE || v > INT32_MAX)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "shape '%s': value of '%s' is too large (the largest "
                                    "allowed is %d)",
                                    text, key, INT32_MAX);
        if (tailor_shape_has(out, key))
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "shape '%s': '%s' given twice", text,
                                    key);
        if (tailor_shape_set(out, key, v))
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE, "shape '%s': too many keys", text);
        p = *comma ? comma + 1 : comma;
    }
    return TAILOR_OK;
}

static int cmp_dims(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b); /* key is the first member */
}

void tailor_shape_format(const tailor_shape *shape, char *buf, size_t size)
{
    tailor_shape s = *shape;
    qsort(s.dims, (size_t)s.count, sizeof s.dims[0], cmp_dims);
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s.count && len < size; i++) {
        int w = snprintf(buf + len, size - len, "%s%s=%lld", i ? "," : "", s.dims[i].key,
                         s.dims[i].value);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

tailor_status tailor_op_complete_shape(tailor_ctx *ctx, const tailor_op *op, tailor_shape *shape)
{
    for (int i = 0; i < shape->count; i++) {
        int known = 0;
        for (const tailor_shape_key *k = op->keys; k->name; k++)
            known |= strcmp(k->name, shape->dims[i].key) == 0;
        if (!known) {
            char keys[256] = "";
            for (const tailor_shape_key *k = op->keys; k->name; k++) {
                size_t used = strlen(keys);
                snprintf(keys + used, sizeof keys - used, "%s%s", used ? ", " : "", k->name);
            }
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "op %s has no shape key '%s' (its keys: %s)", op->name,
                                    shape->dims[i].key, keys);
        }
    }
    for (const tailor_shape_key *k = op->keys; k->name; k++) {
        if (tailor_shape_has(shape, k->name))
            continue;
        if (k->fallback < 0)
            return tailor_set_error(ctx, TAILOR_ERR_MISUSE,
                                    "op %s needs shape key '%s' (%s)", op->name, k->name, k->doc);
        tailor_shape_set(shape, k->name, k->fallback);
    }
    return TAILOR_OK;
}

/* Elements [from, from + n) of a buffer of `dtype` as floats: one switch a chunk, not one call
 * an element (a checked candidate's 6M-element output took 14 ms element by element). */
static void dtype_load_chunk(tailor_dtype dtype, const void *buf, size_t from, size_t n, float *out)
{
    const uint16_t *h = (const uint16_t *)buf + from;
    switch (dtype) {
    case TAILOR_DTYPE_F32: memcpy(out, (const float *)buf + from, n * sizeof *out); break;
    case TAILOR_DTYPE_F16: for (size_t i = 0; i < n; i++) out[i] = tailor_f16_to_f32(h[i]); break;
    case TAILOR_DTYPE_BF16: for (size_t i = 0; i < n; i++) out[i] = tailor_bf16_to_f32(h[i]); break;
    default: for (size_t i = 0; i < n; i++) out[i] = tailor_dtype_load(dtype, buf, from + i); break;
    }
}

static inline int out_of_tolerance(const tailor_buffer_spec *spec, float g, float r)
{
    /* a NaN on either side makes err NaN: out of tolerance */
    double tol = spec->atol + spec->rtol * fabs((double)r);
    double err = fabs((double)g - (double)r);
    return isinf(g) != isinf(r) || !(err <= tol);
}

/* One span of a comparison: its count of bad elements and the first (SIZE_MAX: none). */
enum { COMPARE_SPAN = 1 << 16 };
typedef struct compare_job {
    const tailor_buffer_spec *spec;
    const void *got;
    const float *ref;
    size_t *bad, *first; /* one each a span */
} compare_job;

static void compare_span(void *user, int span)
{
    enum { CHUNK = 2048 };
    const compare_job *job = user;
    size_t from = (size_t)span * COMPARE_SPAN, to = from + COMPARE_SPAN, bad = 0, first = SIZE_MAX;
    if (to > job->spec->count)
        to = job->spec->count;
    float g[CHUNK];
    for (size_t at = from; at < to; at += CHUNK) {
        size_t n = to - at < CHUNK ? to - at : CHUNK;
        dtype_load_chunk(job->spec->dtype, job->got, at, n, g);
        for (size_t i = 0; i < n; i++)
            if (out_of_tolerance(job->spec, g[i], job->ref[at + i]) && bad++ == 0)
                first = at + i;
    }
    job->bad[span] = bad;
    job->first[span] = first;
}

tailor_status tailor_op_compare(tailor_ctx *ctx, const tailor_buffer_spec *spec, const void *got,
                                const float *ref)
{
    /* spans compared on every CPU: a checked candidate's 6M-element output took 14 ms on one */
    int spans = (int)((spec->count + COMPARE_SPAN - 1) / COMPARE_SPAN);
    size_t one_bad, one_first;
    size_t *bad = spans > 1 ? calloc((size_t)spans, 2 * sizeof *bad) : &one_bad;
    size_t *first = spans > 1 ? bad + spans : &one_first;
    if (!bad)
        return tailor_set_error(ctx, TAILOR_ERR_NOMEM, "out of memory");
    compare_job job = {spec, got, ref, bad, first};
    if (spans > 1)
        tailor_parallel_for(spans, compare_span, &job);
    else if (spans == 1)
        compare_span(&job, 0);
    size_t nbad = 0, at = SIZE_MAX;
    for (int s = 0; s < spans; s++) {
        nbad += bad[s];
        if (at == SIZE_MAX)
            at = first[s];
    }
    if (spans > 1)
        free(bad);
    if (nbad == 0)
        return TAILOR_OK;
    float g = tailor_dtype_load(spec->dtype, got, at);
    return tailor_set_error(ctx, TAILOR_ERR_VERIFY,
                            "output '%s': %zu of %zu elements out of tolerance; first at %zu: got "
                            "%g, expected %g (atol %g, rtol %g)",
                            spec->name, nbad, spec->count, at, (double)g, (double)ref[at],
                            spec->atol, spec->rtol);
}

float tailor_ref_round(tailor_dtype dtype, float v)
{
    uint64_t t = 0; /* room for every dtype (fp32, int64 included), not only the 16-bit ones */
    tailor_dtype_store(dtype, &t, 0, v);
    return tailor_dtype_load(dtype, &t, 0);
}

float tailor_ref_gate(tailor_dtype dtype, float g, float u)
{
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return tailor_ref_round(dtype, 0.5f * g * (1.f + tanhf(c * (g + 0.044715f * g * g * g)))) * u;
}

float tailor_ref_dot(const float *x, const float *y, size_t k)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= k; i += 8)
        for (size_t j = 0; j < 8; j++)
            acc[j] += x[i + j] * y[i + j];
    for (; i < k; i++)
        acc[0] += x[i] * y[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* The LCG of tailor_fill_uniform01: x -> FILL_LCG_A x + FILL_LCG_C (mod 2^64). */
#define FILL_LCG_A 6364136223846793005ull
#define FILL_LCG_C 1442695040888963407ull

float tailor_fill_uniform01(uint64_t *s)
{
    *s = *s * FILL_LCG_A + FILL_LCG_C;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f;
}

uint64_t tailor_fill_uniform01_skip(uint64_t state, uint64_t n)
{
    /* x -> a x + c applied n times is x -> A x + C; square the map for each bit of n */
    uint64_t a = FILL_LCG_A, c = FILL_LCG_C;
    uint64_t acc_a = 1, acc_c = 0;
    for (; n; n >>= 1) {
        if (n & 1) {
            acc_a *= a;
            acc_c = acc_c * a + c;
        }
        c = c * (a + 1);
        a *= a;
    }
    return acc_a * state + acc_c;
}

typedef struct fill_job {
    size_t count, chunk;
    void (*range)(void *user, size_t i0, size_t i1);
    void *user;
} fill_job;

static void fill_task(void *user, int task)
{
    const fill_job *j = user;
    size_t i0 = (size_t)task * j->chunk;
    size_t i1 = j->count - i0 < j->chunk ? j->count : i0 + j->chunk;
    j->range(j->user, i0, i1);
}

void tailor_fill_parallel(size_t count, void (*range)(void *user, size_t i0, size_t i1),
                          void *user)
{
    enum { FILL_CHUNK = 1 << 20 };
    if (count <= FILL_CHUNK) {
        range(user, 0, count);
        return;
    }
    fill_job j = {count, FILL_CHUNK, range, user};
    tailor_parallel_for((int)((count + FILL_CHUNK - 1) / FILL_CHUNK), fill_task, &j);
}

uint64_t tailor_fill_u64(uint64_t *s)
{
    uint64_t z = (*s += TAILOR_FILL_U64_STEP);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tailor_fill_permutation(int32_t *out, size_t n, uint64_t *state)
{
    for (size_t j = 0; j < n; j++)
        out[j] = (int32_t)j;
    for (size_t j = n; j > 1; j--) {
        size_t r = (size_t)(tailor_fill_u64(state) % j);
        int32_t t = out[j - 1];
        out[j - 1] = out[r];
        out[r] = t;
    }
}

void tailor_ref_norm_rope(float *x, size_t hd, tailor_dtype dtype, const void *w, float pos,
                          const float *inv_freq, size_t rot)
{
    size_t half = hd / 2;
    double ss = 0;
    for (size_t c = 0; c < hd; c++)
        ss += (double)x[c] * (double)x[c];
    float inv = (float)(1.0 / sqrt(ss / (double)hd + 1e-6));
    for (size_t c = 0; c < hd; c++)
        x[c] = x[c] * inv * (w ? tailor_dtype_load(dtype, w, c) : 1.0f);
    for (size_t j = 0; j < rot; j++) {
        float ang = pos * inv_freq[j];
        float c = cosf(ang), s = sinf(ang), a = x[j], b = x[j + half];
        x[j] = a * c - b * s;
        x[j + half] = b * c + a * s;
    }
}

double tailor_op_no_flops(const tailor_shape *shape, tailor_dtype dtype)
{
    (void)shape;
    (void)dtype;
    return 0.0;
}
