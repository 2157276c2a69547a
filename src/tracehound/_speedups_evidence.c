/*
 * tracehound._speedups: EvidenceCore, the state and loops of the evidence index in C.
 *
 * tracehound.evaluators._evidence_index.EvidenceIndex (read its module docstring first) stays the
 * reference and the fallback. An EvidenceCore holds the same index with tokens interned to ints
 * (in a hash table of its own, see "interning"): prefix and full postings are arrays per token id
 * (a token's document frequency is the length of its full posting), a class (units of one
 * normalized text) is an array of unique token ids with its threshold, the union-find of sources
 * into repeated-evidence groups is two int arrays. Candidate sets and overlap counts use mark
 * arrays stamped per operation instead of Python sets. Every decision is the Python index's:
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
 * The reuse positions stay on the EvidenceSource objects, updated as the Python index does
 * (`reuse[slot] += (position,)` through the source's `reuse_positions` attribute, read at each
 * match: the evaluator replaces those lists). Units are read through their `normalized`, `tokens`
 * and `token_set` attributes; `token_set` must be `frozenset(tokens)` (checked by size).
 *
 * The GIL is held throughout; the methods run no Python code for the str, tuple, frozenset, list
 * and dataclass objects the index passes. A call that re-enters the same core (only possible
 * through Python code of exotic objects, or of a finalizer run by a garbage collection that an
 * allocation triggers) raises RuntimeError rather than see arrays being changed.
 *
 * Memory is allocated as the index grows (nothing before the first unit): the engine keeps one
 * index per trace, for up to thousands of traces at a time.
 */
#include "_speedups.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* A hash table of ids by key (see "interning" below). */
typedef struct {
    PyObject *key; /* a strong reference; NULL: an empty slot */
    Py_hash_t hash;
    int32_t id;
} entry_t;

typedef struct {
    entry_t *entries;
    Py_ssize_t mask; /* capacity - 1 (a power of 2), or 0 before the first key */
    Py_ssize_t used;
    int other_keys;  /* a key is not an exact str (so it might refer to other objects) */
} table_t;

typedef struct {
    PyObject_HEAD
    table_t token_ids; /* token -> token id */
    table_t class_of;  /* normalized text -> class id */
    PyObject *units;   /* list: unit id -> Unit */
    /* attribute names, interned (per instance: the module has no state of this file's) */
    PyObject *s_normalized, *s_tokens, *s_token_set, *s_reuse_positions;

    /* per token id */
    Py_ssize_t n_tokens, cap_tokens;
    posting_t *prefix;    /* classes indexed under the token */
    posting_t *full;      /* every class holding the token (its length: the token's df) */
    uint32_t *token_mark; /* == stamp: the token is in the current text or unit */

    /* per class id */
    Py_ssize_t n_classes, cap_classes;
    int32_t *threshold;   /* Unit.threshold of its units */
    int32_t *tok_start;   /* its unique token ids, in text order: */
    int32_t *tok_len;     /* class_tokens.items[tok_start:tok_start + tok_len] */
    int32_t *first_unit;  /* its units: first_unit, then next_unit[...] until -1, ascending */
    int32_t *last_unit;
    uint32_t *class_mark; /* == stamp: already a candidate of the current operation */
    PyObject **normalized; /* its normalized text (strong references) */
    ivec_t class_tokens;
    int32_t max_threshold;

    /* per unit id */
    Py_ssize_t n_units, cap_units;
    int32_t *owner;       /* source index */
    int32_t *slot;        /* index within the source */
    int32_t *next_unit;   /* next unit of the same class, -1 at the end */

    /* per source: union-find */
    Py_ssize_t n_sources, cap_sources;
    int32_t *parent;
    int32_t *size;

    uint32_t stamp;
    ivec_t candidates, matched, rarest;
    uint64_t *keys; /* sort keys of `_rarest` */
    Py_ssize_t cap_keys;
    int busy;
} EvidenceCore;

/* --- arrays ---------------------------------------------------------------------------------- */

static int
ivec_push(ivec_t *v, int32_t x)
{
    if (v->len == v->cap) {
        int32_t cap, *items;
        if (v->cap > INT32_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap = v->cap ? 2 * v->cap : 4;
        items = PyMem_Realloc(v->items, (size_t)cap * sizeof(int32_t));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = x;
    return 0;
}

static inline const int32_t *
posting_ids(const posting_t *p)
{
    return p->cap ? p->ids.heap : p->ids.here;
}

static int
posting_push(posting_t *p, int32_t x)
{
    if (p->cap == 0 && p->len < POSTING_INLINE) {
        p->ids.here[p->len++] = x;
        return 0;
    }
    if (p->cap == 0 || p->len == p->cap) {
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

/* `array` (of `old` elements of `elem` bytes) resized to `cap` elements, the new ones zeroed;
 * NULL with MemoryError (`array` is then unchanged). */
static void *
grow(void *array, size_t elem, Py_ssize_t old, Py_ssize_t cap)
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
    memset(grown + (size_t)old * elem, 0, (size_t)(cap - old) * elem);
    return grown;
}

/* self->field grown from `old` to `cap` elements, or return -1 from the calling function. */
#define GROW(field)                                                          \
    do {                                                                     \
        void *grown_ = grow(self->field, sizeof(*self->field), old, cap);    \
        if (grown_ == NULL) {                                                \
            return -1;                                                       \
        }                                                                    \
        self->field = grown_;                                                \
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

static int
reserve_token(EvidenceCore *self)
{
    Py_ssize_t old = self->cap_tokens, cap = next_cap(self->n_tokens, old, 64);
    if (cap < 0) {
        return -1;
    }
    if (cap == old) {
        return 0;
    }
    GROW(prefix);
    GROW(full);
    GROW(token_mark);
    self->cap_tokens = cap;
    return 0;
}

static int
reserve_class(EvidenceCore *self)
{
    Py_ssize_t old = self->cap_classes, cap = next_cap(self->n_classes, old, 16);
    if (cap < 0) {
        return -1;
    }
    if (cap == old) {
        return 0;
    }
    GROW(threshold);
    GROW(tok_start);
    GROW(tok_len);
    GROW(first_unit);
    GROW(last_unit);
    GROW(class_mark);
    GROW(normalized);
    self->cap_classes = cap;
    return 0;
}

static int
reserve_unit(EvidenceCore *self)
{
    Py_ssize_t old = self->cap_units, cap = next_cap(self->n_units, old, 16);
    if (cap < 0) {
        return -1;
    }
    if (cap == old) {
        return 0;
    }
    GROW(owner);
    GROW(slot);
    GROW(next_unit);
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
    GROW(parent);
    GROW(size);
    self->cap_sources = cap;
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

/* --- interning ------------------------------------------------------------------------------- */

/*
 * Tokens and normalized texts get their ids from hash tables with the semantics of the dicts of
 * the Python index: keys are the same if they are the same object, or have the same hash and
 * compare equal (exact strs compare as dict compares them: length, kind and characters). A dict
 * would do, but each new key would cost an int object and, as it grows, dict resizes, and most
 * tokens of a trace are new to it. Open addressing, linear probing, at most half full.
 */

/* 1 if a == b, 0 if not, -1 with an exception (only for keys other than exact strs). */
static int
keys_equal(PyObject *a, PyObject *b)
{
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)
#if PY_VERSION_HEX < 0x030C0000
        && PyUnicode_IS_READY(a) && PyUnicode_IS_READY(b)
#endif
    ) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(a);
        int kind = PyUnicode_KIND(a);
        return n == PyUnicode_GET_LENGTH(b) && kind == (int)PyUnicode_KIND(b) &&
               memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
    }
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* The id of `key`, whose hash is `hash`; -1 if absent, -2 with an exception. */
static int32_t
table_find(const table_t *t, PyObject *key, Py_hash_t hash)
{
    size_t i;
    if (t->entries == NULL) {
        return -1;
    }
    for (i = (size_t)hash & (size_t)t->mask;; i = (i + 1) & (size_t)t->mask) {
        const entry_t *e = &t->entries[i];
        if (e->key == NULL) {
            return -1;
        }
        if (e->key == key) {
            return e->id;
        }
        if (e->hash == hash) {
            int eq = keys_equal(e->key, key);
            if (eq != 0) {
                return eq > 0 ? e->id : -2;
            }
        }
    }
}

/* Add `key` (absent, whose hash is `hash`) with `id`. */
static int
table_add(table_t *t, PyObject *key, Py_hash_t hash, int32_t id)
{
    size_t i;
    if (2 * (t->used + 1) > t->mask + 1) {
        Py_ssize_t cap = t->entries == NULL ? 32 : 2 * (t->mask + 1), k;
        entry_t *entries;
        if ((size_t)cap > (size_t)PY_SSIZE_T_MAX / sizeof(entry_t)) {
            PyErr_NoMemory();
            return -1;
        }
        entries = PyMem_Calloc((size_t)cap, sizeof(entry_t));
        if (entries == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (k = 0; t->entries != NULL && k <= t->mask; k++) {
            const entry_t *e = &t->entries[k];
            if (e->key != NULL) {
                for (i = (size_t)e->hash & (size_t)(cap - 1); entries[i].key != NULL;
                     i = (i + 1) & (size_t)(cap - 1)) {
                }
                entries[i] = *e;
            }
        }
        PyMem_Free(t->entries);
        t->entries = entries;
        t->mask = cap - 1;
    }
    for (i = (size_t)hash & (size_t)t->mask; t->entries[i].key != NULL;
         i = (i + 1) & (size_t)t->mask) {
    }
    Py_INCREF(key);
    t->entries[i].key = key;
    t->entries[i].hash = hash;
    t->entries[i].id = id;
    t->used += 1;
    if (!PyUnicode_CheckExact(key)) {
        t->other_keys = 1;
    }
    return 0;
}

/* Strs refer to no other object: only tables with other keys need visiting. */
static int
table_traverse(const table_t *t, visitproc visit, void *arg)
{
    Py_ssize_t k;
    for (k = 0; t->other_keys && t->entries != NULL && k <= t->mask; k++) {
        Py_VISIT(t->entries[k].key);
    }
    return 0;
}

static void
table_clear(table_t *t)
{
    entry_t *entries = t->entries;
    Py_ssize_t k, mask = t->mask;
    t->entries = NULL;
    t->mask = t->used = 0;
    t->other_keys = 0;
    for (k = 0; entries != NULL && k <= mask; k++) {
        Py_XDECREF(entries[k].key);
    }
    PyMem_Free(entries);
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

/*
 * Unit.matches' containment test, `f" {a} " in f" {b} "`, for the normalized texts a (of the
 * single-token unit) and b; false if either is empty (Unit.matches checks both first). Without
 * building the padded strings: " a " is in " b " exactly when a occurs in b at an index i with
 * a space or the start of b before it and a space or the end of b after it. 1, 0, or -1 with an
 * exception.
 */
static int
contained(PyObject *a, PyObject *b)
{
    Py_ssize_t la = PyUnicode_GetLength(a), lb = PyUnicode_GetLength(b), start = 0, i;
    Py_UCS4 c;

    if (la < 0 || lb < 0) {
        return -1;
    }
    if (la == 0 || lb == 0) {
        return 0;
    }
    while (start + la <= lb) {
        i = PyUnicode_Find(b, a, start, lb, 1);
        if (i < 0) {
            return i == -1 ? 0 : -1;
        }
        if (i > 0) {
            c = PyUnicode_ReadChar(b, i - 1);
            if (c == (Py_UCS4)-1 && PyErr_Occurred()) {
                return -1;
            }
            if (c != ' ') {
                start = i + 1;
                continue;
            }
        }
        if (i + la == lb) {
            return 1;
        }
        c = PyUnicode_ReadChar(b, i + la);
        if (c == (Py_UCS4)-1 && PyErr_Occurred()) {
            return -1;
        }
        if (c == ' ') {
            return 1;
        }
        start = i + 1;
    }
    return 0;
}

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
static int
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

/* The id of `token`, interned if new; -1 with an exception. */
static int32_t
token_id(EvidenceCore *self, PyObject *token)
{
    Py_hash_t hash = PyObject_Hash(token);
    int32_t id;

    if (hash == -1) {
        return -1;
    }
    id = table_find(&self->token_ids, token, hash);
    if (id != -1) {
        return id < 0 ? -1 : id;
    }
    if (reserve_token(self) < 0 ||
        table_add(&self->token_ids, token, hash, (int32_t)self->n_tokens) < 0) {
        return -1;
    }
    return (int32_t)self->n_tokens++; /* its arrays were zeroed by reserve_token */
}

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
    PyObject *norm = self->normalized[c];

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
            m = ot > 1 ? 1 : contained(self->normalized[other], norm);
        }
        if (m == 0 && count >= t) {
            m = t > 1 ? 1 : contained(norm, self->normalized[other]);
        }
        if (m < 0) {
            return -1;
        }
        if (m) {
            unite(self, other_source, source);
        }
    }
    return 0;
}

/* A new class for `unit`, whose normalized text `norm` (of hash `hash`) no class has, the first
 * unit of which is unit id u of `source`. */
static int
add_class(EvidenceCore *self, PyObject *unit, PyObject *norm, Py_hash_t hash, int32_t u,
          int32_t source)
{
    PyObject *tokens = NULL, *token_set = NULL;
    Py_ssize_t i, n_set;
    int32_t c = (int32_t)self->n_classes, start = self->class_tokens.len, n, t, k;
    uint32_t stamp;
    int result = -1;

    if (!PyUnicode_Check(norm)) {
        PyErr_Format(PyExc_TypeError, "unit.normalized must be str, not %.100s",
                     Py_TYPE(norm)->tp_name);
        return -1;
    }
    tokens = PyObject_GetAttr(unit, self->s_tokens);
    if (tokens == NULL) {
        goto done;
    }
    if (!PyTuple_Check(tokens)) {
        PyErr_Format(PyExc_TypeError, "unit.tokens must be a tuple, not %.100s",
                     Py_TYPE(tokens)->tp_name);
        goto done;
    }
    token_set = PyObject_GetAttr(unit, self->s_token_set);
    if (token_set == NULL) {
        goto done;
    }
    n_set = PyObject_Size(token_set);
    if (n_set < 0 || reserve_class(self) < 0) {
        goto done;
    }
    /* the unique tokens in text order (`dict.fromkeys(unit.tokens)`), marked with the stamp,
     * which `overlap` then counts in `link_class` */
    stamp = next_stamp(self);
    for (i = 0; i < PyTuple_GET_SIZE(tokens); i++) {
        int32_t tok = token_id(self, PyTuple_GET_ITEM(tokens, i));
        if (tok < 0) {
            goto undo;
        }
        if (self->token_mark[tok] != stamp) {
            self->token_mark[tok] = stamp;
            if (ivec_push(&self->class_tokens, tok) < 0) {
                goto undo;
            }
        }
    }
    n = self->class_tokens.len - start;
    if (n != n_set) {
        PyErr_SetString(PyExc_ValueError, "unit.token_set is not frozenset(unit.tokens)");
        goto undo;
    }
    t = unit_threshold(n);
    if (table_add(&self->class_of, norm, hash, c) < 0) {
        goto undo;
    }
    self->threshold[c] = t;
    self->tok_start[c] = start;
    self->tok_len[c] = n;
    self->first_unit[c] = self->last_unit[c] = u;
    self->class_mark[c] = 0;
    Py_INCREF(norm);
    self->normalized[c] = norm;
    self->n_classes = c + 1;
    /* From here on the class is in place; an error (MemoryError) leaves it partly indexed. */
    for (k = 0; k < n; k++) {
        int32_t tok = self->class_tokens.items[start + k];
        if (posting_push(&self->full[tok], c) < 0) {
            goto done;
        }
    }
    if (rarest(self, c, n - t + 1) < 0 || link_class(self, c, source, stamp) < 0) {
        goto done;
    }
    for (k = 0; k < self->rarest.len; k++) {
        if (posting_push(&self->prefix[self->rarest.items[k]], c) < 0) {
            goto done;
        }
    }
    result = 0;
    goto done;
undo:
    self->class_tokens.len = start;
done:
    Py_XDECREF(tokens);
    Py_XDECREF(token_set);
    return result;
}

/* One unit of `source` at `slot`: the per-unit loop of EvidenceIndex.add_evidence. */
static int
add_unit(EvidenceCore *self, PyObject *unit, int32_t source, Py_ssize_t slot)
{
    PyObject *norm;
    Py_hash_t hash;
    int32_t u = (int32_t)self->n_units, c;
    int result = -1;

    if (slot > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "EvidenceCore: more than 2**31 - 1 units");
        return -1;
    }
    norm = PyObject_GetAttr(unit, self->s_normalized);
    if (norm == NULL || reserve_unit(self) < 0 || PyList_Append(self->units, unit) < 0) {
        Py_XDECREF(norm);
        return -1;
    }
    self->owner[u] = source;
    self->slot[u] = (int32_t)slot;
    self->next_unit[u] = -1;
    self->n_units = u + 1;
    hash = PyObject_Hash(norm);
    c = hash == -1 ? -2 : table_find(&self->class_of, norm, hash);
    if (c >= 0) {
        /* Same text as earlier units: it matches them, and exactly what they match, whose
         * sources are already in their group. */
        self->next_unit[self->last_unit[c]] = u;
        self->last_unit[c] = u;
        unite(self, self->owner[self->first_unit[c]], source);
        result = 0;
    }
    else if (c == -1) {
        result = add_class(self, unit, norm, hash, u, source);
    }
    Py_DECREF(norm);
    return result;
}

/* --- methods --------------------------------------------------------------------------------- */

static int
enter(EvidenceCore *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "EvidenceCore is already in use (re-entered)");
        return -1;
    }
    if (self->units == NULL) { /* cleared by the garbage collector */
        PyErr_SetString(PyExc_RuntimeError, "EvidenceCore was cleared");
        return -1;
    }
    self->busy = 1;
    return 0;
}

PyDoc_STRVAR(add_units_doc,
"add_units($self, source_index, units, /)\n"
"--\n"
"\n"
"Index the units (a list or tuple of tracehound.text.Unit) of the source at source_index,\n"
"in order, as EvidenceIndex.add_evidence does; returns the unit id of the first one (they\n"
"get consecutive ids). source_index must be above that of every earlier call; sources\n"
"skipped in between are sources without units.");

static PyObject *
add_units(EvidenceCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *units;
    Py_ssize_t source, first, i;
    int st = 0;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "add_units() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    source = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
    if (source == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (source < self->n_sources) {
        PyErr_SetString(PyExc_ValueError, "add_units(): source_index goes back");
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
    while (self->n_sources <= source) {
        Py_ssize_t s = self->n_sources;
        if (reserve_source(self) < 0) {
            st = -1;
            break;
        }
        self->parent[s] = (int32_t)s;
        self->size[s] = 1;
        self->n_sources = s + 1;
    }
    first = self->n_units;
    for (i = 0; st == 0 && i < PySequence_Fast_GET_SIZE(units); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(units, i);
        Py_INCREF(item); /* the list is the caller's: held while Python code may run */
        st = add_unit(self, item, (int32_t)source, i);
        Py_DECREF(item);
    }
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

/* `sources[owner].reuse_positions[slot] += (position,)` for unit u. */
static int
add_reuse(EvidenceCore *self, PyObject *sources, int32_t u, PyObject *position)
{
    PyObject *source, *reuse, *old, *grown, *key = NULL, *one = NULL;
    Py_ssize_t slot = self->slot[u], k, n;
    int result = -1;

    if (PyList_CheckExact(sources)) {
        if (self->owner[u] >= PyList_GET_SIZE(sources)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            return -1;
        }
        source = PyList_GET_ITEM(sources, self->owner[u]);
        Py_INCREF(source);
    }
    else {
        source = PySequence_GetItem(sources, self->owner[u]);
        if (source == NULL) {
            return -1;
        }
    }
    reuse = PyObject_GetAttr(source, self->s_reuse_positions);
    Py_DECREF(source);
    if (reuse == NULL) {
        return -1;
    }
    if (PyList_CheckExact(reuse) && slot < PyList_GET_SIZE(reuse) &&
        PyTuple_CheckExact(PyList_GET_ITEM(reuse, slot))) {
        /* the usual case: a list of tuples, the tuple copied one longer */
        old = PyList_GET_ITEM(reuse, slot);
        n = PyTuple_GET_SIZE(old);
        grown = PyTuple_New(n + 1);
        if (grown == NULL) {
            goto done;
        }
        for (k = 0; k < n; k++) {
            PyObject *p = PyTuple_GET_ITEM(old, k);
            Py_INCREF(p);
            PyTuple_SET_ITEM(grown, k, p);
        }
        Py_INCREF(position);
        PyTuple_SET_ITEM(grown, n, position);
        PyList_SET_ITEM(reuse, slot, grown); /* the list takes the reference */
        Py_DECREF(old);
        result = 0;
        goto done;
    }
    /* anything else: what `reuse[slot] += (position,)` does */
    key = PyLong_FromSsize_t(slot);
    one = PyTuple_Pack(1, position);
    if (key == NULL || one == NULL) {
        goto done;
    }
    old = PyObject_GetItem(reuse, key);
    if (old == NULL) {
        goto done;
    }
    grown = PyNumber_InPlaceAdd(old, one);
    Py_DECREF(old);
    if (grown == NULL) {
        goto done;
    }
    result = PyObject_SetItem(reuse, key, grown);
    Py_DECREF(grown);
done:
    Py_XDECREF(key);
    Py_XDECREF(one);
    Py_DECREF(reuse);
    return result;
}

/* One token of the text being matched: marked for `overlap`, the classes under it in `prefix`
 * added to the candidates (`_candidates`). */
static int
match_token(EvidenceCore *self, PyObject *token, Py_hash_t hash, uint32_t stamp)
{
    int32_t tok = table_find(&self->token_ids, token, hash);
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

    if (PyFrozenSet_CheckExact(tokens)) {
        /* A Tokenized.token_set: the set's own table, with each key's hash,
         * without an iterator or a hash call. A frozenset does not change; its table has no
         * deleted ("dummy", hash -1) entries, skipped all the same. */
        const PySetObject *set = (const PySetObject *)tokens;
        Py_ssize_t i;
        for (i = 0; st == 0 && i <= set->mask; i++) {
            const setentry *entry = &set->table[i];
            if (entry->key != NULL && entry->hash != -1) {
                st = match_token(self, entry->key, entry->hash, stamp);
            }
        }
        return st;
    }
    if (PyTuple_CheckExact(tokens)) {
        /* The evaluator's case (TextCache.normalized_informative): the informative tokens in
         * order, repeats included; marking a token or a candidate twice changes nothing. */
        Py_ssize_t i;
        for (i = 0; st == 0 && i < PyTuple_GET_SIZE(tokens); i++) {
            PyObject *item = PyTuple_GET_ITEM(tokens, i);
            Py_hash_t hash = PyObject_Hash(item);
            st = hash == -1 ? -1 : match_token(self, item, hash, stamp);
        }
        return st;
    }
    iter = PyObject_GetIter(tokens);
    if (iter == NULL) {
        return -1;
    }
    while (st == 0 && (token = PyIter_Next(iter)) != NULL) {
        Py_hash_t hash = PyObject_Hash(token);
        st = hash == -1 ? -1 : match_token(self, token, hash, stamp);
        Py_DECREF(token);
    }
    Py_DECREF(iter);
    return st == 0 && PyErr_Occurred() ? -1 : st;
}

PyDoc_STRVAR(match_doc,
"match($self, token_set, normalized, position, sources, /)\n"
"--\n"
"\n"
"The units a text reuses, as EvidenceIndex.match_output matches them: the text's informative\n"
"tokens (an iterable of str; repeats change nothing) and its normalized text (a non-empty\n"
"str). Returns the\n"
"unit ids ascending, and appends `position` to sources[owner].reuse_positions[slot] of each\n"
"(sources: the index's list of EvidenceSource).");

static PyObject *
match(EvidenceCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *normalized, *position, *sources, *list = NULL;
    uint32_t stamp;
    int32_t k;

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "match() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    normalized = args[1];
    position = args[2];
    sources = args[3];
    if (!PyUnicode_Check(normalized)) {
        PyErr_Format(PyExc_TypeError, "match(): normalized must be str, not %.100s",
                     Py_TYPE(normalized)->tp_name);
        return NULL;
    }
    if (enter(self) < 0) {
        return NULL;
    }
    stamp = next_stamp(self);
    self->candidates.len = 0;
    self->matched.len = 0;
    if (match_tokens(self, args[0], stamp) < 0) {
        goto error;
    }
    for (k = 0; k < self->candidates.len; k++) {
        int32_t c = self->candidates.items[k], t = self->threshold[c], u;
        if (overlap(self, c, stamp, t, t) < t) {
            continue;
        }
        if (t == 1) { /* a one-token unit: containment */
            int m = contained(self->normalized[c], normalized);
            if (m < 0) {
                goto error;
            }
            if (!m) {
                continue;
            }
        }
        for (u = self->first_unit[c]; u >= 0; u = self->next_unit[u]) {
            if (ivec_push(&self->matched, u) < 0) {
                goto error;
            }
        }
    }
    if (self->matched.len > 1) { /* (no items yet: a NULL array qsort must not see) */
        qsort(self->matched.items, (size_t)self->matched.len, sizeof(int32_t), compare_ids);
    }
    list = PyList_New(self->matched.len);
    if (list == NULL) {
        goto error;
    }
    for (k = 0; k < self->matched.len; k++) {
        PyObject *id = PyLong_FromLong(self->matched.items[k]);
        if (id == NULL) {
            goto error;
        }
        PyList_SET_ITEM(list, k, id);
    }
    for (k = 0; k < self->matched.len; k++) {
        if (add_reuse(self, sources, self->matched.items[k], position) < 0) {
            goto error;
        }
    }
    self->busy = 0;
    return list;
error:
    self->busy = 0;
    Py_XDECREF(list);
    return NULL;
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

PyDoc_STRVAR(unit_doc,
"unit($self, unit_id, /)\n"
"--\n"
"\n"
"The unit (negative ids count from the end, as list indexing does).");

static PyObject *
unit(EvidenceCore *self, PyObject *arg)
{
    Py_ssize_t i = unit_index(self, arg);
    if (i < 0) {
        return NULL;
    }
    if (self->units == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "EvidenceCore was cleared");
        return NULL;
    }
    return Py_NewRef(PyList_GET_ITEM(self->units, i));
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

/* --- type ------------------------------------------------------------------------------------ */

static PyObject *
core_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    EvidenceCore *self;

    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "EvidenceCore() takes no arguments");
        return NULL;
    }
    self = (EvidenceCore *)type->tp_alloc(type, 0); /* zeroed */
    if (self == NULL) {
        return NULL;
    }
    self->max_threshold = 0;
    self->stamp = 0;
    if ((self->units = PyList_New(0)) == NULL ||
        (self->s_normalized = PyUnicode_InternFromString("normalized")) == NULL ||
        (self->s_tokens = PyUnicode_InternFromString("tokens")) == NULL ||
        (self->s_token_set = PyUnicode_InternFromString("token_set")) == NULL ||
        (self->s_reuse_positions = PyUnicode_InternFromString("reuse_positions")) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* The containers may hold anything a unit holds. The class texts are strs, which refer to
 * nothing, so they need no visit (and stay until the object goes). */
static int
core_traverse(EvidenceCore *self, visitproc visit, void *arg)
{
    int vret;

    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->units);
    vret = table_traverse(&self->token_ids, visit, arg);
    return vret ? vret : table_traverse(&self->class_of, visit, arg);
}

static int
core_clear(EvidenceCore *self)
{
    table_clear(&self->token_ids);
    table_clear(&self->class_of);
    Py_CLEAR(self->units);
    return 0;
}

static void
core_dealloc(EvidenceCore *self)
{
    PyTypeObject *type = Py_TYPE(self);
    Py_ssize_t i;

    PyObject_GC_UnTrack(self);
    (void)core_clear(self);
    Py_CLEAR(self->s_normalized);
    Py_CLEAR(self->s_tokens);
    Py_CLEAR(self->s_token_set);
    Py_CLEAR(self->s_reuse_positions);
    for (i = 0; i < self->n_tokens; i++) {
        if (self->prefix[i].cap) {
            PyMem_Free(self->prefix[i].ids.heap);
        }
        if (self->full[i].cap) {
            PyMem_Free(self->full[i].ids.heap);
        }
    }
    for (i = 0; i < self->n_classes; i++) {
        Py_DECREF(self->normalized[i]);
    }
    PyMem_Free(self->prefix);
    PyMem_Free(self->full);
    PyMem_Free(self->token_mark);
    PyMem_Free(self->threshold);
    PyMem_Free(self->tok_start);
    PyMem_Free(self->tok_len);
    PyMem_Free(self->first_unit);
    PyMem_Free(self->last_unit);
    PyMem_Free(self->class_mark);
    PyMem_Free(self->normalized);
    PyMem_Free(self->class_tokens.items);
    PyMem_Free(self->owner);
    PyMem_Free(self->slot);
    PyMem_Free(self->next_unit);
    PyMem_Free(self->parent);
    PyMem_Free(self->size);
    PyMem_Free(self->candidates.items);
    PyMem_Free(self->matched.items);
    PyMem_Free(self->rarest.items);
    PyMem_Free(self->keys);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef core_methods[] = {
    {"add_units", (PyCFunction)(void (*)(void))add_units, METH_FASTCALL, add_units_doc},
    {"match", (PyCFunction)(void (*)(void))match, METH_FASTCALL, match_doc},
    {"owner", (PyCFunction)(void (*)(void))owner, METH_O, owner_doc},
    {"unit", (PyCFunction)(void (*)(void))unit, METH_O, unit_doc},
    {"repeated_groups", (PyCFunction)(void (*)(void))repeated_groups, METH_NOARGS,
     repeated_groups_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(core_doc,
"EvidenceCore()\n"
"--\n"
"\n"
"The state and loops of tracehound.evaluators._evidence_index.EvidenceIndex in C: token\n"
"postings, classes of identical units, repeated-evidence groups. The Python index calls it\n"
"and stays the reference: every match and group is the same.");

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

static PyMethodDef evidence_methods[] = {
    {NULL, NULL, 0, NULL},
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
    return PyModule_AddFunctions(module, evidence_methods);
}
