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
# the ids are checked against transformers' greedy ids of the fixture (expected.json); a GPU
# that is there but fails the run fails the demo (after the CPU reference's ids, for comparison)
want=$(python3 -c "import json;print(','.join(map(str,json.load(open('$model/expected.json'))['greedy_ids'][:8])))" 2>/dev/null || true)
run_ids() { "$tailor" run --device "$1" --model "$model" --ids "$ids" --max-tokens 8 --greedy --print-ids; }
if got=$(run_ids "$device"); then
  echo "$got"
  if [[ -n $want && $got != "$want" ]]; then
    echo "demo: the $device run's ids differ from transformers' greedy ids ($want)"
    exit 1
  fi
  [[ -n $want ]] && echo "(the same ids as transformers' greedy decoding of this checkpoint)"
else
  [[ $device == gpu ]] || exit 1
  echo "demo: the GPU run failed; the CPU reference, for comparison:"
  run_ids cpu || true
  exit 1
fi
