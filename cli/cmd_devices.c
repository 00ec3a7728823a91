/* cmd_devices.c — `tailor devices [--json]`: the live GPUs with every fact, then the profiles. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cuda.h"
#include "device.h"
#include "tuner.h"

static void devices_usage(FILE *out)
{
    fprintf(out, "usage: tailor devices [--json]\n\n"
                 "Lists each live GPU with its facts and fingerprint, then the built-in profiles\n"
                 "(the names --device accepts). Without a CUDA driver it says so in one line and\n"
                 "lists the profiles. A live GPU's cache key is its fingerprint as the tuner\n"
                 "files winners under it: with \"|carveout=P\" when TAILOR_CARVEOUT asks for\n"
                 "another shared-memory carveout than the default.\n\n"
                 "  --json   one JSON object {\"driver\", \"devices\", \"profiles\"}\n");
}

/* What the driver gave: its status line, version, and the live devices read. */
typedef struct live_scan {
    tailor_status status;      /* TAILOR_OK when the driver loaded and the devices were counted */
    char message[1024];        /* the failure, one line */
    int driver_version;        /* 0 when unknown */
    int count;                 /* devices the driver sees */
    tailor_device_info *infos; /* count entries; ok[i] says whether each was read */
    int *ok;
    char **errors;             /* per device failure text (NULL when ok) */
} live_scan;

static void scan_free(live_scan *s)
{
    for (int i = 0; i < s->count && s->errors; i++)
        free(s->errors[i]);
    free(s->errors);
    free(s->infos);
    free(s->ok);
}

/* Reads every live device; never fails as a whole (each failure is kept as text). */
static int scan_live(tailor_ctx *ctx, live_scan *s)
{
    memset(s, 0, sizeof *s);
    s->status = tailor_device_count(ctx, &s->count);
    if (s->status != TAILOR_OK) {
        snprintf(s->message, sizeof s->message, "%s", tailor_ctx_message(ctx));
        s->count = 0;
        return 0;
    }
    if (tailor_cuda_driver_version(ctx, &s->driver_version) != TAILOR_OK)
        s->driver_version = 0;
    if (s->count == 0)
        return 0;
    s->infos = calloc((size_t)s->count, sizeof *s->infos);
    s->ok = calloc((size_t)s->count, sizeof *s->ok);
    s->errors = calloc((size_t)s->count, sizeof *s->errors);
    if (!s->infos || !s->ok || !s->errors) {
        s->count = 0;
        return -1;
    }
    int failures = 0;
    for (int i = 0; i < s->count; i++) {
        s->ok[i] = tailor_device_query(ctx, i, &s->infos[i]) == TAILOR_OK;
        if (!s->ok[i]) {
            s->errors[i] = strdup(tailor_ctx_message(ctx));
            failures++;
        }
    }
    return failures;
}

/* ---- text ---------------------------------------------------------------------------------- */

static const char *fmt_int(char *buf, long long n) { return tailor_fmt_int(buf, 32, n); }

/* The shared-memory carveout every kernel of this process prefers, as text: "25 % preferred
 * (default)", "60 % preferred (TAILOR_CARVEOUT)", "the driver's choice (TAILOR_CARVEOUT)". */
static void carveout_text(char *buf, size_t size)
{
    int pct = tailor_carveout_preference();
    const char *why = pct == TAILOR_DEFAULT_CARVEOUT ? "default" : "TAILOR_CARVEOUT";
    if (pct < 0)
        snprintf(buf, size, "the driver's choice (%s)", why);
    else
        snprintf(buf, size, "%d %% preferred (%s)", pct, why);
}

/* The fingerprint the tuner keys d's winners by (with this process's carveout). TAILOR_CARVEOUT
 * was checked before anything printed, so this cannot fail. */
static void cache_key(const tailor_device_info *d, char *buf, size_t size)
{
    if (tailor_tuner_fingerprint(NULL, d, NULL, buf, size) != TAILOR_OK)
        tailor_device_fingerprint(d, buf, size);
}

static void print_live(const tailor_device_info *d)
{
    char a[32], b[32], arch[16], fp[256], key[300], carve[64];
    tailor_device_arch(d, arch, sizeof arch);
    tailor_device_fingerprint(d, fp, sizeof fp);
    cache_key(d, key, sizeof key);
    carveout_text(carve, sizeof carve);
    printf("GPU %d: %s\n", d->ordinal, d->name);
    printf("  compute capability     %d.%d (%s)\n", d->cc_major, d->cc_minor, arch);
    printf("  SMs                    %d\n", d->sm_count);
    printf("  shared memory / block  %s B default, %s B opt-in\n", fmt_int(a, d->smem_per_block),
           fmt_int(b, d->smem_per_block_optin));
    printf("  shared memory / SM     %s B\n", fmt_int(a, d->smem_per_sm));
    printf("  registers / block      %s (per SM %s)\n", fmt_int(a, d->regs_per_block),
           fmt_int(b, d->regs_per_sm));
    printf("  threads / block        %s (per SM %s, warp %d)\n",
           fmt_int(a, d->max_threads_per_block), fmt_int(b, d->max_threads_per_sm), d->warp_size);
    printf("  L2                     %s B (%.1f MiB)\n", fmt_int(a, d->l2_bytes),
           (double)d->l2_bytes / 1048576.0);
    printf("  memory                 %s B (%.1f GiB)\n", fmt_int(a, d->mem_bytes),
           (double)d->mem_bytes / 1073741824.0);
    printf("  memory clock, bus      %s kHz, %d-bit (peak %.0f GB/s)\n",
           fmt_int(a, d->mem_clock_khz), d->mem_bus_bits,
           tailor_device_peak_bandwidth(d) / 1e9);
    printf("  driver                 CUDA %d.%d (%d)\n", d->driver_version / 1000,
           (d->driver_version % 1000) / 10, d->driver_version);
    printf("  NVRTC                  %d.%d\n", d->nvrtc_major, d->nvrtc_minor);
    printf("  UUID                   %s\n", d->uuid);
    printf("  shared-memory carveout %s\n", carve);
    printf("  fingerprint            %s\n", fp);
    printf("  cache key              %s\n\n", key);
}

static void print_profile_row(const tailor_device_info *d)
{
    char arch[16], s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], s7[32];
    tailor_device_arch(d, arch, sizeof arch);
    printf("%-10s %-24s %-6s %4d %11s %11s %11s %7s %5s %6s %6.0f %5.0f %10s %5d  %s\n",
           d->short_name, d->name, arch, d->sm_count, fmt_int(s1, d->smem_per_block),
           fmt_int(s2, d->smem_per_block_optin), fmt_int(s3, d->smem_per_sm),
           fmt_int(s4, d->regs_per_block), fmt_int(s5, d->max_threads_per_block),
           fmt_int(s6, d->max_threads_per_sm), (double)d->l2_bytes / 1048576.0,
           (double)d->mem_bytes / 1073741824.0, fmt_int(s7, d->mem_clock_khz), d->mem_bus_bits,
           d->source);
}

static void print_profiles(void)
{
    int n = 0;
    const tailor_device_info *p = tailor_device_profiles(&n);
    printf("Profiles (--device NAME; shared memory in bytes, L2 in MiB, memory in GiB, clock in kHz):\n");
    printf("%-10s %-24s %-6s %4s %11s %11s %11s %7s %5s %6s %6s %5s %10s %5s  %s\n", "name", "device",
           "arch", "SMs", "smem/block", "opt-in", "smem/SM", "regs", "thr", "thr/SM", "L2", "mem",
           "mem clock", "bus", "source");
    for (int i = 0; i < n; i++)
        print_profile_row(&p[i]);
}

static int print_text(const live_scan *s)
{
    if (s->status != TAILOR_OK) {
        printf("%s\n\n", s->message);
    } else if (s->count == 0) {
        printf("no CUDA device: the driver (CUDA %d.%d) sees no GPU\n\n", s->driver_version / 1000,
               (s->driver_version % 1000) / 10);
    }
    int failed = 0;
    for (int i = 0; i < s->count; i++) {
        if (s->ok[i]) {
            print_live(&s->infos[i]);
        } else {
            printf("GPU %d: %s\n\n", i, s->errors[i]);
            failed = 1;
        }
    }
    print_profiles();
    return failed;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static cJSON *device_json(const tailor_device_info *d)
{
    char buf[256];
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "name", d->name);
    if (!d->is_live)
        cJSON_AddStringToObject(o, "short_name", d->short_name);
    cJSON_AddStringToObject(o, "kind", d->kind == TAILOR_DEVICE_TPU ? "tpu" : "gpu");
    cJSON_AddBoolToObject(o, "live", d->is_live != 0);
    if (d->is_live)
        cJSON_AddNumberToObject(o, "ordinal", d->ordinal);
    tailor_device_arch(d, buf, sizeof buf);
    cJSON_AddStringToObject(o, "arch", buf);
    snprintf(buf, sizeof buf, "%d.%d", d->cc_major, d->cc_minor);
    cJSON_AddStringToObject(o, "compute_capability", buf);
    cJSON_AddNumberToObject(o, "sm_count", d->sm_count);
    cJSON_AddNumberToObject(o, "smem_per_block", d->smem_per_block);
    cJSON_AddNumberToObject(o, "smem_per_block_optin", d->smem_per_block_optin);
    cJSON_AddNumberToObject(o, "smem_per_sm", d->smem_per_sm);
    cJSON_AddNumberToObject(o, "regs_per_block", d->regs_per_block);
    cJSON_AddNumberToObject(o, "regs_per_sm", d->regs_per_sm);
    cJSON_AddNumberToObject(o, "max_threads_per_block", d->max_threads_per_block);
    cJSON_AddNumberToObject(o, "max_threads_per_sm", d->max_threads_per_sm);
    cJSON_AddNumberToObject(o, "warp_size", d->warp_size);
    cJSON_AddNumberToObject(o, "l2_bytes", (double)d->l2_bytes);
    cJSON_AddNumberToObject(o, "mem_bytes", (double)d->mem_bytes);
    cJSON_AddNumberToObject(o, "mem_clock_khz", d->mem_clock_khz);
    cJSON_AddNumberToObject(o, "mem_bus_bits", d->mem_bus_bits);
    cJSON_AddNumberToObject(o, "peak_bandwidth_bytes_per_s", tailor_device_peak_bandwidth(d));
    if (d->is_live) {
        cJSON_AddNumberToObject(o, "driver_version", d->driver_version);
        snprintf(buf, sizeof buf, "%d.%d", d->nvrtc_major, d->nvrtc_minor);
        cJSON_AddStringToObject(o, "nvrtc_version", buf);
        cJSON_AddStringToObject(o, "uuid", d->uuid);
        tailor_device_fingerprint(d, buf, sizeof buf);
        cJSON_AddStringToObject(o, "fingerprint", buf);
        cache_key(d, buf, sizeof buf);
        cJSON_AddStringToObject(o, "cache_key", buf);
        cJSON_AddNumberToObject(o, "carveout_percent", tailor_carveout_preference());
    }
    cJSON_AddStringToObject(o, "source", d->source);
    return o;
}

static cJSON *driver_json(const live_scan *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (s->status != TAILOR_OK) {
        cJSON_AddStringToObject(o, "error", s->message);
        cJSON_AddStringToObject(o, "status", tailor_status_name(s->status));
        return o;
    }
    char buf[32];
    cJSON_AddNumberToObject(o, "version", s->driver_version);
    snprintf(buf, sizeof buf, "%d.%d", s->driver_version / 1000, (s->driver_version % 1000) / 10);
    cJSON_AddStringToObject(o, "cuda", buf);
    cJSON_AddNumberToObject(o, "device_count", s->count);
    return o;
}

static cJSON *build_json(const live_scan *s)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *devices = cJSON_CreateArray();
    cJSON *profs = cJSON_CreateArray();
    cJSON *driver = driver_json(s);
    if (!root || !devices || !profs || !driver) {
        cJSON_Delete(root);
        cJSON_Delete(devices);
        cJSON_Delete(profs);
        cJSON_Delete(driver);
        return NULL;
    }
    cJSON_AddItemToObject(root, "driver", driver);
    cJSON_AddItemToObject(root, "devices", devices);
    cJSON_AddItemToObject(root, "profiles", profs);
    for (int i = 0; i < s->count; i++) {
        cJSON *d = NULL;
        if (s->ok[i]) {
            d = device_json(&s->infos[i]);
        } else if ((d = cJSON_CreateObject()) != NULL) {
            cJSON_AddNumberToObject(d, "ordinal", i);
            cJSON_AddStringToObject(d, "error", s->errors[i]);
        }
        if (d)
            cJSON_AddItemToArray(devices, d);
    }
    int n = 0;
    const tailor_device_info *p = tailor_device_profiles(&n);
    for (int i = 0; i < n; i++) {
        cJSON *d = device_json(&p[i]);
        if (d)
            cJSON_AddItemToArray(profs, d);
    }
    return root;
}

static int print_json(const live_scan *s)
{
    cJSON *root = build_json(s);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "tailor: out of memory\n");
        return 1;
    }
    printf("%s\n", text);
    cJSON_free(text);
    for (int i = 0; i < s->count; i++)
        if (!s->ok[i])
            return 1;
    return 0;
}

/* ---- the command --------------------------------------------------------------------------- */

int cmd_devices(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'h':
            devices_usage(stdout);
            return 0;
        default:
            return cli_bad_flag("devices", c, argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("devices", "it takes no arguments, but got '%s'", argv[optind]);

    tailor_ctx *ctx = cli_ctx();
    int pct;
    if (tailor_carveout_read(ctx, &pct) != TAILOR_OK) { /* the cache key would be wrong */
        fprintf(stderr, "tailor: %s\n", tailor_ctx_message(ctx));
        tailor_ctx_destroy(ctx);
        return 2;
    }
    live_scan scan;
    int failures = scan_live(ctx, &scan);
    int rc;
    if (failures < 0) {
        fprintf(stderr, "tailor: out of memory\n");
        rc = 1;
    } else {
        rc = json ? print_json(&scan) : print_text(&scan);
    }
    scan_free(&scan);
    tailor_ctx_destroy(ctx);
    return rc;
}
