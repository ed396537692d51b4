/* Native unit tests of the reconcile logic (built with the host's C compiler
 * by ../build.sh). */
#include <stdio.h>
#include <string.h>

#include "plugin.h"

static int failed;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                  \
    } while (0)

static bool run(wr_arena *a, const char *spec, wr_response *resp, wr_error *err) {
    char *text = wr_sprintf(a,
                            "{\"apiVersion\":\"{{group}}/v1alpha1\",\"kind\":\"{{kind}}\","
                            "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\"},\"spec\":%s}",
                            spec);
    wr_request req = {.arena = a, .parent = wr_json_parse(a, text, strlen(text), NULL),
                      .children = wr_json_array(a), .related = wr_json_array(a), .now = "x"};
    wr_response_init(resp, a);
    memset(err, 0, sizeof *err);
    return plugin_reconcile(&req, resp, err);
}

int main(void) {
    wr_arena *a = wr_arena_new();
    wr_response resp;
    wr_error err;
    CHECK(run(a, "{\"message\":\"hi\"}", &resp, &err));
    CHECK(resp.children->count == 1);
    CHECK(strcmp(wr_name_of(wr_json_at(resp.children, 0)), "a-greeting") == 0);
    CHECK(!run(a, "{\"message\":1}", &resp, &err));
    CHECK(err.reason && strcmp(err.reason, "InvalidSpec") == 0);
    wr_arena_free(a);
    if (failed) return 1;
    printf("unit tests passed\n");
    return 0;
}
