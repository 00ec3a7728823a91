#!/usr/bin/env bash
# cli_gpu_sanitize.sh — every survivor of the templates that take dynamic shared memory (or
# are built around shared memory), at small odd shapes, checked once under compute-sanitizer:
# memcheck finds an access past the bytes a space's smem_dynamic formula asked for (the compiler
# reports static shared memory, which the tuner checks; the dynamic bytes only a run can check),
# racecheck a shared-memory hazard between threads. `tune --check-only`: each survivor checked
# against the C reference, nothing timed or cached. A control first: the int4 GEMV's staged
# activations declared 512 bytes short must be caught, so that a clean run means something.
# SAN_TOOLS picks the tools ("memcheck racecheck"), SAN_ONLY a regex over the shapes.
# ~2 minutes on an H100 (memcheck ~45 s, racecheck ~85 s).
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
S=${TAILOR_SOURCE_DIR:?}
CS=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [[ ! -x $CS ]]; then
  echo "skipped: no compute-sanitizer (looked in PATH and $CS)"; exit 77
fi

# san TOOL OP SHAPE DTYPE: one check-only tune under the tool; its output in $tmp/out
san() {
  local tool=$1 op=$2 shape=$3 dt=$4
  timeout 300 "$CS" --tool "$tool" --error-exitcode 9 --print-limit 10 \
    "$T" tune --op "$op" --shape "$shape" --dtype "$dt" --check-only >"$tmp/out" 2>&1
}

# the control: w4t_asmem_bytes 512 bytes short (templates/include/spacelib.lua)
cp -r "$S/templates" "$tmp/short"
sed -i 's/^  return 2 \* shape.m \* (128 \* qps + 16)$/  return 2 * shape.m * (128 * qps + 16) - 512/' \
  "$tmp/short/include/spacelib.lua"
check "the control's edit applies (w4t_asmem_bytes still reads as the test expects)" \
  grep -q "qps + 16) - 512" "$tmp/short/include/spacelib.lua"
TAILOR_TEMPLATE_PATH="$tmp/short" san memcheck w4a16_glu m=1,n=256,k=1536,group=128 bf16
rc=$?
check "memcheck catches staged activations declared 512 bytes short (rc $rc)" test $rc -ne 0
check "memcheck names the out-of-bounds shared write" grep -q "Invalid __shared__ write" "$tmp/out"

shapes=("w4a16_matmul m=3,n=200,k=352,group=32,zp=1 fp16"
        "w4a16_matmul m=16,n=256,k=1536,group=128 bf16"
        "w4a16_matmul m=130,n=256,k=512,group=128 bf16"
        "w4a16_glu m=1,n=256,k=1536,group=128 bf16"
        "w4a16_mlp m=1,n=96,k=352,group=32,zp=1 fp16"
        "w4a16_mlp m=1,n=256,k=1536,group=128 bf16"
        "w4a16_mlp m=1,n=1024,k=512,group=128 bf16"
        "matmul m=70,n=200,k=256 bf16"
        "attention_prefill q_len=100,kv_len=100,head_dim=256,heads=2,kv_heads=1,window=0 bf16"
        "attention_prefill q_len=70,kv_len=200,head_dim=512,heads=4,kv_heads=2,window=48 fp16"
        "attention_decode kv_len=1000,head_dim=512,heads=4,kv_heads=1,window=0,batch=2 bf16"
        "attention_decode kv_len=700,head_dim=256,heads=8,kv_heads=2,window=300,batch=1 fp16"
        "topk rows=1,n=4096,k=64 bf16")
for tool in ${SAN_TOOLS:-memcheck racecheck}; do
  for osd in "${shapes[@]}"; do
    [[ -n ${SAN_ONLY:-} && ! $osd =~ $SAN_ONLY ]] && continue
    read -r op shape dt <<<"$osd"
    san "$tool" "$op" "$shape" "$dt"
    rc=$?
    echo "== $tool $osd: rc $rc"
    grep -E "checked only|SUMMARY|tailor:" "$tmp/out"
    check "$tool clean on every survivor of $osd" test $rc -eq 0
    check "$tool: $osd had survivors, all right" grep -qE " [1-9][0-9]* right, 0 wrong; checked only" "$tmp/out"
    [[ $rc -ne 0 ]] && head -40 "$tmp/out"
  done
done
exit $fail
