/* cmd_bench.c — `tailor bench` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor bench: not built yet\n");
    return 1;
}
