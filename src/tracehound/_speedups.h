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

int tracehound_add_embed(PyObject *module);
int tracehound_add_evidence(PyObject *module);
int tracehound_add_text(PyObject *module);

#endif
