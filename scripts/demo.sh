#!/usr/bin/env bash
# demo.sh — `make demo`: the main job on the built-in example. Shows the devices, plans the
# RMSNorm and W4A16 kernels for a Tesla T4 (no GPU needed), and runs the built-in tiny Gemma 4
# checkpoint (tests/fixtures/e2b_flat): on the GPU when there is one, else the CPU reference.
set -euo pipefail
tailor=${1:-build/tailor}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/tests/fixtures/e2b_flat

echo "== tailor devices"
"$tailor" devices | head -20
echo
echo "== tailor plan --device t4 --op rmsnorm --shape rows=16,cols=2560 --quiet"
"$tailor" plan --device t4 --op rmsnorm --shape rows=16,cols=2560 --quiet
echo
device=cpu
if "$tailor" devices --json 2>/dev/null | grep -q '"devices":[[:space:]]*\[[[:space:]]*{'; then
  device=gpu
fi
ids=$(python3 -c "import json;print(','.join(map(str,json.load(open('$model/expected.json'))['prompt_ids'])))" 2>/dev/null || echo 2,17,42,99)
echo "== tailor run --device $device --model tests/fixtures/e2b_flat --ids $ids --max-tokens 8 --greedy --print-ids"
if ! "$tailor" run --device "$device" --model "$model" --ids "$ids" --max-tokens 8 --greedy --print-ids; then
  if [[ $device == gpu ]]; then
    echo "(GPU run failed; falling back to the CPU reference)"
    "$tailor" run --device cpu --model "$model" --ids "$ids" --max-tokens 8 --greedy --print-ids
  else
    exit 1
  fi
fi
