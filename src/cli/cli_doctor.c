/* cli_doctor.c - `cumemtrace doctor`: what a run here records, and why.
 *
 * One screen, a line per part a run depends on, each saying what it gives
 * the reports and, when missing, what a run does without it: the library,
 * where native stacks come from (the built-in walker and libgcc_s's
 * unwinder), where their names and file:line come from (the built-in ELF and
 * DWARF reader; libz for compressed debug sections), the CUDA driver, the Python
 * on PATH (its frames), PyTorch's tracker for that Python (built now if it
 * can be: a run would build it too), CuPy and JAX. The Python facts come from
 * torch_tracker.py status, run with that Python; the rest is looked up here
 * the way the library looks it up in a traced process. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "python.h"

const char doctor_usage[] =
    "usage: cumemtrace doctor [--python PATH] [--no-build]\n"
    "\n"
    "Says what a run here records and why: the library and where its native stacks\n"
    "and their names come from, the CUDA driver, Python frames for\n"
    "the Python on PATH, PyTorch's tracker for that Python's PyTorch (built now into\n"
    "the per-user cache when missing, as `cumemtrace run` would), CuPy and JAX.\n"
    "  --python PATH   the Python to ask (default python3)\n"
    "  --no-build      say whether PyTorch's tracker is cached; build nothing\n"
    "exit status: 0 (whatever it found), 1 usage error, 2 --python cannot be run\n";

static void line(const char *part, const char *text)
{
    printf("  %-12s %s\n", part, text);
}

/* Loaded as the library loads it (dlopen by soname): the path it came from. */
static int loadable(const char *soname, const char *symbol, char *where, size_t size)
{
    void *handle = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    if (!handle) {
        const char *error = dlerror();
        snprintf(where, size, "%s", error ? error : "not found");
        return 0;
    }
    void *address = dlsym(handle, symbol);
    Dl_info info;
    snprintf(where, size, "%s",
             address && dladdr(address, &info) && info.dli_fname ? info.dli_fname : soname);
    if (!address)
        snprintf(where, size, "%s has no %s", soname, symbol);
    return address != NULL;
}

static void driver_line(void)
{
    char text[PATH_MAX + 128], where[PATH_MAX];
    if (!loadable("libcuda.so.1", "cuDriverGetVersion", where, sizeof(where))) {
        snprintf(text, sizeof(text),
                 "libcuda.so.1 not loadable (%.200s): CUDA programs find "
                 "no driver here, and the tracer records only their failed calls",
                 where);
        line("CUDA driver", text);
        return;
    }
    void *handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    int (*version)(int *) = (int (*)(int *))dlsym(handle, "cuDriverGetVersion");
    int number = 0;
    if (version && version(&number) == 0)
        snprintf(text, sizeof(text), "CUDA %d.%d (%s)", number / 1000, number % 1000 / 10, where);
    else
        snprintf(text, sizeof(text), "%s loaded; cuDriverGetVersion failed", where);
    line("CUDA driver", text);
}

/* The Python facts, from torch_tracker.py status (one fact per line). */
static void python_lines(const char *python, int build)
{
    static char facts[16384];
    const char *args[] = {"status", build ? NULL : "--no-build", NULL};
    int status = cli_tracker_helper(python, args, facts, sizeof(facts));
    char text[PATH_MAX + 512];
    if (status != 0) {
        snprintf(text, sizeof(text),
                 "%s %s: no Python frames to tell of, nor PyTorch, CuPy, JAX "
                 "in it",
                 python,
                 status < 0 ? "cannot be run (not on PATH, or no helper "
                              "installed)"
                            : "failed to answer");
        line("Python", text);
        return;
    }
    for (char *fact = strtok(facts, "\n"); fact; fact = strtok(NULL, "\n")) {
        int major, minor, micro, n = 0;
        if (sscanf(fact, "python %d.%d.%d %n", &major, &minor, &micro, &n) == 3 && n) {
            char known[128];
            int how = python_layout_known(major, minor, known, sizeof(known));
            snprintf(text, sizeof(text), "%d.%d.%d (%s): %s", major, minor, micro, fact + n,
                     how == 2   ? "Python frames on every thread, the GIL held or not, at the "
                                  "offsets this interpreter publishes (checked as it starts)"
                     : how == 1 ? "Python frames on every thread, the GIL held or not"
                                : "Python frames only where the allocating thread holds the "
                                  "GIL (read on every thread for ");
            if (!how)
                snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s)", known);
            line("Python", text);
        } else if (strncmp(fact, "torch ", 6) == 0) {
            const char *rest = fact + 6;
            if (strcmp(rest, "none") == 0) {
                line("PyTorch", "not found by this Python");
                continue;
            }
            const char *bar = strstr(rest, " | ");
            int tracked = bar && strncmp(bar + 3, "tracker ", 8) == 0;
            int length = bar ? (int)(bar - rest) : (int)strlen(rest);
            snprintf(text, sizeof(text), "%.*s: %s; %s", length, rest,
                     tracked ? "tensors recorded one by one"
                             : "cache segments only, not its tensors",
                     bar ? bar + 3 : "");
            line("PyTorch", text);
        } else if (strncmp(fact, "cupy ", 5) == 0 || strncmp(fact, "jax ", 4) == 0) {
            int cupy = fact[0] == 'c';
            const char *rest = fact + (cupy ? 5 : 4);
            if (strcmp(rest, "none") == 0)
                snprintf(text, sizeof(text), "not found by this Python");
            else
                snprintf(text, sizeof(text), "%s: %s", rest,
                         cupy ? "blocks of its memory pool recorded one by one (from its "
                                "import on)"
                              : "live arrays recorded with their tracebacks (swept at "
                                "least every 100 ms, within 1% of the time)");
            line(cupy ? "CuPy" : "JAX", text);
        }
    }
}

/* Whether `program` can be run as execvp would find it: 0, or -1 with
 * errno set (ENOENT: no such file, nor on PATH). */
static int runnable(const char *program)
{
    if (strchr(program, '/'))
        return access(program, X_OK);
    const char *path = getenv("PATH");
    char candidate[PATH_MAX];
    for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(candidate, sizeof(candidate), "%.*s%s%s", (int)n, p, n ? "/" : "", program);
        if (access(candidate, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    errno = ENOENT;
    return -1;
}

int command_doctor(int argc, char **argv)
{
    static const struct option longs[] = {{"python", required_argument, NULL, 'p'},
                                          {"no-build", no_argument, NULL, 'n'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    static const char default_python[] = "python3";
    const char *python = default_python;
    int build = 1;
    struct cli_args args = {"doctor", argc, argv, ":h", longs, 0};
    for (int c; (c = cli_getopt(&args)) != -1;) {
        switch (c) {
        case 'p': python = optarg; break;
        case 'n': build = 0; break;
        case 'h': fputs(doctor_usage, stdout); return CLI_OK;
        default: return CLI_USAGE;
        }
    }
    if (optind < argc)
        return cli_usage_error("doctor", "takes no arguments", argv[optind]);
    /* A Python named on purpose that is not there: said, not a report
     * about nothing. */
    if (python != default_python && runnable(python) < 0) {
        fprintf(stderr, "cumemtrace doctor: cannot run --python '%s': %s\n", python,
                strerror(errno));
        return CLI_UNREADABLE;
    }

    char text[PATH_MAX + 256], where[PATH_MAX];
    printf("cumemtrace %s: what a run here records, and why\n", CUMEMTRACE_VERSION);
    if (cli_find_library(where, sizeof(where)) == 0) {
        char *resolved = realpath(where, NULL);
        line("library", resolved ? resolved : where);
        free(resolved);
    } else {
        line("library", "libcumemtrace.so not found next to this program or in ../lib: "
                        "`cumemtrace run` cannot trace");
    }
    /* Neither libunwind nor libdw is used, installed or not: what a run
     * records does not depend on them (stacks.c, symbolize.c say why). */
    if (loadable("libgcc_s.so.1", "_Unwind_Backtrace", where, sizeof(where)))
        snprintf(text, sizeof(text),
                 "built-in: every allocation's native stack, walked by the "
                 "objects' own frame rules (.eh_frame), checked by and falling back to libgcc's "
                 "unwinder (%s)",
                 where);
    else
        snprintf(text, sizeof(text),
                 "none: libgcc_s.so.1 not loadable (%.200s): allocations "
                 "are recorded without native stacks",
                 where);
    line("stacks", text);
    int zlib = loadable("libz.so.1", "uncompress", where, sizeof(where));
    snprintf(text, sizeof(text),
             "built-in: native frames named from the objects' symbol "
             "tables, file:line from their DWARF line tables (or their debug files under "
             "/usr/lib/debug); %s%.200s",
             zlib ? "zlib-compressed debug sections through "
                  : "no compressed debug sections: libz.so.1 not loadable, ",
             where);
    line("symbolizer", text);
    driver_line();
    fflush(stdout);
    python_lines(python, build);
    return CLI_OK;
}
