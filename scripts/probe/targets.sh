#!/usr/bin/env bash
# targets.sh — on the GPU machine, after scripts/gpu-build.sh: the issues' figures in one call.
# The E2B first boot with the default flags (tune_phases.sh: phases.txt, phases.log), the E2B
# model benches on its cache alternating W4A16 + int4 head and bf16 (TARGETS_REPS rounds,
# default 2; targets.txt), every timed trial of the boot (boot-trials.json: which survivors come
# near each target's best), then unless TARGETS_KERNELS=0 issue 4's and 5's kernels from an empty
# cache (gpu-check.sh bench; gpucheck.txt). ~7 minutes on an H100.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=build-gpu/tailor
R="$OUT/targets.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader >"$R"
bash scripts/probe/tune_phases.sh >>"$R" 2>&1
B="$T bench model --preset gemma-4-e2b --cache /tmp/phases.sqlite --prompt-len 512 --decode 128"
for ((i = 0; i < ${TARGETS_REPS:-2}; i++)); do
  for q in "--quantize w4a16 --quantize-head" ""; do
    echo "== bench model ${q:-bf16}" >>"$R"
    timeout 60 $B $q >>"$R" 2>&1
  done
done
"$T" cache trials --json --cache /tmp/phases.sqlite >"$OUT/boot-trials.json" 2>&1
if [[ ${TARGETS_KERNELS:-1} != 0 ]]; then
  timeout "${TARGETS_KERNELS_S:-240}" bash scripts/gpu-check.sh bench >"$OUT/gpucheck.txt" 2>&1
  echo "gpu-check bench rc=$?" >>"$R"
fi
grep -E '^== |targets in|^real|decode .* tok/s|prefill .* tok/s|rc=' "$R"
