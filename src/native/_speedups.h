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

int tracehound_add_drift(PyObject *module);
int tracehound_add_embed(PyObject *module);
int tracehound_add_evidence(PyObject *module);
int tracehound_add_otlp(PyObject *module);
int tracehound_add_text(PyObject *module);

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
