"""setup.py - the C half of `pip install .`: CMake builds and installs the
library, the command and the tracker's sources into the Python package
(cumemtrace/_prefix), laid out as `cmake --install` lays out any prefix, so
the command finds its parts the same way everywhere (src/cli/cli_install.c).
pyproject.toml holds the rest of the package's description.

Only setuptools, wheel and CMake: no network, no build isolation needed.
CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs (default: the CPUs),
CMAKE_BUILD_TYPE its type (default RelWithDebInfo), CUDAToolkit_ROOT where
CUDA's headers are."""
import os
import re
import shutil
import subprocess

from setuptools import Command, setup
from setuptools.command.build import build
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    """The project's version, from CMakeLists.txt (its one place)."""
    with open(os.path.join(HERE, "CMakeLists.txt")) as handle:
        return re.search(r"project\(cumemtrace VERSION ([0-9.]+)", handle.read()).group(1)


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
        prefix = os.path.abspath(os.path.join(self.build_lib, "cumemtrace", "_prefix"))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        steps = [[cmake, "-S", HERE, "-B", build_dir, "-DCUMEMTRACE_TESTS=OFF",
                  "-DCMAKE_BUILD_TYPE=" + (os.environ.get("CMAKE_BUILD_TYPE") or "RelWithDebInfo"),
                  "-DCMAKE_INSTALL_LIBDIR=lib"]
                 + ([f"-DCUDAToolkit_ROOT={os.environ['CUDAToolkit_ROOT']}"]
                    if os.environ.get("CUDAToolkit_ROOT") else []),
                 [cmake, "--build", build_dir, "-j", jobs],
                 [cmake, "--install", build_dir, "--prefix", prefix]]
        shutil.rmtree(prefix, ignore_errors=True)
        for step in steps:
            self.announce(" ".join(step), level=2)
            subprocess.check_call(step)


class build_with_native(build):
    sub_commands = build.sub_commands + [("build_native", None)]


class NativeDistribution(Distribution):
    """A wheel for this platform, since it holds a library and a program."""

    def has_ext_modules(self):
        return True


class bdist_wheel_any_python(bdist_wheel):
    """Tagged py3-none-PLATFORM: no Python extension is compiled, so any
    Python 3 of the platform can use it."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(version=version(), distclass=NativeDistribution,
      cmdclass={"build": build_with_native, "build_native": build_native,
                "bdist_wheel": bdist_wheel_any_python})
