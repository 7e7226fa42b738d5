/* py_api.h - the part of CPython's C API the Python bridge uses.
 *
 * The library never links libpython: in a process that hosts Python, these
 * functions are found at run time with the dlsym the interposer lends
 * (host.h), once. Every one is part of the stable ABI of CPython 3.8 and
 * later, so one table serves every version. Calls need the GIL, except
 * those marked. */
#ifndef CUMEMTRACE_PY_API_H
#define CUMEMTRACE_PY_API_H

#include <stdint.h>

typedef struct _object PyObject;
typedef intptr_t py_ssize; /* Py_ssize_t */
typedef intptr_t py_hash;  /* Py_hash_t */

struct py_method_def { /* PyMethodDef */
    const char *name;
    PyObject *(*function)(PyObject *, PyObject *);
    int flags;
    const char *doc;
};
#define PY_METH_O 0x0008
#define PY_METH_NOARGS 0x0004

struct py_api {
    /* Without the GIL. */
    int (*is_initialized)(void);
    int (*is_finalizing)(void); /* NULL where neither name is exported */
    int (*gil_ensure)(void);
    void (*gil_release)(int);
    int (*gil_check)(void);
    void *(*save_thread)(void); /* PyEval_SaveThread: let go of the GIL */
    void (*restore_thread)(void *);
    /* With the GIL. */
    PyObject *(*module_dict)(void);                  /* sys.modules, borrowed */
    PyObject *(*dict_get)(PyObject *, const char *); /* borrowed */
    PyObject *(*get_attr)(PyObject *, const char *);
    PyObject *(*get_attr_object)(PyObject *, PyObject *);
    int (*set_attr_object)(PyObject *, PyObject *, PyObject *);
    PyObject *(*intern)(const char *);
    PyObject *(*call_method)(PyObject *, const char *, const char *, ...);
    PyObject *(*call_function)(PyObject *, ...);                  /* PyObject_CallFunctionObjArgs */
    PyObject *(*call_method_object)(PyObject *, PyObject *, ...); /* ...MethodObjArgs */
    int (*is_true)(PyObject *);
    int (*is_instance)(PyObject *, PyObject *);
    py_hash (*hash)(PyObject *);
    long (*as_long)(PyObject *);
    unsigned long long (*as_unsigned)(PyObject *);
    py_ssize (*list_size)(PyObject *);
    PyObject *(*list_item)(PyObject *, py_ssize);       /* borrowed */
    PyObject *(*tuple_item)(PyObject *, py_ssize);      /* borrowed */
    int (*bytes_data)(PyObject *, char **, py_ssize *); /* PyBytes_AsStringAndSize */
    PyObject *(*get_iter)(PyObject *);
    PyObject *(*iter_next)(PyObject *);
    PyObject *(*occurred)(void);
    int (*exception_matches)(PyObject *);
    void (*fetch)(PyObject **, PyObject **, PyObject **);
    void (*restore)(PyObject *, PyObject *, PyObject *);
    void (*clear)(void);
    PyObject *(*import)(const char *);
    PyObject *(*new_function)(struct py_method_def *, PyObject *, PyObject *);
    PyObject *(*capsule_new)(void *, const char *, void (*)(PyObject *));
    void *(*capsule_pointer)(PyObject *, const char *);
    int (*capsule_set_context)(PyObject *, void *);
    void *(*capsule_context)(PyObject *);
    PyObject *(*build_value)(const char *, ...);
    void (*incref)(PyObject *);
    void (*decref)(PyObject *);
    PyObject *memory_error; /* PyExc_MemoryError */
};

extern struct py_api py;

/* Find them all, once (any thread, no GIL). 0 if this process hosts a
 * Python with every one of them, -1 otherwise. */
int py_api_load(void);

/* With the GIL: x.name, or NULL with no exception left. */
PyObject *py_attr(PyObject *object, const char *name);
/* With the GIL: sys.modules[name], borrowed, once its import has finished
 * (a module whose import is under way is in sys.modules already, and would
 * undo what we do to it); NULL if not there. Never imports. */
PyObject *py_imported(const char *name);
void py_release(PyObject *object); /* Py_DecRef that takes NULL */

#endif
