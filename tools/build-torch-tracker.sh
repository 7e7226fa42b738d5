#!/bin/sh
# build-torch-tracker.sh - build libcumemtrace_torch.so for the PyTorch that
# will run under the tracer, into a build tree: PyTorch's tensors are then
# traced one by one in its default caching mode (preload/torch_tracker.cpp
# says why it must be built against that very PyTorch's headers).
#
#   tools/build-torch-tracker.sh [--bench] [BUILD_DIR]      (default: build)
#
# Not needed to use the tracker: `cumemtrace run` builds one into a per-user
# cache when none matches (python/cumemtrace/torch_tracker.py, which this runs
# too). Uses $PYTHON (default python3) to find torch, $CXX (default c++), and
# CUDA's headers from $CUDA_HOME, /usr/local/cuda, nvcc's toolkit or pip's
# NVIDIA packages. Writes BUILD_DIR/libcumemtrace_torch.so, beside
# libcumemtrace.so, where the tracer looks for it after the cache
# (CUMEMTRACE_TORCH_TRACKER names another). --bench builds
# libcumemtrace_torch_bench.so instead, whose events a variable can switch
# off (bench/gpu_cost.py's in-process comparison; never for use).
set -eu
cd "$(dirname "$0")/.."
name=libcumemtrace_torch.so
bench=""
if [ "${1:-}" = "--bench" ]; then
    name=libcumemtrace_torch_bench.so
    bench=--bench
    shift
fi
build=${1:-build}
mkdir -p "$build"
# shellcheck disable=SC2086  # $bench is an option or nothing
exec "${PYTHON:-python3}" python/cumemtrace/torch_tracker.py build --output "$build/$name" $bench
