/* static-site reconcile logic (see static_site.h). */
#include <inttypes.h>
#include <string.h>

#include "spec.h"

#define HTML_DIR "/usr/share/nginx/html"

/* Shorthands over the arena `a` in scope: build JSON without NULL checks at
 * every step; a NULL anywhere makes the final wr_json_set/push fail. */
#define STR(s) wr_json_string(a, (s))
#define INT(n) wr_json_int(a, (n))
#define SET(o, k, v) ok = ok && wr_json_set(a, (o), (k), (v))
#define PUSH(arr, v) ok = ok && wr_json_push(a, (arr), (v))

static wr_json *labels(wr_arena *a, const char *name, bool managed_by) {
    wr_json *m = wr_json_object(a);
    bool ok = m != NULL;
    SET(m, "app.kubernetes.io/name", STR("static-site"));
    SET(m, "app.kubernetes.io/instance", STR(name));
    if (managed_by) SET(m, "app.kubernetes.io/managed-by", STR("wasm-reconciler"));
    return ok ? m : NULL;
}

static wr_json *deployment_spec(wr_arena *a, const char *name, const site_spec *site, const char *hash,
                                const char *content_name) {
    bool ok = true;
    wr_json *spec = wr_json_object(a), *selector = wr_json_object(a), *template_ = wr_json_object(a),
            *tmeta = wr_json_object(a), *annotations = wr_json_object(a), *pod = wr_json_object(a),
            *containers = wr_json_array(a), *container = wr_json_object(a), *ports = wr_json_array(a),
            *port = wr_json_object(a), *mounts = wr_json_array(a), *mount = wr_json_object(a),
            *volumes = wr_json_array(a), *volume = wr_json_object(a), *cm = wr_json_object(a);
    SET(spec, "replicas", INT(site->replicas));
    SET(selector, "matchLabels", labels(a, name, false));
    SET(spec, "selector", selector);
    SET(tmeta, "labels", labels(a, name, true));
    SET(annotations, CONTENT_HASH_ANNOTATION, STR(hash));
    SET(tmeta, "annotations", annotations);
    SET(template_, "metadata", tmeta);
    SET(container, "name", STR("web"));
    SET(container, "image", wr_json_clone(a, site->image));
    SET(port, "name", STR("http"));
    SET(port, "containerPort", INT(site->port));
    PUSH(ports, port);
    SET(container, "ports", ports);
    SET(mount, "name", STR("content"));
    SET(mount, "mountPath", STR(HTML_DIR));
    SET(mount, "readOnly", wr_json_bool(a, true));
    PUSH(mounts, mount);
    SET(container, "volumeMounts", mounts);
    PUSH(containers, container);
    SET(pod, "containers", containers);
    SET(cm, "name", STR(content_name));
    SET(volume, "name", STR("content"));
    SET(volume, "configMap", cm);
    PUSH(volumes, volume);
    SET(pod, "volumes", volumes);
    SET(template_, "spec", pod);
    SET(spec, "template", template_);
    return ok ? spec : NULL;
}

static wr_json *service_spec(wr_arena *a, const char *name, int64_t site_port) {
    bool ok = true;
    wr_json *spec = wr_json_object(a), *ports = wr_json_array(a), *port = wr_json_object(a);
    SET(spec, "selector", labels(a, name, false));
    SET(port, "name", STR("http"));
    SET(port, "port", INT(site_port));
    SET(port, "targetPort", STR("http"));
    PUSH(ports, port);
    SET(spec, "ports", ports);
    return ok ? spec : NULL;
}

/* status.availableReplicas of the observed Deployment (0 when absent or not
 * an integer); false when the Deployment has not been observed yet. */
static bool observed_available(const wr_request *req, const char *deployment_name, int64_t *available) {
    const wr_json *deployment = wr_request_child(req, "Deployment", deployment_name);
    if (!deployment) return false;
    if (!wr_json_i64(wr_json_get(wr_json_get(deployment, "status"), "availableReplicas"), available)) *available = 0;
    return true;
}

static bool availability(wr_response *resp, bool observed, int64_t available, int64_t replicas) {
    wr_arena *a = resp->arena;
    if (!observed)
        return wr_response_condition(resp, "Available", WR_UNKNOWN, "DeploymentPending",
                                     "the Deployment has not been observed yet");
    if (replicas == 0) return wr_response_condition(resp, "Available", WR_TRUE, "ScaledToZero", "0 replicas requested");
    char *message = wr_sprintf(a, "%" PRId64 "/%" PRId64 " replicas available", available, replicas);
    return available >= replicas
               ? wr_response_condition(resp, "Available", WR_TRUE, "ReplicasAvailable", message)
               : wr_response_condition(resp, "Available", WR_FALSE, "ReplicasUnavailable", message);
}

static char *site_url(wr_arena *a, const char *name, const char *namespace_, const char *domain, int64_t port) {
    char *host = namespace_ ? wr_sprintf(a, "%s.%s.svc.%s", name, namespace_, domain)
                            : wr_sprintf(a, "%s.svc.%s", name, domain);
    if (!host) return NULL;
    return port == 80 ? wr_sprintf(a, "http://%s/", host) : wr_sprintf(a, "http://%s:%" PRId64 "/", host, port);
}

bool static_site_reconcile(const wr_request *req, wr_response *resp, wr_error *err) {
    wr_arena *a = req->arena;
    const char *name = wr_request_name(req, err);
    if (!name) return false;
    const char *namespace_ = wr_request_namespace(req);
    site_spec site;
    if (!parse_spec(a, req->parent, &site, err)) return false;
    const char *domain;
    if (!parse_config(a, req->config, &domain, err)) return false;
    char *hash = site_content_hash(a, &site);
    char *content_name = wr_child_name(a, name, "content");
    char *app_name = wr_child_name(a, name, "");
    if (!hash || !content_name || !app_name) return wr_oom(err);

    bool ok = true;
    wr_json *config_map = wr_object(a, "v1", "ConfigMap", namespace_, content_name);
    wr_json *data = wr_json_object(a);
    SET(wr_json_get(config_map, "metadata"), "labels", labels(a, name, true));
    ok = ok && wr_annotate(a, config_map, CONTENT_HASH_ANNOTATION, hash);
    for (size_t i = 0; i < site.n_files; i++) SET(data, site.names[i], wr_json_clone(a, site.bodies[i]));
    SET(config_map, "data", data);

    wr_json *deployment = wr_object(a, "apps/v1", "Deployment", namespace_, app_name);
    SET(wr_json_get(deployment, "metadata"), "labels", labels(a, name, true));
    SET(deployment, "spec", deployment_spec(a, name, &site, hash, content_name));

    wr_json *service = wr_object(a, "v1", "Service", namespace_, app_name);
    SET(wr_json_get(service, "metadata"), "labels", labels(a, name, true));
    SET(service, "spec", service_spec(a, name, site.port));

    int64_t available = 0;
    bool observed = observed_available(req, app_name, &available);
    wr_json *status = wr_json_object(a);
    SET(status, "url", STR(site_url(a, name, namespace_, domain, site.port)));
    SET(status, "contentHash", STR(hash));
    SET(status, "replicas", INT(site.replicas));
    SET(status, "availableReplicas", INT(available));

    ok = ok && wr_response_child(resp, config_map) && wr_response_child(resp, deployment) &&
         wr_response_child(resp, service) && availability(resp, observed, available, site.replicas);
    wr_response_status(resp, status);

    const char *previous = wr_annotation_of(wr_request_child(req, "ConfigMap", content_name), CONTENT_HASH_ANNOTATION);
    if (ok && previous && strcmp(previous, hash) != 0) {
        char *message = wr_sprintf(a, "content changed, rolling Deployment %s", app_name);
        ok = wr_response_event(resp, WR_NORMAL, "ContentChanged", message);
    }
    return ok ? true : wr_oom(err);
}
