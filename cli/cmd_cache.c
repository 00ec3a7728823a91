/* cmd_cache.c — `tailor cache` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_cache(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor cache: not built yet\n");
    return 1;
}
