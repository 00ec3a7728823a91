#!/usr/bin/env bash
# ab_model.sh — on the GPU machine: the E2B decode with probe-variants/base's templates
# (scripts/probe/base_templates.sh REV on the development machine) against the working tree's, in
# one run. The base run tunes into its own cache; the new run starts from a copy of it, so only
# the ops whose template files differ are tuned again (the space hash covers the op's .lua and .cu
# and the shared headers: change only an op's own files to keep the others' winners). Then
# base and new alternate on their caches (REPS rounds), and the new templates' step is traced.
#   bash scripts/probe/ab_model.sh [bench model flags...]   (default: --quantize w4a16 --quantize-head)
# Output: $OUT/ab.txt (decode lines, tagged), $OUT/ab-trace.txt. AB_TUNE_S bounds the first (tuning)
# bench, AB_S each other one, REPS the alternating rounds.
source scripts/probe/common.sh || exit 1
[[ -d probe-variants/base/templates ]] || { echo "ab_model: no probe-variants/base (base_templates.sh)"; exit 2; }
flags=("$@")
[[ ${#flags[@]} -eq 0 ]] && flags=(--quantize w4a16 --quantize-head)
A="$OUT/ab.txt"
echo "base $(cat probe-variants/base/REV), flags ${flags[*]}" >"$A"
bench() { # bench TAG CACHE [extra flags]: one bench model run, its decode and tuning lines tagged
  local tag=$1 cache=$2
  shift 2
  local tp=()
  [[ $tag == base ]] && tp=(env TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates)
  timeout "${AB_S:-200}" "${tp[@]}" "$T" bench model --preset gemma-4-e2b "${flags[@]}" --cache "$cache" \
    --prompt-len 512 --decode 128 "$@" 2>&1 | grep -E '^(decode|tuning)' | sed "s/^/$tag: /" >>"$A"
}
rm -f /tmp/ab-base.sqlite /tmp/ab-new.sqlite
AB_S=${AB_TUNE_S:-300} bench base /tmp/ab-base.sqlite # tunes every shape: ~80 s on the H200, 150 s ran out
cp /tmp/ab-base.sqlite /tmp/ab-new.sqlite
bench new /tmp/ab-new.sqlite
for ((r = 0; r < ${REPS:-2}; r++)); do
  bench base /tmp/ab-base.sqlite
  bench new /tmp/ab-new.sqlite
done
timeout "${AB_S:-200}" "$T" bench model --preset gemma-4-e2b "${flags[@]}" --cache /tmp/ab-new.sqlite \
  --prompt-len 512 --decode 8 --trace >"$OUT/ab-trace.txt" 2>&1
cat "$A"
