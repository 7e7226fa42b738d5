#!/bin/sh
# html-screenshot.sh - a picture of the HTML report, as the README shows them.
#
#   scripts/html-screenshot.sh REPORT.json OUT.png [VIEW] [HEIGHT]
#
# Makes the page of REPORT.json with build/cumemtrace html, opens it in
# headless Chromium at the view VIEW (the page's address fragment, e.g.
# "moment=end&zoom=main/train_step&search=scratch"; the page as it opens when
# empty) and writes a 1280-pixel-wide screenshot, HEIGHT pixels high (1100).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 REPORT.json OUT.png [VIEW] [HEIGHT]" >&2; exit 1; }
cd "$(dirname "$0")/.."
report=$1 out=$2 view=${3:-} height=${4:-1100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/cumemtrace html "$report" -o "$work/page.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$work/profile" --window-size=1280,"$height" \
    --screenshot="$out" "file://$work/page.html${view:+#$view}" 2>/dev/null
echo "html-screenshot: $out"
