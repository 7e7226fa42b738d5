#!/bin/sh
# check_bare.sh - on a GPU machine: native stacks, names and file:line are the
# same with the system's libunwind and libdw as without them.
#
#   tests/gpu/check_bare.sh [BUILD_DIR] [OUT_DIR]
#
# Runs a CUDA C program that leaks (examples/leak_loop, built against the real
# runtime) and a PyTorch training step (tests/gpu/torch_train.py) twice: as the
# machine is, and with every copy of libunwind.so.8 and libdw.so.1 covered by
# /dev/null in a private mount namespace (root only; elsewhere the second run
# is skipped, which on an image without them proves the same). Prints each
# run's native frames that have a file:line, and "same native frames" when the
# two runs' sets are equal; exits 1 when they differ or when the C program's
# leak is not named at examples/leak_loop.c with its function.
set -u
cd "$(dirname "$0")/../.."
build=$(cd "${1:-build}" && pwd)
out=${2:-/tmp/cumemtrace-bare}
mkdir -p "$out"
lib=$build/libcumemtrace.so
cuda_lib=${CUDA_LIB:-/usr/local/cuda/lib64}

hide=""
for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    for name in libunwind.so.8 libdw.so.1; do
        [ -e "$d/$name" ] && hide="$hide mount --bind /dev/null $(readlink -f "$d/$name");"
    done
done

run() {    # run NAME HIDE COMMAND...: the tracer preloaded into COMMAND only
    name=$1 hidden=$2
    shift 2
    if [ "$hidden" = 1 ]; then
        [ "$(id -u)" = 0 ] || { echo "($name: not root, no private mount namespace: skipped)"; return 1; }
        unshare -m sh -c "$hide exec env LD_LIBRARY_PATH=$cuda_lib LD_PRELOAD=$lib \
            CUMEMTRACE_OUTPUT=$out/$name CUMEMTRACE_FORMAT=json,text CUMEMTRACE_QUIET=1 \"\$@\"" \
            sh "$@" > /dev/null
    else
        env LD_LIBRARY_PATH=$cuda_lib LD_PRELOAD=$lib CUMEMTRACE_OUTPUT=$out/$name \
            CUMEMTRACE_FORMAT=json,text CUMEMTRACE_QUIET=1 "$@" > /dev/null
    fi
}

status=0
for hidden in 0 1; do
    run "c-$hidden" $hidden "$build/examples/leak_loop" 3 || continue
    run "torch-$hidden" $hidden python3 tests/gpu/torch_train.py 2000
done
grep -n "leaked at" "$out/c-0.txt" | head -3
grep -q "leaked at examples/leak_loop.c:[0-9]* in leak_scratch_buffer" "$out/c-0.txt" || status=1
python3 - "$out" <<'PY' || status=1
import glob, json, os, sys
out = sys.argv[1]
def native(path):
    with open(path) as handle:
        report = json.load(handle)
    return {(f["function"], os.path.basename(f["file"] or ""), f["line"])
            for f in report.get("frames", []) if not f["python"] and f["file"]}
differ = False
for program in ("c", "torch"):
    runs = {h: glob.glob(f"{out}/{program}-{h}.json") for h in ("0", "1")}
    if not runs["0"]:
        print(f"{program}: no report"); differ = True; continue
    first = native(runs["0"][0])
    print(f"{program}: {len(first)} native frames with file:line, e.g. {sorted(first)[:3]}")
    if runs["1"]:
        second = native(runs["1"][0])
        print(f"{program}: " + ("same native frames" if first == second else
                                f"DIFFERENT: only as is {first - second}, only hidden {second - first}"))
        differ |= first != second
sys.exit(1 if differ else 0)
PY
exit $status
