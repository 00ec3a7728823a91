#!/usr/bin/env bash
# which wgmma configurations verify wrong at m=2048 n=6144: base vs new templates, twice each
bash scripts/gpu-build.sh >/dev/null 2>&1 || { echo build failed; exit 1; }
source scripts/gpu-env.sh
T=$PWD/build-gpu/tailor
for round in 1 2; do
  for side in base new; do
    if [[ $side == base ]]; then export TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates; else unset TAILOR_TEMPLATE_PATH; fi
    c=/tmp/v-$side-$round.sqlite
    echo "== $side round $round"
    "$T" tune --op w4a16_matmul --shape ${VSHAPE:-m=2048,n=6144,k=1536,group=128} --dtype bf16 --verify-all --where template=w4a16_wgmma${VWHERE:-} --cache $c 2>&1 | tail -2
    "$T" cache trials --cache $c 2>&1 | grep -v " timed \|^w4a16" | head -20
  done
done
