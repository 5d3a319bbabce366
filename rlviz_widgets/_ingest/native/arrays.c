/* The number arrays and token strings of JSON lines, read without a JSON library.
 *
 * A rollout log is ~80% number arrays (logprobs, values, masks, token ids) and most of the rest token strings.
 * DuckDB's JSON reader spent most of a cold open on them. rlviz_arrays() reads a chunk's lines once: each top-level
 * key named in `keys` holds a list of its kind (float32 as DuckDB's json_transform to FLOAT[] makes it: the number
 * correctly rounded to a double, then to a float; float64; booleans; int64; or a list no column reads, only
 * checked), items may be null; the key `skey`'s list of strings goes to a list of strings (unescaped as DuckDB
 * does); and the line is copied with those lists written as [] for DuckDB to read the rest. Anything it does not
 * fully understand (NaN, a number among booleans or strings, a key written twice or with escapes, a float out of
 * float32's range, a long integer, a lone surrogate, bytes that are not UTF-8, a line that is no object) stops it:
 * it returns the line's index and the caller reads the chunk as before, so odd lines are reported exactly as they
 * always were.
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
int32_t rlviz_abi(void) { return 8; }

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

/* One JSON number at p (strict grammar) correctly rounded to a double; the end of its text, or NULL if it is none
 * or an integer of more than 15 digits (DuckDB reads those as int64 and casts after: exact only here up to 15). */
static const uint8_t *number_d(const uint8_t *p, const uint8_t *e, double *out) {
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
        /* an integer is an integer to DuckDB (int64 or uint64, then cast): only those of 15 digits at most here
         * (exact as a double: the float32 cast after rounds once, as DuckDB's does) */
        if (nd > 15) return NULL;
        *out = (neg && man) ? -(double)man : (double)man;
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
    *out = d;
    return p;
}

/* One JSON number at p as a float, the double rounded once more (as DuckDB's cast does it); NULL if none, or past
 * float32's range (DuckDB makes that null, and reports it). */
static inline const uint8_t *number(const uint8_t *p, const uint8_t *e, float *out) {
    double d;
    p = number_d(p, e, &d);
    if (!p) return NULL;
    float f = (float)d;
    if (f - f != 0.0f) return NULL;
    *out = f;
    return p;
}

/* One JSON integer at p that int64 holds (DuckDB's BIGINT); NULL for anything else (a fraction, an exponent, more
 * than 18 digits: DuckDB's to decide). */
static const uint8_t *integer(const uint8_t *p, const uint8_t *e, int64_t *out) {
    int neg = 0;
    if (p < e && *p == '-') { neg = 1; p++; }
    const uint8_t *f = p;
    uint64_t man = 0;
    if (p < e && *p == '0') {
        p++;
    } else {
        while (p < e && DIGIT(*p)) { man = man * 10 + (uint64_t)(*p - '0'); p++; }
    }
    if (p == f || p - f > 18) return NULL;
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E' || DIGIT(*p))) return NULL;
    *out = neg ? -(int64_t)man : (int64_t)man;
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

/* The kinds of list a key holds (native.KINDS): what its items are read as. A null item is a null value of any
 * kind (DuckDB's json_transform makes it so). DROP: a list no column reads, checked as numbers (booleans, nulls)
 * and written [] so DuckDB does not parse it. */
enum { F32 = 0, F64 = 1, BOOL8 = 2, I64 = 3, DROP = 4 };

/* The list at *pp (at its [) read as `kind` into vals at item index `at` (evalid: 1 per item, 0 for null): the
 * count of its items, or -1 if it is no list of that kind. *pp ends past its ]. */
static int64_t read_list(const uint8_t **pp, const uint8_t *e, int kind, void *vals, uint8_t *evalid,
                         int64_t at, int64_t *nulls) {
    const uint8_t *p = *pp;
    int64_t m = 0;
    if (p >= e || *p != '[') return -1;
    int more = first_item(&p, e);
    while (more == 1) {
        if (p >= e) return -1;
        int null = e - p >= 4 && memcmp(p, "null", 4) == 0;
        if (null) {
            p += 4;
            (*nulls)++;
            if (kind != DROP) {
                evalid[at + m] = 0;
                if (kind == F32) ((float *)vals)[at + m] = 0.0f;
                else if (kind == BOOL8) ((uint8_t *)vals)[at + m] = 0;
                else ((int64_t *)vals)[at + m] = 0;  /* F64 and I64 alike: 8 zero bytes */
            }
        } else if (kind == BOOL8 || (kind == DROP && (*p == 't' || *p == 'f'))) {
            int t = e - p >= 4 && memcmp(p, "true", 4) == 0, f = e - p >= 5 && memcmp(p, "false", 5) == 0;
            if (!t && !f) return -1;  /* a number among booleans: DuckDB's cast decides */
            p += t ? 4 : 5;
            if (kind == BOOL8) ((uint8_t *)vals)[at + m] = (uint8_t)t;
        } else if (kind == I64) {
            p = integer(p, e, (int64_t *)vals + at + m);
        } else if (kind == F32) {
            p = number(p, e, (float *)vals + at + m);
        } else {
            double scratch;
            p = number_d(p, e, kind == F64 ? (double *)vals + at + m : &scratch);
        }
        if (!p) return -1;
        if (kind != DROP) {
            if (!null) evalid[at + m] = 1;
            m++;
        }
        more = next_item(&p, e);
    }
    if (!more) return -1;
    *pp = p;
    return m;
}

/* Reads lines offs[i]..offs[i+1] of buf. For key k, a list of kinds[k]: vals[k] gets the items (4 or 8 bytes, or
 * 1 for booleans), evalid[k] 1 per item (0: null), nulls[k] the count of nulls, voffs[k] (n + 1 int32) each line's
 * list offsets, valid[k] (n bytes) 1 where the line has the key. The key skey (skey_len < 0: none) holds a list of
 * strings: sdata gets their bytes, soffs (int32) each string's offsets, slist (n + 1) each line's list offsets,
 * svalid as valid. text/toffs: the lines with those lists written as []. found_at/found_len (KEY_SLOTS / 2 each):
 * where in buf each distinct top-level key is spelled, *nfound of them; odd (n): the lines where a text key (tkeys)
 * holds a value that is no string or null, *nodd of them. Returns n, or the index of the first line it cannot read
 * this way (a key written twice in a line among those). */
static int64_t arrays_lines(const uint8_t *buf, const int64_t *offs, int64_t n,
                     const uint8_t *keys, const int64_t *key_offs, int32_t nkeys, const uint8_t *kinds,
                     void **vals, int32_t **voffs, uint8_t **valid, uint8_t **evalid, int64_t *nulls,
                     const uint8_t *skey, int64_t skey_len,
                     uint8_t *sdata, int32_t *soffs, int32_t *slist, uint8_t *svalid,
                     uint8_t *text, int64_t *toffs,
                     const uint8_t *tkeys, const int64_t *tkey_offs, int32_t ntkeys,
                     int64_t *found_at, int32_t *found_len, int64_t *nfound, int64_t *odd, int64_t *nodd,
                     KeySlot *slots) {
    int64_t used[64] = {0};
    int64_t sused = 0, nstr = 0;
    *nfound = 0;
    *nodd = 0;
    int64_t t = 0;
    toffs[0] = 0;
    for (int k = 0; k < nkeys; k++) {
        voffs[k][0] = 0;
        nulls[k] = 0;
    }
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
                if (memchr(ks, '\\', klen)) return i;  /* an escaped key may spell one of ours: not decided here */
                int64_t taken = *nfound;
                KeySlot *slot = key_slot(slots, ks, klen, &taken, tkeys, tkey_offs, ntkeys);
                if (!slot) return i;
                if (taken > *nfound) {  /* a key first seen */
                    slot->list = named(ks, klen, keys, key_offs, nkeys);
                    found_at[*nfound] = ks - buf;
                    found_len[(*nfound)++] = (int32_t)klen;
                }
                if (slot->line == i) return i;  /* twice in this line */
                slot->line = i;
                int key = slot->list;
                int strings = skey_len >= 0 && (size_t)skey_len == klen && memcmp(ks, skey, klen) == 0;
                p = ke;
                while (p < e && WS(*p)) p++;
                if (p >= e || *p != ':') return i;
                p++;
                while (p < e && WS(*p)) p++;
                if (slot->text && odd_text(p, e) && (*nodd == 0 || odd[*nodd - 1] != i))
                    odd[(*nodd)++] = i;  /* a text key holding no string: the checks look at this line */
                if (key >= 0 && kinds[key] == DROP && (p >= e || *p != '[')) {
                    if (valid[key][i]) return i;  /* twice */
                    valid[key][i] = 1;
                    voffs[key][i + 1] = (int32_t)used[key];
                    p = value_end(p, e);  /* no list: left to DuckDB (which reads no column from it) */
                    if (!p) return i;
                } else if (key >= 0) {
                    if (valid[key][i]) return i;  /* twice */
                    const uint8_t *open = p;
                    int64_t m = read_list(&p, e, kinds[key], vals[key], evalid[key], used[key], &nulls[key]);
                    if (m < 0 || used[key] + m > INT32_MAX) return i;
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

int64_t rlviz_arrays(const uint8_t *buf, const int64_t *offs, int64_t n,
                     const uint8_t *keys, const int64_t *key_offs, int32_t nkeys, const uint8_t *kinds,
                     void **vals, int32_t **voffs, uint8_t **valid, uint8_t **evalid, int64_t *nulls,
                     const uint8_t *skey, int64_t skey_len,
                     uint8_t *sdata, int32_t *soffs, int32_t *slist, uint8_t *svalid,
                     uint8_t *text, int64_t *toffs,
                     const uint8_t *tkeys, const int64_t *tkey_offs, int32_t ntkeys,
                     int64_t *found_at, int32_t *found_len, int64_t *nfound, int64_t *odd, int64_t *nodd) {
    if (nkeys > 64) return 0;
    KeySlot *slots = calloc(KEY_SLOTS, sizeof(KeySlot));
    if (!slots) return 0;
    int64_t r = arrays_lines(buf, offs, n, keys, key_offs, nkeys, kinds, vals, voffs, valid, evalid, nulls, skey,
                             skey_len, sdata, soffs, slist, svalid, text, toffs, tkeys, tkey_offs, ntkeys, found_at,
                             found_len, nfound, odd, nodd, slots);
    free(slots);
    return r;
}
