/*
 * tracehound._speedups: the loops evaluator's streaming path while steps are held back.
 *
 * - loops_hold(parts, span, steps) is the start of tracehound.evaluators.loops'
 *   LoopEvaluator.on_span for a trace whose tracker is not made yet: the span's bookkeeping
 *   (parents, agent spans, tool span ends, overflow stated by its finish reasons), its run, and
 *   _State.hold of each of its steps. It returns how many
 *   steps it took: all of them, or the index of the first step that may complete a loop (the
 *   Python code makes the tracker and feeds that step and the next ones, after doing the
 *   span's bookkeeping again: the same), or -1 with nothing changed for a span it leaves to the
 *   Python code whole (an `error.type` to read, values of unusual types). `parts` is the
 *   _State's tuple of containers (see _State.parts).
 * - loops_held_steps(held, steps) is loops._held_steps_py: the trace result of a trace whose
 *   steps were all held back needs the trajectory's to be those steps. `held` has three items
 *   per step: the step, its run, its tool span's end.
 * - loops_head(text) is loops._head(text) for a text whose first words are ASCII and typographic
 *   punctuation (the heads of outputs, which loops_hold counts), else None.
 *
 * The Python code stays the reference; results are the same objects or equal ones.
 * C99, ordinary CPython API only. The GIL is held throughout.
 */
#include "_speedups.h"
#include <stddef.h>
#include <structmember.h>

enum {
    /* attributes */
    L_VIEW,
    L_SPAN_ID,
    L_PARENT_SPAN_ID,
    L_OPERATION,
    L_ATTRIBUTES_SLOT,
    L_PENDING_SLOT,
    L_ATTRIBUTES,
    L_FINISH_REASONS,
    L_END_NS,
    L_END_NS_SLOT,
    L_KIND,
    L_TEXT,
    L_TOOL,
    L_ARGUMENTS,
    L_EXEC_SPAN_ID,
    L_ERROR,
    L_FINISH_REASON,
    L_MAY_COMPLETE,
    L_TRACKER,
    L_FED,
    L_PARTS,
    L_LOOPS_HOLD,
    /* keys and values */
    L_ERROR_TYPE,
    L_ASSISTANT,
    L_TOOL_CALL,
    L_TOOL_RESULT,
    L_LLM,
    L_AGENT,
    L_LENGTH,
    L_MAX_TOKENS,
    L_MODEL_LENGTH,
    L_OVERFLOW_MODE,
    L_EMPTY,
    L_COUNT
};

static const char *const LOOPS_STRING[L_COUNT] = {
    [L_VIEW] = "view",
    [L_SPAN_ID] = "span_id",
    [L_PARENT_SPAN_ID] = "parent_span_id",
    [L_OPERATION] = "operation",
    [L_ATTRIBUTES_SLOT] = "_attributes",
    [L_PENDING_SLOT] = "_pending",
    [L_ATTRIBUTES] = "attributes",
    [L_FINISH_REASONS] = "finish_reasons",
    [L_END_NS] = "end_ns",
    [L_END_NS_SLOT] = "_end_ns",
    [L_KIND] = "kind",
    [L_TEXT] = "text",
    [L_TOOL] = "tool",
    [L_ARGUMENTS] = "arguments",
    [L_EXEC_SPAN_ID] = "exec_span_id",
    [L_ERROR] = "error",
    [L_FINISH_REASON] = "finish_reason",
    [L_MAY_COMPLETE] = "may_complete",
    [L_TRACKER] = "tracker",
    [L_FED] = "fed",
    [L_PARTS] = "parts",
    [L_LOOPS_HOLD] = "_loops_hold",
    [L_ERROR_TYPE] = "error.type",
    [L_ASSISTANT] = "assistant",
    [L_TOOL_CALL] = "tool_call",
    [L_TOOL_RESULT] = "tool_result",
    [L_LLM] = "llm",
    [L_AGENT] = "agent",
    [L_LENGTH] = "length",
    [L_MAX_TOKENS] = "max_tokens",
    [L_MODEL_LENGTH] = "model_length",
    [L_OVERFLOW_MODE] = "context_window_overflow",
    [L_EMPTY] = "",
};

/* Interned once per process. */
static PyObject *ls[L_COUNT];
/* Slot offsets of the span's and view's attributes read, by name. */
static slot_cache ls_slots[L_COUNT];

/* The items of `parts` (_State.parts) and of its last one, the evaluator's constants. */
enum {
    P_PARENTS,
    P_AGENTS,
    P_OVERFLOW,
    P_MODES,
    P_EXEC_END,
    P_HELD,
    P_KEYS,
    P_NEAR,
    P_NEAR_TOOLS,
    P_RESULTS,
    P_HEADS,
    P_MODE_STEPS,
    P_CONSTANTS,
    P_COUNT
};
enum {
    C_NO_PROGRESS,
    C_OUTPUT_REPEAT,
    C_RESULT_KEY_CHARS,
    C_NEAR_THRESHOLD,
    C_NEAR_HELD_CALLS,
    C_HEAD,
    C_MODE,
    C_COUNT
};

#define HANDLED_NONE (-1) /* the span is left to the Python code whole */

static PyObject *
slot(PyObject *obj, int which)
{
    return tracehound_slot_get(&ls_slots[which], obj, ls[which]);
}

/* A slot's value (a new reference), or NULL: with an exception set, or without one when the
 * attribute is not set (no AttributeError made for the usual unset slot). */
static PyObject *
slot_if_set(PyObject *obj, int which)
{
    PyObject *value = slot(obj, which);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
    }
    return value;
}

/* Two exact str objects equal? (A string's kind is the narrowest that holds it.) */
static int
str_eq(PyObject *a, PyObject *b)
{
    Py_ssize_t n;
    if (a == b) {
        return 1;
    }
    n = PyUnicode_GET_LENGTH(a);
    if (n != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) {
        return 0;
    }
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

/* `value in _OVERFLOW_FINISH` for an exact str. */
static int
overflow_finish(PyObject *value)
{
    return str_eq(value, ls[L_LENGTH]) || str_eq(value, ls[L_MAX_TOKENS]) ||
           str_eq(value, ls[L_MODEL_LENGTH]);
}

/* A step's field: its instance dict's value, else the class's (the dataclass default). A new
 * reference, or NULL with an exception set. */
static PyObject *
field(PyObject *values, PyObject *step, int which)
{
    PyObject *value = PyDict_GetItemWithError(values, ls[which]);
    if (value != NULL) {
        Py_INCREF(value);
        return value;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    return PyObject_GetAttr(step, ls[which]);
}

/* --- heads of outputs ------------------------------------------------------------------------ */

#define HEAD_WORDS 8  /* _HEAD_WORDS */
#define HEAD_CHARS 96 /* _HEAD_CHARS */

/* _head(text) when the text's first words are ASCII and typographic punctuation (what _plain
 * folds): a new reference; NULL without an exception for a text left to the Python code (other
 * characters before the end of its HEAD_WORDS words, or words too long for the buffer).
 *
 * The text is read up to the first character of its word HEAD_WORDS + 1, or whole: that
 * character is ASCII (or an ellipsis, which NFKC makes ASCII), a starter that composes with
 * nothing before it, so the folded text begins with the words read (see loops._head). */
static PyObject *
ascii_head(PyObject *text)
{
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), i, size = 0;
    int words = 0, in_word = 0;
    char out[3 * 2 * HEAD_CHARS + HEAD_WORDS]; /* longer heads are the Python code's */
    PyObject *head;

    for (i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int space;
        if (c < 128) {
            space = Py_UNICODE_ISSPACE(c);
        }
        else if (c == 0x2026) { /* NFKC: "..." */
            space = 0;
        }
        else if (is_typographic(c)) {
            space = 1;
        }
        else {
            return NULL;
        }
        if (space) {
            in_word = 0;
            continue;
        }
        if (!in_word && words == HEAD_WORDS) {
            break; /* a word after the last one taken: those are the head */
        }
        if (size + 4 > (Py_ssize_t)sizeof(out)) {
            return NULL; /* (a space and an ellipsis' three characters) */
        }
        if (!in_word) {
            in_word = 1;
            if (words++) {
                out[size++] = ' ';
            }
        }
        if (c == 0x2026) {
            out[size++] = '.';
            out[size++] = '.';
            out[size++] = '.';
        }
        else {
            out[size++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        }
    }
    head = PyUnicode_New(size, 127);
    if (head != NULL) {
        memcpy(PyUnicode_DATA(head), out, (size_t)size);
    }
    return head;
}

/* _head(text) for a str: a new reference, or NULL with an exception set. */
static PyObject *
head_of(PyObject *head_function, PyObject *text)
{
    PyObject *head = ascii_head(text);
    if (head != NULL || PyErr_Occurred()) {
        return head;
    }
    return PyObject_CallOneArg(head_function, text);
}

/* mapping[key] + 1 (0 when absent) for a dict of ints: the count, or -1 with an exception. */
static Py_ssize_t
count_of(PyObject *counts, PyObject *key)
{
    PyObject *n = PyDict_GetItemWithError(counts, key);
    if (n == NULL) {
        return PyErr_Occurred() ? -1 : 1;
    }
    if (!PyLong_CheckExact(n)) {
        PyErr_SetString(PyExc_TypeError, "loops_hold: a count is not an int");
        return -1;
    }
    return PyLong_AsSsize_t(n) + 1; /* -1 + 1 on overflow's error: checked by the caller */
}

static int
set_count(PyObject *counts, PyObject *key, Py_ssize_t n)
{
    PyObject *value = PyLong_FromSsize_t(n);
    int status;
    if (value == NULL) {
        return -1;
    }
    status = PyDict_SetItem(counts, key, value);
    Py_DECREF(value);
    return status;
}

/* modes.add(_mode(step, overflow)); mode_steps.append(step). */
static int
add_error_mode(PyObject *const *parts, PyObject *const *constants, PyObject *step)
{
    PyObject *args[2] = {step, parts[P_OVERFLOW]};
    PyObject *mode = PyObject_Vectorcall(constants[C_MODE], args, 2, NULL);
    int status;
    if (mode == NULL) {
        return -1;
    }
    status = PySet_Add(parts[P_MODES], mode);
    Py_DECREF(mode);
    if (status < 0) {
        return -1;
    }
    return PyList_Append(parts[P_MODE_STEPS], step);
}

/* The finish reason of an LLM call or output: modes and mode_steps when it is an overflow.
 * 0, 1 for a value of another type than str or None (left to the Python code), -1. */
static int
finish_mode(PyObject *const *parts, PyObject *values, PyObject *step, int check_only)
{
    PyObject *reason = field(values, step, L_FINISH_REASON);
    int overflows;
    if (reason == NULL) {
        return -1;
    }
    if (reason != Py_None && !PyUnicode_CheckExact(reason)) {
        Py_DECREF(reason);
        return 1;
    }
    overflows = reason != Py_None && overflow_finish(reason);
    Py_DECREF(reason);
    if (!overflows || check_only) {
        return 0;
    }
    if (PySet_Add(parts[P_MODES], ls[L_OVERFLOW_MODE]) < 0) {
        return -1;
    }
    return PyList_Append(parts[P_MODE_STEPS], step);
}

/* _HeldNear.may_complete(tool, arguments): 1, 0 with the call recorded, -1 with an exception
 * set. The calls of a tool fewer than the threshold are only recorded, here; the Python method
 * does the rest. */
static int
may_complete(PyObject *const *parts, Py_ssize_t const *limits, PyObject *tool,
             PyObject *arguments)
{
    PyObject *tools = parts[P_NEAR_TOOLS], *entries, *near;
    Py_ssize_t n;
    int found;

    entries = PyDict_GetItemWithError(tools, tool);
    if (entries == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        entries = PyList_New(1);
        if (entries == NULL) {
            return -1;
        }
        PyList_SET_ITEM(entries, 0, Py_NewRef(arguments));
        found = PyDict_SetItem(tools, tool, entries);
        Py_DECREF(entries);
        return found;
    }
    if (PyList_CheckExact(entries)) {
        n = PyList_GET_SIZE(entries);
        if (n < limits[C_NEAR_HELD_CALLS] && n + 1 < limits[C_NEAR_THRESHOLD]) {
            return PyList_Append(entries, arguments);
        }
    }
    near = PyObject_CallMethodObjArgs(parts[P_NEAR], ls[L_MAY_COMPLETE], tool, arguments, NULL);
    if (near == NULL) {
        return -1;
    }
    found = PyObject_IsTrue(near);
    Py_DECREF(near);
    return found;
}

enum { HOLD_ERROR = -1, HOLD_DONE = 0, HOLD_NOT = 1 };

/* _State.hold of one step of a _FED kind (`which`): HOLD_DONE (held, or an error step taken),
 * HOLD_NOT with nothing changed (the step may complete a loop, or has values of types left to
 * the Python code), HOLD_ERROR with an exception set. `*end` is set for a call. */
static int
hold_step(PyObject *const *parts, PyObject *const *constants, Py_ssize_t const *limits,
          PyObject *values, PyObject *step, int which, PyObject **end)
{
    PyObject *text = NULL, *tool = NULL, *arguments = NULL, *key = NULL, *other = NULL;
    Py_ssize_t n;
    int status = HOLD_ERROR, found;

    *end = NULL;
    if (which == L_ASSISTANT) {
        PyObject *head;
        /* the finish reason's type first: nothing is changed before a HOLD_NOT */
        found = finish_mode(parts, values, step, 1);
        if (found != 0) {
            return found < 0 ? HOLD_ERROR : HOLD_NOT;
        }
        text = field(values, step, L_TEXT);
        if (text == NULL) {
            return HOLD_ERROR;
        }
        if (text == Py_None) {
            Py_SETREF(text, Py_NewRef(ls[L_EMPTY]));
        }
        else if (!PyUnicode_CheckExact(text)) {
            Py_DECREF(text);
            return HOLD_NOT;
        }
        head = head_of(constants[C_HEAD], text);
        Py_DECREF(text);
        if (head == NULL) {
            return HOLD_ERROR;
        }
        n = count_of(parts[P_HEADS], head);
        if (n < 0 || (n == 0 && PyErr_Occurred())) {
            Py_DECREF(head);
            return HOLD_ERROR;
        }
        if (n >= limits[C_OUTPUT_REPEAT]) {
            Py_DECREF(head);
            return HOLD_NOT;
        }
        status = set_count(parts[P_HEADS], head, n);
        Py_DECREF(head);
        if (status < 0 || finish_mode(parts, values, step, 0) < 0) {
            return HOLD_ERROR;
        }
        return HOLD_DONE;
    }
    if (which == L_LLM) {
        found = finish_mode(parts, values, step, 1);
        if (found != 0) {
            return found < 0 ? HOLD_ERROR : HOLD_NOT;
        }
        return finish_mode(parts, values, step, 0) < 0 ? HOLD_ERROR : HOLD_DONE;
    }
    if (which == L_TOOL_CALL) {
        arguments = field(values, step, L_ARGUMENTS);
        if (arguments == NULL) {
            return HOLD_ERROR;
        }
        other = field(values, step, L_EXEC_SPAN_ID);
        if (other == NULL) {
            goto done;
        }
        if (other != Py_None && !PyUnicode_CheckExact(other)) {
            status = HOLD_NOT;
            goto done;
        }
        if (arguments != Py_None) { /* a call without arguments matches nothing */
            if (!PyUnicode_CheckExact(arguments)) {
                status = HOLD_NOT;
                goto done;
            }
            tool = field(values, step, L_TOOL);
            if (tool == NULL) {
                goto done;
            }
            if (tool == Py_None) {
                Py_SETREF(tool, Py_NewRef(ls[L_EMPTY]));
            }
            else if (!PyUnicode_CheckExact(tool)) {
                status = HOLD_NOT;
                goto done;
            }
            key = PyTuple_Pack(2, tool, arguments);
            if (key == NULL) {
                goto done;
            }
            found = PySet_Contains(parts[P_KEYS], key);
            if (found == 0) {
                found = may_complete(parts, limits, tool, arguments);
            }
            if (found < 0) {
                goto done;
            }
            if (found) {
                status = HOLD_NOT;
                goto done;
            }
            if (PySet_Add(parts[P_KEYS], key) < 0) {
                goto done;
            }
        }
        if (other != Py_None && PyUnicode_GET_LENGTH(other) > 0) {
            *end = PyDict_GetItemWithError(parts[P_EXEC_END], other);
            if (*end == NULL && PyErr_Occurred()) {
                goto done;
            }
        }
        status = HOLD_DONE;
        goto done;
    }
    if (which == L_TOOL_RESULT) {
        other = field(values, step, L_ERROR);
        if (other == NULL) {
            return HOLD_ERROR;
        }
        if (other != Py_None) {
            status = add_error_mode(parts, constants, step) < 0 ? HOLD_ERROR : HOLD_DONE;
            goto done;
        }
        text = field(values, step, L_TEXT);
        if (text == NULL) {
            goto done;
        }
        if (text != Py_None) {
            Py_ssize_t start = 0, stop, cut;
            int kind;
            const void *data;
            PyObject *prefix;
            if (!PyUnicode_CheckExact(text)) {
                status = HOLD_NOT;
                goto done;
            }
            /* text.strip(): the key is its length and first characters */
            kind = PyUnicode_KIND(text);
            data = PyUnicode_DATA(text);
            stop = PyUnicode_GET_LENGTH(text);
            while (start < stop && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start))) {
                start++;
            }
            while (stop > start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, stop - 1))) {
                stop--;
            }
            cut = stop - start < limits[C_RESULT_KEY_CHARS] ? stop
                                                             : start + limits[C_RESULT_KEY_CHARS];
            prefix = PyUnicode_Substring(text, start, cut);
            if (prefix == NULL) {
                goto done;
            }
            key = Py_BuildValue("(nN)", stop - start, prefix);
            if (key == NULL) {
                goto done;
            }
            n = count_of(parts[P_RESULTS], key);
            if (n < 0 || (n == 0 && PyErr_Occurred())) {
                goto done;
            }
            if (n >= limits[C_NO_PROGRESS]) {
                status = HOLD_NOT;
                goto done;
            }
            if (set_count(parts[P_RESULTS], key, n) < 0) {
                goto done;
            }
        }
        status = HOLD_DONE;
        goto done;
    }
    /* an error: a failure mode, nothing for the tracker */
    return add_error_mode(parts, constants, step) < 0 ? HOLD_ERROR : HOLD_DONE;

done:
    Py_XDECREF(text);
    Py_XDECREF(tool);
    Py_XDECREF(arguments);
    Py_XDECREF(key);
    Py_XDECREF(other);
    return status;
}

/* Which _FED kind `kind` is (an L_* value), or -1 for another. */
static int
fed_kind(PyObject *kind)
{
    static const int kinds[] = {L_ASSISTANT, L_TOOL_CALL, L_TOOL_RESULT, L_LLM, L_ERROR};
    size_t i;
    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (str_eq(kind, ls[kinds[i]])) {
            return kinds[i];
        }
    }
    return -1;
}

/* The steps of a span: held back one by one (see hold_step). How many were taken, or -1 with
 * an exception set. */
static Py_ssize_t
hold_steps(PyObject *const *parts, PyObject *const *constants, Py_ssize_t const *limits,
           PyObject *steps, PyObject *run)
{
    PyObject *seq = PySequence_Fast(steps, "loops_hold: steps must be a sequence");
    Py_ssize_t i, count;
    if (seq == NULL) {
        return -1;
    }
    count = PySequence_Fast_GET_SIZE(seq);
    for (i = 0; i < count; i++) {
        PyObject *step = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *values, *kind, *end, *held;
        int which, status;

        values = PyObject_GenericGetDict(step, NULL);
        if (values == NULL) {
            goto error;
        }
        if (!PyDict_CheckExact(values)) {
            Py_DECREF(values);
            break;
        }
        kind = field(values, step, L_KIND);
        if (kind == NULL) {
            Py_DECREF(values);
            goto error;
        }
        if (!PyUnicode_CheckExact(kind)) {
            Py_DECREF(kind);
            Py_DECREF(values);
            break;
        }
        which = fed_kind(kind);
        Py_DECREF(kind);
        if (which < 0) { /* a kind the tracker does not read */
            Py_DECREF(values);
            continue;
        }
        status = hold_step(parts, constants, limits, values, step, which, &end);
        if (status != HOLD_DONE) {
            Py_DECREF(values);
            if (status == HOLD_ERROR) {
                goto error;
            }
            break;
        }
        Py_DECREF(values);
        held = parts[P_HELD]; /* three items per step */
        if (PyList_Append(held, step) < 0 || PyList_Append(held, run) < 0 ||
            PyList_Append(held, end != NULL ? end : Py_None) < 0) {
            goto error;
        }
    }
    Py_DECREF(seq);
    return i;
error:
    Py_DECREF(seq);
    return -1;
}

/* The span's run (`LoopEvaluator.on_span`, `_State.run_of`), with the span's parent and agent
 * spans already recorded: a borrowed reference; NULL with an exception set, or without one for
 * a parent of another type than str (then the Python code takes the steps). */
static PyObject *
run_of(PyObject *const *parts, PyObject *span_id, PyObject *parent)
{
    PyObject *parents = parts[P_PARENTS], *agents = parts[P_AGENTS], *current, *above;
    int found, n;

    found = PySet_Contains(agents, span_id);
    if (found != 0) {
        return found < 0 ? NULL : span_id;
    }
    current = parent;
    for (n = 0; n < 64; n++) {
        if (!PyUnicode_CheckExact(current)) {
            return NULL;
        }
        if (PyUnicode_GET_LENGTH(current) == 0) {
            break;
        }
        found = PySet_Contains(agents, current);
        if (found != 0) {
            if (found < 0) {
                return NULL;
            }
            break;
        }
        above = PyDict_GetItemWithError(parents, current);
        if (above == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            break;
        }
        current = above;
    }
    if (!PyUnicode_CheckExact(current)) {
        return NULL;
    }
    return current;
}

#define HOLD_SPAN_ERROR PY_SSIZE_T_MIN

/* loops_hold(parts, span, steps): how many steps were taken (HANDLED_NONE: none, nothing
 * changed), or HOLD_SPAN_ERROR with an exception set. */
static Py_ssize_t
hold_span(PyObject *parts_tuple, PyObject *span, PyObject *steps)
{
    PyObject *const *parts, *const *constants;
    PyObject *view = NULL, *span_id = NULL, *parent = NULL, *operation = NULL;
    PyObject *attributes = NULL, *reasons = NULL, *end_ns = NULL, *run;
    Py_ssize_t limits[C_COUNT], i, taken = HANDLED_NONE, result = HOLD_SPAN_ERROR;
    int overflows = 0, is_agent = 0, is_tool = 0, pending = 0;

    if (!PyTuple_CheckExact(parts_tuple) || PyTuple_GET_SIZE(parts_tuple) != P_COUNT) {
        PyErr_SetString(PyExc_TypeError, "loops_hold(parts, span, steps): parts is a tuple");
        return HOLD_SPAN_ERROR;
    }
    parts = &PyTuple_GET_ITEM(parts_tuple, 0);
    if (!PyDict_CheckExact(parts[P_PARENTS]) || !PyAnySet_CheckExact(parts[P_AGENTS]) ||
        !PyAnySet_CheckExact(parts[P_OVERFLOW]) || !PyAnySet_CheckExact(parts[P_MODES]) ||
        !PyDict_CheckExact(parts[P_EXEC_END]) || !PyList_CheckExact(parts[P_HELD]) ||
        !PyAnySet_CheckExact(parts[P_KEYS]) || !PyDict_CheckExact(parts[P_NEAR_TOOLS]) ||
        !PyDict_CheckExact(parts[P_RESULTS]) || !PyDict_CheckExact(parts[P_HEADS]) ||
        !PyList_CheckExact(parts[P_MODE_STEPS]) || !PyTuple_CheckExact(parts[P_CONSTANTS]) ||
        PyTuple_GET_SIZE(parts[P_CONSTANTS]) != C_COUNT) {
        PyErr_SetString(PyExc_TypeError, "loops_hold: parts of unexpected types");
        return HOLD_SPAN_ERROR;
    }
    constants = &PyTuple_GET_ITEM(parts[P_CONSTANTS], 0);
    for (i = C_NO_PROGRESS; i <= C_NEAR_HELD_CALLS; i++) {
        limits[i] = PyLong_AsSsize_t(constants[i]);
        if (limits[i] == -1 && PyErr_Occurred()) {
            return HOLD_SPAN_ERROR;
        }
    }

    /* Everything read before anything is changed: a span left to the Python code is left
     * whole. */
    view = slot(span, L_VIEW);
    if (view == NULL) {
        return HOLD_SPAN_ERROR;
    }
    span_id = slot(view, L_SPAN_ID);
    if (span_id == NULL) {
        goto done;
    }
    parent = slot(view, L_PARENT_SPAN_ID);
    if (parent == NULL) {
        goto done;
    }
    operation = slot(span, L_OPERATION);
    if (operation == NULL) {
        goto done;
    }
    if (!PyUnicode_CheckExact(span_id) || !PyUnicode_CheckExact(parent) ||
        !PyUnicode_CheckExact(operation)) {
        goto unhandled;
    }
    is_agent = str_eq(operation, ls[L_AGENT]);
    is_tool = !is_agent && str_eq(operation, ls[L_TOOL]);
    /* `error.type` of the view's attributes, without decoding them when they are not yet: the
     * dict normalization decoded (the `_pending` slot's first item) holds every key, a None
     * where a string is left on the wire. Else through the property. */
    attributes = slot_if_set(view, L_ATTRIBUTES_SLOT);
    if (attributes == NULL || !PyDict_CheckExact(attributes)) {
        if (attributes == NULL && PyErr_Occurred()) {
            goto done;
        }
        Py_XSETREF(attributes, slot_if_set(view, L_PENDING_SLOT));
        if (attributes != NULL && PyTuple_CheckExact(attributes) &&
            PyTuple_GET_SIZE(attributes) > 0 &&
            PyDict_CheckExact(PyTuple_GET_ITEM(attributes, 0))) {
            Py_SETREF(attributes, Py_NewRef(PyTuple_GET_ITEM(attributes, 0)));
            pending = 1;
        }
        else {
            if (attributes == NULL && PyErr_Occurred()) {
                goto done;
            }
            Py_XSETREF(attributes, PyObject_GetAttr(view, ls[L_ATTRIBUTES]));
            if (attributes == NULL) {
                goto done;
            }
            if (!PyDict_CheckExact(attributes)) {
                goto unhandled;
            }
        }
    }
    {
        PyObject *error_type = PyDict_GetItemWithError(attributes, ls[L_ERROR_TYPE]);
        if (error_type == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (error_type != NULL && (PyUnicode_Check(error_type) || (pending && error_type == Py_None))) {
            goto unhandled; /* its text is read by _overflow_text */
        }
    }
    reasons = slot(span, L_FINISH_REASONS);
    if (reasons == NULL) {
        goto done;
    }
    if (!PyList_CheckExact(reasons)) {
        goto unhandled;
    }
    for (i = 0; i < PyList_GET_SIZE(reasons); i++) {
        PyObject *reason = PyList_GET_ITEM(reasons, i);
        if (!PyUnicode_CheckExact(reason)) {
            goto unhandled;
        }
        if (overflow_finish(reason)) {
            overflows = 1;
            break;
        }
    }
    if (is_tool) { /* the view's end when it has read it, else through the property */
        end_ns = slot_if_set(view, L_END_NS_SLOT);
        if (end_ns == NULL || !PyLong_CheckExact(end_ns)) {
            if (end_ns == NULL && PyErr_Occurred()) {
                goto done;
            }
            Py_XSETREF(end_ns, PyObject_GetAttr(view, ls[L_END_NS]));
            if (end_ns == NULL) {
                goto done;
            }
        }
    }

    /* the span's bookkeeping */
    if (PyDict_SetItem(parts[P_PARENTS], span_id, parent) < 0) {
        goto done;
    }
    if (is_agent && PySet_Add(parts[P_AGENTS], span_id) < 0) {
        goto done;
    }
    if (is_tool && PyDict_SetItem(parts[P_EXEC_END], span_id, end_ns) < 0) {
        goto done;
    }
    if (overflows) {
        if (PySet_Add(parts[P_OVERFLOW], span_id) < 0 ||
            PySet_Add(parts[P_MODES], ls[L_OVERFLOW_MODE]) < 0) {
            goto done;
        }
    }
    run = run_of(parts, span_id, parent);
    if (run == NULL) {
        if (PyErr_Occurred()) {
            goto done;
        }
        taken = 0; /* what is done is done again the same way by the Python code */
        goto unhandled;
    }
    Py_INCREF(run);
    taken = hold_steps(parts, constants, limits, steps, run);
    Py_DECREF(run);
    if (taken < 0) {
        goto done;
    }
unhandled:
    result = taken;
done:
    Py_XDECREF(view);
    Py_XDECREF(span_id);
    Py_XDECREF(parent);
    Py_XDECREF(operation);
    Py_XDECREF(attributes);
    Py_XDECREF(reasons);
    Py_XDECREF(end_ns);
    return result;
}

static PyObject *
loops_hold(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t taken;
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "loops_hold(parts, span, steps) takes 3 arguments");
        return NULL;
    }
    taken = hold_span(args[0], args[1], args[2]);
    return taken == HOLD_SPAN_ERROR ? NULL : PyLong_FromSsize_t(taken);
}

/* The fields the held steps are compared on, by kind (loops._HELD_FIELDS), L_COUNT-ended. */
static const int *
held_fields(int which)
{
    static const int llm[] = {L_FINISH_REASON, L_COUNT};
    static const int assistant[] = {L_TEXT, L_FINISH_REASON, L_COUNT};
    static const int tool_call[] = {L_TOOL, L_ARGUMENTS, L_COUNT};
    static const int tool_result[] = {L_SPAN_ID, L_TEXT, L_ERROR, L_COUNT};
    static const int error[] = {L_SPAN_ID, L_ERROR, L_COUNT};
    switch (which) {
    case L_LLM:
        return llm;
    case L_ASSISTANT:
        return assistant;
    case L_TOOL_CALL:
        return tool_call;
    case L_TOOL_RESULT:
        return tool_result;
    default:
        return error;
    }
}

/* A field of two steps, each its instance dict's value, else its class's (the dataclass
 * default): equal? 1, 0, or -1 with an exception set. */
static int
same_field(PyObject *a_values, PyObject *step, PyObject *b_values, PyObject *final, int which)
{
    PyObject *a = PyDict_GetItemWithError(a_values, ls[which]), *b;
    int same;
    if (a == NULL && PyErr_Occurred()) {
        return -1;
    }
    b = PyDict_GetItemWithError(b_values, ls[which]);
    if (b == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (a != NULL && b != NULL) {
        return PyObject_RichCompareBool(a, b, Py_EQ); /* a is b, or a == b */
    }
    if (a == NULL && b == NULL && Py_IS_TYPE(step, Py_TYPE(final))) {
        return 1; /* both the class's value */
    }
    a = field(a_values, step, which);
    if (a == NULL) {
        return -1;
    }
    b = field(b_values, final, which);
    if (b == NULL) {
        Py_DECREF(a);
        return -1;
    }
    same = PyObject_RichCompareBool(a, b, Py_EQ);
    Py_DECREF(a);
    Py_DECREF(b);
    return same;
}

/* The held step of kind `which` and the final one (whose fields are `b_values`) equal in its
 * kind and its held_fields: 1, 0, or -1 with an exception set. */
static int
same_fields(PyObject *step, PyObject *final, PyObject *b_values, int which)
{
    PyObject *a_values, *kind;
    const int *names;
    int same;

    if (step == final) {
        return 1;
    }
    a_values = PyObject_GenericGetDict(step, NULL);
    if (a_values == NULL) {
        return -1;
    }
    if (!PyDict_CheckExact(a_values)) {
        PyErr_SetString(PyExc_TypeError, "loops_held_steps: steps keep their fields in a dict");
        Py_DECREF(a_values);
        return -1;
    }
    kind = field(a_values, step, L_KIND);
    if (kind == NULL) {
        Py_DECREF(a_values);
        return -1;
    }
    same = PyObject_RichCompareBool(kind, ls[which], Py_EQ);
    Py_DECREF(kind);
    for (names = held_fields(which); same == 1 && *names != L_COUNT; names++) {
        same = same_field(a_values, step, b_values, final, *names);
    }
    Py_DECREF(a_values);
    return same;
}

static PyObject *
loops_held_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *held, *steps, *kind;
    Py_ssize_t i, j = 0, count = 0, n_steps;
    int same, which;

    (void)module;
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "loops_held_steps(held, steps): a list and a tuple of steps");
        return NULL;
    }
    held = args[0];
    steps = args[1];
    n_steps = PyTuple_GET_SIZE(steps);
    for (i = 0; i < n_steps; i++) {
        PyObject *final = PyTuple_GET_ITEM(steps, i), *entry, *values;
        values = PyObject_GenericGetDict(final, NULL); /* its fields (a Step's dict) */
        if (values == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return NULL;
            }
            PyErr_Clear();
        }
        else if (!PyDict_CheckExact(values)) {
            Py_CLEAR(values);
        }
        kind = values != NULL ? field(values, final, L_KIND) : PyObject_GetAttr(final, ls[L_KIND]);
        if (kind == NULL) {
            Py_XDECREF(values);
            return NULL;
        }
        if (!PyUnicode_CheckExact(kind)) {
            Py_DECREF(kind);
            Py_XDECREF(values);
            Py_RETURN_NONE; /* a kind of another type: the re-feed decides */
        }
        which = fed_kind(kind);
        Py_DECREF(kind);
        if (which < 0) {
            Py_XDECREF(values);
            continue;
        }
        if (3 * j + 3 > PyList_GET_SIZE(held)) {
            Py_XDECREF(values);
            Py_RETURN_NONE;
        }
        entry = PyList_GET_ITEM(held, 3 * j); /* (step, run, end) of each step */
        j++;
        if (values == NULL) {
            PyErr_SetString(PyExc_TypeError, "loops_held_steps: steps keep their fields in a dict");
            return NULL;
        }
        same = same_fields(entry, final, values, which);
        Py_DECREF(values);
        if (same <= 0) {
            if (same < 0) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        if (which == L_TOOL_CALL || which == L_ASSISTANT) {
            count++;
        }
    }
    if (3 * j != PyList_GET_SIZE(held)) {
        Py_RETURN_NONE;
    }
    return PyLong_FromSsize_t(count);
}

static PyObject *
loops_head(PyObject *module, PyObject *text)
{
    PyObject *head;
    (void)module;
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "loops_head(text): text is a str");
        return NULL;
    }
    head = ascii_head(text);
    if (head == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return head;
}

PyDoc_STRVAR(loops_head_doc,
             "loops_head(text, /)\n--\n\n"
             "tracehound.evaluators.loops._head(text) for a text whose first words are ASCII and\n"
             "typographic punctuation; None for another (the Python code's to fold).");

PyDoc_STRVAR(loops_held_steps_doc,
             "loops_held_steps(held, steps, /)\n--\n\n"
             "tracehound.evaluators.loops._held_steps_py: the number of tool calls and outputs\n"
             "of `steps` when their steps of the kinds fed are the held ones, else None.");

PyDoc_STRVAR(loops_hold_doc,
             "loops_hold(parts, span, steps, /)\n--\n\n"
             "LoopEvaluator.on_span's bookkeeping and _State.hold of the span's steps, for a\n"
             "trace whose tracker is not made: how many steps were taken (all of them, or the\n"
             "index of the first one that may complete a loop), or -1 with nothing changed.");

static PyMethodDef loops_methods[] = {
    {"loops_hold", (PyCFunction)(void (*)(void))loops_hold, METH_FASTCALL, loops_hold_doc},
    {"loops_head", loops_head, METH_O, loops_head_doc},
    {"loops_held_steps", (PyCFunction)(void (*)(void))loops_held_steps, METH_FASTCALL,
     loops_held_steps_doc},
    {NULL, NULL, 0, NULL},
};

/* --- LoopsSpanHook --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *globals;      /* the loops module's: its `_loops_hold` says whether to hold here */
    PyObject *on_span;      /* LoopEvaluator.on_span, bound: the reference */
    PyObject *held_results; /* LoopEvaluator._held_results, bound */
    PyObject *feed_span;    /* LoopEvaluator._feed_span, bound */
    vectorcallfunc vectorcall;
} LoopsSpanHook;

/* state.fed = None with the exception being raised kept. */
static void
drop_fed(PyObject *state)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    if (tracehound_slot_set(&ls_slots[L_FED], state, ls[L_FED], Py_None) < 0) {
        PyErr_Clear();
    }
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (tracehound_slot_set(&ls_slots[L_FED], state, ls[L_FED], Py_None) < 0) {
        PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
#endif
}

/* LoopEvaluator.on_span(state, span, steps, trace), its loops_hold part here. */
static PyObject *
hook_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    LoopsSpanHook *self = (LoopsSpanHook *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), taken, count;
    PyObject *hold, *state, *tracker, *fed, *parts, *feed_args[4], *start, *result;
    int held;

    if (nargs != 4 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        return PyObject_Vectorcall(self->on_span, args, nargsf, kwnames);
    }
    hold = PyDict_GetItemWithError(self->globals, ls[L_LOOPS_HOLD]);
    if (hold == NULL || !PyCFunction_Check(hold) ||
        PyCFunction_GET_FUNCTION(hold) != (PyCFunction)(void (*)(void))loops_hold) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return PyObject_Vectorcall(self->on_span, args, 4, NULL); /* the accelerator is off */
    }
    state = args[0];
    tracker = slot(state, L_TRACKER);
    if (tracker == NULL) {
        return NULL;
    }
    fed = slot(state, L_FED);
    if (fed == NULL) {
        Py_DECREF(tracker);
        return NULL;
    }
    held = tracker == Py_None && fed != Py_None;
    Py_DECREF(tracker);
    Py_DECREF(fed);
    taken = 0;
    if (held) {
        parts = slot(state, L_PARTS);
        if (parts == NULL) {
            return NULL;
        }
        taken = hold_span(parts, args[1], args[2]);
        if (taken == HOLD_SPAN_ERROR) {
            Py_DECREF(parts);
            drop_fed(state); /* as on_span: a feed failed half way */
            return NULL;
        }
        count = PyObject_Size(args[2]);
        if (count < 0) {
            Py_DECREF(parts);
            return NULL;
        }
        if (taken == count) { /* (hold_span checked the parts) */
            held = PySet_GET_SIZE(PyTuple_GET_ITEM(parts, P_MODES)) == 0;
            Py_DECREF(parts);
            if (held) {
                return PyTuple_New(0); /* no failure mode: no result */
            }
            return PyObject_Vectorcall(self->held_results, args, 2, NULL);
        }
        Py_DECREF(parts);
        if (taken < 0) {
            taken = 0;
        }
    }
    start = PyLong_FromSsize_t(taken);
    if (start == NULL) {
        return NULL;
    }
    feed_args[0] = args[0];
    feed_args[1] = args[1];
    feed_args[2] = args[2];
    feed_args[3] = start;
    result = PyObject_Vectorcall(self->feed_span, feed_args, 4, NULL);
    Py_DECREF(start);
    return result;
}

static PyObject *
hook_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *globals, *on_span, *held_results, *feed_span;
    LoopsSpanHook *self;

    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "LoopsSpanHook() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!OOO:LoopsSpanHook", &PyDict_Type, &globals, &on_span,
                          &held_results, &feed_span)) {
        return NULL;
    }
    if (!PyCallable_Check(on_span) || !PyCallable_Check(held_results) ||
        !PyCallable_Check(feed_span)) {
        PyErr_SetString(PyExc_TypeError, "LoopsSpanHook() takes three callables");
        return NULL;
    }
    self = (LoopsSpanHook *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->globals = Py_NewRef(globals);
    self->on_span = Py_NewRef(on_span);
    self->held_results = Py_NewRef(held_results);
    self->feed_span = Py_NewRef(feed_span);
    self->vectorcall = hook_call;
    return (PyObject *)self;
}

static int
hook_traverse(PyObject *obj, visitproc visit, void *arg)
{
    LoopsSpanHook *self = (LoopsSpanHook *)obj;
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(self->globals);
    Py_VISIT(self->on_span);
    Py_VISIT(self->held_results);
    Py_VISIT(self->feed_span);
    return 0;
}

static int
hook_clear(PyObject *obj)
{
    LoopsSpanHook *self = (LoopsSpanHook *)obj;
    Py_CLEAR(self->globals);
    Py_CLEAR(self->on_span);
    Py_CLEAR(self->held_results);
    Py_CLEAR(self->feed_span);
    return 0;
}

static void
hook_dealloc(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    hook_clear(obj);
    type->tp_free(obj);
    Py_DECREF(type);
}

static PyMemberDef hook_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(LoopsSpanHook, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(hook_doc,
             "LoopsSpanHook(globals, on_span, held_results, feed_span, /)\n--\n\n"
             "A callable (state, span, steps, trace) that is LoopEvaluator.on_span (`on_span`,\n"
             "bound) without its Python frame while steps are held back: loops_hold of the\n"
             "span, then held_results(state, span) when it took every step, else\n"
             "feed_span(state, span, steps, start) from the first step it did not take. When\n"
             "`globals['_loops_hold']` is not loops_hold (the accelerator turned off), on_span.");

static PyType_Slot hook_slots[] = {
    {Py_tp_new, hook_new},
    {Py_tp_dealloc, hook_dealloc},
    {Py_tp_traverse, hook_traverse},
    {Py_tp_clear, hook_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, hook_members},
    {Py_tp_doc, (void *)hook_doc},
    {0, NULL},
};

static PyType_Spec hook_spec = {
    "tracehound._speedups.LoopsSpanHook",
    sizeof(LoopsSpanHook),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    hook_slots,
};

int
tracehound_add_loops(PyObject *module)
{
    PyObject *type;
    int i;
    for (i = 0; i < L_COUNT; i++) {
        if (ls[i] == NULL) {
            ls[i] = PyUnicode_InternFromString(LOOPS_STRING[i]);
            if (ls[i] == NULL) {
                return -1;
            }
        }
    }
    type = PyType_FromModuleAndSpec(module, &hook_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "LoopsSpanHook", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return PyModule_AddFunctions(module, loops_methods);
}
