#!/bin/sh
# ddp-proof.sh - a 2-rank DDP job under the tracer, in PyTorch's default
# caching mode: over NCCL on 2 GPUs, or over gloo with both ranks on one GPU
# when there is only one.
#
#   tests/gpu/ddp-proof.sh [BUILD_DIR] [OUT_DIR]
#
# Builds the PyTorch tracker (libcumemtrace_torch.so) beside the library if it
# is not there, so that tensors are traced one by one. Runs
# tests/gpu/ddp_train.py with torchrun --nproc_per_node=2 twice, without and
# with the tracer (NCCL_CUMEM_ENABLE=1, so NCCL allocates with cuMemCreate/
# cuMemMap), writes one report per rank (OUT/rank0.json, rank1.json), merges
# them with `cumemtrace merge`, and checks with tests/gpu/check_ddp.py that the
# job's results are unchanged, each report names its rank and host, NCCL's
# buffers are labelled (on 2 GPUs), and the merge's first stack is the line
# where rank 1 alone keeps a clone of every output, with each rank's bytes.
# Prints PASS or FAIL per check and for the whole.
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-/tmp/cumemtrace-ddp}
rm -rf "$out" && mkdir -p "$out"
[ -e "$build/libcumemtrace_torch.so" ] || tools/build-torch-tracker.sh "$build"
export NCCL_CUMEM_ENABLE=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 OMP_NUM_THREADS=1
export CUMEMTRACE_SAMPLE_MS=20
run="python3 -m torch.distributed.run --standalone --nproc_per_node=2 tests/gpu/ddp_train.py"

DDP_RESULTS="$out/untraced" $run > "$out/untraced.txt" 2> "$out/untraced.err"
DDP_RESULTS="$out/traced" "$build/cumemtrace" run --output "$out/rank%r" --format text,json \
    --quiet -- $run > "$out/traced.txt" 2> "$out/traced.err"
for rank in 0 1; do
    [ -e "$out/rank$rank.json" ] || { echo "FAIL no report $out/rank$rank.json; see $out/traced.err"; exit 1; }
done
"$build/cumemtrace" merge "$out/rank0.json" "$out/rank1.json" > "$out/merged.txt"
"$build/cumemtrace" merge --format json "$out/rank0.json" "$out/rank1.json" > "$out/merged.json"
python3 tests/gpu/check_ddp.py "$out"
