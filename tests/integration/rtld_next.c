/* rtld_next.c - calls getpid through the interposer in rtld_next_lib.c. */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    pid_t pid = getpid();
    printf("getpid %s\n", pid == (pid_t)syscall(SYS_getpid) ? "ok" : "wrong");
    return pid == (pid_t)syscall(SYS_getpid) ? 0 : 1;
}
