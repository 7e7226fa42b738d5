#!/bin/sh
# python-layout.sh - regenerate the rows of src/record/python_layout.h.
#
#   tools/python-layout.sh PYTHON...     e.g. ~/.pyenv/versions/3.1*/bin/python3
#
# For each interpreter: compile tools/python_layout.c against its own
# headers (internal ones included, which CPython installs) and print the row.
# Paste the output into src/record/python_layout.h; say in the commit which builds
# the rows came from.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for python in "$@"; do
    include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    if ! cc -I"$include" -I"$include/internal" "$here/python_layout.c" -o "$work/layout" 2>"$work/errors"; then
        echo "$python: cannot compile against $include:" >&2
        head -5 "$work/errors" >&2
        exit 1
    fi
    "$work/layout"
done
