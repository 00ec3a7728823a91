#!/usr/bin/env bash
# cli_gpu_w4a16.sh — every survivor of the w4a16_matmul spaces checked on a live GPU
# (--verify-all fails on any wrong survivor): every linear shape of Gemma 4 E2B, E4B and 31B
# (GEMMA4.md §3) at m=1, some at m=16 and 2048, odd shapes that are no multiple of a tile,
# groups 32/64/128, both dtypes, zero points, and the T4 rehearsal (compute_75 PTX, fp16).
# W4A16_QUICK=1 keeps one shape per group of the list (a smoke run).
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
runs=0
tune_op() { # tune_op OP SHAPE DTYPE [extra flags...]: every survivor checked
  local op=$1 shape=$2 dtype=$3; shift 3
  runs=$((runs + 1))
  if ! "$T" tune --op "$op" --shape "$shape" --dtype "$dtype" --verify-all \
       --cache "$tmp/c.sqlite" --seed 4 "$@"; then
    echo "FAILED: $op $shape $dtype $*"; fail=1
  fi
}
tune() { tune_op w4a16_matmul "$@"; }
wseam() { tune_op w4a16_seam "$@"; }
wpro() { tune_op w4a16_pro "$@"; }
wglu() { tune_op w4a16_glu "$@"; }
wmlp() { tune_op w4a16_mlp "$@"; }
quick=${W4A16_QUICK:-0}

# n,k of every quantizable linear (out, in): q (sliding, full), k/v (sliding, full), o, MLP,
# per-layer gate/projection and the PLE model projection.
E2B="2048,1536 4096,1536 256,1536 512,1536 1536,2048 1536,4096 6144,1536 12288,1536 1536,6144 1536,12288 256,1536 1536,256 8960,1536"
E4B="2048,2560 4096,2560 512,2560 1024,2560 2560,2048 2560,4096 10240,2560 2560,10240 256,2560 2560,256 10752,2560"
G31B="8192,5376 16384,5376 4096,5376 2048,5376 5376,8192 5376,16384 21504,5376 5376,21504"

for model in "$E2B" "$E4B" "$G31B"; do
  for nk in $model; do
    n=${nk%,*}; k=${nk#*,}
    tune "m=1,n=$n,k=$k,group=128" bf16
    [ "$quick" = 1 ] && break
  done
done

# decode batches and prefill
for nk in 6144,1536 1536,6144 12288,1536 1536,12288 2560,10240 5376,21504; do
  n=${nk%,*}; k=${nk#*,}
  tune "m=16,n=$n,k=$k,group=128" bf16
  [ "$quick" = 1 ] && break
done
tune "m=2048,n=6144,k=1536,group=128" bf16
[ "$quick" = 1 ] || tune "m=2048,n=1536,k=6144,group=128" bf16

# groups, zero points, fp16, odd shapes (m, n and k no multiple of any tile; k a multiple of 32)
for g in 32 64 128; do
  for zp in 0 1; do
    tune "m=1,n=1536,k=6144,group=$g,zp=$zp" bf16
    tune "m=3,n=200,k=$((g * 11)),group=$g,zp=$zp" fp16
    tune "m=70,n=33,k=$((g * 7)),group=$g,zp=$zp" bf16
    [ "$quick" = 1 ] && break 2
  done
done
tune "m=5,n=1000,k=352,group=32,zp=1" bf16
# one part of a stack (q of q|k|v, gate of gate|up): scale rows with the stack's stride
tune "m=1,n=2048,k=1536,group=128,s_ld=2560" bf16
tune "m=16,n=6144,k=1536,group=128,s_ld=12288" fp16
tune "m=512,n=256,k=1536,group=64,zp=1,s_ld=2560" bf16
tune "m=129,n=264,k=2112,group=64,zp=1" fp16
tune "m=16,n=6144,k=1536,group=64,zp=1" fp16

# what a T4 would receive: compute_75 PTX under the T4's budget, fp16, run here
for s in "m=1,n=6144,k=1536,group=128" "m=16,n=1536,k=6144,group=128" \
         "m=2048,n=6144,k=1536,group=128" "m=3,n=200,k=352,group=32,zp=1" \
         "m=1,n=1536,k=12288,group=64,zp=1"; do
  tune "$s" fp16 --rehearse t4
  [ "$quick" = 1 ] && break
done
# w4a16_seam (an int4 projection back to the hidden size, then the layer seam in one launch):
# every survivor, the three seams, groups, zero points, several rows, both dtypes, the T4.
for s in "m=1,n=1536,k=2048,group=128,mode=0" "m=1,n=1536,k=12288,group=128,mode=2" \
         "m=1,n=2560,k=10240,group=64,zp=1,mode=1" "m=3,n=200,k=352,group=32,zp=1,mode=0" \
         "m=8,n=5376,k=2048,group=128,mode=1"; do
  wseam "$s" bf16
  wseam "$s" fp16
  [ "$quick" = 1 ] && break
done
wseam "m=1,n=1536,k=2048,group=128,mode=0" fp16 --rehearse t4
# w4a16_pro (the layer seam before an int4 decode GEMV, in every block): every survivor, the
# three seams, groups, zero points, the E2B/E4B/31B widths, both dtypes, the T4.
for s in "m=1,n=6144,k=1536,group=128,mode=0" "m=1,n=2048,k=1536,group=64,zp=1,mode=1" \
         "m=1,n=10240,k=2560,group=128,zp=1,mode=0" "m=1,n=21504,k=5376,group=128,mode=1" \
         "m=1,n=200,k=352,group=32,zp=1,mode=2"; do
  wpro "$s" bf16
  wpro "$s" fp16
  [ "$quick" = 1 ] && break
done
wpro "m=1,n=2048,k=1536,group=128,mode=1" fp16 --rehearse t4
# w4a16_pro with glu = 1 (the seam, then a gate|up stack gated: --seams prologue before w4a16_glu)
for s in "m=1,n=6144,k=1536,group=128,mode=0,glu=1" "m=1,n=200,k=352,group=32,zp=1,mode=1,glu=1"; do
  wpro "$s" bf16
  wpro "$s" fp16
  [ "$quick" = 1 ] && break
done
# w4a16_glu (a gate|up stack of 2n int4 rows, gated in the epilogue): every survivor, the E2B,
# E4B and 31B widths, groups, zero points, odd n and m, a stack's stride, both dtypes, the T4.
for s in "m=1,n=6144,k=1536,group=128" "m=1,n=12288,k=1536,group=128,zp=1" \
         "m=1,n=10240,k=2560,group=64" "m=1,n=21504,k=5376,group=128" \
         "m=3,n=200,k=352,group=32,zp=1" "m=2,n=96,k=1536,group=64,s_ld=256"; do
  wglu "$s" bf16
  wglu "$s" fp16
  [ "$quick" = 1 ] && break
done
wglu "m=1,n=6144,k=1536,group=128" fp16 --rehearse t4
# w4a16_mlp (a layer's whole int4 MLP in one launch, two phases across a grid barrier): h and
# out of every survivor, the E2B, E4B and 31B widths, groups, zero points, a hidden size that is
# no multiple of a warp's rows, both dtypes, the T4's grid of 40 blocks on this GPU's SMs.
for s in "m=1,n=6144,k=1536,group=128" "m=1,n=12288,k=1536,group=128,zp=1" \
         "m=1,n=10240,k=2560,group=64" "m=1,n=21504,k=5376,group=128" \
         "m=1,n=96,k=352,group=32,zp=1" "m=1,n=128,k=1536,group=64,s_ld=512,d_ld=1600"; do
  wmlp "$s" bf16
  wmlp "$s" fp16
  [ "$quick" = 1 ] && break
done
wmlp "m=1,n=6144,k=1536,group=128" fp16 --rehearse t4

# bf16 has no place on a T4: refused, with a sentence naming bf16
if "$T" tune --op w4a16_matmul --shape m=1,n=256,k=1536,group=128 --dtype bf16 --rehearse t4 \
     --cache "$tmp/c.sqlite" 2>"$tmp/err"; then
  echo "FAILED: bf16 tuned under the T4's budget"; fail=1
fi
grep -q "bf16" "$tmp/err" || { echo "FAILED: the T4 bf16 refusal does not say bf16"; fail=1; }

echo "$runs tune runs, fail=$fail"
exit $fail
