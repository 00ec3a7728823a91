#!/usr/bin/env bash
# cli_gpu_small_ops.sh — Gemma 4's small ops on a live GPU: every survivor of residual_norm,
# qk_norm_rope, gelu_gate, gather_cols, embed, softcap_argmax (with feed), gemma4_ple (with gather),
# gemma4_kv_store and topk checked against its C
# reference over the
# E2B/E4B/31B widths (hidden 1536/2560/5376, heads 8/32, head dims 256/512, vocab 262144), in
# bf16 and fp16, and rehearsed for the T4 (fp16, compute_75 PTX, the T4's budget).
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
tune() { # OP SHAPE DTYPE [extra flags]
  local op=$1 shape=$2 dtype=$3; shift 3
  if ! "$T" tune --op "$op" --shape "$shape" --dtype "$dtype" --verify-all --cache "$tmp/c.sqlite" \
      --seed 5 "$@"; then
    echo "FAILED: tune --op $op --shape $shape --dtype $dtype $*"; fail=1
  fi
}

# residual_norm: every mode at decode and prefill-like row counts
for cols in 1536 2560 5376; do
  for mode in 0 1 2 3; do
    for rows in 1 33; do tune residual_norm rows=$rows,cols=$cols,mode=$mode bf16; done
  done
  tune residual_norm rows=7,cols=$cols,mode=1 fp16
done

# qk_norm_rope: q (8 or 32 heads), k (1, 2, 4 or 16 heads), v (weightless, no RoPE); both RoPEs
for tokens in 1 17; do
  for heads in 1 8 32; do
    tune qk_norm_rope tokens=$tokens,heads=$heads,head_dim=256,rope=1 bf16
    tune qk_norm_rope tokens=$tokens,heads=$heads,head_dim=512,rope=2 bf16
  done
  tune qk_norm_rope tokens=$tokens,heads=1,head_dim=512,weight=0,rope=0 bf16
  tune qk_norm_rope tokens=$tokens,heads=16,head_dim=256,weight=0,rope=0 bf16
done
tune qk_norm_rope tokens=9,heads=8,head_dim=256,rope=1,inplace=1 bf16
tune qk_norm_rope tokens=9,heads=4,head_dim=512,rope=2,inplace=1 bf16
tune qk_norm_rope tokens=5,heads=8,head_dim=256,rope=1 fp16
tune qk_norm_rope tokens=5,heads=8,head_dim=512,rope=2 fp16

# gelu_gate: the MLP widths (E2B 6144 and 12288, E4B 10240, 31B 21504) and the PLE gate
for inter in 6144 10240 12288 21504; do
  for rows in 1 9; do tune gelu_gate rows=$rows,inter=$inter bf16; done
  tune gelu_gate rows=3,inter=$inter fp16
done
tune gelu_gate rows=5,inter=256,u_ld=8960 bf16
tune gelu_gate rows=9,inter=6144,g_ld=12288,u_ld=12288 bf16

# gather_cols: the inputs of int4 matrices in activation order (hidden 1536/5376, E2B o 2048,
# downs 6144/21504), one row and a prefill's, and a width no block shape divides
for cols in 1536 2048 5376 6144 21504; do
  for rows in 1 33; do tune gather_cols rows=$rows,cols=$cols bf16; done
done
tune gather_cols rows=5,cols=1544 fp16

# embed: into the dtype and into the fp32 residual stream; PLE rows (35 layers x 256, scale 16)
tune embed tokens=3,cols=1536,vocab=262144,out_f32=1 bf16
for cols in 1536 2560 5376; do
  tune embed tokens=1,cols=$cols,vocab=4096 bf16
  tune embed tokens=9,cols=$cols,vocab=4096,out_f32=1 bf16
  tune embed tokens=9,cols=$cols,vocab=4096,out_f32=1 fp16
done
tune embed tokens=9,cols=8960,vocab=4096,scale_dim=256 bf16

# softcap_argmax: the full vocabulary, with and without the capped logits, 16-bit and fp32 input
for rows in 1 3; do
  tune softcap_argmax rows=$rows,vocab=262144 bf16
  tune softcap_argmax rows=$rows,vocab=262144,write=0 bf16
done
tune softcap_argmax rows=2,vocab=262144,in_f32=1 bf16
tune softcap_argmax rows=2,vocab=262144 fp16
# feed=1: the next step's token and position written beside the argmax (decode and prefill rows)
tune softcap_argmax rows=1,vocab=262144,feed=1 bf16
tune softcap_argmax rows=3,vocab=262144,feed=1 fp16

# topk: a sampled step's candidates at the full vocabulary (decode and several rows), a row
# shorter than any slice the space would split, and the fixtures' vocabulary of 512
tune topk rows=1,n=262144,k=64 bf16
tune topk rows=3,n=262144,k=64 fp16
tune topk rows=2,n=1000,k=7 bf16
tune topk rows=1,n=512,k=64 bf16
# k = 128 (TAILOR_GEMMA4_TOP_K: the warps' lists of 128), and k between the two lists' lengths
tune topk rows=1,n=262144,k=128 bf16
tune topk rows=3,n=262144,k=128 fp16
tune topk rows=2,n=5000,k=100 bf16

# gemma4_ple: rows staged per token, and gathered from the table on the device by id
for t in 1 9; do
  tune gemma4_ple tokens=$t,layers=35,dim=256,hidden=1536 bf16
  tune gemma4_ple tokens=$t,layers=35,dim=256,hidden=1536,gather=1 bf16
  tune gemma4_ple tokens=$t,layers=42,dim=256,hidden=2560,gather=1 fp16
done

# gemma4_kv_store: decode (a ring and a full layer, with q folded in: q_heads) and prefill rows
for hd in 256 512; do
  tune gemma4_kv_store tokens=1,kv_heads=1,head_dim=$hd,slots=512 bf16
  tune gemma4_kv_store tokens=1,kv_heads=1,head_dim=$hd,slots=512,q_heads=8 bf16
  tune gemma4_kv_store tokens=1,kv_heads=4,head_dim=$hd,slots=4096,q_heads=32 fp16
  tune gemma4_kv_store tokens=9,kv_heads=2,head_dim=$hd,slots=64,lin=1 bf16
done
tune gemma4_kv_store tokens=1,kv_heads=1,head_dim=256,slots=512,q_heads=8 fp16 --rehearse t4

# the T4 rehearsed: fp16, its budget, compute_75 PTX run here
tune residual_norm rows=7,cols=1536,mode=1 fp16 --rehearse t4
tune qk_norm_rope tokens=7,heads=8,head_dim=512,rope=2 fp16 --rehearse t4
tune gelu_gate rows=7,inter=6144 fp16 --rehearse t4
tune gather_cols rows=7,cols=1536 fp16 --rehearse t4
tune embed tokens=7,cols=1536,vocab=4096,out_f32=1 fp16 --rehearse t4
tune softcap_argmax rows=1,vocab=262144 fp16 --rehearse t4
tune softcap_argmax rows=1,vocab=262144,feed=1 fp16 --rehearse t4
tune gemma4_ple tokens=1,layers=35,dim=256,hidden=1536,gather=1 fp16 --rehearse t4
tune topk rows=1,n=262144,k=64 fp16 --rehearse t4
tune topk rows=1,n=262144,k=128 fp16 --rehearse t4

# a second run of a cached shape compiles nothing
out=$(TAILOR_NO_COMPILE=1 "$T" tune --op softcap_argmax --shape rows=1,vocab=262144 --dtype bf16 \
      --cache "$tmp/c.sqlite" 2>&1)
echo "$out"
grep -q "cached:" <<<"$out" || { echo "FAILED: softcap_argmax was not cached"; fail=1; }
"$T" cache ls --cache "$tmp/c.sqlite" | head -20
exit $fail
