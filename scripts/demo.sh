#!/usr/bin/env bash
# demo.sh — `make demo`: the main job on the built-in example. Shows the devices, plans the
# W4A16 and attention kernels for a Tesla T4 and every kernel shape of Gemma 4 E2B for an A10G
# with its memory (no GPU needed), and runs the built-in tiny Gemma 4
# checkpoint (tests/fixtures/e2b_flat): on the GPU when there is one, else the CPU reference.
set -euo pipefail
tailor=${1:-build/tailor}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/tests/fixtures/e2b_flat

echo "== tailor devices"
"$tailor" devices | sed -n 1,20p
echo
for plan in "w4a16_matmul m=1,n=6144,k=1536,group=128" \
            "attention_prefill q_len=2048,kv_len=2048,head_dim=512,heads=8,kv_heads=1,window=0"; do
  set -- $plan
  echo "== tailor plan --device t4 --op $1 --shape $2   (first lines)"
  "$tailor" plan --device t4 --op "$1" --shape "$2" | grep -v '^$' | sed -n 1,4p
  "$tailor" plan --device t4 --op "$1" --shape "$2" | grep -m 2 'refused-smem' || true
  echo
done
echo "== tailor plan --device a10g --preset gemma-4-e2b --quiet   (every kernel shape E2B needs, on an A10G)"
"$tailor" plan --device a10g --preset gemma-4-e2b --quiet
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
