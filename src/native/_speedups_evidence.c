/*
 * tracehound._speedups: EvidenceCore, the state and loops of the evidence index in C.
 *
 * tracehound.evaluators._evidence_index.EvidenceIndex (read its module docstring first) stays the
 * reference and the fallback. An EvidenceCore holds the same index with tokens interned to ints:
 * prefix and full postings are arrays per token id (a token's document frequency is the length
 * of its full posting), a class (units of one normalized text) is an array of unique informative
 * token ids with its threshold and the array of all its token ids (its normalized text), the
 * union-find of sources into repeated-evidence groups is two int arrays. Candidate sets and
 * overlap counts use mark arrays stamped per operation instead of Python sets. Every decision is
 * the Python index's:
 *
 * - a new class indexes its n - t + 1 rarest tokens by current document frequency (the number of
 *   classes holding the token, this one included), ties in text order of first occurrence, as the
 *   stable sort of `_rarest` does;
 * - the candidates of a text or of a new class are the classes of the prefix postings of its
 *   tokens, plus, for a new class whose threshold is below the largest one seen, the classes of
 *   the full postings of its indexed tokens (exactly the sets `_candidates` and `_link` build);
 * - a candidate matches by `overlap >= threshold and (threshold > 1 or containment)`, containment
 *   being Unit.matches' `f" {a} " in f" {b} "` on normalized texts (see `contained`);
 * - `_link` skips the classes whose group already holds the new source: `_group_classes` of a
 *   group are exactly the classes whose first unit's source is in it (a class is added to the
 *   group of its first unit's source when created, and group sets merge as groups do), so
 *   subtracting them is the same as the in-loop check `group[other_source] == group[source]`.
 *   Groups are the connected components of the pairs found to match, whatever the order of the
 *   checks, so the union-find's own choices (union by size, path halving) change nothing.
 *
 * Tokens are interned by their characters (a vocabulary of the core's own: no str object per
 * token), so texts of the tokenizer's ASCII path never become Python objects: add_text cuts a
 * source's text into units and tokenizes them here (the segmenter and tokenizer of
 * tracehound.text's ASCII path, _speedups_tokens.h, run over a lower-cased byte copy of the
 * text, see lower_text), match_text tokenizes an output and matches it in the same pass. The
 * fields of such a unit (its text, normalized text and informative tokens, those of the Unit
 * that TextCache.units makes) are made only when asked for (`units`), from the source's text,
 * the unit's bounds in it and its class's tokens. Normalized texts are compared as sequences of
 * token ids: normalized is " ".join(tokens), so two are equal exactly when their sequences are,
 * and " a " is in " b " exactly when a's sequence is a run of b's (`contained`). Texts of other
 * paths come as (normalized, informative tokens) pairs (add_units) and as informative tokens
 * and normalized text (match), made by the Python code; their tokens are interned by their
 * characters too (a normalized text's tokens are its pieces between spaces), into the same
 * vocabulary. The stop words are interned first, flagged: a token interned later is
 * informative.
 *
 * The core takes and returns plain values only (strs, tuples, ints, lists of them): it reads no
 * attribute of a Python object and makes none but those. The matches come back as unit ids; the
 * Python index records the reuse positions on its EvidenceSource objects and makes the Unit
 * objects itself.
 *
 * The GIL is held throughout. A call that re-enters the same core (only possible through Python
 * code: a finalizer run by a garbage collection that an allocation triggers, or the iterator of
 * match's tokens) raises RuntimeError rather than see arrays being changed.
 *
 * Memory is allocated as the index grows (nothing before the first unit): the engine keeps one
 * index per trace, for up to thousands of traces at a time. A text reserves its share of room at
 * once (reserve_for_text), and the arrays of a core that goes are kept, emptied, for the next
 * one (a small pool, see pool_give).
 */
#include "_speedups.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_speedups_tokens.h"

/* A growable array of ids (scratch lists). */
typedef struct {
    int32_t *items;
    int32_t len, cap;
} ivec_t;

/* A posting list: class ids, ascending. Most tokens of a trace are in one or two classes, so
 * that many ids live in the struct itself (cap == 0), without an allocation of their own. */
#define POSTING_INLINE 2
typedef struct {
    int32_t len, cap;
    union {
        int32_t *heap;                 /* cap > 0 */
        int32_t here[POSTING_INLINE];  /* cap == 0 */
    } ids;
} posting_t;

/* A slot of the open-addressing tables (tokens by characters, classes by token ids). */
typedef struct {
    uint32_t hash;
    int32_t id; /* -1: empty */
} slot_t;

typedef struct {
    slot_t *slots;
    Py_ssize_t mask; /* capacity - 1 (a power of 2), or 0 before the first key */
    Py_ssize_t used;
} table_t;

typedef struct {
    PyObject_HEAD
    PyObject *stop_words; /* the set of stop words (strs) */
    PyObject *vocabulary_from; /* the core whose stop words to copy (see `fresh`), or NULL */

    /* the vocabulary: token id by characters */
    table_t words;
    char *chars;          /* the tokens' characters, one after the other */
    Py_ssize_t n_chars, cap_chars;

    /* per token id */
    Py_ssize_t n_tokens, cap_tokens;
    uint64_t *word_key;   /* its first 8 bytes (see first_bytes) */
    Py_ssize_t *word_off; /* its characters: chars[word_off:word_off + word_len * word_kind] */
    int32_t *word_len;
    uint8_t *word_kind;
    uint8_t *word_stop;   /* a stop word (not informative) */
    posting_t *prefix;    /* classes indexed under the token */
    posting_t *full;      /* every class holding the token (its length: the token's df) */
    uint32_t *token_mark; /* == stamp: the token is in the current text or unit */

    /* per class id; classes by their token ids (their normalized text) */
    table_t class_of;
    Py_ssize_t n_classes, cap_classes;
    int32_t *threshold;   /* Unit.threshold of its units */
    int32_t *tok_start;   /* its unique informative token ids, in text order: */
    int32_t *tok_len;     /* class_tokens.items[tok_start:tok_start + tok_len] */
    int32_t *full_start;  /* all its token ids, in order (the normalized text): */
    int32_t *full_len;    /* full_tokens.items[full_start:full_start + full_len] */
    int32_t *first_unit;  /* its units: first_unit, then next_unit[...] until -1, ascending */
    int32_t *last_unit;
    uint32_t *class_mark; /* == stamp: already a candidate of the current operation */
    ivec_t class_tokens, full_tokens;
    int32_t max_threshold;

    /* per unit id */
    Py_ssize_t n_units, cap_units;
    int32_t *owner;       /* source index */
    int32_t *next_unit;   /* next unit of the same class, -1 at the end */
    int32_t *unit_class;
    Py_ssize_t *text_start; /* its text: source_text[owner][text_start:text_end] (add_text) */
    Py_ssize_t *text_end;

    /* per source: union-find; the text of add_text's sources (else NULL) */
    Py_ssize_t n_sources, cap_sources;
    int32_t *parent;
    int32_t *size;
    PyObject **source_text;

    uint32_t stamp;
    ivec_t candidates, matched, rarest, seq, informative;
    uint64_t *keys; /* sort keys of `_rarest` */
    Py_ssize_t cap_keys;
    char *scratch;  /* the text being read, lowered (see lower_text) */
    Py_ssize_t cap_scratch;
    /* add_text's segments: pairs of start and end in the text, the current one and its source */
    const Py_ssize_t *segments;
    Py_ssize_t segment;
    int32_t segment_source;
    int busy;
} EvidenceCore;

/* --- arrays ---------------------------------------------------------------------------------- */

/* Room for `more` ids past v->len; -1 with MemoryError. */
static int
ivec_grow(ivec_t *v, int32_t more)
{
    int32_t cap = v->cap ? v->cap : 4, *items;
    while (cap - v->len < more) {
        if (cap > INT32_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    items = PyMem_Realloc(v->items, (size_t)cap * sizeof(int32_t));
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    v->items = items;
    v->cap = cap;
    return 0;
}

static ALWAYS_INLINE int
ivec_push(ivec_t *v, int32_t x)
{
    if (v->len == v->cap && ivec_grow(v, 1) < 0) {
        return -1;
    }
    v->items[v->len++] = x;
    return 0;
}

/* Append ids[0:n]. */
static int
ivec_extend(ivec_t *v, const int32_t *ids, int32_t n)
{
    if (v->cap - v->len < n && ivec_grow(v, n) < 0) {
        return -1;
    }
    if (n > 0) {
        memcpy(v->items + v->len, ids, (size_t)n * sizeof(int32_t));
    }
    v->len += n;
    return 0;
}

static inline const int32_t *
posting_ids(const posting_t *p)
{
    return p->cap ? p->ids.heap : p->ids.here;
}

static int posting_grow(posting_t *p, int32_t x);

static ALWAYS_INLINE int
posting_push(posting_t *p, int32_t x)
{
    if (p->cap == 0 && p->len < POSTING_INLINE) {
        p->ids.here[p->len++] = x;
        return 0;
    }
    if (p->cap != 0 && p->len < p->cap) {
        p->ids.heap[p->len++] = x;
        return 0;
    }
    return posting_grow(p, x);
}

/* posting_push, when the ids must move to a (larger) array of their own. */
static int
posting_grow(posting_t *p, int32_t x)
{
    {
        int32_t cap, *ids;
        if (p->cap > INT32_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap = p->cap ? 2 * p->cap : 4 * POSTING_INLINE;
        ids = PyMem_Malloc((size_t)cap * sizeof(int32_t));
        if (ids == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(ids, posting_ids(p), (size_t)p->len * sizeof(int32_t));
        if (p->cap) {
            PyMem_Free(p->ids.heap);
        }
        p->ids.heap = ids;
        p->cap = cap;
    }
    p->ids.heap[p->len++] = x;
    return 0;
}

/* `array` (of `old` elements of `elem` bytes) resized to `cap` elements, the new ones zeroed if
 * `zero`; NULL with MemoryError (`array` is then unchanged). */
static void *
grow(void *array, size_t elem, Py_ssize_t old, Py_ssize_t cap, int zero)
{
    char *grown;
    if ((size_t)cap > (size_t)PY_SSIZE_T_MAX / elem) {
        PyErr_NoMemory();
        return NULL;
    }
    grown = PyMem_Realloc(array, (size_t)cap * elem);
    if (grown == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (zero) {
        memset(grown + (size_t)old * elem, 0, (size_t)(cap - old) * elem);
    }
    return grown;
}

/* self->field grown from `old` to `cap` elements, the new ones zeroed (for the arrays read
 * before they are written: postings, marks, source texts), or return -1 from the calling
 * function. */
#define GROW(field) GROW_(field, 1)
/* the same for the arrays written before they are read (their elements' fields are set when
 * the token, class, unit or source is added): not zeroed */
#define GROW_UNZEROED(field) GROW_(field, 0)
#define GROW_(field, zero)                                                       \
    do {                                                                         \
        void *grown_ = grow(self->field, sizeof(*self->field), old, cap, zero);  \
        if (grown_ == NULL) {                                                    \
            return -1;                                                           \
        }                                                                        \
        self->field = grown_;                                                    \
    } while (0)

/* The capacity for one more element than `n`, or -1 with an exception: ids are int32. A failed
 * grow below leaves the arrays grown so far larger than their capacity says, which is harmless
 * (the next call grows them again). */
static Py_ssize_t
next_cap(Py_ssize_t n, Py_ssize_t cap, Py_ssize_t first)
{
    if (n < cap) {
        return cap;
    }
    if (n >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "EvidenceCore: more than 2**31 - 1 entries");
        return -1;
    }
    cap = cap ? 2 * cap : first;
    return cap > INT32_MAX ? INT32_MAX : cap;
}

/* The capacity for `want` elements (doubling from `cap`, or from `first`), at most INT32_MAX. */
static Py_ssize_t
cap_for(Py_ssize_t want, Py_ssize_t cap, Py_ssize_t first)
{
    if (want <= cap) {
        return cap;
    }
    cap = cap ? cap : first;
    while (cap < want && cap < INT32_MAX) {
        cap *= 2;
    }
    return cap > INT32_MAX ? INT32_MAX : cap;
}

static int grow_tokens(EvidenceCore *self, Py_ssize_t cap);

static int
reserve_token(EvidenceCore *self)
{
    Py_ssize_t cap = next_cap(self->n_tokens, self->cap_tokens, 64);
    return cap < 0 ? -1 : grow_tokens(self, cap);
}

/* The arrays per token grown to `cap` elements (if larger). Not zeroed: a token's postings and
 * mark are set when it is added (clear_token), which costs less than zeroing the room ahead. */
static int
grow_tokens(EvidenceCore *self, Py_ssize_t cap)
{
    Py_ssize_t old = self->cap_tokens;
    if (cap == old) {
        return 0;
    }
    GROW_UNZEROED(word_key);
    GROW_UNZEROED(word_off);
    GROW_UNZEROED(word_len);
    GROW_UNZEROED(word_kind);
    GROW_UNZEROED(word_stop);
    GROW_UNZEROED(prefix);
    GROW_UNZEROED(full);
    GROW_UNZEROED(token_mark);
    self->cap_tokens = cap;
    return 0;
}

/* A new token's postings empty, its mark none. */
static ALWAYS_INLINE void
clear_token(EvidenceCore *self, Py_ssize_t id)
{
    memset(&self->prefix[id], 0, sizeof(posting_t));
    memset(&self->full[id], 0, sizeof(posting_t));
    self->token_mark[id] = 0;
}

static int grow_classes(EvidenceCore *self, Py_ssize_t cap);

static int
reserve_class(EvidenceCore *self)
{
    Py_ssize_t cap = next_cap(self->n_classes, self->cap_classes, 16);
    return cap < 0 ? -1 : grow_classes(self, cap);
}

/* The arrays per class grown to `cap` elements (if larger). */
static int
grow_classes(EvidenceCore *self, Py_ssize_t cap)
{
    Py_ssize_t old = self->cap_classes;
    if (cap == old) {
        return 0;
    }
    GROW_UNZEROED(threshold);
    GROW_UNZEROED(tok_start);
    GROW_UNZEROED(tok_len);
    GROW_UNZEROED(full_start);
    GROW_UNZEROED(full_len);
    GROW_UNZEROED(first_unit);
    GROW_UNZEROED(last_unit);
    GROW_UNZEROED(class_mark);
    self->cap_classes = cap;
    return 0;
}

static int grow_units(EvidenceCore *self, Py_ssize_t cap);

static int
reserve_unit(EvidenceCore *self)
{
    Py_ssize_t cap = next_cap(self->n_units, self->cap_units, 16);
    return cap < 0 ? -1 : grow_units(self, cap);
}

/* The arrays per unit grown to `cap` elements (if larger). */
static int
grow_units(EvidenceCore *self, Py_ssize_t cap)
{
    Py_ssize_t old = self->cap_units;
    if (cap == old) {
        return 0;
    }
    GROW_UNZEROED(owner);
    GROW_UNZEROED(next_unit);
    GROW_UNZEROED(unit_class);
    GROW_UNZEROED(text_start);
    GROW_UNZEROED(text_end);
    self->cap_units = cap;
    return 0;
}

static int
reserve_source(EvidenceCore *self)
{
    Py_ssize_t old = self->cap_sources, cap = next_cap(self->n_sources, old, 8);
    if (cap < 0) {
        return -1;
    }
    if (cap == old) {
        return 0;
    }
    GROW_UNZEROED(parent);
    GROW_UNZEROED(size);
    GROW(source_text);
    self->cap_sources = cap;
    return 0;
}

/* Sources up to `source` (those skipped are sources without units), each its own group. */
static int
reserve_sources_to(EvidenceCore *self, Py_ssize_t source)
{
    while (self->n_sources <= source) {
        Py_ssize_t s = self->n_sources;
        if (reserve_source(self) < 0) {
            return -1;
        }
        self->parent[s] = (int32_t)s;
        self->size[s] = 1;
        self->n_sources = s + 1;
    }
    return 0;
}

/* A stamp no mark holds yet: marks of earlier operations are smaller (or 0, never a stamp). */
static uint32_t
next_stamp(EvidenceCore *self)
{
    if (++self->stamp == 0) {
        if (self->token_mark != NULL) {
            memset(self->token_mark, 0, (size_t)self->cap_tokens * sizeof(uint32_t));
        }
        if (self->class_mark != NULL) {
            memset(self->class_mark, 0, (size_t)self->cap_classes * sizeof(uint32_t));
        }
        self->stamp = 1;
    }
    return self->stamp;
}

/* --- tables ---------------------------------------------------------------------------------- */

/*
 * Open addressing, linear probing, at most half full; a slot holds a key's hash and id, the key
 * itself being found through the id (a token's characters, a class's token ids).
 */

/* The slot for `hash` to probe first, then (i + 1) & mask. */
static ALWAYS_INLINE size_t
table_start(const table_t *t, uint32_t hash)
{
    return (size_t)hash & (size_t)t->mask;
}

static int table_reserve_for(table_t *t, Py_ssize_t n);

/* Room for one more key; -1 with MemoryError. */
static int
table_reserve(table_t *t)
{
    return table_reserve_for(t, t->used + 1);
}

/* Room for `n` keys in all; -1 with MemoryError. */
static int
table_reserve_for(table_t *t, Py_ssize_t n)
{
    Py_ssize_t cap, k;
    slot_t *slots;
    size_t i;

    if (t->slots != NULL && 2 * n <= t->mask + 1) {
        return 0;
    }
    cap = t->slots == NULL ? 64 : 2 * (t->mask + 1);
    while (cap < 2 * n && cap <= PY_SSIZE_T_MAX / 2) {
        cap *= 2;
    }
    if ((size_t)cap > (size_t)PY_SSIZE_T_MAX / sizeof(slot_t)) {
        PyErr_NoMemory();
        return -1;
    }
    slots = PyMem_Malloc((size_t)cap * sizeof(slot_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xff, (size_t)cap * sizeof(slot_t)); /* every id -1 */
    for (k = 0; t->slots != NULL && k <= t->mask; k++) {
        const slot_t *e = &t->slots[k];
        if (e->id >= 0) {
            for (i = (size_t)e->hash & (size_t)(cap - 1); slots[i].id >= 0;
                 i = (i + 1) & (size_t)(cap - 1)) {
            }
            slots[i] = *e;
        }
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 0;
}

/* Enter `id` under `hash` (room reserved, the key absent). */
static void
table_put(table_t *t, uint32_t hash, int32_t id)
{
    size_t i;
    for (i = table_start(t, hash); t->slots[i].id >= 0; i = (i + 1) & (size_t)t->mask) {
    }
    t->slots[i].hash = hash;
    t->slots[i].id = id;
    t->used += 1;
}

static void
table_free(table_t *t)
{
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->mask = t->used = 0;
}

/* --- the vocabulary -------------------------------------------------------------------------- */

/* A token's key: the first 8 bytes of its characters (zero-padded), which hold most tokens
 * whole, compared at once. */
static ALWAYS_INLINE uint64_t
first_bytes(const char *p, Py_ssize_t nbytes)
{
    uint64_t w = 0;
    memcpy(&w, p, (size_t)(nbytes < 8 ? nbytes : 8));
    return w;
}

/* A hash of a token of `nbytes` bytes (of a str of `kind`) whose first 8 are `first` (see
 * first_bytes) and whose others are at `rest`, eight at a time: multiplications by an odd
 * constant, the high half of the last product folded onto the low half that the tables index
 * with (most tokens: one multiplication). */
static ALWAYS_INLINE uint32_t
hash_word(uint64_t first, const char *rest, Py_ssize_t nbytes, int kind)
{
    uint64_t h = first ^ ((uint64_t)(4 * nbytes + kind) * 0x9e3779b97f4a7c15ULL);
    Py_ssize_t n = nbytes - 8;
    for (; n > 0; n -= 8, rest += 8) {
        h = (h * 0xff51afd7ed558ccdULL) ^ first_bytes(rest, n);
    }
    h *= 0xff51afd7ed558ccdULL;
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

/* The id of the token of `len` characters of `kind` (a str's canonical kind) whose bytes are
 * `first` (see first_bytes) then those at `rest`, and whose hash is `hash`; -1 if it is not in
 * the vocabulary (whose table is made: see vocabulary_ready). */
static ALWAYS_INLINE int32_t
word_find(const EvidenceCore *self, uint64_t first, const char *rest, Py_ssize_t len, int kind,
          uint32_t hash)
{
    const slot_t *slots = self->words.slots;
    const size_t mask = (size_t)self->words.mask;
    Py_ssize_t nbytes = len * kind;
    size_t i;
    for (i = (size_t)hash & mask;; i = (i + 1) & mask) {
        const slot_t *e = &slots[i];
        int32_t id = e->id;
        if (id < 0) {
            return -1;
        }
        if (e->hash == hash && self->word_key[id] == first && self->word_len[id] == len &&
            self->word_kind[id] == kind &&
            (nbytes <= 8 ||
             memcmp(self->chars + self->word_off[id] + 8, rest, (size_t)(nbytes - 8)) == 0)) {
            return id;
        }
    }
}

/* Add the token of `len` characters of `kind` at `chars` (absent; `first` and `hash` as in
 * word_find) to the vocabulary: its id, or -1 with an exception. */
static int32_t
word_add(EvidenceCore *self, uint64_t first, const char *chars, Py_ssize_t len, int kind,
         uint32_t hash, int stop)
{
    Py_ssize_t bytes = len * kind;
    int32_t id;

    if (len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "EvidenceCore: a token is too long");
        return -1;
    }
    /* (8 bytes more: a token of up to 8 bytes is stored as its key, one 8-byte word) */
    if (self->n_chars + bytes + 8 > self->cap_chars) {
        Py_ssize_t cap = self->cap_chars ? self->cap_chars : 1024;
        char *grown;
        if (bytes > PY_SSIZE_T_MAX - 8 - self->n_chars) {
            PyErr_NoMemory();
            return -1;
        }
        while (cap < self->n_chars + bytes + 8) {
            if (cap > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        grown = PyMem_Realloc(self->chars, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->chars = grown;
        self->cap_chars = cap;
    }
    if ((self->n_tokens >= self->cap_tokens && reserve_token(self) < 0) ||
        (2 * (self->words.used + 1) > self->words.mask + 1 && table_reserve(&self->words) < 0)) {
        return -1;
    }
    id = (int32_t)self->n_tokens++;
    clear_token(self, id);
    if (bytes <= 8) {
        memcpy(self->chars + self->n_chars, &first, 8); /* its bytes, then zeros */
    }
    else {
        memcpy(self->chars + self->n_chars, chars, (size_t)bytes);
    }
    self->word_key[id] = first;
    self->word_off[id] = self->n_chars;
    self->word_len[id] = (int32_t)len;
    self->word_kind[id] = (uint8_t)kind;
    self->word_stop[id] = (uint8_t)stop;
    self->n_chars += bytes;
    table_put(&self->words, hash, id);
    return id;
}

/* The id of the str `token`; with `add`, interned if new (informative unless it is a stop word,
 * all of which are interned first). -1: absent (without `add`); -2 with an exception. */
static int32_t
str_token(EvidenceCore *self, PyObject *token, int add, int stop)
{
    const char *chars, *rest;
    Py_ssize_t len;
    int kind;
    uint64_t first;
    uint32_t hash;
    int32_t id;

    if (!PyUnicode_CheckExact(token)) {
        PyErr_Format(PyExc_TypeError, "EvidenceCore: tokens must be str, not %.100s",
                     Py_TYPE(token)->tp_name);
        return -2;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(token) < 0) {
        return -2;
    }
#endif
    chars = PyUnicode_DATA(token);
    len = PyUnicode_GET_LENGTH(token);
    kind = PyUnicode_KIND(token);
    first = first_bytes(chars, len * kind);
    rest = len * kind > 8 ? chars + 8 : NULL;
    hash = hash_word(first, rest, len * kind, kind);
    id = self->words.slots == NULL ? -1 : word_find(self, first, rest, len, kind, hash);
    if (id >= 0 || !add) {
        return id;
    }
    id = word_add(self, first, chars, len, kind, hash, stop);
    return id < 0 ? -2 : id;
}

/* --- a pool of arrays ------------------------------------------------------------------------ */

/*
 * The engine makes a core per trace and drops it when the trace is done: the arrays of a core
 * that goes (if not too large) are kept, emptied, for the next core to start with, instead of
 * being freed and grown again from nothing trace after trace. A core takes them when it gets
 * its vocabulary (vocabulary_ready), from a core it was made `fresh` from.
 */
#define POOLED_FIELDS(X)                                                                   \
    X(words) X(chars) X(cap_chars) X(cap_tokens) X(word_key) X(word_off) X(word_len)       \
    X(word_kind) X(word_stop) X(prefix) X(full) X(token_mark) X(class_of) X(cap_classes)   \
    X(threshold) X(tok_start) X(tok_len) X(full_start) X(full_len) X(first_unit)           \
    X(last_unit) X(class_mark) X(class_tokens) X(full_tokens) X(cap_units) X(owner)        \
    X(next_unit) X(unit_class) X(text_start) X(text_end) X(cap_sources) X(parent) X(size)  \
    X(source_text) X(candidates) X(matched) X(rarest) X(seq) X(informative) X(keys)        \
    X(cap_keys) X(scratch) X(cap_scratch) X(stamp)

#define POOL_SIZE 8
/* the largest arrays kept: a trace's usual few thousand tokens and units */
#define POOL_MAX_ENTRIES 8192
#define POOL_MAX_CHARS (256 * 1024)

static EvidenceCore pool[POOL_SIZE]; /* (only the pooled fields are used) */
static int pool_count;

/* Move the arrays of a fresh core (none of its own yet) from the pool, emptied: 1, or 0 if the
 * pool is empty. */
static int
pool_take(EvidenceCore *self)
{
    EvidenceCore *e;
    if (pool_count == 0 || self->words.slots != NULL || self->cap_tokens != 0 ||
        self->cap_classes != 0 || self->cap_units != 0 || self->cap_sources != 0 ||
        self->chars != NULL || self->scratch != NULL) {
        return 0;
    }
    e = &pool[--pool_count];
#define TAKE(f) self->f = e->f;
    POOLED_FIELDS(TAKE)
#undef TAKE
    memset(e, 0, sizeof(*e));
    memset(self->words.slots, 0xff, (size_t)(self->words.mask + 1) * sizeof(slot_t)); /* id -1 */
    self->words.used = 0;
    if (self->class_of.slots != NULL) {
        memset(self->class_of.slots, 0xff, (size_t)(self->class_of.mask + 1) * sizeof(slot_t));
        self->class_of.used = 0;
    }
    return 1;
}

/* Keep the arrays of a core that goes in the pool, if there is room and they are not too large:
 * 1 (the core no longer has them), else 0. Its postings' own arrays and its references are
 * gone already. What a new core expects zeroed (postings, marks, source texts) is zeroed. */
static int
pool_give(EvidenceCore *self)
{
    EvidenceCore *e;
    if (pool_count == POOL_SIZE || self->words.slots == NULL ||
        self->cap_tokens > POOL_MAX_ENTRIES || self->cap_classes > POOL_MAX_ENTRIES ||
        self->cap_units > POOL_MAX_ENTRIES || self->cap_sources > POOL_MAX_ENTRIES ||
        self->words.mask >= 2 * POOL_MAX_ENTRIES || self->class_of.mask >= 2 * POOL_MAX_ENTRIES ||
        self->cap_chars > POOL_MAX_CHARS || self->class_tokens.cap > 8 * POOL_MAX_ENTRIES ||
        self->full_tokens.cap > 8 * POOL_MAX_ENTRIES || self->cap_keys > POOL_MAX_ENTRIES ||
        self->cap_scratch > POOL_MAX_CHARS) {
        return 0;
    }
    if (self->n_tokens > 0) {
        memset(self->prefix, 0, (size_t)self->n_tokens * sizeof(posting_t));
        memset(self->full, 0, (size_t)self->n_tokens * sizeof(posting_t));
        memset(self->token_mark, 0, (size_t)self->n_tokens * sizeof(uint32_t));
    }
    if (self->n_sources > 0) {
        memset(self->source_text, 0, (size_t)self->n_sources * sizeof(PyObject *));
    }
    self->class_tokens.len = self->full_tokens.len = 0;
    self->candidates.len = self->matched.len = self->rarest.len = 0;
    self->seq.len = self->informative.len = 0;
    e = &pool[pool_count++];
#define GIVE(f) e->f = self->f;
    POOLED_FIELDS(GIVE)
#undef GIVE
    return 1;
}

/* The stop words, interned first (once, before the first unit): copied from the vocabulary of
 * the core this one was made `fresh` from, which holds only them, else interned here. */
static int
vocabulary_ready(EvidenceCore *self)
{
    EvidenceCore *from = (EvidenceCore *)self->vocabulary_from;
    PyObject *iter, *word;
    int st = 0;

    if (self->words.slots != NULL) {
        return 0;
    }
    if (from != NULL && from->stop_words != NULL && vocabulary_ready(from) == 0 &&
        from->n_units == 0) { /* (a core cleared by the garbage collector: not used) */
        Py_ssize_t n = from->n_tokens, cap = from->words.mask + 1, k;
        int pooled = pool_take(self);
        while (st == 0 && self->cap_tokens < n) {
            self->n_tokens = self->cap_tokens; /* as if full: reserve_token grows */
            st = reserve_token(self);
        }
        self->n_tokens = 0;
        if (pooled && self->words.mask + 1 >= cap && self->cap_chars >= from->n_chars) {
            /* the pooled table, emptied, takes the stop words */
            for (k = 0; k < cap; k++) {
                if (from->words.slots[k].id >= 0) {
                    table_put(&self->words, from->words.slots[k].hash, from->words.slots[k].id);
                }
            }
        }
        else {
            table_free(&self->words);
            PyMem_Free(self->chars);
            self->chars = NULL;
            self->cap_chars = 0;
            if (st == 0 &&
                (self->words.slots = PyMem_Malloc((size_t)cap * sizeof(slot_t))) == NULL) {
                PyErr_NoMemory();
                st = -1;
            }
            if (st == 0 && from->n_chars > 0 &&
                (self->chars = PyMem_Malloc((size_t)from->cap_chars)) == NULL) {
                PyErr_NoMemory();
                st = -1;
            }
            if (st == 0) {
                memcpy(self->words.slots, from->words.slots, (size_t)cap * sizeof(slot_t));
                self->words.mask = from->words.mask;
                self->words.used = from->words.used;
                self->cap_chars = from->n_chars > 0 ? from->cap_chars : 0;
            }
        }
        if (st == 0) {
            if (from->n_chars > 0) {
                memcpy(self->chars, from->chars, (size_t)from->n_chars);
            }
            self->n_chars = from->n_chars;
            memcpy(self->word_key, from->word_key, (size_t)n * sizeof(uint64_t));
            memcpy(self->word_off, from->word_off, (size_t)n * sizeof(Py_ssize_t));
            memcpy(self->word_len, from->word_len, (size_t)n * sizeof(int32_t));
            memcpy(self->word_kind, from->word_kind, (size_t)n);
            memcpy(self->word_stop, from->word_stop, (size_t)n);
            for (k = 0; k < n; k++) {
                clear_token(self, k);
            }
            self->n_tokens = n;
        }
        Py_CLEAR(self->vocabulary_from);
        return st;
    }
    Py_CLEAR(self->vocabulary_from);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (table_reserve(&self->words) < 0 || (iter = PyObject_GetIter(self->stop_words)) == NULL) {
        return -1;
    }
    while (st == 0 && (word = PyIter_Next(iter)) != NULL) {
        st = str_token(self, word, 1, 1) < -1 ? -1 : 0;
        Py_DECREF(word);
    }
    Py_DECREF(iter);
    return st == 0 && PyErr_Occurred() ? -1 : st;
}

/* The pieces of a str between spaces (its tokens, for a normalized text), interned (`add`) or
 * looked up (-1 for those absent), appended to `out`. */
static int
str_pieces(EvidenceCore *self, PyObject *text, int add, ivec_t *out);

/* --- classes by token ids -------------------------------------------------------------------- */

static ALWAYS_INLINE uint32_t
hash_ids(const int32_t *ids, int32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    int32_t k;
    for (k = 0; k < n; k++) {
        h = (h ^ (uint32_t)ids[k]) * 0xff51afd7ed558ccdULL;
        h ^= h >> 31;
    }
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

/* The class whose token ids are ids[0:n]; -1 if none. */
static int32_t
class_find(const EvidenceCore *self, const int32_t *ids, int32_t n, uint32_t hash)
{
    const table_t *t = &self->class_of;
    size_t i;
    if (t->slots == NULL) {
        return -1;
    }
    for (i = table_start(t, hash);; i = (i + 1) & (size_t)t->mask) {
        const slot_t *e = &t->slots[i];
        int32_t c = e->id;
        if (c < 0) {
            return -1;
        }
        if (e->hash == hash && self->full_len[c] == n &&
            memcmp(self->full_tokens.items + self->full_start[c], ids,
                   (size_t)n * sizeof(int32_t)) == 0) {
            return c;
        }
    }
}

/* --- union-find over sources ----------------------------------------------------------------- */

static int32_t
find(EvidenceCore *self, int32_t s)
{
    int32_t *parent = self->parent;
    while (parent[s] != s) {
        parent[s] = parent[parent[s]]; /* path halving */
        s = parent[s];
    }
    return s;
}

static void
unite(EvidenceCore *self, int32_t a, int32_t b)
{
    a = find(self, a);
    b = find(self, b);
    if (a == b) {
        return;
    }
    if (self->size[a] < self->size[b]) {
        int32_t t = a;
        a = b;
        b = t;
    }
    self->parent[b] = a;
    self->size[a] += self->size[b];
}

/* --- matching -------------------------------------------------------------------------------- */

/* Unit.threshold for a unit of n unique informative tokens. */
static int32_t
unit_threshold(Py_ssize_t n)
{
    if (n == 1) {
        return 1;
    }
    return (n + 1) / 2 > 2 ? (int32_t)((n + 1) / 2) : 2;
}

/* Whether a token id sequence is that of an empty normalized text (a class made from a Unit whose
 * normalized text is "": one empty piece). */
static ALWAYS_INLINE int
empty_text(const EvidenceCore *self, const int32_t *ids, int32_t n)
{
    return n == 0 || (n == 1 && ids[0] >= 0 && self->word_len[ids[0]] == 0);
}

/*
 * Unit.matches' containment test, `f" {a} " in f" {b} "`, for the normalized texts a (of the
 * single-token unit) and b, given as their token ids a[0:na] and b[0:nb] (-1 for a token of b
 * that is in no unit); false if either text is empty (Unit.matches checks both first). Tokens
 * hold no space, so " a " is in " b " exactly when a's tokens are a run of b's.
 */
static int
contained(const EvidenceCore *self, const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    int32_t i, k;
    if (empty_text(self, a, na) || empty_text(self, b, nb)) {
        return 0;
    }
    for (i = 0; i + na <= nb; i++) {
        for (k = 0; k < na && b[i + k] == a[k]; k++) {
        }
        if (k == na) {
            return 1;
        }
    }
    return 0;
}

/* The token ids of class c (its normalized text). */
#define CLASS_FULL(self, c) ((self)->full_tokens.items + (self)->full_start[c])

/* How many of class c's tokens are marked with `stamp`, counted until the count reaches `enough`
 * or can no longer reach `needed` (callers only compare it with thresholds within that range). */
static int32_t
overlap(const EvidenceCore *self, int32_t c, uint32_t stamp, int32_t needed, int32_t enough)
{
    const int32_t *tokens = self->class_tokens.items + self->tok_start[c];
    const uint32_t *mark = self->token_mark;
    int32_t n = self->tok_len[c], k, count = 0;

    for (k = 0; k < n; k++) {
        if (mark[tokens[k]] == stamp) {
            if (++count >= enough) {
                break;
            }
        }
        else if (count + (n - k - 1) < needed) {
            break;
        }
    }
    return count;
}

/* Add the classes under `posting` to the candidates not yet marked with `stamp`. */
static ALWAYS_INLINE int
add_candidates(EvidenceCore *self, const posting_t *posting, uint32_t stamp)
{
    const int32_t *ids = posting_ids(posting);
    int32_t k;
    for (k = 0; k < posting->len; k++) {
        int32_t c = ids[k];
        if (self->class_mark[c] != stamp) {
            self->class_mark[c] = stamp;
            if (ivec_push(&self->candidates, c) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* --- adding units ---------------------------------------------------------------------------- */

static int
compare_keys(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* keys[0:n] ascending: insertion sort for the usual few tokens of a unit, else qsort. */
static void
sort_keys(uint64_t *keys, int32_t n)
{
    int32_t i, j;
    if (n > 32) {
        qsort(keys, (size_t)n, sizeof(uint64_t), compare_keys);
        return;
    }
    for (i = 1; i < n; i++) {
        uint64_t key = keys[i];
        for (j = i; j > 0 && keys[j - 1] > key; j--) {
            keys[j] = keys[j - 1];
        }
        keys[j] = key;
    }
}

/* `_rarest`: the `keep` rarest of class c's tokens by current df, ties in text order (the class's
 * tokens are in text order of first occurrence), into self->rarest. */
static int
rarest(EvidenceCore *self, int32_t c, int32_t keep)
{
    const int32_t *tokens = self->class_tokens.items + self->tok_start[c];
    int32_t n = self->tok_len[c], k;

    self->rarest.len = 0;
    if (keep >= n) {
        for (k = 0; k < n; k++) {
            if (ivec_push(&self->rarest, tokens[k]) < 0) {
                return -1;
            }
        }
        return 0;
    }
    if (keep <= 0) { /* only for a unit without tokens: `sorted(...)[:-1]` of nothing */
        return 0;
    }
    /* Most of a unit's tokens are new to the trace, in this class only (df 1, the least there
     * is): when `keep` of them are, they are the rarest, the first of them in text order. */
    for (k = 0; k < n && self->rarest.len < keep; k++) {
        if (self->full[tokens[k]].len == 1 && ivec_push(&self->rarest, tokens[k]) < 0) {
            return -1;
        }
    }
    if (self->rarest.len == keep) {
        return 0;
    }
    self->rarest.len = 0;
    if (n > self->cap_keys) {
        uint64_t *keys = PyMem_Realloc(self->keys, (size_t)n * sizeof(uint64_t));
        if (keys == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->keys = keys;
        self->cap_keys = n;
    }
    /* df, then position: a stable sort by df. The key's low half keeps the position, to find
     * the token again. */
    for (k = 0; k < n; k++) {
        self->keys[k] = ((uint64_t)(uint32_t)self->full[tokens[k]].len << 32) | (uint32_t)k;
    }
    sort_keys(self->keys, n);
    for (k = 0; k < keep; k++) {
        if (ivec_push(&self->rarest, tokens[(uint32_t)self->keys[k]]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* `_link`: join `source` with the sources of the earlier classes that match class c either way.
 * The class's tokens are marked with `stamp`; self->rarest holds its indexed tokens. */
static int
link_class(EvidenceCore *self, int32_t c, int32_t source, uint32_t stamp)
{
    const int32_t *tokens = self->class_tokens.items + self->tok_start[c];
    int32_t n = self->tok_len[c], t = self->threshold[c], k;

    self->candidates.len = 0;
    for (k = 0; k < n; k++) {
        if (add_candidates(self, &self->prefix[tokens[k]], stamp) < 0) {
            return -1;
        }
    }
    if (t < self->max_threshold) {
        /* larger units that may hold half of this one: under its indexed tokens in `full`
         * (this class too: skipped below, as it is in its source's group) */
        for (k = 0; k < self->rarest.len; k++) {
            if (add_candidates(self, &self->full[self->rarest.items[k]], stamp) < 0) {
                return -1;
            }
        }
    }
    else {
        self->max_threshold = t;
    }
    for (k = 0; k < self->candidates.len; k++) {
        int32_t other = self->candidates.items[k];
        int32_t other_source = self->owner[self->first_unit[other]];
        int32_t ot = self->threshold[other], count;
        int m = 0;
        if (find(self, other_source) == find(self, source)) {
            continue;
        }
        count = overlap(self, other, stamp, ot < t ? ot : t, ot > t ? ot : t);
        if (count >= ot) {
            m = ot > 1 ? 1
                       : contained(self, CLASS_FULL(self, other), self->full_len[other],
                                   CLASS_FULL(self, c), self->full_len[c]);
        }
        if (m == 0 && count >= t) {
            m = t > 1 ? 1
                      : contained(self, CLASS_FULL(self, c), self->full_len[c],
                                  CLASS_FULL(self, other), self->full_len[other]);
        }
        if (m) {
            unite(self, other_source, source);
        }
    }
    return 0;
}

/* A new class for unit u of `source`, whose token ids full[0:n_full] (hash `hash`) no class has;
 * its informative token ids, in order with repeats, are info[0:n_info]. */
static int
add_class(EvidenceCore *self, int32_t u, int32_t source, const int32_t *full, int32_t n_full,
          uint32_t hash, const int32_t *info, int32_t n_info)
{
    int32_t c = (int32_t)self->n_classes, start = self->class_tokens.len;
    int32_t full_start = self->full_tokens.len, n, t, k;
    uint32_t stamp;

    if (reserve_class(self) < 0 || table_reserve(&self->class_of) < 0) {
        return -1;
    }
    /* the unique tokens in text order (`dict.fromkeys(unit.tokens)`), marked with the stamp,
     * which `overlap` then counts in `link_class` */
    stamp = next_stamp(self);
    for (k = 0; k < n_info; k++) {
        int32_t tok = info[k];
        if (self->token_mark[tok] != stamp) {
            self->token_mark[tok] = stamp;
            if (ivec_push(&self->class_tokens, tok) < 0) {
                goto undo;
            }
        }
    }
    n = self->class_tokens.len - start;
    if (ivec_extend(&self->full_tokens, full, n_full) < 0) {
        goto undo;
    }
    t = unit_threshold(n);
    table_put(&self->class_of, hash, c);
    self->threshold[c] = t;
    self->tok_start[c] = start;
    self->tok_len[c] = n;
    self->full_start[c] = full_start;
    self->full_len[c] = n_full;
    self->first_unit[c] = self->last_unit[c] = u;
    self->unit_class[u] = c;
    self->class_mark[c] = 0;
    self->n_classes = c + 1;
    /* From here on the class is in place; an error (MemoryError) leaves it partly indexed. */
    for (k = 0; k < n; k++) {
        int32_t tok = self->class_tokens.items[start + k];
        if (posting_push(&self->full[tok], c) < 0) {
            return -1;
        }
    }
    if (rarest(self, c, n - t + 1) < 0 || link_class(self, c, source, stamp) < 0) {
        return -1;
    }
    for (k = 0; k < self->rarest.len; k++) {
        if (posting_push(&self->prefix[self->rarest.items[k]], c) < 0) {
            return -1;
        }
    }
    return 0;
undo:
    self->class_tokens.len = start;
    self->full_tokens.len = full_start;
    return -1;
}

/* The next unit, of `source`, of token ids full[0:n_full] and informative ones info[0:n_info]
 * (see add_class): the per-unit loop of EvidenceIndex.add_evidence. */
static int
add_unit(EvidenceCore *self, int32_t source, const int32_t *full, int32_t n_full,
         const int32_t *info, int32_t n_info)
{
    int32_t u = (int32_t)self->n_units, c;
    uint32_t hash;

    if (reserve_unit(self) < 0) {
        return -1;
    }
    self->owner[u] = source;
    self->next_unit[u] = -1;
    self->text_start[u] = self->text_end[u] = 0;
    self->n_units = u + 1;
    hash = hash_ids(full, n_full);
    c = class_find(self, full, n_full, hash);
    if (c >= 0) {
        /* Same text as earlier units: it matches them, and exactly what they match, whose
         * sources are already in their group. */
        self->next_unit[self->last_unit[c]] = u;
        self->last_unit[c] = u;
        self->unit_class[u] = c;
        unite(self, self->owner[self->first_unit[c]], source);
        return 0;
    }
    return add_class(self, u, source, full, n_full, hash, info, n_info);
}

/* --- tokens of a text ------------------------------------------------------------------------ */

/*
 * A text of the tokenizer's ASCII path is read from a copy of its characters as bytes, lower-cased
 * (self->scratch, then LOWERED_PAD zero bytes): the typographic characters become bytes that
 * separate tokens and are no space (those that are spaces, U+00A0, become ' '), which the
 * segmenter and the tokenizer see as they see the characters themselves. Every text is then of
 * the 1-byte kind, and a token's characters are bytes in place, ready to be compared and
 * interned, its first 8 read at once.
 */
#define LOWERED_PAD 16
#define TYPOGRAPHIC_BYTE 0x01 /* (no token character, no space, not a sentence's end) */

/* The byte of a character of the ASCII path: 1, or 0 if it is not of that path. */
static ALWAYS_INLINE int
lowered_char(Py_UCS4 c, char *out)
{
    if (c < 0x80) {
        *out = (char)(c - 'A' < 26 ? c | 0x20 : c);
        return 1;
    }
    switch (is_typographic(c)) {
    case TYPO_SPACE:
        *out = ' ';
        return 1;
    case TYPO_SEPARATOR:
        *out = TYPOGRAPHIC_BYTE;
        return 1;
    default:
        return 0;
    }
}

#if TOKENS_SSE2
/* 16 ASCII bytes lower-cased: 0x20 added to those in A-Z (signed compares, as in classify16). */
static ALWAYS_INLINE __m128i
lower16(__m128i x)
{
    const __m128i upper = _mm_cmplt_epi8(_mm_add_epi8(x, _mm_set1_epi8(0x80 - 'A')),
                                         _mm_set1_epi8(26 - 0x80));
    return _mm_or_si128(x, _mm_and_si128(upper, _mm_set1_epi8(0x20)));
}
#endif

/* The characters of data[0:n] (of the 1-byte or 2-byte kind) lowered into out[0:n]: ST_OK, or
 * ST_UNHANDLED if one is not of the ASCII path. Inlined once per kind. */
static ALWAYS_INLINE int
lower_chars(int kind, const void *data, Py_ssize_t n, char *out)
{
    Py_ssize_t i = 0;
#if TOKENS_SSE2
    for (; i + 16 <= n; i += 16) {
        unsigned high;
        const __m128i x = load16(kind, data, i, &high);
        _mm_storeu_si128((__m128i *)(void *)(out + i), lower16(x));
        for (; high; high &= high - 1) {
            Py_ssize_t k = i + LOWEST_BIT(high);
            if (!lowered_char(PyUnicode_READ(kind, data, k), out + k)) {
                return ST_UNHANDLED;
            }
        }
    }
#endif
    for (; i < n; i++) {
        if (!lowered_char(PyUnicode_READ(kind, data, i), out + i)) {
            return ST_UNHANDLED;
        }
    }
    return ST_OK;
}

/* The str `text` lowered into self->scratch (see above): ST_OK, ST_UNHANDLED (not of the ASCII
 * path) or ST_ERROR. */
static int
lower_text(EvidenceCore *self, PyObject *text)
{
    Py_ssize_t n;
    int kind;

#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return ST_ERROR;
    }
#endif
    kind = PyUnicode_KIND(text);
    n = PyUnicode_GET_LENGTH(text);
    if (kind == PyUnicode_4BYTE_KIND) {
        return ST_UNHANDLED; /* holds a character above U+FFFF: not of the ASCII path */
    }
    if (n > PY_SSIZE_T_MAX - LOWERED_PAD) {
        PyErr_NoMemory();
        return ST_ERROR;
    }
    if (n + LOWERED_PAD > self->cap_scratch) {
        Py_ssize_t cap = cap_for(n + LOWERED_PAD, self->cap_scratch, 256);
        char *grown;
        if (cap < n + LOWERED_PAD) {
            cap = n + LOWERED_PAD;
        }
        grown = PyMem_Realloc(self->scratch, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        self->scratch = grown;
        self->cap_scratch = cap;
    }
    memset(self->scratch + n, 0, LOWERED_PAD);
    return kind == PyUnicode_1BYTE_KIND
               ? lower_chars(PyUnicode_1BYTE_KIND, PyUnicode_DATA(text), n, self->scratch)
               : lower_chars(PyUnicode_2BYTE_KIND, PyUnicode_DATA(text), n, self->scratch);
}

/* The id of the token of `len` bytes at lowered[start] (a lowered text, see above); with `add`,
 * interned if new. -1: absent (without `add`), -2 with an exception. Its first 8 bytes are
 * read at once (the text's padding is there to read past its end). */
static ALWAYS_INLINE int32_t
text_token(EvidenceCore *self, const char *lowered, Py_ssize_t start, Py_ssize_t len, int add)
{
    const char *chars = lowered + start, *rest = len > 8 ? chars + 8 : NULL;
    uint64_t first;
    uint32_t hash;
    int32_t id;

    memcpy(&first, chars, 8);
    if (len < 8) {
        first &= ((uint64_t)1 << (8 * len)) - 1;
    }
    hash = hash_word(first, rest, len, PyUnicode_1BYTE_KIND);
    id = word_find(self, first, rest, len, PyUnicode_1BYTE_KIND, hash);
    if (id >= 0 || !add) {
        return id;
    }
    id = word_add(self, first, chars, len, PyUnicode_1BYTE_KIND, hash, 0);
    return id < 0 ? -2 : id;
}

static int add_unit(EvidenceCore *self, int32_t source, const int32_t *full, int32_t n_full,
                    const int32_t *info, int32_t n_info);

/* The end of add_text's current segment (self->segment): its unit, if its tokens (in self->seq
 * and self->informative) hold two informative ones, with the segment's bounds, stripped, as
 * its text. */
static int
end_segment(EvidenceCore *self, int kind, const void *data)
{
    Py_ssize_t start = self->segments[2 * self->segment], end = self->segments[2 * self->segment + 1];
    int32_t u = (int32_t)self->n_units;

    if (self->informative.len >= 2) {
        if (add_unit(self, self->segment_source, self->seq.items, self->seq.len,
                     self->informative.items, self->informative.len) < 0) {
            return ST_ERROR;
        }
        /* its text, segment.strip() */
        while (start < end && char_class(PyUnicode_READ(kind, data, start)) == C_SPACE) {
            start++;
        }
        while (end > start && char_class(PyUnicode_READ(kind, data, end - 1)) == C_SPACE) {
            end--;
        }
        self->text_start[u] = start;
        self->text_end[u] = end;
    }
    self->seq.len = self->informative.len = 0;
    self->segment++;
    return ST_OK;
}

/* The sink of add_text, over the whole text: each token interned, its id appended to self->seq,
 * and to self->informative unless it is a stop word; the segments it is past ended first (a
 * token is within one segment: the text between two is spaces and a sentence's end). */
static ALWAYS_INLINE int
intern_sink(void *ctx, int kind, const void *data, Py_ssize_t start, Py_ssize_t len)
{
    EvidenceCore *self = ctx;
    int32_t id;

    while (start >= self->segments[2 * self->segment + 1]) {
        if (end_segment(self, kind, data) != ST_OK) {
            return ST_ERROR;
        }
    }
    id = text_token(self, (const char *)data, start, len, 1);
    if (id < 0) {
        return ST_ERROR;
    }
    /* (room reserved for the text's tokens: see scan_lowered) */
    self->seq.items[self->seq.len++] = id;
    self->informative.items[self->informative.len] = id;
    self->informative.len += !self->word_stop[id];
    return ST_OK;
}

/* The sink of match_text: each token looked up, its id (-1 if absent: in no unit) appended to
 * self->seq; a token in the vocabulary marked with the current stamp and the classes under it
 * in `prefix` added to the candidates (`_candidates`). Stop words are in no class: marking
 * them changes nothing. */
static ALWAYS_INLINE int
lookup_sink(void *ctx, int kind, const void *data, Py_ssize_t start, Py_ssize_t len)
{
    EvidenceCore *self = ctx;
    int32_t id = text_token(self, (const char *)data, start, len, 0);

    (void)kind; /* (the lowered text's: 1 byte) */
    if (id < -1) {
        return ST_ERROR;
    }
    self->seq.items[self->seq.len++] = id; /* (room reserved: see scan_lowered) */
    if (id >= 0 && self->token_mark[id] != self->stamp) {
        self->token_mark[id] = self->stamp;
        if (add_candidates(self, &self->prefix[id], self->stamp) < 0) {
            return ST_ERROR;
        }
    }
    return ST_OK;
}

/* scan_tokens over the lowered text of n bytes in self->scratch with one of the sinks above
 * (add_text's with `intern`, else match_text's), with room for its tokens in self->seq and
 * self->informative reserved at once (a token and what separates it from the next take two
 * bytes at least). */
static int
scan_lowered(EvidenceCore *self, Py_ssize_t n, int intern)
{
    Py_ssize_t most = n / 2 + 1;
    if (most > INT32_MAX / 2) {
        PyErr_SetString(PyExc_OverflowError, "EvidenceCore: a text is too long");
        return ST_ERROR;
    }
    if ((self->seq.cap - self->seq.len < most && ivec_grow(&self->seq, (int32_t)most) < 0) ||
        (intern && self->informative.cap - self->informative.len < most &&
         ivec_grow(&self->informative, (int32_t)most) < 0)) {
        return ST_ERROR;
    }
    return intern ? scan_tokens(PyUnicode_1BYTE_KIND, self->scratch, n, intern_sink, self)
                  : scan_tokens(PyUnicode_1BYTE_KIND, self->scratch, n, lookup_sink, self);
}

static int
str_pieces(EvidenceCore *self, PyObject *text, int add, ivec_t *out)
{
    PyObject *pieces, *space = PyUnicode_FromOrdinal(' ');
    Py_ssize_t i;
    int st = 0;

    if (space == NULL) {
        return -1;
    }
    pieces = PyUnicode_Split(text, space, -1);
    Py_DECREF(space);
    if (pieces == NULL) {
        return -1;
    }
    for (i = 0; st == 0 && i < PyList_GET_SIZE(pieces); i++) {
        int32_t id = str_token(self, PyList_GET_ITEM(pieces, i), add, 0);
        st = id < -1 ? -1 : ivec_push(out, id);
    }
    Py_DECREF(pieces);
    return st;
}

/* --- methods --------------------------------------------------------------------------------- */

static int
enter(EvidenceCore *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "EvidenceCore is already in use (re-entered)");
        return -1;
    }
    if (self->stop_words == NULL) { /* cleared by the garbage collector */
        PyErr_SetString(PyExc_RuntimeError, "EvidenceCore was cleared");
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* The source index argument: -1 with an exception. */
static Py_ssize_t
source_arg(EvidenceCore *self, PyObject *arg, const char *method)
{
    Py_ssize_t source = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (source == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (source < self->n_sources || source >= INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s(): source_index goes back", method);
        return -1;
    }
    return source;
}

PyDoc_STRVAR(add_text_doc,
"add_text($self, source_index, text, /)\n"
"--\n"
"\n"
"Index the units of the source at source_index whose text is `text`, as\n"
"EvidenceIndex.add_evidence does with TextCache.units(text); returns how many there are (they\n"
"get the next unit ids), or None, changing nothing, if the text is not of the tokenizer's\n"
"ASCII path (every character ASCII or typographic): add_units then takes the units made by\n"
"the Python code.\n"
"source_index must be above that of every earlier call.");

/* Room for what a text of `length` characters cut in `segments` segments may add, reserved at
 * once rather than by doublings as it comes: a new token per eight characters (texts share
 * many), a unit and class per segment. When the arrays must grow, they grow for twice that:
 * a trace's texts come several to a trace and alike in size, and each growth copies the arrays
 * and rehashes the tables. */
static int
reserve_for_text(EvidenceCore *self, Py_ssize_t length, Py_ssize_t segments)
{
    Py_ssize_t new_tokens = length / 8 + 1, tokens = self->n_tokens + new_tokens;
    Py_ssize_t units = self->n_units + segments, classes = self->n_classes + segments;
    if (tokens >= INT32_MAX / 2 || units >= INT32_MAX / 2) {
        return 0; /* (the arrays grow one at a time, up to their limit) */
    }
    if ((tokens > self->cap_tokens &&
         grow_tokens(self, cap_for(tokens + new_tokens, self->cap_tokens, 64)) < 0) ||
        (2 * tokens > self->words.mask + 1 &&
         table_reserve_for(&self->words, tokens + new_tokens) < 0) ||
        (units > self->cap_units &&
         grow_units(self, cap_for(units + segments, self->cap_units, 16)) < 0) ||
        (classes > self->cap_classes &&
         grow_classes(self, cap_for(classes + segments, self->cap_classes, 16)) < 0) ||
        (2 * classes > self->class_of.mask + 1 &&
         table_reserve_for(&self->class_of, classes + segments) < 0) ||
        (self->class_tokens.cap - self->class_tokens.len < new_tokens &&
         ivec_grow(&self->class_tokens, (int32_t)(2 * new_tokens)) < 0) ||
        (self->full_tokens.cap - self->full_tokens.len < 2 * new_tokens &&
         ivec_grow(&self->full_tokens, (int32_t)(4 * new_tokens)) < 0)) {
        return -1;
    }
    return 0;
}

/* add_text's work, the core entered: ST_OK, ST_UNHANDLED (nothing changed: the text is not of
 * the ASCII path) or ST_ERROR. */
static int
add_text_entered(EvidenceCore *self, Py_ssize_t source, PyObject *text)
{
    Py_ssize_t first, n;
    const char *data;
    bounds_t b;
    int st;

    /* (the vocabulary first: it may take pooled arrays, the buffer of the lowered text too) */
    if (vocabulary_ready(self) < 0) {
        return ST_ERROR;
    }
    st = lower_text(self, text);
    if (st != ST_OK) {
        return st;
    }
    data = self->scratch;
    n = PyUnicode_GET_LENGTH(text);
    b.items = b.stack;
    b.n = 0;
    b.cap = BOUNDS_ON_STACK;
    st = find_segments(PyUnicode_1BYTE_KIND, data, n, &b);
    if (st != ST_OK) {
        if (b.items != b.stack) {
            PyMem_Free(b.items);
        }
        if (st == ST_UNHANDLED) { /* cannot be: lower_text read every character */
            PyErr_SetString(PyExc_SystemError, "add_text: a character off the ASCII path");
            st = ST_ERROR;
        }
        return st;
    }
    first = self->n_units;
    st = reserve_sources_to(self, source) < 0 || reserve_for_text(self, n, b.n / 2)
             ? ST_ERROR
             : ST_OK;
    /* the tokens of the whole text, one segment after the other */
    self->segments = b.items;
    self->segment = 0;
    self->segment_source = (int32_t)source;
    self->seq.len = self->informative.len = 0;
    if (st == ST_OK) {
        st = scan_lowered(self, n, 1);
    }
    while (st == ST_OK && 2 * self->segment < b.n) {
        st = end_segment(self, PyUnicode_1BYTE_KIND, data);
    }
    self->segments = NULL;
    if (st == ST_OK && self->n_units > first && self->source_text[source] == NULL) {
        Py_INCREF(text);
        self->source_text[source] = text;
    }
    if (b.items != b.stack) {
        PyMem_Free(b.items);
    }
    return st;
}

static PyObject *
add_text(EvidenceCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *text;
    Py_ssize_t source, first;
    int st;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "add_text() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    text = args[1];
    if (!PyUnicode_CheckExact(text)) {
        PyErr_Format(PyExc_TypeError, "add_text(): text must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    if ((source = source_arg(self, args[0], "add_text")) < 0) {
        return NULL;
    }
    if (enter(self) < 0) {
        return NULL;
    }
    first = self->n_units;
    st = add_text_entered(self, source, text);
    self->busy = 0;
    if (st == ST_UNHANDLED) {
        Py_RETURN_NONE;
    }
    if (st != ST_OK) {
        return NULL;
    }
    return PyLong_FromSsize_t(self->n_units - first);
}

PyDoc_STRVAR(add_units_doc,
"add_units($self, source_index, units, /)\n"
"--\n"
"\n"
"Index the units of the source at source_index, in order, as EvidenceIndex.add_evidence does:\n"
"`units` is a list or tuple of (normalized, tokens) pairs, a unit's normalized text (a str,\n"
"its tokens joined by spaces) and its informative tokens (a tuple of str, in order, with\n"
"repeats). Returns the unit id of the first one (they get consecutive ids). source_index must\n"
"be above that of every earlier call; sources skipped in between are sources without units.");

/* One unit of `source`, given as a (normalized, tokens) pair. */
static int
add_unit_pair(EvidenceCore *self, PyObject *pair, int32_t source)
{
    PyObject *norm, *tokens;
    Py_ssize_t i;

    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "add_units(): a unit must be a (normalized, tokens) tuple, not %.100s",
                     Py_TYPE(pair)->tp_name);
        return -1;
    }
    norm = PyTuple_GET_ITEM(pair, 0);
    tokens = PyTuple_GET_ITEM(pair, 1);
    if (!PyUnicode_Check(norm)) {
        PyErr_Format(PyExc_TypeError, "add_units(): normalized must be str, not %.100s",
                     Py_TYPE(norm)->tp_name);
        return -1;
    }
    if (!PyTuple_Check(tokens)) {
        PyErr_Format(PyExc_TypeError, "add_units(): tokens must be a tuple, not %.100s",
                     Py_TYPE(tokens)->tp_name);
        return -1;
    }
    self->seq.len = self->informative.len = 0;
    if (str_pieces(self, norm, 1, &self->seq) < 0) {
        return -1;
    }
    for (i = 0; i < PyTuple_GET_SIZE(tokens); i++) {
        int32_t tok = str_token(self, PyTuple_GET_ITEM(tokens, i), 1, 0);
        if (tok < 0 || ivec_push(&self->informative, tok) < 0) {
            return -1;
        }
    }
    return add_unit(self, source, self->seq.items, self->seq.len, self->informative.items,
                    self->informative.len);
}

/* add_units' work, the core entered, for `units` (a PySequence_Fast): 0, or -1 with an
 * exception. */
static int
add_units_entered(EvidenceCore *self, Py_ssize_t source, PyObject *units)
{
    Py_ssize_t i;
    int st = reserve_sources_to(self, source) < 0 || vocabulary_ready(self) < 0 ? -1 : 0;
    for (i = 0; st == 0 && i < PySequence_Fast_GET_SIZE(units); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(units, i);
        Py_INCREF(item); /* the list is the caller's: held while a collection may run code */
        st = add_unit_pair(self, item, (int32_t)source);
        Py_DECREF(item);
    }
    return st;
}

static PyObject *
add_units(EvidenceCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *units;
    Py_ssize_t source, first;
    int st;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "add_units() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if ((source = source_arg(self, args[0], "add_units")) < 0) {
        return NULL;
    }
    units = PySequence_Fast(args[1], "add_units(): units must be a list or tuple");
    if (units == NULL) {
        return NULL;
    }
    if (enter(self) < 0) {
        Py_DECREF(units);
        return NULL;
    }
    first = self->n_units;
    st = add_units_entered(self, source, units);
    self->busy = 0;
    Py_DECREF(units);
    if (st < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(first);
}

static int
compare_ids(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The candidates of the text being matched (its tokens marked with the current stamp, its token
 * ids in self->seq) checked: the matched unit ids, ascending, into self->matched. */
static int
check_candidates(EvidenceCore *self)
{
    uint32_t stamp = self->stamp;
    int32_t k;

    self->matched.len = 0;
    for (k = 0; k < self->candidates.len; k++) {
        int32_t c = self->candidates.items[k], t = self->threshold[c], u;
        if (overlap(self, c, stamp, t, t) < t) {
            continue;
        }
        if (t == 1 && !contained(self, CLASS_FULL(self, c), self->full_len[c], self->seq.items,
                                 self->seq.len)) {
            continue; /* a one-token unit: containment */
        }
        for (u = self->first_unit[c]; u >= 0; u = self->next_unit[u]) {
            if (ivec_push(&self->matched, u) < 0) {
                return -1;
            }
        }
    }
    if (self->matched.len > 1) { /* (no items yet: a NULL array qsort must not see) */
        qsort(self->matched.items, (size_t)self->matched.len, sizeof(int32_t), compare_ids);
    }
    return 0;
}

/* check_candidates, then the matched unit ids returned as a list. */
static PyObject *
match_candidates(EvidenceCore *self)
{
    PyObject *list;
    int32_t k;

    if (check_candidates(self) < 0) {
        return NULL;
    }
    list = PyList_New(self->matched.len);
    if (list == NULL) {
        return NULL;
    }
    for (k = 0; k < self->matched.len; k++) {
        PyObject *id = PyLong_FromLong(self->matched.items[k]);
        if (id == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, k, id);
    }
    return list;
}

/* match_text's tokens and candidates, the core entered, for an exact str: ST_OK (the candidates
 * and tokens ready for check_candidates), ST_UNHANDLED (not of the ASCII path) or ST_ERROR. */
static int
scan_output(EvidenceCore *self, PyObject *text)
{
    int st = lower_text(self, text);
    if (st != ST_OK) {
        return st;
    }
    (void)next_stamp(self);
    self->candidates.len = self->seq.len = 0;
    return scan_lowered(self, PyUnicode_GET_LENGTH(text), 0);
}

PyDoc_STRVAR(match_text_doc,
"match_text($self, text, /)\n"
"--\n"
"\n"
"The units the output `text` reuses, as EvidenceIndex.match_output matches them, for a text\n"
"of the tokenizer's ASCII path (every character ASCII or typographic): their unit ids,\n"
"ascending. None for any other text (match then takes its tokens made by the Python code).");

static PyObject *
match_text(EvidenceCore *self, PyObject *text)
{
    PyObject *list;
    int st;

    if (!PyUnicode_CheckExact(text)) {
        PyErr_Format(PyExc_TypeError, "match_text(): text must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (self->n_classes == 0) {
        return PyList_New(0); /* nothing to match, whatever the text */
    }
    if (enter(self) < 0) {
        return NULL;
    }
    st = scan_output(self, text);
    if (st == ST_OK) {
        /* (no token: an empty normalized text, which matches nothing, and no candidate) */
        list = match_candidates(self);
    }
    else {
        list = st == ST_UNHANDLED ? Py_NewRef(Py_None) : NULL;
    }
    self->busy = 0;
    return list;
}

/* One informative token of a text given by its tokens: marked, the classes under it in `prefix`
 * added to the candidates. */
static int
match_token(EvidenceCore *self, PyObject *token, uint32_t stamp)
{
    int32_t tok = str_token(self, token, 0, 0);
    if (tok < 0) {
        return tok == -1 ? 0 : -1; /* -1: in no class */
    }
    self->token_mark[tok] = stamp;
    return add_candidates(self, &self->prefix[tok], stamp);
}

/* match_token for each of `tokens`. */
static int
match_tokens(EvidenceCore *self, PyObject *tokens, uint32_t stamp)
{
    PyObject *iter, *token;
    int st = 0;

    if (PyTuple_CheckExact(tokens)) {
        /* EvidenceIndex's case (TextCache.normalized_informative): the informative tokens in
         * order, repeats included; marking a token or a candidate twice changes nothing. */
        Py_ssize_t i;
        for (i = 0; st == 0 && i < PyTuple_GET_SIZE(tokens); i++) {
            st = match_token(self, PyTuple_GET_ITEM(tokens, i), stamp);
        }
        return st;
    }
    iter = PyObject_GetIter(tokens);
    if (iter == NULL) {
        return -1;
    }
    while (st == 0 && (token = PyIter_Next(iter)) != NULL) {
        st = match_token(self, token, stamp);
        Py_DECREF(token);
    }
    Py_DECREF(iter);
    return st == 0 && PyErr_Occurred() ? -1 : st;
}

/* match's tokens and candidates, the core entered, from a text's informative tokens and its
 * normalized text (a str): 0, or -1 with an exception. */
static int
scan_given(EvidenceCore *self, PyObject *tokens, PyObject *normalized)
{
    uint32_t stamp = next_stamp(self);
    self->candidates.len = self->seq.len = 0;
    if (match_tokens(self, tokens, stamp) < 0) {
        return -1;
    }
    return PyUnicode_GET_LENGTH(normalized) == 0 ? 0 : str_pieces(self, normalized, 0, &self->seq);
}

PyDoc_STRVAR(match_doc,
"match($self, tokens, normalized, /)\n"
"--\n"
"\n"
"The units a text reuses, as EvidenceIndex.match_output matches them: the text's informative\n"
"tokens (an iterable of str; repeats change nothing) and its normalized text (a str). Returns\n"
"their unit ids, ascending.");

static PyObject *
match(EvidenceCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *normalized, *list = NULL;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "match() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    normalized = args[1];
    if (!PyUnicode_Check(normalized)) {
        PyErr_Format(PyExc_TypeError, "match(): normalized must be str, not %.100s",
                     Py_TYPE(normalized)->tp_name);
        return NULL;
    }
    if (enter(self) < 0) {
        return NULL;
    }
    if (scan_given(self, args[0], normalized) == 0) {
        list = match_candidates(self);
    }
    self->busy = 0;
    return list;
}

/* A unit id as list indexing takes it (negative from the end); -1 with IndexError. */
static Py_ssize_t
unit_index(EvidenceCore *self, PyObject *arg)
{
    Py_ssize_t i;
    if (!PyIndex_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "unit ids must be integers, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    i = PyNumber_AsSsize_t(arg, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (i < 0) {
        i += self->n_units;
    }
    if (i < 0 || i >= self->n_units) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return -1;
    }
    return i;
}

/* A new str of token id `tok`. */
static PyObject *
token_str(const EvidenceCore *self, int32_t tok)
{
    return PyUnicode_FromKindAndData(self->word_kind[tok], self->chars + self->word_off[tok],
                                     self->word_len[tok]);
}

/* The (text, normalized, tokens) of unit id u (indexed by add_text), made from its source's text
 * and its class's tokens as TextCache.units makes a Unit's (text._segment_unit). A new
 * reference, or NULL with an exception. */
static PyObject *
unit_fields(EvidenceCore *self, Py_ssize_t u)
{
    int32_t c = self->unit_class[u], n = self->full_len[c], k, n_info = 0;
    const int32_t *full = CLASS_FULL(self, c);
    PyObject *words = NULL, *informative = NULL, *normalized = NULL, *text = NULL;
    PyObject *space = NULL, *fields = NULL;
    PyObject *source_text = self->source_text[self->owner[u]];

    if (source_text == NULL) {
        PyErr_Format(PyExc_ValueError, "units(): unit %zd was given to add_units", u);
        return NULL;
    }
    if ((words = PyList_New(n)) == NULL) {
        return NULL;
    }
    for (k = 0; k < n; k++) {
        PyObject *word = token_str(self, full[k]);
        if (word == NULL) {
            goto done;
        }
        PyList_SET_ITEM(words, k, word);
        n_info += !self->word_stop[full[k]];
    }
    if ((informative = PyTuple_New(n_info)) == NULL) {
        goto done;
    }
    for (k = 0, n_info = 0; k < n; k++) {
        if (!self->word_stop[full[k]]) {
            PyTuple_SET_ITEM(informative, n_info++, Py_NewRef(PyList_GET_ITEM(words, k)));
        }
    }
    if ((space = PyUnicode_FromOrdinal(' ')) == NULL ||
        (normalized = PyUnicode_Join(space, words)) == NULL ||
        (text = PyUnicode_Substring(source_text, self->text_start[u], self->text_end[u])) ==
            NULL) {
        goto done;
    }
    fields = PyTuple_Pack(3, text, normalized, informative);
done:
    Py_XDECREF(words);
    Py_XDECREF(informative);
    Py_XDECREF(normalized);
    Py_XDECREF(text);
    Py_XDECREF(space);
    return fields;
}

PyDoc_STRVAR(owner_doc,
"owner($self, unit_id, /)\n"
"--\n"
"\n"
"The source index of the unit (negative ids count from the end, as list indexing does).");

static PyObject *
owner(EvidenceCore *self, PyObject *arg)
{
    Py_ssize_t i = unit_index(self, arg);
    if (i < 0) {
        return NULL;
    }
    return PyLong_FromLong(self->owner[i]);
}

PyDoc_STRVAR(units_doc,
"units($self, start, stop, /)\n"
"--\n"
"\n"
"The units of ids start to stop - 1 (0 <= start <= stop <= the number of units), indexed by\n"
"add_text: a list of (text, normalized, tokens), the fields of the tracehound.text.Unit that\n"
"TextCache.units makes of the source's text (its token_set being frozenset(tokens)).\n"
"ValueError for a unit given to add_units.");

static PyObject *
units(EvidenceCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop, u;
    PyObject *list;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "units() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    start = PyNumber_AsSsize_t(args[0], PyExc_IndexError);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    stop = PyNumber_AsSsize_t(args[1], PyExc_IndexError);
    if (stop == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0 || stop < start || stop > self->n_units) {
        PyErr_SetString(PyExc_IndexError, "units(): unit ids out of range");
        return NULL;
    }
    if (enter(self) < 0) { /* the objects made may start a garbage collection */
        return NULL;
    }
    list = PyList_New(stop - start);
    for (u = start; list != NULL && u < stop; u++) {
        PyObject *item = unit_fields(self, u);
        if (item == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, u - start, item);
    }
    self->busy = 0;
    return list;
}

PyDoc_STRVAR(repeated_groups_doc,
"repeated_groups($self, /)\n"
"--\n"
"\n"
"The groups of two or more sources (source indexes, ascending), ordered by first member,\n"
"as EvidenceIndex.repeated_groups returns them.");

static PyObject *
repeated_groups(EvidenceCore *self, PyObject *unused)
{
    PyObject *result, **lists;
    Py_ssize_t s;

    (void)unused;
    result = PyList_New(0);
    if (result == NULL || self->n_sources == 0) {
        return result;
    }
    /* root -> its group's list (borrowed) */
    lists = PyMem_Calloc((size_t)self->n_sources, sizeof(PyObject *));
    if (lists == NULL) {
        Py_DECREF(result);
        return PyErr_NoMemory();
    }
    if (enter(self) < 0) { /* the lists made below may start a garbage collection */
        PyMem_Free(lists);
        Py_DECREF(result);
        return NULL;
    }
    /* sources in order: each group's list is made at its first (smallest) member, so groups come
     * ordered by first member, which is the order of the sorted lists (groups are disjoint) */
    for (s = 0; s < self->n_sources; s++) {
        int32_t root = find(self, (int32_t)s);
        PyObject *source;
        if (self->size[root] < 2) {
            continue;
        }
        if (lists[root] == NULL) {
            PyObject *group = PyList_New(0);
            if (group == NULL) {
                goto error;
            }
            if (PyList_Append(result, group) < 0) {
                Py_DECREF(group);
                goto error;
            }
            Py_DECREF(group);
            lists[root] = group; /* borrowed: `result` holds it */
        }
        source = PyLong_FromSsize_t(s);
        if (source == NULL || PyList_Append(lists[root], source) < 0) {
            Py_XDECREF(source);
            goto error;
        }
        Py_DECREF(source);
    }
    self->busy = 0;
    PyMem_Free(lists);
    return result;
error:
    self->busy = 0;
    PyMem_Free(lists);
    Py_DECREF(result);
    return NULL;
}

PyDoc_STRVAR(fresh_doc,
"fresh($self, /)\n"
"--\n"
"\n"
"A new, empty EvidenceCore with the same stop words, which copies this one's\n"
"interned stop words (when this one holds no unit) instead of interning them again: a core\n"
"kept for that makes each trace's core cheaper to start.");

static PyObject *fresh(EvidenceCore *self, PyObject *unused);

/* --- type ------------------------------------------------------------------------------------ */

/* A new core of `type` (zeroed), with its references; NULL with an exception. */
static EvidenceCore *
core_alloc(PyTypeObject *type, PyObject *stop_words)
{
    EvidenceCore *self = (EvidenceCore *)type->tp_alloc(type, 0); /* zeroed */
    if (self == NULL) {
        return NULL;
    }
    self->stop_words = Py_NewRef(stop_words);
    return self;
}

static PyObject *
fresh(EvidenceCore *self, PyObject *unused)
{
    EvidenceCore *core;
    (void)unused;
    if (self->stop_words == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "EvidenceCore was cleared");
        return NULL;
    }
    core = core_alloc(Py_TYPE(self), self->stop_words);
    if (core != NULL) {
        core->vocabulary_from = Py_NewRef((PyObject *)self);
    }
    return (PyObject *)core;
}

static PyObject *
core_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *stop_words, *iter, *word;

    if (PyTuple_GET_SIZE(args) != 1 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError,
                        "EvidenceCore() takes 1 positional argument: stop_words");
        return NULL;
    }
    stop_words = PyTuple_GET_ITEM(args, 0);
    if (!PyFrozenSet_CheckExact(stop_words)) {
        PyErr_Format(PyExc_TypeError,
                     "EvidenceCore() argument 'stop_words' must be a frozenset, not %.100s",
                     Py_TYPE(stop_words)->tp_name);
        return NULL;
    }
    /* strs only (a token is a stop word when it equals one) */
    if ((iter = PyObject_GetIter(stop_words)) == NULL) {
        return NULL;
    }
    while ((word = PyIter_Next(iter)) != NULL) {
        int ok = PyUnicode_CheckExact(word);
        Py_DECREF(word);
        if (!ok) {
            Py_DECREF(iter);
            PyErr_SetString(PyExc_TypeError,
                            "EvidenceCore() argument 'stop_words' must hold strs only");
            return NULL;
        }
    }
    Py_DECREF(iter);
    if (PyErr_Occurred()) {
        return NULL;
    }
    return (PyObject *)core_alloc(type, stop_words);
}

/* The sources' texts are strs, which refer to nothing, so they need no visit (and stay until
 * the object goes). */
static int
core_traverse(EvidenceCore *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->stop_words);
    Py_VISIT(self->vocabulary_from);
    return 0;
}

/* (the core is then unusable: see enter) */
static int
core_clear(EvidenceCore *self)
{
    Py_CLEAR(self->stop_words);
    Py_CLEAR(self->vocabulary_from);
    return 0;
}

static void
core_dealloc(EvidenceCore *self)
{
    PyTypeObject *type = Py_TYPE(self);
    Py_ssize_t i;

    PyObject_GC_UnTrack(self);
    (void)core_clear(self);
    for (i = 0; i < self->n_tokens; i++) {
        if (self->prefix[i].cap) {
            PyMem_Free(self->prefix[i].ids.heap);
        }
        if (self->full[i].cap) {
            PyMem_Free(self->full[i].ids.heap);
        }
    }
    for (i = 0; i < self->n_sources; i++) {
        Py_XDECREF(self->source_text[i]);
    }
    if (pool_give(self)) {
        type->tp_free(self);
        Py_DECREF(type);
        return;
    }
    table_free(&self->words);
    table_free(&self->class_of);
    PyMem_Free(self->chars);
    PyMem_Free(self->word_key);
    PyMem_Free(self->word_off);
    PyMem_Free(self->word_len);
    PyMem_Free(self->word_kind);
    PyMem_Free(self->word_stop);
    PyMem_Free(self->prefix);
    PyMem_Free(self->full);
    PyMem_Free(self->token_mark);
    PyMem_Free(self->threshold);
    PyMem_Free(self->tok_start);
    PyMem_Free(self->tok_len);
    PyMem_Free(self->full_start);
    PyMem_Free(self->full_len);
    PyMem_Free(self->first_unit);
    PyMem_Free(self->last_unit);
    PyMem_Free(self->class_mark);
    PyMem_Free(self->class_tokens.items);
    PyMem_Free(self->full_tokens.items);
    PyMem_Free(self->owner);
    PyMem_Free(self->next_unit);
    PyMem_Free(self->unit_class);
    PyMem_Free(self->text_start);
    PyMem_Free(self->text_end);
    PyMem_Free(self->parent);
    PyMem_Free(self->size);
    PyMem_Free(self->source_text);
    PyMem_Free(self->candidates.items);
    PyMem_Free(self->matched.items);
    PyMem_Free(self->rarest.items);
    PyMem_Free(self->seq.items);
    PyMem_Free(self->informative.items);
    PyMem_Free(self->keys);
    PyMem_Free(self->scratch);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef core_methods[] = {
    {"add_text", (PyCFunction)(void (*)(void))add_text, METH_FASTCALL, add_text_doc},
    {"add_units", (PyCFunction)(void (*)(void))add_units, METH_FASTCALL, add_units_doc},
    {"match_text", (PyCFunction)(void (*)(void))match_text, METH_O, match_text_doc},
    {"match", (PyCFunction)(void (*)(void))match, METH_FASTCALL, match_doc},
    {"owner", (PyCFunction)(void (*)(void))owner, METH_O, owner_doc},
    {"units", (PyCFunction)(void (*)(void))units, METH_FASTCALL, units_doc},
    {"repeated_groups", (PyCFunction)(void (*)(void))repeated_groups, METH_NOARGS,
     repeated_groups_doc},
    {"fresh", (PyCFunction)(void (*)(void))fresh, METH_NOARGS, fresh_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(core_doc,
"EvidenceCore(stop_words)\n"
"--\n"
"\n"
"The state and loops of tracehound.evaluators._evidence_index.EvidenceIndex in C: token\n"
"postings, classes of identical units, repeated-evidence groups; for the texts of the\n"
"tokenizer's ASCII path, their units and tokens too. stop_words: the frozenset of tokens that\n"
"are not informative (tracehound.text.STOP_WORDS). The Python index calls it, records the\n"
"reuse positions and makes the Unit objects itself, and stays the reference: every match and\n"
"group is the same.");

static PyType_Slot core_slots[] = {
    {Py_tp_new, core_new},
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_traverse, core_traverse},
    {Py_tp_clear, core_clear},
    {Py_tp_methods, core_methods},
    {Py_tp_doc, (void *)core_doc},
    {0, NULL},
};

static PyType_Spec core_spec = {
    "tracehound._speedups.EvidenceCore",
    sizeof(EvidenceCore),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
#ifdef Py_TPFLAGS_IMMUTABLETYPE
        | Py_TPFLAGS_IMMUTABLETYPE
#endif
    ,
    core_slots,
};


int
tracehound_add_evidence(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &core_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "EvidenceCore", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}
