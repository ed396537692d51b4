/* printf-style formatting into the arena, without libc's stdio.
 *
 * Hand-written because linking vsnprintf pulls wasi-libc's FILE machinery
 * into the component, which then imports WASI (fd_write, fd_seek, fd_close).
 * With this, a C plugin imports nothing but the host's `log`. Supports the
 * conversions plugins need: %s %.*s %c %d %i %u %x with h/l/ll/z/j length
 * modifiers (so PRId64 and %zu work on every target), and %%.
 * Flags and widths are not supported. */
#include <stdarg.h>
#include <string.h>

#include "wr_json.h"

typedef struct {
    char *buf; /* NULL while measuring */
    size_t len;
} out_t;

static void emit(out_t *o, const char *s, size_t n) {
    if (o->buf) memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void emit_unsigned(out_t *o, unsigned long long v, unsigned base, bool negative) {
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (negative) emit(o, "-", 1);
    while (n) emit(o, &digits[--n], 1);
}

static void format(out_t *o, const char *fmt, va_list ap) {
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            const char *q = strchr(p, '%');
            size_t n = q ? (size_t)(q - p) : strlen(p);
            emit(o, p, n);
            p += n - 1;
            continue;
        }
        p++;
        int precision = -1;
        if (p[0] == '.' && p[1] == '*') {
            precision = va_arg(ap, int);
            p += 2;
        }
        int longs = 0; /* 0 int, 1 long, 2 long long, 3 size_t, 4 intmax_t */
        while (*p == 'h') p++; /* promoted to int anyway */
        if (*p == 'l') { longs = 1; p++; if (*p == 'l') { longs = 2; p++; } }
        else if (*p == 'z') { longs = 3; p++; }
        else if (*p == 'j') { longs = 4; p++; }
        switch (*p) {
        case '%': emit(o, "%", 1); break;
        case 'c': { char c = (char)va_arg(ap, int); emit(o, &c, 1); break; }
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s) s = "(null)";
            size_t n = strlen(s);
            if (precision >= 0 && (size_t)precision < n) n = (size_t)precision;
            emit(o, s, n);
            break;
        }
        case 'd':
        case 'i': {
            long long v = longs == 0 ? va_arg(ap, int)
                        : longs == 1 ? va_arg(ap, long)
                        : longs == 2 ? va_arg(ap, long long)
                        : longs == 3 ? (long long)va_arg(ap, size_t)
                                     : (long long)va_arg(ap, intmax_t);
            unsigned long long mag = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            emit_unsigned(o, mag, 10, v < 0);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = longs == 0 ? va_arg(ap, unsigned)
                                 : longs == 1 ? va_arg(ap, unsigned long)
                                 : longs == 2 ? va_arg(ap, unsigned long long)
                                 : longs == 3 ? va_arg(ap, size_t)
                                              : (unsigned long long)va_arg(ap, uintmax_t);
            emit_unsigned(o, v, *p == 'x' ? 16 : 10, false);
            break;
        }
        default: /* unsupported: print it verbatim so the mistake is visible */
            emit(o, "%", 1);
            if (*p) emit(o, p, 1);
            else p--;
        }
    }
}

char *wr_vsprintf(wr_arena *arena, const char *fmt, va_list ap) {
    out_t measure = {0};
    va_list copy;
    va_copy(copy, ap);
    format(&measure, fmt, copy);
    va_end(copy);
    out_t o = {.buf = wr_alloc(arena, measure.len + 1)};
    if (!o.buf) return NULL;
    format(&o, fmt, ap);
    o.buf[o.len] = '\0';
    return o.buf;
}

char *wr_sprintf(wr_arena *arena, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = wr_vsprintf(arena, fmt, ap);
    va_end(ap);
    return s;
}
