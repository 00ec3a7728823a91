#!/usr/bin/env bash
# issue_figures.sh — on the GPU machine: issue 4's benchmark table and issue 7's E2B decode in
# one run, without gpu-check.sh bench's attention lines. The copy rate first; every w4a16 shape
# of issue 4 (m = 1 and 16 on the E2B MLP, the >= 50 MB shapes, m = 2048) tuned into one empty
# cache and benched beside cuBLAS; then (FIG_MODEL=1, the default) the E2B decode, W4A16 + int4
# head and bf16, 512-token prompt, 128 tokens, each on its own empty cache (first boot included).
# FIG_SHAPES replaces the shape list; with probe-variants/base (base_templates.sh REV) a few
# shapes again with REV's templates and then the working tree's. Logs: $OUT/figures.txt, $OUT/figures-trials.txt.
set -uo pipefail
source scripts/probe/common.sh || exit 1
L=$OUT/figures.txt
nvidia-smi --query-gpu=name --format=csv,noheader >"$L"
cache=/tmp/figures.sqlite
rm -f "$cache"
"$T" bench copy >>"$L" 2>&1
for s in ${FIG_SHAPES:-m=1,n=6144,k=1536 m=1,n=1536,k=6144 m=1,n=12288,k=1536 m=1,n=1536,k=12288 \
         m=16,n=6144,k=1536 m=16,n=1536,k=6144 m=16,n=12288,k=1536 m=16,n=1536,k=12288 \
         m=1,n=21504,k=5376 m=1,n=5376,k=21504 m=1,n=16384,k=5376 m=1,n=10240,k=2560 \
         m=1,n=2560,k=10240 m=1,n=262144,k=1536 m=2048,n=6144,k=1536 m=2048,n=1536,k=6144}; do
  timeout 120 "$T" bench w4a16 --shape "$s,group=128" --cache "$cache" 2>&1 |
    grep -v '^tailor: tuning' >>"$L"
done
"$T" cache trials --cache "$cache" >"$OUT/figures-trials.txt" 2>&1
# The base's templates (scripts/probe/base_templates.sh REV; carry probe-variants) at
# FIG_BASE_SHAPES, on their own cache, after the working tree's: the same shapes both ways.
if [[ -d probe-variants/base/templates ]]; then
  echo "== base templates $(cat probe-variants/base/REV)" >>"$L"
  rm -f /tmp/figures-base.sqlite
  for s in ${FIG_BASE_SHAPES:-m=1,n=6144,k=1536 m=16,n=6144,k=1536 m=16,n=1536,k=12288}; do
    TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates timeout 120 "$T" bench w4a16 \
      --shape "$s,group=128" --cache /tmp/figures-base.sqlite 2>&1 | grep -v '^tailor: tuning' >>"$L"
  done
  echo "== new templates (again, after the base)" >>"$L"
  for s in ${FIG_BASE_SHAPES:-m=1,n=6144,k=1536 m=16,n=6144,k=1536 m=16,n=1536,k=12288}; do
    timeout 120 "$T" bench w4a16 --shape "$s,group=128" --cache "$cache" 2>&1 |
      grep -v '^tailor: tuning' >>"$L"
  done
fi
if [[ ${FIG_MODEL:-1} == 1 ]]; then
  for w in "--quantize w4a16 --quantize-head" ""; do
    rm -f /tmp/figures-model.sqlite
    echo "== bench model --preset gemma-4-e2b $w --prompt-len 512 --decode 128" >>"$L"
    timeout "${FIG_MODEL_S:-200}" "$T" bench model --preset gemma-4-e2b $w --prompt-len 512 \
      --decode 128 --cache /tmp/figures-model.sqlite 2>&1 |
      grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$L"
  done
fi
grep -E 'us|tok/s|GB/s' "$L" | head -80
