#!/usr/bin/env bash
# prune_ab.sh — on the GPU machine: the pruned w4a16 spaces (session 48) against REV's, in one
# call, the most needed part first so that a call cut short still says something. Needs
# probe-variants/base (scripts/probe/base_templates.sh REV; carry probe-variants).
# Builds; runs the GPU tests that tune (cli_gpu_tune, cli_gpu_run, test_gpu_step_tune: the
# tuner taking the planner's plans; ctest.txt); the E2B first boot with the tree's spaces
# (phases-new.txt) and the model benches on it; then the same with REV's templates
# (phases-base.txt), and the benches again alternating (prune_ab.txt).
set -uo pipefail
source scripts/probe/common.sh || exit 1
[[ -d probe-variants/base/templates ]] || { echo "no probe-variants/base"; exit 1; }
(cd build-gpu && TAILOR_SOURCE_DIR=$PWD/.. timeout 200 ctest -R '^(cli_gpu_tune|cli_gpu_run|test_gpu_step_tune)$' \
  --output-on-failure) >"$OUT/ctest.txt" 2>&1
grep -E "tests passed|tests failed|Passed|Failed" "$OUT/ctest.txt"
R="$OUT/prune_ab.txt"
base_env="TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates"
bench() { # bench SIDE ENV...: the W4A16 + int4 head and bf16 benches on SIDE's cache
  local side=$1
  shift
  for q in "--quantize w4a16 --quantize-head" ""; do
    echo "== $side bench model ${q:-bf16}" >>"$R"
    env "$@" timeout 40 "$T" bench model --preset gemma-4-e2b --cache "/tmp/phases-$side.sqlite" \
      --prompt-len 512 --decode 128 $q >>"$R" 2>&1
  done
}
PHASES_TAG=-new bash scripts/probe/tune_phases.sh >>"$R" 2>&1
bench new
env "$base_env" PHASES_TAG=-base bash scripts/probe/tune_phases.sh >>"$R" 2>&1
bench base "$base_env"
bench new
grep -E '^== |targets in|^real|decode .* tok/s' "$R"
