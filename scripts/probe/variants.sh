#!/usr/bin/env bash
# variants.sh — on the GPU machine: times each copy of the templates in probe-variants/ (made by
# gemv_t_variants.py on the development machine, carried with the device tool's carry) with
# cubin_time.cu, the kernel compiled by `tailor plan --dump`; then the copies that compute right
# through the tuner (verified against the reference). Log: $OUT/variants.txt, $OUT/variants-bench.txt.
#   bash scripts/probe/variants.sh [NAME...]   (default: every copy)
set -uo pipefail
source scripts/probe/common.sh || exit 1
nvcc -O3 -arch=sm_90 -o /tmp/cubin_time scripts/probe/cubin_time.cu -lcuda || exit 1
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=($(ls probe-variants))
P=$OUT/variants.txt
: >"$P"
shapes=("6144 1536" "21504 5376")
for v in "${names[@]}"; do
  for shp in "${shapes[@]}"; do
    set -- $shp
    mkdir -p "/tmp/pd/$v/$1"
    rm -f "/tmp/pd/$v/$1"/*.cubin
    TAILOR_TEMPLATE_PATH=$PWD/probe-variants/$v/templates $T plan --device gpu --op w4a16_matmul \
      --shape "m=1,n=$1,k=$2,group=128" --dtype bf16 --dump "/tmp/pd/$v/$1" --quiet >/dev/null 2>&1
  done
done
for rep in 1 2; do
  for v in "${names[@]}"; do
    for shp in "${shapes[@]}"; do
      set -- $shp
      echo "$v rep$rep $(/tmp/cubin_time /tmp/pd/$v/$1/*.cubin $1 $2 2>&1)" >>"$P"
    done
  done
done
B=$OUT/variants-bench.txt
: >"$B"
for v in "${names[@]}"; do
  case $v in nomath | noact | noscale | floor) continue ;; esac
  for s in m=1,n=6144,k=1536 m=1,n=21504,k=5376; do
    echo "== $v" >>"$B"
    TAILOR_TEMPLATE_PATH=$PWD/probe-variants/$v/templates timeout 60 $T bench w4a16 \
      --shape "$s,group=128" --cache "/tmp/v-$v.sqlite" 2>&1 | grep -v '^tailor: tuning' >>"$B"
  done
done
cat "$P"
