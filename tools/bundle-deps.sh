#!/bin/sh
# bundle-deps.sh - copy the shared libraries libcumemtrace.so needs at run time
# (libunwind, and libdw/libelf for file:line) next to it, so a build can be
# carried to a machine that lacks them. libcumemtrace.so's RUNPATH is $ORIGIN.
#
#   tools/bundle-deps.sh [BUILD_DIR]
set -eu
build=${1:-build}
for lib in libunwind.so.8 libdw.so.1 libelf.so.1; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
    [ -n "$path" ] && cp -L "$path" "$build/$lib"
done
ls "$build"/*.so.*
