#!/usr/bin/env bash
# knock.sh — on the GPU machine: times the copies of w4a16_gemv_t that gemv_t_knock.py made in
# probe-variants/ (carried) with cubin_time.cu, each at the 31B gate/up shape and the E2B int4 LM
# head, in the configurations cubin_time launches (WR=1 WK=4 RT=1 SPLITK=1, ASMEM=0; UNROLL 2 and
# 3, TRIM 0 and 1), two rounds alternating. Log: $OUT/knock.txt.
#   bash scripts/probe/knock.sh [VARIANT...]   (default: every copy)
set -uo pipefail
source scripts/probe/common.sh || exit 1
nvcc -O3 -arch=sm_90 -o /tmp/cubin_time scripts/probe/cubin_time.cu -lcuda || exit 1
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=($(ls probe-variants))
P=$OUT/knock.txt
nvidia-smi --query-gpu=name --format=csv,noheader >"$P"
shapes=(${KNOCK_SHAPES:-"21504 5376" "262144 1536"})
for v in "${names[@]}"; do
  for shp in "${shapes[@]}"; do
    set -- $shp
    d=/tmp/kd/$v/$1
    mkdir -p "$d" && rm -f "$d"/*
    TAILOR_TEMPLATE_PATH=$PWD/probe-variants/$v/templates $T plan --device gpu --op w4a16_matmul \
      --shape "m=1,n=$1,k=$2,group=128" --dtype bf16 --dump "$d" --quiet >/dev/null 2>&1
  done
done
for rep in 1 2; do
  for shp in "${shapes[@]}"; do
    set -- $shp
    for cfg in TRIM0_UNROLL2 TRIM1_UNROLL2 TRIM0_UNROLL3 TRIM1_UNROLL3; do
      for v in "${names[@]}"; do
        f=$(ls /tmp/kd/$v/$1/*gemv_t*ASMEM0_CSPLIT0_*_RT1_SPLITK1_${cfg}_WK4_WR1.cubin 2>/dev/null | head -1)
        [[ -n $f ]] || { echo "$v $cfg rep$rep: no cubin" >>"$P"; continue; }
        echo "$v $cfg rep$rep $(/tmp/cubin_time "$f" $1 $2 2>&1)" >>"$P"
      done
    done
  done
done
cat "$P"
