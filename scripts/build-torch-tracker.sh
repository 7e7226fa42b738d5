#!/bin/sh
# build-torch-tracker.sh - build libcumemtrace_torch.so for the PyTorch that
# will run under the tracer: PyTorch's tensors are then traced one by one in
# its default caching mode (preload/torch_tracker.cpp says why it must be built
# against that very PyTorch's headers).
#
#   scripts/build-torch-tracker.sh [--bench] [BUILD_DIR]      (default: build)
#
# Uses $PYTHON (default python3) to find torch, $CXX (default c++), and the
# CUDA headers from $CUDA_HOME, /usr/local/cuda or nvcc's directory. Writes
# BUILD_DIR/libcumemtrace_torch.so, beside libcumemtrace.so, where the tracer
# looks for it (CUMEMTRACE_TORCH_TRACKER names another). --bench builds
# libcumemtrace_torch_bench.so instead, whose events a variable can switch
# off (bench/gpu_cost.py's in-process comparison; never for use).
set -eu
cd "$(dirname "$0")/.."
name=libcumemtrace_torch.so
switch=""
if [ "${1:-}" = "--bench" ]; then
    name=libcumemtrace_torch_bench.so
    switch=-DCUMEMTRACE_BENCH_SWITCH
    shift
fi
build=${1:-build}
python=${PYTHON:-python3}
cxx=${CXX:-c++}

facts=$("$python" - <<'PY'
import os
import torch
from torch.utils import cpp_extension
root = os.path.dirname(torch.__file__)
version = torch.__version__
major, minor = (int(x) for x in version.split(".")[:2])
print(root)
print(version)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("c++20" if (major, minor) >= (2, 12) else "c++17")
print(" ".join("-isystem " + p for p in cpp_extension.include_paths()))
PY
) || { echo "build-torch-tracker: $python cannot import torch" >&2; exit 1; }
root=$(echo "$facts" | sed -n 1p)
version=$(echo "$facts" | sed -n 2p)
abi=$(echo "$facts" | sed -n 3p)
std=$(echo "$facts" | sed -n 4p)
includes=$(echo "$facts" | sed -n 5p)

cuda=""
for dir in "${CUDA_HOME:-}" /usr/local/cuda "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")")"; do
    if [ -n "$dir" ] && [ -e "$dir/include/cuda_runtime_api.h" ]; then
        cuda="$dir/include"
        break
    fi
done
[ -n "$cuda" ] || { echo "build-torch-tracker: CUDA's headers not found (set CUDA_HOME)" >&2; exit 1; }

mkdir -p "$build"
# shellcheck disable=SC2086  # $includes is a list of options
"$cxx" -std="$std" -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra \
    -D_GLIBCXX_USE_CXX11_ABI="$abi" -DCUMEMTRACE_TORCH_VERSION="\"$version\"" $switch \
    $includes -isystem "$cuda" -Ipreload preload/torch_tracker.cpp \
    -o "$build/$name" -L"$root/lib" -lc10_cuda -lc10 -ltorch_cpu -Wl,-z,nodelete
echo "build-torch-tracker: built $build/$name for PyTorch $version"
