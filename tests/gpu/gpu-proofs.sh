#!/bin/sh
# gpu-proofs.sh - the reports that matter most, on a real GPU:
#   1. PyTorch runs out of memory: the OOM report names the Python line
#   2. a CUDA C program leaks and segfaults: the dump, symbolized, lists its blocks
#   3. a training loop gets SIGUSR2 three times: three snapshots, results unchanged
#
#   tests/gpu/gpu-proofs.sh [BUILD_DIR] [OUT_DIR]
set -u
cd "$(dirname "$0")/../.."
build=$(cd "${1:-build}" && pwd)
out=${2:-/tmp/cumemtrace-proofs}
mkdir -p "$out"
lib=$build/libcumemtrace.so
cuda_lib=${CUDA_LIB:-/usr/local/cuda/lib64}

echo "== 1. PyTorch out of memory"
LD_PRELOAD=$lib CUMEMTRACE_OUTPUT=$out/oom CUMEMTRACE_FORMAT=text,json CUMEMTRACE_QUIET=1 \
    python3 tests/gpu/torch_oom.py
grep -n "OUT OF MEMORY\|verdict\|retry" "$out/oom-oom.txt"
grep -n -m3 "torch_oom.py" "$out/oom-oom.txt"
python3 tests/gpu/check_oom.py "$out/oom-oom.json"

echo "== 2. CUDA C program that leaks, then segfaults"
LD_LIBRARY_PATH=$cuda_lib LD_PRELOAD=$lib CUMEMTRACE_OUTPUT=$out/segv \
    "$build/gpu/gpu_segv_after_leak"
echo "exit status $? (139 = killed by SIGSEGV)"
"$build/cumemtrace" symbolize "$out/segv.dump" --output "$out/segv-symbolized" \
    --format text,json | sed -n 1,20p

echo "== 3. SIGUSR2 three times during training"
python3 tests/gpu/torch_train.py 8000 > "$out/untraced.txt"
LD_PRELOAD=$lib CUMEMTRACE_OUTPUT=$out/train CUMEMTRACE_QUIET=1 \
    python3 tests/gpu/torch_train.py 8000 > "$out/traced.txt" &
pid=$!
sleep 6
for i in 1 2 3; do kill -USR2 $pid; sleep 1; done
wait $pid
echo "exit status $?"
ls "$out" | grep "train-signal" 
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
untraced = json.loads(open(f"{out}/untraced.txt").read().strip().splitlines()[-1])
traced = json.loads(open(f"{out}/traced.txt").read().strip().splitlines()[-1])
print("loss untraced", untraced["loss"], "traced", traced["loss"],
      "same" if untraced["loss"] == traced["loss"] else "DIFFERENT")
PY
