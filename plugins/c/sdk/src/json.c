/* JSON parser (RFC 8259), writer and DOM helpers; see wr_json.h. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "wr_json.h"

#define WR_MAX_DEPTH 512

/* ---- constructors ---------------------------------------------------------- */

static wr_json *new_value(wr_arena *a, wr_json_kind kind) {
    wr_json *v = wr_alloc(a, sizeof(wr_json));
    if (v) v->kind = kind;
    return v;
}

wr_json *wr_json_null(wr_arena *a) { return new_value(a, WR_JSON_NULL); }

wr_json *wr_json_bool(wr_arena *a, bool value) {
    wr_json *v = new_value(a, WR_JSON_BOOL);
    if (v) v->boolean = value;
    return v;
}

wr_json *wr_json_int(wr_arena *a, int64_t value) {
    wr_json *v = new_value(a, WR_JSON_NUMBER);
    if (!v) return NULL;
    v->str = wr_sprintf(a, "%lld", (long long)value);
    if (!v->str) return NULL;
    v->len = strlen(v->str);
    return v;
}

wr_json *wr_json_stringn(wr_arena *a, const char *s, size_t len) {
    wr_json *v = new_value(a, WR_JSON_STRING);
    if (!v) return NULL;
    v->str = wr_strndup(a, s, len);
    v->len = len;
    return v->str ? v : NULL;
}

wr_json *wr_json_string(wr_arena *a, const char *s) {
    return s ? wr_json_stringn(a, s, strlen(s)) : NULL;
}

wr_json *wr_json_array(wr_arena *a) { return new_value(a, WR_JSON_ARRAY); }
wr_json *wr_json_object(wr_arena *a) { return new_value(a, WR_JSON_OBJECT); }

static bool grow(wr_arena *a, wr_json *c) {
    if (c->count < c->cap) return true;
    size_t cap = c->cap ? c->cap * 2 : 4;
    wr_json **items = wr_alloc(a, cap * sizeof(*items));
    if (!items) return false;
    if (c->count) memcpy(items, c->items, c->count * sizeof(*items));
    c->items = items;
    if (c->kind == WR_JSON_OBJECT) {
        char **keys = wr_alloc(a, cap * sizeof(*keys));
        size_t *lens = wr_alloc(a, cap * sizeof(*lens));
        if (!keys || !lens) return false;
        if (c->count) {
            memcpy(keys, c->keys, c->count * sizeof(*keys));
            memcpy(lens, c->key_lens, c->count * sizeof(*lens));
        }
        c->keys = keys;
        c->key_lens = lens;
    }
    c->cap = cap;
    return true;
}

bool wr_json_push(wr_arena *a, wr_json *array, wr_json *item) {
    if (!array || array->kind != WR_JSON_ARRAY || !item || !grow(a, array)) return false;
    array->items[array->count++] = item;
    return true;
}

static long find_key(const wr_json *o, const char *key, size_t len) {
    for (size_t i = 0; i < o->count; i++) {
        if (o->key_lens[i] == len && memcmp(o->keys[i], key, len) == 0) return (long)i;
    }
    return -1;
}

bool wr_json_setn(wr_arena *a, wr_json *o, const char *key, size_t len, wr_json *value) {
    if (!o || o->kind != WR_JSON_OBJECT || !value) return false;
    long at = find_key(o, key, len);
    if (at >= 0) {
        /* Like serde_json's map: a repeated key keeps its first position. */
        o->items[at] = value;
        return true;
    }
    if (!grow(a, o)) return false;
    char *k = wr_strndup(a, key, len);
    if (!k) return false;
    o->keys[o->count] = k;
    o->key_lens[o->count] = len;
    o->items[o->count++] = value;
    return true;
}

bool wr_json_set(wr_arena *a, wr_json *o, const char *key, wr_json *value) {
    return key && wr_json_setn(a, o, key, strlen(key), value);
}

/* ---- queries --------------------------------------------------------------- */

wr_json *wr_json_get(const wr_json *o, const char *key) {
    if (!o || o->kind != WR_JSON_OBJECT || !key) return NULL;
    long at = find_key(o, key, strlen(key));
    return at >= 0 ? o->items[at] : NULL;
}

wr_json *wr_json_at(const wr_json *array, size_t index) {
    if (!array || array->kind != WR_JSON_ARRAY || index >= array->count) return NULL;
    return array->items[index];
}

const char *wr_json_str(const wr_json *v) {
    return v && v->kind == WR_JSON_STRING ? v->str : NULL;
}

bool wr_json_is(const wr_json *v, wr_json_kind kind) {
    return v && v->kind == kind;
}

bool wr_json_i64(const wr_json *v, int64_t *out) {
    if (!v || v->kind != WR_JSON_NUMBER) return false;
    const char *s = v->str;
    /* serde_json reads a number without '.', 'e' or 'E' as an integer. */
    if (strpbrk(s, ".eE")) return false;
    bool negative = *s == '-';
    if (negative) s++;
    uint64_t magnitude = 0;
    for (; *s; s++) {
        unsigned digit = (unsigned)(*s - '0');
        if (magnitude > (UINT64_MAX - digit) / 10) return false;
        magnitude = magnitude * 10 + digit;
    }
    if (negative) {
        if (magnitude > (uint64_t)INT64_MAX + 1) return false;
        *out = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
    } else {
        if (magnitude > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)magnitude;
    }
    return true;
}

wr_json *wr_json_clone(wr_arena *a, const wr_json *v) {
    if (!v) return NULL;
    wr_json *c = new_value(a, v->kind);
    if (!c) return NULL;
    c->boolean = v->boolean;
    if (v->str) {
        c->str = wr_strndup(a, v->str, v->len);
        c->len = v->len;
        if (!c->str) return NULL;
    }
    for (size_t i = 0; i < v->count; i++) {
        wr_json *item = wr_json_clone(a, v->items[i]);
        bool ok = v->kind == WR_JSON_ARRAY ? wr_json_push(a, c, item)
                                           : wr_json_setn(a, c, v->keys[i], v->key_lens[i], item);
        if (!ok) return NULL;
    }
    return c;
}

/* ---- parser ---------------------------------------------------------------- */

typedef struct {
    wr_arena *a;
    const char *p, *end, *start;
    const char *error;
    int depth;
} parser;

static wr_json *fail(parser *ps, const char *what) {
    if (!ps->error) {
        ps->error = wr_sprintf(ps->a, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
        if (!ps->error) ps->error = what;
    }
    return NULL;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
    ps->p += n;
    return true;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f)); return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Reads a string after its opening quote into arena memory. */
static bool parse_string(parser *ps, char **out, size_t *out_len) {
    /* Decoded text is never longer than the source text. */
    const char *q = ps->p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) { fail(ps, "unterminated string"); return false; }
    char *buf = wr_alloc(ps->a, (size_t)(q - ps->p) + 1);
    if (!buf) { fail(ps, "out of memory"); return false; }
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) { fail(ps, "control character in string"); return false; }
        if (c != '\\') { buf[n++] = (char)c; ps->p++; continue; }
        ps->p++;
        if (ps->p >= ps->end) break;
        char e = *ps->p++;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            if (ps->end - ps->p < 4) { fail(ps, "bad \\u escape"); return false; }
            int cp = hex4(ps->p);
            if (cp < 0) { fail(ps, "bad \\u escape"); return false; }
            ps->p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                int lo = (ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') ? hex4(ps->p + 2) : -1;
                if (lo < 0xdc00 || lo > 0xdfff) { fail(ps, "lone surrogate in string"); return false; }
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                fail(ps, "lone surrogate in string");
                return false;
            }
            /* A 6-byte escape decodes to at most 4 bytes: buf stays large enough. */
            n += put_utf8(buf + n, (unsigned)cp);
            break;
        }
        default: fail(ps, "bad escape in string"); return false;
        }
    }
    if (ps->p >= ps->end) { fail(ps, "unterminated string"); return false; }
    ps->p++; /* closing quote */
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return true;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static wr_json *parse_number(parser *ps) {
    const char *s = ps->p;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (ps->p >= ps->end || !is_digit(*ps->p)) return fail(ps, "bad number");
    if (*ps->p == '0') ps->p++;
    else while (ps->p < ps->end && is_digit(*ps->p)) ps->p++;
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (ps->p >= ps->end || !is_digit(*ps->p)) return fail(ps, "bad number");
        while (ps->p < ps->end && is_digit(*ps->p)) ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || !is_digit(*ps->p)) return fail(ps, "bad number");
        while (ps->p < ps->end && is_digit(*ps->p)) ps->p++;
    }
    wr_json *v = new_value(ps->a, WR_JSON_NUMBER);
    if (!v || !(v->str = wr_strndup(ps->a, s, (size_t)(ps->p - s)))) return fail(ps, "out of memory");
    v->len = (size_t)(ps->p - s);
    return v;
}

static wr_json *parse_value(parser *ps);

static wr_json *parse_container(parser *ps, bool object) {
    if (++ps->depth > WR_MAX_DEPTH) return fail(ps, "nesting too deep");
    wr_json *c = new_value(ps->a, object ? WR_JSON_OBJECT : WR_JSON_ARRAY);
    if (!c) return fail(ps, "out of memory");
    ps->p++; /* '{' or '[' */
    skip_ws(ps);
    char close = object ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return c;
    }
    for (;;) {
        skip_ws(ps);
        char *key = NULL;
        size_t key_len = 0;
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key");
            ps->p++;
            if (!parse_string(ps, &key, &key_len)) return NULL;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
            ps->p++;
        }
        wr_json *item = parse_value(ps);
        if (!item) return NULL;
        bool ok = object ? wr_json_setn(ps->a, c, key, key_len, item) : wr_json_push(ps->a, c, item);
        if (!ok) return fail(ps, "out of memory");
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; break; }
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    ps->depth--;
    return c;
}

static wr_json *parse_value(parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{': return parse_container(ps, true);
    case '[': return parse_container(ps, false);
    case '"': {
        ps->p++;
        wr_json *v = new_value(ps->a, WR_JSON_STRING);
        if (!v) return fail(ps, "out of memory");
        return parse_string(ps, &v->str, &v->len) ? v : NULL;
    }
    case 't': if (literal(ps, "true")) return wr_json_bool(ps->a, true); break;
    case 'f': if (literal(ps, "false")) return wr_json_bool(ps->a, false); break;
    case 'n': if (literal(ps, "null")) return wr_json_null(ps->a); break;
    default:
        if (*ps->p == '-' || is_digit(*ps->p)) return parse_number(ps);
    }
    return fail(ps, "unexpected character");
}

wr_json *wr_json_parse(wr_arena *a, const char *text, size_t len, const char **error) {
    parser ps = {.a = a, .p = text, .end = text + len, .start = text};
    wr_json *v = parse_value(&ps);
    if (v) {
        skip_ws(&ps);
        if (ps.p != ps.end) v = fail(&ps, "trailing characters");
    }
    if (!v && error) *error = ps.error ? ps.error : "invalid JSON";
    return v;
}

/* ---- writer ---------------------------------------------------------------- */

typedef struct {
    wr_arena *a;
    char *buf;
    size_t len, cap;
    bool oom;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (w->oom) return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (w->len + n + 1 > cap) cap *= 2;
        char *buf = wr_alloc(w->a, cap);
        if (!buf) { w->oom = true; return; }
        if (w->len) memcpy(buf, w->buf, w->len);
        w->buf = buf;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void put_string(writer *w, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    put(w, "\"", 1);
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0'; u[4] = hex[c >> 4]; u[5] = hex[c & 15]; u[6] = 0;
            esc = u;
        }
        if (!esc) { run++; continue; }
        put(w, s + i - run, run);
        run = 0;
        put(w, esc, strlen(esc));
    }
    put(w, s + n - run, run);
    put(w, "\"", 1);
}

static void write_value(writer *w, const wr_json *v) {
    switch (v->kind) {
    case WR_JSON_NULL: put(w, "null", 4); break;
    case WR_JSON_BOOL: v->boolean ? put(w, "true", 4) : put(w, "false", 5); break;
    case WR_JSON_NUMBER: put(w, v->str, v->len); break;
    case WR_JSON_STRING: put_string(w, v->str, v->len); break;
    case WR_JSON_ARRAY:
    case WR_JSON_OBJECT: {
        bool object = v->kind == WR_JSON_OBJECT;
        put(w, object ? "{" : "[", 1);
        for (size_t i = 0; i < v->count; i++) {
            if (i) put(w, ",", 1);
            if (object) {
                put_string(w, v->keys[i], v->key_lens[i]);
                put(w, ":", 1);
            }
            write_value(w, v->items[i]);
        }
        put(w, object ? "}" : "]", 1);
        break;
    }
    }
}

char *wr_json_write(wr_arena *a, const wr_json *value, size_t *out_len) {
    if (!value) return NULL;
    writer w = {.a = a};
    write_value(&w, value);
    if (w.oom) return NULL;
    if (out_len) *out_len = w.len;
    return w.buf;
}
