/* The protobuf wire reader shared by the OTLP sources of tracehound._speedups (_speedups.c and
 * _speedups_otlp.c): one field at a time, refusing what upb refuses; and the growing byte buffer
 * the encoders write protobuf into, with the ids they read from hex (_speedups.c). */
#ifndef TRACEHOUND_SPEEDUPS_WIRE_H
#define TRACEHOUND_SPEEDUPS_WIRE_H

#include <stdint.h>
#include <string.h>

/* One field read off the wire. */
typedef struct {
    uint32_t num;        /* field number, >= 1 */
    uint32_t wt;         /* wire type: 0, 1, 2 or 5 */
    uint64_t val;        /* wire types 0, 1, 5 */
    const uint8_t *ptr;  /* wire type 2: the payload */
    size_t len;          /* wire type 2: its length */
} field_t;

/* A varint of at most 10 bytes; bits beyond 64 are dropped (as upb does). NULL if malformed. */
static inline const uint8_t *
read_varint_slow(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 10; i++) {
        uint64_t b;
        if (p >= end) {
            return NULL;
        }
        b = *p++;
        v |= (b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return p;
        }
    }
    return NULL;
}

static inline const uint8_t *
read_varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    if (p < end && *p < 0x80) {
        *out = *p;
        return p + 1;
    }
    return read_varint_slow(p, end, out);
}

static inline uint64_t
load_le64(const uint8_t *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
           ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
           ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static inline uint64_t
load_le32(const uint8_t *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
           ((uint64_t)p[3] << 24);
}

/*
 * Read one field (tag and value) starting at p < end. Returns the position after it, or NULL
 * for malformed data: a bad or over-long tag (more than 5 bytes or above 32 bits, as upb),
 * field number 0, groups and reserved wire types, a bad varint, a value past the end.
 */
static inline const uint8_t *
read_field(const uint8_t *p, const uint8_t *end, field_t *f)
{
    uint64_t tag, n;
    if (*p < 0x80) {
        tag = *p++;
    }
    else {
        const uint8_t *q = read_varint_slow(p, end, &tag);
        if (q == NULL || q - p > 5 || tag > UINT32_MAX) {
            return NULL;
        }
        p = q;
    }
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    f->ptr = NULL;
    f->len = 0;
    if (f->num == 0) {
        return NULL;
    }
    switch (f->wt) {
    case 0:
        return read_varint(p, end, &f->val);
    case 1:
        if (end - p < 8) {
            return NULL;
        }
        f->val = load_le64(p);
        return p + 8;
    case 2:
        p = read_varint(p, end, &n);
        if (p == NULL || n > (uint64_t)(end - p)) {
            return NULL;
        }
        f->val = n;
        f->ptr = p;
        f->len = (size_t)n;
        return p + n;
    case 5:
        if (end - p < 4) {
            return NULL;
        }
        f->val = load_le32(p);
        return p + 4;
    default: /* 3, 4: groups; 6, 7: invalid */
        return NULL;
    }
}

/* Tables of the wire type of each known field, by field number; WT_UNKNOWN for field numbers
 * the message does not define (such fields are skipped). WRONG_WT: a known field arrived with
 * another wire type (upb would treat it as an unknown field; here it makes the answer None). */
#define WT_UNKNOWN (-1)
#define WRONG_WT(table, f) \
    ((f).num < sizeof(table) / sizeof((table)[0]) && (table)[(f).num] != WT_UNKNOWN && \
     (table)[(f).num] != (int8_t)(f).wt)

/* --- reading strings (the callers include Python.h and _speedups.h first) ------------------- */

/* PyUnicode_DecodeUTF8(data, len, NULL), faster for text with a little non-ASCII (_speedups.c). */
PyObject *tracehound_decode_utf8(const char *data, Py_ssize_t len);

/* --- writing: a growing byte buffer (the callers include Python.h and _speedups.h first) --- */

typedef struct {
    char *data;
    Py_ssize_t n, cap;
} outbuf_t;

static inline int
outbuf_reserve(outbuf_t *b, Py_ssize_t more)
{
    Py_ssize_t need = b->n + more, cap;
    char *grown;
    if (need <= b->cap) {
        return ST_OK;
    }
    cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return ST_ERROR;
        }
        cap *= 2;
    }
    grown = PyMem_Realloc(b->data, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return ST_ERROR;
    }
    b->data = grown;
    b->cap = cap;
    return ST_OK;
}

static inline int
outbuf_put(outbuf_t *b, const void *data, Py_ssize_t len)
{
    if (len == 0) {
        return ST_OK;
    }
    if (outbuf_reserve(b, len) != ST_OK) {
        return ST_ERROR;
    }
    memcpy(b->data + b->n, data, (size_t)len);
    b->n += len;
    return ST_OK;
}

static inline int
outbuf_varint(outbuf_t *b, uint64_t value)
{
    char bytes[10];
    Py_ssize_t n = 0;
    while (value > 0x7f) {
        bytes[n++] = (char)((value & 0x7f) | 0x80);
        value >>= 7;
    }
    bytes[n++] = (char)value;
    return outbuf_put(b, bytes, n);
}

/* Start a length-delimited field: its tag, then room for the length, which outbuf_close fills
 * once the payload is written (moving the payload back when the length takes fewer bytes). */
#define LENGTH_ROOM 5

static inline int
outbuf_open(outbuf_t *b, const char *tag, Py_ssize_t tag_len, Py_ssize_t *mark)
{
    if (outbuf_put(b, tag, tag_len) != ST_OK || outbuf_reserve(b, LENGTH_ROOM) != ST_OK) {
        return ST_ERROR;
    }
    b->n += LENGTH_ROOM;
    *mark = b->n;
    return ST_OK;
}

static inline int
outbuf_close(outbuf_t *b, Py_ssize_t mark)
{
    Py_ssize_t len = b->n - mark, k = 0;
    uint64_t value = (uint64_t)len;
    char bytes[LENGTH_ROOM];
    if (len > 0xffffffffLL / 2) { /* protobuf's limit for a length (2 GiB) */
        return ST_UNHANDLED;
    }
    while (value > 0x7f) {
        bytes[k++] = (char)((value & 0x7f) | 0x80);
        value >>= 7;
    }
    bytes[k++] = (char)value;
    memcpy(b->data + mark - LENGTH_ROOM, bytes, (size_t)k);
    if (k < LENGTH_ROOM) {
        memmove(b->data + mark - LENGTH_ROOM + k, b->data + mark, (size_t)len);
        b->n -= LENGTH_ROOM - k;
    }
    return ST_OK;
}

/* What an encoder answers once done with `b` (freed here): its bytes for ST_OK, None for
 * ST_UNHANDLED (the caller takes the Python path), NULL with the exception set for ST_ERROR. */
static inline PyObject *
outbuf_finish(outbuf_t *b, int st)
{
    PyObject *out = NULL;
    if (st == ST_OK) {
        out = PyBytes_FromStringAndSize(b->data != NULL ? b->data : "", b->n);
    }
    else if (st == ST_UNHANDLED) {
        out = Py_NewRef(Py_None);
    }
    PyMem_Free(b->data);
    b->data = NULL;
    return out;
}

/* A fixed64 field: its one-byte tag, then the value little-endian. */
static inline int
outbuf_fixed64(outbuf_t *b, char tag, uint64_t v)
{
    char bytes[9];
    int i;
    bytes[0] = tag;
    for (i = 0; i < 8; i++) {
        bytes[1 + i] = (char)(v >> (8 * i));
    }
    return outbuf_put(b, bytes, 9);
}

/* Each hex digit's value plus 1 (0: not a hex digit). */
static const uint8_t HEX_DIGIT[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
    ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* n bytes from 2n hex digits (either case) of the str s; 0 unless s is exactly that. */
static inline int
hex_bytes(PyObject *s, uint8_t *out, Py_ssize_t n)
{
    const Py_UCS1 *p;
    Py_ssize_t i;
    if (!PyUnicode_Check(s) || PyUnicode_KIND(s) != PyUnicode_1BYTE_KIND ||
        PyUnicode_GET_LENGTH(s) != 2 * n) {
        return 0;
    }
    p = PyUnicode_1BYTE_DATA(s);
    for (i = 0; i < n; i++) {
        int high = HEX_DIGIT[p[2 * i]], low = HEX_DIGIT[p[2 * i + 1]];
        if (!high || !low) {
            return 0;
        }
        out[i] = (uint8_t)((high - 1) << 4 | (low - 1));
    }
    return 1;
}

/* An int's value as a fixed64 (a time in ns) into *out: 1, or 0 if it is negative or too
 * large (no exception set), or -1 on another error. */
static inline int
fixed64_of(PyObject *value, uint64_t *out)
{
    *out = PyLong_AsUnsignedLongLong(value);
    if (*out == (uint64_t)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    return 1;
}

#endif
