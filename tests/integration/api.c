/* api.c - the optional public API, found at run time so the program also runs
 * untraced: a mark, and a snapshot to a path of the program's choosing. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int (*snapshot)(const char *) =
        (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
    void (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_mark");
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "cumemtrace_version");
    void *a, *b;
    cudaMalloc(&a, 1 << 20);
    if (mark)
        mark("after the first block");
    cudaMalloc(&b, 2 << 20);
    int status = snapshot && argc > 1 ? snapshot(argv[1]) : -2;
    printf("tracer %s, snapshot %d\n", version ? version() : "absent", status);
    /* The tracer's unwinder stays private: C++ exceptions of the program must
     * not move to libunwind's _Unwind_* functions. */
    Dl_info info;
    void *raise_exception = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
    printf("_Unwind_RaiseException from %s\n",
           raise_exception && dladdr(raise_exception, &info) ? info.dli_fname : "nowhere");
    cudaFree(b);
    return 0;
}
