#!/bin/sh
# check_install.sh - from `pip install` to PyTorch's tensors, with no CUDA
# toolkit in sight: what a pip user of PyTorch meets.
#
#   tests/gpu/check_install.sh [PYTHON]       (default python3: the one with PyTorch)
#
# In a fresh virtualenv over PYTHON's PyTorch (--system-site-packages), with
# CUDA_HOME unset, no nvcc on PATH, no CUDA directory in CPATH, LIBRARY_PATH
# and the like, and /usr/local/cuda hidden (bind-mounted empty in a private
# mount namespace where root may; CUMEMTRACE_NO_SYSTEM_CUDA=1, which the
# header search of setup.py and of the tracker's builder honour, in any
# case): pip install --no-build-isolation --no-index of this checkout, then
# `cumemtrace run python tests/gpu/torch_train.py` twice (the first builds
# PyTorch's tracker into a fresh cache and records tensors: the report's
# PyTorch cache view is "blocks"; the second builds nothing), python -m
# cumemtrace run once, and cumemtrace doctor. Prints where CUDA's headers
# came from, a PASS or FAIL line per check; exit status 1 on any FAIL.
set -u
cd "$(dirname "$0")/../.."
checkout=$PWD
python=${1:-python3}

if [ -z "${CHECK_INSTALL_HIDDEN:-}" ]; then
    # Once: hide /usr/local/cuda in a mount namespace of our own, if we may.
    export CHECK_INSTALL_HIDDEN="CUMEMTRACE_NO_SYSTEM_CUDA=1 and the environment only"
    cuda_dir=$(readlink -f /usr/local/cuda 2>/dev/null || true)
    if [ "$(id -u)" = 0 ] && [ -n "$cuda_dir" ] && [ -d "$cuda_dir" ] && command -v unshare >/dev/null &&
       unshare -m true 2>/dev/null; then
        empty=$(mktemp -d /tmp/cumemtrace-empty-XXXXXX)
        export CHECK_INSTALL_HIDDEN="$cuda_dir bind-mounted empty (private mount namespace)"
        exec unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec sh "$@"' sh \
            "$empty" "$cuda_dir" "$0" "$@"
    fi
fi

status=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; status=1; }

# No CUDA toolkit anywhere the builds look.
unset CUDA_HOME CUDA_PATH CUDAToolkit_ROOT CUDA_ROOT
export CUMEMTRACE_NO_SYSTEM_CUDA=1
strip_cuda() {   # a PATH-like list without the entries that hold CUDA
    echo "$1" | tr ':' '\n' | grep -v -i cuda | grep -v '^$' | paste -sd: -
}
new_path=""
for dir in $(echo "$PATH" | tr ':' ' '); do
    [ -x "$dir/nvcc" ] && continue
    case "$dir" in *cuda*) continue ;; esac
    new_path="$new_path${new_path:+:}$dir"
done
export PATH="$new_path"
for variable in CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH LIBRARY_PATH; do
    eval "value=\${$variable:-}"
    # shellcheck disable=SC2154  # value is set by the eval
    [ -n "$value" ] && export "$variable=$(strip_cuda "$value")"
done
echo "CUDA toolkit hidden by: $CHECK_INSTALL_HIDDEN"
if command -v nvcc >/dev/null; then fail "nvcc is still on PATH: $(command -v nvcc)"; fi
[ -e /usr/local/cuda/include/cuda.h ] && echo "note: /usr/local/cuda/include/cuda.h still visible; only CUMEMTRACE_NO_SYSTEM_CUDA=1 keeps the builds from it"

# What pip install --no-build-isolation needs, offline.
missing=""
for module in venv pip setuptools wheel torch; do
    "$python" -c "import $module" 2>/dev/null || missing="$missing $module"
done
command -v cmake >/dev/null || missing="$missing cmake"
command -v c++ >/dev/null || command -v g++ >/dev/null || missing="$missing g++"
if [ -n "$missing" ]; then
    fail "$python lacks:$missing (pip install --no-build-isolation needs setuptools and wheel; the C build cmake and a compiler)"
    exit 1
fi
pass "$python has venv, pip, setuptools, wheel, torch; cmake and a C++ compiler are here"
"$python" -c "import torch, setuptools, wheel; print('torch', torch.__version__, 'setuptools', setuptools.__version__, 'wheel', wheel.__version__)"

work=$(mktemp -d /tmp/cumemtrace-install-XXXXXX)
echo "work: $work"
mkdir "$work/checkout"
tar -C "$checkout" --exclude=./build --exclude='./build-*' --exclude=./.git -cf - . |
    tar -C "$work/checkout" -xf -
"$python" -m venv --system-site-packages "$work/venv" || { fail "python -m venv"; exit 1; }
venv_python="$work/venv/bin/python"
if ! "$venv_python" -c "import torch" 2>/dev/null; then
    # PYTHON is itself a virtualenv's, whose packages --system-site-packages
    # does not reach: its site directories, named in a .pth file, do.
    "$python" -c "import sys; print('\n'.join(p for p in sys.path if p.endswith('-packages')))" \
        > "$("$venv_python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/machine-torch.pth"
    echo "note: $python is a virtualenv's; its site-packages reached through a .pth file"
fi
"$venv_python" -c "import torch" 2>/dev/null && pass "the virtualenv imports the machine's torch" ||
    { fail "the virtualenv cannot import torch"; exit 1; }
if "$venv_python" -m pip install -v --no-build-isolation --no-index "$work/checkout" \
       > "$work/pip.log" 2>&1; then
    pass "pip install --no-build-isolation --no-index (log: $work/pip.log)"
else
    tail -30 "$work/pip.log"
    fail "pip install (log: $work/pip.log)"
    exit 1
fi
grep -m1 "cumemtrace: CUDA's headers from" "$work/pip.log" | sed 's/^ */library build: /'

export PATH="$work/venv/bin:$PATH"
export XDG_CACHE_HOME="$work/cache"
train="$checkout/tests/gpu/torch_train.py"
view() {   # the PyTorch cache view of the report $1, and its tensor count
    "$venv_python" - "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
caches = [c for c in report.get("caches", []) if c["kind"] == "torch_tensor"]
tensors = sum(d["counters"].get("torch_tensor", {}).get("allocation", {}).get("allocated", 0)
              for d in report.get("devices", []))
print(caches[0]["view"] if caches else "none", tensors)
PY
}

cd "$work" || exit 1
cumemtrace run -f json -o "$work/first" -- python "$train" > "$work/first.out" 2> "$work/first.err"
echo "first run's words:"; grep "cumemtrace:" "$work/first.err" | grep -v "report written" | sed 's/^/    /'
grep -q "building libcumemtrace_torch.so" "$work/first.err" &&
    pass "the first run builds the tracker" || fail "the first run did not build the tracker"
headers=$(sed -n 's/.*(CUDA headers from \(.*\))$/\1/p' "$work/first.err" | head -1)
echo "tracker's CUDA headers came from: ${headers:-?}"
case "$headers" in
    */site-packages/nvidia/*) pass "headers from pip's NVIDIA package" ;;
    *) fail "headers not from pip's NVIDIA package: ${headers:-none}" ;;
esac
set -- $(view "$work/first.json")
[ "${1:-}" = blocks ] && pass "first run: PyTorch cache view is blocks (${2:-?} tensors allocated)" ||
    fail "first run: PyTorch cache view is ${1:-no report} (stderr: $work/first.err)"
ls -l --time-style=+%s "$work/cache/cumemtrace" > "$work/cache-1.txt"

cumemtrace run -f json -o "$work/second" -- python "$train" > "$work/second.out" 2> "$work/second.err"
ls -l --time-style=+%s "$work/cache/cumemtrace" > "$work/cache-2.txt"
if ! grep -q "building" "$work/second.err" && cmp -s "$work/cache-1.txt" "$work/cache-2.txt"; then
    pass "the second run builds nothing (the cache unchanged)"
else
    fail "the second run built again: $(grep building "$work/second.err")"
fi
set -- $(view "$work/second.json")
[ "${1:-}" = blocks ] && pass "second run: blocks (${2:-?} tensors allocated)" ||
    fail "second run: PyTorch cache view is ${1:-no report}"

python -m cumemtrace run -f json -o "$work/third" "$train" > "$work/third.out" 2> "$work/third.err"
set -- $(view "$work/third.json")
[ "${1:-}" = blocks ] && pass "python -m cumemtrace run: blocks" ||
    fail "python -m cumemtrace run: PyTorch cache view is ${1:-no report} ($work/third.err)"

echo "cumemtrace doctor:"
cumemtrace doctor
echo
[ $status = 0 ] && echo "check_install: all PASS" || echo "check_install: some FAIL"
exit $status
