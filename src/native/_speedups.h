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

#include <stdint.h>

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

int tracehound_add_embed(PyObject *module);
int tracehound_add_evidence(PyObject *module);
int tracehound_add_otlp(PyObject *module);

/* The typographic characters of tracehound.text._TYPOGRAPHIC, which the tokenizer's ASCII path
 * takes as separators (as the evidence index and the hashing embedder read it): given by
 * tracehound._accel through configure() (_speedups.c), which checks them (non-ASCII BMP
 * characters, no letter or digit, at most TYPOGRAPHIC_MAX). Empty until then, so that every
 * text holding a non-ASCII character is declined (ASCII texts do not depend on the table). One
 * table for the process: plain characters, no Python objects; written with the GIL held, read
 * by kernels that hold it. */
#define TYPOGRAPHIC_MAX 32
typedef struct {
    uint64_t filter; /* bit (c & 63) set for each character c of the table */
    int n;
    Py_UCS4 chars[TYPOGRAPHIC_MAX];
    unsigned char space[TYPOGRAPHIC_MAX]; /* str.isspace(): \s and str.strip() take it */
} typographic_table;
extern typographic_table tracehound_typographic;

#define TYPO_SEPARATOR 1 /* typographic, not a space */
#define TYPO_SPACE 2     /* typographic and a space (U+00A0) */

/* Is the non-ASCII character c one of the typographic characters? 0 if not, else TYPO_SPACE
 * or TYPO_SEPARATOR. */
static inline int
is_typographic(Py_UCS4 c)
{
    const typographic_table *t = &tracehound_typographic;
    int i;

    if (!((t->filter >> (c & 63)) & 1)) {
        return 0;
    }
    for (i = 0; i < t->n; i++) {
        if (t->chars[i] == c) {
            return t->space[i] ? TYPO_SPACE : TYPO_SEPARATOR;
        }
    }
    return 0;
}

#endif
