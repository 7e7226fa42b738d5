/* native_thread.c - libnative_thread.so: allocate from a thread that runs no
 * Python while the caller waits for it, as loss.backward() waits for
 * PyTorch's autograd engine. python_frames.py calls it through ctypes. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>

static void *allocate(void *size)
{
    void *pointer = NULL;
    return cudaMalloc(&pointer, *(size_t *)size) == cudaSuccess ? pointer : NULL;
}

__attribute__((visibility("default"))) void *allocate_in_native_thread(size_t size)
{
    pthread_t thread;
    void *pointer = NULL;
    if (pthread_create(&thread, NULL, allocate, &size) != 0)
        return NULL;
    pthread_join(thread, &pointer);
    return pointer;
}
