#!/usr/bin/env bash
# A slimmed Triton pack (gpu/slim_triton.sh) carried in halves by two calls on one warm GPU
# machine, where the repository and the whole pack pass the 64 MiB a call carries. VERSION names
# the pack: its halves (`split -n 2`) in .tVERSIONs/a and .tVERSIONs/b, staged in
# /tmp/tVERSIONstage:
#   run(command="OUT=$OUT bash gpu/carried_triton_halves.sh first 38 && ...", carry=[".t38s/a"])
#   run(command="OUT=$OUT bash gpu/carried_triton_halves.sh second 38 && ...",
#       carry=[".t38s/b"])
# "first" stages the first half ($OUT/staged.txt lists the stage); "second" stages the second,
# joins the two and unpacks them in /tmp/carried_triton (gpu/carried_triton.sh, its report in
# $OUT/carried_triton.txt). The machine's own Triton stays the default: a command runs under the
# carried one with PYTHONPATH=/tmp/carried_triton and TRITON_BACKENDS_IN_TREE=1.
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
half=${1:?first or second}
version=${2:?the pack, e.g. 38 for .t38s}
stage=/tmp/t${version}stage
mkdir -p "$stage" "$OUT"
case $half in
    first) cp ".t${version}s/a/"* "$stage/" && ls -l "$stage" > "$OUT/staged.txt" ;;
    second)
        cp ".t${version}s/b/"* "$stage/" || exit 1
        rm -rf /tmp/carried_triton  # another version's files, where a call unpacked one before
        (TRITON_PACK="$stage/t${version}part_aa $stage/t${version}part_ab" \
            source gpu/carried_triton.sh) > "$OUT/carried_triton.txt" 2>&1 \
            || { cat "$OUT/carried_triton.txt"; exit 1; } ;;
    *) echo "first or second, not $half"; exit 2 ;;
esac
