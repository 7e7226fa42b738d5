#!/bin/sh
# setup.sh - install what cumemtrace needs (Debian/Ubuntu) and build it.
#
#   scripts/setup.sh [BUILD_DIR] [cmake options...]
#
# Needs the CUDA toolkit's headers (found through nvcc, CUDAToolkit_ROOT or
# /usr/local/cuda). Installs libunwind and libdw (only the tests use them, to
# compare the tracer's own stacks and names with theirs), pkg-config, cmake and the
# Python JSON-schema checker with apt-get when run as root and they are missing,
# g++ for the tests' stand-in for PyTorch's allocator, Chromium, in which
# the tests load the HTML report (headless), tmux, in which they watch
# `cumemtrace live`, pytest, whose plugin they try, clang with libFuzzer,
# which builds the fuzzing targets (tests/fuzz), clang-format-14, with which
# they hold the C sources to .clang-format (scripts/format.sh), and pip,
# setuptools, wheel and venv, with which they pip install the checkout into a
# virtualenv.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift

packages="cmake gcc g++ make pkg-config libunwind8 python3 python3-jsonschema libdw1 valgrind
          chromium tmux python3-pytest clang-14 libclang-rt-14-dev clang-format-14
          python3-pip python3-setuptools python3-wheel python3-venv"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: installing$missing"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
        echo "setup: please install:$missing" >&2
        exit 1
    fi
fi

if [ ! -e /usr/local/cuda/include/cuda.h ] && ! command -v nvcc >/dev/null && [ -z "${CUDAToolkit_ROOT:-}" ]; then
    echo "setup: the CUDA toolkit's headers are needed (set CUDAToolkit_ROOT)" >&2
    exit 1
fi
root=${CUDAToolkit_ROOT:-/usr/local/cuda}
echo "setup: configuring $build (cmake)"
cmake -S . -B "$build" -DCUDAToolkit_ROOT="$root" "$@" >/dev/null
echo "setup: building $build with $(nproc) jobs: the library, the command, the CUDA simulator," \
     "the tests and fuzzers (a few minutes the first time on 2 cores)"
cmake --build "$build" -j "$(nproc)" >/dev/null
echo "setup: built $build/libcumemtrace.so"
