#!/usr/bin/env bash
# pdl_variants.sh — on the GPU machine: the decode step with some templates letting their
# dependents launch before their own griddepcontrol.wait (trigger first) against the committed
# order (wait, then trigger; templates/include/tailor_common.cuh), each from a copy of the
# templates on TAILOR_TEMPLATE_PATH with its own cache. Session 9 measured every template so
# changed: W4A16 + int4 head -5.5 %. These copies change only the small kernels that sit between
# two GEMVs (norms, gating, RoPE, KV store, PLE; and, second copy, decode attention), so that a
# GEMV may launch and request its weights while the GEMV before it still runs, one kernel ahead
# at most. Log: $OUT/pdl.txt.
#   bash scripts/probe/pdl_variants.sh [committed|small|attn ...]   (default: all three)
set -uo pipefail
source scripts/probe/common.sh || exit 1
SMALL="residual_norm rmsnorm gelu_gate qk_norm_rope gemma4_kv_store gemma4_ple embed"

# make_copy NAME TEMPLATE...: templates/ copied to /tmp/pdl-NAME, the named ones calling
# tailor_grid_begin_early() (trigger, then wait), added to the copy's tailor_common.cuh
make_copy() {
  local name=$1 dir=/tmp/pdl-$1
  shift
  rm -rf "$dir" && mkdir -p "$dir" && cp -r templates "$dir/"
  cat >>"$dir/templates/include/tailor_common.cuh" <<'CUH'

// probe (scripts/probe/pdl_variants.sh): dependents may launch before this kernel's wait
__device__ __forceinline__ void tailor_grid_begin_early()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
CUH
  for t in "$@"; do
    sed -i 's/tailor_grid_begin();/tailor_grid_begin_early();/' "$dir/templates/$t.cu"
    grep -q 'tailor_grid_begin_early' "$dir/templates/$t.cu" || echo "pdl_variants: $t.cu has no tailor_grid_begin()" >&2
  done
}

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(committed small attn)
P=$OUT/pdl.txt
for n in "${names[@]}"; do
  case $n in
    committed) path= ;;
    small) make_copy small $SMALL; path=/tmp/pdl-small/templates ;;
    attn) make_copy attn $SMALL attention_decode attention_decode_wide; path=/tmp/pdl-attn/templates ;;
    *) echo "pdl_variants: unknown copy '$n'" >&2; exit 2 ;;
  esac
  for q in "--quantize w4a16 --quantize-head" ""; do
    echo "== $n ${q:-bf16}" >>"$P"
    TAILOR_TEMPLATE_PATH=$path timeout 240 "$T" bench model --preset gemma-4-e2b --prompt-len 1 \
      --decode 128 --cache "/tmp/pdl-$n.sqlite" $q 2>&1 | grep -E '^(decode|tuning)' >>"$P"
  done
done
cat "$P"
