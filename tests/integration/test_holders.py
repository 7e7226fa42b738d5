"""Who holds the tensors and arrays: torch_holders.py's objects, and CuPy's
and JAX's stand-ins (stand_ins.py), each group named by the path from
Python's roots that holds it."""

import glob
import json
import os
import subprocess
import sys

import pytest

import support
from stand_ins import (marked_lines, torch_env, skip_without_torch, run_scenario, site_line,
                       python_scenario, CUPY, JAX)
from support import check


UNREACHED = "<no Python root reaches it: held from C, or garbage not yet collected>"
HOLDERS = {"outs": "__main__.model.outs[*]", "class": 'KeepOutputs.outputs[*]["preds"]',
           "closure": "make_store.<locals>.store.<closure>.kept[*]",
           "nested": '__main__.cache["layers"][*][*]', "views": "__main__.views[*]",
           "cycle": "__main__.b.tensor", "from_c": UNREACHED, "thread": "loader:worker().mine[*]",
           "table": "__main__.sessions[*]", "escape": '__main__.record["?[2J?"]'}


def holders_scenario(traced, **env):
    skip_without_torch()
    out, err, reports, _ = run_scenario(traced, "torch_holders.py", "everything", (),
                                        torch_env(**env))
    lines = {prefix: json.loads(line[len(prefix):]) for line in out.splitlines()
             for prefix in ("held: ", "gc: ", "gc at exit: ") if line.startswith(prefix)}
    return out, reports, lines


def test_torch_holders(traced):
    """Globals, a class's attribute, a closure, nested containers, a dict
    of records (its keys named, control characters as ?) and a table (its
    keys not), a cycle,
    views of one storage, a thread's locals, the caller's locals and a
    tensor only C holds: each group is named by the path that holds it, at
    a snapshot and at the end, with its tensors and bytes; the findings'
    growing lines and the text say who holds them; read back, the same."""
    out, reports, lines = holders_scenario(traced, CUMEMTRACE_FORMAT="text,json")
    held = lines.get("held: ", {})
    snapshots, end = reports.get("snapshot", []), reports.get("exit", [])
    if not check(len(snapshots) == 1 and len(end) == 1 and held, f"a snapshot and the end: {out}"):
        return
    for report, what in ((snapshots[0], "snapshot"), (end[0], "exit")):
        walk = report["holders"]
        check(walk["known"] and walk["cut_short"] is None and walk["objects"] > 1000,
              f"{what}: the walk was complete: {walk['why']} {walk['cut_short']}")
        by_line = {site_line(report, p["stack"], "torch_holders.py"): p for p in walk["paths"]}
        local = "everything().local[*]" if what == "snapshot" else "__main__.KEPT[*][*]"
        for name, path in {**HOLDERS, "local": local}.items():
            found = [by_line.get(n) for n in marked_lines("HOLD", name, "torch_holders.py")]
            p = found[0] if found else None
            if not check(p is not None, f"{what}: {name} has a holder: {walk['paths']}"):
                continue
            check(p["path"] == path and [p["tensors"], p["bytes"]] == held[name],
                  f"{what}: {name} held by {path}, {held[name]}: {p}")
        views = by_line.get(min(marked_lines("HOLD", "views", "torch_holders.py")))
        check(views and views["blocks"] == 1, f"{what}: four tensors on one block: {views}")
        growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        for words in ("held by model.outs, a list of 30 tensors",
                      'held by KeepOutputs.outputs[*]["preds"] (30 tensors)',
                      "held by make_store.<locals>.store.<closure>.kept, a list of 30 tensors"):
            check(any(words in g for g in growing), f"{what}: a growing line says {words}: {growing}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*[0-9].txt"))[0]).read()
    check("      held by __main__.model.outs[*] (list, 30 tensors, 7.50 MiB)" in text,
          f"the text's growing entry names the holder: {text}")
    again = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report",
                            glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]],
                           capture_output=True, text=True).stdout
    check(again == text, "read back from the JSON, the same text")


def test_torch_holders_graph(traced):
    """Losses kept with their graphs: the activations only a graph keeps
    (a node's saved tensors, another node's through next_functions) are
    held by "the graph of" the losses' path, at a snapshot and at the end,
    and the findings say so; a saved tensor behind an unpack hook is never
    read (the hook never runs) and the program's output is as untraced."""
    skip_without_torch()
    out, _, reports, _ = run_scenario(traced, "torch_holders.py", "graphs", (), torch_env())
    held = next((json.loads(line[6:]) for line in out.splitlines() if line.startswith("held: ")),
                {})
    graph = "the graph of __main__.losses[*]"
    paths = {"graph_act": graph, "graph_hidden": graph, "losses": "__main__.losses[*]"}
    for report in reports.get("snapshot", []) + reports.get("exit", []):
        walk = report["holders"]
        by_line = {site_line(report, p["stack"], "torch_holders.py"): p for p in walk["paths"]}
        for name, path in paths.items():
            p = by_line.get(min(marked_lines("HOLD", name, "torch_holders.py")))
            check(p is not None and p["path"] == path and [p["tensors"], p["bytes"]] == held[name],
                  f"{report['reason']}: {name} held by {path}, {held.get(name)}: {p}")
        growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        check(any(g.endswith("— held by the graph of losses[*] (30 tensors)") for g in growing),
              f"{report['reason']}: a growing line names the graph: {growing}")
    check(len(reports.get("snapshot", [])) == 1 and len(reports.get("exit", [])) == 1,
          f"a snapshot and the end: {out}")
    check("unpacked: 0" in out, f"no unpack hook ran: {out}")
    plain, _, _, _ = run_scenario(traced, "torch_holders.py", "graphs", (), torch_env(),
                                  preload=False)
    results = [[line for line in o.splitlines() if line.startswith(("held:", "result:"))]
               for o in (out, plain)]
    check(results[0] == results[1] and len(results[0]) == 2,
          f"the program's output as untraced: {results}")


def test_torch_holders_untouched(traced):
    """The walk changes nothing the program can see: the collector is as
    enabled, with the same thresholds, no collection ran and the older
    generations' counts are the same across a snapshot and at the end, and
    the program's output is as untraced. CUMEMTRACE_HOLDERS=0: no walk,
    said in one line."""
    out, reports, lines = holders_scenario(traced, CUMEMTRACE_FORMAT="json")
    check(lines.get("gc: ") and lines["gc: "]["before"] == lines["gc: "]["after"],
          f"the collector's state across a snapshot: {lines.get('gc: ')}")
    check(lines.get("gc at exit: ") == lines.get("gc: ", {}).get("after"),
          f"and at the end, after the exit report's walk: {lines.get('gc at exit: ')}")
    check(reports["snapshot"][0]["holders"]["known"], "the walk ran")
    plain, _, _, _ = run_scenario(traced, "torch_holders.py", "everything", (), torch_env(),
                                  preload=False)
    results = [[line for line in o.splitlines() if line.startswith(("held:", "result:"))]
               for o in (out, plain)]
    check(results[0] == results[1] and len(results[0]) == 2,
          f"the program's output as untraced: {results}")
    _, off, _ = holders_scenario(traced, CUMEMTRACE_FORMAT="json", CUMEMTRACE_HOLDERS="0")
    walk = off["snapshot"][0]["holders"]
    check(not walk["known"] and "CUMEMTRACE_HOLDERS=0" in walk["why"] and not walk["paths"],
          f"off: no walk, and why: {walk}")


def test_torch_holders_cut_short(traced):
    """A walk past its budget says so in one line, and names what it reached."""
    _, reports, _ = holders_scenario(traced, CUMEMTRACE_FORMAT="text,json",
                                     CUMEMTRACE_HOLDERS_MS="1", SIMTORCH_HOLDERS_HEAP="300000")
    walk = reports["snapshot"][0]["holders"]
    check(walk["known"] and walk["cut_short"] == "after 0.001 s" and walk["objects"] < 300000,
          f"cut short, and where: {walk['cut_short']}, {walk['objects']} objects")
    text = open(glob.glob(os.path.join(traced.dir, "*holders*.txt"))[0]).read()
    check("who holds them: the walk from Python's roots was cut short after 0.001 s" in text,
          f"the text says it in one line: {text}")


@pytest.mark.parametrize("file, arrays", [(CUPY, 60), (JAX, 40)], ids=["cupy", "jax"])
def test_cupy_jax_holders(traced, file, arrays):
    """CuPy's and JAX's arrays are named by who holds them too: the growing
    line of each names the list that keeps its arrays."""
    _, _, reports, _ = python_scenario(traced, file, "training_mix",
                                       CUMEMTRACE_FORMAT="json")
    report = reports["exit"][0]
    growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
    check(report["holders"]["known"] and
          any(g.endswith(f"— held by HELD[*], a list of {arrays} arrays") for g in growing),
          f"{file}: the growing line names the list: {growing}, {report['holders']}")


def start_program(directory, program, args, **env):
    """`program` under the tracer, watched live, until it created READY:
    (process, pid)."""
    import time
    ready, stop = os.path.join(directory, "ready"), os.path.join(directory, "stop")
    process = subprocess.Popen([program, *args, ready, stop], cwd=directory,
                               env=support.traced_environment(directory, CUMEMTRACE_LIVE="1",
                                                              **env),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(500):
        if os.path.exists(ready) or process.poll() is not None:
            break
        time.sleep(0.02)
    text = open(ready).read().split() if os.path.exists(ready) else []
    check(os.path.exists(ready), f"{program} started: {process.poll()}")
    return process, int(text[0]) if text else process.pid


def ask_live(pid, request, shut=True):
    """One connection to pid's live view sending `request`: its document
    (None when the process, having read what a request may be, closed on
    the rest)."""
    import socket
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    peer.settimeout(5)
    peer.connect(f"\0cumemtrace-live-{pid}")
    if request:
        peer.sendall(request)
    if shut:
        peer.shutdown(socket.SHUT_WR)
    chunks = []
    try:
        while True:
            chunk = peer.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except ConnectionResetError:   # more sent than a request has: the rest unread
        return None
    finally:
        peer.close()
    return json.loads(b"".join(chunks))


def finish(process, directory):
    open(os.path.join(directory, "stop"), "w").close()
    out, err = process.communicate(timeout=60)
    return out


def test_live_holders(traced):
    """`cumemtrace live --holders` on a running program that keeps tensors
    in a global list: held by `kept`, with its bytes, tensors and site;
    asked without pause and with requests of any bytes, the process walks at
    most once a second and its output is that of a run not asked; with
    CUMEMTRACE_HOLDERS=0 the view says holders are off; a program without
    Python says so."""
    import tempfile
    import time
    skip_without_torch()
    tool_path = os.path.join(support.BUILD, "cumemtrace")
    script = os.path.join(support.SOURCE, "tests", "integration", "live_holders.py")
    kept_line = min(marked_lines("HOLD", "kept", "live_holders.py"))
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-holders-")
    process, pid = start_program(directory, sys.executable, [script], **torch_env())
    started = time.monotonic()
    asked = subprocess.run([tool_path, "live", "--holders", str(pid)], capture_output=True, text=True)
    waited = time.monotonic() - started
    held = asked.stdout.split("Held by", 1)[-1]
    check(asked.returncode == 0 and "held by kept, a list of 40 tensors" in held and
          "10.0 MiB" in held and f"< keep:{kept_line}" in held and waited < 5,
          f"live --holders ({waited:.1f} s): {asked.returncode} {asked.stdout} {asked.stderr}")
    once = subprocess.run([tool_path, "live", "--once", str(pid)], capture_output=True, text=True)
    check(once.returncode == 0 and "Held by" not in once.stdout, "--once asks nobody")

    # Asked without pause, and with requests of any bytes: harmless, and
    # at most one walk a second.
    first = ask_live(pid, b"")["holders"]
    hostile = [b"holders", b"holders\n" * 20, b"holders 18446744073709551615\n",
               bytes(range(256)), b"\xff" * 4096, b"holders\n\0", b"-1\n", b"{}"]
    started = time.monotonic()
    count = 0
    while time.monotonic() - started < 1.5:
        document = ask_live(pid, hostile[count % len(hostile)] if count % 3 else b"holders\n")
        count += 1
    quiet = ask_live(pid, b"holders\n", shut=False)   # says nothing more: answered after 0.2 s
    spent = time.monotonic() - started
    walks = quiet["holders"]["walks"] - first["walks"]
    print(f"live_holders: {count} requests in {spent:.1f} s made {walks} walks")
    check(1 <= walks <= 3 and count > 20 and quiet["format"] == "cumemtrace-live",
          f"{count} requests in {spent:.1f} s made {walks} walks: {quiet['holders']}")
    for _ in range(100):
        now = ask_live(pid, b"")["holders"]
        if now["answered"] == now["asked"]:
            break
        time.sleep(0.05)
    check(now["answered"] == now["asked"] and now["paths"] and
          now["paths"][0]["path"] == "__main__.kept[*]" and now["paths"][0]["tensors"] == 40,
          f"the last request answered too: {now}")
    out = finish(process, directory)
    unasked_dir = tempfile.mkdtemp(prefix="cumemtrace-live-holders-")
    unasked, _ = start_program(unasked_dir, sys.executable, [script], **torch_env())
    check(out == finish(unasked, unasked_dir) and "result: 40 2621440" in out,
          f"its output is that of a run not asked: {out!r}")

    # CUMEMTRACE_HOLDERS=0: said, nothing walked.
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-holders-")
    process, pid = start_program(directory, sys.executable, [script],
                                 **torch_env(CUMEMTRACE_HOLDERS="0"))
    off = subprocess.run([tool_path, "live", "--holders", str(pid)], capture_output=True, text=True)
    check(off.returncode == 0 and "holders off (CUMEMTRACE_HOLDERS=0)" in off.stdout and
          ask_live(pid, b"")["holders"]["walks"] == 0, f"holders off: {off.stdout}")
    finish(process, directory)

    # No Python in the process.
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-holders-")
    process, pid = start_program(directory, os.path.join(support.BUILD, "tests", "growth"),
                                 ["hold"])
    bare = subprocess.run([tool_path, "live", "--holders", str(pid)], capture_output=True,
                          text=True)
    check(bare.returncode == 0 and "no Python in this process" in bare.stdout,
          f"no Python: {bare.stdout} {bare.stderr}")
    finish(process, directory)
