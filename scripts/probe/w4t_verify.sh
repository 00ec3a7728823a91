#!/usr/bin/env bash
# w4t_verify.sh — on the GPU machine: every survivor of w4a16_gemv_t and w4a16_glu_t checked
# (tune --verify-all) at a few shapes that reach each path of the transposed GEMV: group 128
# (unscaled pairs) and 64 (prescaled pairs), both dtypes, zero points, m = 16 (two n8 tiles), odd m,
# n and k, and the T4 rehearsal. A short subset of cli_gpu_w4a16 for a call with little time.
# W4T_SFX=_magreg or _clamp checks a variant's spaces instead (w4a16_gemv_t_magreg and
# w4a16_glu_t_magreg, ...; the experimental spaces enabled).
# Log: $OUT/w4t-verify$W4T_SFX.txt; exit 1 if any survivor is wrong.
set -uo pipefail
source scripts/probe/common.sh || exit 1
sfx=${W4T_SFX:-}
[[ -n $sfx ]] && export TAILOR_EXPERIMENTAL=1
L=$OUT/w4t-verify$sfx.txt
: >"$L"
cache=/tmp/w4t-verify$sfx.sqlite
rm -f "$cache"
fail=0
run() { # run OP TEMPLATE SHAPE DTYPE [flags...]
  local op=$1 tpl=$2 shape=$3 dtype=$4; shift 4
  if "$T" tune --op "$op" --shape "$shape" --dtype "$dtype" --verify-all --where "template=$tpl$sfx" \
       --cache "$cache" --seed 5 "$@" >>"$L" 2>&1; then
    echo "ok   $op $shape $dtype $*" | tee -a "$L"
  else
    echo "FAIL $op $shape $dtype $*" | tee -a "$L"; fail=1
  fi
}
run w4a16_matmul w4a16_gemv_t "m=1,n=6144,k=1536,group=128" fp16
run w4a16_matmul w4a16_gemv_t "m=16,n=6144,k=1536,group=128,zp=1" bf16
run w4a16_matmul w4a16_gemv_t "m=3,n=200,k=1408,group=128,zp=1" fp16
run w4a16_matmul w4a16_gemv_t "m=5,n=1000,k=352,group=32,zp=1" bf16
run w4a16_matmul w4a16_gemv_t "m=1,n=1536,k=12288,group=64,zp=1" fp16 --rehearse t4
run w4a16_matmul w4a16_gemv_t "m=1,n=6144,k=1536,group=128" fp16 --rehearse t4
run w4a16_glu w4a16_glu_t "m=1,n=12288,k=1536,group=128" fp16
run w4a16_glu w4a16_glu_t "m=3,n=1000,k=1536,group=128,zp=1" bf16
run w4a16_glu w4a16_glu_t "m=1,n=6144,k=1536,group=128" fp16 --rehearse t4
exit $fail
