/* The StaticSite spec and the controller config, validated with messages
 * that name the offending field (the same messages as plugins/static-site). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

static bool int_field(wr_arena *a, const wr_json *spec, const char *field, int64_t fallback, int64_t *out,
                      wr_error *err) {
    const wr_json *v = wr_json_get(spec, field);
    if (!v || v->kind == WR_JSON_NULL) {
        *out = fallback;
        return true;
    }
    if (!wr_json_i64(v, out)) {
        char *name = wr_sprintf(a, "spec.%s", field);
        return name ? wr_invalid_spec(a, err, name, "must be an integer") : wr_oom(err);
    }
    return true;
}

/* A valid ConfigMap key. */
static bool valid_key(const char *key, size_t len) {
    if (len == 0 || len > 253 || (len == 1 && key[0] == '.') || (len == 2 && key[0] == '.' && key[1] == '.'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return false;
    }
    return true;
}

static const wr_json *sort_source; /* qsort has no context argument */

static int by_key(const void *x, const void *y) {
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    size_t li = sort_source->key_lens[i], lj = sort_source->key_lens[j];
    int c = memcmp(sort_source->keys[i], sort_source->keys[j], li < lj ? li : lj);
    return c ? c : (li > lj) - (li < lj);
}

static bool content_field(wr_arena *a, const wr_json *spec, site_spec *site, wr_error *err) {
    const wr_json *map = wr_json_get(spec, "content");
    site->n_files = 0;
    if (!map || map->kind == WR_JSON_NULL) return true;
    if (map->kind != WR_JSON_OBJECT)
        return wr_invalid_spec(a, err, "spec.content", "must be a map of file name to contents");
    size_t total = 0;
    for (size_t i = 0; i < map->count; i++) {
        const char *name = map->keys[i];
        size_t len = map->key_lens[i];
        if (!valid_key(name, len) || map->items[i]->kind != WR_JSON_STRING) {
            char *quoted = wr_debug_quote(a, name, len);
            char *field = quoted ? wr_sprintf(a, "spec.content[%s]", quoted) : NULL;
            if (!field) return wr_oom(err);
            return valid_key(name, len)
                       ? wr_invalid_spec(a, err, field, "must be a string")
                       : wr_invalid_spec(a, err, field,
                                         "file name must be 1-253 characters of letters, digits, '-', '_' or '.'");
        }
        total += len + map->items[i]->len;
    }
    if (total > MAX_CONTENT_BYTES)
        return wr_invalid_spec(a, err, "spec.content", "%zu bytes is over the limit of %d", total, MAX_CONTENT_BYTES);
    size_t *order = wr_alloc(a, (map->count + 1) * sizeof(size_t));
    site->names = wr_alloc(a, (map->count + 1) * sizeof(char *));
    site->bodies = wr_alloc(a, (map->count + 1) * sizeof(wr_json *));
    if (!order || !site->names || !site->bodies) return wr_oom(err);
    for (size_t i = 0; i < map->count; i++) order[i] = i;
    sort_source = map;
    qsort(order, map->count, sizeof(size_t), by_key);
    for (size_t i = 0; i < map->count; i++) {
        site->names[i] = map->keys[order[i]];
        site->bodies[i] = map->items[order[i]];
    }
    site->n_files = map->count;
    return true;
}

bool parse_spec(wr_arena *a, const wr_json *parent, site_spec *site, wr_error *err) {
    const wr_json *spec = wr_json_get(parent, "spec");
    const wr_json *image = wr_json_get(spec, "image");
    if (!image || image->kind == WR_JSON_NULL || (image->kind == WR_JSON_STRING && wr_is_blank(image->str, image->len)))
        return wr_invalid_spec(a, err, "spec.image", "required");
    if (image->kind != WR_JSON_STRING) return wr_invalid_spec(a, err, "spec.image", "must be a string");
    site->image = image;
    if (!int_field(a, spec, "replicas", 1, &site->replicas, err)) return false;
    if (site->replicas < 0)
        return wr_invalid_spec(a, err, "spec.replicas", "must be >= 0, got %" PRId64, site->replicas);
    if (!int_field(a, spec, "port", 80, &site->port, err)) return false;
    if (site->port < 1 || site->port > 65535)
        return wr_invalid_spec(a, err, "spec.port", "must be between 1 and 65535, got %" PRId64, site->port);
    return content_field(a, spec, site, err);
}

char *site_content_hash(wr_arena *a, const site_spec *site) {
    size_t total = 0;
    for (size_t i = 0; i < site->n_files; i++) total += strlen(site->names[i]) + site->bodies[i]->len + 2;
    char *bytes = wr_alloc(a, total + 1);
    if (!bytes) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < site->n_files; i++) {
        size_t len = strlen(site->names[i]);
        memcpy(bytes + n, site->names[i], len);
        n += len;
        bytes[n++] = '\0';
        memcpy(bytes + n, site->bodies[i]->str, site->bodies[i]->len);
        n += site->bodies[i]->len;
        bytes[n++] = '\0';
    }
    return wr_content_hash(a, bytes, n);
}

/* serde_json's wording for an unexpected JSON value. */
static char *unexpected(wr_arena *a, const wr_json *v) {
    int64_t n;
    switch (v->kind) {
    case WR_JSON_NULL: return "null";
    case WR_JSON_BOOL: return v->boolean ? "boolean `true`" : "boolean `false`";
    case WR_JSON_NUMBER:
        if (wr_json_i64(v, &n)) return wr_sprintf(a, "integer `%" PRId64 "`", n);
        return wr_sprintf(a, strpbrk(v->str, ".eE") ? "floating point `%s`" : "integer `%s`", v->str);
    case WR_JSON_STRING: {
        char *q = wr_debug_quote(a, v->str, v->len);
        return q ? wr_sprintf(a, "string %s", q) : NULL;
    }
    case WR_JSON_ARRAY: return "sequence";
    case WR_JSON_OBJECT: return "map";
    }
    return "value";
}

static bool invalid_config(wr_arena *a, wr_error *err, const char *problem) {
    if (!problem) return wr_oom(err);
    return wr_fail(a, err, WR_PERMANENT, "InvalidConfig", "config: %s", problem);
}

static bool domain_value(wr_arena *a, const wr_json *v, const char **domain, wr_error *err) {
    if (v->kind != WR_JSON_STRING)
        return invalid_config(a, err, wr_sprintf(a, "invalid type: %s, expected a string", unexpected(a, v)));
    *domain = v->str;
    return true;
}

bool parse_config(wr_arena *a, const wr_json *config, const char **domain, wr_error *err) {
    *domain = "cluster.local";
    if (!config) return true;
    if (config->kind == WR_JSON_ARRAY) {
        /* serde also accepts a struct as a sequence of its fields; a missing
         * field takes its default. */
        if (config->count == 0) return true;
        if (!domain_value(a, config->items[0], domain, err)) return false;
        if (config->count > 1)
            return invalid_config(
                a, err, wr_sprintf(a, "invalid length %zu, expected fewer elements in array", config->count));
        return true;
    }
    if (config->kind != WR_JSON_OBJECT)
        return invalid_config(a, err, wr_sprintf(a, "invalid type: %s, expected struct Config", unexpected(a, config)));
    for (size_t i = 0; i < config->count; i++) {
        if (strcmp(config->keys[i], "clusterDomain") != 0 || config->key_lens[i] != strlen("clusterDomain"))
            return invalid_config(
                a, err, wr_sprintf(a, "unknown field `%s`, expected `clusterDomain`", config->keys[i]));
        if (!domain_value(a, config->items[i], domain, err)) return false;
    }
    return true;
}
