/* origins.c - where a frame's code comes from (see origins.h).
 *
 * Told from names only (a module's file name and folder, a Python file's
 * path), so the traced process and `cumemtrace report` reading its JSON back
 * give every frame the same origin. */
#include <string.h>

#include "origins.h"
#include "output.h"

static const char *const origin_names[ORIGIN_COUNT] = {
    [ORIGIN_USER] = "user",           [ORIGIN_CUDA] = "cuda",
    [ORIGIN_FRAMEWORK] = "framework", [ORIGIN_INTERPRETER] = "interpreter",
    [ORIGIN_SYSTEM] = "system",       [ORIGIN_STARTUP] = "startup",
    [ORIGIN_LIBRARY] = "library",
};

const char *origin_name(int origin)
{
    return origin >= 0 && origin < ORIGIN_COUNT ? origin_names[origin] : "user";
}

/* Packages whose files, Python or native, are a framework's (a folder right
 * under site-packages or dist-packages): the GPU frameworks, and the test
 * runner a suite runs in (pytest's frames sit between a test and its
 * caller, like a framework's dispatch). */
static const char *const framework_packages[] = {
    "torch", "functorch", "cupy",   "cupyx",   "cupy_backends", "jax",    "jaxlib",
    "numpy", "triton",    "nvidia", "_pytest", "pytest",        "pluggy",
};

/* Code a framework wrote for the program: PyTorch's Inductor and Triton
 * generate modules into cache folders (/tmp/torchinductor_<user>/ab/c....py,
 * ~/.triton/cache/<hash>/, native launchers beside them), torch.fx compiles
 * graphs from a string named "<eval_with_key>.N", and Dynamo's frames run
 * them. Their lines are no one's to fix: the site is the user's line that
 * called the compiled function, as under any framework call. Dynamo and
 * Inductor's own files are matched wherever torch is installed (a source
 * checkout too); a cache moved elsewhere (TORCHINDUCTOR_CACHE_DIR,
 * TRITON_CACHE_DIR) is not recognized by name. */
static const char *const generated_folders[] = {
    "/torchinductor_",
    "/.triton/cache/",
    "/torch/_dynamo/",
    "/torch/_inductor/",
};
static const char *const generated_names[] = {"<eval_with_key>"};

/* Native libraries by the start of their file name. */
static const char *const cuda_libraries[] = {"libcuda", "libnvidia-"};
static const char *const framework_libraries[] = {
    "libc10",      "libtorch", "libcaffe2",     "libshm",        "libnccl",
    "libcublas",   "libcudnn", "libcufft",      "libcurand",     "libcusparse",
    "libcusolver", "libnvrtc", "libnvJitLink",  "libnvToolsExt", "libcupti",
    "libtriton",   "libxla",   "xla_extension", "libjax",
};
static const char *const interpreter_libraries[] = {"python", "libpython", "libffi", "libpypy"};
/* The runtimes under everything; and the tracer's own libraries, whose
 * frames (a framework's hook calling into us) are never the program's. */
static const char *const system_libraries[] = {
    "libc.so", "libc-", "ld-linux",  "ld-",      "libpthread", "libdl",    "libm.so",
    "libm-",   "librt", "libstdc++", "libgcc_s", "libasan",    "libubsan", "libcumemtrace",
};
/* Functions that start a process or a thread, in the C runtime. */
static const char *const startup_functions[] = {
    "__libc_start_main", "__libc_start_call_main", "start_thread", "clone", "clone3", "__clone",
    "__clone3",          "__clone_internal",
};

static int starts_with_any(const char *text, const char *const *prefixes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strncmp(text, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Where the package folder (or module) of an installed file starts, right
 * under site-packages or dist-packages, and its name's length; NULL when
 * `path` is not installed there. */
static const char *installed_package(const char *path, size_t *length)
{
    static const char *const markers[] = {"/site-packages/", "/dist-packages/"};
    for (size_t m = 0; m < COUNT(markers); m++) {
        const char *at = strstr(path, markers[m]);
        if (!at)
            continue;
        const char *package = at + strlen(markers[m]);
        size_t n = strcspn(package, "/");
        if (!package[n] && n > 3 && strcmp(package + n - 3, ".py") == 0)
            n -= 3; /* a module of its own: six.py */
        *length = n;
        return n ? package : NULL;
    }
    return NULL;
}

int origin_package(const char *file, char *name, size_t size)
{
    size_t n = 0;
    const char *package = file ? installed_package(file, &n) : NULL;
    if (!package || !size)
        return 0;
    if (n >= size)
        n = size - 1;
    memcpy(name, package, n);
    name[n] = '\0';
    return 1;
}

/* `package` (`length` bytes) is one of `list`, or of `text`, a
 * comma-separated list whose names may have spaces around them. */
static int listed(const char *package, size_t length, const char *const *list, size_t count,
                  const char *text)
{
    for (size_t i = 0; i < count; i++)
        if (length == strlen(list[i]) && strncmp(package, list[i], length) == 0)
            return 1;
    for (const char *p = text; p && *p; p += *p == ',') {
        p += strspn(p, " ");
        size_t n = strcspn(p, ","), name = n;
        while (name && p[name - 1] == ' ')
            name--;
        if (name == length && strncmp(p, package, length) == 0)
            return 1;
        p += n;
    }
    return 0;
}

/* The package folder under site-packages/dist-packages is a framework's. */
static int in_framework_package(const char *path)
{
    size_t n = 0;
    const char *package = installed_package(path, &n);
    return package && package[n] == '/' &&
           listed(package, n, framework_packages, COUNT(framework_packages), NULL);
}

static int in_site_packages(const char *path)
{
    return strstr(path, "/site-packages/") || strstr(path, "/dist-packages/");
}

/* Python's own library: .../lib/python3.11/..., .../lib64/python3.11/...,
 * PyPy's lib folders, lib-dynload; not what is installed in site-packages. */
static int in_standard_library(const char *path)
{
    if (in_site_packages(path))
        return 0;
    if (strstr(path, "/lib-dynload/") || strstr(path, "/lib/pypy") || strstr(path, "/lib-python/"))
        return 1;
    for (const char *at = strstr(path, "/python"); at; at = strstr(at + 1, "/python")) {
        const char *digits = at + 7;
        int lib = (at - path >= 4 && strncmp(at - 4, "/lib", 4) == 0) ||
                  (at - path >= 6 && strncmp(at - 6, "/lib64", 6) == 0);
        if (lib && digits[0] >= '2' && digits[0] <= '9' && digits[1] == '.')
            return 1;
    }
    return 0;
}

static int is_generated(const char *path)
{
    for (size_t i = 0; i < COUNT(generated_names); i++)
        if (strncmp(path, generated_names[i], strlen(generated_names[i])) == 0)
            return 1;
    for (size_t i = 0; i < COUNT(generated_folders); i++)
        if (strstr(path, generated_folders[i]))
            return 1;
    return 0;
}

static int is_startup_function(const char *function)
{
    for (size_t i = 0; i < COUNT(startup_functions); i++) {
        size_t n = strlen(startup_functions[i]);
        if (strncmp(function, startup_functions[i], n) == 0 &&
            (function[n] == '\0' || function[n] == '@'))
            return 1;
    }
    return 0;
}

/* A Python file: installed packages are libraries, the frameworks' are
 * frameworks, but those the user named theirs; an editable install of the
 * user's own package runs from their checkout, outside site-packages, and
 * is theirs with no setting. */
static int classify_python(const struct symbol *s, const char *user_packages)
{
    const char *file = s->file;
    if (!file)
        return ORIGIN_USER;
    if (strncmp(file, "<frozen ", 8) == 0)
        return ORIGIN_INTERPRETER;
    size_t n = 0;
    const char *package = installed_package(file, &n);
    if (package && listed(package, n, NULL, 0, user_packages))
        return ORIGIN_USER;
    if (in_framework_package(file) || is_generated(file))
        return ORIGIN_FRAMEWORK;
    if (package)
        return ORIGIN_LIBRARY;
    if (in_standard_library(file))
        return ORIGIN_INTERPRETER;
    return ORIGIN_USER;
}

int origin_of(const struct symbol *s, const char *user_packages)
{
    if (!s)
        return ORIGIN_USER;
    if (s->python)
        return classify_python(s, user_packages);
    if (s->function && strcmp(s->function, "_start") == 0)
        return ORIGIN_STARTUP;
    if (!s->module)
        return ORIGIN_USER;
    const char *name = output_base_name(s->module);
    if (starts_with_any(name, cuda_libraries, COUNT(cuda_libraries)))
        return ORIGIN_CUDA;
    if (starts_with_any(name, framework_libraries, COUNT(framework_libraries)) ||
        in_framework_package(s->module) || is_generated(s->module))
        return ORIGIN_FRAMEWORK;
    if (starts_with_any(name, interpreter_libraries, COUNT(interpreter_libraries)) ||
        in_standard_library(s->module))
        return ORIGIN_INTERPRETER;
    if (starts_with_any(name, system_libraries, COUNT(system_libraries)))
        return s->function && is_startup_function(s->function) ? ORIGIN_STARTUP : ORIGIN_SYSTEM;
    return ORIGIN_USER;
}
