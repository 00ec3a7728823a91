#!/usr/bin/env bash
# ncu of the long-cache decode winner at one pair (32k head_dim 512 MQA, batch 1) and at four
# pairs (batch 4): the same kernel reading 50 % and 120 % of the copy figure. Says where one
# pair's ~24 us fixed cost goes (docs/perf/attention.md, session 13). Run on the GPU machine
# after scripts/gpu-build.sh and scripts/gpu-env.sh; writes $OUT/ncu-decode.txt.
set -u
T=${T:-build-gpu/tailor}
N="$OUT/ncu-decode.txt"
: >"$N"
for s in kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 \
         kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=4; do
  "$T" tune --op attention_decode --shape "$s" --dtype bf16 --cache /tmp/ncu-decode.sqlite \
    >>"$N" 2>&1
  echo "== ncu $s" >>"$N"
  timeout 150 ncu --kernel-name "regex:attention_decode" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    "$T" bench attention --op attention_decode --shape "$s" --cache /tmp/ncu-decode.sqlite \
    >>"$N" 2>&1
done
