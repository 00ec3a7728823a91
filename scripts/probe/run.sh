#!/usr/bin/env bash
# run.sh — on the GPU machine: the launch and DRAM-read floors (stream_floor.cu) and, in the same
# run, the tuned kernels of the same shapes for comparison. Log: $OUT/probe.txt.
#   bash scripts/probe/run.sh       the floors (probe.txt)
#   bash scripts/probe/run.sh l2    whether an L2 prefetch ahead of a read speeds it (l2.txt)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
P="$OUT/probe.txt"
export PATH=/usr/local/cuda/bin:$PATH
if [[ ${1:-} == l2 ]]; then
  nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/l2_prefetch scripts/probe/l2_prefetch.cu >"$OUT/l2.txt" 2>&1 &&
    /tmp/l2_prefetch >>"$OUT/l2.txt" 2>&1
  tail -3 "$OUT/l2.txt"
  exit 0
fi
# the live card's architecture (sm_90 when nvidia-smi cannot say); -diag-suppress 128: the
# ladder's early steps return before code the later steps use
sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
[[ $sm =~ ^[0-9]+$ ]] || sm=90
nvcc -O3 -std=c++17 -arch=sm_$sm -diag-suppress 128 -o /tmp/stream_floor scripts/probe/stream_floor.cu >"$P" 2>&1 || {
  cat "$P"; exit 1; }
/tmp/stream_floor >>"$P" 2>&1
if [[ -x build-gpu/tailor ]]; then
  T=build-gpu/tailor
  for s in m=1,n=6144,k=1536,group=128 m=1,n=21504,k=5376,group=128; do
    $T bench w4a16 --shape "$s" --cache /tmp/probe.sqlite >>"$P" 2>&1
  done
  $T bench kernel --op matmul --shape m=1,n=6144,k=1536 --cache /tmp/probe.sqlite >>"$P" 2>&1
  $T bench kernel --op matmul --shape m=1,n=1536,k=1536 --cache /tmp/probe.sqlite >>"$P" 2>&1
fi
tail -5 "$P"
