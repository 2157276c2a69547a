/* The tokenizer and the unit segmenter of tracehound.text's ASCII path (the Python code,
 * text._normalized_tokens and text._segments, is their reference), shared by the kernels that
 * read text: EvidenceCore (_speedups_evidence.c) and the hashing embedder (_speedups_embed.c).
 * Static functions, inlined where they are used.
 *
 * The texts of that path: every character ASCII or one of the typographic characters of
 * text._TYPOGRAPHIC (is_typographic in _speedups.h, given by configure()), which separate tokens.
 *
 * _speedups.h (included first) defines ALWAYS_INLINE and the status codes ST_OK, ST_ERROR
 * (a Python exception is set) and ST_UNHANDLED (the text is not of the path; no exception
 * set). */
#ifndef TRACEHOUND_SPEEDUPS_TOKENS_H
#define TRACEHOUND_SPEEDUPS_TOKENS_H

#include "_speedups.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) && defined(__GNUC__) && !defined(TRACEHOUND_PORTABLE)
#include <emmintrin.h>
#define TOKENS_SSE2 1
#else
#define TOKENS_SSE2 0
#endif

/* --- tokens ---------------------------------------------------------------------------------- */

/* Called for each token found: ST_OK to go on, ST_ERROR (with an exception) to stop. */
typedef int (*token_sink_t)(void *ctx, int kind, const void *data, Py_ssize_t start,
                            Py_ssize_t len);

/* TOKEN_BITS[c] for an ASCII character c: T_ALNUM for [A-Za-z0-9], a token character;
 * T_JOINER for '.' and '-'; 0 for the others, which separate tokens. */
#define T_ALNUM 1
#define T_JOINER 2
#define A_ T_ALNUM
static const uint8_t TOKEN_BITS[128] = {
    ['-'] = T_JOINER, ['.'] = T_JOINER,
    ['0'] = A_, A_, A_, A_, A_, A_, A_, A_, A_, A_,
    ['A'] = A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_,
            A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_,
    ['a'] = A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_,
            A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_, A_,
};
#undef A_

/* The index of the lowest set bit of x != 0. */
#if defined(__GNUC__) && !defined(TRACEHOUND_PORTABLE)
#define LOWEST_BIT(x) ((Py_ssize_t)__builtin_ctzll(x))
#else
static inline Py_ssize_t
LOWEST_BIT(uint64_t x)
{
    /* de Bruijn: the lowest bit, isolated, times the sequence has the index in its top 6 bits */
    static const uint8_t index[64] = {
        0,  1,  2,  53, 3,  7,  54, 27, 4,  38, 41, 8,  34, 55, 48, 28,
        62, 5,  39, 46, 44, 42, 22, 9,  24, 35, 59, 56, 49, 18, 29, 11,
        63, 52, 6,  26, 37, 40, 33, 47, 61, 45, 43, 21, 23, 58, 17, 10,
        51, 25, 36, 32, 60, 20, 57, 16, 50, 31, 19, 15, 30, 14, 13, 12,
    };
    return (Py_ssize_t)index[((x & (~x + 1)) * 0x022fdd63cc95386dULL) >> 58];
}
#endif

/* The characters data[base:base + count] (count <= 64) as bit masks: bit k of *alnum for a
 * token character at base + k, of *joiner for a joiner there. ST_UNHANDLED if one is non-ASCII
 * and not typographic. */
static ALWAYS_INLINE int
classify_chars(int kind, const void *data, Py_ssize_t base, Py_ssize_t count, uint64_t *alnum,
               uint64_t *joiner)
{
    uint64_t a = 0, j = 0, bits;
    Py_ssize_t k;

    for (k = 0; k < count; k++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, base + k);
        if (c >= 0x80) {
            if (!is_typographic(c)) {
                return ST_UNHANDLED;
            }
            continue;
        }
        bits = TOKEN_BITS[c];
        a |= (bits & T_ALNUM) << k;
        j |= (bits >> 1) << k;
    }
    *alnum = a;
    *joiner = j;
    return ST_OK;
}

#if TOKENS_SSE2
/* Bytes 0-0x7f as ASCII characters; bytes 0x80-0xff are neither token characters nor joiners.
 * Signed compares give the unsigned ranges: c - lo + 0x80 < n - 0x80 is lo <= c < lo + n. */
static ALWAYS_INLINE void
classify16(__m128i x, uint64_t *alnum, uint64_t *joiner, int shift)
{
    const __m128i lower = _mm_or_si128(x, _mm_set1_epi8(0x20));
    const __m128i letter = _mm_cmplt_epi8(_mm_add_epi8(lower, _mm_set1_epi8(0x80 - 'a')),
                                          _mm_set1_epi8(26 - 0x80));
    const __m128i digit = _mm_cmplt_epi8(_mm_add_epi8(x, _mm_set1_epi8(0x80 - '0')),
                                         _mm_set1_epi8(10 - 0x80));
    const __m128i join = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')),
                                      _mm_cmpeq_epi8(x, _mm_set1_epi8('-')));
    *alnum |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_or_si128(letter, digit)) << shift;
    *joiner |= (uint64_t)(unsigned)_mm_movemask_epi8(join) << shift;
}

/* classify_chars for 64 characters of the 1-byte or 2-byte kind, 16 at a time. Characters of
 * the 2-byte kind are packed into bytes (above 0xff: 0xff or 0, separators either way). The
 * non-ASCII ones are checked one by one. */
static ALWAYS_INLINE int
classify64(int kind, const void *data, Py_ssize_t base, uint64_t *alnum, uint64_t *joiner)
{
    uint64_t high = 0;
    int i;

    *alnum = *joiner = 0;
    for (i = 0; i < 64; i += 16) {
        __m128i x;
        if (kind == PyUnicode_1BYTE_KIND) {
            x = _mm_loadu_si128((const __m128i *)(const void *)((const Py_UCS1 *)data + base + i));
            high |= (uint64_t)(unsigned)_mm_movemask_epi8(x) << i;
        }
        else {
            const Py_UCS2 *p = (const Py_UCS2 *)data + base + i;
            const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)p);
            const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(p + 8));
            const __m128i low7 = _mm_set1_epi16(0x7f), zero = _mm_setzero_si128();
            x = _mm_packus_epi16(lo, hi);
            /* the non-ASCII characters, c & ~0x7f != 0 (unsigned compares need SSE4.1) */
            high |= (uint64_t)(unsigned)(_mm_movemask_epi8(_mm_packs_epi16(
                        _mm_cmpeq_epi16(_mm_andnot_si128(low7, lo), zero),
                        _mm_cmpeq_epi16(_mm_andnot_si128(low7, hi), zero))) ^ 0xffff)
                    << i;
        }
        classify16(x, alnum, joiner, i);
    }
    for (; high; high &= high - 1) {
        if (!is_typographic(PyUnicode_READ(kind, data, base + LOWEST_BIT(high)))) {
            return ST_UNHANDLED;
        }
    }
    return ST_OK;
}
#endif

static ALWAYS_INLINE int
classify(int kind, const void *data, Py_ssize_t base, Py_ssize_t count, uint64_t *alnum,
         uint64_t *joiner)
{
#if TOKENS_SSE2
    if (count == 64 && kind != PyUnicode_4BYTE_KIND) {
        return classify64(kind, data, base, alnum, joiner);
    }
#endif
    return classify_chars(kind, data, base, count, alnum, joiner);
}

/*
 * The tokens of the `n` characters at `data`, of the given kind, each handed to `sink` (with
 * `ctx`, and the token's start index and length): the tokens of tracehound.text's ASCII path,
 * as text._normalized_tokens makes them. ST_UNHANDLED, as soon as it is seen, if a character is
 * not of that path (the tokens before it have been handed over); ST_ERROR if the sink fails.
 * Inlined once per kind and sink, so that the kind is a constant in the loops and the sink's
 * call a direct one.
 *
 * The text is read 64 characters at a time into bit masks (bit k: the character at 64 w + k):
 * token characters (A) and joiners (J) of the current word w, with those of the words before
 * and after for the bits at the edges. A joiner is kept when a token character comes before
 * and after it; the kept characters are then T = A | (J & A<<1 & A>>1) (shifts across words),
 * a token starts at each bit of T whose previous bit is clear and ends after each bit of T whose
 * next bit is clear. Starts and ends alternate, so one pending start suffices across words.
 * Branches are per token (and per non-ASCII character), not per character: with SSE2, words of
 * the 1-byte and 2-byte kinds are classified 16 characters at a time.
 */
static ALWAYS_INLINE int
scan_tokens(int kind, const void *data, Py_ssize_t n, token_sink_t sink, void *ctx)
{
    uint64_t prev_a = 0, prev_t = 0, a, j, next_a = 0, next_j = 0, keep, kept, next_kept0;
    uint64_t starts, lasts;
    Py_ssize_t base, start = -1;
    int st;

    if (n == 0) {
        return ST_OK;
    }
    st = classify(kind, data, 0, n < 64 ? n : 64, &a, &j);
    if (st != ST_OK) {
        return st;
    }
    for (base = 0; base < n; base += 64) {
        if (n - base > 64) {
            st = classify(kind, data, base + 64, n - base - 64 < 64 ? n - base - 64 : 64,
                          &next_a, &next_j);
            if (st != ST_OK) {
                return st;
            }
        }
        else {
            next_a = next_j = 0;
        }
        /* joiners with a token character on both sides */
        keep = j & ((a << 1) | (prev_a >> 63)) & ((a >> 1) | (next_a << 63));
        kept = a | keep;
        /* is the first character of the next word kept (a token character, or a joiner kept)? */
        next_kept0 = (next_a | (next_j & (a >> 63) & (next_a >> 1))) & 1;
        starts = kept & ~((kept << 1) | (prev_t >> 63));
        lasts = kept & ~((kept >> 1) | (next_kept0 << 63));
        for (;;) {
            if (start < 0) {
                if (!starts) {
                    break;
                }
                start = base + LOWEST_BIT(starts);
                starts &= starts - 1;
            }
            if (!lasts) {
                break; /* the token goes on in the next word */
            }
            st = sink(ctx, kind, data, start, base + LOWEST_BIT(lasts) + 1 - start);
            if (st != ST_OK) {
                return st;
            }
            lasts &= lasts - 1;
            start = -1;
        }
        prev_a = a;
        prev_t = kept;
        a = next_a;
        j = next_j;
    }
    return ST_OK;
}

/* --- characters ------------------------------------------------------------------------------ */

/*
 * On the ASCII path, the classes the regex and str.strip() see (Python's `re` on a str uses
 * Py_UNICODE_ISSPACE for \s, as str.isspace() and str.strip() do; \w is str.isalnum() or '_'):
 *
 * - C_SPACE: \s, str.isspace(): \t \n \v \f \r, \x1c-\x1f, ' ', and the typographic characters
 *   that are spaces (U+00A0, no-break space);
 * - C_WORD: [^\W_], that is [A-Za-z0-9] (configure() takes no letter or digit as typographic);
 * - 0: anything else of the ASCII path (the other typographic characters: punctuation).
 */
#define C_SPACE 1
#define C_WORD 2
#define W_ C_WORD
static const unsigned char CHAR_CLASS[128] = {
    ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\v'] = C_SPACE, ['\f'] = C_SPACE, ['\r'] = C_SPACE,
    [0x1c] = C_SPACE, [0x1d] = C_SPACE, [0x1e] = C_SPACE, [0x1f] = C_SPACE, [' '] = C_SPACE,
    ['0'] = W_, W_, W_, W_, W_, W_, W_, W_, W_, W_,
    ['A'] = W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_,
            W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_,
    ['a'] = W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_,
            W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_, W_,
};
#undef W_

/* The class of a character of the ASCII path. */
static ALWAYS_INLINE int
char_class(Py_UCS4 c)
{
    if (c < 0x80) {
        return CHAR_CLASS[c];
    }
    return is_typographic(c) == TYPO_SPACE ? C_SPACE : 0;
}

/* --- segments -------------------------------------------------------------------------------- */

/*
 * The matches of text._UNIT_BREAK,
 *
 *     \.\s+(?=[^\W_]) | !\s+(?=[^\W_]) | \?\s+(?=[^\W_]) | \n\s*(?:\r?\n\s*)+ | \r\n\s*(?:\r?\n\s*)+
 *
 * as finditer finds them in data[lo:hi] (the stripped text: lookaheads see nothing past hi),
 * leftmost first, each search going on from the end of the previous match. Each alternative
 * starts with its own literal character, so at a position at most one can match:
 *
 * - '.', '!' or '?' at i: \s+ takes the run of spaces after i, greedily; the lookahead needs a
 *   word character after it, and giving spaces back only puts a space there. So: a match, up to
 *   the end of the run, when the run is not empty and a word character follows it.
 * - '\n' at i (or "\r\n" at i): \s* takes the run of spaces after it, then gives characters back
 *   until (?:\r?\n\s*)+ matches, which needs a '\n' there; the last '\n' of the run is found first,
 *   and its \s* takes the rest of the run. So: a match, up to the end of the run, when the run
 *   holds another '\n'.
 *
 * The ending character of a sentence stays with its segment (text._segments).
 */

/* The end of the match at i (> i), or -1 when there is none. */
static ALWAYS_INLINE Py_ssize_t
match_at(int kind, const void *data, Py_ssize_t i, Py_ssize_t hi)
{
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    Py_ssize_t j;
    int newline = 0;

    switch (c) {
    case '.':
    case '!':
    case '?':
        for (j = i + 1; j < hi && char_class(PyUnicode_READ(kind, data, j)) == C_SPACE; j++) {
        }
        if (j > i + 1 && j < hi && char_class(PyUnicode_READ(kind, data, j)) == C_WORD) {
            return j;
        }
        return -1;
    case '\r':
        if (i + 1 >= hi || PyUnicode_READ(kind, data, i + 1) != '\n') {
            return -1;
        }
        i++; /* the rest is as after a '\n' */
        /* fall through */
    case '\n':
        for (j = i + 1; j < hi; j++) {
            Py_UCS4 d = PyUnicode_READ(kind, data, j);
            if (d == '\n') {
                newline = 1;
            }
            else if (char_class(d) != C_SPACE) {
                break;
            }
        }
        return newline ? j : -1;
    default:
        return -1;
    }
}

/* The segments found so far: pairs of start and end, in `stack` up to its size. */
#define BOUNDS_ON_STACK 128
typedef struct {
    Py_ssize_t *items;
    Py_ssize_t n, cap; /* numbers of Py_ssize_t, not of pairs */
    Py_ssize_t stack[BOUNDS_ON_STACK];
} bounds_t;

static int
bounds_add(bounds_t *b, Py_ssize_t start, Py_ssize_t end)
{
    if (b->n == b->cap) {
        Py_ssize_t *grown, cap = 2 * b->cap;
        if ((size_t)cap > (size_t)PY_SSIZE_T_MAX / sizeof(Py_ssize_t)) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        if (b->items == b->stack) {
            grown = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
            if (grown != NULL) {
                memcpy(grown, b->stack, (size_t)b->n * sizeof(Py_ssize_t));
            }
        }
        else {
            grown = PyMem_Realloc(b->items, (size_t)cap * sizeof(Py_ssize_t));
        }
        if (grown == NULL) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        b->items = grown;
        b->cap = cap;
    }
    b->items[b->n++] = start;
    b->items[b->n++] = end;
    return ST_OK;
}

/* The characters that may start a match. */
static const unsigned char MATCH_START[128] = {
    ['.'] = 1, ['!'] = 1, ['?'] = 1, ['\n'] = 1, ['\r'] = 1,
};

#if TOKENS_SSE2
/* The 16 characters at data[i] (of the 1-byte or 2-byte kind) as 16 bytes (exact for ASCII),
 * and in *high those not ASCII as a 16-bit mask (bit k: data[i + k]). */
static ALWAYS_INLINE __m128i
load16(int kind, const void *data, Py_ssize_t i, unsigned *high)
{
    if (kind == PyUnicode_1BYTE_KIND) {
        const __m128i x =
            _mm_loadu_si128((const __m128i *)(const void *)((const Py_UCS1 *)data + i));
        *high = (unsigned)_mm_movemask_epi8(x); /* the high bits: not ASCII */
        return x;
    }
    else {
        /* 2-byte characters packed into bytes, and those not ASCII, c & ~0x7f != 0 (as in
         * classify64) */
        const Py_UCS2 *p = (const Py_UCS2 *)data + i;
        const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)p);
        const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(p + 8));
        const __m128i low7 = _mm_set1_epi16(0x7f), zero = _mm_setzero_si128();
        *high = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(
                    _mm_cmpeq_epi16(_mm_andnot_si128(low7, lo), zero),
                    _mm_cmpeq_epi16(_mm_andnot_si128(low7, hi), zero))) ^
                0xffffu;
        return _mm_packus_epi16(lo, hi);
    }
}

/* The characters of the 16 at data[i] (of the 1-byte or 2-byte kind) that may start a match
 * (MATCH_START) or are not ASCII, as a 16-bit mask (bit k: data[i + k]). */
static ALWAYS_INLINE unsigned
may_break16(int kind, const void *data, Py_ssize_t i)
{
    __m128i x, hit;
    unsigned high;
    x = load16(kind, data, i, &high);
    hit = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')), _mm_cmpeq_epi8(x, _mm_set1_epi8('!'))),
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('?')),
                                  _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'))),
                     _mm_cmpeq_epi8(x, _mm_set1_epi8('\r'))));
    return (unsigned)_mm_movemask_epi8(hit) | high;
}
#endif

/* text._segments(text.strip()) for the `n` characters at `data` of the given kind, as pairs of
 * indexes into the text, in one pass: ST_UNHANDLED if a character is not of the ASCII path.
 * Every character of the stripped text is read by the main loop, but for those inside a match,
 * spaces all. Inlined once per kind, so that the kind is a constant in the loops. */
static ALWAYS_INLINE int
find_segments(int kind, const void *data, Py_ssize_t n, bounds_t *b)
{
    Py_ssize_t lo, hi, start, i, end;

    /* text.strip(): spaces only, all of the ASCII path */
    for (lo = 0; lo < n && char_class(PyUnicode_READ(kind, data, lo)) == C_SPACE; lo++) {
    }
    for (hi = n; hi > lo && char_class(PyUnicode_READ(kind, data, hi - 1)) == C_SPACE; hi--) {
    }
    start = lo;
    for (i = lo; i < hi;) {
        Py_UCS4 c;
#if TOKENS_SSE2
        if (kind != PyUnicode_4BYTE_KIND && i + 16 <= hi) {
            /* 16 characters at a time up to the next that may start a match or is not ASCII */
            unsigned m = may_break16(kind, data, i);
            if (m == 0) {
                i += 16;
                continue;
            }
            i += LOWEST_BIT(m);
        }
#endif
        c = PyUnicode_READ(kind, data, i);
        if (c >= 0x80) {
            if (!is_typographic(c)) {
                return ST_UNHANDLED;
            }
            i++;
            continue;
        }
        if (!MATCH_START[c] || (end = match_at(kind, data, i, hi)) < 0) {
            i++;
            continue;
        }
        /* the ending character of a sentence stays with it */
        if (bounds_add(b, start, c == '.' || c == '!' || c == '?' ? i + 1 : i) != ST_OK) {
            return ST_ERROR;
        }
        start = i = end;
    }
    return bounds_add(b, start, hi);
}

#endif
