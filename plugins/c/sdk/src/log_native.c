/* `wr_log` for native builds (unit tests): writes to stderr. */
#include <stdio.h>

#include "wr_plugin.h"

void wr_log(wr_log_level level, const char *message) {
    static const char *names[] = {"trace", "debug", "info", "warn", "error"};
    fprintf(stderr, "[plugin %s] %s\n", names[level <= WR_LOG_ERROR ? level : WR_LOG_ERROR], message);
}
