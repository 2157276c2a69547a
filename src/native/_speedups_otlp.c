/*
 * tracehound._speedups: OTLP trace requests kept as bytes, for the sidecar's worker.
 *
 * read_trace_spans reads, in one call per request, everything tracehound.spans.SpanView and the
 * pipeline need of each span (ids as hex, parent, name, kind, times, status, flags, whether it
 * has events, its range in the bytes), of each instrumentation scope and of each resource, so
 * that a request the validating scan accepted is never parsed by upb. splice_trace_request
 * writes the request to forward from the bytes received: some spans cut out (held, duplicates),
 * some with fields appended (result attributes and events) or replaced, the lengths of the
 * enclosing ScopeSpans and ResourceSpans rewritten, and scopes and resources left without spans
 * dropped — what upb would serialize after the same edits, once parsed.
 *
 * Both answer None for bytes they do not read exactly as upb would (malformed wire data, a known
 * field with another wire type, invalid UTF-8 in a string they decode, a resource or scope field
 * occurring twice, which upb would merge); the caller then parses the request with upb.
 */

#include "_speedups.h"
#include "_speedups_wire.h"

#include <structmember.h> /* T_OBJECT_EX, READONLY before Python 3.12 */

/* Wire types of the known fields (opentelemetry-proto trace/v1, resource/v1, common/v1). */
static const int8_t REQUEST_FIELDS[2] = {WT_UNKNOWN, 2};
static const int8_t RESOURCE_SPANS_FIELDS[4] = {WT_UNKNOWN, 2, 2, 2};
static const int8_t SCOPE_SPANS_FIELDS[4] = {WT_UNKNOWN, 2, 2, 2};
static const int8_t SCOPE_FIELDS[5] = {WT_UNKNOWN, 2, 2, 2, 0};
static const int8_t SPAN_FIELDS[17] = {WT_UNKNOWN, 2, 2, 2, 2, 2, 0, 1, 1, 2, 0, 2, 0, 2, 0, 2, 5};
static const int8_t STATUS_FIELDS[4] = {WT_UNKNOWN, WT_UNKNOWN, 2, 0};

/* SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK */
#define REMOTE_PARENT_FLAGS 0x300u

/* --- span views ----------------------------------------------------------------------------- */

/* The SpanView slots read_trace_views fills, in this order. */
enum {
    V_SOURCE, V_SOURCE_KIND, V_WIRE_AT, V_TRACE_ID, V_SPAN_ID, V_PARENT, V_NAME, V_REMOTE,
    V_SCOPE_NAME, V_SCOPE_VERSION, V_RESOURCE, V_KIND, V_START, V_END, V_STATUS_CODE,
    V_STATUS_MESSAGE, V_ATTRIBUTES, V_EVENTS, V_COUNT
};
static const char *const VIEW_SLOTS[V_COUNT] = {
    "_source", "_source_kind", "_wire_at", "trace_id", "span_id", "parent_span_id", "name",
    "parent_is_remote", "scope_name", "scope_version", "resource", "_kind", "_start_ns",
    "_end_ns", "_status_code", "_status_message", "_attributes", "_events",
};

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif
#ifndef Py_READONLY
#define Py_READONLY READONLY
#endif

/* The offsets of cls's slots VIEW_SLOTS, from its member descriptors; -1 with TypeError when
 * one is not a writable object slot of cls itself. */
static int
view_offsets(PyTypeObject *cls, Py_ssize_t *offsets)
{
    int i;
    for (i = 0; i < V_COUNT; i++) {
        PyObject *d = PyDict_GetItemString(cls->tp_dict, VIEW_SLOTS[i]);
        PyMemberDef *member;
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "span views: %.100s has no slot %s",
                         cls->tp_name, VIEW_SLOTS[i]);
            return -1;
        }
        member = ((PyMemberDescrObject *)d)->d_member;
        if (member->type != Py_T_OBJECT_EX || (member->flags & Py_READONLY) ||
            member->offset <= 0 || member->offset + (Py_ssize_t)sizeof(PyObject *) >
                                       cls->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "span views: %.100s.%s is not an object slot",
                         cls->tp_name, VIEW_SLOTS[i]);
            return -1;
        }
        offsets[i] = member->offset;
    }
    return 0;
}

/* Store the new reference v in obj's slot at `offset` (a fresh object: the slot is empty). */
static ALWAYS_INLINE void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *v)
{
    *(PyObject **)((char *)obj + offset) = v;
}

#define SPAN_ITEMS 13

/* The view SpanView.from_wire makes of read_trace_spans' tuple f (a new reference), None for a
 * parent id from_wire refuses, NULL with an exception set. */
static PyObject *
view_of(PyTypeObject *cls, const Py_ssize_t *offsets, PyObject *proto, PyObject *data,
        PyObject *f, PyObject *resource, PyObject *scope_name, PyObject *scope_version)
{
    PyObject *view, *wire_at, *parent, *events;
    if (!PyTuple_CheckExact(f) || PyTuple_GET_SIZE(f) != SPAN_ITEMS ||
        !PyUnicode_Check(PyTuple_GET_ITEM(f, 2))) {
        PyErr_SetString(PyExc_TypeError, "span views need read_trace_spans' tuples");
        return NULL;
    }
    parent = PyTuple_GET_ITEM(f, 2);
    if (PyUnicode_GET_LENGTH(parent) != 0 && PyUnicode_GET_LENGTH(parent) != 16) {
        return Py_NewRef(Py_None);
    }
    wire_at = PyTuple_Pack(3, data, PyTuple_GET_ITEM(f, 11), PyTuple_GET_ITEM(f, 12));
    events = PyTuple_GET_ITEM(f, 10) == Py_True ? Py_NewRef(Py_None) : PyList_New(0);
    /* Out of the cycle collector: the tuple holds bytes and ints (as the collector itself
     * would find, later), the list no events; views are held as long as their trace. */
    if (wire_at != NULL) {
        PyObject_GC_UnTrack(wire_at);
    }
    if (events != NULL && events != Py_None) {
        PyObject_GC_UnTrack(events);
    }
    view = wire_at != NULL && events != NULL ? cls->tp_alloc(cls, 0) : NULL;
    if (view == NULL) {
        Py_XDECREF(wire_at);
        Py_XDECREF(events);
        return NULL;
    }
    set_slot(view, offsets[V_SOURCE], Py_NewRef(Py_None));
    set_slot(view, offsets[V_SOURCE_KIND], Py_NewRef(proto));
    set_slot(view, offsets[V_WIRE_AT], wire_at);
    set_slot(view, offsets[V_TRACE_ID], Py_NewRef(PyTuple_GET_ITEM(f, 0)));
    set_slot(view, offsets[V_SPAN_ID], Py_NewRef(PyTuple_GET_ITEM(f, 1)));
    set_slot(view, offsets[V_PARENT], Py_NewRef(parent));
    set_slot(view, offsets[V_NAME], Py_NewRef(PyTuple_GET_ITEM(f, 3)));
    set_slot(view, offsets[V_REMOTE], Py_NewRef(PyTuple_GET_ITEM(f, 7)));
    set_slot(view, offsets[V_SCOPE_NAME], Py_NewRef(scope_name));
    set_slot(view, offsets[V_SCOPE_VERSION], Py_NewRef(scope_version));
    set_slot(view, offsets[V_RESOURCE], Py_NewRef(resource));
    set_slot(view, offsets[V_KIND], Py_NewRef(PyTuple_GET_ITEM(f, 4)));
    set_slot(view, offsets[V_START], Py_NewRef(PyTuple_GET_ITEM(f, 5)));
    set_slot(view, offsets[V_END], Py_NewRef(PyTuple_GET_ITEM(f, 6)));
    set_slot(view, offsets[V_STATUS_CODE], Py_NewRef(PyTuple_GET_ITEM(f, 8)));
    set_slot(view, offsets[V_STATUS_MESSAGE], Py_NewRef(PyTuple_GET_ITEM(f, 9)));
    set_slot(view, offsets[V_ATTRIBUTES], Py_NewRef(Py_None));
    set_slot(view, offsets[V_EVENTS], events);
    return view;
}

/* --- read_trace_spans ----------------------------------------------------------------------- */

typedef struct {
    const uint8_t *base;
    PyObject *scopes;
    PyObject *spans;
    /* the trace id of the previous span and its hex string (a reference): spans of a trace come
     * together, and share one string */
    const uint8_t *last_trace;
    PyObject *last_trace_hex;
    /* views instead of tuples (read_trace_views): SpanView, its slots, the resource views'
     * factory, and the current resource view, scope name and version */
    PyTypeObject *cls;
    Py_ssize_t offsets[V_COUNT];
    PyObject *proto, *data, *factory, *resource, *scope_name, *scope_version;
} reader_t;

/* A str from UTF-8 bytes; *out NULL and ST_UNHANDLED for invalid UTF-8 (upb refuses it). */
static int
utf8_str(const uint8_t *p, size_t len, PyObject **out)
{
    if (len == 0) {
        *out = PyUnicode_New(0, 0);
        return *out != NULL ? ST_OK : ST_ERROR;
    }
    *out = tracehound_decode_utf8((const char *)p, (Py_ssize_t)len);
    if (*out != NULL) {
        return ST_OK;
    }
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return ST_UNHANDLED;
    }
    return ST_ERROR;
}

/* Lowercase hex of n bytes, as bytes.hex() writes it. */
static PyObject *
hex_str(const uint8_t *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    PyObject *s = PyUnicode_New((Py_ssize_t)(2 * n), 127);
    Py_UCS1 *out;
    size_t i;
    if (s == NULL) {
        return NULL;
    }
    out = PyUnicode_1BYTE_DATA(s);
    for (i = 0; i < n; i++) {
        out[2 * i] = (Py_UCS1)digits[p[i] >> 4];
        out[2 * i + 1] = (Py_UCS1)digits[p[i] & 15];
    }
    return s;
}

/* Set item i of tuple t to a new reference `v`; ST_ERROR when v is NULL. */
static ALWAYS_INLINE int
put(PyObject *t, Py_ssize_t i, PyObject *v)
{
    if (v == NULL) {
        return ST_ERROR;
    }
    PyTuple_SET_ITEM(t, i, v);
    return ST_OK;
}

/* Status is all scalars: occurrences merge field by field, the last one winning (as upb). */
static int
read_status(const uint8_t *p, const uint8_t *end, const uint8_t **message, size_t *message_len,
            uint64_t *code)
{
    field_t f = {0};
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(STATUS_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 2) {
            *message = f.ptr;
            *message_len = f.len;
        }
        else if (f.num == 3) {
            *code = f.val;
        }
    }
    return ST_OK;
}

static int fill_span(reader_t *r, PyObject *t, const uint8_t *trace_id, const uint8_t *span_id,
                     const uint8_t *parent, size_t parent_len, const uint8_t *name,
                     size_t name_len, uint64_t kind, uint64_t start_ns, uint64_t end_ns,
                     uint64_t flags, uint64_t code, const uint8_t *message, size_t message_len,
                     int events, const uint8_t *start, const uint8_t *end);

static int
read_span(reader_t *r, const uint8_t *p, const uint8_t *end)
{
    field_t f = {0};
    const uint8_t *start = p;
    const uint8_t *trace_id = NULL, *span_id = NULL, *parent = NULL, *name = NULL;
    const uint8_t *message = NULL;
    size_t trace_len = 0, span_len = 0, parent_len = 0, name_len = 0, message_len = 0;
    uint64_t kind = 0, start_ns = 0, end_ns = 0, flags = 0, code = 0;
    int events = 0, st;
    PyObject *t;

    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(SPAN_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        switch (f.num) {
        case 1:
            trace_id = f.ptr;
            trace_len = f.len;
            break;
        case 2:
            span_id = f.ptr;
            span_len = f.len;
            break;
        case 4:
            parent = f.ptr;
            parent_len = f.len;
            break;
        case 5:
            name = f.ptr;
            name_len = f.len;
            break;
        case 6:
            kind = f.val;
            break;
        case 7:
            start_ns = f.val;
            break;
        case 8:
            end_ns = f.val;
            break;
        case 11:
            events = 1;
            break;
        case 15:
            st = read_status(f.ptr, f.ptr + f.len, &message, &message_len, &code);
            if (st != ST_OK) {
                return st;
            }
            break;
        case 16:
            flags = f.val;
            break;
        default:
            break;
        }
    }
    if (trace_len != 16 || span_len != 8) {
        return ST_UNHANDLED;
    }
    t = PyTuple_New(SPAN_ITEMS);
    if (t == NULL) {
        return ST_ERROR;
    }
    st = fill_span(r, t, trace_id, span_id, parent, parent_len, name, name_len, kind, start_ns,
                   end_ns, flags, code, message, message_len, events, start, end);
    if (st == ST_OK && r->cls != NULL) { /* the view, made from the tuple, replaces it */
        PyObject *view = view_of(r->cls, r->offsets, r->proto, r->data, t, r->resource,
                                 r->scope_name, r->scope_version);
        Py_SETREF(t, view);
        st = t == NULL ? ST_ERROR : ST_OK;
    }
    if (st == ST_OK && PyList_Append(r->spans, t) < 0) {
        st = ST_ERROR;
    }
    Py_XDECREF(t);
    return st;
}

/* The items of read_span's tuple t (new, empty). */
static int
fill_span(reader_t *r, PyObject *t, const uint8_t *trace_id, const uint8_t *span_id,
          const uint8_t *parent, size_t parent_len, const uint8_t *name, size_t name_len,
          uint64_t kind, uint64_t start_ns, uint64_t end_ns, uint64_t flags, uint64_t code,
          const uint8_t *message, size_t message_len, int events, const uint8_t *start,
          const uint8_t *end)
{
    PyObject *s;
    int st;
    if (r->last_trace != NULL && memcmp(r->last_trace, trace_id, 16) == 0) {
        PyTuple_SET_ITEM(t, 0, Py_NewRef(r->last_trace_hex));
    }
    else {
        if (put(t, 0, hex_str(trace_id, 16)) < 0) {
            return ST_ERROR;
        }
        r->last_trace = trace_id;
        Py_XSETREF(r->last_trace_hex, Py_NewRef(PyTuple_GET_ITEM(t, 0)));
    }
    if (put(t, 1, hex_str(span_id, 8)) < 0 || put(t, 2, hex_str(parent, parent_len)) < 0) {
        return ST_ERROR;
    }
    st = utf8_str(name, name_len, &s);
    if (st != ST_OK) {
        return st;
    }
    PyTuple_SET_ITEM(t, 3, s);
    /* enums are int32 (open, proto3): upb keeps the low 32 bits of the varint */
    if (put(t, 4, PyLong_FromLong((long)(int32_t)(uint32_t)kind)) < 0 ||
        put(t, 5, PyLong_FromUnsignedLongLong(start_ns)) < 0 ||
        put(t, 6, PyLong_FromUnsignedLongLong(end_ns)) < 0) {
        return ST_ERROR;
    }
    s = (flags & REMOTE_PARENT_FLAGS) == REMOTE_PARENT_FLAGS ? Py_True : Py_False;
    Py_INCREF(s);
    PyTuple_SET_ITEM(t, 7, s);
    if (put(t, 8, PyLong_FromLong((long)(int32_t)(uint32_t)code)) < 0) {
        return ST_ERROR;
    }
    st = utf8_str(message, message_len, &s);
    if (st != ST_OK) {
        return st;
    }
    PyTuple_SET_ITEM(t, 9, s);
    s = events ? Py_True : Py_False;
    Py_INCREF(s);
    PyTuple_SET_ITEM(t, 10, s);
    if (put(t, 11, PyLong_FromSsize_t((Py_ssize_t)(start - r->base))) < 0 ||
        put(t, 12, PyLong_FromSsize_t((Py_ssize_t)(end - r->base))) < 0) {
        return ST_ERROR;
    }
    return ST_OK;
}

/* The name and version of an InstrumentationScope (the last occurrence of each, as upb). */
static int
read_scope(const uint8_t *p, const uint8_t *end, const uint8_t **name, size_t *name_len,
           const uint8_t **version, size_t *version_len)
{
    field_t f = {0};
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(SCOPE_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            *name = f.ptr;
            *name_len = f.len;
        }
        else if (f.num == 2) {
            *version = f.ptr;
            *version_len = f.len;
        }
    }
    return ST_OK;
}

#define SCOPE_ITEMS 12

/* One ScopeSpans: its spans, then its entry in `scopes` (which ends with their count). */
static int
read_scope_spans(reader_t *r, const uint8_t *p, const uint8_t *end, Py_ssize_t resource_index,
                 const uint8_t *resource, size_t resource_len, PyObject *resource_schema)
{
    field_t f = {0};
    const uint8_t *q = p, *scope = NULL, *name = NULL, *version = NULL, *schema = NULL;
    size_t scope_len = 0, name_len = 0, version_len = 0, schema_len = 0;
    Py_ssize_t first = PyList_GET_SIZE(r->spans);
    int scope_count = 0, st;
    PyObject *t, *s, *scope_name, *scope_version;

    while (q < end) { /* the scope and schema URL may come after the spans */
        q = read_field(q, end, &f);
        if (q == NULL || WRONG_WT(SCOPE_SPANS_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            scope = f.ptr;
            scope_len = f.len;
            scope_count++;
        }
        else if (f.num == 3) {
            schema = f.ptr;
            schema_len = f.len;
        }
    }
    if (scope_count > 1) {
        return ST_UNHANDLED; /* upb merges the two */
    }
    if (scope != NULL) {
        st = read_scope(scope, scope + scope_len, &name, &name_len, &version, &version_len);
        if (st != ST_OK) {
            return st;
        }
    }
    st = utf8_str(name, name_len, &scope_name);
    if (st != ST_OK) {
        return st;
    }
    st = utf8_str(version, version_len, &scope_version);
    if (st != ST_OK) {
        Py_DECREF(scope_name);
        return st;
    }
    r->scope_name = scope_name; /* for the views */
    r->scope_version = scope_version;
    q = p;
    while (st == ST_OK && q < end) {
        q = read_field(q, end, &f);
        if (f.num == 2) {
            st = read_span(r, f.ptr, f.ptr + f.len);
        }
    }
    t = st == ST_OK ? PyTuple_New(SCOPE_ITEMS) : NULL;
    if (t == NULL) {
        Py_DECREF(scope_name);
        Py_DECREF(scope_version);
        return st == ST_OK ? ST_ERROR : st;
    }
    PyTuple_SET_ITEM(t, 6, scope_name);
    PyTuple_SET_ITEM(t, 7, scope_version);
    if (PyList_Append(r->scopes, t) < 0) {
        Py_DECREF(t);
        return ST_ERROR;
    }
    Py_DECREF(t);
    if (put(t, 0, PyLong_FromSsize_t(resource_index)) < 0 ||
        put(t, 1, PyLong_FromSsize_t(resource ? (Py_ssize_t)(resource - r->base) : 0)) < 0 ||
        put(t, 2, PyLong_FromSsize_t(resource ? (Py_ssize_t)(resource + resource_len - r->base)
                                              : 0)) < 0) {
        return ST_ERROR;
    }
    Py_INCREF(resource_schema);
    PyTuple_SET_ITEM(t, 3, resource_schema);
    if (put(t, 4, PyLong_FromSsize_t(scope ? (Py_ssize_t)(scope - r->base) : 0)) < 0 ||
        put(t, 5, PyLong_FromSsize_t(scope ? (Py_ssize_t)(scope + scope_len - r->base) : 0)) < 0) {
        return ST_ERROR;
    }
    st = utf8_str(schema, schema_len, &s);
    if (st != ST_OK) {
        return st;
    }
    PyTuple_SET_ITEM(t, 8, s);
    if (put(t, 9, PyLong_FromSsize_t(PyList_GET_SIZE(r->spans) - first)) < 0 ||
        put(t, 10, PyLong_FromSsize_t((Py_ssize_t)(p - r->base))) < 0 ||
        put(t, 11, PyLong_FromSsize_t((Py_ssize_t)(end - r->base))) < 0) {
        return ST_ERROR;
    }
    return ST_OK;
}

static int
read_resource_spans(reader_t *r, const uint8_t *p, const uint8_t *end, Py_ssize_t index)
{
    field_t f = {0};
    const uint8_t *q = p, *resource = NULL, *schema = NULL;
    size_t resource_len = 0, schema_len = 0;
    int resource_count = 0, st;
    PyObject *schema_url;

    while (q < end) {
        q = read_field(q, end, &f);
        if (q == NULL || WRONG_WT(RESOURCE_SPANS_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            resource = f.ptr;
            resource_len = f.len;
            resource_count++;
        }
        else if (f.num == 3) {
            schema = f.ptr;
            schema_len = f.len;
        }
    }
    if (resource_count > 1) {
        return ST_UNHANDLED;
    }
    st = utf8_str(schema, schema_len, &schema_url);
    if (st != ST_OK) {
        return st;
    }
    if (r->factory != NULL) { /* the resource's view, shared by its spans' views */
        Py_ssize_t a = resource ? (Py_ssize_t)(resource - r->base) : 0;
        Py_ssize_t b = resource ? (Py_ssize_t)(resource + resource_len - r->base) : 0;
        PyObject *args[3] = {r->data, NULL, NULL};
        args[1] = PyLong_FromSsize_t(a);
        args[2] = PyLong_FromSsize_t(b);
        r->resource = args[1] != NULL && args[2] != NULL
                          ? PyObject_Vectorcall(r->factory, args, 3, NULL)
                          : NULL;
        Py_XDECREF(args[1]);
        Py_XDECREF(args[2]);
        if (r->resource == NULL) {
            Py_DECREF(schema_url);
            return ST_ERROR;
        }
    }
    q = p;
    while (q < end) {
        q = read_field(q, end, &f);
        if (f.num == 2) {
            st = read_scope_spans(r, f.ptr, f.ptr + f.len, index, resource, resource_len,
                                  schema_url);
            if (st != ST_OK) {
                break;
            }
        }
    }
    Py_DECREF(schema_url);
    Py_CLEAR(r->resource);
    return st;
}

PyDoc_STRVAR(read_trace_spans_doc,
"read_trace_spans($module, data, /)\n"
"--\n"
"\n"
"Read a serialized ExportTraceServiceRequest for the sidecar: (scopes, spans).\n"
"\n"
"`spans` has one tuple per span, in order: (trace_id, span_id, parent_span_id as lowercase\n"
"hex, name, kind, start_time_unix_nano, end_time_unix_nano, parent_is_remote (both remote\n"
"flags set), status code, status message, has_events, start, end) — start and end bound the\n"
"Span message in `data`. `scopes` has one tuple per ScopeSpans, in order: (resource_index,\n"
"resource_start, resource_end, resource_schema_url, scope_start, scope_end, scope_name,\n"
"scope_version, scope_schema_url, span_count, scope_spans_start, scope_spans_end); an absent\n"
"resource or scope has the range (0, 0). Fields are read as upb reads them (the last\n"
"occurrence wins; enums keep the low 32 bits).\n"
"\n"
"Returns None for bytes it does not read exactly as upb: malformed wire data, a known field\n"
"with another wire type, invalid UTF-8 in a string it decodes, trace or span ids of other\n"
"sizes than 16 and 8 bytes, a resource or scope occurring twice in its message. Raises\n"
"TypeError for a non-bytes-like `data`.");

static PyObject *
read_request(PyObject *data, PyTypeObject *cls, PyObject *factory)
{
    Py_buffer view;
    reader_t r;
    field_t f = {0};
    const uint8_t *p, *end;
    Py_ssize_t index = 0;
    int st = ST_OK;
    PyObject *result;

    memset(&r, 0, sizeof(r));
    if (cls != NULL) {
        if (view_offsets(cls, r.offsets) < 0) {
            return NULL;
        }
        r.proto = PyUnicode_InternFromString("proto");
        if (r.proto == NULL) {
            return NULL;
        }
    }
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        Py_XDECREF(r.proto);
        return NULL;
    }
    r.base = (const uint8_t *)view.buf;
    r.cls = cls;
    r.data = data;
    r.factory = factory;
    r.scopes = PyList_New(0);
    r.spans = PyList_New(0);
    if (r.scopes == NULL || r.spans == NULL) {
        st = ST_ERROR;
    }
    p = r.base;
    end = p + view.len;
    while (st == ST_OK && p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(REQUEST_FIELDS, f)) {
            st = ST_UNHANDLED;
        }
        else if (f.num == 1) {
            st = read_resource_spans(&r, f.ptr, f.ptr + f.len, index++);
        }
    }
    PyBuffer_Release(&view);
    if (st == ST_OK) {
        result = PyTuple_Pack(2, r.scopes, r.spans);
    }
    else {
        result = st == ST_ERROR ? NULL : Py_NewRef(Py_None);
    }
    Py_XDECREF(r.scopes);
    Py_XDECREF(r.spans);
    Py_XDECREF(r.last_trace_hex);
    Py_XDECREF(r.proto);
    return result;
}

static PyObject *
read_trace_spans(PyObject *module, PyObject *data)
{
    (void)module;
    return read_request(data, NULL, NULL);
}

PyDoc_STRVAR(read_trace_views_doc,
"read_trace_views($module, data, cls, resource_view, /)\n"
"--\n"
"\n"
"read_trace_spans(data) with views in place of the span tuples: (scopes, views), each view\n"
"what cls.from_wire(data, tuple, resource, scope_name, scope_version) makes of the span's tuple\n"
"(None where it refuses one: a parent id neither empty nor 8 bytes), `resource` being\n"
"resource_view(data, start, end) of the span's resource, called once per ResourceSpans, and\n"
"the scope name and version its scope's. None where read_trace_spans is None. Raises\n"
"TypeError when `cls` lacks one of the slots from_wire fills, and what resource_view raises.");

static PyObject *
read_trace_views(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "read_trace_views() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyType_Check(args[1]) || !PyCallable_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "read_trace_views() needs a class and a callable");
        return NULL;
    }
    return read_request(args[0], (PyTypeObject *)args[1], args[2]);
}

/* --- splice_trace_request ------------------------------------------------------------------- */

typedef struct {
    const uint8_t *base;
    PyObject *edits;     /* list: per span None (cut), bytes (appended) or (bytes,) (replaced) */
    Py_ssize_t span;     /* the next span's index */
    size_t *sizes;       /* new payload sizes of the kept ScopeSpans and ResourceSpans, in the
                          * order the measuring pass finishes them; 0 for a dropped one */
    size_t n_sizes, cap, next;
    uint8_t *out;        /* the writing pass: where the next byte goes */
    uint8_t *out_end;    /* the end of the buffer the measuring pass sized */
} splice_t;

static size_t
varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *
write_varint(uint8_t *o, uint64_t v)
{
    while (v >= 0x80) {
        *o++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *o++ = (uint8_t)v;
    return o;
}

/* The writing pass checks its own bounds rather than trusting the measuring pass: a write that
 * would not fit (the two passes disagreeing) makes the whole call unhandled. */
static ALWAYS_INLINE int
splice_put(splice_t *s, const void *data, size_t n)
{
    if ((size_t)(s->out_end - s->out) < n) {
        return ST_UNHANDLED;
    }
    memcpy(s->out, data, n);
    s->out += n;
    return ST_OK;
}

/* A length-delimited field's tag and length. */
static int
splice_put_header(splice_t *s, uint8_t tag, uint64_t len)
{
    uint8_t head[11];
    uint8_t *o = head;
    *o++ = tag;
    o = write_varint(o, len);
    return splice_put(s, head, (size_t)(o - head));
}

/* The size the measuring pass recorded for the next message the writing pass reaches. */
static int
splice_next_size(splice_t *s, size_t *size)
{
    if (s->next >= s->n_sizes) {
        return ST_UNHANDLED;
    }
    *size = s->sizes[s->next++];
    return ST_OK;
}

static int
push_size(splice_t *s, size_t size)
{
    if (s->n_sizes == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        size_t *grown = PyMem_Realloc(s->sizes, cap * sizeof(size_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        s->sizes = grown;
        s->cap = cap;
    }
    s->sizes[s->n_sizes++] = size;
    return ST_OK;
}

/* The next span's edit: *kind 0 cut, 1 keep (maybe appending *extra), 2 replace by *extra. */
static int
next_edit(splice_t *s, int *kind, const uint8_t **extra, size_t *extra_len)
{
    PyObject *edit;
    if (s->span >= PyList_GET_SIZE(s->edits)) {
        PyErr_SetString(PyExc_ValueError,
                        "splice_trace_request(): fewer edits than spans in the request");
        return ST_ERROR;
    }
    edit = PyList_GET_ITEM(s->edits, s->span);
    s->span++;
    if (edit == Py_None) {
        *kind = 0;
        return ST_OK;
    }
    *kind = 1;
    if (PyTuple_Check(edit) && PyTuple_GET_SIZE(edit) == 1) {
        *kind = 2;
        edit = PyTuple_GET_ITEM(edit, 0);
    }
    if (!PyBytes_Check(edit)) {
        PyErr_Format(PyExc_TypeError,
                     "splice_trace_request(): an edit must be None, bytes or a 1-tuple of "
                     "bytes, not %.100s", Py_TYPE(edit)->tp_name);
        return ST_ERROR;
    }
    *extra = (const uint8_t *)PyBytes_AS_STRING(edit);
    *extra_len = (size_t)PyBytes_GET_SIZE(edit);
    return ST_OK;
}

/*
 * One ScopeSpans [p, end). Measuring (s->out NULL): its new payload size into *measured and
 * pushed on s->sizes (0 when no span is left: dropped). Writing: from the size measured before,
 * its tag, length and payload, or nothing when it is dropped (its spans' edits are consumed).
 */
static int
splice_scope_spans(splice_t *s, const uint8_t *p, const uint8_t *end, int *kept,
                   size_t *measured)
{
    field_t f = {0};
    const uint8_t *at, *extra = NULL;
    size_t size = 0, extra_len = 0;
    Py_ssize_t spans = 0;
    int kind, writing = s->out != NULL;

    *kept = 1;
    if (writing) {
        if (splice_next_size(s, &size) != ST_OK) {
            return ST_UNHANDLED;
        }
        *kept = size != 0;
        if (*kept && splice_put_header(s, 0x12, size) != ST_OK) {
            return ST_UNHANDLED;
        }
    }
    while (p < end) {
        at = p;
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(SCOPE_SPANS_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num != 2) {
            if (!writing) {
                size += (size_t)(p - at);
            }
            else if (*kept && splice_put(s, at, (size_t)(p - at)) != ST_OK) {
                return ST_UNHANDLED;
            }
            continue;
        }
        if (next_edit(s, &kind, &extra, &extra_len) < 0) {
            return ST_ERROR;
        }
        if (kind == 0) {
            continue;
        }
        spans++;
        if (!writing) {
            if (kind == 2) {
                size += 1 + varint_size(extra_len) + extra_len;
            }
            else if (extra_len == 0) {
                size += (size_t)(p - at);
            }
            else {
                size += 1 + varint_size(f.len + extra_len) + f.len + extra_len;
            }
        }
        else if (!*kept) {
            continue;
        }
        else if (kind == 2) {
            if (splice_put_header(s, 0x12, extra_len) != ST_OK || splice_put(s, extra, extra_len) != ST_OK) {
                return ST_UNHANDLED;
            }
        }
        else if (extra_len == 0) {
            if (splice_put(s, at, (size_t)(p - at)) != ST_OK) {
                return ST_UNHANDLED;
            }
        }
        else if (splice_put_header(s, 0x12, f.len + extra_len) != ST_OK ||
                 splice_put(s, f.ptr, f.len) != ST_OK || splice_put(s, extra, extra_len) != ST_OK) {
            return ST_UNHANDLED;
        }
    }
    if (!writing) {
        /* a kept ScopeSpans holds a span's tag at least: its size is never 0 */
        *kept = spans > 0;
        *measured = *kept ? size : 0;
        return push_size(s, *measured);
    }
    return ST_OK;
}

/* One ResourceSpans, as splice_scope_spans does a ScopeSpans: its size comes before its
 * scopes' sizes on s->sizes (the writing order), 0 when none of its scopes is kept. */
static int
splice_resource_spans(splice_t *s, const uint8_t *p, const uint8_t *end, int *kept,
                      size_t *measured)
{
    field_t f = {0};
    const uint8_t *at;
    size_t size = 0, slot = 0, scope_size = 0;
    Py_ssize_t scopes = 0;
    int scope_kept, st, writing = s->out != NULL;

    *kept = 1;
    if (writing) {
        if (splice_next_size(s, &size) != ST_OK) {
            return ST_UNHANDLED;
        }
        *kept = size != 0;
        if (*kept && splice_put_header(s, 0x0a, size) != ST_OK) {
            return ST_UNHANDLED;
        }
    }
    else {
        slot = s->n_sizes;
        if (push_size(s, 0) < 0) {
            return ST_ERROR;
        }
    }
    while (p < end) {
        at = p;
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(RESOURCE_SPANS_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num != 2) {
            if (!writing) {
                size += (size_t)(p - at);
            }
            else if (*kept && splice_put(s, at, (size_t)(p - at)) != ST_OK) {
                return ST_UNHANDLED;
            }
            continue;
        }
        /* writing a dropped resource: its scopes were all dropped, and write nothing */
        st = splice_scope_spans(s, f.ptr, f.ptr + f.len, &scope_kept, &scope_size);
        if (st != ST_OK) {
            return st;
        }
        if (!writing && scope_kept) {
            scopes++;
            size += 1 + varint_size(scope_size) + scope_size;
        }
    }
    if (!writing) {
        *kept = scopes > 0;
        *measured = *kept ? size : 0;
        s->sizes[slot] = *measured;
    }
    return ST_OK;
}

/* Measure (s->out NULL: the new request's size into *size) or write the whole request. */
static int
splice_request(splice_t *s, const uint8_t *p, const uint8_t *end, size_t *size)
{
    field_t f = {0};
    const uint8_t *at;
    size_t resource_size = 0;
    int kept, st;

    *size = 0;
    s->span = 0;
    s->next = 0;
    while (p < end) {
        at = p;
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(REQUEST_FIELDS, f)) {
            return ST_UNHANDLED;
        }
        if (f.num != 1) {
            if (s->out == NULL) {
                *size += (size_t)(p - at);
            }
            else if (splice_put(s, at, (size_t)(p - at)) != ST_OK) {
                return ST_UNHANDLED;
            }
            continue;
        }
        st = splice_resource_spans(s, f.ptr, f.ptr + f.len, &kept, &resource_size);
        if (st != ST_OK) {
            return st;
        }
        if (kept && s->out == NULL) {
            *size += 1 + varint_size(resource_size) + resource_size;
        }
    }
    return ST_OK;
}

PyDoc_STRVAR(splice_trace_request_doc,
"splice_trace_request($module, data, edits, /)\n"
"--\n"
"\n"
"The serialized ExportTraceServiceRequest `data` after edits of its spans, written from its\n"
"bytes. `edits` has one item per span, in order: None cuts the span out, bytes are appended to\n"
"the Span message (b'' keeps it as is), a 1-tuple (bytes,) replaces the Span message. The\n"
"lengths of the enclosing ScopeSpans and ResourceSpans are rewritten; ScopeSpans left without\n"
"spans and ResourceSpans left without ScopeSpans are dropped; every other field is copied as\n"
"received. Parsed, the result equals what upb serializes after the same edits.\n"
"\n"
"Returns None for malformed wire data or a known field of the request, a ResourceSpans or a\n"
"ScopeSpans with another wire type. Raises TypeError for a non-bytes-like `data`, a non-list\n"
"`edits` or an edit of another type, and ValueError when `edits` does not have one item per\n"
"span.");

static PyObject *
splice_trace_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    splice_t s;
    const uint8_t *p, *end;
    size_t size = 0;
    int st;
    PyObject *result = NULL;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "splice_trace_request() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyList_Check(args[1])) {
        PyErr_Format(PyExc_TypeError,
                     "splice_trace_request() argument 'edits' must be a list, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    memset(&s, 0, sizeof(s));
    s.base = (const uint8_t *)view.buf;
    s.edits = args[1];
    p = s.base;
    end = p + view.len;
    st = splice_request(&s, p, end, &size);
    if (st == ST_OK && s.span != PyList_GET_SIZE(s.edits)) {
        PyErr_SetString(PyExc_ValueError,
                        "splice_trace_request(): more edits than spans in the request");
        st = ST_ERROR;
    }
    if (st == ST_OK && size > (size_t)PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        st = ST_ERROR;
    }
    if (st == ST_OK) {
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
        if (result == NULL) {
            st = ST_ERROR;
        }
        else {
            s.out = (uint8_t *)PyBytes_AS_STRING(result);
            s.out_end = s.out + size;
            st = splice_request(&s, p, end, &size);
            if (st == ST_OK && s.out != s.out_end) { /* wrote less than measured */
                st = ST_UNHANDLED;
            }
        }
    }
    PyBuffer_Release(&view);
    PyMem_Free(s.sizes);
    if (st == ST_UNHANDLED) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    if (st == ST_ERROR) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

static PyMethodDef otlp_methods[] = {
    {"read_trace_spans", read_trace_spans, METH_O, read_trace_spans_doc},
    {"splice_trace_request", (PyCFunction)(void (*)(void))splice_trace_request, METH_FASTCALL,
     splice_trace_request_doc},
    {"read_trace_views", (PyCFunction)(void (*)(void))read_trace_views, METH_FASTCALL,
     read_trace_views_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_otlp(PyObject *module)
{
    return PyModule_AddFunctions(module, otlp_methods);
}
