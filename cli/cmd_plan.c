/* cmd_plan.c — `tailor plan`: which configurations of an op fit a device, and why the rest
 * do not. Needs no GPU. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "device.h"
#include "plan.h"

static void usage(void)
{
    printf("usage: tailor plan --device NAME|PROFILE --op OP --shape k=v,... [--dtype fp16|bf16] "
           "[--json] [--quiet]\n\n"
           "Ops and their shape keys:\n");
    for (const tailor_op *const *op = tailor_op_list(); *op; op++) {
        printf("  %-20s %s\n", (*op)->name, (*op)->summary);
        for (const tailor_shape_key *k = (*op)->keys; k->name; k++) {
            if (k->fallback < 0)
                printf("      %-10s %s\n", k->name, k->doc);
            else
                printf("      %-10s %s (default %lld)\n", k->name, k->doc, k->fallback);
        }
    }
}

static cJSON *params_json(const tailor_config *cfg)
{
    char buf[1024];
    tailor_config_json(cfg, buf, sizeof buf);
    const char *end = NULL;
    return cJSON_ParseWithOpts(buf, &end, 1);
}

static void print_json(const tailor_plan *plan)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "device", plan->dev.short_name[0] ? plan->dev.short_name
                                                                 : plan->dev.name);
    cJSON_AddStringToObject(o, "device_name", plan->dev.name);
    cJSON_AddStringToObject(o, "op", plan->op->name);
    char shape[256];
    tailor_shape_format(&plan->shape, shape, sizeof shape);
    cJSON_AddStringToObject(o, "shape", shape);
    cJSON_AddStringToObject(o, "dtype", tailor_dtype_name(plan->dtype));
    cJSON_AddNumberToObject(o, "candidates", plan->count);
    cJSON *surv = cJSON_AddArrayToObject(o, "survivors");
    cJSON *ref = cJSON_AddArrayToObject(o, "refused");
    for (int i = 0; i < plan->count; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "template", e->template_name);
        cJSON_AddItemToObject(item, "params", params_json(&e->cfg));
        if (e->verdict == TAILOR_FITS) {
            cJSON_AddNumberToObject(item, "smem_bytes",
                                    (double)(e->launch.smem_static + e->launch.smem_dynamic));
            cJSON_AddNumberToObject(item, "threads", e->launch.threads);
            cJSON_AddItemToArray(surv, item);
        } else {
            cJSON_AddStringToObject(item, "class", tailor_verdict_name(e->verdict));
            cJSON_AddStringToObject(item, "reason", e->reason);
            cJSON_AddItemToArray(ref, item);
        }
    }
    char *text = cJSON_Print(o);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static void print_text(const tailor_plan *plan, int quiet)
{
    char shape[256], a[32];
    tailor_shape_format(&plan->shape, shape, sizeof shape);
    printf("%s %s %s on %s: %d candidates, %d survive\n", plan->op->name, shape,
           tailor_dtype_name(plan->dtype), plan->dev.name, plan->count, plan->survivors);
    printf("\nsurvivors:\n");
    for (int i = 0; i < plan->count; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        if (e->verdict != TAILOR_FITS)
            continue;
        char params[384];
        tailor_config_format(&e->cfg, params, sizeof params);
        printf("  %-22s %-48s %10s B smem %5d threads\n", e->template_name, params,
               tailor_fmt_int(a, sizeof a, e->launch.smem_static + e->launch.smem_dynamic),
               e->launch.threads);
    }
    if (quiet)
        return;
    printf("\nrefused:\n");
    for (int i = 0; i < plan->count; i++) {
        const tailor_plan_entry *e = &plan->entries[i];
        if (e->verdict != TAILOR_FITS)
            printf("  [%s] %s\n", tailor_verdict_name(e->verdict), e->reason);
    }
}

int cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'}, {"op", required_argument, NULL, 'o'},
        {"shape", required_argument, NULL, 's'},  {"dtype", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},         {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *device = NULL, *op = NULL, *shape_text = NULL, *dtype_text = NULL;
    int json = 0, quiet = 0, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'o': op = optarg; break;
        case 's': shape_text = optarg; break;
        case 't': dtype_text = optarg; break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(); return 0;
        default: return cli_bad_flag("plan", argc, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("plan", "unexpected argument '%s'", argv[optind]);
    if (!device || !op || !shape_text)
        return cli_usage_error("plan", "--device, --op and --shape are required");
    tailor_ctx *ctx = cli_ctx();
    tailor_device_info dev;
    tailor_shape shape;
    tailor_dtype dtype;
    tailor_status st = tailor_device_resolve(ctx, device, &dev);
    if (st == TAILOR_OK)
        st = tailor_shape_parse(ctx, shape_text, &shape);
    if (st == TAILOR_OK) {
        if (dtype_text)
            st = tailor_dtype_parse(ctx, dtype_text, &dtype);
        else /* the device decides: no bf16 datapath below sm_80 */
            dtype = dev.kind == TAILOR_DEVICE_GPU && dev.cc_major < 8 ? TAILOR_DTYPE_F16
                                                                    : TAILOR_DTYPE_BF16;
    }
    tailor_plan plan;
    if (st == TAILOR_OK)
        st = tailor_plan_build(ctx, &dev, op, &shape, dtype, &plan);
    if (st) {
        int rc = cli_fail(ctx, st);
        tailor_ctx_destroy(ctx);
        return st == TAILOR_ERR_MISUSE ? 2 : rc;
    }
    if (json)
        print_json(&plan);
    else
        print_text(&plan, quiet);
    tailor_plan_free(&plan);
    tailor_ctx_destroy(ctx);
    return 0;
}
