/* tracehound._speedups: text functions (see _speedups.h). */
#include "_speedups.h"

static PyMethodDef text_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_text(PyObject *module)
{
    return PyModule_AddFunctions(module, text_methods);
}
