#!/usr/bin/env bash
# A copy of the repository with a variant's diff applied, for a device call to time or test
# beside this tree: for each DIFF given, /tmp/NAME (NAME the diff's file name without .diff) is
# this tree without the Triton packs (.t3*: gpu/slim_triton.sh's and their halves), patched
# with DIFF (`patch -p1`, else `git apply`; DIFF a path inside this tree or an absolute one).
#   bash gpu/variant_tree.sh docs/results/session89/paircount.diff   # -> /tmp/paircount
# The patch's output is appended to $OUT/patch.txt where OUT is set, else printed.
set -uo pipefail
log=${OUT:+$OUT/patch.txt}
for diff in "$@"; do
    name=$(basename "$diff" .diff)
    rm -rf "/tmp/$name" && mkdir "/tmp/$name" || exit 1
    tar --exclude='./.t3[0-9]*' -cf - . | tar -C "/tmp/$name" -xf -
    (cd "/tmp/$name" && { patch -p1 < "$diff" || git apply "$diff"; }) \
        >> "${log:-/dev/stdout}" 2>&1 || { [ -n "$log" ] && cat "$log"; exit 1; }
done
