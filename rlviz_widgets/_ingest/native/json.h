/* What the readers of JSON lines share (arrays.c, messages.c): JSON blanks, the end of a string or of any value
 * (structure only), strict UTF-8 characters and a JSON string unescaped as yyjson, and so DuckDB, unescapes it. */
#ifndef RLVIZ_JSON_H
#define RLVIZ_JSON_H
#include <stdint.h>
#include <string.h>

#define WS(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')

/* Past the string starting at p (its opening quote); NULL if it does not end on this line. */
static inline const uint8_t *string_end(const uint8_t *p, const uint8_t *e) {
    p++;
    while (p < e) {
        const uint8_t *q = memchr(p, '"', (size_t)(e - p));
        if (!q) return NULL;
        /* the quote ends the string unless an odd number of backslashes precede it */
        const uint8_t *b = q;
        while (b > p && b[-1] == '\\') b--;
        if (((q - b) & 1) == 0) return q + 1;
        p = q + 1;
    }
    return NULL;
}

/* Past any JSON value at p: only the structure is followed (DuckDB checks the rest). */
static inline const uint8_t *value_end(const uint8_t *p, const uint8_t *e) {
    if (p >= e) return NULL;
    if (*p == '"') return string_end(p, e);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < e) {
            uint8_t c = *p;
            if (c == '"') {
                p = string_end(p, e);
                if (!p) return NULL;
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') {
                if (--depth == 0) return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && !WS(*p)) p++;
    return p;
}

/* The length of the UTF-8 character at p (strict: no overlong forms, surrogates or code points past U+10FFFF),
 * or 0 when the bytes are not one. */
static inline int utf8_char(const uint8_t *p, const uint8_t *e) {
    uint8_t c = p[0];
    int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || c > 0xF4 || e - p < n) return 0;
    uint8_t lo = 0x80, hi = 0xBF;  /* the range of the second byte */
    if (c == 0xE0) lo = 0xA0;
    else if (c == 0xED) hi = 0x9F;
    else if (c == 0xF0) lo = 0x90;
    else if (c == 0xF4) hi = 0x8F;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    return n;
}

/* Each byte's value as a hex digit, 0xFF for a byte that is none (the escapes of a text in a non-Latin script, one
 * every few bytes, were read a branch per digit). */
#define DIGITS(b) (b) + 0, (b) + 1, (b) + 2, (b) + 3, (b) + 4, (b) + 5, (b) + 6, (b) + 7, (b) + 8, (b) + 9
#define NO8 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF
#define NO64 NO8, NO8, NO8, NO8, NO8, NO8, NO8, NO8
static const uint8_t HEX[256] = {
    NO8, NO8, NO8, NO8, NO8, NO8,                       /* 0x00-0x2F */
    DIGITS(0), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,      /* '0'-'9', 0x3A-0x3F */
    0xFF, 10, 11, 12, 13, 14, 15, 0xFF, NO8, NO8, NO8,  /* 0x40: 'A'-'F', to 0x5F */
    0xFF, 10, 11, 12, 13, 14, 15, 0xFF, NO8, NO8, NO8,  /* 0x60: 'a'-'f', to 0x7F */
    NO64, NO64};                                        /* 0x80-0xFF */
#undef DIGITS
#undef NO8
#undef NO64

static inline int hex4(const uint8_t *p, const uint8_t *e, uint32_t *out) {
    if (e - p < 4) return 0;
    uint8_t a = HEX[p[0]], b = HEX[p[1]], c = HEX[p[2]], d = HEX[p[3]];
    if ((a | b | c | d) & 0xF0) return 0;
    *out = (uint32_t)a << 12 | (uint32_t)b << 8 | (uint32_t)c << 4 | d;
    return 1;
}

/* The escape at p (its backslash) unescaped to *oo, both moved past it (as yyjson unescapes it); 0 for what is
 * left to DuckDB: an escape it does not know, or of a lone surrogate. */
static inline int unescape(const uint8_t **pp, const uint8_t *e, uint8_t **oo) {
    const uint8_t *p = *pp;
    uint8_t *o = *oo;
    if (p + 1 >= e) return 0;
    uint8_t x = p[1];
    p += 2;
    switch (x) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (!hex4(p, e, &cp)) return 0;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return 0;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, e, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return 0;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) {
                *o++ = (uint8_t)cp;
            } else if (cp < 0x800) {
                *o++ = (uint8_t)(0xC0 | (cp >> 6));
                *o++ = (uint8_t)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (uint8_t)(0xE0 | (cp >> 12));
                *o++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (uint8_t)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (uint8_t)(0xF0 | (cp >> 18));
                *o++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                *o++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (uint8_t)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: return 0;
    }
    *pp = p;
    *oo = o;
    return 1;
}

/* The JSON string at p (its opening quote) unescaped into out (as yyjson, and so DuckDB, unescapes it); the end of
 * its text, or NULL for what this leaves to DuckDB: a control character, an escape it does not know or of a lone
 * surrogate, bytes that are not UTF-8. *len: the bytes written (never more than the string's JSON text). */
static inline const uint8_t *string_into(const uint8_t *p, const uint8_t *e, uint8_t *out, int64_t *len) {
    uint8_t *o = out;
    p++;
    while (p < e) {
        uint8_t c = *p;
        if (c == '"') {
            *len = o - out;
            return p + 1;
        }
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            *o++ = c;
            p++;
            continue;
        }
        if (c < 0x20) return NULL;
        if (c >= 0x80) {
            int n = utf8_char(p, e);
            if (!n) return NULL;
            memcpy(o, p, (size_t)n);
            o += n;
            p += n;
            continue;
        }
        if (!unescape(&p, e, &o)) return NULL;
    }
    return NULL;
}

/* The distinct top-level keys of a chunk (open addressing on FNV-1a), as arrays.c and messages.c find them: each
 * with the list it is (arrays.c: an index of its keys, -1: none), whether it is a text key, and the last line it
 * was seen in (a second time in a line: a key written twice, which DuckDB reads one way and reports; the line is
 * left to it). */
#define KEY_SLOTS 8192  /* past half of them taken, the chunk (arrays.c) or the line (messages.c) is left to DuckDB */
typedef struct {
    const uint8_t *p;
    int64_t line;
    int32_t len, list, text;
} KeySlot;

static inline uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++) h = (h ^ p[k]) * 1099511628211ULL;
    return h;
}

/* Whether the n bytes at p are one of the `count` names in names/offs: its index, or -1. */
static inline int32_t named(const uint8_t *p, size_t n, const uint8_t *names, const int64_t *offs, int32_t count) {
    for (int32_t k = 0; k < count; k++)
        if ((size_t)(offs[k + 1] - offs[k]) == n && memcmp(p, names + offs[k], n) == 0) return k;
    return -1;
}

/* The slot of the key ks (klen bytes, no escapes) in slots (KEY_SLOTS, zeroed at first), taken for it if it is
 * new (*taken counts them; its list -1, text whether it is one of the ntkeys text keys tkeys/tkey_offs); NULL when
 * it is new and half the table is taken, or it is too long. */
static inline KeySlot *key_slot(KeySlot *slots, const uint8_t *ks, size_t klen, int64_t *taken,
                                const uint8_t *tkeys, const int64_t *tkey_offs, int32_t ntkeys) {
    uint64_t h = fnv(ks, klen) & (KEY_SLOTS - 1);
    while (slots[h].p && !((size_t)slots[h].len == klen && memcmp(slots[h].p, ks, klen) == 0))
        h = (h + 1) & (KEY_SLOTS - 1);
    KeySlot *slot = &slots[h];
    if (!slot->p) {  /* a key first seen */
        if (*taken >= KEY_SLOTS / 2 || klen > INT32_MAX) return NULL;
        (*taken)++;
        slot->p = ks;
        slot->len = (int32_t)klen;
        slot->line = -1;
        slot->list = -1;
        slot->text = named(ks, klen, tkeys, tkey_offs, ntkeys) >= 0;
    }
    return slot;
}

/* Whether the value at p (a text key's) is no string or null: the checks look at its line. */
static inline int odd_text(const uint8_t *p, const uint8_t *e) {
    return p < e && *p != '"' && !(e - p >= 4 && memcmp(p, "null", 4) == 0);
}

#endif
