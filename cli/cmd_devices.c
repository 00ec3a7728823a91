/* cmd_devices.c — `tailor devices` (placeholder until its module lands). */
#include <stdio.h>

#include "cli.h"

int cmd_devices(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "tailor devices: not built yet\n");
    return 1;
}
