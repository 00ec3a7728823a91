#!/usr/bin/env bash
# prune_data.sh — on the GPU machine: the timed trials that say which survivors never come near a
# target's best (scripts/probe/trials_near.py reads them). PRUNE_STEP=e2b (default): build, then
# targets.sh with one bench round (the E2B boot's trials in boot-trials.json, issue 4's and 5's
# kernels from an empty cache) and the kernel benches' trials (bench-trials.json).
# PRUNE_STEP=others: the first boots of PRUNE_PRESETS (default E4B and 31B), each's trials as
# boot-<preset>-trials.json and its phases.
set -uo pipefail
source scripts/probe/common.sh || exit 1
case ${PRUNE_STEP:-e2b} in
  e2b)
    TARGETS_REPS=${TARGETS_REPS:-1} bash scripts/probe/targets.sh
    "$T" cache trials --json --cache /tmp/bench.sqlite >"$OUT/bench-trials.json" 2>&1 ;;
  others)
    for p in ${PRUNE_PRESETS:-gemma-4-e4b gemma-4-31b}; do
      PHASES_PRESET=$p PHASES_TAG=-$p PHASES_S=${PRUNE_BOOT_S:-240} bash scripts/probe/tune_phases.sh
      "$T" cache trials --json --cache "/tmp/phases-$p.sqlite" >"$OUT/boot-$p-trials.json" 2>&1
    done ;;
esac
