/* native_thread.c - libnative_thread.so: allocate from a thread that runs no
 * Python while the caller waits for it, as loss.backward() waits for
 * PyTorch's autograd engine. python_frames.py calls it through ctypes.
 *
 * allocate_in_native_thread: a plain thread. allocate_in_engine_thread: a
 * thread that, like PyTorch's engine threads, holds a Python thread state
 * it never runs Python in (PyGILState_Ensure, then PyEval_SaveThread). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

static void *allocate(void *size)
{
    void *pointer = NULL;
    return cudaMalloc(&pointer, *(size_t *)size) == cudaSuccess ? pointer : NULL;
}

/* `body(&size)` on a new thread, waited for; what it returned. */
static void *on_new_thread(void *(*body)(void *), size_t size)
{
    pthread_t thread;
    void *pointer = NULL;
    if (pthread_create(&thread, NULL, body, &size) != 0)
        return NULL;
    pthread_join(thread, &pointer);
    return pointer;
}

__attribute__((visibility("default"))) void *allocate_in_native_thread(size_t size)
{
    return on_new_thread(allocate, size);
}

static void *allocate_with_thread_state(void *size)
{
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    void *(*save)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
    void (*restore)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "PyEval_RestoreThread");
    if (!ensure || !release || !save || !restore)
        return NULL;
    int gil = ensure();
    void *state = save(); /* a thread state, and the GIL let go */
    void *pointer = allocate(size);
    restore(state);
    release(gil);
    return pointer;
}

__attribute__((visibility("default"))) void *allocate_in_engine_thread(size_t size)
{
    return on_new_thread(allocate_with_thread_state, size);
}
