#!/usr/bin/env bash
# pdl_variants.sh — the decode step with some templates letting their dependents launch before
# their own griddepcontrol.wait ("trigger first") against the committed order (wait, then
# trigger; templates/include/tailor_common.cuh). Session 9 measured every template so changed:
# W4A16 + int4 head -5.5 % (blocks launched two kernels ahead held the room the running GEMV's
# blocks needed). These variants change only the small kernels that sit between two GEMVs
# (small: norms, gating, RoPE, the K/V store, PLE, embedding) and, in the second, decode
# attention too (attn), so that a GEMV after one of them launches, and requests its first weights
# and its seam's norm weights, while the GEMV before it still runs: one kernel ahead at most.
# Session 18's trace shows why it may pay: a GEMV after a short kernel is released almost as soon
# as it launches (0-0.5 µs early), so the weights it requests before its wait do not overlap.
# Measured (session 28, H100, W4A16 + int4 head): small -2.5 % (750 / 746 against 774 / 760
# tok/s); attn unrun.
#
#   bash scripts/probe/pdl_variants.sh write DIR small|attn
#       (any machine) the variant's changed .cu files into DIR, for TAILOR_TEMPLATE_PATH: each
#       defines tailor_pdl_trigger_first() after its includes and calls it before every
#       tailor_grid_begin(); nothing else changes, so only those ops are tuned again
#   bash scripts/probe/pdl_variants.sh [small|attn ...]      (GPU machine; default: small attn)
#       each variant against the working tree with scripts/probe/ab_model.sh (the base's cache
#       copied, so only the changed ops retune; alternating), W4A16 + int4 head then bf16;
#       $OUT/pdl.txt, and each variant's W4A16 trace in $OUT/pdl-trace-NAME.txt
# tests/cli_plan_compile.sh compiles the small variant from a temporary DIR so that it cannot rot.
set -uo pipefail
SMALL="residual_norm rmsnorm gelu_gate qk_norm_rope gemma4_kv_store gemma4_ple embed"
ATTN="$SMALL attention_decode attention_decode_wide"
here=$(cd "$(dirname "$0")/../.." && pwd)

# write_variant DIR NAME: the templates of variant NAME, changed, into DIR
write_variant() {
  local dir=$1 list
  case $2 in
    small) list=$SMALL ;;
    attn) list=$ATTN ;;
    *) echo "pdl_variants: unknown variant '$2' (small or attn)" >&2; return 2 ;;
  esac
  rm -rf "$dir" && mkdir -p "$dir" || return 2
  python3 - "$here/templates" "$dir" $list <<'PY'
import sys
src, dst, names = sys.argv[1], sys.argv[2], sys.argv[3:]
trigger = """
// probe (scripts/probe/pdl_variants.sh): dependents may launch before this kernel's wait
__device__ __forceinline__ void tailor_pdl_trigger_first()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
"""
for name in names:
    lines = open("%s/%s.cu" % (src, name)).read().split("\n")
    last = max((i for i, l in enumerate(lines) if l.startswith("#include")), default=-1)
    calls = sum(l.count("tailor_grid_begin();") for l in lines)
    if last < 0 or calls == 0:
        sys.exit("pdl_variants: templates/%s.cu has no #include or no tailor_grid_begin()" % name)
    lines.insert(last + 1, trigger)
    text = "\n".join(lines).replace("tailor_grid_begin();",
                                    "tailor_pdl_trigger_first();\n    tailor_grid_begin();")
    open("%s/%s.cu" % (dst, name), "w").write(text)
PY
}

if [[ ${1:-} == write ]]; then
  [[ $# -eq 3 ]] || { echo "usage: pdl_variants.sh write DIR small|attn" >&2; exit 2; }
  write_variant "$2" "$3"
  exit $?
fi

source scripts/probe/common.sh || exit 1
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(small attn)
P=$OUT/pdl.txt
: >"$P"
for n in "${names[@]}"; do
  write_variant "/tmp/pdl-$n" "$n" || exit 2
  for w in w4a16 bf16; do
    f=()
    [[ $w == bf16 ]] && f=(bf16)
    echo "== $n $w" >>"$P"
    AB_NEW_PATH=/tmp/pdl-$n REPS=${PDL_REPS:-1} timeout 290 bash scripts/probe/ab_model.sh "${f[@]}" \
      >/dev/null 2>&1
    cat "$OUT/ab.txt" >>"$P"
    [[ $w == w4a16 ]] && cp "$OUT/ab-trace.txt" "$OUT/pdl-trace-$n.txt" 2>/dev/null
  done
done
cat "$P"
