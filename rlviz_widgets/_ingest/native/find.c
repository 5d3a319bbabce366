/* Where two bytes are in a block of bytes: the line reader's newlines and the key scan's colons (numpy's compares,
 * nonzero and concatenations over the same bytes took about a tenth of a cold open's CPU). SSE2 where the compiler
 * has it (every x86-64), a byte at a time elsewhere and for the tail. A change of the arguments changes rlviz_abi()
 * (arrays.c) and native.ABI too. */
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Whether the finder compares 16 bytes at a time here. Byte at a time it is ~4x slower than NumPy's search (57 against
 * 13 ms a 64 MB block on x86-64 built without SSE2), which rlviz_widgets.native then uses instead. */
int32_t rlviz_find_vector(void) {
#if defined(__SSE2__)
    return 1;
#else
    return 0;
#endif
}

/* The positions of byte a in buf[0:n] go to out_a, those of b to out_b (unless out_b is NULL); each has room for n.
 * Returns how many a's; *nb gets how many b's. */
int64_t rlviz_find(const uint8_t *buf, int64_t n, uint8_t a, uint8_t b, int64_t *out_a, int64_t *out_b,
                   int64_t *nb) {
    int64_t ka = 0, kb = 0, i = 0;
#if defined(__SSE2__)
    const __m128i va = _mm_set1_epi8((char)a), vb = _mm_set1_epi8((char)b);
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(buf + i));
        unsigned ma = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, va));
        while (ma) {
            out_a[ka++] = i + __builtin_ctz(ma);
            ma &= ma - 1;
        }
        if (out_b) {
            unsigned mb = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vb));
            while (mb) {
                out_b[kb++] = i + __builtin_ctz(mb);
                mb &= mb - 1;
            }
        }
    }
#endif
    for (; i < n; i++) {
        if (buf[i] == a) out_a[ka++] = i;
        if (out_b && buf[i] == b) out_b[kb++] = i;
    }
    *nb = kb;
    return ka;
}

/* How often the needle (its first byte occurring in it once only: matches cannot overlap) is in each of n texts,
 * text i being data[offs[i]:offs[i + 1]]: to counts[i]. The pad tokens of a chunk's responses (numpy's search of
 * the first byte, then a compare at each, took ~5% of a conversation log's cold open). */
void rlviz_count(const uint8_t *data, const int64_t *offs, int64_t n, const uint8_t *needle, int64_t len,
                 int64_t *counts) {
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = data + offs[i], *e = data + offs[i + 1];
        int64_t k = 0;
        while (len > 0 && e - p >= len) {
            const uint8_t *q = memchr(p, needle[0], (size_t)(e - p - len + 1));
            if (!q) break;
            if (memcmp(q, needle, (size_t)len) == 0) {
                k++;
                p = q + len;
            } else {
                p = q + 1;
            }
        }
        counts[i] = k;
    }
}
