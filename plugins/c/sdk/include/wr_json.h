/*
 * A small JSON DOM for plugins: parse, build, query, serialise.
 *
 * Hand-written because the plugin runs as a wasm32 component without any
 * C package manager: no JSON library is available for that target from the
 * registries we build from, and a plugin needs exactly this much. Numbers
 * keep their source text, so integers are classified exactly as Rust's
 * serde_json does (`2.0` is not an integer, 2^63 does not fit i64).
 *
 * All memory comes from a wr_arena and is released at once with
 * wr_arena_free; a plugin call allocates, answers, and frees the arena.
 */
#ifndef WR_JSON_H
#define WR_JSON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- arena --------------------------------------------------------------- */

typedef struct wr_arena wr_arena;

/* A new, empty arena; NULL when out of memory. */
wr_arena *wr_arena_new(void);
/* Frees the arena and everything allocated from it. NULL is fine. */
void wr_arena_free(wr_arena *arena);
/* `size` bytes, zeroed, aligned for any type; NULL when out of memory. */
void *wr_alloc(wr_arena *arena, size_t size);
/* A NUL-terminated copy of `len` bytes of `s` (which may contain NULs). */
char *wr_strndup(wr_arena *arena, const char *s, size_t len);
/* A NUL-terminated copy of `s`. */
char *wr_strdup(wr_arena *arena, const char *s);
/* printf into a new arena string (format.c: %s %.*s %c %d %i %u %x with
 * h/l/ll/z/j, and %%; no flags or widths). */
char *wr_sprintf(wr_arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *wr_vsprintf(wr_arena *arena, const char *fmt, va_list ap);

/* ---- values -------------------------------------------------------------- */

typedef enum {
    WR_JSON_NULL,
    WR_JSON_BOOL,
    WR_JSON_NUMBER,
    WR_JSON_STRING,
    WR_JSON_ARRAY,
    WR_JSON_OBJECT,
} wr_json_kind;

typedef struct wr_json wr_json;

struct wr_json {
    wr_json_kind kind;
    bool boolean;
    /* WR_JSON_STRING: UTF-8 bytes (NUL-terminated; `len` counts bytes and
     * covers embedded NULs). WR_JSON_NUMBER: the number's JSON text. */
    char *str;
    size_t len;
    /* WR_JSON_ARRAY / WR_JSON_OBJECT: `count` items; objects also have keys
     * (with byte lengths), in document order. */
    size_t count, cap;
    wr_json **items;
    char **keys;
    size_t *key_lens;
};

/* Parses `len` bytes of JSON text. On error returns NULL and, when `error`
 * is not NULL, sets it to an arena string describing the problem. */
wr_json *wr_json_parse(wr_arena *arena, const char *text, size_t len, const char **error);

/* Compact JSON text (NUL-terminated, arena memory); `out_len` may be NULL. */
char *wr_json_write(wr_arena *arena, const wr_json *value, size_t *out_len);

/* Constructors (NULL when out of memory). */
wr_json *wr_json_null(wr_arena *arena);
wr_json *wr_json_bool(wr_arena *arena, bool value);
wr_json *wr_json_int(wr_arena *arena, int64_t value);
wr_json *wr_json_string(wr_arena *arena, const char *s);
wr_json *wr_json_stringn(wr_arena *arena, const char *s, size_t len);
wr_json *wr_json_array(wr_arena *arena);
wr_json *wr_json_object(wr_arena *arena);

/* Appends to an array; false when out of memory or `array` is not an array. */
bool wr_json_push(wr_arena *arena, wr_json *array, wr_json *item);
/* Sets `key` in an object, replacing an existing value in its place. */
bool wr_json_set(wr_arena *arena, wr_json *object, const char *key, wr_json *value);
bool wr_json_setn(wr_arena *arena, wr_json *object, const char *key, size_t key_len, wr_json *value);

/* Queries; each accepts NULL and returns NULL/false for a missing or
 * mistyped value, so lookups chain: wr_json_get(wr_json_get(o, "metadata"), "name"). */
wr_json *wr_json_get(const wr_json *object, const char *key);
wr_json *wr_json_at(const wr_json *array, size_t index);
/* The string's bytes, or NULL when `value` is not a string. */
const char *wr_json_str(const wr_json *value);
/* True and *out set when `value` is a JSON integer that fits i64 (serde_json's `as_i64`). */
bool wr_json_i64(const wr_json *value, int64_t *out);
bool wr_json_is(const wr_json *value, wr_json_kind kind);

/* A deep copy into `arena`. */
wr_json *wr_json_clone(wr_arena *arena, const wr_json *value);

#ifdef __cplusplus
}
#endif
#endif
