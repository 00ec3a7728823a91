#!/usr/bin/env bash
# ring_ab.sh — on the GPU machine: w4a16_gemv_t's cp.async ring (the experimental space
# w4a16_gemv_t_ring; AB_SPACES="w4a16_gemv_t_fold w4a16_glu_t_fold" or others instead) against the default spaces,
# each shape tuned from an empty cache in one run (TAILOR_TEMPLATE_PATH: a copy of templates/
# where those spaces are not experimental, so that they are the only ones added), under
# TAILOR_CARVEOUT=${RING_CARVEOUT:-50} (the ring's shared memory needs more than the default 25 %;
# give RING_CARVEOUT=25 for the fold alone). Log: $OUT/ring.txt; every trial:
# $OUT/ring-trials.json (compare with scripts/probe/trials_near.py --templates).
set -uo pipefail
source scripts/probe/common.sh || exit 1
L=$OUT/ring.txt
nvidia-smi --query-gpu=name --format=csv,noheader >"$L"
tp=/tmp/ring-templates
rm -rf "$tp" && cp -r templates "$tp"
# AB_SPACES: the experimental spaces made default in the copy (their `experimental = ...,` entry
# dropped, one line or several)
for s in ${AB_SPACES:-w4a16_gemv_t_ring}; do
  awk '/^  experimental = /{skip=1} !skip{print} skip&&/,$/{skip=0}' "templates/$s.lua" >"$tp/$s.lua"
done
cache=/tmp/ring.sqlite
rm -f "$cache"
export TAILOR_CARVEOUT=${RING_CARVEOUT:-50}
# RING_SHAPES: w4a16_matmul shapes (bench w4a16, with cuBLAS and the copy rate), or OP:SHAPE for
# another op (bench kernel, e.g. w4a16_glu:m=1,n=12288,k=1536); group 128 added to each
for s in ${RING_SHAPES:-m=1,n=21504,k=5376 m=1,n=262144,k=1536 m=1,n=10240,k=2560 m=1,n=6144,k=1536}; do
  if [[ $s == *:* ]]; then
    echo "== ${s%%:*} ${s#*:}" >>"$L"
    set -- kernel --op "${s%%:*}" --shape "${s#*:},group=128"
  else
    set -- w4a16 --shape "$s,group=128"
  fi
  TAILOR_TEMPLATE_PATH=$tp timeout 120 "$T" bench "$@" --cache "$cache" 2>&1 |
    grep -v '^tailor: tuning' >>"$L"
  TAILOR_TEMPLATE_PATH=$tp "$T" cache trials --json --cache "$cache" \
    >"$OUT/ring-trials.json" 2>&1
done
cat "$L"
