/*
 * tracehound._speedups: step drafting (see _speedups.h).
 *
 * span_drafts(span, state, config) is tracehound.steps._span_drafts for an LLM or tool span:
 * the same drafts (a (key, fields) pair per step, the fields dict filled in the same order) and
 * the same changes to the trace's dedupe state (`steps._State`), made by the same rules: input
 * message parts become steps only the first time the trace shows them (by tool-call id, else by
 * role, type and content with an occurrence count), outputs always, a tool span completes the
 * call the model made. canonical_arguments, to_text and _pending_call_for are the Python
 * functions, called back.
 *
 * Everything is checked before anything changes: a span or state with a value of another type
 * than the usual ones (str subclasses, messages that are not `Message`, ...) gets None and the
 * Python code runs, on the state as it was.
 *
 * C99, ordinary CPython API only. The GIL is held throughout.
 */
#include "_speedups.h"

enum {
    /* fields of drafts */
    D_KIND,
    D_TEXT,
    D_START_NS,
    D_END_NS,
    D_TOOL,
    D_CALL_ID,
    D_ARGUMENTS,
    D_EXEC_SPAN_ID,
    D_FINISH_REASON,
    D_MODEL,
    D_INPUT_TOKENS,
    D_OUTPUT_TOKENS,
    D_ERROR,
    /* kinds and roles */
    V_SYSTEM,
    V_USER,
    V_ASSISTANT,
    V_REASONING,
    V_DEVELOPER,
    V_LLM,
    V_TOOL_CALL,
    V_TOOL_RESULT,
    V_TOOL_CALL_RESPONSE,
    V_TEXT,
    V_TOOL,
    V_EMPTY,
    /* attributes read */
    A_VIEW,
    A_OPERATION,
    A_SYSTEM_INSTRUCTIONS,
    A_INPUT_MESSAGES,
    A_OUTPUT_MESSAGES,
    A_FINISH_REASONS,
    A_TOOL_NAME,
    A_TOOL_ARGUMENTS,
    A_TOOL_CALL_ID,
    A_TOOL_RESULT,
    A_SPAN_ID,
    A_NAME,
    A_ROLE,
    A_PARTS,
    A_TYPE,
    A_CONTENT,
    A_ID,
    A_SEEN_IDS,
    A_CONTENT_COUNTS,
    A_CALL_STEPS,
    A_CALL_NAMES,
    A_PENDING_CALLS,
    A_ANONYMOUS,
    B_SPANS,
    B_STATE,
    B_DRAFTS,
    B_STATEFUL,
    B_SORT,
    B_KEY,
    S_COUNT_STEPS
};

static const char *const STEPS_STRING[S_COUNT_STEPS] = {
    [D_KIND] = "kind",
    [D_TEXT] = "text",
    [D_START_NS] = "start_ns",
    [D_END_NS] = "end_ns",
    [D_TOOL] = "tool",
    [D_CALL_ID] = "call_id",
    [D_ARGUMENTS] = "arguments",
    [D_EXEC_SPAN_ID] = "exec_span_id",
    [D_FINISH_REASON] = "finish_reason",
    [D_MODEL] = "model",
    [D_INPUT_TOKENS] = "input_tokens",
    [D_OUTPUT_TOKENS] = "output_tokens",
    [D_ERROR] = "error",
    [V_SYSTEM] = "system",
    [V_USER] = "user",
    [V_ASSISTANT] = "assistant",
    [V_REASONING] = "reasoning",
    [V_DEVELOPER] = "developer",
    [V_LLM] = "llm",
    [V_TOOL_CALL] = "tool_call",
    [V_TOOL_RESULT] = "tool_result",
    [V_TOOL_CALL_RESPONSE] = "tool_call_response",
    [V_TEXT] = "text",
    [V_TOOL] = "tool",
    [V_EMPTY] = "",
    [A_VIEW] = "view",
    [A_OPERATION] = "operation",
    [A_SYSTEM_INSTRUCTIONS] = "system_instructions",
    [A_INPUT_MESSAGES] = "input_messages",
    [A_OUTPUT_MESSAGES] = "output_messages",
    [A_FINISH_REASONS] = "finish_reasons",
    [A_TOOL_NAME] = "tool_name",
    [A_TOOL_ARGUMENTS] = "tool_arguments",
    [A_TOOL_CALL_ID] = "tool_call_id",
    [A_TOOL_RESULT] = "tool_result",
    [A_SPAN_ID] = "span_id",
    [A_NAME] = "name",
    [A_ROLE] = "role",
    [A_PARTS] = "parts",
    [A_TYPE] = "type",
    [A_CONTENT] = "content",
    [A_ID] = "id",
    [A_SEEN_IDS] = "seen_ids",
    [A_CONTENT_COUNTS] = "content_counts",
    [A_CALL_STEPS] = "call_steps",
    [A_CALL_NAMES] = "call_names",
    [A_PENDING_CALLS] = "pending_calls",
    [A_ANONYMOUS] = "anonymous",
    [B_SPANS] = "_spans",
    [B_STATE] = "_state",
    [B_DRAFTS] = "_drafts",
    [B_STATEFUL] = "_stateful",
    [B_SORT] = "sort",
    [B_KEY] = "key",
};

/* Interned once per process. */
static PyObject *ss[S_COUNT_STEPS];
/* Slot offsets of the attributes read, by name. */
static slot_cache ss_slots[S_COUNT_STEPS];

/* What one call works with. Borrowed references (the caller holds the span and the state,
 * which hold these), but for those marked as owned. */
typedef struct {
    PyObject *span, *state;
    PyObject *seen_ids, *counts, *call_steps, *call_names, *pending; /* owned */
    PyObject *canonical_arguments, *to_text, *pending_call_for;
    PyObject *llm_seq, *error_seq, *module;
    Py_ssize_t max_json;
    PyObject *span_id, *start, *end; /* owned */
    PyObject *out;                   /* owned: the drafts */
    long anonymous_added;
} drafting_t;

/* --- canonical JSON ------------------------------------------------------------------------- */

/*
 * What conventions.base._canonical_json (json's C encoder with sort_keys, separators (",", ":"),
 * ensure_ascii=False) writes for JSON data of the exact types json.loads makes: dict with str
 * keys, list, str, int, float (finite), True, False, None. Anything else is unhandled.
 */
#define CANONICAL_MAX_DEPTH 100

typedef struct {
    Py_UCS4 *data;
    Py_ssize_t len, cap;
} ubuf_t;

static int
ubuf_reserve(ubuf_t *b, Py_ssize_t more)
{
    Py_ssize_t cap;
    Py_UCS4 *data;
    if (b->len + more <= b->cap) {
        return 0;
    }
    cap = b->cap ? b->cap : 64;
    while (cap < b->len + more) {
        if (cap > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(Py_UCS4)) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    data = PyMem_Realloc(b->data, (size_t)cap * sizeof(Py_UCS4));
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static ALWAYS_INLINE int
ubuf_put(ubuf_t *b, Py_UCS4 c)
{
    if (b->len == b->cap && ubuf_reserve(b, 1) < 0) {
        return -1;
    }
    b->data[b->len++] = c;
    return 0;
}

static int
ubuf_ascii(ubuf_t *b, const char *text)
{
    for (; *text; text++) {
        if (ubuf_put(b, (Py_UCS4)(unsigned char)*text) < 0) {
            return -1;
        }
    }
    return 0;
}

/* A str as json's encode_basestring (ensure_ascii=False) writes it. */
static int
canonical_str(ubuf_t *b, PyObject *text)
{
    static const char hex[] = "0123456789abcdef";
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (ubuf_reserve(b, n + 2) < 0 || ubuf_put(b, '"') < 0) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        const char *escape = NULL;
        char unicode_escape[7];
        switch (c) {
        case '"':
            escape = "\\\"";
            break;
        case '\\':
            escape = "\\\\";
            break;
        case '\b':
            escape = "\\b";
            break;
        case '\f':
            escape = "\\f";
            break;
        case '\n':
            escape = "\\n";
            break;
        case '\r':
            escape = "\\r";
            break;
        case '\t':
            escape = "\\t";
            break;
        default:
            if (c < 0x20) {
                unicode_escape[0] = '\\';
                unicode_escape[1] = 'u';
                unicode_escape[2] = '0';
                unicode_escape[3] = '0';
                unicode_escape[4] = hex[c >> 4];
                unicode_escape[5] = hex[c & 15];
                unicode_escape[6] = '\0';
                escape = unicode_escape;
            }
            break;
        }
        if (escape != NULL ? ubuf_ascii(b, escape) < 0 : ubuf_put(b, c) < 0) {
            return -1;
        }
    }
    return ubuf_put(b, '"');
}

/* The characters of an ASCII str (a number's repr). */
static int
ubuf_repr(ubuf_t *b, PyObject *repr)
{
    const char *text;
    if (repr == NULL) {
        return -1;
    }
    text = PyUnicode_AsUTF8(repr);
    if (text == NULL || ubuf_ascii(b, text) < 0) {
        Py_DECREF(repr);
        return -1;
    }
    Py_DECREF(repr);
    return 0;
}

static int
canonical_value(ubuf_t *b, PyObject *value, int depth)
{
    Py_ssize_t i, n;
    int st;
    if (depth > CANONICAL_MAX_DEPTH) {
        return ST_UNHANDLED;
    }
    if (PyUnicode_CheckExact(value)) {
        return canonical_str(b, value) < 0 ? ST_ERROR : ST_OK;
    }
    if (value == Py_None) {
        return ubuf_ascii(b, "null") < 0 ? ST_ERROR : ST_OK;
    }
    if (value == Py_True) {
        return ubuf_ascii(b, "true") < 0 ? ST_ERROR : ST_OK;
    }
    if (value == Py_False) {
        return ubuf_ascii(b, "false") < 0 ? ST_ERROR : ST_OK;
    }
    if (PyLong_CheckExact(value)) {
        return ubuf_repr(b, PyObject_Repr(value)) < 0 ? ST_ERROR : ST_OK;
    }
    if (PyFloat_CheckExact(value)) {
        double x = PyFloat_AS_DOUBLE(value);
        if (!(x - x == 0.0)) {
            return ST_UNHANDLED; /* NaN, Infinity: json's own spelling */
        }
        return ubuf_repr(b, PyObject_Repr(value)) < 0 ? ST_ERROR : ST_OK;
    }
    if (PyList_CheckExact(value)) {
        n = PyList_GET_SIZE(value);
        if (ubuf_put(b, '[') < 0) {
            return ST_ERROR;
        }
        for (i = 0; i < PyList_GET_SIZE(value); i++) {
            PyObject *item = PyList_GET_ITEM(value, i);
            if (i > 0 && ubuf_put(b, ',') < 0) {
                return ST_ERROR;
            }
            Py_INCREF(item);
            st = canonical_value(b, item, depth + 1);
            Py_DECREF(item);
            if (st != ST_OK) {
                return st;
            }
        }
        (void)n;
        return ubuf_put(b, ']') < 0 ? ST_ERROR : ST_OK;
    }
    if (PyDict_CheckExact(value)) {
        PyObject *keys = PyDict_Keys(value);
        if (keys == NULL) {
            return ST_ERROR;
        }
        n = PyList_GET_SIZE(keys);
        for (i = 0; i < n; i++) {
            if (!PyUnicode_CheckExact(PyList_GET_ITEM(keys, i))) {
                Py_DECREF(keys);
                return ST_UNHANDLED; /* json turns such keys into strings first */
            }
        }
        /* sort_keys: sorted(items), by key: keys of one dict are distinct strs */
        if (PyList_Sort(keys) < 0 || ubuf_put(b, '{') < 0) {
            Py_DECREF(keys);
            return ST_ERROR;
        }
        st = ST_OK;
        for (i = 0; st == ST_OK && i < n; i++) {
            PyObject *key = PyList_GET_ITEM(keys, i), *item;
            if ((i > 0 && ubuf_put(b, ',') < 0) || canonical_str(b, key) < 0 ||
                ubuf_put(b, ':') < 0) {
                st = ST_ERROR;
                break;
            }
            item = PyDict_GetItemWithError(value, key);
            if (item == NULL) {
                st = PyErr_Occurred() ? ST_ERROR : ST_UNHANDLED;
                break;
            }
            Py_INCREF(item);
            st = canonical_value(b, item, depth + 1);
            Py_DECREF(item);
        }
        Py_DECREF(keys);
        if (st != ST_OK) {
            return st;
        }
        return ubuf_put(b, '}') < 0 ? ST_ERROR : ST_OK;
    }
    return ST_UNHANDLED;
}

/* conventions.base.canonical_arguments(value) for a value that is not None: a new reference,
 * or None when unhandled (a value the C paths do not take as the Python code does). */
static PyObject *
canonical_arguments_c(PyObject *module, PyObject *value, Py_ssize_t max_json)
{
    PyObject *decoded = NULL, *result = NULL;
    ubuf_t b = {NULL, 0, 0};
    int st;

    if (PyUnicode_CheckExact(value)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(value), start = 0, end = n;
        int kind = PyUnicode_KIND(value);
        const void *data = PyUnicode_DATA(value);
        Py_UCS4 first;
        while (start < end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start))) {
            start++;
        }
        while (end > start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1))) {
            end--;
        }
        first = start < end ? PyUnicode_READ(kind, data, start) : 0;
        if ((first != '{' && first != '[') || end - start > max_json) {
            return Py_NewRef(value); /* str(value) */
        }
        if (start == 0 && end == n) {
            decoded = tracehound_json_loads(module, value);
        }
        else {
            PyObject *stripped = PyUnicode_Substring(value, start, end);
            if (stripped == NULL) {
                return NULL;
            }
            decoded = tracehound_json_loads(module, stripped);
            Py_DECREF(stripped);
        }
        if (decoded == NULL || decoded == Py_None) {
            return decoded; /* json.loads decides, and what an invalid document gives */
        }
        value = PyTuple_GET_ITEM(decoded, 0);
    }
    st = canonical_value(&b, value, 0);
    if (st == ST_OK) {
        result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, b.data, b.len);
    }
    else if (st == ST_UNHANDLED) {
        result = Py_NewRef(Py_None);
    }
    PyMem_Free(b.data);
    Py_XDECREF(decoded);
    return result;
}

PyDoc_STRVAR(canonical_arguments_doc,
"canonical_arguments($module, value, max_json, /)\n"
"--\n"
"\n"
"tracehound.conventions.base.canonical_arguments(value) for a value other than None: a JSON\n"
"document in an exact str (stripped, up to max_json characters) or JSON data of the exact\n"
"types json.loads makes, written as sorted-key compact JSON; any other exact str as it is.\n"
"None for what it does not handle as the Python code does (a document json_loads does not\n"
"take, other types, NaN and infinities, nesting over 100 levels): the caller runs that code.");

static PyObject *
canonical_arguments(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t max_json;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "canonical_arguments() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    max_json = PyLong_AsSsize_t(args[1]);
    if (max_json == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (args[0] == Py_None) {
        Py_RETURN_NONE;
    }
    return canonical_arguments_c(module, args[0], max_json);
}

/* --- checks (before any change) ------------------------------------------------------------- */

static ALWAYS_INLINE int
is_str_or_none(PyObject *value)
{
    return value == Py_None || PyUnicode_CheckExact(value);
}

/* obj.<name> as a new reference into *out; ST_ERROR if reading it failed. */
static int
get(PyObject *obj, int name, PyObject **out)
{
    *out = tracehound_slot_get(&ss_slots[name], obj, ss[name]);
    return *out != NULL ? ST_OK : ST_ERROR;
}

/* Whether messages (a list of `message_type` whose parts are lists of `part_type`) hold only
 * the usual types: role a str, part type a str, content, id and name str or None. */
static int
check_messages(PyObject *messages, PyObject *message_type, PyObject *part_type)
{
    Py_ssize_t i, j;
    if (!PyList_CheckExact(messages)) {
        return ST_UNHANDLED;
    }
    for (i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *role, *parts;
        int st;
        if ((PyObject *)Py_TYPE(message) != message_type) {
            return ST_UNHANDLED;
        }
        /* slots of the exact classes: reading them runs no Python code */
        if (get(message, A_ROLE, &role) != ST_OK) {
            return ST_ERROR;
        }
        st = PyUnicode_CheckExact(role) ? ST_OK : ST_UNHANDLED;
        Py_DECREF(role);
        if (st != ST_OK) {
            return st;
        }
        if (get(message, A_PARTS, &parts) != ST_OK) {
            return ST_ERROR;
        }
        st = PyList_CheckExact(parts) ? ST_OK : ST_UNHANDLED;
        for (j = 0; st == ST_OK && j < PyList_GET_SIZE(parts); j++) {
            PyObject *part = PyList_GET_ITEM(parts, j), *value;
            static const int fields[] = {A_TYPE, A_CONTENT, A_ID, A_NAME};
            size_t k;
            if ((PyObject *)Py_TYPE(part) != part_type) {
                st = ST_UNHANDLED;
                break;
            }
            for (k = 0; st == ST_OK && k < 4; k++) {
                if (get(part, fields[k], &value) != ST_OK) {
                    st = ST_ERROR;
                    break;
                }
                if (k == 0 ? !PyUnicode_CheckExact(value) : !is_str_or_none(value)) {
                    st = ST_UNHANDLED;
                }
                Py_DECREF(value);
            }
        }
        Py_DECREF(parts);
        if (st != ST_OK) {
            return st;
        }
    }
    return ST_OK;
}

/* --- drafts --------------------------------------------------------------------------------- */

/* A tuple of strings, ints and None (or of such tuples and of dicts of such values), left
 * untracked by the cycle collector: it can be in no reference cycle, and the drafts and dedupe
 * keys of a trace are held as long as the trace (the collector would walk them all that time).
 * CPython untracks such tuples itself, but only when a collection first walks them. */
static ALWAYS_INLINE PyObject *
untracked(PyObject *tuple)
{
    if (tuple != NULL && PyObject_GC_IsTracked(tuple)) {
        PyObject_GC_UnTrack(tuple);
    }
    return tuple;
}

/* A new dict of n (key index, value) pairs, in that order (a value NULL stands for None). */
static PyObject *
fields_dict(int n, const int *keys, PyObject *const *values)
{
    PyObject *dict = PyDict_New();
    int i;
    if (dict == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (PyDict_SetItem(dict, ss[keys[i]], values[i] != NULL ? values[i] : Py_None) < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/* The draft ((at, span start, span id, seq), fields), a new reference; steals `fields`. */
static PyObject *
make_draft(const drafting_t *d, PyObject *at, PyObject *seq, PyObject *fields)
{
    PyObject *key, *draft;
    if (fields == NULL) {
        return NULL;
    }
    key = untracked(PyTuple_Pack(4, at, d->start, d->span_id, seq));
    if (key == NULL) {
        Py_DECREF(fields);
        return NULL;
    }
    draft = PyTuple_New(2);
    if (draft == NULL) {
        Py_DECREF(key);
        Py_DECREF(fields);
        return NULL;
    }
    PyTuple_SET_ITEM(draft, 0, key);
    PyTuple_SET_ITEM(draft, 1, fields);
    return untracked(draft);
}

/* Appends a draft made of `seq` (a C integer) and `fields` (stolen) to the output. */
static int
append_draft(drafting_t *d, PyObject *at, long long seq, PyObject *fields)
{
    PyObject *seq_obj, *draft;
    int st;
    if (fields == NULL) {
        return ST_ERROR;
    }
    seq_obj = PyLong_FromLongLong(seq);
    if (seq_obj == NULL) {
        Py_DECREF(fields);
        return ST_ERROR;
    }
    draft = make_draft(d, at, seq_obj, fields);
    Py_DECREF(seq_obj);
    if (draft == NULL) {
        return ST_ERROR;
    }
    st = PyList_Append(d->out, draft) < 0 ? ST_ERROR : ST_OK;
    Py_DECREF(draft);
    return st;
}

/* A new tuple (a, b) or (a, b, c). */
static PyObject *
key2(PyObject *a, PyObject *b)
{
    return untracked(PyTuple_Pack(2, a, b));
}

/* dict.get(key, 0) as a C integer; -1 on error. */
static long long
count_of(PyObject *dict, PyObject *key)
{
    PyObject *value = PyDict_GetItemWithError(dict, key);
    if (value == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    return PyLong_AsLongLong(value);
}

static int
set_count(PyObject *dict, PyObject *key, long long count)
{
    PyObject *value = PyLong_FromLongLong(count);
    int rc;
    if (value == NULL) {
        return -1;
    }
    rc = PyDict_SetItem(dict, key, value);
    Py_DECREF(value);
    return rc;
}

/* The occurrence of `key` in this span (counted in `occurrences`), and whether it is new to the
 * trace (steps._new_content): *is_new. */
static int
new_occurrence(drafting_t *d, PyObject *occurrences, PyObject *key, int *is_new)
{
    long long occurrence = count_of(occurrences, key), seen;
    if (occurrence < 0 || set_count(occurrences, key, occurrence + 1) < 0) {
        return ST_ERROR;
    }
    seen = count_of(d->counts, key);
    if (seen < 0) {
        return ST_ERROR;
    }
    *is_new = occurrence >= seen;
    if (*is_new && set_count(d->counts, key, seen + 1) < 0) {
        return ST_ERROR;
    }
    return ST_OK;
}

/* `x or ""` for a str or None (borrowed). */
static ALWAYS_INLINE PyObject *
or_empty(PyObject *value)
{
    return value == Py_None ? ss[V_EMPTY] : value;
}

/* Truth of a str or None. */
static ALWAYS_INLINE int
truthy(PyObject *value)
{
    return value != Py_None && PyUnicode_GET_LENGTH(value) != 0;
}

/* canonical_arguments(value), a new reference: in C, else by the Python function. */
static PyObject *
canonical(drafting_t *d, PyObject *value)
{
    PyObject *made;
    if (value == Py_None) {
        Py_RETURN_NONE;
    }
    made = canonical_arguments_c(d->module, value, d->max_json);
    if (made != Py_None) {
        return made;
    }
    Py_DECREF(made);
    return PyObject_CallOneArg(d->canonical_arguments, value);
}

/* steps._tool_call_from_part; `occurrences` NULL for an output part. */
static int
tool_call_from_part(drafting_t *d, PyObject *part, PyObject *at, long long seq,
                    PyObject *occurrences)
{
    PyObject *call_id = NULL, *name = NULL, *arguments = NULL, *key = NULL, *args = NULL;
    PyObject *fields = NULL, *values[6];
    static const int keys[6] = {D_KIND, D_TOOL, D_CALL_ID, D_ARGUMENTS, D_START_NS, D_END_NS};
    int st = ST_ERROR, has;

    if (get(part, A_ID, &call_id) || get(part, A_NAME, &name) ||
        get(part, D_ARGUMENTS, &arguments)) {
        goto done;
    }
    if (truthy(call_id)) {
        if (truthy(name) && PyDict_SetDefault(d->call_names, call_id, name) == NULL) {
            goto done;
        }
        key = key2(ss[V_TOOL_CALL], call_id);
        if (key == NULL || (has = PySet_Contains(d->seen_ids, key)) < 0) {
            goto done;
        }
        if (has) {
            /* a resent call: canonicalize only if it adds arguments */
            PyObject *existing = PyDict_GetItemWithError(d->call_steps, call_id), *old;
            if (existing == NULL) {
                st = PyErr_Occurred() ? ST_ERROR : ST_OK;
                goto done;
            }
            if (!PyTuple_CheckExact(existing) || PyTuple_GET_SIZE(existing) != 2 ||
                !PyDict_CheckExact(PyTuple_GET_ITEM(existing, 1))) {
                PyErr_SetString(PyExc_TypeError, "span_drafts(): a call step that is not a draft");
                goto done;
            }
            Py_INCREF(existing);
            old = PyDict_GetItemWithError(PyTuple_GET_ITEM(existing, 1), ss[D_ARGUMENTS]);
            if (old == NULL && PyErr_Occurred()) {
                Py_DECREF(existing);
                goto done;
            }
            if (old == NULL || old == Py_None) {
                args = canonical(d, arguments);
                if (args == NULL ||
                    (args != Py_None &&
                     PyDict_SetItem(PyTuple_GET_ITEM(existing, 1), ss[D_ARGUMENTS], args) < 0)) {
                    Py_DECREF(existing);
                    goto done;
                }
            }
            Py_DECREF(existing);
            st = ST_OK;
            goto done;
        }
        if (PySet_Add(d->seen_ids, key) < 0) {
            goto done;
        }
    }
    args = canonical(d, arguments);
    if (args == NULL) {
        goto done;
    }
    if (!truthy(call_id)) {
        PyObject *ckey;
        int args_true = PyObject_IsTrue(args); /* `args or ""` */
        if (args_true < 0) {
            goto done;
        }
        ckey = untracked(
            PyTuple_Pack(3, ss[V_TOOL_CALL], or_empty(name), args_true ? args : ss[V_EMPTY]));
        if (ckey == NULL) {
            goto done;
        }
        if (occurrences != NULL) {
            int is_new;
            int rc = new_occurrence(d, occurrences, ckey, &is_new);
            Py_DECREF(ckey);
            if (rc != ST_OK) {
                goto done;
            }
            if (!is_new) {
                st = ST_OK;
                goto done;
            }
        }
        else {
            long long seen = count_of(d->counts, ckey);
            int rc = seen < 0 ? -1 : set_count(d->counts, ckey, seen + 1);
            Py_DECREF(ckey);
            if (rc < 0) {
                goto done;
            }
        }
        d->anonymous_added++;
        Py_SETREF(call_id, Py_NewRef(Py_None));
    }
    values[0] = ss[V_TOOL_CALL];
    values[1] = name;
    values[2] = call_id;
    values[3] = args;
    values[4] = at;
    values[5] = at;
    fields = fields_dict(6, keys, values);
    if (fields == NULL) {
        goto done;
    }
    {
        PyObject *seq_obj = PyLong_FromLongLong(seq), *draft;
        if (seq_obj == NULL) {
            Py_DECREF(fields);
            goto done;
        }
        draft = make_draft(d, at, seq_obj, fields);
        Py_DECREF(seq_obj);
        if (draft == NULL) {
            goto done;
        }
        if (call_id != Py_None &&
            (PyDict_SetItem(d->call_steps, call_id, draft) < 0 ||
             PyList_Append(d->pending, call_id) < 0)) {
            Py_DECREF(draft);
            goto done;
        }
        st = PyList_Append(d->out, draft) < 0 ? ST_ERROR : ST_OK;
        Py_DECREF(draft);
    }
done:
    Py_XDECREF(call_id);
    Py_XDECREF(name);
    Py_XDECREF(arguments);
    Py_XDECREF(key);
    Py_XDECREF(args);
    return st;
}

/* steps._adopt_pending: a borrowed call id, or NULL (none; or an error if one is set). */
static PyObject *
adopt_pending(drafting_t *d, PyObject *name)
{
    Py_ssize_t i;
    for (i = 0; i < PyList_GET_SIZE(d->pending); i++) {
        PyObject *call_id = PyList_GET_ITEM(d->pending, i), *known;
        int eq;
        if (name == Py_None) {
            return call_id;
        }
        known = PyDict_GetItemWithError(d->call_names, call_id);
        if (known == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            continue;
        }
        eq = PyObject_RichCompareBool(known, name, Py_EQ);
        if (eq < 0) {
            return NULL;
        }
        if (eq) {
            return call_id;
        }
    }
    return NULL;
}

/* Removes call_id from the pending calls if there (`list.remove`: the first equal one). */
static int
remove_pending(drafting_t *d, PyObject *call_id)
{
    Py_ssize_t i;
    for (i = 0; i < PyList_GET_SIZE(d->pending); i++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->pending, i), call_id, Py_EQ);
        if (eq < 0) {
            return -1;
        }
        if (eq) {
            return PyList_SetSlice(d->pending, i, i + 1, NULL);
        }
    }
    return 0;
}

/* steps._tool_result_from_part. */
static int
tool_result_from_part(drafting_t *d, PyObject *part, PyObject *at, long long seq,
                      PyObject *occurrences)
{
    PyObject *call_id = NULL, *name = NULL, *content = NULL, *key = NULL, *values[6];
    static const int keys[6] = {D_KIND, D_TOOL, D_CALL_ID, D_TEXT, D_START_NS, D_END_NS};
    int st = ST_ERROR, has;

    if (get(part, A_ID, &call_id) || get(part, A_NAME, &name) ||
        get(part, A_CONTENT, &content)) {
        goto done;
    }
    if (!truthy(call_id)) {
        PyObject *adopted;
        int is_new;
        key = untracked(PyTuple_Pack(3, ss[V_TOOL_RESULT], or_empty(name), or_empty(content)));
        if (key == NULL || new_occurrence(d, occurrences, key, &is_new) != ST_OK) {
            goto done;
        }
        Py_CLEAR(key);
        if (!is_new) {
            st = ST_OK;
            goto done;
        }
        adopted = adopt_pending(d, name);
        if (adopted == NULL && PyErr_Occurred()) {
            goto done;
        }
        Py_SETREF(call_id, Py_NewRef(adopted != NULL ? adopted : Py_None));
    }
    if (truthy(call_id)) {
        key = key2(ss[V_TOOL_RESULT], call_id);
        if (key == NULL || (has = PySet_Contains(d->seen_ids, key)) < 0) {
            goto done;
        }
        if (has) {
            st = ST_OK;
            goto done;
        }
        if (PySet_Add(d->seen_ids, key) < 0 || remove_pending(d, call_id) < 0) {
            goto done;
        }
        if (!truthy(name)) { /* name or state.call_names.get(call_id) */
            PyObject *known = PyDict_GetItemWithError(d->call_names, call_id);
            if (known == NULL && PyErr_Occurred()) {
                goto done;
            }
            Py_SETREF(name, Py_NewRef(known != NULL ? known : Py_None));
        }
    }
    values[0] = ss[V_TOOL_RESULT];
    values[1] = name;
    values[2] = call_id;
    values[3] = content;
    values[4] = at;
    values[5] = at;
    st = append_draft(d, at, seq, fields_dict(6, keys, values));
done:
    Py_XDECREF(call_id);
    Py_XDECREF(name);
    Py_XDECREF(content);
    Py_XDECREF(key);
    return st;
}

/* The content kind of steps._content_kind (borrowed). */
static PyObject *
content_kind(PyObject *role, int reasoning)
{
    if (reasoning) {
        return ss[V_REASONING];
    }
    if (PyUnicode_Compare(role, ss[V_SYSTEM]) == 0 || PyUnicode_Compare(role, ss[V_DEVELOPER]) == 0) {
        return ss[V_SYSTEM];
    }
    if (PyUnicode_Compare(role, ss[V_USER]) == 0) {
        return ss[V_USER];
    }
    return ss[V_ASSISTANT];
}

/* The part kinds drafting tells apart. */
enum { P_OTHER, P_CONTENT, P_REASONING, P_TOOL_CALL, P_TOOL_CALL_RESPONSE };

static int
part_kind_of(PyObject *ptype)
{
    if (PyUnicode_Compare(ptype, ss[V_TOOL_CALL]) == 0) {
        return P_TOOL_CALL;
    }
    if (PyUnicode_Compare(ptype, ss[V_TOOL_CALL_RESPONSE]) == 0) {
        return P_TOOL_CALL_RESPONSE;
    }
    if (PyUnicode_Compare(ptype, ss[V_TEXT]) == 0) {
        return P_CONTENT;
    }
    if (PyUnicode_Compare(ptype, ss[V_REASONING]) == 0) {
        return P_REASONING;
    }
    return P_OTHER;
}

/* steps._message_drafts (inputs: `occurrences` given) or steps._output_drafts (NULL). */
static int
message_drafts(drafting_t *d, PyObject *messages, PyObject *at, long long seq,
               PyObject *occurrences)
{
    Py_ssize_t i, j;
    int st = ST_OK;

    for (i = 0; st == ST_OK && i < PyList_GET_SIZE(messages); i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *role = NULL, *parts = NULL;
        Py_INCREF(message);
        if (get(message, A_ROLE, &role) || get(message, A_PARTS, &parts)) {
            st = ST_ERROR;
        }
        for (j = 0; st == ST_OK && j < PyList_GET_SIZE(parts); j++) {
            PyObject *part = PyList_GET_ITEM(parts, j), *ptype = NULL, *content = NULL;
            int kind;
            Py_INCREF(part);
            seq++;
            if (get(part, A_TYPE, &ptype)) {
                st = ST_ERROR;
                Py_DECREF(part);
                break;
            }
            kind = part_kind_of(ptype);
            if (kind == P_TOOL_CALL) {
                st = tool_call_from_part(d, part, at, seq, occurrences);
            }
            else if (kind == P_TOOL_CALL_RESPONSE) {
                if (occurrences != NULL) { /* outputs' tool results are not steps */
                    st = tool_result_from_part(d, part, at, seq, occurrences);
                }
            }
            else if ((kind == P_CONTENT || kind == P_REASONING) &&
                     (st = get(part, A_CONTENT, &content)) == ST_OK && truthy(content)) {
                PyObject *key = untracked(PyTuple_Pack(3, role, ptype, content)), *fields;
                int is_new = 1;
                if (key == NULL) {
                    st = ST_ERROR;
                }
                else if (occurrences != NULL) {
                    st = new_occurrence(d, occurrences, key, &is_new);
                }
                else {
                    long long seen = count_of(d->counts, key);
                    st = seen < 0 || set_count(d->counts, key, seen + 1) < 0 ? ST_ERROR : ST_OK;
                }
                Py_XDECREF(key);
                if (st == ST_OK && is_new) {
                    if (occurrences != NULL) {
                        static const int keys[4] = {D_KIND, D_TEXT, D_START_NS, D_END_NS};
                        PyObject *values[4] = {content_kind(role, kind == P_REASONING), content,
                                               at, at};
                        fields = fields_dict(4, keys, values);
                    }
                    else {
                        static const int keys[5] = {D_KIND, D_TEXT, D_FINISH_REASON, D_START_NS,
                                                    D_END_NS};
                        PyObject *values[5] = {
                            ss[kind == P_REASONING ? V_REASONING : V_ASSISTANT], content, NULL,
                            at, at};
                        if (get(message, D_FINISH_REASON, &values[2])) {
                            fields = NULL;
                        }
                        else {
                            fields = fields_dict(5, keys, values);
                            Py_DECREF(values[2]);
                        }
                    }
                    st = append_draft(d, at, seq, fields);
                }
            }
            Py_XDECREF(content);
            Py_DECREF(ptype);
            Py_DECREF(part);
        }
        Py_XDECREF(role);
        Py_XDECREF(parts);
        Py_DECREF(message);
    }
    return st;
}

/* The LLM span's drafts (steps._span_drafts, "llm"). */
static int
llm_drafts(drafting_t *d, PyObject *instructions, PyObject *inputs, PyObject *outputs)
{
    PyObject *values[7] = {NULL}, *reasons = NULL, *occurrences;
    static const int keys[7] = {D_KIND,        D_START_NS,      D_END_NS,       D_MODEL,
                                D_INPUT_TOKENS, D_OUTPUT_TOKENS, D_FINISH_REASON};
    static const int attrs[3] = {D_MODEL, D_INPUT_TOKENS, D_OUTPUT_TOKENS};
    long long seq = 0;
    Py_ssize_t i;
    int st = ST_OK, k;

    for (i = 0; st == ST_OK && i < PyList_GET_SIZE(instructions); i++) {
        PyObject *text = PyList_GET_ITEM(instructions, i);
        PyObject *key = untracked(PyTuple_Pack(3, ss[V_SYSTEM], ss[V_TEXT], text));
        long long seen = key != NULL ? count_of(d->counts, key) : -1;
        if (seen < 0) {
            st = ST_ERROR;
        }
        else if (seen == 0) { /* steps._new_content(state, key, occurrence=0) */
            static const int skeys[4] = {D_KIND, D_TEXT, D_START_NS, D_END_NS};
            PyObject *svalues[4] = {ss[V_SYSTEM], text, d->start, d->start};
            st = set_count(d->counts, key, 1) < 0
                     ? ST_ERROR
                     : append_draft(d, d->start, seq, fields_dict(4, skeys, svalues));
            seq++;
        }
        Py_XDECREF(key);
    }
    if (st == ST_OK && PyList_GET_SIZE(inputs) != 0) {
        occurrences = PyDict_New();
        if (occurrences == NULL) {
            return ST_ERROR;
        }
        st = message_drafts(d, inputs, d->start, seq, occurrences);
        Py_DECREF(occurrences);
    }
    if (st != ST_OK) {
        return st;
    }
    values[0] = ss[V_LLM];
    values[1] = d->start;
    values[2] = d->end;
    for (k = 0; k < 3; k++) {
        if (get(d->span, attrs[k], &values[3 + k])) {
            st = ST_ERROR;
        }
    }
    if (st == ST_OK && get(d->span, A_FINISH_REASONS, &reasons) == ST_OK) {
        if (PyList_CheckExact(reasons)) {
            values[6] = PyList_GET_SIZE(reasons) != 0 ? PyList_GET_ITEM(reasons, 0) : Py_None;
            Py_INCREF(values[6]);
        }
        else {
            /* `finish_reasons[0] if finish_reasons else None` of another sequence */
            int truth = PyObject_IsTrue(reasons);
            values[6] = truth > 0 ? PySequence_GetItem(reasons, 0)
                                  : truth == 0 ? Py_NewRef(Py_None) : NULL;
        }
        if (values[6] == NULL) {
            st = ST_ERROR;
        }
    }
    else {
        st = ST_ERROR;
    }
    if (st == ST_OK) {
        PyObject *fields = fields_dict(7, keys, values);
        PyObject *draft = fields != NULL ? make_draft(d, d->start, d->llm_seq, fields) : NULL;
        st = draft != NULL && PyList_Append(d->out, draft) == 0 ? ST_OK : ST_ERROR;
        Py_XDECREF(draft);
    }
    for (k = 3; k < 7; k++) {
        Py_XDECREF(values[k]);
    }
    Py_XDECREF(reasons);
    if (st == ST_OK && PyList_GET_SIZE(outputs) != 0) {
        st = message_drafts(d, outputs, d->end, 0, NULL);
    }
    return st;
}

/* The tool span's drafts (steps._tool_span_drafts). */
static int
tool_span_drafts(drafting_t *d, PyObject *view)
{
    PyObject *name = NULL, *args = NULL, *call_id = NULL, *key = NULL, *value = NULL;
    PyObject *error = NULL, *text = NULL;
    int st = ST_ERROR, has = 0;

    if (get(d->span, A_TOOL_NAME, &name)) {
        goto done;
    }
    if (!truthy(name)) { /* span.tool_name or view.name */
        Py_CLEAR(name);
        if (get(view, A_NAME, &name)) {
            goto done;
        }
    }
    if (get(d->span, A_TOOL_ARGUMENTS, &value)) {
        goto done;
    }
    args = canonical(d, value);
    Py_CLEAR(value);
    if (args == NULL || get(d->span, A_TOOL_CALL_ID, &call_id)) {
        goto done;
    }
    if (!truthy(call_id)) {
        /* the oldest pending call of that tool with matching arguments (Python) */
        Py_SETREF(call_id, PyObject_CallFunctionObjArgs(d->pending_call_for, d->state, name, args,
                                                        NULL));
        if (call_id == NULL) {
            goto done;
        }
        if (!is_str_or_none(call_id)) {
            PyErr_SetString(PyExc_TypeError, "span_drafts(): a pending call id not a str");
            goto done;
        }
    }
    if (truthy(call_id)) {
        key = key2(ss[V_TOOL_CALL], call_id);
        if (key == NULL || (has = PySet_Contains(d->seen_ids, key)) < 0) {
            goto done;
        }
    }
    if (has) {
        PyObject *existing = PyDict_GetItemWithError(d->call_steps, call_id), *fields, *old;
        if (existing == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (existing != NULL) {
            if (!PyTuple_CheckExact(existing) || PyTuple_GET_SIZE(existing) != 2 ||
                !PyDict_CheckExact(PyTuple_GET_ITEM(existing, 1))) {
                PyErr_SetString(PyExc_TypeError, "span_drafts(): a call step that is not a draft");
                goto done;
            }
            fields = PyTuple_GET_ITEM(existing, 1);
            Py_INCREF(fields);
            if (PyDict_SetItem(fields, ss[D_EXEC_SPAN_ID], d->span_id) < 0) {
                Py_DECREF(fields);
                goto done;
            }
            old = PyDict_GetItemWithError(fields, ss[D_ARGUMENTS]);
            if ((old == NULL && PyErr_Occurred()) ||
                ((old == NULL || old == Py_None) &&
                 PyDict_SetItem(fields, ss[D_ARGUMENTS], args) < 0)) {
                Py_DECREF(fields);
                goto done;
            }
            Py_DECREF(fields);
        }
    }
    else {
        static const int keys[7] = {D_KIND,         D_TOOL,     D_CALL_ID, D_ARGUMENTS,
                                    D_EXEC_SPAN_ID, D_START_NS, D_END_NS};
        PyObject *values[7] = {ss[V_TOOL_CALL], name, call_id, args, d->span_id, d->start,
                               d->start};
        PyObject *fields, *draft, *zero;
        if (key != NULL && (PySet_Add(d->seen_ids, key) < 0 ||
                            PyDict_SetDefault(d->call_names, call_id, name) == NULL)) {
            goto done;
        }
        fields = fields_dict(7, keys, values);
        zero = PyLong_FromLong(0);
        draft = fields != NULL && zero != NULL ? make_draft(d, d->start, zero, fields) : NULL;
        if (draft == NULL && fields != NULL && zero == NULL) {
            Py_DECREF(fields);
        }
        Py_XDECREF(zero);
        if (draft == NULL) {
            goto done;
        }
        if ((key != NULL && PyDict_SetItem(d->call_steps, call_id, draft) < 0) ||
            PyList_Append(d->out, draft) < 0) {
            Py_DECREF(draft);
            goto done;
        }
        Py_DECREF(draft);
    }
    Py_CLEAR(key);
    if (truthy(call_id)) {
        key = key2(ss[V_TOOL_RESULT], call_id);
        if (key == NULL || (has = PySet_Contains(d->seen_ids, key)) < 0) {
            goto done;
        }
    }
    else {
        has = 0;
    }
    if (!has) {
        static const int keys[7] = {D_KIND, D_START_NS, D_END_NS, D_TOOL,
                                    D_CALL_ID, D_TEXT, D_ERROR};
        PyObject *values[7], *one;
        if (key != NULL && (PySet_Add(d->seen_ids, key) < 0 || remove_pending(d, call_id) < 0)) {
            goto done;
        }
        if (get(d->span, A_TOOL_RESULT, &value) || get(d->span, D_ERROR, &error)) {
            goto done;
        }
        if (value == Py_None || PyUnicode_CheckExact(value)) { /* to_text's own answer */
            text = Py_NewRef(value);
        }
        else if ((text = PyObject_CallOneArg(d->to_text, value)) == NULL) {
            goto done;
        }
        values[0] = ss[V_TOOL_RESULT];
        values[1] = d->start;
        values[2] = d->end;
        values[3] = name;
        values[4] = call_id;
        values[5] = text;
        values[6] = error;
        one = PyLong_FromLong(1);
        if (one == NULL) {
            goto done;
        }
        {
            PyObject *fields = fields_dict(7, keys, values);
            PyObject *draft = fields != NULL ? make_draft(d, d->end, one, fields) : NULL;
            Py_DECREF(one);
            if (draft == NULL || PyList_Append(d->out, draft) < 0) {
                Py_XDECREF(draft);
                goto done;
            }
            Py_DECREF(draft);
        }
    }
    st = ST_OK;
done:
    Py_XDECREF(name);
    Py_XDECREF(args);
    Py_XDECREF(call_id);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(error);
    Py_XDECREF(text);
    return st;
}

/* A new reference to obj.<name> when it is an exact int; NULL with *st set otherwise. */
static PyObject *
get_int(PyObject *obj, int name, int *st)
{
    PyObject *value;
    if (get(obj, name, &value)) {
        *st = ST_ERROR;
        return NULL;
    }
    if (!PyLong_CheckExact(value)) {
        Py_DECREF(value);
        *st = ST_UNHANDLED;
        return NULL;
    }
    return value;
}

/* A new reference to state.<name> when it is of exactly `type`; NULL with *st set otherwise. */
static PyObject *
get_typed(PyObject *obj, int name, PyTypeObject *type, int *st)
{
    PyObject *value;
    if (get(obj, name, &value)) {
        *st = ST_ERROR;
        return NULL;
    }
    if (Py_TYPE(value) != type) {
        Py_DECREF(value);
        *st = ST_UNHANDLED;
        return NULL;
    }
    return value;
}

PyDoc_STRVAR(span_drafts_doc,
"span_drafts($module, span, state, config, /)\n"
"--\n"
"\n"
"tracehound.steps._span_drafts(span, state) for an LLM or tool span: the same drafts and the\n"
"same changes to `state` (a steps._State). `config` is the tuple (Message, Part,\n"
"canonical_arguments, to_text, _pending_call_for, _LLM_SEQ, _ERROR_SEQ, MAX_JSON_BYTES);\n"
"canonical_arguments is called for the arguments the C one does not take.\n"
"\n"
"None, with nothing changed, for another operation or for values of other types than the\n"
"usual ones: messages not exactly Message with parts exactly Part, a role or part type not a\n"
"str, a part's content, id or name neither a str nor None, an error neither, times that are\n"
"not ints, a state whose containers are not a set, dicts and a list. The caller then runs\n"
"the Python code.");

static PyObject *
span_drafts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    drafting_t d;
    PyObject *config, *operation = NULL, *view = NULL, *error = NULL;
    PyObject *instructions = NULL, *inputs = NULL, *outputs = NULL, *anonymous = NULL;
    int st = ST_OK, is_llm = 0;
    Py_ssize_t i;

    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "span_drafts() takes exactly 3 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    config = args[2];
    if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != 8) {
        PyErr_SetString(PyExc_TypeError, "span_drafts(): config is a tuple of 8, see its doc");
        return NULL;
    }
    memset(&d, 0, sizeof(d));
    d.module = module;
    d.max_json = PyLong_AsSsize_t(PyTuple_GET_ITEM(config, 7));
    if (d.max_json == -1 && PyErr_Occurred()) {
        return NULL;
    }
    d.span = args[0];
    d.state = args[1];
    d.canonical_arguments = PyTuple_GET_ITEM(config, 2);
    d.to_text = PyTuple_GET_ITEM(config, 3);
    d.pending_call_for = PyTuple_GET_ITEM(config, 4);
    d.llm_seq = PyTuple_GET_ITEM(config, 5);
    d.error_seq = PyTuple_GET_ITEM(config, 6);

    /* checks */
    if (get(d.span, A_OPERATION, &operation)) {
        return NULL;
    }
    if (!PyUnicode_CheckExact(operation)) {
        st = ST_UNHANDLED;
    }
    else if (PyUnicode_Compare(operation, ss[V_LLM]) == 0) {
        is_llm = 1;
    }
    else if (PyUnicode_Compare(operation, ss[V_TOOL]) != 0) {
        st = ST_UNHANDLED;
    }
    if (st == ST_OK && get(d.span, A_VIEW, &view)) {
        st = ST_ERROR;
    }
    if (st == ST_OK) {
        d.span_id = get_typed(view, A_SPAN_ID, &PyUnicode_Type, &st);
    }
    if (st == ST_OK) {
        d.start = get_int(view, D_START_NS, &st);
    }
    if (st == ST_OK) {
        d.end = get_int(view, D_END_NS, &st);
    }
    if (st == ST_OK && !get(d.span, D_ERROR, &error) && !is_str_or_none(error)) {
        st = ST_UNHANDLED;
    }
    if (st == ST_OK && error == NULL) {
        st = ST_ERROR;
    }
    if (st == ST_OK) {
        d.seen_ids = get_typed(d.state, A_SEEN_IDS, &PySet_Type, &st);
    }
    if (st == ST_OK) {
        d.counts = get_typed(d.state, A_CONTENT_COUNTS, &PyDict_Type, &st);
    }
    if (st == ST_OK) {
        d.call_steps = get_typed(d.state, A_CALL_STEPS, &PyDict_Type, &st);
    }
    if (st == ST_OK) {
        d.call_names = get_typed(d.state, A_CALL_NAMES, &PyDict_Type, &st);
    }
    if (st == ST_OK) {
        d.pending = get_typed(d.state, A_PENDING_CALLS, &PyList_Type, &st);
    }
    if (st == ST_OK) {
        anonymous = get_int(d.state, A_ANONYMOUS, &st);
    }
    if (st == ST_OK && is_llm) {
        instructions = get_typed(d.span, A_SYSTEM_INSTRUCTIONS, &PyList_Type, &st);
        for (i = 0; st == ST_OK && i < PyList_GET_SIZE(instructions); i++) {
            if (!PyUnicode_CheckExact(PyList_GET_ITEM(instructions, i))) {
                st = ST_UNHANDLED;
            }
        }
        if (st == ST_OK && get(d.span, A_INPUT_MESSAGES, &inputs)) {
            st = ST_ERROR;
        }
        if (st == ST_OK) {
            st = check_messages(inputs, PyTuple_GET_ITEM(config, 0), PyTuple_GET_ITEM(config, 1));
        }
        if (st == ST_OK && get(d.span, A_OUTPUT_MESSAGES, &outputs)) {
            st = ST_ERROR;
        }
        if (st == ST_OK) {
            st = check_messages(outputs, PyTuple_GET_ITEM(config, 0), PyTuple_GET_ITEM(config, 1));
        }
    }
    if (st == ST_OK && !is_llm) {
        static const int fields[2] = {A_TOOL_NAME, A_TOOL_CALL_ID};
        PyObject *value;
        for (i = 0; st == ST_OK && i < 2; i++) {
            if (get(d.span, fields[i], &value)) {
                st = ST_ERROR;
                break;
            }
            if (!is_str_or_none(value)) {
                st = ST_UNHANDLED;
            }
            Py_DECREF(value);
        }
        if (st == ST_OK && get(view, A_NAME, &value) == ST_OK) {
            st = PyUnicode_CheckExact(value) ? ST_OK : ST_UNHANDLED;
            Py_DECREF(value);
        }
        else if (st == ST_OK) {
            st = ST_ERROR;
        }
    }
    if (st == ST_OK) {
        d.out = PyList_New(0);
        if (d.out == NULL) {
            st = ST_ERROR;
        }
    }
    /* drafting */
    if (st == ST_OK) {
        st = is_llm ? llm_drafts(&d, instructions, inputs, outputs) : tool_span_drafts(&d, view);
        if (st == ST_UNHANDLED) { /* not after a change: checked above */
            PyErr_SetString(PyExc_SystemError, "span_drafts(): unhandled after the checks");
            st = ST_ERROR;
        }
    }
    if (st == ST_OK && is_llm && truthy(error)) {
        static const int keys[4] = {D_KIND, D_ERROR, D_START_NS, D_END_NS};
        PyObject *values[4] = {ss[D_ERROR], error, d.end, d.end};
        PyObject *fields = fields_dict(4, keys, values);
        PyObject *draft = fields != NULL ? make_draft(&d, d.end, d.error_seq, fields) : NULL;
        st = draft != NULL && PyList_Append(d.out, draft) == 0 ? ST_OK : ST_ERROR;
        Py_XDECREF(draft);
    }
    if (st == ST_OK && d.anonymous_added != 0) {
        PyObject *added = PyLong_FromLong(d.anonymous_added), *total;
        total = added != NULL ? PyNumber_Add(anonymous, added) : NULL;
        Py_XDECREF(added);
        if (total == NULL || PyObject_SetAttr(d.state, ss[A_ANONYMOUS], total) < 0) {
            st = ST_ERROR;
        }
        Py_XDECREF(total);
    }
    Py_XDECREF(operation);
    Py_XDECREF(view);
    Py_XDECREF(error);
    Py_XDECREF(instructions);
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(anonymous);
    Py_XDECREF(d.span_id);
    Py_XDECREF(d.start);
    Py_XDECREF(d.end);
    Py_XDECREF(d.seen_ids);
    Py_XDECREF(d.counts);
    Py_XDECREF(d.call_steps);
    Py_XDECREF(d.call_names);
    Py_XDECREF(d.pending);
    if (st == ST_OK) {
        return d.out;
    }
    Py_XDECREF(d.out);
    if (st == ST_ERROR) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ("key",): the keyword of list.sort's call, made once. */
static PyObject *sort_kwnames;

PyDoc_STRVAR(builder_add_doc,
"builder_add($module, builder, span, config, /)\n"
"--\n"
"\n"
"tracehound.steps.TrajectoryBuilder.add(span) in one call: the span kept by its id (a span\n"
"already kept adds nothing), its drafts made (span_drafts for an LLM or tool span, else or\n"
"when that declines, the Python _span_drafts, called back), kept, sorted by their keys, and\n"
"its steps returned. `config` is (the stateful operations, span_drafts' config, _span_drafts,\n"
"the drafts' sort key, Step).\n"
"\n"
"None, with nothing changed, for a builder whose containers are not of the exact types it\n"
"makes, or a span id that is not a str: the Python code then runs.");

static PyObject *
builder_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *builder, *span, *config, *spans = NULL, *state = NULL, *all = NULL;
    PyObject *stateful = NULL, *view = NULL, *span_id = NULL, *operation = NULL;
    PyObject *drafts = NULL, *steps = NULL, *sorted;
    int st = ST_OK, has = 0, is_stateful = 0;

    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "builder_add() takes exactly 3 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    builder = args[0];
    span = args[1];
    config = args[2];
    if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != 5 ||
        !PyAnySet_Check(PyTuple_GET_ITEM(config, 0))) {
        PyErr_SetString(PyExc_TypeError, "builder_add(): config is a tuple of 5, see its doc");
        return NULL;
    }
    spans = get_typed(builder, B_SPANS, &PyDict_Type, &st);
    if (st == ST_OK) {
        all = get_typed(builder, B_DRAFTS, &PyList_Type, &st);
    }
    if (st == ST_OK) {
        stateful = get_typed(builder, B_STATEFUL, &PyList_Type, &st);
    }
    if (st == ST_OK && get(builder, B_STATE, &state)) {
        st = ST_ERROR;
    }
    if (st == ST_OK && get(span, A_VIEW, &view)) {
        st = ST_ERROR;
    }
    if (st == ST_OK) {
        span_id = get_typed(view, A_SPAN_ID, &PyUnicode_Type, &st);
    }
    if (st == ST_OK) {
        has = PyDict_Contains(spans, span_id);
        st = has < 0 ? ST_ERROR : ST_OK;
    }
    if (st == ST_OK && has) { /* a span delivered twice adds nothing */
        steps = PyList_New(0);
        st = steps == NULL ? ST_ERROR : ST_OK;
        goto done;
    }
    /* from here on, as the Python code: nothing is unhandled */
    if (st == ST_OK && PyDict_SetItem(spans, span_id, span) < 0) {
        st = ST_ERROR;
    }
    if (st == ST_OK && get(span, A_OPERATION, &operation)) {
        st = ST_ERROR;
    }
    if (st == ST_OK) {
        is_stateful = PySet_Contains(PyTuple_GET_ITEM(config, 0), operation);
        st = is_stateful < 0 ? ST_ERROR : ST_OK;
    }
    if (st == ST_OK && is_stateful) {
        PyObject *call_args[3] = {span, state, PyTuple_GET_ITEM(config, 1)};
        if (PyList_Append(stateful, span) < 0) {
            st = ST_ERROR;
        }
        else {
            drafts = span_drafts(module, call_args, 3);
            if (drafts == NULL) {
                st = ST_ERROR;
            }
            else if (drafts == Py_None) {
                Py_CLEAR(drafts);
            }
        }
    }
    if (st == ST_OK && drafts == NULL) {
        drafts = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(config, 2), span, state, NULL);
        st = drafts == NULL ? ST_ERROR : ST_OK;
    }
    if (st == ST_OK) { /* self._drafts.extend(drafts) */
        if (PyList_CheckExact(drafts)) {
            Py_ssize_t n = PyList_GET_SIZE(all);
            st = PyList_SetSlice(all, n, n, drafts) < 0 ? ST_ERROR : ST_OK;
        }
        else {
            PyObject *extended = PyObject_CallMethod(all, "extend", "O", drafts);
            st = extended == NULL ? ST_ERROR : ST_OK;
            Py_XDECREF(extended);
        }
    }
    if (st == ST_OK) { /* drafts.sort(key=_draft_key) */
        PyObject *sort_args[3] = {NULL, drafts, PyTuple_GET_ITEM(config, 3)};
        if (sort_kwnames == NULL) {
            sort_kwnames = PyTuple_Pack(1, ss[B_KEY]);
        }
        sorted = sort_kwnames != NULL
                     ? PyObject_VectorcallMethod(ss[B_SORT], sort_args + 1,
                                                 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                 sort_kwnames)
                     : NULL;
        st = sorted == NULL ? ST_ERROR : ST_OK;
        Py_XDECREF(sorted);
    }
    if (st == ST_OK) {
        steps = tracehound_steps_from_drafts(module, PyTuple_GET_ITEM(config, 4), drafts,
                                             ss[V_EMPTY]);
        st = steps == NULL ? ST_ERROR : ST_OK;
    }
done:
    Py_XDECREF(spans);
    Py_XDECREF(all);
    Py_XDECREF(stateful);
    Py_XDECREF(state);
    Py_XDECREF(view);
    Py_XDECREF(span_id);
    Py_XDECREF(operation);
    Py_XDECREF(drafts);
    if (st == ST_OK) {
        return steps;
    }
    Py_XDECREF(steps);
    if (st == ST_ERROR) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef steps_methods[] = {
    {"builder_add", (PyCFunction)(void (*)(void))builder_add, METH_FASTCALL, builder_add_doc},
    {"span_drafts", (PyCFunction)(void (*)(void))span_drafts, METH_FASTCALL, span_drafts_doc},
    {"canonical_arguments", (PyCFunction)(void (*)(void))canonical_arguments, METH_FASTCALL,
     canonical_arguments_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_steps(PyObject *module)
{
    int i;
    for (i = 0; i < S_COUNT_STEPS; i++) {
        if (ss[i] == NULL) {
            ss[i] = PyUnicode_InternFromString(STEPS_STRING[i]);
            if (ss[i] == NULL) {
                return -1;
            }
        }
    }
    return PyModule_AddFunctions(module, steps_methods);
}
