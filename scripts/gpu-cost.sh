#!/bin/sh
# gpu-cost.sh - what the tracer costs a PyTorch training step, measured side by
# side in one run: caching allocator, and every tensor a cudaMalloc.
#   scripts/gpu-cost.sh [BUILD_DIR] [ROUNDS]
set -u
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
for mode in default no_caching; do
    if [ $mode = no_caching ]; then export PYTORCH_NO_CUDA_MEMORY_CACHING=1; fi
    for round in $(seq "$rounds"); do
        plain=$(python3 tests/gpu/torch_step_time.py 2000)
        traced=$(LD_PRELOAD=$build/libcumemtrace.so CUMEMTRACE_QUIET=1 CUMEMTRACE_FORMAT=none \
                 python3 tests/gpu/torch_step_time.py 2000)
        echo "$mode round $round untraced $plain traced $traced"
    done
    unset PYTORCH_NO_CUDA_MEMORY_CACHING
done
