/* rtld_next_lib.c - an interposer preloaded after cumemtrace. Its getpid asks
 * dlsym(RTLD_NEXT, "getpid") for the next one. If our dlsym resolved RTLD_NEXT
 * relative to itself instead of its caller, this would find this very getpid
 * and recurse until the stack overflows. */
#include <dlfcn.h>
#include <unistd.h>

pid_t getpid(void)
{
    pid_t (*next)(void) = (pid_t(*)(void))dlsym(RTLD_NEXT, "getpid");
    return next ? next() : -1;
}
