#!/bin/sh
# test.sh - build and run every test on the CUDA simulator (no GPU needed).
#
#   scripts/test.sh            the normal build (build/)
#   scripts/test.sh --asan     also a build with AddressSanitizer + UBSan (build-asan/)
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh build
(cd build && ctest --output-on-failure -j 2)
if [ "${1:-}" = "--asan" ]; then
    scripts/setup.sh build-asan -DCUMEMTRACE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    asan=$(gcc -print-file-name=libasan.so)
    export CUMEMTRACE_TEST_PRELOAD_FIRST="$asan"
    # use_sigaltstack=0: ASan's own alternate signal stack, torn down as each
    # thread exits, once failed its own check there (a sigaltstack call reading
    # stale stack shadow, inside AsanThread::Destroy: jax_sweep_cost, 1 run in
    # about 30). The tests leave fatal signals to the tracer, not to ASan.
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:use_sigaltstack=0
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    (cd build-asan && ctest --output-on-failure -j 2)
fi
