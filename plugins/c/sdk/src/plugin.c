/* Request parsing, response building, errors and object helpers; see wr_plugin.h. */
#include <stdarg.h>
#include <string.h>

#include "wr_plugin.h"

/* ---- errors ---------------------------------------------------------------- */

bool wr_oom(wr_error *err) {
    err->kind = WR_PERMANENT;
    err->reason = "OutOfMemory";
    err->message = "the plugin ran out of memory";
    return false;
}

static bool vfail(wr_arena *arena, wr_error *err, wr_error_kind kind, const char *reason, const char *prefix,
                  const char *fmt, va_list ap) {
    char *msg = wr_vsprintf(arena, fmt, ap);
    if (msg && prefix) msg = wr_sprintf(arena, "%s: %s", prefix, msg);
    if (!msg) return wr_oom(err);
    err->kind = kind;
    err->reason = reason;
    err->message = msg;
    return false;
}

bool wr_fail(wr_arena *arena, wr_error *err, wr_error_kind kind, const char *reason, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(arena, err, kind, reason, NULL, fmt, ap);
    va_end(ap);
    return false;
}

bool wr_invalid_spec(wr_arena *arena, wr_error *err, const char *field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(arena, err, WR_PERMANENT, "InvalidSpec", field, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- request --------------------------------------------------------------- */

static wr_json *parse_text(wr_arena *a, const char *text, size_t len, const char *what, wr_error *err) {
    const char *problem = NULL;
    wr_json *v = wr_json_parse(a, text, len, &problem);
    if (!v) wr_fail(a, err, WR_PERMANENT, "InvalidRequest", "%s is not valid JSON: %s", what, problem);
    return v;
}

static wr_json *parse_list(wr_arena *a, const char *const *texts, const size_t *lens, size_t n,
                           const char *what, wr_error *err) {
    wr_json *list = wr_json_array(a);
    if (!list) return wr_oom(err), NULL;
    for (size_t i = 0; i < n; i++) {
        char *label = wr_sprintf(a, "%s[%zu]", what, i);
        wr_json *item = label ? parse_text(a, texts[i], lens[i], label, err) : NULL;
        if (!label) return wr_oom(err), NULL;
        if (!item) return NULL;
        if (!wr_json_push(a, list, item)) return wr_oom(err), NULL;
    }
    return list;
}

bool wr_request_parse(wr_arena *a, const char *parent, size_t parent_len, const char *const *children,
                      const size_t *children_lens, size_t n_children, const char *const *related,
                      const size_t *related_lens, size_t n_related, bool finalizing, const char *config,
                      size_t config_len, const char *now, wr_request *req, wr_error *err) {
    memset(req, 0, sizeof *req);
    req->arena = a;
    req->finalizing = finalizing;
    req->now = now;
    if (!(req->parent = parse_text(a, parent, parent_len, "parent", err))) return false;
    if (!(req->children = parse_list(a, children, children_lens, n_children, "children", err))) return false;
    if (!(req->related = parse_list(a, related, related_lens, n_related, "related", err))) return false;
    if (config) {
        if (!(req->config = parse_text(a, config, config_len, "config", err))) return false;
        if (req->config->kind == WR_JSON_NULL) req->config = NULL;
    }
    return true;
}

const char *wr_request_name(const wr_request *req, wr_error *err) {
    const char *name = wr_name_of(req->parent);
    if (!name) wr_fail(req->arena, err, WR_PERMANENT, "InvalidParent", "parent has no metadata.name");
    return name;
}

const char *wr_request_namespace(const wr_request *req) { return wr_namespace_of(req->parent); }

wr_json *wr_request_child(const wr_request *req, const char *kind, const char *name) {
    return wr_find(req->children, kind, name);
}

/* ---- response -------------------------------------------------------------- */

void wr_response_init(wr_response *resp, wr_arena *arena) {
    memset(resp, 0, sizeof *resp);
    resp->arena = arena;
    resp->children = wr_json_array(arena);
}

bool wr_response_child(wr_response *resp, wr_json *child) {
    return wr_json_push(resp->arena, resp->children, child);
}

/* Grows a plain array of `size`-byte items kept in the arena. */
static void *grow_items(wr_arena *a, void *items, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return items;
    size_t next = *cap ? *cap * 2 : 4;
    void *fresh = wr_alloc(a, next * size);
    if (!fresh) return NULL;
    if (n) memcpy(fresh, items, n * size);
    *cap = next;
    return fresh;
}

bool wr_response_condition(wr_response *resp, const char *type, wr_condition_status status, const char *reason,
                           const char *message) {
    wr_condition *items = grow_items(resp->arena, resp->conditions, resp->n_conditions, &resp->cap_conditions,
                                     sizeof(wr_condition));
    if (!items || !type || !reason || !message) return false;
    resp->conditions = items;
    items[resp->n_conditions++] = (wr_condition){type, status, reason, message};
    return true;
}

bool wr_response_event(wr_response *resp, wr_event_type type, const char *reason, const char *message) {
    wr_event *items = grow_items(resp->arena, resp->events, resp->n_events, &resp->cap_events, sizeof(wr_event));
    if (!items || !reason || !message) return false;
    resp->events = items;
    items[resp->n_events++] = (wr_event){type, reason, message};
    return true;
}

void wr_response_status(wr_response *resp, wr_json *status) { resp->status = status; }

void wr_response_requeue_after(wr_response *resp, uint32_t seconds) {
    resp->has_requeue = true;
    resp->requeue_after_seconds = seconds;
}

/* ---- objects --------------------------------------------------------------- */

wr_json *wr_object(wr_arena *a, const char *api_version, const char *kind, const char *namespace_,
                   const char *name) {
    wr_json *o = wr_json_object(a), *meta = wr_json_object(a);
    if (!o || !meta || !name) return NULL;
    bool ok = wr_json_set(a, o, "apiVersion", wr_json_string(a, api_version)) &&
              wr_json_set(a, o, "kind", wr_json_string(a, kind)) &&
              wr_json_set(a, meta, "name", wr_json_string(a, name)) &&
              (!namespace_ || wr_json_set(a, meta, "namespace", wr_json_string(a, namespace_))) &&
              wr_json_set(a, o, "metadata", meta);
    return ok ? o : NULL;
}

static bool set_meta_map(wr_arena *a, wr_json *o, const char *map, const char *key, const char *value) {
    if (!wr_json_is(o, WR_JSON_OBJECT)) return false;
    wr_json *meta = wr_json_get(o, "metadata");
    if (!wr_json_is(meta, WR_JSON_OBJECT)) {
        if (!(meta = wr_json_object(a)) || !wr_json_set(a, o, "metadata", meta)) return false;
    }
    wr_json *entries = wr_json_get(meta, map);
    if (!wr_json_is(entries, WR_JSON_OBJECT)) {
        if (!(entries = wr_json_object(a)) || !wr_json_set(a, meta, map, entries)) return false;
    }
    return wr_json_set(a, entries, key, wr_json_string(a, value));
}

bool wr_label(wr_arena *a, wr_json *o, const char *key, const char *value) {
    return set_meta_map(a, o, "labels", key, value);
}

bool wr_annotate(wr_arena *a, wr_json *o, const char *key, const char *value) {
    return set_meta_map(a, o, "annotations", key, value);
}

const char *wr_name_of(const wr_json *o) { return wr_json_str(wr_json_get(wr_json_get(o, "metadata"), "name")); }
const char *wr_namespace_of(const wr_json *o) {
    return wr_json_str(wr_json_get(wr_json_get(o, "metadata"), "namespace"));
}
const char *wr_kind_of(const wr_json *o) { return wr_json_str(wr_json_get(o, "kind")); }
const char *wr_annotation_of(const wr_json *o, const char *key) {
    return wr_json_str(wr_json_get(wr_json_get(wr_json_get(o, "metadata"), "annotations"), key));
}

/* Compares a JSON string (which may hold NULs) with a C string. */
static bool str_eq(const wr_json *v, const char *s) {
    return wr_json_is(v, WR_JSON_STRING) && v->len == strlen(s) && memcmp(v->str, s, v->len) == 0;
}

wr_json *wr_find(const wr_json *objects, const char *kind, const char *name) {
    for (size_t i = 0; objects && objects->kind == WR_JSON_ARRAY && i < objects->count; i++) {
        wr_json *o = objects->items[i];
        if (str_eq(wr_json_get(o, "kind"), kind) && str_eq(wr_json_get(wr_json_get(o, "metadata"), "name"), name)) {
            return o;
        }
    }
    return NULL;
}
