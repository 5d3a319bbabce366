/* The number arrays and token strings of JSON lines, read without a JSON library.
 *
 * A rollout log is ~80% float arrays (logprobs, values, ...) and most of the rest token strings. DuckDB's JSON
 * reader spent most of a cold open on them. rlviz_arrays() reads a chunk's lines once: each top-level key named in
 * `keys` whose value is a list of numbers goes to a float32 list (as DuckDB's json_transform to FLOAT[] makes it:
 * the number correctly rounded to a double, then to a float), the key `skey`'s list of strings to a list of
 * strings (unescaped as DuckDB does), and the line is copied with those lists written as [] for DuckDB to read the
 * rest. Anything it does not fully understand (NaN, null, a number among the strings, a key written twice or with
 * escapes, a float out of float32's range, a lone surrogate, bytes that are not UTF-8, a line that is no object)
 * stops it: it returns the line's index and the caller reads the chunk as before, so odd lines are reported
 * exactly as they always were.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Powers of ten as 128-bit mantissas (the Eisel-Lemire table), set once by rlviz_set_powers. */
#define POW_MIN (-348)
#define POW_MAX 347
static uint64_t POW_HI[POW_MAX - POW_MIN + 1], POW_LO[POW_MAX - POW_MIN + 1];

/* The interface's version: rlviz_widgets.native leaves a library of another alone (one built from older sources,
 * say, left in place by a checkout that changed them without a rebuild), as calls with other arguments would crash.
 * It counts the changes of every function of the library (messages.c's and find.c's too). */
int32_t rlviz_abi(void) { return 4; }

void rlviz_set_powers(const uint64_t *hi, const uint64_t *lo) {
    memcpy(POW_HI, hi, sizeof POW_HI);
    memcpy(POW_LO, lo, sizeof POW_LO);
}

static const double EXACT[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* man * 10^e10 correctly rounded to a double (Eisel-Lemire, as Go's strconv and fast_float do it); 0 when it
 * cannot decide (the caller falls back on strtod). man != 0. */
static int eisel_lemire(uint64_t man, int e10, int neg, double *out) {
    if (e10 < POW_MIN || e10 > POW_MAX) return 0;
    int clz = __builtin_clzll(man);
    man <<= clz;
    uint64_t ret_exp2 = (uint64_t)(((217706 * e10) >> 16) + 64 + 1023) - (uint64_t)clz;
    unsigned __int128 x = (unsigned __int128)man * POW_HI[e10 - POW_MIN];
    uint64_t x_hi = (uint64_t)(x >> 64), x_lo = (uint64_t)x;
    if ((x_hi & 0x1FF) == 0x1FF && x_lo + man < man) {
        unsigned __int128 y = (unsigned __int128)man * POW_LO[e10 - POW_MIN];
        uint64_t y_hi = (uint64_t)(y >> 64), y_lo = (uint64_t)y;
        uint64_t m_hi = x_hi, m_lo = x_lo + y_hi;
        if (m_lo < x_lo) m_hi++;
        if ((m_hi & 0x1FF) == 0x1FF && m_lo + 1 == 0 && y_lo + man < man) return 0;
        x_hi = m_hi;
        x_lo = m_lo;
    }
    uint64_t msb = x_hi >> 63;
    uint64_t mant = x_hi >> (msb + 9);
    ret_exp2 -= 1 ^ msb;
    if (x_lo == 0 && (x_hi & 0x1FF) == 0 && (mant & 3) == 1) return 0;
    mant += mant & 1;
    mant >>= 1;
    if (mant >> 53) {
        mant >>= 1;
        ret_exp2 += 1;
    }
    if (ret_exp2 - 1 >= 0x7FF - 1) return 0;
    uint64_t bits = ret_exp2 << 52 | (mant & 0x000FFFFFFFFFFFFFULL);
    if (neg) bits |= 0x8000000000000000ULL;
    memcpy(out, &bits, sizeof bits);
    return 1;
}

static inline uint64_t load8(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whether the 8 bytes are all ASCII digits, and their value (little-endian loads; fast_float's SWAR steps). */
static inline int eight_digits(uint64_t v) {
    return ((v & 0xF0F0F0F0F0F0F0F0ULL) | (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) ==
           0x3333333333333333ULL;
}

static inline uint64_t eight_value(uint64_t v) {
    const uint64_t mask = 0x000000FF000000FFULL, mul1 = 0x000F424000000064ULL, mul2 = 0x0000271000000001ULL;
    v -= 0x3030303030303030ULL;
    v = (v * 10) + (v >> 8);
    return (((v & mask) * mul1) + (((v >> 16) & mask) * mul2)) >> 32;
}

#define DIGIT(c) ((uint8_t)((c) - '0') <= 9)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR 1
#else
#define SWAR 0
#endif

/* One JSON number at p (strict grammar) as a float; the end of its text, or NULL if it is none or does not fit. */
static const uint8_t *number(const uint8_t *p, const uint8_t *e, float *out) {
    const uint8_t *s = p;
    int neg = 0;
    if (p < e && *p == '-') { neg = 1; p++; }
    if (p >= e) return NULL;
    uint64_t man = 0;
    int64_t nd = 0, exp10 = 0;  /* significant digits read into man (past 19 it overflowed: strtod decides) */
    int is_int = 1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        const uint8_t *f = p;
        while (p < e && DIGIT(*p)) { man = man * 10 + (uint64_t)(*p - '0'); p++; }
        nd = p - f;
    } else {
        return NULL;
    }
    if (p < e && *p == '.') {
        is_int = 0;
        p++;
        const uint8_t *f = p;
        if (nd == 0) while (p < e && *p == '0') p++;  /* leading zeros of 0.00x: not significant */
        const uint8_t *g = p;
        if (SWAR)
            while (e - p >= 8 && eight_digits(load8(p))) { man = man * 100000000 + eight_value(load8(p)); p += 8; }
        while (p < e && DIGIT(*p)) { man = man * 10 + (uint64_t)(*p - '0'); p++; }
        if (p == f) return NULL;
        nd += p - g;
        exp10 -= p - f;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        int eneg = 0;
        int64_t ev = 0;
        if (p < e && (*p == '+' || *p == '-')) { eneg = *p == '-'; p++; }
        const uint8_t *f = p;
        while (p < e && DIGIT(*p)) {
            if (ev < 100000) ev = ev * 10 + (*p - '0');
            p++;
        }
        if (p == f) return NULL;
        exp10 += eneg ? -ev : ev;
    }
    double d;
    if (is_int) {
        /* an integer is an integer to DuckDB (int64 or uint64, then cast): only those of 15 digits at most here */
        if (nd > 15) return NULL;
        *out = (neg && man) ? -(float)man : (float)man;
        return p;
    }
    if (nd <= 19 && man == 0) {
        d = 0.0;
    } else if (nd <= 19 && man <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        d = exp10 < 0 ? (double)man / EXACT[-exp10] : (double)man * EXACT[exp10];  /* exact operands: one rounding */
    } else if (nd > 19 || exp10 < -100000 || !eisel_lemire(man, (int)exp10, 0, &d)) {
        char tmp[64];
        size_t len = (size_t)(p - s);
        if (len >= sizeof tmp) {
            char *big = malloc(len + 1);
            if (!big) return NULL;
            memcpy(big, s, len);
            big[len] = 0;
            d = strtod(big, NULL);
            free(big);
        } else {
            memcpy(tmp, s, len);
            tmp[len] = 0;
            d = strtod(tmp, NULL);
        }
        neg = 0;  /* strtod read the sign */
    }
    if (neg) d = -d;
    float f = (float)d;
    if (f - f != 0.0f) return NULL;  /* past float32's range: DuckDB makes it null (and reports it) */
    *out = f;
    return p;
}

/* Past the [ at p and the blanks after it: 2 if the list is empty (*pp then past its ]), 1 if an item follows. */
static inline int first_item(const uint8_t **pp, const uint8_t *e) {
    const uint8_t *p = *pp + 1;
    while (p < e && WS(*p)) p++;
    if (p < e && *p == ']') {
        *pp = p + 1;
        return 2;
    }
    *pp = p;
    return 1;
}

/* After a list item: 1 past its comma (another item follows), 2 past the list's ], 0 if neither comes next. */
static inline int next_item(const uint8_t **pp, const uint8_t *e) {
    const uint8_t *p = *pp;
    while (p < e && WS(*p)) p++;
    if (p < e && *p == ',') {
        p++;
        while (p < e && WS(*p)) p++;
        *pp = p;
        return 1;
    }
    if (p < e && *p == ']') {
        *pp = p + 1;
        return 2;
    }
    return 0;
}

/* The line's text from copied up to the list at open, then [] for the list: the end of what is written. */
static inline uint8_t *blank_list(uint8_t *out, const uint8_t *copied, const uint8_t *open) {
    memcpy(out, copied, (size_t)(open - copied));
    out += open - copied;
    *out++ = '[';
    *out++ = ']';
    return out;
}

/* Reads lines offs[i]..offs[i+1] of buf. For key k: vals[k] gets the floats, voffs[k] (n + 1 int32) each line's
 * list offsets, valid[k] (n bytes) 1 where the line has the key. The key skey (skey_len < 0: none) holds a list of
 * strings: sdata gets their bytes, soffs (int32) each string's offsets, slist (n + 1) each line's list offsets,
 * svalid as valid. text/toffs: the lines with those lists written as []. Returns n, or the index of the first
 * line it cannot read this way. */
int64_t rlviz_arrays(const uint8_t *buf, const int64_t *offs, int64_t n,
                     const uint8_t *keys, const int64_t *key_offs, int32_t nkeys,
                     float **vals, int32_t **voffs, uint8_t **valid,
                     const uint8_t *skey, int64_t skey_len,
                     uint8_t *sdata, int32_t *soffs, int32_t *slist, uint8_t *svalid,
                     uint8_t *text, int64_t *toffs) {
    int64_t used[64] = {0};
    int64_t sused = 0, nstr = 0;
    if (nkeys > 64) return 0;
    int64_t t = 0;
    toffs[0] = 0;
    for (int k = 0; k < nkeys; k++) voffs[k][0] = 0;
    if (skey_len >= 0) {
        soffs[0] = 0;
        slist[0] = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = buf + offs[i], *e = buf + offs[i + 1], *copied = p;
        uint8_t *out = text + t;
        for (int k = 0; k < nkeys; k++) valid[k][i] = 0;
        if (skey_len >= 0) svalid[i] = 0;
        while (p < e && WS(*p)) p++;
        if (p >= e || *p != '{') return i;
        p++;
        while (p < e && WS(*p)) p++;
        if (p < e && *p == '}') {
            p++;
        } else {
            for (;;) {
                if (p >= e || *p != '"') return i;
                const uint8_t *ks = p + 1, *ke = string_end(p, e);
                if (!ke) return i;
                size_t klen = (size_t)(ke - 1 - ks);
                int key = -1;
                for (int k = 0; k < nkeys; k++) {
                    if ((size_t)(key_offs[k + 1] - key_offs[k]) == klen &&
                        memcmp(ks, keys + key_offs[k], klen) == 0) { key = k; break; }
                }
                int strings = skey_len >= 0 && (size_t)skey_len == klen && memcmp(ks, skey, klen) == 0;
                if (memchr(ks, '\\', klen)) return i;  /* an escaped key may spell one of ours: not decided here */
                p = ke;
                while (p < e && WS(*p)) p++;
                if (p >= e || *p != ':') return i;
                p++;
                while (p < e && WS(*p)) p++;
                if (key >= 0) {
                    if (valid[key][i] || p >= e || *p != '[') return i;  /* twice, or not a list */
                    const uint8_t *open = p;
                    float *v = vals[key] + used[key];
                    int64_t m = 0;
                    int more = first_item(&p, e);
                    while (more == 1) {
                        p = number(p, e, v + m);
                        if (!p) return i;
                        m++;
                        more = next_item(&p, e);
                    }
                    if (!more || used[key] + m > INT32_MAX) return i;
                    used[key] += m;
                    valid[key][i] = 1;
                    voffs[key][i + 1] = (int32_t)used[key];
                    out = blank_list(out, copied, open);
                    copied = p;
                } else if (strings) {
                    if (svalid[i] || p >= e || *p != '[') return i;  /* twice, or not a list */
                    const uint8_t *open = p;
                    int more = first_item(&p, e);
                    while (more == 1) {
                        int64_t len;
                        if (p >= e || *p != '"') return i;  /* a string each: null or a number is DuckDB's */
                        p = string_into(p, e, sdata + sused, &len);
                        if (!p) return i;
                        sused += len;
                        if (sused > INT32_MAX) return i;
                        soffs[++nstr] = (int32_t)sused;
                        more = next_item(&p, e);
                    }
                    if (!more || nstr > INT32_MAX) return i;
                    svalid[i] = 1;
                    slist[i + 1] = (int32_t)nstr;
                    out = blank_list(out, copied, open);
                    copied = p;
                } else {
                    p = value_end(p, e);
                    if (!p) return i;
                }
                while (p < e && WS(*p)) p++;
                if (p < e && *p == ',') {
                    p++;
                    while (p < e && WS(*p)) p++;
                    continue;
                }
                if (p < e && *p == '}') { p++; break; }
                return i;
            }
        }
        while (p < e && WS(*p)) p++;
        if (p != e) return i;  /* more after the object */
        memcpy(out, copied, (size_t)(e - copied));
        out += e - copied;
        t = out - text;
        toffs[i + 1] = t;
        for (int k = 0; k < nkeys; k++)
            if (!valid[k][i]) voffs[k][i + 1] = (int32_t)used[k];
        if (skey_len >= 0 && !svalid[i]) slist[i + 1] = (int32_t)nstr;
    }
    return n;
}
