#!/bin/sh
# demo.sh - the main job: build, then run the leak examples under the tracer.
#
# On a machine with an NVIDIA GPU the examples run on it; without one they run
# on the CUDA simulator bundled for the tests (build/sim), so the report you
# see is produced by the real interposition paths either way.
set -eu
cd "$(dirname "$0")/.."
echo "demo: setting up, then building cumemtrace, the CUDA simulator and the examples in build/"
scripts/setup.sh build
out=${CUMEMTRACE_DEMO_DIR:-build/demo}
mkdir -p "$out"
if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "demo: running on the GPU"
    libs=""
else
    echo "demo: no GPU here; running on the CUDA simulator (build/sim)"
    libs="$PWD/build/sim"
fi
for example in leak_loop pinned_pileup async_leak vmm_unreleased; do
    echo
    echo "################ $example"
    LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    LD_PRELOAD="$PWD/build/libcumemtrace.so" \
    CUMEMTRACE_OUTPUT="$out/$example" CUMEMTRACE_FORMAT=text,json,html CUMEMTRACE_TOP=3 \
    CUMEMTRACE_SAMPLE_MS=5 \
        "build/examples/$example"
done
echo
echo "demo: full reports in $out/ (.txt to read, .html to look at, .json for tools)"
