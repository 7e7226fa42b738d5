#!/bin/sh
# ddp-proof.sh - a 2-rank DDP job under the tracer, on a machine with 2 GPUs.
#
#   scripts/ddp-proof.sh [BUILD_DIR] [OUT_DIR]
#
# Runs tests/gpu/ddp_train.py with torchrun --nproc_per_node=2 twice, without
# and with the tracer (NCCL_CUMEM_ENABLE=1, so NCCL allocates with cuMemCreate/
# cuMemMap), writes one report per rank (OUT/rank0.json, rank1.json), merges
# them with `cumemtrace merge`, and checks with tests/gpu/check_ddp.py that the
# job's results are unchanged, each report names its rank, host and device,
# and NCCL's buffers are labelled.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-/tmp/cumemtrace-ddp}
rm -rf "$out" && mkdir -p "$out"
export NCCL_CUMEM_ENABLE=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 OMP_NUM_THREADS=1
run="python3 -m torch.distributed.run --standalone --nproc_per_node=2 tests/gpu/ddp_train.py"

DDP_RESULTS="$out/untraced" $run > "$out/untraced.txt" 2> "$out/untraced.err"
DDP_RESULTS="$out/traced" "$build/cumemtrace" run --output "$out/rank%r" --format text,json \
    --quiet -- $run > "$out/traced.txt" 2> "$out/traced.err"
if "$build/cumemtrace" merge --help > /dev/null 2>&1; then
    "$build/cumemtrace" merge "$out/rank0.json" "$out/rank1.json" > "$out/merged.txt"
    "$build/cumemtrace" merge --format json "$out/rank0.json" "$out/rank1.json" > "$out/merged.json"
fi
python3 tests/gpu/check_ddp.py "$out"
