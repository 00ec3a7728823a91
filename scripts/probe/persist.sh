#!/usr/bin/env bash
# persist.sh — on the GPU machine: w4a16_gemv_t's PERSIST spaces (w4a16_gemv_t_persist.lua,
# w4a16_glu_t_persist.lua; experimental, session 42) against the default spaces in the same run.
# "New" is a copy of the working tree's templates with the two spaces' `experimental` taken out
# (on TAILOR_TEMPLATE_PATH: promoted, so that no other experimental space joins in), "base" the
# working tree's templates as they are; each side its own cache.
#   PERSIST_STEP=kernels (default): every PERSIST survivor verified (tune --verify-all) at
#     PERSIST_VERIFY's shapes, then PERSIST_SHAPES benched base, new, base, new; persist.txt and
#     the new cache's trials in persist-trials.txt
#   PERSIST_STEP=model: scripts/probe/ab_model.sh with the copy as its new side ([flags] pass on)
set -uo pipefail
bash scripts/gpu-build.sh >/dev/null || exit 1
source scripts/probe/common.sh || exit 1
P=/tmp/persist-on/templates
rm -rf /tmp/persist-on && mkdir -p /tmp/persist-on && cp -r templates "$P"
for f in "$P"/w4a16_gemv_t_persist.lua "$P"/w4a16_glu_t_persist.lua; do
  sed -i 's/, { experimental = EXPERIMENTAL })$/)/' "$f"
  grep -q 'experimental = ' "$f" && { echo "persist.sh: $f still experimental"; exit 2; }
done
if [[ ${PERSIST_STEP:-kernels} == model ]]; then
  AB_BASE_PATH=templates AB_NEW_PATH=$P bash scripts/probe/ab_model.sh "$@"
  exit $?
fi
L="$OUT/persist.txt"
: >"$L"
for sd in ${PERSIST_VERIFY:-glu:m=1,n=12288,k=1536,group=128:bf16 m=1,n=6144,k=1536,group=128:bf16 m=3,n=4232,k=352,group=32,zp=1:fp16 glu:m=3,n=4232,k=352,group=32,zp=1:fp16 m=16,n=6144,k=1536,group=128,s_ld=12288:fp16}; do
  op=w4a16_matmul tmpl=w4a16_gemv_t_persist
  [[ $sd == glu:* ]] && op=w4a16_glu tmpl=w4a16_glu_t_persist && sd=${sd#glu:}
  echo "== verify-all $op ${sd%:*} ${sd##*:} ($tmpl)" >>"$L"
  TAILOR_TEMPLATE_PATH=$P timeout 120 "$T" tune --op "$op" --shape "${sd%:*}" --dtype "${sd##*:}" \
    --verify-all --where "template=$tmpl" --cache /tmp/persist-verify.sqlite >>"$L" 2>&1
  echo "rc=$?" >>"$L"
done
rm -f /tmp/persist-base.sqlite /tmp/persist-new.sqlite
for round in 1 2; do
  for side in base new; do
    tp=(env)
    [[ $side == new ]] && tp+=(TAILOR_TEMPLATE_PATH=$P)
    for s in ${PERSIST_SHAPES:-glu:m=1,n=12288,k=1536,group=128 glu:m=1,n=6144,k=1536,group=128 m=1,n=6144,k=1536,group=128 m=1,n=262144,k=1536,group=128 m=16,n=12288,k=1536,group=128}; do
      echo "== round $round $side $s" >>"$L"
      if [[ $s == glu:* ]]; then # the gated GEMV: bench kernel (no cuBLAS counterpart)
        timeout 90 "${tp[@]}" "$T" bench kernel --op w4a16_glu --shape "${s#glu:}" \
          --cache "/tmp/persist-$side.sqlite" >>"$L" 2>&1
      else
        timeout 90 "${tp[@]}" "$T" bench w4a16 --shape "$s" --cache "/tmp/persist-$side.sqlite" >>"$L" 2>&1
      fi
    done
  done
done
"$T" cache trials --cache /tmp/persist-new.sqlite >"$OUT/persist-trials.txt" 2>&1
echo "persist: $(grep -c '^rc=0' "$L") of $(grep -c '^rc=' "$L") verify-all runs passed"
