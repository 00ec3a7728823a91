/* cmd_plan.c — `tailor plan` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor plan: not built yet\n");
    return 1;
}
