"""Run examples/torch_patterns.py under the tracer and check each verdict.

    python3 tests/gpu/check_patterns.py --build build [--out DIR]

For a leak pattern the report must list a growing site, or one that grew,
then was freed near the end (growth.released), whose Python frames include
the pattern's SITE line; for a non-leak, no growing site at all, its SITE
line in neither list, and the largest live group must name its SITE line
where it has one; where
FRAGMENTATION names a verdict, the report's fragmentation verdict must be it.
Prints a table (pattern, expected, verdict, line named, growth, fragmentation,
PyTorch's allocated/reserved at exit against the tracer's live device bytes);
exits 1 on any miss.
"""
import argparse
import json
import os
import subprocess
import sys

import report_frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "torch_patterns.py")
LEAKS = ["kept_in_list", "loss_with_graph", "retain_graph", "pinned_pileup"]
NOT_LEAKS = ["dataset_on_gpu", "cache_holds_freed", "no_zero_grad", "grad_accumulation",
             "alternating_sizes"]
# The fragmentation verdict some patterns must get (PyTorch's counters at exit).
FRAGMENTATION = {"cache_holds_freed": "idle_cache", "alternating_sizes": "fragmented"}


def site_lines():
    lines = {}
    with open(SCRIPT) as handle:
        for number, text in enumerate(handle, 1):
            if "# SITE-" in text:
                lines[text.split("# SITE-")[1].split()[0]] = number
    return lines


def python_lines(report, stack_id):
    return [(f["line"], f["function"])
            for f in report_frames.script_frames(report, stack_id, "torch_patterns.py")]


def outer_native(report, stack_id):
    """The outermost native function names of a stack: where a thread started."""
    frames = {f["id"]: f for f in report["frames"]}
    stack = next(s for s in report["stacks"] if s["id"] == stack_id)
    names = [frames[i].get("function") or "?" for i in stack["frames"]
             if not frames[i].get("python")]
    return [n.split("(")[0] for n in names if n not in ("?", "clone3", "start_thread")][-2:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/cumemtrace-patterns")
    parser.add_argument("patterns", nargs="*", help="a subset (default: all)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sites = site_lines()
    rows, failures = [], 0
    for pattern in args.patterns or LEAKS + NOT_LEAKS:
        base = os.path.join(args.out, pattern)
        env = dict(os.environ, LD_PRELOAD=os.path.join(os.path.abspath(args.build), "libcumemtrace.so"),
                   CUMEMTRACE_OUTPUT=base, CUMEMTRACE_FORMAT="text,json", CUMEMTRACE_QUIET="1",
                   CUMEMTRACE_SAMPLE_MS="100")
        done = subprocess.run([sys.executable, SCRIPT, pattern], env=env, capture_output=True,
                              text=True, timeout=300)
        printed = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
        try:
            report = json.load(open(base + ".json"))
        except OSError:
            rows.append((pattern, "-", f"no report (exit {done.returncode})", "", "", "", "", ""))
            failures += 1
            continue
        # Growing, or grew and was freed near the end (a list freed when its
        # function returned, just before the program ends): either names a leak.
        growing = report["growth"]["growing"]
        released = report["growth"].get("released", [])
        entries = growing + released
        expected = "growing, or grew, then freed" if pattern in LEAKS else "not growing"
        verdict = "growing" if growing else "grew, then freed" if released else "not growing"
        named, growth = "-", "-"
        ok = bool(entries) if pattern in LEAKS else not growing
        site = sites.get(pattern)
        if entries:
            # The first site listed; if it has no line of the script (an
            # allocation made in a thread running no Python, such as PyTorch's
            # autograd engine), say where its thread started and look further.
            named_sites = []
            for rank, entry in enumerate(entries, 1):
                lines = python_lines(report, entry["stack"])
                if lines:
                    named_sites.append((rank, entry, lines))
                elif rank == 1:
                    named = f"#1 of {len(entries)}: no Python line ({' <- '.join(outer_native(report, entry['stack']))})"
            entry = entries[0]
            growth = (f"{entry['rate'] / 2**20:.1f} MiB/s, {entry['first_bytes'] / 2**20:.0f} -> "
                      + (f"{entry['live_bytes'] / 2**20:.0f} MiB" if growing else
                         f"peak {entry['peak_bytes'] / 2**20:.0f} -> {entry['live_bytes'] / 2**20:.0f} MiB"))
            if named_sites:
                rank, _, lines = named_sites[0]
                text = ", ".join(f"{line} ({function})" for line, function in lines[:2])
                named = text if rank == 1 else f"{named}; #{rank}: {text}"
            site_named = any(site in [line for line, _ in lines] for _, _, lines in named_sites)
            if pattern in LEAKS:
                ok = ok and site_named
            else:
                ok = ok and not site_named
        if not growing:
            top = max(report["live"], key=lambda g: g["bytes"]) if report["live"] else None
            if top:
                lines = python_lines(report, top["stack"])
                if not entries:
                    named = (", ".join(f"{line} ({function})" for line, function in lines[:2])
                             or "no line") + f" holds {top['bytes'] / 2**20:.0f} MiB"
                if pattern in ("dataset_on_gpu", "cache_holds_freed"):
                    ok = ok and site in [line for line, _ in lines]
        fragmentation = report["fragmentation"]
        want = FRAGMENTATION.get(pattern)
        if want:
            ok = ok and fragmentation["verdict"] == want
        torch_figures = "-"
        if report.get("torch"):
            d0 = report["torch"]["devices"][0]
            traced = next((d["tracked_bytes"] for d in report["devices"] if d["device"] == 0), 0)
            torch_figures = (f"{d0['allocated_bytes'] / 2**20:.0f} / {d0['reserved_bytes'] / 2**20:.0f}"
                             f" MiB ({report['torch']['read']}); traced {traced / 2**20:.0f} MiB")
        failures += not ok
        rows.append((pattern, f"{expected} (SITE line {site})", verdict, named, growth,
                     fragmentation["verdict"] + (f" (want {want})" if want else ""), torch_figures,
                     "ok" if ok else "WRONG"))
        print(f"{pattern}: {printed}", flush=True)
    header = ("pattern", "expected", "verdict", "line named", "growth", "fragmentation",
              "torch allocated / reserved", "")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
