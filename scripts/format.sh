#!/bin/sh
# format.sh - hold the C sources to .clang-format.
#
#   scripts/format.sh          rewrite every C file in place
#   scripts/format.sh --check  name the files that differ; status 1 if any
#                              (the ctest `format`; 77, skipped, without the tool)
#
# One clang-format for everyone, Debian 12's (clang-format-14; CLANG_FORMAT
# names another), since versions place a few constructs differently: CI and
# a newcomer's machine then agree. Hand-laid tables sit between
# /* clang-format off */ and /* clang-format on */.
set -eu
cd "$(dirname "$0")/.."
tool=${CLANG_FORMAT:-clang-format-14}
check=0
[ "${1:-}" = "--check" ] && check=1
if ! command -v "$tool" >/dev/null; then
    echo "format: $tool not found (apt-get install clang-format-14, or set CLANG_FORMAT)" >&2
    [ $check = 1 ] && exit 77
    exit 2
fi
if [ -d .git ] || git rev-parse --git-dir >/dev/null 2>&1; then
    files=$(git ls-files '*.c' '*.h')
else
    files=$(find preload src include tests bench examples tools -name '*.[ch]' | sort)
fi
if [ $check = 0 ]; then
    "$tool" -i $files
    exit 0
fi
status=0
for f in $files; do
    if ! "$tool" --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "format: $f differs from .clang-format (scripts/format.sh rewrites it)"
        status=1
    fi
done
exit $status
