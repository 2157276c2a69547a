/*
 * tracehound._speedups: embed functions (see _speedups.h).
 *
 * embed_hashed is tracehound.drift._embed.HashingEmbedder.embed_tokens without numpy and
 * without the per-token Python objects: one pass over the tokens of each row, hashing each one
 * (CRC-32 of its UTF-8, as zlib.crc32, computed here from the str's characters) and adding the
 * signed unigram and bigram features to the row's buckets, then the norms. The numpy code stays
 * the reference; the results are the same bits:
 *
 * - a bucket is a sum of +1.0 and -1.0, an integer, exact in any order (as numpy's bincount);
 * - a block's norm is sqrt of the sum of the squares of its elements, integers whose sum is
 *   exact in any order (as numpy's einsum), and each element of a block with a non-zero norm is
 *   divided by the norm (x / norm, as numpy); zero blocks stay zero.
 *
 * Both hold while the sums stay below 2^53: a row of more than MAX_ROW_TOKENS tokens gets None.
 * So do the inputs the function does not handle exactly (see embed_hashed_doc); the caller then
 * runs the numpy code, which gives the same result or raises. Only bad arguments raise here.
 * The GIL is held throughout.
 *
 * embed_hashed_sum adds those rows up; embed_texts_sum does so from the texts themselves, for
 * texts of the tokenizer's ASCII path: their informative tokens are scanned, hashed and looked
 * up in place, never made into Python strings (see "embed_texts_sum" below).
 *
 * C99, ordinary CPython API only (the output array is read through the buffer protocol).
 */
#include "_speedups.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The constants of tracehound.drift._embed. */
#define BIGRAM_MULT UINT64_C(0x9E3779B1)
#define MASK32 UINT64_C(0xFFFFFFFF)
#define SIGN_MULT UINT64_C(0x2545F491)

/* A row of n tokens has at most 2n - 1 features (n unigrams, n - 1 bigrams), so its buckets'
 * absolute values sum to less than 2^26 and their squares to less than 2^52: exact. */
#define MAX_ROW_TOKENS ((Py_ssize_t)1 << 25)

#include "_speedups_tokens.h"

/* --- CRC-32 ---------------------------------------------------------------------------------- */

/* CRC-32 of zlib (IEEE 802.3: polynomial 0xEDB88320 reflected, initial and final value
 * 0xFFFFFFFF), slicing by 8: crc_table[0] is the byte-at-a-time table, crc_table[k][b] the CRC
 * of byte b followed by k zero bytes. Filled once by tracehound_add_embed (the same values in
 * every module instance). */
static uint32_t crc_table[8][256];

static void
crc_init(void)
{
    uint32_t b, c;
    int k;

    for (b = 0; b < 256; b++) {
        c = b;
        for (k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
        crc_table[0][b] = c;
    }
    for (b = 0; b < 256; b++) {
        c = crc_table[0][b];
        for (k = 1; k < 8; k++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[k][b] = c;
        }
    }
}

/* The running CRC (not inverted) after the byte b. */
#define CRC_BYTE(c, b) (crc_table[0][((c) ^ (uint32_t)(b)) & 0xff] ^ ((c) >> 8))

/* The running CRC after the n bytes at p. */
static inline uint32_t
crc_bytes(uint32_t c, const uint8_t *p, Py_ssize_t n)
{
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                           ((uint32_t)p[3] << 24));
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    if (n >= 4) {
        uint32_t w = c ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                          ((uint32_t)p[3] << 24));
        c = crc_table[3][w & 0xff] ^ crc_table[2][(w >> 8) & 0xff] ^
            crc_table[1][(w >> 16) & 0xff] ^ crc_table[0][w >> 24];
        n -= 4;
        p += 4;
    }
    for (; n > 0; n--, p++) {
        c = CRC_BYTE(c, *p);
    }
    return c;
}

/* The running CRC after the UTF-8 encoding of the code point u, or ST_UNHANDLED (via *st) for
 * a surrogate, which str.encode("utf-8") refuses. */
static inline uint32_t
crc_code_point(uint32_t c, Py_UCS4 u, int *st)
{
    if (u < 0x80) {
        return CRC_BYTE(c, u);
    }
    if (u < 0x800) {
        c = CRC_BYTE(c, 0xc0 | (u >> 6));
        return CRC_BYTE(c, 0x80 | (u & 0x3f));
    }
    if (u < 0x10000) {
        if (u >= 0xd800 && u <= 0xdfff) {
            *st = ST_UNHANDLED;
            return c;
        }
        c = CRC_BYTE(c, 0xe0 | (u >> 12));
        c = CRC_BYTE(c, 0x80 | ((u >> 6) & 0x3f));
        return CRC_BYTE(c, 0x80 | (u & 0x3f));
    }
    c = CRC_BYTE(c, 0xf0 | (u >> 18));
    c = CRC_BYTE(c, 0x80 | ((u >> 12) & 0x3f));
    c = CRC_BYTE(c, 0x80 | ((u >> 6) & 0x3f));
    return CRC_BYTE(c, 0x80 | (u & 0x3f));
}

/* zlib.crc32(s.encode("utf-8")) into *out, for an exact str s. ST_UNHANDLED if s holds a lone
 * surrogate. The UTF-8 is made on the fly: ASCII strings are their own UTF-8, and no other
 * string gets a UTF-8 copy cached in it. */
static ALWAYS_INLINE int
crc_str(PyObject *s, uint32_t *out)
{
    const void *data;
    Py_ssize_t n, i;
    uint32_t c = 0xFFFFFFFFu;
    int kind, st = ST_OK;

#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) { /* a legacy string (deprecated APIs, before 3.12) */
        return ST_ERROR;
    }
#endif
    data = PyUnicode_DATA(s);
    n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) {
        *out = ~crc_bytes(c, (const uint8_t *)data, n);
        return ST_OK;
    }
    kind = PyUnicode_KIND(s);
    for (i = 0; i < n && st == ST_OK; i++) {
        c = crc_code_point(c, PyUnicode_READ(kind, data, i), &st);
    }
    *out = ~c;
    return st;
}

PyDoc_STRVAR(crc32_utf8_doc,
"crc32_utf8($module, text, /)\n"
"--\n"
"\n"
"zlib.crc32(text.encode('utf-8')), or None if the text holds a lone surrogate (which the\n"
"UTF-8 codec refuses). The CRC of embed_hashed, exposed for tests. Raises TypeError unless\n"
"`text` is a str (not a subclass).");

static PyObject *
crc32_utf8(PyObject *module, PyObject *text)
{
    uint32_t h;
    int st;

    (void)module;
    if (!PyUnicode_CheckExact(text)) {
        PyErr_Format(PyExc_TypeError, "crc32_utf8() argument must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    st = crc_str(text, &h);
    if (st == ST_ERROR) {
        return NULL;
    }
    if (st == ST_UNHANDLED) {
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLong((unsigned long)h);
}

/* --- embed_hashed ---------------------------------------------------------------------------- */

/* LOWEST_BIT(x), the index of the lowest set bit of x != 0: from _speedups_tokens.h. */

/* f % d for a feature f below 2^32 and d below 2^32 (embed_hashed leaves larger lexical
 * blocks to numpy). With 128-bit integers, Lemire's direct remainder replaces the division
 * (Lemire, Kaser, Kurz, "Faster remainder by direct computation", 2019): for 32-bit a and d,
 * a % d = ((m * a mod 2^64) * d) >> 64 with m = floor((2^64 - 1) / d) + 1. */
typedef struct {
    uint64_t m, d;
} bucket_mod_t;

static void
bucket_mod_init(bucket_mod_t *md, uint64_t d)
{
    md->d = d;
    md->m = UINT64_MAX / d + 1;
}

static ALWAYS_INLINE uint64_t
bucket_of(const bucket_mod_t *md, uint64_t f)
{
#if defined(__SIZEOF_INT128__) && !defined(TRACEHOUND_PORTABLE)
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)(md->m * f) * md->d) >> 64);
#else
    return f % md->d;
#endif
}

/*
 * The stance index, a dict token -> category. When its keys are all exact strs (and at most
 * STANCE_TABLE_KEYS), a token's category is looked up by the token's CRC-32, already computed,
 * in a table made for the call: a key matches a token when its CRC is the token's and its
 * characters are the same, which is when the dict would find it, without hashing the token.
 * Other dicts are asked with PyDict_GetItemWithError; comparing other keys may then run Python
 * code (the callers hold references to the objects they read and read sizes again).
 */
#define STANCE_TABLE_KEYS 256
typedef struct {
    uint32_t crc;
    PyObject *key, *category; /* borrowed from the dict: no Python code runs in this mode */
} stance_entry_t;

typedef struct {
    PyObject *dict;
    int by_crc;
    size_t mask;                             /* of slots */
    uint16_t slots[2 * STANCE_TABLE_KEYS];   /* entry index + 1; 0: empty */
    stance_entry_t entries[STANCE_TABLE_KEYS];
} stance_t;

static int
stance_init(stance_t *t, PyObject *dict)
{
    Py_ssize_t n = PyDict_GET_SIZE(dict), pos = 0;
    size_t size = 16, count = 0, i;
    PyObject *key, *value;
    uint32_t h;
    int st;

    t->dict = dict;
    t->by_crc = 0;
    if (n > STANCE_TABLE_KEYS) {
        return ST_OK;
    }
    while (size < 2 * (size_t)n) {
        size *= 2;
    }
    t->mask = size - 1;
    memset(t->slots, 0, size * sizeof(uint16_t));
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return ST_OK;
        }
        st = crc_str(key, &h);
        if (st == ST_ERROR) {
            return st;
        }
        if (st == ST_UNHANDLED) {
            continue; /* a lone surrogate: tokens with one never get this far */
        }
        for (i = h & t->mask; t->slots[i]; i = (i + 1) & t->mask) {
        }
        t->entries[count].crc = h;
        t->entries[count].key = key;
        t->entries[count].category = value;
        t->slots[i] = (uint16_t)++count;
    }
    t->by_crc = 1;
    return ST_OK;
}

/* Do the exact (and ready) strs a and b hold the same characters? */
static inline int
same_str(PyObject *a, PyObject *b)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return a == b || (n == PyUnicode_GET_LENGTH(b) && kind == (int)PyUnicode_KIND(b) &&
                      memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0);
}

/* The category of the token (an exact str, of CRC h) in *category: a borrowed reference or
 * NULL. */
static inline int
stance_get(const stance_t *t, PyObject *token, uint32_t h, PyObject **category)
{
    size_t i;

    if (t->by_crc) {
        for (i = h & t->mask; t->slots[i]; i = (i + 1) & t->mask) {
            const stance_entry_t *e = &t->entries[t->slots[i] - 1];
            if (e->crc == h && same_str(e->key, token)) {
                *category = e->category;
                return ST_OK;
            }
        }
        *category = NULL;
        return ST_OK;
    }
    Py_INCREF(token);
    *category = PyDict_GetItemWithError(t->dict, token);
    Py_DECREF(token);
    return *category == NULL && PyErr_Occurred() ? ST_ERROR : ST_OK;
}

/* What a call needs. */
typedef struct {
    Py_ssize_t lexical_dim, dim, n_stance; /* n_stance = dim - lexical_dim */
    int bigrams;
    bucket_mod_t mod;    /* % lexical_dim */
    uint64_t *touched;   /* a bit per bucket of the row: has it got a feature? */
    Py_ssize_t n_touched; /* words */
    const stance_t *stance; /* NULL: no stance block */
} embed_t;

/* Add the feature f (below 2^32) to the lexical block: +1.0 or -1.0 (bit 31 of f * SIGN_MULT,
 * which does not wrap) in bucket f % lexical_dim. */
static ALWAYS_INLINE void
add_feature(const embed_t *e, double *lexical, uint64_t f)
{
    uint64_t b = bucket_of(&e->mod, f);
    lexical[b] += (((f * SIGN_MULT) >> 31) & 1) ? -1.0 : 1.0;
    e->touched[b >> 6] |= (uint64_t)1 << (b & 63);
}

/* Scale the lexical block to unit length unless it is zero (returns whether it is not), as
 * numpy: the norm is sqrt of the sum of the squares, each element becomes x / norm. Only the
 * buckets that got features can be other than zero, and 0.0 / norm is 0.0. */
static int
normalize_lexical(const embed_t *e, double *x)
{
    double sum = 0.0, norm;
    uint64_t bits;
    Py_ssize_t w, i;

    for (w = 0; w < e->n_touched; w++) {
        for (bits = e->touched[w]; bits; bits &= bits - 1) {
            i = 64 * w + LOWEST_BIT(bits);
            sum += x[i] * x[i];
        }
    }
    norm = sqrt(sum);
    if (!(norm > 0.0)) {
        return 0;
    }
    for (w = 0; w < e->n_touched; w++) {
        for (bits = e->touched[w]; bits; bits &= bits - 1) {
            i = 64 * w + LOWEST_BIT(bits);
            x[i] = x[i] / norm;
        }
    }
    return 1;
}

/* The same for the n elements at x. */
static void
normalize(double *x, Py_ssize_t n)
{
    double sum = 0.0, norm;
    Py_ssize_t i;

    for (i = 0; i < n; i++) {
        sum += x[i] * x[i];
    }
    norm = sqrt(sum);
    if (norm > 0.0) {
        for (i = 0; i < n; i++) {
            x[i] = x[i] / norm;
        }
    }
}

/* Normalize the blocks of the row made in out (and its stance block if `has_stance`). */
static void
finish_row(const embed_t *e, double *out, int has_stance)
{
    double *stance = out + e->lexical_dim;

    if (!normalize_lexical(e, out)) {
        /* a row without lexical content has no stance either */
        memset(stance, 0, (size_t)e->n_stance * sizeof(double));
    }
    else if (has_stance) {
        normalize(stance, e->n_stance);
    }
}

/* Add the row made in `scratch` to out and zero it: its touched buckets and its stance block
 * are all its non-zero elements. */
static void
add_row(const embed_t *e, double *out, double *scratch)
{
    Py_ssize_t w, i;
    uint64_t bits;

    for (w = 0; w < e->n_touched; w++) {
        for (bits = e->touched[w]; bits; bits &= bits - 1) {
            i = 64 * w + LOWEST_BIT(bits);
            out[i] += scratch[i];
            scratch[i] = 0.0;
        }
    }
    for (i = e->lexical_dim; i < e->dim; i++) {
        out[i] += scratch[i];
        scratch[i] = 0.0;
    }
}

/* Count the token's stance category, if it has one, in `stance`. The category must be an int
 * in [0, n_stance). */
static inline int
count_stance(const embed_t *e, PyObject *token, uint32_t h, double *stance)
{
    PyObject *category;
    Py_ssize_t k;

    if (stance_get(e->stance, token, h, &category) != ST_OK) {
        return ST_ERROR;
    }
    if (category == NULL) {
        return ST_OK;
    }
    if (!PyLong_CheckExact(category)) {
        return ST_UNHANDLED;
    }
    k = PyLong_AsSsize_t(category);
    if (k == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* an int beyond Py_ssize_t */
        return ST_UNHANDLED;
    }
    if (k < 0 || k >= e->n_stance) { /* numpy would index from the end, or raise */
        return ST_UNHANDLED;
    }
    stance[k] += 1.0;
    return ST_OK;
}

/* The vector of a row (a list or tuple) into out (dim zeros on entry). Its size is read at
 * each step: with a dict of the generic kind, count_stance may run Python code. */
static int
embed_row(const embed_t *e, PyObject *row, double *out)
{
    double *stance = out + e->lexical_dim;
    uint64_t prev = 0;
    Py_ssize_t i;
    int st;

    memset(e->touched, 0, (size_t)e->n_touched * sizeof(uint64_t));
    for (i = 0; i < PySequence_Fast_GET_SIZE(row); i++) {
        PyObject *token = PySequence_Fast_GET_ITEM(row, i);
        uint32_t h;

        if (i >= MAX_ROW_TOKENS || !PyUnicode_CheckExact(token)) {
            return ST_UNHANDLED;
        }
        st = crc_str(token, &h);
        if (st != ST_OK) {
            return st;
        }
        add_feature(e, out, h);
        if (e->bigrams && i > 0) {
            add_feature(e, out, ((prev * BIGRAM_MULT) ^ (h + BIGRAM_MULT)) & MASK32);
        }
        prev = h;
        if (e->stance != NULL) {
            st = count_stance(e, token, h, stance);
            if (st != ST_OK) {
                return st;
            }
        }
    }
    finish_row(e, out, e->stance != NULL);
    return ST_OK;
}

/* The rows of token_lists (a list or tuple) into out (n_rows x dim, zeros). */
static int
embed_rows(const embed_t *e, PyObject *token_lists, double *out, Py_ssize_t n_rows)
{
    Py_ssize_t r;
    int st;

    for (r = 0; r < n_rows; r++) {
        PyObject *row;

        if (r >= PySequence_Fast_GET_SIZE(token_lists)) {
            return ST_UNHANDLED; /* shrunk by Python code run by count_stance */
        }
        row = PySequence_Fast_GET_ITEM(token_lists, r);
        if (!PyList_CheckExact(row) && !PyTuple_CheckExact(row)) {
            return ST_UNHANDLED;
        }
        Py_INCREF(row);
        st = embed_row(e, row, out + r * e->dim);
        Py_DECREF(row);
        if (st != ST_OK) {
            return st;
        }
    }
    return PySequence_Fast_GET_SIZE(token_lists) == n_rows ? ST_OK : ST_UNHANDLED;
}

/* The sum of the rows of token_lists into out (dim zeros on entry), in row order as numpy's
 * np.add.reduce(rows, axis=0): each row is made in `scratch` (dim zeros on entry and on
 * return), then its non-zero elements are added to out. A row's other elements are zeros,
 * whose addition changes nothing (no sum here is ever -0.0). */
static int
embed_rows_sum(const embed_t *e, PyObject *token_lists, double *out, double *scratch)
{
    Py_ssize_t r;
    int st = ST_OK;

    for (r = 0; r < PySequence_Fast_GET_SIZE(token_lists) && st == ST_OK; r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(token_lists, r);

        if (!PyList_CheckExact(row) && !PyTuple_CheckExact(row)) {
            return ST_UNHANDLED;
        }
        Py_INCREF(row);
        st = embed_row(e, row, scratch);
        Py_DECREF(row);
        add_row(e, out, scratch);
    }
    return st;
}

/* --- embed_texts_sum ------------------------------------------------------------------------- */

/*
 * embed_texts_sum is embed_hashed_sum of the texts' informative tokens (tracehound.text's
 * informative_tokens) without those tokens as Python strings: each text of the tokenizer's
 * ASCII path is scanned by scan_tokens (_speedups_tokens.h, text._normalized_tokens' tokens), each
 * token's CRC-32 is computed from its lower-cased characters (which are its UTF-8 bytes), and
 * the stop words and the stance words are told by that CRC in small tables made for the call
 * from the set and the dict (a word matches a token when its CRC is the token's and its
 * characters are the same, which is when the set or the dict would find it). The features then
 * go to the row as embed_row adds them, in the same order.
 */

/* The words of a set or dict that can equal a token (ASCII strs, not empty), by CRC: open
 * addressing over slots that hold the CRC next to the entry's index, at most an eighth full, so
 * that a token that is not a word (most of them) is told by one slot. */
#define WORD_TABLE_KEYS 256
typedef struct {
    uint32_t crc;
    Py_ssize_t len, value; /* value: the stance category (0 for a stop word) */
    const Py_UCS1 *chars;  /* the key's: the set or dict is held while in use */
} word_entry_t;

typedef struct {
    uint32_t crc;
    uint32_t index; /* entry index + 1; 0: empty */
} word_slot_t;

typedef struct {
    size_t mask;                            /* of slots */
    Py_ssize_t n;                           /* entries */
    word_slot_t slots[8 * WORD_TABLE_KEYS];
    word_entry_t entries[WORD_TABLE_KEYS];
} word_table_t;

static void
word_table_init(word_table_t *t, Py_ssize_t n_keys)
{
    size_t size = 64;

    while (size < 8 * (size_t)n_keys) {
        size *= 2;
    }
    t->mask = size - 1;
    t->n = 0;
    memset(t->slots, 0, size * sizeof(word_slot_t));
}

/* Enter the key (an exact str) with its value. Other keys than ASCII, non-empty ones are left
 * out: they never equal a token. */
static void
word_table_add(word_table_t *t, PyObject *key, Py_ssize_t value)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(key);
    const Py_UCS1 *chars;
    uint32_t h;
    size_t i;

    if (!PyUnicode_IS_ASCII(key) || len == 0) {
        return;
    }
    chars = PyUnicode_1BYTE_DATA(key);
    h = ~crc_bytes(0xFFFFFFFFu, chars, len);
    for (i = h & t->mask; t->slots[i].index; i = (i + 1) & t->mask) {
    }
    t->entries[t->n].crc = h;
    t->entries[t->n].len = len;
    t->entries[t->n].value = value;
    t->entries[t->n].chars = chars;
    t->slots[i].crc = h;
    t->slots[i].index = (uint32_t)++t->n;
}

/* Enter a copy of the entry `src` with `value` unless the table has its word already (the
 * first value entered stays). */
static void
word_table_insert(word_table_t *t, const word_entry_t *src, Py_ssize_t value)
{
    size_t i;

    for (i = src->crc & t->mask; t->slots[i].index; i = (i + 1) & t->mask) {
        const word_entry_t *w = &t->entries[t->slots[i].index - 1];

        if (w->crc == src->crc && w->len == src->len &&
            memcmp(w->chars, src->chars, (size_t)src->len) == 0) {
            return;
        }
    }
    t->entries[t->n] = *src;
    t->entries[t->n].value = value;
    t->slots[i].crc = src->crc;
    t->slots[i].index = (uint32_t)++t->n;
}

/* The entry of the token of CRC h, `len` characters at data[start] (lower-cased: c | 0x20), or
 * NULL. Up to 4 bytes, a CRC-32 tells messages of one length apart (the CRC of a 32-bit
 * message is an invertible function of it): equal CRCs and lengths are then equal words. */
static ALWAYS_INLINE const word_entry_t *
word_table_find(const word_table_t *t, uint32_t h, int kind, const void *data, Py_ssize_t start,
                Py_ssize_t len)
{
    size_t i;
    Py_ssize_t j;

    for (i = h & t->mask; t->slots[i].index; i = (i + 1) & t->mask) {
        const word_entry_t *w;

        if (t->slots[i].crc != h) {
            continue;
        }
        w = &t->entries[t->slots[i].index - 1];
        if (w->len != len) {
            continue;
        }
        if (len <= 4) {
            return w;
        }
        for (j = 0; j < len && w->chars[j] == (PyUnicode_READ(kind, data, start + j) | 0x20);
             j++) {
        }
        if (j == len) {
            return w;
        }
    }
    return NULL;
}

/* The stop words of an exact set or frozenset of exact strs, at most WORD_TABLE_KEYS:
 * ST_UNHANDLED for any other. The set's own table is read. */
static int
stop_table_init(word_table_t *t, PyObject *stop_words)
{
    PyObject *iter, *key;
    int st = ST_OK;

    if (!PyFrozenSet_CheckExact(stop_words) && !PySet_CheckExact(stop_words)) {
        return ST_UNHANDLED;
    }
    if (PySet_GET_SIZE(stop_words) > WORD_TABLE_KEYS) {
        return ST_UNHANDLED;
    }
    word_table_init(t, PySet_GET_SIZE(stop_words));
    if ((iter = PyObject_GetIter(stop_words)) == NULL) {
        return ST_ERROR;
    }
    /* the table borrows the words: the caller keeps the set (which holds them) alive */
    while (st == ST_OK && (key = PyIter_Next(iter)) != NULL) {
        if (PyUnicode_CheckExact(key)) {
            word_table_add(t, key, 0);
        }
        else {
            st = ST_UNHANDLED;
        }
        Py_DECREF(key);
    }
    Py_DECREF(iter);
    if (st == ST_OK && PyErr_Occurred()) {
        st = ST_ERROR;
    }
    return st;
}

/* The stance words of a dict of exact strs to ints in [0, n_stance), at most WORD_TABLE_KEYS:
 * ST_UNHANDLED for any other (numpy would index from the end, or raise). */
static int
stance_table_init(word_table_t *t, PyObject *dict, Py_ssize_t n_stance)
{
    Py_ssize_t pos = 0, k;
    PyObject *key, *value;

    if (PyDict_GET_SIZE(dict) > WORD_TABLE_KEYS) {
        return ST_UNHANDLED;
    }
    word_table_init(t, PyDict_GET_SIZE(dict));
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyLong_CheckExact(value)) {
            return ST_UNHANDLED;
        }
        k = PyLong_AsSsize_t(value);
        if (k == -1 && PyErr_Occurred()) {
            PyErr_Clear(); /* an int beyond Py_ssize_t */
            return ST_UNHANDLED;
        }
        if (k < 0 || k >= n_stance) {
            return ST_UNHANDLED;
        }
        word_table_add(t, key, k);
    }
    return ST_OK;
}

/* A text's row in the making: the sink of scan_tokens. */
typedef struct {
    const embed_t *e;
    const word_table_t *stop;
    const word_table_t *stance; /* NULL: no stance block */
    const word_table_t *words;  /* stop and stance words in one table (the stop words' value
                                 * -1), or NULL: then one lookup in each */
    double *row;
    uint64_t prev;        /* the previous informative token's CRC */
    Py_ssize_t n_tokens;  /* informative tokens so far */
} text_row_t;

/* The four characters at p (ASCII, of any kind), each lower-cased (| 0x20), as the
 * little-endian word of their bytes. */
#define LOWER_WORD(p)                                                                          \
    ((uint32_t)(uint8_t)((p)[0] | 0x20) | ((uint32_t)(uint8_t)((p)[1] | 0x20) << 8) |          \
     ((uint32_t)(uint8_t)((p)[2] | 0x20) << 16) | ((uint32_t)(uint8_t)((p)[3] | 0x20) << 24))

/* crc_bytes of the n ASCII characters at p lower-cased (| 0x20), p a pointer to characters of
 * one kind, without the copy: slicing by 8, then 4, then bytes, as crc_bytes. */
#define CRC_LOWER_CHARS(c, p, n)                                                               \
    do {                                                                                       \
        for (; (n) >= 8; (n) -= 8, (p) += 8) {                                                 \
            uint32_t lo_ = (c) ^ LOWER_WORD(p), hi_ = LOWER_WORD((p) + 4);                     \
                                                                                               \
            (c) = crc_table[7][lo_ & 0xff] ^ crc_table[6][(lo_ >> 8) & 0xff] ^                 \
                  crc_table[5][(lo_ >> 16) & 0xff] ^ crc_table[4][lo_ >> 24] ^                 \
                  crc_table[3][hi_ & 0xff] ^ crc_table[2][(hi_ >> 8) & 0xff] ^                 \
                  crc_table[1][(hi_ >> 16) & 0xff] ^ crc_table[0][hi_ >> 24];                  \
        }                                                                                      \
        if ((n) >= 4) {                                                                        \
            uint32_t w_ = (c) ^ LOWER_WORD(p);                                                 \
                                                                                               \
            (c) = crc_table[3][w_ & 0xff] ^ crc_table[2][(w_ >> 8) & 0xff] ^                   \
                  crc_table[1][(w_ >> 16) & 0xff] ^ crc_table[0][w_ >> 24];                    \
            (n) -= 4;                                                                          \
            (p) += 4;                                                                          \
        }                                                                                      \
        for (; (n) > 0; (n)--, (p)++) {                                                        \
            (c) = CRC_BYTE((c), (uint8_t)(*(p) | 0x20));                                       \
        }                                                                                      \
    } while (0)

/* CRC-32 of the lower-cased characters data[start:start + len] (ASCII: their UTF-8). */
static ALWAYS_INLINE uint32_t
crc_token(int kind, const void *data, Py_ssize_t start, Py_ssize_t len)
{
    uint8_t buf[64];
    uint32_t c = 0xFFFFFFFFu;
    Py_ssize_t done, m, j;

    /* a token's characters are ASCII (the tokenizer's ASCII path): each is its UTF-8 byte */
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data + start;
        Py_ssize_t n = len;

        CRC_LOWER_CHARS(c, p, n);
        return ~c;
    }
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data + start;
        Py_ssize_t n = len;

        CRC_LOWER_CHARS(c, p, n);
        return ~c;
    }
    if (len <= 16) { /* most tokens: byte at a time, without the copy */
        for (j = 0; j < len; j++) {
            c = CRC_BYTE(c, PyUnicode_READ(kind, data, start + j) | 0x20);
        }
        return ~c;
    }
    for (done = 0; done < len; done += m) {
        m = len - done < 64 ? len - done : 64;
        for (j = 0; j < m; j++) {
            buf[j] = (uint8_t)(PyUnicode_READ(kind, data, start + done + j) | 0x20);
        }
        c = crc_bytes(c, buf, m);
    }
    return ~c;
}

static ALWAYS_INLINE int
text_row_sink(void *ctx, int kind, const void *data, Py_ssize_t start, Py_ssize_t len)
{
    text_row_t *r = (text_row_t *)ctx;
    const embed_t *e = r->e;
    uint32_t h = crc_token(kind, data, start, len);
    const word_entry_t *w = NULL;

    if (r->words != NULL) {
        w = word_table_find(r->words, h, kind, data, start, len);
        if (w != NULL && w->value < 0) {
            return ST_OK; /* a stop word: not informative */
        }
    }
    else if (word_table_find(r->stop, h, kind, data, start, len) != NULL) {
        return ST_OK; /* a stop word: not informative */
    }
    if (r->n_tokens >= MAX_ROW_TOKENS) {
        return ST_UNHANDLED;
    }
    add_feature(e, r->row, h);
    if (e->bigrams && r->n_tokens > 0) {
        add_feature(e, r->row, ((r->prev * BIGRAM_MULT) ^ (h + BIGRAM_MULT)) & MASK32);
    }
    r->prev = h;
    r->n_tokens++;
    if (r->words != NULL) {
        if (w != NULL) { /* a stance word */
            r->row[e->lexical_dim + w->value] += 1.0;
        }
    }
    else if (r->stance != NULL &&
             (w = word_table_find(r->stance, h, kind, data, start, len)) != NULL) {
        r->row[e->lexical_dim + w->value] += 1.0;
    }
    return ST_OK;
}

/* The row of the text (an exact str) into r->row (dim zeros on entry): ST_UNHANDLED if the
 * text is off the tokenizer's ASCII path. */
static int
embed_text(text_row_t *r, PyObject *text)
{
    const void *data;
    Py_ssize_t n;
    int st;

#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) { /* a legacy string (deprecated APIs, before 3.12) */
        return ST_ERROR;
    }
#endif
    data = PyUnicode_DATA(text);
    n = PyUnicode_GET_LENGTH(text);
    memset(r->e->touched, 0, (size_t)r->e->n_touched * sizeof(uint64_t));
    r->prev = 0;
    r->n_tokens = 0;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        st = scan_tokens(PyUnicode_1BYTE_KIND, data, n, text_row_sink, r);
        break;
    case PyUnicode_2BYTE_KIND:
        st = scan_tokens(PyUnicode_2BYTE_KIND, data, n, text_row_sink, r);
        break;
    default:
        st = scan_tokens(PyUnicode_4BYTE_KIND, data, n, text_row_sink, r);
        break;
    }
    return st;
}

/* finish_row, then add_row into out, in two passes over the row's buckets rather than three:
 * the same values added to out (each element x / norm, as finish_row makes it), and the row
 * left zero. */
static void
add_finished_row(const embed_t *e, double *out, double *x, int has_stance)
{
    double sum = 0.0, norm;
    uint64_t bits;
    Py_ssize_t w, i;

    for (w = 0; w < e->n_touched; w++) {
        for (bits = e->touched[w]; bits; bits &= bits - 1) {
            i = 64 * w + LOWEST_BIT(bits);
            sum += x[i] * x[i];
        }
    }
    norm = sqrt(sum);
    if (!(norm > 0.0)) {
        /* a row without lexical content (its buckets all zero) has no stance either: adding
         * its zeros would change nothing (no sum here is ever -0.0) */
        for (w = 0; w < e->n_touched; w++) {
            for (bits = e->touched[w]; bits; bits &= bits - 1) {
                x[64 * w + LOWEST_BIT(bits)] = 0.0;
            }
        }
        memset(x + e->lexical_dim, 0, (size_t)e->n_stance * sizeof(double));
        return;
    }
    for (w = 0; w < e->n_touched; w++) {
        for (bits = e->touched[w]; bits; bits &= bits - 1) {
            i = 64 * w + LOWEST_BIT(bits);
            out[i] += x[i] / norm;
            x[i] = 0.0;
        }
    }
    if (has_stance) {
        normalize(x + e->lexical_dim, e->n_stance);
    }
    for (i = e->lexical_dim; i < e->dim; i++) {
        out[i] += x[i];
        x[i] = 0.0;
    }
}

/* The sum of the rows of the texts (a list or tuple of exact strs) into out (dim zeros on
 * entry), in order, as embed_rows_sum adds them. No Python code runs. */
static int
embed_texts_rows_sum(text_row_t *r, PyObject *texts, double *out)
{
    Py_ssize_t i;
    int st;

    for (i = 0; i < PySequence_Fast_GET_SIZE(texts); i++) {
        PyObject *text = PySequence_Fast_GET_ITEM(texts, i);
        if (!PyUnicode_CheckExact(text)) {
            return ST_UNHANDLED;
        }
        st = embed_text(r, text);
        if (st != ST_OK) {
            return st;
        }
        add_finished_row(r->e, out, r->row, r->stance != NULL);
    }
    return ST_OK;
}

/* The tables of the last stop words and stance words embed_texts_sum was given, kept for the
 * next calls (the same objects, called after call): the frozenset held (it cannot change), and
 * the dict with a list of its items, which holds the words the table borrows and tells whether
 * the dict still holds them (the same key and value objects, in the same order). */
static struct {
    PyObject *stop_words;   /* a frozenset, or NULL */
    word_table_t stop;
    PyObject *stance_index; /* a dict, or NULL */
    PyObject *stance_items; /* its items when the table was made */
    Py_ssize_t n_stance;
    word_table_t stance;
    int has_both;      /* is `both` made from the kept stop and stance tables? */
    word_table_t both; /* their words in one table, the stop words' value -1 */
} kept_words;

/* Does the dict hold the items of the list (the same objects, in order)? No Python code runs. */
static int
same_items(PyObject *dict, PyObject *items)
{
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;

    if (PyDict_GET_SIZE(dict) != PyList_GET_SIZE(items)) {
        return 0;
    }
    while (PyDict_Next(dict, &pos, &key, &value)) {
        PyObject *item = PyList_GET_ITEM(items, i++);
        if (PyTuple_GET_ITEM(item, 0) != key || PyTuple_GET_ITEM(item, 1) != value) {
            return 0;
        }
    }
    return 1;
}

/* The stop-word table and the stance table (NULL when stance_index is None) of
 * embed_texts_sum: the kept ones when made from the same objects, else made (and kept, for a
 * frozenset and a dict; a set's table is made into *words, which the caller frees); and, when
 * both are the kept ones, *both: their words in one table (NULL otherwise). */
static int
word_tables(PyObject *stop_words, PyObject *stance_index, Py_ssize_t n_stance,
            const word_table_t **stop, const word_table_t **stance, word_table_t **words,
            const word_table_t **both)
{
    int st;

    if (stop_words != kept_words.stop_words) {
        if (PyFrozenSet_CheckExact(stop_words)) {
            kept_words.has_both = 0;
            Py_CLEAR(kept_words.stop_words);
            st = stop_table_init(&kept_words.stop, stop_words);
            if (st != ST_OK) {
                return st;
            }
            kept_words.stop_words = Py_NewRef(stop_words);
        }
        else {
            *words = PyMem_Malloc(sizeof(word_table_t));
            if (*words == NULL) {
                PyErr_NoMemory();
                return ST_ERROR;
            }
            st = stop_table_init(*words, stop_words);
            if (st != ST_OK) {
                return st;
            }
            *stop = *words;
        }
    }
    if (*stop == NULL) {
        *stop = &kept_words.stop;
    }
    if (stance_index == Py_None) {
        return ST_OK;
    }
    if (stance_index != kept_words.stance_index || n_stance != kept_words.n_stance ||
        !same_items(stance_index, kept_words.stance_items)) {
        /* the items first: making the list may run Python code (a collection); the table is
         * then made from the same dict, and no Python code runs until the call returns */
        PyObject *items = PyDict_Items(stance_index);

        if (items == NULL) {
            return ST_ERROR;
        }
        kept_words.has_both = 0;
        Py_CLEAR(kept_words.stance_index);
        Py_XSETREF(kept_words.stance_items, items);
        st = stance_table_init(&kept_words.stance, stance_index, n_stance);
        if (st != ST_OK) {
            return st;
        }
        kept_words.stance_index = Py_NewRef(stance_index);
        kept_words.n_stance = n_stance;
    }
    *stance = &kept_words.stance;
    if (*stop == &kept_words.stop && both != NULL) {
        /* one lookup per token rather than two: the kept tables' words in one table */
        if (!kept_words.has_both &&
            kept_words.stop.n + kept_words.stance.n <= WORD_TABLE_KEYS) {
            Py_ssize_t i;

            word_table_init(&kept_words.both, kept_words.stop.n + kept_words.stance.n);
            for (i = 0; i < kept_words.stop.n; i++) {
                word_table_insert(&kept_words.both, &kept_words.stop.entries[i], -1);
            }
            for (i = 0; i < kept_words.stance.n; i++) {
                word_table_insert(&kept_words.both, &kept_words.stance.entries[i],
                                  kept_words.stance.entries[i].value);
            }
            kept_words.has_both = 1;
        }
        if (kept_words.has_both) {
            *both = &kept_words.both;
        }
    }
    return ST_OK;
}

/* A zero row for embed_texts_sum, zeros again after each call (no Python code runs while it is
 * in use). */
#define TEXT_SCRATCH 1024
static double text_scratch[TEXT_SCRATCH];

PyDoc_STRVAR(embed_hashed_doc,
"embed_hashed($module, token_lists, out, lexical_dim, bigrams, stance_index, /)\n"
"--\n"
"\n"
"tracehound.drift._embed.HashingEmbedder.embed_tokens(token_lists) into `out`.\n"
"\n"
"`out`: a writable C-contiguous 2-D float64 buffer (a numpy array) of shape\n"
"(len(token_lists), dim), whatever it holds. Row r gets the vector of token_lists[r]: the\n"
"signed feature hashing of its tokens' CRC-32 (unigrams and, if `bigrams` is true, the\n"
"bigrams of adjacent tokens) into out[r, :lexical_dim], L2-normalized; then, if\n"
"`stance_index` is a dict (token -> category), the counts of the categories of its tokens in\n"
"out[r, lexical_dim:], L2-normalized, for rows whose lexical block is not zero. Every other\n"
"element is zero (all of out[:, lexical_dim:] when `stance_index` is None).\n"
"\n"
"Returns True, or None with `out` all zeros for input it does not handle exactly: token_lists\n"
"or a row not a list or tuple, a token not a str (subclasses included), a token with a lone\n"
"surrogate (its UTF-8 encoding raises), a category not an int in [0, dim - lexical_dim), a\n"
"row of more than 2**25 tokens, lexical_dim of 2**32 or more. Raises TypeError or ValueError\n"
"for bad arguments (out not such a buffer or of another shape, lexical_dim not in [1, dim],\n"
"stance_index not a dict or None).");

PyDoc_STRVAR(embed_hashed_sum_doc,
"embed_hashed_sum($module, token_lists, out, lexical_dim, bigrams, stance_index, /)\n"
"--\n"
"\n"
"np.add.reduce(embed_hashed's rows, axis=0) into `out`, a writable C-contiguous 1-D float64\n"
"buffer of dim elements: the rows of embed_hashed(token_lists, ...) added in order, the same\n"
"bits, without the rows' matrix. Returns True, or None with `out` all zeros for the input\n"
"embed_hashed leaves to numpy; raises as it does for bad arguments.");

PyDoc_STRVAR(embed_texts_sum_doc,
"embed_texts_sum($module, texts, out, lexical_dim, bigrams, stance_index, stop_words, /)\n"
"--\n"
"\n"
"embed_hashed_sum of the texts' informative tokens (their tokens, as text._normalized_tokens\n"
"makes them, but those in `stop_words`) into `out`, the same bits, without the tokens as\n"
"Python strings. Returns True, or None with `out` all zeros for input it leaves to Python:\n"
"texts not a list or tuple, a text not a str (subclasses included) or off the tokenizer's\n"
"ASCII path (a character neither ASCII nor typographic), stop_words not an exact set or\n"
"frozenset of strs, stance_index not a dict of strs to ints in [0, dim - lexical_dim), either\n"
"of more than 256 words, a text of more than 2**25 informative tokens, lexical_dim of 2**32\n"
"or more. Raises as embed_hashed_sum does for bad arguments, and TypeError if stop_words is\n"
"not a set or frozenset.");

/* out[0:n] = 0.0, in vector stores (a memset of that size may be a string instruction, one
 * step per byte). */
static void
zero_doubles(double *out, Py_ssize_t n)
{
    Py_ssize_t i = 0;

#if defined(__GNUC__)
    typedef double v2z __attribute__((vector_size(16)));
    const v2z zero = {0.0, 0.0};

    for (; i + 8 <= n; i += 8) {
        /* through memcpy: out is only 8-byte aligned */
        memcpy(out + i, &zero, sizeof zero);
        memcpy(out + i + 2, &zero, sizeof zero);
        memcpy(out + i + 4, &zero, sizeof zero);
        memcpy(out + i + 6, &zero, sizeof zero);
    }
#endif
    for (; i < n; i++) {
        out[i] = 0.0;
    }
}

/* The modes of embed_common. */
#define MODE_ROWS 0      /* embed_hashed */
#define MODE_SUM 1       /* embed_hashed_sum */
#define MODE_TEXTS_SUM 2 /* embed_texts_sum */

static PyObject *
embed_common(PyObject *const *args, Py_ssize_t nargs, int mode)
{
    static const char *const names[] = {"embed_hashed", "embed_hashed_sum", "embed_texts_sum"};
    const char *name = names[mode];
    const Py_ssize_t n_args = mode == MODE_TEXTS_SUM ? 6 : 5;
    const int sum = mode != MODE_ROWS;
    PyObject *token_lists;
    Py_buffer view;
    Py_ssize_t lexical_dim, n_rows;
    uint64_t touched_stack[64];
    double scratch_stack[1024], *scratch = NULL;
    stance_t stance; /* about 7 kB */
    word_table_t *words = NULL; /* embed_texts_sum's tables when not the kept ones */
    const word_table_t *stop_table = NULL, *stance_table = NULL, *both_table = NULL;
    embed_t e;
    int bigrams, st;

    if (nargs != n_args) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments (%zd given)", name,
                     n_args, nargs);
        return NULL;
    }
    token_lists = args[0];
    lexical_dim = PyLong_AsSsize_t(args[2]);
    if (lexical_dim == -1 && PyErr_Occurred()) {
        return NULL;
    }
    bigrams = PyObject_IsTrue(args[3]);
    if (bigrams < 0) {
        return NULL;
    }
    if (args[4] != Py_None && !PyDict_CheckExact(args[4])) {
        PyErr_Format(PyExc_TypeError, "%s() stance_index must be a dict or None, not %.100s",
                     name, Py_TYPE(args[4])->tp_name);
        return NULL;
    }
    if (mode == MODE_TEXTS_SUM && !PyAnySet_Check(args[5])) {
        PyErr_Format(PyExc_TypeError, "%s() stop_words must be a set or frozenset, not %.100s",
                     name, Py_TYPE(args[5])->tp_name);
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        return NULL;
    }
    if (view.ndim != (sum ? 1 : 2) || view.itemsize != (Py_ssize_t)sizeof(double) ||
        view.format == NULL || strcmp(view.format, "d") != 0) {
        PyErr_Format(PyExc_TypeError, "%s() out must be a %d-D C-contiguous float64 buffer",
                     name, sum ? 1 : 2);
        PyBuffer_Release(&view);
        return NULL;
    }
    n_rows = sum ? 1 : view.shape[0];
    e.dim = view.shape[sum ? 0 : 1];
    if (lexical_dim < 1 || lexical_dim > e.dim) {
        PyErr_Format(PyExc_ValueError,
                     "%s() lexical_dim must be within [1, %zd] (out's columns), got %zd", name,
                     e.dim, lexical_dim);
        PyBuffer_Release(&view);
        return NULL;
    }
    if (!sum && (PyList_CheckExact(token_lists) || PyTuple_CheckExact(token_lists)) &&
        PySequence_Fast_GET_SIZE(token_lists) != n_rows) {
        PyErr_Format(PyExc_ValueError, "embed_hashed() out has %zd rows for %zd token lists",
                     n_rows, PySequence_Fast_GET_SIZE(token_lists));
        PyBuffer_Release(&view);
        return NULL;
    }
    zero_doubles((double *)view.buf, view.len / (Py_ssize_t)sizeof(double));
    if (!PyList_CheckExact(token_lists) && !PyTuple_CheckExact(token_lists)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }

    if ((uint64_t)lexical_dim > MASK32) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE; /* rows of 32 GB */
    }
    e.lexical_dim = lexical_dim;
    e.n_stance = e.dim - lexical_dim;
    e.bigrams = bigrams;
    bucket_mod_init(&e.mod, (uint64_t)lexical_dim);
    e.n_touched = (lexical_dim + 63) / 64;
    e.touched = touched_stack;
    if (e.n_touched > (Py_ssize_t)(sizeof(touched_stack) / sizeof(uint64_t))) {
        e.touched = PyMem_Malloc((size_t)e.n_touched * sizeof(uint64_t));
        if (e.touched == NULL) {
            PyBuffer_Release(&view);
            return PyErr_NoMemory();
        }
    }
    e.stance = NULL;
    st = ST_OK;
    if (mode == MODE_TEXTS_SUM && e.dim <= TEXT_SCRATCH) {
        scratch = text_scratch; /* zeros */
    }
    else if (sum) {
        scratch = scratch_stack;
        if (e.dim > (Py_ssize_t)(sizeof(scratch_stack) / sizeof(double))) {
            scratch = PyMem_Calloc((size_t)e.dim, sizeof(double));
            if (scratch == NULL) {
                PyErr_NoMemory();
                st = ST_ERROR;
            }
        }
        else {
            memset(scratch, 0, (size_t)e.dim * sizeof(double));
        }
    }
    if (st == ST_OK && mode == MODE_TEXTS_SUM) {
        st = word_tables(args[5], args[4], e.n_stance, &stop_table, &stance_table, &words,
                         &both_table);
    }
    else if (st == ST_OK && args[4] != Py_None) {
        st = stance_init(&stance, args[4]);
        e.stance = &stance;
    }
    if (st == ST_OK && mode == MODE_TEXTS_SUM) {
        /* no Python code runs: the tables borrow the set's and the dict's strings */
        text_row_t r;
        r.e = &e;
        r.stop = stop_table;
        r.stance = stance_table;
        r.words = both_table;
        r.row = scratch;
        st = embed_texts_rows_sum(&r, token_lists, (double *)view.buf);
        if (st != ST_OK && scratch == text_scratch) {
            memset(text_scratch, 0, (size_t)e.dim * sizeof(double)); /* zeros for the next call */
        }
    }
    else if (st == ST_OK) {
        /* held, as the rows: Python code run by a dict lookup could drop them */
        Py_INCREF(token_lists);
        Py_INCREF(args[4]);
        if (sum) {
            st = embed_rows_sum(&e, token_lists, (double *)view.buf, scratch);
        }
        else {
            st = embed_rows(&e, token_lists, (double *)view.buf, n_rows);
        }
        Py_DECREF(args[4]);
        Py_DECREF(token_lists);
    }
    if (e.touched != touched_stack) {
        PyMem_Free(e.touched);
    }
    if (scratch != NULL && scratch != scratch_stack && scratch != text_scratch) {
        PyMem_Free(scratch);
    }
    PyMem_Free(words);
    if (st != ST_OK) {
        memset(view.buf, 0, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    if (st == ST_ERROR) {
        return NULL;
    }
    if (st == ST_UNHANDLED) {
        Py_RETURN_NONE;
    }
    Py_RETURN_TRUE;
}

static PyObject *
embed_hashed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return embed_common(args, nargs, MODE_ROWS);
}

static PyObject *
embed_hashed_sum(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return embed_common(args, nargs, MODE_SUM);
}

static PyObject *
embed_texts_sum(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return embed_common(args, nargs, MODE_TEXTS_SUM);
}

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef embed_methods[] = {
    {"embed_hashed", (PyCFunction)(void (*)(void))embed_hashed, METH_FASTCALL, embed_hashed_doc},
    {"embed_hashed_sum", (PyCFunction)(void (*)(void))embed_hashed_sum, METH_FASTCALL,
     embed_hashed_sum_doc},
    {"embed_texts_sum", (PyCFunction)(void (*)(void))embed_texts_sum, METH_FASTCALL,
     embed_texts_sum_doc},
    {"crc32_utf8", crc32_utf8, METH_O, crc32_utf8_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_embed(PyObject *module)
{
    crc_init();
    return PyModule_AddFunctions(module, embed_methods);
}
