/* The WIT export and the `log` import, over the bindings that `wit-bindgen c`
 * generates at build time (reconciler.h). Linked only into the component;
 * native tests use log_native.c instead. */
#include <stdlib.h>
#include <string.h>

#include "reconciler.h"
#include "wr_export.h"

void wr_log(wr_log_level level, const char *message) {
    reconciler_string_t text;
    reconciler_string_set(&text, message); /* borrowed: no copy, no free */
    wasm_reconciler_plugin_host_log((wasm_reconciler_plugin_host_log_level_t)level, &text);
}

/* Copies `len` bytes into a malloc'd WIT string (the post-return hook frees it). */
static bool wit_string(reconciler_string_t *out, const char *s, size_t len) {
    out->len = len;
    out->ptr = len ? malloc(len) : NULL;
    if (len && !out->ptr) return false;
    if (len) memcpy(out->ptr, s, len);
    return true;
}

static bool wit_cstring(reconciler_string_t *out, const char *s) { return wit_string(out, s, strlen(s)); }

static bool to_wit_response(wr_arena *a, const wr_response *resp, reconciler_reconcile_response_t *ret) {
    memset(ret, 0, sizeof *ret);
    size_t n = resp->children ? resp->children->count : 0;
    ret->children.ptr = n ? calloc(n, sizeof(reconciler_string_t)) : NULL;
    if (n && !ret->children.ptr) return false;
    ret->children.len = n;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        char *text = wr_json_write(a, resp->children->items[i], &len);
        if (!text || !wit_string(&ret->children.ptr[i], text, len)) return false;
    }
    if (resp->n_conditions) {
        ret->conditions.ptr = calloc(resp->n_conditions, sizeof(*ret->conditions.ptr));
        if (!ret->conditions.ptr) return false;
        ret->conditions.len = resp->n_conditions;
        for (size_t i = 0; i < resp->n_conditions; i++) {
            const wr_condition *c = &resp->conditions[i];
            wasm_reconciler_plugin_types_condition_t *w = &ret->conditions.ptr[i];
            w->status = c->status == WR_TRUE    ? WASM_RECONCILER_PLUGIN_TYPES_CONDITION_STATUS_TRUE
                        : c->status == WR_FALSE ? WASM_RECONCILER_PLUGIN_TYPES_CONDITION_STATUS_FALSE
                                                : WASM_RECONCILER_PLUGIN_TYPES_CONDITION_STATUS_UNKNOWN;
            if (!wit_cstring(&w->type, c->type) || !wit_cstring(&w->reason, c->reason) ||
                !wit_cstring(&w->message, c->message))
                return false;
        }
    }
    if (resp->status) {
        size_t len = 0;
        char *text = wr_json_write(a, resp->status, &len);
        if (!text || !wit_string(&ret->status.val, text, len)) return false;
        ret->status.is_some = true;
    }
    ret->requeue_after_seconds.is_some = resp->has_requeue;
    ret->requeue_after_seconds.val = resp->requeue_after_seconds;
    if (resp->n_events) {
        ret->events.ptr = calloc(resp->n_events, sizeof(*ret->events.ptr));
        if (!ret->events.ptr) return false;
        ret->events.len = resp->n_events;
        for (size_t i = 0; i < resp->n_events; i++) {
            const wr_event *e = &resp->events[i];
            wasm_reconciler_plugin_types_event_t *w = &ret->events.ptr[i];
            w->type = e->type == WR_NORMAL ? WASM_RECONCILER_PLUGIN_TYPES_EVENT_TYPE_NORMAL
                                           : WASM_RECONCILER_PLUGIN_TYPES_EVENT_TYPE_WARNING;
            if (!wit_cstring(&w->reason, e->reason) || !wit_cstring(&w->message, e->message)) return false;
        }
    }
    ret->finalized = resp->finalized;
    return true;
}

static void to_wit_error(const wr_error *e, reconciler_reconcile_error_t *err) {
    wasm_reconciler_plugin_types_error_detail_t *d;
    if (e->kind == WR_PERMANENT) {
        err->tag = WASM_RECONCILER_PLUGIN_TYPES_RECONCILE_ERROR_PERMANENT;
        d = &err->val.permanent;
    } else {
        err->tag = WASM_RECONCILER_PLUGIN_TYPES_RECONCILE_ERROR_TRANSIENT;
        d = &err->val.transient;
    }
    /* Out of memory here leaves empty strings: still a valid error value. */
    if (!wit_cstring(&d->reason, e->reason ? e->reason : "PluginError")) d->reason.len = 0;
    if (!wit_cstring(&d->message, e->message ? e->message : "")) d->message.len = 0;
}

static bool run(wr_arena *a, reconciler_reconcile_request_t *request, reconciler_reconcile_response_t *ret,
                wr_error *error) {
    size_t nc = request->children.len, nr = request->related.len;
    const char **texts = wr_alloc(a, (nc + nr + 1) * sizeof(char *));
    size_t *lens = wr_alloc(a, (nc + nr + 1) * sizeof(size_t));
    char *now = wr_strndup(a, (const char *)request->now.ptr, request->now.len);
    if (!texts || !lens || !now) return wr_oom(error);
    for (size_t i = 0; i < nc; i++) {
        texts[i] = (const char *)request->children.ptr[i].ptr;
        lens[i] = request->children.ptr[i].len;
    }
    for (size_t i = 0; i < nr; i++) {
        texts[nc + i] = (const char *)request->related.ptr[i].ptr;
        lens[nc + i] = request->related.ptr[i].len;
    }
    wr_request req;
    if (!wr_request_parse(a, (const char *)request->parent.ptr, request->parent.len, texts, lens, nc, texts + nc,
                          lens + nc, nr, request->finalizing,
                          request->config.is_some ? (const char *)request->config.val.ptr : NULL,
                          request->config.val.len, now, &req, error))
        return false;
    wr_response resp;
    wr_response_init(&resp, a);
    if (!resp.children) return wr_oom(error);
    if (!wr_plugin_entry(&req, &resp, error)) return false;
    if (!to_wit_response(a, &resp, ret)) {
        reconciler_reconcile_response_free(ret);
        memset(ret, 0, sizeof *ret);
        return wr_oom(error);
    }
    return true;
}

bool exports_reconciler_reconcile(reconciler_reconcile_request_t *request, reconciler_reconcile_response_t *ret,
                                  reconciler_reconcile_error_t *err) {
    wr_arena *a = wr_arena_new();
    wr_error error = {0};
    bool ok = a ? run(a, request, ret, &error) : wr_oom(&error);
    if (!ok) to_wit_error(&error, err);
    wr_arena_free(a);
    reconciler_reconcile_request_free(request);
    return ok;
}
