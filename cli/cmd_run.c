/* cmd_run.c — `tailor run` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor run: not built yet\n");
    return 1;
}
