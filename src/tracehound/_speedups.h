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
