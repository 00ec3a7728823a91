#!/usr/bin/env bash
# big_gemv.sh — on the GPU machine: issue 4's m = 1 shapes with the experimental spaces admitted
# (TAILOR_EXPERIMENTAL=1: w4a16_wgmma_dec streams the weights through a cp.async ring in shared
# memory, so the bytes in flight are not bounded by registers), one empty cache, so each shape's
# default and experimental survivors are timed in the same run (bigexp.txt; every trial in
# bigexp-trials.json; BIG_TAG=X: bigexp-X.txt and bigexp-X-trials.json, a cache of their own). Then,
# unless BIG_BOOTS=0, prune_data.sh's other boots.
set -uo pipefail
source scripts/probe/common.sh || exit 1
tag=${BIG_TAG:+-$BIG_TAG}
L="$OUT/bigexp$tag.txt"
nvidia-smi --query-gpu=name --format=csv,noheader >"$L"
cache=/tmp/bigexp$tag.sqlite
rm -f "$cache"
for s in ${BIG_SHAPES:-m=1,n=21504,k=5376 m=1,n=5376,k=21504 m=1,n=16384,k=5376 m=1,n=262144,k=1536 \
         m=1,n=10240,k=2560 m=1,n=2560,k=10240 m=1,n=12288,k=1536 m=1,n=6144,k=1536}; do
  TAILOR_EXPERIMENTAL=1 timeout 120 "$T" bench w4a16 --shape "$s,group=128" --cache "$cache" >>"$L" 2>&1
done
"$T" cache trials --json --cache "$cache" >"$OUT/bigexp$tag-trials.json" 2>&1
cat "$L"
if [[ ${BIG_BOOTS:-1} != 0 ]]; then
  PRUNE_STEP=others PRUNE_PRESETS=${BIG_PRESETS:-gemma-4-e4b} bash scripts/probe/prune_data.sh
fi
