/* py_api.c - CPython's C API, found at run time (see py_api.h). */
#include <dlfcn.h>
#include <pthread.h>

#include "host.h"
#include "py_api.h"

struct py_api py;

static int loaded; /* 1 found, -1 not */

static void load(void)
{
    loaded = -1;
    if (!host.lookup)
        return;
    struct {
        void **slot;
        const char *name;
    } symbols[] = {
        {(void **)&py.is_initialized, "Py_IsInitialized"},
        {(void **)&py.gil_ensure, "PyGILState_Ensure"},
        {(void **)&py.gil_release, "PyGILState_Release"},
        {(void **)&py.gil_check, "PyGILState_Check"},
        {(void **)&py.save_thread, "PyEval_SaveThread"},
        {(void **)&py.restore_thread, "PyEval_RestoreThread"},
        {(void **)&py.module_dict, "PyImport_GetModuleDict"},
        {(void **)&py.dict_get, "PyDict_GetItemString"},
        {(void **)&py.get_attr, "PyObject_GetAttrString"},
        {(void **)&py.get_attr_object, "PyObject_GetAttr"},
        {(void **)&py.set_attr_object, "PyObject_SetAttr"},
        {(void **)&py.intern, "PyUnicode_InternFromString"},
        {(void **)&py.call_method, "PyObject_CallMethod"},
        {(void **)&py.call_function, "PyObject_CallFunctionObjArgs"},
        {(void **)&py.call_method_object, "PyObject_CallMethodObjArgs"},
        {(void **)&py.is_true, "PyObject_IsTrue"},
        {(void **)&py.is_instance, "PyObject_IsInstance"},
        {(void **)&py.hash, "PyObject_Hash"},
        {(void **)&py.as_long, "PyLong_AsLong"},
        {(void **)&py.as_unsigned, "PyLong_AsUnsignedLongLong"},
        {(void **)&py.list_size, "PyList_Size"},
        {(void **)&py.list_item, "PyList_GetItem"},
        {(void **)&py.tuple_item, "PyTuple_GetItem"},
        {(void **)&py.bytes_data, "PyBytes_AsStringAndSize"},
        {(void **)&py.get_iter, "PyObject_GetIter"},
        {(void **)&py.iter_next, "PyIter_Next"},
        {(void **)&py.occurred, "PyErr_Occurred"},
        {(void **)&py.exception_matches, "PyErr_ExceptionMatches"},
        {(void **)&py.fetch, "PyErr_Fetch"},
        {(void **)&py.restore, "PyErr_Restore"},
        {(void **)&py.clear, "PyErr_Clear"},
        {(void **)&py.import, "PyImport_ImportModule"},
        {(void **)&py.new_function, "PyCFunction_NewEx"},
        {(void **)&py.capsule_new, "PyCapsule_New"},
        {(void **)&py.capsule_pointer, "PyCapsule_GetPointer"},
        {(void **)&py.capsule_set_context, "PyCapsule_SetContext"},
        {(void **)&py.capsule_context, "PyCapsule_GetContext"},
        {(void **)&py.build_value, "Py_BuildValue"},
        {(void **)&py.incref, "Py_IncRef"},
        {(void **)&py.decref, "Py_DecRef"},
    };
    for (unsigned i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++)
        if (!(*symbols[i].slot = host.lookup(RTLD_DEFAULT, symbols[i].name)))
            return;
    PyObject **memory_error = host.lookup(RTLD_DEFAULT, "PyExc_MemoryError");
    if (!memory_error)
        return;
    py.memory_error = *memory_error;
    /* Public from 3.13, private before; without either, the exit hook tells. */
    py.is_finalizing = (int (*)(void))host.lookup(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!py.is_finalizing)
        py.is_finalizing = (int (*)(void))host.lookup(RTLD_DEFAULT, "_Py_IsFinalizing");
    loaded = 1;
}

int py_api_load(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    return loaded > 0 ? 0 : -1;
}

PyObject *py_attr(PyObject *object, const char *name)
{
    PyObject *value = object ? py.get_attr(object, name) : NULL;
    if (!value && py.occurred())
        py.clear();
    return value;
}

PyObject *py_imported(const char *name)
{
    PyObject *module = py.dict_get(py.module_dict(), name); /* borrowed */
    if (!module)
        return NULL;
    PyObject *spec = py_attr(module, "__spec__");
    PyObject *initializing = py_attr(spec, "_initializing");
    int busy = initializing && py.is_true(initializing) == 1;
    if (py.occurred())
        py.clear();
    py_release(initializing);
    py_release(spec);
    return busy ? NULL : module;
}

void py_release(PyObject *object)
{
    if (object)
        py.decref(object);
}
