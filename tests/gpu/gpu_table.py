#!/usr/bin/env python3
"""Run every allocation path under the tracer on a real GPU and print a table.

For each path: the allocations the tracer saw against those the program (or
framework) says it made, and the live bytes the tracer holds at exit against
the framework's own figure. Full reports are kept in --out.

    tests/gpu/gpu_table.py --build build --out /tmp/gpu-table
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))          # tests/gpu
SOURCE = os.path.dirname(os.path.dirname(HERE))


def run(name, command, env, args):
    environment = dict(os.environ)
    environment.update(env)
    report_base = os.path.join(args.out, name.replace(" ", "_").replace(":", "-"))
    environment["LD_PRELOAD"] = os.path.join(os.path.abspath(args.build), "libcumemtrace.so")
    environment["CUMEMTRACE_OUTPUT"] = report_base
    environment["CUMEMTRACE_SNAPSHOT"] = report_base + "-at-print"
    environment["CUMEMTRACE_FORMAT"] = "text,json"
    environment["CUMEMTRACE_QUIET"] = "1"
    started = time.time()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True,
                               timeout=600)
    elapsed = time.time() - started
    with open(report_base + ".log", "w") as log:
        log.write(f"$ {' '.join(command)}\nexit {completed.returncode}\n")
        log.write(completed.stdout + "\n---- stderr ----\n" + completed.stderr)
    figures = {}
    for line in completed.stdout.splitlines():
        if line.startswith("{"):
            figures = json.loads(line)
    report = load(report_base + ".json")
    snapshot = load(report_base + "-at-print.json")
    return completed.returncode, figures, report, snapshot, elapsed


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


def live_by_api(report, apis):
    return sum(g["bytes"] for g in report["live"] if g["api"] in apis)


def device_live(report):
    return sum(d["counters"]["device_memory"]["allocated_bytes"]["current"]
               for d in report["devices"])


def api_allocations(report, names):
    return sum(e["allocations"] for e in report["entry_points"] if e["name"] in names)


def kind_current(report, kind, field="allocated_bytes"):
    return sum(d["counters"][kind][field]["current"] for d in report["devices"])


def kind_allocated(report, kind):
    return sum(d["counters"][kind]["allocation"]["allocated"] for d in report["devices"])


def python_attribution(report):
    """Share of live bytes whose stack has a Python frame, and the top such line."""
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}
    total = with_python = 0
    top = None
    for group in sorted(report.get("live", []), key=lambda g: -g["bytes"]):
        total += group["bytes"]
        # line 0: the marker before the main thread's frames (a thread running no Python)
        python = [frames[i] for i in stacks[group["stack"]]["frames"]
                  if frames[i].get("python") and frames[i].get("line")]
        if python:
            with_python += group["bytes"]
            top = top or f"{os.path.basename(python[0]['file'])}:{python[0]['line']}"
    share = 100.0 * with_python / total if total else 0.0
    return f"{share:.0f}% of live bytes have a Python line; top: {top or '-'}"


def mib(value):
    return "-" if value is None else f"{value / 1048576:.1f} MiB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="/tmp/cumemtrace-gpu-table")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    build = os.path.abspath(args.build)
    gpu = os.path.join(SOURCE, "tests", "gpu")
    py = args.python
    rows = []

    # C programs find the toolkit's runtime; Python frameworks keep their own.
    cuda_lib = os.environ.get("CUDA_LIB", "/usr/local/cuda/lib64")
    c_env = {"LD_LIBRARY_PATH": cuda_lib + ":" + os.environ.get("LD_LIBRARY_PATH", "")}

    def c_program(name, path):
        rc, figures, report, _, elapsed = run(name, [path], c_env, args)
        if not report:
            rows.append((name, rc, "no report", "", "", ""))
            return
        kinds = ("device", "pinned_host", "managed", "stream_ordered", "vmm_physical")
        seen = sum(kind_allocated(report, k) for k in kinds)
        live = sum(kind_current(report, k) for k in kinds)
        rows.append((name, rc, f"{seen} / {figures.get('allocations')}",
                     f"{mib(live)} / {mib(figures.get('live_bytes'))} (at exit)", "-",
                     "the program's own count and live bytes"))

    c_program("static cudart", os.path.join(build, "gpu", "gpu_paths_static"))
    c_program("shared cudart", os.path.join(build, "gpu", "gpu_paths_shared"))
    c_program("driver API + VMM", os.path.join(build, "gpu", "gpu_driver_api"))

    rc, figures, report, _, elapsed = run("cudaMallocAsync (C)",
                                          [os.path.join(build, "examples", "async_leak")],
                                          c_env, args)
    if report:
        rows.append(("cudaMallocAsync (C)", rc,
                     f"{api_allocations(report, ['cudaMallocAsync'])} / 30",
                     f"{mib(kind_current(report, 'stream_ordered'))} / {mib(10 << 20)} (at exit)",
                     "-", "30 requests, 10 leaked by design"))

    # PyTorch: the tracer's snapshot is taken at the instant the script prints
    # PyTorch's own figures. Allocations outside PyTorch's allocator (cuBLAS
    # handles allocate with cuMemAlloc directly) are shown apart.
    default_allocations = None
    torch_modes = [
        ("torch default", {}, ["cudaMalloc"], "segment_allocated", "memory_reserved"),
        ("torch expandable_segments", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
         ["cuMemCreate"], None, "memory_reserved"),
        ("torch backend:cudaMallocAsync", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
         ["cudaMallocAsync", "cudaMallocAsync_ptsz", "cudaMallocFromPoolAsync",
          "cudaMallocFromPoolAsync_ptsz"], None, "memory_allocated"),
        ("torch NO_CUDA_MEMORY_CACHING", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
         ["cudaMalloc"], "default_allocations", "default_memory_allocated"),
    ]
    default_figures = {}
    for name, env, apis, count_key, bytes_key in torch_modes:
        rc, figures, report, snap, elapsed = run(name, [py, os.path.join(gpu, "torch_train.py")],
                                                 env, args)
        if name == "torch default":
            default_figures = figures
        if not snap:
            rows.append((name, rc, "no snapshot", "", "", json.dumps(figures)))
            continue
        seen = api_allocations(snap, apis)
        if count_key == "default_allocations":
            expected = default_figures.get("allocation_allocated")
            note = ("PyTorch keeps no statistics in this mode: compared with the default run's "
                    "allocation.all.allocated and memory_allocated()")
            reference = default_figures.get("memory_allocated")
        else:
            expected = figures.get(count_key) if count_key else None
            reference = figures.get(bytes_key)
            note = f"{count_key or 'no count kept by PyTorch'}; {bytes_key}()"
        framework_live = live_by_api(snap, apis)
        outside = device_live(snap) - framework_live
        if "cudaMallocAsync" in name:
            outside = device_live(snap) - framework_live
        rows.append((name, rc, f"{seen} / {expected if expected is not None else '-'}",
                     f"{mib(framework_live)} / {mib(reference)}", mib(outside),
                     f"{note}; loss {figures.get('loss')}; {python_attribution(snap)}"))

    rc, figures, report, snap, elapsed = run("cupy", [py, os.path.join(gpu, "cupy_loop.py")], {}, args)
    if snap:
        framework_live = live_by_api(snap, ["cuMemAlloc_v2", "cudaMalloc"])
        rows.append(("CuPy", rc, f"{api_allocations(snap, ['cuMemAlloc_v2', 'cudaMalloc'])} / -",
                     f"{mib(framework_live)} / {mib(figures.get('pool_total_bytes'))}",
                     mib(device_live(snap) - framework_live),
                     "pool.total_bytes(); CuPy links cudart statically: seen at the driver level; "
                     + python_attribution(snap)))
    else:
        rows.append(("CuPy", rc, "no snapshot", "", "", ""))

    rc, figures, report, snap, elapsed = run("jax", [py, os.path.join(gpu, "jax_loop.py")],
                                             {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, args)
    if snap:
        framework_live = live_by_api(snap, ["cuMemCreate"])
        rows.append(("JAX", rc, f"{api_allocations(snap, ['cuMemCreate'])} / -",
                     f"{mib(framework_live)} / {mib(figures.get('pool_bytes'))}",
                     mib(device_live(snap) - framework_live),
                     "memory_stats()['pool_bytes']; XLA allocates with cuMemCreate; "
                     + python_attribution(snap)))
    else:
        rows.append(("JAX", rc, "no snapshot", "", "", ""))

    header = ("path", "exit", "allocations seen / expected",
              "live: tracked / framework's figure", "other libraries' device memory", "reference")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "table.md"), "w") as handle:
        handle.write(table + "\n")


if __name__ == "__main__":
    main()
