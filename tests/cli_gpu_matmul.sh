#!/usr/bin/env bash
# cli_gpu_matmul.sh — every survivor of the dense matmul spaces checked on a live GPU
# (--verify-all fails on any wrong survivor): the linear shapes of Gemma 4 E2B and E4B
# (GEMMA4.md §3: q/k/v/o, gate/up/down incl. the 12288-wide MLP, per_layer_input_gate,
# per_layer_projection, the PLE model projection) at m=1, 16 and 512, the LM head at m=1, odd
# shapes that are no multiple of a tile, both dtypes, and the T4 rehearsal (compute_75 PTX, fp16);
# and matmul_glu / matmul_seam / matmul_pro, the same GEMV with Gemma 4's gating or layer seam as
# epilogue, or the layer seam before it as prologue.
# MATMUL_QUICK=1 keeps one shape per group of the list (a smoke run).
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
runs=0
tune_op() { # tune_op OP SHAPE DTYPE [extra flags...]: every survivor checked
  local op=$1 shape=$2 dtype=$3; shift 3
  runs=$((runs + 1))
  if ! "$T" tune --op "$op" --shape "$shape" --dtype "$dtype" --verify-all \
       --cache "$tmp/c.sqlite" --seed 7 "$@"; then
    echo "FAILED: $op $shape $dtype $*"; fail=1
  fi
}
tune() { tune_op matmul "$@"; }
glu() { tune_op matmul_glu "$@"; }
seam() { tune_op matmul_seam "$@"; }
pro() { tune_op matmul_pro "$@"; }
quick=${MATMUL_QUICK:-0}

# n,k of every 16-bit linear (out, in): q (sliding, full), k/v (sliding, full), o (sliding,
# full), gate/up (6144 and the 12288-wide shared-KV MLP of E2B), down, per_layer_input_gate
# [256, H], per_layer_projection [H, 256], per_layer_model_projection [L*256, H].
E2B="2048,1536 4096,1536 256,1536 512,1536 1536,2048 1536,4096 6144,1536 12288,1536
     1536,6144 1536,12288 1536,256 8960,1536"
E4B="2048,2560 4096,2560 512,2560 1024,2560 2560,2048 2560,4096 10240,2560 2560,10240
     256,2560 2560,256 10752,2560"

for m in 1 16 512; do
  for model in "$E2B" "$E4B"; do
    for nk in $model; do
      n=${nk%,*}; k=${nk#*,}
      tune "m=$m,n=$n,k=$k" bf16
      [ "$quick" = 1 ] && break
    done
  done
done
# the tied LM head (embed_tokens [262144, 1536]) at decode only: 805 MB of weights
tune "m=1,n=262144,k=1536" bf16

# fp16 (what a T4 computes in), on a few of the same shapes
for s in "m=1,n=6144,k=1536" "m=16,n=1536,k=12288" "m=512,n=2048,k=1536" "m=1,n=2560,k=10240"; do
  tune "$s" fp16
  [ "$quick" = 1 ] && break
done

# odd shapes: m, n and k no multiple of any tile (k a multiple of 8), both dtypes
for dt in bf16 fp16; do
  for s in "m=3,n=200,k=328" "m=1,n=200,k=328" "m=16,n=200,k=328" "m=512,n=200,k=328" \
           "m=70,n=33,k=8" "m=129,n=264,k=2120" "m=5,n=1000,k=352" "m=33,n=97,k=1544"; do
    tune "$s" "$dt"
    [ "$quick" = 1 ] && break
  done
done

# what a T4 would receive: compute_75 PTX under the T4's budget, fp16, run here
for s in "m=1,n=6144,k=1536" "m=16,n=1536,k=6144" "m=512,n=6144,k=1536" "m=3,n=200,k=328" \
         "m=1,n=1536,k=12288" "m=512,n=200,k=328"; do
  tune "$s" fp16 --rehearse t4
  [ "$quick" = 1 ] && break
done
# matmul_glu (the gated gate|up, and the PLE gate with u from a strided buffer): every survivor
# of both forms, decode widths, odd n and k, both dtypes, and the T4 rehearsal (QUICK: one).
for s in "m=1,n=6144,k=1536" "m=1,n=12288,k=1536" "m=1,n=10240,k=2560" "m=3,n=200,k=328" \
         "m=1,n=256,k=1536,ext=1,u_ld=8960" "m=2,n=256,k=2560,ext=1,u_ld=10752" \
         "m=16,n=97,k=1544,ext=1,u_ld=300"; do
  glu "$s" bf16
  glu "$s" fp16
  [ "$quick" = 1 ] && break
done
glu "m=1,n=6144,k=1536" fp16 --rehearse t4
glu "m=1,n=256,k=1536,ext=1,u_ld=8960" fp16 --rehearse t4

# matmul_seam (a projection back to the hidden size, then the layer seam in the same launch):
# every survivor, the seams after o_proj (0), down_proj (1, 2) and per_layer_projection (1) at
# the E2B/E4B widths, several rows, odd shapes, both dtypes, the T4 rehearsal.
for s in "m=1,n=1536,k=2048,mode=0" "m=1,n=1536,k=12288,mode=2" "m=1,n=1536,k=256,mode=1" \
         "m=1,n=2560,k=10240,mode=1" "m=3,n=200,k=328,mode=0" "m=16,n=1536,k=6144,mode=1" \
         "m=5,n=5376,k=1544,mode=2"; do
  seam "$s" bf16
  seam "$s" fp16
  [ "$quick" = 1 ] && break
done
seam "m=1,n=1536,k=2048,mode=0" fp16 --rehearse t4
seam "m=2,n=2560,k=256,mode=1" fp16 --rehearse t4

# matmul_pro (the seam before a decode GEMV, in every block): every survivor, each seam mode,
# plain and both gated forms, the E2B/E4B/31B widths, an odd k, both dtypes, the T4 rehearsal.
for s in "m=1,n=12288,k=1536,mode=0,glu=1" "m=1,n=256,k=1536,mode=2,glu=2,u_ld=8960" \
         "m=1,n=2560,k=1536,mode=1" "m=1,n=4096,k=2560,mode=1" "m=1,n=16384,k=5376,mode=1" \
         "m=1,n=97,k=1544,mode=0,glu=1" "m=1,n=200,k=328,mode=2,glu=2,u_ld=300"; do
  pro "$s" bf16
  pro "$s" fp16
  [ "$quick" = 1 ] && break
done
pro "m=1,n=6144,k=1536,mode=0,glu=1" fp16 --rehearse t4
pro "m=1,n=2048,k=1536,mode=1" fp16 --rehearse t4

# bf16 has no place on a T4: refused, with a sentence naming bf16
if "$T" tune --op matmul --shape m=1,n=256,k=1536 --dtype bf16 --rehearse t4 \
     --cache "$tmp/c.sqlite" 2>"$tmp/err"; then
  echo "FAILED: bf16 tuned under the T4's budget"; fail=1
fi
grep -q "bf16" "$tmp/err" || { echo "FAILED: the T4 bf16 refusal does not say bf16"; fail=1; }

echo "$runs tune runs, fail=$fail"
exit $fail
