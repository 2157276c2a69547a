/* The engine's per-span loop over the evaluators (call_span_hooks), and the sidecar's per-span
 * writing of evaluation results, in one call each:
 *
 * - encode_result_records: the `gen_ai.evaluation.result` log records of a span's results, as
 *   tracehound.server._otlp.framed_log_records writes them (joined), without the attributes
 *   dict of tracehound.emit.event_attributes per result;
 * - encode_result_attributes: the `tracehound.*` attributes the results put on their span, as
 *   tracehound.server._otlp.encoded_attributes(tag, tracehound.emit.span_attributes(results),
 *   present) encodes them.
 *
 * The Python functions stay the reference: each answers None for anything it does not write
 * byte for byte as they do, and the caller then takes them. */

#include "_speedups.h"
#include "_speedups_wire.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Bytes of a Python bytes object. */
static int
outbuf_bytes(outbuf_t *b, PyObject *bytes)
{
    return outbuf_put(b, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

/* --- reading results ------------------------------------------------------------------------- */

enum {
    R_NAME,
    R_EVALUATOR,
    R_EVALUATOR_VERSION,
    R_SPAN_ID,
    R_SCORE_VALUE,
    R_SCORE_LABEL,
    R_EXPLANATION,
    R_ATTRIBUTES,
    R_ERROR_TYPE,
    R_COUNT
};

static const char *const RESULT_FIELDS[R_COUNT] = {
    "name",        "evaluator",  "evaluator_version", "span_id",    "score_value",
    "score_label", "explanation", "attributes",       "error_type",
};

static PyObject *result_str[R_COUNT];
static slot_cache result_slots[R_COUNT];
static PyObject *encode_key_values_fn; /* the module's encode_key_values */

static PyObject *
result_get(PyObject *result, int which)
{
    return tracehound_slot_get(&result_slots[which], result, result_str[which]);
}

/* --- encode_result_records ------------------------------------------------------------------- */

static Py_ssize_t
varint_size(uint64_t value)
{
    Py_ssize_t n = 1;
    while (value > 0x7f) {
        value >>= 7;
        n++;
    }
    return n;
}

/* One attribute of a record: `tag`, length, KeyValue{key (unless empty), value: AnyValue}.
 * `value` is an exact str (string_value) or NULL with `number` (double_value). The lengths are
 * known before the bytes, so they are written first (no room to fill in afterwards). */
static int
put_record_attribute(outbuf_t *b, PyObject *tag, PyObject *key, PyObject *value,
                     double number)
{
    const char *key_utf8 = NULL, *value_utf8 = NULL;
    Py_ssize_t key_len = 0, value_len = 0, any_len, entry_len;
    if (PyUnicode_GET_LENGTH(key) > 0) {
        key_utf8 = PyUnicode_AsUTF8AndSize(key, &key_len);
    }
    if (value != NULL) {
        value_utf8 = PyUnicode_AsUTF8AndSize(value, &value_len);
    }
    if ((PyUnicode_GET_LENGTH(key) > 0 && key_utf8 == NULL) ||
        (value != NULL && value_utf8 == NULL)) {
        PyErr_Clear(); /* a lone surrogate: upb refuses it, and so does the Python path */
        return ST_UNHANDLED;
    }
    any_len = value != NULL ? 1 + varint_size((uint64_t)value_len) + value_len : 9;
    entry_len = (key_utf8 != NULL ? 1 + varint_size((uint64_t)key_len) + key_len : 0) + 1 +
                varint_size((uint64_t)any_len) + any_len;
    if (entry_len > 0xffffffffLL / 2) { /* protobuf's limit for a length (2 GiB) */
        return ST_UNHANDLED;
    }
    if (outbuf_reserve(b, PyBytes_GET_SIZE(tag) + 5 + entry_len) != ST_OK ||
        outbuf_bytes(b, tag) != ST_OK || outbuf_varint(b, (uint64_t)entry_len) != ST_OK) {
        return ST_ERROR;
    }
    if (key_utf8 != NULL) {
        if (outbuf_put(b, "\x0a", 1) != ST_OK || outbuf_varint(b, (uint64_t)key_len) != ST_OK ||
            outbuf_put(b, key_utf8, key_len) != ST_OK) {
            return ST_ERROR;
        }
    }
    if (outbuf_put(b, "\x12", 1) != ST_OK || outbuf_varint(b, (uint64_t)any_len) != ST_OK) {
        return ST_ERROR;
    }
    if (value != NULL) {
        if (outbuf_put(b, "\x0a", 1) != ST_OK || outbuf_varint(b, (uint64_t)value_len) != ST_OK) {
            return ST_ERROR;
        }
        return outbuf_put(b, value_utf8, value_len);
    }
    {
        char bytes[9];
        uint64_t bits;
        int i;
        memcpy(&bits, &number, 8);
        bytes[0] = 0x21;
        for (i = 0; i < 8; i++) {
            bytes[1 + i] = (char)(bits >> (8 * i));
        }
        return outbuf_put(b, bytes, 9);
    }
}

/* The value of an optional str field as event_attributes reads it: 1 (set, non-empty str), 0
 * (None or ""), ST_UNHANDLED for anything else (its truth is left to Python). */
static int
optional_str(PyObject *value)
{
    if (value == Py_None) {
        return 0;
    }
    if (!PyUnicode_CheckExact(value)) {
        return ST_UNHANDLED;
    }
    return PyUnicode_GET_LENGTH(value) > 0;
}

/* The framed record of one result, appended to b. keys: the 7 attribute keys in
 * event_attributes' order (name, score value, score label, explanation, error type, evaluator
 * name, evaluator version); parts: (info parts, warn parts) as encode_log_record takes them. */
static int
put_result_record(outbuf_t *b, PyObject *result, const uint8_t *trace_id, PyObject *span_id,
                  uint64_t time_ns, PyObject *keys, PyObject *parts)
{
    PyObject *values[R_COUNT] = {NULL};
    static const int READ[] = {R_NAME,        R_EVALUATOR,  R_EVALUATOR_VERSION,
                               R_SPAN_ID,     R_SCORE_VALUE, R_SCORE_LABEL,
                               R_EXPLANATION, R_ERROR_TYPE};
    PyObject *part, *tag, *parent;
    uint8_t ids[2 + 16 + 2 + 8];
    double score = 0.0;
    int st = ST_OK, label, explanation, error, warn;
    Py_ssize_t mark = 0;
    size_t i;

    for (i = 0; i < sizeof(READ) / sizeof(READ[0]); i++) {
        values[READ[i]] = result_get(result, READ[i]);
        if (values[READ[i]] == NULL) {
            st = ST_ERROR;
            goto done;
        }
    }
    if (!PyUnicode_CheckExact(values[R_NAME]) || !PyUnicode_CheckExact(values[R_EVALUATOR]) ||
        !PyUnicode_CheckExact(values[R_EVALUATOR_VERSION])) {
        st = ST_UNHANDLED;
        goto done;
    }
    label = optional_str(values[R_SCORE_LABEL]);
    explanation = optional_str(values[R_EXPLANATION]);
    error = optional_str(values[R_ERROR_TYPE]);
    if (label < 0 || explanation < 0 || error < 0) {
        st = ST_UNHANDLED;
        goto done;
    }
    if (values[R_SCORE_VALUE] != Py_None) { /* float(score_value) of the usual types */
        if (PyFloat_CheckExact(values[R_SCORE_VALUE])) {
            score = PyFloat_AS_DOUBLE(values[R_SCORE_VALUE]);
        }
        else if (PyLong_CheckExact(values[R_SCORE_VALUE])) {
            score = PyLong_AsDouble(values[R_SCORE_VALUE]);
            if (score == -1.0 && PyErr_Occurred()) {
                PyErr_Clear(); /* too large: float() raises that itself */
                st = ST_UNHANDLED;
                goto done;
            }
        }
        else {
            st = ST_UNHANDLED;
            goto done;
        }
    }
    /* result.span_id or span_id */
    parent = values[R_SPAN_ID];
    if (parent == Py_None || (PyUnicode_CheckExact(parent) && PyUnicode_GET_LENGTH(parent) == 0)) {
        parent = span_id;
    }
    else if (!PyUnicode_CheckExact(parent)) {
        st = ST_UNHANDLED;
        goto done;
    }
    ids[0] = 0x4a;
    ids[1] = 16;
    memcpy(ids + 2, trace_id, 16);
    ids[18] = 0x52;
    ids[19] = 8;
    if (!hex_bytes(parent, ids + 20, 8)) {
        st = ST_UNHANDLED;
        goto done;
    }
    warn = error;
    part = PyTuple_GET_ITEM(parts, warn);
    tag = PyTuple_GET_ITEM(part, 0);

    st = outbuf_open(b, "\x12", 1, &mark);
    if (st == ST_OK && time_ns) {
        st = outbuf_fixed64(b, 0x09, time_ns);
    }
    if (st == ST_OK) {
        st = outbuf_bytes(b, PyTuple_GET_ITEM(part, 1));
    }
    if (st == ST_OK) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 0), values[R_NAME], 0.0);
    }
    if (st == ST_OK && values[R_SCORE_VALUE] != Py_None) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 1), NULL, score);
    }
    if (st == ST_OK && label) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 2), values[R_SCORE_LABEL], 0.0);
    }
    if (st == ST_OK && explanation) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 3), values[R_EXPLANATION], 0.0);
    }
    if (st == ST_OK && error) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 4), values[R_ERROR_TYPE], 0.0);
    }
    if (st == ST_OK) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 5), values[R_EVALUATOR], 0.0);
    }
    if (st == ST_OK) {
        st = put_record_attribute(b, tag, PyTuple_GET_ITEM(keys, 6),
                                  values[R_EVALUATOR_VERSION], 0.0);
    }
    if (st == ST_OK) {
        st = outbuf_bytes(b, PyTuple_GET_ITEM(part, 2));
    }
    if (st == ST_OK) {
        st = outbuf_put(b, ids, sizeof(ids));
    }
    if (st == ST_OK && time_ns) {
        st = outbuf_fixed64(b, 0x59, time_ns);
    }
    if (st == ST_OK) {
        st = outbuf_bytes(b, PyTuple_GET_ITEM(part, 3));
    }
    if (st == ST_OK) {
        st = outbuf_close(b, mark);
    }
done:
    for (i = 0; i < R_COUNT; i++) {
        Py_XDECREF(values[i]);
    }
    return st;
}

/* (info parts, warn parts), each a 4-tuple of bytes whose first is a 1 to 5 byte tag. */
static int
check_parts(PyObject *parts)
{
    Py_ssize_t i, j;
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 2) {
        return 0;
    }
    for (i = 0; i < 2; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 4) {
            return 0;
        }
        for (j = 0; j < 4; j++) {
            if (!PyBytes_Check(PyTuple_GET_ITEM(part, j))) {
                return 0;
            }
        }
        if (PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 0)) < 1 ||
            PyBytes_GET_SIZE(PyTuple_GET_ITEM(part, 0)) > 5) {
            return 0;
        }
    }
    return 1;
}

/* A 7-tuple of str. */
static int
check_keys(PyObject *keys)
{
    Py_ssize_t i;
    if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) != 7) {
        return 0;
    }
    for (i = 0; i < 7; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(keys, i))) {
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(encode_result_records_doc,
"encode_result_records($module, results, trace_id, span_id, time_ns, keys, parts, /)\n"
"--\n"
"\n"
"b''.join(framed_log_records(results, trace_id, span_id, time_ns)) of\n"
"tracehound.server._otlp: the framed `gen_ai.evaluation.result` log record of each result\n"
"(a tuple or list), parented to result.span_id or span_id, with the attributes of\n"
"tracehound.emit.event_attributes under `keys` (a 7-tuple of str: name, score value, score\n"
"label, explanation, error type, evaluator name, evaluator version); `parts` is (info, warn),\n"
"each the 4-tuple encode_log_record takes. None for anything else than str fields, a float or\n"
"int score, hex ids and a time in 0..2**64-1; TypeError for malformed keys or parts.");

static PyObject *
encode_result_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *results, *keys, *parts, *fast;
    outbuf_t b = {NULL, 0, 0};
    uint8_t trace_id[16];
    uint64_t time_ns;
    Py_ssize_t i, count;
    int st = ST_OK;

    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "encode_result_records() takes 6 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    results = args[0];
    keys = args[4];
    parts = args[5];
    if (!check_keys(keys)) {
        PyErr_SetString(PyExc_TypeError, "encode_result_records() keys must be a 7-tuple of str");
        return NULL;
    }
    if (!check_parts(parts)) {
        PyErr_SetString(PyExc_TypeError,
                        "encode_result_records() parts must be two 4-tuples of bytes");
        return NULL;
    }
    if (!(PyTuple_CheckExact(results) || PyList_CheckExact(results)) ||
        !PyLong_CheckExact(args[3]) || !hex_bytes(args[1], trace_id, 16)) {
        Py_RETURN_NONE;
    }
    switch (fixed64_of(args[3], &time_ns)) {
    case -1:
        return NULL;
    case 0:
        Py_RETURN_NONE;
    }
    fast = PySequence_Fast(results, "results"); /* a new reference: a list may change */
    if (fast == NULL) {
        return NULL;
    }
    count = PySequence_Fast_GET_SIZE(fast);
    for (i = 0; st == ST_OK && i < count; i++) {
        PyObject *result = PySequence_Fast_GET_ITEM(fast, i);
        Py_INCREF(result);
        st = put_result_record(&b, result, trace_id, args[2], time_ns, keys, parts);
        Py_DECREF(result);
    }
    Py_DECREF(fast);
    return outbuf_finish(&b, st);
}

PyDoc_STRVAR(encode_span_result_records_doc,
"encode_span_result_records($module, spans, time_ns, keys, parts, /)\n"
"--\n"
"\n"
"encode_result_records(results, trace_id, span_id, time_ns, keys, parts) of each (results,\n"
"trace_id, span_id) of the list `spans`, joined, and how many records that is: (bytes, count).\n"
"None when one of them would be None.");

static PyObject *
encode_span_result_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *spans, *keys, *parts, *fast, *joined;
    outbuf_t b = {NULL, 0, 0};
    uint64_t time_ns;
    Py_ssize_t i, j, count, records = 0;
    int st = ST_OK;

    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError,
                     "encode_span_result_records() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    spans = args[0];
    keys = args[2];
    parts = args[3];
    if (!check_keys(keys) || !check_parts(parts)) {
        PyErr_SetString(PyExc_TypeError, "encode_span_result_records() keys must be a 7-tuple "
                                         "of str, parts two 4-tuples of bytes");
        return NULL;
    }
    if (!PyList_CheckExact(spans) || !PyLong_CheckExact(args[1])) {
        Py_RETURN_NONE;
    }
    switch (fixed64_of(args[1], &time_ns)) {
    case -1:
        return NULL;
    case 0:
        Py_RETURN_NONE;
    }
    for (i = 0; st == ST_OK && i < PyList_GET_SIZE(spans); i++) {
        PyObject *entry = PyList_GET_ITEM(spans, i);
        uint8_t trace_id[16];
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
            st = ST_UNHANDLED;
            break;
        }
        Py_INCREF(entry);
        if (!(PyTuple_CheckExact(PyTuple_GET_ITEM(entry, 0)) ||
              PyList_CheckExact(PyTuple_GET_ITEM(entry, 0))) ||
            !hex_bytes(PyTuple_GET_ITEM(entry, 1), trace_id, 16)) {
            st = ST_UNHANDLED;
        }
        else {
            fast = PySequence_Fast(PyTuple_GET_ITEM(entry, 0), "results");
            if (fast == NULL) {
                st = ST_ERROR;
            }
            else {
                count = PySequence_Fast_GET_SIZE(fast);
                for (j = 0; st == ST_OK && j < count; j++) {
                    PyObject *result = PySequence_Fast_GET_ITEM(fast, j);
                    Py_INCREF(result);
                    st = put_result_record(&b, result, trace_id, PyTuple_GET_ITEM(entry, 2),
                                           time_ns, keys, parts);
                    Py_DECREF(result);
                }
                records += count;
                Py_DECREF(fast);
            }
        }
        Py_DECREF(entry);
    }
    joined = outbuf_finish(&b, st);
    if (joined == NULL || joined == Py_None) {
        return joined;
    }
    return Py_BuildValue("(Nn)", joined, records);
}

/* --- encode_result_attributes ---------------------------------------------------------------- */

PyDoc_STRVAR(encode_result_attributes_doc,
"encode_result_attributes($module, results, present, tag, /)\n"
"--\n"
"\n"
"encoded_attributes(tag, span_attributes(results), present) of tracehound.server._otlp and\n"
"tracehound.emit: the attributes of the results (a tuple or list; later ones win), encoded\n"
"as encode_key_values(attributes, tag) encodes them; b'' when they have none. None when that\n"
"takes another way (`present` None or holding one of the keys) and when the results'\n"
"attributes are not dicts or `present` not a dict, set or frozenset (the Python path then).");

static PyObject *
encode_result_attributes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *results, *present, *fast, *merged = NULL, *only = NULL, *key, *value, *out = NULL;
    Py_ssize_t i, count, pos = 0;
    int st = ST_OK;

    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError,
                     "encode_result_attributes() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    results = args[0];
    present = args[1];
    if (!(PyTuple_CheckExact(results) || PyList_CheckExact(results))) {
        Py_RETURN_NONE;
    }
    fast = PySequence_Fast(results, "results");
    if (fast == NULL) {
        return NULL;
    }
    count = PySequence_Fast_GET_SIZE(fast);
    /* span_attributes: a dict updated with each result's non-empty attributes, in order (the
     * one result with attributes, the usual case, is read as it is) */
    for (i = 0; st == ST_OK && i < count; i++) {
        PyObject *attributes = result_get(PySequence_Fast_GET_ITEM(fast, i), R_ATTRIBUTES);
        if (attributes == NULL) {
            st = ST_ERROR;
            break;
        }
        if (!PyDict_CheckExact(attributes)) {
            st = ST_UNHANDLED;
        }
        else if (PyDict_GET_SIZE(attributes) == 0) {
        }
        else if (only == NULL && merged == NULL) {
            only = attributes;
            attributes = NULL;
        }
        else {
            if (merged == NULL) {
                merged = PyDict_Copy(only);
                Py_CLEAR(only);
            }
            if (merged == NULL || PyDict_Update(merged, attributes) < 0) {
                st = ST_ERROR;
            }
        }
        Py_XDECREF(attributes);
    }
    Py_DECREF(fast);
    if (st == ST_OK && merged == NULL) {
        merged = only;
        only = NULL;
    }
    if (st != ST_OK) {
        goto done;
    }
    if (merged == NULL) {
        out = PyBytes_FromStringAndSize(NULL, 0);
        goto done;
    }
    if (present == Py_None ||
        !(PyDict_CheckExact(present) || PyFrozenSet_CheckExact(present) ||
          PySet_CheckExact(present))) {
        st = ST_UNHANDLED;
        goto done;
    }
    while (PyDict_Next(merged, &pos, &key, &value)) {
        int found = PyDict_CheckExact(present) ? PyDict_Contains(present, key)
                                               : PySet_Contains(present, key);
        if (found < 0) {
            st = ST_ERROR;
            goto done;
        }
        if (found) {
            st = ST_UNHANDLED;
            goto done;
        }
    }
    {
        PyObject *call_args[2] = {merged, args[2]};
        out = PyObject_Vectorcall(encode_key_values_fn, call_args, 2, NULL);
    }
done:
    Py_XDECREF(only);
    Py_XDECREF(merged);
    if (st == ST_UNHANDLED) {
        Py_XDECREF(out);
        Py_RETURN_NONE;
    }
    if (st == ST_ERROR) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

/* --- call_span_hooks ------------------------------------------------------------------------ */

PyDoc_STRVAR(call_span_hooks_doc,
"call_span_hooks($module, hooks, span, steps, trace, /)\n"
"--\n"
"\n"
"The loop of tracehound.engine.Engine.add_span over a trace's span hooks (a list of\n"
"(position, on_span, state) tuples): results += on_span(state, span, steps, trace) of each, in\n"
"order; the results as a tuple. When one raises an Exception (or its results cannot be added),\n"
"[the results so far (a list), its position, the exception] instead, the hooks after it not\n"
"called. Other exceptions (KeyboardInterrupt, ...) propagate.");

static PyObject *
call_hooks(PyObject *hooks, PyObject *span, PyObject *steps, PyObject *trace)
{
    /* The results so far: `only` (a tuple) while one hook answered any, then the list
     * `results` (the usual span has one result: no list made for it) */
    PyObject *results = NULL, *only = NULL, *answer;
    Py_ssize_t i;

    for (i = 0; i < PyList_GET_SIZE(hooks); i++) {
        PyObject *hook = PyList_GET_ITEM(hooks, i), *call_args[4], *span_results, *extended;
        PyObject *position, *exc;
        if (!PyTuple_CheckExact(hook) || PyTuple_GET_SIZE(hook) != 3) {
            PyErr_SetString(PyExc_TypeError,
                            "call_span_hooks() hooks must hold (position, on_span, state)");
            Py_XDECREF(only);
            Py_XDECREF(results);
            return NULL;
        }
        Py_INCREF(hook);
        call_args[0] = PyTuple_GET_ITEM(hook, 2);
        call_args[1] = span;
        call_args[2] = steps;
        call_args[3] = trace;
        span_results = PyObject_Vectorcall(PyTuple_GET_ITEM(hook, 1), call_args, 4, NULL);
        extended = NULL;
        if (span_results != NULL && results == NULL &&
            (PyTuple_CheckExact(span_results) || PyList_CheckExact(span_results))) {
            if (Py_SIZE(span_results) == 0) {
                Py_DECREF(span_results);
                Py_DECREF(hook);
                continue;
            }
            if (only == NULL) { /* a copy of a list, as `results +=` would take its items */
                only = PyTuple_CheckExact(span_results) ? Py_NewRef(span_results)
                                                        : PyList_AsTuple(span_results);
                Py_DECREF(span_results);
                Py_DECREF(hook);
                if (only == NULL) {
                    return NULL;
                }
                continue;
            }
        }
        if (span_results != NULL && results == NULL) { /* the list, from here on */
            results = only != NULL ? PySequence_List(only) : PyList_New(0);
            Py_CLEAR(only);
            if (results == NULL) {
                Py_DECREF(span_results);
                Py_DECREF(hook);
                return NULL;
            }
        }
        if (span_results != NULL) { /* results += span_results */
            extended = PySequence_InPlaceConcat(results, span_results);
            Py_DECREF(span_results);
        }
        if (extended != NULL) {
            Py_DECREF(extended); /* results itself */
            Py_DECREF(hook);
            continue;
        }
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            Py_DECREF(hook);
            Py_XDECREF(only);
            Py_XDECREF(results);
            return NULL;
        }
#if PY_VERSION_HEX >= 0x030C0000
        exc = PyErr_GetRaisedException();
#else
        {
            PyObject *type, *tb;
            PyErr_Fetch(&type, &exc, &tb);
            PyErr_NormalizeException(&type, &exc, &tb);
            if (tb != NULL && exc != NULL) {
                PyException_SetTraceback(exc, tb);
            }
            Py_XDECREF(type);
            Py_XDECREF(tb);
        }
#endif
        if (results == NULL) {
            results = only != NULL ? PySequence_List(only) : PyList_New(0);
            Py_CLEAR(only);
        }
        position = PyTuple_GET_ITEM(hook, 0);
        answer = exc == NULL || results == NULL ? NULL : PyList_New(3);
        if (answer != NULL) {
            PyList_SET_ITEM(answer, 0, results);
            Py_INCREF(position);
            PyList_SET_ITEM(answer, 1, position);
            PyList_SET_ITEM(answer, 2, exc);
            Py_DECREF(hook);
            return answer;
        }
        Py_XDECREF(exc);
        Py_DECREF(hook);
        Py_XDECREF(results);
        return NULL;
    }
    if (only != NULL) {
        return only;
    }
    if (results == NULL) {
        return PyTuple_New(0);
    }
    answer = PyList_GET_SIZE(results) ? PyList_AsTuple(results) : PyTuple_New(0);
    Py_DECREF(results);
    return answer;
}

static PyObject *
call_span_hooks(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "call_span_hooks() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "call_span_hooks() hooks must be a list");
        return NULL;
    }
    return call_hooks(args[0], args[1], args[2], args[3]);
}

/* --- engine_take_span ------------------------------------------------------------------------ */

/* The attributes engine_take_span reads and writes, each with its own cache (one class each). */
enum {
    A_STATS,
    A_FINALIZED,
    A_LATE_BY_TRACE,
    A_CLOCK,
    A_TRACES,
    A_CONFIG,
    A_NEW_TRACE,
    A_START_EVALUATORS,
    A_ISOLATE,
    A_CHARGE_TEXT,
    A_TRACE_ID,
    A_SPAN_ID,
    A_PARENT_SPAN_ID,
    A_NAME,
    A_PARENT_IS_REMOTE,
    A_VIEW_SERVICE_NAME,
    A_PARENTS,
    A_NAMES,
    A_VIEWS,
    A_LOGS,
    A_MESSAGES_MEMO,
    A_LAST_SEEN,
    A_ROOT_ENDED,
    A_INFO,
    A_SPAN_COUNT,
    A_TEXT_BYTES,
    A_BUILDER,
    A_SPAN_HOOKS,
    A_INFO_SERVICE_NAME,
    A_TRUNCATED,
    A_SPANS_RECEIVED,
    A_LATE_SPANS,
    A_SPANS_DUPLICATE,
    A_SPANS_OVER_LIMIT,
    A_SPANS_GENAI,
    A_MAPPING_PROBLEMS,
    A_MAX_SPANS,
    A_MAX_TEXT_BYTES,
    A_PROBLEMS,
    A_SPAN_TEXT_BYTES,
    A_ADD,
    A_COUNT
};

static const char *const TAKE_NAMES[A_COUNT] = {
    "stats",          "_finalized",     "_late_by_trace",  "_clock",
    "_traces",        "config",         "_new_trace",      "_start_evaluators",
    "_isolate",       "_charge_text",   "trace_id",        "span_id",
    "parent_span_id", "name",           "parent_is_remote", "service_name",
    "parents",        "names",          "views",           "logs",
    "messages_memo",  "last_seen",      "root_ended",      "info",
    "span_count",     "text_bytes",     "builder",         "span_hooks",
    "service_name",   "truncated",      "spans_received",  "late_spans",
    "spans_duplicate", "spans_over_limit", "spans_genai",  "mapping_problems",
    "max_spans_per_trace", "max_text_bytes_per_trace", "problems", "text_bytes",
    "add",
};

static PyObject *take_str[A_COUNT];
static slot_cache take_slots[A_COUNT];
static PyObject *str_normalize, *str_span, *str_steps, *str_results;
static PyObject *engine_globals; /* tracehound.engine's dict: its `normalize` read per call */
static PyObject *text_size_fn;   /* the module's text_size */

/* The slot's address in obj when the cache knows obj's class (else NULL): the check of
 * tracehound_slot_get's cache, inlined (read per span, some 20 times). A cache holds an offset
 * only for a version tag that was valid, and tags are never reused. */
static ALWAYS_INLINE PyObject **
cached_slot(slot_cache *cache, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (cache->type == type && cache->offset != 0 && cache->tag == type->tp_version_tag) {
        return (PyObject **)((char *)obj + cache->offset);
    }
    return NULL;
}

static PyObject *
take_get(PyObject *obj, int which)
{
    PyObject **slot = cached_slot(&take_slots[which], obj);
    if (slot != NULL && *slot != NULL) {
        return Py_NewRef(*slot);
    }
    return tracehound_slot_get(&take_slots[which], obj, take_str[which]);
}

static int
take_set(PyObject *obj, int which, PyObject *value)
{
    PyObject **slot = cached_slot(&take_slots[which], obj);
    if (slot != NULL && value != NULL) {
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
        return 0;
    }
    return tracehound_slot_set(&take_slots[which], obj, take_str[which], value);
}

/* obj.<which> += n */
static int
take_add(PyObject *obj, int which, PyObject *n)
{
    PyObject *value = take_get(obj, which), *sum;
    int rc;
    if (value == NULL) {
        return -1;
    }
    sum = PyNumber_InPlaceAdd(value, n);
    Py_DECREF(value);
    if (sum == NULL) {
        return -1;
    }
    rc = take_set(obj, which, sum);
    Py_DECREF(sum);
    return rc;
}

/* obj.<which> += 1 */
static int
take_increment(PyObject *obj, int which)
{
    PyObject *one = PyLong_FromLong(1);
    int rc;
    if (one == NULL) {
        return -1;
    }
    rc = take_add(obj, which, one);
    Py_DECREF(one);
    return rc;
}

/* A method of obj called with n arguments: a new reference, or NULL. */
static PyObject *
take_call(PyObject *obj, int which, PyObject *const *args, Py_ssize_t n)
{
    PyObject *method = take_get(obj, which), *out;
    if (method == NULL) {
        return NULL;
    }
    out = PyObject_Vectorcall(method, args, (size_t)n, NULL);
    Py_DECREF(method);
    return out;
}

/* The loop of call_span_hooks (below); hooks a list. */
static PyObject *call_hooks(PyObject *hooks, PyObject *span, PyObject *steps, PyObject *trace);

PyDoc_STRVAR(engine_take_span_doc,
"engine_take_span($module, engine, view, /)\n"
"--\n"
"\n"
"tracehound.engine.Engine.take_span: what Engine.add_span does with one span, answered as\n"
"take_span answers (the span's results, a tuple, for a GenAI span; SPAN_LATE, SPAN_DUPLICATE\n"
"or SPAN_PLAIN otherwise), without the SpanOutcome. The engine's own methods are called for\n"
"what is not per span (a new trace, starting the evaluators, text over the budget, a failed\n"
"evaluator).");

static PyObject *
engine_take_span(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *engine, *view, *stats = NULL, *trace_id = NULL, *span_id = NULL, *answer = NULL;
    PyObject *finalized = NULL, *traces = NULL, *now = NULL, *state = NULL, *parent = NULL;
    PyObject *value = NULL, *info = NULL, *normalized = NULL, *steps = NULL, *hooks = NULL;
    PyObject *config = NULL, *size = NULL;
    int found;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "engine_take_span() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    engine = args[0];
    view = args[1];
    if (engine_globals == NULL) {
        PyObject *engine_module = PyImport_ImportModule("tracehound.engine");
        if (engine_module == NULL) {
            return NULL;
        }
        engine_globals = PyModule_GetDict(engine_module);
        Py_XINCREF(engine_globals);
        Py_DECREF(engine_module);
        if (engine_globals == NULL) {
            return NULL;
        }
    }
    if (text_size_fn == NULL) {
        text_size_fn = PyObject_GetAttrString(module, "text_size");
        if (text_size_fn == NULL) {
            return NULL;
        }
    }
    /* stats.spans_received += 1; the ids */
    if ((stats = take_get(engine, A_STATS)) == NULL ||
        take_increment(stats, A_SPANS_RECEIVED) < 0 ||
        (trace_id = take_get(view, A_TRACE_ID)) == NULL ||
        (span_id = take_get(view, A_SPAN_ID)) == NULL ||
        (finalized = take_get(engine, A_FINALIZED)) == NULL) {
        goto done;
    }
    found = PySequence_Contains(finalized, trace_id);
    if (found < 0) {
        goto done;
    }
    if (found) { /* a late span */
        PyObject *late = NULL, *count, *one;
        if (take_increment(stats, A_LATE_SPANS) < 0 ||
            (late = take_get(engine, A_LATE_BY_TRACE)) == NULL) {
            Py_XDECREF(late);
            goto done;
        }
        count = PyObject_GetItem(late, trace_id);
        if (count == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
                Py_DECREF(late);
                goto done;
            }
            PyErr_Clear();
            count = PyLong_FromLong(1);
        }
        else {
            one = PyLong_FromLong(1);
            Py_SETREF(count, one == NULL ? NULL : PyNumber_Add(count, one));
            Py_XDECREF(one);
        }
        if (count != NULL && PyObject_SetItem(late, trace_id, count) == 0) {
            answer = PyLong_FromLong(1); /* SPAN_LATE */
        }
        Py_XDECREF(count);
        Py_DECREF(late);
        goto done;
    }
    if ((value = take_get(engine, A_CLOCK)) == NULL) {
        goto done;
    }
    now = PyObject_CallNoArgs(value);
    Py_CLEAR(value);
    if (now == NULL || (traces = take_get(engine, A_TRACES)) == NULL) {
        goto done;
    }
    if (PyDict_Check(traces)) {
        state = PyDict_GetItemWithError(traces, trace_id);
        Py_XINCREF(state);
        if (state == NULL && PyErr_Occurred()) {
            goto done;
        }
    }
    else {
        PyErr_SetString(PyExc_TypeError, "engine_take_span() the engine's traces must be a dict");
        goto done;
    }
    if (state == NULL) {
        PyObject *call_args[2] = {trace_id, now};
        if ((state = take_call(engine, A_NEW_TRACE, call_args, 2)) == NULL) {
            goto done;
        }
    }
    else {
        if ((value = take_get(state, A_PARENTS)) == NULL) {
            goto done;
        }
        found = PySequence_Contains(value, span_id);
        Py_CLEAR(value);
        if (found < 0) {
            goto done;
        }
        if (found) {
            if (take_increment(stats, A_SPANS_DUPLICATE) == 0) {
                answer = PyLong_FromLong(2); /* SPAN_DUPLICATE */
            }
            goto done;
        }
    }
    /* state.last_seen = now; its parent and name; the root's end */
    if (take_set(state, A_LAST_SEEN, now) < 0 ||
        (parent = take_get(view, A_PARENT_SPAN_ID)) == NULL ||
        (value = take_get(state, A_PARENTS)) == NULL ||
        PyObject_SetItem(value, span_id, parent) < 0) {
        goto done;
    }
    Py_CLEAR(value);
    if ((value = take_get(view, A_NAME)) == NULL) {
        goto done;
    }
    {
        PyObject *names_of = take_get(state, A_NAMES);
        int rc = names_of == NULL ? -1 : PyObject_SetItem(names_of, span_id, value);
        Py_XDECREF(names_of);
        Py_CLEAR(value);
        if (rc < 0) {
            goto done;
        }
    }
    found = PyObject_IsTrue(parent);
    if (found < 0) {
        goto done;
    }
    if (found) {
        if ((value = take_get(view, A_PARENT_IS_REMOTE)) == NULL) {
            goto done;
        }
        found = PyObject_IsTrue(value);
        Py_CLEAR(value);
        if (found < 0) {
            goto done;
        }
        found = !found;
    }
    if ((info = take_get(state, A_INFO)) == NULL) {
        goto done;
    }
    if (!found) { /* a local root */
        if (take_set(state, A_ROOT_ENDED, now) < 0 ||
            (value = take_get(info, A_INFO_SERVICE_NAME)) == NULL) {
            goto done;
        }
        found = PyObject_IsTrue(value);
        Py_CLEAR(value);
        if (found < 0) {
            goto done;
        }
        if (!found) {
            if ((value = PyObject_GetAttr(view, take_str[A_VIEW_SERVICE_NAME])) == NULL ||
                take_set(info, A_INFO_SERVICE_NAME, value) < 0) {
                goto done;
            }
            Py_CLEAR(value);
        }
    }
    if (take_increment(state, A_SPAN_COUNT) < 0 ||
        (config = take_get(engine, A_CONFIG)) == NULL ||
        (value = take_get(state, A_SPAN_COUNT)) == NULL) {
        goto done;
    }
    {
        PyObject *limit = take_get(config, A_MAX_SPANS);
        found = limit == NULL ? -1 : PyObject_RichCompareBool(value, limit, Py_GT);
        Py_XDECREF(limit);
        Py_CLEAR(value);
        if (found < 0) {
            goto done;
        }
    }
    if (found) { /* past the trace's span limit: not evaluated */
        if (take_increment(stats, A_SPANS_OVER_LIMIT) == 0 &&
            take_set(info, A_TRUNCATED, Py_True) == 0) {
            answer = PyLong_FromLong(0); /* SPAN_PLAIN */
        }
        goto done;
    }
    /* normalize(view, state.logs.get(span_id), state.messages_memo) */
    {
        PyObject *normalize_fn, *logs, *memo, *span_logs, *call_args[3];
        normalize_fn = PyDict_GetItemWithError(engine_globals, str_normalize);
        if (normalize_fn == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_NameError, "name 'normalize' is not defined");
            }
            goto done;
        }
        Py_INCREF(normalize_fn);
        if ((logs = take_get(state, A_LOGS)) == NULL) {
            Py_DECREF(normalize_fn);
            goto done;
        }
        if (PyDict_CheckExact(logs)) {
            span_logs = PyDict_GetItemWithError(logs, span_id);
            if (span_logs == NULL && PyErr_Occurred()) {
                Py_DECREF(logs);
                Py_DECREF(normalize_fn);
                goto done;
            }
            if (span_logs == NULL) {
                span_logs = Py_None;
            }
            Py_INCREF(span_logs);
        }
        else {
            span_logs = PyObject_CallMethod(logs, "get", "O", span_id);
        }
        Py_DECREF(logs);
        memo = span_logs == NULL ? NULL : take_get(state, A_MESSAGES_MEMO);
        if (memo != NULL) {
            call_args[0] = view;
            call_args[1] = span_logs;
            call_args[2] = memo;
            normalized = PyObject_Vectorcall(normalize_fn, call_args, 3, NULL);
        }
        Py_XDECREF(memo);
        Py_XDECREF(span_logs);
        Py_DECREF(normalize_fn);
        if (normalized == NULL) {
            goto done;
        }
    }
    if (normalized == Py_None) { /* not a GenAI span: most spans of an application */
        answer = PyLong_FromLong(0);
        goto done;
    }
    if (take_increment(stats, A_SPANS_GENAI) < 0 ||
        (value = take_get(normalized, A_PROBLEMS)) == NULL) {
        goto done;
    }
    found = PyObject_IsTrue(value);
    if (found > 0) {
        Py_ssize_t n = PyObject_Size(value);
        PyObject *count = n < 0 ? NULL : PyLong_FromSsize_t(n);
        found = count == NULL ? -1 : take_add(stats, A_MAPPING_PROBLEMS, count);
        Py_XDECREF(count);
    }
    Py_CLEAR(value);
    if (found < 0 || (value = take_get(state, A_VIEWS)) == NULL ||
        PyObject_SetItem(value, span_id, view) < 0) {
        goto done;
    }
    Py_CLEAR(value);
    /* the text within the trace's budget, else `_charge_text` */
    if ((size = PyObject_CallOneArg(text_size_fn, normalized)) == NULL) {
        goto done;
    }
    found = 0;
    if (size != Py_None) {
        PyObject *total, *limit;
        if ((value = take_get(state, A_TEXT_BYTES)) == NULL) {
            goto done;
        }
        total = PyNumber_Add(value, size);
        Py_CLEAR(value);
        limit = total == NULL ? NULL : take_get(config, A_MAX_TEXT_BYTES);
        found = limit == NULL ? -1 : PyObject_RichCompareBool(total, limit, Py_LE);
        if (found > 0 && (take_set(normalized, A_SPAN_TEXT_BYTES, size) < 0 ||
                          take_set(state, A_TEXT_BYTES, total) < 0)) {
            found = -1;
        }
        Py_XDECREF(total);
        Py_XDECREF(limit);
        if (found < 0) {
            goto done;
        }
    }
    if (!found) {
        PyObject *call_args[2] = {state, normalized};
        if ((value = take_call(engine, A_CHARGE_TEXT, call_args, 2)) == NULL) {
            goto done;
        }
        Py_CLEAR(value);
    }
    /* steps = tuple(state.builder.add(normalized)) */
    {
        PyObject *builder = take_get(state, A_BUILDER), *made;
        if (builder == NULL) {
            goto done;
        }
        {
            PyObject *call_args[2] = {builder, normalized};
            made = PyObject_VectorcallMethod(take_str[A_ADD], call_args,
                                             2, NULL);
        }
        Py_DECREF(builder);
        if (made == NULL) {
            goto done;
        }
        steps = PySequence_Tuple(made);
        Py_DECREF(made);
        if (steps == NULL) {
            goto done;
        }
    }
    if ((hooks = take_get(state, A_SPAN_HOOKS)) == NULL) {
        goto done;
    }
    if (hooks == Py_None) {
        Py_SETREF(hooks, take_call(engine, A_START_EVALUATORS, &state, 1));
        if (hooks == NULL) {
            goto done;
        }
    }
    found = PyObject_IsTrue(hooks);
    if (found <= 0) {
        answer = found < 0 ? NULL : PyTuple_New(0);
        goto done;
    }
    if (!PyList_CheckExact(hooks)) {
        PyErr_SetString(PyExc_TypeError, "engine_take_span() span hooks must be a list");
        goto done;
    }
    answer = call_hooks(hooks, normalized, steps, info);
    if (answer != NULL && !PyTuple_CheckExact(answer)) {
        /* [results so far, position, exception]: `Engine._isolate`, then the results */
        PyObject *failed = answer, *done_list = PyList_GET_ITEM(failed, 0), *isolated;
        PyObject *kwnames = PyTuple_Pack(3, str_span, str_steps, str_results);
        answer = NULL;
        if (kwnames != NULL) { /* _isolate(state, failed, exc, span=, steps=, results=) */
            PyObject *method = take_get(engine, A_ISOLATE);
            PyObject *call_args[6] = {state,      PyList_GET_ITEM(failed, 1),
                                      PyList_GET_ITEM(failed, 2), normalized,
                                      steps,      done_list};
            isolated = method == NULL ? NULL
                                      : PyObject_Vectorcall(method, call_args, 3, kwnames);
            Py_XDECREF(method);
            Py_DECREF(kwnames);
            if (isolated != NULL) {
                Py_DECREF(isolated);
                answer = PyList_AsTuple(done_list);
            }
        }
        Py_DECREF(failed);
    }
done:
    Py_XDECREF(stats);
    Py_XDECREF(trace_id);
    Py_XDECREF(span_id);
    Py_XDECREF(finalized);
    Py_XDECREF(traces);
    Py_XDECREF(now);
    Py_XDECREF(state);
    Py_XDECREF(parent);
    Py_XDECREF(value);
    Py_XDECREF(info);
    Py_XDECREF(normalized);
    Py_XDECREF(steps);
    Py_XDECREF(hooks);
    Py_XDECREF(config);
    Py_XDECREF(size);
    return answer;
}

/* --- present_keys ---------------------------------------------------------------------------- */

static PyObject *str_attributes_slot, *str_attribute_keys;
static slot_cache attributes_slot;

PyDoc_STRVAR(present_keys_doc,
"present_keys($module, view, /)\n"
"--\n"
"\n"
"tracehound.server._pipeline._present_keys: a container of the span view's attribute keys,\n"
"frozenset(view.attribute_keys) -- or the view's attributes dict itself when it holds them\n"
"decoded (the same keys, without reading them out).");

static PyObject *
present_keys(PyObject *module, PyObject *view)
{
    PyObject *attributes, *keys, *out;
    (void)module;
    attributes = tracehound_slot_get(&attributes_slot, view, str_attributes_slot);
    if (attributes != NULL && PyDict_CheckExact(attributes)) {
        return attributes;
    }
    Py_XDECREF(attributes);
    if (attributes == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return NULL;
        }
        PyErr_Clear(); /* not decoded yet */
    }
    keys = PyObject_GetAttr(view, str_attribute_keys);
    if (keys == NULL) {
        return NULL;
    }
    out = PyFrozenSet_New(keys);
    Py_DECREF(keys);
    return out;
}

/* --- derived_attributes ---------------------------------------------------------------------- */

enum {
    D_LEVELS,
    D_LEVEL_OF_RANK,
    D_DRIFT,
    D_GOLDEN,
    D_SEVERITY,
    D_SCORE,
    D_AGENT,
    D_MAX_SEVERITY,
    D_MAX_SCORE,
    D_MAX_AGENT,
    D_COUNT
};

static PyObject *str_lower, *str_empty, *builtin_max;

/* str(value).lower(): a new reference, or NULL. */
static PyObject *
lowered_str(PyObject *value)
{
    PyObject *text = PyObject_Str(value), *out;
    if (text == NULL) {
        return NULL;
    }
    out = PyObject_CallMethodNoArgs(text, str_lower);
    Py_DECREF(text);
    return out;
}

/* summary._is_number(value): 1, 0, or -1 with an exception set (math.isfinite's, for an int
 * too large for a float). */
static int
is_finite_number(PyObject *value)
{
    double d;
    if (PyBool_Check(value) || !(PyLong_Check(value) || PyFloat_Check(value))) {
        return 0;
    }
    d = PyFloat_AsDouble(value);
    if (d == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    return isfinite(d) ? 1 : 0;
}

/* Appends (rank, float(score) or -1.0, str(agent)) to scored; 0 or -1. */
static int
append_scored(PyObject *scored, PyObject *rank, PyObject *score, PyObject *agent)
{
    PyObject *as_float = score != NULL ? PyNumber_Float(score) : PyFloat_FromDouble(-1.0);
    PyObject *agent_str = as_float == NULL ? NULL : PyObject_Str(agent);
    PyObject *entry = agent_str == NULL ? NULL : PyTuple_Pack(3, rank, as_float, agent_str);
    int rc = entry == NULL ? -1 : PyList_Append(scored, entry);
    Py_XDECREF(as_float);
    Py_XDECREF(agent_str);
    Py_XDECREF(entry);
    return rc;
}

/* dict.get(key, default): a new reference (NULL: the default NULL, or an error). Not
 * borrowed: str() or float() of a value may run code that changes the dict. */
static PyObject *
dict_get(PyObject *dict, PyObject *key, PyObject *fallback)
{
    PyObject *value = PyDict_GetItemWithError(dict, key);
    value = value != NULL || PyErr_Occurred() ? value : fallback;
    Py_XINCREF(value);
    return value;
}

PyDoc_STRVAR(derived_attributes_doc,
"derived_attributes($module, root, results, constants, /)\n"
"--\n"
"\n"
"tracehound.evaluators.summary.derived_attributes(root, results) in one call, for a root dict\n"
"and results whose attributes are dicts, without golden results: None for anything else (the\n"
"Python function then). constants: (LEVELS, the levels by rank, the drift and golden\n"
"evaluation names, the severity, score and agent keys, the max severity, max score and max\n"
"agent keys).");

static PyObject *
derived_attributes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *root, *constants, *fast = NULL, *scored = NULL, *out = NULL, *value, *severity;
    PyObject *const *c;
    Py_ssize_t i, n;
    int number;

    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "derived_attributes() takes 3 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    root = args[0];
    constants = args[2];
    if (!PyTuple_CheckExact(constants) || PyTuple_GET_SIZE(constants) != D_COUNT ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(constants, D_LEVELS)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(constants, D_LEVEL_OF_RANK))) {
        PyErr_SetString(PyExc_TypeError, "derived_attributes() bad constants");
        return NULL;
    }
    c = &PyTuple_GET_ITEM(constants, 0);
    if (!PyDict_CheckExact(root) || !(PyList_CheckExact(args[1]) || PyTuple_CheckExact(args[1]))) {
        Py_RETURN_NONE;
    }
    if ((scored = PyList_New(0)) == NULL) {
        return NULL;
    }
    /* the root's own severity and score */
    value = dict_get(root, c[D_SEVERITY], str_empty);
    severity = value == NULL ? NULL : lowered_str(value);
    Py_XDECREF(value);
    if (severity == NULL) {
        goto done;
    }
    value = dict_get(root, c[D_SCORE], Py_None);
    number = value == NULL ? -1 : is_finite_number(value);
    if (number >= 0) {
        PyObject *rank = PyDict_GetItemWithError(c[D_LEVELS], severity);
        PyObject *agent = NULL;
        if ((rank == NULL && PyErr_Occurred()) ||
            (agent = dict_get(root, c[D_AGENT], str_empty)) == NULL) {
            number = -1;
        }
        else if (rank != NULL || number) {
            PyObject *unranked = rank == NULL ? PyLong_FromLong(-1) : Py_NewRef(rank);
            number = unranked == NULL ? -1
                                      : append_scored(scored, unranked, number ? value : NULL,
                                                      agent);
            Py_XDECREF(unranked);
        }
        Py_XDECREF(agent);
    }
    Py_XDECREF(value);
    Py_DECREF(severity);
    if (number < 0) {
        goto done;
    }
    fast = PySequence_Fast(args[1], "results");
    if (fast == NULL) {
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(fast);
    for (i = 0; i < n; i++) {
        PyObject *result = PySequence_Fast_GET_ITEM(fast, i), *name, *attrs, *error;
        int is_drift, failed;
        name = result_get(result, R_NAME);
        if (name == NULL) {
            goto done;
        }
        is_drift = PyObject_RichCompareBool(name, c[D_DRIFT], Py_EQ);
        if (is_drift == 0) {
            int is_golden = PyObject_RichCompareBool(name, c[D_GOLDEN], Py_EQ);
            Py_DECREF(name);
            if (is_golden != 0) { /* golden verdicts: the Python function (or an error) */
                if (is_golden > 0) {
                    Py_CLEAR(scored);
                    Py_DECREF(fast);
                    Py_RETURN_NONE;
                }
                goto done;
            }
            continue;
        }
        Py_DECREF(name);
        if (is_drift < 0 || (error = result_get(result, R_ERROR_TYPE)) == NULL) {
            goto done;
        }
        failed = PyObject_IsTrue(error);
        Py_DECREF(error);
        if (failed != 0) {
            if (failed < 0) {
                goto done;
            }
            continue;
        }
        if ((attrs = result_get(result, R_ATTRIBUTES)) == NULL) {
            goto done;
        }
        if (!PyDict_CheckExact(attrs)) {
            Py_DECREF(attrs);
            Py_CLEAR(scored);
            Py_DECREF(fast);
            Py_RETURN_NONE;
        }
        value = dict_get(attrs, c[D_SEVERITY], str_empty);
        severity = value == NULL ? NULL : lowered_str(value);
        Py_XDECREF(value);
        number = -1;
        if (severity != NULL) {
            PyObject *rank = PyDict_GetItemWithError(c[D_LEVELS], severity);
            number = rank == NULL ? (PyErr_Occurred() ? -1 : 0) : 1;
            if (number > 0) {
                Py_INCREF(rank);
                value = dict_get(attrs, c[D_SCORE], NULL);
                if (value != NULL) { /* else the default score, -1.0, a number */
                    number = is_finite_number(value);
                }
                else if (PyErr_Occurred()) {
                    number = -1;
                }
                if (number > 0) {
                    PyObject *agent = dict_get(attrs, c[D_AGENT], str_empty);
                    number = agent == NULL ? -1 : append_scored(scored, rank, value, agent);
                    Py_XDECREF(agent);
                }
                Py_XDECREF(value);
                Py_DECREF(rank);
            }
            Py_DECREF(severity);
        }
        Py_DECREF(attrs);
        if (number < 0) {
            goto done;
        }
    }
    if ((out = PyDict_New()) == NULL) {
        goto done;
    }
    if (PyList_GET_SIZE(scored) > 0) {
        PyObject *best_entry = PyObject_CallOneArg(builtin_max, scored), *best = NULL;
        long rank;
        int rc = 0;
        if (best_entry == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        rank = PyLong_AsLong(PyTuple_GET_ITEM(best_entry, 0));
        if (rank == -1 && PyErr_Occurred()) {
            rc = -1;
        }
        else if (rank >= 0) {
            PyObject *key = PyTuple_GET_ITEM(best_entry, 0);
            PyObject *level = PyDict_GetItemWithError(c[D_LEVEL_OF_RANK], key);
            if (level == NULL) {
                if (!PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, key);
                }
                rc = -1;
            }
            else {
                rc = PyDict_SetItem(out, c[D_MAX_SEVERITY], level);
            }
        }
        for (i = 0; rc == 0 && i < PyList_GET_SIZE(scored); i++) {
            /* the first of the highest scores not below 0 */
            PyObject *score = PyTuple_GET_ITEM(PyList_GET_ITEM(scored, i), 1);
            double d = PyFloat_AS_DOUBLE(score);
            if (d >= 0.0 && (best == NULL || d > PyFloat_AS_DOUBLE(best))) {
                best = score;
            }
        }
        if (rc == 0 && best != NULL) {
            rc = PyDict_SetItem(out, c[D_MAX_SCORE], best);
        }
        if (rc == 0) {
            PyObject *agent = PyTuple_GET_ITEM(best_entry, 2);
            int truth = PyObject_IsTrue(agent);
            rc = truth < 0 ? -1 : truth ? PyDict_SetItem(out, c[D_MAX_AGENT], agent) : 0;
        }
        Py_DECREF(best_entry);
        if (rc < 0) {
            Py_CLEAR(out);
        }
    }
done:
    Py_XDECREF(fast);
    Py_XDECREF(scored);
    return out;
}

static PyMethodDef engine_methods[] = {
    {"call_span_hooks", (PyCFunction)(void (*)(void))call_span_hooks, METH_FASTCALL,
     call_span_hooks_doc},
    {"engine_take_span", (PyCFunction)(void (*)(void))engine_take_span, METH_FASTCALL,
     engine_take_span_doc},
    {"present_keys", present_keys, METH_O, present_keys_doc},
    {"derived_attributes", (PyCFunction)(void (*)(void))derived_attributes, METH_FASTCALL,
     derived_attributes_doc},
    {"encode_result_records", (PyCFunction)(void (*)(void))encode_result_records, METH_FASTCALL,
     encode_result_records_doc},
    {"encode_span_result_records", (PyCFunction)(void (*)(void))encode_span_result_records,
     METH_FASTCALL, encode_span_result_records_doc},
    {"encode_result_attributes", (PyCFunction)(void (*)(void))encode_result_attributes,
     METH_FASTCALL, encode_result_attributes_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_engine(PyObject *module)
{
    int i;
    for (i = 0; i < R_COUNT; i++) {
        if (result_str[i] == NULL) {
            result_str[i] = PyUnicode_InternFromString(RESULT_FIELDS[i]);
            if (result_str[i] == NULL) {
                return -1;
            }
        }
    }
    for (i = 0; i < A_COUNT; i++) {
        if (take_str[i] == NULL) {
            take_str[i] = PyUnicode_InternFromString(TAKE_NAMES[i]);
            if (take_str[i] == NULL) {
                return -1;
            }
        }
    }
    if (str_lower == NULL) {
        str_lower = PyUnicode_InternFromString("lower");
        str_empty = PyUnicode_FromString("");
        builtin_max = PyDict_GetItemString(PyEval_GetBuiltins(), "max");
        Py_XINCREF(builtin_max);
        if (str_lower == NULL || str_empty == NULL || builtin_max == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "no builtin max");
            }
            return -1;
        }
    }
    if (str_attributes_slot == NULL) {
        str_attributes_slot = PyUnicode_InternFromString("_attributes");
        str_attribute_keys = PyUnicode_InternFromString("attribute_keys");
        if (str_attributes_slot == NULL || str_attribute_keys == NULL) {
            return -1;
        }
    }
    if (str_normalize == NULL) {
        str_normalize = PyUnicode_InternFromString("normalize");
        str_span = PyUnicode_InternFromString("span");
        str_steps = PyUnicode_InternFromString("steps");
        str_results = PyUnicode_InternFromString("results");
        if (str_normalize == NULL || str_span == NULL || str_steps == NULL ||
            str_results == NULL) {
            return -1;
        }
    }
    if (encode_key_values_fn == NULL) {
        encode_key_values_fn = PyObject_GetAttrString(module, "encode_key_values");
        if (encode_key_values_fn == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(module, engine_methods);
}
