"""torch_tracker.py - libcumemtrace_torch.so for the PyTorch this Python imports.

The tracer sees PyTorch's tensors one by one through a small C++ library,
preload/torch_tracker.cpp, that must be compiled against the headers of the
very PyTorch it runs with (its allocator's layout changes between builds).
This module builds it once per PyTorch into a per-user cache, outside any
traced program, and the tracer (preload/frameworks.c) loads it from there:

    <cache>/libcumemtrace_torch-<key>.so    the library
    <cache>/libcumemtrace_torch-<key>.txt   what it was built from
    <cache>/libcumemtrace_torch-<key>.log   the compiler's words, when it failed

<cache> is $XDG_CACHE_HOME/cumemtrace, else ~/.cache/cumemtrace: a directory
of this user's that no one else may write (anything else is refused, since
the tracer loads code from it). <key> names everything that must match, and
is computed the same way by the tracer from what it finds in the process:
torch.__version__ and git_version (from torch/version.py; one build of one
commit, so its C++ ABI too), the Python version, and a hash of the tracker's
sources (a new tracker is a new key). Two builds at once build it once: a
lock in the cache, and the library renamed into place when complete.

Only the standard library is used, and torch is found without importing it,
so that `cumemtrace run` asks here before each run at the cost of a Python
start. It is run as a script (the `cumemtrace` command runs it with the
traced program's Python) or imported (python -m cumemtrace):

    torch_tracker.py ensure [--quiet]   build it if missing; print its path
    torch_tracker.py status             one line per fact, for `cumemtrace doctor`
    torch_tracker.py build --output PATH [--bench]
                                        build into PATH, no cache (scripts/
                                        build-torch-tracker.sh)

Exit status: 0 a tracker is there (or no PyTorch here), 1 it could not be
built (one line says why), 2 usage.

Environment: CXX (the compiler, default c++), CUDA_HOME, and
CUMEMTRACE_NO_SYSTEM_CUDA=1, which looks for CUDA's headers only in
CUDA_HOME and pip's NVIDIA packages (for tests of a machine without a
toolkit).
"""
import errno
import fcntl
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

PREFIX = "cumemtrace: "
UNSAFE = re.compile(rb"[^A-Za-z0-9.+_-]")


class TrackerError(Exception):
    """Why no tracker: one line, for the user."""


def sources():
    """The folder holding torch_tracker.cpp and .h: installed beside this
    package (share/cumemtrace/torch_tracker, or the pip package's prefix),
    or preload/ of a source tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.path.join(here, "_prefix", "share", "cumemtrace", "torch_tracker"),
                   os.path.join(here, "..", "..", "torch_tracker"),
                   os.path.join(here, "..", "..", "preload")):
        if os.path.isfile(os.path.join(folder, "torch_tracker.cpp")):
            return os.path.normpath(folder)
    raise TrackerError("the tracker's sources (torch_tracker.cpp) are not installed beside "
                       f"{here}")


def source_hash(folder):
    """16 hex digits naming the tracker's sources: SHA-256 over the SHA-256
    of torch_tracker.cpp and of torch_tracker.h, in hex, as CMake computes
    it for the tracer (CMakeLists.txt)."""
    digests = ""
    for name in ("torch_tracker.cpp", "torch_tracker.h"):
        with open(os.path.join(folder, name), "rb") as handle:
            digests += hashlib.sha256(handle.read()).hexdigest()
    return hashlib.sha256(digests.encode()).hexdigest()[:16]


def find_torch():
    """(torch's folder, __version__, git_version) without importing it, or
    None when this Python has no torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = os.path.realpath(list(spec.submodule_search_locations)[0])
    try:
        # Its first 4 KiB, each byte one character, as the tracer reads it.
        with open(os.path.join(root, "version.py"), "rb") as handle:
            text = handle.read(4096).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    version = re.search(r"^__version__ = '([^'\n]*)'", text, re.M)
    git = re.search(r"^git_version = '([^'\n]*)'", text, re.M)
    if not version:
        return None
    return root, version.group(1), git.group(1) if git else "unknown"


def key(version, git, python, digest):
    """The cache key, as preload/frameworks.c's cache_key() makes it:
    torch-VERSION-GIT-pyPYTHON-DIGEST with VERSION cut to its first 100
    bytes and GIT to 12 (in UTF-8), and every byte but A-Z a-z 0-9 . + _ -
    made '_' (a character beyond ASCII: one '_' for each of its bytes)."""
    def cut(text, size):
        return text.encode("utf-8", "surrogateescape")[:size]
    whole = b"torch-" + cut(version, 100) + b"-" + cut(git, 12) + \
        f"-py{python}-{digest}".encode("utf-8", "surrogateescape")
    return UNSAFE.sub(b"_", whole).decode("ascii")


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base.startswith("/"):
        home = os.environ.get("HOME", "")
        if not home.startswith("/"):
            raise TrackerError("no cache directory: neither XDG_CACHE_HOME nor HOME is set")
        base = os.path.join(home, ".cache")
    return os.path.join(base, "cumemtrace")


def private(path, kind):
    """Refuse (TrackerError) a `kind` ("directory"/"file") at `path` that is
    a link, owned by another user, or writable by others."""
    info = os.lstat(path)
    wanted = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
    if not wanted(info.st_mode):
        raise TrackerError(f"{path} is not a {kind}; refusing it as the tracker cache")
    if info.st_uid != os.geteuid():
        raise TrackerError(f"{path} is owned by uid {info.st_uid}, not this user "
                           f"({os.geteuid()}); refusing it as the tracker cache")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise TrackerError(f"{path} is writable by other users (mode "
                           f"{stat.S_IMODE(info.st_mode):04o}); refusing it as the tracker cache")


def open_cache():
    """The cache directory, made private if new, checked if not."""
    folder = cache_dir()
    try:
        os.makedirs(folder, mode=0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise TrackerError(f"cannot make the tracker cache {folder}: {error.strerror}")
    private(folder, "directory")
    return folder


def cuda_headers():
    """The folder holding CUDA's cuda_runtime_api.h, from CUDA_HOME,
    /usr/local/cuda, nvcc's toolkit, or pip's NVIDIA packages (nvidia/cu13/
    include for CUDA 13's wheels, nvidia/cuda_runtime/include for CUDA 12's)."""
    places = []
    if os.environ.get("CUDA_HOME"):
        places.append(os.path.join(os.environ["CUDA_HOME"], "include"))
    if os.environ.get("CUMEMTRACE_NO_SYSTEM_CUDA") != "1":
        places.append("/usr/local/cuda/include")
        nvcc = shutil.which("nvcc")
        if nvcc:
            places.append(os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include"))
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            places.extend(sorted(glob.glob(os.path.join(entry, "nvidia", "cu[0-9]*", "include")),
                                 reverse=True))
            places.append(os.path.join(entry, "nvidia", "cuda_runtime", "include"))
    for place in places:
        if os.path.isfile(os.path.join(place, "cuda_runtime_api.h")):
            return os.path.normpath(place)
    raise TrackerError("CUDA's headers (cuda_runtime_api.h) are in none of CUDA_HOME, "
                       "/usr/local/cuda, nvcc's toolkit or pip's nvidia packages: set CUDA_HOME, "
                       "or pip install nvidia-cuda-runtime")


def compiler():
    name = os.environ.get("CXX") or "c++"
    found = shutil.which(name)
    if not found:
        raise TrackerError(f"no C++ compiler ({name}) to build the PyTorch tracker: install "
                           "g++ (apt-get install g++; dnf install gcc-c++)")
    return found


def cxx11_abi(root):
    """torch._C._GLIBCXX_USE_CXX11_ABI, asked of a Python that imports
    torch (imported here only when building: it takes seconds)."""
    # Without the current directory on its path, as this script sees none.
    code = "import sys; del sys.path[0]; import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TrackerError(f"cannot ask torch for its C++ ABI: {error}")
    if done.returncode != 0 or done.stdout.strip() not in ("0", "1"):
        last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise TrackerError(f"cannot import torch to ask its C++ ABI: {last}")
    return done.stdout.strip()


def compile_tracker(torch, output, bench=False, log=None):
    """Compile the tracker for `torch` (find_torch()'s answer) into
    `output`. Returns the facts it was built from (a dict); raises
    TrackerError with one line when it cannot be built."""
    root, version, _ = torch
    folder = sources()
    cxx = compiler()
    cuda = cuda_headers()
    abi = cxx11_abi(root)
    major, minor = (int(x) for x in re.findall(r"\d+", version)[:2])
    standard = "c++20" if (major, minor) >= (2, 12) else "c++17"
    libraries = [f"-l{name}" for name in ("c10_cuda", "c10", "torch_cpu")
                 if os.path.exists(os.path.join(root, "lib", f"lib{name}.so"))]
    command = [cxx, f"-std={standard}", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               "-Wall", "-Wextra", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
               f'-DCUMEMTRACE_TORCH_VERSION="{version}"',
               *(["-DCUMEMTRACE_BENCH_SWITCH"] if bench else []),
               "-isystem", os.path.join(root, "include"),
               "-isystem", os.path.join(root, "include", "torch", "csrc", "api", "include"),
               "-isystem", cuda, "-I", folder,
               # what pip's CUDA headers lack, searched last (see its header)
               "-idirafter", os.path.join(folder, "cuda_fallback"),
               os.path.join(folder, "torch_tracker.cpp"),
               "-o", output, "-L" + os.path.join(root, "lib"), *libraries, "-Wl,-z,nodelete"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TrackerError(f"{cxx} could not run: {error}")
    if done.returncode != 0:
        words = done.stdout + done.stderr
        where = ""
        if log:
            with open(log, "w") as handle:
                handle.write(" ".join(command) + "\n\n" + words)
            where = f"; all of it in {log}"
        errors = [line for line in words.splitlines() if "error" in line] or \
            words.strip().splitlines() or [f"exit status {done.returncode}"]
        raise TrackerError(f"the PyTorch tracker did not build ({os.path.basename(cxx)}: "
                           f"{errors[0].strip()[:300]}){where}")
    return {"torch": version, "torch_dir": root, "cxx11_abi": abi, "cuda_headers": cuda,
            "compiler": cxx, "python": sys.executable, "sources": folder}


def cached_path(torch):
    """(the tracker's path in the cache for `torch`, the cache folder)."""
    folder = open_cache()
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    name = key(torch[1], torch[2], python, source_hash(sources()))
    return os.path.join(folder, f"libcumemtrace_torch-{name}.so"), folder


def ensure(torch, say=print):
    """The cached tracker for `torch`, built now if missing: (path, built
    now?, facts or None). Raises TrackerError."""
    path, folder = cached_path(torch)
    if os.path.lexists(path):
        private(path, "file")
        return path, False, None
    lock = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.lexists(path):        # another build finished while we waited
            private(path, "file")
            return path, False, None
        compiler(), cuda_headers()      # what is missing said alone, before building
        say(f"{PREFIX}building libcumemtrace_torch.so for PyTorch {torch[1]}, once "
            f"(into {folder})")
        base = path[:-len(".so")]
        handle, partial = tempfile.mkstemp(dir=folder, prefix=".build-", suffix=".so")
        os.close(handle)
        try:
            facts = compile_tracker(torch, partial, log=base + ".log")
            with open(partial + ".txt", "w") as handle:
                handle.writelines(f"{name}: {value}\n" for name, value in facts.items())
            os.chmod(partial, 0o755)
            os.rename(partial + ".txt", base + ".txt")
            os.rename(partial, path)
        finally:
            for leftover in (partial, partial + ".txt"):
                try:
                    os.unlink(leftover)
                except FileNotFoundError:
                    pass
        return path, True, facts
    finally:
        os.close(lock)


def facts_of(path):
    """The facts file beside a cached tracker, as a dict ({} if none)."""
    try:
        with open(path[:-len(".so")] + ".txt") as handle:
            return dict(line.rstrip("\n").split(": ", 1) for line in handle if ": " in line)
    except OSError:
        return {}


def status(build=True):
    """Lines for `cumemtrace doctor`: `python VERSION EXECUTABLE`, then
    `torch ...`, `cupy ...`, `jax ...` for the frameworks found."""
    lines = [f"python {sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]} "
             f"{sys.executable}"]
    torch = find_torch()
    if torch is None:
        lines.append("torch none")
    else:
        try:
            if build:
                path, built, facts = ensure(torch, say=lambda line: print(line, file=sys.stderr))
            else:
                path, _ = cached_path(torch)
                built, facts = False, None
                if not os.path.lexists(path):
                    raise TrackerError("none cached")
            facts = facts or facts_of(path)
            how = "built now" if built else "cached"
            headers = facts.get("cuda_headers", "?")
            lines.append(f"torch {torch[1]} {torch[0]} | tracker {how}: {path} "
                         f"(CUDA headers from {headers})")
        except (TrackerError, OSError) as error:
            lines.append(f"torch {torch[1]} {torch[0]} | no tracker: {error}")
    for name in ("cupy", "jax"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            lines.append(f"{name} none")
        else:
            lines.append(f"{name} {list(spec.submodule_search_locations)[0]}")
    return lines


def main(argv):
    usage = ("usage: torch_tracker.py ensure [--quiet] | status [--no-build] | "
             "build --output PATH [--bench]")
    if not argv or argv[0] not in ("ensure", "status", "build"):
        print(usage, file=sys.stderr)
        return 2
    if argv[0] == "status":
        print("\n".join(status(build="--no-build" not in argv[1:])))
        return 0
    torch = find_torch()
    try:
        if argv[0] == "build":
            if len(argv) < 3 or argv[1] != "--output":
                print(usage, file=sys.stderr)
                return 2
            if torch is None:
                raise TrackerError(f"{sys.executable} has no torch")
            facts = compile_tracker(torch, argv[2], bench="--bench" in argv[3:])
            print(f"{PREFIX}built {argv[2]} for PyTorch {torch[1]} (CUDA headers from "
                  f"{facts['cuda_headers']})")
            return 0
        if torch is None:
            return 0
        path, built, facts = ensure(torch, say=lambda line: print(line, file=sys.stderr))
        if built:
            print(f"{PREFIX}built {path} (CUDA headers from {facts['cuda_headers']})",
                  file=sys.stderr)
        if "--quiet" not in argv[1:]:
            print(path)
        return 0
    except (TrackerError, OSError) as error:
        text = str(error) if isinstance(error, TrackerError) else \
            f"{getattr(error, 'filename', '') or ''}: {error.strerror or error}"
        print(f"{PREFIX}{text}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
