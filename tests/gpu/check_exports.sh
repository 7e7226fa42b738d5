#!/bin/sh
# check_exports.sh - the exports of a real PyTorch run, read by PyTorch itself.
#
#   tests/gpu/check_exports.sh BUILD OUT
#
# Traces tests/gpu/torch_train.py with every format, then: PyTorch's own
# torch.cuda._memory_viz reads the pickle (stats, segments, trace) and makes
# its trace and segment pages from it; the HTML report and the Chrome trace
# are checked for size and parse; `cumemtrace html` remakes the page from the
# JSON. Prints what it saw; exits 1 on any failure.
set -u
build=$(cd "${1:-build}" && pwd)
out=${2:-/tmp/cumemtrace-exports}
rm -rf "$out" && mkdir -p "$out"
status=0
CUMEMTRACE_OUTPUT="$out/train" CUMEMTRACE_FORMAT=json,html,folded,perfetto,memviz \
CUMEMTRACE_QUIET=1 LD_PRELOAD="$build/libcumemtrace.so" \
    python3 tests/gpu/torch_train.py > "$out/train.out" 2>&1 || status=1
ls -l "$out"
for command in stats trace; do   # (segments and memory download flamegraph.pl)
    if python3 -m torch.cuda._memory_viz "$command" "$out/train.pickle" > "$out/viz-$command.txt" 2>&1; then
        echo "ok   torch.cuda._memory_viz $command: $(wc -l < "$out/viz-$command.txt") lines"
        head -5 "$out/viz-$command.txt"
    else
        echo "FAIL torch.cuda._memory_viz $command"; tail -5 "$out/viz-$command.txt"; status=1
    fi
done
for plot in trace_plot segment_plot; do
    if python3 -m torch.cuda._memory_viz "$plot" "$out/train.pickle" -o "$out/$plot.html" > /dev/null 2>&1 &&
       [ -s "$out/$plot.html" ]; then
        echo "ok   torch.cuda._memory_viz $plot: $(wc -c < "$out/$plot.html") bytes"
    else
        echo "FAIL torch.cuda._memory_viz $plot"; status=1
    fi
done
python3 - "$out" <<'PY' || status=1
import json, pickle, sys
out = sys.argv[1]
report = json.load(open(f"{out}/train.json"))
snapshot = pickle.load(open(f"{out}/train.pickle", "rb"))
live = sum(g["bytes"] for g in report["live"] if g["kind"] in ("device", "stream_ordered", "managed"))
segments = sum(s["total_size"] for s in snapshot["segments"])
events = sum(len(t) for t in snapshot["device_traces"])
trace = json.load(open(f"{out}/train.trace.json"))
trace_events = trace["traceEvents"] if isinstance(trace, dict) else trace
html = open(f"{out}/train.html").read()
ok = segments == live and events > 0 and len(trace_events) > 0 and "data-script-errors" in html
print(("ok   " if ok else "FAIL ") + f"pickle segments {segments} bytes = report's live {live}; "
      f"{events} trace events; Chrome trace {len(trace_events)} events; HTML {len(html)} bytes")
sys.exit(0 if ok else 1)
PY
if "$build/cumemtrace" html "$out/train.json" -o "$out/again.html" && [ -s "$out/again.html" ]; then
    echo "ok   cumemtrace html from the JSON: $(wc -c < "$out/again.html") bytes"
else
    echo "FAIL cumemtrace html"; status=1
fi
exit $status
