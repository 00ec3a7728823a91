/* cmd_tune.c — `tailor tune` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_tune(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor tune: not built yet\n");
    return 1;
}
