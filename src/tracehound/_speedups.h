/* Shared declarations of the tracehound._speedups sources.
 *
 * The module is one extension built from several C files, one per area. _speedups.c holds
 * the OTLP protobuf paths and the module definition; each other file adds its functions to the
 * module from speedups_exec through its tracehound_add_* function (0 on success, -1 with an
 * exception set). */
#ifndef TRACEHOUND_SPEEDUPS_H
#define TRACEHOUND_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* For the few small functions of the hot loops that must be inlined. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Status codes of the internal functions. */
#define ST_OK 0
#define ST_ERROR (-1)  /* a Python exception is set */
#define ST_UNHANDLED 1 /* no exception set: the caller gets None (or takes its Python path) */

int tracehound_add_core(PyObject *module);
int tracehound_add_drift(PyObject *module);
int tracehound_add_embed(PyObject *module);
int tracehound_add_engine(PyObject *module);
int tracehound_add_evidence(PyObject *module);
int tracehound_add_otlp(PyObject *module);
int tracehound_add_steps(PyObject *module);
int tracehound_add_text(PyObject *module);

/* json_loads and convert_messages of _speedups.c (their Python signatures), for the other
 * files: a new reference (None when unhandled), or NULL with an exception set. */
PyObject *tracehound_json_loads(PyObject *module, PyObject *text);
PyObject *tracehound_convert_messages(PyObject *module, PyObject *data, PyObject *part_type,
                                      PyObject *message_type);

/* steps_from_drafts(cls, drafts, None, default_run) of _speedups.c (its Python signature). */
PyObject *tracehound_steps_from_drafts(PyObject *module, PyObject *cls, PyObject *drafts,
                                       PyObject *default_run);

/* Attribute access of slotted classes (the dataclasses of spans and steps) by the slot's
 * offset: one cache entry per attribute name and call site, for the class it last saw (held
 * by a strong reference, checked by its version tag). Anything else (a class without such a
 * slot, an unset slot, another class) takes PyObject_GetAttr / PyObject_SetAttr. */
typedef struct {
    PyTypeObject *type;
    unsigned int tag;
    Py_ssize_t offset; /* 0: no slot of that name */
} slot_cache;

/* obj.<name>: a new reference, or NULL with an exception set. */
PyObject *tracehound_slot_get(slot_cache *cache, PyObject *obj, PyObject *name);
/* obj.<name> = value: 0, or -1 with an exception set. */
int tracehound_slot_set(slot_cache *cache, PyObject *obj, PyObject *name, PyObject *value);

/* The messages of `text`, a JSON array of messages, as convert_messages(json_loads(text))
 * makes them (None when either would not answer), reusing those of the text before: `memo`
 * is [text, messages, end offsets] of the last text converted, updated to this one. The
 * messages that text ended within the prefix both texts share are taken as they are. */
PyObject *tracehound_messages_from_json(PyObject *module, PyObject *text, PyObject *part_type,
                                        PyObject *message_type, PyObject *memo);

/* tracehound_messages_from_json for the UTF-8 bytes of the text (data[0:len]), as an attribute
 * value arrives on the wire: the same messages as for the decoded str, without decoding it
 * (only the strings the messages hold are); None too for invalid UTF-8. The memo's text is
 * then a bytes copy; `memo` None: no memo. */
PyObject *tracehound_messages_from_utf8(PyObject *module, const char *data, Py_ssize_t len,
                                        PyObject *part_type, PyObject *message_type,
                                        PyObject *memo);

/* A string value located in the wire bytes, not decoded (ptr NULL: none). */
typedef struct {
    const uint8_t *ptr;
    Py_ssize_t len;
} tracehound_wire_str;

/* The attributes of the serialized Span in [p, end), as decode_key_values(data, start, end, 9)
 * decodes them (*out, a new dict), except for the top-level attributes whose key is one of the
 * n_lazy ASCII strings `lazy` and whose value is a string_value: None stands in the dict for
 * such a value, which is located in located[k] (ptr NULL when the key is absent or its value
 * is of another type) and not checked as UTF-8. *has_events: whether the span has a field 11
 * (events). ST_OK, ST_UNHANDLED where decode_key_values answers None, or ST_ERROR. */
int tracehound_span_attributes(PyObject *module, const uint8_t *p, const uint8_t *end,
                               int n_lazy, const char *const *lazy,
                               tracehound_wire_str *located, int *has_events, PyObject **out);

/* A span's times and status as upb reads them from its bytes: the last occurrence of each
 * field of the expected wire type (others are unknown fields to upb); occurrences of Status
 * merged field by field. has_* 0: the field never occurs (upb's default then). */
typedef struct {
    int has_start, has_end, has_code, has_message, status_ok;
    uint64_t start, end;
    int32_t code; /* the enum as upb stores it: an int32 */
    tracehound_wire_str message;
} tracehound_span_fields;

/* The span's times and status from its bytes [p, end); ST_OK, or ST_UNHANDLED for malformed
 * data. */
int tracehound_span_fields_of(const uint8_t *p, const uint8_t *end,
                              tracehound_span_fields *fields);

/* Is the non-ASCII character c one of the typographic characters of tracehound.text's
 * _TYPOGRAPHIC? The tokenizer's ASCII path takes them (as separators), and so does text_units. */
static inline int
is_typographic(Py_UCS4 c)
{
    switch (c) {
    case 0x00a0: /* no-break space */
    case 0x2013: /* en dash */
    case 0x2014: /* em dash */
    case 0x2018: /* left single quotation mark */
    case 0x2019: /* right single quotation mark */
    case 0x201c: /* left double quotation mark */
    case 0x201d: /* right double quotation mark */
    case 0x2026: /* horizontal ellipsis */
        return 1;
    default:
        return 0;
    }
}

#endif
