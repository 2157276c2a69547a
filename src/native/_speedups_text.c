/*
 * tracehound._speedups: text functions (see _speedups.h).
 *
 * text_units is tracehound.text.TextCache.units for a text not yet in the cache's _units, on
 * the tokenizer's ASCII path (every character ASCII or one of the typographic characters of
 * text._TYPOGRAPHIC, given by configure()); for any other text it answers None, touching
 * nothing, and the Python code runs. The Python code stays the reference: the same segments
 * (text._segments of the stripped text, found here by a hand-written matcher of
 * text._UNIT_BREAK, see "segments" below), the per-trace segments dict looked up and filled the
 * same way, and Units equal to those of text._segment_unit. A Unit is made without its
 * dataclass __init__: allocated through its type and its four slots set through their
 * descriptors (PyObject_GenericSetAttr, which bypasses the frozen dataclass's __setattr__).
 *
 * The tokens are those of the module's ascii_tokens (_speedups.c), called through its C function
 * pointer: the same strings, from the same table of tokens made before.
 *
 * text_tokens is tracehound.text.TextCache.normalized_informative for a text of that ASCII path:
 * " ".join(tokens) and the informative tokens, from one ascii_tokens call. Both functions tell
 * stop words by a small table of their own made from the stop-word set (see "stop words"),
 * which gives the set lookup's answer for every token without the lookup.
 *
 * C99, ordinary CPython API only. The GIL is held throughout.
 */
#include "_speedups.h"

#include <stdint.h>
#include <string.h>

#include "_speedups_tokens.h"

/* --- units ----------------------------------------------------------------------------------- */

/* What text_units and text_tokens need besides their arguments: the self of their function
 * objects. */
enum {
    SELF_ASCII_TOKENS, /* the module's ascii_tokens function object */
    SELF_TEXT,         /* the names of Unit's fields, in their order */
    SELF_NORMALIZED,
    SELF_TOKENS,
    SELF_TOKEN_SET,
    SELF_SIZE,
};

#define FLAGS_ON_STACK 256

/* --- stop words ---------------------------------------------------------------------------- */

/* The stop words, for telling whether a token is one without a set lookup: the ASCII ones,
 * chained by first character. A set holding anything but str (which might equal a token) or
 * too many words is looked up instead. */
#define STOP_WORDS_MAX 64
typedef struct {
    int use_set;                  /* look tokens up in the set itself */
    uint8_t head[128];            /* by first character: 1 + the index of a word, 0: none */
    uint8_t next[STOP_WORDS_MAX]; /* 1 + the index of the next word of that character, 0: none */
    Py_ssize_t len[STOP_WORDS_MAX];
    const Py_UCS1 *chars[STOP_WORDS_MAX]; /* the set's strings' (it is held while in use) */
} stop_words_t;

static void
stop_words_init(stop_words_t *w, PyObject *stop_words)
{
    /* the set's own table, as match_tokens (_speedups_evidence.c) reads a frozenset's */
    const PySetObject *set = (const PySetObject *)stop_words;
    Py_ssize_t i;
    int n = 0;

    memset(w->head, 0, sizeof(w->head));
    w->use_set = 1;
    for (i = 0; i <= set->mask; i++) {
        PyObject *key = set->table[i].key;
        Py_ssize_t len;
        Py_UCS1 c;
        if (key == NULL || set->table[i].hash == -1) { /* empty or deleted */
            continue;
        }
        if (!PyUnicode_CheckExact(key)) {
            return;
        }
        len = PyUnicode_GET_LENGTH(key);
        if (!PyUnicode_IS_ASCII(key) || len == 0) { /* never equal to a token */
            continue;
        }
        if (n == STOP_WORDS_MAX) {
            return;
        }
        c = PyUnicode_1BYTE_DATA(key)[0];
        w->len[n] = len;
        w->chars[n] = PyUnicode_1BYTE_DATA(key);
        w->next[n] = w->head[c];
        w->head[c] = (uint8_t)(n + 1);
        n++;
    }
    w->use_set = 0;
}

/* Whether the (ASCII, non-empty) token is one of the stop words: 1, 0, or -1 with an
 * exception. */
static ALWAYS_INLINE int
is_stop_word(const stop_words_t *w, PyObject *stop_words, PyObject *token)
{
    const Py_UCS1 *chars;
    Py_ssize_t len, j;
    int k;

    if (w->use_set) {
        return PySet_Contains(stop_words, token);
    }
    chars = PyUnicode_1BYTE_DATA(token);
    len = PyUnicode_GET_LENGTH(token);
    for (k = w->head[chars[0]]; k; k = w->next[k - 1]) {
        if (w->len[k - 1] == len) {
            const Py_UCS1 *word = w->chars[k - 1];
            for (j = 1; j < len && word[j] == chars[j]; j++) {
            }
            if (j == len) {
                return 1;
            }
        }
    }
    return 0;
}

/* For `tokens` (a list of ASCII str, as ascii_tokens makes): the informative ones, those not in
 * `stop_words` (`words` is made from it), as a new tuple in *informative, and " ".join(tokens)
 * as a new str in *normalized. ST_OK; ST_UNHANDLED, making nothing, if fewer than `at_least`
 * are informative; ST_ERROR with an exception. */
static int
informative_normalized(PyObject *tokens, PyObject *stop_words, const stop_words_t *words,
                       Py_ssize_t at_least, PyObject **informative, PyObject **normalized)
{
    unsigned char flags_stack[FLAGS_ON_STACK], *stop = flags_stack;
    Py_ssize_t n = PyList_GET_SIZE(tokens), i, j, k, count = 0, size = 0;
    Py_UCS1 *out;
    int r, st = ST_ERROR;

    *informative = *normalized = NULL;
    if (n > FLAGS_ON_STACK && (stop = PyMem_Malloc((size_t)n)) == NULL) {
        PyErr_NoMemory();
        return ST_ERROR;
    }
    for (i = 0; i < n; i++) {
        PyObject *token = PyList_GET_ITEM(tokens, i);
        if (!PyUnicode_IS_ASCII(token) || PyUnicode_GET_LENGTH(token) == 0) {
            PyErr_SetString(PyExc_SystemError,
                            "tracehound._speedups: a token is empty or not ASCII");
            goto done;
        }
        if ((r = is_stop_word(words, stop_words, token)) < 0) {
            goto done;
        }
        stop[i] = (unsigned char)r;
        count += !r;
        size += PyUnicode_GET_LENGTH(token) + (i > 0);
    }
    if (count < at_least) {
        st = ST_UNHANDLED;
        goto done;
    }
    if ((*informative = PyTuple_New(count)) == NULL) {
        goto done;
    }
    for (i = k = 0; i < n; i++) {
        if (!stop[i]) {
            PyObject *token = PyList_GET_ITEM(tokens, i);
            Py_INCREF(token);
            PyTuple_SET_ITEM(*informative, k++, token);
        }
    }
    if ((*normalized = PyUnicode_New(size, 127)) == NULL) {
        Py_CLEAR(*informative);
        goto done;
    }
    out = PyUnicode_1BYTE_DATA(*normalized);
    for (i = 0; i < n; i++) {
        PyObject *token = PyList_GET_ITEM(tokens, i);
        const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(token);
        Py_ssize_t len = PyUnicode_GET_LENGTH(token);
        if (i > 0) {
            *out++ = ' ';
        }
        for (j = 0; j < len; j++) { /* tokens are short: a loop costs less than memcpy */
            out[j] = chars[j];
        }
        out += len;
    }
    st = ST_OK;
done:
    if (stop != flags_stack) {
        PyMem_Free(stop);
    }
    return st;
}

/* ascii_tokens(text), called through its C function: a new list, a new reference to None (the
 * text is not of the ASCII path), or NULL with an exception. */
static PyObject *
call_ascii_tokens(PyObject *self, PyObject *text)
{
    PyObject *ascii_tokens = PyTuple_GET_ITEM(self, SELF_ASCII_TOKENS);
    return PyCFunction_GET_FUNCTION(ascii_tokens)(PyCFunction_GET_SELF(ascii_tokens), text);
}

/* text._segment_unit(segment) for the segment data[start:end] of the text (`segment` is that
 * str): a new Unit, or None (a new reference), or NULL with an exception set. */
static PyObject *
segment_unit(PyObject *self, PyObject *unit_type, PyObject *stop_words,
             const stop_words_t *words, PyObject *text, int kind, const void *data,
             PyObject *segment, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *tokens, *informative = NULL, *token_set = NULL, *normalized = NULL;
    PyObject *stripped = NULL, *unit = NULL, *values[4];
    Py_ssize_t i, start0 = start, end0 = end;
    int st;

    tokens = call_ascii_tokens(self, segment);
    if (tokens == NULL) {
        return NULL;
    }
    if (!PyList_CheckExact(tokens)) { /* None: cannot be, every character is of the ASCII path */
        Py_DECREF(tokens);
        PyErr_SetString(PyExc_SystemError, "text_units: ascii_tokens gave no tokens");
        return NULL;
    }
    st = informative_normalized(tokens, stop_words, words, 2, &informative, &normalized);
    if (st == ST_ERROR) {
        goto done;
    }
    if (st == ST_UNHANDLED) { /* fewer than two informative tokens: no unit */
        unit = Py_None;
        Py_INCREF(unit);
        goto done;
    }
    if ((token_set = PyFrozenSet_New(informative)) == NULL) {
        goto done;
    }
    /* Strings only: neither can be part of a reference cycle, so the garbage collector need
     * not scan them (it would find out about the tuple itself, not about the frozenset). */
    PyObject_GC_UnTrack(informative);
    PyObject_GC_UnTrack(token_set);
    /* segment.strip() */
    while (start < end && char_class(PyUnicode_READ(kind, data, start)) == C_SPACE) {
        start++;
    }
    while (end > start && char_class(PyUnicode_READ(kind, data, end - 1)) == C_SPACE) {
        end--;
    }
    if (start == start0 && end == end0) {
        stripped = segment;
        Py_INCREF(stripped);
    }
    else if ((stripped = PyUnicode_Substring(text, start, end)) == NULL) {
        goto done;
    }
    /* the Unit, without its __init__ */
    unit = ((PyTypeObject *)unit_type)->tp_alloc((PyTypeObject *)unit_type, 0);
    if (unit == NULL) {
        goto done;
    }
    values[0] = stripped;
    values[1] = normalized;
    values[2] = informative;
    values[3] = token_set;
    for (i = 0; i < 4; i++) {
        if (PyObject_GenericSetAttr(unit, PyTuple_GET_ITEM(self, SELF_TEXT + i), values[i]) < 0) {
            Py_CLEAR(unit);
            goto done;
        }
    }
done:
    Py_DECREF(tokens);
    Py_XDECREF(informative);
    Py_XDECREF(token_set);
    Py_XDECREF(normalized);
    Py_XDECREF(stripped);
    return unit;
}

/* The segment data[start:end]: its Unit or None from `segments`, else made and entered there;
 * a Unit is appended to `units`. */
static int
add_segment(PyObject *self, PyObject *text, int kind, const void *data, Py_ssize_t start,
            Py_ssize_t end, PyObject *segments, PyObject *unit_type, PyObject *stop_words,
            const stop_words_t *words, PyObject *units)
{
    PyObject *segment, *unit;
    int st = ST_ERROR;

    /* text._segments' text[start:end] of the stripped text; the segments start at 0 */
    segment = PyUnicode_Substring(text, start, end);
    if (segment == NULL) {
        return ST_ERROR;
    }
    unit = PyDict_GetItemWithError(segments, segment);
    if (unit != NULL) {
        Py_INCREF(unit);
    }
    else if (PyErr_Occurred()) {
        goto done;
    }
    else {
        unit = segment_unit(self, unit_type, stop_words, words, text, kind, data, segment, start,
                            end);
        if (unit == NULL) {
            goto done;
        }
        if (PyDict_SetItem(segments, segment, unit) < 0) {
            Py_DECREF(unit);
            goto done;
        }
    }
    st = (unit == Py_None || PyList_Append(units, unit) == 0) ? ST_OK : ST_ERROR;
    Py_DECREF(unit);
done:
    Py_DECREF(segment);
    return st;
}

PyDoc_STRVAR(text_units_doc,
"text_units($module, text, segments, unit_type, stop_words, /)\n"
"--\n"
"\n"
"tracehound.text.TextCache.units(text) for a text not yet in the cache's _units, for the\n"
"texts the tokenizer's ASCII path takes (see ascii_tokens).\n"
"\n"
"The text, stripped, is cut into segments as tracehound.text._segments cuts it; each segment\n"
"is looked up in `segments` (a dict: segment -> Unit or None), else made into a unit_type\n"
"object as tracehound.text._segment_unit does (without calling unit_type's __init__: its\n"
"slots text, normalized, tokens and token_set are set directly; stop_words is the set of\n"
"tokens that are not informative) and entered there. Returns the list of the Units, or None,\n"
"with `segments` untouched, if the text holds a non-ASCII character other than the\n"
"typographic ones. Raises TypeError for arguments of other types (text must be a str, not a\n"
"subclass; unit_type a class without a __new__ of its own).");

static PyObject *
text_units(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *text, *segments, *unit_type, *stop_words, *units = NULL;
    PyTypeObject *type;
    const void *data;
    bounds_t b;
    stop_words_t stop;
    Py_ssize_t i;
    int kind, st;

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "text_units() takes exactly 4 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    text = args[0];
    segments = args[1];
    unit_type = args[2];
    stop_words = args[3];
    if (!PyUnicode_CheckExact(text)) {
        PyErr_Format(PyExc_TypeError, "text_units() argument 'text' must be str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyDict_Check(segments)) {
        PyErr_Format(PyExc_TypeError,
                     "text_units() argument 'segments' must be dict, not %.100s",
                     Py_TYPE(segments)->tp_name);
        return NULL;
    }
    if (!PyAnySet_Check(stop_words)) {
        PyErr_Format(PyExc_TypeError,
                     "text_units() argument 'stop_words' must be a set or frozenset, not %.100s",
                     Py_TYPE(stop_words)->tp_name);
        return NULL;
    }
    /* a Python class whose objects object.__new__ makes (as a dataclass's) */
    type = (PyTypeObject *)unit_type;
    if (!PyType_Check(unit_type) || !PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) ||
        type->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_SetString(PyExc_TypeError,
                        "text_units() argument 'unit_type' must be a class made by a class "
                        "statement, without a __new__ of its own");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return NULL;
    }
#endif
    stop_words_init(&stop, stop_words);
    kind = PyUnicode_KIND(text);
    data = PyUnicode_DATA(text);
    b.items = b.stack;
    b.n = 0;
    b.cap = BOUNDS_ON_STACK;
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        st = find_segments(PyUnicode_1BYTE_KIND, data, PyUnicode_GET_LENGTH(text), &b);
        break;
    case PyUnicode_2BYTE_KIND:
        st = find_segments(PyUnicode_2BYTE_KIND, data, PyUnicode_GET_LENGTH(text), &b);
        break;
    default:
        st = ST_UNHANDLED; /* holds a character above U+FFFF */
        break;
    }
    if (st == ST_OK) {
        units = PyList_New(0);
        for (i = 0; units != NULL && i < b.n; i += 2) {
            if (add_segment(self, text, kind, data, b.items[i], b.items[i + 1], segments,
                            unit_type, stop_words, &stop, units) != ST_OK) {
                Py_CLEAR(units);
            }
        }
    }
    if (b.items != b.stack) {
        PyMem_Free(b.items);
    }
    if (st == ST_UNHANDLED) {
        Py_RETURN_NONE; /* segments untouched */
    }
    return units; /* NULL if an exception is set */
}

/* --- tokens -------------------------------------------------------------------------------- */

PyDoc_STRVAR(text_tokens_doc,
"text_tokens($module, text, stop_words, /)\n"
"--\n"
"\n"
"(normalized, informative) for a text of the tokenizer's ASCII path (see ascii_tokens), as\n"
"tracehound.text makes them from its tokens: normalized is \" \".join(tokens) (normalize_text),\n"
"informative the tuple of the tokens not in stop_words (a set or frozenset), in order, with\n"
"repeats (informative_tokens). None for any other text. Raises TypeError for arguments of\n"
"other types (text must be a str, not a subclass).");

static PyObject *
text_tokens(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *tokens, *informative, *normalized, *result;
    stop_words_t stop;
    int st;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "text_tokens() takes exactly 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (!PyUnicode_CheckExact(args[0])) {
        PyErr_Format(PyExc_TypeError, "text_tokens() argument 'text' must be str, not %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (!PyAnySet_Check(args[1])) {
        PyErr_Format(PyExc_TypeError,
                     "text_tokens() argument 'stop_words' must be a set or frozenset, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    tokens = call_ascii_tokens(self, args[0]);
    if (tokens == NULL || tokens == Py_None) {
        return tokens; /* None: not of the ASCII path */
    }
    stop_words_init(&stop, args[1]);
    st = informative_normalized(tokens, args[1], &stop, 0, &informative, &normalized);
    Py_DECREF(tokens);
    if (st != ST_OK) {
        return NULL; /* (at_least 0: never ST_UNHANDLED) */
    }
    PyObject_GC_UnTrack(informative); /* strings only, as in segment_unit */
    result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(informative);
        Py_DECREF(normalized);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, normalized);
    PyTuple_SET_ITEM(result, 1, informative);
    return result;
}

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef text_units_def = {
    "text_units", (PyCFunction)(void (*)(void))text_units, METH_FASTCALL, text_units_doc,
};

static PyMethodDef text_tokens_def = {
    "text_tokens", (PyCFunction)(void (*)(void))text_tokens, METH_FASTCALL, text_tokens_doc,
};

static PyMethodDef text_methods[] = {
    {NULL, NULL, 0, NULL},
};

/* text_units and text_tokens get a self of their own (a tuple, see SELF_*): the module's
 * ascii_tokens, whose C function they call, and the names of Unit's fields. */
int
tracehound_add_text(PyObject *module)
{
    static const char *const names[] = {"text", "normalized", "tokens", "token_set"};
    PyObject *self, *ascii_tokens, *func, *modname;
    Py_ssize_t i;

    ascii_tokens = PyObject_GetAttrString(module, "ascii_tokens");
    if (ascii_tokens == NULL) {
        return -1;
    }
    if (!PyCFunction_Check(ascii_tokens) || PyCFunction_GET_FLAGS(ascii_tokens) != METH_O) {
        Py_DECREF(ascii_tokens);
        PyErr_SetString(PyExc_SystemError, "tracehound._speedups: ascii_tokens is not METH_O");
        return -1;
    }
    self = PyTuple_New(SELF_SIZE);
    if (self == NULL) {
        Py_DECREF(ascii_tokens);
        return -1;
    }
    PyTuple_SET_ITEM(self, SELF_ASCII_TOKENS, ascii_tokens);
    for (i = 0; i < 4; i++) {
        PyObject *name = PyUnicode_InternFromString(names[i]);
        if (name == NULL) {
            Py_DECREF(self);
            return -1;
        }
        PyTuple_SET_ITEM(self, SELF_TEXT + i, name);
    }
    modname = PyModule_GetNameObject(module);
    if (modname == NULL) {
        Py_DECREF(self);
        return -1;
    }
    for (i = 0; i < 2; i++) {
        PyMethodDef *def = i == 0 ? &text_units_def : &text_tokens_def;
        func = PyCFunction_NewEx(def, self, modname);
        if (func == NULL || PyModule_AddObject(module, def->ml_name, func) < 0) {
            Py_XDECREF(func);
            Py_DECREF(modname);
            Py_DECREF(self);
            return -1;
        }
    }
    Py_DECREF(modname);
    Py_DECREF(self);
    return PyModule_AddFunctions(module, text_methods);
}
