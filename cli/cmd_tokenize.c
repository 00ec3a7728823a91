/* cmd_tokenize.c — `tailor tokenize` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor tokenize: not built yet\n");
    return 1;
}
