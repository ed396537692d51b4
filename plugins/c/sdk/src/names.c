/* Child names and the Rust-compatible string helpers; see wr_plugin.h. */
#include <string.h>

#include "wr_plugin.h"

#define HASH_LEN 10

/* Decodes the UTF-8 code point at s[*i] and advances *i (input is valid UTF-8). */
static unsigned next_cp(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[*i];
    size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (*i + n > len) n = len - *i;
    unsigned cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < n; k++) cp = (cp << 6) | (u[*i + k] & 0x3f);
    *i += n;
    return cp;
}

char *wr_child_name(wr_arena *a, const char *parent, const char *suffix) {
    if (!parent || !suffix) return NULL;
    char *raw = *suffix ? wr_sprintf(a, "%s-%s", parent, suffix) : wr_strdup(a, parent);
    if (!raw) return NULL;
    size_t raw_len = strlen(raw);
    /* One output character per code point, like Rust's `chars()`. */
    char *clean = wr_alloc(a, raw_len + 1);
    if (!clean) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < raw_len;) {
        unsigned cp = next_cp(raw, raw_len, &i);
        if (cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
        clean[n++] = ((cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9')) ? (char)cp : '-';
    }
    size_t start = 0;
    while (start < n && clean[start] == '-') start++;
    while (n > start && clean[n - 1] == '-') n--;
    clean += start;
    n -= start;
    clean[n] = '\0';
    if (n > 0 && n <= WR_MAX_LABEL_LEN && n == raw_len && memcmp(clean, raw, n) == 0) return clean;
    char *keyed = wr_sprintf(a, "%s/%s", parent, suffix);
    char *hash = keyed ? wr_content_hash(a, keyed, strlen(keyed)) : NULL;
    if (!hash) return NULL;
    hash[HASH_LEN] = '\0';
    size_t keep = WR_MAX_LABEL_LEN - HASH_LEN - 1;
    size_t plen = n < keep ? n : keep;
    while (plen > 0 && clean[plen - 1] == '-') plen--;
    if (plen == 0) return hash;
    return wr_sprintf(a, "%.*s-%s", (int)plen, clean, hash);
}

bool wr_is_dns1123_label(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > WR_MAX_LABEL_LEN || name[0] == '-' || name[n - 1] == '-') return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    return true;
}

/* Unicode White_Space, which is what Rust's `char::is_whitespace` tests. */
static bool is_white_space(unsigned cp) {
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
           cp == 0x3000;
}

bool wr_is_blank(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        if (!is_white_space(next_cp(s, len, &i))) return false;
    }
    return true;
}

char *wr_debug_quote(wr_arena *a, const char *s, size_t len) {
    /* Worst case: every byte becomes `\u{xx}` (6 bytes) + quotes. */
    char *out = wr_alloc(a, len * 6 + 3);
    if (!out) return NULL;
    size_t n = 0;
    out[n++] = '"';
    for (size_t i = 0; i < len;) {
        size_t at = i;
        unsigned cp = next_cp(s, len, &i);
        const char *esc = NULL;
        switch (cp) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case 0: esc = "\\0"; break;
        }
        if (esc) {
            memcpy(out + n, esc, strlen(esc));
            n += strlen(esc);
        } else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
            static const char hex[] = "0123456789abcdef";
            memcpy(out + n, "\\u{", 3);
            n += 3;
            if (cp >= 0x10) out[n++] = hex[cp >> 4];
            out[n++] = hex[cp & 15];
            out[n++] = '}';
        } else {
            memcpy(out + n, s + at, i - at);
            n += i - at;
        }
    }
    out[n++] = '"';
    out[n] = '\0';
    return out;
}
