/* {{name}}: the reconcile logic for `{{kind}}` objects. A plain function from
 * a request to a response (false + err on failure), unit tested natively
 * (src/test_plugin.c) and built into the component by ../build.sh. Allocate
 * everything from req->arena: it is freed after the call. */
#include "plugin.h"

bool plugin_reconcile(const wr_request *req, wr_response *resp, wr_error *err) {
    wr_arena *a = req->arena;
    const char *name = wr_request_name(req, err);
    if (!name) return false;
    const char *message = "hello";
    wr_json *m = wr_json_get(wr_json_get(req->parent, "spec"), "message");
    if (m && !wr_json_is(m, WR_JSON_NULL)) {
        if (!wr_json_is(m, WR_JSON_STRING)) return wr_invalid_spec(a, err, "spec.message", "must be a string");
        message = wr_json_str(m);
    }

    wr_json *config_map = wr_object(a, "v1", "ConfigMap", wr_request_namespace(req), wr_sprintf(a, "%s-greeting", name));
    wr_json *data = wr_json_object(a);
    wr_json *status = wr_json_object(a);
    if (!config_map || !data || !status || !wr_label(a, config_map, "app.kubernetes.io/managed-by", "wasm-reconciler") ||
        !wr_json_set(a, data, "message", wr_json_string(a, message)) || !wr_json_set(a, config_map, "data", data) ||
        !wr_json_set(a, status, "message", wr_json_string(a, message)) || !wr_response_child(resp, config_map) ||
        !wr_response_condition(resp, "Greeted", WR_TRUE, "ConfigMapRendered", ""))
        return wr_oom(err);
    wr_response_status(resp, status);
    return true;
}
