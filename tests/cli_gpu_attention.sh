#!/usr/bin/env bash
# cli_gpu_attention.sh — every survivor of the attention spaces checked on a live GPU
# (--verify-all fails on any wrong survivor): Gemma 4 head shapes (E2B/E4B/31B, head_dim 256
# and 512, MQA and GQA), odd and random lengths, chunked prefill, windows shorter and longer than
# the sequence, window 1 (single visible key), decode rings wrapped many times, both dtypes, the
# T4 rehearsal (compute_75 PTX, fp16) and a 99 KB card's (the A10G: compute_86 PTX, its small
# tiles at head_dim 512). ATTN_QUICK=1 runs a smoke subset.
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
runs=0
quick=${ATTN_QUICK:-0}
tune() { # tune OP SHAPE DTYPE [extra flags...]
  local op=$1 shape=$2 dtype=$3; shift 3
  runs=$((runs + 1))
  echo "== $op $shape $dtype $*"
  if ! "$T" tune --op "$op" --shape "$shape" --dtype "$dtype" --verify-all \
       --cache "$tmp/c.sqlite" --seed 5 "$@"; then
    echo "FAILED: $op $shape $dtype $*"; fail=1
  fi
}

# ---- prefill ----
# E2B sliding (MQA, W=512 shorter than the sequence) and full (head_dim 512, odd length)
tune attention_prefill "q_len=1000,kv_len=1000,head_dim=256,heads=8,kv_heads=1,window=512" bf16
tune attention_prefill "q_len=777,kv_len=777,head_dim=512,heads=8,kv_heads=1,window=0" bf16
if [ "$quick" != 1 ]; then
  # chunked prefill after cached history, GQA (E4B sliding; 31B full)
  tune attention_prefill "q_len=300,kv_len=1300,head_dim=256,heads=8,kv_heads=2,window=1024" fp16
  tune attention_prefill "q_len=129,kv_len=2000,head_dim=512,heads=32,kv_heads=4,window=0" bf16
  # window longer than the sequence (31B sliding, GQA 2)
  tune attention_prefill "q_len=100,kv_len=100,head_dim=256,heads=32,kv_heads=16,window=1024" fp16
  # window 1: every row sees exactly one key
  tune attention_prefill "q_len=50,kv_len=90,head_dim=512,heads=4,kv_heads=2,window=1" bf16
  tune attention_prefill "q_len=33,kv_len=33,head_dim=256,heads=8,kv_heads=1,window=1" fp16
  # one query (the decode shape through the prefill kernel)
  tune attention_prefill "q_len=1,kv_len=513,head_dim=256,heads=8,kv_heads=1,window=512" bf16
  tune attention_prefill "q_len=1,kv_len=1,head_dim=512,heads=8,kv_heads=1,window=0" fp16
  # random lengths (fixed seed, printed above each run)
  RANDOM=11
  for i in 1 2 3; do
    kv=$((RANDOM % 1500 + 1)); q=$((RANDOM % kv + 1)); w=$((RANDOM % 700))
    hd=$((i % 2 == 0 ? 512 : 256)); dt=$([ $i = 2 ] && echo fp16 || echo bf16)
    tune attention_prefill "q_len=$q,kv_len=$kv,head_dim=$hd,heads=8,kv_heads=2,window=$w" "$dt"
  done
fi

# ---- decode ----
# E2B sliding ring (W=512) far past the window: position 99,999, wrapped ~195 times
tune attention_decode "kv_len=100000,head_dim=256,heads=8,kv_heads=1,window=512,batch=3" bf16
# E2B full layer, MQA, 8k linear cache; sequence 1 at position < 3 streams only its live slots
tune attention_decode "kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0,batch=2" bf16
# q prepared in the kernel (prep=1, the runtime's decode): E2B sliding (a partly filled ring)
# and full; the 31B shape (GQA 8) far past the window
tune attention_decode "kv_len=130,head_dim=256,heads=8,kv_heads=1,window=512,batch=2,prep=1" bf16
tune attention_decode "kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=2,prep=1" bf16
tune attention_decode "kv_len=9000,head_dim=256,heads=32,kv_heads=4,window=1024,batch=2,prep=1" fp16
if [ "$quick" != 1 ]; then
  # 31B full layer (GQA 8), several sequences; fp16
  tune attention_decode "kv_len=4097,head_dim=512,heads=32,kv_heads=4,window=0,batch=4" fp16
  # 31B sliding (W=1024) with sequences shorter than the window (partly filled rings)
  tune attention_decode "kv_len=300,head_dim=256,heads=32,kv_heads=16,window=1024,batch=5" fp16
  # window 1 and a single-token cache: one visible key
  tune attention_decode "kv_len=5000,head_dim=256,heads=8,kv_heads=2,window=1,batch=2" bf16
  tune attention_decode "kv_len=1,head_dim=512,heads=8,kv_heads=1,window=0,batch=1" fp16
  # the benchmark sizes (32k MQA, both head dims)
  tune attention_decode "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1" bf16
  tune attention_decode "kv_len=32768,head_dim=256,heads=8,kv_heads=1,window=0,batch=1" bf16
  # random lengths
  RANDOM=23
  for i in 1 2; do
    kv=$((RANDOM % 20000 + 1)); w=$((RANDOM % 2 == 0 ? 0 : RANDOM % 1500 + 1))
    tune attention_decode "kv_len=$kv,head_dim=$((i == 1 ? 512 : 256)),heads=16,kv_heads=2,window=$w,batch=3" fp16
  done
fi

# ---- T4 rehearsal: compute_75 PTX on this GPU, fp16, the T4's budget ----
tune attention_prefill "q_len=200,kv_len=300,head_dim=512,heads=8,kv_heads=1,window=0" fp16 --rehearse t4
tune attention_decode "kv_len=10000,head_dim=512,heads=8,kv_heads=1,window=0,batch=2" fp16 --rehearse t4
tune attention_decode "kv_len=600,head_dim=256,heads=8,kv_heads=1,window=512,batch=2,prep=1" fp16 --rehearse t4
if [ "$quick" != 1 ]; then
  tune attention_prefill "q_len=257,kv_len=600,head_dim=256,heads=8,kv_heads=2,window=512" fp16 --rehearse t4
  tune attention_decode "kv_len=70000,head_dim=256,heads=8,kv_heads=1,window=512,batch=3" fp16 --rehearse t4
  tune attention_prefill "q_len=40,kv_len=40,head_dim=512,heads=4,kv_heads=1,window=1" fp16 --rehearse t4
fi

# ---- a 99 KB card rehearsed (the A10G: compute_86 PTX on this GPU, bf16, its budget): at
# head_dim 512 the small tiles (16 keys, cp.async, m16n8k16), which no other run plans ----
tune attention_decode "kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=2,prep=1" bf16 --rehearse a10g
tune attention_prefill "q_len=200,kv_len=300,head_dim=512,heads=8,kv_heads=1,window=0" bf16 --rehearse a10g
tune attention_decode "kv_len=600,head_dim=256,heads=8,kv_heads=1,window=512,batch=2,prep=1" bf16 --rehearse a10g
if [ "$quick" != 1 ]; then
  tune attention_decode "kv_len=9000,head_dim=512,heads=32,kv_heads=4,window=0,batch=3" fp16 --rehearse a10g
  tune attention_prefill "q_len=129,kv_len=2000,head_dim=512,heads=32,kv_heads=4,window=0" fp16 --rehearse a10g
  tune attention_prefill "q_len=40,kv_len=40,head_dim=512,heads=4,kv_heads=1,window=1" bf16 --rehearse a10g
fi

echo "$runs tune runs, fail=$fail"
exit $fail
