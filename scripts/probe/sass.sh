#!/usr/bin/env bash
# sass.sh — on the GPU machine: the SASS of chosen w4a16 kernels (cuobjdump -sass; the development
# machine has no disassembler), each with a static opcode histogram of the whole kernel and of its
# hottest loop (the longest backward branch's body). Log: $OUT/sass.txt, one sass-N.txt a kernel.
#   SASS="SHAPE@CONFIG-SUBSTRING ..." bash scripts/probe/sass.sh
#   e.g. SASS="m=1,n=262144,k=1536@gemv_t__sm90__bf16__ASMEM1_CSPLIT0_GROUP128_HAS_ZP0_MT1_PRESCALE0_RT1_SPLITK1_TRIM0_UNROLL3_WK1_WR4"
# TAILOR_TEMPLATE_PATH applies (a copy of the templates from probe-variants/).
set -uo pipefail
source scripts/probe/common.sh || exit 1
L=$OUT/sass.txt
: >"$L"
i=0
for sc in ${SASS:?}; do
  s=${sc%%@*} c=${sc#*@}
  d=/tmp/sass/$i
  mkdir -p "$d" && rm -f "$d"/*
  $T plan --device gpu --op w4a16_matmul --shape "$s,group=128" --dtype bf16 --dump "$d" --quiet >/dev/null 2>&1
  f=$(ls "$d"/*"$c"*.cubin 2>/dev/null | head -1)
  if [[ -z $f ]]; then echo "== $sc: no cubin" >>"$L"; i=$((i + 1)); continue; fi
  i=$((i + 1))
  S=$OUT/sass-$i.txt
  cuobjdump -sass "$f" >"$S" 2>&1
  {
    echo "== $sc ($(basename "$f"))"
    echo "-- whole kernel: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$S") instructions"
    grep -E '^\s+/\*[0-9a-f]{4}\*/' "$S" | sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+(@!?U?P[0-9T] )?//; s/[ ;].*//' |
      sort | uniq -c | sort -rn | head -40
  } >>"$L"
done
cat "$L"
