/* tracehound._speedups: embed functions (see _speedups.h). */
#include "_speedups.h"

static PyMethodDef embed_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_embed(PyObject *module)
{
    return PyModule_AddFunctions(module, embed_methods);
}
