"""setup.py - the C half of `pip install .`: CMake builds and installs the
library, the command and the tracker's sources into the Python package
(cumemtrace/_prefix), laid out as `cmake --install` lays out any prefix, so
the command finds its parts the same way everywhere (src/cli/cli_install.c).
pyproject.toml holds the rest of the package's description.

Only setuptools (70.1 or later, or an older one with wheel) and CMake: no
network, no build isolation needed; a Python without either says so in one
line.
CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs (default: the CPUs),
CMAKE_BUILD_TYPE its type (default RelWithDebInfo), CUDAToolkit_ROOT a CUDA
toolkit to take the headers from (else they are looked for as the PyTorch
tracker's builder looks: pip's NVIDIA packages will do)."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

from setuptools import Command, setup
from setuptools.command.build import build
from setuptools.dist import Distribution

# A wheel is made with setuptools' own bdist_wheel (setuptools 70.1 and
# later), else with the `wheel` package's; many Pythons (pyenv's, conda's,
# uv's) have neither, and pip then needs to be told what to install.
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None
# pip asks for the wheel's metadata first (dist_info), which needs
# bdist_wheel too: the line must come there, not pip's report of an
# "invalid command" at the end of twenty.
if bdist_wheel is None and ("bdist_wheel" in sys.argv or "dist_info" in sys.argv):
    sys.exit(f"cumemtrace: making a wheel needs the wheel package or setuptools 70.1 or later, "
             f"neither of which {sys.executable} has: {sys.executable} -m pip install wheel")

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    """The project's version, from CMakeLists.txt (its one place)."""
    with open(os.path.join(HERE, "CMakeLists.txt")) as handle:
        return re.search(r"project\(cumemtrace VERSION ([0-9.]+)", handle.read()).group(1)


def cuda_headers():
    """CUDA's headers where the PyTorch tracker's builder finds them
    (python/cumemtrace/torch_tracker.py: CUDA_HOME, /usr/local/cuda, nvcc's
    toolkit, pip's NVIDIA packages), when cuda.h is there too; else None,
    and CMake looks for a toolkit."""
    path = os.path.join(HERE, "python", "cumemtrace", "torch_tracker.py")
    spec = importlib.util.spec_from_file_location("cumemtrace_tracker_builder", path)
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    try:
        headers = builder.cuda_headers()
    except builder.TrackerError:
        return None
    return headers if os.path.isfile(os.path.join(headers, "cuda.h")) else None


class build_native(Command):
    """Configure, build and install the C parts with CMake (without the
    tests and the simulator) into the package's _prefix."""
    description = "build the library and the command with CMake"
    user_options = []

    def initialize_options(self):
        self.build_lib = self.build_temp = None

    def finalize_options(self):
        self.set_undefined_options("build", ("build_lib", "build_lib"),
                                   ("build_temp", "build_temp"))

    def run(self):
        cmake = shutil.which("cmake")
        if not cmake:
            raise SystemExit("cumemtrace: CMake is needed to build it (apt-get install cmake)")
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        if os.environ.get("CUDAToolkit_ROOT"):
            cuda = [f"-DCUDAToolkit_ROOT={os.environ['CUDAToolkit_ROOT']}"]
        else:
            headers = cuda_headers()
            cuda = [f"-DCUMEMTRACE_CUDA_INCLUDE_DIRS={headers}"] if headers else []
            if headers:
                print(f"cumemtrace: CUDA's headers from {headers}", file=sys.stderr, flush=True)
        prefix = os.path.abspath(os.path.join(self.build_lib, "cumemtrace", "_prefix"))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        steps = [[cmake, "-S", HERE, "-B", build_dir, "-DCUMEMTRACE_TESTS=OFF",
                  "-DCMAKE_BUILD_TYPE=" + (os.environ.get("CMAKE_BUILD_TYPE") or "RelWithDebInfo"),
                  "-DCMAKE_INSTALL_LIBDIR=lib", *cuda],
                 [cmake, "--build", build_dir, "-j", jobs],
                 [cmake, "--install", build_dir, "--prefix", prefix]]
        shutil.rmtree(prefix, ignore_errors=True)
        for step in steps:
            print(" ".join(step), file=sys.stderr, flush=True)
            subprocess.check_call(step)


class build_with_native(build):
    sub_commands = build.sub_commands + [("build_native", None)]


class NativeDistribution(Distribution):
    """A wheel for this platform, since it holds a library and a program."""

    def has_ext_modules(self):
        return True


commands = {"build": build_with_native, "build_native": build_native}
if bdist_wheel is not None:
    class bdist_wheel_any_python(bdist_wheel):
        """Tagged py3-none-PLATFORM: no Python extension is compiled, so any
        Python 3 of the platform can use it."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    commands["bdist_wheel"] = bdist_wheel_any_python

setup(version=version(), distclass=NativeDistribution, cmdclass=commands)
