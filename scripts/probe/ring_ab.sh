#!/usr/bin/env bash
# ring_ab.sh — on the GPU machine: w4a16_gemv_t's cp.async ring (the experimental space
# w4a16_gemv_t_ring) against the default spaces, each shape tuned from an empty cache in one run
# (TAILOR_TEMPLATE_PATH: a copy of templates/ where the ring's space is not experimental, so that
# it is the only space added), under TAILOR_CARVEOUT=${RING_CARVEOUT:-50} (the ring's shared memory needs
# more than the default 25 %). Log: $OUT/ring.txt; every trial: $OUT/ring-trials.json (compare
# with scripts/probe/trials_near.py --templates).
set -uo pipefail
source scripts/probe/common.sh || exit 1
L=$OUT/ring.txt
nvidia-smi --query-gpu=name --format=csv,noheader >"$L"
tp=/tmp/ring-templates
rm -rf "$tp" && cp -r templates "$tp" && sed -i '/^  experimental = /d' "$tp/w4a16_gemv_t_ring.lua"
cache=/tmp/ring.sqlite
rm -f "$cache"
export TAILOR_CARVEOUT=${RING_CARVEOUT:-50}
for s in ${RING_SHAPES:-m=1,n=21504,k=5376 m=1,n=262144,k=1536 m=1,n=10240,k=2560 m=1,n=6144,k=1536}; do
  TAILOR_TEMPLATE_PATH=$tp timeout 120 "$T" bench w4a16 --shape "$s,group=128" \
    --cache "$cache" 2>&1 | grep -v '^tailor: tuning' >>"$L"
  TAILOR_TEMPLATE_PATH=$tp "$T" cache trials --json --cache "$cache" \
    >"$OUT/ring-trials.json" 2>&1
done
cat "$L"
