#!/usr/bin/env bash
# tune_phases.sh — on the GPU machine: where a first boot's seconds go. `tune --preset
# gemma-4-e2b` from an empty cache with TAILOR_LOG=debug (each target logs its phases: plan,
# inputs, compile wait, check, rotate, warm-up, capture, replay, record, free), then the sums
# per phase and per op (phases.txt in $OUT; the whole log in phases.log).
#   PHASES_ARGS: more tune flags (e.g. "--rehearse t4"); PHASES_S (330): the boot's limit;
#   PHASES_TAG: a suffix for the files and the cache (phases$TAG.txt, /tmp/phases$TAG.sqlite), so
#   that one call can run two boots (scripts/probe/boot_ab.sh); PHASES_PRESET (gemma-4-e2b): the
#   model whose first boot it is.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=build-gpu/tailor
tag=${PHASES_TAG:-}
rm -f "/tmp/phases$tag.sqlite"
{ time TAILOR_LOG=debug timeout "${PHASES_S:-330}" "$T" tune --preset "${PHASES_PRESET:-gemma-4-e2b}" \
    --cache "/tmp/phases$tag.sqlite" ${PHASES_ARGS:-}; } >"$OUT/phases$tag.log" 2>&1
awk '
  /^tailor: \[[0-9]+\/[0-9]+\] / { op = $3 }
  /phases:/ {
    sub(/.*phases: /, "")
    n = split($0, parts, ", ")
    for (i = 1; i <= n; i++) {
      split(parts[i], kv, " ")
      total[kv[1]] += kv[2]; byop[op, kv[1]] += kv[2]; names[kv[1]] = 1; ops[op] = 1
    }
  }
  END {
    printf "%-20s", "op"; for (p in names) printf " %8s", p; printf "\n"
    printf "%-20s", "all"; for (p in names) printf " %8.1f", total[p]; printf "\n"
    for (o in ops) { printf "%-20s", o; for (p in names) printf " %8.1f", byop[o, p]; printf "\n" }
  }' "$OUT/phases$tag.log" >"$OUT/phases$tag.txt"
grep -E '^real|targets in' "$OUT/phases$tag.log"
cat "$OUT/phases$tag.txt"
