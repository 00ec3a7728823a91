#!/usr/bin/env bash
# ab_model.sh — on the GPU machine: the E2B decode with base templates against new ones, in one
# run. By default base = probe-variants/base's templates (scripts/probe/base_templates.sh REV on
# the development machine) and new = the working tree's; AB_NEW_PATH=DIR instead runs the new
# side with DIR on TAILOR_TEMPLATE_PATH (a variant's files) and
# the base side on the working tree's (or AB_BASE_PATH). The base run tunes into its own cache;
# the new run starts from a copy of it, so only the ops whose template files differ are tuned
# again (the space hash covers the op's .lua and .cu and the shared headers: change only an op's
# own files to keep the others' winners). Then base and new alternate on their caches (REPS
# rounds), and the new templates' step is traced.
#   bash scripts/probe/ab_model.sh [bench model flags...]   (default: --quantize w4a16 --quantize-head;
#   "bf16" alone: no flags, the 16-bit model)
# AB_NEW_ENV="VAR=VALUE ..." sets those variables for the new side only (e.g. with
# AB_BASE_PATH=templates, both sides on the working tree's templates:
# AB_NEW_ENV=TAILOR_TIMING_SPACER=attention_decode A/Bs one op's timing method).
# AB_SEED_CACHE=FILE seeds the base's cache (below).
# Output: $OUT/ab.txt (decode lines, tagged), $OUT/ab-trace.txt. AB_TUNE_S bounds the first (tuning)
# bench, AB_S each other one, REPS the alternating rounds.
source scripts/probe/common.sh || exit 1
base_path=${AB_BASE_PATH:-}
new_path=${AB_NEW_PATH:-}
if [[ -z $new_path && -z $base_path ]]; then
  [[ -d probe-variants/base/templates ]] ||
    { echo "ab_model: no probe-variants/base (base_templates.sh) and no AB_NEW_PATH"; exit 2; }
  base_path=probe-variants/base/templates
fi
[[ -n $base_path ]] && base_path=$(cd "$base_path" && pwd)
[[ -n $new_path ]] && new_path=$(cd "$new_path" && pwd)
flags=("$@")
[[ ${#flags[@]} -eq 0 ]] && flags=(--quantize w4a16 --quantize-head)
[[ ${flags[*]} == bf16 ]] && flags=()
A="$OUT/ab.txt"
echo "base ${base_path:-working tree}, new ${new_path:-working tree} ${AB_NEW_ENV:-}, flags ${flags[*]}" >"$A"
bench() { # bench TAG CACHE [extra flags]: one bench model run, its decode and tuning lines tagged
  local tag=$1 cache=$2
  shift 2
  local tp=(env) path=$new_path
  [[ $tag == base ]] && path=$base_path
  [[ -n $path ]] && tp+=(TAILOR_TEMPLATE_PATH=$path)
  [[ $tag == new && -n ${AB_NEW_ENV:-} ]] && read -r -a extra <<<"$AB_NEW_ENV" && tp+=("${extra[@]}")
  timeout "${AB_S:-200}" "${tp[@]}" "$T" bench model --preset gemma-4-e2b "${flags[@]}" --cache "$cache" \
    --prompt-len 512 --decode 128 "$@" 2>&1 | grep -E '^(decode|tuning)' | sed "s/^/$tag: /" >>"$A"
}
rm -f /tmp/ab-base.sqlite /tmp/ab-new.sqlite
# AB_SEED_CACHE=FILE: the base starts from a copy of FILE (a cache tuned with the base's templates,
# e.g. gpu-check.sh boot's /tmp/boot.sqlite) instead of an empty one
[[ -n ${AB_SEED_CACHE:-} && -f ${AB_SEED_CACHE:-} ]] && cp "$AB_SEED_CACHE" /tmp/ab-base.sqlite
AB_S=${AB_TUNE_S:-300} bench base /tmp/ab-base.sqlite # tunes every shape: ~80 s on the H200, 150 s ran out
cp /tmp/ab-base.sqlite /tmp/ab-new.sqlite
bench new /tmp/ab-new.sqlite
for ((r = 0; r < ${REPS:-2}; r++)); do
  bench base /tmp/ab-base.sqlite
  bench new /tmp/ab-new.sqlite
done
tp=(env)
[[ -n $new_path ]] && tp+=(TAILOR_TEMPLATE_PATH=$new_path)
[[ -n ${AB_NEW_ENV:-} ]] && read -r -a extra <<<"$AB_NEW_ENV" && tp+=("${extra[@]}")
timeout "${AB_S:-200}" "${tp[@]}" "$T" bench model --preset gemma-4-e2b "${flags[@]}" \
  --cache /tmp/ab-new.sqlite --prompt-len 512 --decode 8 --trace >"$OUT/ab-trace.txt" 2>&1
cat "$A"
