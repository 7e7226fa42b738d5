"""The HTML pages of programs on PyTorch's stand-in allocator (stand_ins.py):
a cache's memory counted once, what the page opens on, OOMs counted once."""

import glob
import json
import os
import re

from browser import drive
from stand_ins import MiB, scenario, format_bytes, cache, no_browser
from support import check, device_counters, tool


def test_torch_blocks_html(traced):
    """The HTML page of a program on the stand-in allocator: a cache's memory
    counted once, in the icicle, its highest point and the tables; the
    caches per device; what the program held at its end, neutral."""
    if no_browser():
        return
    _, _, reports, _ = scenario(traced, "training_mix", ["{dir}/at-end"], CUMEMTRACE_FORMAT="json,html")
    snapshot, exit_report = reports["snapshot"][0], reports["exit"][0]
    segments = {s["id"] for s in snapshot["stacks"] if s["cache_segment"] == "torch_tensor"}
    device = device_counters(snapshot, 0, "device_memory")["allocated_bytes"]
    figures = cache(snapshot)["devices"][0]
    tensors = sum(g["bytes"] for g in snapshot["live"] if g["stack"] not in segments)
    check(segments and tensors == figures["block_bytes"], f"tensors live: {tensors} vs {figures}")
    result, _ = drive(os.path.join(traced.dir, "at-end.html"), """
    function press(m) { document.querySelector('button[data-moment="' + m + '"]').click(); }
    press('end'); result.now = icicle();
    toggle(document.querySelector('#kind-toggles input[data-kind="unused in caches"]'));
    result.nowUnused = icicle();
    press('peak'); result.peakUnused = icicle();
    result.holders = document.querySelectorAll('#holders-table tbody tr').length;
    result.caches = [].map.call(document.querySelectorAll('#caches-table tbody tr'), function (r) {
      return [].map.call(r.cells, function (c) { return c.textContent; }); });""")
    unused = [b for b in result.get("nowUnused", {}).get("bars", [])
              if b[0] == "[torch_tensor cache: reserved, unused]"]
    check(result.get("now", {}).get("total") == tensors,
          f"the icicle: the tensors, not their segments too: {result.get('now', {}).get('total')} vs {tensors}")
    check(result.get("nowUnused", {}).get("total") == device["current"] and
          [b[1] for b in unused] == [figures["unused_bytes"]],
          f"with the cache's unused rest: the device's memory once: {result.get('nowUnused', {}).get('total')} "
          f"vs {device['current']}, {unused} vs {figures['unused_bytes']}")
    check(result.get("peakUnused", {}).get("total") == device["peak"],
          f"its highest point, the device's peak: {result.get('peakUnused', {}).get('total')} vs {device['peak']}")
    holders = [s for s in snapshot["stacks"] if s["peak_live_bytes"] > 0 and s["id"] not in segments]
    check(result.get("holders") == min(50, len(holders)),
          f"largest holders: no segment: {result.get('holders')} rows vs {len(holders)}")
    check([row[:2] for row in result.get("caches", [])] == [["PyTorch", "device 0"]] and
          result["caches"][0][4] == format_bytes(figures["unused_bytes"]),
          f"the cache per device: {result.get('caches')} vs {figures}")
    # At exit: what the program held at its end, neutral; nothing leaked.
    html = glob.glob(os.path.join(traced.dir, "report-*.html"))[0]
    result, _ = drive(html, """
    result.held = document.getElementById('held-at-end').className;
    result.heldBytes = +document.getElementById('held-bytes').dataset.value;
    result.leaked = !!document.getElementById('leaked-bytes');
    result.leaks = document.getElementById('leaks').className;""")
    held = sum(g["bytes"] for g in exit_report["held_at_end"])
    check(result.get("held") == "neutral" and result.get("heldBytes") == held and held > 0 and
          result.get("leaked") is False and result.get("leaks") == "",
          f"held at the end, neutral, no Leaked 0 card: {result} vs {held}")


PAGE_OPENING = """
var icicle = document.getElementById('icicle');
result.moment = icicle.dataset.momentName;
result.total = +icicle.dataset.total;
result.title = document.getElementById('icicle-title').textContent;
result.cards = {};
[].forEach.call(document.querySelectorAll('.card'), function (c) {
  result.cards[c.id] = [c.querySelector('.label').textContent, c.dataset.value]; });
result.oomLines = document.querySelectorAll('#memory-chart line.oom').length;
result.legend = (document.querySelector('#kind-toggles .legend-note') || {}).textContent || '';
result.colors = {};
[].forEach.call(document.querySelectorAll('#kind-toggles label'), function (l) {
  var i = l.querySelector('i');
  if (i) { result.colors[l.textContent] = getComputedStyle(i).backgroundColor; } });
result.oomColor = getComputedStyle(document.querySelector('.card.bad .value') ||
  document.body).color;
result.firstFinding = (document.querySelector('#findings li') || {}).dataset || {};"""


def page_of(traced, report_json):
    """The page `cumemtrace html` makes of a report, as it opens: PAGE_OPENING's
    result; None without Chromium."""
    if no_browser():
        return None
    html = report_json[:-len(".json")] + "-page.html"
    made = tool("html", report_json, "-o", html)
    check(made.returncode == 0, f"the page made: {made.stderr!r}")
    result, _ = drive(html, PAGE_OPENING)
    check("error" not in result, f"the page's script ran: {result.get('error')}")
    return result


def test_html_python_opens_held_at_end(traced):
    """The page made from a Python program's default JSON opens on what the
    text report leads with, what the program held when it ended, not the
    0 B its teardown left; and shows no "Leaked 0" card beside it."""
    scenario(traced, "held_at_end")
    report_json = glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]
    with open(report_json) as handle:
        report = json.load(handle)
    held = sum(g["bytes"] for g in report["held_at_end"])
    check(held == 24 * MiB and not report.get("timeline"), f"held 24 MiB, no timeline: {held}")
    page = page_of(traced, report_json)
    if page is None:
        return
    check(page["moment"] == "program-end" and page["total"] == held and
          "held when the program ended" in page["title"],
          f"opens on the program's end, {held} bytes: {page['moment']} {page['total']} {page['title']!r}")
    check("leaked-bytes" not in page["cards"] and "leaked-blocks" not in page["cards"] and
          page["cards"].get("held-bytes", [None, None])[1] == str(held),
          f"no Leaked 0 card, the held one instead: {page['cards']}")
    check(page["cards"]["ooms"][1] == "0", f"no OOM: {page['cards']['ooms']}")


def test_html_oom_counted_once(traced):
    """Pages of an OOM run's default JSON: the OOM report's opens at the OOM
    and counts one OOM (not the driver's two refusals besides PyTorch's
    failure); the exit report's counts one too and leads with it; tensors
    are not drawn in the OOM's red. With a timeline, the exit report's page
    opens at the OOM."""
    scenario(traced, "pool_oom", SIMCUDA_MEMORY="1G")
    oom_json = glob.glob(os.path.join(traced.dir, "report-*-oom.json"))[0]
    exit_json = glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]
    with open(exit_json) as handle:
        failures = json.load(handle)["failures"]
    check(sum(1 for f in failures["recent"] if f["oom"]) == 3 and failures["ooms"] == 1 and
          {f["oom_number"] for f in failures["recent"] if f["oom"]} == {1},
          f"three failed calls make the one OOM: {failures}")
    page = page_of(traced, oom_json)
    if page is None:
        return
    check(page["moment"] == "end" and "at the out-of-memory failure" in page["title"],
          f"the OOM report's page opens at the OOM: {page['moment']} {page['title']!r}")
    check(page["cards"]["ooms"][1] == "1", f"one OOM: {page['cards']['ooms']}")
    def red(color):
        rgb = [int(x) for x in re.findall(r"\d+", color or "")][:3]
        return len(rgb) == 3 and rgb[0] > 150 and rgb[1] < 90 and rgb[2] < 90
    check(red(page["oomColor"]) and page["colors"].get("torch_tensor") and
          not red(page["colors"]["torch_tensor"]),
          f"red means the OOM, not the tensors: {page['colors']} vs {page['oomColor']}")
    page = page_of(traced, exit_json)
    check(page["cards"]["ooms"][1] == "1" and page["oomLines"] <= 1,
          f"the exit report's page: one OOM: {page['cards']['ooms']}, {page['oomLines']} lines")
    check(page["firstFinding"].get("verdict") == "oom", f"led by the OOM: {page['firstFinding']}")
    check(page["moment"] == "program-end", f"no timeline: the program's end: {page['moment']}")
    # With a timeline, at the OOM itself: one red line, the tensors live then.
    scenario(traced, "pool_oom", SIMCUDA_MEMORY="1G", CUMEMTRACE_EVENTS="64K")
    exit_json = glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]
    page = page_of(traced, exit_json)
    check(page["moment"] == "oom" and "at the out-of-memory failure" in page["title"] and
          page["oomLines"] == 1 and "red: out of memory (1)" in page["legend"],
          f"opens at the OOM, one red line: {page['moment']} {page['title']!r} {page['oomLines']} "
          f"{page['legend']!r}")
    check(page["total"] >= 600 * MiB, f"the tensors live at the OOM: {page['total']}")
