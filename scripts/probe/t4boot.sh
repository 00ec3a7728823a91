#!/usr/bin/env bash
# t4boot.sh — on the GPU machine: the T4 rehearsal's first boot of E2B (`tune --preset
# gemma-4-e2b --rehearse t4` from an empty cache, under `time`: every target checked with the
# T4's budget and compute_75 PTX), then the model benches on that cache with nothing left to
# compile (TAILOR_NO_COMPILE=1): fp16 dense and W4A16 + int4 head (t4boot.txt in $OUT).
#   T4_TUNE_S (330), T4_BENCH_S (120): the limits of the boot and of each bench.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=build-gpu/tailor
B="$OUT/t4boot.txt"
rm -f /tmp/t4boot.sqlite
{ time timeout "${T4_TUNE_S:-330}" "$T" tune --preset gemma-4-e2b --rehearse t4 \
    --cache /tmp/t4boot.sqlite; } >"$B" 2>&1
echo "tune rc=$?" >>"$B"
for flags in "" "--quantize w4a16 --quantize-head"; do
  echo "== bench model --rehearse t4 $flags" >>"$B"
  TAILOR_NO_COMPILE=1 timeout "${T4_BENCH_S:-120}" "$T" bench model --preset gemma-4-e2b \
    --rehearse t4 --cache /tmp/t4boot.sqlite --prompt-len 512 --decode 64 $flags >>"$B" 2>&1
  echo "bench rc=$?" >>"$B"
done
grep -E '^real|rc=|tok/s|targets|failed' "$B" | tail -20
