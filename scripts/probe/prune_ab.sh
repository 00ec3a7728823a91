#!/usr/bin/env bash
# prune_ab.sh — on the GPU machine: the pruned w4a16 spaces (session 48) against REV's, in one
# call. Needs probe-variants/base (scripts/probe/base_templates.sh REV; carry probe-variants).
# Builds, runs the GPU tests that tune (cli_gpu_tune, cli_gpu_run, test_gpu_step_tune: the
# tuner taking the planner's plans), two first boots of E2B with the default flags, a = REV's
# templates and b = the tree's, and the model benches on both caches alternating (boot_ab.sh:
# boot_ab.txt, phases-a/b.txt), then issue 4's m = 2048 shapes with the tree's spaces (m2048.txt).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=build-gpu/tailor
[[ -x $T ]] || bash scripts/gpu-build.sh || exit 1
source scripts/gpu-env.sh
[[ -d probe-variants/base/templates ]] || { echo "no probe-variants/base"; exit 1; }
(cd build-gpu && TAILOR_SOURCE_DIR=$PWD/.. timeout 200 ctest -R '^(cli_gpu_tune|cli_gpu_run|test_gpu_step_tune)$' \
  --output-on-failure) >"$OUT/ctest.txt" 2>&1
grep -E "tests passed|tests failed|Passed|Failed" "$OUT/ctest.txt"
BOOT_A_ENV="TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates" BOOT_B_ARGS="" \
  BOOT_BENCH_S=${PRUNE_BENCH_S:-40} BOOT_ROUNDS=${PRUNE_ROUNDS:-2} bash scripts/probe/boot_ab.sh
for s in m=2048,n=6144,k=1536 m=2048,n=1536,k=6144; do
  timeout 90 "$T" bench w4a16 --shape "$s,group=128" --cache /tmp/m2048.sqlite >>"$OUT/m2048.txt" 2>&1
done
grep -E "w4a16_matmul " "$OUT/m2048.txt" | cut -c1-330
