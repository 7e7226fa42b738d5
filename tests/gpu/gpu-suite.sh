#!/bin/sh
# gpu-suite.sh - run the GPU proofs on a machine with an NVIDIA GPU.
#
#   tests/gpu/gpu-suite.sh [BUILD_DIR] [OUT_DIR]
#
# Expects a build made on a machine with the CUDA toolkit (scripts/setup.sh),
# runs the examples and tests/gpu programs on the real driver, PyTorch in its
# four allocator modes, CuPy and JAX, and prints the table of
# tests/gpu/gpu_table.py.
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-/tmp/cumemtrace-gpu}
mkdir -p "$out"
nvidia-smi -L
python3 tests/gpu/gpu_table.py --build "$build" --out "$out"
