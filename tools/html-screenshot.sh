#!/bin/sh
# html-screenshot.sh - a picture of the HTML report, as the README shows them.
#
#   tools/html-screenshot.sh REPORT.json OUT.png [VIEW] [HEIGHT] [PREFIX]
#
# Makes the page of REPORT.json with build/cumemtrace html, opens it in
# headless Chromium at the view VIEW (the page's address fragment, e.g.
# "moment=end&zoom=main/train_step&search=scratch"; the page as it opens when
# empty) and writes a 1280-pixel-wide screenshot, HEIGHT pixels high (1100):
# the page's top, its findings first, at about 760. PREFIX, if given, is
# taken off every path in the report that starts with it (the folder a run
# was made in on another machine), so that a picture shows no
# machine-specific path; REPORT.json itself is left as it is.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 REPORT.json OUT.png [VIEW] [HEIGHT] [PREFIX]" >&2; exit 1; }
cd "$(dirname "$0")/.."
report=$1 out=$2 view=${3:-} height=${4:-1100} prefix=${5:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "$prefix" ]; then
    python3 - "$report" "$work/report.json" "$prefix" <<'PY'
import json, sys
source, target, prefix = sys.argv[1:]
def strip(value):
    if isinstance(value, str):
        return value.replace(prefix, "")
    if isinstance(value, list):
        return [strip(v) for v in value]
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items()}
    return value
with open(source) as handle:
    report = json.load(handle)
with open(target, "w") as handle:
    json.dump(strip(report), handle)
PY
    report=$work/report.json
fi
build/cumemtrace html "$report" -o "$work/page.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$work/profile" --window-size=1280,"$height" \
    --screenshot="$out" "file://$work/page.html${view:+#$view}" 2>/dev/null
echo "html-screenshot: $out"
