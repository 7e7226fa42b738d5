"""The HTML report in headless Chromium, for test_exports.py and the
frameworks' tests (test_torch_*.py): the page loaded, or driven by a script
added at its end."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from support import check


# ---- the HTML report in a real browser ------------------------------------------------

def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(html, *arguments):
    """Run headless Chromium on a file; its stdout. A fresh profile each time."""
    profile = tempfile.mkdtemp(prefix="cumemtrace-chromium-")
    environment = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        completed = subprocess.run(
            [find_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--hide-scrollbars", f"--user-data-dir={profile}", *arguments, "file://" + html],
            capture_output=True, text=True, timeout=120, env=environment)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return completed


# ---- the HTML page, driven ----------------------------------------------------------
# Helpers for the actions: real DOM events on the page's own elements.
DRIVER = """
function fire(element, type, clientX) {
  var box = element.getBoundingClientRect();
  element.dispatchEvent(new MouseEvent(type, {bubbles: true, cancelable: true,
    clientX: clientX === undefined ? box.left + box.width / 2 : clientX, clientY: box.top + box.height / 2}));
}
function chartX(time) {
  var svg = document.getElementById('memory-chart');
  var box = svg.getBoundingClientRect();
  var left = +svg.dataset.plotLeft, right = +svg.dataset.plotRight, end = +svg.dataset.endUs;
  return box.left + box.width * (left + (right - left) * time / end) / 1000;
}
function chart() { return document.querySelector('.chart-box'); }
function icicle() {
  var box = document.getElementById('icicle');
  return {total: +box.dataset.total, moment: box.dataset.moment, focus: box.dataset.focus,
          focusBytes: +box.dataset.focusBytes, search: +box.dataset.searchBytes,
          bars: [].map.call(box.querySelectorAll('.frame'), function (d) {
            return [d.dataset.name, +d.dataset.bytes, d.className]; })};
}
function bar(name) {
  return [].filter.call(document.querySelectorAll('#icicle .frame'), function (d) {
    return d.dataset.name === name && d.className.indexOf('ancestor') < 0; })[0];
}
function type(element, text) { element.value = text; element.dispatchEvent(new Event('input', {bubbles: true})); }
function toggle(element) { element.checked = !element.checked; element.dispatchEvent(new Event('change', {bubbles: true})); }
"""


def drive(html, actions, suffix=""):
    """Load the page in headless Chromium with `actions` run once it has
    rendered (a script added at its end); `result` in the actions comes back."""
    with open(html) as handle:
        text = handle.read()
    script = ("<script>\n(function () { var result = {};\n" + DRIVER + "try {\n" + actions +
              "\n} catch (e) { result.error = String(e.stack || e); }\n"
              "var pre = document.createElement('pre'); pre.id = 'driver-result';\n"
              "pre.textContent = JSON.stringify(result); document.body.appendChild(pre); })();\n</script>\n")
    at = text.rindex("</body>")
    driven = html[:-len(".html")] + "-driven.html"
    with open(driven, "w") as handle:
        handle.write(text[:at] + script + text[at:])
    dom = browser(driven + suffix, "--dump-dom", "--window-size=1280,1000").stdout
    body = re.search(r"<body[^>]*>", dom)
    check(body and 'data-script-errors="0"' in body.group(0), f"no script error: {body and body.group(0)} "
          f"{re.findall(r'<pre id=.errors.>(.*?)</pre>', dom, re.S)}")
    found = re.search(r'<pre id="driver-result">(.*?)</pre>', dom, re.S)
    result = json.loads(__import__("html").unescape(found.group(1))) if found else {}
    check(found and "error" not in result, f"the actions ran: {result.get('error')}")
    return result, dom
