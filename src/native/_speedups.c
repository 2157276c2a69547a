/*
 * tracehound._speedups: C kernels beside tracehound's Python code. This file holds the OTLP
 * protobuf paths (attribute decoding, the scan of a trace request, writing attributes and log
 * records), the typographic table given by configure() and the module definition; the
 * sidecar's work on trace requests kept as bytes (_speedups_otlp.c, sharing the wire reader of
 * _speedups_wire.h) and the evaluators' kernels are in files of their own (_speedups_embed.c,
 * _speedups_evidence.c), which add their functions to the module through _speedups.h.
 *
 * Reading attributes through upb (google.protobuf's C backend) creates a Python wrapper object
 * per KeyValue and per AnyValue, about 0.35 us per attribute key. The functions here read the
 * protobuf wire bytes directly instead.
 *
 * The Python code stays the reference (tracehound.spans._proto_attributes and
 * decode_any_value_proto). Each function returns exactly what the Python/upb path returns, or
 * None when the input holds anything it does not handle exactly: malformed wire data, groups,
 * field number 0, a known field with an unexpected wire type, invalid UTF-8 in a decoded string,
 * or, in decode_key_values, protobuf merge semantics (a KeyValue's key or value, or an AnyValue
 * member, occurring twice: upb would keep the last one or merge sub-messages). The caller then
 * falls back to the Python/upb path. scan_trace_request reads only bytes and strings it compares
 * (ids, keys, event names) and, as upb does, takes the last occurrence of each. With its
 * `validate` argument it walks the whole request instead and answers only for bytes upb parses
 * (see "the validating scan" below): the caller may then pass the bytes on unparsed.
 *
 * Nothing here raises for any bytes input; only bad arguments raise (TypeError / ValueError),
 * and a failed allocation raises MemoryError. The GIL is held throughout (the input may be a
 * mutable buffer such as a bytearray).
 *
 * C99, ordinary CPython API only, Python 3.10+. With GCC or Clang, a bit-scan builtin and, on
 * x86-64, SSE2 intrinsics speed up the UTF-8 check; other compilers get the portable code.
 */

#include "_speedups.h"

#include <stdint.h>
#include <string.h>

/* Same as tracehound.spans.MAX_VALUE_DEPTH. */
#define MAX_VALUE_DEPTH 32
/* Hard bound on C recursion (decode_any_value nests at most MAX_VALUE_DEPTH + 1 levels). */
#define MAX_C_DEPTH 40
/* The largest protobuf field number. */
#define MAX_FIELD_NUMBER ((1 << 29) - 1)

#include "_speedups_wire.h"

/* --- decode_key_values ---------------------------------------------------------------------- */

/* AnyValue: 1 string, 2 bool, 3 int64, 4 double, 5 array, 6 kvlist, 7 bytes,
 * 8 string_value_strindex (int32); all members of the oneof `value`. */
static const int8_t ANY_VALUE_WT[9] = {WT_UNKNOWN, 2, 0, 0, 1, 2, 2, 2, 0};
/* KeyValue: 1 key, 2 value, 3 key_strindex (int32). */
static const int8_t KEY_VALUE_WT[4] = {WT_UNKNOWN, 2, 2, 0};

/* Attribute keys decoded before, by their bytes: the same few keys come with every span
 * (`gen_ai.operation.name`, `http.route`), so decoding one gives the string made for it before,
 * whose hash (cached in it by the first dict that held it) is not computed again. Direct-mapped
 * by a multiplicative hash of the bytes, 8 at a time; ASCII keys of up to KEY_CACHE_MAX_LEN
 * bytes only. */
#define KEY_CACHE_SIZE 512 /* a power of 2 */
#define KEY_CACHE_MAX_LEN 64
typedef struct {
    PyObject *slot[KEY_CACHE_SIZE]; /* ASCII strings (1-byte kind), or NULL */
} key_cache;

static int decode_key_value(key_cache *keys, const uint8_t *p, const uint8_t *end, int depth,
                            PyObject *dict);

/* Strict UTF-8; invalid UTF-8 is "unhandled" (upb would have refused the message). */
static int
decode_str(const uint8_t *p, size_t len, PyObject **out)
{
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

/* decode_str for a key: the cached string when the same ASCII key was decoded before. */
static int
decode_key(key_cache *keys, const uint8_t *p, size_t len, PyObject **out)
{
    uint64_t hash = 0x9e3779b97f4a7c15ULL ^ len, high = 0, word;
    size_t i;
    PyObject **slot, *key;

    if (keys == NULL || len == 0 || len > KEY_CACHE_MAX_LEN) {
        return decode_str(p, len, out);
    }
    for (i = 0; i < len; i += 8) { /* a word at a time, the last one zero-padded */
        word = 0;
        memcpy(&word, p + i, len - i < 8 ? len - i : 8);
        high |= word;
        hash = (hash ^ word) * 0xff51afd7ed558ccdULL;
        hash ^= hash >> 32;
    }
    if (high & 0x8080808080808080ULL) {
        return decode_str(p, len, out);
    }
    slot = &keys->slot[(hash ^ (hash >> 17)) & (KEY_CACHE_SIZE - 1)];
    key = *slot;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == (Py_ssize_t)len &&
        memcmp(PyUnicode_1BYTE_DATA(key), p, len) == 0) {
        Py_INCREF(key);
        *out = key;
        return ST_OK;
    }
    key = PyUnicode_New((Py_ssize_t)len, 127);
    if (key == NULL) {
        return ST_ERROR;
    }
    memcpy(PyUnicode_1BYTE_DATA(key), p, len);
    if (PyObject_Hash(key) == -1) { /* cached in the string from now on */
        Py_DECREF(key);
        return ST_ERROR;
    }
    Py_INCREF(key);
    Py_XDECREF(*slot);
    *slot = key;
    *out = key;
    return ST_OK;
}

/* decode_any_value_proto(value, depth) for the AnyValue message in [p, end). */
static int
decode_any_value(key_cache *keys, const uint8_t *p, const uint8_t *end, int depth,
                 PyObject **out)
{
    field_t f, member;
    int have = 0, st;

    *out = NULL;
    if (depth > MAX_C_DEPTH) {
        /* Never true: arrays and kvlists at MAX_VALUE_DEPTH are None, not walked. Kept as the
         * explicit bound on C recursion. */
        return ST_UNHANDLED;
    }
    memset(&member, 0, sizeof(member));
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL) {
            return ST_UNHANDLED;
        }
        /* Every field of AnyValue is a member of the oneof; a field unknown to this code may be
         * a member in a newer schema, so it is not skipped. A second member (or the same one
         * twice) would need upb's "last one wins" / merge semantics. */
        if (f.num >= sizeof(ANY_VALUE_WT) || ANY_VALUE_WT[f.num] != (int8_t)f.wt || have) {
            return ST_UNHANDLED;
        }
        member = f;
        have = 1;
    }
    if (!have) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return ST_OK;
    }
    switch (member.num) {
    case 1: /* string_value, "" included */
        return decode_str(member.ptr, member.len, out);
    case 2: /* bool_value */
        *out = PyBool_FromLong(member.val != 0);
        return ST_OK;
    case 3: { /* int_value: two's complement int64 */
        int64_t v;
        memcpy(&v, &member.val, sizeof(v));
        *out = PyLong_FromLongLong((long long)v);
        return *out != NULL ? ST_OK : ST_ERROR;
    }
    case 4: { /* double_value: little-endian IEEE 754 */
        double d;
        memcpy(&d, &member.val, sizeof(d));
        *out = PyFloat_FromDouble(d);
        return *out != NULL ? ST_OK : ST_ERROR;
    }
    case 8: /* string_value_strindex: the Python reference returns None */
        Py_INCREF(Py_None);
        *out = Py_None;
        return ST_OK;
    default:
        break;
    }
    if (depth >= MAX_VALUE_DEPTH) { /* array, kvlist and bytes values this deep are None */
        Py_INCREF(Py_None);
        *out = Py_None;
        return ST_OK;
    }
    p = member.ptr;
    end = member.ptr + member.len;
    if (member.num == 7) { /* bytes_value */
        *out = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)member.len);
        return *out != NULL ? ST_OK : ST_ERROR;
    }
    if (member.num == 5) { /* array_value: ArrayValue { repeated AnyValue values = 1; } */
        PyObject *list = PyList_New(0);
        if (list == NULL) {
            return ST_ERROR;
        }
        while (p < end) {
            PyObject *item;
            p = read_field(p, end, &f);
            if (p == NULL || (f.num == 1 && f.wt != 2)) {
                Py_DECREF(list);
                return ST_UNHANDLED;
            }
            if (f.num != 1) {
                continue; /* unknown field, already skipped */
            }
            st = decode_any_value(keys, f.ptr, f.ptr + f.len, depth + 1, &item);
            if (st != ST_OK) {
                Py_DECREF(list);
                return st;
            }
            st = PyList_Append(list, item);
            Py_DECREF(item);
            if (st < 0) {
                Py_DECREF(list);
                return ST_ERROR;
            }
        }
        *out = list;
        return ST_OK;
    }
    /* member.num == 6, kvlist_value: KeyValueList { repeated KeyValue values = 1; } */
    {
        PyObject *dict = PyDict_New();
        if (dict == NULL) {
            return ST_ERROR;
        }
        while (p < end) {
            p = read_field(p, end, &f);
            if (p == NULL || (f.num == 1 && f.wt != 2)) {
                Py_DECREF(dict);
                return ST_UNHANDLED;
            }
            if (f.num != 1) {
                continue;
            }
            st = decode_key_value(keys, f.ptr, f.ptr + f.len, depth + 1, dict);
            if (st != ST_OK) {
                Py_DECREF(dict);
                return st;
            }
        }
        *out = dict;
        return ST_OK;
    }
}

/* dict[kv.key] = decode_any_value_proto(kv.value, depth) for the KeyValue in [p, end). */
static int
decode_key_value(key_cache *keys, const uint8_t *p, const uint8_t *end, int depth,
                 PyObject *dict)
{
    field_t f, key, value;
    int have_key = 0, have_value = 0, st;
    PyObject *k, *v;

    key.ptr = value.ptr = NULL;
    key.len = value.len = 0;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(KEY_VALUE_WT, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            if (have_key) {
                return ST_UNHANDLED; /* upb keeps the last key */
            }
            key = f;
            have_key = 1;
        }
        else if (f.num == 2) {
            if (have_value) {
                return ST_UNHANDLED; /* upb merges the two AnyValue messages */
            }
            value = f;
            have_value = 1;
        }
    }
    if (have_value) {
        st = decode_any_value(keys, value.ptr, value.ptr + value.len, depth, &v);
        if (st != ST_OK) {
            return st;
        }
    }
    else {
        Py_INCREF(Py_None);
        v = Py_None;
    }
    /* A missing key is "" (decode_str of an empty range gives the empty string too). */
    st = decode_key(keys, key.ptr != NULL ? key.ptr : (const uint8_t *)"", key.len, &k);
    if (st != ST_OK) {
        Py_DECREF(v);
        return st;
    }
    st = PyDict_SetItem(dict, k, v);
    Py_DECREF(k);
    Py_DECREF(v);
    return st < 0 ? ST_ERROR : ST_OK;
}

static key_cache *module_keys(PyObject *module);

/* Get a C-contiguous byte buffer, like the "y*" format unit (TypeError otherwise). */
static int
get_bytes_buffer(PyObject *obj, Py_buffer *view, const char *fname)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s() argument 'data' must be a contiguous bytes-like object, not %.100s",
                         fname, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    if (!PyBuffer_IsContiguous(view, 'C')) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError,
                     "%s() argument 'data' must be a contiguous bytes-like object", fname);
        return -1;
    }
    return 0;
}

/* An integer argument (anything with __index__); TypeError otherwise. Clamped on overflow. */
static int
get_index(PyObject *obj, Py_ssize_t *out)
{
    if (!PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an integer is required, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyNumber_AsSsize_t(obj, NULL);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

PyDoc_STRVAR(decode_key_values_doc,
"decode_key_values($module, data, start, end, field, /)\n"
"--\n"
"\n"
"Decode the repeated KeyValue field `field` of the protobuf message in data[start:end].\n"
"\n"
"Returns the dict tracehound.spans._proto_attributes() makes from the upb-parsed message\n"
"(same keys, key order, values and value types), read straight off the wire bytes to skip\n"
"upb's per-field wrapper objects. `field` is 9 for Span attributes, 1 for Resource, 3 for\n"
"InstrumentationScope and Span.Event, 4 for Span.Link.\n"
"\n"
"Returns None for input it does not decode exactly: malformed wire data, groups, a known\n"
"field with an unexpected wire type, invalid UTF-8, a KeyValue with two keys or two values,\n"
"an AnyValue with more than one oneof member or an unknown field. The caller then uses the\n"
"Python/upb path. Raises TypeError for a non-bytes-like `data` or non-integer offsets, and\n"
"ValueError unless 0 <= start <= end <= len(data) and 1 <= field <= 2**29 - 1.");

static PyObject *
decode_key_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, stop, field;
    const uint8_t *p, *end;
    PyObject *dict;
    field_t f;
    int st = ST_OK;
    key_cache *keys = module_keys(module);

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError,
                     "decode_key_values() takes exactly 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (get_index(args[1], &start) < 0 || get_index(args[2], &stop) < 0 ||
        get_index(args[3], &field) < 0) {
        return NULL;
    }
    if (field < 1 || field > MAX_FIELD_NUMBER) {
        PyErr_SetString(PyExc_ValueError, "decode_key_values(): field must be in 1..2**29-1");
        return NULL;
    }
    if (get_bytes_buffer(args[0], &view, "decode_key_values") < 0) {
        return NULL;
    }
    if (start < 0 || start > stop || stop > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError,
                        "decode_key_values(): need 0 <= start <= end <= len(data)");
        return NULL;
    }
    dict = PyDict_New();
    if (dict == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    p = (const uint8_t *)view.buf + start;
    end = (const uint8_t *)view.buf + stop;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL) {
            st = ST_UNHANDLED;
            break;
        }
        if (f.num != (uint32_t)field) {
            continue; /* another field of the message, already skipped */
        }
        if (f.wt != 2) {
            st = ST_UNHANDLED;
            break;
        }
        st = decode_key_value(keys, f.ptr, f.ptr + f.len, 0, dict);
        if (st != ST_OK) {
            break;
        }
    }
    PyBuffer_Release(&view);
    if (st == ST_OK) {
        return dict;
    }
    Py_DECREF(dict);
    if (st == ST_ERROR) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* --- scan_trace_request --------------------------------------------------------------------- */

typedef struct {
    const uint8_t *trace_id; /* 16 bytes */
    const uint8_t *span_id;  /* 8 bytes */
    size_t start, end;       /* the Span payload, as offsets into the buffer */
} span_rec_t;

typedef struct {
    const uint8_t *base;
    int genai;
    /* prefixes */
    Py_ssize_t n_prefixes;
    const uint8_t **prefix;
    size_t *prefix_len;
    int empty_prefix;       /* b"" is a prefix: every key matches */
    uint8_t first[32];      /* bit set of the prefixes' first bytes */
    const uint8_t *event_name;
    size_t event_name_len;
    /* output */
    span_rec_t *spans;
    size_t n_spans, cap;
} scan_t;

/* Wire types of the known fields of each message (field numbers from opentelemetry-proto). */
static const int8_t REQUEST_WT[2] = {WT_UNKNOWN, 2};
static const int8_t RESOURCE_SPANS_WT[4] = {WT_UNKNOWN, 2, 2, 2};
static const int8_t RESOURCE_WT[4] = {WT_UNKNOWN, 2, 0, 2};
static const int8_t SCOPE_SPANS_WT[4] = {WT_UNKNOWN, 2, 2, 2};
static const int8_t SCOPE_WT[5] = {WT_UNKNOWN, 2, 2, 2, 0};
static const int8_t SPAN_WT[17] = {WT_UNKNOWN, 2, 2, 2, 2, 2, 0, 1, 1, 2, 0, 2, 0, 2, 0, 2, 5};
static const int8_t EVENT_WT[5] = {WT_UNKNOWN, 1, 2, 2, 0};
static const int8_t LINK_WT[7] = {WT_UNKNOWN, 2, 2, 2, 2, 0, 5};

static ALWAYS_INLINE void
check_key(scan_t *s, const uint8_t *key, size_t len)
{
    Py_ssize_t i;
    if (s->empty_prefix) {
        s->genai = 1;
        return;
    }
    if (len == 0 || !(s->first[key[0] >> 3] & (1u << (key[0] & 7)))) {
        return;
    }
    for (i = 0; i < s->n_prefixes; i++) {
        if (s->prefix_len[i] <= len && memcmp(key, s->prefix[i], s->prefix_len[i]) == 0) {
            s->genai = 1;
            return;
        }
    }
}

/* A KeyValue: does its key (the last occurrence, as upb keeps) start with a prefix? */
static int
scan_key_value(scan_t *s, const uint8_t *p, const uint8_t *end)
{
    field_t f;
    const uint8_t *key = NULL;
    size_t key_len = 0;

    /* Fast path for the usual shape: a key of under 128 bytes (tag 0x0a), then nothing or a
     * value (tag 0x12) that ends the KeyValue. Anything else takes the general loop. */
    if (end - p >= 2 && p[0] == 0x0a && p[1] < 0x80 && p[1] <= end - p - 2) {
        const uint8_t *q = p + 2 + p[1];
        uint64_t n;
        if (q == end) {
            check_key(s, p + 2, p[1]);
            return ST_OK;
        }
        if (*q == 0x12) {
            const uint8_t *v = read_varint(q + 1, end, &n);
            if (v != NULL && n == (uint64_t)(end - v)) {
                check_key(s, p + 2, p[1]);
                return ST_OK;
            }
        }
    }
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(KEY_VALUE_WT, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            key = f.ptr;
            key_len = f.len;
        }
    }
    check_key(s, key, key_len);
    return ST_OK;
}

/* Attribute-bearing messages: walk them, checking keys until a GenAI key is known. */
static int
scan_attr_message(scan_t *s, const uint8_t *p, const uint8_t *end, const int8_t *table,
                  size_t table_len, uint32_t attr_field)
{
    field_t f;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL) {
            return ST_UNHANDLED;
        }
        if (f.num < table_len && table[f.num] != WT_UNKNOWN && table[f.num] != (int8_t)f.wt) {
            /* WRONG_WT, for a table passed by pointer */
            return ST_UNHANDLED;
        }
        if (f.num == attr_field && !s->genai &&
            scan_key_value(s, f.ptr, f.ptr + f.len) != ST_OK) {
            return ST_UNHANDLED;
        }
    }
    return ST_OK;
}

static int
scan_event(scan_t *s, const uint8_t *p, const uint8_t *end)
{
    field_t f;
    const uint8_t *name = (const uint8_t *)"";
    size_t name_len = 0;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(EVENT_WT, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 2) {
            name = f.ptr;
            name_len = f.len;
        }
        else if (f.num == 3 && !s->genai && scan_key_value(s, f.ptr, f.ptr + f.len) != ST_OK) {
            return ST_UNHANDLED;
        }
    }
    if (name_len == s->event_name_len && memcmp(name, s->event_name, name_len) == 0) {
        s->genai = 1;
    }
    return ST_OK;
}

/* Record a span (ids of the right sizes) whose payload is [start, end). */
static int
push_span(scan_t *s, const uint8_t *trace_id, const uint8_t *span_id, const uint8_t *start,
          const uint8_t *end)
{
    span_rec_t *rec;
    if (s->n_spans == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        span_rec_t *grown;
        if (cap > (size_t)PY_SSIZE_T_MAX / (2 * sizeof(span_rec_t))) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        grown = PyMem_Realloc(s->spans, cap * sizeof(span_rec_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        s->spans = grown;
        s->cap = cap;
    }
    rec = &s->spans[s->n_spans++];
    rec->trace_id = trace_id;
    rec->span_id = span_id;
    rec->start = (size_t)(start - s->base);
    rec->end = (size_t)(end - s->base);
    return ST_OK;
}

static int
scan_span(scan_t *s, const uint8_t *p, const uint8_t *end)
{
    field_t f;
    const uint8_t *start = p, *trace_id = NULL, *span_id = NULL;
    size_t trace_id_len = 0, span_id_len = 0;

    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(SPAN_WT, f)) {
            return ST_UNHANDLED;
        }
        switch (f.num) {
        case 1:
            trace_id = f.ptr;
            trace_id_len = f.len;
            break;
        case 2:
            span_id = f.ptr;
            span_id_len = f.len;
            break;
        case 9:
            if (!s->genai && scan_key_value(s, f.ptr, f.ptr + f.len) != ST_OK) {
                return ST_UNHANDLED;
            }
            break;
        case 11:
            if (!s->genai && scan_event(s, f.ptr, f.ptr + f.len) != ST_OK) {
                return ST_UNHANDLED;
            }
            break;
        case 13:
            if (!s->genai && scan_attr_message(s, f.ptr, f.ptr + f.len, LINK_WT,
                                               sizeof(LINK_WT), 4) != ST_OK) {
                return ST_UNHANDLED;
            }
            break;
        default:
            break;
        }
    }
    if (trace_id_len != 16 || span_id_len != 8) {
        return ST_UNHANDLED;
    }
    return push_span(s, trace_id, span_id, start, end);
}

static int
scan_scope_spans(scan_t *s, const uint8_t *p, const uint8_t *end)
{
    field_t f;
    int st;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(SCOPE_SPANS_WT, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            if (!s->genai && scan_attr_message(s, f.ptr, f.ptr + f.len, SCOPE_WT,
                                               sizeof(SCOPE_WT), 3) != ST_OK) {
                return ST_UNHANDLED;
            }
        }
        else if (f.num == 2) {
            st = scan_span(s, f.ptr, f.ptr + f.len);
            if (st != ST_OK) {
                return st;
            }
        }
    }
    return ST_OK;
}

static int
scan_resource_spans(scan_t *s, const uint8_t *p, const uint8_t *end)
{
    field_t f;
    int st;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(RESOURCE_SPANS_WT, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            if (!s->genai && scan_attr_message(s, f.ptr, f.ptr + f.len, RESOURCE_WT,
                                               sizeof(RESOURCE_WT), 1) != ST_OK) {
                return ST_UNHANDLED;
            }
        }
        else if (f.num == 2) {
            st = scan_scope_spans(s, f.ptr, f.ptr + f.len);
            if (st != ST_OK) {
                return st;
            }
        }
    }
    return ST_OK;
}

static int
scan_request(scan_t *s, const uint8_t *p, const uint8_t *end)
{
    field_t f;
    int st;
    while (p < end) {
        p = read_field(p, end, &f);
        if (p == NULL || WRONG_WT(REQUEST_WT, f)) {
            return ST_UNHANDLED;
        }
        if (f.num == 1) {
            st = scan_resource_spans(s, f.ptr, f.ptr + f.len);
            if (st != ST_OK) {
                return st;
            }
        }
    }
    return ST_OK;
}

/* --- the validating scan -------------------------------------------------------------------- */

/*
 * scan_trace_request(..., validate=True) answers only for bytes that
 * ExportTraceServiceRequest.FromString (upb) parses. It walks every message of the request, at
 * every depth, against a schema of every message type reachable from ExportTraceServiceRequest
 * (opentelemetry-proto 1.x; tests/unit/test_speedups.py compares it with the installed
 * descriptors), checking what upb checks while parsing:
 *
 * - wire structure: tags of at most 5 bytes and 32 bits, field number >= 1, varints of at most
 *   10 bytes, lengths of at most 5 bytes that stay within the enclosing message, fixed64 /
 *   fixed32 values within it; groups (which upb parses) and wire types 4, 6, 7 are None;
 * - proto3 `string` fields (known fields only, as upb) must be valid UTF-8 by the strictest
 *   rules: no overlong forms, no surrogates, nothing above U+10FFFF (upb uses utf8_range, which
 *   agrees with Python's strict decoder); `bytes` fields and unknown fields are not checked;
 * - nesting: upb refuses more than 100 levels of sub-messages; this walk answers None beyond
 *   VALIDATE_MAX_DEPTH message levels (the request itself being level 1);
 * - a known field with another wire type (upb would keep it as an unknown field) is None.
 *
 * In the same pass it does what the plain scan does (keys, ids, offsets, the GenAI check) and
 * gives the same answer: the roles of the schema say which messages the scan looks into.
 */

/* Message levels the validating walk enters (upb's limit is 100 levels below the request). */
#define VALIDATE_MAX_DEPTH 64
/* Inputs at least this large are left to upb (its sizes are 32-bit). */
#define VALIDATE_MAX_SIZE ((Py_ssize_t)1 << 30)

/* Field kinds: how a field is encoded and checked. K_UNKNOWN: not a field of the message. */
enum { K_UNKNOWN, K_VARINT, K_FIXED64, K_FIXED32, K_BYTES, K_STRING, K_MESSAGE, K_COUNT };
static const char *const KIND_NAME[K_COUNT] = {
    NULL, "varint", "fixed64", "fixed32", "bytes", "string", "message",
};
/* The wire type of each kind (K_UNKNOWN: any). */
static const uint8_t KIND_WT[K_COUNT] = {0, 0, 1, 5, 2, 2, 2};

/* The message types. */
enum {
    M_REQUEST,
    M_RESOURCE_SPANS,
    M_RESOURCE,
    M_ENTITY_REF,
    M_SCOPE_SPANS,
    M_SCOPE,
    M_SPAN,
    M_EVENT,
    M_LINK,
    M_STATUS,
    M_KEY_VALUE,
    M_ANY_VALUE,
    M_ARRAY_VALUE,
    M_KEY_VALUE_LIST,
    M_COUNT
};

/* What the scan does with a message: nothing, record a span, compare an event name, check an
 * attribute key. Given by the field that holds the message. */
enum { R_PLAIN, R_SPAN, R_EVENT, R_ATTRIBUTE };

typedef struct {
    uint8_t kind;
    uint8_t msg;  /* K_MESSAGE: the message type */
    uint8_t role; /* K_MESSAGE: the scan's role for it */
} vfield_t;

typedef struct {
    const char *full_name;
    const vfield_t *fields; /* by field number; [0] unused */
    uint32_t n_fields;      /* the largest field number + 1 */
} vmessage_t;

#define F_VARINT {K_VARINT, 0, R_PLAIN}
#define F_FIXED64 {K_FIXED64, 0, R_PLAIN}
#define F_FIXED32 {K_FIXED32, 0, R_PLAIN}
#define F_BYTES {K_BYTES, 0, R_PLAIN}
#define F_STRING {K_STRING, 0, R_PLAIN}
#define F_MESSAGE(m, role) {K_MESSAGE, (m), (role)}

/* opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest */
static const vfield_t V_REQUEST[] = {
    [1] = F_MESSAGE(M_RESOURCE_SPANS, R_PLAIN), /* resource_spans */
};
/* opentelemetry.proto.trace.v1.ResourceSpans */
static const vfield_t V_RESOURCE_SPANS[] = {
    [1] = F_MESSAGE(M_RESOURCE, R_PLAIN),    /* resource */
    [2] = F_MESSAGE(M_SCOPE_SPANS, R_PLAIN), /* scope_spans */
    [3] = F_STRING,                          /* schema_url */
};
/* opentelemetry.proto.resource.v1.Resource */
static const vfield_t V_RESOURCE[] = {
    [1] = F_MESSAGE(M_KEY_VALUE, R_ATTRIBUTE), /* attributes */
    [2] = F_VARINT,                            /* dropped_attributes_count: uint32 */
    [3] = F_MESSAGE(M_ENTITY_REF, R_PLAIN),    /* entity_refs */
};
/* opentelemetry.proto.common.v1.EntityRef */
static const vfield_t V_ENTITY_REF[] = {
    [1] = F_STRING, /* schema_url */
    [2] = F_STRING, /* type */
    [3] = F_STRING, /* id_keys: repeated */
    [4] = F_STRING, /* description_keys: repeated */
};
/* opentelemetry.proto.trace.v1.ScopeSpans */
static const vfield_t V_SCOPE_SPANS[] = {
    [1] = F_MESSAGE(M_SCOPE, R_PLAIN), /* scope */
    [2] = F_MESSAGE(M_SPAN, R_SPAN),   /* spans */
    [3] = F_STRING,                    /* schema_url */
};
/* opentelemetry.proto.common.v1.InstrumentationScope */
static const vfield_t V_SCOPE[] = {
    [1] = F_STRING,                            /* name */
    [2] = F_STRING,                            /* version */
    [3] = F_MESSAGE(M_KEY_VALUE, R_ATTRIBUTE), /* attributes */
    [4] = F_VARINT,                            /* dropped_attributes_count: uint32 */
};
/* opentelemetry.proto.trace.v1.Span */
static const vfield_t V_SPAN[] = {
    [1] = F_BYTES,                             /* trace_id */
    [2] = F_BYTES,                             /* span_id */
    [3] = F_STRING,                            /* trace_state */
    [4] = F_BYTES,                             /* parent_span_id */
    [5] = F_STRING,                            /* name */
    [6] = F_VARINT,                            /* kind: enum */
    [7] = F_FIXED64,                           /* start_time_unix_nano */
    [8] = F_FIXED64,                           /* end_time_unix_nano */
    [9] = F_MESSAGE(M_KEY_VALUE, R_ATTRIBUTE), /* attributes */
    [10] = F_VARINT,                           /* dropped_attributes_count: uint32 */
    [11] = F_MESSAGE(M_EVENT, R_EVENT),        /* events */
    [12] = F_VARINT,                           /* dropped_events_count: uint32 */
    [13] = F_MESSAGE(M_LINK, R_PLAIN),         /* links */
    [14] = F_VARINT,                           /* dropped_links_count: uint32 */
    [15] = F_MESSAGE(M_STATUS, R_PLAIN),       /* status */
    [16] = F_FIXED32,                          /* flags */
};
/* opentelemetry.proto.trace.v1.Span.Event */
static const vfield_t V_EVENT[] = {
    [1] = F_FIXED64,                           /* time_unix_nano */
    [2] = F_STRING,                            /* name */
    [3] = F_MESSAGE(M_KEY_VALUE, R_ATTRIBUTE), /* attributes */
    [4] = F_VARINT,                            /* dropped_attributes_count: uint32 */
};
/* opentelemetry.proto.trace.v1.Span.Link */
static const vfield_t V_LINK[] = {
    [1] = F_BYTES,                             /* trace_id */
    [2] = F_BYTES,                             /* span_id */
    [3] = F_STRING,                            /* trace_state */
    [4] = F_MESSAGE(M_KEY_VALUE, R_ATTRIBUTE), /* attributes */
    [5] = F_VARINT,                            /* dropped_attributes_count: uint32 */
    [6] = F_FIXED32,                           /* flags */
};
/* opentelemetry.proto.trace.v1.Status */
static const vfield_t V_STATUS[] = {
    [2] = F_STRING, /* message */
    [3] = F_VARINT, /* code: enum */
};
/* opentelemetry.proto.common.v1.KeyValue */
static const vfield_t V_KEY_VALUE[] = {
    [1] = F_STRING,                          /* key */
    [2] = F_MESSAGE(M_ANY_VALUE, R_PLAIN),   /* value */
    [3] = F_VARINT,                          /* key_strindex: int32 */
};
/* opentelemetry.proto.common.v1.AnyValue: all members of the oneof `value` */
static const vfield_t V_ANY_VALUE[] = {
    [1] = F_STRING,                             /* string_value */
    [2] = F_VARINT,                             /* bool_value */
    [3] = F_VARINT,                             /* int_value: int64 */
    [4] = F_FIXED64,                            /* double_value */
    [5] = F_MESSAGE(M_ARRAY_VALUE, R_PLAIN),    /* array_value */
    [6] = F_MESSAGE(M_KEY_VALUE_LIST, R_PLAIN), /* kvlist_value */
    [7] = F_BYTES,                              /* bytes_value */
    [8] = F_VARINT,                             /* string_value_strindex: int32 */
};
/* opentelemetry.proto.common.v1.ArrayValue */
static const vfield_t V_ARRAY_VALUE[] = {
    [1] = F_MESSAGE(M_ANY_VALUE, R_PLAIN), /* values */
};
/* opentelemetry.proto.common.v1.KeyValueList: keys in values are not attribute keys */
static const vfield_t V_KEY_VALUE_LIST[] = {
    [1] = F_MESSAGE(M_KEY_VALUE, R_PLAIN), /* values */
};

#define VMESSAGE(name, table) {(name), (table), (uint32_t)(sizeof(table) / sizeof((table)[0]))}

static const vmessage_t VMESSAGES[M_COUNT] = {
    [M_REQUEST] = VMESSAGE("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
                           V_REQUEST),
    [M_RESOURCE_SPANS] = VMESSAGE("opentelemetry.proto.trace.v1.ResourceSpans", V_RESOURCE_SPANS),
    [M_RESOURCE] = VMESSAGE("opentelemetry.proto.resource.v1.Resource", V_RESOURCE),
    [M_ENTITY_REF] = VMESSAGE("opentelemetry.proto.common.v1.EntityRef", V_ENTITY_REF),
    [M_SCOPE_SPANS] = VMESSAGE("opentelemetry.proto.trace.v1.ScopeSpans", V_SCOPE_SPANS),
    [M_SCOPE] = VMESSAGE("opentelemetry.proto.common.v1.InstrumentationScope", V_SCOPE),
    [M_SPAN] = VMESSAGE("opentelemetry.proto.trace.v1.Span", V_SPAN),
    [M_EVENT] = VMESSAGE("opentelemetry.proto.trace.v1.Span.Event", V_EVENT),
    [M_LINK] = VMESSAGE("opentelemetry.proto.trace.v1.Span.Link", V_LINK),
    [M_STATUS] = VMESSAGE("opentelemetry.proto.trace.v1.Status", V_STATUS),
    [M_KEY_VALUE] = VMESSAGE("opentelemetry.proto.common.v1.KeyValue", V_KEY_VALUE),
    [M_ANY_VALUE] = VMESSAGE("opentelemetry.proto.common.v1.AnyValue", V_ANY_VALUE),
    [M_ARRAY_VALUE] = VMESSAGE("opentelemetry.proto.common.v1.ArrayValue", V_ARRAY_VALUE),
    [M_KEY_VALUE_LIST] = VMESSAGE("opentelemetry.proto.common.v1.KeyValueList",
                                  V_KEY_VALUE_LIST),
};

#define HIGH_BITS 0x8080808080808080ULL

static inline uint64_t
load_word(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof(w));
    return w;
}

/* The number of ASCII bytes a word starts with, given its non-zero high bits (the word as
 * loaded from memory). Define TRACEHOUND_PORTABLE to build (and test) the portable code. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
    !defined(TRACEHOUND_PORTABLE)
#define ASCII_PREFIX(high) ((size_t)__builtin_ctzll(high) >> 3)
#else
static inline size_t
ASCII_PREFIX(uint64_t high)
{
    uint8_t bytes[8];
    size_t n = 0;
    memcpy(bytes, &high, sizeof(bytes));
    while (!bytes[n]) {
        n++;
    }
    return n;
}
#endif

#if defined(__SSE2__) && defined(__GNUC__) && !defined(TRACEHOUND_PORTABLE)
#include <emmintrin.h>
#define USE_SSE2 1
/* The high bits of 16 bytes, as a 16-bit mask (bit i: byte i). */
static inline unsigned
high_mask16(const uint8_t *p)
{
    return (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)p));
}
#else
#define USE_SSE2 0
#endif

/* The first non-ASCII byte in [p, end), or end. Runs of ASCII go 16 or 8 bytes at a time; the
 * last, partial block is read overlapping the bytes before it, which are known to be ASCII. */
static ALWAYS_INLINE const uint8_t *
skip_ascii(const uint8_t *p, const uint8_t *end)
{
#if USE_SSE2
    if (end - p >= 16) {
        unsigned mask;
        for (; end - p > 16; p += 16) {
            mask = high_mask16(p);
            if (mask) {
                return p + __builtin_ctz(mask);
            }
        }
        p = end - 16;
        mask = high_mask16(p);
        return mask ? p + __builtin_ctz(mask) : end;
    }
#endif
    if (end - p >= 8) {
        uint64_t high;
        for (; end - p > 8; p += 8) {
            high = load_word(p) & HIGH_BITS;
            if (high) {
                return p + ASCII_PREFIX(high);
            }
        }
        p = end - 8;
        high = load_word(p) & HIGH_BITS;
        return high ? p + ASCII_PREFIX(high) : end;
    }
    for (; p < end; p++) {
        if (*p & 0x80) {
            return p;
        }
    }
    return end;
}

/* Strict UTF-8 (Unicode 3.9, table 3-7) from a non-ASCII byte on: no overlong forms, no
 * surrogates, nothing above U+10FFFF, no truncated sequence. */
static int
utf8_valid_slow(const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        uint8_t c = *p, lo = 0x80, hi = 0xbf;
        if (c < 0x80) {
            p = skip_ascii(p, end);
            continue;
        }
        if (c < 0xc2) { /* a continuation byte, or an overlong 2-byte form */
            return 0;
        }
        if (c < 0xe0) {
            if (end - p < 2 || (p[1] & 0xc0) != 0x80) {
                return 0;
            }
            p += 2;
            continue;
        }
        if (c < 0xf0) {
            if (c == 0xe0) {
                lo = 0xa0; /* overlong */
            }
            else if (c == 0xed) {
                hi = 0x9f; /* surrogates */
            }
            if (end - p < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80) {
                return 0;
            }
            p += 3;
            continue;
        }
        if (c > 0xf4) { /* above U+10FFFF, or not a lead byte */
            return 0;
        }
        if (c == 0xf0) {
            lo = 0x90; /* overlong */
        }
        else if (c == 0xf4) {
            hi = 0x8f; /* above U+10FFFF */
        }
        if (end - p < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 ||
            (p[3] & 0xc0) != 0x80) {
            return 0;
        }
        p += 4;
    }
    return 1;
}

/* Is [p, p + len) valid UTF-8, as upb requires of a string field? */
static ALWAYS_INLINE int
utf8_valid(const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    p = skip_ascii(p, end);
    return p == end || utf8_valid_slow(p, end);
}

/* --- UTF-8 to str ---------------------------------------------------------------------------- */

/* The length in characters and the largest character of strict UTF-8 (as utf8_valid_slow
 * checks it); 0 if [p, end) is not valid. */
static int
utf8_measure(const uint8_t *p, const uint8_t *end, Py_ssize_t *chars, Py_UCS4 *maxchar)
{
    const uint8_t *start = p;
    Py_ssize_t extra = 0; /* continuation bytes */
    Py_UCS4 max = 0x7f, cp;
    while (p < end) {
        uint8_t c = *p, lo = 0x80, hi = 0xbf;
        if (c < 0x80) {
            p = skip_ascii(p, end);
            continue;
        }
        if (c < 0xc2) {
            return 0;
        }
        if (c < 0xe0) {
            if (end - p < 2 || (p[1] & 0xc0) != 0x80) {
                return 0;
            }
            cp = ((Py_UCS4)(c & 0x1f) << 6) | (p[1] & 0x3f);
            max = cp > max ? cp : max;
            extra += 1;
            p += 2;
            continue;
        }
        if (c < 0xf0) {
            if (c == 0xe0) {
                lo = 0xa0;
            }
            else if (c == 0xed) {
                hi = 0x9f;
            }
            if (end - p < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80) {
                return 0;
            }
            cp = ((Py_UCS4)(c & 0x0f) << 12) | ((Py_UCS4)(p[1] & 0x3f) << 6) | (p[2] & 0x3f);
            max = cp > max ? cp : max;
            extra += 2;
            p += 3;
            continue;
        }
        if (c > 0xf4) {
            return 0;
        }
        if (c == 0xf0) {
            lo = 0x90;
        }
        else if (c == 0xf4) {
            hi = 0x8f;
        }
        if (end - p < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 ||
            (p[3] & 0xc0) != 0x80) {
            return 0;
        }
        cp = ((Py_UCS4)(c & 0x07) << 18) | ((Py_UCS4)(p[1] & 0x3f) << 12) |
             ((Py_UCS4)(p[2] & 0x3f) << 6) | (p[3] & 0x3f);
        max = cp > max ? cp : max;
        extra += 3;
        p += 4;
    }
    *chars = (end - start) - extra;
    *maxchar = max;
    return 1;
}

/* The character of the valid sequence at *p (moved past it). */
static ALWAYS_INLINE Py_UCS4
utf8_next(const uint8_t **p)
{
    const uint8_t *q = *p;
    uint8_t c = q[0];
    if (c < 0x80) {
        *p = q + 1;
        return c;
    }
    if (c < 0xe0) {
        *p = q + 2;
        return ((Py_UCS4)(c & 0x1f) << 6) | (q[1] & 0x3f);
    }
    if (c < 0xf0) {
        *p = q + 3;
        return ((Py_UCS4)(c & 0x0f) << 12) | ((Py_UCS4)(q[1] & 0x3f) << 6) | (q[2] & 0x3f);
    }
    *p = q + 4;
    return ((Py_UCS4)(c & 0x07) << 18) | ((Py_UCS4)(q[1] & 0x3f) << 12) |
           ((Py_UCS4)(q[2] & 0x3f) << 6) | (q[3] & 0x3f);
}

/* The characters of strict UTF-8 [p, end) into out (room for end - p of them), in one pass
 * (validating as utf8_valid_slow does), and their largest; -1 if it is not valid or has a
 * character above U+FFFF (then the caller takes the two passes). Runs of ASCII are widened 16
 * bytes at a time: what is written past the run is written over next. */
static Py_ssize_t
utf8_to_ucs2(const uint8_t *p, const uint8_t *end, Py_UCS2 *out, Py_UCS4 *maxchar)
{
    Py_UCS2 *start = out;
    Py_UCS4 max = 0x7f, cp;
    while (p < end) {
        uint8_t c, lo = 0x80, hi = 0xbf;
#if USE_SSE2
        if (end - p >= 16) { /* out has room: no more characters than bytes so far */
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
            unsigned mask = (unsigned)_mm_movemask_epi8(x);
            __m128i zero = _mm_setzero_si128();
            _mm_storeu_si128((__m128i *)(void *)out, _mm_unpacklo_epi8(x, zero));
            _mm_storeu_si128((__m128i *)(void *)(out + 8), _mm_unpackhi_epi8(x, zero));
            if (!mask) {
                p += 16;
                out += 16;
                continue;
            }
            p += __builtin_ctz(mask);
            out += __builtin_ctz(mask);
        }
#endif
        c = *p;
        if (c < 0x80) {
            *out++ = c;
            p++;
            continue;
        }
        if (c < 0xc2) {
            return -1;
        }
        if (c < 0xe0) {
            if (end - p < 2 || (p[1] & 0xc0) != 0x80) {
                return -1;
            }
            cp = ((Py_UCS4)(c & 0x1f) << 6) | (p[1] & 0x3f);
            p += 2;
        }
        else if (c < 0xf0) {
            if (c == 0xe0) {
                lo = 0xa0; /* overlong */
            }
            else if (c == 0xed) {
                hi = 0x9f; /* surrogates */
            }
            if (end - p < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80) {
                return -1;
            }
            cp = ((Py_UCS4)(c & 0x0f) << 12) | ((Py_UCS4)(p[1] & 0x3f) << 6) | (p[2] & 0x3f);
            p += 3;
        }
        else {
            return -1;
        }
        max = cp > max ? cp : max;
        *out++ = (Py_UCS2)cp;
    }
    *maxchar = max;
    return out - start;
}

/* Texts of up to this many bytes are decoded into a buffer on the stack. */
#define UTF8_STACK_BYTES 2048

/* PyUnicode_DecodeUTF8(p, len, NULL): the same str, made faster for text that is mostly ASCII
 * with some other characters among it (CPython's decoder leaves its ASCII fast path at the
 * first of them): ASCII copied; else read into 2-byte characters on the stack in one pass and
 * copied into the str of that length and kind; else (a character above U+FFFF) measured, then
 * read into the str. Invalid UTF-8 and the shortest strings go to PyUnicode_DecodeUTF8 (the
 * same exception; the shared empty and one-character strings). */
PyObject *
tracehound_decode_utf8(const char *data, Py_ssize_t len)
{
    const uint8_t *p = (const uint8_t *)data, *end = p + len, *first;
    Py_ssize_t chars, i;
    Py_UCS4 maxchar;
    PyObject *str;
    Py_UCS2 stack[UTF8_STACK_BYTES], *buf = NULL;
    void *out;
    int kind;

    if (len < 2) {
        return PyUnicode_DecodeUTF8(data, len, NULL);
    }
    first = skip_ascii(p, end);
    if (first == end) {
        str = PyUnicode_New(len, 0x7f);
        if (str != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(str), p, (size_t)len);
        }
        return str;
    }
    if (len <= UTF8_STACK_BYTES || (buf = PyMem_Malloc((size_t)len * sizeof(Py_UCS2))) != NULL) {
        Py_UCS2 *chars2 = len <= UTF8_STACK_BYTES ? stack : buf;
        chars = utf8_to_ucs2(p, end, chars2, &maxchar);
        str = chars >= 2 ? PyUnicode_New(chars, maxchar) : NULL;
        if (str != NULL && PyUnicode_KIND(str) == PyUnicode_2BYTE_KIND) {
            memcpy(PyUnicode_2BYTE_DATA(str), chars2, (size_t)chars * sizeof(Py_UCS2));
        }
        else if (str != NULL) { /* all of them below U+0100 */
            Py_UCS1 *out = PyUnicode_1BYTE_DATA(str);
            Py_ssize_t i;
            for (i = 0; i < chars; i++) {
                out[i] = (Py_UCS1)chars2[i];
            }
        }
        PyMem_Free(buf);
        if (str != NULL || chars >= 2) {
            return str; /* NULL: out of memory */
        }
    }
    /* not UCS-2, or no buffer: measured, then read into the str */
    if (!utf8_measure(first, end, &chars, &maxchar)) {
        return PyUnicode_DecodeUTF8(data, len, NULL);
    }
    chars += first - p;
    if (chars < 2) {
        return PyUnicode_DecodeUTF8(data, len, NULL);
    }
    str = PyUnicode_New(chars, maxchar);
    if (str == NULL) {
        return NULL;
    }
    kind = PyUnicode_KIND(str);
    out = PyUnicode_DATA(str);
    for (i = 0; p < end; i++) {
        PyUnicode_WRITE(kind, out, i, utf8_next(&p));
    }
    return str;
}

/* A varint, skipped: at most 10 bytes (upb ignores the bits beyond 64). NULL if malformed. */
static inline const uint8_t *
skip_varint(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *limit = end - p > 10 ? p + 10 : end;
    for (; p < limit; p++) {
        if (!(*p & 0x80)) {
            return p + 1;
        }
    }
    return NULL;
}

static int vscan_message(scan_t *s, const uint8_t *p, const uint8_t *end, int msg, int role,
                         int depth);

/*
 * A KeyValue `depth` levels deep. The usual shape, a key under 128 bytes then nothing or an
 * AnyValue under 128 bytes with at most one scalar member, is checked here, without the general
 * walk (two calls per attribute); any other shape takes vscan_message from the start. Same
 * checks, same result.
 */
static int
vscan_key_value(scan_t *s, const uint8_t *p, const uint8_t *end, int role, int depth)
{
    const uint8_t *key = p + 2, *v;
    size_t key_len, len;

    if (depth >= VALIDATE_MAX_DEPTH || end - p < 2 || p[0] != 0x0a || p[1] >= 0x80 ||
        p[1] > end - p - 2) {
        return vscan_message(s, p, end, M_KEY_VALUE, role, depth);
    }
    key_len = p[1];
    v = key + key_len;
    if (v != end) {
        /* value: an AnyValue (field 2) that ends the KeyValue */
        if (end - v < 2 || v[0] != 0x12 || v[1] >= 0x80 || v[1] != end - v - 2) {
            return vscan_message(s, p, end, M_KEY_VALUE, role, depth);
        }
        v += 2;
        len = (size_t)(end - v);
        if (len != 0) {
            switch (v[0]) {
            case 0x0a: /* string_value */
            case 0x3a: /* bytes_value */
                if (len < 2 || v[1] >= 0x80 || v[1] != len - 2) {
                    return vscan_message(s, p, end, M_KEY_VALUE, role, depth);
                }
                if (v[0] == 0x0a && !utf8_valid(v + 2, len - 2)) {
                    return ST_UNHANDLED;
                }
                break;
            case 0x10: /* bool_value */
            case 0x18: /* int_value */
            case 0x40: /* string_value_strindex */
                if (skip_varint(v + 1, end) != end) {
                    return vscan_message(s, p, end, M_KEY_VALUE, role, depth);
                }
                break;
            case 0x21: /* double_value */
                if (len != 9) {
                    return vscan_message(s, p, end, M_KEY_VALUE, role, depth);
                }
                break;
            default:
                return vscan_message(s, p, end, M_KEY_VALUE, role, depth);
            }
        }
    }
    if (!utf8_valid(key, key_len)) {
        return ST_UNHANDLED;
    }
    if (role == R_ATTRIBUTE && !s->genai) {
        check_key(s, key, key_len);
    }
    return ST_OK;
}

/*
 * The message of type `msg` in [p, end), `depth` levels deep (the request is level 1): validate
 * it and everything in it, and do the scan's work for its role.
 */
static int
vscan_message(scan_t *s, const uint8_t *p, const uint8_t *end, int msg, int role, int depth)
{
    const vmessage_t *m = &VMESSAGES[msg];
    const uint8_t *start = p;
    /* R_SPAN: trace_id, span_id; R_ATTRIBUTE: the key; R_EVENT: the name (last occurrences) */
    const uint8_t *a = NULL, *b = NULL;
    size_t a_len = 0, b_len = 0;
    int st;

    if (depth > VALIDATE_MAX_DEPTH) {
        return ST_UNHANDLED;
    }
    while (p < end) {
        uint32_t tag, num, kind;
        const uint8_t *q;
        size_t len;

        /* the tag: at most 5 bytes, 32 bits */
        if (*p < 0x80) {
            tag = *p++;
        }
        else {
            uint64_t v;
            q = read_varint_slow(p, end, &v);
            if (q == NULL || q - p > 5 || v > UINT32_MAX) {
                return ST_UNHANDLED;
            }
            tag = (uint32_t)v;
            p = q;
        }
        num = tag >> 3;
        if (num == 0) {
            return ST_UNHANDLED;
        }
        kind = num < m->n_fields ? m->fields[num].kind : K_UNKNOWN;
        if (kind != K_UNKNOWN && KIND_WT[kind] != (tag & 7)) {
            return ST_UNHANDLED; /* upb: an unknown field; here None */
        }
        switch (tag & 7) {
        case 0:
            p = skip_varint(p, end);
            if (p == NULL) {
                return ST_UNHANDLED;
            }
            continue;
        case 1:
            if (end - p < 8) {
                return ST_UNHANDLED;
            }
            p += 8;
            continue;
        case 5:
            if (end - p < 4) {
                return ST_UNHANDLED;
            }
            p += 4;
            continue;
        case 2:
            break;
        default: /* 3, 4: groups; 6, 7: invalid */
            return ST_UNHANDLED;
        }
        /* a length: at most 5 bytes, within the message */
        if (p < end && *p < 0x80) {
            len = *p++;
        }
        else {
            uint64_t v;
            q = read_varint_slow(p, end, &v);
            if (q == NULL || q - p > 5) {
                return ST_UNHANDLED;
            }
            len = (size_t)v; /* v < 2**35 */
            p = q;
        }
        if (len > (size_t)(end - p)) {
            return ST_UNHANDLED;
        }
        q = p;
        p += len;
        switch (kind) {
        case K_STRING:
            if (!utf8_valid(q, len)) {
                return ST_UNHANDLED;
            }
            if ((role == R_ATTRIBUTE && num == 1) || (role == R_EVENT && num == 2)) {
                a = q; /* the key, the event name */
                a_len = len;
            }
            break;
        case K_BYTES:
            if (role == R_SPAN) {
                if (num == 1) {
                    a = q;
                    a_len = len;
                }
                else if (num == 2) {
                    b = q;
                    b_len = len;
                }
            }
            break;
        case K_MESSAGE: {
            const vfield_t *fd = &m->fields[num];
            /* once a GenAI key is known, attribute keys need no more checks */
            int child_role = (fd->role == R_ATTRIBUTE && s->genai) ? R_PLAIN : fd->role;
            st = fd->msg == M_KEY_VALUE
                     ? vscan_key_value(s, q, p, child_role, depth + 1)
                     : vscan_message(s, q, p, fd->msg, child_role, depth + 1);
            if (st != ST_OK) {
                return st;
            }
            break;
        }
        default: /* K_UNKNOWN: skipped */
            break;
        }
    }
    switch (role) {
    case R_ATTRIBUTE:
        if (!s->genai) {
            check_key(s, a, a_len);
        }
        break;
    case R_EVENT:
        if (a == NULL) {
            a = (const uint8_t *)"";
        }
        if (a_len == s->event_name_len && memcmp(a, s->event_name, a_len) == 0) {
            s->genai = 1;
        }
        break;
    case R_SPAN:
        if (a_len != 16 || b_len != 8) {
            return ST_UNHANDLED;
        }
        return push_span(s, a, b, start, end);
    default:
        break;
    }
    return ST_OK;
}

/* The (genai, keys, offsets) tuple from a successful scan. */
static PyObject *
scan_result(const scan_t *s)
{
    PyObject *keys = NULL, *offsets = NULL, *result;
    size_t i;

    keys = PyList_New((Py_ssize_t)s->n_spans);
    offsets = PyList_New((Py_ssize_t)(2 * s->n_spans));
    if (keys == NULL || offsets == NULL) {
        goto fail;
    }
    for (i = 0; i < s->n_spans; i++) {
        const span_rec_t *rec = &s->spans[i];
        PyObject *key, *start, *end;
        key = PyBytes_FromStringAndSize(NULL, 24);
        if (key == NULL) {
            goto fail;
        }
        memcpy(PyBytes_AS_STRING(key), rec->trace_id, 16);
        memcpy(PyBytes_AS_STRING(key) + 16, rec->span_id, 8);
        PyList_SET_ITEM(keys, (Py_ssize_t)i, key);
        start = PyLong_FromSsize_t((Py_ssize_t)rec->start);
        if (start == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(offsets, (Py_ssize_t)(2 * i), start);
        end = PyLong_FromSsize_t((Py_ssize_t)rec->end);
        if (end == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(offsets, (Py_ssize_t)(2 * i + 1), end);
    }
    result = PyTuple_New(3);
    if (result == NULL) {
        goto fail;
    }
    PyTuple_SET_ITEM(result, 0, PyBool_FromLong(s->genai));
    PyTuple_SET_ITEM(result, 1, keys);
    PyTuple_SET_ITEM(result, 2, offsets);
    return result;

fail: /* the NULL items of a partly filled list are fine for its deallocator */
    Py_XDECREF(keys);
    Py_XDECREF(offsets);
    return NULL;
}

PyDoc_STRVAR(scan_trace_request_doc,
"scan_trace_request($module, data, prefixes, event_name, validate=False, /)\n"
"--\n"
"\n"
"One pass over a serialized ExportTraceServiceRequest: (genai, keys, offsets).\n"
"\n"
"genai: True if an attribute key of a Resource, InstrumentationScope, Span, Span.Event or\n"
"Span.Link starts with one of `prefixes` (a tuple of bytes), or a Span.Event name equals\n"
"`event_name` (bytes). keys: per span in wire order, trace_id + span_id (24 bytes).\n"
"offsets: per span, the start and end of its Span message payload in `data`, for\n"
"decode_key_values(data, start, end, 9). Only these are allocated: per-attribute work stays\n"
"in C, which is what makes it faster than reading the keys through upb.\n"
"\n"
"Returns None for malformed wire data, groups, a known field with an unexpected wire type,\n"
"or a span whose trace_id is not 16 bytes or span_id not 8 bytes (missing included).\n"
"Raises TypeError for arguments of the wrong type.\n"
"\n"
"With a true `validate`, the whole request is checked as upb parses it, at every depth:\n"
"wire structure, UTF-8 of every string field, nesting depth. The answer is then not None\n"
"only if ExportTraceServiceRequest.FromString(data) succeeds, so the bytes may be passed on\n"
"without parsing them. None is also answered for some requests upb accepts (known fields\n"
"with another wire type, groups, over 64 message levels); the caller then parses with upb.\n"
"The answer, when there is one, is that of the scan without validation.");

static PyObject *
scan_trace_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    scan_t s;
    PyObject *prefixes, *result = NULL;
    Py_ssize_t i;
    int st, validate = 0;

    (void)module;
    if (nargs != 3 && nargs != 4) {
        PyErr_Format(PyExc_TypeError,
                     "scan_trace_request() takes 3 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    prefixes = args[1];
    if (!PyTuple_Check(prefixes)) {
        PyErr_Format(PyExc_TypeError,
                     "scan_trace_request() argument 'prefixes' must be a tuple of bytes, "
                     "not %.100s", Py_TYPE(prefixes)->tp_name);
        return NULL;
    }
    if (!PyBytes_Check(args[2])) {
        PyErr_Format(PyExc_TypeError,
                     "scan_trace_request() argument 'event_name' must be bytes, not %.100s",
                     Py_TYPE(args[2])->tp_name);
        return NULL;
    }
    if (nargs == 4) {
        validate = PyObject_IsTrue(args[3]);
        if (validate < 0) {
            return NULL;
        }
    }
    memset(&s, 0, sizeof(s));
    s.event_name = (const uint8_t *)PyBytes_AS_STRING(args[2]);
    s.event_name_len = (size_t)PyBytes_GET_SIZE(args[2]);
    s.n_prefixes = PyTuple_GET_SIZE(prefixes);
    if (s.n_prefixes > 0) {
        s.prefix = PyMem_Malloc((size_t)s.n_prefixes * sizeof(*s.prefix));
        s.prefix_len = PyMem_Malloc((size_t)s.n_prefixes * sizeof(*s.prefix_len));
        if (s.prefix == NULL || s.prefix_len == NULL) {
            PyErr_NoMemory();
            goto done_no_view;
        }
    }
    for (i = 0; i < s.n_prefixes; i++) {
        PyObject *item = PyTuple_GET_ITEM(prefixes, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError,
                         "scan_trace_request() argument 'prefixes' must be a tuple of bytes, "
                         "not of %.100s", Py_TYPE(item)->tp_name);
            goto done_no_view;
        }
        s.prefix[i] = (const uint8_t *)PyBytes_AS_STRING(item);
        s.prefix_len[i] = (size_t)PyBytes_GET_SIZE(item);
        if (s.prefix_len[i] == 0) {
            s.empty_prefix = 1;
        }
        else {
            s.first[s.prefix[i][0] >> 3] |= (uint8_t)(1u << (s.prefix[i][0] & 7));
        }
    }
    if (get_bytes_buffer(args[0], &view, "scan_trace_request") < 0) {
        goto done_no_view;
    }
    s.base = (const uint8_t *)view.buf;
    if (!validate) {
        st = scan_request(&s, s.base, s.base + view.len);
    }
    else if (view.len < VALIDATE_MAX_SIZE) {
        st = vscan_message(&s, s.base, s.base + view.len, M_REQUEST, R_PLAIN, 1);
    }
    else {
        st = ST_UNHANDLED;
    }
    if (st == ST_OK) {
        result = scan_result(&s);
    }
    else if (st == ST_UNHANDLED) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    PyBuffer_Release(&view);
done_no_view:
    PyMem_Free(s.spans);
    PyMem_Free(s.prefix);
    PyMem_Free(s.prefix_len);
    return result;
}

PyDoc_STRVAR(trace_request_schema_doc,
"trace_request_schema($module, /)\n"
"--\n"
"\n"
"The schema the validating scan_trace_request checks requests against:\n"
"{message full name: {field number: (kind, message full name or None)}}, kind one of\n"
"'varint', 'fixed64', 'fixed32', 'bytes', 'string' (UTF-8 checked), 'message'. Every\n"
"message type reachable from ExportTraceServiceRequest is in it; a test compares it with\n"
"the descriptors of the installed opentelemetry-proto.");

static PyObject *
trace_request_schema(PyObject *module, PyObject *unused)
{
    PyObject *schema, *fields = NULL, *key = NULL, *value = NULL;
    size_t i;
    uint32_t num;

    (void)module;
    (void)unused;
    schema = PyDict_New();
    if (schema == NULL) {
        return NULL;
    }
    for (i = 0; i < M_COUNT; i++) {
        const vmessage_t *m = &VMESSAGES[i];
        /* not PyDict_SetItemString, which interns the name (a new interned string per call) */
        fields = PyDict_New();
        key = PyUnicode_FromString(m->full_name);
        if (fields == NULL || key == NULL || PyDict_SetItem(schema, key, fields) < 0) {
            goto fail;
        }
        Py_CLEAR(key);
        for (num = 1; num < m->n_fields; num++) {
            const vfield_t *f = &m->fields[num];
            if (f->kind == K_UNKNOWN) {
                continue;
            }
            key = PyLong_FromUnsignedLong(num);
            value = Py_BuildValue("(sz)", KIND_NAME[f->kind],
                                  f->kind == K_MESSAGE ? VMESSAGES[f->msg].full_name : NULL);
            if (key == NULL || value == NULL || PyDict_SetItem(fields, key, value) < 0) {
                goto fail;
            }
            Py_CLEAR(key);
            Py_CLEAR(value);
        }
        Py_CLEAR(fields);
    }
    return schema;

fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(fields);
    Py_DECREF(schema);
    return NULL;
}

/* --- module state ----------------------------------------------------------------------------- */

/* The module state: the attribute key cache of decode_key_values. */
typedef struct {
    key_cache keys;
} speedups_state;

/* The module's attribute key cache, or NULL (no state: keys are then decoded each time). */
static key_cache *
module_keys(PyObject *module)
{
    speedups_state *s = PyModule_GetState(module);
    return s != NULL ? &s->keys : NULL;
}

/* --- encode_key_values ------------------------------------------------------------------------ */

/*
 * encode_key_values(attributes, tag) is the protobuf encoding of the KeyValues that
 * tracehound.server._otlp.set_attributes adds to a repeated field whose tag (field number and
 * wire type 2, as a varint) is `tag`: each attribute as `tag`, length, KeyValue. Merged into the
 * message (MergeFromString appends to repeated fields), the bytes leave it as the field API
 * would, for keys not already there. Oneof members are written whenever set, as setting one
 * marks it present; an absent value (None) leaves KeyValue.value unset; values nested deeper than
 * _any_value's limit become their str(). Anything else it does not reproduce exactly (keys that
 * are not str, containers other than list, tuple and dict, other value types, lone surrogates,
 * an exception from str()) makes the answer None, and the caller takes the field API.
 */

/* A str as a length-delimited field of tag byte `tag`; ST_UNHANDLED for a lone surrogate. */
static int
put_string_field(outbuf_t *b, char tag, PyObject *text)
{
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (utf8 == NULL) {
        PyErr_Clear(); /* not encodable: the field API raises that itself */
        return ST_UNHANDLED;
    }
    if (outbuf_put(b, &tag, 1) != ST_OK || outbuf_varint(b, (uint64_t)len) != ST_OK) {
        return ST_ERROR;
    }
    return outbuf_put(b, utf8, len);
}

/* str(value) as AnyValue.string_value. */
static int
put_str_of(outbuf_t *b, PyObject *value)
{
    int st;
    PyObject *text = PyObject_Str(value);
    if (text == NULL) {
        PyErr_Clear();
        return ST_UNHANDLED;
    }
    st = put_string_field(b, 0x0a, text);
    Py_DECREF(text);
    return st;
}

static int put_key_value(outbuf_t *b, PyObject *key, PyObject *value, int depth);

/* The AnyValue that _any_value(value, out, depth) leaves in `out` (nothing for None). */
static int
put_any_value(outbuf_t *b, PyObject *value, int depth)
{
    Py_ssize_t mark, i;
    int st;

    if (PyUnicode_Check(value)) {
        return put_string_field(b, 0x0a, value);
    }
    if (PyBool_Check(value)) {
        return outbuf_put(b, value == Py_True ? "\x10\x01" : "\x10\x00", 2);
    }
    if (PyLong_Check(value)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return ST_UNHANDLED;
        }
        if (overflow) {
            return put_str_of(b, value);
        }
        if (outbuf_put(b, "\x18", 1) != ST_OK) {
            return ST_ERROR;
        }
        return outbuf_varint(b, (uint64_t)v);
    }
    if (PyFloat_Check(value)) {
        double d = PyFloat_AS_DOUBLE(value);
        uint64_t bits;
        char bytes[9];
        memcpy(&bits, &d, sizeof bits);
        bytes[0] = 0x21;
        for (i = 0; i < 8; i++) {
            bytes[1 + i] = (char)(bits >> (8 * i));
        }
        return outbuf_put(b, bytes, 9);
    }
    if (PyBytes_Check(value) || PyByteArray_Check(value)) {
        const char *data = PyBytes_Check(value) ? PyBytes_AS_STRING(value)
                                                : PyByteArray_AS_STRING(value);
        Py_ssize_t len = PyBytes_Check(value) ? PyBytes_GET_SIZE(value)
                                              : PyByteArray_GET_SIZE(value);
        if (outbuf_put(b, "\x3a", 1) != ST_OK || outbuf_varint(b, (uint64_t)len) != ST_OK) {
            return ST_ERROR;
        }
        return outbuf_put(b, data, len);
    }
    if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        if (depth >= 8) {
            return put_str_of(b, value);
        }
        if (outbuf_open(b, "\x2a", 1, &mark) != ST_OK) {
            return ST_ERROR;
        }
        /* items read by index each time: str() of an item may run code that changes the list */
        for (i = 0; i < PySequence_Fast_GET_SIZE(value); i++) {
            Py_ssize_t item_mark;
            PyObject *item = PySequence_Fast_GET_ITEM(value, i);
            Py_INCREF(item);
            st = outbuf_open(b, "\x0a", 1, &item_mark);
            if (st == ST_OK) {
                st = put_any_value(b, item, depth + 1);
            }
            Py_DECREF(item);
            if (st == ST_OK) {
                st = outbuf_close(b, item_mark);
            }
            if (st != ST_OK) {
                return st;
            }
        }
        return outbuf_close(b, mark);
    }
    if (PyDict_CheckExact(value)) {
        PyObject *items;
        if (depth >= 8) {
            return put_str_of(b, value);
        }
        items = PyDict_Items(value); /* a snapshot: str() of a key may change the dict */
        if (items == NULL) {
            return ST_ERROR;
        }
        st = outbuf_open(b, "\x32", 1, &mark);
        for (i = 0; st == ST_OK && i < PyList_GET_SIZE(items); i++) {
            PyObject *pair = PyList_GET_ITEM(items, i), *key;
            Py_ssize_t entry;
            key = PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0))
                      ? Py_NewRef(PyTuple_GET_ITEM(pair, 0))
                      : PyObject_Str(PyTuple_GET_ITEM(pair, 0));
            if (key == NULL) {
                PyErr_Clear();
                st = ST_UNHANDLED;
                break;
            }
            st = outbuf_open(b, "\x0a", 1, &entry);
            if (st == ST_OK) {
                st = put_key_value(b, key, PyTuple_GET_ITEM(pair, 1), depth + 1);
            }
            Py_DECREF(key);
            if (st == ST_OK) {
                st = outbuf_close(b, entry);
            }
        }
        if (st == ST_OK && PyList_GET_SIZE(items) != PyDict_GET_SIZE(value)) {
            st = ST_UNHANDLED; /* changed while read: Python's iteration raises */
        }
        Py_DECREF(items);
        return st == ST_OK ? outbuf_close(b, mark) : st;
    }
    if (value == Py_None) {
        return ST_OK;
    }
    return ST_UNHANDLED; /* str(value) for other types: left to the Python code */
}

/* A KeyValue's fields: the key unless empty, the value unless it encodes to nothing. */
static int
put_key_value(outbuf_t *b, PyObject *key, PyObject *value, int depth)
{
    Py_ssize_t mark;
    int st;

    if (PyUnicode_GET_LENGTH(key) > 0) {
        st = put_string_field(b, 0x0a, key);
        if (st != ST_OK) {
            return st;
        }
    }
    if (outbuf_open(b, "\x12", 1, &mark) != ST_OK) {
        return ST_ERROR;
    }
    st = put_any_value(b, value, depth);
    if (st != ST_OK) {
        return st;
    }
    if (b->n == mark) { /* an absent value: no field */
        b->n -= 1 + LENGTH_ROOM;
        return ST_OK;
    }
    return outbuf_close(b, mark);
}

PyDoc_STRVAR(encode_key_values_doc,
"encode_key_values($module, attributes, tag, /)\n"
"--\n"
"\n"
"The protobuf encoding of `attributes` (a dict of str keys) as entries of the repeated KeyValue\n"
"field whose tag is `tag` (bytes: the field number with wire type 2, as a varint), as\n"
"tracehound.server._otlp.set_attributes would add them. None for anything it does not encode\n"
"exactly that way (see the C source); the caller then uses the field API.");

/* A value put_any_value encodes without running Python code (no str(), no __index__). */
static inline int
is_plain_value(PyObject *value)
{
    return PyUnicode_Check(value) || PyLong_CheckExact(value) || PyBool_Check(value) ||
           PyFloat_Check(value) || PyBytes_Check(value);
}

/* The KeyValue of `key` and `value` as field `tag`, appended to b. */
static int
put_tagged_key_value(outbuf_t *b, PyObject *key, PyObject *value, const char *tag,
                     Py_ssize_t tag_len)
{
    Py_ssize_t mark;
    int st;
    if (!PyUnicode_Check(key)) {
        return ST_UNHANDLED;
    }
    st = outbuf_open(b, tag, tag_len, &mark);
    if (st == ST_OK) {
        st = put_key_value(b, key, value, 0);
    }
    if (st == ST_OK) {
        st = outbuf_close(b, mark);
    }
    return st;
}

/* The KeyValues of the exact dict `attributes`, each as field `tag`, appended to b. */
static int
put_key_values(outbuf_t *b, PyObject *attributes, const char *tag, Py_ssize_t tag_len)
{
    PyObject *key, *value, *items;
    Py_ssize_t i, pos = 0;
    int st = ST_OK, plain = 1;

    /* The usual dict (str keys; str, int, float, bool or bytes values) is read in place:
     * encoding such values runs no Python code, so nothing can change the dict meanwhile. */
    while (PyDict_Next(attributes, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !is_plain_value(value)) {
            plain = 0;
            break;
        }
    }
    if (plain) {
        pos = 0;
        while (st == ST_OK && PyDict_Next(attributes, &pos, &key, &value)) {
            st = put_tagged_key_value(b, key, value, tag, tag_len);
        }
        return st;
    }
    items = PyDict_Items(attributes); /* a snapshot: str() of a value may change the dict */
    if (items == NULL) {
        return ST_ERROR;
    }
    for (i = 0; st == ST_OK && i < PyList_GET_SIZE(items); i++) {
        key = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        value = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        st = put_tagged_key_value(b, key, value, tag, tag_len);
    }
    if (st == ST_OK && PyList_GET_SIZE(items) != PyDict_GET_SIZE(attributes)) {
        st = ST_UNHANDLED;
    }
    Py_DECREF(items);
    return st;
}

static PyObject *
encode_key_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *attributes, *tag;
    outbuf_t b = {NULL, 0, 0};
    int st;

    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "encode_key_values() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    attributes = args[0];
    tag = args[1];
    if (!PyBytes_Check(tag) || PyBytes_GET_SIZE(tag) < 1 || PyBytes_GET_SIZE(tag) > 5) {
        PyErr_SetString(PyExc_TypeError, "encode_key_values() tag must be 1 to 5 bytes");
        return NULL;
    }
    if (!PyDict_CheckExact(attributes)) {
        Py_RETURN_NONE;
    }
    st = put_key_values(&b, attributes, PyBytes_AS_STRING(tag), PyBytes_GET_SIZE(tag));
    return outbuf_finish(&b, st);
}

/* --- encode_log_record ----------------------------------------------------------------------- */

PyDoc_STRVAR(encode_log_record_doc,
"encode_log_record($module, attributes, trace_id, span_id, time_ns, parts, framed, /)\n"
"--\n"
"\n"
"A serialized LogRecord, fields in number order as upb writes them: time_unix_nano (fixed64,\n"
"left out when 0), parts[1] (the severity fields), the KeyValues of `attributes` as field\n"
"parts[0] (a tag, as encode_key_values writes them), parts[2] (the flags field), trace_id and\n"
"span_id (fields 9 and 10, from 32 and 16 hex digits), observed_time_unix_nano (fixed64, left\n"
"out when 0) and parts[3] (the event_name field). With `framed`, the record comes as a\n"
"ScopeLogs.log_records field (tag 0x12 and its length) to join into a ScopeLogs.\n"
"\n"
"None when encode_key_values(attributes, parts[0]) would be None, for ids that are not that\n"
"many hex digits, or a time outside 0..2**64-1. Raises TypeError for `parts` that is not a\n"
"4-tuple of bytes (a tag of 1 to 5 bytes first).");

static PyObject *
encode_log_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *attributes, *parts, *tag;
    outbuf_t b = {NULL, 0, 0};
    uint8_t ids[2 + 16 + 2 + 8];
    uint64_t time_ns;
    Py_ssize_t i, mark = 0;
    int st = ST_OK, framed;

    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "encode_log_record() takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    attributes = args[0];
    parts = args[4];
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 4) {
        PyErr_SetString(PyExc_TypeError, "encode_log_record() parts must be a 4-tuple of bytes");
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(parts, i))) {
            PyErr_SetString(PyExc_TypeError,
                            "encode_log_record() parts must be a 4-tuple of bytes");
            return NULL;
        }
    }
    tag = PyTuple_GET_ITEM(parts, 0);
    if (PyBytes_GET_SIZE(tag) < 1 || PyBytes_GET_SIZE(tag) > 5) {
        PyErr_SetString(PyExc_TypeError, "encode_log_record() tag must be 1 to 5 bytes");
        return NULL;
    }
    framed = PyObject_IsTrue(args[5]);
    if (framed < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(attributes) || !PyLong_Check(args[3])) {
        Py_RETURN_NONE;
    }
    switch (fixed64_of(args[3], &time_ns)) {
    case -1:
        return NULL;
    case 0:
        Py_RETURN_NONE;
    }
    ids[0] = 0x4a;
    ids[1] = 16;
    ids[18] = 0x52;
    ids[19] = 8;
    if (!hex_bytes(args[1], ids + 2, 16) || !hex_bytes(args[2], ids + 20, 8)) {
        Py_RETURN_NONE;
    }
    if (framed) {
        st = outbuf_open(&b, "\x12", 1, &mark);
    }
    if (st == ST_OK && time_ns) {
        st = outbuf_fixed64(&b, 0x09, time_ns);
    }
    if (st == ST_OK) {
        st = outbuf_put(&b, PyBytes_AS_STRING(PyTuple_GET_ITEM(parts, 1)),
                        PyBytes_GET_SIZE(PyTuple_GET_ITEM(parts, 1)));
    }
    if (st == ST_OK) {
        st = put_key_values(&b, attributes, PyBytes_AS_STRING(tag), PyBytes_GET_SIZE(tag));
    }
    if (st == ST_OK) {
        st = outbuf_put(&b, PyBytes_AS_STRING(PyTuple_GET_ITEM(parts, 2)),
                        PyBytes_GET_SIZE(PyTuple_GET_ITEM(parts, 2)));
    }
    if (st == ST_OK) {
        st = outbuf_put(&b, ids, sizeof(ids));
    }
    if (st == ST_OK && time_ns) {
        st = outbuf_fixed64(&b, 0x59, time_ns);
    }
    if (st == ST_OK) {
        st = outbuf_put(&b, PyBytes_AS_STRING(PyTuple_GET_ITEM(parts, 3)),
                        PyBytes_GET_SIZE(PyTuple_GET_ITEM(parts, 3)));
    }
    if (st == ST_OK && framed) {
        st = outbuf_close(&b, mark);
    }
    return outbuf_finish(&b, st);
}

/* --- configure ------------------------------------------------------------------------------ */

typographic_table tracehound_typographic; /* empty (n 0, filter 0) until configure() */

/* The table of the characters of `chars` (an exact str), checked: 0, or -1 with ValueError or
 * TypeError set. */
static int
typographic_from(PyObject *chars, typographic_table *out)
{
    Py_ssize_t n, i;
    int kind;
    const void *data;

    if (!PyUnicode_CheckExact(chars)) {
        PyErr_Format(PyExc_TypeError, "configure(): typographic must be a str, not %.100s",
                     Py_TYPE(chars)->tp_name);
        return -1;
    }
    if (PyUnicode_READY(chars) < 0) {
        return -1;
    }
    n = PyUnicode_GET_LENGTH(chars);
    if (n > TYPOGRAPHIC_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "configure(): typographic has %zd characters; the tokenizer takes at most %d",
                     n, TYPOGRAPHIC_MAX);
        return -1;
    }
    kind = PyUnicode_KIND(chars);
    data = PyUnicode_DATA(chars);
    memset(out, 0, sizeof(*out));
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        char name[16];
        (void)snprintf(name, sizeof(name), "U+%04X", (unsigned)c);
        if (c < 0x80 || c > 0xffff) {
            PyErr_Format(PyExc_ValueError,
                         "configure(): typographic character %s is %s; the tokenizer takes "
                         "non-ASCII characters of the Basic Multilingual Plane only",
                         name, c < 0x80 ? "ASCII" : "outside the BMP");
            return -1;
        }
        if (Py_UNICODE_ISALNUM(c)) {
            PyErr_Format(PyExc_ValueError,
                         "configure(): typographic character %s is a letter or digit; the "
                         "tokenizer takes separators only",
                         name);
            return -1;
        }
        out->chars[out->n] = c;
        out->space[out->n] = Py_UNICODE_ISSPACE(c) ? 1 : 0;
        out->n++;
        out->filter |= (uint64_t)1 << (c & 63);
    }
    return 0;
}
PyDoc_STRVAR(configure_doc,
"configure($module, typographic, /)\n"
"--\n"
"\n"
"Give the module the constant Python owns; tracehound._accel calls it once, at first use.\n"
"\n"
"typographic: the characters of tracehound.text._TYPOGRAPHIC, which the tokenizer's ASCII\n"
"path takes as separators (at most 32, non-ASCII, in the BMP, no letter or digit); until\n"
"configured the table is empty, and the text kernels decline every text holding a non-ASCII\n"
"character. Raises ValueError or TypeError for a table that does not fit, changing nothing.\n"
"Calling it again replaces the table.");

static PyObject *
configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    typographic_table typographic;

    (void)module;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "configure() takes 1 argument (%zd given)", nargs);
        return NULL;
    }
    if (typographic_from(args[0], &typographic) < 0) {
        return NULL;
    }
    tracehound_typographic = typographic;
    Py_RETURN_NONE;
}

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef speedups_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL, configure_doc},
    {"decode_key_values", (PyCFunction)(void (*)(void))decode_key_values, METH_FASTCALL,
     decode_key_values_doc},
    {"scan_trace_request", (PyCFunction)(void (*)(void))scan_trace_request, METH_FASTCALL,
     scan_trace_request_doc},
    {"trace_request_schema", trace_request_schema, METH_NOARGS, trace_request_schema_doc},
    {"encode_key_values", (PyCFunction)(void (*)(void))encode_key_values, METH_FASTCALL,
     encode_key_values_doc},
    {"encode_log_record", (PyCFunction)(void (*)(void))encode_log_record, METH_FASTCALL,
     encode_log_record_doc},
    {NULL, NULL, 0, NULL},
};

/* VALIDATES: scan_trace_request takes `validate` (the Python side checks for it). */
static int
speedups_exec(PyObject *module)
{
    Py_INCREF(Py_True);
    if (PyModule_AddObject(module, "VALIDATES", Py_True) < 0) {
        Py_DECREF(Py_True);
        return -1;
    }
    if (PyModule_GetState(module) == NULL) {
        PyErr_SetString(PyExc_SystemError, "tracehound._speedups: no module state");
        return -1;
    }
    if (tracehound_add_embed(module) < 0 || tracehound_add_evidence(module) < 0 ||
        tracehound_add_otlp(module) < 0) {
        return -1;
    }
    return 0;
}

static int
speedups_clear(PyObject *module)
{
    speedups_state *s = PyModule_GetState(module);
    size_t i;

    if (s != NULL) {
        for (i = 0; i < KEY_CACHE_SIZE; i++) {
            Py_CLEAR(s->keys.slot[i]);
        }
    }
    return 0;
}

static void
speedups_free(void *module)
{
    (void)speedups_clear((PyObject *)module);
}

static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, (void *)speedups_exec},
    {0, NULL},
};

PyDoc_STRVAR(speedups_doc,
"C kernels of tracehound: OTLP protobuf reading, splicing and writing, the evidence index\n"
"and the drift embedding's hashing.\n"
"\n"
"They read the protobuf wire bytes directly instead of going through upb's per-field Python\n"
"wrappers. The Python code is the reference: each function returns exactly what it returns,\n"
"or None for input it does not handle exactly, and the caller then falls back to the Python\n"
"path (tracehound._accel lists each kernel with its reference). This module is optional;\n"
"tracehound works without it.");

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "tracehound._speedups", /* m_name */
    speedups_doc,           /* m_doc */
    sizeof(speedups_state), /* m_size */
    speedups_methods,       /* m_methods */
    speedups_slots,         /* m_slots: multi-phase initialization */
    NULL,                   /* m_traverse: the state holds only strings (no cycles) */
    speedups_clear,         /* m_clear */
    speedups_free,          /* m_free */
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
