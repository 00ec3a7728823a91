#!/usr/bin/env bash
# timeline.sh — on the GPU machine: where one decode attention launch's time goes, block by block.
# Copies templates/ to /tmp/timeline/<case>/templates, switches the other decode spaces off,
# pins attention_decode_wg's parameters to one configuration and adds PROBE = 20 to its
# defines (tailor_probe.cuh), then benches the shape with its own cache: launches 20-22 of each
# loaded module print one line per block, which timeline.py summarises (timeline.txt).
#   bash scripts/probe/timeline.sh            (the cases below)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=$PWD/build-gpu/tailor
L=$OUT/timeline.txt
: >"$L"
# case: name | BN STAGES QWAVES SPREAD | shape
cases=(
  "hd512-32k-bn32-s3-spread|32 3 4 1|kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1"
  "hd512-32k-bn32-s3-flat|32 3 4 2|kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1"
  "hd256-32k-bn64-s3-flat|64 3 4 2|kv_len=32768,head_dim=256,heads=8,kv_heads=1,window=0,batch=1"
  "hd256-8k-bn64-s2-flat|64 2 4 2|kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1"
)
off='  valid = function(p, shape, dtype, device, purpose) do return false, "timeline probe: off" end'
for c in "${cases[@]}"; do
  IFS='|' read -r name prm shape <<<"$c"
  read -r bn st qw sp <<<"$prm"
  d=/tmp/timeline/$name
  rm -rf "$d"
  mkdir -p "$d"
  cp -r templates "$d/"
  for s in attention_decode attention_decode_wide; do
    sed -i "s/^  valid = function(p, shape, dtype, device, purpose)\$/$off/" "$d/templates/$s.lua"
  done
  w=$d/templates/attention_decode_wg.lua
  sed -i -e "s/^    BN = { 32, 64 },/    BN = { $bn },/" -e "s/^    STAGES = { 2, 3 },/    STAGES = { $st },/" \
    -e "s/^    QWAVES = QWAVES,/    QWAVES = { $qw },/" -e "s/^    SPREAD = { 0, 1, 2 },/    SPREAD = { $sp },/" -e "s/MMA_K = 16, Q_REGS = 0,/MMA_K = 16, PROBE = 20, Q_REGS = 0,/" "$w"
  echo "== $name: $shape (BN $bn STAGES $st QWAVES $qw SPREAD $sp)" >>"$L"
  TAILOR_TEMPLATE_PATH=$d/templates timeout 120 "$T" bench attention --op attention_decode \
    --shape "$shape" --cache "$d/cache.sqlite" >"$d/log.txt" 2>&1
  echo "rc=$?" >>"$L"
  grep -v '^PROBE' "$d/log.txt" | tail -6 >>"$L"
  python3 scripts/probe/timeline.py "$d/log.txt" "$name" >>"$L" 2>&1
done
cat "$L"
