#!/usr/bin/env bash
# glu_rows.sh — on the GPU machine: the E2B decode with the gated GEMVs (matmul_pro glu=1) held to
# one value of ROWS (copies of matmul_pro.lua through TAILOR_TEMPLATE_PATH, tuned on demand),
# against the full space and against q prepared inside attention, alternating, one cache
# (docs/perf/model.md, session 16: the n = 6144 gate|up runs in ~2.9 waves at 2.8 TB/s in the
# step's trace, against 3.7 TB/s at n = 12288). Log: $OUT/glu_rows.txt; traces of each variant.
#   bash scripts/probe/glu_rows.sh
set -uo pipefail
source scripts/probe/common.sh || exit 1
P=$OUT/glu_rows.txt
: >"$P"
for r in 1 2; do
  mkdir -p "/tmp/gv/rows$r"
  sed "s/^  valid = function(p, shape, dtype, device, purpose)$/&\n    if shape.glu == 1 and p.ROWS ~= $r then return false, 'probe: ROWS=$r only' end/" \
    templates/matmul_pro.lua >"/tmp/gv/rows$r/matmul_pro.lua"
  grep -q "probe: ROWS=$r only" "/tmp/gv/rows$r/matmul_pro.lua" || { echo "rows$r: injection failed" >>"$P"; exit 1; }
done
B="$T bench model --preset gemma-4-e2b --cache /tmp/gv.sqlite --prompt-len 512 --decode 128"
for run in base rows1 rows2 prep base rows1 rows2 prep; do
  echo "== $run" >>"$P"
  flags=""
  unset TAILOR_TEMPLATE_PATH
  [[ $run == rows* ]] && export TAILOR_TEMPLATE_PATH=/tmp/gv/$run
  [[ $run == prep ]] && flags="--attention-q-prep"
  timeout 150 $B $flags 2>&1 | grep -E '^(decode|tuning)' >>"$P"
done
for run in rows1 rows2; do
  export TAILOR_TEMPLATE_PATH=/tmp/gv/$run
  timeout 120 $T bench model --preset gemma-4-e2b --cache /tmp/gv.sqlite --prompt-len 512 --decode 8 \
    --trace >"$OUT/trace-$run.txt" 2>&1
done
unset TAILOR_TEMPLATE_PATH
tail -20 "$P"
