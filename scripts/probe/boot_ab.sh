#!/usr/bin/env bash
# boot_ab.sh — on the GPU machine: two first boots of E2B from empty caches in one call, the
# default (`-a`) and one with BOOT_B_ARGS (`-b`, default "--strategy halving"), each split by
# phase (tune_phases.sh: phases-a.txt, phases-b.txt), then the E2B model benches on the two
# caches alternating a, b, a, b (W4A16 + int4 head, then bf16; boot_ab.txt). Whether a cheaper
# boot still picks kernels as fast. ~6 minutes on an H100.
#   BOOT_B_ARGS: the second boot's tune flags; BOOT_BENCH_S (45): each bench's limit;
#   BOOT_ROUNDS (2): rounds of a, b benches;
#   BOOT_A_ENV, BOOT_B_ENV: variable assignments for one side's boot and benches (e.g.
#   "TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates": REV's spaces against the tree's,
#   scripts/probe/base_templates.sh REV; then BOOT_B_ARGS="" compares the spaces alone).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=build-gpu/tailor
B="$OUT/boot_ab.txt"
side_env() { [[ $1 == a ]] && echo "${BOOT_A_ENV:-}" || echo "${BOOT_B_ENV:-}"; }
env $(side_env a) PHASES_TAG=-a bash scripts/probe/tune_phases.sh >"$B" 2>&1
env $(side_env b) PHASES_TAG=-b PHASES_ARGS="${BOOT_B_ARGS---strategy halving}" \
  bash scripts/probe/tune_phases.sh >>"$B" 2>&1
for q in "--quantize w4a16 --quantize-head" ""; do
  sides=""
  for ((r = 0; r < ${BOOT_ROUNDS:-2}; r++)); do sides+=" a b"; done
  for side in $sides; do
    echo "== $side bench model ${q:-bf16}" >>"$B"
    env $(side_env $side) timeout "${BOOT_BENCH_S:-45}" "$T" bench model --preset gemma-4-e2b \
      --cache "/tmp/phases-$side.sqlite" --prompt-len 512 --decode 128 $q >>"$B" 2>&1
  done
done
grep -E '^== |targets in|^real|decode .* tok/s' "$B"
