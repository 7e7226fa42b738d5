#!/usr/bin/env python3
"""normalise.py - make a JSON report fit to be a golden input.

    python3 tests/golden/normalise.py REPORT.json SOURCE_DIR > tests/golden/NAME.json

A report written on this machine names its pid, host, times and the paths of
the checkout it ran from; a golden input must name none of them, so that the
files in the repository show nothing of the machine that made them. The
figures, stacks and frames are kept as they are: the writers' output on them
is what the golden files hold."""
import json
import sys


def clean(value, prefix):
    """`value` with every string's `prefix` (the checkout, with its /) cut."""
    if isinstance(value, str):
        return value.replace(prefix, "")
    if isinstance(value, list):
        return [clean(v, prefix) for v in value]
    if isinstance(value, dict):
        return {k: clean(v, prefix) for k, v in value.items()}
    return value


def main():
    report = json.load(open(sys.argv[1]))
    report = clean(report, sys.argv[2].rstrip("/") + "/")
    process = report["process"]
    pid = process["pid"]
    process.update(pid=4242, ppid=4241, host="host", start_time=1700000000.0,
                   time=round(1700000000.0 + process["duration_s"], 3))
    for thread in report.get("threads") or []:
        if thread.get("tid") == pid:
            thread["tid"] = 4242
        elif "tid" in thread:
            thread["tid"] = 4242 + thread["number"]
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")


main()
