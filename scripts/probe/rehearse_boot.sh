#!/usr/bin/env bash
# rehearse_boot.sh — on the GPU machine: a rehearsal's first boot of E2B (`tune --preset gemma-4-e2b
# --rehearse t4` from an empty cache, under `time`: every target checked with the profile's
# budget and its PTX), then the model benches on that cache with nothing left to compile
# (TAILOR_NO_COMPILE=1): 16-bit dense and W4A16 + int4 head (<profile>boot.txt in $OUT).
#   REHEARSE (t4): the profile; BOOT_TUNE_S (330), BOOT_BENCH_S (120): the limits of the boot and
#   of each bench.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=build-gpu/tailor
P=${REHEARSE:-t4}
B="$OUT/${P}boot.txt"
C=/tmp/${P}boot.sqlite
rm -f "$C"
{ time timeout "${BOOT_TUNE_S:-330}" "$T" tune --preset gemma-4-e2b --rehearse "$P" \
    --cache "$C"; } >"$B" 2>&1
echo "tune rc=$?" >>"$B"
for flags in "" "--quantize w4a16 --quantize-head"; do
  echo "== bench model --rehearse $P $flags" >>"$B"
  TAILOR_NO_COMPILE=1 timeout "${BOOT_BENCH_S:-120}" "$T" bench model --preset gemma-4-e2b \
    --rehearse "$P" --cache "$C" --prompt-len 512 --decode 64 $flags >>"$B" 2>&1
  echo "bench rc=$?" >>"$B"
done
grep -E '^real|rc=|tok/s|targets|failed' "$B" | tail -20
