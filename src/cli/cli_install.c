/* cli_install.c - where the command finds the rest of its installation.
 *
 * The command, the library and the Python packages are installed together
 * in one of three layouts, each found from the command's own path:
 *   a build tree      build/cumemtrace, build/libcumemtrace.so, the source
 *                     tree's python/ (the build knows where its sources are)
 *   cmake --install   P/bin/cumemtrace, P/lib/libcumemtrace.so,
 *                     P/share/cumemtrace/python, P/share/cumemtrace/torch_tracker
 *   pip install       the same, under the Python package (cumemtrace/_prefix)
 * The Python side (python/cumemtrace/torch_tracker.py) finds and builds the
 * PyTorch tracker; the command runs it with the traced program's Python,
 * as a script, so that it need not be installed in that Python. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_common.h"

/* The folder holding this program, or -1. */
static int own_folder(char *folder, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", folder, size - 1);
    if (n <= 0)
        return -1;
    folder[n] = '\0';
    char *slash = strrchr(folder, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

int cli_find_library(char *path, size_t size)
{
    char self[PATH_MAX];
    if (own_folder(self, sizeof(self)) < 0)
        return -1;
    const char *candidates[] = {"%s/libcumemtrace.so", "%s/../lib/libcumemtrace.so",
                                "%s/../" CUMEMTRACE_LIBDIR "/libcumemtrace.so"};
    for (unsigned i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (snprintf(path, size, candidates[i], self) >= (int)size)
            continue;
        if (access(path, R_OK) == 0)
            return 0;
    }
    return -1;
}

int cli_python_folder(char *folder, size_t size)
{
    char self[PATH_MAX];
    if (own_folder(self, sizeof(self)) < 0)
        return -1;
    const char *candidates[] = {"%s/../" CUMEMTRACE_DATADIR "/cumemtrace/python",
                                CUMEMTRACE_SOURCE_DIR "/python%.0s"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        char init[PATH_MAX + 64];
        if (snprintf(folder, size, candidates[i], self) >= (int)size ||
            snprintf(init, sizeof(init), "%s/cumemtrace/torch_tracker.py", folder) >=
                (int)sizeof(init))
            continue;
        if (access(init, R_OK) == 0)
            return 0;
    }
    return -1;
}

int cli_tracker_helper(const char *python, const char *const *args, char *output, size_t size)
{
    char folder[PATH_MAX], script[PATH_MAX + 64];
    if (cli_python_folder(folder, sizeof(folder)) < 0) {
        errno = ENOENT;
        return -1;
    }
    snprintf(script, sizeof(script), "%s/cumemtrace/torch_tracker.py", folder);
    const char *argv[16] = {python, script};
    int argc = 2;
    for (; *args && argc < 15; args++)
        argv[argc++] = *args;
    argv[argc] = NULL;

    int pipe_fds[2] = {-1, -1};
    if (output && pipe(pipe_fds) < 0)
        return -1;
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        if (output) {
            close(pipe_fds[0]);
            close(pipe_fds[1]);
        }
        return -1;
    }
    if (child == 0) {
        if (output) {
            dup2(pipe_fds[1], 1);
            close(pipe_fds[0]);
            close(pipe_fds[1]);
        }
        execvp(python, (char *const *)argv);
        _exit(errno == ENOENT ? 127 : 126);
    }
    size_t used = 0;
    if (output) {
        close(pipe_fds[1]);
        for (ssize_t n; (n = read(pipe_fds[0], output + used, size - 1 - used)) != 0;) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                break;
            used += (size_t)n;
            if (used == size - 1) { /* full: drain the rest */
                char sink[4096];
                while (read(pipe_fds[0], sink, sizeof(sink)) > 0)
                    ;
                break;
            }
        }
        output[used] = '\0';
        close(pipe_fds[0]);
    }
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (!WIFEXITED(status))
        return -1;
    if (WEXITSTATUS(status) == 127) {
        errno = ENOENT;
        return -1;
    }
    return WEXITSTATUS(status);
}

const char *cli_traced_python(const char *program)
{
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    return strncmp(base, "python", 6) == 0 ? program : "python3";
}
