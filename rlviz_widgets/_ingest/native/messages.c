/* The texts and turns of chat JSON lines (format="chat": a "messages" list in the OpenAI chat format), read
 * without a JSON library.
 *
 * Reading each line's messages in Python (json.loads, the texts built, the turns handed to Arrow) was most of the
 * cold open of a conversation log. rlviz_messages() makes what rlviz_widgets._ingest.readers.chat makes of a
 * line's messages, byte for byte: the prompt, response and answer texts, and the stored turn rows (each turn's text
 * as its span of the prompt or response, as turns.stored_rows has it: the content itself is kept only until the
 * line's texts are written). It reads only lines it fully understands and that give no report: messages that are
 * objects with a known role, content as text, null or text parts, tool calls {id, type, function: {name,
 * arguments: JSON text}}, tool_call_id, name, reasoning_content / thinking; keys without escapes, none written
 * twice; nothing nested deeper than MAX_DEPTH. Of those lines it also gives what the byte scan of keys would find
 * (their top-level keys, the lines where a text key holds no string), so they are not scanned.
 * Any other line (a report to make, a shape it does not know, bytes that are not UTF-8, ...) is left to Python as
 * it was: handled[i] = 0 and its text copied as it is. A handled line's text is copied with its messages written
 * as [] for DuckDB to read the rest (it checks the rest; the messages' own JSON is checked here, strictly, so a
 * line DuckDB would refuse is never read here).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "json.h"

#define MAX_DEPTH 64   /* nesting read here at most: deeper is Python's (as it was) */
#define MAX_KEYS 64    /* top-level keys of a line read here at most */
#define MAX_DIGITS 300 /* digits of a number skipped here at most (DuckDB's double; Python's int limit) */

/* The text columns: per line (PROMPT, RESPONSE) and per turn row (ROLE..REASONING). The answer is a span of the
 * response (answer_start, answer_end): chat.conversation's answer is the last assistant turn as the response shows
 * it, but its reasoning, which comes first. */
enum { PROMPT, RESPONSE, ROLE, TEXT, TOOL_NAME, TOOL_ARGS, TOOL_CALL_ID, REASONING, NTEXT };

typedef struct {
    uint8_t *data;
    int32_t *offs; /* rows + 1 */
    uint8_t *valid;
    int64_t len;
} col_t;

typedef struct {
    col_t c[NTEXT];
    int64_t cap;      /* bytes of each column's data */
    int64_t rows;     /* turn rows written */
    int64_t cap_rows; /* room for turn rows */
    int32_t *turn;
    uint8_t *trained;
    int32_t *span_start, *span_end; /* by turn row: where its text stands in the prompt or response (UTF-8 bytes) */
    int32_t *answer_start, *answer_end; /* by line: where the answer stands in the response (-1: no answer) */
    uint8_t *span;                  /* by turn row: SPAN (the first row of a turn has one), IN_PROMPT */
    int overflow;     /* out of room: the whole call fails (the caller's bounds say it cannot happen) */
} out_t;

enum { BAIL = 0, OK = 1 };
enum { SPAN = 1, IN_PROMPT = 2 };

static const char *const KNOWN[] = {"system", "developer", "user", "assistant", "tool", "function", "environment"};

/* -- output ---------------------------------------------------------------------------------------------------- */
static inline int room(out_t *o, int k, int64_t n) {
    if (n < 0 || o->c[k].len + n > o->cap) {
        o->overflow = 1;
        return 0;
    }
    return 1;
}

static inline int put(out_t *o, int k, const void *s, int64_t n) {
    if (!room(o, k, n)) return 0;
    memcpy(o->c[k].data + o->c[k].len, s, (size_t)n);
    o->c[k].len += n;
    return 1;
}

static inline void close_row(out_t *o, int k, int64_t row, int valid) {
    o->c[k].offs[row + 1] = (int32_t)o->c[k].len;
    o->c[k].valid[row] = (uint8_t)valid;
}

/* Row `row` of column k as a copy of row `from` of column `src` (a column's earlier row, or another's). */
static inline int copy_row(out_t *o, int k, int64_t row, int src, int64_t from) {
    col_t *s = &o->c[src];
    if (!s->valid[from]) {
        close_row(o, k, row, 0);
        return 1;
    }
    int32_t a = s->offs[from], b = s->offs[from + 1];
    if (!room(o, k, b - a)) return 0;
    memmove(o->c[k].data + o->c[k].len, s->data + a, (size_t)(b - a));
    o->c[k].len += b - a;
    close_row(o, k, row, 1);
    return 1;
}

/* -- JSON ------------------------------------------------------------------------------------------------------ */
static inline const uint8_t *blanks(const uint8_t *p, const uint8_t *e) {
    while (p < e && WS(*p)) p++;
    return p;
}

/* The string at p (its opening quote) unescaped to out (NULL: only checked); the end of its text, or NULL for what
 * is left to Python: a control character, an unknown escape, a lone surrogate, \u0000, bytes that are not UTF-8.
 * Writes at most e - p bytes (the 16 at a time included). */
static const uint8_t *string_copy(const uint8_t *p, const uint8_t *e, uint8_t *out, int64_t *len) {
    uint8_t scratch[8];
    uint8_t *o = out;
    p++;
    for (;;) {
#if defined(__SSE2__)
        /* runs of plain ASCII 16 bytes at a time: a quote, backslash, control or non-ASCII byte stops it (bytes of
         * 0x80 and up are negative to the signed compare) */
        const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
        while (e - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)p);
            int m = _mm_movemask_epi8(
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)), _mm_cmplt_epi8(x, sp)));
            if (m) {
                int k = __builtin_ctz((unsigned)m);
                if (out) _mm_storeu_si128((__m128i *)o, x); /* the k before the stop are kept (room: see above) */
                o += k;
                p += k;
                break;
            }
            if (out) _mm_storeu_si128((__m128i *)o, x);
            o += 16;
            p += 16;
        }
#endif
        if (p >= e) return NULL;
        uint8_t c = *p;
        if (c == '"') {
            *len = o - out;
            return p + 1;
        }
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            if (out) *o = c;
            o++;
            p++;
        } else if (c < 0x20) {
            return NULL;
        } else if (c >= 0x80) {
            int n = utf8_char(p, e);
            if (!n) return NULL;
            if (out) memcpy(o, p, (size_t)n);
            o += n;
            p += n;
        } else {
            uint8_t *w = out ? o : scratch, *w0 = w;
            if (!unescape(&p, e, &w)) return NULL;
            if (w - w0 == 1 && *w0 == 0) return NULL; /* \u0000: Python's */
            o += w - w0;
        }
    }
}

/* Past a number at p (strict grammar, no exponent, MAX_DIGITS digits at most), or NULL. */
static const uint8_t *number_end(const uint8_t *p, const uint8_t *e) {
    const uint8_t *s;
    int64_t digits = 0;
    if (p < e && *p == '-') p++;
    if (p >= e) return NULL;
    if (*p == '0') {
        p++;
        digits = 1;
    } else if (*p >= '1' && *p <= '9') {
        s = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        digits = p - s;
    } else {
        return NULL;
    }
    if (p < e && *p == '.') {
        s = ++p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == s) return NULL;
        digits += p - s;
    }
    if (digits > MAX_DIGITS || (p < e && (*p == 'e' || *p == 'E' || *p == '.'))) return NULL;
    return p;
}

static inline const uint8_t *literal_end(const uint8_t *p, const uint8_t *e, const char *word) {
    size_t n = strlen(word);
    return (size_t)(e - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

static const uint8_t *strict_value(const uint8_t *p, const uint8_t *e, int depth);

/* Past the list or object at p, every value in it checked strictly; NULL if it is not valid JSON (or too deep). */
static const uint8_t *strict_container(const uint8_t *p, const uint8_t *e, int depth) {
    uint8_t close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    int64_t len;
    if (depth >= MAX_DEPTH) return NULL;
    p = blanks(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
        if (object) {
            if (p >= e || *p != '"' || !(p = string_copy(p, e, NULL, &len))) return NULL;
            p = blanks(p, e);
            if (p >= e || *p != ':') return NULL;
            p = blanks(p + 1, e);
        }
        if (!(p = strict_value(p, e, depth + 1))) return NULL;
        p = blanks(p, e);
        if (p < e && *p == ',') {
            p = blanks(p + 1, e);
            continue;
        }
        return p < e && *p == close ? p + 1 : NULL;
    }
}

/* Past the value at p, checked strictly (valid JSON that DuckDB reads as Python does), or NULL. */
static const uint8_t *strict_value(const uint8_t *p, const uint8_t *e, int depth) {
    int64_t len;
    if (p >= e) return NULL;
    switch (*p) {
        case '"': return string_copy(p, e, NULL, &len);
        case '{':
        case '[': return strict_container(p, e, depth);
        case 't': return literal_end(p, e, "true");
        case 'f': return literal_end(p, e, "false");
        case 'n': return literal_end(p, e, "null");
        default: return number_end(p, e);
    }
}

/* Whether text[0:n] is JSON Python's json.loads reads (as its strict grammar, blanks around; NaN, huge integers and
 * deep nesting are not decided here: 0). Its strings are valid UTF-8 already (unescaped from the line). */
static int python_json(const uint8_t *p, int64_t n) {
    const uint8_t *e = p + n;
    p = blanks(p, e);
    p = strict_value(p, e, 0);
    return p && blanks(p, e) == e;
}

/* The key at p (its opening quote): *ks, *kn its bytes; past its colon and the blanks after, or NULL (an escape in
 * it, or no colon). */
static const uint8_t *key_at(const uint8_t *p, const uint8_t *e, const uint8_t **ks, int64_t *kn) {
    int64_t len;
    if (p >= e || *p != '"') return NULL;
    const uint8_t *end = string_copy(p, e, NULL, &len);
    if (!end || memchr(p + 1, '\\', (size_t)(end - p - 2))) return NULL;
    *ks = p + 1;
    *kn = end - p - 2;
    p = blanks(end, e);
    if (p >= e || *p != ':') return NULL;
    return blanks(p + 1, e);
}

static inline int is(const uint8_t *ks, int64_t kn, const char *name) {
    return (size_t)kn == strlen(name) && memcmp(ks, name, (size_t)kn) == 0;
}

/* After an object's value: 1 past a comma (a key follows), 2 past the closing brace, 0 neither. */
static inline int next_key(const uint8_t **pp, const uint8_t *e, uint8_t close) {
    const uint8_t *p = blanks(*pp, e);
    if (p < e && *p == ',') {
        *pp = blanks(p + 1, e);
        return 1;
    }
    if (p < e && *p == close) {
        *pp = p + 1;
        return 2;
    }
    return 0;
}

/* Past the { at p and its blanks: 2 if the object is empty (then past its }), 1 if a key follows. */
static inline int first_key(const uint8_t **pp, const uint8_t *e, uint8_t close) {
    const uint8_t *p = blanks(*pp + 1, e);
    if (p < e && *p == close) {
        *pp = p + 1;
        return 2;
    }
    *pp = p;
    return 1;
}

/* The string at p (or null: `nullable`) as row `row` of column k; "" written as null when `empty_null`. BAIL for
 * another value. *end: past it. */
static int text_value(out_t *o, int k, int64_t row, const uint8_t *p, const uint8_t *e, int nullable,
                      int empty_null, const uint8_t **end) {
    int64_t len;
    if (p < e && *p == 'n' && nullable) {
        if (!(*end = literal_end(p, e, "null"))) return BAIL;
        close_row(o, k, row, 0);
        return OK;
    }
    if (p >= e || *p != '"' || !room(o, k, e - p)) return BAIL;
    if (!(*end = string_copy(p, e, o->c[k].data + o->c[k].len, &len))) return BAIL;
    o->c[k].len += len;
    close_row(o, k, row, !(empty_null && len == 0));
    return OK;
}

/* The object at *pp (its {), every value checked strictly: *va, *vb where its keys a and b are (NULL: not there);
 * *pp past it. BAIL if it is no object, or a or b is written twice (Python reads the last). */
static int two_keys(const uint8_t **pp, const uint8_t *e, const char *a, const uint8_t **va, const char *b,
                    const uint8_t **vb, int depth) {
    const uint8_t *p = *pp, *ks;
    int64_t kn;
    *va = *vb = NULL;
    if (p >= e || *p != '{') return BAIL;
    int more = first_key(&p, e, '}');
    while (more == 1) {
        if (!(p = key_at(p, e, &ks, &kn))) return BAIL;
        const uint8_t **slot = is(ks, kn, a) ? va : is(ks, kn, b) ? vb : NULL;
        if (slot) {
            if (*slot) return BAIL;
            *slot = p;
        }
        if (!(p = strict_value(p, e, depth))) return BAIL;
        more = next_key(&p, e, '}');
    }
    if (!more) return BAIL;
    *pp = p;
    return OK;
}

/* -- messages -------------------------------------------------------------------------------------------------- */
/* Where a message's keys are (NULL: not there): read once all are known. */
typedef struct {
    const uint8_t *role, *calls, *call_id, *name, *reasoning, *thinking;
    int content; /* written (1), or null or not there (0) */
} message_t;

/* The content at p as text into row `row` of TEXT: a string, or a list of text parts joined by newlines (strings,
 * or {type: null | "text" | "input_text" | "output_text", text: string}). BAIL for anything else (images, other
 * values: Python reports or shows them). */
static int content_value(out_t *o, int64_t row, const uint8_t *p, const uint8_t *e, const uint8_t **end) {
    if (p >= e) return BAIL;
    if (*p != '[') return text_value(o, TEXT, row, p, e, 0, 0, end);
    int more = first_key(&p, e, ']'), n = 0;
    while (more == 1) {
        int64_t len;
        if (n++ && !put(o, TEXT, "\n", 1)) return BAIL;
        if (p < e && *p == '"') {
            if (!room(o, TEXT, e - p) || !(p = string_copy(p, e, o->c[TEXT].data + o->c[TEXT].len, &len)))
                return BAIL;
            o->c[TEXT].len += len;
        } else if (p < e && *p == '{') {
            const uint8_t *text, *type;
            if (!two_keys(&p, e, "text", &text, "type", &type, 3)) return BAIL;
            if (!text || *text != '"') return BAIL;
            if (type && !literal_end(type, e, "null") && !literal_end(type, e, "\"text\"") &&
                !literal_end(type, e, "\"input_text\"") && !literal_end(type, e, "\"output_text\""))
                return BAIL;
            if (!room(o, TEXT, e - text) || !string_copy(text, e, o->c[TEXT].data + o->c[TEXT].len, &len))
                return BAIL;
            o->c[TEXT].len += len;
        } else {
            return BAIL;
        }
        more = next_key(&p, e, ']');
    }
    if (!more) return BAIL;
    close_row(o, TEXT, row, 1);
    *end = p;
    return OK;
}

/* The message object at p: its keys found, its content written to row `row` of TEXT. */
static int message_keys(out_t *o, int64_t row, const uint8_t *p, const uint8_t *e, message_t *m,
                        const uint8_t **end) {
    const uint8_t *ks;
    int64_t kn;
    int seen_content = 0, more;
    memset(m, 0, sizeof *m);
    if (p >= e || *p != '{') return BAIL;
    more = first_key(&p, e, '}');
    while (more == 1) {
        if (!(p = key_at(p, e, &ks, &kn))) return BAIL;
        const uint8_t **slot = is(ks, kn, "role")                ? &m->role
                               : is(ks, kn, "tool_calls")        ? &m->calls
                               : is(ks, kn, "tool_call_id")      ? &m->call_id
                               : is(ks, kn, "name")              ? &m->name
                               : is(ks, kn, "reasoning_content") ? &m->reasoning
                               : is(ks, kn, "thinking")          ? &m->thinking
                                                                 : NULL;
        if (slot) {
            if (*slot) return BAIL;
            *slot = p;
        }
        if (is(ks, kn, "content")) {
            if (seen_content++) return BAIL;
            if (p < e && *p == 'n') {
                p = literal_end(p, e, "null");
            } else if (!content_value(o, row, p, e, &p)) {
                return BAIL;
            } else {
                m->content = 1;
            }
        } else if (is(ks, kn, "function_call")) {
            p = literal_end(p, e, "null"); /* a legacy call: Python's */
        } else {
            p = strict_value(p, e, 2);
        }
        if (!p) return BAIL;
        more = next_key(&p, e, '}');
    }
    if (!more) return BAIL;
    *end = p;
    return OK;
}

/* Row `row`'s ROLE from the message's role: a known one, else BAIL (Python reports it). */
static int role_value(out_t *o, int64_t row, const uint8_t *p, const uint8_t *e, int *assistant) {
    const uint8_t *end;
    int64_t start = o->c[ROLE].len;
    if (!p || *p != '"' || !text_value(o, ROLE, row, p, e, 0, 0, &end)) return BAIL;
    const uint8_t *r = o->c[ROLE].data + start;
    int64_t n = o->c[ROLE].len - start;
    for (size_t k = 0; k < sizeof KNOWN / sizeof *KNOWN; k++) {
        if (is(r, n, KNOWN[k])) {
            *assistant = k == 3;
            return OK;
        }
    }
    return BAIL;
}

/* One tool call at p as turn row `row`: TOOL_NAME (its name, "?" without one), TOOL_ARGS (its arguments: JSON text
 * Python reads; "" without), TOOL_CALL_ID. Only {function: {name, arguments}, id, ...}. */
static int call_row(out_t *o, int64_t row, const uint8_t *p, const uint8_t *e, const uint8_t **end) {
    const uint8_t *fn, *id, *name, *args, *q;
    if (!two_keys(&p, e, "function", &fn, "id", &id, 4) || !fn || *fn != '{') return BAIL;
    *end = p;
    if (!two_keys(&fn, e, "name", &name, "arguments", &args, 5)) return BAIL;
    int64_t start = o->c[TOOL_NAME].len;
    if (name && *name == '"') {
        if (!text_value(o, TOOL_NAME, row, name, e, 0, 0, &q)) return BAIL;
        if (o->c[TOOL_NAME].len == start && !put(o, TOOL_NAME, "?", 1)) return BAIL; /* "" reads "?" too */
        close_row(o, TOOL_NAME, row, 1);
    } else if (!name || literal_end(name, e, "null")) {
        if (!put(o, TOOL_NAME, "?", 1)) return BAIL;
        close_row(o, TOOL_NAME, row, 1);
    } else {
        return BAIL;
    }
    start = o->c[TOOL_ARGS].len;
    if (args && *args == '"') {
        if (!text_value(o, TOOL_ARGS, row, args, e, 0, 0, &q)) return BAIL;
        if (!python_json(o->c[TOOL_ARGS].data + start, o->c[TOOL_ARGS].len - start)) return BAIL;
    } else if (!args || literal_end(args, e, "null")) {
        close_row(o, TOOL_ARGS, row, 1); /* "" */
    } else {
        return BAIL; /* an object: Python writes it as JSON */
    }
    if (id && !text_value(o, TOOL_CALL_ID, row, id, e, 1, 0, &q)) return BAIL;
    if (!id) close_row(o, TOOL_CALL_ID, row, 0);
    return OK;
}

/* Turn rows of message k at p (one, or one per tool call); *calls gets how many calls it makes. */
static int message_rows(out_t *o, int32_t k, const uint8_t *p, const uint8_t *e, const uint8_t **end, int32_t *calls) {
    message_t m;
    const uint8_t *q;
    int64_t r0 = o->rows;
    int assistant = 0;
    if (r0 >= o->cap_rows) {
        o->overflow = 1;
        return BAIL;
    }
    if (!message_keys(o, r0, p, e, &m, end)) return BAIL;
    if (!m.content) close_row(o, TEXT, r0, 1); /* "" (null or none: reported below unless calls or reasoning) */
    if (!role_value(o, r0, m.role, e, &assistant)) return BAIL;
    const uint8_t *reasoning = m.reasoning ? m.reasoning : m.thinking;
    if (reasoning && !text_value(o, REASONING, r0, reasoning, e, 1, 1, &q)) return BAIL;
    if (!reasoning) close_row(o, REASONING, r0, 0);
    int64_t n = 0;
    if (m.calls && *m.calls == '[') {
        p = m.calls;
        int more = first_key(&p, e, ']');
        while (more == 1) {
            int64_t row = r0 + n;
            if (row >= o->cap_rows) {
                o->overflow = 1;
                return BAIL;
            }
            if (!call_row(o, row, p, e, &p)) return BAIL;
            if (n > 0) { /* the role on every row, the text and reasoning on the first only */
                if (!copy_row(o, ROLE, row, ROLE, r0)) return BAIL;
                close_row(o, TEXT, row, 0);
                close_row(o, REASONING, row, 0);
            }
            n++;
            more = next_key(&p, e, ']');
        }
        if (!more) return BAIL;
    } else if (m.calls && !literal_end(m.calls, e, "null")) {
        return BAIL; /* not a list: Python's */
    }
    if (n == 0) {
        if (!m.content && !o->c[REASONING].valid[r0]) return BAIL; /* no content: reported */
        if (m.name && !text_value(o, TOOL_NAME, r0, m.name, e, 1, 1, &q)) return BAIL;
        if (!m.name) close_row(o, TOOL_NAME, r0, 0);
        close_row(o, TOOL_ARGS, r0, 0);
        if (m.call_id && !text_value(o, TOOL_CALL_ID, r0, m.call_id, e, 1, 0, &q)) return BAIL;
        if (!m.call_id) close_row(o, TOOL_CALL_ID, r0, 0);
    } else if (m.name || m.call_id) {
        /* still checked as Python reads them (a name or id that is no text is Python's) */
        if (m.name && *m.name != '"' && !literal_end(m.name, e, "null")) return BAIL;
        if (m.call_id && *m.call_id != '"' && !literal_end(m.call_id, e, "null")) return BAIL;
    }
    int64_t rows = n ? n : 1;
    for (int64_t j = 0; j < rows; j++) {
        o->turn[r0 + j] = k;
        o->trained[r0 + j] = (uint8_t)assistant;
    }
    o->rows = r0 + rows;
    *calls = (int32_t)n;
    return OK;
}

/* -- texts ----------------------------------------------------------------------------------------------------- */
static inline int put_row(out_t *o, int k, int src, int64_t row) {
    col_t *s = &o->c[src];
    return put(o, k, s->data + s->offs[row], s->offs[row + 1] - s->offs[row]);
}

/* chat.shown: the turn of rows [f, f + m) as its text in column k: <think> reasoning </think>, the content, each
 * call as name(arguments), one a line. Row f's span is where its content stands there (`base`: where the line's
 * text starts; chat._joined's text_at: after the reasoning and its newline, though no content follows). */
static int shown(out_t *o, int k, int64_t f, int64_t m, int64_t base) {
    int lines = 0;
    if (o->c[REASONING].valid[f]) {
        if (!put(o, k, "<think>\n", 8) || !put_row(o, k, REASONING, f) || !put(o, k, "\n</think>", 9)) return 0;
        lines++;
    }
    int64_t at = o->c[k].len - base + lines, n = o->c[TEXT].offs[f + 1] - o->c[TEXT].offs[f];
    o->span_start[f] = (int32_t)at;
    o->span_end[f] = (int32_t)(at + n);
    o->span[f] = (uint8_t)(SPAN | (k == PROMPT ? IN_PROMPT : 0));
    for (int64_t r = f + 1; r < f + m; r++) o->span[r] = 0;
    if (o->c[TEXT].offs[f + 1] > o->c[TEXT].offs[f]) {
        if ((lines++ && !put(o, k, "\n", 1)) || !put_row(o, k, TEXT, f)) return 0;
    }
    if (!o->c[TOOL_ARGS].valid[f]) return 1;
    for (int64_t r = f; r < f + m; r++) {
        if ((lines++ && !put(o, k, "\n", 1)) || !put_row(o, k, TOOL_NAME, r) || !put(o, k, "(", 1) ||
            !put_row(o, k, TOOL_ARGS, r) || !put(o, k, ")", 1))
            return 0;
    }
    return 1;
}

static inline int is_assistant(out_t *o, int64_t row) { return o->trained[row]; }

/* chat.conversation: line i's prompt (the turns before the first assistant one), response (from it on) and answer
 * (the last assistant turn without its reasoning: the rest of its text in the response), from its turn rows
 * [r0, r1). */
static int texts(out_t *o, int64_t i, int64_t r0, int64_t r1) {
    int64_t first = r1, last = -1;
    for (int64_t r = r0; r < r1; r++) {
        if (is_assistant(o, r)) {
            if (first == r1) first = r;
            last = r;
        }
    }
    o->answer_start[i] = o->answer_end[i] = -1;
    static const char open[] = "\xe2\x94\x80\xe2\x94\x80 ", shut[] = " \xe2\x94\x80\xe2\x94\x80";
    for (int part = PROMPT; part <= RESPONSE; part++) {
        int64_t a = part == PROMPT ? r0 : first, b = part == PROMPT ? first : r1;
        const char *bare = part == PROMPT ? "user" : "assistant";
        if (a == b) {
            close_row(o, part, i, 0);
            continue;
        }
        for (int64_t r = a; r < b;) {
            int64_t m = 1;
            while (r + m < b && o->turn[r + m] == o->turn[r]) m++;
            if (r > a && !put(o, part, "\n", 1)) return 0;
            col_t *role = &o->c[ROLE];
            if (!(r == a && is(role->data + role->offs[r], role->offs[r + 1] - role->offs[r], bare))) {
                if (!put(o, part, open, 7) || !put_row(o, part, ROLE, r) || !put(o, part, shut, 7) ||
                    !put(o, part, "\n", 1))
                    return 0;
            }
            int64_t base = o->c[part].offs[i];
            if (!shown(o, part, r, m, base)) return 0;
            if (r + m - 1 == last) { /* its content on, or its calls' (where it has none, or just after its reasoning) */
                int64_t end = o->c[part].len - base;
                o->answer_end[i] = (int32_t)end;
                o->answer_start[i] = o->span_start[r] < end ? o->span_start[r] : (int32_t)end;
            }
            r += m;
        }
        close_row(o, part, i, 1);
    }
    return 1;
}

/* -- lines ----------------------------------------------------------------------------------------------------- */
/* The chunk's top-level keys (json.h's table: a slot's list is 1 once the key is reported) and what read_line saw
 * of line i's: its keys' slots, whether a text key holds no string or null. */
typedef struct {
    KeySlot *slots;
    int64_t taken, i;
    const uint8_t *tkeys;
    const int64_t *tkey_offs;
    int32_t ntkeys;
    KeySlot *line[MAX_KEYS];
    int nline, odd;
} keys_t;

/* Line [p, e)'s messages (under key) read as turn rows: OK with *ms, *me the messages' value; BAIL for a line left to
 * Python (its rows then taken back by the caller). */
static int read_line(out_t *o, const uint8_t *p, const uint8_t *e, const uint8_t *key, int64_t key_len,
                     const uint8_t **ms, const uint8_t **me, int32_t *n_turns, int32_t *n_calls, keys_t *k) {
    const uint8_t *ks;
    int64_t kn;
    *ms = NULL;
    k->nline = 0;
    k->odd = 0;
    p = blanks(p, e);
    if (p >= e || *p != '{') return BAIL;
    int more = first_key(&p, e, '}');
    while (more == 1) {
        if (p >= e || *p != '"') return BAIL;
        ks = p + 1;
        const uint8_t *ke = string_end(p, e);
        if (!ke) return BAIL;
        kn = ke - 1 - ks;
        if (memchr(ks, '\\', (size_t)kn) || k->nline == MAX_KEYS) return BAIL; /* may spell a key: DuckDB's */
        KeySlot *slot = key_slot(k->slots, ks, (size_t)kn, &k->taken, k->tkeys, k->tkey_offs, k->ntkeys);
        if (!slot || slot->line == k->i) return BAIL; /* (written twice: reported) */
        slot->line = k->i;
        k->line[k->nline++] = slot;
        p = blanks(ke, e);
        if (p >= e || *p != ':') return BAIL;
        p = blanks(p + 1, e);
        if (slot->text && odd_text(p, e)) k->odd = 1;
        if (kn == key_len && memcmp(ks, key, (size_t)kn) == 0) {
            if (p >= e || *p != '[') return BAIL;
            *ms = p;
            int32_t turns = 0, calls = 0, c;
            int item = first_key(&p, e, ']');
            while (item == 1) {
                if (!message_rows(o, turns, p, e, &p, &c)) return BAIL;
                turns++;
                calls += c;
                item = next_key(&p, e, ']');
            }
            if (!item) return BAIL;
            *me = p;
            *n_turns = turns;
            *n_calls = calls;
        } else if (!(p = value_end(p, e))) {
            return BAIL;
        }
        more = next_key(&p, e, '}');
    }
    if (!more || blanks(p, e) != e) return BAIL;
    return *ms ? OK : BAIL;
}

/* Whether pad[0:len] is at data[q:] (before end). */
static inline int pad_at(const uint8_t *data, int64_t q, int64_t end, const uint8_t *pad, int64_t len) {
    if (q + len > end) return 0;
    for (int64_t k = 1; k < len; k++)
        if (data[q + k] != pad[k]) return 0;
    return 1;
}

/* Line i's response's characters and how often `pad` is in it (as rlviz_count counts: left to right, none
 * overlapping; its first byte does not recur in it), -1 each without one: what the checks would take two more
 * passes over the responses for, in one pass while it is in cache. */
static void response_counts(out_t *o, int64_t i, const uint8_t *pad, int64_t pad_len, int64_t *chars, int64_t *pads) {
    col_t *c = &o->c[RESPONSE];
    chars[i] = pads[i] = -1;
    if (!c->valid[i]) return;
    const uint8_t *d = c->data;
    int64_t j = c->offs[i], end = c->offs[i + 1], follow = 0, found = 0, free_from = j; /* a pad may start there */
#if defined(__SSE2__)
    /* the bytes that follow a lead byte are 0x80..0xBF: below -64 to the signed compare; counted by byte lane (255
     * blocks at most before a lane could wrap), then the lanes summed; the pad's first byte looked for beside */
    const __m128i lead = _mm_set1_epi8(-64), zero = _mm_setzero_si128();
    const __m128i first = _mm_set1_epi8((char)(pad_len ? pad[0] : 0));
    while (j + 16 <= end) {
        __m128i lanes = zero;
        for (int b = 0; b < 255 && j + 16 <= end; b++, j += 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(d + j));
            lanes = _mm_sub_epi8(lanes, _mm_cmplt_epi8(x, lead));
            unsigned m = pad_len ? (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, first)) : 0;
            for (; m; m &= m - 1) {
                int64_t q = j + __builtin_ctz(m);
                if (q >= free_from && pad_at(d, q, end, pad, pad_len)) {
                    found++;
                    free_from = q + pad_len;
                }
            }
        }
        __m128i sums = _mm_sad_epu8(lanes, zero);
        follow += _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
    }
#endif
    for (; j < end; j++) {
        follow += (d[j] & 0xC0) == 0x80;
        if (pad_len && d[j] == pad[0] && j >= free_from && pad_at(d, j, end, pad, pad_len)) {
            found++;
            free_from = j + pad_len;
        }
    }
    chars[i] = end - c->offs[i] - follow;
    pads[i] = found;
}

/* Reads lines offs[i]..offs[i+1] of buf. Per line: handled[i] (1: read here), n_turns, n_calls, row_offs (n + 1)
 * its turn rows, chars and pads (response_counts); the text columns (data, offs, valid: NTEXT each; PROMPT, RESPONSE
 * by line, the rest by turn row, each with room for cap bytes), turn and trained by turn row (room for cap_rows),
 * span_start, span_end and span by turn row (the turn's text as its span of the prompt or response: TEXT is only a
 * line's scratch, rewritten from the start at each line), answer_start and answer_end by line; text/toffs (int64,
 * n + 1) the lines, those read here with their messages written as []; of the lines read here (found as arrays.c finds them): found_at/found_len
 * (KEY_SLOTS / 2 each) where in buf each distinct top-level key is spelled, *nfound of them, and odd (n) the lines
 * where a text key (tkeys) holds no string or null, *nodd of them. Returns the turn rows written, or -1 when out of
 * room (nothing is usable then). */
int64_t rlviz_messages(const uint8_t *buf, const int64_t *offs, int64_t n, const uint8_t *key, int64_t key_len,
                       const uint8_t *pad, int64_t pad_len, uint8_t **data, int32_t **toffs_, uint8_t **valid,
                       int64_t cap, int64_t cap_rows, int32_t *turn, uint8_t *trained, int32_t *span_start,
                       int32_t *span_end, uint8_t *span, int32_t *answer_start, int32_t *answer_end,
                       int32_t *row_offs, int32_t *n_turns, int32_t *n_calls, int64_t *chars, int64_t *pads,
                       uint8_t *handled, uint8_t *text, int64_t *toffs, const uint8_t *tkeys,
                       const int64_t *tkey_offs, int32_t ntkeys, int64_t *found_at, int32_t *found_len,
                       int64_t *nfound, int64_t *odd, int64_t *nodd) {
    keys_t keys_, *keys = &keys_;
    memset(keys, 0, sizeof *keys);
    keys->slots = calloc(KEY_SLOTS, sizeof(KeySlot));
    if (!keys->slots) return -1;
    keys->tkeys = tkeys;
    keys->tkey_offs = tkey_offs;
    keys->ntkeys = ntkeys;
    *nfound = *nodd = 0;
    out_t o;
    memset(&o, 0, sizeof o);
    for (int k = 0; k < NTEXT; k++) {
        o.c[k].data = data[k];
        o.c[k].offs = toffs_[k];
        o.c[k].valid = valid[k];
        o.c[k].offs[0] = 0;
    }
    o.cap = cap < INT32_MAX ? cap : INT32_MAX;
    o.cap_rows = cap_rows;
    o.turn = turn;
    o.trained = trained;
    o.span_start = span_start;
    o.span_end = span_end;
    o.span = span;
    o.answer_start = answer_start;
    o.answer_end = answer_end;
    row_offs[0] = 0;
    toffs[0] = 0;
    int64_t t = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = buf + offs[i], *e = buf + offs[i + 1], *ms = NULL, *me = NULL;
        int64_t r0 = o.rows, marks[NTEXT];
        o.c[TEXT].len = 0; /* the texts of the line before are in its prompt and response now */
        o.c[TEXT].offs[r0] = 0;
        for (int k = ROLE; k < NTEXT; k++) marks[k] = o.c[k].len;
        n_turns[i] = n_calls[i] = 0;
        keys->i = i;
        handled[i] = (uint8_t)read_line(&o, p, e, key, key_len, &ms, &me, &n_turns[i], &n_calls[i], keys);
        if (o.overflow || (handled[i] && !texts(&o, i, r0, o.rows))) {
            o.rows = -1; /* out of room */
            break;
        }
        if (!handled[i]) { /* its rows taken back: Python reads the line */
            o.rows = r0;
            for (int k = ROLE; k < NTEXT; k++) o.c[k].len = marks[k];
            for (int k = PROMPT; k <= RESPONSE; k++) close_row(&o, k, i, 0);
            answer_start[i] = answer_end[i] = -1;
        }
        response_counts(&o, i, pad, pad_len, chars, pads);
        row_offs[i + 1] = (int32_t)o.rows;
        if (handled[i]) {
            /* its keys and whether a text key is odd, as the byte scan would have found them (only of lines read
             * here: the others are scanned as before) */
            for (int k = 0; k < keys->nline; k++) {
                KeySlot *s = keys->line[k];
                if (s->list != 1) {
                    s->list = 1;
                    found_at[*nfound] = s->p - buf;
                    found_len[(*nfound)++] = s->len;
                }
            }
            if (keys->odd) odd[(*nodd)++] = i;
            memcpy(text + t, p, (size_t)(ms - p));
            t += ms - p;
            memcpy(text + t, "[]", 2);
            t += 2;
            memcpy(text + t, me, (size_t)(e - me));
            t += e - me;
        } else {
            memcpy(text + t, p, (size_t)(e - p));
            t += e - p;
        }
        toffs[i + 1] = t;
    }
    free(keys->slots);
    return o.rows;
}
