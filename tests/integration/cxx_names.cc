// cxx_names.cc - allocations through C++ functions, in a program with no C++
// runtime: built with g++ but linked as C (no libstdc++), so the traced
// process has no demangler, and its report keeps the names as linked
// (_ZN3app6memory4Pool4grabEm). The command must show them demangled.
//
//   cxx_names exit SNAPSHOT   3 MiB from app::memory::Pool::grab(unsigned long), a
//                             snapshot report at SNAPSHOT, 5 MiB more, then exit
//   cxx_names crash           the same without the snapshot, then SIGSEGV (a crash
//                             dump, for `cumemtrace symbolize`)
//
// Prints whether libstdc++ is mapped after the allocation and after a
// snapshot report: the tracer must not have loaded it.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

namespace app {
namespace memory {

struct Pool {
    void *grab(size_t bytes);
};

__attribute__((noinline)) void *Pool::grab(size_t bytes)
{
    void *p = nullptr;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
}

}  // namespace memory
}  // namespace app

// Whether a file whose name starts with libstdc++ is mapped in this process.
static bool libstdcxx_mapped()
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    bool found = false;
    while (maps && fgets(line, sizeof(line), maps))
        found = found || strstr(line, "/libstdc++") != nullptr;
    if (maps)
        fclose(maps);
    return found;
}

int main(int argc, char **argv)
{
    app::memory::Pool pool;
    void *kept = pool.grab(3 << 20);
    printf("allocated: %s\n", kept ? "yes" : "no");
    printf("libstdc++ after the allocation: %s\n", libstdcxx_mapped() ? "mapped" : "not mapped");
    auto snapshot = (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
    if (snapshot && argc > 2)
        snapshot(argv[2]);
    printf("libstdc++ after a snapshot: %s\n", libstdcxx_mapped() ? "mapped" : "not mapped");
    void *more = pool.grab(5 << 20);    // the stack grows after the snapshot
    printf("allocated again: %s\n", more ? "yes" : "no");
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "crash") == 0)
        raise(SIGSEGV);
    return 0;
}
