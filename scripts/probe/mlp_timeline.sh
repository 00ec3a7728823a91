#!/usr/bin/env bash
# mlp_timeline.sh — on the GPU machine: where one w4a16_mlp launch's time goes, block by block.
# Copies templates/ to /tmp/mlp-timeline/<case>/templates, pins w4a16_mlp's parameters to one
# configuration and adds PROBE = 20 to its defines (tailor_probe.cuh), then tunes the shape with
# its own cache (the timing launches print): timeline.py summarises each launch, its columns
# read here as wait = the grid wait, first = phase 1 (the gated h), stream = the grid barrier,
# tail = h staged in shared memory, exit = phase 2 (the down rows). MLP_CASES replaces the cases.
#   bash scripts/probe/mlp_timeline.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T=$PWD/build-gpu/tailor
L=$OUT/mlp-timeline.txt
: >"$L"
# case: name | THREADS ROWS1 DEPTH P2 R2 PF2 | shape
cases=(
  "e2b-12288-t256-r4-d1-p0-r2|256 4 1 0 2 0|m=1,n=12288,k=1536,group=128"
  "e2b-12288-t256-r4-d1-p1|256 4 1 1 1 0|m=1,n=12288,k=1536,group=128"
  "e2b-12288-t512-r2-d2-p1|512 2 2 1 1 0|m=1,n=12288,k=1536,group=128"
)
[[ -n ${MLP_CASES:-} ]] && IFS=';' read -ra cases <<<"$MLP_CASES"
for c in "${cases[@]}"; do
  IFS='|' read -r name prm shape <<<"$c"
  read -r th r1 dp p2 r2 pf <<<"$prm"
  d=/tmp/mlp-timeline/$name
  rm -rf "$d"
  mkdir -p "$d"
  cp -r templates "$d/"
  w=$d/templates/w4a16_mlp.lua
  sed -i -e "s/^    THREADS = { 256, 512 },/    THREADS = { $th },/" -e "s/^    DEPTH = { 1, 2, 3 },/    DEPTH = { $dp },/" \
    -e "s/^    P2 = { 0, 1 },/    P2 = { $p2 },/" \
    -e "s/^    ROWS1 = { 1, 2, 4 },/    ROWS1 = { $r1 },/" -e "s/^    R2 = { 1, 2 },/    R2 = { $r2 },/" \
    -e "s/^    PF2 = { 0, 2 },/    PF2 = { $pf },/" -e "s/RB = block_rows(p, shape, device) }/RB = block_rows(p, shape, device), PROBE = 20 }/" "$w"
  echo "== $name: $shape (THREADS $th ROWS1 $r1 DEPTH $dp P2 $p2 R2 $r2 PF2 $pf)" >>"$L"
  TAILOR_TEMPLATE_PATH=$d/templates timeout 120 "$T" tune --op w4a16_mlp --shape "$shape" \
    --dtype bf16 --cache "$d/cache.sqlite" >"$d/log.txt" 2>&1
  echo "rc=$?" >>"$L"
  grep -v '^PROBE' "$d/log.txt" | tail -3 >>"$L"
  python3 scripts/probe/timeline.py "$d/log.txt" "$name" >>"$L" 2>&1
done
cat "$L"
