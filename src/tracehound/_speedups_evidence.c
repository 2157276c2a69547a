/* tracehound._speedups: evidence functions (see _speedups.h). */
#include "_speedups.h"

static PyMethodDef evidence_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_evidence(PyObject *module)
{
    return PyModule_AddFunctions(module, evidence_methods);
}
