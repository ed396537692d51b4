/*
 * C SDK for wasm-reconciler plugins.
 *
 * A plugin is a function from a wr_request to a wr_response:
 *
 *     static bool reconcile(const wr_request *req, wr_response *resp, wr_error *err) {
 *         const char *name = wr_request_name(req, err);
 *         if (!name) return false;
 *         wr_json *cm = wr_object(req->arena, "v1", "ConfigMap", wr_request_namespace(req),
 *                                 wr_child_name(req->arena, name, "config"));
 *         return wr_response_child(resp, cm);
 *     }
 *     WR_EXPORT_RECONCILER(reconcile)   // in the component's entry file (wr_export.h)
 *
 * Everything (request, response, strings) lives in the request's arena and
 * is freed after the call. Return false with `err` filled (wr_fail,
 * wr_invalid_spec) for a permanent or transient error. The logic compiles
 * natively too, so it is unit-tested with the host's C compiler.
 */
#ifndef WR_PLUGIN_H
#define WR_PLUGIN_H

#include "wr_json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything a plugin may know when it is called. */
typedef struct {
    wr_arena *arena;       /* allocate everything of this call from here */
    wr_json *parent;       /* the parent object */
    wr_json *children;     /* array: observed children controlled by the parent */
    wr_json *related;      /* array: objects selected by the `related` rules */
    bool finalizing;       /* the parent is being deleted, finalizer still on */
    wr_json *config;       /* controller config, NULL when absent or null */
    const char *now;       /* RFC 3339 UTC: the plugin's only clock */
} wr_request;

typedef enum { WR_TRUE, WR_FALSE, WR_UNKNOWN } wr_condition_status;
typedef enum { WR_NORMAL, WR_WARNING } wr_event_type;

/* A condition on the parent (the host adds observedGeneration and
 * lastTransitionTime, and owns Ready). */
typedef struct {
    const char *type;
    wr_condition_status status;
    const char *reason;
    const char *message;
} wr_condition;

/* An event recorded on the parent (deduplicated by the host). */
typedef struct {
    wr_event_type type;
    const char *reason;
    const char *message;
} wr_event;

/* What the plugin wants. Fill it with the wr_response_* functions. */
typedef struct {
    wr_arena *arena;
    wr_json *children;    /* array of desired children */
    wr_condition *conditions;
    size_t n_conditions, cap_conditions;
    wr_json *status;      /* object merged into .status, or NULL */
    bool has_requeue;
    uint32_t requeue_after_seconds;
    wr_event *events;
    size_t n_events, cap_events;
    bool finalized;
} wr_response;

typedef enum { WR_PERMANENT, WR_TRANSIENT } wr_error_kind;

/* Why the plugin could not answer. */
typedef struct {
    wr_error_kind kind;
    const char *reason;   /* CamelCase */
    const char *message;
} wr_error;

/* The signature of a plugin: true with `resp` filled, or false with `err`. */
typedef bool (*wr_reconcile_fn)(const wr_request *req, wr_response *resp, wr_error *err);

/* ---- request ------------------------------------------------------------- */

/* Parses the JSON texts of a request into `req` (allocating in `arena`).
 * false with `err` = permanent InvalidRequest when a text is not JSON. */
bool wr_request_parse(wr_arena *arena, const char *parent, size_t parent_len,
                      const char *const *children, const size_t *children_lens, size_t n_children,
                      const char *const *related, const size_t *related_lens, size_t n_related,
                      bool finalizing, const char *config, size_t config_len, const char *now,
                      wr_request *req, wr_error *err);
/* The parent's metadata.name; NULL with a permanent InvalidParent error if missing. */
const char *wr_request_name(const wr_request *req, wr_error *err);
/* The parent's metadata.namespace, NULL for cluster-scoped parents. */
const char *wr_request_namespace(const wr_request *req);
/* The observed child of `kind` named `name`, or NULL. */
wr_json *wr_request_child(const wr_request *req, const char *kind, const char *name);

/* ---- response ------------------------------------------------------------ */

void wr_response_init(wr_response *resp, wr_arena *arena);
bool wr_response_child(wr_response *resp, wr_json *child);
bool wr_response_condition(wr_response *resp, const char *type, wr_condition_status status,
                           const char *reason, const char *message);
bool wr_response_event(wr_response *resp, wr_event_type type, const char *reason, const char *message);
void wr_response_status(wr_response *resp, wr_json *status);
void wr_response_requeue_after(wr_response *resp, uint32_t seconds);

/* ---- errors -------------------------------------------------------------- */

/* Fills `err` (message printf-formatted into the arena) and returns false,
 * so a plugin writes `return wr_fail(...)`. */
bool wr_fail(wr_arena *arena, wr_error *err, wr_error_kind kind, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Permanent InvalidSpec "<field>: <problem>"; returns false. */
bool wr_invalid_spec(wr_arena *arena, wr_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Permanent "out of memory" error; returns false. */
bool wr_oom(wr_error *err);

/* ---- objects ------------------------------------------------------------- */

/* {apiVersion, kind, metadata: {name, namespace?}} */
wr_json *wr_object(wr_arena *arena, const char *api_version, const char *kind, const char *namespace_,
                   const char *name);
/* Sets metadata.labels[key] / metadata.annotations[key], creating maps as needed. */
bool wr_label(wr_arena *arena, wr_json *object, const char *key, const char *value);
bool wr_annotate(wr_arena *arena, wr_json *object, const char *key, const char *value);
const char *wr_name_of(const wr_json *object);
const char *wr_namespace_of(const wr_json *object);
const char *wr_kind_of(const wr_json *object);
const char *wr_annotation_of(const wr_json *object, const char *key);
/* The object of `kind` named `name` in the array `objects`, or NULL. */
wr_json *wr_find(const wr_json *objects, const char *kind, const char *name);

/* ---- names and hashes ---------------------------------------------------- */

#define WR_MAX_LABEL_LEN 63
/* SHA-256 of `len` bytes into `out` (32 bytes). */
void wr_sha256(const void *data, size_t len, unsigned char out[32]);
/* Lowercase hex SHA-256 (64 chars, arena string). */
char *wr_content_hash(wr_arena *arena, const void *data, size_t len);
/* Same names as the Rust SDK's child_name: "web"+"config" -> "web-config";
 * invalid or too long names are cut and get a hash suffix. */
char *wr_child_name(wr_arena *arena, const char *parent, const char *suffix);
bool wr_is_dns1123_label(const char *name);

/* ---- Rust-compatible helpers (same answers as the Rust SDK) --------------- */

/* `s.trim().is_empty()` in Rust: only Unicode White_Space characters. */
bool wr_is_blank(const char *s, size_t len);
/* `format!("{:?}", s)` in Rust, for messages that name a map key. */
char *wr_debug_quote(wr_arena *arena, const char *s, size_t len);

/* ---- logging ------------------------------------------------------------- */

typedef enum { WR_LOG_TRACE, WR_LOG_DEBUG, WR_LOG_INFO, WR_LOG_WARN, WR_LOG_ERROR } wr_log_level;
/* Writes a line to the host log (in the component; stderr in native tests). */
void wr_log(wr_log_level level, const char *message);

#ifdef __cplusplus
}
#endif
#endif
